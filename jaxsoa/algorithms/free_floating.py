"""Free-floating systems (docs/conventions.md): a hub joined to inertial space by a free joint,
with no wrench on the hub.

* `aba_free_floating`: forward dynamics with zero generalized force on the hub's 6 DoFs.
* `rnea_free_floating`: the mixed inverse problem (joint accelerations given, hub acceleration
  unknown) solved from momentum conservation — Featherstone's floating-base inverse dynamics:
  one RNEA with the hub held still gives the hub force h and joint torques τ₀, the hub's
  acceleration is a_b = −(Sᵀ Ic_hub S)⁻¹ h from the whole system's composite inertia, and the joint
  torques are τ₀ + M[:, hub] a_b (RNEA is affine in q̈): the hub's mass-matrix columns from the
  composite inertias for one sample, a second RNEA for a leading batch. Also returns the reaction
  wrench the arm puts on the hub (the "base disturbance").
* `generalized_jacobian`: Umetani–Yoshida J* = J_m − J_b M_bb⁻¹ M_bm (zero initial momentum);
  `hub_response`: M_bb⁻¹ M_bm, the hub's reaction to joint rates at zero momentum.
* the virtual base (six 1-DoF bodies in place of the free joint): `jaxsoa.algorithms.virtual_base`.

The hub is the model's single free-joint link and must be its root (it is, for `load_urdf(...,
floating_base=True)`). q and v follow Pinocchio's free-flyer layout: hub velocity [v; ω] in the
hub frame.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsoa.algorithms import batch_last
from jaxsoa.algorithms.adjoint import implicit_dynamics
from jaxsoa.algorithms.dynamics import aba, composite_inertias, crba, rnea
from jaxsoa.algorithms.kinematics import (
    LinkPlacements,
    forward_kinematics,
    frame_jacobian,
    from_slots,
    link_spatial_inertia,
    motion_subspaces,
    welded_to_world,
)
from jaxsoa.multibody.arguments import BatchedPath, entry_point, nan_unless
from jaxsoa.multibody.joints import JointType, motion_subspace
from jaxsoa.multibody.model import Model
from jaxsoa.multibody.traversal import path_matrix
from jaxsoa.spatial.algebra import act_motion, cross_force, inv_act_motion, inverse_spd, mat_tvec, mat_vec


def floating_base(model: Model) -> int:
    """Static index of the hub: the single link with a free joint (ValueError otherwise)."""
    links = model.links_of_type(JointType.FREE)
    if links.size != 1:
        raise ValueError(f"a free-floating model needs exactly one free joint, found {links.size}")
    return int(links[0])


class DofSplit(NamedTuple):
    """Static (host) velocity indices into v: base_dofs (6,) of the hub, joint_dofs (nv − 6,) of the joints."""
    base_dofs: np.ndarray
    joint_dofs: np.ndarray


def base_and_joint_dofs(model: Model) -> DofSplit:
    """The hub's and the joints' velocity indices into v (static)."""
    start = model.idx_v[floating_base(model)]
    base = np.arange(start, start + 6)
    return DofSplit(base, np.setdiff1d(np.arange(model.nv), base))


def _embed(model: Model, x_joints, joint_dofs):
    """(..., nv) with the joints' entries x_joints (..., nv − 6) and zeros on the hub's."""
    return jnp.zeros((*x_joints.shape[:-1], model.nv), x_joints.dtype).at[..., joint_dofs].set(x_joints)


def _with_hub(model: Model, a_base, qdd_joints):
    """(..., nv) q̈ with the hub's entries a_base (..., 6) and the joints' qdd_joints (..., nv − 6)."""
    base_dofs, joint_dofs = base_and_joint_dofs(model)
    return _embed(model, qdd_joints, joint_dofs).at[..., base_dofs].set(a_base)


def _aba_free_floating(model: Model, q, v, tau_joints, f_ext=None):
    """`aba_free_floating` of one sample or of a batch (B, ...): `aba` dispatches by shape."""
    return aba(model, q, v, _embed(model, tau_joints, base_and_joint_dofs(model).joint_dofs), f_ext)


@entry_point(floating_base, q='q', v='v', tau_joints='joints', f_ext='f_ext',
             batched=BatchedPath(batch_last.supports, _aba_free_floating))
def aba_free_floating(model: Model, q, v, tau_joints, f_ext=None):
    """Forward dynamics with no generalized force on the hub: (nq,), (nv,), (nv − 6,) -> (nv,)."""
    return _aba_free_floating(model, q, v, tau_joints, f_ext)


class FreeFloatingInverseDynamics(NamedTuple):
    """tau_joints (nv − 6,), base_acceleration (6,) [v̇; ω̇] hub frame (Pinocchio's free-flyer
    `a`), base_wrench (6,) [moment; force] the arm exerts on the hub, hub frame, about its origin."""
    tau_joints: jnp.ndarray
    base_acceleration: jnp.ndarray
    base_wrench: jnp.ndarray


def _hub_wrench(model: Model, v, qdd, f_ext, R_world_hub):
    """(..., 6) I a + v ×* I v − f_ext of the hub, from its own motion: v_hub = S v_b and
    a_hub = X_hub_world [0; −g] + S q̈_b (its path to the world welded, so nothing above it moves;
    NaN where a moving joint lies above it). Works on one sample or a batch."""
    base_dofs, _ = base_and_joint_dofs(model)
    base = floating_base(model)
    S_base = motion_subspace(JointType.FREE, model.joint_axis[:1], 6)[0]
    v_hub = mat_vec(S_base, v[..., base_dofs])
    g_hub = jnp.einsum("...ji,j->...i", R_world_hub, -model.gravity)             # Rᵀ (−g)
    a_hub = mat_vec(S_base, qdd[..., base_dofs]) + jnp.concatenate([jnp.zeros_like(g_hub), g_hub], -1)
    I_hub = link_spatial_inertia(model)[base]
    wrench = mat_vec(I_hub, a_hub) + cross_force(v_hub, mat_vec(I_hub, v_hub))
    if f_ext is not None:
        wrench = wrench - f_ext[..., base, :]                            # the arm's share only
    parent = model.parent[base]
    return nan_unless((parent < 0) | welded_to_world(model)[jnp.maximum(parent, 0)], wrench)


def _rigid_hub_forces(model: Model, Ic, placements: LinkPlacements, a_hub):
    """(..., nv) M[:, hub] a_hub: the generalized forces that accelerate the hub's subtree rigidly at
    a_hub (..., 6) (hub frame, no velocity, no gravity): τ_k = S_kᵀ Ic_k X_k_hub a_hub for each link k
    below the hub (P[hub, k]), zero elsewhere. Ic (..., n, 6, 6) from `composite_inertias`."""
    base = floating_base(model)
    R_world_link, p_world_link = placements
    a_world = act_motion(R_world_link[..., base, :, :], p_world_link[..., base, :], a_hub)     # X_world_hub a
    a_link = inv_act_motion(R_world_link, p_world_link, a_world[..., None, :])                 # X_k_world a_world
    tau_slots = mat_tvec(motion_subspaces(model), mat_vec(Ic, a_link))                        # S_kᵀ Ic_k a_k
    below = path_matrix(model.traversal)[base][(None,) * (tau_slots.ndim - 2) + (slice(None), None)]   # P[hub, k]
    return from_slots(model, jnp.where(below, tau_slots, 0))


def _hub_solve(model: Model, q, v, qdd_joints, f_ext):
    """((a_b, τ_j), (M_bb, M_bb⁻¹, M_jb)): the hub's acceleration and the joint torques of
    `rnea_free_floating` (one sample or a batch (B, ...): `rnea`, `composite_inertias` and
    `forward_kinematics` dispatch by shape), and the hub's mass-matrix blocks that `_hub_operators` reuse.
    RNEA is affine in q̈: the torques with the hub accelerating at a_b are those with it held still plus
    M[:, hub] a_b. One sample takes M[:, hub] a_b from the composite inertias (`_rigid_hub_forces`: 15–17 %
    faster than a second RNEA, docs/performance.md); a leading batch runs a second RNEA on the batch-last
    core, where the (B, n, 6, 6) products cost more than it."""
    base_dofs, joint_dofs = base_and_joint_dofs(model)
    base = floating_base(model)
    qdd = _embed(model, qdd_joints, joint_dofs)
    tau_held = rnea(model, q, v, qdd, f_ext)                                 # [h; τ₀] with the hub held still
    S_base = motion_subspace(JointType.FREE, model.joint_axis[:1], 6)[0]
    Ic = composite_inertias(model, q)
    M_bb = jnp.einsum("ji,...jk,kl->...il", S_base, Ic[..., base, :, :], S_base) + jnp.diag(
        model.armature[base_dofs])[(None,) * (Ic.ndim - 3)]                    # whole system seen from the hub
    M_bb_inv = inverse_spd(M_bb)
    a_base = -mat_vec(M_bb_inv, tau_held[..., base_dofs])                     # a_b = −M_bb⁻¹ h
    placements = forward_kinematics(model, q)
    if q.ndim == 1:
        tau = tau_held + _rigid_hub_forces(model, Ic, placements, mat_vec(S_base, a_base))   # τ = τ₀ + M[:, hub] a_b
    else:
        tau = rnea(model, q, v, _with_hub(model, a_base, qdd_joints), f_ext)
    M_hub = jax.vmap(lambda a: _rigid_hub_forces(model, Ic, placements, a), 1, -1)(S_base)    # M[:, hub] (…, nv, 6)
    return (a_base, tau[..., joint_dofs]), (M_bb, M_bb_inv, M_hub[..., joint_dofs, :])


def _hub_residual(p, x, aux):
    """r(p, x) = [0; τ_j] − RNEA(q, v, [a_b; q̈_j], f_ext), linear in x = (a_b, τ_j); zero at the solution
    (the hub free of generalized force). aux unused."""
    model, q, v, qdd_joints, f_ext = p
    a_base, tau_joints = x
    base_dofs, joint_dofs = base_and_joint_dofs(model)
    tau = rnea(model, q, v, _with_hub(model, a_base, qdd_joints), f_ext)
    return -tau[..., base_dofs], tau_joints - tau[..., joint_dofs]


def _hub_operators(p, x, aux):
    """A = −∂r/∂x = [[M_bb, 0], [M_jb, −I]] of `_hub_residual`: A x, A⁻¹ b and A⁻ᵀ c from the forward's blocks."""
    M_bb, M_bb_inv, M_jb = aux

    def matvec(x):                                         # (M_bb a, M_jb a − τ)
        return mat_vec(M_bb, x[0]), mat_vec(M_jb, x[0]) - x[1]

    def inverse(_, b):                                     # a = M_bb⁻¹ b_b, τ = M_jb a − b_j
        a = mat_vec(M_bb_inv, b[0])
        return a, mat_vec(M_jb, a) - b[1]

    def transpose_inverse(_, c):                           # y_b = M_bb⁻¹ (c_a + M_jbᵀ c_τ), y_j = −c_τ
        return mat_vec(M_bb_inv, c[0] + mat_tvec(M_jb, c[1])), -c[1]

    return matvec, inverse, transpose_inverse


