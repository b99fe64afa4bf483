"""A leading-batch `rollout` on the batch-last core (`jaxsoa.integrators.rollout._rollout_batch`): the
batch carried through one scan as (B, ·) states, every stage's ABA one batch-last call. Checked in
float64 against the per-sample rollout under `jax.vmap` (a second code path: the per-sample
recursions), 1e-12 for states (the same equations, other rounding over 20 RK4 steps) and 1e-10 for
gradients; that it really takes the batch-last path; that other steps and `checks=True` keep the
per-sample rollout; one compilation for different trees of the same joint types.
"""

import contextlib
import dataclasses
import functools
import importlib
import io

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.ad_checkpoint import print_saved_residuals

import jaxsoa
from jaxsoa.algorithms import dynamics
from jaxsoa.integrators import rk4_step, semi_implicit_euler_step
from jaxsoa.integrators.steps import RK4
from jaxsoa.multibody import batched
from jaxsoa.multibody.joints import JointType
from tests.algorithms.test_batch_last import _tree_case
from tests.helpers.trees import counting, random_group, relative_error

DT, STEPS = 0.01, 20
rollout_module = importlib.import_module("jaxsoa.integrators.rollout")   # the package re-exports the function


def _case(seed, floating=True, batch=4):
    rng, model, _ = _tree_case(seed, n_links=6, floating=floating)
    q0 = jax.vmap(lambda k: jaxsoa.random_configuration(model, k))(jax.random.split(jax.random.key(seed), batch))
    return model, q0, jnp.asarray(rng.normal(size=(batch, model.nv))), jnp.asarray(rng.uniform(0.5, 2.0, model.nv))


def _per_sample(model, q0, v0, control, **options):
    return jax.vmap(lambda q, v: jaxsoa.rollout(model, q, v, control, DT, STEPS, **options))(q0, v0)


@pytest.mark.parametrize("step, control_at_stages", [(rk4_step, False), (rk4_step, True),
                                                     (semi_implicit_euler_step, False)])
def test_equals_the_per_sample_rollout(step, control_at_stages):
    model, q0, v0, gains = _case(1)

    def control(t, q, v):
        return -gains * v + jnp.sin(3.0 * t) * jnp.ones_like(v)
    options = dict(step=step, control_at_stages=control_at_stages)
    got = jax.jit(lambda q0, v0: jaxsoa.rollout(model, q0, v0, control, DT, STEPS, **options))(q0, v0)
    ref = jax.jit(lambda q0, v0: _per_sample(model, q0, v0, control, **options))(q0, v0)
    assert got.q.shape == (4, STEPS + 1, model.nq)
    assert relative_error(got.q, ref.q) < 1e-12 and relative_error(got.v, ref.v) < 1e-12
    assert bool(jnp.all(got.finite))


def test_takes_the_batch_last_path_and_keeps_the_per_sample_one_where_asked(monkeypatch):
    model, q0, v0, gains = _case(2)

    def control(t, q, v):
        return -gains * v
    ref = _per_sample(model, q0, v0, control)

    def per_sample_aba(*_):
        raise AssertionError("a stage took the per-sample ABA")
    with monkeypatch.context() as patch:
        patch.setattr(dynamics, "_aba_adjoint", per_sample_aba)       # the per-sample ABA's body calls it
        got = jaxsoa.rollout(model, q0, v0, control, DT, STEPS)
    assert relative_error(got.q, ref.q) < 1e-12
    own_step = functools.partial(rk4_step, tableau=RK4)               # the same step, not one of the known
    for options in (dict(step=own_step), dict(checks=True)):
        with monkeypatch.context() as patch:
            patch.setattr(dynamics, "_aba_adjoint", per_sample_aba)
            with pytest.raises(AssertionError, match="per-sample ABA"):
                jaxsoa.rollout(model, q0, v0, control, DT, STEPS, **options)


def test_one_compilation_for_different_trees():
    (_, first, _), (_, second, _) = random_group(np.random.default_rng(3), 6, 2, joint_types=(
        JointType.REVOLUTE, JointType.PRISMATIC, JointType.FIXED))
    names = dict(link_names=first.link_names, link_joint_names=first.link_joint_names)   # static metadata
    second = dataclasses.replace(second, **names)
    assert not np.array_equal(first.parent, second.parent)
    q0 = jax.vmap(lambda k: jaxsoa.random_configuration(first, k))(jax.random.split(jax.random.key(3), 4))
    v0 = jnp.ones((4, first.nv))
    fn, count = counting(lambda m, q0, v0: jaxsoa.rollout(m, q0, v0, lambda t, q, v: -v, DT, STEPS).q)
    compiled = jax.jit(fn)
    for model in (first, second, first):
        compiled(model, q0, v0)
    assert count[0] == 1


