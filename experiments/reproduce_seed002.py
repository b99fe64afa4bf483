"""Seed 002: a 7-DOF space manipulator (sims/space_arm_7dof.py, zero gravity), fixed and
free-floating hub, forward and inverse dynamics and computed-torque control, dt = 0.01 s, RK4.

    python -m experiments.reproduce_seed002 [--out outputs/seed002] [--duration 10] [--runs a b ...]

Runs: (a) fixed-base forward dynamics under harmonic torques from rest at
q = 0; (b) fixed-base inverse dynamics of q = 0.1 cos t; (c) free-floating forward dynamics (joint
angles, hub pose disturbance, momentum and centre-of-mass conservation); (d) free-floating inverse
dynamics of q = 0.1 sin t with the hub free and initially at rest (joint torques and the wrench the
arm exerts on the hub, [moment; force] about the hub origin, hub frame — jaxsoa's `base_wrench`);
(e) computed-torque tracking from q = 0 with critically damped gains K_p = ω², K_d = 2ω, ω = 10 rad/s,
fixed and free-floating, against the closed form e(t) = (e₀ + (ė₀ + ω e₀) t) e^{−ωt}: with the
torque held over each RK4 step (a digital controller, zero-order hold) the closed form is met to
O(ω dt) only (shown at dt = 0.01 s and 0.001 s); with the controller evaluated at every RK4 stage
(`control_at_stages=True`, the continuous loop) it is met to RK4's accuracy.

References, computed independently in numpy: Pinocchio with jaxsoa's RK4 stages (`pin.aba`,
`pin.integrate`, dexp⁻¹ from `pin.dIntegrate`); `pin.rnea` for (b); for (d) Pinocchio's own route —
`pin.crba` + `pin.nonLinearEffects` for the hub acceleration (M_bb a_b + M_bj q̈_j + h_b = 0) and the
joint torques, and the hub wrench −¹X₂ f₂ from `pin.rnea`'s force `data.f[2]` transmitted across the
first arm joint (equal to I_hub a_hub + v ×* I_hub v, jaxsoa's formula). MuJoCo (`mj_step`,
classical RK4, τ in `qfrc_applied`) for (a) and `mj_inverse` for (b). Joints are mapped by name.
"""

import collections
import pathlib
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import pinocchio as pin
from scipy.spatial.transform import Rotation

import jaxsoa
from experiments._common import (
    NO_RESUME_NOTE,
    check_out,
    command_parser,
    interruptible,
    markdown_table,
    positive_float,
    start_run,
    write_text,
)
from experiments._progress import progress
from experiments.seed002_reference import jax_dexp_inv, pin_free_floating, pin_rollout, rk4
from experiments.seed002_report import err, plot, row
from sims import space_arm_7dof as arm

DT = 0.01
OMEGA = 10.0                          # rad/s, closed-loop natural frequency of (e)
ZERO6, ONES, NONE = np.zeros(6), np.ones(7), np.zeros(7)
Motion = collections.namedtuple("Motion", "pos vel acc")


def harmonic(s, c):
    """x(t) = s sin t + c cos t per joint and its derivatives, as functions of (t, xp = np or jnp)."""
    s, c = np.asarray(s, float), np.asarray(c, float)
    return Motion(lambda t, xp=np: s * xp.sin(t) + c * xp.cos(t), lambda t, xp=np: s * xp.cos(t) - c * xp.sin(t),
                  lambda t, xp=np: -s * xp.sin(t) - c * xp.cos(t))


TAU_A = harmonic([1, 0, 0.3, 0, 0.2, 0.03, 0.02], [0, 0.3, 0, 0.2, 0, 0, 0])
Q_B = harmonic(NONE, 0.1 * ONES)
TAU_C = harmonic([0, 0.5, 0, 0.1, 0, 0, 0], [1, 0, 0.5, 0, 0.1, 0.05, 0.01])
Q_D = harmonic(0.1 * ONES, NONE)
Q_E = harmonic([1, 0, 0.5, 0, 1, 0, 0.5], [0, 1, 0, 0.5, 0, 1, 0])


def rest(floating, q_joints=NONE, v_joints=NONE):
    """(q, v): hub at the origin and at rest (when floating), joints as given."""
    return (np.r_[ZERO6, 1.0, q_joints], np.r_[ZERO6, v_joints]) if floating else (np.r_[q_joints], np.r_[v_joints])


JOINTS = [f"{name} (J{k + 1})" for k, name in enumerate(arm.JOINT_NAMES)]


