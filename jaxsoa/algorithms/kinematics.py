"""Kinematics over a traced topology: joint frames, forward kinematics, link velocities and
accelerations, frame Jacobians, centre of mass and spatial momentum.

Shapes: n links, nq / nv coordinates, d = `model.dof_max` (padded per-link velocity slot).
Spatial vectors are `[angular; linear]`; link quantities are in the link's own frame unless the
name says `world`.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsoa.algorithms import batch_last_crba
from jaxsoa.multibody import joints
from jaxsoa.multibody.arguments import BatchedPath, check_reference_frame, entry_point, nan_unless
from jaxsoa.multibody.joints import JointType
from jaxsoa.multibody.model import Model, link_inertia, link_placement
from jaxsoa.multibody.traversal import outward, path_matrix
from jaxsoa.spatial.algebra import (
    act_force,
    cross_motion,
    inv_act_motion,
    mat_mul,
    mat_vec,
    motion_transform,
    se3_compose,
    spatial_inertia,
)


def per_link(model: Model, fn, dtype):
    """Evaluate `fn(joint_type, links)` -> tuple of (k, ...) arrays for every static joint type
    and assemble the results into (n, ...) arrays in storage order (types absent from the model are
    skipped). The assembly is a concatenation of static slices, one per run of consecutive links of
    the same type (no scatter, which XLA's CPU backend lowers to a loop)."""
    types = np.asarray(model.joint_types)
    parts = {t: fn(JointType(t), model.links_of_type(t)) for t in np.unique(types)}
    starts = np.flatnonzero(np.diff(types, prepend=-1))                  # first link of each run
    runs = [(types[k], int(np.sum(types[:k] == types[k])), int(end - k))  # (type, rank in its type, length)
            for k, end in zip(starts, [*starts[1:], len(types)], strict=True)]
    n_out = len(next(iter(parts.values())))
    return tuple(jnp.concatenate([parts[t][i][r:r + length].astype(dtype) for t, r, length in runs])
                 for i in range(n_out))


class JointFrames(NamedTuple):
    """Pose of each link's frame in its parent's frame: R_parent_child (n, 3, 3), p_parent_child (n, 3)."""
    R_parent_child: jax.Array
    p_parent_child: jax.Array


def joint_frames(model: Model, q) -> JointFrames:
    """q (nq,) -> R_parent_child (n, 3, 3), p_parent_child (n, 3): placement ∘ joint motion."""
    def fn(joint_type, links):
        return joints.joint_transform(joint_type, model.joint_axis[links], q[model.q_columns(joint_type)])

    R_joint_child, p_joint_child = per_link(model, fn, model.joint_axis.dtype)
    R_parent_joint, p_parent_joint = link_placement(model)
    return JointFrames(*se3_compose(R_parent_joint, p_parent_joint, R_joint_child, p_joint_child))


def motion_subspaces(model: Model):
    """(n, 6, d) motion subspace S of each link's joint in the link frame (zero-padded)."""
    def fn(joint_type, links):
        return (joints.motion_subspace(joint_type, model.joint_axis[links], model.dof_max),)

    return per_link(model, fn, model.joint_axis.dtype)[0]


def to_slots(model: Model, x):
    """(nv,) -> (n, d): each link's joint entries, zero in the padding."""
    return jnp.concatenate([x, jnp.zeros(1, x.dtype)])[model.v_slots]


def from_slots(model: Model, x_slots):
    """(..., n, d) -> (..., nv): inverse of `to_slots` (padding discarded)."""
    n, d = x_slots.shape[-2:]
    return x_slots.reshape((*x_slots.shape[:-2], n * d))[..., model.dof_index]     # (no -1: a leading 0 when nv = 0)


def world_acceleration(model: Model):
    """(6,) the world's fictitious acceleration [0; −g] through which gravity enters every pass."""
    return jnp.concatenate([jnp.zeros(3, model.gravity.dtype), -model.gravity])


def link_spatial_inertia(model: Model):
    """(n, 6, 6) spatial inertia of each link about its frame origin, in its frame."""
    return spatial_inertia(*link_inertia(model))


class LinkPlacements(NamedTuple):
    """Pose of each link's frame in the world (Pinocchio's `data.oMi`): R_world_link (n, 3, 3), p_world_link (n, 3)."""
    R_world_link: jax.Array
    p_world_link: jax.Array


def _forward_kinematics_batched(model: Model, q) -> LinkPlacements:
    """`forward_kinematics` of a batch q (B, nq) on the batch-last core: (B, n, 3, 3), (B, n, 3)."""
    return LinkPlacements(*batch_last_crba.link_placements(model, q))


@entry_point(q='q', batched=BatchedPath(batch_last_crba.supports, _forward_kinematics_batched))
def forward_kinematics(model: Model, q) -> LinkPlacements:
    """q -> R_world_link (n, 3, 3), p_world_link (n, 3): oMi = oMparent ∘ parentMi."""
    R_parent_child, p_parent_child = joint_frames(model, q)

    def step(X_parent_child, X_world_parent):
        return se3_compose(*X_world_parent, *X_parent_child), None

    dtype = model.joint_axis.dtype
    root = (jnp.eye(3, dtype=dtype), jnp.zeros(3, dtype))
    (R_world_link, p_world_link), _ = outward(model.traversal, step, (R_parent_child, p_parent_child), root)
    return LinkPlacements(R_world_link, p_world_link)


class LinkMotion(NamedTuple):
    """Spatial velocity and acceleration (n, 6) of each link in its own frame (Pinocchio's `data.v`, `data.a`)."""
    velocity: jax.Array
    acceleration: jax.Array


def motion_pass(trav, frames, S, qd_slots, qdd_slots, a_root) -> LinkMotion:
    """Outward pass over precomputed joint frames (n, 3, 3), (n, 3), S (n, 6, d) and padded
    rates (n, d): V_k = X⁻¹ V_parent + S θ̇_k,  α_k = X⁻¹ α_parent + S θ̈_k + V_k × S θ̇_k.
    Returns link velocities and accelerations (n, 6) in link frames (α_world = a_root)."""
    def step(d, motion_parent):
        R, p, S_k, qd, qdd = d
        v_parent, a_parent = motion_parent
        v_joint = mat_vec(S_k, qd)
        v_link = inv_act_motion(R, p, v_parent) + v_joint
        a_link = inv_act_motion(R, p, a_parent) + mat_vec(S_k, qdd) + cross_motion(v_link, v_joint)
        return (v_link, a_link), None

    zero = jnp.zeros(6, a_root.dtype)
    (v_links, a_links), _ = outward(trav, step, (*frames, S, qd_slots, qdd_slots), (zero, a_root))
    return LinkMotion(v_links, a_links)


def link_motion(model: Model, q, v, a, a_root) -> LinkMotion:
    """Link velocities and accelerations (n, 6) in link frames; `motion_pass` for a model."""
    return motion_pass(model.traversal, joint_frames(model, q), motion_subspaces(model), to_slots(model, v),
                       to_slots(model, a), a_root)


@entry_point(q='q', v='v')
def link_velocities(model: Model, q, v):
    """(n, 6) spatial velocity of each link in its own frame (Pinocchio's `data.v`)."""
    return link_motion(model, q, v, jnp.zeros_like(v), jnp.zeros(6, v.dtype)).velocity


@entry_point(q='q', v='v', a='v')
def link_accelerations(model: Model, q, v, a):
    """(n, 6) spatial acceleration of each link in its own frame, gravity excluded (`data.a`)."""
    return link_motion(model, q, v, a, jnp.zeros(6, v.dtype)).acceleration


@entry_point(q='q', batched=BatchedPath(batch_last_crba.supports, batch_last_crba.joint_jacobians))
def joint_jacobians(model: Model, q, reference="world"):
    """(n, 6, nv) Jacobians of every link's spatial velocity, `[angular; linear]` rows
    (Pinocchio's `computeJointJacobians` + `getJointJacobian` for all joints at once).

    reference: "world" (at the world origin, world axes), "local" (link frame) or
    "local_world_aligned" (link origin, world axes) — Pinocchio's ReferenceFrame names.
    """
    return joint_jacobians_at(model, forward_kinematics(model, q), reference)


def joint_jacobians_at(model: Model, placements: LinkPlacements, reference="world"):
    """`joint_jacobians` at placements already computed by `forward_kinematics(model, q)` (one
    outward pass shared with the caller's other uses of them)."""
    check_reference_frame(reference)
    R_world_link, p_world_link = placements
    S_world = mat_mul(motion_transform(R_world_link, p_world_link), motion_subspaces(model))  # (n, 6, d)
    P = path_matrix(model.traversal).astype(S_world.dtype)        # J_k = Σ_{j on path of k} X_world_j S_j
    J_world = from_slots(model, P.T[:, None, :, None] * jnp.transpose(S_world, (1, 0, 2))[None])  # (n, 6, nv)
    if reference == "world":
        return J_world
    if reference == "local_world_aligned":
        R_world_link = jnp.broadcast_to(jnp.eye(3, dtype=R_world_link.dtype), R_world_link.shape)
    to_link = jax.vmap(jax.vmap(inv_act_motion, in_axes=(None, None, 1), out_axes=1))
    return to_link(R_world_link, p_world_link, J_world)


def valid_link(model: Model, link, J):
    """J (any shape), NaN where a traced `link` lies outside [0, n) (a static one is checked by the entry point)."""
    return J if isinstance(link, int) else nan_unless((link >= 0) & (link < model.n_links), J)


def _frame_jacobian_batched(model: Model, q, link, reference="local"):
    """`frame_jacobian` of a batch q (B, nq) on the batch-last core: (B, 6, nv), that link's columns only."""
    J = batch_last_crba.link_jacobians(model, q, jnp.reshape(link, (1,)), reference)[:, 0]
    return valid_link(model, link, J)


@entry_point(q='q', link='link', batched=BatchedPath(batch_last_crba.supports, _frame_jacobian_batched))
def frame_jacobian(model: Model, q, link: int, reference="local"):
    """(6, nv) Jacobian of link `link`'s spatial velocity; see `joint_jacobians`. A traced `link`
    outside [0, n) gives NaN (a static one raises `ValueError`)."""
    return valid_link(model, link, joint_jacobians(model, q, reference)[link])


def welded_to_world(model: Model):
    """(n,) bool: links with no moving joint on their path to the world (they never move)."""
    moving = jnp.asarray([JointType(t).nv > 0 for t in model.joint_types])
    return ~jnp.any(path_matrix(model.traversal) & moving[:, None], axis=0)


@entry_point(q='q')
def center_of_mass(model: Model, q):
    """(3,) centre of mass of the links that can move, in the world frame: Σ m_k c_k / Σ m_k.
    Links welded to the world (a fixed base) are left out, as in Pinocchio's `centerOfMass`."""
    R_world_link, p_world_link = forward_kinematics(model, q)
    mass, com, _ = link_inertia(model)
    mass = jnp.where(welded_to_world(model), 0.0, mass)
    com_world = p_world_link + mat_vec(R_world_link, com)
    return jnp.sum(mass[:, None] * com_world, 0) / jnp.sum(mass)


@entry_point(q='q', v='v')
def spatial_momentum(model: Model, q, v):
    """(6,) total spatial momentum [angular; linear] about the world origin, world axes:
    h = Σ X*_world_k I_k V_k."""
    R_world_link, p_world_link = forward_kinematics(model, q)
    v_links, _ = link_motion(model, q, v, jnp.zeros_like(v), jnp.zeros(6, v.dtype))
    h_links = mat_vec(link_spatial_inertia(model), v_links)
    return jnp.sum(act_force(R_world_link, p_world_link, h_links), 0)


@entry_point(q='q', v='v')
def centroidal_momentum(model: Model, q, v):
    """(6,) spatial momentum about the centre of mass, world axes (Pinocchio's `data.hg`, with
    `[angular; linear]` order): n_G = n_O − c × p."""
    h = spatial_momentum(model, q, v)
    c = center_of_mass(model, q)
    return jnp.concatenate([h[:3] - jnp.cross(c, h[3:]), h[3:]])

