"""Topology from configuration parameters (seed 000 §2.3–2.4; design/soa.md §4).

A configuration parameter of link k is ``(link_id, degree, interface[0..degree-1])``:
``interface[m]`` is the ID of the link attached at interface m of link k, ``0`` for a free end and
``s + 1`` (s = number of links) for the virtual joint to inertial space, where the root attaches.
Link IDs are 1..s in any storage order. A system is stored as arrays: ``link_ids (s,)`` and
``interfaces (s, max_degree)`` (unused slots padded with 0; ``degree (s,)`` optional).

From the root (the link with an interface pointing to s + 1) the interfaces are traversed: each
link's inboard (parent) link and inboard interface follow. Outputs (`ConfigurationTopology`), all in
storage order (storage index k holds link ``link_ids[k]``):

* ``parent (s,)``: storage index of the inboard link, -1 for the root.
* ``inboard_interface (s,)``: which interface of link k points to its parent (to s + 1 at the root).
* ``parent_interface (s,)``: which interface of the parent link k hangs on (-1 at the root).
* ``S (s, s)`` int32, the incidence matrix: column k is joint h_k, ``S[k, k] = +1`` (its outboard
  body) and ``S[parent(k), k] = -1`` (its inboard body; no entry for the root's virtual joint).
* ``P (s, s)`` bool, the path matrix: ``P[i, j] = 1`` iff link i lies on the path from link j to the
  root (i == j included), as `jaxsoa.traversal.path_matrix`. With these signs ``S · P = E`` exactly:
  ``(S P)[k, j] = P[k, j] − Σ_{children c of k} P[c, j]``, and if k is a strict ancestor of j
  exactly one child of k is too. The inboard sequence of link j is ``{i : P[i, j]}`` (column j),
  its outboard sequence ``{i : P[j, i]}`` (row j).
* ``depth (s,)`` (number of ancestors) and ``order (s,)`` (storage indices sorted stably by depth:
  parents precede children, as `jaxsoa.traversal.tree_traversal`).

Two versions: `topology_from_configuration` (host, numpy, full validation: `ValueError` naming the
link ID and interface index) and `topology_from_configuration_traced` (pure jnp, fixed s, s rounds of
breadth-first label propagation; usable under `jit`, `vmap` and inside `lax.scan`; returns a
``valid`` flag instead of raising). Closed loops (a link reached twice) are out of scope here (issue
#4: cut joints): the host builder raises `ValueError` naming the link; the traced one reports
``valid = False``.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np


class ConfigurationTopology(NamedTuple):
    parent: object
    inboard_interface: object
    parent_interface: object
    S: object
    P: object
    depth: object
    order: object


class TracedConfigurationTopology(NamedTuple):
    parent: jax.Array
    inboard_interface: jax.Array
    parent_interface: jax.Array
    S: jax.Array
    P: jax.Array
    depth: jax.Array
    order: jax.Array
    valid: jax.Array


def incidence_matrix(parent, xp=np):
    """(s,) parent -> (s, s) int32 S with S[k, k] = 1 and S[parent(k), k] = -1."""
    s = parent.shape[0]
    ar = xp.arange(s).astype(parent.dtype)
    child_of = (ar[:, None] == parent[None, :]).astype(xp.int32)        # [i, k] = (parent(k) == i)
    return xp.eye(s, dtype=xp.int32) - child_of


def _validated_slots(link_ids, interfaces, degree):
    link_ids = np.asarray(link_ids)
    interfaces = np.asarray(interfaces)
    if link_ids.ndim != 1 or interfaces.ndim != 2 or interfaces.shape[0] != link_ids.shape[0]:
        raise ValueError(f"link_ids must be (s,) and interfaces (s, max_degree); got {link_ids.shape}, "
                         f"{interfaces.shape}")
    if not (np.issubdtype(link_ids.dtype, np.integer) and np.issubdtype(interfaces.dtype, np.integer)):
        raise ValueError("link_ids and interfaces must be integer arrays")
    s = link_ids.shape[0]
    if s == 0:
        raise ValueError("a system needs at least one link")
    seen = {}
    for k, lid in enumerate(link_ids.tolist()):
        if not 1 <= lid <= s:
            raise ValueError(f"link ID {lid} (storage index {k}) is out of range 1..{s}")
        if lid in seen:
            raise ValueError(f"link ID {lid} is duplicated (storage indices {seen[lid]} and {k})")
        seen[lid] = k
    if degree is None:
        degree = np.full(s, interfaces.shape[1])
    degree = np.asarray(degree)
    if degree.shape != (s,):
        raise ValueError(f"degree must be (s,) = ({s},), got {degree.shape}")
    slots = []
    for k, lid in enumerate(link_ids.tolist()):
        d = int(degree[k])
        if not 0 <= d <= interfaces.shape[1]:
            raise ValueError(f"link {lid}: degree {d} outside 0..{interfaces.shape[1]}")
        for m in range(d, interfaces.shape[1]):
            if interfaces[k, m] != 0:
                raise ValueError(f"link {lid} interface {m}: beyond its degree {d} but not padded with 0")
        row = interfaces[k, :d].tolist()
        for m, target in enumerate(row):
            if not 0 <= target <= s + 1:
                raise ValueError(f"link {lid} interface {m}: dangling pointer to {target}, not a link ID "
                                 f"(1..{s}), 0 (free end) or {s + 1} (virtual joint)")
            if target == lid:
                raise ValueError(f"link {lid} interface {m}: points to the link itself")
            if target != 0 and row.index(target) != m:
                raise ValueError(f"link {lid} interface {m}: second pointer to {target} (first at interface "
                                 f"{row.index(target)}): a closed loop, out of scope here (issue #4)")
        slots.append(row)
    return link_ids, slots, seen


def topology_from_configuration(link_ids, interfaces, degree=None) -> ConfigurationTopology:
    """Host-side builder (numpy): configuration parameters -> `ConfigurationTopology` (module doc).

    Raises `ValueError` naming the link ID (and interface index) for: IDs out of 1..s or
    duplicated; an interface value that is no link ID, 0 or s + 1 (dangling pointer); a pointer to
    the link itself; a one-sided pointer (A points to B but no interface of B points to A); no root
    or several roots (interfaces pointing to s + 1); a link not connected to the root; a closed loop
    (a link reached twice, or two interfaces pointing to one link), which belongs to issue #4.
    """
    link_ids, slots, index_of = _validated_slots(link_ids, interfaces, degree)
    s = link_ids.shape[0]
    roots = []
    for k, row in enumerate(slots):
        lid = int(link_ids[k])
        for m, target in enumerate(row):
            if target == s + 1:
                roots.append((lid, m))
            elif target != 0 and lid not in slots[index_of[target]]:
                raise ValueError(f"link {lid} interface {m}: one-sided pointer to link {target}, which has "
                                 f"no interface pointing back to link {lid}")
    if not roots:
        raise ValueError(f"no root: no interface points to the virtual joint {s + 1}")
    if len(roots) > 1:
        names = ", ".join(f"link {lid} interface {m}" for lid, m in roots)
        raise ValueError(f"several roots (interfaces pointing to the virtual joint {s + 1}): {names}")

    root_id, root_m = roots[0]
    root = index_of[root_id]
    parent = np.full(s, -1, np.int64)
    inboard = np.full(s, -1, np.int64)
    parent_if = np.full(s, -1, np.int64)
    reached = np.zeros(s, bool)
    reached[root], inboard[root] = True, root_m
    queue = [root]
    while queue:                                                  # breadth-first from the root
        j = queue.pop(0)
        for m, target in enumerate(slots[j]):
            if target in (0, s + 1) or m == inboard[j]:
                continue
            k = index_of[target]
            if reached[k]:
                raise ValueError(f"link {target} is reached twice (again from link {int(link_ids[j])} interface "
                                 f"{m}): a closed loop, out of scope here (issue #4)")
            reached[k] = True
            parent[k], parent_if[k] = j, m
            inboard[k] = slots[k].index(int(link_ids[j]))
            queue.append(k)
    if not reached.all():
        k = int(np.flatnonzero(~reached)[0])
        lid = int(link_ids[k])
        free = [m for m, t in enumerate(slots[k]) if t != 0]
        raise ValueError(f"link {lid} is not connected to the root link {root_id} (its interfaces "
                         f"{free} lead to links {[slots[k][m] for m in free]})")

    P = np.eye(s, dtype=bool)
    depth = np.zeros(s, np.int64)
    for k in range(s):
        a = parent[k]
        while a >= 0:
            P[a, k] = True
            depth[k] += 1
            a = parent[a]
    order = np.argsort(depth, kind="stable")
    return ConfigurationTopology(parent, inboard, parent_if, incidence_matrix(parent), P, depth, order)


def topology_from_configuration_traced(interfaces, root_hint=None, link_ids=None) -> TracedConfigurationTopology:
    """Jittable version (pure jnp, fixed s): configuration parameters -> `TracedConfigurationTopology`.

    interfaces (s, D) int: as for the host builder, unused slots 0. link_ids (s,) int, optional
    (default: storage index + 1). root_hint: optional (traced) storage index of the root; by default
    the first link with an interface pointing to s + 1.

    Breadth-first label propagation for s rounds (`lax.fori_loop`): at each round every unreached
    link adjacent (by a mutual pair of pointers) to the last frontier takes it as parent and copies
    its parent's row of ancestors (plus itself), so P comes out of the same sweep; O(s³) work,
    no data-dependent shapes. Nothing raises: ``valid`` is True iff the input passes the host
    builder's checks (IDs a permutation of 1..s, pointers in 0..s+1 and mutual, no self or
    duplicate pointer, one root, connected, no loop). Where it is False the other outputs are
    unspecified (unreached links keep parent -1).
    """
    interfaces = jnp.asarray(interfaces)
    s = interfaces.shape[0]
    ar = jnp.arange(s, dtype=jnp.int32)
    ids = ar + 1 if link_ids is None else jnp.asarray(link_ids, jnp.int32)
    ids_ok = jnp.all(jnp.sort(ids) == ar + 1)
    virtual = jnp.asarray(s + 1, interfaces.dtype)
    # target[k, m, j] = interface m of link k points to the link stored at j
    target = interfaces[:, :, None] == ids.astype(interfaces.dtype)[None, None, :]
    points = jnp.any(target, axis=1)                              # (s, s): k points to j
    mutual = points & points.T
    is_root = jnp.any(interfaces == virtual, axis=1)
    root = jnp.argmax(is_root).astype(jnp.int32) if root_hint is None else jnp.asarray(root_hint, jnp.int32)

    eye = jnp.eye(s, dtype=bool)
    root_mask = ar == root
    init = (root_mask, root_mask, jnp.full(s, -1, jnp.int32), eye & root_mask[:, None])

    def round_(_, state):
        reached, frontier, parent, ancestors = state              # ancestors[k] = row k of Pᵀ
        cand = mutual & frontier[None, :] & ~reached[:, None]
        new = jnp.any(cand, axis=1)
        par = jnp.argmax(cand, axis=1).astype(jnp.int32)
        parent = jnp.where(new, par, parent)
        ancestors = jnp.where(new[:, None], ancestors[par] | eye, ancestors)
        return reached | new, new, parent, ancestors

    reached, _, parent, ancestors = jax.lax.fori_loop(0, s, round_, init)
    P = ancestors.T
    safe_parent = jnp.maximum(parent, 0)
    has_parent = parent >= 0
    to_parent = jnp.take_along_axis(target, safe_parent[:, None, None], axis=2)[:, :, 0]      # (s, D)
    inboard = jnp.where(has_parent, jnp.argmax(to_parent, axis=1),
                        jnp.argmax(interfaces == virtual, axis=1)).astype(jnp.int32)
    on_parent = target[safe_parent, :, ar]                        # [k, m] = parent's interface m -> k
    parent_if = jnp.where(has_parent, jnp.argmax(on_parent, axis=1), -1).astype(jnp.int32)
    depth = (jnp.sum(P, axis=0) - 1).astype(jnp.int32)

    in_range = jnp.all((interfaces >= 0) & (interfaces <= virtual))
    links_or_special = jnp.all(jnp.any(target, axis=2) | (interfaces == 0) | (interfaces == virtual))
    no_duplicates = jnp.all(jnp.sum(target, axis=1) <= 1) & jnp.all(jnp.sum(interfaces == virtual, axis=1) <= 1)
    tree_edges = jnp.sum(mutual) == 2 * (s - 1)                   # connected with s - 1 edges: a tree
    valid = (ids_ok & in_range & links_or_special & no_duplicates & ~jnp.any(points & eye)
             & jnp.all(points == points.T) & (jnp.sum(is_root) == 1) & is_root[root] & jnp.all(reached)
             & tree_edges)
    order = jnp.argsort(depth, stable=True).astype(jnp.int32)
    return TracedConfigurationTopology(parent, inboard, parent_if, incidence_matrix(parent, jnp), P, depth,
                                       order, valid)
