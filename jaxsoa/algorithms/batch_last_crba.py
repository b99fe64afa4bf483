"""CRBA, composite inertias, world placements and joint Jacobians on the batch-last layout
(`jaxsoa.multibody.batch_last`): the path leading-batch calls `crba(model, q[B, nq])` and
`joint_jacobians(model, q[B, nq])` take when every joint is one of `batch_last_slots.HANDLED` (a free joint
anywhere in the tree: `supports`).

Same equations as `jaxsoa.algorithms.dynamics.crba`: composite inertias by an inward pass, world
placements by an outward pass, then all joint-space columns at once: column c (link l_c, motion
subspace column s_c in the link frame) gives S_w,c = X_world_l s_c and F_w,c = X*_world_l Ic_l s_c,
and M[i, j] = S_w,iᵀ F_w,j where link l_i lies on the path from l_j to the root (masked by the
path matrix), mirrored, plus the armature on the diagonal.

The joint Jacobians are the same world columns placed on the links they move:
J_k[:, c] = S_w,c where l_c lies on the path of link k (`jaxsoa.algorithms.kinematics.joint_jacobians`).

Shapes: q (B, nq); results M (B, nv, nv), Jacobians (B, n, 6, nv) in storage order, composite
inertias (n, 10, B) as rigid 10-lists [m; h; I_o] and world placements (n, 12, B) in depth order. The
topology stays traced (one compile for every tree with these joint types).
"""

import jax.numpy as jnp
import numpy as np

from jaxsoa.algorithms import batch_last_frames as fr
from jaxsoa.algorithms import batch_last_slots as sl
from jaxsoa.multibody import batch_last as bl
from jaxsoa.multibody.arguments import check_reference_frame
from jaxsoa.multibody.batched import in_per_sample_only
from jaxsoa.multibody.joints import JointType
from jaxsoa.multibody.model import Model
from jaxsoa.multibody.traversal import path_matrix
from jaxsoa.spatial import batch_last as sp

IDENTITY_PLACEMENT = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0]      # R = 1 (row-major), p = 0
FREE_SPATIAL_INDEX = (3, 4, 5, 0, 1, 2)      # a free joint's v = [linear; angular] -> spatial [angular; linear]


def supports(model: Model) -> bool:
    """Whether the batch-last CRBA handles `model`: every joint one of `batch_last_slots.HANDLED` (a free joint
    need not be a root here); False while `per_sample_only` is active."""
    return not in_per_sample_only() and all(JointType(t) in sl.HANDLED for t in model.joint_types)


def composite_inertias(model: Model, d: fr.LinkData, R, p, batch: int):
    """(n, 10, B) composite inertia of each link's subtree in the link frame, depth order, as rigid 10-lists
    [m; h; I_o]: Ic = I + Σ_c X* Ic_c X⁻¹ (R, p: `batch_last_frames.joint_frames`;
    `spatial.batch_last.transform_rigid_inertia`)."""
    own = fr.rigid_link_inertias(d)

    def step(t, live, children):              # Ic_t = I_t + Σ_c up_c;  up_t = X* Ic_t X⁻¹
        Ic = bl.stage(live, lambda c, t: sp.add(bl.read_rows(own, t), c), children, t)
        up = bl.stage(live, lambda I, t: sp.transform_rigid_inertia(bl.read_rows(R, t), bl.read_rows(p, t), I),
                      Ic, t)
        return up, jnp.stack(Ic)

    return bl.inward(model.traversal, step, 10, batch, R.dtype)[1]


def world_placements(model: Model, R, p, batch: int):
    """(n, 12, B) X_world_link of every link in depth order: R_world_link (9 entries, row-major),
    then p_world_link (3): R_w = R_w,parent R;  p_w = p_w,parent + R_w,parent p."""
    def step(t, live, parent):
        def f(parent, t):
            R_world_parent, p_world_parent = parent[:9], parent[9:]
            return (sp.mat_mul(R_world_parent, bl.read_rows(R, t))
                    + sp.add(p_world_parent, sp.mat_vec(R_world_parent, bl.read_rows(p, t))))
        placement = bl.stage(live, f, parent, t)
        return placement, jnp.stack(placement)

    return bl.outward(model.traversal, step, IDENTITY_PLACEMENT, batch, R.dtype)


def _columns(model: Model, d: fr.LinkData, dtype):
    """Static (nv,) storage link of each v column, and (nv, 6) its motion subspace column in the
    link frame: the link's S for a 1-DoF joint, a spatial unit vector for a free or three-column joint's
    columns."""
    links = np.zeros(model.nv, np.int32)
    scalar = sl.scalar_links(model)
    links[np.asarray(model.idx_v)[scalar]] = scalar
    units = np.zeros((model.nv, 6))
    spatial = [(JointType.FREE, FREE_SPATIAL_INDEX), *((t, triple.spatial) for t, triple in sl.TRIPLES.items())]
    for joint_type, spatial_index in spatial:
        for link, columns in zip(model.links_of_type(joint_type), model.v_columns(joint_type), strict=True):
            links[columns] = link
            units[columns, spatial_index] = 1.0
    is_free = jnp.asarray(units.any(axis=1))[:, None]
    positions = model.traversal.inverse_order[links]                             # (nv,) depth positions
    return links, jnp.where(is_free, jnp.asarray(units, dtype), d.S[positions, :, 0])


def _motion_columns(R_world_link, p_world_link, S):
    """S_w = X_world_link s (a 6-list of (B,) arrays) for a motion column s in the link frame."""
    angular = sp.mat_vec(R_world_link, S[:3])
    return angular + sp.add(sp.mat_vec(R_world_link, S[3:]), sp.cross(p_world_link, angular))


