"""Time integration: one Runge–Kutta scheme written as a Butcher tableau (RK4), semi-implicit Euler,
and the one rollout driver (checkpointing, control at stages, topology and constraint schedules)."""

from jaxsoa.integrators import steps
from jaxsoa.integrators.rollout import (  # the function `rollout` shadows the module's name here
    TopologySchedule,
    Trajectory,
    rollout,
    rollout_constrained,
    rollout_steps,
    rollout_switching,
)
from jaxsoa.integrators.steps import (
    RK4,
    ButcherTableau,
    ode_rk4_step,
    rk4_step,
    semi_implicit_euler_step,
)

__all__ = [
    "RK4",
    "ButcherTableau",
    "TopologySchedule",
    "Trajectory",
    "ode_rk4_step",
    "rk4_step",
    "rollout",
    "rollout_constrained",
    "rollout_steps",
    "rollout_switching",
    "semi_implicit_euler_step",
    "steps",
]
