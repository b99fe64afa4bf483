"""Convergence of the reeling tether's energy balance and momenta, "nodal" against "energy_consistent"
(jaxsoa.systems.tether; derivation and the numbers in docs/tether.md §5).

    python -m experiments.tether_convergence [--out outputs/tether_convergence] [--elements 4,8,16,32,64]
                                             [--horizon 2] [--dt 0.002] [--dt-elements 16]

Cases (two point masses on a tether, free space, RK4 of `tether_dynamics`, the work
W = ∫ (P_reel − P_Carnot − P_viscous + P_strain) dt integrated by the same RK4):

* deployment: 3 kg and 2 kg spinning at 1.5 rad/s about their centre of mass on 10 m of tether (EA = 1 kN,
  ρ = 0.5 kg/m), a transverse wave on it, the first reel paying out at 0.5 m/s (rate-driven): taut;
* spin deployment: the same, its reel free (force-driven, inertia 1 kg, no control force, no damping):
  the centrifugal tension pulls 14 m out in 2 s; the reel does no work; taut;
* retrieval: the same, its reel reeling in at 0.5 m/s (rate-driven): taut, spinning up;
* deployment (slack) and pay-out (slack): the two cases of docs/tether.md §5 (`tests/systems/tether/test_fem.py`;
  the pay-out over ¾ of the horizon), which go slack for most of the run (a non-smooth problem).

For each case, formulation and mesh n (`--elements`, step dt · min(1, 16/n)): the energy-balance residual
|E(T) − E(0) − W| / |W|, and the drift of linear and angular momentum |P(T) − P(0)| / Σ|p| (Σ|p|: the sum of
the parts' momentum magnitudes at t = 0). Then at n = `--dt-elements` the residual against dt. Writes
tether_convergence.json, tether_convergence.md (the tables) and tether_convergence.png.

Saving and reruns: every file is written atomically; tether_convergence.json records the settings
(elements, horizon, dt, dt-elements) and each case's measurements as soon as that case is done.
Rerunning with the same settings skips the cases already done (it prints which) and gives the same
tables and plot as an uninterrupted run; an --out holding results of other settings is refused (exit
2, naming the settings that differ) unless --overwrite is given. Ctrl-C exits 130 keeping the
finished cases.
"""

import argparse
import dataclasses
import functools
import itertools
import pathlib
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
from jaxsoa.integrators.steps import ode_rk4_step
from jaxsoa.systems.tether.fem import FORMULATIONS, element_strain, element_tension, straight_state, tether_params
from jaxsoa.systems.tether.reels import energy_rates, system_energy, system_momentum, tether_dynamics, tether_inputs

CASES = ("deployment", "spin deployment", "retrieval", "deployment (slack)", "pay-out (slack)")
CHUNK = 250                                  # RK4 steps per compiled call


def spin_case(n, formulation, kind, lumped=False):
    """(params, inputs, state): end masses 3 kg (P) and 2 kg (M) on 10 m of tether (ρ = 0.5 kg/m, EA = 1 kN,
    α = 0), spinning at 1.5 rad/s about their drifting centre of mass, stretched to the quasi-static
    tension, a transverse wave 0.3 sin(π s̄) ŷ + 0.6 sin(π s̄) ẑ m/s on the material. kind: "deploy" (P pays
    out at 0.5 m/s), "passive" (P's reel free, inertia 1 kg) or "retrieve" (P reels in at 0.5 m/s)."""
    m_P, m_M, rho, EA, l0, omega = 3.0, 2.0, 0.5, 1000.0, 10.0, 1.5
    mu = m_P * m_M / (m_P + m_M)
    reel_inertia = 1.0
    # passive: body and reel accelerate together, N = ω² l μ m_r/(μ + m_r); rate-driven: N = ω² l μ
    tension = omega**2 * l0 * mu * (reel_inertia / (mu + reel_inertia) if kind == "passive" else 1.0)
    eps = tension / EA
    params = tether_params(rho, EA, 0.0, 40.0, n, lumped=lumped, formulation=formulation)
    d = l0 * (1 + eps)
    axis = np.array([1.0, 0.0, 0.0])
    r_P, r_M = -m_M / (m_P + m_M) * d * axis, m_P / (m_P + m_M) * d * axis
    spin, drift = np.array([0.0, 0.0, omega]), np.array([0.1, -0.2, 0.05])
    s_dot = {"deploy": (-0.5, 0.0), "passive": (0.0, 0.0), "retrieve": (0.5, 0.0)}[kind]
    separation = (s_dot[1] - s_dot[0]) * (1 + eps)                    # the ends recede as the tether pays out
    v_P = drift + np.cross(spin, r_P) - m_M / (m_P + m_M) * separation * axis
    v_M = drift + np.cross(spin, r_M) + m_P / (m_P + m_M) * separation * axis
    state = straight_state(params, r_P, r_M, (20.0, 30.0), v_P=v_P, v_M=v_M, s_dot=s_dot)
    sbar = np.linspace(0.0, 1.0, n + 1)[:, None]
    wave = jnp.asarray(np.sin(np.pi * sbar) * np.array([0.0, 0.3, 0.6]))       # the same on u and on ∂_t r̄
    state = dataclasses.replace(state, v=state.v + wave)
    inputs = tether_inputs(end_mass=(m_P, m_M), reel_inertia=(reel_inertia, 1.0),
                           force_driven=(kind == "passive", False))
    return params, inputs, state


