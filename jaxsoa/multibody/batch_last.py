"""The batch-last traversal: the tree passes of `jaxsoa.multibody.traversal` for a whole batch at
once, with the batch as the trailing (minor) axis of every buffer (docs/performance.md,
"Batch-last core").

Layout: per-link buffers carried by a pass are (n + 1, k, B): row t is the link at sequence
position t of the traversal's depth order, row n the world (the root value of an outward pass, a
discarded sink of an inward pass). Per-link data are stacked (n, k, B) in depth order (B = 1 for
data shared by the batch) and read by the step functions inside their stages.

Three XLA:CPU behaviours shape the code (each measured, docs/performance.md):
* every op is elementwise over the trailing batch axis (`jaxsoa.spatial.batch_last`);
* `stage(pred, fn, ...)` evaluates `fn` in the true branch of a `lax.cond` on a traced, always-true
  predicate: a fusion barrier, so a stage's outputs are computed once instead of being recomputed
  inside every consumer fusion;
* the rows a step reads from a carried buffer are read inside a stage, so XLA updates the buffer in
  place instead of copying it on every step.

Step functions:
* outward: ``value_t, extra_t = step(t, live, parent_row)``; the pass writes value_t to row t;
* inward:  ``up_t, out_t = step(t, live, own_row)``; the pass adds up_t to the parent's row.
``live`` is the predicate for the step's stages: always true, but computed from the traversal's
data (the parent's position ≥ 0), so XLA cannot fold the `lax.cond` away (with ``t >= 0`` it can,
and it did in the inward pass: the barrier vanished).
Values are lists of (B,) arrays; extras/outs are stacked (n, k, B) in depth order.

**Per-sample trees.** A stacked model (`jaxsoa.multibody.model.stack_models`: every field with a
leading batch axis, the traversal's included) gives a traversal whose order is (B, n): row t is then
a different link in each sample, the per-link data are (n, k, B), and a step's parent row (outward)
or parent accumulator (inward) sits at a per-sample position. Two ways to reach it, chosen by the
link count (`dense_access`, measured in docs/performance.md, "Per-sample trees"): gathers on the
link axis (the inward pass then follows first-child / next-sibling chains, so it needs no scatter), or
the gather-free masked sums over all n + 1 rows, Σ_j [j = pos_b] x_j (the seed's φ = P ⊙ φ_o, applied
row by row).
"""

import functools

import jax
import jax.numpy as jnp

from jaxsoa.multibody.traversal import Traversal


def rows(x):
    """The rows of a (k, ...) array as a list of k arrays."""
    return [x[i] for i in range(x.shape[0])]


def stage(pred, fn, *args):
    """fn(*args) (a list of arrays) evaluated behind a fusion barrier: the true branch of
    `lax.cond(pred, ...)` with a traced `pred` that is always true. Differentiated (`_staged`), the
    barrier stays on the primal and the tangent is JAX's JVP of fn, outside any cond."""
    fn_of, consts = jax.closure_convert(lambda *a: tuple(fn(*a)), *args)    # closed-over tracers as arguments
    return list(_staged(fn_of, pred, args, tuple(consts)))


def _barrier(fn_of, pred, args, consts):
    shapes = jax.eval_shape(lambda a, c: fn_of(*a, *c), args, consts)
    return jax.lax.cond(pred, lambda a, c: fn_of(*a, *c),
                        lambda a, c: tuple(jnp.zeros(s.shape, s.dtype) for s in shapes), args, consts)


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def _staged(fn_of, pred, args, consts):
    """The stage's `lax.cond`, with a JVP rule that leaves the cond out of the tangent: linearising
    a cond instead splits each branch into known and unknown halves and returns every residual
    from the known cond, which made a batch-last gradient 1.4× slower to trace and 1.8× slower to
    run (docs/performance.md, "Stages and derivatives")."""
    return _barrier(fn_of, pred, args, consts)


@_staged.defjvp
def _staged_jvp(fn_of, primals, tangents):
    pred, args, consts = primals
    _, out_dot = jax.jvp(lambda a, c: fn_of(*a, *c), (args, consts), tangents[1:])   # ∂fn · (ȧ, ċ)
    return _barrier(fn_of, pred, args, consts), out_dot


