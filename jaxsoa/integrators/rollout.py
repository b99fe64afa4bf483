"""The rollout driver: every time integration in the package is one `lax.scan` over steps
(`rollout_steps`), the initial state included in the output, optionally checkpointed per step.

Multibody rollouts (`rollout`, `rollout_constrained`, `rollout_switching`) go through it with one
step body: at the start of step k (time t_k = k dt) a *phase* gives the model and forward dynamics
that hold during the step and maps the state across a switch; the controller `control(t, q, v) -> τ
(nv,)` is then sampled once and held over the step (a digital controller) or, with
`control_at_stages=True`, evaluated at every integrator stage (the continuous closed loop,
integrated to the step's full order); then one `step(model, q, v, τ, dt)` (`rk4_step`,
`semi_implicit_euler_step`). Schedules are traced data (which cuts hold, which topology), so
changing them does not recompile.

`checkpoint=True` rematerialises each step in the backward pass (memory O(1) per step for long
differentiable horizons); a `jax.checkpoint_policies` policy (e.g.
`jax.checkpoint_policies.nothing_saveable`) checkpoints each step with that policy instead.

Validity: `Trajectory.first_nonfinite` / `.finite` report the first non-finite step (an invalid
traced topology NaN-marks its model, so it shows up there too); `checks=True` adds checkify checks
of the models, q0 and the trajectory — run such a rollout as
`checkify.checkify(partial(rollout, checks=True))(...)`. Leading batch axes on q0 / v0 run the
rollout per sample (`jaxsoa.multibody.arguments`); for `rollout` on a model of fixed, revolute,
prismatic and free (root) joints with one of this package's steps, the batch is instead carried
through one scan as (B, ·) states, so every stage's ABA is one batch-last call (docs/performance.md,
"Rollouts on the batch-last core"); the controller still sees one sample.
"""

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import checkify

from jaxsoa.algorithms import batch_last
from jaxsoa.algorithms.batch_last_frames import supports
from jaxsoa.algorithms.dynamics import aba
from jaxsoa.constraints.closure import LoopClosure
from jaxsoa.constraints.dynamics import forward_dynamics_constrained, project_velocity
from jaxsoa.integrators.steps import rk4_step, semi_implicit_euler_step
from jaxsoa.integrators.tangents import with_carried_tangents
from jaxsoa.multibody.arguments import BatchedPath, entry_point
from jaxsoa.multibody.checks import check_configuration, check_model
from jaxsoa.multibody.model import Model
from jaxsoa.topology.reconfigure import DesignArrays, apply_configuration, remap_state


class Trajectory(NamedTuple):
    """States at t_k = k dt, k = 0 … n_steps, initial state first: q (n_steps+1, nq), v (n_steps+1, nv)
    (leading batch axes first for a batched call). `first_nonfinite` is the first step whose state
    has a NaN or inf entry (−1 if none); `finite` says whether there is none."""
    q: jax.Array
    v: jax.Array

    @property
    def first_nonfinite(self) -> jax.Array:
        """() int32 (batch shape for a batch): first k with a non-finite q_k or v_k, −1 if none."""
        bad = ~(jnp.all(jnp.isfinite(self.q), axis=-1) & jnp.all(jnp.isfinite(self.v), axis=-1))
        return jnp.where(jnp.any(bad, axis=-1), jnp.argmax(bad, axis=-1), -1).astype(jnp.int32)

    @property
    def finite(self) -> jax.Array:
        """() bool: every state of the trajectory is finite."""
        return self.first_nonfinite < 0


def check_trajectory(trajectory: Trajectory):
    """checkify check that every state is finite, naming the first non-finite step."""
    checkify.check(trajectory.finite, "rollout state is non-finite from step {k} on (t = k dt; NaN or inf in q or v)",
                   k=trajectory.first_nonfinite)


class TopologySchedule(NamedTuple):
    """Topology switches as data: configuration parameters ``interfaces (K, s, n_if)`` int, entry j
    holding for the steps ``switch_steps[j] <= k < switch_steps[j + 1]`` (``switch_steps (K,)``
    ascending, ``switch_steps[0] = 0``)."""
    interfaces: jax.Array
    switch_steps: jax.Array


