"""Trajectory optimisation with gradients through rollouts: a tether retrieval profile that ends with
the least libration.

    python -m experiments.trajopt_tether [--out outputs/trajopt_tether] [--iters 60] [--harmonics 6]
                                         [--orbits 1.0] [--lr 0.02] [--l-start 1000] [--l-end 400]

System: the reduced model of seed 001 (`jaxsoa.systems.tether.coupling.rk4_step_dumbbell`: two point masses
joined by the jaxsoa tether FEM, `jaxsoa.systems.tether.reels.tether_dynamics`), a 500 kg platform holding the reel
and a 50 kg subsatellite, in a circular 7000 km orbit (gravity gradient of `jaxsoa.systems.orbit` on every node and end
mass, non-rotating orbital frame). Tether: ρ = 10 g/m, EA = 3 N, α = 0.1 s, 4 lumped elements. EA is
deliberately soft so that explicit RK4 stays affordable: the highest element frequency is
ω ≈ 2 c n / l (c = √(EA/ρ) ≈ 17 m/s, n elements), 0.35 rad/s at 400 m; at 1 km the gravity-gradient
tension 3 n² μ l ≈ 0.16 N stretches it by 5 %. The time grid follows the naive length profile, dt ∝ l
with ω dt = 1.2 (`time_grid`); the optimised length stays within a factor 2 of the naive one
(`LENGTH_FACTOR`, a tanh bound), so ω dt ≤ 2.4 < 2.83 (RK4's imaginary-axis limit) for every candidate.

Retrieval from l₀ = 1 km to l₁ = 400 m in T = one orbit (5828 s), the platform reel rate-driven
(s̈_P = −l̈, the subsatellite's reel locked), starting on the local vertical at rest in LVLH with a 2°
out-of-plane libration (the residual of a deployment; in-plane 0°). The naive law is exponential
retrieval on a rest-to-rest clock: log l(t) = log l₀ + log(l₁/l₀) S(t/T), S(τ) = 10τ³ − 15τ⁴ + 6τ⁵ (zero
rate at both ends). The optimised law adds β tanh(p/β), p = Σ_k c_k (1 − cos 2πk t/T)/k² (k = 1..K,
β = log 2) to log l: zero value and rate at both ends, so every candidate starts and stops at rest at the
same lengths (l(T) = l₁ exactly). The reel follows the profile open loop (s̈_P from its closed-form l̈).
Why 400 m in one orbit: a faster retrieval swings the naive law over (1 km -> 250 m in one orbit: 50°
in-plane with a slack tether, and Adam then wanders into tether wrap-arounds), and 1 km -> 100 m at a
safe rate takes ~3 orbits and ~9000 RK4 steps, beyond a 1-2 minute default (`--l-end 100 --orbits 3`).

Libration of the chord d = r_M − r_P in LVLH (`jaxsoa.systems.orbit.libration_angles`): in-plane
θ = atan2(d_y, d_x) from the local vertical in the orbit plane, out-of-plane φ = asin(d_z/|d|); rates by `jax.jvp` of
the same map. Loss: the final libration amplitude², θ² + (θ̇/√3n)² + φ² + (φ̇/2n)² at T (√3 n and 2 n:
the small in-plane and out-of-plane libration frequencies, so each pair is an amplitude²), plus 1e-4 Σ c².
Retrieval pumps libration: the Coriolis term 2 (l̇/l)(θ̇ + n) drives θ directly, while φ only feels the
parametric term 2 (l̇/l) φ̇ (its energy grows unless the reel pulls when φ̇ ≈ 0). The length law
therefore controls θ strongly and φ weakly: on the default problem Adam removes the in-plane libration
and leaves the (amplified) out-of-plane one. Gradients from `jax.value_and_grad` through the whole
rollout, optax's Adam.

Writes trajopt_tether.png (length, in-plane and out-of-plane libration and tension vs time, naive vs
optimised; loss curve), trajopt_tether.json and prints a table.

Saving and reruns: both files are written atomically once the optimisation is done. The optimisation
is checkpointed to trajopt_tether.checkpoint.npz in --out (coefficients, Adam's state, the iteration
count, the loss history; atomically, every 10 iterations, at the last one and at Ctrl-C, which exits
130): a rerun with the same settings resumes from the iteration saved (it prints which) and ends with
the same result as an uninterrupted run; the checkpoint is removed once trajopt_tether.json is written.
trajopt_tether.json and the checkpoint record every setting and the sources' fingerprint; an --out
holding either of other settings is refused (exit 2, naming the settings that differ) unless
--overwrite is given (a checkpoint of the same settings is resumed even then); a finished run's
settings are recomputed and replaced. When stderr is not a terminal, a progress line is printed every 30 s.
"""

