"""Topology from configuration parameters (docs/user_guide.md §7).

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
  root (i == j included), as `jaxsoa.multibody.traversal.path_matrix`. With these signs ``S · P = E`` exactly:
  ``(S P)[k, j] = P[k, j] − Σ_{children c of k} P[c, j]``, and if k is a strict ancestor of j
  exactly one child of k is too. The inboard sequence of link j is ``{i : P[i, j]}`` (column j),
  its outboard sequence ``{i : P[j, i]}`` (row j).
* ``depth (s,)`` (number of ancestors) and ``order (s,)`` (storage indices sorted stably by depth:
  parents precede children, as `jaxsoa.multibody.traversal.tree_traversal`).

Two versions: `topology_from_configuration` (host, numpy, full validation: `ValueError` naming the
link ID and interface index) and `topology_from_configuration_traced` (pure jnp, fixed s, s rounds of
breadth-first label propagation; usable under `jit`, `vmap` and inside `lax.scan`; returns a
``valid`` flag instead of raising).

Closed loops (docs/user_guide.md §6). The traversal is level by level (breadth first); a link
first reached in round d takes as parent its neighbour of round d − 1 with the lowest storage index
(so the storage order picks the cut among equally distant neighbours; the tree is a shortest-path
tree from the root). Every mutual pair of pointers that is not
a parent–child edge closes a loop: the traversal cuts it there and records a *cut*
``(link_a, interface_a, link_b, interface_b)`` in storage indices, with ``link_b`` the link reached
again (depth(a) < depth(b), or equal depths and a < b); cuts are sorted by ``(link_a, interface_a)``.
``n_cuts = (number of mated pairs) − (s − 1)``. The cut joint's type comes from user data:
``cut_joint_types (s, max_degree)``, the code in `CUT_JOINT_TYPES` of the joint mated at each
interface (default 0, a weld; both ends of a cut must agree). Loops must be allowed explicitly: with
``max_cuts = 0`` (default) a loop is an error as before; the traced builder has a static
``max_cuts`` (outputs padded with −1 to that length, ``cuts_overflow`` set and ``valid`` False when
there are more cuts). `jaxsoa.topology.cuts.cut_interfaces` gives the cut tree's configuration parameters (both ends of
each cut set to 0; numpy or traced), from which `jaxsoa.topology.reconfigure` builds the tree's model, and
`jaxsoa.topology.cuts.closure_from_topology` turns the recorded cuts into a `jaxsoa.constraints.closure.LoopClosure`
from a `jaxsoa.topology.reconfigure.LinkDesign`'s interface poses. Ring-chain systems of several spacecraft: one hub
points to s + 1 and is the root, the other hubs are ordinary links.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsoa.topology.configuration_inputs import (
    CUT_JOINT_TYPES,
    check_max_cuts,
    check_traced_inputs,
    validated_cut_types,
    validated_slots,
)


class ConfigurationTopology(NamedTuple):
    """Host (numpy) topology of `topology_from_configuration`, fields as in the module docstring."""
    parent: np.ndarray
    inboard_interface: np.ndarray
    parent_interface: np.ndarray
    S: np.ndarray
    P: np.ndarray
    depth: np.ndarray
    order: np.ndarray
    cut_link_a: np.ndarray = np.zeros(0, np.int64)     # (n_cuts,) storage index of the link reaching again
    cut_interface_a: np.ndarray = np.zeros(0, np.int64)
    cut_link_b: np.ndarray = np.zeros(0, np.int64)     # (n_cuts,) storage index of the link reached again
    cut_interface_b: np.ndarray = np.zeros(0, np.int64)
    cut_type: np.ndarray = np.zeros(0, np.int64)       # (n_cuts,) code in CUT_JOINT_TYPES
    n_cuts: int = 0


class TracedConfigurationTopology(NamedTuple):
    """Traced topology of `topology_from_configuration_traced` (module docstring), with a `valid` flag."""
    parent: jax.Array
    inboard_interface: jax.Array
    parent_interface: jax.Array
    S: jax.Array
    P: jax.Array
    depth: jax.Array
    order: jax.Array
    valid: jax.Array
    cut_link_a: jax.Array            # (max_cuts,) as ConfigurationTopology, padded with -1
    cut_interface_a: jax.Array
    cut_link_b: jax.Array
    cut_interface_b: jax.Array
    cut_type: jax.Array
    n_cuts: jax.Array                # () int32, all cuts found (may exceed max_cuts)
    cuts_overflow: jax.Array         # () bool, n_cuts > max_cuts


def incidence_matrix(parent, xp=np):
    """(s,) parent -> (s, s) int32 S with S[k, k] = 1 and S[parent(k), k] = -1."""
    s = parent.shape[0]
    ar = xp.arange(s).astype(parent.dtype)
    child_of = (ar[:, None] == parent[None, :]).astype(xp.int32)        # [i, k] = (parent(k) == i)
    return xp.eye(s, dtype=xp.int32) - child_of


def topology_from_configuration(link_ids, interfaces, degree=None, *, max_cuts=0,
                                cut_joint_types=None) -> ConfigurationTopology:
    """Host-side builder (numpy): configuration parameters -> `ConfigurationTopology` (module doc).

    Raises `ValueError` naming the link ID (and interface index) for: IDs out of 1..s or
    duplicated; an interface value that is no link ID, 0 or s + 1 (dangling pointer); a pointer to
    the link itself; a one-sided pointer (A points to B but no interface of B points to A); no root
    or several roots (interfaces pointing to s + 1); a link not connected to the root; two interfaces
    pointing to one link; more closed loops than ``max_cuts`` (a link reached twice; default 0: none
    allowed); ``cut_joint_types (s, D)`` codes out of range or differing at the two ends of a cut.
    """
    check_max_cuts(max_cuts)
    link_ids, slots, index_of = validated_slots(link_ids, interfaces, degree)
    codes = validated_cut_types(cut_joint_types, np.shape(interfaces), link_ids)
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
    depth = np.zeros(s, np.int64)
    reached = np.zeros(s, bool)
    reached[root] = True
    frontier = [root]
    while frontier:                                   # level by level: parent = lowest-index neighbour
        new = {}
        for j in sorted(frontier):
            for target in slots[j]:
                if target not in (0, s + 1) and not reached[index_of[target]]:
                    new.setdefault(index_of[target], j)
        for k, j in new.items():
            reached[k], parent[k], depth[k] = True, j, depth[j] + 1
        frontier = list(new)
    if not reached.all():
        k = int(np.flatnonzero(~reached)[0])
        lid = int(link_ids[k])
        free = [m for m, t in enumerate(slots[k]) if t != 0]
        raise ValueError(f"link {lid} is not connected to the root link {root_id} (its interfaces "
                         f"{free} lead to links {[slots[k][m] for m in free]})")
    inboard = np.array([root_m if k == root else slots[k].index(int(link_ids[parent[k]])) for k in range(s)])
    parent_if = np.array([-1 if k == root else slots[parent[k]].index(int(link_ids[k])) for k in range(s)])

    cuts = []                                         # non-tree mated pairs, a-side first
    for j in range(s):
        for m, target in enumerate(slots[j]):
            k = index_of.get(target)
            if k is None or parent[k] == j or parent[j] == k or (depth[j], j) > (depth[k], k):
                continue
            mb = slots[k].index(int(link_ids[j]))
            if codes[j, m] != codes[k, mb]:
                raise ValueError(f"link {int(link_ids[j])} interface {m} and link {target} interface {mb}: "
                                 f"cut joint types differ ({codes[j, m]} vs {codes[k, mb]})")
            cuts.append((j, m, k, mb, int(codes[j, m])))
    if len(cuts) > max_cuts:
        j, m, k, _, _ = cuts[max_cuts]
        raise ValueError(f"link {int(link_ids[k])} is reached twice (again from link {int(link_ids[j])} interface "
                         f"{m}): a closed loop, more than max_cuts = {max_cuts} cuts")

    P = np.eye(s, dtype=bool)
    for k in range(s):
        a = parent[k]
        while a >= 0:
            P[a, k] = True
            a = parent[a]
    order = np.argsort(depth, kind="stable")
    cut_arrays = np.array(cuts, np.int64).reshape(len(cuts), 5).T
    return ConfigurationTopology(parent, inboard, parent_if, incidence_matrix(parent), P, depth, order,
                                 *cut_arrays, len(cuts))


def topology_from_configuration_traced(interfaces, root_hint=None, link_ids=None, *, max_cuts=0,
                                       cut_joint_types=None) -> TracedConfigurationTopology:
    """Jittable version (pure jnp, fixed s): configuration parameters -> `TracedConfigurationTopology`.

    interfaces (s, D) int: as for the host builder, unused slots 0. link_ids (s,) int, optional
    (default: storage index + 1). root_hint: optional (traced) storage index of the root; by default
    the first link with an interface pointing to s + 1. max_cuts (static int) and cut_joint_types
    (s, D) int (default all 0, welds): closed loops, module doc.

    Breadth-first label propagation for s rounds (`lax.fori_loop`): at each round every unreached
    link adjacent (by a mutual pair of pointers) to the last frontier takes it as parent and copies
    its parent's row of ancestors (plus itself), so P comes out of the same sweep; O(s³) work,
    no data-dependent shapes. Nothing raises: ``valid`` is True iff the input passes the host
    builder's checks with the same ``max_cuts`` (IDs a permutation of 1..s, pointers in 0..s+1 and
    mutual, no self or duplicate pointer, one root, connected, at most max_cuts loops, cut types
    agreeing). Where it is False the other outputs are unspecified (unreached links keep parent -1).
    """
    check_max_cuts(max_cuts)
    check_traced_inputs(interfaces, link_ids, cut_joint_types)
    interfaces = jnp.asarray(interfaces)
    s, D = interfaces.shape
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

    # cuts: slot (j, m) -> k mated, not a tree edge, a-side ((depth, index) of j below k's)
    other = jnp.argmax(target, axis=2).astype(jnp.int32)          # (s, D) storage index pointed to
    slot_mutual = jnp.any(target & mutual[:, None, :], axis=2)
    tree_edge = (parent[other] == ar[:, None]) | (parent[:, None] == other)
    a_side = (depth[:, None] < depth[other]) | ((depth[:, None] == depth[other]) & (ar[:, None] < other))
    cut_slot = slot_mutual & ~tree_edge & a_side
    codes = jnp.zeros((s, D), jnp.int32) if cut_joint_types is None else jnp.asarray(cut_joint_types, jnp.int32)
    back = jnp.argmax(target[other, :, ar[:, None]], axis=2).astype(jnp.int32)   # [j, m]: k's slot -> j
    types_agree = jnp.all(~cut_slot | (codes == codes[other, back]))
    n_cuts = jnp.sum(cut_slot, dtype=jnp.int32)
    (flat,) = jnp.nonzero(cut_slot.reshape(-1), size=max_cuts, fill_value=-1)
    link_a, if_a = flat // D, flat % D
    used = flat >= 0
    cut = [jnp.where(used, x, -1).astype(jnp.int32)
           for x in (link_a, if_a, other[link_a, if_a], back[link_a, if_a], codes[link_a, if_a])]

    in_range = jnp.all((interfaces >= 0) & (interfaces <= virtual))
    links_or_special = jnp.all(jnp.any(target, axis=2) | (interfaces == 0) | (interfaces == virtual))
    no_duplicates = jnp.all(jnp.sum(target, axis=1) <= 1) & jnp.all(jnp.sum(interfaces == virtual, axis=1) <= 1)
    codes_ok = jnp.all((codes >= 0) & (codes < len(CUT_JOINT_TYPES)))
    valid = (ids_ok & in_range & links_or_special & no_duplicates & ~jnp.any(points & eye)
             & jnp.all(points == points.T) & (jnp.sum(is_root) == 1) & is_root[root] & jnp.all(reached)
             & (n_cuts <= max_cuts) & types_agree & codes_ok)
    order = jnp.argsort(depth, stable=True).astype(jnp.int32)
    return TracedConfigurationTopology(parent, inboard, parent_if, incidence_matrix(parent, jnp), P, depth,
                                       order, valid, *cut, n_cuts, n_cuts > max_cuts)
