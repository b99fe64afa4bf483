"""Unit tests of `jaxsoa.spatial.algebra`: SE(3) poses, motion / force transforms, cross products and
spatial inertia, in the `[angular; linear]` order, against identities and against Pinocchio.

Tolerances: inputs are O(1) float64 values and every checked quantity is a handful of 3x3 / 6x6
products, so round-off is a few ulps of O(1)-O(10) numbers; `ATOL = 1e-12` leaves a 100x margin
and still fails on any sign, transpose or block-placement error (those are O(1) differences).
"""

import jax.numpy as jnp
import numpy as np
import pinocchio as pin
import pytest

from jaxsoa.spatial import algebra as spatial
from tests.helpers.random_models import random_inertia, random_rotation

ATOL = 1e-12
SEEDS = [0, 1, 2]

# Pinocchio stores spatial vectors [linear; angular]; ours are [angular; linear].
SWAP = np.roll(np.eye(6), 3, axis=0)


def random_pose(rng):
    return random_rotation(rng), rng.normal(size=3)


def homogeneous(R, p):
    T = np.eye(4)
    T[:3, :3], T[:3, 3] = R, p
    return T


def close(a, b, atol=ATOL):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=0, atol=atol)


# --------------------------------------------------------------------------------------------- #
# skew, SE(3)
# --------------------------------------------------------------------------------------------- #

@pytest.mark.parametrize("seed", SEEDS)
def test_skew_is_the_cross_product(seed):
    rng = np.random.default_rng(seed)
    w, x = rng.normal(size=3), rng.normal(size=3)
    W = np.asarray(spatial.skew(jnp.asarray(w)))
    close(W @ x, np.cross(w, x))
    close(W, -W.T)


def test_skew_broadcasts_over_leading_axes():
    rng = np.random.default_rng(3)
    w = rng.normal(size=(4, 2, 3))
    W = spatial.skew(jnp.asarray(w))
    assert W.shape == (4, 2, 3, 3)
    close(W[2, 1], spatial.skew(jnp.asarray(w[2, 1])))


@pytest.mark.parametrize("seed", SEEDS)
def test_se3_compose_matches_homogeneous_matrices(seed):
    rng = np.random.default_rng(seed)
    (R_ab, p_ab), (R_bc, p_bc) = random_pose(rng), random_pose(rng)
    R_ac, p_ac = spatial.se3_compose(jnp.asarray(R_ab), jnp.asarray(p_ab), jnp.asarray(R_bc), jnp.asarray(p_bc))
    T_ac = homogeneous(R_ab, p_ab) @ homogeneous(R_bc, p_bc)
    close(R_ac, T_ac[:3, :3])
    close(p_ac, T_ac[:3, 3])


@pytest.mark.parametrize("seed", SEEDS)
def test_se3_compose_is_associative(seed):
    rng = np.random.default_rng(seed)
    a, b, c = (tuple(map(jnp.asarray, random_pose(rng))) for _ in range(3))
    left = spatial.se3_compose(*spatial.se3_compose(*a, *b), *c)
    right = spatial.se3_compose(*a, *spatial.se3_compose(*b, *c))
    close(left[0], right[0])
    close(left[1], right[1])


@pytest.mark.parametrize("seed", SEEDS)
def test_se3_inverse(seed):
    rng = np.random.default_rng(seed)
    R, p = map(jnp.asarray, random_pose(rng))
    R_inv, p_inv = spatial.se3_inverse(R, p)
    close(homogeneous(np.asarray(R_inv), np.asarray(p_inv)), np.linalg.inv(homogeneous(np.asarray(R), np.asarray(p))))
    for composed in (spatial.se3_compose(R, p, R_inv, p_inv), spatial.se3_compose(R_inv, p_inv, R, p)):
        close(composed[0], np.eye(3))
        close(composed[1], np.zeros(3))
    R2, p2 = spatial.se3_inverse(R_inv, p_inv)
    close(R2, R)
    close(p2, p)


def test_pose_convention_child_origin_in_parent():
    """(R, p) is the pose of the child in the parent: a point at the child origin is at p."""
    rng = np.random.default_rng(4)
    R, p = random_pose(rng)
    x_child = rng.normal(size=3)
    T = homogeneous(R, p) @ np.append(x_child, 1.0)
    close(T[:3], R @ x_child + p)
    # a pure rotation ω of the child about its own origin (ω given in child axes), seen at the
    # parent origin O: v_O = v_p + ω × (O − p) = p × ω
    m = spatial.act_motion(jnp.asarray(R), jnp.asarray(p), jnp.asarray(np.array([0.0, 0.0, 1.0, 0.0, 0.0, 0.0])))
    w_parent = R @ np.array([0.0, 0.0, 1.0])
    close(m[:3], w_parent)
    close(m[3:], np.cross(p, w_parent))


