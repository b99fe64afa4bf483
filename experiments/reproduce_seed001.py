"""Seed 001: a space tethered robot (sims/tethered_robot.py) in a circular orbit (a = 7000 km) deploys
its tether from 10 m to 1 km, holds the length, retrieves it to 50 m (damping the libration the deployment
left) and holds there; with a dispersion over tether and reel parameters.

    python -m experiments.reproduce_seed001 [--out outputs/seed001] [--deploy 1200] [--hold 2000]
                                            [--retrieve 10000] [--draws 1024] [--elements 6]
                                            [--dispersion-elements 4]

Coupled run: platform (hub + 2-joint deployer, 207 kg) and robot (base + 3-link arm, 10.4 kg) by
jaxsoa's free-floating ABA, the tether by its FEM (jaxsoa.systems.tether.fem / jaxsoa.systems.tether.reels, lumped,
n elements), gravity gradient on every link and node (jaxsoa.systems.orbit, non-rotating orbital frame), one
RK4 step over the joint state (jaxsoa.systems.tether.coupling); the step dt follows the shortest element
(explicit-stability limit of the tether's axial and Kelvin–Voigt modes, ≤ 0.3 s, the bound of the arms' joint PD
loops). The platform's reel is
rate-driven by jaxsoa.systems.tether.reel_control (the robot's is locked; law and gains in docs/tether.md §8):

* deployment, 0 ≤ t < T_d: the robot is ejected along the local vertical at v₀ = 2 (l₁ − l₀)/T_d and
  the reel brakes it smoothly to rest at l₁ (a tether cannot push: a deployment from rest only piles
  up slack). Coriolis drags the tether back: it ends ~46° behind the local vertical;
* hold, T_d ≤ t < T_d + T_h: a length loop l̇/l = −p_h n ln(l/l₁) with a series damper on the exit
  tension (the soft tether's axial bounce otherwise drives it slack); damping the libration here would
  cost length;
* retrieval: l̇/l = −c n + k θ̇ + g n (θ − θ_e) − p n ln(l/l_ref) about l_ref = l₁ e^{−c n t} and the
  retrieval equilibrium sin 2θ_e = 4c/3, to l_end, then the hold's length loop at l_end. Exponential
  retrieval alone is unstable (it anti-damps the libration); k > c damps it.

The dispersion's envelope: a draw's retrieval rate c must bring the reference to 1.05 l_end within the
retrieval time, c ≥ ln(l₁/1.05 l_end)/(n T_r); the table reports the draws inside it and how many arrive.

Plots: length and rate; tension along the tether (space–time image, s̄ vs t); in-plane and
out-of-plane libration angles; energy budget in the Jacobi form E_J = T + U_elastic + U_gg − n H_z
(the gravity-gradient field turns at n in this frame, so E_J, not T + U, is the conserved quantity)
against the reel work, Kelvin–Voigt loss, Carnot loss, strain flux and joint-control work, with the
residual. Dispersion: ≥ 1024 draws of (EA, α, retrieval rate c, initial in-plane libration θ₀), the
reduced model (the two bodies as point masses of the same mass, jaxsoa.systems.tether.reels.tether_dynamics), all
draws in one compiled vmapped call per time chunk; histograms of peak tension and final libration.
"""

import dataclasses
import pathlib
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from experiments._common import NO_RESUME_NOTE, interruptible, markdown_table, run_command, start_run, write_text
from experiments._progress import advance
from experiments._seed001_plots import plot_coupled, plot_dispersion
from experiments.seed001_coupled import CHUNK, N_ORBIT, ORBIT, run_coupled
from jaxsoa.systems.tether import coupling
from jaxsoa.systems.tether import reel_control as rc
from jaxsoa.systems.tether.fem import FORMULATIONS, element_strain, element_tension, straight_state, tether_params
from jaxsoa.systems.tether.reels import tether_inputs
from sims import tethered_robot as tr

