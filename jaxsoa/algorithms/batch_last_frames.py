"""Model data, joint frames and joint motions on the batch-last layout (`jaxsoa.multibody.batch_last`),
for `jaxsoa.algorithms.batch_last`'s RNEA and ABA.

Joints handled (`batch_last_slots.HANDLED`): fixed, revolute, revolute-unbounded and prismatic inside the link
scans (one scalar velocity per link; an unbounded joint's frame from its (cos θ, sin θ) instead of its angle),
free joints, whose 6-DoF motion enters the scans as precomputed per-link spatial vectors (inside the
scans a free link is a fixed joint; its frame, velocity and acceleration are set here), and the
three-column joints (`batch_last_slots.TRIPLES`): spherical (frame R(quaternion), joint motion [ω; 0]) and planar
(frame R_z(θ) from (cos θ, sin θ) and (x, y, 0), joint motion [0, 0, ω; v_x, v_y, 0]), whose frames and joint
motions are set here like a free joint's, and whose three motion-subspace columns are constant unit
vectors in the link frame: S₁ takes the scalar slot of a 1-DoF joint (`batch_last_slots.link_slots`), S₂ and S₃
are `LinkData.S_triple` (`batch_last_slots.triple_slots`); ABA eliminates the three in the one link step.
Per-sample states are (B, nq) / (B, nv) in Pinocchio's layout; per-link arrays are (n, k, B) in
the traversal's depth order, model data (n, k, 1) shared by the batch, or (n, k, B) for a stacked
model (`jaxsoa.multibody.model.stack_models`: a tree, placements and inertias per sample).
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsoa.algorithms import batch_last_slots as sl
from jaxsoa.multibody import batch_last as bl
from jaxsoa.multibody.arguments import SHAPES, batch_shape
from jaxsoa.multibody.batched import in_per_sample_only
from jaxsoa.multibody.joints import JointType, joint_transform, planar_rotation, unit_complex
from jaxsoa.multibody.model import Model, link_inertia, link_placement, model_batch
from jaxsoa.spatial import batch_last as sp
from jaxsoa.spatial.rotation import quat_normalize, quat_to_rotation


def supports(model: Model) -> bool:
    """Whether the batch-last path handles `model`: every joint fixed, revolute (bounded or unbounded), prismatic,
    spherical, planar or free, and, where the topology is concrete, every free joint on the world
    (`free_on_world`; for a traced topology ABA's entry decides at run time, `free_joints_valid`). False while
    `per_sample_only` is active."""
    if in_per_sample_only() or not all(JointType(t) in sl.HANDLED for t in model.joint_types):
        return False
    if isinstance(model.parent, jax.core.Tracer):
        return True
    return bool(np.all(free_on_world(model, np)))


def free_joints_valid(model: Model):
    """None where ABA's batch-last result holds for `model` whatever its values (no free joint, or a concrete
    topology, which `supports` has checked), else the traced scalar "every free joint on the world" of the
    traced topology (of every model of a stack): ABA's `BatchedPath.valid`."""
    if not len(sl.free_links(model)) or not isinstance(model.parent, jax.core.Tracer):
        return None
    return jnp.all(free_on_world(model))


def free_on_world(model: Model, xp=jnp):
    """(..., n_free) bool: each free joint is a root, or its parent is a root welded to the world (a fixed
    joint: MJCF's world body holding several free bodies, `load_mjcf`). ABA's free joints need one of these."""
    parent = xp.asarray(model.parent)
    fixed = xp.asarray([t == JointType.FIXED for t in model.joint_types])
    free_parent = parent[..., sl.free_links(model)]
    safe = xp.maximum(free_parent, 0)
    grandparent = xp.take_along_axis(parent, safe, -1) if parent.ndim > 1 else parent[safe]
    return (free_parent < 0) | (fixed[safe] & (grandparent < 0))


