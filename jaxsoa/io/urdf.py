"""URDF loading through yourdfpy (a maintained URDF parser), with Pinocchio's conventions.

* Links joined by `fixed` joints are merged into their moving ancestor (their inertia is added),
  as Pinocchio does; the URDF root link becomes link 0, welded to the world by a `fixed` joint
  (`floating_base=False`) or joined to it by a free joint (`floating_base=True`, Pinocchio's
  free-flyer layout: q = [x y z, qx qy qz qw, joints], v = [v_lin, ω (base frame), joints]).
* Links are stored depth-first, the children of a link in joint-name order (urdfdom keeps joints
  in a name-sorted map, so that is Pinocchio's order, not the file's), so q matches Pinocchio's.
* `continuous` joints: with `continuous="revolute"` (the default) revolute joints with one coordinate,
  the angle; with `continuous="unbounded"` revolute-unbounded joints (`JointType.REVOLUTE_UNBOUNDED`,
  Pinocchio's layout: q = (cos θ, sin θ), v = θ̇), so q moves between the engines unchanged.
* Joint axes are normalised (the URDF spec asks for unit axes; Pinocchio normalises too); a
  zero axis raises `ValueError` naming the joint and link.
* Mimic joints are loaded as independent joints (Pinocchio's default); the relation is not enforced. A
  `<mimic>` naming a joint the file does not have is a `ValueError`, or with `check_mimic="warn"` a
  `UserWarning` naming the joint and line (its joint then loads like any mimic joint: Pinocchio loads
  such a file, e.g. example-robot-data's alex_psyonic_hands).
* A body on a moving joint (or the free-flyer root) that carries no `<inertial>`, neither its own
  nor one of a link fixed to it, raises `ValueError` naming the link (its joint's row of M(q) would
  lack that body's inertia).
* A `floating` joint is a free joint (Pinocchio's free flyer) wherever it is; ABA takes it on the
  batch-last core at a root or on a root welded to the world, elsewhere on the per-sample recursion.
* A `planar` joint is a planar joint (Pinocchio's `JointModelPlanar`: q = (x, y, cos θ, sin θ),
  v = (v_x, v_y, ω) in the child frame) moving in its joint frame's x-y plane; its `<axis>` (the
  plane's normal) must be `0 0 1` (`jaxsoa.io.urdf_xml`: Pinocchio ignores it).
* Joint limits, effort, velocity and `<dynamics>` (damping, friction) are not part of a `Model`
  and are not read, for any joint type.
* `check_inertia="warn"` loads what Pinocchio loads: such a body gets zero inertia, and an inertia
  that is not positive semi-definite or breaks the triangle inequality (several example-robot-data
  robots carry them: ANYmal, Go1, B1, HyQ, PR2, TIAGo) is a `UserWarning` naming the link instead
  of an error. Negative masses are errors either way.
* The file is read strictly first (`jaxsoa.io.urdf_xml`): malformed XML is an error at the parser's
  line, and a tree that is not one tree (repeated names, a link with two parent joints, a cycle, a
  joint naming a missing link, not one root), a missing required element or attribute, or a number
  that is not a finite number raises `ValueError` naming the element and the line.
* `dtype` (through `build_kwargs`, as `build_model`): without it the model takes JAX's default
  float (float64 under `jax_enable_x64`); the parsing itself is float64 NumPy.
"""

import io
import os
from pathlib import Path

import numpy as np
import yourdfpy

from jaxsoa.io.urdf_xml import strict_tree
from jaxsoa.multibody.build import build_model, check_inertia_option, inconsistent
from jaxsoa.multibody.joints import JointType

_MOVING = {"revolute": JointType.REVOLUTE, "prismatic": JointType.PRISMATIC, "floating": JointType.FREE,
           "planar": JointType.PLANAR}
_CONTINUOUS = {"revolute": JointType.REVOLUTE, "unbounded": JointType.REVOLUTE_UNBOUNDED}   # load_urdf(continuous=…)


def _link_inertia(link):
    """(mass, com, inertia_com) of a URDF link in its own frame, or None without <inertial>."""
    if link.inertial is None:
        return None
    origin = np.eye(4) if link.inertial.origin is None else link.inertial.origin
    R, com = origin[:3, :3], origin[:3, 3]
    inertia = np.zeros((3, 3)) if link.inertial.inertia is None else np.asarray(link.inertial.inertia)
    return float(link.inertial.mass or 0.0), com, R @ inertia @ R.T


def _merge(body, other, X_body_other):
    """Add the inertia `other` (in its frame) to `body`, with `X_body_other` its 4x4 pose."""
    m1, c1, I1 = body
    m2, c2_local, I2_local = other
    R, p = X_body_other[:3, :3], X_body_other[:3, 3]
    c2, I2 = R @ c2_local + p, R @ I2_local @ R.T
    m = m1 + m2
    c = (m1 * c1 + m2 * c2) / m if m > 0 else np.zeros(3)

    def shift(mi, d):                                   # parallel-axis term m (|d|² 1 − d dᵀ)
        return mi * (d @ d * np.eye(3) - np.outer(d, d))

    return m, c, I1 + shift(m1, c1 - c) + I2 + shift(m2, c2 - c)


