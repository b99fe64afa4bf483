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
from experiments.trajopt_tether_problem import (
    COURANT,
    N_ORBIT,
    Problem,
    libration_amplitude2,
    loss_fn,
    objective,
    rollout,
    stiffness_rate,
    time_grid,
)

matplotlib.use("Agg")
import matplotlib.pyplot as plt


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
