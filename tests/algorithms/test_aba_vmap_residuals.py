"""Reverse mode of `aba` under `jax.vmap` keeps the forward's `Factor` (`jaxsoa.algorithms.batch_last_vmap`,
`jaxsoa.multibody.vmap_rule.vmap_to_batch`'s residuals): one forward ABA on the core instead of two, the same
gradients as the per-sample program (float64, 1e-11: different reduction orders), and the per-sample path
wherever the residuals do not come from the same `vmap` (a `jacrev` of one sample, the cotangents batched)."""

import jax
import jax.extend.core
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsoa
from jaxsoa.algorithms import batch_last_vmap, dynamics
from jaxsoa.multibody import arguments, batched, vmap_rule
from jaxsoa.multibody.joints import JointType
from tests.algorithms.test_aba_vmap import _models, _states
from tests.algorithms.test_batch_last import _tree_case
from tests.helpers.trees import random_group, relative_error, stack_models


def _loss(model):
    def loss(q, v, tau, f_ext):
        return jnp.sum(jnp.sin(jaxsoa.aba(model, q, v, tau, f_ext)))
    return loss


def _loops_carrying(compiled, carried: str) -> int:
    """How many loops of a compiled program carry an array whose shape text contains `carried`."""
    return sum(" while(" in line and carried in line.split(" while(")[0] for line in compiled.as_text().splitlines())


def _forward_passes(model, batch, fn, *args):
    """How many forward ABAs on the core the compiled fn(*args) runs: loops carrying ABA's articulated
    inertias and biases, (n + 1, 27, B) (the solves with a `Factor` carry (n + 1, 6, B))."""
    return _loops_carrying(jax.jit(lambda *a: fn(*a)).lower(*args).compile(), f"[{model.n_links + 1},27,{batch}]")


@pytest.mark.parametrize("name", [pytest.param("fixed base", marks=pytest.mark.slow), "free-flyer",
                                  pytest.param("spherical", marks=pytest.mark.slow)])
def test_vmap_gradient_runs_one_forward_and_equals_the_per_sample_program(name, monkeypatch):
    """vmap(value_and_grad) of an ABA loss: one forward ABA on the core (two with the residuals dropped, the
    control: the VJP recomputes the forward); gradients w.r.t. q, v, τ and f_ext equal the per-sample
    program's, in one chunk and in chunks (16 samples in 2 chunks of 8, in 4 of 5: the last one padded)."""
    model = _models()[name]
    states = _states(model, np.random.default_rng(12))
    grad = jax.vmap(jax.value_and_grad(_loss(model), argnums=(0, 1, 2, 3)))
    assert _forward_passes(model, len(states[0]), grad, *states) == 1
    with monkeypatch.context() as patch:
        patch.setattr(arguments, "vmappable_call",
                      lambda entry, fn, args, kinds, reverse, residuals=None, given=None:
                      vmap_rule.vmappable_call(entry, fn, args, kinds, reverse, None, given))
        assert _forward_passes(model, len(states[0]), grad, *states) == 2
    with monkeypatch.context() as patch:
        patch.setattr(vmap_rule, "VMAP_MIN_BATCH", 10**9)
        reference = jax.jit(lambda *x: grad(*x))(*states)
    for chunk in (batched.BATCH_CHUNK, 8, 5):                  # one chunk, whole chunks, a padded last one
        with monkeypatch.context() as patch:
            patch.setattr(batched, "BATCH_CHUNK", chunk)
            got = jax.jit(lambda *x: grad(*x))(*states)
        for g, r in zip(jax.tree.leaves(got), jax.tree.leaves(reference), strict=True):
            assert relative_error(g, r) < 1e-11