# --------------------------------------------------------------------------------------------- #
# motion / force transforms
# --------------------------------------------------------------------------------------------- #

@pytest.mark.parametrize("seed", SEEDS)
def test_transform_matrices_match_actions(seed):
    rng = np.random.default_rng(seed)
    R, p = map(jnp.asarray, random_pose(rng))
    m, f = jnp.asarray(rng.normal(size=6)), jnp.asarray(rng.normal(size=6))
    X, X_star = spatial.motion_transform(R, p), spatial.force_transform(R, p)
    close(X @ m, spatial.act_motion(R, p, m))
    close(X_star @ f, spatial.act_force(R, p, f))
    close(jnp.linalg.solve(X, m), spatial.inv_act_motion(R, p, m))
    close(jnp.linalg.solve(X_star, f), spatial.inv_act_force(R, p, f))
    close(spatial.inv_act_motion(R, p, spatial.act_motion(R, p, m)), m)
    close(spatial.inv_act_force(R, p, spatial.act_force(R, p, f)), f)


@pytest.mark.parametrize("seed", SEEDS)
def test_transform_of_inverse_pose_is_inverse_transform(seed):
    rng = np.random.default_rng(seed)
    R, p = map(jnp.asarray, random_pose(rng))
    R_inv, p_inv = spatial.se3_inverse(R, p)
    close(spatial.motion_transform(R_inv, p_inv) @ spatial.motion_transform(R, p), np.eye(6))
    close(spatial.force_transform(R_inv, p_inv) @ spatial.force_transform(R, p), np.eye(6))
    m = jnp.asarray(rng.normal(size=6))
    close(spatial.act_motion(R_inv, p_inv, m), spatial.inv_act_motion(R, p, m))
    close(spatial.act_force(R_inv, p_inv, m), spatial.inv_act_force(R, p, m))


@pytest.mark.parametrize("seed", SEEDS)
def test_transforms_are_homomorphisms(seed):
    """X(a∘b) = X(a) X(b) for both motion and force transforms."""
    rng = np.random.default_rng(seed)
    a, b = (tuple(map(jnp.asarray, random_pose(rng))) for _ in range(2))
    ab = spatial.se3_compose(*a, *b)
    for transform in (spatial.motion_transform, spatial.force_transform):
        close(transform(*ab), transform(*a) @ transform(*b))


@pytest.mark.parametrize("seed", SEEDS)
def test_force_transform_is_inverse_transpose(seed):
    rng = np.random.default_rng(seed)
    R, p = map(jnp.asarray, random_pose(rng))
    X = np.asarray(spatial.motion_transform(R, p))
    close(spatial.force_transform(R, p), np.linalg.inv(X).T)


@pytest.mark.parametrize("seed", SEEDS)
def test_power_is_frame_invariant(seed):
    rng = np.random.default_rng(seed)
    R, p = map(jnp.asarray, random_pose(rng))
    m, f = jnp.asarray(rng.normal(size=6)), jnp.asarray(rng.normal(size=6))
    close(spatial.act_force(R, p, f) @ spatial.act_motion(R, p, m), f @ m)
    close(spatial.inv_act_force(R, p, f) @ spatial.inv_act_motion(R, p, m), f @ m)


def _ours(pin_vector):
    """pin.Motion / pin.Force -> our [angular; linear] array."""
    return np.concatenate([pin_vector.angular, pin_vector.linear])


@pytest.mark.parametrize("seed", SEEDS)
def test_transforms_match_pinocchio(seed):
    rng = np.random.default_rng(seed)
    R, p = random_pose(rng)
    M = pin.SE3(R, p)
    Rj, pj = jnp.asarray(R), jnp.asarray(p)
    close(spatial.motion_transform(Rj, pj), SWAP @ M.action @ SWAP.T)
    close(spatial.force_transform(Rj, pj), SWAP @ M.dualAction @ SWAP.T)
    x = rng.normal(size=6)                                  # ours: [angular; linear]
    xj = jnp.asarray(x)
    motion, force = pin.Motion(x[3:], x[:3]), pin.Force(x[3:], x[:3])    # pin: (linear, angular)
    close(spatial.act_motion(Rj, pj, xj), _ours(M.act(motion)))
    close(spatial.act_force(Rj, pj, xj), _ours(M.act(force)))
    close(spatial.inv_act_motion(Rj, pj, xj), _ours(M.actInv(motion)))
    close(spatial.inv_act_force(Rj, pj, xj), _ours(M.actInv(force)))