L0, L1, L_END = 10.0, 1000.0, 50.0          # m: start, deployed, end of retrieval
DT_MAX_REDUCED = 1.0                        # s, reduced model (no arms): ≪ the reel lag τ = 30 s


def build_law(system, deploy, hold, l_max, l_end, **overrides):
    """The reel law of this reproduction (jaxsoa.systems.tether.reel_control.reel_law defaults) for `system`'s
    masses."""
    m_P, m_M = float(jnp.sum(system.platform.mass)), float(jnp.sum(system.robot.mass))
    return rc.reel_law(l_start=L0, l_deployed=l_max, l_end=l_end, t_deploy=deploy, t_hold=hold,
                       reduced_mass=m_P * m_M / (m_P + m_M), **overrides)


# ---------------------------------------------------------------------------------------------
# dispersion on the reduced (point-mass) model

@jax.jit
def dispersion_chunk(base, draws, tethers, peaks, t0, dt, law, inputs):
    """CHUNK steps of every draw at once (one vmapped call): new states, running peak tension, θ. base: the
    TetherParams whose EA and α each draw replaces."""
    def one(x, peak, draw):
        EA, alpha, rate, _ = draw
        params = dataclasses.replace(base, EA=EA, alpha=alpha)
        draw_law = law._replace(rate=rate)

        def body(carry, k):
            x, peak = carry
            t = t0 + k * dt
            x = coupling.rk4_step_dumbbell(params, ORBIT, t, x, inputs,
                                           lambda t, s: rc.reel_acceleration(params, ORBIT, t, s, draw_law), dt)
            eps, eps_dot, _ = element_strain(params, x)
            return (x, jnp.maximum(peak, jnp.max(element_tension(params, eps, eps_dot)))), None

        (x, peak), _ = jax.lax.scan(body, (x, peak), jnp.arange(CHUNK, dtype=jnp.float64))
        return x, peak, rc.chord_libration(ORBIT, t0 + CHUNK * dt, x)[0]

    return jax.vmap(one)(tethers, peaks, draws)


def draw_parameters(n_draws, seed=0):
    """(n_draws, 4) uniform draws of EA [N], α [s], retrieval rate c, initial in-plane libration θ₀ [rad]."""
    low, high = np.array([1.5, 0.01, 0.15, -0.1]), np.array([4.0, 0.05, 0.45, 0.1])
    return low + (high - low) * np.random.default_rng(seed).random((n_draws, 4))


def run_dispersion(system, draws, t_end, law):
    """Reduced-model dispersion: returns (peak tension (n,), sample times (T,), θ samples (T, n), final l (n,))."""
    m_P, m_M = float(jnp.sum(system.platform.mass)), float(jnp.sum(system.robot.mass))
    inputs = tether_inputs(end_mass=(m_P, m_M))
    L = tr.TETHER["length"]
    params = system.tether
    states, v0 = [], float(rc.deployment_profile(law, 0.0)[1])
    for theta0 in draws[:, 3]:
        u = np.array([np.cos(theta0), np.sin(theta0), 0.0])
        d = law.l_start * 1.002
        r_P, r_M = -m_M / (m_P + m_M) * d * u, m_P / (m_P + m_M) * d * u
        w = np.array([0.0, 0.0, N_ORBIT])
        v_P, v_M = np.cross(w, r_P) - v0 * m_M / (m_P + m_M) * u, np.cross(w, r_M) + v0 * m_P / (m_P + m_M) * u
        states.append(straight_state(params, r_P, r_M, (L - law.l_start, L), v_P, v_M, (-v0, 0.0)))
    tethers = jax.tree.map(lambda *x: jnp.stack(x), *states)
    draws_j = jnp.asarray(draws)
    peaks, times, thetas = jnp.zeros(len(draws)), [], []
    EA_max, alpha_max = float(draws[:, 0].max()), float(draws[:, 1].max())

    def step(t):                                            # one chunk of every draw, dt from the shortest element
        nonlocal tethers, peaks
        dt = rc.stable_dt(params, float(jnp.min(tethers.s[:, 1] - tethers.s[:, 0])), DT_MAX_REDUCED, EA=EA_max,
                          alpha=alpha_max)
        tethers, peaks, theta = dispersion_chunk(params, draws_j, tethers, peaks, t, dt, law, inputs)
        thetas.append(np.asarray(theta))
        times.append(t + CHUNK * dt)
        return t + CHUNK * dt

    advance(t_end, step, f"dispersion ({len(draws)} draws)")
    return np.asarray(peaks), np.array(times), np.array(thetas), np.asarray(tethers.s[:, 1] - tethers.s[:, 0])


