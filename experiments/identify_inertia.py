"""Inertial parameter identification on simulated, noisy excitation trajectories.

    python -m experiments.identify_inertia [--out outputs/identify] [--duration 20] [--systems ...]

Systems: the 7-DOF space arm with its hub welded to the world (`arm_fixed`) and free-floating
(`arm_floating`), sims/space_arm_7dof.py; the dual-arm spacecraft, 3-D variant with a free hub,
configuration 1 (`dual_arm`), sims/dual_arm_spacecraft.py. Zero gravity throughout.

Data. Each joint follows a Fourier reference q_j(t) = Σ_l A_jl sin(l ω_f t + ϕ_jl) (5 harmonics,
ω_f = 2π / 10 s, random amplitudes with Σ_l A_jl = `amplitude` rad, random phases), tracked by
computed torque with the true model (free-floating: `computed_torque_free_floating`, the hub free
and initially at rest), RK4 at dt = 10 ms, the torque held over each step. Every `stride`-th
state is a sample: q, v, the applied joint torques τ and the accelerations q̈ = ABA(q, v, τ) (hub
included). Noise: Gaussian on τ and on q̈ (hub too), each σ = `noise` × the coordinate's RMS over the
trajectory; q and v exact (filtered encoders). Free-floating systems add the hub rows of τ = Y θ with
target 0 (no wrench on the hub: the momentum-rate equations; jaxsoa.workflows.identification's module doc).

Fits (all in the base parameters β = θ_b + K θ_d of the structural identifiability analysis, a QR
of the regressor stacked over 100 random states): ordinary least squares (OLS); weighted least
squares (WLS, weights 1 / σ_j² from the OLS residual of each coordinate); log-Cholesky fit (GD:
Adam, L-BFGS, then Levenberg–Marquardt; every iterate a physical body; WLS weights), started from a
prior φ_true + `prior_sigma` N(0, 1) per log-Cholesky coordinate (m = e^{2α}: a mass is off by a
factor e^{2σ} ≈ 1.8 per standard deviation at σ = 0.3).

Reported per system and method: relative error ‖β̂ − β‖ / ‖β‖ of the base parameters (several true
β_i are zero, so no per-parameter ratio); RMS joint-torque prediction error on a held-out trajectory
(another random reference, noise-free), relative to the RMS torque; the weighted training loss;
identifiability: parameters p, structural rank r, the training regressor's numerical rank and the
condition number of its base columns (unit-normed). Plots: identify_loss.png (GD loss per step,
the stages marked) and identify_heldout.png (held-out torque of joint 2: truth, prior, WLS, GD).
Table: identify_inertia.json / .md.

Saving and reruns: every file is written atomically; identify_inertia.json records the settings (all
options but --systems) and each system's rows and curves as soon as that system is done. Rerunning
with the same settings skips the systems already done (it prints which) and gives the same tables and
plots as an uninterrupted run; an --out holding results of other settings is refused (exit 2, naming
the settings that differ) unless --overwrite is given. Ctrl-C exits 130 keeping the finished systems.
When stderr is not a terminal, a progress line is printed every 30 s. Each system prints a line as
it starts, one when its data are simulated and least squares fitted, one after each stage of the
log-Cholesky fit (its steps, seconds, last loss: the stages run as separate compiled calls, giving the
same fit as one), and one when it is done, with its time.
"""

import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from experiments._common import (
    RESUME_NOTE,
    Record,
    interruptible,
    markdown_table,
    report_resume,
    run_command,
    save_figure,
    start_run,
    write_text,
)
from experiments._progress import progress
from experiments.identify_excitation import DT, add_noise, joint_dofs, simulate, stacked_regressor
from jaxsoa.algorithms import regressor
from jaxsoa.workflows import identification as identify
from sims import dual_arm_spacecraft, space_arm_7dof

SYSTEMS = {
    "arm_fixed": lambda: space_arm_7dof.build(False),
    "arm_floating": lambda: space_arm_7dof.build(True),
    "dual_arm": lambda: dual_arm_spacecraft.model(1, floating=True),
}