def forward(floating, torque, n):
    """jaxsoa and Pinocchio rollouts from rest at q = 0 under joint torques torque(t, xp) (7,):
    (model, qs, vs, ref_q, ref_v)."""
    model, pm = arm.build(floating), arm.build_pinocchio(floating)
    pd, hub, (q0, v0) = pm.createData(), ZERO6[:6 * floating], rest(floating)
    qs, vs = jax.jit(lambda mdl: jaxsoa.rollout(mdl, jnp.asarray(q0), jnp.asarray(v0),
                                                lambda t, q, v: jnp.r_[hub, torque(t, jnp)], DT, n))(model)
    ref_q, ref_v = pin_rollout(pm, q0, v0, lambda t, c, q, v: pin.aba(pm, pd, q, v, np.r_[hub, torque(t, np)]), n, DT)
    return model, np.asarray(qs), np.asarray(vs), ref_q, ref_v


def run_a(out, t, n):
    import mujoco

    model, qs, vs, ref_q, ref_v = forward(False, TAU_A.pos, n)
    m = arm.build_mujoco(DT)
    d, adr = mujoco.MjData(m), [m.joint(name).dofadr[0] for name in model.joint_names]  # = qposadr (hinges)
    mj = [np.r_[d.qpos[adr], d.qvel[adr]]]
    for _ in range(n):
        d.qfrc_applied[adr] = TAU_A.pos(d.time)
        mujoco.mj_step(m, d)
        mj.append(np.r_[d.qpos[adr], d.qvel[adr]])
    mj = np.array(mj)
    errors = {"q vs Pinocchio": err(qs, ref_q), "v vs Pinocchio": err(vs, ref_v),
              "q vs MuJoCo": err(qs, mj[:, :7]), "v vs MuJoCo": err(vs, mj[:, 7:])}
    plot(out / "seed002_a_fixed_forward.png", "(a) fixed base, forward dynamics (Figs. 3-4)", t,
         [("q [rad]", qs, JOINTS, None), ("v [rad/s]", vs, JOINTS, None)], errors, "[rad, rad/s]")
    scale = {"q": (ref_q, "q [rad]"), "v": (ref_v, "v [rad/s]")}
    return [row("a", scale[key[0]][1], key.split()[-1], e, scale[key[0]][0], "1e-9") for key, e in errors.items()]


def run_b(out, t, n):
    import mujoco
    model, pm, m = arm.build(False), arm.build_pinocchio(False), arm.build_mujoco(DT)
    pd, d, adr = pm.createData(), mujoco.MjData(m), [m.joint(name).dofadr[0] for name in model.joint_names]
    tau = jax.jit(jax.vmap(lambda tk: jaxsoa.rnea(model, Q_B.pos(tk, jnp), Q_B.vel(tk, jnp), Q_B.acc(tk, jnp))))(t)
    ref = np.array([pin.rnea(pm, pd, Q_B.pos(tk), Q_B.vel(tk), Q_B.acc(tk)) for tk in t])
    mj = []
    for tk in t:
        d.qpos[adr], d.qvel[adr], d.qacc[adr] = Q_B.pos(tk), Q_B.vel(tk), Q_B.acc(tk)
        mujoco.mj_inverse(m, d)
        mj.append(d.qfrc_inverse[adr].copy())
    errors = {"τ vs Pinocchio": err(tau, ref), "τ vs MuJoCo": err(tau, np.array(mj))}
    plot(out / "seed002_b_fixed_inverse.png", "(b) fixed base, inverse dynamics of q = 0.1 cos t (Fig. 5)", t,
         [("τ [N m]", np.asarray(tau), JOINTS, None)], errors, "[N m]")
    return [row("b", "τ [N m]", key.split()[-1], e, ref, "1e-10") for key, e in errors.items()]


