"""Strict reading of a URDF file before yourdfpy sees it: a well-formed XML parse (lxml with
recovery off, so a malformed file is an error at the parser's line instead of a silently
different robot) and the checks of the kinematic tree that neither yourdfpy nor urdfdom make.
Every failure is a `ValueError` naming the file and the line, or the element (link or joint name)
and its field. Checked:

* the file is well-formed XML; its root is `<robot name="...">`;
* links: a unique, non-empty name; at most one `<inertial>`, holding at most one `<origin>`, exactly
  one `<mass value>` (finite, ≥ 0) and exactly one `<inertia>` with all six moments (finite), the
  link's own inertia positive semi-definite with the triangle inequality (a link merged through a
  fixed joint is checked before merging, where its error could hide in its parent's);
* joints: a unique, non-empty name; a URDF type; a planar joint's `<axis>` (the plane's normal)
  `0 0 1`, up to scale (Pinocchio's `JointModelPlanar` moves in the joint frame's x-y plane and its
  URDF parser ignores the axis, so any other normal, the URDF default `1 0 0` of an omitted `<axis>`
  included, is refused rather than dropped); exactly one `<parent link>` and `<child link>`, both
  naming links of the file; at most one of each other child element; `<limit>` with `effort` and
  `velocity` on revolute and prismatic joints (the URDF specification requires them); `<axis>` with
  an `xyz`; a `<mimic>` naming a joint of the file;
* numbers: `xyz` / `rpy` of an `<origin>` and `xyz` of an `<axis>` are three finite numbers, every
  other numeric attribute of the elements above one finite number;
* the tree: every link the child of at most one joint, no cycle, exactly one root link.

Only the kinematic and inertial elements (`<link>` with its `<inertial>`, `<joint>`) are handed on
(`strict_tree`): visuals, collisions, materials and simulator extensions do not enter a `Model`.
"""

import io
import re
import warnings

import numpy as np
from lxml import etree

JOINT_TYPES = ("revolute", "continuous", "prismatic", "fixed", "floating", "planar")
PLANAR_NORMAL = (0.0, 0.0, 1.0)
_MOMENTS = ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")
# element -> {attribute: number of values}; required attributes are listed in _REQUIRED
_NUMBERS = {
    "origin": {"xyz": 3, "rpy": 3},
    "axis": {"xyz": 3},
    "mass": {"value": 1},
    "inertia": dict.fromkeys(_MOMENTS, 1),
    "limit": {"lower": 1, "upper": 1, "effort": 1, "velocity": 1},
    "mimic": {"multiplier": 1, "offset": 1},
    "dynamics": {"damping": 1, "friction": 1},
    "safety_controller": {"soft_lower_limit": 1, "soft_upper_limit": 1, "k_position": 1, "k_velocity": 1},
    "calibration": {"rising": 1, "falling": 1},
}
_REQUIRED = {"axis": ("xyz",), "mass": ("value",), "inertia": _MOMENTS, "mimic": ("joint",),
             "parent": ("link",), "child": ("link",)}
_FIELDS = {"mass": "'mass' (<mass value>)", "inertia": "'inertia_com' (<inertia>)"}   # the Model's names
_JOINT_CHILDREN = ("parent", "child", "origin", "axis", "limit", "dynamics", "mimic", "calibration",
                   "safety_controller")


def _fail(path, what, element, message):
    line = "" if element is None or element.sourceline is None else f" (line {element.sourceline})"
    raise ValueError(f"URDF file '{path}': {what}{line}: {message}")


def _numbers(path, what, element, attribute, count):
    """The `count` finite numbers of `element`'s attribute, or ValueError naming it."""
    text = element.get(attribute)
    try:
        values = np.array([float(token) for token in text.split()])
    except ValueError:
        values = None
    if values is None or values.shape != (count,) or not np.all(np.isfinite(values)):
        field = _FIELDS.get(element.tag, f"'{attribute}' of <{element.tag}>")
        _fail(path, what, element, f"field {field} must be {count} finite number{'s' if count > 1 else ''}, "
                                   f"got {attribute}={text!r}")
    return values