def test_vmap_gradient_with_a_traced_topology_runs_one_forward(monkeypatch):
    """The model passed to `jax.jit` (its topology traced, so the core's result is guarded by "every free joint on
    the world", `batched.guarded_residuals`): reverse mode under `vmap` still keeps the forward's `Factor`, one
    forward ABA on the core (two before: the residuals were dropped for a traced topology); gradients equal the
    closed-over model's program (1e-11) and its per-sample program's."""
    model = _models()["free-flyer"]
    states = _states(model, np.random.default_rng(17))

    def grad(model, *states):
        return jax.vmap(jax.value_and_grad(_loss(model), argnums=(0, 1, 2, 3)))(*states)

    assert _forward_passes(model, len(states[0]), grad, model, *states) == 1
    got = jax.jit(grad)(model, *states)
    closed = jax.jit(lambda *x: grad(model, *x))(*states)
    with monkeypatch.context() as patch:
        patch.setattr(vmap_rule, "VMAP_MIN_BATCH", 10**9)
        per_sample = jax.jit(grad)(model, *states)
    for g, c, p in zip(jax.tree.leaves(got), jax.tree.leaves(closed), jax.tree.leaves(per_sample), strict=True):
        assert relative_error(g, c) < 1e-11 and relative_error(g, p) < 1e-11


def test_vmap_gradient_over_per_sample_models():
    """A `vmap` over models (a stack of random trees) and states: the forward and its residuals run on the
    stacked core; gradients equal the per-model autodiff of the recursion (1e-10)."""
    rng = np.random.default_rng(20)
    models = [m for _, m, _ in random_group(rng, 6, vmap_rule.VMAP_MIN_BATCH,
                                            joint_types=(JointType.REVOLUTE, JointType.PRISMATIC))]
    stacked = stack_models(models)
    q, v, tau, _ = _states(models[0], np.random.default_rng(13))

    def loss(fd):
        return lambda model, q, v, tau: jnp.sum(jnp.sin(fd(model, q, v, tau)))
    grad = jax.vmap(jax.grad(loss(jaxsoa.aba), argnums=(1, 2, 3)))
    assert _forward_passes(models[0], len(q), grad, stacked, q, v, tau) == 1
    got = jax.jit(grad)(stacked, q, v, tau)
    ref = jax.jit(jax.vmap(jax.grad(loss(dynamics.aba_autodiff), argnums=(1, 2, 3))))(stacked, q, v, tau)
    for g, r in zip(got, ref, strict=True):
        assert relative_error(g, r) < 1e-10


@pytest.mark.parametrize("name", ["fixed base", "free-flyer", "spherical"])
def test_placeholder_has_the_shape_of_one_sample_of_the_forward(name):
    model = _models()[name]
    q, v, tau, f_ext = _states(model, np.random.default_rng(14), batch=3)
    forward = jax.eval_shape(lambda *x: batch_last_vmap.aba_forward(model, *x)[1], q, v, tau, f_ext)
    placeholder = batch_last_vmap.aba_placeholder(model, q[0], v[0], tau[0], f_ext[0])
    assert jax.tree.structure(forward) == jax.tree.structure(placeholder)
    for f, p in zip(jax.tree.leaves(forward), jax.tree.leaves(placeholder), strict=True):
        assert f.shape == (3, *p.shape) and f.dtype == p.dtype


def test_jacrev_of_one_sample_does_not_use_the_placeholder():
    """`jacrev` of one sample's q̈ w.r.t. τ on 20 dofs batches only the cotangents (20 ≥ the rule's minimum):
    the residuals are the per-sample placeholder (zeros), not batched by that `vmap`, so the per-sample VJP
    runs; the result is M⁻¹ (CRBA's inverse, 1e-10). Under a `vmap` of samples too."""
    _, model, _ = _tree_case(3, n_links=20, armature=False)
    q, v, tau, _ = _states(model, np.random.default_rng(15))
    M_inv = jnp.linalg.inv(jax.vmap(lambda q: jaxsoa.crba(model, q))(q))
    one = jax.jit(jax.jacrev(lambda t: jaxsoa.aba(model, q[0], v[0], t)))(tau[0])
    assert relative_error(one, M_inv[0]) < 1e-10
    many = jax.jit(jax.vmap(jax.jacrev(lambda q, v, t: jaxsoa.aba(model, q, v, t), argnums=2)))(q, v, tau)
    assert relative_error(many, M_inv) < 1e-10


