"""The seed-000 dual-arm spacecraft: a hub (link ID 1) with two 3-link arms (arm 1 = IDs 2, 3, 4,
arm 2 = IDs 5, 6, 7), described by configuration parameters (jaxsoa.topology.reconfigure, design/soa.md §4, §6).

The seed's Table 1 was lost; the values below are chosen (plausible for a small servicer) and are the
only source of the design. Planar by default: the hub is fixed (seed §4.1) and every arm joint is
revolute about z, the z axes of all interface frames being parallel. Zero gravity (orbit).

Hub (ID 1): uniform cube, 1000 kg, edge 2.0 m (I = 666.7 kg m² about each axis, com at the hub
origin). Interfaces: 0 = virtual joint (hub origin, pointer 8 = s + 1), 1 = arm 1 mount at
(1.0, 0, 0), 2 = arm 2 mount at (−1.0, 0, 0) rotated by π about z (arm 2 points along −x).

Arm links: interface 0 (the link's "S" end) at the design origin, interface 1 ("E" end) at
(L, 0, 0), both frames parallel to the design frame (``TILT`` = 0). Centres of mass sit off the
middle (motor at the S end) and off the axis; inertia about the com in the design frame, with
products Ixy. Reversed links (inboard joint at E, configuration 3) use com − (L, 0, 0) and the same
rotational inertia (`jaxsoa.topology.reconfigure.interface_inertias`).

| ID | link      | arm | L [m] | m [kg] | com x, y, z [m]    | Ixx   | Iyy  | Izz  | Ixy [kg m²] |
|----|-----------|-----|-------|--------|--------------------|-------|------|------|-------------|
| 2  | arm1_link1| 1   | 1.5   | 30     | 0.60, 0.04, 0.01   | 0.30  | 5.80 | 5.90 | 0.05        |
| 3  | arm1_link2| 1   | 1.2   | 20     | 0.45, −0.03, 0.00  | 0.15  | 2.50 | 2.55 | −0.03       |
| 4  | arm1_link3| 1   | 1.0   | 12     | 0.38, 0.02, −0.01  | 0.08  | 1.05 | 1.10 | 0.02        |
| 5  | arm2_link1| 2   | 1.4   | 28     | 0.55, −0.02, 0.01  | 0.28  | 4.70 | 4.80 | −0.04       |
| 6  | arm2_link2| 2   | 1.3   | 22     | 0.50, 0.03, 0.00   | 0.20  | 3.20 | 3.25 | 0.03        |
| 7  | arm2_link3| 2   | 1.1   | 10     | 0.40, −0.01, 0.01  | 0.07  | 1.00 | 1.02 | −0.01       |

Configurations (interface pointers per link ID 1..7, `CONFIGURATIONS`; hand-derived P in
tests/topology/test_configuration_parameters.py):
1 basic; 2 link ID 2 moved from arm 1 to the E end of arm 2 (seed Figs. 3a/9a); 3 arm 1 attached by
its tip (E end of ID 4) to the E end of arm 2: one 6-link chain hub-5-6-7-4-3-2 (Figs. 3b/9b).

`design(floating=True)`: the 3-D variant: the hub has a free joint and each arm link's interface 1
is tilted by ``TILT_3D`` about x, so the joint axes leave the plane.
"""

import numpy as np
from scipy.spatial.transform import Rotation

from jaxsoa.multibody.joints import JointType
from jaxsoa.topology.configuration_parameters import topology_from_configuration
from jaxsoa.topology.reconfigure import LinkDesign, reconfigurable_model

HUB_MASS, HUB_EDGE = 1000.0, 2.0
HUB_MOUNTS = [(0.0, (0.0, 0.0, 0.0)), (0.0, (1.0, 0.0, 0.0)), (np.pi, (-1.0, 0.0, 0.0))]  # (z angle, position)
# ID: (name, length, mass, com, (Ixx, Iyy, Izz, Ixy))
LINKS = {
    2: ("arm1_link1", 1.5, 30.0, (0.60, 0.04, 0.01), (0.30, 5.80, 5.90, 0.05)),
    3: ("arm1_link2", 1.2, 20.0, (0.45, -0.03, 0.00), (0.15, 2.50, 2.55, -0.03)),
    4: ("arm1_link3", 1.0, 12.0, (0.38, 0.02, -0.01), (0.08, 1.05, 1.10, 0.02)),
    5: ("arm2_link1", 1.4, 28.0, (0.55, -0.02, 0.01), (0.28, 4.70, 4.80, -0.04)),
    6: ("arm2_link2", 1.3, 22.0, (0.50, 0.03, 0.00), (0.20, 3.20, 3.25, 0.03)),
    7: ("arm2_link3", 1.1, 10.0, (0.40, -0.01, 0.01), (0.07, 1.00, 1.02, -0.01)),
}
TILT_3D = 0.2                                   # rad about x, interface 1 of arm links, floating variant
IDS = np.arange(1, 8)
N_IF = 3
# interfaces[k] of link ID k + 1: 0 a free end, 8 = s + 1 the virtual joint to inertial space
CONFIGURATIONS = {
    # basic: hub [virtual joint, arm 1, arm 2]
    1: [[8, 2, 5], [1, 3, 0], [2, 4, 0], [3, 0, 0], [1, 6, 0], [5, 7, 0], [6, 0, 0]],
    # link 2 moved from arm 1 to the end of arm 2: hub - 3 - 4 and hub - 5 - 6 - 7 - 2
    2: [[8, 3, 5], [7, 0, 0], [1, 4, 0], [3, 0, 0], [1, 6, 0], [5, 7, 0], [6, 2, 0]],
    # arm 1 attached by its tip to the end of arm 2: one chain hub - 5 - 6 - 7 - 4 - 3 - 2
    3: [[8, 0, 5], [0, 3, 0], [2, 4, 0], [3, 7, 0], [1, 6, 0], [5, 7, 0], [6, 4, 0]],
}
CONFIGURATION_NAMES = {1: "basic", 2: "link 2 moved to the end of arm 2", 3: "arm 1 tip-docked to arm 2"}