import dataclasses
import pathlib
import sys

import jax
import jax.numpy as jnp
import matplotlib
import numpy as np
import optax

from experiments._checkpoint import CHECKPOINT_EVERY, Checkpoint, checkpoint_note, descend
from experiments._common import (
    Record,
    interruptible,
    markdown_table,
    run_command,
    save_figure,
    write_json,
)
from jaxsoa.systems import orbit as orb
from jaxsoa.systems.tether.coupling import rk4_step_dumbbell
from jaxsoa.systems.tether.fem import element_strain, element_tension, straight_state, tether_params
from jaxsoa.systems.tether.reel_control import chord_libration
from jaxsoa.systems.tether.reels import tether_inputs

matplotlib.use("Agg")
import matplotlib.pyplot as plt

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


def optimise(problem: Problem, times, iters, lr, progress=True, checkpoint=None, every=CHECKPOINT_EVERY):
    """Adam on the coefficients from zero (the naive law), or from the iteration saved in `checkpoint`
    (`experiments._checkpoint.descend`); returns (coeffs, loss history (iters + 1,), seconds)."""
    value_and_grad = jax.jit(jax.value_and_grad(lambda c, ts: loss_fn(problem, c, ts), has_aux=True))

    def loss_and_grad(coeffs):
        (loss, _), grad = value_and_grad(coeffs, times)
        return loss, grad

    coeffs = jnp.zeros(problem.harmonics, jnp.float64)
    return descend(loss_and_grad, coeffs, optax.adam(lr), iters, checkpoint, every, "trajopt_tether", progress)


RECORD = "trajopt_tether.json"
CHECKPOINT = "trajopt_tether.checkpoint.npz"


def settings(iters=60, harmonics=6, orbits=1.0, lr=0.02, l_start=1000.0, l_end=400.0):
    """Every setting of the run, as recorded in trajopt_tether.json."""
    return dict(iters=iters, harmonics=harmonics, orbits=orbits, lr=lr, l_start=l_start, l_end=l_end)


