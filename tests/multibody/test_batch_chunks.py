"""Chunks of a batched path (`jaxsoa.multibody.batched.BATCH_CHUNK`): a batch larger than the chunk runs
as `lax.map` over chunks, the last one edge-padded. With the chunk set to 4 samples (read at trace time)
and batches of 10 (two full chunks and a padded one) and 8 (no padding):

* values of RNEA, ABA, CRBA, the free-floating ABA and a link's Jacobian equal the unchunked call (one
  chunk holds the whole batch): 1e-13 relative, float64 — the same arithmetic per sample, so only
  XLA's reassociation between two programs separates them;
* gradients (ABA's adjoint, RNEA's hand-written reverse mode) equal the unchunked ones: 1e-12 (the padding's
  cotangents are zero);
* a stacked model (per-sample trees) is chunked with its states: equal to the unchunked call;
* multi-axis leading batches keep their shape; the program has the chunk loop (a scan of length 3) only when
  the batch exceeds the chunk;
* reverse mode through the chunk loop keeps the chunks' inputs and the values ABA names for its adjoint
  (q̈ and the `Factor`), not the passes' other residuals (each chunk is checkpointed); one unchunked call,
  the control, saves those.
"""

import contextlib
import io
import os
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.ad_checkpoint import print_saved_residuals

import jaxsoa
from jaxsoa.algorithms import batch_last, free_floating, kinematics
from jaxsoa.multibody import batched
from jaxsoa.multibody.joints import JointType
from tests.helpers.trees import random_group, relative_error, stack_models

PACKAGE = str(Path(jaxsoa.__file__).parent) + os.sep
"""The package's own source files (a checkout's folder may itself be named jaxsoa)."""


def _state(model, batch, seed=0):
    rng = np.random.default_rng(seed)
    q = jax.vmap(lambda k: jaxsoa.random_configuration(model, k))(jax.random.split(jax.random.key(seed), batch))
    v, u = (jnp.asarray(rng.normal(size=(batch, model.nv))) for _ in range(2))
    return q, v, u


def _unchunked(monkeypatch, fn, *args):
    monkeypatch.setattr(batched, "BATCH_CHUNK", 10**9)
    out = jax.jit(fn)(*args)
    monkeypatch.setattr(batched, "BATCH_CHUNK", 4)
    return out


def _calls(model):
    calls = {"rnea": lambda q, v, u: jaxsoa.rnea(model, q, v, u), "aba": lambda q, v, u: jaxsoa.aba(model, q, v, u),
             "crba": lambda q, v, u: jaxsoa.crba(model, q),
             "frame_jacobian": lambda q, v, u: kinematics.frame_jacobian(model, q, model.n_links - 1, "world")}
    if model.links_of_type(JointType.FREE).size == 1:
        calls["aba_free_floating"] = lambda q, v, u: free_floating.aba_free_floating(model, q, v, u[..., 6:])
    return calls


@pytest.mark.parametrize("batch", [10, 8])
def test_chunked_values_and_gradients_equal_one_call(robot_models, monkeypatch, batch):
    model = robot_models["solo12"][0]
    monkeypatch.setattr(batched, "BATCH_CHUNK", 4)
    state = _state(model, batch)
    for name, fn in _calls(model).items():
        assert relative_error(jax.jit(fn)(*state), _unchunked(monkeypatch, fn, *state)) < 1e-13, name

    for fn in (jaxsoa.aba, jaxsoa.rnea):                 # the chunks keep their named values (BatchedPath.saves)
        def loss(q, v, u, fn=fn):
            return jnp.sum(jnp.sin(fn(model, q, v, u)))
        grad = jax.grad(loss, argnums=(0, 1, 2))
        for got, ref in zip(jax.jit(grad)(*state), _unchunked(monkeypatch, grad, *state), strict=True):
            assert relative_error(got, ref) < 1e-12, fn.__name__


def test_stacked_models_are_chunked_with_their_states(monkeypatch):
    models = [m for _, m, _ in random_group(np.random.default_rng(3), 7, 10, joint_types=(JointType.REVOLUTE,
                                                                                           JointType.PRISMATIC))]
    stacked = stack_models(models)
    monkeypatch.setattr(batched, "BATCH_CHUNK", 4)
    state = _state(models[0], 10, seed=1)
    for name in ("rnea", "aba"):
        fn = getattr(jaxsoa, name)
        got = jax.jit(fn)(stacked, *state)
        assert relative_error(got, _unchunked(monkeypatch, fn, stacked, *state)) < 1e-13, name
        for k in (0, 9):                                                    # first and last (padded chunk)
            ref = jax.jit(fn)(models[k], *(x[k] for x in state))
            assert relative_error(got[k], ref) < 1e-12, name


