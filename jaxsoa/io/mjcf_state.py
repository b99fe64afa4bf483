"""MuJoCo ↔ jaxsoa state, acceleration and generalized-force maps for models of `load_mjcf`.

`load_mjcf` stores links in MuJoCo's body order (a body with several joints becomes a chain in
MuJoCo's joint order), so q and v hold MuJoCo's joints in MuJoCo's order and only two
conventions differ, both read from the static `model.joint_types`:

* quaternions: MuJoCo stores (w, x, y, z), jaxsoa (x, y, z, w) — ball (spherical) and free joints;
* free-joint velocity: MuJoCo's qvel = [u (linear velocity of the body origin, world frame);
  ω (body frame)], jaxsoa's v = [Rᵀ u; ω], both frames the body's. Generalized forces follow
  by duality (f_mj = [R f_lin; n]) and accelerations by differentiation
  (u̇ = R (v̇_lin + ω × v_lin)).

Hinge, slide and ball velocities, accelerations and forces are the same numbers in both engines
(ball: angular velocity in the child frame). Every map acts on the trailing axis, so a batch
(..., nq) / (..., nv) maps in one call; all are pure JAX (jit / vmap / grad).

`passive_force` adds MuJoCo's joint damping and springs (`JointProperties`, from
`mjcf_joint_properties`); armature enters the mass matrix as `crba(model, q) + diag(armature)`.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsoa.multibody.arguments import entry_point
from jaxsoa.multibody.joints import JointType
from jaxsoa.multibody.model import Model
from jaxsoa.spatial.rotation import quat_normalize, quat_to_rotation


class JointProperties(NamedTuple):
    """MuJoCo's per-dof joint terms that a `Model` does not carry, in v order (nv,) each.

    armature      added to the diagonal of the mass matrix: M_mujoco = crba(model, q) + diag(armature)
    damping       viscous joint damping: τ_damper = −damping ∘ v
    frictionloss  dry friction, a constraint in MuJoCo (reported, not applied by `passive_force`)
    stiffness     hinge and slide springs (zero on ball and free dofs): τ_spring = −k (q − q_spring)
    spring_reference  the spring's rest coordinate q_spring of each hinge and slide dof (zero elsewhere)
    """
    armature: jax.Array
    damping: jax.Array
    frictionloss: jax.Array
    stiffness: jax.Array
    spring_reference: jax.Array


def _quaternion_starts(model: Model):
    """(static) q index of the first quaternion entry of every ball and free joint."""
    starts = [model.idx_q[k] + (3 if t == JointType.FREE else 0)
              for k, t in enumerate(model.joint_types) if t in (JointType.FREE, JointType.SPHERICAL)]
    return np.asarray(starts, np.int64)


def _permutation(model: Model, to_jaxsoa: bool) -> np.ndarray:
    """(nq,) static index: q = qpos[perm] (to_jaxsoa) or qpos = q[perm], quaternions reordered."""
    perm = np.arange(model.nq)
    order = np.array([1, 2, 3, 0]) if to_jaxsoa else np.array([3, 0, 1, 2])   # wxyz -> xyzw, or back
    for s in _quaternion_starts(model):
        perm[s:s + 4] = s + order
    return perm


def _free_rotations(model: Model, q):
    """(..., nq) jaxsoa q -> (..., k, 3, 3) R_world_body of the k free joints, (k,) their v starts."""
    free = model.links_of_type(JointType.FREE)
    quat_cols = np.asarray(model.idx_q)[free][:, None] + np.arange(3, 7)
    return quat_to_rotation(quat_normalize(q[..., quat_cols])), np.asarray(model.idx_v)[free]


def _rotate_linear(model: Model, q, x, transpose: bool):
    """x (..., nv) with each free joint's linear part replaced by Rᵀ x_lin (transpose) or R x_lin."""
    R, starts = _free_rotations(model, q)
    if starts.size == 0:
        return x
    cols = starts[:, None] + np.arange(3)
    lin = jnp.einsum("...kji,...kj->...ki" if transpose else "...kij,...kj->...ki", R, x[..., cols])
    return x.at[..., cols].set(lin)


