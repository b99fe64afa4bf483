"""Gas-assisted Gough-Stewart platform (docs/user_guide.md §9): gas springs, inverse dynamics by Kane's
equations, the light-leg approximation, task-space forward dynamics and simulation.

Conventions of `jaxsoa.systems.stewart.geometry` (twist u = [v_P; ω_P], world frame; legs 0-5 electric, 6-8 gas).
Kane's equations with generalized speeds u, summed over the 19 bodies (platform + payload, 9
barrels, 9 rods), each with partial velocities P = ∂v/∂u and partial angular velocities ∂ω/∂u:

    J₁₋₆ᵀ F + J₇₋₉ᵀ τ_P = h(pose, u, u̇),
    h = Σ_bodies P_cᵀ m (a_c − g) + P_ωᵀ (I α + ω × I ω)          (generalized inertia − gravity)
    F = (J₁₋₆ᵀ)⁻¹ (h − J₇₋₉ᵀ τ_P)

with F (6,) the electric cylinders' forces along n_i (positive extends) and τ_P (3,) the gas forces.
Leg bodies: barrel centre r₁ = b + c₁ n, rod centre r₂ = A − c₂ n, both turning with ω_i (no spin),
so with ṅ = (I − n nᵀ) v_A / l: v₁ = c₁ ṅ, v₂ = v_A − c₂ ṅ, ω_i = n × v_A / l.

Gas (isothermal): gas column l₁ = l₀ + (l − l_mid) in each gas barrel,
    individual tanks: V_i = V₀ + A_P l₁ᵢ;    shared tank: V = V₀ + A_P Σ l₁ᵢ
    p_abs = (p₀ + p_amb) V_mid / V,  τ_P = (p_abs − p_amb) A_P     (p₀ gauge; p_amb = 0: no back pressure)
"""

import dataclasses
import typing

import jax
import jax.numpy as jnp
import numpy as np

from jaxsoa.integrators.rollout import rollout_steps
from jaxsoa.integrators.steps import ode_rk4_step
from jaxsoa.multibody.scalars import check_positive_steps, check_time_step
from jaxsoa.spatial.algebra import skew
from jaxsoa.spatial.rotation import quat_multiply, quat_normalize, quat_to_rotation
from jaxsoa.spatial.small_linalg import solve
from jaxsoa.systems.stewart.geometry import (
    N_ELECTRIC,
    StewartParams,
    jacobian,
    leg_lengths,
    leg_motion,
)
from jaxsoa.systems.stewart.poses import PoseStatus, pose_status

_QUAT_TOL = 1e-6      # |‖quat0‖ − 1| allowed by `simulate` (`jaxsoa.multibody.checks.check_configuration`'s)


class GasState(typing.NamedTuple):
    """volume (3,) gas volume behind each gas piston (the shared volume, repeated, for one tank);
    pressure (3,) gauge pressure; force (3,) τ_P along the gas legs (positive extends)."""
    volume: jax.Array
    pressure: jax.Array
    force: jax.Array


def gas_springs(params: StewartParams, gas_leg_length) -> GasState:
    """Isothermal gas springs for the gas legs' lengths (3,). ValueError naming `gas_leg_length` for
    another shape and, when the lengths are concrete (not traced), for a length that is not finite and
    > 0 or that would pull a piston past the end of its barrel (gas column l₁ ≤ 0: no gas volume, the
    pressure law gives negative or infinite pressures). Traced lengths are not checked."""
    if jnp.shape(gas_leg_length) != (3,):
        raise ValueError(f"argument 'gas_leg_length' has shape {jnp.shape(gas_leg_length)}, expected (3,)")
    shortest = params.leg_length_mid - params.gas_length_mid              # the gas column l₁ is 0 at this length
    if not any(isinstance(x, jax.core.Tracer) for x in (gas_leg_length, shortest)):
        length, shortest = np.asarray(gas_leg_length, np.float64), np.asarray(shortest, np.float64)
        if not (np.all(np.isfinite(length)) and np.all(length > np.maximum(shortest, 0.0))):
            raise ValueError(f"argument 'gas_leg_length' = {length.tolist()} must be finite, > 0 and longer than "
                             f"leg_length_mid − gas_length_mid = {shortest.tolist()} (gas left in each barrel)")
    return _gas_state(params, gas_leg_length)


