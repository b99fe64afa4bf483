"""Spin-up of a flexible cantilever (Kane, Ryan and Banerjee 1987): the hub angle is prescribed to
rise smoothly to a constant rate Ω,

    θ(t) = Ω/T_s (t²/2 + (T_s/2π)² (cos(2πt/T_s) − 1))   for t < T_s,   Ω (t − T_s/2) after,

and the beam (L = 10 m, ρA = 1.2 kg/m, EI = 14 000 N m², hub radius 0, Ω = 6 rad/s, T_s = 15 s)
deflects. Three models of the tip deflection w(L) along the hub's y axis:

* assumed modes WITHOUT geometric stiffening (the classical linear model): diverges once θ̇
  exceeds the first cantilever frequency (3.80 rad/s), since its stiffness is K − θ̇² M_ee;
* assumed modes WITH geometric stiffening (`jaxsoa.systems.flexible.modal`, s = 1): stays bounded;
* the rigid-finite-element flexible link of `jaxsoa.systems.flexible.rfem` run through jaxsoa's RNEA and
  CRBA with the hub joint driven (`forward_dynamics_driven`): exact kinematics, so it stiffens
  by itself and must agree with the stiffened modal model.

    python -m experiments.flexible_spinup [--out outputs/flexible_spinup] [--duration 20]
        [--segments 10] [--modes 4] [--dt 0.002]

RK4 with the hub's prescribed motion evaluated at every stage; a step with ω_max dt > 2.7 (RK4
unstable for the model's highest frequency) is refused, so any divergence is physical. The
linear model's state is frozen (and reported as diverged) once its tip deflection exceeds L. Writes
flexible_spinup.png, flexible_spinup.md (table of peak and final deflections) and
flexible_spinup.csv (t and the three tip deflections, NaN after divergence).

Saving and reruns: every file is written atomically; flexible_spinup.json records the settings
(duration, segments, modes, dt) and each model's tip series as soon as that model is simulated.
Rerunning with the same settings skips the models already done (it prints which) and gives the same
plot and tables as an uninterrupted run; an --out holding results of other settings is refused (exit
2, naming the settings that differ) unless --overwrite is given. Ctrl-C exits 130 keeping the
finished models.
"""

import pathlib
import sys
import time

import jax
import jax.numpy as jnp
import matplotlib
import numpy as np

from experiments._common import (
    RESUME_NOTE,
    Record,
    add_overwrite,
    check_out,
    command_parser,
    exit_status,
    interruptible,
    open_atomic,
    open_record,
    positive_float,
    positive_int,
    report_resume,
    save_figure,
    write_text,
)
from jaxsoa.integrators.steps import ode_rk4_step
from jaxsoa.multibody.joints import JointType
from jaxsoa.systems.flexible import rfem as flexible
from jaxsoa.systems.flexible.modal import (
    hub_beam_modes,
    modal_driven_dynamics,
    modal_tip_deflection,
    rotating_frequencies,
)

matplotlib.use("Agg")
import matplotlib.pyplot as plt

KANE_BEAM = flexible.Beam(length=10.0, bending_stiffness=14000.0, mass_per_length=1.2, n_segments=10)
OMEGA, T_SPIN = 6.0, 15.0


def hub_motion(t, omega=OMEGA, t_spin=T_SPIN):
    """(θ, θ̇, θ̈) of the Kane–Ryan–Banerjee spin-up profile at time t (traced)."""
    c = t_spin / (2 * jnp.pi)
    ramp = (omega / t_spin * (t ** 2 / 2 + c ** 2 * (jnp.cos(t / c) - 1)),
            omega / t_spin * (t - c * jnp.sin(t / c)), omega / t_spin * (1 - jnp.cos(t / c)))
    steady = (omega * (t - t_spin / 2), omega, 0.0 * t)
    return tuple(jnp.where(t < t_spin, r, s) for r, s in zip(ramp, steady, strict=True))


def hub_beam_chain(beam, hub_inertia=1.0, hub_radius=0.0, dtype=jnp.float64):
    """`FlexibleModel` of a hub (link 0, revolute about z, J_h about z) carrying `beam` (link 1,
    welded at (r, 0, 0)) in zero gravity: the rigid-finite-element twin of `hub_beam_modes`."""
    tree = dict(parent=np.array([-1, 0]), joint_types=np.array([JointType.REVOLUTE, JointType.FIXED]),
                joint_axis=np.array([[0.0, 0.0, 1.0]] * 2), placement_rotation=np.stack([np.eye(3)] * 2),
                placement_translation=np.array([[0.0, 0.0, 0.0], [hub_radius, 0.0, 0.0]]),
                mass=np.array([1.0, 1.0]), com=np.zeros((2, 3)),
                inertia_com=np.stack([np.diag([hub_inertia / 2, hub_inertia / 2, hub_inertia])] * 2),
                link_names=("hub", "beam"), link_joint_names=("hub_joint", "beam_clamp"))
    return flexible.flexible_model(tree, {1: beam}, gravity=(0.0, 0.0, 0.0), dtype=dtype)


