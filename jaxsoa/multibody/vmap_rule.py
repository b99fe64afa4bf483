"""`jax.vmap` of a per-sample call reaching a whole-batch implementation (docs/performance.md, "`vmap` of
the entry points"): a `jax.custom_batching.custom_vmap` rule, shielded from differentiation by a
`jax.custom_jvp` whose rule is the per-sample function's own JVP."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_batching import custom_vmap

VMAP_MIN_BATCH = 16
"""`jax.vmap` axes of at least this many samples run the whole-batch implementation (the batch-last core);
smaller ones (and the small inner `vmap`s of constraint columns or Jacobian bases) keep the per-sample
function, which is faster there and compiles in half the time (docs/performance.md, "`vmap` of `aba`":
space-arm sweep, 8 samples 9.0 ms per sample against 14 ms on the core, 32 samples 69 against 17 ms).
Read at trace time."""


def vmap_to_batch(per_sample, whole_batch, batchable):
    """f(*args) = per_sample(*args) (args: pytrees of arrays), whose `jax.vmap` over at least
    `VMAP_MIN_BATCH` samples calls whole_batch(*args) once, with every batched argument's batch axis in
    front (size B) and the unbatched ones as given; an argument with some leaves batched (a model with one
    per-sample field) has all its leaves broadcast to (B, ...). `batchable[i]`: whether whole_batch takes
    argument i batched; a `vmap` over any other argument, or a smaller one, runs per_sample under `vmap`.

    JAX cannot linearise a `custom_vmap` function, so f is a `custom_jvp` whose rule is per_sample's JVP:
    derivatives (and `vmap`s of them) run the per-sample function; values under `vmap` the whole batch."""
    @custom_vmap
    def mapped(*args):
        return per_sample(*args)

    @mapped.def_vmap
    def rule(axis_size, in_batched, *args):
        batched = [any(jax.tree.leaves(b)) for b in in_batched]
        if not any(batched):
            out = per_sample(*args)
            return out, jax.tree.map(lambda _: False, out)
        if axis_size < VMAP_MIN_BATCH or any(b and not ok for b, ok in zip(batched, batchable, strict=True)):
            in_axes = jax.tree.map(lambda b: 0 if b else None, tuple(in_batched))
            out = jax.vmap(per_sample, in_axes=in_axes)(*args)
        else:
            def broadcast(x, is_batched):
                return x if is_batched else jnp.broadcast_to(x, (axis_size, *jnp.shape(x)))

            whole = [jax.tree.map(broadcast, a, b) if any_b else a
                     for a, b, any_b in zip(args, in_batched, batched, strict=True)]
            out = whole_batch(*whole)
        return out, jax.tree.map(lambda _: True, out)

    @jax.custom_jvp
    def f(*args):
        return mapped(*args)

    @f.defjvp
    def f_jvp(primals, tangents):
        return jax.jvp(per_sample, primals, tangents)

    return f


def _is_array(x):
    return isinstance(x, (jax.Array, np.ndarray))


def vmappable_call(entry, fn, arguments: dict, batchable: set):
    """fn(**arguments) for one sample, whose `jax.vmap` calls entry(**arguments) with a leading batch on the
    arguments named in `batchable` (`vmap_to_batch`; a `vmap` over another argument runs fn under it). The
    arguments that are pytrees of arrays are the inputs, the others fixed; plain fn(**arguments) when one is a
    function or mixes arrays with other values (a `custom_jvp` cannot close over traced values)."""
    leaves = {name: jax.tree.leaves(x) for name, x in arguments.items()}
    inputs = {name: x for name, x in arguments.items() if leaves[name] and all(map(_is_array, leaves[name]))}
    fixed = {name: x for name, x in arguments.items() if name not in inputs}
    if any(callable(x) or any(map(_is_array, leaves[name])) for name, x in fixed.items()):
        return fn(**arguments)
    names = list(inputs)

    def call(function):
        return lambda *xs: function(**fixed, **dict(zip(names, xs, strict=True)))

    return vmap_to_batch(call(fn), call(entry), [name in batchable for name in names])(*inputs.values())