def test_leading_shape_and_chunk_loop(panda, monkeypatch):
    monkeypatch.setattr(batched, "BATCH_CHUNK", 4)
    q, v, u = (x.reshape(2, 5, -1) for x in _state(panda, 10))
    out = jax.jit(lambda q, v, u: jaxsoa.aba(panda, q, v, u))(q, v, u)
    assert out.shape == (2, 5, panda.nv)
    assert panda.n_links != 3                                # the link scans have length n, the chunk loop 3
    assert "length=3" in str(jax.make_jaxpr(lambda q: jaxsoa.crba(panda, q))(jnp.zeros((10, panda.nq))))
    assert "length=3" not in str(jax.make_jaxpr(lambda q: jaxsoa.crba(panda, q))(jnp.zeros((4, panda.nq))))


def test_reverse_mode_keeps_the_chunks_inputs_and_the_named_values(panda, monkeypatch):
    """Reverse mode through the chunk loop keeps each chunk's inputs and what ABA names for its adjoint
    (`BatchedPath.saves`: q̈ and the `Factor`, stacked over the chunks); the passes' other residuals are
    recomputed before the chunk's backward pass. One unchunked call, the control, keeps those too. (The model,
    closed over here, is kept once as it is: `jaxsoa.multibody.tied.fenced_constants`.)"""
    state = _state(panda, 10)

    def saved():
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            print_saved_residuals(lambda q, v, u: jnp.sum(jnp.sin(jaxsoa.aba(panda, q, v, u))), *state)
        return out.getvalue().splitlines()

    def per_link(lines):                          # (n, k, B) arrays: what ABA's passes leave for reverse mode
        return [line for line in lines if f"[{panda.n_links}," in line and f" from {PACKAGE}" in line
                and "(fenced_constants)" not in line]     # the closed-over model's own arrays, kept once

    monkeypatch.setattr(batched, "BATCH_CHUNK", 10**9)
    assert len(per_link(saved())) >= 5                                       # one call: the passes' residuals
    monkeypatch.setattr(batched, "BATCH_CHUNK", 4)
    chunked = saved()
    assert not per_link(chunked), chunked
    assert sum("(split_chunks)" in line for line in chunked) == 3  # q, v, τ split into 3 chunks of 4
    named = [field for field in batch_last.Factor._fields if field != "P_free"]  # no free root: P_free empty
    stacked = [line for line in chunked if "(chunked)" in line]
    assert len(stacked) == 1 + len(named), stacked                             # q̈ and the Factor's arrays
    assert all(line.split()[0].startswith("f64[3,") for line in stacked)


def test_long_models_run_rnea_in_half_chunks(panda, monkeypatch):
    """RNEA on a model of more than `LONG_MODEL_LINKS` links runs chunks of half `BATCH_CHUNK` (its buffers stay
    in cache); ABA keeps whole chunks; shorter models keep whole chunks; values equal one call (1e-13), RNEA's
    gradients too (1e-12)."""
    from jaxsoa.algorithms import batch_last_rnea
    n = batch_last_rnea.LONG_MODEL_LINKS + 1
    chain = jaxsoa.build_model(np.arange(-1, n - 1), [JointType.REVOLUTE] * n, np.tile([0.0, 0.0, 1.0], (n, 1)),
                               np.broadcast_to(np.eye(3), (n, 3, 3)), np.tile([0.1, 0.0, 0.0], (n, 1)), np.ones(n),
                               np.tile([0.05, 0.0, 0.0], (n, 1)), np.broadcast_to(0.01 * np.eye(3), (n, 3, 3)))
    monkeypatch.setattr(batched, "BATCH_CHUNK", 4)
    state = _state(chain, 8)

    def loops(fn, model):
        return str(jax.make_jaxpr(lambda q, v, u: fn(model, q, v, u))(*(x[:, :model.nv] for x in state)))

    assert batch_last_rnea.chunk_samples(chain) == 2 and batch_last_rnea.chunk_samples(panda) == 4
    assert "length=4" in loops(jaxsoa.rnea, chain) and "length=2" not in loops(jaxsoa.rnea, chain)
    assert "length=2" in loops(jaxsoa.aba, chain) and "length=4" not in loops(jaxsoa.aba, chain)
    for name in ("rnea", "aba"):
        fn = getattr(jaxsoa, name)
        got = jax.jit(lambda q, v, u, fn=fn: fn(chain, q, v, u))(*state)
        assert relative_error(got, _unchunked(monkeypatch, lambda q, v, u, fn=fn: fn(chain, q, v, u), *state)) < 1e-13
    grad = jax.grad(lambda q, v, u: jnp.sum(jnp.sin(jaxsoa.rnea(chain, q, v, u))), argnums=(0, 1, 2))
    for got, ref in zip(jax.jit(grad)(*state), _unchunked(monkeypatch, grad, *state), strict=True):
        assert relative_error(got, ref) < 1e-12                    # half chunks, their named values kept