@pytest.mark.parametrize("size, chunk", [(16, 8), (16, 5), (6, 512)])
def test_residual_rows_give_each_chunk_its_own_block_back(size, chunk):
    """`_to_rows` (chunks stacked (count, ..., width) -> (B, ...)) and `_from_rows` are inverse for whole chunks
    (one reshape: row b is not sample b), a padded last chunk (the transpose: row b is sample b, the padding
    rows copies of the last) and one chunk; exact (they only move entries)."""
    count, width = batched.chunk_shape(size, chunk)
    x = jnp.arange(count * 3 * 2 * width, dtype=jnp.float64).reshape((count, 3, 2, width))
    if count * width > size:                    # a chunked call's padded entries: copies of the last sample
        flat = jnp.moveaxis(x, -1, 1).reshape((count * width, 3, 2))
        flat = flat.at[size:].set(flat[size - 1])
        x = jnp.moveaxis(flat.reshape((count, width, 3, 2)), 1, -1)
        np.testing.assert_array_equal(batch_last_vmap._to_rows(x, size), flat[:size])
    rows = batch_last_vmap._to_rows(x, size)
    assert rows.shape == (size, 3, 2)
    np.testing.assert_array_equal(batch_last_vmap._from_rows(rows, count, width), x)


def test_the_forward_reshapes_its_factor_once_outside_the_chunk_loop(monkeypatch):
    """`aba_forward` over whole chunks: no reshape of a `Factor` leaf inside the chunk loop (one per chunk was a
    copy there, 1.6× ABA's value against 1.2×, docs/performance.md), one per leaf after it."""
    monkeypatch.setattr(batched, "BATCH_CHUNK", 4)
    model = _models()["free-flyer"]
    q, v, tau, f_ext = (x[:12] for x in _states(model, np.random.default_rng(14)))
    jaxpr = jax.make_jaxpr(lambda *x: batch_last_vmap.aba_forward(model, *x))(q, v, tau, f_ext).jaxpr
    loops = [eqn for eqn in jaxpr.eqns if eqn.primitive.name == "scan"]
    assert len(loops) == 1

    def factor_reshapes(jaxpr):                           # (..., width) -> (width, ...), nested jaxprs included
        found = [e for e in jaxpr.eqns if e.primitive.name == "reshape" and e.invars[0].aval.ndim >= 2
                 and e.invars[0].aval.shape[-1] == 4 and e.outvars[0].aval.shape[0] == 4]
        return found + [e for eqn in jaxpr.eqns for sub in jax.extend.core.jaxprs_in_params(eqn.params)
                        for e in factor_reshapes(sub)]

    assert factor_reshapes(loops[0].params["jaxpr"].jaxpr) == []
    n_leaves = len(jax.tree.leaves(batch_last_vmap.aba_placeholder(model, q[0], v[0], tau[0])[1]))
    after = [e for e in jaxpr.eqns if e.primitive.name == "reshape" and e.invars[0].aval.shape[0] == 3
             and e.outvars[0].aval.shape[0] == 12]
    assert len(after) >= n_leaves