_hub_dynamics = implicit_dynamics(_hub_solve, _hub_residual, _hub_operators)
"""(a_b, τ_j) differentiated as the root of `_hub_residual`: reverse mode is one RNEA VJP and a 6×6 solve,
never the transposes of the composite inertias and kinematics (`jaxsoa.algorithms.adjoint.implicit_dynamics`)."""


def _rnea_free_floating(model: Model, q, v, qdd_joints, f_ext=None) -> FreeFloatingInverseDynamics:
    """`rnea_free_floating` of one sample or of a batch (B, ...), differentiated implicitly (`_hub_dynamics`)."""
    a_base, tau_joints = _hub_dynamics(model, q, v, qdd_joints, f_ext)
    qdd = _with_hub(model, a_base, qdd_joints)
    R_world_hub = forward_kinematics(model, q).R_world_link[..., floating_base(model), :, :]
    return FreeFloatingInverseDynamics(tau_joints, a_base, _hub_wrench(model, v, qdd, f_ext, R_world_hub))


@entry_point(floating_base, q='q', v='v', qdd_joints='joints', f_ext='f_ext',
             batched=BatchedPath(batch_last.supports, _rnea_free_floating))
def rnea_free_floating(model: Model, q, v, qdd_joints, f_ext=None) -> FreeFloatingInverseDynamics:
    """Joint torques for given joint accelerations with the hub free (momentum conserved)."""
    return _rnea_free_floating(model, q, v, qdd_joints, f_ext)


