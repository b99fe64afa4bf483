"""Tests of `difference` (q1 ⊖ q0, Pinocchio's `difference`) and `interpolate` (q0 ⊕ u (q1 ⊖ q0)) in
`jaxsoa.multibody.config_space`: the inverse of `integrate`, against `pin.difference` / `pin.interpolate`,
the quaternion double cover, gradients at q0 = q1, rotations near π, jit / vmap / batch axes, argument checks.

Conventions: jaxsoa's `integrate` is Pinocchio's on every joint type (free joint: SE(3) exponential of the body
twist [v; ω], quaternion (x, y, z, w); checked in test_config_space.py), so `difference` equals `pin.difference`
and `interpolate` `pin.interpolate`, both taking the shortest rotation (angle ≤ π). Revolute joints are one
unwrapped angle in both engines (Pinocchio's RevoluteUnaligned), so their difference is q1 − q0.

Tolerances: q and v entries are O(1) (angles ≤ π, positions ≤ 1) and each joint's difference is a few dozen
flops, so float64 agreement is 1e-12 (a convention error — quaternion order, body vs world twist, [v; ω] order,
V(ω) vs V(ω)⁻¹ — is O(1)); measured: 1.6e-15 (round trip), 4.9e-15 (difference of integrate), 4.7e-16
(Jacobians). Float32: the round trip integrate(q0, difference(q0, q1)) = q1 has a measured max error of 1.2e-6
over the 20 random pairs of the test (1.5e-6 over 200; median 3.6e-7): ~10 ulps of 1.2e-7 on O(1) values,
asserted at 5e-6.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pinocchio as pin
import pytest

from jaxsoa.multibody.config_space import (
    difference,
    integrate,
    interpolate,
    quaternion_columns,
    random_configuration,
    unit_complex_columns,
)
from jaxsoa.multibody.joints import JointType
from tests.helpers.trees import build_jaxsoa, build_pinocchio, coordinate_maps, random_tree

ATOL = 1e-12                              # O(1) entries, a few dozen flops per joint (module docstring)
TYPES = (JointType.FREE, JointType.REVOLUTE, JointType.SPHERICAL, JointType.PRISMATIC, JointType.FIXED,
         JointType.SPHERICAL, JointType.FREE, JointType.REVOLUTE)

difference_jit = jax.jit(difference)
integrate_jit = jax.jit(integrate)
interpolate_jit = jax.jit(interpolate)


def close(a, b, atol=ATOL):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=0, atol=atol)


@pytest.fixture(scope="module")
def tree():
    """Every joint type: free root, revolute, spherical, prismatic, fixed, a second free joint mid-tree."""
    return random_tree(np.random.default_rng(7), len(TYPES), link_types=TYPES)


@pytest.fixture(scope="module")
def model(tree):
    return build_jaxsoa(tree)


@pytest.fixture(scope="module")
def pin_model(tree):
    return build_pinocchio(tree)


def configurations(model, seed, n=2):
    """n random configurations: angles in ±π, positions in ±1, uniform unit quaternions."""
    keys = jax.random.split(jax.random.key(seed), n)
    return [random_configuration(model, k) for k in keys]


def rotation_columns(model):
    """(k, 3) v columns of every rotation vector (spherical ω, free-joint ω)."""
    cols = [model.v_columns(JointType.SPHERICAL), model.v_columns(JointType.FREE)[:, 3:]]
    return np.concatenate([c for c in cols if c.size]).reshape(-1, 3)


def random_velocity(model, seed, max_angle=3.0):
    """Gaussian v with each rotation vector rescaled to a uniform angle < max_angle < π (log's range)."""
    rng = np.random.default_rng(seed)
    v = rng.normal(size=model.nv)
    for cols in rotation_columns(model):
        v[cols] *= rng.uniform(0, max_angle) / np.linalg.norm(v[cols])
    return jnp.asarray(v)


def same_configuration(model, q, ref, atol=ATOL):
    """q == ref, each quaternion up to sign (q and −q are the same rotation)."""
    q, ref = np.array(q), np.asarray(ref)
    for cols in quaternion_columns(model):
        q[cols] *= 1.0 if q[cols] @ ref[cols] >= 0 else -1.0
    close(q, ref, atol)


def negate_quaternions(model, q):
    cols = quaternion_columns(model).ravel()
    return q.at[cols].multiply(-1.0)


def to_pinocchio(model, pin_model, q=None, v=None):
    q_index, v_index = coordinate_maps(model, pin_model)
    x, index, size = (q, q_index, pin_model.nq) if v is None else (v, v_index, pin_model.nv)
    out = np.zeros(size)
    out[index] = np.asarray(x)
    return out


# --------------------------------------------------------------------------------------------- #
# inverse of integrate
# --------------------------------------------------------------------------------------------- #

@pytest.mark.parametrize("seed", range(5))
def test_integrate_of_difference_is_q1(model, seed):
    q0, q1 = configurations(model, seed)
    v = difference_jit(model, q0, q1)
    assert v.shape == (model.nv,) and v.dtype == jnp.float64
    same_configuration(model, integrate_jit(model, q0, v), q1)


@pytest.mark.parametrize("seed", range(5))
def test_difference_of_integrate_is_v(model, seed):
    """Every rotation angle < π, so v is the shortest tangent and log inverts exp exactly."""
    (q0,) = configurations(model, seed, 1)
    v = random_velocity(model, seed)
    close(difference_jit(model, q0, integrate_jit(model, q0, v)), v)


def test_rotations_take_the_shortest_path(model):
    """A rotation of angle θ ∈ (π, 2π) comes back as the angle 2π − θ about the opposite axis."""
    (q0,) = configurations(model, 11, 1)
    v = random_velocity(model, 11)
    cols = rotation_columns(model)
    axes = v[cols] / jnp.linalg.norm(v[cols], axis=-1, keepdims=True)
    v_long = v.at[cols].set(4.0 * axes)
    d = difference_jit(model, q0, integrate_jit(model, q0, v_long))
    close(d[cols], (4.0 - 2 * np.pi) * axes)
    same_configuration(model, integrate_jit(model, q0, d), integrate_jit(model, q0, v_long))


@pytest.mark.parametrize("angle", [np.pi - 1e-7, np.pi])
def test_rotations_near_pi(model, angle):
    """Near π log is well conditioned in the angle (the quaternion route); exactly at π the axis sign is
    either, but integrate(q0, difference(q0, q1)) is q1 and the angle is π."""
    (q0,) = configurations(model, 12, 1)
    v = random_velocity(model, 12)
    cols = rotation_columns(model)
    v = v.at[cols].set(angle * v[cols] / jnp.linalg.norm(v[cols], axis=-1, keepdims=True))
    q1 = integrate_jit(model, q0, v)
    d = difference_jit(model, q0, q1)
    close(jnp.linalg.norm(d[cols], axis=-1), np.full(len(cols), angle))
    same_configuration(model, integrate_jit(model, q0, d), q1)
    if angle < np.pi:
        close(d, v)                       # angle 2 atan2(s, w) and Shepperd's axis stay accurate to ~eps near π


def test_revolute_angles_are_not_wrapped(model):
    """A continuous joint keeps one angle: 2π + 0.1 apart is 2π + 0.1, not 0.1 (as Pinocchio's revolute)."""
    (q0,) = configurations(model, 13, 1)
    cols = model.q_columns(JointType.REVOLUTE).ravel()
    q1 = q0.at[cols].add(2 * np.pi + 0.1)
    d = difference_jit(model, q0, q1)
    close(d[model.v_columns(JointType.REVOLUTE).ravel()], np.full(len(cols), 2 * np.pi + 0.1))
    close(np.delete(np.asarray(d), model.v_columns(JointType.REVOLUTE).ravel()), 0.0, atol=1e-15)


# --------------------------------------------------------------------------------------------- #
# against Pinocchio
# --------------------------------------------------------------------------------------------- #

@pytest.mark.parametrize("seed", range(4))
def test_difference_matches_pinocchio(model, pin_model, seed):
    q0, q1 = configurations(model, seed + 20)
    ref = pin.difference(pin_model, to_pinocchio(model, pin_model, q0), to_pinocchio(model, pin_model, q1))
    close(to_pinocchio(model, pin_model, v=difference_jit(model, q0, q1)), ref)


@pytest.mark.parametrize("u", [0.0, 0.3, 1.0, -0.5, 1.7])
def test_interpolate_matches_pinocchio(model, pin_model, u):
    """u outside [0, 1] extrapolates along the same geodesic, as Pinocchio's (Eigen's slerp on quaternions)."""
    q0, q1 = configurations(model, 30)
    ref = pin.interpolate(pin_model, to_pinocchio(model, pin_model, q0), to_pinocchio(model, pin_model, q1), u)
    same_configuration(model, to_pinocchio(model, pin_model, interpolate_jit(model, q0, q1, u)), ref)


# --------------------------------------------------------------------------------------------- #
# double cover, end points, zero difference and its gradient
# --------------------------------------------------------------------------------------------- #

def test_negated_quaternions_give_the_same_difference(model):
    """q and −q are one rotation: bit-for-bit the same R, so the same v to round-off."""
    q0, q1 = configurations(model, 40)
    d = difference_jit(model, q0, q1)
    close(difference_jit(model, negate_quaternions(model, q0), q1), d, atol=1e-15)
    close(difference_jit(model, q0, negate_quaternions(model, q1)), d, atol=1e-15)


def test_interpolate_end_points(model):
    q0, q1 = configurations(model, 41)
    # q0 ⊕ 0 is q0 (exp(0) = identity), to the re-normalisation of each unit quaternion and (cos θ, sin θ): that moves
    # an entry of magnitude ≤ 1 by up to two ulps (2 eps) depending on the CPU's sqrt and division (exact on AVX-512
    # machines, one ulp on an AMD EPYC without it); every other entry is exact
    out = interpolate_jit(model, q0, q1, 0.0)
    close(out, q0, atol=2 * np.finfo(np.float64).eps)
    unit = np.concatenate([quaternion_columns(model).ravel(), unit_complex_columns(model).ravel()])
    close(np.delete(np.asarray(out), unit), np.delete(np.asarray(q0), unit), atol=0.0)
    same_configuration(model, interpolate_jit(model, q0, q1, 1.0), q1)
    same_configuration(model, interpolate_jit(model, q0, q1, 0.5),
                       integrate_jit(model, q0, 0.5 * difference_jit(model, q0, q1)))


def test_difference_of_q_with_itself_is_zero(model):
    """R0ᵀ R0 is I to round-off, so the rotation vectors are round-off (≤ a few eps), the rest exactly 0."""
    (q,) = configurations(model, 42, 1)
    close(difference_jit(model, q, q), np.zeros(model.nv), atol=1e-15)
    close(difference_jit(model, q, negate_quaternions(model, q)), np.zeros(model.nv), atol=1e-15)


def test_gradients_are_finite_at_q0_equal_q1(model):
    (q,) = configurations(model, 43, 1)

    @jax.jit
    def jacobians(a, b):                  # forward mode at v = 0: test_jacobian_of_difference_of_integrate_is_identity
        return (jax.jacrev(lambda x, y: difference(model, x, y), argnums=(0, 1))(a, b),
                jax.grad(lambda x, y: interpolate(model, x, y, 0.4).sum(), argnums=(0, 1))(a, b))

    assert all(np.isfinite(np.asarray(J)).all() for J in jax.tree.leaves(jacobians(q, q)))


@pytest.mark.parametrize("v_scale", [0.0, 1e-9, 1.0])
def test_jacobian_of_difference_of_integrate_is_identity(model, v_scale):
    """d/dv difference(q0, q0 ⊕ v) = I: the chain rule through both series branches (v = 0, 1e-9) and the
    exact ones (v ~ 1); a wrong series coefficient or a NaN from the norm at zero shows here."""
    (q0,) = configurations(model, 44, 1)
    v = v_scale * random_velocity(model, 44)
    for jac in (jax.jacfwd, jax.jacrev):
        J = jax.jit(jac(lambda x: difference(model, q0, integrate(model, q0, x))))(v)
        close(J, np.eye(model.nv))        # products of O(1) Jacobians of a few dozen flops: ATOL


def test_difference_jvp_matches_finite_differences(model):
    """Central difference along a tangent direction at a generic pair, h = 1e-6: truncation ~h² ≈ 1e-12,
    round-off ~1e-16 / h = 1e-10, so 1e-8 is a safe bound."""
    q0, q1 = configurations(model, 45)
    w = random_velocity(model, 46, 1.0)
    h = 1e-6

    @jax.jit
    def along(x):
        return difference(model, q0, integrate(model, q1, x))

    tangent = jax.jit(lambda t: jax.jvp(along, (jnp.zeros(model.nv),), (t,))[1])(w)
    close(tangent, (along(h * w) - along(-h * w)) / (2 * h), atol=1e-8)


# --------------------------------------------------------------------------------------------- #
# jit, vmap, batch axes, float32
# --------------------------------------------------------------------------------------------- #

def test_vmap_and_leading_batch_axes(model):
    Q0, Q1 = (jnp.stack(q) for q in zip(*(configurations(model, s) for s in range(50, 53)), strict=True))
    per_sample = jnp.stack([difference_jit(model, a, b) for a, b in zip(Q0, Q1, strict=True)])
    close(jax.jit(jax.vmap(lambda a, b: difference(model, a, b)))(Q0, Q1), per_sample)
    close(difference_jit(model, Q0, Q1), per_sample)                                  # (B, nq) through entry_point
    close(difference_jit(model, Q0[0], Q1), jnp.stack([difference_jit(model, Q0[0], b) for b in Q1]))   # shared q0
    interp = jnp.stack([interpolate_jit(model, a, b, 0.25) for a, b in zip(Q0, Q1, strict=True)])
    close(interpolate_jit(model, Q0, Q1, 0.25), interp)
    close(jax.jit(jax.vmap(lambda u: interpolate(model, Q0[0], Q1[0], u)))(jnp.full(3, 0.25)),
          jnp.broadcast_to(interp[0], (3, model.nq)))                                 # traced u


def test_float32_round_trip(tree):
    """The float32 error stated in the module docstring: measured 1.2e-6, asserted at 5e-6 (~10 ulps on O(1)
    values, with margin for other platforms' transcendental functions)."""
    model32 = build_jaxsoa(tree, dtype=jnp.float32)
    errors = []
    for seed in range(20):
        q0, q1 = configurations(model32, 60 + seed)
        assert q0.dtype == jnp.float32
        d = difference_jit(model32, q0, q1)
        assert d.dtype == jnp.float32
        q = np.array(integrate_jit(model32, q0, d), np.float64)
        for cols in quaternion_columns(model32):
            q[cols] *= 1.0 if q[cols] @ np.asarray(q1[cols], np.float64) >= 0 else -1.0
        errors.append(np.abs(q - np.asarray(q1, np.float64)).max())
    assert max(errors) < 5e-6, max(errors)


# --------------------------------------------------------------------------------------------- #
# argument checks
# --------------------------------------------------------------------------------------------- #

def test_wrong_lengths_name_the_argument(model):
    q0, q1 = configurations(model, 70)
    with pytest.raises(ValueError, match=rf"argument 'q0' has shape \({model.nq - 1},\), expected \({model.nq},\)"):
        difference(model, q0[:-1], q1)
    with pytest.raises(ValueError, match="argument 'q1'"):
        difference(model, q0, jnp.zeros(model.nv))
    with pytest.raises(ValueError, match="argument 'q1'"):
        interpolate(model, q0, q1[:-1], 0.5)
    with pytest.raises(TypeError, match="argument 'q0'"):
        difference(model, jnp.zeros(model.nq, jnp.int32), q1)


def test_u_must_be_a_real_scalar(model):
    q0, q1 = configurations(model, 71)
    with pytest.raises(ValueError, match="argument 'u' must be a scalar"):
        interpolate(model, q0, q1, jnp.array([0.5, 0.5]))
    with pytest.raises(ValueError, match="argument 'u'"):
        interpolate(model, q0, q1, float("nan"))
    with pytest.raises(TypeError, match="argument 'u'"):
        interpolate(model, q0, q1, True)
    with pytest.raises(TypeError, match="argument 'u'"):
        interpolate(model, q0, q1, "0.5")
    close(interpolate_jit(model, q0, q1, 1), interpolate_jit(model, q0, q1, 1.0), atol=0.0)   # an int u is fine