def _gas_state(params: StewartParams, gas_leg_length) -> GasState:
    """`gas_springs` unchecked: inverse / forward dynamics flag a pose out of stroke rather than raise."""
    column = params.gas_length_mid + gas_leg_length - params.leg_length_mid      # l₁ = l₀ + (l − l_mid)
    area, p_amb = params.piston_area, params.ambient_pressure
    if params.gas_mode == "shared":
        volume = jnp.broadcast_to(params.tank_volume + area * jnp.sum(column), column.shape)  # V = V₀ + A Σ l₁
        volume_mid = params.tank_volume + area * jnp.sum(params.gas_length_mid)
    else:
        volume = params.tank_volume + area * column                                # V_i = V₀ + A l₁ᵢ
        volume_mid = params.tank_volume + area * params.gas_length_mid
    pressure = (params.precharge + p_amb) * volume_mid / volume - p_amb           # p V = p_mid V_mid (absolute)
    if params.gas_mode == "none":
        pressure = jnp.zeros_like(pressure)                                        # vented: no gas force
    return GasState(volume, pressure, pressure * area)


def generalized_forces(params: StewartParams, p_world_platform, R_world_platform, u, udot):
    """(6,) h = Σ over the 19 bodies of P_cᵀ m (a_c − g) + P_ωᵀ (I α + ω × I ω): what the legs must
    supply (J₁₋₆ᵀ F + J₇₋₉ᵀ τ_P = h). Linear in udot."""
    legs = leg_motion(params, p_world_platform, R_world_platform, u, udot)
    n, length, g = legs.direction, legs.length[:, None, None], params.gravity
    eye = jnp.broadcast_to(jnp.eye(3, dtype=u.dtype), (n.shape[0], 3, 3))
    P_joint = jnp.concatenate([eye, -skew(legs.arm)], -1)                  # v_A = [I, −(R a)×] u      (9, 3, 6)
    P_dir = (eye - n[:, :, None] * n[:, None, :]) @ P_joint / length       # ṅ = (I − n nᵀ) v_A / l
    P_omega = skew(n) @ P_joint / length                                   # ω_i = n × v_A / l
    P_barrel = params.barrel_com[:, None, None] * P_dir                    # v₁ = c₁ ṅ
    P_rod = P_joint - params.rod_com[:, None, None] * P_dir                # v₂ = v_A − c₂ ṅ
    n_ddot = jnp.cross(legs.alpha, n) - jnp.sum(legs.omega ** 2, -1, keepdims=True) * n   # n̈ = α × n − |ω|² n
    a_barrel = params.barrel_com[:, None] * n_ddot                         # a₁ = c₁ n̈
    a_rod = legs.joint_acceleration - params.rod_com[:, None] * n_ddot    # a₂ = a_A − c₂ n̈
    legs_h = (jnp.einsum("kij,ki->j", P_barrel, params.barrel_mass[:, None] * (a_barrel - g[None]))
              + jnp.einsum("kij,ki->j", P_rod, params.rod_mass[:, None] * (a_rod - g[None]))
              + jnp.einsum("kij,ki->j", P_omega, (params.barrel_inertia + params.rod_inertia)[:, None] * legs.alpha))
    return legs_h + platform_wrench(params, R_world_platform, u, udot)


def platform_wrench(params: StewartParams, R_world_platform, u, udot):
    """(6,) [f; n_O]: the platform + payload's Newton-Euler wrench minus gravity, about O_L, world
    frame — f = m (a_C − g), n_O = I α + ω × I ω + R c × f (= P_Cᵀ m (a_C − g) + P_ωᵀ (I α + ω × I ω))."""
    w, wdot = u[3:], udot[3:]
    com = R_world_platform @ params.platform_com
    a_com = udot[:3] + jnp.cross(wdot, com) + jnp.cross(w, jnp.cross(w, com))   # a_C = v̇ + α × Rc + ω × (ω × Rc)
    inertia = R_world_platform @ params.platform_inertia @ R_world_platform.T    # I_W = R I_L Rᵀ
    force = params.platform_mass * (a_com - params.gravity)
    moment = inertia @ wdot + jnp.cross(w, inertia @ w) + jnp.cross(com, force)
    return jnp.concatenate([force, moment])


