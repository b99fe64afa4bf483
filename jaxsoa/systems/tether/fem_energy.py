"""Energies, dissipation rate and momenta of a tether's deployed segment on the normalised coordinate
(`jaxsoa.systems.tether.fem`; derivation in docs/tether.md §2–3): the kinetic energy in both formulations
("nodal": nodes are not material points, so the transport velocity w enters; "energy_consistent": ½ uᵀ M u of the
material velocities), the elastic energy of the taut elements, the Kelvin–Voigt dissipation rate, and the linear and
angular momentum.
"""

import jax.numpy as jnp

from jaxsoa.systems.tether.fem import (
    TetherParams,
    TetherState,
    element_strain,
    element_tension,
    element_weights,
    mass_apply,
    mass_bands,
    material_velocities,
    transport_velocity,
)


def _transport_integrals(params: TetherParams, state: TetherState, field):
    """Integrals with the transport velocity: (∫ w r̄' ds̄ (3,), ∫ w² |r̄'|² ds̄, r̄' (n, 3), and per element
    ∫_elem w field ds̄ (n, 3) for a nodal field (n+1, 3) interpolated linearly)."""
    n = params.n_elements
    w, _, _ = transport_velocity(state, jnp.zeros_like(state.s))
    d = n * jnp.diff(state.r, axis=0)
    w_mean = (w[:-1] + w[1:]) / 2 / n                                                   # ∫_elem w ds̄
    w2 = (w[:-1] ** 2 + w[:-1] * w[1:] + w[1:] ** 2) / 3 / n                            # ∫_elem w² ds̄
    left, right = element_weights(w, 1.0 / n)
    w_field = left[:, None] * field[:-1] + right[:, None] * field[1:]                    # ∫_elem w field ds̄
    return jnp.sum(w_mean[:, None] * d, axis=0), jnp.sum(w2 * jnp.sum(d * d, axis=1)), d, w_field


def tether_kinetic_energy(params: TetherParams, state: TetherState):
    """"nodal": ½ ρ l ∫ |ṙ̄ − w r̄'|² ds̄ = ½ ṙᵀ M ṙ − ρ l ∫ w ṙ̄·r̄' + ½ ρ l ∫ w² |r̄'|²; "energy_consistent":
    ½ uᵀ M u (M consistent or lumped)."""
    l = state.s[1] - state.s[0]
    if params.formulation == "energy_consistent":
        u = material_velocities(params, state)
        return 0.5 * jnp.sum(u * mass_apply(*mass_bands(params, l), u))            # ½ uᵀ M u
    _, w2d2, d, w_v = _transport_integrals(params, state, state.v)
    vMv = jnp.sum(state.v * mass_apply(*mass_bands(params, l), state.v))
    return 0.5 * vMv + params.rho * l * (0.5 * w2d2 - jnp.sum(w_v * d))


def elastic_energy(params: TetherParams, state: TetherState):
    """U = Σ_k ½ EA max(ε_k, 0)² l/n (a slack element stores nothing)."""
    eps, _, _ = element_strain(params, state)
    l = state.s[1] - state.s[0]
    return 0.5 * params.EA * jnp.sum(jnp.maximum(eps, 0) ** 2) * l / params.n_elements


def viscous_dissipation_rate(params: TetherParams, state: TetherState):
    """∫ (N − EA max(ε, 0)) ε̇ ds ≥ 0 for a taut Kelvin–Voigt tether (= EA α ε̇² per unit length)."""
    eps, eps_dot, _ = element_strain(params, state)
    tension = element_tension(params, eps, eps_dot)
    l = state.s[1] - state.s[0]
    return jnp.sum((tension - params.EA * jnp.maximum(eps, 0)) * eps_dot) * l / params.n_elements


def tether_momentum(params: TetherParams, state: TetherState):
    """Linear and angular momentum (about the origin) of the deployed material, each (3,): "nodal"
    ρ l ∫ (ṙ̄ − w r̄') ds̄ and ρ l ∫ r̄ × (ṙ̄ − w r̄') ds̄; "energy_consistent" Σ_i (M u)_i, Σ_i r_i × (M u)_i."""
    l = state.s[1] - state.s[0]
    if params.formulation == "energy_consistent":
        Mu = mass_apply(*mass_bands(params, l), material_velocities(params, state))
        return jnp.sum(Mu, axis=0), jnp.sum(jnp.cross(state.r, Mu), axis=0)
    wd, _, d, w_r = _transport_integrals(params, state, state.r)
    Mv = mass_apply(*mass_bands(params, l), state.v)
    linear = jnp.sum(Mv, axis=0) - params.rho * l * wd
    angular = jnp.sum(jnp.cross(state.r, Mv), axis=0) - params.rho * l * jnp.sum(jnp.cross(w_r, d), axis=0)
    return linear, angular
