"""Gas-assisted Gough-Stewart platform (sims/stewart_gas.py): kinematics, Kane inverse dynamics, forward
dynamics, gas springs, singularity flags, batching and gradients — each against an independent
reference (energy computed from positions by jvp, jacfwd of the position map, Newton-Euler by hand,
finite differences). float64 throughout (conftest)."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import checkify

from jaxsoa.spatial.rotation import exp_so3, log_so3, quat_to_rotation, rotation_to_quat
from jaxsoa.systems.stewart import dynamics as sd
from jaxsoa.systems.stewart import geometry as st
from jaxsoa.systems.stewart import poses
from sims import stewart_gas as sg
from tests.helpers.trees import counting


def general_params(gas_mode):
    """The sim platform with a full (non-diagonal) platform inertia, an off-axis centre of mass
    and per-leg differing masses, so no term can hide behind symmetry."""
    rng = np.random.default_rng(3)
    params = sg.build(gas_mode)
    q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    inertia = q @ np.diag([1.8e4, 2.5e4, 3.1e4]) @ q.T
    scale = jnp.asarray(rng.uniform(0.7, 1.3, 9))
    return dataclasses.replace(params, platform_inertia=jnp.asarray(inertia), platform_com=jnp.array([0.2, -0.15, 0.8]),
                               barrel_mass=params.barrel_mass * scale, rod_inertia=params.rod_inertia * scale[::-1])


def random_coeffs(seed):
    """(3, 6, 3) amplitude, angular frequency, phase of 3 tones per pose axis: a smooth random path
    within the stroke (traced, so one compiled program serves every path)."""
    rng = np.random.default_rng(seed)
    amp = rng.uniform(0.2, 1.0, (6, 3)) * np.array([0.03, 0.03, 0.05, 0.03, 0.03, 0.03])[:, None]
    return jnp.asarray(np.stack([amp, rng.uniform(1.0, 6.0, (6, 3)), rng.uniform(0, 2 * np.pi, (6, 3))]))


def random_path(coeffs):
    """pose_path of `random_coeffs`: offset(s) = Σ a sin(ω s + φ) per axis about the mid pose."""
    return sg.euler_path(lambda s: jnp.sum(coeffs[0] * jnp.sin(coeffs[1] * s + coeffs[2]), axis=1))


TIMES = jnp.linspace(0.0, 2.0, 41)


def vee(w_hat):
    return jnp.stack([w_hat[2, 1], w_hat[0, 2], w_hat[1, 0]])


def total_energy(params, path, s):
    """KE of the 19 bodies + gravity PE + isothermal gas energy, from positions only: every velocity
    is a jvp of a position along the path (independent of Kane's partial velocities)."""
    one = jnp.ones_like(s)

    def positions(s):
        p, R = path(s)
        joint = p[None] + params.platform_points @ R.T
        leg = joint - params.base_points
        length = jnp.linalg.norm(leg, axis=1)
        n = leg / length[:, None]
        barrel = params.base_points + params.barrel_com[:, None] * n          # r₁ = b + c₁ n
        rod = joint - params.rod_com[:, None] * n                             # r₂ = A − c₂ n
        com = p + R @ params.platform_com                                     # r_C = p + R c
        return dict(R=R, n=n, barrel=barrel, rod=rod, com=com, length=length)

    x, xd = jax.jvp(positions, (s,), (one,))
    omega_leg = jnp.cross(x["n"], xd["n"])                                     # ω_i = n × ṅ (no spin)
    omega = vee(xd["R"] @ x["R"].T)                                            # ω_P = vee(Ṙ Rᵀ)
    inertia = x["R"] @ params.platform_inertia @ x["R"].T
    kinetic = 0.5 * (jnp.sum(params.barrel_mass * jnp.sum(xd["barrel"] ** 2, 1))
                     + jnp.sum(params.rod_mass * jnp.sum(xd["rod"] ** 2, 1))
                     + jnp.sum((params.barrel_inertia + params.rod_inertia) * jnp.sum(omega_leg ** 2, 1))
                     + params.platform_mass * jnp.sum(xd["com"] ** 2) + omega @ inertia @ omega)
    g = params.gravity
    potential = -(jnp.sum(params.barrel_mass * (x["barrel"] @ g)) + jnp.sum(params.rod_mass * (x["rod"] @ g))
                  + params.platform_mass * (x["com"] @ g))
    column = params.gas_length_mid + x["length"][6:] - params.leg_length_mid
    if params.gas_mode == "shared":
        volume, volume_mid = params.tank_volume + params.piston_area * jnp.sum(column), \
            params.tank_volume + params.piston_area * jnp.sum(params.gas_length_mid)
    else:
        volume, volume_mid = params.tank_volume + params.piston_area * column, \
            params.tank_volume + params.piston_area * params.gas_length_mid
    p_abs_mid, p_amb = params.precharge + params.ambient_pressure, params.ambient_pressure
    gas = -p_abs_mid * volume_mid * jnp.log(volume / volume_mid) + p_amb * (volume - volume_mid)   # −∫(p − p_amb) dV
    gas = jnp.sum(gas) if params.gas_mode != "none" else 0.0 * jnp.sum(gas)
    return kinetic + potential + gas, x["length"], xd["length"]


@pytest.mark.parametrize("gas_mode", ["individual", "shared", "none"])
def test_power_balance(gas_mode):
    """Σ F_i l̇_i (electric) = d/dt (KE + gravity PE + gas energy) at 41 instants of two random
    paths; relative to the largest power term. 1e-9: float64 sums of ~1e5 W terms."""
    params = general_params(gas_mode)

    def residual(coeffs, s):
        path = random_path(coeffs)
        (_, _, ldot), (dE, _, _) = jax.jvp(lambda x: total_energy(params, path, x), (s,), (jnp.ones_like(s),))
        res = sd.inverse_dynamics(params, *poses.path_state(path, s))
        electric = jnp.sum(res.force * ldot[:6])
        return electric - dE, jnp.sum(jnp.abs(res.force * ldot[:6])) + jnp.abs(dE), res.status.ok

    coeffs = jnp.stack([random_coeffs(0), random_coeffs(1)])
    diff, scale, ok = jax.jit(jax.vmap(jax.vmap(residual, (None, 0)), (0, None)))(coeffs, TIMES)
    assert bool(ok.all())
    assert float(jnp.max(jnp.abs(diff)) / jnp.max(scale)) < 1e-9


def test_massless_legs_newton_euler():
    """Zero leg inertia: F = J₁₋₆⁻ᵀ (platform Newton-Euler wrench − gravity − J₇₋₉ᵀ τ_P), the wrench
    built here from second derivatives of the centre-of-mass path and ω from Ṙ Rᵀ, the gas force from
    p V = const (1e-9 relative to the largest force)."""
    params = general_params("individual")
    path = random_path(random_coeffs(2))

    def reference(s):
        one = jnp.ones_like(s)
        com_path = lambda x: path(x)[0] + path(x)[1] @ params.platform_com              # noqa: E731
        omega_path = lambda x: vee(jax.jvp(lambda y: path(y)[1], (x,), (one,))[1] @ path(x)[1].T)  # noqa: E731
        a_com = jax.jvp(lambda x: jax.jvp(com_path, (x,), (one,))[1], (s,), (one,))[1]
        omega, alpha = jax.jvp(omega_path, (s,), (one,))
        p, R = path(s)
        inertia = R @ params.platform_inertia @ R.T
        force = params.platform_mass * (a_com - params.gravity)
        moment = inertia @ alpha + jnp.cross(omega, inertia @ omega) + jnp.cross(R @ params.platform_com, force)
        J = st.jacobian(params, p, R)
        length = jnp.linalg.norm(p[None] + params.platform_points[6:] @ R.T - params.base_points[6:], axis=1)
        volume = params.tank_volume + params.piston_area * (params.gas_length_mid + length - params.leg_length_mid)
        volume_mid = params.tank_volume + params.piston_area * params.gas_length_mid
        tau = ((params.precharge + params.ambient_pressure) * volume_mid / volume - params.ambient_pressure) \
            * params.piston_area
        return jnp.linalg.solve(J[:6].T, jnp.concatenate([force, moment]) - J[6:].T @ tau)

    light = jax.jit(jax.vmap(lambda s: sd.inverse_dynamics_light_leg(params, *poses.path_state(path, s)).force))(TIMES)
    ref = jax.jit(jax.vmap(reference))(TIMES)
    assert float(jnp.max(jnp.abs(light - ref)) / jnp.max(jnp.abs(ref))) < 1e-9
    full = jax.jit(jax.vmap(lambda s: sd.inverse_dynamics(params, *poses.path_state(path, s)).force))(TIMES)
    assert float(jnp.max(jnp.abs(full - ref)) / jnp.max(jnp.abs(ref))) > 1e-4      # the legs' inertia matters


def test_kinematics_closed_form_vs_autodiff():
    """Closed-form l̇, ω_i, l̈, α_i, a_A vs jvp of lengths / directions / velocities along a path, and
    J vs jax.jacfwd of the leg lengths w.r.t. (p, left rotation vector) (1e-10 relative)."""
    params = general_params("individual")
    path = random_path(random_coeffs(4))

    @jax.jit
    def errors(s):
        one = jnp.ones_like(s)
        motion = lambda x: st.leg_motion(params, *poses.path_state(path, x))   # noqa: E731
        m, md = jax.jvp(motion, (s,), (one,))
        omega_ref = jnp.cross(m.direction, md.direction)                  # n × ṅ
        pairs = [(m.rate, md.length), (m.omega, omega_ref), (m.accel, md.rate), (m.alpha, md.omega),
                 (m.joint_acceleration, md.joint_velocity), (m.joint_velocity, md.joint)]
        e = [jnp.max(jnp.abs(a - b)) / jnp.maximum(1.0, jnp.max(jnp.abs(b))) for a, b in pairs]
        p, R = path(s)
        jac = jax.jacfwd(lambda x: st.leg_lengths(params, p + x[:3], exp_so3(x[3:]) @ R)[2])(jnp.zeros(6))
        return jnp.stack([*e, jnp.max(jnp.abs(jac - st.jacobian(params, p, R)))])

    err = jax.vmap(errors)(TIMES)
    assert float(jnp.max(err)) < 1e-10, np.asarray(jnp.max(err, 0))


def test_inverse_forward_round_trip():
    """Forward dynamics of the Kane forces returns the path's acceleration (1e-9 relative), and an
    RK4 rollout (dt = 5 ms, 0.5 s) under those forces tracks the path: RK4's O(dt⁴) global error,
    bound 1e-7 m / rad."""
    params = general_params("shared")
    path = random_path(random_coeffs(5))

    def accel_error(s):
        p, R, u, udot = poses.path_state(path, s)
        force = sd.inverse_dynamics(params, p, R, u, udot).force
        return jnp.max(jnp.abs(sd.forward_dynamics(params, p, R, u, force) - udot)) / jnp.max(jnp.abs(udot))

    assert float(jnp.max(jax.jit(jax.vmap(accel_error))(TIMES))) < 1e-9

    dt, n = 5e-3, 100
    half_steps = jnp.arange(2 * n + 1, dtype=jnp.float64) * (dt / 2)
    table = jax.jit(jax.vmap(lambda s: sd.inverse_dynamics(params, *poses.path_state(path, s)).force))(half_steps)

    def control(t, p, R, u):                     # the Kane forces at the RK4 stage times (multiples of dt / 2)
        return table[jnp.round(t / (dt / 2)).astype(jnp.int32)]

    p0, R0, u0, _ = poses.path_state(path, jnp.float64(0.0))
    trajectory = jax.jit(lambda: sd.simulate(params, p0, rotation_to_quat(R0), u0, control, dt, n))()
    assert int(trajectory.first_invalid) == -1 and bool(trajectory.ok.all())
    ps, quats = trajectory.p, trajectory.quat
    p_ref, R_ref = jax.vmap(path)(jnp.arange(n + 1, dtype=jnp.float64) * dt)
    rot_err = jnp.linalg.norm(log_so3(jnp.swapaxes(R_ref, -1, -2) @ quat_to_rotation(quats)), axis=-1)
    assert float(jnp.max(jnp.abs(ps - p_ref))) < 1e-7
    assert float(jnp.max(rot_err)) < 1e-7


def test_invalid_poses_are_flagged():
    """A leg out of stroke and a singular J₁₋₆ give ok = False, NaN forces (never a silent finite
    garbage value), a checkify error and a host ValueError; finite gradients at a flagged pose."""
    params = sg.build()
    zero = jnp.zeros(6)
    ident = jnp.eye(3)
    run = jax.jit(sd.inverse_dynamics)
    high = run(params, jnp.array([0.0, 0.0, 2.2]), ident, zero, zero)        # heave +0.6 m > stroke 0.45 m
    assert not bool(high.status.reachable) and bool(high.status.nonsingular)
    assert bool(jnp.all(jnp.isnan(high.force)))
    with pytest.raises(ValueError, match="out of stroke"):
        poses.raise_if_invalid(high.status)
    wide = dataclasses.replace(params, stroke_min=jnp.full(9, 1e-3), stroke_max=jnp.full(9, 10.0),
                               platform_points=params.platform_points.at[6:, :2].multiply(0.5))   # gas legs ≠ 0
    flat = run(wide, jnp.array([0.0, 0.0, 0.2]), ident, zero, zero)           # joint planes coincide: legs horizontal
    assert bool(flat.status.reachable) and not bool(flat.status.nonsingular)
    assert float(flat.status.singular_values[-1]) < 1e-12 * float(flat.status.singular_values[0])
    assert bool(jnp.all(jnp.isnan(flat.force)))
    with pytest.raises(ValueError, match="condition number"):
        poses.raise_if_invalid(flat.status)
    checked = jax.jit(checkify.checkify(lambda p: poses.check_pose(poses.pose_status(wide, p, ident))))
    err, _ = checked(jnp.array([0.0, 0.0, 0.2]))
    with pytest.raises(checkify.JaxRuntimeError, match="singular"):
        err.throw()
    err, _ = checked(jnp.array([0.0, 0.0, 1.6]))
    err.throw()                                                                 # the mid pose passes
    grad = jax.grad(lambda m: jnp.nansum(run(dataclasses.replace(wide, platform_mass=m), jnp.array(
        [0.0, 0.0, 0.2]), ident, zero, zero).force))(wide.platform_mass)
    assert bool(jnp.isfinite(grad))
    for kwargs, field in ((dict(d_A=2.1), "d_A"), (dict(r_B=-1.0), "r_B"), (dict(r_PA=0.0), "r_PA")):
        args = dict(r_A=1.2, d_A=0.3, r_PA=0.9, r_B=1.8, d_B=2.6, r_PB=0.9) | kwargs
        with pytest.raises(ValueError, match=field):
            st.seed_points(**args)
    with pytest.raises(ValueError, match="gas_mode"):
        sg.build("bottle")
    with pytest.raises(ValueError, match="tank_volume"):
        sg.build(tank_volume=-1.0)


def test_batch_compiles_once():
    """4096 random poses and 4096 payload masses, two batches each: one trace per program; the batch
    equals single evaluations (1e-12 relative)."""
    params = sg.build()
    rng = np.random.default_rng(7)

    def poses():
        x = rng.uniform(-1, 1, (4096, 12)) * np.array([0.1] * 3 + [0.05] * 3 + [0.3] * 6)
        return jnp.asarray(sg.HOME)[None] + x[:, :3], exp_so3(jnp.asarray(x[:, 3:6])), jnp.asarray(x[:, 6:])

    one_pose, pose_count = counting(lambda p, R, udot: sd.inverse_dynamics(params, p, R, jnp.zeros(6), udot).force)
    batch = jax.jit(jax.vmap(one_pose))
    for _ in range(2):
        p, R, udot = poses()
        forces = batch(p, R, udot)
    single = jax.jit(lambda p, R, udot: sd.inverse_dynamics(params, p, R, jnp.zeros(6), udot).force)
    assert float(jnp.max(jnp.abs(forces[17] - single(p[17], R[17], udot[17])))) < 1e-12 * float(jnp.max(jnp.abs(
        forces[17])))
    one_mass, mass_count = counting(lambda m: sd.inverse_dynamics(dataclasses.replace(params, platform_mass=m),
                                                                  p[0], R[0], jnp.zeros(6), udot[0]).force)
    batch_mass = jax.jit(jax.vmap(one_mass))
    for _ in range(2):
        batch_mass(jnp.asarray(rng.uniform(5e3, 2e4, 4096)))
    assert pose_count[0] == 1 and mass_count[0] == 1


def test_grad_peak_force_vs_finite_differences():
    """d(peak |F|)/d(tank volume, r_A) along the sine profile (40 instants) vs central differences
    (h = 1e-6 relative; agreement 1e-6 relative: FD truncation O(h²) and round-off ~1e-10/h)."""
    base = sg.build()
    path = sg.sine_profile()
    times = jnp.linspace(0.05, 4.0, 40)
    center = jnp.array([0.0, 0.0, -0.2])

    @jax.jit
    def peak(x):
        params = dataclasses.replace(base, tank_volume=x[0], platform_points=st.hexapod_points(x[1], 0.3, 0.9, center))
        forces = jax.vmap(lambda s: sd.inverse_dynamics(params, *poses.path_state(path, s)).force)(times)
        return jnp.max(jnp.abs(forces))

    x0 = jnp.array([0.06, 1.2])
    grad = jax.jit(jax.grad(peak))(x0)
    for k in range(2):
        h = 1e-6 * x0[k]
        e = jnp.zeros(2).at[k].set(h)
        fd = (peak(x0 + e) - peak(x0 - e)) / (2 * h)
        assert abs(float(grad[k] - fd)) < 1e-6 * abs(float(fd)), (k, grad, fd)


def test_closed_loop_multibody_cross_check():
    """Kane's electric forces = the actuated prismatic forces of the same platform built as a closed-loop
    multibody system (experiments/seed004_reference.py: jaxsoa tree + spherical cuts,
    `inverse_dynamics_constrained`, gas forces as external wrenches on rods and barrels) at 8 instants of a
    random path: 1e-10 relative (measured 7e-15; the 33 × 33 system [S_aᵀ G_cᵀ] has condition number ≈ 10)."""
    from experiments.seed004_reference import closed_loop_forces

    instants = np.linspace(0.1, 1.5, 8)
    taus, kanes = closed_loop_forces(general_params("individual"), random_path(random_coeffs(6)),
                                     jnp.asarray(instants))
    for s, tau, kane in zip(instants, taus, kanes, strict=True):
        assert float(jnp.max(jnp.abs(tau - kane))) < 1e-10 * float(jnp.max(jnp.abs(kane))), (s, tau, kane)
