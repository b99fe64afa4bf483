"""`jax.vmap` of a per-sample call reaching a whole-batch implementation, values and reverse mode
(docs/performance.md, "`vmap` of the entry points"): `jax.custom_batching.custom_vmap` rules, which JAX
cannot linearise, so they sit where JAX only evaluates them: the value inside a `jax.custom_jvp`, and the
VJP as the transpose of a `linear_map`.

Argument kinds: "state" (batched by the whole-batch function; broadcast to the batch there when
unbatched), "model" (batched there only as a stack, when the `vmap` batches any of its leaves), "fixed"
(a `vmap` over it maps the per-sample function), "residual" (what a whole-batch forward left for its
reverse mode: the whole-batch function runs only when the `vmap` batches it, i.e. when that forward ran
under the same `vmap`; otherwise the per-sample function, which ignores it)."""

import functools
import threading

import jax
import jax.numpy as jnp
import numpy as np
from jax._src import core, custom_batching
from jax._src.interpreters import ad
from jax.custom_batching import custom_vmap

from jaxsoa.multibody.linear_map import linear_map, replaced
from jaxsoa.multibody.tied import fenced_constants

VMAP_MIN_BATCH = 16
"""`jax.vmap` axes of at least this many samples run the whole-batch implementation (the batch-last core);
smaller ones (and the small inner `vmap`s of constraint columns or Jacobian bases) keep the per-sample
function, which is faster there and compiles in half the time (docs/performance.md, "`vmap` of `aba`":
space-arm sweep, 8 samples 9.0 ms per sample against 14 ms on the core, 32 samples 69 against 17 ms).
Read at trace time."""


def _transpose_call(cotangents, *args, call, **_):
    """Transpose of a `custom_vmap` function linear in some arguments (`jax.linear_transpose`, a
    non-symmetric `lax.custom_linear_solve`'s matvec): its per-sample function's, `call` (JAX 0.10 has none)."""
    linear = [ad.is_undefined_primal(x) for x in args]

    def of_linear(*values):
        it = iter(values)
        return core.jaxpr_as_fun(call)(*(next(it) if lin else x for x, lin in zip(args, linear, strict=True)))

    avals = [jax.ShapeDtypeStruct(x.aval.shape, x.aval.dtype) for x, lin in zip(args, linear, strict=True) if lin]
    transposed = iter(jax.linear_transpose(of_linear, *avals)([ad.instantiate_zeros(c) for c in cotangents]))
    return [next(transposed) if lin else None for lin in linear]


ad.primitive_transposes.setdefault(custom_batching.custom_vmap_p, _transpose_call)


def _batched(per_sample, whole_batch, kinds):
    """per_sample(*args) whose `jax.vmap` over ≥ `VMAP_MIN_BATCH` samples, batching no "fixed" argument, is
    one whole_batch(*args) call: "state" arguments and batched "model" ones broadcast to (B, ...) (batch
    axis in front), the rest as given. Not differentiable (a `custom_vmap` function)."""
    traced = {}                                 # per_sample's (jaxpr, output tree) by argument structure

    def key(args):
        leaves, tree = jax.tree.flatten(args)
        return tree, tuple((jnp.shape(x), jnp.result_type(x)) for x in leaves)

    def replay(*args):                          # per_sample(*args), from its jaxpr where `mapped` traced one
        if key(args) not in traced:
            return per_sample(*args)
        jaxpr, out_tree = traced[key(args)]
        return jax.tree.unflatten(out_tree, core.eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *jax.tree.leaves(args)))

    @custom_vmap
    def mapped(*args):
        jaxpr, shapes = jax.make_jaxpr(per_sample, return_shape=True)(*args)
        traced[key(args)] = jaxpr, jax.tree.structure(shapes)
        return replay(*args)

    @mapped.def_vmap
    def rule(axis_size, in_batched, *args):
        batched = [any(jax.tree.leaves(b)) for b in in_batched]
        if not any(batched):
            out = replay(*args)
            return out, jax.tree.map(lambda _: False, out)
        if axis_size < VMAP_MIN_BATCH or any((b and k == "fixed") or (not b and k == "residual")
                                             for b, k in zip(batched, kinds, strict=True)):
            out = jax.vmap(replay, in_axes=jax.tree.map(lambda b: 0 if b else None, tuple(in_batched)))(*args)
        else:
            def broadcast(x, is_batched):
                return x if is_batched else jnp.broadcast_to(x, (axis_size, *jnp.shape(x)))

            out = whole_batch(*(jax.tree.map(broadcast, a, b) if k == "state" or any_b
                                else fenced_constants(a, traced=True)     # a model closed over outside the vmap
                                for a, b, any_b, k in zip(args, in_batched, batched, kinds, strict=True)))
        return out, jax.tree.map(lambda _: True, out)

    return mapped