def test_actions_broadcast_over_links():
    rng = np.random.default_rng(5)
    poses = [random_pose(rng) for _ in range(4)]
    R = jnp.asarray(np.stack([r for r, _ in poses]))
    p = jnp.asarray(np.stack([t for _, t in poses]))
    m = jnp.asarray(rng.normal(size=(4, 6)))
    for fn in (spatial.act_motion, spatial.act_force, spatial.inv_act_motion, spatial.inv_act_force):
        batched = fn(R, p, m)
        assert batched.shape == (4, 6)
        for k in range(4):
            close(batched[k], fn(R[k], p[k], m[k]))


# --------------------------------------------------------------------------------------------- #
# cross products
# --------------------------------------------------------------------------------------------- #

@pytest.mark.parametrize("seed", SEEDS)
def test_cross_products_match_their_matrices(seed):
    rng = np.random.default_rng(seed)
    a, b, f = (jnp.asarray(rng.normal(size=6)) for _ in range(3))
    close(spatial.cross_motion(a, b), spatial.motion_cross_matrix(a) @ b)
    close(spatial.cross_force(a, f), spatial.force_cross_matrix(a) @ f)
    close(spatial.force_cross_matrix(a), -spatial.motion_cross_matrix(a).T)
    close(spatial.cross_motion(a, a), np.zeros(6))
    close(spatial.cross_motion(a, b), -spatial.cross_motion(b, a))


@pytest.mark.parametrize("seed", SEEDS)
def test_cross_product_duality(seed):
    """(a × m) · f = −m · (a ×* f): the force cross product is minus the adjoint of the motion one."""
    rng = np.random.default_rng(seed)
    a, m, f = (jnp.asarray(rng.normal(size=6)) for _ in range(3))
    close(spatial.cross_motion(a, m) @ f, -(m @ spatial.cross_force(a, f)))


@pytest.mark.parametrize("seed", SEEDS)
def test_jacobi_identity(seed):
    rng = np.random.default_rng(seed)
    a, b, c = (jnp.asarray(rng.normal(size=6)) for _ in range(3))
    x = spatial.cross_motion
    total = x(a, x(b, c)) + x(b, x(c, a)) + x(c, x(a, b))
    close(total, np.zeros(6))
    # the matrix form: [a×, b×] = (a × b)×
    A, B = spatial.motion_cross_matrix(a), spatial.motion_cross_matrix(b)
    close(A @ B - B @ A, spatial.motion_cross_matrix(x(a, b)))


@pytest.mark.parametrize("seed", SEEDS)
def test_cross_products_are_frame_covariant(seed):
    rng = np.random.default_rng(seed)
    R, p = map(jnp.asarray, random_pose(rng))
    a, b, f = (jnp.asarray(rng.normal(size=6)) for _ in range(3))
    Xa, Xb = spatial.act_motion(R, p, a), spatial.act_motion(R, p, b)
    close(spatial.act_motion(R, p, spatial.cross_motion(a, b)), spatial.cross_motion(Xa, Xb))
    close(spatial.act_force(R, p, spatial.cross_force(a, f)), spatial.cross_force(Xa, spatial.act_force(R, p, f)))


def test_cross_motion_matches_pinocchio():
    rng = np.random.default_rng(6)
    a, b, f = rng.normal(size=6), rng.normal(size=6), rng.normal(size=6)
    pa, pb, pf = pin.Motion(a[3:], a[:3]), pin.Motion(b[3:], b[:3]), pin.Force(f[3:], f[:3])
    close(spatial.cross_motion(jnp.asarray(a), jnp.asarray(b)), _ours(pa.cross(pb)))
    close(spatial.cross_force(jnp.asarray(a), jnp.asarray(f)), _ours(pa.cross(pf)))


# --------------------------------------------------------------------------------------------- #
# spatial inertia
# --------------------------------------------------------------------------------------------- #

def _inertia(mass, com, J):
    return spatial.spatial_inertia(jnp.asarray(mass), jnp.asarray(com), jnp.asarray(J))


@pytest.mark.parametrize("seed", SEEDS)
def test_spatial_inertia_is_symmetric_positive_definite(seed):
    mass, com, J = random_inertia(np.random.default_rng(seed))
    I = np.asarray(_inertia(mass, com, J))
    close(I, I.T)
    assert np.linalg.eigvalsh(I).min() > 1e-6, "a valid rigid body has a positive definite spatial inertia"