def _hub_response(model: Model, q):
    """`hub_response` of one sample or of a batch (B, nq): `crba` dispatches by shape."""
    base_dofs, joint_dofs = base_and_joint_dofs(model)
    M = crba(model, q)
    return inverse_spd(M[..., base_dofs[:, None], base_dofs]) @ M[..., base_dofs[:, None], joint_dofs]   # M_bb⁻¹ M_bj


@entry_point(q='q', batched=BatchedPath(batch_last.supports, _hub_response))
def hub_response(model: Model, q):
    """(6, nv − 6) M_bb⁻¹ M_bm: with zero system momentum the hub moves at v_hub = −M_bb⁻¹ M_bm q̇_m
    ([v; ω], hub frame) when the joints move at q̇_m."""
    return _hub_response(model, q)


def _generalized_jacobian(model: Model, q, link, reference="local_world_aligned"):
    """`generalized_jacobian` of one sample or of a batch (B, nq)."""
    base_dofs, joint_dofs = base_and_joint_dofs(model)
    J = frame_jacobian(model, q, link, reference)
    return J[..., joint_dofs] - J[..., base_dofs] @ _hub_response(model, q)


@entry_point(q='q', link='link', batched=BatchedPath(batch_last.supports, _generalized_jacobian))
def generalized_jacobian(model: Model, q, link: int, reference="local_world_aligned"):
    """(6, nv − 6) map from joint rates to the twist of `link` with the hub free and the system
    momentum zero: J* = J_m − J_b M_bb⁻¹ M_bm."""
    return _generalized_jacobian(model, q, link, reference)
