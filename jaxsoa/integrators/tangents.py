"""A loop's initial state with zero tangents where the loop is differentiated, so that JAX linearises the loop's
body once (docs/performance.md, "Smaller gradient programs of the seed systems").

JAX differentiates a `lax.scan` by a fixpoint over its carries: a carry whose initial value is a constant (q0 held,
v0 = 0, a running maximum starting at 0, or every state when only the model's parameters are differentiated) is
first taken as not differentiated; after the step shows that it is, JAX linearises the whole body again. Each such
pass re-runs every custom derivative rule in the step (the adjoints' JVP rules trace RNEA, the `vmap` rules their
per-sample functions): 1–2 s of a seed system's gradient compile. `with_carried_tangents` gives the carry's
floating-point leaves zero tangents up front whenever the step closes over a differentiated value, so the first
pass is the last; the zeros cost nothing at run time (the step's tangent is non-zero from its first output on).
"""

import jax
import jax.numpy as jnp
from jax._src import core

_DIFFERENTIATING = ("JVPTrace", "LinearizeTrace")


def _differentiating() -> bool:
    """Whether a JVP or linearisation is being traced around this call (True when that cannot be told)."""
    trace = getattr(getattr(core, "trace_ctx", None), "trace", None)
    if trace is None:
        return True
    while trace is not None:
        if type(trace).__name__ in _DIFFERENTIATING:
            return True
        trace = getattr(trace, "parent_trace", None)
    return False


def with_carried_tangents(body, init, x):
    """`init` for `lax.scan(body, init, xs)` (x: one element of xs), its floating-point leaves given zero tangents
    when `init` or a value `body` closes over is differentiated; `init` itself otherwise (and outside any
    differentiation, without tracing `body`)."""
    leaves, tree = jax.tree.flatten(init)
    floats = [i for i, leaf in enumerate(leaves) if jnp.issubdtype(jnp.result_type(leaf), jnp.inexact)]
    if not floats or not _differentiating():
        return init
    _, closed_over = jax.closure_convert(body, init, x)          # the differentiable values the step reads
    tangent_carrying = _instantiated(tuple(leaves[i] for i in floats), tuple(closed_over))
    for i, leaf in zip(floats, tangent_carrying, strict=True):
        leaves[i] = leaf
    return jax.tree.unflatten(tree, leaves)


@jax.custom_jvp
def _instantiated(carry, closed_over):
    """carry unchanged; its JVP gives every leaf a tangent (zeros where it had none) when any input has one."""
    return carry


def _instantiated_jvp(primals, tangents):
    carry, _ = primals
    carry_dot, closed_over_dot = tangents
    live = [t for t in (*carry_dot, *jax.tree.leaves(closed_over_dot, is_leaf=_is_zero)) if not _is_zero(t)]
    if not live:
        return carry, carry_dot
    nothing = 0 * jnp.sum(live[0])          # zero, computed from a tangent, so JAX cannot drop it as a known zero
    return carry, tuple(jnp.zeros_like(c) + nothing.astype(c.dtype) if _is_zero(t) else t
                        for c, t in zip(carry, carry_dot, strict=True))


def _is_zero(tangent):
    return isinstance(tangent, jax.custom_derivatives.SymbolicZero)


_instantiated.defjvp(_instantiated_jvp, symbolic_zeros=True)