_fit = jax.jit(identify.fit_log_cholesky, static_argnames=("adam_steps", "lbfgs_steps", "gauss_newton_steps"))
STAGES = (("adam_steps", "Adam"), ("lbfgs_steps", "L-BFGS"), ("gauss_newton_steps", "Levenberg–Marquardt"))


def staged_fit(phi0, Y, target, weights, steps, say=lambda text: None):
    """`identify.fit_log_cholesky` one stage at a time (Adam, L-BFGS, Levenberg–Marquardt; a stage of 0
    steps is skipped), calling ``say(text)`` after each with its steps, seconds and last loss: the same
    fit as one call, since each stage starts afresh from the φ the previous one reached (its optimiser
    state is its own); one compiled program per stage instead of one for all. Returns `identify.Fit`."""
    phi, losses = phi0, []
    for key, label in STAGES:
        if not steps[key]:
            continue
        start = time.perf_counter()
        result = jax.block_until_ready(_fit(phi, Y, target, weights, **{k: steps[k] if k == key else 0
                                                                         for k, _ in STAGES}))
        phi, last = result.phi, float(result.losses[-1])
        losses.append(result.losses)
        say(f"{label}: {steps[key]} steps in {time.perf_counter() - start:.1f} s (compile included), "
            f"loss {last:.3g} before the last step")
    return identify.Fit(phi, jnp.concatenate(losses) if losses else jnp.zeros(0, phi0.dtype))


def identify_system(name, seed, duration, stride, amplitude, noise, prior_sigma, steps, say=lambda text: None):
    """Simulate, fit by OLS / WLS / GD, evaluate; returns (rows, curves for the plots). ``say(text)``
    reports each stage as it ends (the simulation and least squares, each stage of the GD fit)."""
    start = time.perf_counter()
    model = SYSTEMS[name]()
    rng = np.random.default_rng(seed)
    theta_true = np.asarray(regressor.inertial_parameters(model)).reshape(-1)
    bp = identify.base_parameters(regressor.random_regressor(model, jax.random.key(seed), 100))
    beta_true = np.asarray(bp(theta_true))

    q, v, tau, a = simulate(model, rng, duration, stride, amplitude)
    tau_meas = add_noise(rng, tau, noise, joint_dofs(model))      # hub rows stay exactly zero
    a_meas = add_noise(rng, a, noise, np.arange(model.nv))
    Y = stacked_regressor(model, q, v, a_meas)
    Y_base, target = Y[:, bp.independent], tau_meas.reshape(-1)

    beta_ols = np.asarray(identify.least_squares(Y_base, target))
    weights = np.asarray(identify.residual_weights((Y_base @ beta_ols - target).reshape(tau.shape))).reshape(-1)
    weights = weights / weights.mean()
    beta_wls = np.asarray(identify.least_squares(Y_base, target, weights))
    phi_true = identify.log_cholesky_from_parameters(jnp.asarray(theta_true.reshape(-1, 10)))
    phi0 = phi_true + prior_sigma * jnp.asarray(rng.standard_normal(phi_true.shape))
    say(f"simulated {q.shape[0]} samples, OLS and WLS fitted ({time.perf_counter() - start:.1f} s); "
        "log-Cholesky fit:")
    result = staged_fit(phi0, jnp.asarray(Y), jnp.asarray(target), jnp.asarray(weights), steps, say)
    theta_gd = np.asarray(identify.parameters_from_log_cholesky(result.phi)).reshape(-1)
    theta_prior = np.asarray(identify.parameters_from_log_cholesky(phi0)).reshape(-1)

    q_h, v_h, tau_h, a_h = simulate(model, np.random.default_rng(seed + 1000), duration, stride, amplitude)
    Y_h = stacked_regressor(model, q_h, v_h, a_h)
    rows_h = (np.arange(tau_h.size).reshape(tau_h.shape)[:, joint_dofs(model)]).reshape(-1)
    truth = tau_h.reshape(-1)[rows_h]

    def heldout(beta):
        return (Y_h[:, bp.independent] @ beta)[rows_h]

    def loss(beta):
        return float(np.mean(weights * (Y_base @ beta - target) ** 2))

    identifiability = dict(system=name, parameters=int(theta_true.size), structural_rank=bp.rank,
                           trajectory_rank=identify.base_parameters(Y).rank,
                           condition_number=identify.condition_number(Y_base), samples=int(q.shape[0]))
    rows, predictions = [], {}
    for method, beta in (("prior", bp(theta_prior)), ("OLS", beta_ols), ("WLS", beta_wls), ("GD", bp(theta_gd))):
        beta = np.asarray(beta)
        predictions[method] = heldout(beta)
        rms = float(np.sqrt(np.mean((predictions[method] - truth) ** 2) / np.mean(truth**2)))
        rows.append(dict(identifiability, method=method,
                         base_error=float(np.linalg.norm(beta - beta_true) / np.linalg.norm(beta_true)),
                         heldout_torque_rms=rms, train_loss=loss(beta)))
    consistent = float(np.min(identify.physical_consistency(jnp.asarray(theta_gd.reshape(-1, 10)))))
    rows[-1]["min_pseudo_inertia_eig"] = consistent
    n_joints = len(joint_dofs(model))
    curves = dict(losses=np.asarray(result.losses), wls_loss=loss(beta_wls), steps=steps,
                  t=np.arange(q_h.shape[0]) * stride * DT, joint=1,
                  heldout={k: p.reshape(-1, n_joints)[:, 1] for k, p in predictions.items()}
                  | {"truth": truth.reshape(-1, n_joints)[:, 1]})
    return rows, curves