def slack_case(n, formulation, kind):
    """The two reeling cases of docs/tether.md §5: kind "deploy" (P and M pay out at 0.4 and 0.6 m/s while
    the masses separate) or "passive" (M flung sideways at 3 m/s from a free reel at P)."""
    params = tether_params(0.5, 500.0, 0.0, 30.0, n, formulation=formulation)
    if kind == "deploy":
        state = straight_state(params, [0.0, 0.0, 0.0], [5.0, 0.5, 0.0], [5.0, 10.0], v_P=[-0.5, 0.1, 0.0],
                               v_M=[0.5, 0.2, 0.1], s_dot=(-0.4, 0.6))
        return params, tether_inputs(end_mass=(3.0, 2.0)), state
    state = straight_state(params, [0.0, 0.0, 0.0], [5.1, 0.0, 0.0], [5.0, 10.0], v_M=[0.0, 3.0, 0.0])
    return params, tether_inputs(end_mass=(20.0, 2.0), reel_inertia=(0.5, 1.0), force_driven=(True, False)), state


def build_case(case, n, formulation):
    kinds = {"deployment": ("spin", "deploy"), "spin deployment": ("spin", "passive"),
             "retrieval": ("spin", "retrieve"), "deployment (slack)": ("slack", "deploy"),
             "pay-out (slack)": ("slack", "passive")}
    family, kind = kinds[case]
    return (spin_case if family == "spin" else slack_case)(n, formulation, kind)


@functools.partial(jax.jit, static_argnames=("steps",))
def rollout_chunk(params, inputs, state, work, min_tension, dt, steps=CHUNK):
    """`steps` RK4 steps of (state, W) with W' = P_reel − P_Carnot − P_viscous + P_strain; running min tension."""
    def rate(t, x):
        tether, _ = x
        return tether_dynamics(params, tether, inputs), energy_rates(params, tether, inputs).total

    def body(carry, _):
        x, low = carry
        x = ode_rk4_step(rate, 0.0, x, dt)
        return (x, jnp.minimum(low, jnp.min(element_tension(params, *element_strain(params, x[0])[:2])))), None

    ((state, work), min_tension), _ = jax.lax.scan(body, ((state, work), min_tension), None, length=steps)
    return state, work, min_tension


def momentum_scale(params, inputs, state):
    """Σ |p| over the end bodies (with stored tether) and the deployed material at t = 0 (kg m/s)."""
    m_body = inputs.end_mass + params.rho * jnp.stack([state.s[0], params.length - state.s[1]])
    ends = jnp.sum(m_body * jnp.linalg.norm(state.v[jnp.array([0, -1])], axis=1))
    return float(ends + params.rho * (state.s[1] - state.s[0]) * jnp.mean(jnp.linalg.norm(state.v, axis=1)))


