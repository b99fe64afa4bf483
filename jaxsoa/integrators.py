"""Time integration of the joint-space dynamics: RK4 and semi-implicit Euler on the
configuration manifold (quaternions stay unit through `jaxsoa.integrate`), and `lax.scan`
rollouts that vmap and differentiate.

State x = (q (nq,), v (nv,)); a controller is `tau = control(t, q, v)` (nv,).
"""

import jax
import jax.numpy as jnp

from jaxsoa.configuration import integrate
from jaxsoa.model import Model
from jaxsoa.recursive import aba


def rk4_step(model: Model, q, v, tau, dt):
    """One classical Runge–Kutta step with τ held over the step. Stages are taken in the
    tangent space: q_i = q ⊕ (dt c_i v_i), and q_{n+1} = q ⊕ dt (v₁ + 2v₂ + 2v₃ + v₄)/6."""
    def accel(dv, dq_tangent):
        return aba(model, integrate(model, q, dq_tangent), v + dv, tau)

    zero = jnp.zeros_like(v)
    a1 = accel(zero, zero)
    v1 = v
    a2 = accel(0.5 * dt * a1, 0.5 * dt * v1)
    v2 = v + 0.5 * dt * a1
    a3 = accel(0.5 * dt * a2, 0.5 * dt * v2)
    v3 = v + 0.5 * dt * a2
    a4 = accel(dt * a3, dt * v3)
    v4 = v + dt * a3
    q_next = integrate(model, q, dt * (v1 + 2 * v2 + 2 * v3 + v4) / 6)
    return q_next, v + dt * (a1 + 2 * a2 + 2 * a3 + a4) / 6


def semi_implicit_euler_step(model: Model, q, v, tau, dt):
    """v_{n+1} = v_n + dt ABA(q_n, v_n, τ);  q_{n+1} = q_n ⊕ dt v_{n+1} (symplectic Euler)."""
    v_next = v + dt * aba(model, q, v, tau)
    return integrate(model, q, dt * v_next), v_next


def rollout(model: Model, q0, v0, control, dt, n_steps, step=rk4_step, checkpoint=False):
    """Simulate `n_steps` steps with `lax.scan`. Returns trajectories q (n_steps+1, nq) and
    v (n_steps+1, nv), initial state included. `checkpoint=True` rematerialises each step in
    the backward pass (memory O(1) per step for long differentiable horizons)."""
    def body(state, k):
        q, v = state
        tau = control(k * dt, q, v)
        q_next, v_next = step(model, q, v, tau, dt)
        return (q_next, v_next), (q_next, v_next)

    body = jax.checkpoint(body) if checkpoint else body
    _, (qs, vs) = jax.lax.scan(body, (q0, v0), jnp.arange(n_steps, dtype=v0.dtype))
    return jnp.concatenate([q0[None], qs]), jnp.concatenate([v0[None], vs])
