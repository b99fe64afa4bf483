"""Time integration of the joint-space dynamics: RK4 and semi-implicit Euler on the
configuration manifold (quaternions stay unit through `jaxsoa.integrate`), and `lax.scan`
rollouts that vmap and differentiate.

State x = (q (nq,), v (nv,)); a controller is `tau = control(t, q, v)` (nv,).
"""

import jax
import jax.numpy as jnp

from jaxsoa import joints
from jaxsoa.configuration import integrate
from jaxsoa.model import Model
from jaxsoa.recursive import aba


def dexp_inv(model: Model, delta, v):
    """Rate of the tangent coordinate δ (q(t) = q ⊕ δ(t)) for body velocity v:
    δ̇ = v + ½ [δ, v] + 1/12 [δ, [δ, v]] (dexp⁻¹ truncated; the next term is O(|δ|⁴)), with the
    so(3) bracket for spherical joints and the se(3) bracket for free joints ([v; ω] layout);
    identity for 1-DoF joints. (nv,), (nv,) -> (nv,)."""
    out = v
    for joint_type in (joints.SPHERICAL, joints.FREE):
        vcols = model.v_columns(joint_type)
        if vcols.size == 0:
            continue
        d, x = delta[vcols], v[vcols]
        if joint_type == joints.SPHERICAL:
            def bracket(y, d=d):
                return jnp.cross(d, y)
        else:
            def bracket(y, d=d):                # [(v₁, ω₁), (v₂, ω₂)] = (ω₁×v₂ − ω₂×v₁, ω₁×ω₂)
                return jnp.concatenate([jnp.cross(d[:, 3:], y[:, :3]) + jnp.cross(d[:, :3], y[:, 3:]),
                                        jnp.cross(d[:, 3:], y[:, 3:])], axis=1)
        once = bracket(x)
        out = out.at[vcols].set(x + 0.5 * once + bracket(once) / 12)
    return out


def _force_at(tau):
    """τ as a function of (stage time offset, q, v): a constant array is held over the step."""
    return tau if callable(tau) else (lambda offset, q, v: tau)


def rk4_step(model: Model, q, v, tau, dt, dynamics=aba):
    """One classical Runge–Kutta step on the configuration manifold (Runge–Kutta–Munthe-Kaas):
    stages q_i = q ⊕ δ_i with the tangent coordinates δ integrated as δ̇ = dexp⁻¹_δ(v), so the
    step is 4th order for spherical and free joints too (integrating δ̇ = v instead is only 2nd
    order once ω changes direction). `tau` is an array held over the step (zero-order hold) or a
    function `tau(offset, q_i, v_i)` evaluated at each stage (offset 0, dt/2, dt/2, dt).
    `dynamics(model, q, v, tau) -> q̈` is the forward dynamics (ABA; e.g. constrained dynamics)."""
    force = _force_at(tau)

    def accel(offset, dv, dq_tangent):
        q_i, v_i = integrate(model, q, dq_tangent), v + dv
        return dynamics(model, q_i, v_i, force(offset, q_i, v_i))

    zero = jnp.zeros_like(v)
    a1 = accel(0.0, zero, zero)
    k1 = v
    a2 = accel(0.5 * dt, 0.5 * dt * a1, 0.5 * dt * k1)
    k2 = dexp_inv(model, 0.5 * dt * k1, v + 0.5 * dt * a1)
    a3 = accel(0.5 * dt, 0.5 * dt * a2, 0.5 * dt * k2)
    k3 = dexp_inv(model, 0.5 * dt * k2, v + 0.5 * dt * a2)
    a4 = accel(dt, dt * a3, dt * k3)
    k4 = dexp_inv(model, dt * k3, v + dt * a3)
    q_next = integrate(model, q, dt * (k1 + 2 * k2 + 2 * k3 + k4) / 6)
    return q_next, v + dt * (a1 + 2 * a2 + 2 * a3 + a4) / 6


def semi_implicit_euler_step(model: Model, q, v, tau, dt):
    """v_{n+1} = v_n + dt ABA(q_n, v_n, τ);  q_{n+1} = q_n ⊕ dt v_{n+1} (symplectic Euler).
    `tau` as in `rk4_step` (a function is evaluated once, at the start of the step)."""
    v_next = v + dt * aba(model, q, v, _force_at(tau)(0.0, q, v))
    return integrate(model, q, dt * v_next), v_next


def rollout(model: Model, q0, v0, control, dt, n_steps, step=rk4_step, checkpoint=False,
            control_at_stages=False):
    """Simulate `n_steps` steps with `lax.scan`. Returns trajectories q (n_steps+1, nq) and
    v (n_steps+1, nv), initial state included. `control(t, q, v) -> τ (nv,)` is sampled once per
    step and held (a digital controller), or with `control_at_stages=True` evaluated at every
    integrator stage (the continuous closed loop, integrated to the step's full order).
    `checkpoint=True` rematerialises each step in the backward pass (memory O(1) per step for
    long differentiable horizons); a `jax.checkpoint_policies` policy (e.g.
    `jax.checkpoint_policies.nothing_saveable`) checkpoints each step with that policy instead."""
    def body(state, k):
        q, v = state
        t = k * dt
        if control_at_stages:
            tau = lambda offset, q_i, v_i: control(t + offset, q_i, v_i)   # noqa: E731
        else:
            tau = control(t, q, v)
        q_next, v_next = step(model, q, v, tau, dt)
        return (q_next, v_next), (q_next, v_next)

    if callable(checkpoint):
        body = jax.checkpoint(body, policy=checkpoint)
    elif checkpoint:
        body = jax.checkpoint(body)
    _, (qs, vs) = jax.lax.scan(body, (q0, v0), jnp.arange(n_steps, dtype=v0.dtype))
    return jnp.concatenate([q0[None], qs]), jnp.concatenate([v0[None], vs])


def ode_rk4_step(f, t, x, dt):
    """One classical RK4 step of x' = f(t, x) for any PyTree x (f returns a PyTree of the same
    structure): for flat states without a manifold, e.g. a tether's nodes (`jaxsoa.reel`)."""
    def axpy(a, y, k):
        return jax.tree_util.tree_map(lambda yi, ki: yi + a * ki, y, k)

    k1 = f(t, x)
    k2 = f(t + dt / 2, axpy(dt / 2, x, k1))
    k3 = f(t + dt / 2, axpy(dt / 2, x, k2))
    k4 = f(t + dt, axpy(dt, x, k3))
    return jax.tree_util.tree_map(lambda xi, a, b, c, d: xi + dt / 6 * (a + 2 * b + 2 * c + d), x, k1, k2, k3, k4)
