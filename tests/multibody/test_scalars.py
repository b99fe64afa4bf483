"""Checks of the arguments that are not model states (`jaxsoa.multibody.scalars` and the functions that take
no model): each bad value raises naming the argument and what was expected; the valid values beside them
pass (the control); a traced value is checked for its shape only, so the same call under `jit` runs.

Covered: `critically_damped_gains` (ω > 0), the PD gains of `computed_torque` / `computed_torque_free_floating`
(a scalar or one per joint, ≥ 0), `random_configuration`'s ranges (finite scalars ≥ 0), `neutral`'s dtype,
`to_virtual_base_state` / `from_virtual_base_state` (one sample; no more joint velocities than joint
coordinates: a spherical joint has 4 and 3, so the exact lengths need the model), `tree_traversal` on a
concrete parent array (in range, not itself, no cycle), and `ode_rk4_step`'s t and dt (finite scalars).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsoa
from sims import space_arm_7dof
from tests.helpers.trees import build_jaxsoa, random_tree


@pytest.fixture(scope="module")
def arm():
    return space_arm_7dof.build(floating=True, dtype=jnp.float64)


@pytest.mark.parametrize("omega, error, match", [
    (-1.0, ValueError, r"'omega' = -1.0 must be finite and > 0"),
    (0.0, ValueError, r"'omega' = 0.0 must be finite and > 0"),
    (float("nan"), ValueError, r"'omega'"),
    (np.array([2.0, -1.0]), ValueError, r"'omega'"),
    ("fast", TypeError, r"'omega' must be a real number"),
    (True, TypeError, r"'omega' must be real"),
])
def test_critically_damped_gains_rejects(omega, error, match):
    with pytest.raises(error, match=match):
        jaxsoa.critically_damped_gains(omega)


def test_critically_damped_gains_accepts_scalars_arrays_and_traced_values():
    kp, kd = jaxsoa.critically_damped_gains(np.array([1.0, 3.0]))
    np.testing.assert_array_equal(kp, [1.0, 9.0])
    np.testing.assert_array_equal(kd, [2.0, 6.0])
    kp, kd = jax.jit(jaxsoa.critically_damped_gains)(-2.0)       # traced: data, not checked (no error)
    assert float(kp) == 4.0 and float(kd) == -4.0


def test_computed_torque_gains(arm):
    q, v = jaxsoa.neutral(arm), jnp.zeros(arm.nv)
    z = jnp.zeros(arm.nv - 6)
    good = jaxsoa.computed_torque_free_floating(arm, q, v, z, z, z, jnp.full(7, 4.0), 4.0)
    assert good.shape == (7,)
    with pytest.raises(ValueError, match=r"'kp' has shape \(3,\): expected a scalar or \(7,\)"):
        jaxsoa.computed_torque_free_floating(arm, q, v, z, z, z, jnp.ones(3), 1.0)
    with pytest.raises(ValueError, match=r"'kd' = -1.0 must be finite and ≥ 0"):
        jaxsoa.computed_torque_free_floating(arm, q, v, z, z, z, 1.0, -1.0)
    fixed = build_jaxsoa(random_tree(np.random.default_rng(0), 4, joint_types=(jaxsoa.JointType.REVOLUTE,)))
    x = jnp.zeros(fixed.nv)
    with pytest.raises(ValueError, match=r"'kd' has shape \(2, 4\)"):
        jaxsoa.computed_torque(fixed, x, x, x, x, x, 1.0, jnp.ones((2, 4)))
    with pytest.raises(ValueError, match=r"'kp' = nan must be finite"):
        jaxsoa.computed_torque(fixed, x, x, x, x, x, float("nan"), 1.0)


@pytest.mark.parametrize("kwargs, match", [
    (dict(angle_range=-0.1), r"'angle_range' = -0.1 must be finite and ≥ 0"),
    (dict(position_range=float("inf")), r"'position_range' = inf must be finite"),
    (dict(angle_range=np.ones(3)), r"'angle_range' must be a scalar"),
])
def test_random_configuration_ranges(arm, kwargs, match):
    with pytest.raises(ValueError, match=match):
        jaxsoa.random_configuration(arm, jax.random.key(0), **kwargs)


def test_random_configuration_zero_range_is_the_neutral_joint_angles(arm):
    q = jaxsoa.random_configuration(arm, jax.random.key(0), angle_range=0.0, position_range=0.0)
    np.testing.assert_array_equal(q[:3], 0.0)                                   # hub position
    np.testing.assert_array_equal(q[7:], 0.0)                                   # joint angles
    np.testing.assert_allclose(jnp.linalg.norm(q[3:7]), 1.0, rtol=1e-14)       # a unit quaternion


def test_neutral_dtype(arm):
    assert jaxsoa.neutral(arm, jnp.float32).dtype == jnp.float32
    with pytest.raises(TypeError, match=r"'dtype' must be a floating-point dtype, got int32"):
        jaxsoa.neutral(arm, jnp.int32)


def test_virtual_base_state_shapes():
    quat = jnp.array([0.1, -0.2, 0.3, 0.9]) / jnp.linalg.norm(jnp.array([0.1, -0.2, 0.3, 0.9]))   # (x, y, z, w)
    q = jnp.concatenate([jnp.array([0.5, -0.2, 1.0]), quat, jnp.array([0.3, -0.4])])         # hub + 2 joints
    v = jnp.arange(8.0)
    qv, vv = jaxsoa.to_virtual_base_state(q, v)
    assert qv.shape == (8,) and vv.shape == (8,)
    back_q, back_v = jaxsoa.from_virtual_base_state(qv, vv)                     # the round trip (w > 0: no sign flip)
    np.testing.assert_allclose(back_q, q, atol=1e-12)
    np.testing.assert_allclose(back_v, v, atol=1e-12)
    with pytest.raises(ValueError, match=r"'q' has shape \(5,\): expected \(7 \+ joints,\)"):
        jaxsoa.to_virtual_base_state(jnp.zeros(5), v)
    with pytest.raises(ValueError, match=r"'v' has shape \(9,\): more joint velocities than 'q'"):
        jaxsoa.to_virtual_base_state(q, jnp.zeros(9))
    with pytest.raises(ValueError, match=r"'v' has shape \(5,\): expected \(6 \+ joints,\)"):
        jaxsoa.to_virtual_base_state(q, jnp.zeros(5))
    with pytest.raises(ValueError, match=r"'q' has shape \(2, 9\)"):
        jaxsoa.to_virtual_base_state(jnp.stack([q, q]), v)
    with pytest.raises(TypeError, match=r"'v' must be a floating-point array"):
        jaxsoa.to_virtual_base_state(q, jnp.arange(8))
    with pytest.raises(ValueError, match=r"'v_virtual' has shape \(9,\): more joint velocities"):
        jaxsoa.from_virtual_base_state(qv, jnp.zeros(9))
    with pytest.raises(ValueError, match=r"'q_virtual' has shape \(4,\)"):
        jaxsoa.from_virtual_base_state(jnp.zeros(4), jnp.zeros(4))


@pytest.mark.parametrize("parent, match", [
    ([1, 0], r"links \[0, 1\] form a cycle"),
    ([-1, 2, 1], r"links \[1, 2\] form a cycle"),
    ([-1, 3, 1, 2], r"links \[1, 2, 3\] form a cycle"),
    ([-1, 0, 5], r"link 2 has parent 5"),
    ([-1, 1], r"link 1 has parent 1"),
    ([-2, 0], r"link 0 has parent -2"),
    ([[-1, 0]], r"must be a 1-D integer array"),
    ([-1.0, 0.0], r"must be a 1-D integer array"),
])
def test_tree_traversal_checks_a_concrete_parent_array(parent, match):
    with pytest.raises(ValueError, match=match):
        jaxsoa.tree_traversal(np.array(parent))


def test_with_parent_rejects_a_concrete_cycle(arm):
    with pytest.raises(ValueError, match=r"form a cycle"):
        arm.with_parent(np.r_[1, 0, np.arange(1, arm.n_links - 1)])


def test_with_parent_of_a_constant_inside_a_trace(arm):
    """A concrete parent array inside a traced function (e.g. a rollout's stage rebuilding the traversal)
    is checked on the host: a valid one runs, a cycle raises."""
    q, v = jaxsoa.neutral(arm), jnp.zeros(arm.nv)

    def rebuilt(parent):
        return jax.jit(lambda q, v: jaxsoa.aba(arm.with_parent(parent, unroll=2), q, v, v))(q, v)

    # the same dynamics through a loop unrolled by 2: equal up to float64 round-off (1e-12 absolute on
    # accelerations of order 1; measured equal bit for bit here)
    np.testing.assert_allclose(rebuilt(arm.parent), jaxsoa.aba(arm, q, v, v), rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match=r"form a cycle"):
        rebuilt(np.r_[1, 0, np.arange(1, arm.n_links - 1)])


def test_tree_traversal_accepts_forests_and_out_of_order_storage():
    trav = jaxsoa.tree_traversal(np.array([-1, 2, 0, -1]))                      # two roots, a child before its parent
    np.testing.assert_array_equal(trav.depth, [0, 2, 1, 0])
    traced = jax.jit(lambda p: jaxsoa.tree_traversal(p).depth)(jnp.array([1, 0]))  # traced: not checked
    assert np.all(np.asarray(traced) >= 2)                                       # the cycle shows in the depths


def test_ode_rk4_step_time_arguments():
    def f(t, x):
        return -x
    x1 = jaxsoa.ode_rk4_step(f, 0.0, jnp.ones(2), -0.1)                          # backward in time is allowed
    np.testing.assert_allclose(x1, np.exp(0.1), rtol=1e-6)                       # RK4 error ~ dt⁵ / 120
    with pytest.raises(ValueError, match=r"'dt' = nan must be finite"):
        jaxsoa.ode_rk4_step(f, 0.0, jnp.ones(2), float("nan"))
    with pytest.raises(ValueError, match=r"'t' must be a scalar"):
        jaxsoa.ode_rk4_step(f, jnp.zeros(2), jnp.ones(2), 0.1)
    with pytest.raises(TypeError, match=r"'dt' must be a real number"):
        jaxsoa.ode_rk4_step(f, 0.0, jnp.ones(2), "0.1")
