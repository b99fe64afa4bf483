"""Loop closures (cut joints) and the constrained forward/inverse dynamics of closed-loop systems."""

from jaxsoa.constraints import closure, dynamics
from jaxsoa.constraints.closure import (
    CUT_TYPES,
    ClosureDiagnosis,
    ClosureTerms,
    LoopClosure,
    check_closure,
    closure_terms,
    constraint_bias,
    constraint_error,
    constraint_jacobian,
    diagnose_closure,
    loop_closure,
    stack_closures,
)
from jaxsoa.constraints.dynamics import (
    ConstrainedDynamics,
    ConstrainedInverseDynamics,
    forward_dynamics_constrained,
    inverse_dynamics_constrained,
    inverse_mass_columns,
    project_state,
    project_velocity,
)

__all__ = [
    "CUT_TYPES",
    "ClosureDiagnosis",
    "ClosureTerms",
    "ConstrainedDynamics",
    "ConstrainedInverseDynamics",
    "LoopClosure",
    "check_closure",
    "closure",
    "closure_terms",
    "constraint_bias",
    "constraint_error",
    "constraint_jacobian",
    "diagnose_closure",
    "dynamics",
    "forward_dynamics_constrained",
    "inverse_dynamics_constrained",
    "inverse_mass_columns",
    "loop_closure",
    "project_state",
    "project_velocity",
    "stack_closures",
]
