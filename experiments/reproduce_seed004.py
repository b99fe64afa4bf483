"""Seed 004: electric cylinder forces of a gas-assisted Gough-Stewart motion platform
(sims/stewart_gas.py: 12 t payload, six electric cylinders, three gas springs) by Kane's equations.

    python -m experiments.reproduce_seed004 [--out outputs/seed004] [--duration 10] [--grid 12]

Two motion profiles, sampled every `dt`: `sine` (heave 0.15 m at 0.5 Hz, pitch 6° at 0.4 Hz, roll
5° at 0.3 Hz) and `random` (band-limited noise, a recorded-style profile). Four cases:
no gas assist (gas cylinders vented), individual tanks, one shared tank (same total volume), and
the light-leg approximation (individual tanks, legs' masses and inertias ignored). For each:
peak and RMS electric force (over the six cylinders and time), electric energy (positive
mechanical work of the cylinders, ∫ Σ max(F_i l̇_i, 0) dt: no regeneration) and the peak gauge
gas pressure. Check rows: the forward dynamics replays the sine profile under the Kane forces of the
individual-tank case (RK4, dt = 5 ms, first 2 s: the pose must follow the profile to 1e-6 m),
the power balance Σ F l̇ = d/dt(kinetic + gravity + gas energy) along the same profile, and the
same forces from a second model: the platform as a closed-loop jaxsoa multibody system
(experiments/seed004_reference.py), every tenth sample of the sine profile.
A design sweep over tank volume × precharge (a vmapped grid, sine profile, individual tanks)
maps the RMS electric force and prints its optimum.

Outputs: seed004_forces_{profile}.png, seed004_pressures_{profile}.png, seed004_sweep.png,
seed004_table.md, seed004_table.csv, seed004_sweep.json.
"""

import csv
import dataclasses
import json
import pathlib
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from experiments._common import (
    NO_RESUME_NOTE,
    interruptible,
    legend_outside,
    markdown_table,
    open_atomic,
    run_command,
    save_figure,
    start_run,
    write_text,
)
from experiments._progress import progress
from experiments.seed004_reference import closed_loop_forces
from jaxsoa.spatial.rotation import quat_to_rotation, rotation_to_quat
from jaxsoa.systems.stewart import dynamics as sd
from jaxsoa.systems.stewart import geometry as st
from jaxsoa.systems.stewart import poses
from sims import stewart_gas as sg

CASES = {"no gas": "none", "individual tanks": "individual", "shared tank": "shared", "light legs": "individual"}
HEADER = ("profile", "case", "peak |F| [kN]", "RMS F [kN]", "electric energy [kJ]", "peak gas p [MPa]", "valid poses")


def case_params(case):
    params = sg.build(CASES[case])
    return sd.without_leg_inertia(params) if case == "light legs" else params


def evaluate(params, path, times):
    """(forces (T, 6), gauge pressures (T, 3), leg rates (T, 9), ok (T,)) along `path`."""
    def at(s):
        p, R, u, udot = poses.path_state(path, s)
        res = sd.inverse_dynamics(params, p, R, u, udot)
        return res.force, res.gas.pressure, st.jacobian(params, p, R) @ u, res.status.ok
    return jax.vmap(at)(times)


def metrics(force, rate, dt):
    """(peak |F|, RMS F, ∫ Σ max(F l̇, 0) dt) of forces (T, 6) and electric leg rates (T, 6)."""
    power = jnp.sum(jnp.maximum(force * rate, 0.0), axis=-1)
    return jnp.max(jnp.abs(force)), jnp.sqrt(jnp.mean(force ** 2)), jnp.sum(power) * dt


def replay_error(params, path, dt=5e-3, duration=2.0):
    """Max |p − p_ref| [m] and rotation error [rad] of an RK4 rollout under the Kane forces, which
    are tabulated at the stage times (multiples of dt / 2)."""
    n = round(duration / dt)
    half = jnp.arange(2 * n + 1, dtype=jnp.float64) * (dt / 2)
    table = evaluate(params, path, half)[0]
    p0, R0, u0, _ = poses.path_state(path, jnp.float64(0.0))
    trajectory = sd.simulate(params, p0, rotation_to_quat(R0), u0,
                             lambda t, p, R, u: table[jnp.round(t / (dt / 2)).astype(jnp.int32)], dt, n)
    ps, quats = trajectory.p, trajectory.quat
    p_ref, R_ref = jax.vmap(path)(half[::2])
    rot = jnp.swapaxes(R_ref, -1, -2) @ quat_to_rotation(quats) - jnp.eye(3)[None]
    return jnp.max(jnp.abs(ps - p_ref)), jnp.max(jnp.abs(rot))