def free_parent_acceleration(model: Model, R, p, a_world, k):
    """Spatial acceleration (6-list of (B,)) of free link k's parent: a_world at a root, X⁻¹ a_world for a
    parent welded to the world (`free_on_world`; its frame is R, p of its own link, (n, 9, B) / (n, 3, B))."""
    parent, order = model.parent[..., k], model.traversal.inverse_order
    pos = jnp.take_along_axis(order, jnp.maximum(parent, 0)[..., None], -1)[..., 0]      # per stacked model
    a_parent = sp.inv_act_motion(bl.read_rows(R, pos), bl.read_rows(p, pos), a_world)
    return [jnp.where(parent < 0, w, a) for w, a in zip(a_world, a_parent, strict=True)]


def check_batch(model: Model, **states):
    """Each state (B, ...) with one leading batch axis, the same B for all and the model's trailing
    shape (ValueError naming the argument); `None` states are skipped. Called directly (not through
    the entry points `jaxsoa.rnea` / `aba` / `crba`, which check and reshape first), the batch-last
    functions need the batch axis."""
    sizes = {}
    for name, (kind, value) in states.items():
        if value is None:
            continue
        lead = batch_shape(name, value.shape, SHAPES[kind](model))
        if len(lead) != 1:
            raise ValueError(f"argument '{name}' has shape {tuple(value.shape)}: expected one leading batch axis")
        sizes[name] = lead[0]
    if len(set(sizes.values())) > 1:
        raise ValueError(f"batched arguments have different batch sizes {sizes}")
    stacked = model_batch(model)
    if len(stacked) > 1 or (stacked and any(size != stacked[0] for size in sizes.values())):
        raise ValueError(f"the model is a stack of {stacked} models, the states have batch sizes {sizes}")


class LinkData(NamedTuple):
    """Per-link model data in depth order, batch axis of size 1: R_parent_joint (n, 9, 1),
    p_parent_joint (n, 3, 1), axis (n, 3, 1), S (n, 6, 1) motion subspace of a 1-DoF joint (zero
    otherwise; a three-column joint's S₁, `TRIPLES`), S_triple (n, 12, 1) a three-column joint's S₂ and S₃
    (zero elsewhere), inertia (n, 21, 1), d_offset (n, 1) added to D (armature; 1 for a joint without a
    scalar coordinate), triple_offset (n, 2, 1) the same for S₂ and S₃ (1 off three-column joints),
    revolute / prismatic / free (n, 1) 0/1 flags."""
    R_parent_joint: jax.Array
    p_parent_joint: jax.Array
    axis: jax.Array
    S: jax.Array
    S_triple: jax.Array
    inertia: jax.Array
    d_offset: jax.Array
    triple_offset: jax.Array
    revolute: jax.Array
    prismatic: jax.Array
    free: jax.Array


def _storage_link_data(model: Model) -> tuple:
    """`LinkData`'s fields in storage order without the batch axis, (n, k) and (n,), of one model."""
    dtype = model.dtype
    R, p = link_placement(model)
    mass, com, inertia_com = link_inertia(model)
    inertia = jnp.stack(sp.spatial_inertia(mass, list(com.T), list(inertia_com.reshape(-1, 9).T)), 1)
    flag = {t: jnp.asarray([u == t for u in model.joint_types], dtype) for t in sl.HANDLED}
    armature = jnp.concatenate([model.armature, jnp.zeros(1, dtype)])
    unit = jnp.eye(6, dtype=dtype)
    triple = sum(flag[t] for t in sl.TRIPLES)[:, None]
    turning = flag[JointType.REVOLUTE] + flag[JointType.REVOLUTE_UNBOUNDED]
    S = jnp.concatenate([model.joint_axis * turning[:, None], model.joint_axis * flag[JointType.PRISMATIC][:, None]], 1)
    S_triple = jnp.zeros((model.n_links, 12), dtype)
    for t, (columns, spatial) in sl.TRIPLES.items():              # S_k = e_spatial[columns[k]]
        S = S + flag[t][:, None] * unit[spatial[columns[0]]][None]
        S_triple = S_triple + flag[t][:, None] * jnp.concatenate([unit[spatial[c]] for c in columns[1:]])[None]
    triple_offset = armature[sl.triple_slots(model).T] + (1 - triple)                              # (n, 2)
    offset = armature[sl.link_slots(model, "v")] + flag[JointType.FIXED] + flag[JointType.FREE]
    return (R.reshape(-1, 9), p, model.joint_axis, S, S_triple, inertia, offset, triple_offset,
            flag[JointType.REVOLUTE], flag[JointType.PRISMATIC], flag[JointType.FREE])


