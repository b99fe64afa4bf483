"""Checks of the Stewart platform (sims/stewart_gas.py): the default singularity threshold flags the
poses whose forces a user would not trust, and `simulate` reports each state's status (out of
stroke, near-singular, non-finite) so a run beyond the stroke or through a singularity is flagged at
its first bad step. The expected flags are recomputed here in NumPy from the returned poses (leg
lengths and the condition number of J₁₋₆ built by hand), not read back from the library."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsoa.spatial.rotation import exp_so3, quat_to_rotation, rotation_to_quat
from jaxsoa.systems.stewart import CONDITION_MARGIN, poses
from jaxsoa.systems.stewart import dynamics as sd
from jaxsoa.systems.stewart import geometry as st
from sims import stewart_gas as sg

HOME = np.asarray(sg.HOME)
DT, N_STEPS = 0.01, 40


@pytest.fixture(scope="module")
def params():
    return sg.build()


def wide(params):
    """The platform with strokes that never bind: only the singularity flag is left."""
    return dataclasses.replace(params, stroke_min=jnp.full(9, 1e-3), stroke_max=jnp.full(9, 10.0))


def numpy_legs(params, p, R):
    """(lengths (9,), condition of J₁₋₆) by hand: l n = p + R a − b, row i = [n_i, (R a_i) × n_i]."""
    arm = np.asarray(params.platform_points) @ np.asarray(R).T
    leg = np.asarray(p) + arm - np.asarray(params.base_points)
    length = np.linalg.norm(leg, axis=1)
    n = leg / length[:, None]
    J = np.concatenate([n, np.cross(arm, n)], axis=1)[:6]
    return length, np.linalg.cond(J) if np.all(np.isfinite(J)) else np.nan


def yawed(yaw):
    return exp_so3(jnp.array([0.0, 0.0, yaw]))


# ---------------------------------------------------------------------------------------------
# the default threshold

def test_default_threshold_is_ten_times_the_home_condition(params):
    _, condition_home = numpy_legs(params, HOME, np.eye(3))
    assert CONDITION_MARGIN == 10.0
    np.testing.assert_allclose(float(params.max_condition), CONDITION_MARGIN * condition_home, rtol=1e-12)
    assert 17.0 < float(params.max_condition) < 17.5                      # κ₀ = 1.72 (docstring)
    for gas_mode in ("none", "shared"):
        assert float(sg.build(gas_mode).max_condition) == float(params.max_condition)  # geometry only


def test_untrusted_forces_are_flagged(params):
    """Yawed by 89.99° (κ ≈ 1.7e4) holding the platform still needs ~2.6e8 N: a threshold of 1e6
    passed it; the default flags it (NaN forces, ValueError on the host). At 80° (κ = 14.8, 2.1e5 N)
    the pose is still trusted."""
    rest = jnp.zeros(6)
    run = jax.jit(sd.inverse_dynamics)
    loose = run(dataclasses.replace(wide(params), max_condition=jnp.asarray(1e6)), jnp.asarray(HOME),
                yawed(np.radians(89.99)), rest, rest)
    assert bool(loose.status.ok) and float(jnp.max(jnp.abs(loose.force))) > 1e8
    strict = run(wide(params), jnp.asarray(HOME), yawed(np.radians(89.99)), rest, rest)
    assert not bool(strict.status.nonsingular) and bool(jnp.all(jnp.isnan(strict.force)))
    with pytest.raises(ValueError, match="condition number"):
        poses.raise_if_invalid(strict.status)
    near = run(wide(params), jnp.asarray(HOME), yawed(np.radians(80.0)), rest, rest)
    assert bool(near.status.ok) and 1e5 < float(jnp.max(jnp.abs(near.force))) < 3e5
    np.testing.assert_allclose(float(near.status.condition), numpy_legs(params, HOME, yawed(np.radians(80.0)))[1],
                               rtol=1e-9)


def test_motion_profiles_stay_trusted(params):
    """The seed's sine and random profiles never come near the threshold (max κ 2.0)."""
    times = jnp.linspace(0.0, 20.0, 401)
    for path in (sg.sine_profile(), sg.random_profile(0)):
        status = jax.jit(jax.vmap(lambda s, path=path: poses.pose_status(params, *path(s))))(times)
        assert bool(status.ok.all()) and float(status.condition.max()) < 0.2 * float(params.max_condition)