def power_residual(params, path, times):
    """max |Σ F l̇ + Σ τ_P l̇_P − d/dt(KE) − d/dt(PE_gravity)| / max |Σ F l̇|, KE and PE summed over
    the 19 bodies with the energies' own formulas (platform: ½ m v_C² + ½ ωᵀ I ω; legs no spin)."""
    def energy(s):
        p, R, u, _ = poses.path_state(path, s)
        legs = st.leg_motion(params, p, R, u, jnp.zeros_like(u))
        n_dot = jnp.cross(legs.omega, legs.direction)
        v_barrel, v_rod = params.barrel_com[:, None] * n_dot, legs.joint_velocity - params.rod_com[:, None] * n_dot
        com = R @ params.platform_com
        v_com, inertia = u[:3] + jnp.cross(u[3:], com), R @ params.platform_inertia @ R.T
        kinetic = 0.5 * (jnp.sum(params.barrel_mass * jnp.sum(v_barrel ** 2, 1)) + jnp.sum(
            params.rod_mass * jnp.sum(v_rod ** 2, 1)) + jnp.sum((params.barrel_inertia + params.rod_inertia)
                                                                * jnp.sum(legs.omega ** 2, 1))
            + params.platform_mass * v_com @ v_com + u[3:] @ inertia @ u[3:])
        heights = jnp.concatenate([(params.base_points + params.barrel_com[:, None] * legs.direction) @ params.gravity,
                                   (legs.joint - params.rod_com[:, None] * legs.direction) @ params.gravity])
        masses = jnp.concatenate([params.barrel_mass, params.rod_mass])
        return kinetic - masses @ heights - params.platform_mass * (p + com) @ params.gravity

    def residual(s):
        p, R, u, udot = poses.path_state(path, s)
        res = sd.inverse_dynamics(params, p, R, u, udot)
        rate = st.jacobian(params, p, R) @ u
        supplied = res.force @ rate[:6] + res.gas.force @ rate[6:]
        return supplied - jax.jvp(energy, (s,), (jnp.ones_like(s),))[1], jnp.abs(res.force @ rate[:6])

    diff, scale = jax.vmap(residual)(times)
    return jnp.max(jnp.abs(diff)) / jnp.max(scale)