def link_data(model: Model) -> LinkData:
    """The model's per-link data in the batch-last layout (`LinkData`); a stacked model's per sample."""
    trav = model.traversal
    fields = jax.vmap(_storage_link_data)(model) if bl.per_sample(trav) else _storage_link_data(model)
    return LinkData(*(bl.per_link(trav, x) for x in fields))


def rigid_link_inertias(d: LinkData):
    """(n, 10, 1 or B) each link's own inertia as a rigid 10-list [m; h; I_o] (`spatial.batch_last.rigid_inertia`),
    depth order."""
    return jnp.stack(sp.rigid_inertia(bl.components(d.inertia)), 1)


def joint_frames(model: Model, d: LinkData, q, q_links):
    """X_parent_child of every link in depth order, R (n, 9, B) and p (n, 3, B): R_parent_joint R_J,
    p_parent_joint + R_parent_joint p_J with R_J = exp(â θ), p_J = a d for 1-DoF joints (an unbounded joint's
    sin θ, cos θ taken from its normalised (cos θ, sin θ)), the free joints' (R(quaternion), position), the
    spherical joints' (R(quaternion), 0) and the planar joints' (R_z(θ), (x, y, 0)) from q (B, nq)."""
    axis = bl.components(d.axis)
    s, c = bl.stage(bl.always(model.traversal), lambda x: [jnp.sin(x), jnp.cos(x)], q_links * d.revolute)
    for k in model.links_of_type(JointType.REVOLUTE_UNBOUNDED):
        pos, i = model.traversal.inverse_order[..., k], model.idx_q[k]
        cos_sin = unit_complex(q[:, i:i + 2])                                        # (B, 2)
        s, c = bl.write(s, pos, cos_sin[:, 1]), bl.write(c, pos, cos_sin[:, 0])
    R_joint_child = sp.rodrigues(axis, s, c)                            # exp(â θ), 9 (n, B) entries
    p_joint_child = sp.scale(q_links * d.prismatic, axis)
    for i, pos in enumerate(sl.free_positions(model)):
        columns = model.q_columns(JointType.FREE)[i]
        R_free = quat_to_rotation(quat_normalize(q[:, columns[3:]])).reshape(-1, 9)      # (B, 9)
        R_joint_child = [bl.write(x, pos, R_free[:, j]) for j, x in enumerate(R_joint_child)]
        p_joint_child = [bl.write(x, pos, q[:, columns[j]]) for j, x in enumerate(p_joint_child)]
    for (k, _), pos in zip(sl.triple_links(model), sl.triple_positions(model), strict=True):
        q_k = q[:, model.idx_q[k]:model.idx_q[k] + JointType(model.joint_types[k]).nq]
        if model.joint_types[k] == JointType.SPHERICAL:
            R_k = quat_to_rotation(quat_normalize(q_k))                          # R(quaternion), p = 0
        else:
            R_k = planar_rotation(q_k[:, 2:])                                    # R_z(θ), p = (x, y, 0)
            p_joint_child = [bl.write(x, pos, q_k[:, j]) if j < 2 else x for j, x in enumerate(p_joint_child)]
        R_joint_child = [bl.write(x, pos, R_k.reshape(-1, 9)[:, j]) for j, x in enumerate(R_joint_child)]
    R_parent_joint = bl.components(d.R_parent_joint)
    R = sp.mat_mul(R_parent_joint, R_joint_child)
    p = sp.add(bl.components(d.p_parent_joint), sp.mat_vec(R_parent_joint, p_joint_child))
    return jnp.stack(R, 1), jnp.stack(p, 1)