# ---------------------------------------------------------------------------------------------
# table, entry points (the coupled run: experiments/seed001_coupled.py; the plots: experiments/_seed001_plots.py)

def run(out: pathlib.Path, deploy=1200.0, hold=2000.0, retrieve=10000.0, draws=1024, elements=6, l_max=L1,
        l_end=L_END, formulation=FORMULATIONS[0], dispersion_elements=4):
    """Coupled deployment / hold / retrieval and the dispersion; writes plots and a table,
    returns the rows."""
    out = start_run(out)
    system = tr.build(tether={"n_elements": elements, "formulation": formulation}, orbit=ORBIT)
    law = build_law(system, deploy, hold, l_max, l_end)
    t_end = deploy + hold + retrieve
    start = time.perf_counter()
    res = run_coupled(system, t_end, law, 0.05)
    coupled_s = time.perf_counter() - start
    plot_coupled(out, res, law)
    start = time.perf_counter()
    parameters = draw_parameters(draws)
    reduced = dataclasses.replace(system, tether=tether_params(**{**tr.TETHER, "n_elements": dispersion_elements,
                                                                   "formulation": formulation}))
    peaks, times, thetas, final_l = run_dispersion(reduced, parameters, t_end, law)
    dispersion_s = time.perf_counter() - start
    amplitude = np.abs(thetas[times >= deploy + hold]).max(axis=0, initial=0.0)    # during retrieval
    final_amplitude = np.abs(thetas[int(0.9 * len(thetas)):]).max(axis=0)           # over the last 10 %
    tumbled = ~np.all(np.abs(thetas) < np.pi / 2, axis=0)                  # |θ| ≥ 90° or non-finite
    reached = final_l < 1.05 * l_end
    # the law's envelope: the reference l₁ e^{−c n t} reaches 1.05 l_end within the retrieval time
    c_min = np.log(l_max / (1.05 * l_end)) / (N_ORBIT * retrieve)
    inside = parameters[:, 2] >= c_min
    plot_dispersion(out, peaks, final_amplitude, amplitude, parameters[:, 2], final_l)
    residual = (res["energy"] - res["energy"][0]).sum(1) - res["work"].sum(1)
    swing = np.abs(res["energy"] - res["energy"][0]).max()
    retrieving = res["t"] >= deploy + hold
    holding = (res["t"] >= deploy) & ~retrieving
    arrived = np.flatnonzero(retrieving & (res["l"] < 1.05 * l_end))
    rows = [
        ("deployed length: start / at T_d / max / end [m]",
         " / ".join(f"{x:.1f}" for x in (res["l"][0], np.interp(deploy, res["t"], res["l"]), res["l"].max(),
                                          res["l"][-1]))),
        ("hold: length min / max, ln(l / l₁) at its end",
         f"{res['l'][holding].min():.1f} / {res['l'][holding].max():.1f}, "
         f"{np.log(np.interp(deploy + hold, res['t'], res['l']) / l_max):+.4f}" if holding.any() else "no hold"),
        (f"retrieval reaches 1.05 l_end = {1.05 * l_end:g} m at t [s]",
         f"{res['t'][arrived[0]]:.0f}" if arrived.size else "not reached"),
        ("peak tension, coupled run [mN]", f"{1e3 * res['tension'].max():.3f}"),
        ("slack samples after deployment [%]",
         f"{100 * np.mean(res['tension'][res['t'] >= deploy].min(axis=1) <= 0):.1f}"),
        ("max |θ| deployment / retrieval, max |φ| [deg]",
         f"{np.degrees(np.abs(res['theta'][res['t'] < deploy + hold]).max()):.1f} / "
         f"{np.degrees(np.abs(res['theta'][retrieving]).max()) if retrieving.any() else float('nan'):.1f}, "
         f"{np.degrees(np.abs(res['phi']).max()):.3f}"),
        ("final θ [deg]", f"{np.degrees(res['theta'][-1]):.2f}"),
        ("energy residual max |ΔE_J − ΣW| / max |ΔE| ", f"{np.abs(residual).max() / max(swing, 1e-300):.2e}"),
        ("Carnot / viscous loss [J]", f"{-res['work'][-1, 1]:.3e} / {-res['work'][-1, 2]:.3e}"),
        ("coupled run: simulated / wall [s]", f"{res['t'][-1]:.0f} / {coupled_s:.1f}"),
        (f"dispersion ({draws} draws): peak tension median, 95 % [mN]",
         f"{1e3 * np.median(peaks):.3f}, {1e3 * np.percentile(peaks, 95):.3f}"),
        ("dispersion: max |θ| during retrieval, median, 95 % [deg]",
         f"{np.degrees(np.median(amplitude)):.2f}, {np.degrees(np.percentile(amplitude, 95)):.2f}"),
        ("dispersion: final libration amplitude (last 10 %), median, 95 % [deg]",
         f"{np.degrees(np.median(final_amplitude)):.2f}, {np.degrees(np.percentile(final_amplitude, 95)):.2f}"),
        ("dispersion: draws that tumbled (|θ| ≥ 90°) / reached 1.05 l_end", f"{int(tumbled.sum())} / "
                                                                            f"{int(reached.sum())} of {draws}"),
        (f"dispersion: envelope c ≥ ln(l₁ / 1.05 l_end) / (n T_r) = {c_min:.3f}: draws inside / reached there",
         f"{int(inside.sum())} / {int((reached & inside).sum())} ({100 * np.mean(reached[inside]):.1f} %)"
         if inside.any() else "no draw inside"),
        ("dispersion wall time [s]", f"{dispersion_s:.1f}"),
    ]
    table = "\n".join([f"Seed 001, a = {ORBIT.a / 1e3:.0f} km circular, n = {N_ORBIT:.4e} rad/s, {elements} elements "
                       f"({dispersion_elements} in the dispersion), {formulation}, deploy {deploy:g} s to {l_max:g} m, "
                       f"hold {hold:g} s, retrieve {retrieve:g} s to {l_end:g} m",
                       "", markdown_table(("quantity", "value"), rows)])
    print(table)
    write_text(out / "seed001_table.md", table + "\n")
    print(f"wrote {out / 'seed001_table.md'}, {out / 'seed001_coupled.png'} and {out / 'seed001_dispersion.png'}")
    return rows


@interruptible(NO_RESUME_NOTE)
def main(argv=None):
    return run_command(run, __doc__, argv, "outputs/seed001", ("--deploy", 1200.0, "deployment time T_d [s]"),
                ("--hold", 2000.0, "hold at l₁, T_h [s]"), ("--retrieve", 10000.0, "retrieval time [s]"),
                ("--draws", 1024, "dispersion draws"), ("--elements", 6, "tether elements, coupled run"),
                ("--length", L1, "deployed length l₁ [m]"), ("--l-end", L_END, "retrieval floor l_end [m]"),
                ("--formulation", dict(default=FORMULATIONS[0], choices=FORMULATIONS,
                                       help=f"tether FEM formulation (default {FORMULATIONS[0]})")),
                ("--dispersion-elements", 4, "tether elements, dispersion (reduced model)"))


if __name__ == "__main__":
    sys.exit(main())
