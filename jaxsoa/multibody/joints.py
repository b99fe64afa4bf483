"""Joint models: fixed, revolute, prismatic, spherical (unit quaternion), free (unit
quaternion), planar and revolute-unbounded (unit complex numbers), with Pinocchio's coordinate layouts.

| type               | nq | nv | q                              | v                                         |
|--------------------|----|----|--------------------------------|-------------------------------------------|
| fixed              | 0  | 0  |                                |                                           |
| revolute           | 1  | 1  | angle about `axis`             | rate                                      |
| prismatic          | 1  | 1  | displacement along `axis`      | rate                                      |
| spherical          | 4  | 3  | quaternion (x, y, z, w)        | angular velocity, child frame             |
| free               | 7  | 6  | position, quaternion (x y z w) | linear then angular velocity, child frame |
| planar             | 4  | 3  | x, y, cos θ, sin θ             | v_x, v_y, ω_z in the child frame          |
| revolute_unbounded | 2  | 1  | cos θ, sin θ (θ about `axis`)  | rate                                      |

Joint `k` moves link `k`'s frame relative to its joint frame on the parent:
`X_joint_child = (R_J(q_k), p_J(q_k))`. A planar joint (Pinocchio's `JointModelPlanar`) moves in the
joint frame's x-y plane: R_J the rotation by θ about z, p_J = (x, y, 0), and its v is the child's
spatial velocity restricted to the plane. A revolute-unbounded joint (Pinocchio's
`JointModelRevoluteUnbounded`, what Pinocchio makes of a URDF `continuous` joint) turns about `axis`
as a revolute joint does but stores θ as the unit complex number (cos θ, sin θ), so q has no seam at
±π. Motion subspaces `S` (Featherstone's S; Hᵀ in the spatial operator algebra) are constant in the
child frame for all these types, so the joint bias acceleration is zero. The unit complex numbers
and quaternions of q are normalised before use (only their direction matters; Pinocchio uses them
as given, the same for unit inputs).

A new joint type touches this module (its `JointType` member, its cases in `joint_transform`
and `motion_subspace`) and `jaxsoa.multibody.config_space` (its Lie-group rules); every other
module reads the sizes `nq` / `nv` from the type.
"""

import enum

import jax.numpy as jnp
import numpy as np

from jaxsoa.spatial.algebra import skew
from jaxsoa.spatial.rotation import exp_so3, quat_normalize, quat_to_rotation


class JointType(enum.IntEnum):
    """The type of a link's inboard joint (`Model.joint_types` holds one per link), with its
    coordinate sizes: `JointType.FREE.nq == 7`, `JointType(3).nv == 3`, `.name.lower()` the name."""

    def __new__(cls, code, nq, nv, uses_axis):
        member = int.__new__(cls, code)
        member._value_ = code
        member._sizes = (nq, nv, uses_axis)
        return member

    # code, nq, nv, uses `joint_axis`
    FIXED = 0, 0, 0, False
    REVOLUTE = 1, 1, 1, True
    PRISMATIC = 2, 1, 1, True
    SPHERICAL = 3, 4, 3, False
    FREE = 4, 7, 6, False
    PLANAR = 5, 4, 3, False
    REVOLUTE_UNBOUNDED = 6, 2, 1, True

    @property
    def nq(self) -> int:
        """Number of configuration coordinates."""
        return self._sizes[0]

    @property
    def nv(self) -> int:
        """Number of velocity coordinates (degrees of freedom)."""
        return self._sizes[1]

    @property
    def uses_axis(self) -> bool:
        """Whether the joint acts about / along `Model.joint_axis` (which must then be a unit vector)."""
        return self._sizes[2]


