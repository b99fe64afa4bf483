"""The seed-000 closed-loop grasp (seed §3.3, §4.3, Fig. 13): the planar dual-arm spacecraft of
`sims.dual_arm_spacecraft` (fixed hub ID 1, arm 1 = IDs 2, 3, 4, arm 2 = IDs 5, 6, 7, zero gravity)
with BOTH arm tips grasping one target object, link ID 8 (s = 8, virtual joint pointer 9).

Configuration parameters (`CONFIGURATION`, row = link ID − 1): hub [9, 2, 5]; arm links [inboard
neighbour, outboard neighbour, 0]; the tips' E ends point to the object (ID 4 → 8, ID 7 → 8) and the
object's two grasp interfaces point back [4, 7, 0]. The traversal (`jaxsoa.topology.configuration_parameters`)
reaches the object first from arm 1's tip (the lower storage index), so the tree is hub–arm 1–object and
hub–arm 2, and the loop is cut between arm 2's tip (ID 7, interface 1) and the object (ID 8,
interface 1). The seed cuts "between link 3 and link 8" with its own (lost) numbering; here too the
target is link 8 and the cut sits at a grasp.

Grasp joints. A grasp holds the object rigidly (the seed's 夾持, clamping), so both grasps are
*welds*: the object is welded to arm 1's tip as the FIXED inboard joint of link 8, and the cut at arm 2's
tip is a planar weld (code 3 of `jaxsoa.topology.configuration_inputs.CUT_JOINT_TYPES`: the relative rotation
about z and the in-plane translation are constrained; the other three directions vanish identically for this
planar mechanism, so they are not constrained). The closed chain of six revolute joints then has
6 − 3 = 3 degrees of freedom.

Target (ID 8), chosen (the seed's Table 2 is lost). Its design frame is grasp frame 0, which coincides
with the E-end frame of arm 1's tip (ID 4). Grasp frame 1 is placed where arm 2's tip E-end frame is
when all six joints are at −45° (`Q0`), so the loop closes with zero error there:
``X_grasp0_grasp1 = X_world_tip1(Q0)⁻¹ X_world_tip2(Q0)`` (`grasp_pose`, planar closed form), which
is a rotation by π about z and a translation of about (−2.454, −6.082, 0) m (length ℓ ≈ 6.56 m: the
tips end up on opposite sides of the hub; the target is a long truss beam between them, collisions are
not modelled). Inertia: a uniform slender beam of ``OBJECT_MASS`` = 40 kg between the grasp points,
centre of mass at their midpoint, ``J = m ℓ² / 12 (E − u uᵀ) + OBJECT_J0 · E`` about it in the design
frame (u the unit vector from grasp 0 to grasp 1, ``OBJECT_J0`` = 0.5 kg m² for the beam's
cross-section).

Seed test (§4.3, Fig. 14): all joints at −45°, zero velocity; five joints get a constant 0.1 N·m
(``ACTUATED``: every arm joint but arm 2's third joint, link ID 7, next to the cut), the sixth is free.
"""

import jax.numpy as jnp
import numpy as np

from jaxsoa.multibody.joints import JointType
from jaxsoa.topology.configuration_parameters import topology_from_configuration
from jaxsoa.topology.cuts import closure_from_topology, cut_interfaces
from jaxsoa.topology.reconfigure import LinkDesign, reconfigurable_model
from sims import dual_arm_spacecraft as sc

OBJECT_MASS, OBJECT_J0 = 40.0, 0.5
Q0 = np.full(6, np.deg2rad(-45.0))
TORQUE = 0.1
ACTUATED = np.array([True, True, True, True, True, False])      # v order: joints of link IDs 2..7
IDS = np.arange(1, 9)
CONFIGURATION = np.array([[9, 2, 5], [1, 3, 0], [2, 4, 0], [3, 8, 0], [1, 6, 0], [5, 7, 0], [6, 8, 0], [4, 7, 0]])
PLANAR_WELD = 3
CUT_JOINT_TYPES = np.zeros((8, 3), np.int64)
CUT_JOINT_TYPES[[6, 7], [1, 1]] = PLANAR_WELD                  # arm 2's tip E end, object's grasp 1


def tip_pose(arm, q):
    """Planar pose (angle, (x, y)) in the hub (= world) frame of the E-end frame of arm 1 or 2's tip
    for its three joint angles q (3,): hub mount, then each link rotates by q_i and spans L_i along x."""
    angle, position = sc.HUB_MOUNTS[arm][0], np.array(sc.HUB_MOUNTS[arm][1][:2])
    for q_i, link_id in zip(q, (2, 3, 4) if arm == 1 else (5, 6, 7), strict=True):
        angle += q_i
        position = position + sc.LINKS[link_id][1] * np.array([np.cos(angle), np.sin(angle)])
    return angle, position


def grasp_pose():
    """(R (3, 3), p (3,)): grasp frame 1 in the object's design frame (= grasp frame 0), module doc."""
    a1, p1 = tip_pose(1, Q0[:3])
    a2, p2 = tip_pose(2, Q0[3:])
    c, s = np.cos(a1), np.sin(a1)
    d = np.array([[c, s], [-s, c]]) @ (p2 - p1)                   # R_world_tip1ᵀ (p2 − p1)
    angle = a2 - a1
    R = np.array([[np.cos(angle), -np.sin(angle), 0.0], [np.sin(angle), np.cos(angle), 0.0], [0.0, 0.0, 1.0]])
    return R, np.array([d[0], d[1], 0.0])


def object_inertia():
    """(mass, com (3,), inertia about the com (3, 3)) of the target in its design frame (module doc)."""
    _, p = grasp_pose()
    length = np.linalg.norm(p)
    u = p / length
    J = OBJECT_MASS * length ** 2 / 12.0 * (np.eye(3) - np.outer(u, u)) + OBJECT_J0 * np.eye(3)
    return OBJECT_MASS, 0.5 * p, J


def design() -> LinkDesign:
    """The 8-link `LinkDesign`: `sims.dual_arm_spacecraft.design()` (planar, fixed hub) plus the target,
    whose inboard joint is FIXED (welded to whichever tip is its parent)."""
    base = sc.design()
    R_grasp, p_grasp = grasp_pose()
    mass, com, J = object_inertia()
    R_obj = np.stack([np.eye(3), R_grasp, np.eye(3)])[None]
    p_obj = np.stack([np.zeros(3), p_grasp, np.zeros(3)])[None]
    return LinkDesign(np.concatenate([base.interface_rotation, R_obj]),
                      np.concatenate([base.interface_translation, p_obj]),
                      np.append(base.mass, mass), np.concatenate([base.com, com[None]]),
                      np.concatenate([base.inertia_com, J[None]]), (*base.joint_types, JointType.FIXED),
                      link_names=(*base.link_names, "target"))


def topology():
    """Host topology of the grasp: the tree after the cut, and the one recorded cut."""
    return topology_from_configuration(IDS, CONFIGURATION, max_cuts=1, cut_joint_types=CUT_JOINT_TYPES)


def model_and_closure(gravity=(0.0, 0.0, 0.0), dtype=jnp.float64):
    """(jaxsoa `Model` of the cut tree, `LoopClosure` of the cut), float64 by default."""
    top = topology()
    mdl = reconfigurable_model(design(), cut_interfaces(CONFIGURATION, top), IDS, gravity=gravity, dtype=dtype)
    return mdl, closure_from_topology(design(), top, dtype=dtype)


def control_torque():
    """(6,) constant joint torques of the seed test: 0.1 N·m on the ``ACTUATED`` joints, 0 on the free one."""
    return np.where(ACTUATED, TORQUE, 0.0)
