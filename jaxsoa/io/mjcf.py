"""MJCF models through MuJoCo's own compiler: the `mujoco.MjModel` it builds becomes a `Model`.

MuJoCo resolves every MJCF feature (defaults classes, `childclass`, `inertiafromgeom`, `<include>`,
`<freejoint>`, the orientation forms quat / euler / axisangle / xyaxes / zaxis and angle units);
the loader reads only the compiled tree: `body_pos`/`body_quat`, `body_mass`/`body_ipos`/
`body_iquat`/`body_inertia`, `jnt_type`/`jnt_axis`/`jnt_pos`, `qpos0` and `opt.gravity`.

* Links: one per MuJoCo body, in MuJoCo's body order, named after the body. A body without joints
  is a `fixed` link (joint `<body>_weld`, or `root_joint` at the root as in `load_urdf`); a body
  with joints j1 … jm is a chain of m links (MuJoCo composes the joints in this order), the first
  m − 1 massless and named `body:joint`, the last carrying the body's name, inertia and children.
  The world body is link 0 (`fixed`) when several bodies hang on it; with a single top-level body
  that body is the root (parent −1), as `load_urdf` roots a URDF.
* Joints: hinge → revolute, slide → prismatic, ball → spherical, free → free. A joint's `pos`
  (anchor) puts the link origin at the anchor; the body frame sits at −pos in the last link.
  A hinge or slide `ref` is folded into the placement, so q = qpos for those joints.
* q and v therefore hold MuJoCo's joints in MuJoCo's order; `jaxsoa.io.mjcf_state.from_mujoco` /
  `to_mujoco` (and the force and acceleration maps there) convert the quaternion order and the
  free-joint linear velocity (world frame in MuJoCo, body frame in jaxsoa).
* Joint armature, damping, friction loss and springs are not part of a `Model`:
  `mjcf_joint_properties` returns them in v order (`JointProperties`) and
  `jaxsoa.io.mjcf_state.passive_force` applies damping and springs.
* Rejected with a `ValueError` naming the element: tendons, equality constraints, actuators with
  activation dynamics (`dyntype` ≠ none), flexes, gravity compensation, fluid forces (option
  density / viscosity); `mjcf_joint_properties` also rejects springs on ball and free joints and
  armature on free joints. Contacts, joint limits and friction loss are constraints: a `Model`
  holds none of them. Actuators without dynamics are not loaded (their force is a generalized
  force the caller applies). To load such a model anyway, edit it (`mujoco.MjSpec`, or the
  arrays of the `MjModel`) and pass the compiled `MjModel`.
* `mujoco` is imported by these functions only (`pip install 'jaxsoa[mjcf]'`).
"""

import os
from pathlib import Path

import jax.numpy as jnp
import numpy as np

from jaxsoa.io.mjcf_state import JointProperties
from jaxsoa.multibody.build import build_model
from jaxsoa.multibody.joints import JointType

__all__ = ["load_mjcf", "mjcf_joint_properties"]

INSTALL_HINT = "pip install 'jaxsoa[mjcf]' (or pip install 'mujoco>=3.2')"
_FREE, _BALL, _SLIDE, _HINGE = 0, 1, 2, 3                         # mujoco.mjtJoint
_TYPES = {_FREE: JointType.FREE, _BALL: JointType.SPHERICAL, _SLIDE: JointType.PRISMATIC, _HINGE: JointType.REVOLUTE}
_TYPE_NAMES = {_FREE: "free", _BALL: "ball", _SLIDE: "slide", _HINGE: "hinge"}


def _mujoco():
    try:
        import mujoco
    except ImportError as error:
        raise ImportError(f"loading MJCF needs MuJoCo's compiler, and mujoco is not installed: {INSTALL_HINT}") \
            from error
    return mujoco