def joint_transform(joint_type: JointType, axis, q_joint):
    """Pose of the child frame in the joint frame for links of one static `joint_type`.

    axis (k, 3), q_joint (k, nq) -> R_J (k, 3, 3), p_J (k, 3).
    """
    k = axis.shape[0]
    eye = jnp.broadcast_to(jnp.eye(3, dtype=axis.dtype), (k, 3, 3))
    zero = jnp.zeros((k, 3), axis.dtype)
    if joint_type == JointType.REVOLUTE:
        return exp_so3(axis * q_joint), zero          # R_J = exp(â θ)
    if joint_type == JointType.PRISMATIC:
        return eye, axis * q_joint                    # p_J = a d
    if joint_type == JointType.SPHERICAL:
        return quat_to_rotation(quat_normalize(q_joint)), zero
    if joint_type == JointType.FREE:
        return quat_to_rotation(quat_normalize(q_joint[:, 3:])), q_joint[:, :3]
    if joint_type == JointType.PLANAR:
        return planar_rotation(q_joint[:, 2:]), jnp.pad(q_joint[:, :2], ((0, 0), (0, 1)))   # R_z(θ), (x, y, 0)
    if joint_type == JointType.REVOLUTE_UNBOUNDED:
        return axis_rotation(axis, q_joint), zero     # R_J = exp(â θ) from (cos θ, sin θ)
    return eye, zero


def unit_complex(cos_sin):
    """(..., 2) -> (..., 2): the unit complex number (cos θ, sin θ) = z / |z|."""
    return cos_sin / jnp.linalg.norm(cos_sin, axis=-1, keepdims=True)


def planar_rotation(cos_sin):
    """(..., 2) (cos θ, sin θ), normalised here -> (..., 3, 3) rotation by θ about z."""
    c, s = jnp.moveaxis(unit_complex(cos_sin), -1, 0)
    one, zero = jnp.ones_like(c), jnp.zeros_like(c)
    rows = [[c, -s, zero], [s, c, zero], [zero, zero, one]]                      # R_z(θ)
    return jnp.stack([jnp.stack(row, -1) for row in rows], -2)


def axis_rotation(axis, cos_sin):
    """(k, 3) unit axis a, (k, 2) (cos θ, sin θ), normalised here -> (k, 3, 3) rotation by θ about a:
    Rodrigues' R = I + sin θ â + (1 − cos θ) â² (Pinocchio's `toRotationMatrix(axis, cos, sin)`)."""
    c, s = jnp.moveaxis(unit_complex(cos_sin), -1, 0)
    a_hat = skew(axis)
    eye = jnp.broadcast_to(jnp.eye(3, dtype=axis.dtype), a_hat.shape)
    return eye + s[:, None, None] * a_hat + (1 - c)[:, None, None] * (a_hat @ a_hat)     # I + s â + (1 − c) â²


def motion_subspace(joint_type: JointType, axis, dof_max):
    """S for links of one static `joint_type`, padded with zero columns: (k, 3) -> (k, 6, dof_max).

    Columns map joint velocity to the spatial velocity `[ω; v]` of the child in its own frame.
    """
    k = axis.shape[0]
    zero3 = jnp.zeros((k, 3), axis.dtype)
    if joint_type in (JointType.REVOLUTE, JointType.REVOLUTE_UNBOUNDED):
        cols = [jnp.concatenate([axis, zero3], -1)[..., None]]                     # S = [a; 0]
    elif joint_type == JointType.PRISMATIC:
        cols = [jnp.concatenate([zero3, axis], -1)[..., None]]                     # S = [0; a]
    elif joint_type == JointType.SPHERICAL:
        cols = [jnp.broadcast_to(jnp.eye(6, 3, dtype=axis.dtype), (k, 6, 3))]      # S = [1; 0]
    elif joint_type == JointType.FREE:
        swap = jnp.asarray(np.roll(np.eye(6), 3, axis=0), axis.dtype)            # S = [[0, 1], [1, 0]]
        cols = [jnp.broadcast_to(swap, (k, 6, 6))]
    elif joint_type == JointType.PLANAR:
        planar = jnp.asarray(np.eye(6)[:, [3, 4, 2]], axis.dtype)                # S = [e_vx, e_vy, e_ωz]
        cols = [jnp.broadcast_to(planar, (k, 6, 3))]
    else:
        cols = []
    cols.append(jnp.zeros((k, 6, dof_max - JointType(joint_type).nv), axis.dtype))
    return jnp.concatenate(cols, -1)
