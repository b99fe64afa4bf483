"""Shared tether test drivers: an RK4 rollout of the point-mass dumbbell with its energy bookkeeping."""

from functools import partial

import jax
import jax.numpy as jnp

from jaxsoa.integrators.steps import ode_rk4_step
from jaxsoa.systems.tether.reels import energy_rates, tether_dynamics


@partial(jax.jit, static_argnames=("n_steps",))
def simulate(params, inputs, state, dt, n_steps):
    """RK4 rollout of the dumbbell (`tether_dynamics`, point masses `inputs.end_mass`); also integrates
    W = ∫ (reel − Carnot − viscous + strain) dt by the same RK4 stages. Returns (final state, W)."""
    def rhs(t, xw):
        x, _ = xw
        return tether_dynamics(params, x, inputs), energy_rates(params, x, inputs).total

    def body(xw, _):
        return ode_rk4_step(rhs, 0.0, xw, dt), None

    (x, work), _ = jax.lax.scan(body, (state, jnp.zeros((), state.r.dtype)), None, length=n_steps)
    return x, work
