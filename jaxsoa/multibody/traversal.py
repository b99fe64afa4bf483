"""The one tree-traversal helper every pass uses, over a **traced** parent array.

The order is derived inside the trace: link depths by pointer jumping (⌈log₂ n⌉ + 1 rounds),
then a stable argsort by depth, so parents always precede their children. Two strategies:

* ``"sequential"`` (default): a `lax.scan` over the depth-sorted links, O(n) link updates.
  Each step reads its parent's value from a carried buffer (outward) or adds its contribution
  to its parent's accumulator (inward).
* ``"levels"``: level-synchronous sweeps — every link is updated in parallel (vmap) at each of
  the n possible depths, keeping the updates of the links at that depth. O(n · n) link updates,
  but each sweep is wide; kept as the measured alternative (see docs/benchmarks.md).

The model builders build the traversal once and `Model` carries it (`model.traversal`, rebuilt by
`model.with_parent`); algorithms take it from there.

Step functions are written for one link and are shared by both strategies:
* outward: ``value_k, extra_k = step(data_k, value_parent)``
* inward:  ``out_k, up_k = step(data_k, acc_k)`` with ``acc_k = Σ_{children c} up_c``.
"""

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np

tmap = jax.tree_util.tree_map


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Traversal:
    """parent, depth, order (link at sequence position t), parent_pos (sequence position of
    the parent of order[t], -1 at the root), inverse_order; all (n,) int32, all traced. The children
    as chains in sequence positions (`child_chains`), n for none: first_child (n + 1,) (entry n: the
    first root) and next_sibling (n,)."""
    parent: jax.Array
    depth: jax.Array
    order: jax.Array
    parent_pos: jax.Array
    inverse_order: jax.Array
    first_child: jax.Array
    next_sibling: jax.Array
    strategy: str = dataclasses.field(metadata=dict(static=True))
    unroll: int = dataclasses.field(metadata=dict(static=True))


def link_depth(parent):
    """(n,) parent -> (n,) number of ancestors, by pointer jumping: d_i += d_{a_i}; a_i = a_{a_i}.

    After r rounds d_i counts the first min(2^r, depth_i) steps towards the root; the 2^r ≥ 2n
    rounds run here make d_i ≥ n exactly for the links that never reach the root (a cycle)."""
    n = parent.shape[0]
    depth = (parent >= 0).astype(jnp.int32)
    ancestor = parent
    for _ in range(max(1, math.ceil(math.log2(max(n, 2)))) + 1):
        has = ancestor >= 0
        safe = jnp.where(has, ancestor, 0)
        depth = depth + jnp.where(has, depth[safe], 0)
        ancestor = jnp.where(has, ancestor[safe], -1)
    return depth


def tree_traversal(parent, strategy="sequential", unroll=1):
    """Build the `Traversal` of a traced (n,) parent array (one tree or several, parent −1 at each root).
    A concrete `parent` is checked: 1-D integers in [−1, n), no link its own parent, no cycle (ValueError)."""
    if strategy not in ("sequential", "levels"):
        raise ValueError(f"strategy must be 'sequential' or 'levels', got {strategy!r}")
    if isinstance(unroll, (bool, np.bool_)) or not isinstance(unroll, (int, np.integer)) or unroll < 1:
        raise ValueError(f"argument 'unroll' must be an int ≥ 1 (link steps per scan iteration), got {unroll!r}")
    if not isinstance(parent, jax.core.Tracer):
        _check_parent(np.asarray(parent))
    parent = jnp.asarray(parent, jnp.int32)
    depth = link_depth(parent)
    order = jnp.argsort(depth, stable=True).astype(jnp.int32)
    inverse_order = jnp.argsort(order).astype(jnp.int32)
    parent_of_seq = parent[order]
    parent_pos = jnp.where(parent_of_seq >= 0, inverse_order[jnp.maximum(parent_of_seq, 0)], -1)
    return Traversal(parent, depth, order, parent_pos, inverse_order, *child_chains(parent_pos), strategy, unroll)


