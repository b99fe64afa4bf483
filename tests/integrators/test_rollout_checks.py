"""Rollouts against bad input and non-finite runs: step counts and time steps are checked on the
host, the first non-finite step is reported on the result (`Trajectory.first_nonfinite`), and
`checks=True` under `checkify` names it; an invalid traced topology in a switching schedule is
flagged the same way (its model is NaN-marked)."""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import checkify

import jaxsoa
from jaxsoa.integrators import TopologySchedule, rollout_switching
from jaxsoa.multibody.joints import JointType
from tests.helpers.trees import build_jaxsoa, random_tree


@pytest.fixture(scope="module")
def chain():
    rng = np.random.default_rng(5)
    return build_jaxsoa(random_tree(rng, 3, joint_types=(JointType.REVOLUTE,)))


def _zero(model):
    return lambda t, q, v: jnp.zeros(model.nv)


@pytest.mark.parametrize("n_steps, error", [(-3, ValueError), (0, ValueError), (2.0, TypeError), (True, TypeError)])
def test_bad_step_count(chain, n_steps, error):
    with pytest.raises(error, match="'n_steps'"):
        jaxsoa.rollout(chain, jnp.zeros(3), jnp.zeros(3), _zero(chain), 0.01, n_steps)


@pytest.mark.parametrize("dt", [float("nan"), -0.01, 0.0, float("inf"), np.ones(2)])
def test_bad_time_step(chain, dt):
    with pytest.raises(ValueError, match="'dt'"):
        jaxsoa.rollout(chain, jnp.zeros(3), jnp.zeros(3), _zero(chain), dt, 5)


def test_bad_initial_state(chain):
    with pytest.raises(ValueError, match="'q0'"):
        jaxsoa.rollout(chain, jnp.zeros(2), jnp.zeros(3), _zero(chain), 0.01, 5)
    with pytest.raises(ValueError, match="'v0'"):
        jaxsoa.rollout(chain, jnp.zeros(3), jnp.zeros((3, 1)), _zero(chain), 0.01, 5)


def test_first_nonfinite_step_is_reported(chain):
    """A controller that returns NaN from t = 3 dt on: the state after step 3 (index 4) is the first
    non-finite one; a clean run reports −1."""
    dt = 0.01

    def control(t, q, v):
        return jnp.where(t > 2.5 * dt, jnp.nan, 0.0) * jnp.ones(chain.nv)

    run = jax.jit(lambda q0: jaxsoa.rollout(chain, q0, jnp.zeros(3), control, dt, 8))
    trajectory = run(jnp.full(3, 0.1))
    assert int(trajectory.first_nonfinite) == 4 and not bool(trajectory.finite)
    assert np.all(np.isfinite(trajectory.q[:4]))
    clean = jaxsoa.rollout(chain, jnp.full(3, 0.1), jnp.zeros(3), _zero(chain), dt, 8)
    assert int(clean.first_nonfinite) == -1 and bool(clean.finite)


def test_checkify_variant_names_the_step(chain):
    dt = 0.01

    def control(t, q, v):
        return jnp.where(t > 1.5 * dt, jnp.inf, 0.0) * jnp.ones(chain.nv)

    checked = jax.jit(checkify.checkify(partial(jaxsoa.rollout, chain, control=control, dt=dt, n_steps=6,
                                                checks=True)))
    err, _ = checked(jnp.full(3, 0.1), jnp.zeros(3))
    assert "non-finite from step 3" in err.get()
    err, _ = checked(jnp.full(3, 0.1), jnp.zeros(3).at[0].set(jnp.nan))
    assert "q has non-finite entries" not in (err.get() or "") and "non-finite from step 0" in err.get()
    ok, _ = jax.jit(checkify.checkify(partial(jaxsoa.rollout, chain, control=_zero(chain), dt=dt, n_steps=6,
                                              checks=True)))(jnp.full(3, 0.1), jnp.zeros(3))
    assert ok.get() is None


def test_batched_rollout_equals_vmap(chain):
    q0 = jnp.asarray(np.random.default_rng(0).normal(size=(4, 3)))
    batched = jaxsoa.rollout(chain, q0, jnp.zeros(3), _zero(chain), 0.01, 5)
    assert batched.q.shape == (4, 6, 3) and batched.first_nonfinite.shape == (4,)
    mapped = jax.vmap(lambda q: jaxsoa.rollout(chain, q, jnp.zeros(3), _zero(chain), 0.01, 5))(q0)
    assert float(jnp.max(jnp.abs(batched.q - mapped.q))) < 1e-12     # the batch-last path: rounding only


def test_switching_rollout_flags_an_invalid_topology():
    """A schedule whose second segment is not a tree: the run is finite until the switch (step 3),
    then NaN from the first state computed on the invalid model, and `checks=True` names it."""
    from sims.dual_arm_spacecraft import CONFIGURATIONS
    from tests.topology.test_reconfigure import spacecraft_design

    design = spacecraft_design()
    good = np.asarray(CONFIGURATIONS[1])
    model = jaxsoa.topology.reconfigure.reconfigurable_model(design, good)
    arrays = jaxsoa.topology.reconfigure.design_arrays(design)
    schedule = TopologySchedule(jnp.asarray(np.stack([good, np.zeros_like(good)])), jnp.array([0, 3]))
    q0, v0 = jaxsoa.neutral(model), jnp.zeros(model.nv)
    run = partial(rollout_switching, model, arrays, q0, v0, lambda t, q, v: jnp.zeros(model.nv), 0.01, 6,
                  schedule=schedule)
    trajectory = jax.jit(run)()                # jitted: one compile, not one per primitive of the setup
    assert int(trajectory.first_nonfinite) == 4
    err, _ = jax.jit(checkify.checkify(lambda: run(checks=True)))()
    assert "'parent'" in err.get()             # the invalid segment model (schedule entry 1) is named by its rule
