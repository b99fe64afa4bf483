"""ABA's reverse mode under `jax.vmap` on the batch-last core without a second forward pass: the three
functions of `jaxsoa.multibody.vmap_rule.vmap_to_batch`'s `residuals` for `jaxsoa.aba` (docs/performance.md,
"`vmap` of `aba`'s gradient keeps the forward's `Factor`").

`aba_forward` runs the leading-batch ABA and returns, with q̈, what its adjoint reuses: q̈ and the `Factor`
of `jaxsoa.algorithms.batch_last`, with the batch axis first (the layout a `custom_vmap` rule returns).
`aba_given` is q̈ again, differentiated as `aba` from those residuals: its reverse mode is the adjoint's
M⁻¹ ḡ by `solve_mass_matrix` and the reverse passes of the residual's RNEA (`rnea_at`), as a leading-batch
call's gradient; no forward pass is recomputed. `aba_placeholder` is the zero residuals of one sample
(the per-sample forward's, which the per-sample reverse mode ignores).

Shapes: q (B, nq), v / tau (B, nv), f_ext (B, n, 6) or None, the model shared or stacked (B, ...) (when the
`vmap` batches it); residuals (q̈ (B, nv), `Factor` with leaves (B, ...)). Calls of more than `BATCH_CHUNK`
samples run in chunks, as the leading-batch entry points do.
"""

import jax
import jax.numpy as jnp

from jaxsoa.algorithms import batch_last, batch_last_rnea
from jaxsoa.algorithms import batch_last_slots as sl
from jaxsoa.algorithms.adjoint import adjoint_forward_dynamics
from jaxsoa.multibody import batch_last as bl
from jaxsoa.multibody import batched
from jaxsoa.multibody.model import Model
from jaxsoa.multibody.tied import tied_to_states


def _leading(fn, model: Model, arrays: dict, split: dict | None = None, stack: bool = False):
    """fn(model, **arrays, **split) for arrays with one leading batch axis (B, ...), in chunks of `BATCH_CHUNK`
    samples (a stacked model chunked with them; `split`: arrays already in chunks); results (B, ...), or
    stacked per chunk with `stack` (`batched.chunked`)."""
    size = jax.tree.leaves(arrays)[0].shape[0]
    stacked = bl.per_sample(model.traversal)
    arrays_and_model = {**arrays, "model": model} if stacked else dict(arrays)

    def call(**xs):
        shared, xs = tied_to_states(xs.pop("model") if stacked else model, xs)
        return fn(shared, **xs)

    return batched.chunked(call, arrays_and_model, size, batched.BATCH_CHUNK, split=split, stack=stack)


def _to_rows(x, size: int):
    """A `Factor` leaf stacked per chunk, (count, ..., width) -> the residuals' (B, ...). When the chunks tile the
    batch, one reshape of the whole array (no copy; row b is then not sample b, but `_from_rows` gives each chunk
    its own block back); else the transpose, the padded last chunk's rows dropped. A reshape per chunk, inside
    the chunk loop, was a copy: the forward with residuals cost 1.6× ABA's value against 1.2× (Panda, 8192)."""
    count, *rest, width = x.shape
    if count * width == size:
        return x.reshape((size, *rest))
    return batched.join_chunks(jnp.moveaxis(x, -1, 1), size)


def _from_rows(x, count: int, width: int):
    """`_to_rows`' inverse: (B, ...) -> (count, ..., width), the rows past B copies of the last one."""
    size, *rest = x.shape
    if count * width == size:
        return x.reshape((count, *rest, width))
    return jnp.moveaxis(batched.split_chunks(x, count, width), 1, -1)


def aba_forward(model: Model, q, v, tau, f_ext=None):
    """(q̈ (B, nv), residuals (q̈, `Factor` with the batch axis first)): forward dynamics of a leading batch
    and what its adjoint reuses. It runs inside the rule's JVP on undifferentiated values, so the model is tied to
    the states here, once before the chunks (`tied_to_states(..., always=True)`): untied, JAX's linearisation of an
    enclosing loop (a rollout) split the core's passes (docs/performance.md, "The tie of a `vmap` rule's forward")."""
    size = q.shape[0]
    model, states = tied_to_states(model, dict(q=q, v=v, tau=tau, f_ext=f_ext), always=True)
    qdd, factor = _leading(batch_last._aba_factored, model, states, stack=True)
    qdd = batched.join_chunks(qdd, size)
    return qdd, (qdd, jax.tree.map(lambda x: _to_rows(x, size), factor))


def aba_given(residuals, model: Model, q, v, tau, f_ext=None):
    """q̈ (B, nv), the residuals' (of `aba_forward` at these arguments), differentiated as `aba` by the adjoint
    from their `Factor`: reverse mode runs no forward pass."""
    qdd, factor = residuals
    count, width = batched.chunk_shape(q.shape[0], batched.BATCH_CHUNK)

    def chunk(model, q, v, tau, f_ext, qdd, factor):
        return _aba_given(model, q, v, tau, f_ext, (qdd, factor))

    factor = jax.tree.map(lambda x: _from_rows(x, count, width), factor)
    return _leading(chunk, model, dict(q=q, v=v, tau=tau, f_ext=f_ext, qdd=qdd), split=dict(factor=factor))


_aba_given = adjoint_forward_dynamics(               # the adjoint whose forward solve is given (its last argument)
    batch_last._aba_recursion, batch_last_rnea.rnea,
    factored=(lambda *args: args[-1], batch_last.solve_mass_matrix, batch_last_rnea.rnea_at))


def aba_placeholder(model: Model, q, v, tau, f_ext=None):
    """Zero residuals of one sample (q (nq,)), shaped as one sample of `aba_forward`'s: q̈ (nv,) and the
    `Factor`: R (n, 9), p (n, 3), G_D_inv (n, 7 m) (m = 3 with spherical or planar joints, else 1), one (21,) per free
    root, motion (n, 12)."""
    n, columns = model.n_links, 3 if sl.has_triples(model) else 1

    def zeros(*shape):
        return jnp.zeros(shape, q.dtype)

    factor = batch_last.Factor(zeros(n, 9), zeros(n, 3), zeros(n, 7 * columns),
                               tuple(zeros(21) for _ in sl.free_links(model)), zeros(n, 12))
    return zeros(model.nv), factor
