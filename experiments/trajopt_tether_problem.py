"""The tether retrieval problem of `trajopt_tether` (experiments/trajopt_tether.py, its module doc): the
reduced seed-001 model and its orbit, the length law (naive rest-to-rest exponential plus the bounded
cosine series), the time grid from the naive profile's stiffness, the RK4 rollout of the dumbbell with its
libration and tension history, and the loss (final libration amplitude² plus the regulariser)."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from jaxsoa.systems import orbit as orb
from jaxsoa.systems.tether.coupling import rk4_step_dumbbell
from jaxsoa.systems.tether.fem import element_strain, element_tension, straight_state, tether_params
from jaxsoa.systems.tether.reel_control import chord_libration
from jaxsoa.systems.tether.reels import tether_inputs

ORBIT = orb.circular_orbit(7.0e6)
N_ORBIT = float(orb.mean_motion(ORBIT))
COURANT = 1.2                     # ω_max dt on the naive profile (RK4's imaginary-axis limit is 2.83)
KV_LIMIT = 1.0                    # α ω_max² dt (RK4's real-axis limit is 2.78)
LENGTH_FACTOR = 2.0               # the optimised length stays within a factor 2 of the naive one: ω dt ≤ 2.4


@dataclasses.dataclass(frozen=True)
class Problem:
    """Retrieval problem (SI units; hashable, closed over by the compiled functions). The platform (reel end,
    P) and subsatellite (M) are point masses; the tether holds L = l₀ + 100 m of material (100 m stored on
    the platform's reel at the start). reg: weight of the regulariser Σ c²."""
    l_start: float = 1000.0
    l_end: float = 400.0
    orbits: float = 1.0                   # retrieval time T in orbital periods
    harmonics: int = 6
    phi0_deg: float = 2.0                 # initial out-of-plane libration
    theta0_deg: float = 0.0               # initial in-plane libration
    m_platform: float = 500.0
    m_sub: float = 50.0
    rho: float = 0.01
    EA: float = 3.0
    alpha: float = 0.1
    n_elements: int = 4
    reg: float = 1e-4

    @property
    def duration(self):
        return self.orbits * 2 * np.pi / N_ORBIT

    @property
    def tether(self):
        return tether_params(self.rho, self.EA, self.alpha, self.l_start + 100.0, self.n_elements, lumped=True)


def smoothstep(tau):
    """S, dS/dτ, d²S/dτ² of S = 10τ³ − 15τ⁴ + 6τ⁵."""
    return (tau**3 * (10 - 15 * tau + 6 * tau**2), 30 * tau**2 * (1 - tau) ** 2, 60 * tau * (1 - tau) * (1 - 2 * tau))


def length_profile(problem: Problem, coeffs, t):
    """l, l̇, l̈ at time t: l = l₀ exp(g), g = log(l₁/l₀) S(t/T) + β tanh(p/β), p = Σ_k c_k (1 − cos ω_k t)/k²,
    ω_k = 2πk/T, β = log LENGTH_FACTOR (so l_naive/2 < l < 2 l_naive); l̇ = l ġ, l̈ = l (g̈ + ġ²). coeffs (K,)."""
    T, beta = problem.duration, np.log(LENGTH_FACTOR)
    S, dS, ddS = smoothstep(t / T)
    log_ratio = np.log(problem.l_end / problem.l_start)
    k = jnp.arange(1, problem.harmonics + 1, dtype=coeffs.dtype)
    w, c = 2 * np.pi * k / T, coeffs / k**2                             # c_k/k²: every c_k moves l̈ alike
    p, p_dot, p_ddot = c @ (1 - jnp.cos(w * t)), c @ (w * jnp.sin(w * t)), c @ (w**2 * jnp.cos(w * t))
    bounded = jnp.tanh(p / beta)
    slope = 1 - bounded**2                                              # d tanh(x)/dx
    g = log_ratio * S + beta * bounded
    g_dot = log_ratio * dS / T + slope * p_dot
    g_ddot = log_ratio * ddS / T**2 + slope * (p_ddot - 2 * bounded * p_dot**2 / beta)
    l = problem.l_start * jnp.exp(g)
    return l, l * g_dot, l * (g_ddot + g_dot**2)


def stiffness_rate(problem: Problem, l):
    """Largest stable-step rate 1/dt of the mesh at length l: max(ω/COURANT, α ω²/KV_LIMIT), ω = 2 c n / l."""
    omega = 2 * np.sqrt(problem.EA / problem.rho) * problem.n_elements / l
    return np.maximum(omega / COURANT, problem.alpha * omega**2 / KV_LIMIT)


def time_grid(problem: Problem, resolution=20000):
    """Host-side step times t_k (steps + 1,): equal increments of ∫ stiffness_rate(l_naive(t)) dt, so
    every step has ω dt ≤ COURANT on the naive profile."""
    t = np.linspace(0.0, problem.duration, resolution + 1)
    naive = jax.vmap(lambda s: length_profile(problem, jnp.zeros(problem.harmonics, jnp.float64), s)[0])
    rate = stiffness_rate(problem, np.asarray(naive(jnp.asarray(t))))
    phase = np.concatenate([[0.0], np.cumsum((rate[1:] + rate[:-1]) / 2 * np.diff(t))])
    steps = int(np.ceil(phase[-1] * 1.02))                  # 2 % margin for the trapezoid rule
    return np.interp(np.linspace(0.0, phase[-1], steps + 1), phase, t)


def initial_state(problem: Problem):
    """Dumbbell on the local vertical tilted by (θ₀, φ₀), at rest in LVLH (rigid rotation at n about the orbit
    normal), end masses' centre of mass at the origin, stretched to the gravity-gradient equilibrium
    EA (d/l − 1) = 3 n² μ d (massless tether). Host-side values (constants when traced)."""
    m_P, m_M, l0 = problem.m_platform, problem.m_sub, problem.l_start
    mu = m_P * m_M / (m_P + m_M)
    d = l0 / (1 - 3 * N_ORBIT**2 * mu * l0 / problem.EA)
    theta, phi = np.deg2rad(problem.theta0_deg), np.deg2rad(problem.phi0_deg)
    u = np.array([np.cos(phi) * np.cos(theta), np.cos(phi) * np.sin(theta), np.sin(phi)])
    r_P, r_M = -m_M / (m_P + m_M) * d * u, m_P / (m_P + m_M) * d * u
    w = np.array([0.0, 0.0, N_ORBIT])
    with jax.ensure_compile_time_eval():
        params = problem.tether
        L = float(params.length)
        return straight_state(params, r_P, r_M, (L - l0, L), np.cross(w, r_P), np.cross(w, r_M))


def libration(t, tether):
    """(θ, φ, θ̇, φ̇) (4,) of the chord r_M − r_P (`jaxsoa.systems.tether.reel_control.chord_libration`)."""
    return jnp.stack(chord_libration(ORBIT, t, tether))


def rollout(problem: Problem, coeffs, times):
    """RK4 over the grid `times` (steps + 1,). Returns (final libration (4,), history {t, l, theta, phi,
    tension, tension_min (max, min over the elements)} each (steps + 1,))."""
    params = problem.tether
    inputs = tether_inputs(end_mass=(problem.m_platform, problem.m_sub))

    def reel_accel(t, _):                                                # s̈_P = −l̈, robot reel locked
        return jnp.stack([-length_profile(problem, coeffs, t)[2], jnp.zeros_like(t)])

    def record(t, x):
        eps, eps_dot, _ = element_strain(params, x)
        tension = element_tension(params, eps, eps_dot)
        lib = libration(t, x)
        return {"t": t, "l": x.s[1] - x.s[0], "theta": lib[0], "phi": lib[1], "tension": jnp.max(tension),
                "tension_min": jnp.min(tension)}

    def step(x, t_pair):
        t, t_next = t_pair
        x = rk4_step_dumbbell(params, ORBIT, t, x, inputs, reel_accel, t_next - t)
        return x, record(t_next, x)

    x0 = initial_state(problem)                                          # reel at rest: l̇(0) = 0 for every c
    x_end, history = jax.lax.scan(step, x0, (times[:-1], times[1:]))
    history = jax.tree.map(lambda a, b: jnp.concatenate([a[None], b]), record(times[0], x0), history)
    return libration(times[-1], x_end), history


def libration_amplitude2(lib):
    """θ² + (θ̇/√3n)² + φ² + (φ̇/2n)² (rad²): the squared in-plane and out-of-plane amplitudes."""
    return lib[0] ** 2 + (lib[2] / (np.sqrt(3) * N_ORBIT)) ** 2 + lib[1] ** 2 + (lib[3] / (2 * N_ORBIT)) ** 2


def objective(problem: Problem, coeffs, lib):
    """Final libration amplitude² plus the regulariser reg Σ c²."""
    return libration_amplitude2(lib) + problem.reg * jnp.sum(coeffs**2)


def loss_fn(problem: Problem, coeffs, times):
    """(loss, rollout history): the loss of the rollout over `times`, its history as auxiliary output."""
    lib, history = rollout(problem, coeffs, times)
    return objective(problem, coeffs, lib), history