MOVED = (JointType.FREE, JointType.SPHERICAL, JointType.PLANAR, JointType.REVOLUTE_UNBOUNDED)


"""The joints whose coordinates are not one angle or length along S: `joint_twists` carries their derivatives."""


def joint_twists(model: Model, q):
    """(n, 6, B) zeros whose derivative w.r.t. q (B, nq) is the twist of each free, spherical, planar and unbounded
    joint in its child frame, [δω; δv] = [vee(R_J₀ᵀ δR_J); R_J₀ᵀ δp_J] at R_J₀, p_J₀ = the joint's pose at
    stop_gradient(q) (0 on other links; (n, 6, 1) without such joints): with the frames computed at
    stop_gradient(q), the derivatives `batch_last_rnea` turns them by. vee(A) = ½ (A₃₂ − A₂₃, A₁₃ − A₃₁, A₂₁ − A₁₂);
    each entry is a difference of two equal values, exactly zero."""
    held, batch, moved = jax.lax.stop_gradient(q), q.shape[0], np.isin(np.asarray(model.joint_types), MOVED)
    twists = jnp.zeros((model.n_links, 6, batch if moved.any() else 1), q.dtype)
    for k in np.flatnonzero(moved):
        joint = JointType(model.joint_types[k])
        columns = slice(int(model.idx_q[k]), int(model.idx_q[k]) + joint.nq)
        axis = jnp.broadcast_to(model.joint_axis[..., k, :], (batch, 3))
        R, p = joint_transform(joint, axis, q[:, columns])
        R_0, p_0 = joint_transform(joint, axis, held[:, columns])
        twist = [_vee(jnp.einsum("bji,bjk->bik", R_0, R)) - _vee(jnp.einsum("bji,bjk->bik", R_0, R_0)),
                 jnp.einsum("bji,bj->bi", R_0, p - p_0)]
        twists = bl.write(twists, model.traversal.inverse_order[..., k], jnp.concatenate(twist, -1).T)
    return twists


def _vee(A):
    """(B, 3) ½ (A₃₂ − A₂₃, A₁₃ − A₃₁, A₂₁ − A₁₂) of (B, 3, 3) matrices."""
    return 0.5 * jnp.stack([A[:, 2, 1] - A[:, 1, 2], A[:, 0, 2] - A[:, 2, 0], A[:, 1, 0] - A[:, 0, 1]], -1)


def joint_motion(model: Model, d: LinkData, x, x_links):
    """(n, 6, B) spatial joint motion S ẋ of every link in depth order: S x_link for 1-DoF joints, the
    free joints' 6 entries of x (B, nv), a three-column joint's 3 entries of x at their spatial indices
    (`Triple.spatial`: [ẋ; 0] for spherical joints, [0, 0, ω; v_x, v_y, 0] for planar ones), zero for fixed
    joints."""
    motion = d.S * x_links[:, None, :]
    for i, pos in enumerate(sl.free_positions(model)):
        motion = bl.write(motion, pos, jnp.stack(sl.free_spatial(model, x, i)))
    for (k, triple), pos in zip(sl.triple_links(model), sl.triple_positions(model), strict=True):
        entries = [jnp.zeros_like(x[:, 0])] * 6
        for j, index in enumerate(triple.spatial):                        # S x: x_j at spatial[j]
            entries[index] = x[:, model.idx_v[k] + j]
        motion = bl.write(motion, pos, jnp.stack(entries))
    return motion


def external_wrenches(model: Model, f_ext, dtype):
    """(B, n, 6) link wrenches -> (n, 6, B) in depth order (zeros (n, 6, 1) when None)."""
    if f_ext is None:
        return jnp.zeros((model.n_links, 6, 1), dtype)
    order = model.traversal.order
    if bl.per_sample(model.traversal):
        return jnp.transpose(jnp.take_along_axis(f_ext, order[:, :, None], axis=1), (1, 2, 0))
    return jnp.transpose(f_ext[:, order], (1, 2, 0))