def _check_parent(parent: np.ndarray):
    """A host parent array: 1-D integers, each in [−1, n), not the link itself, every link reaching a root
    (pointer jumping on the host, as `link_depth`: after 2^r ≥ n jumps a link still short of a root is on
    a cycle). On the host: inside a trace, jnp operations on a constant are traced too."""
    if parent.ndim != 1 or not (np.issubdtype(parent.dtype, np.integer) or parent.size == 0):
        raise ValueError(f"argument 'parent' must be a 1-D integer array, got {parent.dtype}{list(parent.shape)}")
    if parent.size == 0:
        raise ValueError("argument 'parent' is empty: a tree needs at least one link")
    bad = (parent < -1) | (parent >= parent.size) | (parent == np.arange(parent.size))
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise ValueError(f"argument 'parent': link {k} has parent {int(parent[k])}, expected −1 (a root) or "
                         f"another link in [0, {parent.size})")
    ancestor = parent.astype(np.int64)
    for _ in range(max(1, math.ceil(math.log2(max(parent.size, 2)))) + 1):
        ancestor = np.where(ancestor >= 0, ancestor[np.maximum(ancestor, 0)], -1)
    if np.any(ancestor >= 0):
        raise ValueError(f"argument 'parent': links {np.flatnonzero(ancestor >= 0).tolist()} form a cycle "
                         "(never reach a root)")


def child_chains(parent_pos):
    """Each link's children as a chain, in sequence positions, n for none: first (n + 1,) the first
    child of position t (entry n: the first root, the world's child) and next (n,) the next sibling
    of position t, siblings in increasing position. By one sort of the links by (parent position,
    own position): O(n log n), once per tree; a pass over per-sample trees follows the chains instead
    of scattering into its parents' rows (`jaxsoa.multibody.batch_last.inward`)."""
    n = parent_pos.shape[0]
    parents = jnp.where(parent_pos >= 0, parent_pos, n).astype(jnp.int32)          # n at a root
    own = jnp.arange(n, dtype=jnp.int32)
    by_parent = jnp.argsort(parents * (n + 1) + own).astype(jnp.int32)
    sorted_parents = parents[by_parent]
    following = jnp.concatenate([by_parent[1:], jnp.full((1,), n, jnp.int32)])
    same = jnp.concatenate([sorted_parents[1:] == sorted_parents[:-1], jnp.zeros((1,), bool)])
    nxt = jnp.zeros(n, jnp.int32).at[by_parent].set(jnp.where(same, following, n))    # back to own positions
    rows = jnp.arange(n + 1, dtype=jnp.int32)
    start = jnp.minimum(jnp.searchsorted(sorted_parents, rows), n - 1)             # first entry ≥ row
    first = jnp.where(sorted_parents[start] == rows, by_parent[start], n)
    return first.astype(jnp.int32), nxt


def _alloc(tree, n):
    return tmap(lambda x: jnp.zeros((n, *jnp.shape(x)), jnp.result_type(x)), tree)


def _scan_links(trav: Traversal, body, init, link_data, reverse):
    """Scan `body(carry, (t, data_t, parent_pos_t))` over the depth-sorted links (tips first if
    `reverse`) and return its per-link outputs in storage order."""
    n = trav.parent.shape[0]
    xs = (jnp.arange(n), tmap(lambda x: x[trav.order], link_data), trav.parent_pos)
    _, seq_out = jax.lax.scan(body, init, xs, reverse=reverse, unroll=trav.unroll)
    return tmap(lambda y: y[trav.inverse_order], seq_out)


def outward(trav: Traversal, step, link_data, root_value):
    """Root-to-tips pass. Returns (values, extras), each stacked (n, ...) in storage order."""
    if trav.strategy == "levels":
        return _outward_levels(trav, step, link_data, root_value)

    def body(buffer, xs):                 # value_t = step(data_t, buffer[parent_pos_t] or root)
        t, data_t, pos = xs
        value_parent = tmap(lambda b, r: jnp.where(pos >= 0, _read(b, pos), r), buffer, root_value)
        value, extra = step(data_t, value_parent)
        return tmap(lambda b, v: _write(b, v, t), buffer, value), (value, extra)

    return _scan_links(trav, body, _alloc(root_value, trav.parent.shape[0]), link_data, reverse=False)