def plot_profile(out, profile, times, forces, pressures):
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(forces), 1, sharex=True, figsize=(9, 2.2 * len(forces)))
    for ax, (case, f) in zip(axes, forces.items(), strict=True):
        for k in range(6):
            ax.plot(times, f[:, k] / 1e3, lw=1, label=f"leg {k + 1}")
        ax.set(ylabel="F [kN]", title=f"{profile}: {case}")
        ax.grid(alpha=0.3)
    legend_outside(axes[0], fontsize=7)
    axes[-1].set(xlabel="t [s]")
    fig.tight_layout()
    save_figure(fig, out / f"seed004_forces_{profile}.png", dpi=110)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(10, 3))
    for style, (case, p) in zip(("-", "--"), pressures.items(), strict=True):
        for k in range(3):
            ax.plot(times, p[:, k] / 1e6, style, color=f"C{k}", lw=1, label=f"{case}, gas leg {k + 7}")
    ax.set(xlabel="t [s]", ylabel="gauge pressure [MPa]", title=f"{profile}: gas pressures")
    legend_outside(ax, fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    save_figure(fig, out / f"seed004_pressures_{profile}.png", dpi=110)
    plt.close(fig)


def sweep(out, path, times, dt, grid):
    """RMS electric force over a tank volume × precharge grid (individual tanks): (volumes,
    precharges, rms (grid, grid)), optimum printed and plotted."""
    import matplotlib.pyplot as plt

    base = sg.build("individual")
    volumes, precharges = np.linspace(0.0, 0.12, grid), np.linspace(0.40e6, 0.60e6, grid)

    def rms(volume, precharge):
        params = dataclasses.replace(base, tank_volume=volume, precharge=precharge)
        force, _, rate, _ = evaluate(params, path, times)
        return metrics(force, rate[:, :6], dt)[1]

    V, P = np.meshgrid(volumes, precharges, indexing="ij")
    value = np.asarray(jax.jit(jax.vmap(rms))(jnp.asarray(V.ravel()), jnp.asarray(P.ravel()))).reshape(grid, grid)
    i, j = np.unravel_index(np.argmin(value), value.shape)
    best = dict(tank_volume_m3=float(volumes[i]), precharge_MPa=float(precharges[j] / 1e6),
                rms_force_kN=float(value[i, j] / 1e3))
    fig, ax = plt.subplots(figsize=(6, 4.5))
    c = ax.contourf(volumes, precharges / 1e6, value.T / 1e3, levels=20)
    fig.colorbar(c, label="RMS electric force [kN]")
    ax.plot(volumes[i], precharges[j] / 1e6, "r*", ms=12, label="optimum")
    ax.set(xlabel="tank volume per gas cylinder [m³]", ylabel="precharge (gauge) [MPa]",
           title="sine profile, individual tanks")
    ax.legend()
    fig.tight_layout()
    save_figure(fig, out / "seed004_sweep.png", dpi=110)
    plt.close(fig)
    write_text(out / "seed004_sweep.json", json.dumps(best, indent=1) + "\n")
    return best


def run(out: pathlib.Path, duration=10.0, dt=0.01, grid=12):
    """Forces per profile and case, the three checks and the sweep; returns the table rows and the checks."""
    out = start_run(out)
    start = time.perf_counter()
    times = jnp.arange(round(duration / dt) + 1, dtype=jnp.float64) * dt
    profiles = {"sine": sg.sine_profile(), "random": sg.random_profile(0)}
    rows = []
    for profile, path in progress(profiles.items(), desc="seed004 profiles"):
        forces, pressures = {}, {}
        for case in CASES:
            params = case_params(case)
            force, pressure, rate, ok = jax.jit(lambda p, path=path: evaluate(p, path, times))(params)
            peak, rms, energy = metrics(force, rate[:, :6], dt)
            forces[case] = np.asarray(force)
            if case in ("individual tanks", "shared tank"):
                pressures[case] = np.asarray(pressure)
            rows.append((profile, case, f"{peak / 1e3:.1f}", f"{rms / 1e3:.2f}", f"{energy / 1e3:.1f}",
                         f"{jnp.max(pressure) / 1e6:.3f}" if case != "no gas" else "-", f"{int(ok.sum())}/{ok.size}"))
        plot_profile(out, profile, np.asarray(times), forces, pressures)
    individual, sine = case_params("individual tanks"), profiles["sine"]
    t_err, r_err = jax.jit(lambda p: replay_error(p, sine, duration=min(2.0, duration)))(individual)
    balance = jax.jit(lambda p: power_residual(p, sine, times))(individual)
    closed, kane = closed_loop_forces(individual, sine, times[::10])
    closed_loop = float(jnp.max(jnp.max(jnp.abs(closed - kane), 1) / jnp.max(jnp.abs(kane), 1)))
    best = sweep(out, sine, times, dt, grid)
    table = "\n".join([f"Gas-assisted Stewart platform, {duration:g} s at dt = {dt} s, float64 "
                       f"({time.perf_counter() - start:.1f} s)", "",
                       markdown_table(HEADER, rows), "",
                       f"forward-dynamics replay (sine, RK4 5 ms): max position error {float(t_err):.2e} m, "
                       f"rotation error {float(r_err):.2e} (expected ≤ 1e-6)",
                       f"power balance Σ F l̇ + Σ τ_P l̇_P = d/dt(KE + PE) (sine): relative residual "
                       f"{float(balance):.2e} (expected ≤ 1e-9)",
                       f"closed-loop multibody model (sine, {len(closed)} instants): its actuated prismatic forces vs "
                       f"Kane's, max relative difference {closed_loop:.2e} (expected ≤ 1e-10)",
                       f"sweep optimum (sine, individual tanks, {grid}×{grid}): tank {best['tank_volume_m3']:.3f} m³, "
                       f"precharge {best['precharge_MPa']:.3f} MPa, RMS force {best['rms_force_kN']:.2f} kN"])
    print(table)
    write_text(out / "seed004_table.md", table + "\n")
    with open_atomic(out / "seed004_table.csv", "w", newline="") as f:
        csv.writer(f).writerows([HEADER, *rows])
    print(f"wrote {out / 'seed004_table.md'}, seed004_table.csv, seed004_sweep.json and the plots seed004_*.png")
    return rows, dict(replay_position=float(t_err), replay_rotation=float(r_err), power_balance=float(balance),
                      closed_loop_forces=closed_loop, optimum=best)


@interruptible(NO_RESUME_NOTE)
def main(argv=None):
    return run_command(run, __doc__, argv, "outputs/seed004", ("--duration", 10.0, "profile length [s]"),
                ("--dt", 0.01, "sampling step [s]"), ("--grid", 12, "sweep grid points per axis"))


if __name__ == "__main__":
    sys.exit(main())