def load_urdf(path, floating_base=False, *, check_inertia="raise", check_mimic="raise", continuous="revolute",
              **build_kwargs):
    """Read a URDF file into a `Model` (see the module docstring for the conventions, for
    ``check_inertia`` and ``check_mimic``: "raise" or "warn", and for ``continuous``: "revolute" or
    "unbounded"). `build_kwargs` go to `build_model`. Every `ValueError` names the file."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"argument 'path' must be a file path (str or os.PathLike), got {type(path).__name__}")
    if not isinstance(floating_base, (bool, np.bool_)):
        raise TypeError(f"argument 'floating_base' must be True or False, got {floating_base!r}")
    check_inertia_option(check_inertia)
    if check_mimic not in ("raise", "warn"):
        raise ValueError(f"argument 'check_mimic' must be 'raise' or 'warn', got {check_mimic!r}")
    if continuous not in tuple(_CONTINUOUS):
        raise ValueError(f"argument 'continuous' must be 'revolute' or 'unbounded', got {continuous!r}")
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"URDF file '{path}' does not exist")
    tree = strict_tree(path, check_inertia, check_mimic)
    try:
        return _model(tree, path, floating_base, check_inertia, dict(_MOVING, continuous=_CONTINUOUS[continuous]),
                      build_kwargs)
    except ValueError as err:
        message = str(err)
        raise ValueError(message if message.startswith("URDF file '") else f"URDF file '{path}': {message}") from None


def _model(tree: bytes, path, floating_base, check_inertia, moving, build_kwargs):
    """The `Model` of a URDF checked by `strict_tree`; `moving`: URDF type -> `JointType` of the moving joints."""
    robot = yourdfpy.URDF.load(io.BytesIO(tree), load_meshes=False, build_scene_graph=False,
                               load_collision_meshes=False, build_collision_scene_graph=False).robot
    links = {link.name: link for link in robot.links}
    children = {name: [] for name in links}
    child_links = set()
    for joint in robot.joints:                       # one tree, known types: checked by strict_tree
        children[joint.parent].append(joint)
        child_links.add(joint.child)
    roots = [name for name in links if name not in child_links]

    bodies = []   # dicts: name, joint, type, parent, axis, placement (4x4), inertia

    def add_link(link_name, body_index, X_body_link):
        """Merge link `link_name` (pose X_body_link in body `body_index`) and recurse."""
        inertia = _link_inertia(links[link_name])
        if inertia is not None:
            body = bodies[body_index]
            body["inertia"] = _merge(body["inertia"], inertia, X_body_link)
            body["inertial"] = True
        for joint in sorted(children[link_name], key=lambda j: j.name):   # Pinocchio's sibling order
            X_body_joint = X_body_link @ (np.eye(4) if joint.origin is None else joint.origin)
            if joint.type == "fixed":
                add_link(joint.child, body_index, X_body_joint)
                continue
            axis = np.array([1.0, 0.0, 0.0]) if joint.axis is None else np.asarray(joint.axis, float)
            if not np.linalg.norm(axis) > 0:
                raise ValueError(f"URDF joint '{joint.name}' (link '{joint.child}'): field 'axis' is zero "
                                 "or not finite")
            bodies.append(dict(name=joint.child, joint=joint.name, type=moving[joint.type],
                               parent=body_index, axis=axis / np.linalg.norm(axis),
                               placement=X_body_joint, inertia=(0.0, np.zeros(3), np.zeros((3, 3))),
                               inertial=False))
            add_link(joint.child, len(bodies) - 1, np.eye(4))

    root = roots[0]
    bodies.append(dict(name=root, joint="root_joint", type=JointType.FREE if floating_base else JointType.FIXED,
                       parent=-1, axis=np.array([1.0, 0.0, 0.0]), placement=np.eye(4),
                       inertia=(0.0, np.zeros(3), np.zeros((3, 3))), inertial=False))
    add_link(root, 0, np.eye(4))
    for body in bodies:
        if body["type"] != JointType.FIXED and not body["inertial"]:
            joint = "floating base" if body["parent"] < 0 else f"child of moving joint '{body['joint']}'"
            inconsistent(f"URDF file '{path}': link '{body['name']}' ({joint}) has no <inertial>, nor has any "
                         "link fixed to it", check_inertia)

    return build_model(
        parent=[b["parent"] for b in bodies], joint_types=[b["type"] for b in bodies],
        joint_axis=np.stack([b["axis"] for b in bodies]),
        placement_rotation=np.stack([b["placement"][:3, :3] for b in bodies]),
        placement_translation=np.stack([b["placement"][:3, 3] for b in bodies]),
        mass=np.array([b["inertia"][0] for b in bodies]),
        com=np.stack([b["inertia"][1] for b in bodies]),
        inertia_com=np.stack([b["inertia"][2] for b in bodies]),
        link_names=[b["name"] for b in bodies], link_joint_names=[b["joint"] for b in bodies],
        check_inertia=check_inertia, **build_kwargs)
