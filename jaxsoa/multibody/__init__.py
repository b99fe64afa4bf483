"""The model and its derived topology: `Model`, `JointType`, host builders and checks, the
traversal, configuration space."""

from jaxsoa.multibody import build, checks, config_space, joints, model, traversal
from jaxsoa.multibody.build import STANDARD_GRAVITY, build_model, validate_inertia, validate_parent
from jaxsoa.multibody.checks import check_configuration, check_model
from jaxsoa.multibody.config_space import (
    configuration_derivative,
    dexp_inv,
    difference,
    integrate,
    interpolate,
    neutral,
    quaternion_columns,
    random_configuration,
    unit_complex_columns,
)
from jaxsoa.multibody.joints import JointType, joint_transform, motion_subspace
from jaxsoa.multibody.model import Model, link_inertia, link_placement, model_batch, stack_models
from jaxsoa.multibody.traversal import Traversal, inward, link_depth, outward, path_matrix, tree_traversal

__all__ = [
    "STANDARD_GRAVITY",
    "JointType",
    "Model",
    "Traversal",
    "build",
    "build_model",
    "check_configuration",
    "check_model",
    "checks",
    "config_space",
    "configuration_derivative",
    "dexp_inv",
    "difference",
    "integrate",
    "interpolate",
    "inward",
    "joint_transform",
    "joints",
    "link_depth",
    "link_inertia",
    "link_placement",
    "model",
    "model_batch",
    "motion_subspace",
    "neutral",
    "outward",
    "path_matrix",
    "quaternion_columns",
    "random_configuration",
    "stack_models",
    "traversal",
    "tree_traversal",
    "unit_complex_columns",
    "validate_inertia",
    "validate_parent",
]