def plot(out, curves):
    import matplotlib.pyplot as plt

    names = list(curves)
    fig, axes = plt.subplots(1, len(names), figsize=(5 * len(names), 3.5), squeeze=False)
    for ax, name in zip(axes[0], names, strict=True):
        c = curves[name]
        ax.semilogy(np.asarray(c["losses"]), label="log-Cholesky fit")
        ax.axhline(c["wls_loss"], color="k", ls="--", label="WLS optimum (unconstrained)")
        edges = np.cumsum([c["steps"]["adam_steps"], c["steps"]["lbfgs_steps"]])
        for x in edges:
            ax.axvline(x, color="grey", lw=0.8)
        ax.set(title=f"{name}: Adam | L-BFGS | LM", xlabel="step", ylabel="weighted loss")
        ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, out / "identify_loss.png", dpi=110)
    plt.close(fig)
    fig, axes = plt.subplots(2, len(names), figsize=(5 * len(names), 6), squeeze=False, sharex="col")
    for top, bottom, name in zip(axes[0], axes[1], names, strict=True):
        c = curves[name]
        truth, held = np.asarray(c["heldout"]["truth"]), {k: np.asarray(v) for k, v in c["heldout"].items()}
        top.plot(c["t"], truth, color="0.6", lw=3, label="truth")
        for label in ("prior", "WLS", "GD"):
            top.plot(c["t"], held[label], lw=1, ls=":" if label == "prior" else "-", label=label)
        for label in ("WLS", "GD"):
            bottom.plot(c["t"], held[label] - truth, lw=1, label=f"{label} − truth")
        top.set(title=f"{name}: held-out torque, joint {c['joint'] + 1}", ylabel="τ [N m]")
        bottom.set(xlabel="t [s]", ylabel="prediction error [N m]")
        top.legend(fontsize=7)
        bottom.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, out / "identify_heldout.png", dpi=110)
    plt.close(fig)


COLUMNS = ("system", "method", "parameters", "structural_rank", "trajectory_rank", "condition_number",
           "base_error", "heldout_torque_rms", "train_loss")