def _check_element(path, what, element):
    """Required attributes and numbers of one child element of a link or joint."""
    for attribute in _REQUIRED.get(element.tag, ()):
        if not element.get(attribute):
            _fail(path, what, element, f"<{element.tag}> has no '{attribute}' attribute")
    for attribute, count in _NUMBERS.get(element.tag, {}).items():
        if element.get(attribute) is not None:
            _numbers(path, what, element, attribute, count)


def _single(path, what, parent, tag, required=False):
    """The one `<tag>` child of `parent` (None when absent and not required)."""
    found = parent.findall(tag)
    if len(found) > 1:
        _fail(path, what, found[1], f"more than one <{tag}> (first at line {found[0].sourceline})")
    if required and not found:
        _fail(path, what, parent, f"no <{tag}> element")
    if found:
        _check_element(path, what, found[0])
    return found[0] if found else None


def _check_link(path, link, check_inertia):
    what = f"link '{link.get('name')}'"
    inertial = _single(path, what, link, "inertial")
    if inertial is None:
        return
    _single(path, what, inertial, "origin")
    _single(path, what, inertial, "inertia", required=True)
    mass = float(_single(path, what, inertial, "mass", required=True).get("value"))
    if mass < 0:
        _fail(path, what, inertial.find("mass"), f"field 'mass' = {mass} is negative")
    m = {k: float(inertial.find("inertia").get(k)) for k in _MOMENTS}
    inertia = np.array([[m["ixx"], m["ixy"], m["ixz"]], [m["ixy"], m["iyy"], m["iyz"]],
                        [m["ixz"], m["iyz"], m["izz"]]])
    moments = np.linalg.eigvalsh(inertia)
    tol = 1e-12 * max(1.0, np.abs(inertia).max())
    if moments[0] < -tol:
        problem = "is not positive semi-definite"
    elif moments[0] + moments[1] < moments[2] * (1 - 1e-9) - tol:
        problem = "violates the triangle inequality"
    else:
        return
    element = inertial.find("inertia")
    message = f"field 'inertia_com' (<inertia>) {problem} (principal moments {moments})"
    if check_inertia == "raise":
        _fail(path, what, element, message + " (check_inertia='warn' loads it with a warning)")
    warnings.warn(f"URDF file '{path}': {what} (line {element.sourceline}): {message}", UserWarning, stacklevel=4)


def _check_joint(path, joint, links, joints, check_mimic):
    name = joint.get("name")
    what = f"joint '{name}'"
    jtype = joint.get("type")
    if jtype not in JOINT_TYPES:
        _fail(path, what, joint, f"type {jtype!r} is not a URDF joint type {JOINT_TYPES}")
    for tag in _JOINT_CHILDREN:
        _single(path, what, joint, tag, required=tag in ("parent", "child"))
    if jtype == "planar":
        _check_planar_normal(path, what, joint)
    for tag in ("parent", "child"):
        link = joint.find(tag).get("link")
        if link not in links:
            _fail(path, what, joint.find(tag), f"{tag} link '{link}' is not a link of the file")
    if jtype in ("revolute", "prismatic"):
        limit = _single(path, what, joint, "limit", required=True)
        for attribute in ("effort", "velocity"):
            if limit.get(attribute) is None:
                _fail(path, what, limit, f"<limit> of a {jtype} joint has no '{attribute}' attribute")
    mimic = joint.find("mimic")
    if mimic is not None and mimic.get("joint") not in joints:
        message = f"<mimic> names joint '{mimic.get('joint')}', not a joint of the file"
        if check_mimic == "raise":
            _fail(path, what, mimic, message)
        warnings.warn(f"URDF file '{path}': {what} (line {mimic.sourceline}): {message}; loaded as an independent "
                      f"joint (check_mimic='warn')", UserWarning, stacklevel=4)
        joint.remove(mimic)                                       # yourdfpy would look the joint up


