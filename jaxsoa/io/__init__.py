"""Model loading: URDF (`urdf`) and the example-robot-data URDFs (`robots`)."""

from jaxsoa.io import robots, urdf
from jaxsoa.io.robots import ROBOTS, example_robot_data_dir, example_robot_urdf
from jaxsoa.io.urdf import load_urdf

__all__ = ["ROBOTS", "example_robot_data_dir", "example_robot_urdf", "load_urdf", "robots", "urdf"]