def _compile(mujoco, source):
    """An `MjModel` from a path, an XML string (starting with '<') or an `MjModel` (returned as is)."""
    if isinstance(source, mujoco.MjModel):
        return source
    is_xml = isinstance(source, str) and source.lstrip().startswith("<")
    if not is_xml and not Path(os.fspath(source)).is_file():
        raise ValueError(f"MJCF file '{source}' does not exist")
    try:
        return mujoco.MjModel.from_xml_string(source) if is_xml else mujoco.MjModel.from_xml_path(os.fspath(source))
    except ValueError as error:
        raise ValueError(f"MuJoCo's compiler rejected the MJCF model: {error}") from error


def _name(mujoco, m, kind, i, default):
    return mujoco.mj_id2name(m, getattr(mujoco.mjtObj, f"mjOBJ_{kind}"), i) or f"{default}{i}"


def _reject_unsupported(mujoco, m):
    """Raise `ValueError` naming the first element jaxsoa cannot represent faithfully."""
    def first(kind, count, what, label):
        if count:
            raise ValueError(f"MJCF {label} '{_name(mujoco, m, kind, 0, label)}': {what} are not supported "
                             f"(the model has {count})")

    first("TENDON", m.ntendon, "tendons", "tendon")
    first("EQUALITY", m.neq, "equality constraints", "equality")
    first("FLEX", m.nflex, "flexes (deformable bodies)", "flex")
    for a in np.flatnonzero(m.actuator_dyntype != 0):
        raise ValueError(f"MJCF actuator '{_name(mujoco, m, 'ACTUATOR', a, 'actuator')}': activation dynamics "
                         "(dyntype other than none) are not supported")
    for b in np.flatnonzero(m.body_gravcomp != 0):
        raise ValueError(f"MJCF body '{_name(mujoco, m, 'BODY', b, 'body')}': gravcomp is not supported")
    if m.opt.density != 0 or m.opt.viscosity != 0:
        raise ValueError("MJCF option density / viscosity: fluid forces are not supported")


def _rotation(quat_wxyz):
    """MuJoCo's (w, x, y, z) unit quaternion -> 3x3 rotation matrix (numpy)."""
    w, x, y, z = np.asarray(quat_wxyz, float) / np.linalg.norm(quat_wxyz)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def _axis_rotation(axis, angle):
    """Rodrigues: exp(â θ) for a unit axis (numpy)."""
    K = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return np.eye(3) + np.sin(angle) * K + (1 - np.cos(angle)) * K @ K


def _body_joints(m, b, floating_base, top):
    """MuJoCo joint ids of body `b`, and the body's joint list after `floating_base` (None: as
    compiled; True: a joint-less top body gains a free joint (id −1); False: its free joint is welded)."""
    joints = list(range(m.body_jntadr[b], m.body_jntadr[b] + m.body_jntnum[b]))
    if floating_base is None or b != top:
        return joints
    if floating_base and not joints:
        return [-1]
    if not floating_base and joints and m.jnt_type[joints[0]] == _FREE:
        return []
    if floating_base and m.jnt_type[joints[0]] != _FREE:
        raise ValueError(f"MJCF body '{m.body(b).name}': floating_base=True needs the top-level body to have "
                         "a free joint or no joint")
    return joints


