"""Joint models: fixed, revolute, prismatic, spherical (unit quaternion) and free (unit
quaternion), with Pinocchio's coordinate layouts.

| type      | nq | nv | q                               | v                                      |
|-----------|----|----|---------------------------------|----------------------------------------|
| fixed     | 0  | 0  |                                 |                                        |
| revolute  | 1  | 1  | angle about `axis`              | rate                                   |
| prismatic | 1  | 1  | displacement along `axis`       | rate                                   |
| spherical | 4  | 3  | quaternion (x, y, z, w)         | angular velocity, child frame          |
| free      | 7  | 6  | position, quaternion (x y z w)  | linear then angular velocity, child frame |

Joint `k` moves link `k`'s frame relative to its joint frame on the parent:
`X_joint_child = (R_J(q_k), p_J(q_k))`. Motion subspaces `S` (Featherstone's S, the seeds' Hᵀ)
are constant in the child frame for all these types, so the joint bias acceleration is zero.
"""

import jax.numpy as jnp
import numpy as np

from jaxsoa.rotation import exp_so3, quat_normalize, quat_to_rotation

FIXED, REVOLUTE, PRISMATIC, SPHERICAL, FREE = 0, 1, 2, 3, 4
JOINT_TYPE_NAMES = ("fixed", "revolute", "prismatic", "spherical", "free")
NQ = (0, 1, 1, 4, 7)
NV = (0, 1, 1, 3, 6)


def joint_transform(joint_type, axis, q_joint):
    """Pose of the child frame in the joint frame for links of one static `joint_type`.

    axis (k, 3), q_joint (k, nq) -> R_J (k, 3, 3), p_J (k, 3).
    """
    k = axis.shape[0]
    eye = jnp.broadcast_to(jnp.eye(3, dtype=axis.dtype), (k, 3, 3))
    zero = jnp.zeros((k, 3), axis.dtype)
    if joint_type == REVOLUTE:
        return exp_so3(axis * q_joint), zero          # R_J = exp(â θ)
    if joint_type == PRISMATIC:
        return eye, axis * q_joint                    # p_J = a d
    if joint_type == SPHERICAL:
        return quat_to_rotation(quat_normalize(q_joint)), zero
    if joint_type == FREE:
        return quat_to_rotation(quat_normalize(q_joint[:, 3:])), q_joint[:, :3]
    return eye, zero


def motion_subspace(joint_type, axis, dof_max):
    """S for links of one static `joint_type`, padded with zero columns: (k, 3) -> (k, 6, dof_max).

    Columns map joint velocity to the spatial velocity `[ω; v]` of the child in its own frame.
    """
    k = axis.shape[0]
    zero3 = jnp.zeros((k, 3), axis.dtype)
    if joint_type == REVOLUTE:
        cols = [jnp.concatenate([axis, zero3], -1)[..., None]]                     # S = [a; 0]
    elif joint_type == PRISMATIC:
        cols = [jnp.concatenate([zero3, axis], -1)[..., None]]                     # S = [0; a]
    elif joint_type == SPHERICAL:
        cols = [jnp.broadcast_to(jnp.eye(6, 3, dtype=axis.dtype), (k, 6, 3))]      # S = [1; 0]
    elif joint_type == FREE:
        swap = jnp.asarray(np.roll(np.eye(6), 3, axis=0), axis.dtype)            # S = [[0, 1], [1, 0]]
        cols = [jnp.broadcast_to(swap, (k, 6, 6))]
    else:
        cols = []
    nv = NV[joint_type]
    cols.append(jnp.zeros((k, 6, dof_max - nv), axis.dtype))
    return jnp.concatenate(cols, -1)
