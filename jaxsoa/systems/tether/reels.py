"""Reels, the exit jump (thrust and Carnot loss), end forces on the bodies, and the dumbbell dynamics
of a reeling tether (derivation in docs/tether.md §4).

End e ∈ {P, M} = {0, 1}. Pay-out rate ṗ_e = σ_e ṡ_e with σ = (−1, +1) (ṗ > 0: material leaves the
body). u_e is the unit vector from the body into the tether (u_P = τ_0, u_M = −τ_{n−1}), ε_e, N_e the
strain and tension of the exit element. Material crossing the exit jumps from the body's velocity to
the tether's by Δv_e = ṗ_e (1+ε_e) u_e, so

    thrust on body e      −ρ ṗ_e² (1+ε_e) u_e                 (momentum flux)
    Carnot loss rate      ½ ρ |ṗ_e| |Δv_e|² = ½ ρ |ṗ_e|³ (1+ε_e)²
    reel grip force       F_e = N_e − ρ (1+ε_e) max(ṗ_e, 0)²  (the tension that the reel holds)

Reels: rate-driven (s̈ prescribed) or force-driven, m_r p̈ = (1+ε)(F − N_ctrl − c ṗ) (the massless
reel's balance N_PD + N_P − N = 0 is its m_r → 0 limit). Energy balance (exact for the continuum):

    d/dt (T + U + Σ ½ m_r ṗ²) = P_reel − P_Carnot − P_viscous + P_strain
"""

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsoa.multibody.arguments import default_dtype
from jaxsoa.spatial.small_linalg import solve, tridiagonal_solve
from jaxsoa.systems.tether.energy_consistent import galerkin_forces, node_rates, reel_gain
from jaxsoa.systems.tether.fem import (
    TetherParams,
    TetherState,
    check_mesh,
    element_strain,
    element_tension,
    mass_bands,
)
from jaxsoa.systems.tether.fem_energy import (
    elastic_energy,
    tether_kinetic_energy,
    tether_momentum,
    viscous_dissipation_rate,
)

PAYOUT_SIGN = (-1.0, 1.0)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class TetherInputs:
    """Per end (P, M), each (2,): reel_accel prescribed s̈ (rate-driven ends); reel_force control holding
    force N_ctrl ≥ 0 pulls material in; reel_damping c; reel_inertia m_r (> 0 where force-driven);
    end_mass: the end bodies' own mass without stored tether (dumbbell only). Static: force_driven."""
    reel_accel: jax.Array
    reel_force: jax.Array
    reel_damping: jax.Array
    reel_inertia: jax.Array
    end_mass: jax.Array
    force_driven: tuple = dataclasses.field(default=(False, False), metadata=dict(static=True))


def tether_inputs(reel_accel=(0.0, 0.0), reel_force=(0.0, 0.0), reel_damping=(0.0, 0.0), reel_inertia=(1.0, 1.0),
                  end_mass=(1.0, 1.0), force_driven=(False, False), dtype=None) -> TetherInputs:
    """Host-side builder; ValueError naming the field for a wrong shape, a non-finite value, a negative
    damping or mass, or a non-positive reel inertia at a force-driven end."""
    fields = dict(reel_accel=reel_accel, reel_force=reel_force, reel_damping=reel_damping,
                  reel_inertia=reel_inertia, end_mass=end_mass)
    for name, value in fields.items():
        value = np.asarray(value, np.float64)
        if value.shape != (2,) or not np.all(np.isfinite(value)):
            raise ValueError(f"TetherInputs.{name} must be finite with shape (2,), got {value!r}")
        if name in ("reel_damping", "end_mass") and np.any(value < 0):
            raise ValueError(f"TetherInputs.{name} must be ≥ 0, got {value!r}")
    if len(tuple(force_driven)) != 2:
        raise ValueError(f"TetherInputs.force_driven must hold 2 flags (P, M), got {force_driven!r}")
    if np.any(np.asarray(reel_force, np.float64) < 0):
        raise ValueError(f"TetherInputs.reel_force must be ≥ 0 (a holding force pulls material in), got {reel_force!r}")
    force_driven = tuple(bool(f) for f in force_driven)
    if any(f and m <= 0 for f, m in zip(force_driven, reel_inertia, strict=True)):
        raise ValueError(f"TetherInputs.reel_inertia must be > 0 at force-driven ends {force_driven}, "
                         f"got {reel_inertia!r}")
    dtype = default_dtype(dtype)
    return TetherInputs(**{k: jnp.asarray(v, dtype) for k, v in fields.items()}, force_driven=force_driven)


