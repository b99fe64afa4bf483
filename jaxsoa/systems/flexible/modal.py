"""Assumed-modes (floating-frame) model of a hub carrying a flexible cantilever, the independent
reference for the rigid-finite-element links of `jaxsoa.systems.flexible.rfem` (docs/flexible.md).

A rigid hub (inertia J_h about z, angle θ) carries, at radius r, a uniform Euler–Bernoulli beam along
the hub's x axis bending in the x–y plane. Transverse deflection w(x, t) = Σ φ_i(x) η_i with the
admissible polynomials φ_i = (x/L)^(i+1), i = 1 … m (Rayleigh–Ritz). With the foreshortening of the
inextensible beam, u(x) = −½ ∫₀ˣ w'² dξ, kept to second order in η:

    T = ½ θ̇² (J₀ + ηᵀ A η) + θ̇ bᵀ η̇ + ½ η̇ᵀ M_ee η̇,   V = ½ ηᵀ K η,   A = M_ee − s K_G
    J₀ = J_h + ∫ ρA (r + x)² dx,  b = ∫ ρA (r + x) φ dx,  M_ee = ∫ ρA φ φᵀ dx,  K = ∫ EI φ'' φ''ᵀ dx,
    K_G = ∫₀ᴸ [∫ₓᴸ ρA (r + ξ) dξ] φ' φ'ᵀ dx       (centrifugal / geometric stiffening)

s = 1 with geometric stiffening (Kane–Ryan–Banerjee's consistent model), s = 0 for the classical
linear model, whose stiffness K − θ̇² M_ee softens and diverges once θ̇ exceeds the first
cantilever frequency. Lagrange's equations, q = (θ, η), v = (θ̇, η̇):

    (J₀ + ηᵀAη) θ̈ + bᵀ η̈ + 2 θ̇ ηᵀ A η̇ = τ_hub
    b θ̈ + M_ee η̈ + (K − θ̇² A) η + C η̇ = 0          (C = β K, Kelvin–Voigt)
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from jaxsoa.multibody.scalars import check_positive_steps
from jaxsoa.spatial.small_linalg import solve
from jaxsoa.systems.flexible.rfem import Beam


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class HubBeamModes:
    """Modal integrals: J0 (), b (m,), M_ee, K, K_G, C (m, m), tip_shape φ(L) (m,); static s."""
    J0: jax.Array
    b: jax.Array
    M_ee: jax.Array
    K: jax.Array
    K_G: jax.Array
    C: jax.Array
    tip_shape: jax.Array
    geometric_stiffening: bool = dataclasses.field(metadata=dict(static=True))


def hub_beam_modes(beam: Beam, n_modes, hub_inertia, hub_radius=0.0, geometric_stiffening=True,
                   dtype=None) -> HubBeamModes:
    """Host builder: the modal integrals by Gauss–Legendre quadrature (exact for these polynomials).
    Checks `beam` (`Beam.validate`; its n_segments is unused here), `n_modes` an int ≥ 1 (TypeError
    for a float such as 4.0, ValueError below 1), hub_inertia > 0 and hub_radius ≥ 0, both finite."""
    beam.validate("beam")
    n_modes = check_positive_steps("n_modes", n_modes)
    if not (np.isfinite(hub_inertia) and hub_inertia > 0):
        raise ValueError(f"field 'hub_inertia' = {hub_inertia} must be positive and finite")
    if not (np.isfinite(hub_radius) and hub_radius >= 0):
        raise ValueError(f"field 'hub_radius' = {hub_radius} must be non-negative and finite")
    L, rho, EI, r = beam.length, beam.mass_per_length, beam.bending_stiffness, hub_radius
    nodes, weights = np.polynomial.legendre.leggauss(n_modes + 4)
    x, w = 0.5 * L * (nodes + 1), 0.5 * L * weights
    powers = np.arange(2, n_modes + 2)[:, None]                                    # φ_i = (x/L)^(i+1)
    s = x[None] / L
    phi = s ** powers
    d_phi = powers * s ** (powers - 1) / L
    dd_phi = powers * (powers - 1) * s ** (powers - 2) / L ** 2
    outboard = rho * (r * (L - x) + 0.5 * (L ** 2 - x ** 2))                       # ∫ₓᴸ ρA (r + ξ) dξ
    K = EI * (dd_phi * w) @ dd_phi.T

    def arr(value):
        return jnp.asarray(value, dtype)

    return HubBeamModes(J0=arr(hub_inertia + rho * np.sum(w * (r + x) ** 2)), b=arr(rho * phi @ (w * (r + x))),
                        M_ee=arr(rho * (phi * w) @ phi.T), K=arr(K), K_G=arr((d_phi * w * outboard) @ d_phi.T),
                        C=arr(beam.damping * K), tip_shape=arr(np.ones(n_modes)),
                        geometric_stiffening=bool(geometric_stiffening))


def _check_sizes(mm: HubBeamModes, **arrays):
    """Each argument of one sample: q, v (1 + m,); eta, eta_dot (m,); anything else a scalar (ValueError
    naming it: another length failed deep inside a matrix product, or broadcast)."""
    m = mm.b.shape[0]
    shapes = dict(q=(1 + m,), v=(1 + m,), eta=(m,), eta_dot=(m,))
    for name, value in arrays.items():
        if jnp.shape(value) != shapes.get(name, ()):
            raise ValueError(f"argument '{name}' has shape {jnp.shape(value)}, expected {shapes.get(name, ())} "
                             f"(the model has m = {m} modes)")


def _A(mm: HubBeamModes):
    """A = M_ee − s K_G."""
    return mm.M_ee - mm.K_G if mm.geometric_stiffening else mm.M_ee


def modal_mass_matrix(mm: HubBeamModes, q):
    """(1 + m, 1 + m) [[J₀ + ηᵀAη, bᵀ], [b, M_ee]] at q = (θ, η) (1 + m,), its shape checked."""
    _check_sizes(mm, q=q)
    eta = q[1:]
    top = jnp.concatenate([(mm.J0 + eta @ _A(mm) @ eta)[None], mm.b])
    return jnp.concatenate([top[None], jnp.concatenate([mm.b[:, None], mm.M_ee], 1)], 0)


def modal_bias(mm: HubBeamModes, q, v):
    """(1 + m,) [2 θ̇ ηᵀ A η̇;  (K − θ̇² A) η + C η̇] at q, v (1 + m,), their shapes checked."""
    _check_sizes(mm, q=q, v=v)
    eta, theta_dot, eta_dot = q[1:], v[0], v[1:]
    A = _A(mm)
    return jnp.concatenate([(2 * theta_dot * eta @ A @ eta_dot)[None],
                            (mm.K - theta_dot ** 2 * A) @ eta + mm.C @ eta_dot])


def forward_dynamics_modal(mm: HubBeamModes, q, v, tau_hub):
    """(1 + m,) accelerations (θ̈, η̈) under a scalar hub torque; the shapes of q, v (1 + m,) checked."""
    _check_sizes(mm, q=q, v=v, tau_hub=tau_hub)
    rhs = (-modal_bias(mm, q, v)).at[0].add(tau_hub)                # τ_hub e₀ − bias
    return solve(modal_mass_matrix(mm, q), rhs)


def modal_driven_dynamics(mm: HubBeamModes, eta, eta_dot, theta_dot, theta_ddot):
    """(m,) η̈ with the hub's motion prescribed: M_ee η̈ = −b θ̈ − (K − θ̇² A) η − C η̇; eta, eta_dot
    (m,) and the scalars θ̇, θ̈ have their shapes checked."""
    _check_sizes(mm, eta=eta, eta_dot=eta_dot, theta_dot=theta_dot, theta_ddot=theta_ddot)
    rhs = -mm.b * theta_ddot - (mm.K - theta_dot ** 2 * _A(mm)) @ eta - mm.C @ eta_dot
    return solve(mm.M_ee, rhs)


def modal_energy(mm: HubBeamModes, q, v):
    """T + V (conserved without damping and hub torque) at q, v (1 + m,), their shapes checked."""
    _check_sizes(mm, q=q, v=v)
    return 0.5 * v @ modal_mass_matrix(mm, q) @ v + 0.5 * q[1:] @ mm.K @ q[1:]


def modal_tip_deflection(mm: HubBeamModes, eta):
    """w(L) = Σ φ_i(L) η_i (along the hub's y axis); eta (m,), its shape checked."""
    _check_sizes(mm, eta=eta)
    return mm.tip_shape @ eta


def rotating_frequencies(mm: HubBeamModes, spin_rate=0.0):
    """(m,) bending frequencies (rad/s) of the beam with the hub spinning at a constant rate:
    (K − Ω² A) φ = ω² M_ee φ (Ω = 0: the clamped cantilever). `spin_rate` must be a scalar."""
    _check_sizes(mm, spin_rate=spin_rate)
    L_inv = jnp.linalg.inv(jnp.linalg.cholesky(mm.M_ee))
    stiffness = mm.K - spin_rate ** 2 * _A(mm)
    return jnp.sqrt(jnp.linalg.eigvalsh(L_inv @ stiffness @ L_inv.T))
