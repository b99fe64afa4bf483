"""A 7-DOF space manipulator on a free-flying hub (seed 002), generated from one parameter table.

SSRMS-like joint sequence: shoulder roll-yaw-pitch, elbow pitch, wrist pitch-yaw-roll. At q = 0
every link frame is parallel to the hub frame; the arm rises from the hub's top face (+z), its two
booms point along +x and the wrist hangs down (−z). Each joint sits at the far end of the previous
link's tube: origin of joint i+1 = length_i · direction_i in link i's frame (joint 1: `MOUNT`).
Links are thin-walled tubes of uniform density (centre of mass mid-tube):
axial inertia m (r_o² + r_i²)/2, transverse m (3 (r_o² + r_i²) + L²)/12, r_i = r_o − wall.

Hub: uniform box, mass 2000 kg, size 2.0 × 2.0 × 3.0 m (x, y, z), centre of mass at the hub
origin; arm mount (joint 1) at (0.5, 0.3, 1.5) m on the top face, off the hub's centre of mass.

| # | link          | joint          | axis | tube | length [m] | mass [kg] | outer radius [m] | wall [m] |
|---|---------------|----------------|------|------|------------|-----------|------------------|----------|
| 1 | shoulder_roll | shoulder_roll  | z    | +z   | 0.5        | 25        | 0.15             | 0.02     |
| 2 | shoulder_yaw  | shoulder_yaw   | x    | +z   | 0.5        | 20        | 0.15             | 0.02     |
| 3 | upper_boom    | shoulder_pitch | y    | +x   | 1.5        | 40        | 0.165            | 0.01     |
| 4 | lower_boom    | elbow_pitch    | y    | +x   | 1.5        | 35        | 0.165            | 0.01     |
| 5 | wrist_pitch   | wrist_pitch    | y    | −z   | 0.5        | 20        | 0.15             | 0.02     |
| 6 | wrist_yaw     | wrist_yaw      | x    | −z   | 0.5        | 15        | 0.15             | 0.02     |
| 7 | end_effector  | wrist_roll     | z    | −z   | 0.6        | 10        | 0.12             | 0.02     |

(`describe()` prints this table from the data.) Gravity is zero everywhere (microgravity, seed
assumption 4); joints are undamped revolute joints with limits ±4π rad that no engine here enforces.

jaxsoa: `build(floating)`, link `EE_LINK` (7) is the end effector (hub = link 0); q is
[hub pose (7), 7 joints] when floating (Pinocchio's free-flyer layout), else the 7 joint angles.
Pinocchio: `build_pinocchio(floating)`. MuJoCo (fixed base only): `build_mujoco(timestep)`.
MJCF of the same table (hub on a free joint): `mjcf_text()`, committed as
tests/data/mjcf/space_arm_7dof.xml.
"""

import dataclasses
import pathlib
import tempfile

import jax.numpy as jnp
import numpy as np

import jaxsoa


@dataclasses.dataclass(frozen=True)
class Link:
    """One row of the parameter table (SI units)."""
    name: str
    joint: str
    axis: tuple           # joint axis in the link frame (= hub frame at q = 0)
    direction: tuple      # unit direction of the tube, link frame
    length: float         # m, joint to next joint
    mass: float           # kg
    outer_radius: float   # m
    wall: float           # m


@dataclasses.dataclass(frozen=True)
class Hub:
    mass: float = 2000.0                   # kg
    size: tuple = (2.0, 2.0, 3.0)          # m, box edges along x, y, z
    mount: tuple = (0.5, 0.3, 1.5)         # m, joint 1 origin in the hub frame (top face)


