"""Reel laws for deploying and retrieving a tether in circular orbit (design in docs/tether.md §8).

One rate-driven reel (the platform's, end P) sets the deployed length l = s_M − s_P. Four phases:

1. deployment, 0 ≤ t < T_d: the robot leaves at v₀ = 2 (l₁ − l₀)/T_d and the reel brakes it smoothly,
   l̇ = v₀ (1 − S(t/T_d)), S(x) = 10x³ − 15x⁴ + 6x⁵, tracked with feed-forward;
2. hold at the deployed length, T_d ≤ t < T_d + T_h;
3. exponential retrieval, l_ref(t) = l₁ e^{−c n (t − T_d − T_h)}, while l_ref > l_end;
4. hold at l_end (l_ref = l_end).

Phases 2–4 command the rate (u: logarithmic rate l̇/l)

    u     = −c n [retrieving] + k θ̇ + g n (θ − θ_e) − p n ln(l / l_ref)
    l̇_cmd = V tanh((l u + k_N (N_exit − N_rigid)) / V),        l̈ = (l̇_cmd − l̇) / τ

with the holds' own gains (k_h, g_h, p_h) in phases 2 and 4: by default a length loop only (k_h = g_h = 0), because
damping a libration by the reel costs length (∫ k θ̇ dt = k Δθ: from 45° behind the vertical, e^{0.47} with
k = 0.6); the retrieval's k > c damps it. The hold's steady offset is ln(l/l₁) = k_N ΔN / (p_h n l), ΔN the
bias of N_exit against N_rigid (none for the rigid dumbbell; docs/tether.md §8).

θ is the in-plane libration of the chord (jaxsoa.systems.orbit LVLH, θ > 0 leaning along-track). With l̇/l = u
the rigid dumbbell's θ̈ + 2 (l̇/l)(θ̇ + n) + 3 n² sin θ cos θ = 0 becomes, about the retrieval equilibrium
sin 2θ_e = 4c/3, δθ̈ + 2 (k − c) n δθ̇ + (3 cos 2θ_e + 2g) n² δθ = 0: exponential retrieval alone anti-damps
(the known instability of retrieval); k > c damps it, g stiffens it. The tension term is a series
damper on the tether's axial (bounce) mode: N_rigid = μ l [(θ̇ + n)² − n² + 3 n² cos² θ] is the tension of
a rigid dumbbell of reduced mass μ; a soft tether bounces about it, and without this term the bounce
and the reel's rate changes drove the tether slack and the system tumbled (docs/tether.md §8). A massive
tether holds a larger tension at the platform than this massless-tether reference, ΔN = 3 n² l (μ' − μ) with
μ' = m'_P (m'_M + ρ l/2)/(m'_P + m'_M + ρ l) (m' with the stored tether): the source of the hold's offset.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsoa.systems import orbit as orb
from jaxsoa.systems.tether.fem import TetherParams, TetherState, element_strain, element_tension


class ReelLaw(NamedTuple):
    """Parameters of the three-phase law (floats: vmap or grad over any of them).

    l_start, l_deployed, l_end [m]: l₀, l₁ and the retrieval floor; t_deploy T_d, t_hold T_h [s];
    rate c (retrieval at c n); rate_gain k (on θ̇, s); angle_gain g (on n θ); length_gain p;
    tension_gain k_N [m/(s N)]; v_max V [m/s]; tau τ [s]; reduced_mass μ [kg] of the two end bodies;
    hold_rate_gain k_h, hold_angle_gain g_h, hold_length_gain p_h: the holds' gains."""
    l_start: float
    l_deployed: float
    l_end: float
    t_deploy: float
    t_hold: float
    rate: float
    rate_gain: float
    angle_gain: float
    length_gain: float
    tension_gain: float
    v_max: float
    tau: float
    reduced_mass: float
    hold_rate_gain: float = 0.0
    hold_angle_gain: float = 0.0
    hold_length_gain: float = 2.0


