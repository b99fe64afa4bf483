"""Unit tests of `jaxsoa.spatial.rotation`: quaternions (x, y, z, w), rotation matrices, exp / log on SO(3),
against identities, finite differences and Pinocchio.

Tolerances: quantities are O(1) float64 and each function is a few dozen flops, so agreement to
`ATOL = 1e-12` (≈ 5000 ulp) is expected; a wrong Shepperd branch near π loses ~half the digits
(error ~1e-8) and a sign or ordering error is O(1), so both fail it.
"""

import types

import jax
import jax.numpy as jnp
import numpy as np
import pinocchio as pin
import pytest

from jaxsoa.spatial import rotation
from jaxsoa.spatial.algebra import skew

# jitted once per shape: eager op-by-op dispatch would make this file several times slower
rot = types.SimpleNamespace(**{name: jax.jit(getattr(rotation, name)) for name in (
    "quat_normalize", "quat_to_rotation", "rotation_to_quat", "quat_multiply", "quat_conjugate",
    "quat_exp", "exp_so3", "log_so3")})

ATOL = 1e-12
SEEDS = [0, 1, 2, 3]


def close(a, b, atol=ATOL):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=0, atol=atol)


def unit(v):
    v = np.asarray(v, dtype=np.float64)
    return v / np.linalg.norm(v)


def random_quat(rng):
    return unit(rng.normal(size=4))


def axis_angle_quat(axis, angle):
    """(x, y, z, w) for a rotation of `angle` about `axis`, computed in numpy."""
    return np.append(np.sin(angle / 2) * unit(axis), np.cos(angle / 2))


def canonical(q):
    """±q with w >= 0 (the sign `rotation_to_quat` returns)."""
    q = np.asarray(q)
    return q if q[3] >= 0 else -q


def same_rotation(q1, q2, atol=ATOL):
    """Quaternions are equal up to sign."""
    q1, q2 = np.asarray(q1), np.asarray(q2)
    err = min(np.abs(q1 - q2).max(), np.abs(q1 + q2).max())
    assert err <= atol, f"{q1} and {q2} differ by {err}"


# Rotations that exercise each of Shepperd's four candidates (trace, then R00, R11, R22 largest):
SHEPPERD_CASES = {
    "identity": ([0.0, 0.0, 1.0], 0.0),
    "tiny": ([0.3, -0.2, 0.9], 1e-9),
    "small": ([0.3, -0.2, 0.9], 1e-4),
    "generic": ([0.3, -0.2, 0.9], 1.3),
    "half_turn_minus_x": ([1.0, 0.05, -0.02], np.pi - 1e-6),
    "half_turn_minus_y": ([0.03, 1.0, 0.04], np.pi - 1e-6),
    "half_turn_minus_z": ([-0.02, 0.01, 1.0], np.pi - 1e-6),
    "near_half_turn_generic": ([0.5, -0.6, 0.62], np.pi - 1e-3),
    "beyond_half_turn": ([0.5, -0.6, 0.62], np.pi + 0.3),    # w < 0 before canonicalisation
}


@pytest.mark.parametrize("axis, angle", SHEPPERD_CASES.values(), ids=SHEPPERD_CASES.keys())
def test_quaternion_rotation_round_trip(axis, angle):
    q = axis_angle_quat(axis, angle)
    R = rot.quat_to_rotation(jnp.asarray(q))
    q_back = rot.rotation_to_quat(R)
    assert q_back[3] >= 0
    close(q_back, canonical(q))
    close(rot.quat_to_rotation(q_back), R)


@pytest.mark.parametrize("axis", [[1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0], [1.0, 1.0, 1.0], [0.2, -0.9, 0.4]])
def test_exact_half_turns(axis):
    """At angle π, w = 0 and q, −q are both canonical: compare up to sign, and the matrix exactly."""
    q = axis_angle_quat(axis, np.pi)
    R = rot.quat_to_rotation(jnp.asarray(q))
    q_back = rot.rotation_to_quat(R)
    same_rotation(q_back, q)
    close(jnp.linalg.norm(q_back), 1.0)
    close(rot.quat_to_rotation(q_back), R)


@pytest.mark.parametrize("seed", SEEDS)
def test_rotation_matrix_is_orthonormal(seed):
    rng = np.random.default_rng(seed)
    q = jnp.asarray(np.stack([random_quat(rng) for _ in range(8)]))
    R = np.asarray(rot.quat_to_rotation(q))
    assert R.shape == (8, 3, 3)
    close(np.einsum("kji,kjl->kil", R, R), np.broadcast_to(np.eye(3), (8, 3, 3)))
    close(np.linalg.det(R), np.ones(8))


