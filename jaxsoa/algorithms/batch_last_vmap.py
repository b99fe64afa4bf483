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
from jaxsoa.algorithms import batch_last_frames as fr
from jaxsoa.algorithms.adjoint import adjoint_forward_dynamics
from jaxsoa.multibody import batch_last as bl
from jaxsoa.multibody import batched
from jaxsoa.multibody.model import Model
from jaxsoa.multibody.tied import tied_to_states


def _leading(fn, model: Model, arrays: dict):
    """fn(model, **arrays) for arrays with one leading batch axis (B, ...), in chunks of `BATCH_CHUNK`
    samples (a stacked model chunked with them); results (B, ...)."""
    size = jax.tree.leaves(arrays)[0].shape[0]
    stacked = bl.per_sample(model.traversal)
    arrays_and_model = {**arrays, "model": model} if stacked else dict(arrays)

    def call(**xs):
        shared, xs = tied_to_states(xs.pop("model") if stacked else model, xs)
        return fn(shared, **xs)

    return batched.chunked(call, arrays_and_model, size, batched.BATCH_CHUNK)


def _layout(size: int):
    """(to_rows, from_rows) between a chunk's `Factor` leaves (..., B) and the residuals' (B, ...): a reshape (no
    copy; row b is then not sample b, but each chunk's block is its own, since the chunks tile the batch exactly)
    when the batch is one chunk or whole chunks, else the transpose (a padded last chunk's rows are dropped)."""
    if size <= batched.BATCH_CHUNK or size % batched.BATCH_CHUNK == 0:
        return (lambda x: x.reshape((x.shape[-1], *x.shape[:-1])), lambda x: x.reshape((*x.shape[1:], x.shape[0])))
    return lambda x: jnp.moveaxis(x, -1, 0), lambda x: jnp.moveaxis(x, 0, -1)


def aba_forward(model: Model, q, v, tau, f_ext=None):
    """(q̈ (B, nv), residuals (q̈, `Factor` with the batch axis first)): forward dynamics of a leading batch
    and what its adjoint reuses."""
    to_rows = _layout(q.shape[0])[0]

    def chunk(model, q, v, tau, f_ext):
        qdd, factor = batch_last._aba_factored(model, q, v, tau, f_ext)
        return qdd, jax.tree.map(to_rows, factor)

    qdd, factor = _leading(chunk, model, dict(q=q, v=v, tau=tau, f_ext=f_ext))
    return qdd, (qdd, factor)


def aba_given(residuals, model: Model, q, v, tau, f_ext=None):
    """q̈ (B, nv), the residuals' (of `aba_forward` at these arguments), differentiated as `aba` by the adjoint
    from their `Factor`: reverse mode runs no forward pass."""
    from_rows = _layout(q.shape[0])[1]

    def chunk(model, q, v, tau, f_ext, residuals):
        qdd, factor = residuals
        return _aba_given(model, q, v, tau, f_ext, (qdd, jax.tree.map(from_rows, factor)))

    return _leading(chunk, model, dict(q=q, v=v, tau=tau, f_ext=f_ext, residuals=residuals))


_aba_given = adjoint_forward_dynamics(               # the adjoint whose forward solve is given (its last argument)
    batch_last._aba_recursion, batch_last_rnea.rnea,
    factored=(lambda *args: args[-1], batch_last.solve_mass_matrix, batch_last_rnea.rnea_at))


def aba_placeholder(model: Model, q, v, tau, f_ext=None):
    """Zero residuals of one sample (q (nq,)), shaped as one sample of `aba_forward`'s: q̈ (nv,) and the
    `Factor`: R (n, 9), p (n, 3), G_D_inv (n, 7 m) (m = 3 with spherical joints, else 1), one (21,) per free
    root, motion (n, 12), forces (n, 6)."""
    n, columns = model.n_links, 3 if fr.has_balls(model) else 1

    def zeros(*shape):
        return jnp.zeros(shape, q.dtype)

    factor = batch_last.Factor(zeros(n, 9), zeros(n, 3), zeros(n, 7 * columns),
                               tuple(zeros(21) for _ in fr.free_links(model)), zeros(n, 12), zeros(n, 6))
    return zeros(model.nv), factor
