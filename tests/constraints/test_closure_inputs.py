"""Bad closures and options at the closed-loop entry points: every field of a `LoopClosure`, the builders, the
Baumgarte gains, `rcond`, `iterations` and a rollout's `active` schedule are checked, each error naming the
argument or field (docs/user_guide.md, "Errors and checks"). Each case returned numbers (or failed deep inside
JAX) before the checks."""

import jax.numpy as jnp
import numpy as np
import pytest

from jaxsoa.constraints.closure import constraint_error, diagnose_closure, loop_closure, stack_closures
from jaxsoa.constraints.dynamics import (
    forward_dynamics_constrained,
    inverse_dynamics_constrained,
    project_state,
)
from jaxsoa.integrators import rollout_constrained
from tests.constraints.test_closure import EYE, four_bar, four_bar_state


@pytest.fixture(scope="module")
def bar():
    model, closure = four_bar()
    q, v = four_bar_state(0.3, 0.5)
    return model, closure, jnp.asarray(q), jnp.asarray(v)


@pytest.mark.parametrize("field, value, match", [
    ("R_a_cut", np.zeros((2, 3, 3)), "field 'R_a_cut' has shape"),
    ("basis", np.zeros((1, 5, 6)), "field 'basis' has shape"),
    ("p_b_cut", np.zeros((1, 4)), "field 'p_b_cut' has shape"),
    ("active", np.ones((2,), bool), "field 'active' has shape"),
    ("link_a", np.asarray([0.0]), "field 'link_a' must have an integer dtype"),
    ("active", np.ones((1,), np.float64), "field 'active' must have a bool dtype"),
    ("basis", np.zeros((1, 6, 6), np.int32), "field 'basis' must have a floating dtype"),
])
def test_closure_fields_are_checked(bar, field, value, match):
    model, closure, q, _ = bar
    with pytest.raises((ValueError, TypeError), match=match):
        constraint_error(model, q, closure._replace(**{field: jnp.asarray(value)}))


def test_closure_frames_take_the_models_dtype(bar):
    """A float32 closure on a float64 model computes in float64 (the entry points' one dtype rule)."""
    model, closure, q, _ = bar
    single = closure._replace(**{f: getattr(closure, f).astype(jnp.float32)
                                 for f in ("R_a_cut", "p_a_cut", "R_b_cut", "p_b_cut", "basis")})
    e = constraint_error(model, q, single)
    assert e.dtype == jnp.float64
    np.testing.assert_allclose(e, constraint_error(model, q, closure), atol=1e-6)   # float32 frames: 1e-7 rounding


def test_loop_closure_builder_rejects_bad_fields(bar):
    X = (EYE, [0.0, 0.0, 0.0])
    with pytest.raises(TypeError, match="field 'link_a' must be an int"):
        loop_closure("a", 2, X, X, "revolute")
    with pytest.raises(TypeError, match="field 'link_b' must be an int"):
        loop_closure(-1, 2.5, X, X, "revolute")
    with pytest.raises(TypeError, match="field 'active' must be True or False"):
        loop_closure(-1, 2, X, X, "revolute", active="no")
    with pytest.raises(ValueError, match="field 'X_a_cut' must be a finite"):
        loop_closure(-1, 2, EYE, X, "revolute")
    with pytest.raises(TypeError, match="argument 'dtype' must be float32 or float64"):
        loop_closure(-1, 2, X, X, "revolute", dtype=jnp.int32)


def test_stack_closures_rejects_nothing_others_and_mixed_dtypes(bar):
    _, closure, _, _ = bar
    with pytest.raises(TypeError, match="expected one or more LoopClosure"):
        stack_closures()
    with pytest.raises(TypeError, match="expected one or more LoopClosure"):
        stack_closures(closure, (1, 2))
    single = closure._replace(R_a_cut=closure.R_a_cut.astype(jnp.float32))
    with pytest.raises(TypeError, match="different dtypes"):
        stack_closures(closure, single)
    assert stack_closures(closure, closure).link_a.shape == (2,)


@pytest.mark.parametrize("options, match", [
    (dict(baumgarte=(np.nan, 1.0)), "baumgarte\\[0\\]"),
    (dict(baumgarte=(1.0, -2.0)), "baumgarte\\[1\\]"),
    (dict(baumgarte=(1.0,)), "argument 'baumgarte' must be None or a pair"),
    (dict(baumgarte=1.0), "argument 'baumgarte' must be None or a pair"),
    (dict(rcond=-1.0), "argument 'rcond'"),
])
def test_constrained_dynamics_options_are_checked(bar, options, match):
    model, closure, q, v = bar
    with pytest.raises((TypeError, ValueError), match=match):
        forward_dynamics_constrained(model, q, v, jnp.zeros_like(v), closure, **options)


def test_other_closure_options_are_checked(bar):
    model, closure, q, v = bar
    with pytest.raises(ValueError, match="argument 'iterations'"):
        project_state(model, q, v, closure, iterations=-1)
    with pytest.raises(ValueError, match="argument 'rcond'"):
        diagnose_closure(model, q, closure, rcond=-1.0)
    actuated = np.ones((3, model.nv), bool)
    with pytest.raises(ValueError, match="argument 'actuated' has shape"):
        inverse_dynamics_constrained(model, q, v, jnp.zeros_like(v), closure, actuated)


def test_rollout_active_schedule_is_checked(bar):
    """A schedule with too few rows used to be clamped to its last row (the intended switch never happened)."""
    model, closure, q, v = bar
    control = lambda t, q, v: jnp.zeros_like(v)                                      # noqa: E731
    for active, match in ((np.ones((2, 1), bool), "argument 'active' has shape"),
                          (np.ones((3, 2), bool), "argument 'active' has shape"),
                          (np.ones(3, bool), "argument 'active' has shape"),
                          (np.ones((3, 1)), "argument 'active' must be a bool array")):
        with pytest.raises((ValueError, TypeError), match=match):
            rollout_constrained(model, q, v, control, closure, 1e-3, 3, active=active)
    trajectory = rollout_constrained(model, q, v, control, closure, 1e-3, 3, active=np.ones((3, 1), bool))
    assert trajectory.q.shape == (4, model.nq)