@pytest.mark.slow            # a rollout gradient compile on each path (~40 s on a 2-core machine)
def test_gradients_equal_the_per_sample_rollout():
    model, q0, v0, gains = _case(5)

    def loss(roll):
        def f(q0, v0, gains):
            trajectory = roll(q0, v0, lambda t, q, v: -gains * v + jnp.cos(t))
            return jnp.sum(jnp.sin(trajectory.q)) + jnp.sum(trajectory.v ** 2)
        return f
    got = jax.jit(jax.grad(loss(lambda q, v, c: jaxsoa.rollout(model, q, v, c, DT, STEPS)), argnums=(0, 1, 2)))(
        q0, v0, gains)
    ref = jax.jit(jax.grad(loss(lambda q, v, c: _per_sample(model, q, v, c)), argnums=(0, 1, 2)))(q0, v0, gains)
    for g, r in zip(got, ref, strict=True):
        assert relative_error(g, r) < 1e-10


def test_gradient_keeps_the_core_inside_the_step_loop(monkeypatch):
    """Linearising a loop, JAX evaluates the part of its body that depends only on loop constants (the
    model) outside the loop. The batch-last entry ties the model to the states (`tied_to_states`), so no
    per-sample value of the core is computed outside the step loop, of a rollout or of a user's own
    `lax.scan` of leading-batch `aba` calls: every other top-level scan of the gradient is model-only (no
    batch axis). The control (the tie removed) shows, in the user's loop, the hoisted passes with
    batch-sized outputs that made the gradient program 2.3× larger (the rollout's stages recompute the
    model's terms in reverse mode since, `rollout._aba_keeping_factor`, so the tie no longer shows there)."""
    batch, steps = 5, 3
    model, q0, v0, gains = _case(6, floating=False, batch=batch)

    def rollout_loss(q0, v0, gains):
        trajectory = jaxsoa.rollout(model, q0, v0, lambda t, q, v: -gains * v, DT, steps)
        return jnp.sum(trajectory.q ** 2)

    def user_loop_loss(q0, v0, gains):
        def body(state, _):                                     # semi-implicit Euler
            q, v = state
            v = v + DT * jaxsoa.aba(model, q, v, -gains[None] * v)
            return (jaxsoa.integrate(model, q, DT * v), v), None
        (q, _), _ = jax.lax.scan(body, (q0, v0), None, length=steps)
        return jnp.sum(q ** 2)

    def hoisted_batch_outputs(loss):
        jaxpr = jax.make_jaxpr(jax.grad(loss, argnums=(0, 1, 2)))(q0, v0, gains).jaxpr
        scans = [e for e in jaxpr.eqns if e.primitive.name == "scan"]
        assert [e.params["length"] for e in scans].count(steps) == 2          # the loop's forward and reverse
        return [v.aval.shape for e in scans if e.params["length"] != steps for v in e.outvars
                if v.aval.shape and v.aval.shape[-1] == batch]

    assert hoisted_batch_outputs(rollout_loss) == [] and hoisted_batch_outputs(user_loop_loss) == []
    monkeypatch.setattr(batched, "tied_to_states", lambda shared, states: (shared, states))
    assert len(hoisted_batch_outputs(user_loop_loss)) > 10


def test_reverse_mode_keeps_the_factor_per_stage_and_recomputes_the_rest(monkeypatch):
    """Reverse mode of a leading-batch rollout keeps per RK4 stage its increments, q̈ and ABA's `Factor`
    (`rollout._aba_keeping_factor`: a `jax.checkpoint` saving only those names) and recomputes the model's
    per-link data, frames and indices, dozens of small arrays that were each a residual buffer per stage and
    step (free-floating tree: 14 values stacked by the step loop, against 79 with plain `aba`, the control)."""
    model, q0, v0, gains = _case(7, floating=True, batch=4)

    def loss(q0, v0, gains):
        trajectory = jaxsoa.rollout(model, q0, v0, lambda t, q, v: -gains * v, DT, 2)
        return jnp.sum(trajectory.q ** 2)

    def kept():
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            print_saved_residuals(loss, q0, v0, gains)
        return [line for line in out.getvalue().splitlines() if "(rollout_steps)" in line]   # stacked per step

    with_policy = kept()
    assert len(with_policy) <= 16, with_policy
    monkeypatch.setattr(rollout_module, "_aba_keeping_factor", dynamics.aba)
    assert len(kept()) > 3 * len(with_policy)


def test_gradient_of_a_concrete_topology_compiles_no_guard(monkeypatch):
    """A concrete model stays concrete inside the rollout (its parent array is neither tied to the states nor a
    `jax.checkpoint` argument), so the stages' ABA compiles no guard of a traced topology (both paths: the space-arm
    rollout gradient took 18.4 s to compile instead of 9.6 s); a model passed to `jax.jit` still gets the guard."""
    model, q0, v0, gains = _case(9)
    fallbacks = []
    original = batched.per_sample_only
    monkeypatch.setattr(batched, "per_sample_only", lambda: fallbacks.append(1) or original())

    def loss(model, q0, v0):
        trajectory = jaxsoa.rollout(model, q0, v0, lambda t, q, v: -gains * v, DT, 3)
        return jnp.sum(trajectory.q**2) + jnp.sum(trajectory.v**2)

    jax.jit(jax.grad(lambda q0, v0: loss(model, q0, v0), argnums=(0, 1))).trace(q0, v0)
    assert fallbacks == []
    jax.jit(jax.grad(loss, argnums=(1, 2))).trace(model, q0, v0)          # a traced topology: guarded
    assert fallbacks
