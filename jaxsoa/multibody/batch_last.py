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
"""

import jax
import jax.numpy as jnp

from jaxsoa.multibody.traversal import Traversal


def rows(x):
    """The rows of a (k, ...) array as a list of k arrays."""
    return [x[i] for i in range(x.shape[0])]


def stage(pred, fn, *args):
    """fn(*args) (a list of arrays) evaluated behind a fusion barrier: the true branch of
    `lax.cond(pred, ...)` with a traced `pred` that is always true."""
    shapes = jax.eval_shape(lambda *a: tuple(fn(*a)), *args)
    out = jax.lax.cond(pred, lambda a: tuple(fn(*a)),
                       lambda a: tuple(jnp.zeros(s.shape, s.dtype) for s in shapes), args)
    return list(out)


def read(buffer, t):
    """buffer[t] (a dynamic slice of the leading axis)."""
    return jax.lax.dynamic_index_in_dim(buffer, t, 0, keepdims=False)


def read_rows(buffer, t):
    """The rows of buffer[t] as a list: link t's k entries of an (n, k, B) array."""
    return rows(read(buffer, t))


def components(x):
    """The k arrays x[:, i] of an (n, k, ...) per-link array, each (n, ...): all links at once."""
    return rows(jnp.moveaxis(x, 1, 0))


def world_positions(trav: Traversal):
    """(n,) sequence position of each link's parent, n (the world row) at a root."""
    n = trav.parent.shape[0]
    return jnp.where(trav.parent_pos >= 0, trav.parent_pos, n)


def outward(trav: Traversal, step, root_value, batch: int, dtype):
    """Root-to-tips pass: value_t = step(t, buffer[parent_pos_t])[0] with buffer[n] = root_value
    (a k-list of scalars or (B,) arrays). Returns the extras stacked (n, ...) in depth order."""
    n = trav.parent.shape[0]
    world = jnp.stack([jnp.broadcast_to(jnp.asarray(r, dtype), (batch,)) for r in root_value])
    buffer = jnp.zeros((n + 1, len(root_value), batch), dtype).at[n].set(world)

    def body(buffer, xs):                              # v(t) = step(t, v(parent(t)))
        t, pos = xs
        live = pos >= 0
        parent_row = stage(live, lambda b, i: [read(b, i)], buffer, pos)[0]
        value, extra = step(t, live, rows(parent_row))
        return jax.lax.dynamic_update_index_in_dim(buffer, jnp.stack(value), t, 0), extra

    _, extras = jax.lax.scan(body, buffer, (jnp.arange(n), world_positions(trav)), unroll=trav.unroll)
    return extras


def inward(trav: Traversal, step, width: int, batch: int, dtype):
    """Tips-to-root pass: (up_t, out_t) = step(t, acc[t]) with acc[t] = Σ_{children c} up_c
    (a width-list of (B,) arrays). Returns the final accumulator (n + 1, width, B) (row t: the sum
    over link t's children) and the outs stacked (n, ...) in depth order."""
    n = trav.parent.shape[0]

    def body(acc, xs):                                 # acc(parent(t)) += up(t)
        t, pos = xs
        live = pos >= 0
        own, old = stage(live, lambda a, i, j: [read(a, i), read(a, j)], acc, t, pos)
        up, out = step(t, live, rows(own))
        return jax.lax.dynamic_update_index_in_dim(acc, old + jnp.stack(up), pos, 0), out

    init = jnp.zeros((n + 1, width, batch), dtype)
    return jax.lax.scan(body, init, (jnp.arange(n), world_positions(trav)), reverse=True, unroll=trav.unroll)


def to_depth_order(trav: Traversal, link_slot, x):
    """(B, m) per-sample vectors -> (n, B): row t holds x[:, link_slot[order[t]]], 0 where the
    slot is m (a link without a coordinate). link_slot: (n,) static or traced ints."""
    padded = jnp.concatenate([x, jnp.zeros((x.shape[0], 1), x.dtype)], 1).T        # (m + 1, B)
    return padded[jnp.asarray(link_slot)[trav.order]]


def from_depth_order(trav: Traversal, dof_links, y):
    """(n, B) values in depth order -> (B, m) with column i the value of storage link dof_links[i]."""
    return y[trav.inverse_order[jnp.asarray(dof_links)]].T


def per_link(trav: Traversal, x):
    """(n, ...) per-link data in storage order -> (n, ..., 1) in depth order (shared by the batch)."""
    return x[trav.order][..., None]