@pytest.mark.parametrize("seed", SEEDS)
def test_kinetic_energy_and_momentum(seed):
    """½ vᵀ I v = ½ m |v_com|² + ½ ωᵀ J ω and I v = [J ω + c × m v_com; m v_com] about the origin."""
    rng = np.random.default_rng(seed)
    mass, com, J = random_inertia(rng)
    twist = rng.normal(size=6)
    w, v_origin = twist[:3], twist[3:]
    v_com = v_origin + np.cross(w, com)
    I = _inertia(mass, com, J)
    energy = 0.5 * twist @ np.asarray(I) @ twist
    close(energy, 0.5 * mass * v_com @ v_com + 0.5 * w @ J @ w, atol=1e-11)
    h = np.asarray(I @ jnp.asarray(twist))
    close(h[3:], mass * v_com)
    close(h[:3], J @ w + np.cross(com, mass * v_com))


@pytest.mark.parametrize("seed", SEEDS)
def test_spatial_inertia_matches_pinocchio(seed):
    mass, com, J = random_inertia(np.random.default_rng(seed))
    ref = pin.Inertia(mass, com, J).matrix()
    close(_inertia(mass, com, J), SWAP @ ref @ SWAP.T, atol=1e-11)


@pytest.mark.parametrize("seed", SEEDS)
def test_transform_inertia(seed):
    rng = np.random.default_rng(seed)
    mass, com, J = random_inertia(rng)
    R, p = random_pose(rng)
    Rj, pj = jnp.asarray(R), jnp.asarray(p)
    I_b = _inertia(mass, com, J)
    I_a = spatial.transform_inertia(Rj, pj, I_b)
    # momentum transforms like a force when velocity transforms like a motion
    v_b = jnp.asarray(rng.normal(size=6))
    close(I_a @ spatial.act_motion(Rj, pj, v_b), spatial.act_force(Rj, pj, I_b @ v_b), atol=1e-11)
    # the same body described directly in frame a
    close(I_a, _inertia(mass, R @ com + p, R @ J @ R.T), atol=1e-11)
    # Pinocchio: SE3.act(Inertia)
    ref = pin.SE3(R, p).act(pin.Inertia(mass, com, J)).matrix()
    close(I_a, SWAP @ ref @ SWAP.T, atol=1e-11)
    # kinetic energy is frame invariant
    v_a = spatial.act_motion(Rj, pj, v_b)
    close(v_a @ I_a @ v_a, v_b @ I_b @ v_b, atol=1e-11)


def test_spatial_inertia_broadcasts_over_links():
    rng = np.random.default_rng(7)
    bodies = [random_inertia(rng) for _ in range(3)]
    mass = jnp.asarray(np.array([b[0] for b in bodies]))
    com = jnp.asarray(np.stack([b[1] for b in bodies]))
    J = jnp.asarray(np.stack([b[2] for b in bodies]))
    I = spatial.spatial_inertia(mass, com, J)
    assert I.shape == (3, 6, 6)
    for k, b in enumerate(bodies):
        close(I[k], _inertia(*b))


@pytest.mark.parametrize("d", [1, 2, 3, 6])
def test_inverse_spd_equals_numpy(d):
    # A batch of random SPD matrices with condition numbers up to ~1e4 (two leading axes, so the
    # broadcasting is checked too); numpy's LU inverse is the reference. Bound: 1e-13 × cond(D) ×
    # max|D⁻¹|, float64 round-off (~1e-16) amplified by the condition number, with a 1000x margin.
    rng = np.random.default_rng(d)
    A = rng.normal(size=(4, 5, d, d))
    D = A @ np.swapaxes(A, -1, -2) + np.eye(d) * rng.uniform(1e-3, 1.0, (4, 5, 1, 1))
    got, want = np.asarray(spatial.inverse_spd(jnp.asarray(D))), np.linalg.inv(D)
    cond = np.linalg.cond(D)[..., None, None]
    assert np.all(np.abs(got - want) <= 1e-13 * cond * np.abs(want).max(axis=(-1, -2), keepdims=True))
    assert np.abs(got @ D - np.eye(d)).max() <= 1e-13 * cond.max()


@pytest.mark.parametrize("shape", [(3,), (2, 3), (4, 6, 5)])
def test_inverse_spd_rejects_a_non_square_argument(shape):
    with pytest.raises(ValueError, match=r"argument 'D' has shape .*expected \(\.\.\., d, d\)"):
        spatial.inverse_spd(jnp.ones(shape))
