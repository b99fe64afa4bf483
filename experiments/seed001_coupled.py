"""The coupled run of seed 001's reproduction (experiments/reproduce_seed001.py, its module doc): the orbit,
the platform + tether + robot stepped by RK4 in compiled chunks with dt from the shortest element, and its
samples (deployed length, tension along the tether, libration, the Jacobi energy terms and the accumulated
power terms: reel, Carnot and viscous losses, strain flux, joint work)."""

import jax
import jax.numpy as jnp
import numpy as np

import jaxsoa
from experiments._progress import advance
from jaxsoa.systems import orbit as orb
from jaxsoa.systems.tether import coupling
from jaxsoa.systems.tether import reel_control as rc
from jaxsoa.systems.tether.fem import element_strain, element_tension, mass_apply, mass_bands
from jaxsoa.systems.tether.fem_energy import elastic_energy, tether_kinetic_energy
from jaxsoa.systems.tether.reels import energy_rates, tether_inputs

ORBIT = orb.circular_orbit(7.0e6)
N_ORBIT = float(orb.mean_motion(ORBIT))
CHUNK = 40                                  # RK4 steps per compiled chunk (one sample per chunk)
DT_MAX = 0.3                                # s, bound set by the arms' joint PD loops (stable margin)


def gravity_gradient_energy(system, t, state):
    """U_gg = ½ k Σ [m (|c|² − 3 (i·c)²) + 3 iᵀJi − tr J] over links, stored tether points and tether
    nodes (the potential of the linear field −k A_f r; k = μ/R³ = n²)."""
    k, i = orb.gravity_gradient_rate(ORBIT, t)
    total = 0.0
    for model, q in ((system.platform, state.q_platform), (system.robot, state.q_robot)):
        R, p = jaxsoa.forward_kinematics(model, q)
        c = p + jnp.einsum("kij,kj->ki", R, model.com[:, 0])
        J = jnp.einsum("kij,kjl,kml->kim", R, model.inertia_com[:, 0], R)
        m = model.mass[:, 0]
        total = total + 0.5 * k * jnp.sum(m * (jnp.sum(c * c, 1) - 3 * (c @ i) ** 2)
                                          + 3 * jnp.einsum("i,kij,j->k", i, J, i) - jnp.trace(J, axis1=1, axis2=2))
    tether = coupling.with_exit_nodes(system, state)
    ends, m_stored = tether.r[jnp.array([0, -1])], coupling.stored_mass(system, tether)
    total = total + 0.5 * k * jnp.sum(m_stored * (jnp.sum(ends**2, 1) - 3 * (ends @ i) ** 2))
    a_ext = orb.gravity_gradient_acceleration(ORBIT, t, tether.r)
    return total - 0.5 * jnp.sum(tether.r * mass_apply(*mass_bands(system.tether, tether.s[1] - tether.s[0]), a_ext))


def power(system, state, q_ref, acc):
    """(5,) power terms: reel, −Carnot, −viscous, strain flux (jaxsoa.systems.tether.reels.energy_rates, the
    reels holding `acc.exit_tension` of the coupled accelerations) and joint PD τ·q̇."""
    rates = energy_rates(system.tether, coupling.with_exit_nodes(system, state), tether_inputs(),
                         exit_tension=acc.exit_tension)
    joint_power = 0.0
    for q, v, ref in ((state.q_platform, state.v_platform, q_ref[0]), (state.q_robot, state.v_robot, q_ref[1])):
        tau = -system.gains[0] * (q[7:] - ref) - system.gains[1] * v[6:]
        joint_power = joint_power + tau @ v[6:]
    return jnp.stack([rates.reel, -rates.carnot, -rates.viscous, rates.strain, joint_power])


def diagnostics(system, t, state):
    """Per sample: (l, tensions (n,), θ, φ, energies [T, U_el, U_gg, −n H_z])."""
    tether = coupling.with_exit_nodes(system, state)
    eps, eps_dot, _ = element_strain(system.tether, tether)
    kinetic = tether_kinetic_energy(system.tether, tether)
    ends_v = tether.v[jnp.array([0, -1])]
    kinetic = kinetic + 0.5 * jnp.sum(coupling.stored_mass(system, tether) * jnp.sum(ends_v**2, 1))
    for model, q, v in ((system.platform, state.q_platform, state.v_platform),
                        (system.robot, state.q_robot, state.v_robot)):
        kinetic = kinetic + 0.5 * v @ jaxsoa.crba(model, q) @ v                  # ½ vᵀ M v
    _, angular = coupling.total_momentum(system, state)
    energies = jnp.stack([kinetic, elastic_energy(system.tether, tether), gravity_gradient_energy(system, t, state),
                          -N_ORBIT * angular[2]])
    theta, phi, _, _ = rc.chord_libration(ORBIT, t, tether)
    return tether.s[1] - tether.s[0], element_tension(system.tether, eps, eps_dot), theta, phi, energies


@jax.jit
def coupled_chunk(system, state, q_ref, t0, dt, law, work):
    """CHUNK RK4 steps from t0; returns the final state, the accumulated work (∫ P dt by the same RK4 stages)
    and the samples."""
    def reel(t, st):     # the stage's end nodes (RK4-advanced exit points) stand for the exits' sensors
        return rc.reel_acceleration(system.tether, ORBIT, t, st.tether, law)

    def body(carry, k):
        x, w = carry
        x, dw = coupling.rk4_step_coupled(system, t0 + k * dt, x, tether_inputs(), q_ref, reel, dt,
                                          power=lambda t, st, acc: power(system, st, q_ref, acc))
        return (x, w + dw), None                                                # W += ∫ P dt

    (state, work), _ = jax.lax.scan(body, (state, work), jnp.arange(CHUNK, dtype=jnp.float64))
    return state, work, diagnostics(system, t0 + CHUNK * dt, state)


def run_coupled(system, t_end, law, theta0):
    """Host loop over chunks with dt from the current length. Returns a dict of sampled arrays."""
    L = float(system.tether.length)
    rot = np.asarray(orb.lvlh_rotation(ORBIT, 0.0)) @ np.asarray(
        jaxsoa.spatial.rotation.exp_so3(jnp.array([0, 0, theta0])))
    v0 = float(rc.deployment_profile(law, 0.0)[1])
    state, q_ref = coupling.initial_state(system, law.l_start * 1.002, (L - law.l_start, L), rotation=rot,
                                          omega=(0.0, 0.0, N_ORBIT), separation=v0)
    work = jnp.zeros(5)
    samples = [(0.0, jax.jit(diagnostics)(system, 0.0, state), np.zeros(5))]

    def step(t):                                            # one chunk, dt from the current shortest element
        nonlocal state, work
        dt = rc.stable_dt(system.tether, float(state.tether.s[1] - state.tether.s[0]), DT_MAX)
        state, work, diag = coupled_chunk(system, state, q_ref, t, dt, law, work)
        samples.append((t + CHUNK * dt, diag, np.asarray(work)))
        return t + CHUNK * dt

    advance(t_end, step, "coupled run")
    out = {"t": np.array([s[0] for s in samples]), "work": np.array([s[2] for s in samples])}
    for k, name in enumerate(("l", "tension", "theta", "phi", "energy")):
        out[name] = np.array([np.asarray(s[1][k]) for s in samples])
    if not all(np.all(np.isfinite(out[k])) for k in ("l", "tension", "theta", "energy", "work")):
        raise FloatingPointError("the coupled run diverged (non-finite samples)")
    return out