def _joint_frames(model: Model, q):
    """The link data and joint frames (R, p) of a batch q (B, nq)."""
    fr.check_batch(model, q=("q", q))
    d = fr.link_data(model)
    return d, *fr.joint_frames(model, d, q, sl.scalar_coordinates(model, q)[0])


def _frames(model: Model, q):
    """The link data, joint frames (R, p) and world placements (n, 12, B) of a batch q (B, nq)."""
    d, R, p = _joint_frames(model, q)
    return d, R, p, world_placements(model, R, p, q.shape[0])


def link_placements(model: Model, q):
    """(R_world_link (B, n, 3, 3), p_world_link (B, n, 3)) in storage order, as
    `jaxsoa.algorithms.kinematics.forward_kinematics`: the outward pass of `world_placements`."""
    W = _frames(model, q)[3][model.traversal.inverse_order]                      # (n, 12, B)
    W = jnp.moveaxis(W, -1, 0)
    return W[..., :9].reshape((*W.shape[:2], 3, 3)), W[..., 9:]


def composite_inertia_matrices(model: Model, q):
    """(B, n, 6, 6) composite inertia of each link's subtree in the link frame, storage order, as
    `jaxsoa.algorithms.dynamics.composite_inertias`: the inward pass, then its rigid 10-lists as 6×6."""
    d, R, p = _joint_frames(model, q)
    Ic = composite_inertias(model, d, R, p, q.shape[0])[model.traversal.inverse_order]    # (n, 10, B)
    A, Bm, C = sp.inertia_blocks(sp.rigid_to_inertia(bl.components(Ic)))         # [[A, Bm], [Bmᵀ, C]]
    top = [A[i] + Bm[i] for i in range(3)]
    bottom = [[Bm[j][i] for j in range(3)] + C[i] for i in range(3)]
    return jnp.moveaxis(jnp.stack([jnp.stack(row) for row in top + bottom]), (2, 3), (1, 0))


def crba(model: Model, q):
    """Joint-space mass matrices M(q) of a batch, (B, nv, nv) (module docstring)."""
    trav = model.traversal
    d, R, p, W = _frames(model, q)
    Ic = composite_inertias(model, d, R, p, q.shape[0])
    links, S_columns = _columns(model, d, q.dtype)
    positions = trav.inverse_order[links]

    def world_columns(S, W_c, Ic_c):          # S_w = X_world_link s;  F_w = X*_world_link (Ic s)
        R_w, p_w = W_c[:9], W_c[9:]
        return _motion_columns(R_w, p_w, S) + sp.act_force(R_w, p_w, sp.rigid_inertia_vec(Ic_c, S))
    r = bl.stage(trav.order[0] >= 0, world_columns, bl.rows(S_columns.T[..., None]),
                 bl.components(W[positions]), bl.components(Ic[positions]))
    S_world, F_world = jnp.stack(r[:6]), jnp.stack(r[6:])                       # (6, nv, B)
    G = jnp.einsum("kib,kjb->bij", S_world, F_world)                            # (B, nv, nv): S_w,iᵀ F_w,j
    P = path_matrix(trav)[links][:, links]                                        # l_i on the path of l_j
    strict = P & jnp.asarray(links[:, None] != links[None, :])
    M = jnp.where(P, G, jnp.where(strict.T, jnp.swapaxes(G, 1, 2), 0.0))
    return M + jnp.diag(model.armature)[None]                                     # + rotor inertia


def joint_jacobians(model: Model, q, reference="world"):
    """(B, n, 6, nv) Jacobians of every link's spatial velocity, storage order, `[angular; linear]`
    rows, in Pinocchio's `reference` frames as `jaxsoa.algorithms.kinematics.joint_jacobians`."""
    return link_jacobians(model, q, jnp.arange(model.n_links), reference)


def link_jacobians(model: Model, q, of_links, reference="world"):
    """(B, k, 6, nv) Jacobians of the links `of_links` (k,) (storage indices, host or traced in [0, n)),
    as `joint_jacobians`: the world columns of every joint, masked by the path of each link."""
    check_reference_frame(reference)
    trav = model.traversal
    d, _, _, W = _frames(model, q)
    links, S_columns = _columns(model, d, q.dtype)
    S_world = jnp.stack(bl.stage(trav.order[0] >= 0, lambda S, W_c: _motion_columns(W_c[:9], W_c[9:], S),
                                 bl.rows(S_columns.T[..., None]), bl.components(W[trav.inverse_order[links]])))
    on_path = path_matrix(trav)[links][:, of_links].T.astype(q.dtype)           # (k, nv): l_c on the path of k
    J = jnp.einsum("kc,icb->bkic", on_path, S_world)                            # J_k[:, c] = S_w,c
    if reference == "world":
        return J
    X = W[trav.inverse_order[of_links]]                                          # (k, 12, B)
    p_world_link = jnp.moveaxis(X[:, 9:], -1, 0)[..., None]                      # (B, k, 3, 1)
    omega, linear = J[:, :, :3], J[:, :, 3:] - jnp.cross(p_world_link, J[:, :, :3], axis=2)   # v − p × ω
    if reference == "local_world_aligned":
        return jnp.concatenate([omega, linear], axis=2)
    R_world_link = X[:, :9].reshape(X.shape[0], 3, 3, X.shape[-1])              # (k, 3, 3, B)
    to_link = lambda x: jnp.einsum("kjib,bkjc->bkic", R_world_link, x)          # noqa: E731  Rᵀ x
    return jnp.concatenate([to_link(omega), to_link(linear)], axis=2)
