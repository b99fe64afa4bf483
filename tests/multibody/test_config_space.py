"""Unit tests of `jaxsoa.multibody.config_space`: neutral / random configurations, integration on the joint
Lie groups (against `pin.integrate`) and the configuration derivative (against finite differences).

Tolerances: q and v entries are O(1) and `integrate` is a few dozen flops per joint, so agreement
with Pinocchio to 1e-12 is expected (any convention error — quaternion order, body vs world
twist, linear/angular order of the free-joint velocity — is O(1)). Finite differences are
discussed where they are asserted.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pinocchio as pin
import pytest

import jaxsoa
from jaxsoa.multibody.joints import JointType
from jaxsoa.spatial.rotation import quat_multiply, quat_to_rotation

ATOL = 1e-12

integrate = jax.jit(jaxsoa.integrate)
configuration_derivative = jax.jit(jaxsoa.configuration_derivative)
random_configuration = jax.jit(jaxsoa.random_configuration)


def close(a, b, atol=ATOL):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=0, atol=atol)


def _rotation(axis, angle):
    return pin.exp3(angle * np.asarray(axis) / np.linalg.norm(axis))


@pytest.fixture(scope="module")
def spherical_pair():
    """A small tree with every joint type but free — revolute root, spherical, prismatic,
    spherical — as (jaxsoa model, Pinocchio model) with the same coordinate layout."""
    parent = [-1, 0, 1, 0]
    types = [JointType.REVOLUTE, JointType.SPHERICAL, JointType.PRISMATIC, JointType.SPHERICAL]
    axes = np.array([[0.0, 0.6, 0.8], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
    rotations = np.stack([_rotation([1, 2, 3], 0.4 * k) for k in range(4)])
    translations = np.array([[0.0, 0.0, 0.0], [0.1, 0.2, 0.0], [0.0, 0.0, 0.3], [-0.2, 0.0, 0.1]])
    model = jaxsoa.build_model(parent, types, axes, rotations, translations, mass=np.ones(4),
                               com=np.zeros((4, 3)), inertia_com=np.broadcast_to(0.1 * np.eye(3), (4, 3, 3)),
                               dtype=jnp.float64)
    pin_model = pin.Model()
    pin_joints = [pin.JointModelRevoluteUnaligned(axes[0]), pin.JointModelSpherical(),
                  pin.JointModelPrismaticUnaligned(axes[2]), pin.JointModelSpherical()]
    ids = []
    for k, jm in enumerate(pin_joints):
        pin_parent = 0 if parent[k] < 0 else ids[parent[k]]
        ids.append(pin_model.addJoint(pin_parent, jm, pin.SE3(rotations[k], translations[k]), f"j{k}"))
    assert (model.nq, model.nv) == (pin_model.nq, pin_model.nv) == (10, 8)
    return model, pin_model


@pytest.fixture(scope="module", params=["solo12", "spherical"])
def pair(request, robot_models, spherical_pair):
    return robot_models["solo12"] if request.param == "solo12" else spherical_pair


def quaternion_columns(model):
    cols = [model.q_columns(t)[:, -4:] for t in (JointType.SPHERICAL, JointType.FREE)]
    return np.concatenate([c for c in cols if c.size]).reshape(-1, 4)


def random_state(model, seed, v_scale=1.0):
    q = random_configuration(model, jax.random.key(seed))
    v = jnp.asarray(v_scale * np.random.default_rng(seed).normal(size=model.nv))
    return q, v


# --------------------------------------------------------------------------------------------- #
# neutral / random
# --------------------------------------------------------------------------------------------- #

def test_neutral_matches_pinocchio(pair):
    model, pin_model = pair
    q0 = jaxsoa.neutral(model)
    assert q0.shape == (model.nq,) and q0.dtype == jnp.float64
    close(q0, pin.neutral(pin_model))


def test_neutral_of_solo12_is_the_free_flyer_identity(robot_models):
    q0 = np.asarray(jaxsoa.neutral(robot_models["solo12"][0]))
    close(q0[:7], [0, 0, 0, 0, 0, 0, 1])
    close(q0[7:], np.zeros(12))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_configuration(pair, seed):
    model, _ = pair
    q = np.asarray(random_configuration(model, jax.random.key(seed), angle_range=0.5, position_range=0.25))
    quat_cols = quaternion_columns(model)
    close(np.linalg.norm(q[quat_cols], axis=-1), np.ones(len(quat_cols)))
    for k in model.links_of_type(JointType.REVOLUTE):
        assert abs(q[model.idx_q[k]]) <= 0.5
    for k in list(model.links_of_type(JointType.PRISMATIC)):
        assert abs(q[model.idx_q[k]]) <= 0.25
    free = model.q_columns(JointType.FREE)
    if free.size:
        assert np.abs(q[free[:, :3]]).max() <= 0.25
    other = np.asarray(random_configuration(model, jax.random.key(seed + 10), 0.5, 0.25))
    assert np.abs(q - other).max() > 1e-3, "different keys must give different configurations"


# --------------------------------------------------------------------------------------------- #
# integrate
# --------------------------------------------------------------------------------------------- #

@pytest.mark.parametrize("v_scale", [0.0, 1e-9, 0.3, 3.0])
@pytest.mark.parametrize("seed", [0, 1])
def test_integrate_matches_pinocchio(pair, seed, v_scale):
    """v_scale 0 and 1e-9 exercise the small-angle branches, 3.0 rotations beyond π."""
    model, pin_model = pair
    q, v = random_state(model, seed, v_scale)
    q_next = np.asarray(integrate(model, q, v))
    ref = pin.integrate(pin_model, np.asarray(q), np.asarray(v))
    atol = 1e-12 * max(1.0, v_scale)
    quat_cols = quaternion_columns(model)
    other = np.setdiff1d(np.arange(model.nq), quat_cols)
    close(q_next[other], ref[other], atol=atol)
    # Quaternions: jaxsoa returns q ⊗ exp(ω) (smooth in v). Pinocchio's free-flyer integrate flips
    # the sign of the result when its dot product with q is negative, which happens only for
    # angular steps |ω| > π; compare up to sign there, exactly below.
    for cols in quat_cols:
        sign = 1.0 if q_next[cols] @ ref[cols] >= 0 else -1.0
        close(sign * q_next[cols], ref[cols], atol=atol)
    ang_cols = [model.idx_v[k] + np.arange(3) + (3 if t == JointType.FREE else 0)
                for k, t in enumerate(model.joint_types) if t in (JointType.SPHERICAL, JointType.FREE)]
    if max(np.linalg.norm(np.asarray(v)[c]) for c in ang_cols) < np.pi - 1e-6:
        close(q_next, ref, atol=atol)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_integrate_keeps_quaternions_unit(pair, seed):
    model, _ = pair
    q, v = random_state(model, seed, 5.0)
    for _ in range(20):
        q = integrate(model, q, v)
    cols = quaternion_columns(model)
    close(jnp.linalg.norm(q[cols], axis=-1), np.ones(len(cols)))


@pytest.mark.parametrize("seed", [0, 1])
def test_integrate_inverse_step(pair, seed):
    """q ⊕ v ⊕ (−v) = q: exp(ξ) exp(−ξ) = 1 on every joint group."""
    model, _ = pair
    q, v = random_state(model, seed, 2.0)
    close(integrate(model, integrate(model, q, v), -v), q)


def test_integrate_zero_is_identity(pair):
    model, _ = pair
    q, _ = random_state(model, 3)
    close(integrate(model, q, jnp.zeros(model.nv)), q, atol=1e-15)


def test_free_joint_twist_is_in_the_body_frame(robot_models):
    """A pure linear velocity along body x moves the base along R[:, 0] (not world x)."""
    model, _ = robot_models["solo12"]
    q, _ = random_state(model, 4)
    v = jnp.zeros(model.nv).at[0].set(0.5)
    R = np.asarray(quat_to_rotation(q[3:7]))
    q_next = integrate(model, q, v)
    close(q_next[:3], q[:3] + 0.5 * R[:, 0])
    close(q_next[3:], q[3:])


def test_integrate_is_differentiable_at_zero_velocity(pair):
    model, _ = pair
    q, _ = random_state(model, 5)
    J = jax.jit(jax.jacrev(lambda v: integrate(model, q, v)))(jnp.zeros(model.nv))
    assert np.isfinite(np.asarray(J)).all()


# --------------------------------------------------------------------------------------------- #
# configuration derivative
# --------------------------------------------------------------------------------------------- #

@pytest.mark.parametrize("seed", [0, 1, 2])
def test_configuration_derivative_is_a_finite_difference_of_integrate(pair, seed):
    """Central difference of t ↦ q ⊕ t v at t = 0 with h = 1e-6: truncation ~h²|v|³ ≈ 1e-12,
    round-off ~1e-16 / h = 1e-10, so 1e-8 is a safe bound; a wrong factor (½ on quaternions) is O(1)."""
    model, _ = pair
    q, v = random_state(model, seed)
    h = 1e-6
    fd = (integrate(model, q, h * v) - integrate(model, q, -h * v)) / (2 * h)
    close(configuration_derivative(model, q, v), fd, atol=1e-8)


@pytest.mark.parametrize("seed", [0, 1])
def test_configuration_derivative_closed_form(pair, seed):
    """q̇ = v on 1-DoF joints, ½ q ⊗ (ω, 0) on quaternions, ṗ = R v_lin on free-joint positions."""
    model, _ = pair
    q, v = random_state(model, seed)
    qdot = np.asarray(configuration_derivative(model, q, v))
    expected = np.zeros(model.nq)
    for k, t in enumerate(model.joint_types):
        iq, iv = model.idx_q[k], model.idx_v[k]
        if t in (JointType.REVOLUTE, JointType.PRISMATIC):
            expected[iq] = v[iv]
        elif t == JointType.SPHERICAL:
            expected[iq:iq + 4] = 0.5 * quat_multiply(q[iq:iq + 4], jnp.append(v[iv:iv + 3], 0.0))
        elif t == JointType.FREE:
            quat = q[iq + 3:iq + 7]
            expected[iq:iq + 3] = quat_to_rotation(quat) @ v[iv:iv + 3]
            expected[iq + 3:iq + 7] = 0.5 * quat_multiply(quat, jnp.append(v[iv + 3:iv + 6], 0.0))
    close(qdot, expected)