def reel_law(l_start=10.0, l_deployed=1000.0, l_end=50.0, t_deploy=1200.0, t_hold=2000.0, rate=0.3, rate_gain=0.6,
             angle_gain=0.5, length_gain=0.5, tension_gain=20.0, v_max=1.0, tau=30.0, reduced_mass=1.0,
             hold_rate_gain=0.0, hold_angle_gain=0.0, hold_length_gain=2.0) -> ReelLaw:
    """Host-side builder with the defaults of docs/tether.md §8; ValueError naming the field for a
    non-finite or non-positive value (gains may be 0), l_end ≥ l_deployed, l_start ≥ l_deployed, or rate ≥ 3/4
    (no retrieval equilibrium: sin 2θ_e = 4c/3 > 1)."""
    law = ReelLaw(l_start, l_deployed, l_end, t_deploy, t_hold, rate, rate_gain, angle_gain, length_gain,
                  tension_gain, v_max, tau, reduced_mass, hold_rate_gain, hold_angle_gain, hold_length_gain)
    gains = ("t_hold", "rate", "rate_gain", "angle_gain", "length_gain", "tension_gain", "hold_rate_gain",
             "hold_angle_gain", "hold_length_gain")
    for name, value in law._asdict().items():
        if not np.isfinite(value) or value < 0 or (value == 0 and name not in gains):
            raise ValueError(f"reel_law: {name} = {value} must be finite and {'≥' if name in gains else '>'} 0")
    if not l_start < l_deployed:
        raise ValueError(f"reel_law: l_start = {l_start} must be below l_deployed = {l_deployed}")
    if not l_end < l_deployed:
        raise ValueError(f"reel_law: l_end = {l_end} must be below l_deployed = {l_deployed}")
    if not rate < 0.75:
        raise ValueError(f"reel_law: rate = {rate} must be below 3/4 (sin 2θ_e = 4c/3 has no solution)")
    return law


def deployment_profile(law: ReelLaw, t):
    """(l, l̇, l̈) of the deployment ramp l̇ = v₀ (1 − S(t/T_d)), v₀ = 2 (l₁ − l₀)/T_d, S(x) = 10x³ − 15x⁴ + 6x⁵:
    l = l₀ + v₀ T_d (x − ∫₀ˣ S), reaching l₁ at rest at t = T_d and held there after."""
    x = jnp.clip(t / law.t_deploy, 0.0, 1.0)
    v0 = 2 * (law.l_deployed - law.l_start) / law.t_deploy
    S = x**3 * (10 - 15 * x + 6 * x**2)
    integral = x**4 * (2.5 - 3 * x + x**2)
    S_dot = jnp.where(t < law.t_deploy, 30 * x**2 * (1 - x) ** 2, 0.0) / law.t_deploy
    return law.l_start + v0 * law.t_deploy * (x - integral), v0 * (1 - S), -v0 * S_dot


class Libration(NamedTuple):
    """In-plane θ, out-of-plane φ of a chord in LVLH and their rates θ̇, φ̇ (relative to LVLH), scalars."""
    theta: jax.Array
    phi: jax.Array
    theta_dot: jax.Array
    phi_dot: jax.Array


def chord_libration(orbit: orb.OrbitParams, t, tether: TetherState) -> Libration:
    """The libration of the tether's chord d = r_n − r_0: `jaxsoa.systems.orbit.libration_angles` and
    their rates, by a jvp along (t, ḋ)."""
    d, d_dot = tether.r[-1] - tether.r[0], tether.v[-1] - tether.v[0]
    angles, rates = jax.jvp(lambda s, x: orb.libration_angles(orbit, s, x), (t, d), (jnp.ones_like(t), d_dot))
    return Libration(*angles, *rates)


def rigid_tension(n, reduced_mass, l, theta, theta_dot):
    """Tension of a rigid planar dumbbell of reduced mass μ and length l in circular orbit (mean motion n):
    N = μ l [(θ̇ + n)² − n² + 3 n² cos² θ] (centripetal in the rotating frame plus gravity gradient)."""
    return reduced_mass * l * ((theta_dot + n) ** 2 - n**2 + 3 * n**2 * jnp.cos(theta) ** 2)


