"""jaxsoa: GPU-batched, differentiable multibody dynamics with a traced topology.

The top level holds the core engine names; each layer is also a namespace (`jaxsoa.spatial`,
`jaxsoa.multibody`, `jaxsoa.algorithms`, `jaxsoa.constraints`, `jaxsoa.topology`,
`jaxsoa.integrators`, `jaxsoa.systems`, `jaxsoa.workflows`, `jaxsoa.io`); the layers and the import
rule are written down in the docs folder (the architecture page).
"""

from jaxsoa import (
    algorithms,
    constraints,
    integrators,
    io,
    multibody,
    spatial,
    systems,
    topology,
    workflows,
)
from jaxsoa.algorithms.centroidal import (
    centroidal_inertia,
    centroidal_momentum_matrix,
    centroidal_momentum_matrix_time_variation,
)
from jaxsoa.algorithms.derivatives import aba_derivatives, rnea_derivatives
from jaxsoa.algorithms.dynamics import aba, composite_inertias, crba, generalized_gravity, nonlinear_effects, rnea
from jaxsoa.algorithms.dynamics_matrices import coriolis_matrix, minverse
from jaxsoa.algorithms.energy import center_of_mass_jacobian, kinetic_energy, potential_energy
from jaxsoa.algorithms.frames import frame_acceleration, frame_classical_acceleration, frame_velocity
from jaxsoa.algorithms.free_floating import aba_free_floating, generalized_jacobian, rnea_free_floating
from jaxsoa.algorithms.jacobian_derivatives import joint_jacobians_time_variation
from jaxsoa.algorithms.kinematics import (
    center_of_mass,
    centroidal_momentum,
    forward_kinematics,
    frame_jacobian,
    joint_jacobians,
    link_accelerations,
    link_velocities,
    spatial_momentum,
)
from jaxsoa.algorithms.operators import (
    forward_dynamics_innovations,
    forward_dynamics_operator,
    inverse_dynamics_operator,
    mass_matrix_operator,
    transfer_operator,
    transfer_operator_virtual,
)
from jaxsoa.algorithms.virtual_base import from_virtual_base_state, to_virtual_base_state, with_virtual_base
from jaxsoa.constraints import (
    LoopClosure,
    check_closure,
    constraint_bias,
    constraint_error,
    constraint_jacobian,
    diagnose_closure,
    forward_dynamics_constrained,
    inverse_dynamics_constrained,
    loop_closure,
    project_state,
    project_velocity,
    stack_closures,
)
from jaxsoa.integrators.rollout import Trajectory, rollout, rollout_constrained, rollout_switching
from jaxsoa.integrators.steps import ode_rk4_step, rk4_step, semi_implicit_euler_step
from jaxsoa.io.mjcf import load_mjcf
from jaxsoa.io.urdf import load_urdf
from jaxsoa.multibody.build import build_model
from jaxsoa.multibody.config_space import (
    configuration_derivative,
    difference,
    integrate,
    interpolate,
    neutral,
    random_configuration,
)
from jaxsoa.multibody.joints import JointType
from jaxsoa.multibody.model import Model, stack_models
from jaxsoa.multibody.traversal import path_matrix, tree_traversal
from jaxsoa.topology.configuration_parameters import topology_from_configuration, topology_from_configuration_traced
from jaxsoa.workflows.control import computed_torque, computed_torque_free_floating, critically_damped_gains

__all__ = [
    "JointType",
    "LoopClosure",
    "Model",
    "Trajectory",
    "aba",
    "aba_derivatives",
    "aba_free_floating",
    "algorithms",
    "build_model",
    "center_of_mass",
    "center_of_mass_jacobian",
    "centroidal_inertia",
    "centroidal_momentum",
    "centroidal_momentum_matrix",
    "centroidal_momentum_matrix_time_variation",
    "check_closure",
    "composite_inertias",
    "computed_torque",
    "computed_torque_free_floating",
    "configuration_derivative",
    "constraint_bias",
    "constraint_error",
    "constraint_jacobian",
    "constraints",
    "coriolis_matrix",
    "crba",
    "critically_damped_gains",
    "diagnose_closure",
    "difference",
    "forward_dynamics_constrained",
    "forward_dynamics_innovations",
    "forward_dynamics_operator",
    "forward_kinematics",
    "frame_acceleration",
    "frame_classical_acceleration",
    "frame_jacobian",
    "frame_velocity",
    "from_virtual_base_state",
    "generalized_gravity",
    "generalized_jacobian",
    "integrate",
    "integrators",
    "interpolate",
    "inverse_dynamics_constrained",
    "inverse_dynamics_operator",
    "io",
    "joint_jacobians",
    "joint_jacobians_time_variation",
    "kinetic_energy",
    "link_accelerations",
    "link_velocities",
    "load_mjcf",
    "load_urdf",
    "loop_closure",
    "mass_matrix_operator",
    "minverse",
    "multibody",
    "neutral",
    "nonlinear_effects",
    "ode_rk4_step",
    "path_matrix",
    "potential_energy",
    "project_state",
    "project_velocity",
    "random_configuration",
    "rk4_step",
    "rnea",
    "rnea_derivatives",
    "rnea_free_floating",
    "rollout",
    "rollout_constrained",
    "rollout_switching",
    "semi_implicit_euler_step",
    "spatial",
    "spatial_momentum",
    "stack_closures",
    "stack_models",
    "systems",
    "to_virtual_base_state",
    "topology",
    "topology_from_configuration",
    "topology_from_configuration_traced",
    "transfer_operator",
    "transfer_operator_virtual",
    "tree_traversal",
    "with_virtual_base",
    "workflows",
]
