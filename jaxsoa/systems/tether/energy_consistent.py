"""Energy-consistent Galerkin form of the reeling tether: nodal material velocities as the state
(derivation in docs/tether.md §5.1), and the Galerkin right-hand side of either formulation.

The state keeps the node positions r_i at fixed s̄_i = i/n and, at the interior nodes, the material
velocities u_i; the end nodes keep the exit points' velocities v_e, and the material there moves at
u_e = v_e − w_e r̄'_e (`jaxsoa.systems.tether.fem.material_velocities`: the exit jump). The material
velocity u_h = Σ N_i u_i is continuous and lies in the test space, so testing the momentum balance
with u_h gives the kinetic-energy flux ½ ρ [ṡ |u|²] exactly, and with a constant the momentum flux:

    ṙ_i = u_i + w_i ḡ_i,  ḡ_i = (r̄'_{i−1} + r̄'_i)/2              (interior nodes; ṙ_e = v_e at the exits)
    ρ l Q u̇ = ρ l G u + F_int + F_ext + R,    G = S + B − ½ w' Q
    S_ij = ½ ∫ w (N_i N_j' − N_i' N_j) ds̄ (skew),   B_ij = ½ [w N_i N_j]₀¹ (the two ends)

Q = ∫ N_i N_j ds̄ (consistent; then G_ij = ∫ N_i w N_j' ds̄) or its row-sum lumping; for linear elements
S moves ±½ w̄_k u across element k (w̄_k = (w_k + w_{k+1})/2). At the exits u̇_e = a_e + b_e with
b_e = −(∂_t w)_e r̄'_e − w_e ∂_t r̄'_e, so the nodal unknowns A = (a_0, u̇_1 … u̇_{n−1}, a_n) solve
ρ l Q A = ρ l G u + F_int + F_ext − ρ l Q b + R: the tridiagonal system of the nodal form, with another
right-hand side. `jaxsoa.systems.tether.reels` adds the reels and the bodies.
"""

import jax.numpy as jnp

from jaxsoa.systems.tether import fem


def node_tangents(params: fem.TetherParams, state: fem.TetherState):
    """ḡ (n+1, 3): r̄' at the nodes, the mean of the two adjacent elements' r̄' at interior nodes and the
    exit element's at the ends (the choice that makes the strain-energy transport exact on a straight
    tether, docs/tether.md §5.1)."""
    d = params.n_elements * jnp.diff(state.r, axis=0)                            # r̄'_k
    return jnp.concatenate([d[:1], (d[:-1] + d[1:]) / 2, d[-1:]])


def node_rates(params: fem.TetherParams, state: fem.TetherState):
    """ṙ (n+1, 3): "energy_consistent" u_i + w_i ḡ_i at the interior nodes and the exit points' v_e at the
    ends; "nodal" the state's v."""
    if params.formulation == "nodal":
        return state.v
    w, _, _ = fem.transport_velocity(state, jnp.zeros_like(state.s))
    rates = state.v + w[:, None] * node_tangents(params, state)                  # ṙ = u + w ḡ
    return rates.at[jnp.array([0, -1])].set(state.v[jnp.array([0, -1])])


def convection_forces(params: fem.TetherParams, state: fem.TetherState, u):
    """ρ l G u (n+1, 3) for the material velocities u (n+1, 3): the skew part S (node k gets +½ w̄_k u_{k+1},
    node k+1 gets −½ w̄_k u_k), the end fluxes B (∓½ w_e u_e) and −½ w' Q u."""
    w, _, w_s = fem.transport_velocity(state, jnp.zeros_like(state.s))
    half_mean = (w[:-1] + w[1:])[:, None] / 4                                      # ½ w̄_k
    skew = jnp.zeros_like(u).at[:-1].add(half_mean * u[1:]).at[1:].add(-half_mean * u[:-1])
    ends = jnp.zeros_like(u).at[0].set(-0.5 * w[0] * u[0]).at[-1].set(0.5 * w[-1] * u[-1])
    l = state.s[1] - state.s[0]
    diag, off = fem.mass_bands(params, l)                                               # ρ l Q
    return params.rho * l * (skew + ends) - 0.5 * w_s * fem.mass_apply(diag, off, u)    # ρ l (S + B − ½ w' Q) u


def exit_correction(params: fem.TetherParams, state: fem.TetherState, s_ddot):
    """b (n+1, 3), zero at the interior nodes: u̇_e = a_e + b_e at the exits, b_e = −(∂_t w)_e r̄'_e − w_e ∂_t r̄'_e
    with ∂_t r̄'_0 = n (ṙ_1 − v_0), ∂_t r̄'_n = n (v_n − ṙ_{n−1}) (ṙ from `node_rates`). Affine in s̈ (2,):
    ∂b_0/∂s̈_P = −r̄'_0/l, ∂b_n/∂s̈_M = −r̄'_{n−1}/l."""
    n = params.n_elements
    w, w_t, _ = fem.transport_velocity(state, s_ddot)
    d = n * jnp.diff(state.r, axis=0)
    d_dot = n * jnp.diff(node_rates(params, state), axis=0)
    b = jnp.zeros_like(state.r)
    return b.at[0].set(-w_t[0] * d[0] - w[0] * d_dot[0]).at[-1].set(-w_t[-1] * d[-1] - w[-1] * d_dot[-1])


def reel_gain(params: fem.TetherParams, state: fem.TetherState):
    """∂ rhs/∂s̈ (2, n+1, 3) of `galerkin_forces` ("energy_consistent"): s̈_e enters only through b_e, so
    ∂(−ρ l Q b)/∂s̈_e = ρ l Q (r̄'_e / l at node e), since ∂b_e/∂s̈_e = −r̄'_e / l."""
    l = state.s[1] - state.s[0]
    d = params.n_elements * jnp.diff(state.r, axis=0)
    unit = jnp.zeros((2, *state.r.shape), state.r.dtype).at[0, 0].set(d[0] / l).at[1, -1].set(d[-1] / l)
    diag, off = fem.mass_bands(params, l)
    return jnp.stack([fem.mass_apply(diag, off, unit[0]), fem.mass_apply(diag, off, unit[1])])


def galerkin_forces(params: fem.TetherParams, state: fem.TetherState, s_ddot, external_accel=None):
    """Right-hand side (n+1, 3) of (ρ l Q) A = rhs + R for either formulation, and the element
    (eps, eps_dot, tau, tension) it used: "nodal" `jaxsoa.systems.tether.fem.nodal_forces` (A = r̈);
    "energy_consistent" F_int + F_ext + ρ l G u − ρ l Q b (A = (a_0, u̇_1 … u̇_{n−1}, a_n)). external_accel
    (n+1, 3): a per-point acceleration field at the nodes, F_ext = ρ l Q a_ext."""
    if params.formulation == "nodal":
        return fem.nodal_forces(params, state, s_ddot, external_accel)
    eps, eps_dot, tau = fem.element_strain(params, state)
    tension = fem.element_tension(params, eps, eps_dot)
    diag, off = fem.mass_bands(params, state.s[1] - state.s[0])
    u = fem.material_velocities(params, state)
    rhs = fem.internal_forces(tension, tau) + convection_forces(params, state, u)     # F_int + ρ l G u
    rhs = rhs - fem.mass_apply(diag, off, exit_correction(params, state, s_ddot))     # − ρ l Q b
    if external_accel is not None:
        rhs = rhs + fem.mass_apply(diag, off, external_accel)                          # + ρ l Q a_ext
    return rhs, (eps, eps_dot, tau, tension)