def _omega_cross_linear(model: Model, v):
    """(..., nv) -> (..., nv): ω × v_lin on each free joint's linear slot, zero elsewhere."""
    starts = np.asarray(model.idx_v)[model.links_of_type(JointType.FREE)]
    out = jnp.zeros_like(v)
    if starts.size == 0:
        return out
    lin, ang = starts[:, None] + np.arange(3), starts[:, None] + np.arange(3, 6)
    return out.at[..., lin].set(jnp.cross(v[..., ang], v[..., lin]))


@entry_point(qpos='q', qvel='v')
def from_mujoco(model: Model, qpos, qvel):
    """MuJoCo's (qpos (..., nq), qvel (..., nv)) -> jaxsoa's (q, v): quaternions to (x, y, z, w),
    free-joint linear velocity to the body frame (v_lin = Rᵀ u). NumPy input (MjData's arrays) is fine."""
    qpos, qvel = jnp.asarray(qpos), jnp.asarray(qvel)
    q = qpos[..., _permutation(model, True)]
    return q, _rotate_linear(model, q, qvel, transpose=True)


@entry_point(q='q', v='v')
def to_mujoco(model: Model, q, v):
    """jaxsoa's (q (..., nq), v (..., nv)) -> MuJoCo's (qpos, qvel); the inverse of `from_mujoco`."""
    q, v = jnp.asarray(q), jnp.asarray(v)
    return q[..., _permutation(model, False)], _rotate_linear(model, q, v, transpose=False)


@entry_point(qpos='q', qfrc='v')
def force_from_mujoco(model: Model, qpos, qfrc):
    """MuJoCo generalized force qfrc (..., nv) at qpos (..., nq) -> jaxsoa τ (..., nv) (τ_lin = Rᵀ f)."""
    return _rotate_linear(model, jnp.asarray(qpos)[..., _permutation(model, True)], jnp.asarray(qfrc), transpose=True)


@entry_point(q='q', tau='v')
def force_to_mujoco(model: Model, q, tau):
    """jaxsoa τ (..., nv) at q (..., nq) -> MuJoCo's qfrc (..., nv) (f = R τ_lin); same power qfrc·qvel = τ·v."""
    return _rotate_linear(model, jnp.asarray(q), jnp.asarray(tau), transpose=False)


@entry_point(qpos='q', qvel='v', qacc='v')
def acceleration_from_mujoco(model: Model, qpos, qvel, qacc):
    """MuJoCo's qacc (..., nv) at (qpos, qvel) -> jaxsoa's a = dv/dt (..., nv):
    a_lin = Rᵀ u̇ − ω × v_lin on free joints (the derivative of v_lin = Rᵀ u)."""
    q, v = from_mujoco(model, qpos, qvel)
    return _rotate_linear(model, q, jnp.asarray(qacc), transpose=True) - _omega_cross_linear(model, v)


@entry_point(q='q', v='v', a='v')
def acceleration_to_mujoco(model: Model, q, v, a):
    """jaxsoa's a (..., nv) at (q, v) -> MuJoCo's qacc: u̇ = R (a_lin + ω × v_lin) on free joints."""
    q, v = jnp.asarray(q), jnp.asarray(v)
    return _rotate_linear(model, q, jnp.asarray(a) + _omega_cross_linear(model, v), transpose=False)


@entry_point(q='q', v='v')
def passive_force(model: Model, joints: JointProperties, q, v):
    """MuJoCo's joint passive force in jaxsoa's coordinates, (..., nv):
    τ = −damping ∘ v − stiffness ∘ (q_dof − spring_reference), the spring on hinge and slide dofs.

    The damping term maps exactly on free joints because MJCF damping is one number per joint
    (isotropic: Rᵀ (d u) = d v_lin); `mjcf_joint_properties` rejects anything else.
    """
    dof_q = np.zeros(model.nv, np.int64)                                  # q index of each 1-dof joint
    for k, t in enumerate(model.joint_types):
        if t in (JointType.REVOLUTE, JointType.PRISMATIC):
            dof_q[model.idx_v[k]] = model.idx_q[k]
    spring = joints.stiffness * (jnp.asarray(q)[..., dof_q] - joints.spring_reference)   # zero where stiffness is 0
    return -joints.damping * v - spring