@pytest.mark.parametrize("seed", SEEDS)
def test_round_trip_random_batch(seed):
    rng = np.random.default_rng(seed)
    q = np.stack([random_quat(rng) for _ in range(16)])
    q_back = np.asarray(rot.rotation_to_quat(rot.quat_to_rotation(jnp.asarray(q))))
    close(q_back, np.stack([canonical(x) for x in q]))


@pytest.mark.parametrize("seed", SEEDS)
def test_quat_multiply_is_matrix_product(seed):
    rng = np.random.default_rng(seed)
    q1, q2 = jnp.asarray(random_quat(rng)), jnp.asarray(random_quat(rng))
    R = rot.quat_to_rotation
    close(R(rot.quat_multiply(q1, q2)), R(q1) @ R(q2))
    close(jnp.linalg.norm(rot.quat_multiply(q1, q2)), 1.0)
    # non-commutative: the order matters (a swapped product would not pass the first check)
    assert np.abs(np.asarray(rot.quat_multiply(q1, q2) - rot.quat_multiply(q2, q1))).max() > 1e-3


@pytest.mark.parametrize("seed", SEEDS)
def test_quat_conjugate_is_inverse(seed):
    q = jnp.asarray(random_quat(np.random.default_rng(seed)))
    close(rot.quat_multiply(q, rot.quat_conjugate(q)), [0.0, 0.0, 0.0, 1.0])
    close(rot.quat_to_rotation(rot.quat_conjugate(q)), rot.quat_to_rotation(q).T)


def test_quat_normalize():
    q = jnp.asarray(np.array([[1.0, 2.0, -2.0, 4.0], [0.0, 0.0, 0.0, -3.0]]))
    close(rot.quat_normalize(q), np.array([[0.2, 0.4, -0.4, 0.8], [0.0, 0.0, 0.0, -1.0]]))


# --------------------------------------------------------------------------------------------- #
# Pinocchio's quaternion convention
# --------------------------------------------------------------------------------------------- #

@pytest.mark.parametrize("seed", SEEDS)
def test_quaternion_convention_matches_pinocchio(seed):
    rng = np.random.default_rng(seed)
    q = random_quat(rng)
    ref = pin.Quaternion(q)                    # the vector constructor takes coeffs() order (x, y, z, w)
    close(ref.coeffs(), q)
    close(rot.quat_to_rotation(jnp.asarray(q)), ref.matrix())
    # the 4-scalar constructor is (w, x, y, z): the same rotation
    close(pin.Quaternion(q[3], q[0], q[1], q[2]).matrix(), ref.matrix())
    R = pin.exp3(rng.normal(size=3))
    same_rotation(rot.rotation_to_quat(jnp.asarray(R)), pin.Quaternion(R).coeffs())
    q2 = random_quat(rng)
    close(rot.quat_multiply(jnp.asarray(q), jnp.asarray(q2)), (pin.Quaternion(q) * pin.Quaternion(q2)).coeffs())


# --------------------------------------------------------------------------------------------- #
# exp / log
# --------------------------------------------------------------------------------------------- #

ROTVEC_NORMS = [0.0, 1e-12, 1e-6, 0.99e-4, 1.01e-4, 1e-2, 0.7, 2.0, np.pi - 1e-6, 5.0]


@pytest.mark.parametrize("norm", ROTVEC_NORMS)
def test_exp_so3_matches_quaternion_exp_and_pinocchio(norm):
    w = norm * unit([0.4, -0.7, 0.2])
    R = rot.exp_so3(jnp.asarray(w))
    close(R, rot.quat_to_rotation(rot.quat_exp(jnp.asarray(w))))
    close(R, pin.exp3(w))
    close(rot.quat_exp(jnp.asarray(w)), pin.exp3_quat(w))


@pytest.mark.parametrize("norm", ROTVEC_NORMS[:-1])
def test_log_inverts_exp(norm):
    """log(exp(w)) = w for |w| < π, and agrees with pin.log3."""
    w = norm * unit([0.4, -0.7, 0.2])
    R = rot.exp_so3(jnp.asarray(w))
    close(rot.log_so3(R), w)
    close(rot.log_so3(R), pin.log3(np.asarray(R)))