@pytest.mark.parametrize("value", [0.0, -5.0, np.nan, 1.5, (10.0, 20.0)])
def test_explicit_threshold_is_checked(value):
    """max_condition must be a positive scalar and not below the home pose's κ₀ = 1.72."""
    top, bottom = st.seed_points(1.2, 0.3, 0.9, 1.8, 2.6, 0.9, platform_center=(0.0, 0.0, -0.2))
    with pytest.raises(ValueError, match="max_condition"):
        st.build_stewart(top, bottom, sg.HOME, **_seed_kwargs(top, bottom), max_condition=value)


def _seed_kwargs(top, bottom):
    length_mid = np.linalg.norm(HOME + top - bottom, axis=1)
    return dict(platform_mass=12000.0, platform_com=(0.1, 0.0, 0.9), platform_inertia=np.diag([2.0e4, 2.4e4, 3.2e4]),
                barrel_mass=150.0, barrel_com=0.6, barrel_inertia=20.0, rod_mass=60.0, rod_com=0.5, rod_inertia=6.0,
                stroke_min=length_mid - sg.STROKE, stroke_max=length_mid + sg.STROKE, piston_area=0.08,
                tank_volume=0.06, precharge=0.48e6, gas_length_mid=0.6)


def test_explicit_threshold_is_kept():
    top, bottom = st.seed_points(1.2, 0.3, 0.9, 1.8, 2.6, 0.9, platform_center=(0.0, 0.0, -0.2))
    assert float(st.build_stewart(top, bottom, sg.HOME, **_seed_kwargs(top, bottom), max_condition=1e3)
                 .max_condition) == 1e3


# ---------------------------------------------------------------------------------------------
# simulate: per-step status

@jax.jit
def _run(params, yaw0, u0, force, nan_after):
    """simulate from HOME yawed by yaw0 under constant electric forces `force`, NaN from t > nan_after."""
    def control(t, p, R, u):
        return jnp.where(t > nan_after, jnp.nan, force) * jnp.ones(6)

    return sd.simulate(params, jnp.asarray(HOME), rotation_to_quat(yawed(yaw0)), u0, control, DT, N_STEPS)


def expected_flags(params, trajectory):
    """(in stroke (n+1,), nonsingular (n+1,), finite (n+1,)) from the returned states, in NumPy."""
    in_stroke, nonsingular = [], []
    for p, R in zip(np.asarray(trajectory.p), np.asarray(quat_to_rotation(trajectory.quat)), strict=True):
        length, condition = numpy_legs(params, p, R)
        in_stroke.append(np.all((length >= np.asarray(params.stroke_min)) & (length <= np.asarray(params.stroke_max))))
        nonsingular.append(condition <= float(params.max_condition))
    finite = np.all(np.isfinite(np.concatenate([np.asarray(x) for x in trajectory[:3]], axis=1)), axis=1)
    return np.array(in_stroke), np.array(nonsingular), finite


def test_heave_beyond_the_stroke_is_flagged_at_its_first_step(params):
    """3e4 N in every electric leg lifts the platform out of its ±0.45 m stroke (and on towards the
    singular poses above): flagged from the first state with a leg beyond stroke_max."""
    trajectory = _run(params, 0.0, jnp.zeros(6), 3e4, jnp.inf)
    assert isinstance(trajectory, sd.PlatformTrajectory)
    assert trajectory.status.length.shape == (N_STEPS + 1, 9) and trajectory.ok.shape == (N_STEPS + 1,)
    in_stroke, nonsingular, finite = expected_flags(params, trajectory)
    first = int(np.argmin(in_stroke))
    assert 0 < first < N_STEPS and finite.all()
    assert int(trajectory.first_invalid) == first
    np.testing.assert_array_equal(np.asarray(trajectory.status.reachable), in_stroke)
    np.testing.assert_array_equal(np.asarray(trajectory.status.nonsingular), nonsingular)
    np.testing.assert_array_equal(np.asarray(trajectory.ok), in_stroke & nonsingular)
    assert float(trajectory.p[first, 2]) > HOME[2] + 0.2                  # a heave, past the gas legs' stroke


