"""jaxsoa: GPU-batched, differentiable multibody dynamics with a traced topology."""

from jaxsoa.build import build_model
from jaxsoa.configuration import configuration_derivative, integrate, neutral, random_configuration
from jaxsoa.constrained_dynamics import (
    constrained_forward_dynamics,
    constrained_inverse_dynamics,
    constrained_rollout,
    project_state,
    project_velocity,
)
from jaxsoa.constraints import (
    LoopClosure,
    check_closure,
    constraint_bias,
    constraint_error,
    constraint_jacobian,
    diagnose_closure,
    loop_closure,
    stack_closures,
)
from jaxsoa.control import computed_torque, critically_damped_gains, free_floating_computed_torque
from jaxsoa.floating import (
    free_floating_aba,
    free_floating_rnea,
    from_virtual_base_state,
    generalized_jacobian,
    to_virtual_base_state,
    with_virtual_base,
)
from jaxsoa.integrators import ode_rk4_step, rk4_step, rollout, semi_implicit_euler_step
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
from jaxsoa.operators import (
    forward_dynamics_innovations,
    forward_dynamics_operator,
    inverse_dynamics_operator,
    mass_matrix_operator,
    transfer_operator,
    transfer_operator_virtual,
)
from jaxsoa.recursive import aba, composite_inertias, crba, generalized_gravity, nonlinear_effects, rnea
from jaxsoa.reel import (
    EndCoupling,
    TetherInputs,
    end_coupling,
    energy_rates,
    system_energy,
    system_momentum,
    tether_dynamics,
    tether_inputs,
)
from jaxsoa.tether import TetherParams, TetherState, straight_state, tether_params
from jaxsoa.topology import topology_from_configuration, topology_from_configuration_traced
from jaxsoa.traversal import path_matrix, tree_traversal

__all__ = [
    "EndCoupling",
    "LoopClosure",
    "Model",
    "TetherInputs",
    "TetherParams",
    "TetherState",
    "aba",
    "build_model",
    "center_of_mass",
    "centroidal_momentum",
    "check_closure",
    "composite_inertias",
    "computed_torque",
    "configuration_derivative",
    "constrained_forward_dynamics",
    "constrained_inverse_dynamics",
    "constrained_rollout",
    "constraint_bias",
    "constraint_error",
    "constraint_jacobian",
    "crba",
    "critically_damped_gains",
    "diagnose_closure",
    "end_coupling",
    "energy_rates",
    "forward_dynamics_innovations",
    "forward_dynamics_operator",
    "forward_kinematics",
    "frame_jacobian",
    "free_floating_aba",
    "free_floating_computed_torque",
    "free_floating_rnea",
    "from_virtual_base_state",
    "generalized_gravity",
    "generalized_jacobian",
    "integrate",
    "inverse_dynamics_operator",
    "joint_jacobians",
    "link_accelerations",
    "link_velocities",
    "load_urdf",
    "loop_closure",
    "mass_matrix_operator",
    "neutral",
    "nonlinear_effects",
    "ode_rk4_step",
    "path_matrix",
    "project_state",
    "project_velocity",
    "random_configuration",
    "rk4_step",
    "rnea",
    "rollout",
    "semi_implicit_euler_step",
    "spatial_momentum",
    "stack_closures",
    "straight_state",
    "system_energy",
    "system_momentum",
    "tether_dynamics",
    "tether_inputs",
    "tether_params",
    "to_virtual_base_state",
    "topology_from_configuration",
    "topology_from_configuration_traced",
    "transfer_operator",
    "transfer_operator_virtual",
    "tree_traversal",
    "with_virtual_base",
]