class InverseDynamics(typing.NamedTuple):
    """force (6,) electric cylinder forces (NaN where `status.ok` is False — check the flag);
    gas (GasState); status (PoseStatus)."""
    force: jax.Array
    gas: GasState
    status: PoseStatus


def inverse_dynamics(params: StewartParams, p_world_platform, R_world_platform, u, udot) -> InverseDynamics:
    """Kane's inverse dynamics: F = (J₁₋₆ᵀ)⁻¹ (h − J₇₋₉ᵀ τ_P). Singular or out-of-stroke poses are
    flagged in `status` and their force is NaN (the solve uses a safe matrix so gradients stay finite)."""
    J = jacobian(params, p_world_platform, R_world_platform)
    status = pose_status(params, p_world_platform, R_world_platform)
    gas = _gas_state(params, status.length[N_ELECTRIC:])
    rhs = generalized_forces(params, p_world_platform, R_world_platform, u, udot) - J[N_ELECTRIC:].T @ gas.force
    J_safe = jnp.where(status.nonsingular, J[:N_ELECTRIC], jnp.eye(N_ELECTRIC, 6, dtype=J.dtype))
    force = solve(J_safe.T, rhs)
    return InverseDynamics(jnp.where(status.ok, force, jnp.nan), gas, status)


def without_leg_inertia(params: StewartParams) -> StewartParams:
    """The light-leg approximation: legs' masses and inertias set to zero."""
    zero = jnp.zeros_like(params.barrel_mass)
    return dataclasses.replace(params, barrel_mass=zero, barrel_inertia=zero, rod_mass=zero, rod_inertia=zero)


def inverse_dynamics_light_leg(params: StewartParams, p_world_platform, R_world_platform, u, udot) -> InverseDynamics:
    """Electric forces with the legs' masses and inertias ignored (`without_leg_inertia`)."""
    return inverse_dynamics(without_leg_inertia(params), p_world_platform, R_world_platform, u, udot)


def task_space_mass_matrix(params: StewartParams, p_world_platform, R_world_platform, u):
    """(M (6, 6), bias (6,)): h = M u̇ + bias, M = ∂h/∂u̇ (jax.jacfwd; h is linear in u̇)."""
    zero = jnp.zeros_like(u)
    mass = jax.jacfwd(lambda a: generalized_forces(params, p_world_platform, R_world_platform, u, a))(zero)
    return mass, generalized_forces(params, p_world_platform, R_world_platform, u, zero)


def forward_dynamics(params: StewartParams, p_world_platform, R_world_platform, u, force):
    """(6,) u̇ under electric forces `force` (6,) with the gas springs active:
    M u̇ = J₁₋₆ᵀ F + J₇₋₉ᵀ τ_P − bias. Needs no invertible J₁₋₆."""
    J = jacobian(params, p_world_platform, R_world_platform)
    _, _, length, _ = leg_lengths(params, p_world_platform, R_world_platform)
    gas = _gas_state(params, length[N_ELECTRIC:])
    mass, bias = task_space_mass_matrix(params, p_world_platform, R_world_platform, u)
    return solve(mass, J[:N_ELECTRIC].T @ force + J[N_ELECTRIC:].T @ gas.force - bias)


class _PlatformState(typing.NamedTuple):
    """The integrated state (p, quat xyzw, u) and, as its time derivative, (v, q̇, u̇)."""
    p: jax.Array
    quat: jax.Array
    u: jax.Array


