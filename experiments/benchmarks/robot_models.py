"""The robots of `bench_batch_last` as jaxsoa and Pinocchio models with shared inputs (`ROBOT_NAMES`,
`jaxsoa_model`, `pinocchio_model`, `robot_inputs`): the example-robot-data URDFs of `bench_common.ROBOTS`
and `ball_humanoid`, a humanoid-shaped tree with spherical joints for the batch-last core's spherical
joints (`bench_batch_last --robots ball_humanoid`), built identically in both.

A torso on a free joint; a head on a ball joint; two legs and two arms, each a ball joint (hip /
shoulder), a revolute joint about the limb's y axis (knee / elbow) and a ball joint (ankle / wrist):
14 links, nq = 47, nv = 37 (Talos, reduced: 33 links, nv = 38). Links are numbered in depth-first
order, so jaxsoa's coordinate layout equals Pinocchio's (free joint: position, quaternion (x, y, z, w);
velocity [linear; angular] in the child frame; ball joint: quaternion, ω in the child frame).
"""

import numpy as np

import jaxsoa
from experiments.benchmarks import bench_common as bc
from jaxsoa.multibody.joints import JointType

F, S, R = JointType.FREE, JointType.SPHERICAL, JointType.REVOLUTE
_LIMBS = {"leg_l": (0.0, 0.1, -0.3), "leg_r": (0.0, -0.1, -0.3), "arm_l": (0.0, 0.2, 0.3), "arm_r": (0.0, -0.2, 0.3)}
_SEGMENT = 0.4                                         # m, hip-to-knee, knee-to-ankle (and the arms)


ROBOT_NAMES = (*bc.ROBOTS, "ball_humanoid")
"""Robots `bench_batch_last` takes: the URDF robots and the ball humanoid."""


def tree() -> dict:
    """jaxsoa's `build_model` fields (host arrays) of the ball humanoid."""
    parent, types, placement, mass, com = [-1, 0], [F, S], [(0.0, 0.0, 0.0), (0.0, 0.0, 0.35)], [20.0, 4.0], \
        [(0.0, 0.0, 0.1), (0.0, 0.0, 0.1)]
    for hip in _LIMBS.values():
        first = len(parent)
        parent += [0, first, first + 1]
        types += [S, R, S]
        placement += [hip, (0.0, 0.0, -_SEGMENT), (0.0, 0.0, -_SEGMENT)]
        mass += [5.0, 3.0, 1.0]
        com += [(0.0, 0.0, -0.2), (0.0, 0.0, -0.2), (0.05, 0.0, -0.03)]
    n = len(parent)
    inertia = np.array([np.diag([0.1 * m, 0.12 * m, 0.05 * m]) / 10 for m in mass])
    return dict(parent=np.asarray(parent), joint_types=types, joint_axis=np.tile([0.0, 1.0, 0.0], (n, 1)),
                placement_rotation=np.broadcast_to(np.eye(3), (n, 3, 3)), placement_translation=np.asarray(placement),
                mass=np.asarray(mass), com=np.asarray(com), inertia_com=inertia)


def _ball_humanoid(dtype):
    """The ball humanoid as a jaxsoa `Model` in `dtype`."""
    return jaxsoa.build_model(**tree(), dtype=dtype)


def _ball_humanoid_pinocchio():
    """The ball humanoid as a Pinocchio model (joints added in link order)."""
    import pinocchio as pin

    fields, pm = tree(), pin.Model()
    for k, joint_type in enumerate(fields["joint_types"]):
        joint = {F: pin.JointModelFreeFlyer, S: pin.JointModelSpherical}.get(joint_type)
        joint = joint() if joint else pin.JointModelRevoluteUnaligned(*fields["joint_axis"][k])
        placement = pin.SE3(fields["placement_rotation"][k], fields["placement_translation"][k])
        joint_id = pm.addJoint(int(fields["parent"][k]) + 1, joint, placement, f"joint{k}")
        pm.appendBodyToJoint(joint_id, pin.Inertia(float(fields["mass"][k]), fields["com"][k],
                                                   fields["inertia_com"][k]), pin.SE3.Identity())
    return pm


def _ball_humanoid_inputs(batch: int, seed: int = 0):
    """float64 (batch, ·) q, v, u of the ball humanoid: uniform [-1, 1] coordinates with each quaternion
    normalised, standard normal v and u (acceleration or torque)."""
    types = tree()["joint_types"]
    starts = np.cumsum([0] + [t.nq for t in types])
    nq, nv = int(starts[-1]), sum(t.nv for t in types)
    rng = np.random.default_rng(seed)
    q = rng.uniform(-1.0, 1.0, (batch, nq))
    for start, joint_type in zip(starts, types, strict=False):
        if joint_type in (F, S):
            columns = slice(start + 3, start + 7) if joint_type == F else slice(start, start + 4)
            q[:, columns] /= np.linalg.norm(q[:, columns], axis=1, keepdims=True)
    return q, rng.normal(size=(batch, nv)), rng.normal(size=(batch, nv))


def pinocchio_model(name):
    """The Pinocchio model of a robot of `ROBOT_NAMES`."""
    return _ball_humanoid_pinocchio() if name == "ball_humanoid" else bc.pin_model(name)


def jaxsoa_model(name, dtype):
    """The jaxsoa model in `dtype` of a robot of `ROBOT_NAMES`."""
    if name == "ball_humanoid":
        return _ball_humanoid(dtype)
    return jaxsoa.load_urdf(str(jaxsoa.io.example_robot_urdf(name)), floating_base=bc.ROBOTS[name][1], dtype=dtype)


def robot_inputs(name, nq, nv, batch):
    """float64 (q, v, u) (batch, ·) in the layout jaxsoa and Pinocchio share; unit quaternions."""
    return _ball_humanoid_inputs(batch) if name == "ball_humanoid" else \
        bc.make_inputs(nq, nv, batch, floating=bc.ROBOTS[name][1])
