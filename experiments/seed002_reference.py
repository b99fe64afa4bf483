"""Independent references for the seed-002 reproduction: the RK4 scheme of `jaxsoa.rk4_step`
written once for numpy and jax, Pinocchio rollouts with an exact dexp⁻¹ (`pin.dIntegrate`), and
Pinocchio's own route for the free-floating mixed inverse problem."""

import jax
import jax.numpy as jnp
import numpy as np
import pinocchio as pin

import jaxsoa


def rk4(accel, integrate, rate, q, v, dt):
    """jaxsoa's RK4 step (Runge–Kutta–Munthe-Kaas), written once for numpy and jax: stage i at
    (q ⊕ δ_i, v + c_i dt a_{i−1}) with δ_i = c_i dt k_{i−1} and k_i = rate(q, δ_i, v_i) = dexp⁻¹_δ(v_i);
    accel(c, q, v) is evaluated at stage time t + c dt."""
    rates, accels = [], []
    for c in (0.0, 0.5, 0.5, 1.0):
        vi = v + c * dt * accels[-1] if accels else v
        delta = c * dt * rates[-1] if rates else None
        rates.append(rate(q, delta, vi) if rates else vi)
        accels.append(accel(c, integrate(q, delta) if delta is not None else q, vi))
    mean = [(xs[0] + 2 * xs[1] + 2 * xs[2] + xs[3]) / 6 for xs in (rates, accels)]
    return integrate(q, dt * mean[0]), v + dt * mean[1]


def pin_rollout(pm, q0, v0, accel, n, dt):
    """Pinocchio reference trajectory (n + 1 states), accel(t, c, q, v) -> (nv,); dexp⁻¹ is
    exact: δ̇ = J⁻¹ v with J = ∂(q ⊕ δ)/∂δ from `pin.dIntegrate`."""
    def rate(q, delta, v):
        return np.linalg.solve(pin.dIntegrate(pm, q, delta, pin.ArgumentPosition.ARG1), v)

    states = [(np.asarray(q0, float), np.asarray(v0, float))]
    for k in range(n):
        states.append(rk4(lambda c, q, v, t=k * dt: accel(t, c, q, v), lambda q, dq: pin.integrate(pm, q, dq), rate,
                          *states[-1], dt))
    return tuple(map(np.array, zip(*states, strict=True)))


def jax_dexp_inv(model):
    """dexp⁻¹ from jaxsoa's public API: (∂(q ⊕ δ)/∂δ) δ̇ = q̇(q ⊕ δ, v), solved by least squares."""
    def rate(q, delta, v):
        D = jax.jacfwd(lambda d: jaxsoa.integrate(model, q, d))(delta)
        return jnp.linalg.lstsq(D, jaxsoa.configuration_derivative(model, jaxsoa.integrate(model, q, delta), v))[0]
    return rate


def pin_free_floating(pm, pd, q, v, qdd_j):
    """Pinocchio's route for the free-floating mixed problem: (a_hub, τ_joints, arm-on-hub wrench
    [moment; force], hub frame)."""
    M = pin.crba(pm, pd, q)
    M = np.triu(M) + np.triu(M, 1).T
    h = pin.nonLinearEffects(pm, pd, q, v)
    a_b = -np.linalg.solve(M[:6, :6], M[:6, 6:] @ qdd_j + h[:6])
    tau_j = M[6:, :6] @ a_b + M[6:, 6:] @ qdd_j + h[6:]
    pin.rnea(pm, pd, q, v, np.r_[a_b, qdd_j])
    wrench = -pd.liMi[2].act(pd.f[2]).vector                 # [f; n]: minus the hub's force on the arm
    return a_b, tau_j, np.r_[wrench[3:], wrench[:3]]