def _links(mujoco, m, floating_base):
    """Per-link dicts (MuJoCo body order): name, joint, type, parent, axis, R, p, inertia, dofs
    (the MuJoCo dof ids of the link's joint, None for an added free joint)."""
    top_bodies = np.flatnonzero(m.body_parentid[1:] == 0) + 1
    if floating_base is not None and len(top_bodies) != 1:
        raise ValueError(f"MJCF floating_base={floating_base} needs exactly one body on the world, "
                         f"found {len(top_bodies)}")
    top = top_bodies[0] if len(top_bodies) == 1 else -1
    zero = (0.0, np.zeros(3), np.zeros((3, 3)))
    links = []
    if top < 0:                                                    # several (or no) bodies on the world
        links.append(dict(name=m.body(0).name or "world", joint="world", type=JointType.FIXED, parent=-1,
                          axis=np.array([1.0, 0, 0]), R=np.eye(3), p=np.zeros(3), inertia=zero, dofs=()))
    body_link, body_offset = {0: len(links) - 1}, {0: np.zeros(3)}   # link holding each body, frame offset
    for b in range(1, m.nbody):
        name, parent_body = _name(mujoco, m, "BODY", b, "body"), m.body_parentid[b]
        R, p = _rotation(m.body_quat[b]), body_offset[parent_body] + m.body_pos[b]   # X0 = E_parent (pos, quat)
        parent, anchor = body_link[parent_body], np.zeros(3)
        joints = _body_joints(m, b, floating_base, top)
        steps = joints or [None]
        for i, j in enumerate(steps):
            kind = None if j is None else (_FREE if j < 0 else m.jnt_type[j])
            if j is not None and j >= 0:
                jname = _name(mujoco, m, "JOINT", j, "joint")
            else:                                                  # a weld or an added free joint
                jname = "root_joint" if b == top else f"{name}_weld"
            axis, ref = np.array([1.0, 0, 0]), 0.0
            if kind == _FREE:
                R, p = np.eye(3), np.zeros(3)                      # MuJoCo: body pose = qpos, world frame
            elif kind is not None:
                pos = m.jnt_pos[j]
                R, p = (R, p + R @ pos) if i == 0 else (np.eye(3), pos - anchor)   # X0 T(pos), T(pos − prev)
                anchor = pos
                if kind in (_HINGE, _SLIDE):
                    axis = m.jnt_axis[j] / np.linalg.norm(m.jnt_axis[j])
                    ref = m.qpos0[m.jnt_qposadr[j]]
                if kind == _HINGE:
                    R = R @ _axis_rotation(axis, -ref)             # exp(â (q − ref)) = exp(−â ref) exp(â q)
                elif kind == _SLIDE:
                    p = p - ref * (R @ axis)                       # a (q − ref) = −a ref + a q
            last = i == len(steps) - 1
            if last:
                Ri = _rotation(m.body_iquat[b])
                inertia = (float(m.body_mass[b]), m.body_ipos[b] - anchor, Ri @ np.diag(m.body_inertia[b]) @ Ri.T)
            dofs = () if j is None else None if j < 0 else tuple(m.jnt_dofadr[j] + np.arange(_TYPES[kind].nv))
            links.append(dict(name=name if last else f"{name}:{jname}", joint=jname,
                              type=JointType.FIXED if kind is None else _TYPES[kind], parent=parent, axis=axis,
                              R=R, p=p, inertia=inertia if last else zero, dofs=dofs, mj_joint=j))
            parent = len(links) - 1
        body_link[b], body_offset[b] = parent, -anchor
    return links


def _armature(m, links):
    """(nv,) MuJoCo's `dof_armature` in jaxsoa's v order; a free joint's must be zero (its linear
    rows act on MuJoCo's world-frame velocity, not on jaxsoa's body-frame one)."""
    values = []
    for link in links:
        j, dofs = link.get("mj_joint"), link["dofs"]
        if dofs is None:                                           # a free joint the loader added
            values += [0.0] * 6
            continue
        if not dofs:
            continue
        if m.jnt_type[j] == _FREE and np.any(m.dof_armature[list(dofs)] != 0):
            raise ValueError(f"MJCF joint '{link['joint']}' (free): armature is not supported on free joints "
                             "(set it to zero)")
        values += [float(m.dof_armature[d]) for d in dofs]
    return np.asarray(values, np.float64)