class ExitState(NamedTuple):
    """At both exits, (2, ·): pay-out rate ṗ, exit strain ε and tension N, unit vector u into the tether,
    reel grip force F, thrust on the body (2, 3) and relative material velocity Δv (2, 3)."""
    payout: jax.Array
    eps: jax.Array
    tension: jax.Array
    u: jax.Array
    grip: jax.Array
    thrust: jax.Array
    dv: jax.Array


def exit_state(params: TetherParams, state: TetherState, eps, tension, tau) -> ExitState:
    """Exit jump quantities from the exit elements' (ε, N, τ)."""
    sign = jnp.asarray(PAYOUT_SIGN, state.s.dtype)
    payout = sign * state.s_dot                                               # ṗ = σ ṡ
    eps_e, tension_e = eps[jnp.array([0, -1])], tension[jnp.array([0, -1])]
    u = jnp.stack([tau[0], -tau[-1]])                                         # body → tether
    stretch = 1 + eps_e
    grip = tension_e - params.rho * stretch * jnp.maximum(payout, 0) ** 2    # F = N − ρ(1+ε) max(ṗ,0)²
    thrust = -(params.rho * payout**2 * stretch)[:, None] * u                # −ρ ṗ² (1+ε) u
    return ExitState(payout, eps_e, tension_e, u, grip, thrust, (payout * stretch)[:, None] * u)


def check_inputs(inputs: TetherInputs) -> TetherInputs:
    """`inputs` itself if every field is (2,), one entry per end (ValueError naming the field otherwise: a
    (3,) or (1,) reel acceleration would be used as s̈ as it is). Static shapes: free under `jit`."""
    for name in ("reel_accel", "reel_force", "reel_damping", "reel_inertia", "end_mass"):
        if jnp.shape(getattr(inputs, name)) != (2,):
            raise ValueError(f"TetherInputs.{name} has shape {jnp.shape(getattr(inputs, name))}, expected (2,): "
                             "one entry per end (P, M)")
    return inputs


def reel_accelerations(params: TetherParams, state: TetherState, inputs: TetherInputs):
    """s̈ (2,): prescribed (rate-driven ends) or from m_r p̈ = (1+ε)(F − N_ctrl − c ṗ), s̈ = σ p̈."""
    check_inputs(inputs)
    check_mesh(params, state)
    if not any(inputs.force_driven):
        return inputs.reel_accel
    eps, eps_dot, tau = element_strain(params, state)
    ex = exit_state(params, state, eps, element_tension(params, eps, eps_dot), tau)
    sign = jnp.asarray(PAYOUT_SIGN, state.s.dtype)
    driven = jnp.asarray(inputs.force_driven)
    inertia = jnp.where(driven, inputs.reel_inertia, jnp.ones_like(inputs.reel_inertia))
    p_ddot = (1 + ex.eps) * (ex.grip - inputs.reel_force - inputs.reel_damping * ex.payout) / inertia
    return jnp.where(driven, sign * p_ddot, inputs.reel_accel)


def _body_masses(params: TetherParams, state: TetherState, inputs: TetherInputs):
    """m'_e = own mass + stored tether: (m_P + ρ s_P, m_M + ρ (L − s_M))."""
    return inputs.end_mass + params.rho * jnp.stack([state.s[0], params.length - state.s[1]])