def run_c(out, t, n):
    model, qs, vs, ref_q, ref_v = forward(True, TAU_C.pos, n)
    (pos, rot), (ref_pos, ref_rot) = [(q[:, :3], Rotation.from_quat(q[:, 3:7]).as_rotvec()) for q in (qs, ref_q)]
    errors = {"joint q [rad]": err(qs[:, 7:], ref_q[:, 7:]), "hub position [m]": err(pos, ref_pos),
              "hub rotation vector [rad]": err(rot, ref_rot), "v [m/s, rad/s]": err(vs, ref_v)}
    batch = jax.jit(jax.vmap(jaxsoa.spatial_momentum, (None, 0, 0)))
    h, h_arm = np.asarray(batch(model, qs, vs)), np.asarray(batch(model, qs, vs * (np.arange(13) >= 6)))
    com = np.asarray(jax.jit(jax.vmap(jaxsoa.center_of_mass, (None, 0)))(model, qs))
    plot(out / "seed002_c_floating_forward.png", "(c) free-floating, forward dynamics (Figs. 6-7)", t,
         [("joint q [rad]", qs[:, 7:], JOINTS, None), ("hub position [mm]", 1e3 * pos, list("xyz"), None),
          ("hub rotation vector [deg]", np.degrees(rot), list("xyz"), None)],
         {**{f"{key} vs Pinocchio": e for key, e in errors.items()}, "|h(t) − h(0)| [N s, N m s]": err(h, h[:1])},
         "[unit in the legend]")
    rows = [row("c", key, "Pinocchio", e, scale, "1e-9") for (key, e), scale in
            zip(errors.items(), (ref_q[:, 7:], ref_pos, ref_rot, ref_v), strict=True)]
    rows += [row("c", f"{name} drift / max arm momentum", "conservation", err(h[:, k], h[:1, k]),
                 np.linalg.norm(h_arm[:, k], axis=1), "1e-12", relative=True)
             for name, k in (("angular momentum", slice(0, 3)), ("linear momentum", slice(3, 6)))]
    return [*rows, row("c", "centre-of-mass drift [m]", "conservation", err(com, com[:1]), pos, "1e-12")]


def run_d(out, t, n):
    model, pm = arm.build(True), arm.build_pinocchio(True)
    pd, (q0, v0) = pm.createData(), rest(True, Q_D.pos(0.0), Q_D.vel(0.0))

    def solve(tk, q, v):
        sol = jaxsoa.rnea_free_floating(model, q, v, Q_D.acc(tk, jnp))
        return sol.base_acceleration, sol.tau_joints, sol.base_wrench

    def step(state, k):
        state = rk4(lambda c, q, v: jnp.r_[solve((k + c) * DT, q, v)[0], Q_D.acc((k + c) * DT, jnp)],
                    lambda q, dq: jaxsoa.integrate(model, q, dq), jax_dexp_inv(model), *state, DT)
        return state, state

    @jax.jit
    def simulate(q0, v0):
        _, (qs, vs) = jax.lax.scan(step, (q0, v0), jnp.arange(n, dtype=jnp.float64))
        return jax.vmap(solve)(jnp.asarray(t), jnp.r_[q0[None], qs], jnp.r_[v0[None], vs])

    _, tau, wrench = simulate(jnp.asarray(q0), jnp.asarray(v0))
    ref_q, ref_v = pin_rollout(pm, q0, v0, lambda tk, c, q, v: np.r_[pin_free_floating(
        pm, pd, q, v, Q_D.acc(tk + c * DT))[0], Q_D.acc(tk + c * DT)], n, DT)
    ref = [pin_free_floating(pm, pd, q, v, Q_D.acc(tk))[1:] for tk, q, v in zip(t, ref_q, ref_v, strict=True)]
    ref_tau, ref_wrench = map(np.array, zip(*ref, strict=True))
    errors = {"τ vs Pinocchio (crba + nle)": err(tau, ref_tau),
              "hub wrench vs Pinocchio (rnea data.f)": err(wrench, ref_wrench)}
    plot(out / "seed002_d_floating_inverse.png", "(d) free-floating, inverse dynamics of q = 0.1 sin t (Fig. 8)", t,
         [("joint τ [N m]", np.asarray(tau), JOINTS, None),
          ("hub moment [N m]", np.asarray(wrench[:, :3]), ["Mx", "My", "Mz"], None),
          ("hub force [N]", np.asarray(wrench[:, 3:]), ["Fx", "Fy", "Fz"], None)], errors, "[N m, N]")
    return [row("d", quantity, key.split(" vs ")[1], e, scale, "1e-10") for (key, e), quantity, scale in
            zip(errors.items(), ("τ [N m]", "hub wrench [N m, N]"), (ref_tau, ref_wrench), strict=True)]


def jax_track(floating, n, dt, kp, kd, at_stages=False):
    """jaxsoa computed-torque rollout tracking Q_E from rest at q = 0, τ held over each step (or
    evaluated at every RK4 stage): joint angles (n + 1, 7)."""
    model, (q0, v0) = arm.build(floating), map(jnp.asarray, rest(floating))

    def control(tk, q, v):
        target = Q_E.pos(tk, jnp), Q_E.vel(tk, jnp), Q_E.acc(tk, jnp)
        if floating:
            return jnp.r_[ZERO6, jaxsoa.computed_torque_free_floating(model, q, v, *target, kp, kd)]
        return jaxsoa.computed_torque(model, q, v, *target, kp, kd)

    run = jax.jit(lambda mdl: jaxsoa.rollout(mdl, q0, v0, control, dt, n, control_at_stages=at_stages))
    return np.asarray(run(model)[0])[:, -7:]