def load_mjcf(source, *, dtype=None, floating_base=None, strategy="sequential", unroll=1):
    """Compile `source` with MuJoCo and return the `Model` of its body tree (conventions: the
    module docstring), in `dtype` (`build_model`'s default when None).

    source: a file path, an MJCF XML string (starting with '<') or a compiled `mujoco.MjModel`.
    floating_base: None keeps MuJoCo's joints (the state maps then apply); True gives a single
    joint-less top-level body a free joint; False welds a single top-level body's free joint at
    its MJCF pose. Gravity is MuJoCo's `opt.gravity` (zero when the gravity flag is disabled).
    Joint armature becomes `Model.armature` (in RNEA, ABA and CRBA, as in MuJoCo); damping,
    springs and friction loss are passive forces, reported by `mjcf_joint_properties`.
    Malformed MJCF raises `ValueError` with MuJoCo's message.
    """
    if floating_base is not None and not isinstance(floating_base, (bool, np.bool_)):
        raise TypeError(f"argument 'floating_base' must be None, True or False, got {floating_base!r}")
    mujoco = _mujoco()
    m = _compile(mujoco, source)
    _reject_unsupported(mujoco, m)
    links = _links(mujoco, m, floating_base)
    armature = _armature(m, links)
    gravity_off = m.opt.disableflags & int(mujoco.mjtDisableBit.mjDSBL_GRAVITY)
    kwargs = {} if dtype is None else dict(dtype=dtype)
    return build_model(
        parent=[k["parent"] for k in links], joint_types=[k["type"] for k in links],
        joint_axis=np.stack([k["axis"] for k in links]), placement_rotation=np.stack([k["R"] for k in links]),
        placement_translation=np.stack([k["p"] for k in links]),
        mass=np.array([k["inertia"][0] for k in links]), com=np.stack([k["inertia"][1] for k in links]),
        inertia_com=np.stack([k["inertia"][2] for k in links]), link_names=[k["name"] for k in links],
        link_joint_names=[k["joint"] for k in links],
        gravity=np.zeros(3) if gravity_off else np.array(m.opt.gravity), armature=armature, strategy=strategy,
        unroll=unroll, **kwargs)


def mjcf_joint_properties(source, *, dtype=None, floating_base=None) -> JointProperties:
    """MuJoCo's joint armature, damping, friction loss and hinge/slide springs of `source` (as in
    `load_mjcf`), (nv,) each in the v order of `load_mjcf(source, floating_base=...)`, in `dtype`
    (JAX's default float when None).

    Zero where MuJoCo's damper / spring flags are disabled, and on a free joint `floating_base`
    adds. Raises `ValueError` naming the joint for a spring on a ball or free joint (MuJoCo's
    quaternion spring has no per-dof form) and for armature on a free joint (it acts on MuJoCo's
    world-frame acceleration, not on jaxsoa's body-frame one).
    """
    if floating_base is not None and not isinstance(floating_base, (bool, np.bool_)):
        raise TypeError(f"argument 'floating_base' must be None, True or False, got {floating_base!r}")
    mujoco = _mujoco()
    m = _compile(mujoco, source)
    _reject_unsupported(mujoco, m)
    flags = m.opt.disableflags
    damper_on = not flags & int(mujoco.mjtDisableBit.mjDSBL_DAMPER)
    spring_on = not flags & int(mujoco.mjtDisableBit.mjDSBL_SPRING)
    rows = []                                                       # (armature, damping, friction, k, ref)
    for link in _links(mujoco, m, floating_base):
        j, dofs = link.get("mj_joint"), link["dofs"]
        if dofs is None:                                           # a free joint the loader added
            rows += [(0.0,) * 5] * 6
            continue
        if not dofs:
            continue
        where = f"MJCF joint '{link['joint']}' ({_TYPE_NAMES[m.jnt_type[j]]})"
        k = m.jnt_stiffness[j] if spring_on else 0.0
        if k != 0 and m.jnt_type[j] in (_BALL, _FREE):
            raise ValueError(f"{where}: stiffness is not supported on ball and free joints (set it to zero)")
        if m.jnt_type[j] == _FREE and np.any(m.dof_armature[list(dofs)] != 0):
            raise ValueError(f"{where}: armature is not supported on free joints (set it to zero)")
        if m.jnt_type[j] == _FREE and np.ptp(m.dof_damping[list(dofs[:3])]) != 0:
            raise ValueError(f"{where}: damping must be equal on the three translations")
        ref = m.qpos_spring[m.jnt_qposadr[j]] if m.jnt_type[j] in (_HINGE, _SLIDE) else 0.0
        rows += [(m.dof_armature[d], m.dof_damping[d] if damper_on else 0.0, m.dof_frictionloss[d], k, ref)
                 for d in dofs]
    columns = np.asarray(rows, float).reshape(-1, 5).T
    return JointProperties(*(jnp.asarray(c, dtype=dtype) for c in columns))