def values_to_batch(per_sample, whole_batch, kinds):
    """f(*args) = per_sample(*args) (`kinds` one per argument: module docstring), whose `jax.vmap` over at least
    `VMAP_MIN_BATCH` samples runs whole_batch once on the batch (batch axis in front); differentiated by
    per_sample's JVP (derivatives, and `vmap`s of them, run per sample)."""
    return _custom_jvp(_batched(per_sample, whole_batch, kinds), lambda p, t: jax.jvp(per_sample, p, t))


def _custom_jvp(primal, rule, symbolic_zeros=False):
    """primal(*args) as a `jax.custom_jvp` function with the JVP `rule`."""
    f = jax.custom_jvp(lambda *args: primal(*args))
    f.defjvp(rule, symbolic_zeros=symbolic_zeros)
    return f


def _live_leaves(primals, tangents):
    """[(argument, flat leaf index, leaf, tangent)] of the float leaves of the tuple `primals` whose tangent
    is not a symbolic zero."""
    live, offset = [], 0
    for i, (x, t) in enumerate(zip(primals, tangents, strict=True)):
        x_leaves = jax.tree.leaves(x)
        t_leaves = jax.tree.leaves(t, is_leaf=lambda z: isinstance(z, jax.custom_derivatives.SymbolicZero))
        for k, (leaf, t_leaf) in enumerate(zip(x_leaves, t_leaves, strict=True)):
            if not isinstance(t_leaf, jax.custom_derivatives.SymbolicZero) and jnp.issubdtype(leaf.dtype, jnp.inexact):
                live.append((i, offset + k, leaf, t_leaf))
        offset += len(x_leaves)
    return live


def _replacing(fn, positions):
    """(args, live values) -> fn(*args with the flat leaves at `positions` replaced)."""
    def call(args, values):
        leaves, tree = jax.tree.flatten(tuple(args))
        return fn(*jax.tree.unflatten(tree, replaced(leaves, positions, values)))
    return call


def _vjp(fn, positions, n_args):
    """(*args, c) -> the cotangents of the flat leaves at `positions` of fn(*args) for the output cotangent c."""
    of = _replacing(fn, positions)

    def vjp(*args_and_c):
        args, c = args_and_c[:n_args], args_and_c[n_args]
        leaves = jax.tree.leaves(tuple(args))
        return jax.vjp(lambda *v: of(args, v), *(leaves[k] for k in positions))[1](c)
    return vjp