def _external(state, external_accel_fn):
    return None if external_accel_fn is None else external_accel_fn(state.r)


def _dumbbell(params: TetherParams, state: TetherState, inputs: TetherInputs, a_ext):
    """(derivative, exit tension (2,)) of the point-mass dumbbell (`tether_dynamics`). "energy_consistent":
    the exit tension is the consistent reaction N̂_e = −R_e·u_e = m'_e (a_e − a_ext,e)·u_e + ρ ṗ_e² (1+ε_e),
    and force-driven reels use it, so their s̈ and the accelerations solve one linear system (everything is
    affine in s̈: A = A⁰ + Σ_f ∂A/∂s̈_f (s̈_f − s̈⁰_f)); "nodal": the exit elements' tension."""
    consistent = params.formulation == "energy_consistent"
    s_ddot = reel_accelerations(params, state, inputs)
    rhs, (eps, _, tau, tension) = galerkin_forces(params, state, s_ddot, a_ext)
    ex = exit_state(params, state, eps, tension, tau)
    m_body = _body_masses(params, state, inputs)
    ends = jnp.array([0, -1])
    a_ext_ends = jnp.zeros_like(ex.thrust) if a_ext is None else a_ext[ends]
    rhs = rhs.at[ends].add(ex.thrust + m_body[:, None] * a_ext_ends)
    diag, off = mass_bands(params, state.s[1] - state.s[0])
    diag = diag.at[ends].add(m_body)
    zero = jnp.zeros(1, off.dtype)
    lower, upper = jnp.concatenate([zero, off]), jnp.concatenate([off, zero])
    driven = consistent and any(inputs.force_driven)
    columns = jnp.concatenate([rhs, *reel_gain(params, state)], axis=1) if driven else rhs
    sol = tridiagonal_solve(lower, diag, upper, columns)                      # (M + diag(m')) A = rhs (+ gains)
    accel = sol[:, :3]

    def exit_tension(a):                                                      # N̂ = m'(a − a_ext)·u + ρ ṗ²(1+ε)
        return m_body * jnp.sum((a[ends] - a_ext_ends) * ex.u, axis=1) + params.rho * ex.payout**2 * (1 + ex.eps)

    if driven:                  # m_r σ s̈ = (1+ε)(N̂(s̈) − ρ(1+ε) max(ṗ,0)² − N_ctrl − c ṗ) at force-driven ends
        gains = jnp.stack([sol[:, 3:6], sol[:, 6:9]])                            # ∂A/∂s̈_f (2, n+1, 3)
        D = jnp.stack([m_body * jnp.sum(g[ends] * ex.u, axis=1) for g in gains], axis=1)    # ∂N̂_e/∂s̈_f
        stretch, sign = 1 + ex.eps, jnp.asarray(PAYOUT_SIGN, s_ddot.dtype)
        held = (inputs.reel_force + inputs.reel_damping * ex.payout
                + params.rho * stretch * jnp.maximum(ex.payout, 0) ** 2)              # N_ctrl + c ṗ + ρ(1+ε)ṗ₊²
        force_rows = jnp.diag(inputs.reel_inertia * sign) - stretch[:, None] * D
        force_rhs = stretch * (exit_tension(accel) - D @ s_ddot - held)
        is_force = jnp.asarray(inputs.force_driven)
        A = jnp.where(is_force[:, None], force_rows, jnp.eye(2, dtype=D.dtype))
        s_ddot_new = solve(A, jnp.where(is_force, force_rhs, inputs.reel_accel))
        accel = accel + jnp.tensordot(s_ddot_new - s_ddot, gains, axes=1)
        s_ddot = s_ddot_new
    tension_out = exit_tension(accel) if consistent else ex.tension
    return TetherState(node_rates(params, state), accel, state.s_dot, s_ddot), tension_out