@pytest.mark.parametrize("seed", SEEDS)
def test_exp_log_random(seed):
    rng = np.random.default_rng(seed)
    R = np.stack([pin.exp3(rng.normal(size=3)) for _ in range(8)])
    w = np.asarray(rot.log_so3(jnp.asarray(R)))
    assert np.linalg.norm(w, axis=-1).max() <= np.pi + 1e-12
    close(rot.exp_so3(jnp.asarray(w)), R)
    close(w, np.stack([pin.log3(r) for r in R]))


def test_exp_so3_is_a_group_homomorphism_on_one_axis():
    """exp((a + b) u) = exp(a u) exp(b u)."""
    u = unit([1.0, 2.0, -0.5])
    a, b = 0.7, -2.1
    e = rot.exp_so3
    close(e(jnp.asarray((a + b) * u)), e(jnp.asarray(a * u)) @ e(jnp.asarray(b * u)))


def test_rotation_exp_is_right_handed():
    """A quarter turn about z maps x to y (right-handed, active rotation, child -> parent)."""
    R = rot.exp_so3(jnp.asarray(np.array([0.0, 0.0, np.pi / 2])))
    close(R @ jnp.asarray(np.array([1.0, 0.0, 0.0])), [0.0, 1.0, 0.0])
    q = rot.quat_exp(jnp.asarray(np.array([0.0, 0.0, np.pi / 2])))
    close(q, [0.0, 0.0, np.sqrt(0.5), np.sqrt(0.5)])


# --------------------------------------------------------------------------------------------- #
# gradients at (and near) zero rotation: the Taylor branches must keep them finite and correct
# --------------------------------------------------------------------------------------------- #

@pytest.mark.parametrize("mode", [jax.jacfwd, jax.jacrev])
def test_exp_so3_jacobian_at_zero(mode):
    """d exp(ŵ)/dw_i at 0 = ê_i (the generators of so(3))."""
    J = np.asarray(jax.jit(mode(rot.exp_so3))(jnp.zeros(3)))
    assert np.isfinite(J).all()
    for i in range(3):
        close(J[..., i], skew(jnp.asarray(np.eye(3)[i])))


@pytest.mark.parametrize("mode", [jax.jacfwd, jax.jacrev])
def test_quat_exp_jacobian_at_zero(mode):
    J = np.asarray(jax.jit(mode(rot.quat_exp))(jnp.zeros(3)))
    assert np.isfinite(J).all()
    close(J, np.vstack([0.5 * np.eye(3), np.zeros((1, 3))]))


def test_grad_through_exp_at_zero_is_finite():
    def loss(w):
        return jnp.sum(rot.exp_so3(w) ** 3) + jnp.sum(rot.quat_exp(w) ** 3)

    g = jax.jit(jax.grad(loss))(jnp.zeros(3))
    assert np.isfinite(np.asarray(g)).all()


@pytest.mark.parametrize("mode", [jax.jacfwd, jax.jacrev])
def test_log_exp_jacobian_at_zero_is_identity(mode):
    """d log(exp(w))/dw = 1 at w = 0, in forward and reverse mode (no NaN from |v| at v = 0)."""
    J = np.asarray(jax.jit(mode(lambda w: rot.log_so3(rot.exp_so3(w))))(jnp.zeros(3)))
    close(J, np.eye(3))


@pytest.mark.parametrize("norm", [0.99e-4, 1.01e-4, 0.3])
def test_exp_so3_jacobian_matches_finite_differences(norm):
    """Across the Taylor threshold (θ² = 1e-8) the derivative is continuous and correct.
    Central differences with h = 1e-6: truncation ~h² ≈ 1e-12, round-off ~1e-16/h ≈ 1e-10 -> 1e-8."""
    w = norm * unit([0.4, -0.7, 0.2])
    J = np.asarray(jax.jit(jax.jacfwd(rot.exp_so3))(jnp.asarray(w)))
    h = 1e-6
    for i in range(3):
        dw = h * np.eye(3)[i]
        fd = (pin.exp3(w + dw) - pin.exp3(w - dw)) / (2 * h)
        close(J[..., i], fd, atol=1e-8)


def test_quat_conjugate_of_a_batch():
    """(k, 4) quaternions under rank promotion 'raise' (a product with a (4,) sign array was refused):
    each row conjugated as alone."""
    rng = np.random.default_rng(3)
    qs = jnp.asarray(np.stack([random_quat(rng) for _ in range(3)]))
    out = rot.quat_conjugate(qs)
    assert out.shape == (3, 4)
    for k in range(3):
        close(out[k], rot.quat_conjugate(qs[k]))
        close(out[k, :3], -qs[k, :3])
