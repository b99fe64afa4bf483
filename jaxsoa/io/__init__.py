"""Model loading: URDF (`urdf`), MJCF through MuJoCo's compiler (`mjcf`, with the MuJoCo state
maps of `mjcf_state`) and the example-robot-data URDFs (`robots`)."""

from jaxsoa.io import mjcf, mjcf_state, robots, urdf
from jaxsoa.io.mjcf import load_mjcf, mjcf_joint_properties
from jaxsoa.io.mjcf_state import (
    JointProperties,
    acceleration_from_mujoco,
    acceleration_to_mujoco,
    force_from_mujoco,
    force_to_mujoco,
    from_mujoco,
    passive_force,
    to_mujoco,
)
from jaxsoa.io.robots import ROBOTS, example_robot_data_dir, example_robot_urdf
from jaxsoa.io.urdf import load_urdf

__all__ = [
    "ROBOTS",
    "JointProperties",
    "acceleration_from_mujoco",
    "acceleration_to_mujoco",
    "example_robot_data_dir",
    "example_robot_urdf",
    "force_from_mujoco",
    "force_to_mujoco",
    "from_mujoco",
    "load_mjcf",
    "load_urdf",
    "mjcf",
    "mjcf_joint_properties",
    "mjcf_state",
    "passive_force",
    "robots",
    "to_mujoco",
    "urdf",
]