RK4_LIMIT = 2.7          # RK4's stability interval on the imaginary axis is |ω dt| < 2√2 ≈ 2.83


def _check_step(omega_max, dt, what):
    """Refuse a step that RK4 cannot integrate stably (so a divergence is always physical)."""
    if omega_max * dt > RK4_LIMIT:
        raise ValueError(f"field 'dt' = {dt}: {what} has ω_max = {omega_max:.1f} rad/s, "
                         f"ω_max dt = {omega_max * dt:.2f} > {RK4_LIMIT} (RK4 unstable)")


def _rollout(deriv, tip, x0, dt, n_steps, limit):
    """RK4 scan; returns tip deflections (n_steps + 1,); the state freezes once |tip| > limit."""
    def body(x, k):
        x_next = ode_rk4_step(deriv, k * dt, x, dt)
        frozen = jnp.abs(tip(x)) > limit
        x_next = jax.tree_util.tree_map(lambda a, b: jnp.where(frozen, a, b), x, x_next)
        return x_next, tip(x_next)

    _, tips = jax.lax.scan(body, x0, jnp.arange(n_steps, dtype=jnp.float64))
    return jnp.concatenate([tip(x0)[None], tips])


def simulate_modal(n_modes, geometric_stiffening, duration, dt, beam=KANE_BEAM):
    """Tip deflection (n_steps + 1,) of the assumed-modes model under the prescribed spin-up."""
    mm = hub_beam_modes(beam, n_modes, hub_inertia=1.0, geometric_stiffening=geometric_stiffening)
    _check_step(float(rotating_frequencies(hub_beam_modes(beam, n_modes, 1.0), OMEGA)[-1]), dt,
                f"the {n_modes}-mode model")

    def deriv(t, x):
        eta, eta_dot = x
        _, theta_dot, theta_ddot = hub_motion(t)
        return eta_dot, modal_driven_dynamics(mm, eta, eta_dot, theta_dot, theta_ddot)

    x0 = (jnp.zeros(n_modes), jnp.zeros(n_modes))
    run = jax.jit(lambda x: _rollout(deriv, lambda s: modal_tip_deflection(mm, s[0]), x, dt,
                                     round(duration / dt), beam.length))
    return np.asarray(run(x0))


def simulate_chain(n_segments, duration, dt, beam=KANE_BEAM):
    """Tip deflection of the rigid-finite-element link, hub joint driven, via RNEA + CRBA."""
    fm = hub_beam_chain(flexible.Beam(beam.length, beam.bending_stiffness, beam.mass_per_length, n_segments))
    _check_step(float(flexible.natural_frequencies(fm, jnp.zeros(fm.model.nq))[-1]), dt,
                f"the {n_segments}-element chain")

    def state(t, x):
        theta, theta_dot, theta_ddot = hub_motion(t)
        return jnp.concatenate([theta[None], x[0]]), jnp.concatenate([theta_dot[None], x[1]]), theta_ddot

    def deriv(t, x):
        q, v, theta_ddot = state(t, x)
        return x[1], flexible.forward_dynamics_driven(fm, q, v, theta_ddot[None], (0,))[1:]

    def tip(x):
        return flexible.tip_position(fm, jnp.concatenate([jnp.zeros(1), x[0]]))[1]

    x0 = (jnp.zeros(n_segments), jnp.zeros(n_segments))
    run = jax.jit(lambda x: _rollout(deriv, tip, x, dt, round(duration / dt), beam.length))
    return np.asarray(run(x0))


RECORD = "flexible_spinup.json"


def settings(duration=20.0, n_segments=10, n_modes=4, dt=0.002):
    """The settings the simulations depend on, as recorded in flexible_spinup.json."""
    return dict(duration=duration, segments=n_segments, modes=n_modes, dt=dt)


