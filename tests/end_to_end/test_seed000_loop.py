"""The dual-arm closed-loop grasp (sims/dual_arm_grasp.py, experiments/reproduce_seed000_loop.py):
the loop closes at the grasp's initial pose in both engines, the t = 0 joint accelerations agree with
Pinocchio's constrained dynamics (built by hand), short trajectories agree, the constraint drift stays
bounded, and the plot and tables are written."""

import jax
import numpy as np
import pytest

from experiments import reproduce_seed000_loop as loop
from jaxsoa.constraints.closure import constraint_error
from sims import dual_arm_grasp as grasp

pytestmark = pytest.mark.slow            # end to end: deselect with -m "not slow"
DURATION = 0.2                  # s: 20 RK4 steps, enough for the trajectory comparison, compile-dominated


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    out = tmp_path_factory.mktemp("seed000_loop")
    return out, {quantity: (value, bound) for quantity, value, bound in loop.run(out, duration=DURATION)}


def _value(rows, prefix):
    (match,) = [v for q, v in rows.items() if q.startswith(prefix)]
    return match


def test_seed_setup():
    # five of the six joints get 0.1 N·m, the sixth is free
    np.testing.assert_array_equal(grasp.control_torque(), [0.1, 0.1, 0.1, 0.1, 0.1, 0.0])
    np.testing.assert_allclose(np.rad2deg(grasp.Q0), -45.0, rtol=0, atol=1e-12)
    # the loop closes at q0: jaxsoa's cut error and Pinocchio's (its own kinematics of the hand-built
    # model) vanish to round-off (1e-12 m/rad: lengths of a few metres, float64)
    model, closure = grasp.model_and_closure()
    assert np.abs(np.asarray(jax.jit(constraint_error)(model, grasp.Q0, closure))).max() <= 1e-12
    assert np.abs(loop.PinocchioLoop().error(grasp.Q0)).max() <= 1e-12


def test_initial_accelerations_match_pinocchio(rows):
    _, table = rows
    qdd_max, _ = _value(table, "max |q̈(0)|")
    assert qdd_max > 1e-4                                            # the test is not vacuous (~2e-3 rad/s²)
    for prefix in ("max |q̈(0) jaxsoa (recursive)", "max |q̈(0) jaxsoa (dense KKT)"):
        error, bound = _value(table, prefix)
        assert bound == 1e-9 and error <= bound, (prefix, error)     # acceptance 1e-9 (measured ~1e-16)
    # float32 model and closure: relative error ~ eps32 · cond(G M⁻¹ Gᵀ) · O(10); bound 1e-4 (measured 1.5e-6)
    assert _value(table, "max |q̈(0) jaxsoa float32")[0] <= 1e-4


def test_trajectories_and_drift(rows):
    _, table = rows
    # same RK4 on the same dynamics: the states differ only by round-off and Pinocchio's proximal
    # solver (μ = 1e-10); bound 1e-8 (measured 1e-15 to 1e-13 over 10 s)
    for prefix in ("max |q jaxsoa", "max |q̇ jaxsoa", "max |q̈ jaxsoa"):
        for quantity, (value, bound) in table.items():
            if quantity.startswith(prefix):
                assert value <= bound == 1e-8, (quantity, value)
    drift, bound = _value(table, "constraint drift max |e| over 0.2 s, jaxsoa, Baumgarte")
    assert drift <= bound == 1e-8
    # unstabilised drift is small too here (slow motion), but bounded by the same round-off scale
    assert _value(table, "constraint drift max |e| over 0.2 s, jaxsoa, no stabilisation")[0] <= 1e-8


def test_baumgarte_closed_form(rows):
    """Kicked start (e₀ = 0, ė₀ = G q̇₀ ≠ 0): unstabilised e(T) = ė₀ T, critically damped Baumgarte
    (α = β) e(T) = ė₀ T e^{−αT}, so the ratio is e^{−αT} = e^{−1} for T = 0.2 s, α = 5 /s. Tolerance
    1e-3 relative: the constraint geometry changes over T (q̈ ~ 2e-3 rad/s²) and ė₀ ~ 1e-6 adds
    second-order terms ~1e-6 relative."""
    _, table = rows
    stabilised = _value(table, "kicked start (q̇0 = 1e-06 rad/s on every joint): final |e|, jaxsoa, Baumgarte")[0]
    free = _value(table, "kicked start (q̇0 = 1e-06 rad/s on every joint): final |e|, jaxsoa, no stabilisation")[0]
    assert free > 1e-8                                               # the kick does violate the constraint
    np.testing.assert_allclose(stabilised / free, np.exp(-5.0 * DURATION), rtol=1e-3)


def test_outputs_written(rows):
    out, _ = rows
    for name in ("seed000_loop.png", "seed000_loop_drift.png"):
        assert (out / name).stat().st_size > 10_000, name
    text = (out / "seed000_loop_table.md").read_text()
    assert "cut_link_a = 6, cut_interface_a = 1, cut_link_b = 7, cut_interface_b = 1, cut_type = 3" in text
    assert (out / "seed000_loop_table.json").exists()