X, Y, Z = (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)
DOWN = (0.0, 0.0, -1.0)
HUB = Hub()
ARM = (
    Link("shoulder_roll", "shoulder_roll", Z, Z, 0.5, 25.0, 0.15, 0.02),
    Link("shoulder_yaw", "shoulder_yaw", X, Z, 0.5, 20.0, 0.15, 0.02),
    Link("upper_boom", "shoulder_pitch", Y, X, 1.5, 40.0, 0.165, 0.01),
    Link("lower_boom", "elbow_pitch", Y, X, 1.5, 35.0, 0.165, 0.01),
    Link("wrist_pitch", "wrist_pitch", Y, DOWN, 0.5, 20.0, 0.15, 0.02),
    Link("wrist_yaw", "wrist_yaw", X, DOWN, 0.5, 15.0, 0.15, 0.02),
    Link("end_effector", "wrist_roll", Z, DOWN, 0.6, 10.0, 0.12, 0.02),
)
JOINT_NAMES = tuple(link.joint for link in ARM)
EE_LINK = len(ARM)                         # jaxsoa link index of the end effector (hub = 0)
JOINT_LIMIT = 4 * np.pi                    # rad, written to the URDF, never enforced here
MUJOCO_EXTRA = '<mujoco><compiler discardvisual="true" fusestatic="false"/></mujoco>'


def tube_inertia(link: Link) -> np.ndarray:
    """3x3 inertia of a thin-walled uniform tube about its centre of mass, link frame [kg m²]."""
    r2 = link.outer_radius**2 + (link.outer_radius - link.wall) ** 2
    axial, transverse = link.mass * r2 / 2, link.mass * (3 * r2 + link.length**2) / 12
    d = np.asarray(link.direction, float)
    return transverse * (np.eye(3) - np.outer(d, d)) + axial * np.outer(d, d)


def hub_inertia(hub: Hub = HUB) -> np.ndarray:
    """3x3 inertia of the uniform box hub about its centre [kg m²]."""
    a, b, c = np.asarray(hub.size) ** 2
    return hub.mass / 12 * np.diag([b + c, a + c, a + b])


def _vec(x) -> str:
    return " ".join(f"{float(c):.12g}" for c in x)


def _inertial(mass, com, inertia) -> str:
    I = inertia
    return (f'<inertial><origin xyz="{_vec(com)}" rpy="0 0 0"/><mass value="{mass:.12g}"/>'
            f'<inertia ixx="{I[0, 0]:.12g}" ixy="{I[0, 1]:.12g}" ixz="{I[0, 2]:.12g}" '
            f'iyy="{I[1, 1]:.12g}" iyz="{I[1, 2]:.12g}" izz="{I[2, 2]:.12g}"/></inertial>')


def urdf_text(extra: str = "") -> str:
    """The URDF of hub + arm from `HUB` and `ARM`; `extra` is inserted inside <robot>."""
    parts = ['<?xml version="1.0"?>', '<robot name="space_arm_7dof">', extra,
             f'<link name="hub">{_inertial(HUB.mass, (0, 0, 0), hub_inertia())}</link>']
    parent, origin = "hub", HUB.mount
    for link in ARM:
        com = np.asarray(link.direction) * link.length / 2
        parts.append(f'<joint name="{link.joint}" type="revolute"><parent link="{parent}"/>'
                     f'<child link="{link.name}"/><origin xyz="{_vec(origin)}" rpy="0 0 0"/>'
                     f'<axis xyz="{_vec(link.axis)}"/><limit lower="{-JOINT_LIMIT:.12g}" '
                     f'upper="{JOINT_LIMIT:.12g}" effort="1000" velocity="10"/>'
                     '<dynamics damping="0" friction="0"/></joint>')
        parts.append(f'<link name="{link.name}">{_inertial(link.mass, com, tube_inertia(link))}</link>')
        parent, origin = link.name, np.asarray(link.direction) * link.length
    parts.append("</robot>")
    return "\n".join(p for p in parts if p)


def write_urdf(path) -> pathlib.Path:
    """Write `urdf_text()` to `path` and return it."""
    path = pathlib.Path(path)
    path.write_text(urdf_text())
    return path


