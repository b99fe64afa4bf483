"""The sweepable systems of `python -m experiments sweep` (experiments/sweep.py): their random
inputs, per-sample simulators and outputs.

Systems (`SYSTEMS`; a new system is one more `SweepSystem` entry):

* ``space_arm``: the 7-DOF arm on its free-flying hub (sims/space_arm_7dof.py) carrying a point
  payload of random mass (0-200 kg) at the end-effector tip, released with random joint rates
  (±0.05 rad/s per joint) and the hub twist that makes the total momentum zero, then coasting
  (zero torque, RK4, dt = 0.01 s). Outputs: the hub's attitude disturbance (final and peak rotation
  angle), its displacement, and the momentum drift (a conservation check: RK4 error, ~1e-13).
* ``dual_arm``: the 3-D dual-arm spacecraft with a free hub (sims/dual_arm_spacecraft.py) in a
  random one of its three topologies (`CONFIGURATIONS`, built per sample inside the compiled
  call by `jaxsoa.topology.reconfigure.apply_configuration`: one compilation for all topologies), random
  initial joint angles (±0.5 rad), each joint driven along q_des = q₀ + a (1 − cos ωt) (a ±0.5 rad,
  ω 0.5-2 rad/s) by free-floating computed torque (K_p = ω_c², K_d = 2ω_c, ω_c = 10 rad/s, sampled
  once per step and held). Outputs: peak joint torque, hub attitude change, hub displacement, final
  tracking error (small: the model is exact, the zero-order hold leaves O(dt) errors). Grouped by
  topology.
* ``stewart``: the gas-assisted Gough-Stewart platform (sims/stewart_gas.py) with a random extra
  payload (0-8000 kg on its 12 t platform + payload, mass and inertia scaled together) following the
  sine profile with a random heave amplitude (0.05-0.25 m; pitch 6°, roll 5°) for `steps` samples of
  dt; Kane's inverse dynamics (`jaxsoa.systems.stewart.dynamics.inverse_dynamics`) at each sample. Outputs:
  peak and RMS electric cylinder force, peak gas-spring force (NaN flags a pose out of stroke).
* ``tether``: the seed-001 dumbbell (500 kg platform, 50 kg subsatellite, jaxsoa tether FEM of 4
  lumped elements, ρ = 5 g/m) on the local vertical of a circular 7000 km orbit, deploying from 50 m
  at a constant random reel rate (0.5-3 m/s) with random EA (1-5 N) and α (0-0.05 s), from the
  gravity-gradient equilibrium stretch; `steps` RK4 steps of its own TETHER_DT = 0.1 s (not dt:
  the element modes allow it, and 0.01 s would show no libration). Outputs: peak tension, final
  in-plane libration (Coriolis lag), final deployed length (a check: l₀ + rate · t, exact).
"""

import dataclasses
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

import jaxsoa
from jaxsoa.spatial.algebra import skew
from jaxsoa.systems import orbit as orb
from jaxsoa.systems.stewart.dynamics import inverse_dynamics
from jaxsoa.systems.stewart.poses import path_state
from jaxsoa.systems.tether.coupling import rk4_step_dumbbell
from jaxsoa.systems.tether.fem import TetherState, element_strain, element_tension, tether_params
from jaxsoa.systems.tether.reels import tether_inputs
from jaxsoa.topology.reconfigure import apply_configuration, design_arrays
from sims import dual_arm_spacecraft as dual
from sims import space_arm_7dof as arm
from sims import stewart_gas

DT = 0.01                                  # s, RK4 step of every system
OMEGA = 10.0                               # rad/s, computed-torque loop bandwidth (dual_arm)
TETHER_DT = 0.1                            # s, RK4 step of the tether: ω dt ≤ 0.5 for its stiffest draw at 50 m


@dataclasses.dataclass(frozen=True)
class SweepSystem:
    """A sweepable system. ``sample(rng, count)`` -> host batch {name: (count, ...) array};
    ``simulator(steps)`` -> per-sample ``fn(sample) -> {output name: scalar}`` (jittable);
    ``outputs`` {name: axis label}; ``group``: an integer batch field to split the statistics by."""
    description: str
    sample: Callable
    simulator: Callable
    outputs: dict
    group: str | None = None


def hub_angle(q):
    """Rotation angle [rad] of the hub quaternion (xyzw, q[3:7]) from the identity."""
    return 2 * jnp.arctan2(jnp.linalg.norm(q[3:6]), jnp.abs(q[6]))


def hub_metrics(qs):
    """Final and peak hub rotation [deg], final hub displacement [mm] of a trajectory qs (T, nq)."""
    angles = jax.vmap(hub_angle)(qs)
    return {"hub_angle_final_deg": jnp.degrees(angles[-1]), "hub_angle_peak_deg": jnp.degrees(angles.max()),
            "hub_displacement_mm": 1e3 * jnp.linalg.norm(qs[-1, :3] - qs[0, :3])}


