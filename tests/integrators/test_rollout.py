"""The rollout driver against a second code path: each entry point (`rollout_steps`, `rollout` with
the control held or evaluated at the stages, `rollout_constrained` with a release and a re-grasp,
`rollout_switching` through two topology switches) equals a Python loop of the same steps, one
compiled step at a time (1e-12: the same arithmetic, compiled as one scan instead of one step);
`checkpoint=True` or a policy gives the plain gradient (1e-12) and matches central finite
differences (1e-6: FD truncation); a topology switch inside a rollout compiles once."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsoa
from jaxsoa.constraints.closure import constraint_error, loop_closure
from jaxsoa.constraints.dynamics import forward_dynamics_constrained, project_velocity
from jaxsoa.integrators import (
    TopologySchedule,
    Trajectory,
    rk4_step,
    rollout,
    rollout_constrained,
    rollout_steps,
    rollout_switching,
    semi_implicit_euler_step,
)
from jaxsoa.multibody.joints import JointType
from jaxsoa.topology.reconfigure import design_arrays, remap_state
from sims import dual_arm_spacecraft as sc
from tests.helpers.trees import counting

TOL = 1e-12


@pytest.fixture(scope="module")
def chain():
    """A spatial 3-link chain (revolute z, y, y; rods along x with off-axis centres of mass)."""
    n = 3
    placement = np.zeros((n, 3))
    placement[1:, 0] = 0.5
    inertia = [np.diag([0.01, 0.05, 0.05]) + 0.002 * k for k in range(n)]
    return jaxsoa.build_model([-1, 0, 1], [JointType.REVOLUTE] * n, [[0, 0, 1.0], [0, 1.0, 0], [0, 1.0, 0]],
                              [np.eye(3)] * n, placement, [1.0, 0.8, 0.6], [[0.25, 0.02, 0.0]] * n, inertia,
                              gravity=(0, 0, -9.81), dtype=jnp.float64)


def control(t, q, v):
    return -2.0 * q - 0.3 * v + 0.5 * jnp.sin(3.0 * t)


def step_loop(step_fn, q, v, n_steps):
    """Trajectory of a Python loop: (q, v) ← step_fn(k, q, v) for k < n_steps, initial state first."""
    qs, vs = [q], [v]
    for k in range(n_steps):
        q, v = step_fn(k, q, v)
        qs.append(q)
        vs.append(v)
    return np.stack(qs), np.stack(vs)


def test_rollout_steps_matches_loop():
    """A PyTree state (a tuple of a (2,) array and a scalar) whose update uses t and k: the stacked
    output has x0 first and equals the Python loop."""
    dt, n_steps = 0.1, 7

    def advance(t, x, k):
        a, b = x
        return a + dt * jnp.sin(t) * a * a[::-1], b + k.astype(b.dtype) * a[0]

    x0 = (jnp.array([0.3, -0.4]), jnp.float64(1.0))
    xs = jax.jit(lambda x: rollout_steps(advance, x, dt, n_steps))(x0)
    x, expected = x0, [x0]
    for k in range(n_steps):
        x = advance(jnp.float64(k * dt), x, jnp.int32(k))
        expected.append(x)
    assert xs[0].shape == (n_steps + 1, 2) and xs[1].shape == (n_steps + 1,)
    np.testing.assert_allclose(xs[0], np.stack([e[0] for e in expected]), rtol=0, atol=TOL)
    np.testing.assert_allclose(xs[1], np.stack([e[1] for e in expected]), rtol=0, atol=TOL)


@pytest.mark.parametrize(("step", "control_at_stages"),
                         [(rk4_step, False), (rk4_step, True), (semi_implicit_euler_step, False)])
def test_rollout_matches_step_loop(chain, step, control_at_stages):
    """τ = control(t_k, q_k, v_k) held over step k, or control(t_k + offset, q_i, v_i) at each stage."""
    dt, n_steps = 0.01, 30
    q0, v0 = jnp.array([0.4, -0.3, 0.8]), jnp.array([0.5, 0.2, -0.4])
    result = jax.jit(lambda q, v: rollout(chain, q, v, control, dt, n_steps, step=step,
                                          control_at_stages=control_at_stages))(q0, v0)
    assert isinstance(result, Trajectory) and result.q.shape == (n_steps + 1, 3)

    @jax.jit
    def one(k, q, v):
        t = k * dt
        tau = (lambda offset, q_i, v_i: control(t + offset, q_i, v_i)) if control_at_stages else control(t, q, v)
        return step(chain, q, v, tau, dt)

    ref_q, ref_v = step_loop(lambda k, q, v: one(jnp.float64(k), q, v), q0, v0, n_steps)
    np.testing.assert_allclose(result.q, ref_q, rtol=0, atol=TOL)
    np.testing.assert_allclose(result.v, ref_v, rtol=0, atol=TOL)


@pytest.mark.slow
def test_rollout_constrained_matches_step_loop(chain):
    """The chain's tip pinned to the world (spherical cut, closed at q0), released at k1 and grasped
    again at k2: the plastic impact at k2, then RK4 of the Baumgarte-stabilised constrained dynamics.
    Python loop with the old semantics: v ← project_velocity(cuts switching on) at the start of each
    step, then `rk4_step` with `forward_dynamics_constrained` of the cuts active in that step."""
    dt, n_steps, k1, k2 = 2e-3, 40, 10, 25
    q0, v0 = jnp.array([0.4, -0.3, 0.8]), jnp.array([0.0, 0.0, 0.0])
    R, p = jaxsoa.forward_kinematics(chain, q0)
    tip = (0.5, 0.0, 0.0)
    closure = loop_closure(2, -1, (np.eye(3), tip), (np.eye(3), np.asarray(p[2] + R[2] @ jnp.asarray(tip))),
                           "spherical", model=chain)
    assert float(jnp.abs(constraint_error(chain, q0, closure)).max()) < 1e-12
    active = jnp.ones((n_steps, 1), bool).at[k1:k2].set(False)
    baumgarte = (20.0, 20.0)
    result = jax.jit(lambda q, v: rollout_constrained(chain, q, v, control, closure, dt, n_steps, active=active,
                                                      baumgarte=baumgarte))(q0, v0)

    @jax.jit
    def one(k, q, v):
        newly = active[k] & ~active[jnp.maximum(k - 1, 0)]
        v = project_velocity(chain, q, v, closure._replace(active=newly))
        closure_k = closure._replace(active=active[k])

        def dynamics(m, q_i, v_i, tau_i):
            return forward_dynamics_constrained(m, q_i, v_i, tau_i, closure_k, baumgarte=baumgarte)[0]

        return rk4_step(chain, q, v, control(k.astype(q.dtype) * dt, q, v), dt, dynamics=dynamics)

    ref_q, ref_v = step_loop(lambda k, q, v: one(jnp.int32(k), q, v), q0, v0, n_steps)
    np.testing.assert_allclose(result.q, ref_q, rtol=0, atol=TOL)
    np.testing.assert_allclose(result.v, ref_v, rtol=0, atol=TOL)
    assert np.abs(ref_q[k2] - ref_q[k1]).max() > 1e-3                   # released: the tip moved


def test_rollout_switching_compiles_once_and_matches_loop():
    """The floating dual-arm spacecraft through configurations 1 → 3 → 2 (RK4, control at the
    stages), then other topologies at other times with the same compiled program (one trace). The
    loop steps the host-built (validated) model of each segment and applies `remap_state` at each
    switch."""
    design = sc.design(floating=True)
    template, arrays = sc.model(1, floating=True), design_arrays(design)
    dt, n_steps = 0.01, 12
    rng = np.random.default_rng(0)
    q0 = np.asarray(jaxsoa.neutral(template)) + np.r_[rng.normal(size=3), np.zeros(4), 0.3 * rng.normal(size=6)]
    q0, v0 = jnp.asarray(q0), jnp.asarray(0.2 * rng.normal(size=template.nv))

    def run(interfaces, switch_steps, q, v):
        return rollout_switching(template, arrays, q, v, lambda t, q, v: -0.5 * v + 0.1 * jnp.sin(t), dt, n_steps,
                                 schedule=TopologySchedule(interfaces, switch_steps), link_ids=jnp.asarray(sc.IDS),
                                 control_at_stages=True)

    counted, count = counting(run)
    run = jax.jit(counted)
    order, switch_steps = [1, 3, 2], [0, 4, 9]
    configurations = jnp.asarray([sc.configuration(c) for c in order], jnp.int32)
    result = run(configurations, jnp.asarray(switch_steps), q0, v0)
    run(configurations[::-1], jnp.asarray([0, 2, 7]), q0, v0)
    assert count[0] == 1

    models = [sc.model(c, floating=True) for c in order]
    one = jax.jit(lambda model, t, q, v: rk4_step(model, q, v, lambda offset, q_i, v_i:
                                                  -0.5 * v_i + 0.1 * jnp.sin(t + offset), dt))
    segment = np.searchsorted(switch_steps, np.arange(n_steps), side="right") - 1

    def step_fn(k, q, v):
        model = models[segment[k]]
        if k > 0 and segment[k] != segment[k - 1]:
            q, v = remap_state(model, models[segment[k - 1]].inboard_interface, q, v)
        return one(model, jnp.float64(k * dt), q, v)

    ref_q, ref_v = step_loop(step_fn, q0, v0, n_steps)
    np.testing.assert_allclose(result.q, ref_q, rtol=0, atol=1e-10)
    np.testing.assert_allclose(result.v, ref_v, rtol=0, atol=1e-10)


@pytest.mark.parametrize("checkpoint", [True, jax.checkpoint_policies.nothing_saveable])
def test_checkpoint_same_gradient(chain, checkpoint):
    """d (Σ q_N²) / d (q0, gain) through a 40-step RK4 rollout with the control at the stages."""
    q0, v0 = jnp.array([0.4, -0.3, 0.8]), jnp.array([0.5, 0.2, -0.4])

    def loss(q0, gain, checkpoint):
        qs, _ = rollout(chain, q0, v0, lambda t, q, v: -gain * q - 0.3 * v, 0.01, 40, checkpoint=checkpoint,
                        control_at_stages=True)
        return jnp.sum(qs[-1] ** 2)

    grad = jax.jit(jax.grad(loss, argnums=(0, 1)), static_argnums=2)
    g_plain, g_ckpt = grad(q0, 2.0, False), grad(q0, 2.0, checkpoint)
    for a, b in zip(g_ckpt, g_plain, strict=True):
        np.testing.assert_allclose(a, b, rtol=TOL, atol=TOL)
    h = 1e-5
    forward = jax.jit(loss, static_argnums=2)
    fd = (forward(q0, 2.0 + h, False) - forward(q0, 2.0 - h, False)) / (2 * h)
    np.testing.assert_allclose(g_plain[1], fd, rtol=1e-6)