def measure(case, formulation, n, dt, horizon):
    """One rollout: residual, work, momentum drifts, min tension, wall time (the slack pay-out runs ¾ of
    `horizon`, the 1.5 s of docs/tether.md §5 at the default)."""
    horizon = 0.75 * horizon if case == "pay-out (slack)" else horizon
    params, inputs, state = build_case(case, n, formulation)
    E0 = float(system_energy(params, state, inputs))
    P0, H0 = (np.asarray(x) for x in system_momentum(params, state, inputs))
    scale = momentum_scale(params, inputs, state)
    r_scale = scale * float(jnp.max(jnp.linalg.norm(state.r, axis=1)))
    steps = round(horizon / dt)
    work, low, x = jnp.zeros(()), jnp.asarray(np.inf), state
    start = time.perf_counter()
    for k in range(0, steps, CHUNK):
        x, work, low = rollout_chunk(params, inputs, x, work, low, dt, steps=min(CHUNK, steps - k))
    seconds = time.perf_counter() - start
    P, H = (np.asarray(v) for v in system_momentum(params, x, inputs))
    residual = abs(float(system_energy(params, x, inputs)) - E0 - float(work)) / abs(float(work))
    return dict(case=case, formulation=formulation, n=n, dt=dt, residual=residual, work=float(work),
                linear=float(np.abs(P - P0).max() / scale), angular=float(np.abs(H - H0).max() / r_scale),
                min_tension=float(low), length=float(x.s[1] - x.s[0]), seconds=seconds)


def observed_orders(rows):
    """log₂ of successive residual ratios along the mesh (n doubling)."""
    res = [r["residual"] for r in rows]
    return [float(np.log2(a / b)) for a, b in itertools.pairwise(res)]


def plot(path, mesh, steps, elements, dt_elements):
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    colors = dict(zip(CASES, plt.rcParams["axes.prop_cycle"].by_key()["color"], strict=False))
    styles = {"nodal": ("o", "--"), "energy_consistent": ("s", "-")}
    for rows, ax, key in ((mesh, axes[0], "n"), (steps, axes[1], "dt")):
        for case in CASES:
            for form in FORMULATIONS:
                sel = [r for r in rows if r["case"] == case and r["formulation"] == form]
                marker, line = styles[form]
                ax.loglog([r[key] for r in sel], [r["residual"] for r in sel], marker=marker, ls=line,
                          color=colors[case], label=f"{case}, {form}")
    h = np.asarray(elements, float)
    axes[0].loglog(h, 3e-1 * h[0] / h, color="0.5", lw=1.5, ls=":", label="slope ∝ h (1/n)")
    axes[0].loglog(h, 2e-2 * (h[0] / h) ** 2, color="k", lw=1.5, ls=":", label="slope ∝ h² (1/n²)")
    axes[0].set(xlabel="elements n (h = 1/n)", ylabel="energy residual |ΔE − W| / |W| [–]",
                title="energy balance vs mesh (dt ∝ h above n = 16)")
    axes[1].set(xlabel="time step dt [s]", ylabel="energy residual |ΔE − W| / |W| [–]",
                title=f"energy balance vs dt (n = {dt_elements})")
    for case in CASES:
        for form in FORMULATIONS:
            sel = [r for r in mesh if r["case"] == case and r["formulation"] == form]
            marker, line = styles[form]
            axes[2].loglog([r["n"] for r in sel], [max(r["angular"], 1e-17) for r in sel], marker=marker, ls=line,
                           color=colors[case])
    axes[2].loglog(h, 3e-3 * (h[0] / h) ** 2, color="k", lw=1.5, ls=":")
    axes[2].set(xlabel="elements n (h = 1/n)", ylabel="angular momentum drift |ΔH| / (Σ|p| max|r|) [–]",
                title="angular momentum drift over the run")
    from matplotlib.ticker import FixedLocator, NullLocator, ScalarFormatter
    for ax, ticks in ((axes[0], elements), (axes[2], elements), (axes[1], sorted({r["dt"] for r in steps}))):
        ax.xaxis.set_major_locator(FixedLocator(ticks))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.grid(alpha=0.3, which="both")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=7,
               title="case, formulation (squares, solid: energy_consistent; circles, dashed: nodal)",
               title_fontsize=7)
    fig.tight_layout(rect=(0, 0.16, 1, 1))
    save_figure(fig, path, dpi=110)
    plt.close(fig)