def commanded_rate(params: TetherParams, orbit: orb.OrbitParams, t, tether: TetherState, law: ReelLaw):
    """l̇_cmd of phases 2–4 (module docstring): the holds' length loop, exponential retrieval with libration
    damping, and the series damper on the exit tension N_exit (element 0, at the platform's reel)."""
    n = orb.mean_motion(orbit)
    l = tether.s[1] - tether.s[0]
    theta, _, theta_dot, _ = chord_libration(orbit, t, tether)
    elapsed = jnp.maximum(t - law.t_deploy - law.t_hold, 0.0)
    decay = law.l_deployed * jnp.exp(-law.rate * n * elapsed)                 # l₁ e^{−c n t_r}
    holding = (elapsed <= 0) | (decay <= law.l_end)                           # phases 2 and 4
    retrieving = jnp.where(holding, 0.0, 1.0)
    theta_eq = retrieving * 0.5 * jnp.arcsin(4 * law.rate / 3)                   # sin 2θ_e = 4c/3
    k, g, p = (jnp.where(holding, hold, gain) for hold, gain in ((law.hold_rate_gain, law.rate_gain),
                                                                  (law.hold_angle_gain, law.angle_gain),
                                                                  (law.hold_length_gain, law.length_gain)))
    u = (-law.rate * n * retrieving + k * theta_dot + g * n * (theta - theta_eq)
         - p * n * jnp.log(l / jnp.maximum(decay, law.l_end)))
    eps, eps_dot, _ = element_strain(params, tether)
    rigid = rigid_tension(n, law.reduced_mass, l, theta, theta_dot)
    tension_error = element_tension(params, eps, eps_dot)[0] - rigid
    return law.v_max * jnp.tanh((l * u + law.tension_gain * tension_error) / law.v_max)


def reel_acceleration(params: TetherParams, orbit: orb.OrbitParams, t, tether: TetherState, law: ReelLaw):
    """s̈ (2,) of the rate-driven reels: the platform's follows l̈ (s̈_P = −l̈), the robot's is locked.
    Deployment: l̈ = l̈_ref + (l̇_ref − l̇)/10 s + (l_ref − l)/100 s²; after: l̈ = (l̇_cmd − l̇)/τ."""
    l, l_dot = tether.s[1] - tether.s[0], tether.s_dot[1] - tether.s_dot[0]
    l_ref, l_dot_ref, l_ddot_ref = deployment_profile(law, t)
    deploy = l_ddot_ref + (l_dot_ref - l_dot) / 10.0 + (l_ref - l) / 100.0
    track = (commanded_rate(params, orbit, t, tether, law) - l_dot) / law.tau
    l_ddot = jnp.where(t < law.t_deploy, deploy, track)
    return jnp.stack([-l_ddot, jnp.zeros_like(l_ddot)])


def stable_dt(params: TetherParams, l, dt_max, *, EA=None, alpha=None):
    """Host-side explicit-RK4 step for the shortest element at deployed length l: ω dt ≤ 1.6 with
    ω = 2 c n / l (lumped axial, c = √(EA/ρ)) and α ω² dt ≤ 1.5 (Kelvin–Voigt), capped at dt_max.
    EA, alpha override the params' (e.g. the largest of a batch of draws). ValueError unless l, dt_max, EA
    are finite and > 0 and alpha finite and ≥ 0."""
    for name, value, low in (("l", l, 0.0), ("dt_max", dt_max, 0.0), ("EA", EA, 0.0)):
        if value is not None and not (np.isfinite(value) and value > low):
            raise ValueError(f"argument '{name}' = {value} must be finite and > 0")
    if alpha is not None and not (np.isfinite(alpha) and alpha >= 0):
        raise ValueError(f"argument 'alpha' = {alpha} must be finite and ≥ 0")
    EA = float(params.EA) if EA is None else EA
    alpha = float(params.alpha) if alpha is None else alpha
    omega = 2 * np.sqrt(EA / float(params.rho)) * params.n_elements / l
    return float(min(dt_max, 1.6 / omega, 1.5 / (max(alpha, 1e-9) * omega**2)))