def link_inertia(ixx, iyy, izz, ixy):
    return np.array([[ixx, ixy, 0.0], [ixy, iyy, 0.0], [0.0, 0.0, izz]])


def interface_poses(floating=False):
    """(R (7, 3, 3, 3), p (7, 3, 3)) of every interface frame in its link's design frame (storage =
    ID − 1; the third slot of arm links is padding)."""
    tilt = TILT_3D if floating else 0.0
    R, p = np.tile(np.eye(3), (7, N_IF, 1, 1)), np.zeros((7, N_IF, 3))
    for i, (angle, pos) in enumerate(HUB_MOUNTS):
        R[0, i], p[0, i] = Rotation.from_rotvec([0.0, 0.0, angle]).as_matrix(), pos
    for link_id, (_, length, *_) in LINKS.items():
        R[link_id - 1, 1] = Rotation.from_rotvec([tilt, 0.0, 0.0]).as_matrix()
        p[link_id - 1, 1] = (length, 0.0, 0.0)
    return R, p


def design(floating=False) -> LinkDesign:
    """The `LinkDesign` of the table: hub fixed (planar) or free (3-D variant, tilted interfaces)."""
    R, p = interface_poses(floating)
    hub_i = HUB_MASS * HUB_EDGE ** 2 / 6.0
    mass = np.array([HUB_MASS] + [LINKS[k][2] for k in range(2, 8)])
    com = np.array([(0.0, 0.0, 0.0)] + [LINKS[k][3] for k in range(2, 8)])
    inertia = np.array([hub_i * np.eye(3)] + [link_inertia(*LINKS[k][4]) for k in range(2, 8)])
    types = ((JointType.FREE if floating else JointType.FIXED),) + (JointType.REVOLUTE,) * 6
    names = ("hub", *(LINKS[k][0] for k in range(2, 8)))
    return LinkDesign(R, p, mass, com, inertia, types, link_names=names)


def configuration(k):
    """Configuration parameters (7, 3) of configuration k ∈ {1, 2, 3}: row = link ID − 1."""
    return np.array(CONFIGURATIONS[k])


def model(k, floating=False, gravity=(0.0, 0.0, 0.0)):
    """The validated jaxsoa `Model` of configuration k (float64)."""
    return reconfigurable_model(design(floating), configuration(k), IDS, gravity=gravity)


def path_matrix(k):
    """The generated path matrix P (7, 7) of configuration k (P[i, j] = 1 iff link ID i+1 is on the
    path from link ID j+1 to the root)."""
    return topology_from_configuration(IDS, configuration(k)).P.astype(int)


def print_path_matrices(configs=(1, 2, 3)):
    text = []
    for k in configs:
        rows = "\n".join("    " + " ".join(str(x) for x in r) for r in path_matrix(k))
        text.append(f"P, configuration {k} ({CONFIGURATION_NAMES[k]}), rows/columns = link IDs 1..7:\n{rows}")
    print("\n".join(text))
    return text


def describe():
    """The parameter table (markdown) from the data."""
    lines = ["| ID | link | L [m] | m [kg] | com [m] | Ixx, Iyy, Izz, Ixy [kg m²] |", "|---|---|---|---|---|---|",
             f"| 1 | hub (cube {HUB_EDGE:g} m) | - | {HUB_MASS:g} | 0, 0, 0 | "
             f"{HUB_MASS * HUB_EDGE ** 2 / 6:.1f} (x3), 0 |"]
    for k, (name, length, m, c, i) in LINKS.items():
        lines.append(f"| {k} | {name} | {length:g} | {m:g} | {', '.join(f'{x:g}' for x in c)} | "
                     f"{', '.join(f'{x:g}' for x in i)} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(describe())
    print_path_matrices()
