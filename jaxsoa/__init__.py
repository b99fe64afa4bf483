"""jaxsoa: GPU-batched, differentiable multibody dynamics with a traced topology."""

from jaxsoa.build import build_model
from jaxsoa.configuration import configuration_derivative, integrate, neutral, random_configuration
from jaxsoa.io.urdf import load_urdf
from jaxsoa.kinematics import (
    center_of_mass,
    centroidal_momentum,
    forward_kinematics,
    frame_jacobian,
    joint_jacobians,
    link_accelerations,
    link_velocities,
    spatial_momentum,
)
from jaxsoa.model import Model
from jaxsoa.recursive import aba, crba, generalized_gravity, nonlinear_effects, rnea
from jaxsoa.traversal import path_matrix, tree_traversal

__all__ = [
    "Model", "aba", "build_model", "center_of_mass", "centroidal_momentum",
    "configuration_derivative", "crba", "forward_kinematics", "frame_jacobian",
    "generalized_gravity", "integrate", "joint_jacobians", "link_accelerations", "link_velocities", "load_urdf",
    "neutral", "nonlinear_effects", "path_matrix", "random_configuration", "rnea",
    "spatial_momentum", "tree_traversal",
]