class PlatformTrajectory(typing.NamedTuple):
    """States at t_k = k dt, k = 0 … n_steps, initial state first: p (n+1, 3) platform position,
    quat (n+1, 4) its orientation (x, y, z, w), u (n+1, 6) twist [v_P; ω_P]; status the `PoseStatus`
    of each pose, its fields stacked along the same leading axis (out of stroke where `reachable` is
    False, near-singular where `nonsingular` is False). Leading batch axes come first under `vmap`.
    The properties combine them: `ok` per step, `first_invalid`, `first_nonfinite`, `finite`."""
    p: jax.Array
    quat: jax.Array
    u: jax.Array
    status: PoseStatus

    @property
    def state_finite(self) -> jax.Array:
        """(…, n+1) bool: p, quat and u of the step are all finite."""
        return jnp.all(jnp.isfinite(jnp.concatenate([self.p, self.quat, self.u], axis=-1)), axis=-1)

    @property
    def ok(self) -> jax.Array:
        """(…, n+1) bool: the state is finite, every leg in its stroke and J₁₋₆ not near-singular."""
        return self.status.ok & self.state_finite

    @property
    def first_invalid(self) -> jax.Array:
        """(…) int32: the first step k whose state is not `ok`, −1 when every state is."""
        return _first(~self.ok)

    @property
    def first_nonfinite(self) -> jax.Array:
        """(…) int32: the first step k with a NaN or inf in p, quat or u, −1 if none."""
        return _first(~self.state_finite)

    @property
    def finite(self) -> jax.Array:
        """(…) bool: every state is finite."""
        return self.first_nonfinite < 0


def _first(bad):
    return jnp.where(jnp.any(bad, axis=-1), jnp.argmax(bad, axis=-1), -1).astype(jnp.int32)


def _state_rate(params, t, state: _PlatformState, control):
    """d/dt of (p, quat_xyzw, u): (v, ½ [ω; 0] ⊗ q, u̇) with u̇ from `forward_dynamics`."""
    p, quat, u = state
    R = quat_to_rotation(quat)
    udot = forward_dynamics(params, p, R, u, control(t, p, R, u))
    w_quat = jnp.concatenate([u[3:], jnp.zeros_like(u[:1])])
    return _PlatformState(u[:3], 0.5 * quat_multiply(w_quat, quat), udot)


def simulate(params: StewartParams, p0, quat0, u0, control, dt, n_steps, *, checkpoint=False) -> PlatformTrajectory:
    """RK4 rollout (`jaxsoa.integrators.rollout_steps` of `ode_rk4_step`, the quaternion renormalised
    after each step) under electric forces `control(t, p, R_world_platform, u) -> (6,)`, evaluated at
    every RK4 stage. p0 (3,), quat0 (4,) xyzw, u0 (6,); `checkpoint` as in `rollout_steps`.

    The dynamics need no invertible J₁₋₆, so the rollout runs on through a pose out of stroke or
    near a singularity, or goes non-finite; each state's `PoseStatus` comes back with it
    (`PlatformTrajectory.ok` per step, `.first_invalid`: the first bad step, −1 if none). ValueError
    (TypeError for a non-int `n_steps`) for misshapen p0 / quat0 / u0, a concrete quat0 whose norm is not
    1 within 1e-6 (a zero one gave NaN), a concrete dt that is not finite and positive, or n_steps < 1."""
    def advance(t, state, k):
        p, quat, u = ode_rk4_step(lambda time, x: _state_rate(params, time, x, control), t, state, dt)
        return _PlatformState(p, quat_normalize(quat), u)

    for name, x, size in (("p0", p0, 3), ("quat0", quat0, 4), ("u0", u0, 6)):
        if jnp.shape(x) != (size,):
            raise ValueError(f"argument '{name}' has shape {jnp.shape(x)}, expected {(size,)}")
    norm = None if isinstance(quat0, jax.core.Tracer) else float(jnp.linalg.norm(quat0))
    if norm is not None and not abs(norm - 1) <= _QUAT_TOL:
        raise ValueError(f"argument 'quat0' = {np.asarray(quat0).tolist()} has norm {norm}, expected a unit "
                         "quaternion (x, y, z, w)")
    states = rollout_steps(advance, _PlatformState(p0, quat0, u0), check_time_step("dt", dt),
                           check_positive_steps("n_steps", n_steps), checkpoint=checkpoint)
    status = jax.vmap(lambda p, quat: pose_status(params, p, quat_to_rotation(quat)))(states.p, states.quat)
    return PlatformTrajectory(*states, status=status)