def run(out_dir, iters=60, harmonics=6, orbits=1.0, lr=0.02, l_start=1000.0, l_end=400.0, progress=True,
        overwrite=False, checkpoint_every=CHECKPOINT_EVERY):
    """Optimise (resuming from the checkpoint in `out_dir` of the same settings), roll out both laws, plot;
    returns the table rows (one per law). Refuses an `out_dir` holding results or a checkpoint of other
    settings unless `overwrite` (module doc)."""
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    record = Record(out_dir / RECORD, settings(iters, harmonics, orbits, lr, l_start, l_end), overwrite)
    checkpoint = Checkpoint(out_dir / CHECKPOINT, record.settings, overwrite)
    problem = Problem(l_start=l_start, l_end=l_end, orbits=orbits, harmonics=harmonics)
    times = jnp.asarray(time_grid(problem))
    coeffs, losses, seconds = optimise(problem, times, iters, lr, progress, checkpoint, checkpoint_every)
    simulate = jax.jit(lambda c: rollout(problem, c, times))
    rows, curves = [], {}
    dt = np.diff(np.asarray(times))
    for name, c in {"naive": jnp.zeros_like(coeffs), "optimised": coeffs}.items():
        lib, history = jax.tree.map(np.asarray, simulate(c))
        if not all(np.all(np.isfinite(v)) for v in history.values()):
            raise FloatingPointError(f"the {name} rollout diverged (non-finite samples)")
        curves[name] = history
        omega_dt = stiffness_rate(problem, history["l"][:-1]) * COURANT * dt
        rows.append({"law": name, "final_amplitude_deg": float(np.rad2deg(np.sqrt(libration_amplitude2(lib)))),
                     "theta_deg": float(np.rad2deg(lib[0])), "phi_deg": float(np.rad2deg(lib[1])),
                     "theta_dot_over_n": float(lib[2] / N_ORBIT), "phi_dot_over_n": float(lib[3] / N_ORBIT),
                     "max_abs_theta_deg": float(np.rad2deg(np.abs(history["theta"]).max())),
                     "min_tension_N": float(history["tension_min"].min()),
                     "max_tension_N": float(history["tension"].max()),
                     "final_length_error_m": float(history["l"][-1] - l_end), "max_omega_dt": float(omega_dt.max()),
                     "loss": float(objective(problem, c, lib))})
    plot(out_dir / "trajopt_tether.png", curves, losses, seconds)
    summary = {"settings": record.settings, "rows": rows,
               "coeffs": np.asarray(coeffs).tolist(), "iters": iters, "seconds": seconds,
               "steps": len(dt), "problem": dataclasses.asdict(problem), "loss_curve": losses.tolist()}
    write_json(out_dir / RECORD, summary)
    checkpoint.remove()                                  # the results are written: nothing left to resume
    print(markdown_table(("law", "final amplitude [deg]", "θ [deg]", "φ [deg]", "θ̇/n", "φ̇/n", "max |θ| [deg]",
                          "tension min / max [N]", "l(T) − l₁ [m]", "max ω dt"),
                         ((r["law"], f"{r['final_amplitude_deg']:.3g}", f"{r['theta_deg']:.3g}", f"{r['phi_deg']:.3g}",
                           f"{r['theta_dot_over_n']:.3g}", f"{r['phi_dot_over_n']:.3g}",
                           f"{r['max_abs_theta_deg']:.3g}", f"{r['min_tension_N']:.3g} / {r['max_tension_N']:.3g}",
                           f"{r['final_length_error_m']:.2g}", f"{r['max_omega_dt']:.2f}") for r in rows)))
    print(f"optimised in {seconds:.1f} s ({iters} Adam steps, {len(dt)} RK4 steps per rollout); "
          f"wrote {out_dir / 'trajopt_tether.png'}, trajopt_tether.json")
    return rows


def plot(path, curves, losses, seconds):
    fig, axes = plt.subplots(1, 4, figsize=(19, 4))
    for name, h in curves.items():
        t = h["t"] / (2 * np.pi / N_ORBIT)
        ls = "-" if name == "optimised" else ":"
        axes[0].plot(t, h["l"], ls, label=name)
        axes[1].plot(t, np.rad2deg(h["theta"]), ls, color="C0", label=f"θ in-plane ({name})")
        axes[1].plot(t, np.rad2deg(h["phi"]), ls, color="C1", label=f"φ out-of-plane ({name})")
        axes[2].plot(t, h["tension"], ls, label=name)
    axes[0].set(xlabel="t [orbits]", ylabel="deployed length l [m]", title="retrieval profile")
    axes[1].set(xlabel="t [orbits]", ylabel="libration [deg]", title="libration (dotted: naive)")
    axes[2].set(xlabel="t [orbits]", ylabel="max element tension [N]", title="tension")
    for ax in axes[:3]:
        ax.legend(fontsize=7)
    axes[3].semilogy(losses)
    axes[3].set(xlabel="Adam iteration", ylabel="loss [rad²]", title=f"optimisation ({seconds:.1f} s)")
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)


@interruptible(checkpoint_note(CHECKPOINT))
def main(argv=None):
    jax.config.update("jax_enable_x64", True)
    return run_command(run, __doc__, argv, "outputs/trajopt_tether", ("--iters", 60, "Adam iterations"),
                ("--harmonics", 6, "cosine harmonics K of log l"), ("--orbits", 1.0, "retrieval time T in orbits"),
                ("--lr", 0.02, "Adam learning rate"), ("--l-start", 1000.0, "initial deployed length l₀ [m]"),
                ("--l-end", 400.0, "final deployed length l₁ [m]"),
                out_help="output folder (default outputs/trajopt_tether)", record=(RECORD, settings))


if __name__ == "__main__":
    sys.exit(main())