DENSE_MAX_LINKS = 0
"""Per-sample trees with at most this many links use the masked sums, larger ones the gathers (read
at trace time). 0: gathers at every n, the faster on XLA:CPU from 4 to 64 links (docs/performance.md,
"Per-sample trees"); the masked sums are kept as the measured alternative for other backends."""


def per_sample(trav: Traversal) -> bool:
    """Whether `trav` is a stack of per-sample traversals (order (B, n))."""
    return trav.order.ndim == 2


def dense_access(n: int) -> bool:
    """Whether per-sample rows of an (n + 1)-row buffer are read and added as masked sums."""
    return n <= DENSE_MAX_LINKS


def always(trav: Traversal):
    """A traced scalar that is always true (a stage predicate XLA cannot fold, even for a topology that is a
    constant of the program, such as a model closed over by `jax.jit`: hence the optimization barrier)."""
    return jax.lax.optimization_barrier(trav.order.reshape(-1)[0]) >= 0


def _row_mask(buffer, pos):
    """(m, 1.., B) 0/1 mask of row pos_b in sample b, for an (m, ..., B) buffer and pos (B,)."""
    rows_ = jnp.arange(buffer.shape[0], dtype=jnp.asarray(pos).dtype).reshape((-1,) + (1,) * (buffer.ndim - 1))
    return rows_ == pos.reshape((1,) * (buffer.ndim - 1) + (-1,))


def read(buffer, t):
    """buffer[t]: a dynamic slice of the leading axis for a scalar t; for per-sample positions
    t (B,), row t_b of sample b (a gather, or a masked sum for small buffers)."""
    if jnp.ndim(t) == 0:
        return jax.lax.dynamic_index_in_dim(buffer, t, 0, keepdims=False)
    if dense_access(buffer.shape[0] - 1):
        return jnp.sum(jnp.where(_row_mask(buffer, t), buffer, 0), 0)             # Σ_j [j = t_b] x_j
    index = jnp.reshape(t, (1,) * (buffer.ndim - 1) + (-1,))
    return jnp.take_along_axis(buffer, index, axis=0)[0]


def write(buffer, t, value):
    """buffer with row t set to value (scalar t), or row t_b of sample b (per-sample t (B,))."""
    if jnp.ndim(t) == 0:
        return jax.lax.dynamic_update_index_in_dim(buffer, value, t, 0)
    return jnp.where(_row_mask(buffer, t), value[None], buffer)


def read_rows(buffer, t):
    """The rows of buffer[t] as a list: link t's k entries of an (n, k, B) array."""
    return rows(read(buffer, t))


def components(x):
    """The k arrays x[:, i] of an (n, k, ...) per-link array, each (n, ...): all links at once."""
    return rows(jnp.moveaxis(x, 1, 0))


def world_positions(trav: Traversal):
    """Sequence position of each link's parent, n (the world row) at a root: (n,), or (n, B)
    for per-sample trees."""
    n = trav.parent.shape[-1]
    return jnp.where(trav.parent_pos >= 0, trav.parent_pos, n).T


def outward(trav: Traversal, step, root_value, batch: int, dtype):
    """Root-to-tips pass: value_t = step(t, buffer[parent_pos_t])[0] with buffer[n] = root_value
    (a k-list of scalars or (B,) arrays). Returns the extras stacked (n, ...) in depth order."""
    n = trav.parent.shape[-1]
    world = jnp.stack([jnp.broadcast_to(jnp.asarray(r, dtype), (batch,)) for r in root_value])
    buffer = jnp.zeros((n + 1, len(root_value), batch), dtype).at[n].set(world)

    def body(buffer, xs):                              # v(t) = step(t, v(parent(t)))
        t, pos = xs
        live = pos.reshape(-1)[0] >= 0
        parent_row = stage(live, lambda b, i: [read(b, i)], buffer, pos)[0]
        value, extra = step(t, live, rows(parent_row))
        return jax.lax.dynamic_update_index_in_dim(buffer, jnp.stack(value), t, 0), extra

    _, extras = jax.lax.scan(body, buffer, (jnp.arange(n), world_positions(trav)), unroll=trav.unroll)
    return extras