def table(rows) -> str:
    return markdown_table(COLUMNS, ([f"{r[c]:.3g}" if isinstance(r[c], float) else r[c] for c in COLUMNS]
                                    for r in rows))


RECORD = "identify_inertia.json"


def settings(duration=20.0, stride=5, amplitude=1.0, noise=0.02, prior_sigma=0.3, adam_steps=500, lbfgs_steps=100,
             gauss_newton_steps=30, seed=0):
    """The settings a system's results depend on, as recorded in identify_inertia.json."""
    return dict(duration=duration, stride=stride, amplitude=amplitude, noise=noise, prior_sigma=prior_sigma,
                adam_steps=adam_steps, lbfgs_steps=lbfgs_steps, gauss_newton_steps=gauss_newton_steps, seed=seed)


def run(out_dir, systems=tuple(SYSTEMS), duration=20.0, stride=5, amplitude=1.0, noise=0.02, prior_sigma=0.3,
        adam_steps=500, lbfgs_steps=100, gauss_newton_steps=30, seed=0, overwrite=False):
    """Run the identification on `systems`, saving each system as it finishes and skipping those already
    done with the same settings (module doc); writes plots and tables into `out_dir`, returns the rows."""
    out = start_run(out_dir)
    steps = dict(adam_steps=adam_steps, lbfgs_steps=lbfgs_steps, gauss_newton_steps=gauss_newton_steps)
    record = Record(out / RECORD, settings(duration, stride, amplitude, noise, prior_sigma, seed=seed, **steps),
                    overwrite, summary=lambda items: {"rows": [r for n in SYSTEMS if n in items
                                                               for r in items[n]["rows"]]})
    report_resume("identify", [n for n in systems if record.done(n)], len(systems))
    todo = [n for n in systems if not record.done(n)]
    for k, name in enumerate(progress(todo, desc="identify", unit="system")):
        start = time.perf_counter()
        print(f"identify {name} ({k + 1} of {len(todo)}): simulating {duration:g} s, then OLS, WLS and the "
              "log-Cholesky fit", flush=True)
        system_rows, curves = identify_system(name, seed, duration, stride, amplitude, noise, prior_sigma, steps,
                                              say=lambda text, name=name: print(f"identify {name}: {text}",
                                                                                flush=True))
        record.add(name, {"rows": system_rows, "curves": curves})
        print(f"identify {name}: done in {time.perf_counter() - start:.1f} s, saved in {RECORD}", flush=True)
    rows = [r for name in systems for r in record.items[name]["rows"]]
    plot(out, {name: record.items[name]["curves"] for name in systems})
    text = table(rows)
    print(text)
    write_text(out / "identify_inertia.md", text + "\n")
    print(f"wrote identify_inertia.md, identify_inertia.json, identify_loss.png and identify_heldout.png under "
          f"{out.resolve()}")
    return rows


@interruptible(RESUME_NOTE)
def main(argv=None):
    return run_command(run, __doc__, argv, "outputs/identify",
                ("--systems", dict(nargs="+", choices=sorted(SYSTEMS), default=list(SYSTEMS),
                                   help="systems to identify (default all)")),
                ("--duration", 20.0, "simulated time per trajectory [s]"),
                ("--stride", 5, "RK4 steps between samples (dt = 10 ms)"),
                ("--amplitude", 1.0, "joint reference amplitude [rad]"),
                ("--noise", 0.02, "τ and q̈ noise σ, fraction of their RMS", "nonnegative"),
                ("--prior-sigma", 0.3, "prior offset σ in log-Cholesky units", "nonnegative"),
                ("--adam-steps", 500, "Adam steps", "nonnegative"),
                ("--lbfgs-steps", 100, "L-BFGS steps", "nonnegative"),
                ("--gauss-newton-steps", 30, "Levenberg–Marquardt steps", "nonnegative"),
                ("--seed", 0, "random seed", "nonnegative"),
                record=(RECORD, lambda systems, *values: settings(*values)))


if __name__ == "__main__":
    sys.exit(main())
