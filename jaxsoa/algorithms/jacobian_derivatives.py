"""Time derivatives of the link Jacobians, Pinocchio's `computeJointJacobiansTimeVariation` followed by
`getJointJacobianTimeVariation` for every joint at once.

Shapes: q (nq,), v (nv,) of one sample (a leading batch axis through the entry point); n links. Rows are
`[angular; linear]` as in `joint_jacobians` (Pinocchio's rows are `[linear; angular]`), columns in jaxsoa's
velocity order. The motion subspace S_j of every joint type is constant in its link frame, so the world
column X_world_j S_j of velocity c (joint of link j) moves with link j only: its rate is V_world_j × X_world_j S_j.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsoa.algorithms.kinematics import LinkPlacements, forward_kinematics, joint_jacobians_at, link_velocities
from jaxsoa.multibody.arguments import check_reference_frame, entry_point
from jaxsoa.multibody.model import Model
from jaxsoa.spatial.algebra import act_motion, cross_motion, inv_act_motion, mat_vec


def velocity_links(model: Model) -> np.ndarray:
    """(nv,) static: the link whose joint carries each velocity coordinate (Pinocchio's joint of a column)."""
    return model.dof_index // model.dof_max


class WorldKinematics(NamedTuple):
    """One state's world-frame kinematics shared by the Jacobian and centroidal derivatives:
    placements (`forward_kinematics`), J_world (n, 6, nv) (`joint_jacobians(…, "world")`),
    V_link (n, 6) link velocities in link frames (Pinocchio's `data.v`) and V_world (n, 6) the same at
    the world origin, world axes (Pinocchio's `data.ov`)."""
    placements: LinkPlacements
    J_world: jax.Array
    V_link: jax.Array
    V_world: jax.Array


def world_kinematics(model: Model, q, v) -> WorldKinematics:
    """`WorldKinematics` at (q, v): oMi by forward kinematics, ov_k = oMi_k · v_k."""
    placements = forward_kinematics(model, q)
    V_link = link_velocities(model, q, v)
    return WorldKinematics(placements, joint_jacobians_at(model, placements, "world"), V_link,
                           act_motion(*placements, V_link))


def joint_columns(model: Model, J_world):
    """(n, 6, nv) J_world -> (nv, 6) each velocity's world column X_world_j S_c (Pinocchio's `data.J`,
    transposed): column c of the Jacobian of j, the link of the column's joint."""
    return J_world[velocity_links(model), :, np.arange(model.nv)]


def _columns_last(x):
    """(n, nv, 6) per-column motion vectors -> (n, 6, nv) Jacobian layout (and back)."""
    return jnp.swapaxes(x, -1, -2)


@entry_point(q='q', v='v')
def joint_jacobians_time_variation(model: Model, q, v, reference="world"):
    """(n, 6, nv) dJ_k/dt of every link's Jacobian (`joint_jacobians`) along the motion with velocity v,
    so that the link accelerations are J_k a + dJ_k v (Pinocchio's `computeJointJacobiansTimeVariation` +
    `getJointJacobianTimeVariation` for all joints at once).

    reference: "world" (at the world origin, world axes), "local" (link frame) or "local_world_aligned"
    (link origin, world axes). With V_ref the world velocity of the reference frame (zero, the link's
    V_world_k, or the translation [0; ṗ_k]): dJ_ref = X_ref_world (dJ_world − V_ref × J_world).
    """
    check_reference_frame(reference)
    kin = world_kinematics(model, q, v)
    J_world = _columns_last(kin.J_world)                                          # (n, nv, 6)
    dJ_world = cross_motion(kin.V_world[velocity_links(model)][None], J_world)   # dJ_k[:, c] = V_j(c) × J_k[:, c]
    if reference == "world":
        return _columns_last(dJ_world)
    R_world_link, p_world_link = kin.placements
    if reference == "local":
        V_ref = kin.V_world                                                       # the link frame moves with it
    else:
        p_dot = mat_vec(R_world_link, kin.V_link[:, 3:])                          # ṗ_k = R_world_link v_k
        V_ref = jnp.concatenate([jnp.zeros_like(p_dot), p_dot], -1)               # a translating frame
        R_world_link = jnp.broadcast_to(jnp.eye(3, dtype=R_world_link.dtype), R_world_link.shape)
    dJ_ref_world = dJ_world - cross_motion(V_ref[:, None], J_world)              # dJ_world − V_ref × J_world
    return _columns_last(inv_act_motion(R_world_link[:, None], p_world_link[:, None], dJ_ref_world))