def inward(trav: Traversal, step, width: int, batch: int, dtype):
    """Tips-to-root pass: (up_t, out_t) = step(t, acc[t]) with acc[t] = Σ_{children c} up_c
    (a width-list of (B,) arrays). Returns the final accumulator (n + 1, width, B) (row t: the sum
    over link t's children) and the outs stacked (n, ...) in depth order."""
    n = trav.parent.shape[-1]

    def body(acc, xs):                                 # acc(parent(t)) += up(t)
        t, pos = xs
        live = pos.reshape(-1)[0] >= 0
        if jnp.ndim(pos) == 0:
            own, old = stage(live, lambda a, i, j: [read(a, i), read(a, j)], acc, t, pos)
            up, out = step(t, live, rows(own))
            return jax.lax.dynamic_update_index_in_dim(acc, old + jnp.stack(up), pos, 0), out
        own = stage(live, lambda a, i: [read(a, i)], acc, t)[0]
        up, out = step(t, live, rows(own))
        return acc + jnp.where(_row_mask(acc, pos), jnp.stack(up)[None], 0), out     # acc[pos_b] += up_b

    if per_sample(trav) and not dense_access(n):
        return _inward_sibling_chains(trav, step, width, batch, dtype)
    init = jnp.zeros((n + 1, width, batch), dtype)
    return jax.lax.scan(body, init, (jnp.arange(n), world_positions(trav)), reverse=True, unroll=trav.unroll)


def _inward_sibling_chains(trav: Traversal, step, width: int, batch: int, dtype):
    """`inward` for per-sample trees by gathers only, no scatter (XLA:CPU's scatter is a scalar loop):
    chain_t = up_t + chain_{next sibling of t}, so link t's children sum is chain_{first child of t};
    both are read by a gather and chain_t is written at the shared row t, in place."""
    n = trav.parent.shape[-1]
    first, nxt = trav.first_child.T, trav.next_sibling.T                # (n + 1, B), (n, B): built with the tree

    def body(chain, xs):                               # acc_t = chain[first(t)];  chain[t] = up_t + chain[next(t)]
        t, first_t, next_t = xs
        live = first_t.reshape(-1)[0] >= 0
        own = stage(live, lambda c, i: [read(c, i)], chain, first_t)[0]
        up, out = step(t, live, rows(own))
        value = stage(live, lambda c, i, u: [u + read(c, i)], chain, next_t, jnp.stack(up))[0]
        return jax.lax.dynamic_update_index_in_dim(chain, value, t, 0), (out, own)

    init = jnp.zeros((n + 1, width, batch), dtype)                    # row n: the "none" link, always zero
    chain, (outs, owns) = jax.lax.scan(body, init, (jnp.arange(n), first[:n], nxt), reverse=True,
                                       unroll=trav.unroll)
    return jnp.concatenate([owns, read(chain, first[n])[None]]), outs


def to_depth_order(trav: Traversal, link_slot, x):
    """(B, m) per-sample vectors -> (n, B): row t holds x[:, link_slot[order[t]]], 0 where the
    slot is m (a link without a coordinate). link_slot: (n,) static or traced ints."""
    padded = jnp.concatenate([x, jnp.zeros((x.shape[0], 1), x.dtype)], 1).T        # (m + 1, B)
    index = jnp.asarray(link_slot)[trav.order]
    if per_sample(trav):
        return jnp.take_along_axis(padded, index.T, axis=0)
    return padded[index]


def from_depth_order(trav: Traversal, dof_links, y):
    """(n, B) values in depth order -> (B, m) with column i the value of storage link dof_links[i]."""
    index = trav.inverse_order[..., jnp.asarray(dof_links)]
    if per_sample(trav):
        return jnp.take_along_axis(y, index.T, axis=0).T
    return y[index].T


def per_link(trav: Traversal, x):
    """Per-link data in storage order, (n, ...) or (B, n, ...) for per-sample trees -> depth order
    (n, ..., 1) (shared by the batch) or (n, ..., B)."""
    if not per_sample(trav):
        return x[trav.order][..., None]
    index = jnp.moveaxis(trav.order.reshape(trav.order.shape + (1,) * (x.ndim - 2)), 0, -1)
    return jnp.take_along_axis(jnp.moveaxis(x, 0, -1), index, axis=0)     # the gather writes the (n, ..., B) layout