def simulate_case(simulate, t):
    """Run one model: {"row": its table row but the name, "tip": the tip series, NaN after divergence}."""
    start = time.perf_counter()
    tip = simulate()
    seconds = time.perf_counter() - start
    diverged = np.abs(tip) > KANE_BEAM.length
    t_div = float(t[np.argmax(diverged)]) if diverged.any() else None
    masked = np.where(diverged, np.nan, tip)
    return {"row": dict(peak_abs_tip_m=float(np.nanmax(np.abs(masked))),
                        final_tip_m=float(tip[-1]) if t_div is None else None, diverged_at_s=t_div, wall_s=seconds),
            "tip": masked}


def run(out_dir, duration=20.0, n_segments=10, n_modes=4, dt=0.002, progress=True, overwrite=False):
    """Simulate the three models, each saved as it finishes and skipped when already done with the
    same settings (module doc); write the plot and the table; return the table rows."""
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    record = Record(out_dir / RECORD, settings(duration, n_segments, n_modes, dt), overwrite)
    t = np.arange(round(duration / dt) + 1) * dt
    cases = [("assumed modes, linear (no stiffening)", lambda: simulate_modal(n_modes, False, duration, dt)),
             ("assumed modes, geometric stiffening", lambda: simulate_modal(n_modes, True, duration, dt)),
             (f"rigid finite elements, N = {n_segments} (jaxsoa RNEA/CRBA)",
              lambda: simulate_chain(n_segments, duration, dt))]
    report_resume("flexible_spinup", [name for name, _ in cases if record.done(name)], len(cases))
    for name, simulate in cases:
        if not record.done(name):
            record.add(name, simulate_case(simulate, t))
            if progress:
                print(f"{name}: {record.items[name]['row']['wall_s']:.1f} s", flush=True)
    rows = [dict(model=name, **record.items[name]["row"]) for name, _ in cases]
    tips = {name: np.asarray(record.items[name]["tip"], float) for name, _ in cases}
    stiff, chain = (tips[cases[1][0]], tips[cases[2][0]])
    rows.append(dict(model="max |chain − stiffened modal|", peak_abs_tip_m=float(np.max(np.abs(stiff - chain))),
                     final_tip_m=None, diverged_at_s=None, wall_s=0.0))
    header = "t," + ",".join(f'"{name}"' for name in tips)
    with open_atomic(out_dir / "flexible_spinup.csv") as f:
        np.savetxt(f, np.column_stack([t, *tips.values()]), delimiter=",", header=header, comments="")
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for name, tip in tips.items():
        ax.plot(t, tip, label=name)
    ax.set(xlabel="t [s]", ylabel="tip deflection w(L) [m]", ylim=(-1.0, 0.5),
           title=f"Spin-up to Ω = {OMEGA} rad/s in T_s = {T_SPIN} s (Kane, Ryan, Banerjee 1987)")
    ax.legend()
    fig.tight_layout()
    save_figure(fig, out_dir / "flexible_spinup.png", dpi=120)
    plt.close(fig)
    lines = ["| model | peak abs tip [m] | final tip [m] | diverged at [s] | wall [s] |", "|---|---|---|---|---|"]
    for r in rows:
        final = "-" if r["final_tip_m"] is None else f"{r['final_tip_m']:.5f}"
        div = "-" if r["diverged_at_s"] is None else f"{r['diverged_at_s']:.2f}"
        lines.append(f"| {r['model']} | {r['peak_abs_tip_m']:.5f} | {final} | {div} | {r['wall_s']:.1f} |")
    write_text(out_dir / "flexible_spinup.md", "\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"wrote flexible_spinup.png, flexible_spinup.md, flexible_spinup.csv and {RECORD} under {out_dir.resolve()}")
    return rows


@interruptible(RESUME_NOTE)
def main(argv=None):
    jax.config.update("jax_enable_x64", True)
    parser = command_parser(__doc__, "outputs/flexible_spinup", "folder for the plot and tables")
    parser.add_argument("--duration", type=positive_float, default=20.0, help="simulated time [s] (default 20)")
    parser.add_argument("--segments", type=positive_int, default=10,
                        help="rigid finite elements of the beam (default 10)")
    parser.add_argument("--modes", type=positive_int, default=4, help="assumed modes (default 4)")
    parser.add_argument("--dt", type=positive_float, default=0.002, help="RK4 step [s] (default 0.002)")
    add_overwrite(parser)
    args = parser.parse_args(argv)
    out = check_out(parser, args.out)
    open_record(parser, out / RECORD, settings(args.duration, args.segments, args.modes, args.dt), args.overwrite)
    return exit_status(run(args.out, args.duration, args.segments, args.modes, args.dt, overwrite=args.overwrite),
                       parser.prog)


if __name__ == "__main__":
    sys.exit(main())
