"""Bad inputs to the steps and rollouts: a rate of another shape or structure than the state (it used to be
broadcast into the state), an integer state (its step was a no-op), a tableau, control, step or
checkpoint of the wrong kind, and topology schedules that break the documented rules. Each error names
the argument or field (docs/user_guide.md, "Errors and checks")."""

import jax.numpy as jnp
import numpy as np
import pytest

import jaxsoa
from jaxsoa.integrators import TopologySchedule, ode_rk4_step, rk4_step, rollout, rollout_switching
from jaxsoa.integrators.steps import semi_implicit_euler_step
from jaxsoa.topology.reconfigure import design_arrays
from sims import dual_arm_spacecraft as sc
from tests.integrators.test_rollout import chain, control  # noqa: F401  (the fixture)


def test_ode_step_checks_the_state_and_the_rate():
    x = jnp.ones(3)
    with pytest.raises(TypeError, match="argument 'x': every leaf must be a floating-point array"):
        ode_rk4_step(lambda t, y: -y, 0.0, jnp.ones(3, jnp.int32), 0.5)
    with pytest.raises(ValueError, match="argument 'f' returned shape \\(1,\\), expected the state's \\(3,\\)"):
        ode_rk4_step(lambda t, y: -y[:1], 0.0, x, 0.5)
    with pytest.raises(ValueError, match="argument 'f' returned shape \\(2,\\)"):
        ode_rk4_step(lambda t, y: -y[:2], 0.0, x, 0.5)
    with pytest.raises(ValueError, match="argument 'f' returned a"):
        ode_rk4_step(lambda t, y: (-y, -y), 0.0, x, 0.5)
    with pytest.raises(TypeError, match="argument 'tableau' must be a ButcherTableau"):
        ode_rk4_step(lambda t, y: -y, 0.0, x, 0.5, tableau=3)
    # the valid call still integrates x' = −x (RK4 at dt = 0.5: the Taylor polynomial of e^{−0.5} to order 4)
    h = 0.5
    np.testing.assert_allclose(ode_rk4_step(lambda t, y: -y, 0.0, x, h),
                               np.ones(3) * (1 - h + h**2 / 2 - h**3 / 6 + h**4 / 24), rtol=1e-6)


def test_steps_check_what_dynamics_returns(chain):  # noqa: F811
    q, v, tau = (jnp.zeros(chain.nv) for _ in range(3))
    short = lambda m, q, v, tau: jnp.zeros(1)                                     # noqa: E731
    with pytest.raises(ValueError, match="argument 'dynamics' returned shape \\(1,\\)"):
        rk4_step(chain, q, v, tau, 0.01, dynamics=short)
    with pytest.raises(ValueError, match="argument 'dynamics' returned shape \\(1,\\)"):
        semi_implicit_euler_step(chain, q, v, tau, 0.01, dynamics=short)
    with pytest.raises(TypeError, match="argument 'tableau'"):
        rk4_step(chain, q, v, tau, 0.01, tableau="rk4")


@pytest.mark.parametrize("options, match", [
    (dict(control=jnp.zeros(3)), "argument 'control' must be a function"),
    (dict(control=None), "argument 'control' must be a function"),
    (dict(step="rk4"), "argument 'step' must be a function"),
    (dict(checkpoint="yes"), "argument 'checkpoint' must be True, False or a"),
    (dict(control_at_stages=1), "argument 'control_at_stages' must be True or False"),
])
@pytest.mark.parametrize("batch", [(), (2,)])
def test_rollout_options_are_checked(chain, options, match, batch):  # noqa: F811
    q0 = jnp.zeros((*batch, chain.nq))
    arguments = dict(control=control, step=rk4_step) | options
    with pytest.raises(TypeError, match=match):
        rollout(chain, q0, jnp.zeros((*batch, chain.nv)), arguments.pop("control"), 0.01, 3, **arguments)


@pytest.mark.parametrize("switch_steps, match", [
    ([2, 3], "must start at 0 and ascend strictly"),
    ([0, 0], "must start at 0 and ascend strictly"),
    ([3, 0], "must start at 0 and ascend strictly"),
    ([0], "schedule field 'switch_steps' must be an int \\(2,\\) array"),
    ([0.0, 2.0], "schedule field 'switch_steps' must be an int"),
])
def test_rollout_switching_checks_the_schedule(switch_steps, match):
    template, arrays = sc.model(1, floating=True), design_arrays(sc.design(floating=True))
    interfaces = jnp.asarray([sc.configuration(1), sc.configuration(3)], jnp.int32)
    q0, v0 = jaxsoa.neutral(template), jnp.zeros(template.nv)
    run = lambda schedule: rollout_switching(template, arrays, q0, v0, lambda t, q, v: jnp.zeros_like(v), 0.01,  # noqa
                                             4, schedule=schedule, link_ids=jnp.asarray(sc.IDS))
    with pytest.raises(ValueError, match=match):
        run(TopologySchedule(interfaces, jnp.asarray(switch_steps)))
    with pytest.raises(TypeError, match="argument 'schedule' must be a TopologySchedule"):
        run(None)
    with pytest.raises(ValueError, match="schedule field 'interfaces' must be an int \\(K, s, n_if\\)"):
        run(TopologySchedule(interfaces[0], jnp.asarray([0])))