def tether_dynamics(params: TetherParams, state: TetherState, inputs: TetherInputs, external_accel_fn=None):
    """Time derivative of the state of a tether whose end nodes are point masses m'_e (own mass plus
    stored tether), as a TetherState (ṙ, v̇, ṡ, s̈): the tangent of this flat state has its fields, and
    PyTree steppers (`jaxsoa.integrators.steps.ode_rk4_step`) need f(t, x) shaped like x. Eliminating
    the end reactions R_e between the node and body equations,
    (M + diag(m'_P, 0, …, 0, m'_M)) A = rhs + thrust + m' a_ext with rhs of
    `jaxsoa.systems.tether.energy_consistent.galerkin_forces` (A = r̈ for "nodal"; exit-point
    accelerations and interior u̇ for "energy_consistent", whose ṙ = u + w ḡ).
    `external_accel_fn(r (n+1, 3)) -> (n+1, 3)`: acceleration field on every mass point (bodies too)."""
    return _dumbbell(params, state, inputs, _external(state, external_accel_fn))[0]


def exit_tension(params: TetherParams, state: TetherState, inputs: TetherInputs, external_accel_fn=None):
    """(2,) the tension the reels hold at the exits of the point-mass dumbbell: the consistent reaction
    −R_e·u_e of the end rows ("energy_consistent"), or the exit elements' N ("nodal")."""
    return _dumbbell(params, state, inputs, _external(state, external_accel_fn))[1]


class EndCoupling(NamedTuple):
    """Tether side of a coupled simulation, affine in the end accelerations a_end (2, 3) = (a_CP, a_CM):
    force on body e at C_e = force_e − Σ_f mass_ef a_f, interior r̈ = interior_accel + interior_gain @ a_end.
    force (2, 3) includes the thrust; mass (2, 2) is the Schur complement M_EE − M_EI M_II⁻¹ M_IE
    (diagonal for lumped mass); interior_accel (n−1, 3); interior_gain (n−1, 2) (interior u̇ for
    "energy_consistent"); s_ddot (2,); exit: the ExitState (thrust, u_e, … of the exit elements)."""
    force: jax.Array
    mass: jax.Array
    interior_accel: jax.Array
    interior_gain: jax.Array
    s_ddot: jax.Array
    exit: ExitState


def end_coupling(params: TetherParams, state: TetherState, inputs: TetherInputs, external_accel_fn=None):
    """EndCoupling at the current state, whose end nodes follow the bodies' exit points C_P, C_M (the
    bodies' stored tether ρ s_P, ρ (L − s_M) is the bodies' business: add it to their inertia at C_e).
    The consistent exit tension is N̂_e = (force_e − Σ_f mass_ef a_f − thrust_e)·u_e. Force-driven reels
    take the exit elements' tension here (the consistent one would need the bodies' accelerations)."""
    s_ddot = reel_accelerations(params, state, inputs)
    rhs, (eps, _, tau, tension) = galerkin_forces(params, state, s_ddot, _external(state, external_accel_fn))
    ex = exit_state(params, state, eps, tension, tau)
    diag, off = mass_bands(params, state.s[1] - state.s[0])
    n_inner = diag.shape[0] - 2
    unit = jnp.zeros((n_inner, 2), diag.dtype).at[0, 0].add(-off[0]).at[-1, 1].add(-off[-1])   # −M_IE
    zero = jnp.zeros(1, off.dtype)
    sol = tridiagonal_solve(jnp.concatenate([zero, off[1:-1]]), diag[1:-1], jnp.concatenate([off[1:-1], zero]),
                            jnp.concatenate([rhs[1:-1], unit], axis=1))               # M_II⁻¹ [rhs_I, −M_IE]
    interior_accel, gain = sol[:, :3], sol[:, 3:]
    M_EI_a = jnp.stack([off[0] * interior_accel[0], off[-1] * interior_accel[-1]])
    M_EI_G = jnp.stack([off[0] * gain[0], off[-1] * gain[-1]])
    force = rhs[jnp.array([0, -1])] - M_EI_a + ex.thrust                              # −R_E + thrust at a_E = 0
    return EndCoupling(force, jnp.diag(diag[jnp.array([0, -1])]) + M_EI_G, interior_accel, gain, s_ddot, ex)