def rollout_steps(advance, x0, dt, n_steps, *, checkpoint=False):
    """x_{k+1} = advance(t_k, x_k, k), t_k = k dt, for k = 0 … n_steps − 1 in one `lax.scan`. x0 any
    PyTree; k is the step index (int32; schedules index by it), t_k has the dtype of x0's first
    floating-point leaf. Returns the states stacked along a new leading axis (n_steps + 1, …), x0
    first (a PyTree of x0's structure). `checkpoint`: False, True or a `jax.checkpoint_policies`
    policy (module docstring)."""
    dtype = next(d for d in map(jnp.result_type, jax.tree.leaves(x0)) if jnp.issubdtype(d, jnp.floating))

    def body(x, k):
        x_next = advance(k.astype(dtype) * dt, x, k)
        return x_next, x_next

    if callable(checkpoint):
        body = jax.checkpoint(body, policy=checkpoint)
    elif checkpoint:
        body = jax.checkpoint(body)
    steps = jnp.arange(n_steps, dtype=jnp.int32)
    _, xs = jax.lax.scan(body, with_carried_tangents(body, x0, steps[0]), steps)   # one linearisation of the step
    return jax.tree.map(lambda first, rest: jnp.concatenate([first[None], rest]), x0, xs)


def _checked(trajectory: Trajectory, checks: bool, model: Model, models: Model, q0) -> Trajectory:
    """With `checks`, add the checkify checks of a rollout: `check_model` of every model used
    (`models`, batched along a leading axis when it differs from `model`), `check_configuration`
    of q0 and `check_trajectory` (run the rollout under `checkify.checkify`)."""
    if checks:
        if models is model:
            check_model(model)
        else:
            jax.vmap(check_model)(models)
        check_configuration(model, q0)
        check_trajectory(trajectory)
    return trajectory


def _check_options(control, step, checkpoint, control_at_stages):
    """TypeError naming the option unless `control` and `step` are functions, `checkpoint` is a bool or a
    checkpoint policy and `control_at_stages` a bool."""
    for name, value in (("control", control), ("step", step)):
        if not callable(value):
            what = "control(t, q, v) -> tau (nv,)" if name == "control" else "step(model, q, v, tau, dt)"
            raise TypeError(f"argument '{name}' must be a function {what}, got {type(value).__name__}")
    if not (isinstance(checkpoint, (bool, np.bool_)) or callable(checkpoint)):
        raise TypeError(f"argument 'checkpoint' must be True, False or a jax.checkpoint_policies policy, "
                        f"got {checkpoint!r}")
    if not isinstance(control_at_stages, (bool, np.bool_)):
        raise TypeError(f"argument 'control_at_stages' must be True or False, got {control_at_stages!r}")


def _rollout(phase, q0, v0, control, dt, n_steps, *, step, checkpoint, control_at_stages) -> Trajectory:
    """The multibody step body on `rollout_steps`. phase(k, q, v) -> (model, dynamics or None, q, v):
    what holds during step k and the state after the map at its start (None: the step's own ABA)."""
    _check_options(control, step, checkpoint, control_at_stages)

    def advance(t, state, k):
        model, dynamics, q, v = phase(k, *state)
        if control_at_stages:
            tau = lambda offset, q_i, v_i: control(t + offset, q_i, v_i)   # noqa: E731
        else:
            tau = control(t, q, v)
        options = {} if dynamics is None else {"dynamics": dynamics}
        return Trajectory(*step(model, q, v, tau, dt, **options))

    return rollout_steps(advance, Trajectory(q0, v0), dt, n_steps, checkpoint=checkpoint)


def _rollout_one(model: Model, q0, v0, control, dt, n_steps, *, step=rk4_step, checkpoint=False,
                 control_at_stages=False, checks=False) -> Trajectory:
    trajectory = _rollout(lambda k, q, v: (model, None, q, v), q0, v0, control, dt, n_steps, step=step,
                          checkpoint=checkpoint, control_at_stages=control_at_stages)
    return _checked(trajectory, checks, model, model, q0)


