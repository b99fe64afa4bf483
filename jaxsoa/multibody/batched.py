"""The whole-batch paths of the entry points (`jaxsoa.multibody.arguments.entry_point`): `BatchedPath`, and
running one on a leading batch in chunks of `BATCH_CHUNK` samples (docs/performance.md, "Chunks")."""

import contextlib
import threading
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsoa.multibody.model import Model
from jaxsoa.multibody.tied import fenced_constants, tied_to_states


class BatchedPath(NamedTuple):
    """A whole-batch implementation of an entry point: `fn` has the entry point's signature and takes
    every state argument with one leading batch axis (B, ...); `supports(model)` says whether it
    handles the model (else the per-sample function runs under `jax.vmap`); `stacked`: whether it
    also takes a stacked model (per-sample trees and data); `reverse`: whether reverse mode under `jax.vmap`
    runs `fn`'s VJP too (`jaxsoa.multibody.vmap_rule.vmap_to_batch`; it costs per-sample gradients a forward
    recomputation, unless `given`, and extra tracing) or the per-sample function's (`values_to_batch`); `chunk(model)`:
    samples per chunk (default `BATCH_CHUNK`); `saves`: the name (`jax.ad_checkpoint.checkpoint_name`) of
    the values of `fn` that reverse mode keeps per chunk when the batch is chunked (the rest is recomputed
    before the chunk's backward pass; without a name, all of it); `residuals`: with `reverse`, the
    (forward, given, placeholder) functions with which reverse mode under `jax.vmap` keeps the forward's
    residuals instead of recomputing them (`jaxsoa.multibody.vmap_rule.vmap_to_batch`); `given(out, *args)`: with
    `reverse`, out = the per-sample function's value, given, with its derivatives, so that the per-sample reverse
    mode (one sample, or a small `vmap`) runs no second forward pass; `valid(model)`: None
    where `supports` settles it, or a traced boolean scalar where `fn`'s result holds only for some values of a
    traced model (ABA: every free joint on the world), in which case the call is
    `lax.cond(valid, fn's result, the per-sample function under per_sample_only(), in chunks)` (`guarded`)."""
    supports: Callable
    fn: Callable
    stacked: bool = False
    reverse: bool = False
    chunk: Callable | None = None
    saves: str | None = None
    residuals: tuple | None = None
    valid: Callable | None = None
    given: Callable | None = None


_context = threading.local()


@contextlib.contextmanager
def per_sample_only():
    """While active (tracing), the `supports` of the batch-last paths answer False, so every entry point
    runs its per-sample function: the fallback branch of `guarded`, which must not reach the whole-batch
    path it stands in for."""
    before = getattr(_context, "per_sample_only", False)
    _context.per_sample_only = True
    try:
        yield
    finally:
        _context.per_sample_only = before


def in_per_sample_only() -> bool:
    """Whether `per_sample_only` is active."""
    return getattr(_context, "per_sample_only", False)


def guarded(path: BatchedPath, model: Model, whole_batch: Callable, per_sample: Callable):
    """whole_batch(), or, where `path.valid(model)` is a traced predicate, lax.cond(valid, its result,
    per_sample) with per_sample traced under `per_sample_only` (`mapped_in_chunks`). whole_batch runs outside
    the `cond`, so where `valid` is false both run and its result is discarded: inside a branch its chunk loop
    ran 1.2× slower on XLA:CPU (docs/performance.md, "The guard of a traced topology")."""
    valid = None if path.valid is None else path.valid(model)
    out = whole_batch()
    if valid is None:
        return out

    @jax.checkpoint                         # reverse mode keeps no residual of the untaken branch
    def fallback(_):
        with per_sample_only():
            return per_sample()

    return jax.lax.cond(valid, lambda _: out, fallback, None)


def guarded_residuals(path: BatchedPath, model_name: str, whole_batch: Callable) -> tuple:
    """path.residuals (forward, given, placeholder: `jaxsoa.multibody.vmap_rule.vmap_to_batch`'s, taking the
    arguments by name) for a traced topology: the values of forward and given each `guarded` by path.valid,
    whole_batch(**arguments) (the entry point on the leading batch: under `per_sample_only`, its per-sample
    function in chunks) their fallback. So reverse mode under `vmap` keeps the forward's residuals where the
    topology is valid, instead of recomputing the whole batch's forward (docs/performance.md, "The residuals
    of a traced topology")."""
    forward, given, placeholder = path.residuals

    def forward_guarded(**arguments):
        out, res = forward(**arguments)
        return guarded(path, arguments[model_name], lambda: out, lambda: whole_batch(**arguments)), res

    def given_guarded(res, **arguments):
        return guarded(path, arguments[model_name], lambda: given(res, **arguments),
                       lambda: whole_batch(**arguments))

    return forward_guarded, given_guarded, placeholder