def with_point_mass(model, link: int, mass, position):
    """The model with a point mass added to ``link`` at ``position`` (link frame), every interface
    column: m' = m + m_p, c' = (m c + m_p p) / m', J' = J + m S(c − c') + m_p S(p − c'), S(d) = −[d]²."""
    m, c, J = model.mass[link], model.com[link], model.inertia_com[link]
    m_new = m + mass
    c_new = (m[:, None] * c + mass * position[None]) / m_new[:, None]

    def shift(d):
        return -skew(d) @ skew(d)

    J_new = J + m[:, None, None] * jax.vmap(shift)(c - c_new) + mass * jax.vmap(shift)(position[None] - c_new)
    return dataclasses.replace(model, mass=model.mass.at[link].set(m_new), com=model.com.at[link].set(c_new),
                               inertia_com=model.inertia_com.at[link].set(J_new))


def space_arm_sample(rng, count):
    return {"payload_kg": rng.uniform(0.0, 200.0, count), "joint_rates": rng.uniform(-0.05, 0.05, (count, 7))}


def space_arm_simulator(steps):
    base = arm.build(floating=True)
    tip = jnp.asarray(arm.ARM[-1].direction) * arm.ARM[-1].length            # end-effector tip, link frame
    q0 = jnp.asarray(np.r_[np.zeros(6), 1.0, np.zeros(7)])

    def simulate(sample):
        model = with_point_mass(base, arm.EE_LINK, sample["payload_kg"], tip)
        rates = sample["joint_rates"]
        v0 = jnp.concatenate([-jaxsoa.algorithms.hub_response(model, q0) @ rates, rates])   # zero momentum
        qs, vs = jaxsoa.rollout(model, q0, v0, lambda t, q, v: jnp.zeros(13), DT, steps)
        drift = jaxsoa.spatial_momentum(model, qs[-1], vs[-1]) - jaxsoa.spatial_momentum(model, q0, v0)
        return {**hub_metrics(qs), "momentum_drift": jnp.abs(drift).max()}

    return simulate


def dual_arm_sample(rng, count):
    return {"configuration": rng.integers(1, len(dual.CONFIGURATIONS) + 1, count),
            "q_joints": rng.uniform(-0.5, 0.5, (count, 6)), "amplitude": rng.uniform(-0.5, 0.5, (count, 6)),
            "omega": rng.uniform(0.5, 2.0, count)}


def dual_arm_simulator(steps):
    template = dual.model(1, floating=True)
    arrays = design_arrays(dual.design(floating=True))
    table = jnp.asarray([dual.CONFIGURATIONS[k] for k in sorted(dual.CONFIGURATIONS)], jnp.int32)
    ids = jnp.asarray(dual.IDS, jnp.int32)
    kp, kd = jaxsoa.critically_damped_gains(OMEGA)

    def simulate(sample):
        model = apply_configuration(template, arrays, table[sample["configuration"] - 1], ids)
        q_start, a, w = sample["q_joints"], sample["amplitude"], sample["omega"]

        def step(t, state, k):                   # computed torque towards q_des = q₀ + a (1 − cos ωt), held over dt
            q, v, peak = state
            q_des, v_des, a_des = q_start + a * (1 - jnp.cos(w * t)), a * w * jnp.sin(w * t), a * w**2 * jnp.cos(w * t)
            tau = jaxsoa.computed_torque_free_floating(model, q, v, q_des, v_des, a_des, kp, kd)
            q, v = jaxsoa.rk4_step(model, q, v, jnp.concatenate([jnp.zeros(6), tau]), DT)
            return q, v, jnp.maximum(peak, jnp.abs(tau).max())

        q0 = jnp.concatenate([jnp.zeros(6), jnp.ones(1), q_start])
        qs, _, peaks = jaxsoa.integrators.rollout_steps(step, (q0, jnp.zeros(12), jnp.zeros(())), DT, steps)
        q_des_end = q_start + a * (1 - jnp.cos(w * steps * DT))
        return {**hub_metrics(qs), "peak_torque_Nm": peaks[-1],
                "tracking_error_rad": jnp.abs(qs[-1, 7:] - q_des_end).max()}

    return simulate


def stewart_sample(rng, count):
    return {"payload_kg": rng.uniform(0.0, 8000.0, count), "heave_m": rng.uniform(0.05, 0.25, count)}