def test_turn_through_a_singularity_is_flagged_at_its_first_step(params):
    """Yawing at 0.5 rad/s from 75° towards the torsional singularity at 90° (strokes wide open):
    flagged from the first state whose κ exceeds the threshold."""
    loose = wide(params)
    trajectory = _run(loose, np.radians(75.0), jnp.array([0.0, 0, 0, 0, 0, 0.5]), 0.0, jnp.inf)
    in_stroke, nonsingular, _ = expected_flags(loose, trajectory)
    first = int(np.argmin(nonsingular))
    assert in_stroke.all() and 0 < first < N_STEPS
    assert int(trajectory.first_invalid) == first and bool(trajectory.ok[:first].all())
    np.testing.assert_array_equal(np.asarray(trajectory.status.nonsingular), nonsingular)


def test_non_finite_state_is_flagged(params):
    """A controller that returns NaN from t > 0.0449 (the midpoint stage of step 4): the state is
    non-finite from step 5 on, and flagged there."""
    trajectory = _run(params, 0.0, jnp.zeros(6), 0.0, 0.0449)
    _, _, finite = expected_flags(params, trajectory)
    assert int(np.argmin(finite)) == 5 and not finite[5:].any()
    np.testing.assert_array_equal(np.asarray(trajectory.state_finite), finite)
    assert int(trajectory.first_nonfinite) == 5 and not bool(trajectory.finite)
    assert int(trajectory.first_invalid) == 5 and not bool(trajectory.ok[5:].any())


def test_valid_run_and_batches(params):
    """Without electric forces the gas holds the platform near home for 0.4 s: nothing is flagged
    (first_invalid −1); a batch of runs reports one first_invalid per run."""
    trajectory = _run(params, 0.0, jnp.zeros(6), 0.0, jnp.inf)
    assert int(trajectory.first_invalid) == -1 and bool(trajectory.ok.all()) and bool(trajectory.finite)
    batch = jax.vmap(_run, (None, None, None, 0, None))(params, 0.0, jnp.zeros(6), jnp.array([0.0, 3e4]), jnp.inf)
    assert batch.ok.shape == (2, N_STEPS + 1) and batch.first_invalid.shape == (2,)
    assert int(batch.first_invalid[0]) == -1 and int(batch.first_invalid[1]) == int(
        _run(params, 0.0, jnp.zeros(6), 3e4, jnp.inf).first_invalid)


@pytest.mark.parametrize("kwargs, error, name", [
    (dict(dt=np.nan), ValueError, "dt"), (dict(dt=-0.01), ValueError, "dt"), (dict(dt=1e400), ValueError, "dt"),
    (dict(n_steps=-3), ValueError, "n_steps"), (dict(n_steps=0), ValueError, "n_steps"),
    (dict(n_steps=2.0), TypeError, "n_steps"), (dict(p0=jnp.zeros(2)), ValueError, "p0"),
    (dict(quat0=jnp.zeros(3)), ValueError, "quat0"), (dict(u0=jnp.zeros((6, 1))), ValueError, "u0")])
def test_simulate_arguments_are_checked(params, kwargs, error, name):
    args = dict(p0=jnp.asarray(HOME), quat0=jnp.array([0.0, 0.0, 0.0, 1.0]), u0=jnp.zeros(6), dt=DT, n_steps=3)
    args |= kwargs
    with pytest.raises(error, match=f"'{name}'"):
        sd.simulate(params, args["p0"], args["quat0"], args["u0"], lambda t, p, R, u: jnp.zeros(6), args["dt"],
                    args["n_steps"])