BATCH_CHUNK = 512
"""Samples per call of a `BatchedPath`: a larger batch runs as `lax.map` over chunks of this many samples
(the last one padded with copies of the last sample, whose results are dropped), so that one chunk's
temporaries stay in cache (docs/performance.md, "Chunks"). Each chunk is checkpointed: reverse mode
saves the chunks' inputs and the values the path names (`BatchedPath.saves`: ABA's q̈ and `Factor`, RNEA's
link motions and forces) and recomputes the rest of a chunk before its backward pass, instead of storing
every chunk's residuals. Read at trace time."""


def chunk_shape(size: int, chunk: int) -> tuple:
    """(count, width): `chunked`'s chunks of a batch of `size` samples, one of `size` when it fits in one."""
    return (1, size) if size <= chunk else (-(-size // chunk), chunk)


def split_chunks(x, count: int, width: int):
    """(size, ...) -> (count, width, ...), the rows past `size` copies of the last one (edge padding)."""
    pad = count * width - x.shape[0]
    x = jnp.concatenate([x, jnp.broadcast_to(x[-1:], (pad, *x.shape[1:]))]) if pad else x
    return x.reshape((count, width, *x.shape[1:]))


def join_chunks(y, size: int):
    """`split_chunks`' inverse: (count, width, ...) -> (size, ...), the padding rows dropped."""
    return y.reshape((y.shape[0] * y.shape[1], *y.shape[2:]))[:size]


def chunked(fn, batched: dict, size: int, chunk: int, saves: str | None = None, split: dict | None = None,
            stack: bool = False):
    """fn(**batched) for arrays with leading axis `size`: one call, or `lax.map` over checkpointed chunks
    of `chunk` samples when size is larger, each keeping for reverse mode its inputs and the values named
    `saves`; results (size, ...). `split`: arrays already in chunks, (count, ...) as `chunk_shape` counts
    them, one entry per call; `stack`: results as the calls return them, stacked (count, ...)."""
    count = chunk_shape(size, chunk)[0]
    split = split or {}
    if count == 1:
        out = fn(**batched, **jax.tree.map(lambda x: x[0], split))
        return jax.tree.map(lambda y: y[None], out) if stack else out

    policy = jax.checkpoint_policies.save_only_these_names(saves) if saves else None
    out = jax.lax.map(jax.checkpoint(lambda xs: fn(**xs), policy=policy),
                      {**jax.tree.map(lambda x: split_chunks(x, count, chunk), batched), **split})
    return out if stack else jax.tree.map(lambda y: join_chunks(y, size), out)


def mapped_in_chunks(per_sample: Callable, args: tuple, lead: tuple):
    """`jax.vmap` of per_sample(*args) over the leading axes `lead` of every leaf of args, run as `chunked`'s
    chunks of `BATCH_CHUNK` samples: results (*lead, ...). The fallback of `guarded`: compiled beside the
    whole-batch path, a `vmap` of the whole batch made every call's temporaries 25× larger (the free-floating
    space arm's ABA at 8192: 47 MB against 1.8 MB), and the call 1.2× slower, though it never ran."""
    size = int(np.prod(lead))
    flat = jax.tree.map(lambda x: x.reshape((size, *x.shape[len(lead):])), args)
    out = chunked(lambda xs: jax.vmap(per_sample)(*xs), {"xs": flat}, size, BATCH_CHUNK)
    return jax.tree.map(lambda y: y.reshape((*lead, *y.shape[1:])), out)


def run_batched(path: BatchedPath, model: Model, arguments: dict, trailing: dict, lead: tuple, model_name=None):
    """path.fn on the leading axes `lead` flattened to B: the state arguments (`trailing`: {name: per-sample
    shape}) reshaped to (B, ...), shared ones broadcast, in chunks of `path.chunk(model)` (or `BATCH_CHUNK`)
    samples (with the model, when `model_name` names a stacked one); the result's leading axis is split back
    into `lead`. A model or array closed over by an enclosing `jax.jit` is `fenced_constants` first; inside, the model
    and the shared arrays are `tied_to_states` of the chunk."""
    size = int(np.prod(lead))
    args, batched = fenced_constants(dict(arguments)), {}
    for name, shape in trailing.items():
        value = args.get(name)
        if isinstance(value, jax.Array):
            batched[name] = jnp.broadcast_to(value, (*lead, *shape)).reshape((size, *shape))
    if model_name is not None:
        batched[model_name] = args[model_name]

    def call(**xs):
        shared = {name: value for name, value in args.items() if isinstance(value, (Model, jax.Array, np.ndarray))}
        shared, xs = tied_to_states(shared, xs)
        return path.fn(**{**args, **shared, **xs})

    chunk = path.chunk(model) if path.chunk else BATCH_CHUNK
    return jax.tree.map(lambda y: y.reshape((*lead, *y.shape[1:])), chunked(call, batched, size, chunk, path.saves))