def vmap_to_batch(per_sample, whole_batch, kinds, residuals=None, per_sample_given=None):
    """`values_to_batch` whose reverse mode under `vmap` also runs on the whole batch (the VJP of whole_batch,
    recomputing its value) when only "state" arguments are differentiated; forward mode, and reverse mode
    for other arguments, differentiate per_sample.

    residuals = (forward, given, placeholder) keeps the whole batch's forward instead of recomputing it:
    forward(*args) -> (whole_batch(*args), res) with res's leaves batch-first, given(res, *args) -> the same
    value computed from res (its VJP is the reverse mode; no forward pass), placeholder(*args) -> a zero
    res of one sample (the per-sample forward's, which its per-sample VJP ignores).

    per_sample_given(out, *args) -> out = per_sample(*args), given, with per_sample's derivatives: the
    per-sample reverse mode (one sample, or a `vmap` under `VMAP_MIN_BATCH`) is its VJP at the forward's
    value instead of per_sample's, which recomputes the forward."""
    value = values_to_batch(per_sample, whole_batch, kinds)

    def f_jvp(primals, tangents):
        live = _live_leaves(primals, tangents)
        if not live:
            out = value(*primals)
            return out, jax.tree.map(jnp.zeros_like, out)
        positions = [k for _, k, _, _ in live]
        values, u = tuple(x for *_, x, _ in live), tuple(t for *_, t in live)
        of = _replacing(per_sample, positions)
        if any(kinds[i] != "state" for i, *_ in live):
            return value(*primals), jax.jvp(lambda *v: of(primals, v), values, u)[1]
        tangent = jax.checkpoint(lambda v, u: jax.jvp(lambda *w: of(primals, w), v, u)[1])   # saves v only
        n = len(primals)
        if per_sample_given is None:                                  # (*args, out, c): per_sample's VJP
            per_sample_vjp = _vjp(lambda *a: per_sample(*a[:-1]), positions, n + 1)
        else:                                                          # (*args, out, c): at out, no forward
            per_sample_vjp = _vjp(lambda *a: per_sample_given(a[-1], *a[:-1]), positions, n + 1)
        if residuals is None:
            out = value(*primals)
            whole_vjp = _vjp(whole_batch, positions, n)
            transpose = values_to_batch(per_sample_vjp, lambda *a: whole_vjp(*a[:n], a[-1]),
                                        (*kinds, "state", "state"))
            return out, linear_map(lambda u: tangent(values, tuple(u)), lambda c: transpose(*primals, out, c), u,
                                   out)
        forward, given, placeholder = residuals
        out, res = values_to_batch(lambda *a: (per_sample(*a), placeholder(*a)), forward, kinds)(*primals)
        given_vjp = _vjp(lambda *a: given(a[-1], *a[:-1]), positions, n + 1)          # (*args, res, c)
        transpose = values_to_batch(lambda *a: per_sample_vjp(*a[:n], a[n + 1], a[-1]),  # res ignored per sample
                                    lambda *a: given_vjp(*a[:n + 1], a[-1]), (*kinds, "residual", "state", "state"))
        return out, linear_map(lambda u: tangent(values, tuple(u)), lambda c: transpose(*primals, res, out, c), u,
                               out)

    return _custom_jvp(value, f_jvp, symbolic_zeros=True)


def _is_array(x):
    return isinstance(x, (jax.Array, np.ndarray))


_tracing = threading.local()


def _without_nested_rules(function):
    """function, during which `vmappable_call` runs its fn directly: the enclosing call carries the rule, and
    each wrapped call inside it would trace its own body several times more (value, JVP, VJP), at every level
    of nesting (a CRBA inside computed torque inside a rollout step)."""
    def run(*args, **kwargs):
        depth = getattr(_tracing, "depth", 0)
        _tracing.depth = depth + 1
        try:
            return function(*args, **kwargs)
        finally:
            _tracing.depth = depth
    return run


def vmappable_call(entry, fn, arguments: dict, kinds: dict, reverse: bool, residuals=None, given=None):
    """fn(**arguments) for one sample, whose `jax.vmap` calls entry(**arguments) with a leading batch
    (`vmap_to_batch` with `reverse`, `residuals` and `given`, else `values_to_batch`; `kinds`: each argument's
    kind, "fixed" where not given; `residuals`: (forward, given, placeholder) taking the arguments by name,
    `given` the residuals first; `given(out, **arguments)`: `vmap_to_batch`'s per_sample_given). The arguments
    that are pytrees of arrays are the inputs, the others fixed; plain fn(**arguments) when one is a function or
    mixes arrays with other values (a `custom_jvp` cannot close over traced values), and inside another wrapped call."""
    if getattr(_tracing, "depth", 0):
        return fn(**arguments)
    leaves = {name: jax.tree.leaves(x) for name, x in arguments.items()}
    inputs = {name: x for name, x in arguments.items() if leaves[name] and all(map(_is_array, leaves[name]))}
    fixed = {name: x for name, x in arguments.items() if name not in inputs}
    if any(callable(x) or any(map(_is_array, leaves[name])) for name, x in fixed.items()):
        return fn(**arguments)
    names = list(inputs)

    def call(function):
        return _without_nested_rules(lambda *xs: function(**fixed, **dict(zip(names, xs, strict=True))))

    argument_kinds = [kinds.get(name, "fixed") for name in names]
    if not reverse:
        return values_to_batch(call(fn), call(entry), argument_kinds)(*inputs.values())
    if residuals is not None:
        forward, from_residuals, placeholder = residuals
        residuals = (call(forward), lambda res, *xs: call(functools.partial(from_residuals, res))(*xs),
                     call(placeholder))
    per_sample_given = None if given is None else (lambda out, *xs: call(functools.partial(given, out))(*xs))
    return vmap_to_batch(call(fn), call(entry), argument_kinds, residuals, per_sample_given)(*inputs.values())