def stewart_simulator(steps):
    base = stewart_gas.build()

    def simulate(sample):
        scale = 1 + sample["payload_kg"] / base.platform_mass                  # payload scales m and J together
        params = dataclasses.replace(base, platform_mass=scale * base.platform_mass,
                                     platform_inertia=scale * base.platform_inertia)
        path = stewart_gas.sine_profile(heave=sample["heave_m"])

        def forces(time):                                           # Kane: F = (J₁₋₆ᵀ)⁻¹ (h − J₇₋₉ᵀ τ_P)
            result = inverse_dynamics(params, *path_state(path, time))
            return result.force, result.gas.force

        electric, gas = jax.vmap(forces)(DT * jnp.arange(steps + 1, dtype=base.platform_mass.dtype))
        return {"peak_force_kN": jnp.abs(electric).max() / 1e3, "rms_force_kN": jnp.sqrt(jnp.mean(electric**2)) / 1e3,
                "peak_gas_force_kN": jnp.abs(gas).max() / 1e3}

    return simulate


def tether_sample(rng, count):
    return {"EA": rng.uniform(1.0, 5.0, count), "alpha": rng.uniform(0.0, 0.05, count),
            "reel_rate": rng.uniform(0.5, 3.0, count)}


def tether_simulator(steps, l0=50.0, masses=(500.0, 50.0)):
    orbit = orb.circular_orbit(7.0e6)
    n = orb.mean_motion(orbit)
    base = tether_params(rho=5e-3, EA=1.0, alpha=0.0, length=1100.0, n_elements=4, lumped=True)
    inputs = tether_inputs(end_mass=masses)
    m_P, m_M = masses
    mu = m_P * m_M / (m_P + m_M)
    sbar = jnp.linspace(0.0, 1.0, base.n_elements + 1)[:, None]
    offset = (sbar - m_M / (m_P + m_M)) * jnp.asarray([[1.0, 0.0, 0.0]])    # node − centre of mass per unit chord
    omega = jnp.stack([0.0, 0.0, n])

    def simulate(sample):
        params = dataclasses.replace(base, EA=sample["EA"], alpha=sample["alpha"])
        rate = sample["reel_rate"]
        d = l0 / (1 - 3 * n**2 * mu * l0 / params.EA)             # equilibrium stretch EA (d/l − 1) = 3 n² μ d
        r = d * offset                                            # on the local vertical, subsatellite up
        v = jnp.cross(omega, r) + rate * d / l0 * offset          # at rest in LVLH + paying out at (1 + ε) ṗ
        x0 = TetherState(r, v, jnp.stack([base.length - l0, base.length]), jnp.stack([-rate, jnp.zeros_like(rate)]))

        def step(state, k):
            x, peak = state
            x = rk4_step_dumbbell(params, orbit, k * TETHER_DT, x, inputs, lambda t, y: jnp.zeros(2), TETHER_DT)
            eps, eps_dot, _ = element_strain(params, x)
            return (x, jnp.maximum(peak, element_tension(params, eps, eps_dot).max())), None

        (x, peak), _ = jax.lax.scan(step, (x0, jnp.zeros_like(rate)), jnp.arange(steps, dtype=rate.dtype))
        theta, _ = orb.libration_angles(orbit, steps * TETHER_DT, x.r[-1] - x.r[0])
        return {"peak_tension_mN": 1e3 * peak, "final_libration_deg": jnp.degrees(theta),
                "final_length_m": x.s[1] - x.s[0]}

    return simulate


SYSTEMS = {
    "space_arm": SweepSystem("7-DOF arm on a free hub, random payload and joint rates, coasting",
                             space_arm_sample, space_arm_simulator,
                             {"hub_angle_final_deg": "hub attitude change at the end [deg]",
                              "hub_angle_peak_deg": "peak hub attitude change [deg]",
                              "hub_displacement_mm": "hub displacement [mm]",
                              "momentum_drift": "max |h(T) − h(0)| [N s, N m s]"}),
    "dual_arm": SweepSystem("dual-arm spacecraft, free hub, random topology (1-3) and joint motion",
                            dual_arm_sample, dual_arm_simulator,
                            {"peak_torque_Nm": "peak joint torque [N m]",
                             "hub_angle_final_deg": "hub attitude change at the end [deg]",
                             "hub_displacement_mm": "hub displacement [mm]",
                             "tracking_error_rad": "final joint tracking error [rad]"}, group="configuration"),
    "stewart": SweepSystem("gas-assisted Stewart platform, random payload and heave amplitude, sine profile",
                           stewart_sample, stewart_simulator,
                           {"peak_force_kN": "peak electric cylinder force [kN]",
                            "rms_force_kN": "RMS electric cylinder force [kN]",
                            "peak_gas_force_kN": "peak gas-spring force [kN]"}),
    "tether": SweepSystem(f"tethered dumbbell in orbit, deployment from 50 m, random EA, α, reel rate "
                          f"(RK4 dt = {TETHER_DT} s)", tether_sample, tether_simulator,
                          {"peak_tension_mN": "peak tether tension [mN]",
                           "final_libration_deg": "final in-plane libration [deg]",
                           "final_length_m": "final deployed length [m]"}),
}