def _aba_keeping_factor(model: Model, q, v, tau):
    """The leading-batch ABA of a rollout's stages, whose reverse mode keeps q̈ and the `Factor` only and recomputes
    the model's per-link data, frames and indices: each kept value is a residual buffer per stage and step. The
    checkpoint closes over the model, so a concrete topology stays concrete inside it: as a `jax.checkpoint` argument
    it became traced, and the entry point compiled its guard of a traced topology, both paths (space-arm rollout
    gradient 9.6 → 18.4 s to compile; docs/performance.md, "Smaller gradient programs of the seed systems")."""
    policy = jax.checkpoint_policies.save_only_these_names(batch_last.SAVED)
    return jax.checkpoint(lambda q, v, tau: aba(model, q, v, tau), policy=policy)(q, v, tau)

BATCH_AGNOSTIC_STEPS = (rk4_step, semi_implicit_euler_step)
"""The steps whose per-sample body also runs on (B, ·) states (every call in it is an entry point)."""


def _rollout_batch(model: Model, q0, v0, control, dt, n_steps, *, step=rk4_step, checkpoint=False,
                   control_at_stages=False, checks=False) -> Trajectory:
    """`rollout` of a batch, q0 (B, nq), v0 (B, nv) -> (B, n_steps + 1, ·): the state is carried as
    (B, ·) through one scan, so each stage's forward dynamics is one leading-batch call (the batch-last
    core) instead of B per-sample calls under `jax.vmap`; `control` runs per sample (vmapped). Another
    `step` than those of `BATCH_AGNOSTIC_STEPS`, or `checks`, runs the per-sample rollout under vmap."""
    _check_options(control, step, checkpoint, control_at_stages)
    options = dict(step=step, checkpoint=checkpoint, control_at_stages=control_at_stages, checks=checks)
    if step not in BATCH_AGNOSTIC_STEPS or checks:
        return jax.vmap(lambda q, v: _rollout_one(model, q, v, control, dt, n_steps, **options))(q0, v0)
    per_sample_control = jax.vmap(control, in_axes=(None, 0, 0))
    batch_step = functools.partial(step.__wrapped__, dynamics=_aba_keeping_factor)
    trajectory = _rollout(lambda k, q, v: (model, None, q, v), q0, v0, per_sample_control, dt, n_steps,
                          step=batch_step, checkpoint=checkpoint, control_at_stages=control_at_stages)
    return Trajectory(*(jnp.swapaxes(x, 0, 1) for x in trajectory))                 # (B, n_steps + 1, ·)


@entry_point(q0='q', v0='v', dt='dt', n_steps='steps', batched=BatchedPath(supports, _rollout_batch))
def rollout(model: Model, q0, v0, control, dt, n_steps, *, step=rk4_step, checkpoint=False,
            control_at_stages=False, checks=False) -> Trajectory:
    """Simulate `n_steps` steps of `step` (default `rk4_step` with ABA) under `control(t, q, v)`.
    q0 (nq,), v0 (nv,). Options as in the module docstring; a leading-batch call on a model of the
    batch-last core's joints carries the whole batch through one scan (`_rollout_batch`)."""
    return _rollout_one(model, q0, v0, control, dt, n_steps, step=step, checkpoint=checkpoint,
                        control_at_stages=control_at_stages, checks=checks)


def _check_active(active, n_steps, n_cuts):
    """`active` as a bool array of shape (n_steps, n_cuts) (ValueError / TypeError naming it otherwise)."""
    active = jnp.asarray(active)
    if active.shape != (n_steps, n_cuts):
        raise ValueError(f"argument 'active' has shape {active.shape}, expected (n_steps, n_cuts) = "
                         f"({n_steps}, {n_cuts}): one row per step, one column per cut")
    if active.dtype != jnp.bool_:
        raise TypeError(f"argument 'active' must be a bool array, got dtype {active.dtype}")
    return active