def _check_planar_normal(path, what, joint):
    """A planar joint's `<axis>` is `0 0 1` up to scale (module docstring); ValueError otherwise."""
    axis = joint.find("axis")
    normal = np.array([1.0, 0.0, 0.0]) if axis is None else _numbers(path, what, axis, "xyz", 3)   # URDF default
    with np.errstate(invalid="ignore"):
        unit = normal / np.linalg.norm(normal)                                                     # n / |n|
    if not np.allclose(unit, PLANAR_NORMAL, rtol=0.0, atol=1e-9):
        given = "no <axis> (the URDF default 1 0 0)" if axis is None else f"<axis xyz={axis.get('xyz')!r}>"
        _fail(path, what, joint if axis is None else axis,
              f"a planar joint moves in its frame's x-y plane (Pinocchio's JointModelPlanar), so its <axis> "
              f"(the plane's normal) must be '0 0 1', got {given}: rotate the joint's <origin> instead")


def _named(path, root, tag):
    """{name: element} of the `<tag>` children of the root; ValueError on a missing or repeated name."""
    named = {}
    for element in root.findall(tag):
        name = element.get("name")
        if not name:
            _fail(path, f"a <{tag}>", element, "no 'name' attribute")
        if name in named:
            _fail(path, f"{tag} '{name}'", element, f"duplicate {tag} name (first at line {named[name].sourceline})")
        named[name] = element
    return named


def _check_tree(path, links, joints):
    """One parent joint per link, no cycle, exactly one root."""
    parent_joint = {}
    for name, joint in joints.items():
        child = joint.find("child").get("link")
        if child in parent_joint:
            _fail(path, f"link '{child}'", joint, f"child of two joints, '{parent_joint[child]}' and '{name}'")
        parent_joint[child] = name
    for start in links:
        chain, link = [], start
        while link in parent_joint:
            chain.append(link)
            link = joints[parent_joint[link]].find("parent").get("link")
            if link in chain:
                loop = chain[chain.index(link):]
                _fail(path, f"link '{link}'", joints[parent_joint[link]],
                      f"the joints form a cycle through links {loop} (joints {[parent_joint[k] for k in loop]})")
    roots = [name for name in links if name not in parent_joint]
    if len(roots) != 1:
        raise ValueError(f"URDF file '{path}': a URDF must have exactly one root link, found {roots}")


def strict_tree(path, check_inertia="raise", check_mimic="raise") -> bytes:
    """Parse the URDF file at `path` strictly and check it (module docstring); returns the XML of
    its `<robot>` with only links (and their inertials) and joints, for yourdfpy. With
    ``check_inertia="warn"`` an inertia that is not positive semi-definite or breaks the triangle
    inequality is a `UserWarning` naming the link and line instead of an error; with
    ``check_mimic="warn"`` so is a `<mimic>` naming a joint the file does not have (the element is
    dropped: mimic relations are not enforced, every mimic joint loads as an independent joint)."""
    parser = etree.XMLParser(recover=False, remove_blank_text=True, remove_comments=True,
                             resolve_entities=False, no_network=True)
    try:
        root = etree.parse(str(path), parser).getroot()
    except etree.XMLSyntaxError as err:
        message = re.sub(r",? line \d+, column \d+$", "", err.msg)      # lxml repeats the position
        raise ValueError(f"URDF file '{path}' is not well-formed XML: line {err.lineno}: {message}") from None
    if root.tag != "robot":
        _fail(path, "the root element", root, f"<{root.tag}> is not <robot>: not a URDF file")
    if not root.get("name"):
        _fail(path, "<robot>", root, "no 'name' attribute")
    links, joints = _named(path, root, "link"), _named(path, root, "joint")
    for link in links.values():
        _check_link(path, link, check_inertia)
    for joint in joints.values():
        _check_joint(path, joint, links, joints, check_mimic)
    _check_tree(path, links, joints)

    robot = etree.Element("robot", name=root.get("name"))
    for link in links.values():
        kept = etree.SubElement(robot, "link", name=link.get("name"))
        if link.find("inertial") is not None:
            kept.append(link.find("inertial"))
    for joint in joints.values():
        robot.append(joint)
    buffer = io.BytesIO()
    etree.ElementTree(robot).write(buffer)
    return buffer.getvalue()