def mjcf_text() -> str:
    """The MJCF of hub + arm from `HUB` and `ARM`: the bodies, joints and inertias of `urdf_text()`,
    the hub on a free joint named like `load_urdf`'s (`root_joint`), gravity zero. Committed as
    tests/data/mjcf/space_arm_7dof.xml (`write_mjcf`); `jaxsoa.load_mjcf(..., floating_base=False)`
    welds the hub."""
    def inertial(mass, com, I):
        return (f'<inertial pos="{_vec(com)}" mass="{mass:.12g}" fullinertia="{I[0, 0]:.12g} {I[1, 1]:.12g} '
                f'{I[2, 2]:.12g} {I[0, 1]:.12g} {I[0, 2]:.12g} {I[1, 2]:.12g}"/>')

    lines = ["<!-- generated from the parameter table of sims/space_arm_7dof.py (mjcf_text); regenerate with",
             "     python -c \"from sims import space_arm_7dof; space_arm_7dof.write_mjcf('tests/data/mjcf/"
             "space_arm_7dof.xml')\" -->",
             '<mujoco model="space_arm_7dof">', '  <option gravity="0 0 0"/>', "  <worldbody>",
             '    <body name="hub">', '      <freejoint name="root_joint"/>',
             f"      {inertial(HUB.mass, (0, 0, 0), hub_inertia())}"]
    origin = HUB.mount
    for depth, link in enumerate(ARM, 3):
        pad = "  " * depth
        lines += [f'{pad}<body name="{link.name}" pos="{_vec(origin)}">',
                  f'{pad}  <joint name="{link.joint}" type="hinge" axis="{_vec(link.axis)}" '
                  f'range="{-JOINT_LIMIT:.12g} {JOINT_LIMIT:.12g}"/>',
                  f"{pad}  {inertial(link.mass, np.asarray(link.direction) * link.length / 2, tube_inertia(link))}"]
        origin = np.asarray(link.direction) * link.length
    lines += ["  " * depth + "</body>" for depth in range(len(ARM) + 2, 1, -1)]
    lines += ["  </worldbody>", "</mujoco>", ""]
    return "\n".join(lines)


def write_mjcf(path) -> pathlib.Path:
    """Write `mjcf_text()` to `path` and return it."""
    path = pathlib.Path(path)
    path.write_text(mjcf_text())
    return path


def _with_urdf_file(load):
    with tempfile.TemporaryDirectory() as folder:
        return load(str(write_urdf(pathlib.Path(folder) / "space_arm_7dof.urdf")))


def build(floating: bool, dtype=jnp.float64):
    """jaxsoa model (gravity zero): hub welded to the world, or on a free joint (`floating`)."""
    model = _with_urdf_file(lambda path: jaxsoa.load_urdf(path, floating_base=floating, dtype=dtype))
    return dataclasses.replace(model, gravity=jnp.zeros(3, dtype))


def build_pinocchio(floating: bool):
    """Pinocchio model (gravity zero), free-flyer root when `floating`."""
    import pinocchio as pin

    def load(path):
        return pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer()) if floating else pin.buildModelFromUrdf(path)

    model = _with_urdf_file(load)
    model.gravity.setZero()
    return model


def build_mujoco(timestep=0.01):
    """MuJoCo model of the fixed-base arm: no geoms, no gravity, no constraints or contacts, no
    joint damping or armature, classical RK4 with step `timestep` [s]. Map joints by name
    (`JOINT_NAMES`)."""
    import mujoco

    m = mujoco.MjModel.from_xml_string(urdf_text(MUJOCO_EXTRA))
    m.opt.gravity[:] = 0.0
    m.opt.integrator = mujoco.mjtIntegrator.mjINT_RK4
    m.opt.timestep = timestep
    m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONSTRAINT | mujoco.mjtDisableBit.mjDSBL_CONTACT
    m.dof_damping[:] = 0.0
    m.dof_armature[:] = 0.0
    return m


def describe() -> str:
    """The parameter table as markdown (also printed by `python -m sims.space_arm_7dof`)."""
    names = {X: "+x", Y: "+y", Z: "+z", DOWN: "−z"}
    lines = [f"hub: box {HUB.size} m, {HUB.mass:g} kg, inertia diag {np.diag(hub_inertia()).round(2)} kg m², "
             f"arm mount {HUB.mount} m", "",
             "| # | link | joint | axis | tube | length [m] | mass [kg] | r_o [m] | wall [m] | "
             "I_axial, I_transverse [kg m²] |", "|---" * 10 + "|"]
    for k, link in enumerate(ARM, 1):
        I = np.linalg.eigvalsh(tube_inertia(link))
        lines.append(f"| {k} | {link.name} | {link.joint} | {names[link.axis]} | {names[link.direction]} | "
                     f"{link.length:g} | {link.mass:g} | {link.outer_radius:g} | {link.wall:g} | "
                     f"{I[0]:.3f}, {I[-1]:.3f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(describe())