# ---------------------------------------------------------------------------------------------
# bookkeeping: energy and momentum of tether + end masses + reels

class EnergyRates(NamedTuple):
    """Power terms (scalars) of d E/dt = reel − carnot − viscous + strain (W)."""
    reel: jax.Array
    carnot: jax.Array
    viscous: jax.Array
    strain: jax.Array

    @property
    def total(self):
        return self.reel - self.carnot - self.viscous + self.strain


def system_energy(params: TetherParams, state: TetherState, inputs: TetherInputs):
    """E = Σ ½ m'_e |v_e|² + tether kinetic + elastic + Σ_(force-driven) ½ m_r ṡ_e² (no potential)."""
    m_body = _body_masses(params, state, inputs)
    v_end = state.v[jnp.array([0, -1])]
    reel = jnp.where(jnp.asarray(inputs.force_driven), 0.5 * inputs.reel_inertia * state.s_dot**2, 0.0)
    return (0.5 * jnp.sum(m_body * jnp.sum(v_end**2, axis=1)) + tether_kinetic_energy(params, state)
            + elastic_energy(params, state) + jnp.sum(reel))


def energy_rates(params: TetherParams, state: TetherState, inputs: TetherInputs, external_accel_fn=None,
                 exit_tension=None) -> EnergyRates:
    """Reel power (rate-driven: −(1+ε) ṗ F; force-driven: −(1+ε) ṗ (N_ctrl + c ṗ)), Carnot loss
    ½ ρ |ṗ|³ (1+ε)², Kelvin–Voigt dissipation, and strain energy carried through the exits ½ EA ε₊² ṗ.
    F = N_e − ρ (1+ε) max(ṗ, 0)² with N_e `exit_tension` (2,): default the dumbbell's (`exit_tension`,
    the consistent reaction for "energy_consistent"; pass a coupled simulator's instead)."""
    eps, eps_dot, tau = element_strain(params, state)
    ex = exit_state(params, state, eps, element_tension(params, eps, eps_dot), tau)
    if exit_tension is None and params.formulation != "nodal":
        exit_tension = _dumbbell(params, state, inputs, _external(state, external_accel_fn))[1]
    stretch = 1 + ex.eps
    grip = ex.grip if exit_tension is None else exit_tension - params.rho * stretch * jnp.maximum(ex.payout, 0) ** 2
    held = jnp.where(jnp.asarray(inputs.force_driven), inputs.reel_force + inputs.reel_damping * ex.payout, grip)
    return EnergyRates(reel=-jnp.sum(stretch * ex.payout * held),
                       carnot=0.5 * params.rho * jnp.sum(jnp.abs(ex.payout) ** 3 * stretch**2),
                       viscous=viscous_dissipation_rate(params, state),
                       strain=0.5 * params.EA * jnp.sum(jnp.maximum(ex.eps, 0) ** 2 * ex.payout))


def system_momentum(params: TetherParams, state: TetherState, inputs: TetherInputs):
    """Linear and angular momentum (about the origin) of end masses (with stored tether) + deployed
    tether, each (3,)."""
    m_body = _body_masses(params, state, inputs)
    r_end, v_end = state.r[jnp.array([0, -1])], state.v[jnp.array([0, -1])]
    linear, angular = tether_momentum(params, state)
    return (linear + jnp.sum(m_body[:, None] * v_end, axis=0),
            angular + jnp.sum(m_body[:, None] * jnp.cross(r_end, v_end), axis=0))