def pin_track(floating, n, kp, kd, at_stages=False):
    """The Pinocchio reference of `jax_track` at dt = DT (same hold or stages, same scheme)."""
    pm = arm.build_pinocchio(floating)
    pd, held = pm.createData(), {}

    def accel(tk, c, q, v):
        if c == 0.0 or at_stages:                           # torque held over the step, or per stage
            ts = tk + c * DT if at_stages else tk
            a_cmd = Q_E.acc(ts) + kd * (Q_E.vel(ts) - v[-7:]) + kp * (Q_E.pos(ts) - q[-7:])   # joints last
            held["tau"] = np.r_[ZERO6, pin_free_floating(pm, pd, q, v, a_cmd)[1]] if floating else pin.rnea(
                pm, pd, q, v, a_cmd)
        return pin.aba(pm, pd, q, v, held["tau"])

    return pin_rollout(pm, *rest(floating), accel, n, DT)[0][:, -7:]


def run_e(out, t, n):
    kp, kd = jaxsoa.critically_damped_gains(OMEGA)
    e0, de0, tt = Q_E.pos(0.0), Q_E.vel(0.0), t[:, None]
    closed, target = (e0 + (de0 + OMEGA * e0) * tt) * np.exp(-OMEGA * tt), Q_E.pos(tt)
    panels, errors, rows = [], {}, []
    for floating in (False, True):
        e, ref_e = target - jax_track(floating, n, DT, kp, kd), target - pin_track(floating, n, kp, kd)
        base = "free-floating" if floating else "fixed base"
        panels.append((f"e, {base} [rad]", e, JOINTS, closed))
        errors |= {f"{base}: e vs Pinocchio": err(e, ref_e), f"{base}: e vs closed form": err(e, closed)}
        rows += [row("e", f"{base} tracking error [rad]", "Pinocchio", err(e, ref_e), ref_e, "1e-9"),
                 row("e", f"{base} tracking error [rad]", "closed form", err(e, closed), closed, "O(ω dt) e₀ (ZOH)")]
        e_s = target - jax_track(floating, n, DT, kp, kd, at_stages=True)
        ref_s = target - pin_track(floating, n, kp, kd, at_stages=True)
        errors |= {f"{base}, control at stages: e vs closed form": err(e_s, closed)}
        rows += [row("e", f"{base}, control at RK4 stages [rad]", "Pinocchio", err(e_s, ref_s), ref_s, "1e-9"),
                 row("e", f"{base}, control at RK4 stages [rad]", "closed form", err(e_s, closed), closed,
                     "RK4: O((ω dt)⁴) e₀")]
    fine = target - jax_track(False, 10 * n, DT / 10, kp, kd)[::10]        # the same with a 1 kHz hold
    errors[f"fixed base, dt = {DT / 10:g} s: e vs closed form"] = err(fine, closed)
    rows.append(row("e", f"fixed base, dt = {DT / 10:g} s, tracking error [rad]", "closed form", err(fine, closed),
                    closed, "O(ω dt) e₀ (ZOH)"))
    plot(out / "seed002_e_computed_torque.png",
         f"(e) computed torque, ω = {OMEGA:g} rad/s (Fig. 10); dotted: closed form", t, panels, errors, "[rad]")
    return rows


RUNS = {"a": run_a, "b": run_b, "c": run_c, "d": run_d, "e": run_e}


def run(out: pathlib.Path, duration=10.0, only=tuple(RUNS)):
    out = start_run(out)
    n = round(duration / DT)
    t, rows, start = np.arange(n + 1) * DT, [], time.perf_counter()
    for name in progress(only, desc="seed002 runs"):
        rows += RUNS[name](out, t, n)
    table = "\n".join([f"Space arm 7-DOF, hub {arm.HUB.mass:g} kg, dt = {DT} s, {duration:g} s, RK4, float64 "
                       f"({time.perf_counter() - start:.1f} s)", "",
                       markdown_table(("run", "quantity", "reference", "max abs error", "max abs value", "expected"),
                                      rows)])
    print(table)
    write_text(out / "seed002_table.md", table + "\n")
    print(f"wrote {out / 'seed002_table.md'} and {len(only)} plots seed002_*.png")
    return rows


@interruptible(NO_RESUME_NOTE)
def main(argv=None):
    parser = command_parser(__doc__, "outputs/seed002")
    parser.add_argument("--duration", type=positive_float, default=10.0, help="simulated time [s] (default 10)")
    parser.add_argument("--runs", nargs="+", choices=sorted(RUNS), default=sorted(RUNS), help="subset of (a)-(e)")
    args = parser.parse_args(argv)
    run(check_out(parser, args.out), args.duration, args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