def element_counts(text) -> list[int]:
    """The argparse type of --elements: comma-separated integers ≥ 2, returned sorted."""
    try:
        counts = sorted(int(x) for x in str(text).split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers ≥ 2, got {text!r}") from None
    if not counts or min(counts) < 2:
        raise argparse.ArgumentTypeError(f"every element count must be ≥ 2, got {text!r}")
    return counts


RECORD = "tether_convergence.json"


def settings(elements=(4, 8, 16, 32, 64), horizon=2.0, dt=2e-3, dt_elements=16):
    """The settings the measurements depend on, as recorded in tether_convergence.json."""
    return dict(elements=list(elements), horizon=horizon, dt=dt, dt_elements=dt_elements)


def measure_case(case, elements, horizon, dt, dt_elements):
    """One case's measurements, both formulations: {"mesh": [...], "dt_study": [...]}."""
    mesh, steps = [], []
    for form in FORMULATIONS:
        for n in elements:
            mesh.append(measure(case, form, n, dt * min(1.0, 16 / n), horizon))
            print(f"{case:20s} {form:18s} n = {n:3d}: residual {mesh[-1]['residual']:.3e}", flush=True)
        for step in (2 * dt, dt, dt / 2, dt / 4):
            steps.append(measure(case, form, dt_elements, step, horizon))
    return {"mesh": mesh, "dt_study": steps}


def run(out: pathlib.Path, elements="4,8,16,32,64", horizon=2.0, dt=2e-3, dt_elements=16, overwrite=False):
    """The two studies, each case saved as it finishes and skipped when already done with the same
    settings (module doc); writes the JSON, the tables and the plot, returns the summary dict."""
    elements = element_counts(",".join(map(str, elements)) if isinstance(elements, (list, tuple)) else elements)
    out = start_run(out)
    record = Record(out / RECORD, settings(elements, horizon, dt, dt_elements), overwrite,
                    summary=lambda items: dict(horizon=horizon, dt=dt, elements=elements, dt_elements=dt_elements,
                                               mesh=[r for c in CASES if c in items for r in items[c]["mesh"]],
                                               dt_study=[r for c in CASES if c in items for r in items[c]["dt_study"]]))
    report_resume("tether_convergence", [c for c in CASES if record.done(c)], len(CASES))
    for case in CASES:
        if not record.done(case):
            record.add(case, measure_case(case, elements, horizon, dt, dt_elements))
    mesh = [r for c in CASES for r in record.items[c]["mesh"]]
    steps = [r for c in CASES for r in record.items[c]["dt_study"]]
    header = ("case", "formulation", *(f"n = {n}" for n in elements), "observed orders", "ΔP / Σ|p| (max)",
              "ΔH / (Σ|p| r) at n = 4 … max")
    rows = []
    for case in CASES:
        for form in FORMULATIONS:
            sel = [r for r in mesh if r["case"] == case and r["formulation"] == form]
            rows.append((case, form, *(f"{r['residual']:.2e}" for r in sel),
                         ", ".join(f"{p:.2f}" for p in observed_orders(sel)), f"{max(r['linear'] for r in sel):.1e}",
                         f"{sel[0]['angular']:.1e} … {sel[-1]['angular']:.1e}"))
    dt_header = ("case", "formulation", *(f"dt = {s:g} s" for s in (2 * dt, dt, dt / 2, dt / 4)))
    dt_rows = []
    for case in CASES:
        for form in FORMULATIONS:
            sel = [r for r in steps if r["case"] == case and r["formulation"] == form]
            dt_rows.append((case, form, *(f"{r['residual']:.3e}" for r in sel)))
    table = "\n".join([f"Energy-balance residual |ΔE − W| / |W| over {horizon:g} s against the mesh "
                       f"(dt = {dt:g} s · min(1, 16/n)), and momentum drifts", "",
                       markdown_table(header, rows), "", f"Against dt at n = {dt_elements}", "",
                       markdown_table(dt_header, dt_rows), "",
                       "min tension over each run [N] (0: it went slack): " + ", ".join(
                           f"{c}: {min(r['min_tension'] for r in mesh if r['case'] == c):.2f}" for c in CASES)])
    print(table)
    write_text(out / "tether_convergence.md", table + "\n")
    summary = dict(horizon=horizon, dt=dt, elements=elements, dt_elements=dt_elements, mesh=mesh, dt_study=steps)
    plot(out / "tether_convergence.png", mesh, steps, elements, dt_elements)
    print(f"wrote {out / 'tether_convergence.md'}, tether_convergence.json and tether_convergence.png")
    return summary


@interruptible(RESUME_NOTE)
def main(argv=None):
    return run_command(run, __doc__, argv, "outputs/tether_convergence",
                       ("--elements", dict(type=element_counts, default="4,8,16,32,64",
                                           help="element counts ≥ 2, comma-separated (default 4,8,16,32,64)")),
                       ("--horizon", 2.0, "simulated time per run [s]"), ("--dt", 2e-3, "base RK4 step [s]"),
                       ("--dt-elements", 16, "mesh of the dt study"), record=(RECORD, settings))


if __name__ == "__main__":
    sys.exit(main())