def _check_schedule(schedule):
    """(interfaces (K, s, n_if) int, switch_steps (K,) int32) of a `TopologySchedule`; a concrete
    `switch_steps` must start at 0 and ascend strictly (ValueError / TypeError naming the field)."""
    if not isinstance(schedule, TopologySchedule):
        raise TypeError(f"argument 'schedule' must be a TopologySchedule, got {type(schedule).__name__}")
    interfaces, switch_steps = jnp.asarray(schedule.interfaces), jnp.asarray(schedule.switch_steps)
    if interfaces.ndim != 3 or not jnp.issubdtype(interfaces.dtype, jnp.integer):
        raise ValueError(f"schedule field 'interfaces' must be an int (K, s, n_if) array, got "
                         f"{interfaces.dtype}{list(interfaces.shape)}")
    if switch_steps.shape != interfaces.shape[:1] or not jnp.issubdtype(switch_steps.dtype, jnp.integer):
        raise ValueError(f"schedule field 'switch_steps' must be an int ({interfaces.shape[0]},) array (one step "
                         f"per entry of 'interfaces'), got {switch_steps.dtype}{list(switch_steps.shape)}")
    if not isinstance(schedule.switch_steps, jax.core.Tracer):
        steps = np.asarray(schedule.switch_steps)
        if steps[0] != 0 or np.any(np.diff(steps) <= 0):
            raise ValueError(f"schedule field 'switch_steps' = {steps.tolist()} must start at 0 and ascend strictly")
    return interfaces, switch_steps.astype(jnp.int32)


@entry_point(closure='closure', q0='q', v0='v', dt='dt', n_steps='steps')
def rollout_constrained(model: Model, q0, v0, control, closure: LoopClosure, dt, n_steps, *, active=None,
                        impact=True, baumgarte=None, method="recursive", rcond=None, step=rk4_step,
                        checkpoint=False, control_at_stages=False, checks=False) -> Trajectory:
    """Rollout of the closed-loop dynamics (`forward_dynamics_constrained` with `baumgarte`, `method`,
    `rcond`). active (n_steps, n_cuts) bool: which cuts hold during each step (default
    `closure.active` throughout), so grasping at t1 and releasing at t2 is data, not a recompile.
    With `impact`, a cut switching on at step k first applies the plastic impact `project_velocity`
    (its position error is then left to Baumgarte). Other options as in the module docstring."""
    n_cuts = closure.active.shape[0]
    active = jnp.broadcast_to(closure.active, (n_steps, n_cuts)) if active is None else _check_active(active, n_steps,
                                                                                                       n_cuts)

    def phase(k, q, v):
        active_k, before = active[k], active[jnp.maximum(k - 1, 0)]
        if impact:                                                      # v⁺ = v − M⁻¹ Gᵀ (G M⁻¹ Gᵀ)⁺ G v
            v = project_velocity(model, q, v, closure._replace(active=active_k & ~before), rcond)
        closure_k = closure._replace(active=active_k)

        def dynamics(m, q_i, v_i, tau_i):
            return forward_dynamics_constrained(m, q_i, v_i, tau_i, closure_k, baumgarte=baumgarte, method=method,
                                                rcond=rcond)[0]

        return model, dynamics, q, v

    trajectory = _rollout(phase, q0, v0, control, dt, n_steps, step=step, checkpoint=checkpoint,
                          control_at_stages=control_at_stages)
    return _checked(trajectory, checks, model, model, q0)


@entry_point(q0='q', v0='v', dt='dt', n_steps='steps')
def rollout_switching(template: Model, arrays: DesignArrays, q0, v0, control, dt, n_steps, *,
                      schedule: TopologySchedule, link_ids=None, step=rk4_step, checkpoint=False,
                      control_at_stages=False, checks=False) -> Trajectory:
    """Rollout through topology switches (a reconfigurable model: `template` and `arrays` of
    `jaxsoa.topology.reconfigure`). The K models of `schedule` are built once with
    `apply_configuration`; during step k the model of its segment holds, and at a switch the state
    is first mapped by `remap_state` against the previous segment's inboard interfaces. The entry
    of the result at a switch time is the state *before* the map (the end of the previous segment).
    Other options as in the module docstring."""
    interfaces, switch_steps = _check_schedule(schedule)
    models = jax.vmap(lambda i: apply_configuration(template, arrays, i, link_ids))(interfaces)

    def segment(k):
        return jnp.maximum(jnp.sum(switch_steps <= k) - 1, 0)

    def phase(k, q, v):
        j, j_before = segment(k), segment(jnp.maximum(k - 1, 0))
        model = jax.tree.map(lambda field: field[j], models)
        q, v = remap_state(model, models.inboard_interface[j_before], q, v)
        return model, None, q, v

    trajectory = _rollout(phase, q0, v0, control, dt, n_steps, step=step, checkpoint=checkpoint,
                          control_at_stages=control_at_stages)
    return _checked(trajectory, checks, template, models, q0)