def inward(trav: Traversal, step, link_data, zero_acc):
    """Tips-to-root pass. Returns the `out` of every link, stacked (n, ...) in storage order."""
    if trav.strategy == "levels":
        return _inward_levels(trav, step, link_data, zero_acc)

    def body(acc, xs):                    # out_t, up_t = step(data_t, acc[t]);  acc[parent_pos_t] += up_t
        t, data_t, pos = xs
        out, up = step(data_t, tmap(lambda a: _read(a, t), acc))
        keep = (pos >= 0).astype(jnp.result_type(*jax.tree_util.tree_leaves(up)))
        return tmap(lambda a, u: _write(a, _read(a, pos) + keep * u, pos), acc, up), out

    return _scan_links(trav, body, _alloc(zero_acc, trav.parent.shape[0]), link_data, reverse=True)


def _read(buffer, pos):
    """buffer[pos] as a dynamic slice (in place under XLA; a gather only if pos is batched)."""
    return jax.lax.dynamic_index_in_dim(buffer, jnp.maximum(pos, 0), 0, keepdims=False)


def _write(buffer, value, pos):
    """buffer with buffer[pos] = value, as a dynamic update slice (in place under XLA)."""
    return jax.lax.dynamic_update_index_in_dim(buffer, value, jnp.maximum(pos, 0), 0)


def _select(mask, new, old):
    """Per-link choice between two pytrees stacked (n, ...): new where mask, else old."""
    return tmap(lambda x, y: jnp.where(mask.reshape(mask.shape + (1,) * (x.ndim - 1)), x, y), new, old)


def _outward_levels(trav, step, link_data, root_value):
    """Level-synchronous outward pass: at sweep l every link is updated, links at depth l kept."""
    n = trav.parent.shape[0]
    has_parent = trav.parent >= 0
    safe_parent = jnp.maximum(trav.parent, 0)
    root_stack = tmap(lambda r: jnp.broadcast_to(r, (n, *jnp.shape(r))), root_value)
    values, extras = root_stack, None
    for level in range(n):
        value_parent = _select(has_parent, tmap(lambda v: v[safe_parent], values), root_stack)
        new_values, new_extras = jax.vmap(step)(link_data, value_parent)
        at_level = trav.depth == level
        values = _select(at_level, new_values, values)
        extras = new_extras if extras is None else _select(at_level, new_extras, extras)
    return values, extras


def _inward_levels(trav, step, link_data, zero_acc):
    """Level-synchronous inward pass: deepest level first, children sums by segment_sum."""
    n = trav.parent.shape[0]
    segment = jnp.where(trav.parent >= 0, trav.parent, n)        # the root's contribution is dropped
    acc, outs = _alloc(zero_acc, n), None
    for level in reversed(range(n)):
        new_outs, ups = jax.vmap(step)(link_data, acc)
        at_level = trav.depth == level
        outs = new_outs if outs is None else _select(at_level, new_outs, outs)
        ups = _select(at_level, ups, tmap(jnp.zeros_like, ups))
        acc = tmap(lambda a, u: a + jax.ops.segment_sum(u, segment, num_segments=n), acc, ups)
    return outs


def path_matrix(trav):
    """(n, n) bool P with P[i, j] = 1 iff link i lies on the path from link j to the root
    (i == j included): column j is column parent(j) plus e_j. `trav`: a `Traversal` or a model (its
    traversal)."""
    trav = getattr(trav, "traversal", trav)
    if not isinstance(trav, Traversal):
        raise TypeError(f"argument 'trav' must be a Traversal or a Model, got {type(trav).__name__}")
    n = trav.parent.shape[0]
    eye = jnp.eye(n, dtype=bool)

    def step(e_k, ancestors_parent):
        ancestors = ancestors_parent | e_k
        return ancestors, None

    columns, _ = outward(trav, step, eye, jnp.zeros(n, bool))
    return columns.T