def test_per_sample_reverse_mode_runs_no_second_forward(monkeypatch):
    """One sample's gradient through a 3-step RK4 rollout (no `vmap`: the per-sample reverse mode): the VJP runs
    at the forward's q̈ (`BatchedPath.given`): fewer ABA-type loops than the control that recomputes the forward
    (the rule's `given` dropped; the forward and the VJP sit in different loops, so XLA cannot merge them); the
    gradients equal plain autodiff of the recursion's rollout (1e-10, float64: different reduction orders)."""
    model = _models()["free-flyer"]
    q, v, tau, _ = (x[0] for x in _states(model, np.random.default_rng(16)))

    def loss(dynamics):
        def of(q, v, tau):
            def step(state, _):
                return jaxsoa.rk4_step(model, *state, tau, 0.01, dynamics=dynamics), None
            (q_end, v_end), _ = jax.lax.scan(step, (q, v), None, length=3)
            return jnp.sum(jnp.sin(q_end)) + jnp.sum(v_end ** 2)
        return jax.value_and_grad(of, argnums=(0, 1, 2))

    compiled = jax.jit(loss(jaxsoa.aba)).lower(q, v, tau).compile()
    with monkeypatch.context() as patch:
        patch.setattr(arguments, "vmappable_call",
                      lambda entry, fn, args, kinds, reverse, residuals=None, given=None:
                      vmap_rule.vmappable_call(entry, fn, args, kinds, reverse, residuals))
        control = jax.jit(loss(jaxsoa.aba)).lower(q, v, tau).compile()
    articulated = f"f64[{model.n_links},6,6]"                     # per-sample ABA-type inward passes
    assert _loops_carrying(compiled, articulated) < _loops_carrying(control, articulated)
    got = compiled(q, v, tau)
    ref = jax.jit(loss(dynamics.aba_autodiff))(q, v, tau)
    for g, r in zip(jax.tree.leaves(got), jax.tree.leaves(ref), strict=True):
        assert relative_error(g, r) < 1e-10


def _scan_of(call, model):
    """The gradient of a 3-step loop whose body calls `call` (the model closed over): Σ_k Σ sin(q̈_k) with
    v_{k+1} = v_k + 0.01 q̈_k (a loop JAX linearises, as a rollout's)."""
    def loss(q, v, tau):
        def body(v, _):
            qdd = call(model, q, v, tau)
            return v + 0.01 * qdd, jnp.sum(jnp.sin(qdd))
        return jnp.sum(jax.lax.scan(body, v, None, length=3)[1])
    return jax.jit(jax.grad(loss, argnums=(0, 1, 2)))


@pytest.mark.slow                      # three gradient programs of the core: about 50 s on 2 cores
def test_vmap_gradient_inside_a_loop_compiles_as_the_leading_batch_call(monkeypatch):
    """Reverse mode of `vmap(aba)` inside a loop JAX linearises: the rule's forward with residuals runs on
    undifferentiated values inside the rule, so its `tied_to_states` did not tie, and JAX's partial evaluation of
    the loop split every staged pass of the core into a model-only half (hoisted out of the loop) and a state half
    with per-link residuals between them: 1.9× the leading-batch call's fusions (free-flyer, 16 samples), and
    about 1.1–1.2× its time in a 100-step rollout (docs/performance.md, "The tie of a `vmap` rule's forward"). The
    forward is now tied always: at most 1.25× the fusions (the control, with the tie off again, exceeds 1.5×), and the
    gradients equal the leading-batch call's (1e-11, float64)."""
    model = _models()["free-flyer"]
    q, v, tau, _ = _states(model, np.random.default_rng(21))

    def per_sample(model, q, v, tau):
        return jax.vmap(lambda q, v, tau: jaxsoa.aba(model, q, v, tau))(q, v, tau)

    def fusions(grad):
        return grad.lower(q, v, tau).compile().as_text().count(" fusion(")

    vmapped, leading = _scan_of(per_sample, model), _scan_of(jaxsoa.aba, model)
    assert fusions(vmapped) <= 1.25 * fusions(leading)
    for g, r in zip(vmapped(q, v, tau), leading(q, v, tau), strict=True):
        assert relative_error(g, r) < 1e-11
    untied = batch_last_vmap.tied_to_states
    monkeypatch.setattr(batch_last_vmap, "tied_to_states", lambda shared, states, always=False: untied(shared, states))
    assert fusions(_scan_of(per_sample, model)) > 1.5 * fusions(leading)
