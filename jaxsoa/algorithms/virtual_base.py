"""The virtual base of a free-floating system (docs/conventions.md): six virtual 1-DoF bodies (three
prismatic, three revolute x-y-z, R = Rx(a) Ry(b) Rz(c)) in place of the hub's free joint, and the state
conversions between the free-flyer layout (q (nq,) with a quaternion, v (nv,) with the hub's [v; ω] in the hub
frame, Pinocchio's) and the virtual one (q (nq − 1,) with x, y, z, a, b, c, v (nv,) with their rates).
"""

import jax.numpy as jnp
import numpy as np

from jaxsoa.algorithms.free_floating import floating_base
from jaxsoa.multibody.build import build_model
from jaxsoa.multibody.joints import JointType
from jaxsoa.multibody.model import Model
from jaxsoa.spatial.rotation import exp_so3, quat_normalize, quat_to_rotation, rotation_to_quat
from jaxsoa.spatial.small_linalg import solve

_VIRTUAL = tuple((joint_type, axis) for joint_type in (JointType.PRISMATIC, JointType.REVOLUTE)
                 for axis in ((1.0, 0, 0), (0, 1.0, 0), (0, 0, 1.0)))


def with_virtual_base(model: Model) -> Model:
    """The same system with the hub's free joint replaced by six virtual 1-DoF bodies:
    prismatic x, y, z then revolute x, y, z (R = Rx(a) Ry(b) Rz(c)). The first five are massless;
    the hub itself carries the sixth (revolute z) joint. Requires the hub stored first, so that
    q = [x, y, z, a, b, c, joints] and v = [ẋ, ẏ, ż, ȧ, ḃ, ċ, joint rates]."""
    base = floating_base(model)
    parent = np.asarray(model.parent)
    if base != 0 or parent[0] != -1:
        raise ValueError("with_virtual_base needs the free-joint hub stored first as the root (link 0)")
    n_if = model.mass.shape[1]
    armature = np.asarray(model.armature, np.float64)
    if np.any(armature[:6] != 0):
        raise ValueError("with_virtual_base: the hub's free joint has a non-zero 'armature', which has no "
                         "virtual-joint equivalent (set it to zero)")

    def host(x):
        return np.array(x, np.float64)

    def stack(virtual, original):
        return np.concatenate([np.broadcast_to(virtual, (5, *original.shape[1:])), original])

    types = [t for t, _ in _VIRTUAL[:5]] + [JointType.REVOLUTE] + list(model.joint_types[1:])
    axes = np.concatenate([np.array([a for _, a in _VIRTUAL]), host(model.joint_axis)[1:]])
    placement_rotation = host(model.placement_rotation)
    placement_translation = host(model.placement_translation)
    first_rotation, first_translation = placement_rotation[:1].copy(), placement_translation[:1].copy()
    placement_rotation[0], placement_translation[0] = np.eye(3), 0.0       # the hub sits on virtual body 5
    return build_model(
        parent=[-1, 0, 1, 2, 3, 4] + [p + 5 for p in parent[1:]], joint_types=types, joint_axis=axes,
        placement_rotation=np.concatenate([first_rotation, np.broadcast_to(np.eye(3), (4, n_if, 3, 3)),
                                           placement_rotation]),
        placement_translation=np.concatenate([first_translation, np.zeros((4, n_if, 3)), placement_translation]),
        mass=stack(0.0, host(model.mass)), com=stack(0.0, host(model.com)),
        inertia_com=stack(0.0, host(model.inertia_com)),
        inboard_interface=np.concatenate([np.zeros(5, np.int64), np.asarray(model.inboard_interface)]),
        link_names=[f"virtual_{k}" for k in ("px", "py", "pz", "rx", "ry")] + list(model.link_names),
        link_joint_names=[f"virtual_{k}" for k in ("px", "py", "pz", "rx", "ry", "rz")]
        + list(model.link_joint_names[1:]),
        gravity=host(model.gravity), armature=armature, dtype=model.joint_axis.dtype,
        strategy=model.traversal.strategy, unroll=model.traversal.unroll)


def _euler_rate_matrix(angles):
    """E with ω_hub (hub frame) = E [ȧ, ḃ, ċ] for R = Rx(a) Ry(b) Rz(c)."""
    eye = jnp.eye(3, dtype=angles.dtype)
    R_y, R_z = exp_so3(angles[1] * eye[1]), exp_so3(angles[2] * eye[2])
    return jnp.stack([(R_y @ R_z).T @ eye[0], R_z.T @ eye[1], eye[2]], axis=1)


def _check_base_state(names, q, v, nq_base):
    """q (nq_base + joint coordinates,) and v (6 + joint velocities,) of one sample, floating, with no more joint
    velocities than joint coordinates (every joint has nq ≥ nv); the exact lengths need the model
    (ValueError / TypeError naming the argument). Returns (q, v) as JAX arrays (lists accepted)."""
    q, v = (x if isinstance(x, (jnp.ndarray, np.ndarray)) else np.asarray(x) for x in (q, v))
    for name, x in zip(names, (q, v), strict=True):
        if not jnp.issubdtype(jnp.result_type(x), jnp.floating):
            raise TypeError(f"argument '{name}' must be a floating-point array, got dtype {jnp.result_type(x)}")
    for name, x, base in zip(names, (q, v), (nq_base, 6), strict=True):
        if jnp.ndim(x) != 1 or jnp.shape(x)[0] < base:
            raise ValueError(f"argument '{name}' has shape {jnp.shape(x)}: expected ({base} + joints,), one sample")
    if jnp.shape(v)[0] - 6 > jnp.shape(q)[0] - nq_base:
        raise ValueError(f"argument '{names[1]}' has shape {jnp.shape(v)}: more joint velocities than '{names[0]}' "
                         f"of shape {jnp.shape(q)} has joint coordinates")
    return jnp.asarray(q), jnp.asarray(v)


def to_virtual_base_state(q, v):
    """Free-flyer (q (nq,), v (nv,)) -> virtual-base (q (nq − 1,), v (nv,)), hub stored first."""
    q, v = _check_base_state(("q", "v"), q, v, 7)
    R = quat_to_rotation(quat_normalize(q[3:7]))
    angles = jnp.stack([jnp.arctan2(-R[1, 2], R[2, 2]), jnp.arcsin(jnp.clip(R[0, 2], -1.0, 1.0)),
                        jnp.arctan2(-R[0, 1], R[0, 0])])
    rates = solve(_euler_rate_matrix(angles), v[3:6])
    q_virtual = jnp.concatenate([q[:3], angles, q[7:]])
    return q_virtual, jnp.concatenate([R @ v[:3], rates, v[6:]])


def from_virtual_base_state(q_virtual, v_virtual):
    """Inverse of `to_virtual_base_state`: q_virtual (nq − 1,), v_virtual (nv,) -> q (nq,), v (nv,)."""
    q_virtual, v_virtual = _check_base_state(("q_virtual", "v_virtual"), q_virtual, v_virtual, 6)
    eye = jnp.eye(3, dtype=q_virtual.dtype)
    a, b, c = q_virtual[3], q_virtual[4], q_virtual[5]
    R = exp_so3(a * eye[0]) @ exp_so3(b * eye[1]) @ exp_so3(c * eye[2])
    q = jnp.concatenate([q_virtual[:3], rotation_to_quat(R), q_virtual[6:]])
    v = jnp.concatenate([R.T @ v_virtual[:3], _euler_rate_matrix(q_virtual[3:6]) @ v_virtual[3:6], v_virtual[6:]])
    return q, v
