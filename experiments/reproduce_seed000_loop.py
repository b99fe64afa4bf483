"""Seed 000, closed loop: the closed-loop grasp of sims/dual_arm_grasp.py — the planar dual-arm
spacecraft (fixed hub) with both arm tips welded to one target — forward dynamics in jaxsoa against
Pinocchio's constrained dynamics.

    python -m experiments.reproduce_seed000_loop [--out outputs/seed000-loop] [--duration 10] [--dt 0.01]

The set-up: all six joints start at −45°, at rest; five joints get a constant 0.1 N·m and the
sixth (link ID 7's) is free. The loop is found and cut by the configuration-parameter traversal
(`jaxsoa.topology.configuration_parameters`, max_cuts = 1): the tree is hub–arm 1–target and hub–arm 2, cut (a planar
weld) between arm 2's tip and the target; its path matrix P is printed.

jaxsoa: `forward_dynamics_constrained` (recursive, Delassus system with ABA columns; the dense KKT
solve as a cross-check) for the joint accelerations at t = 0, and `rollout_constrained` (RK4, one
`lax.scan`) for ``--duration`` seconds with Baumgarte stabilisation G q̈ = −Ġ q̇ − 2α G q̇ − β² e
(α = β = ``--baumgarte``) and without it (α = β = 0, the same compiled program). Here the motion is
slow and both drifts stay near round-off, so the table adds a kicked start (every joint rate
1e-6 rad/s, violating G q̇ = 0): without stabilisation the error grows linearly, with it it decays
as e(t) = (e₀ + (ė₀ + α e₀) t) e^{−αt}.

Reference, built independently here by hand from the documented parameters (`pin.Model.addJoint` with
`JointModelRZ`, `appendBodyToJoint`; the target appended to arm 1's tip joint): the loop as one
`pin.RigidConstraintModel` (CONTACT_6D between arm 2's tip frame and the target's second grasp
frame; three of its six rows vanish for this planar mechanism, so Pinocchio's proximal solver is
used with μ = 1e-10, which converges to the exact constrained acceleration), `pin.initConstraintDynamics`
and `pin.constraintDynamics`, integrated with the same RK4 in numpy (experiments/seed002_reference.py),
with Pinocchio's Baumgarte corrector set to K_p = β², K_d = 2α (and off for the unstabilised run).
Outputs: joint angles and rates from both engines, accelerations, and the error
curves on a log scale (seed000_loop.png), the constraint error of the four jaxsoa runs
(seed000_loop_drift.png), the table (markdown and JSON).
"""

import json
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import pinocchio as pin

from experiments._common import (
    NO_RESUME_NOTE,
    interruptible,
    legend_outside,
    markdown_table,
    run_command,
    save_figure,
    start_run,
    write_text,
)
from experiments.seed002_reference import pin_rollout
from jaxsoa.constraints.closure import constraint_error
from jaxsoa.constraints.dynamics import forward_dynamics_constrained
from jaxsoa.integrators import rollout_constrained
from sims import dual_arm_grasp as grasp
from sims import dual_arm_spacecraft as sc

PROXIMAL = (1e-14, 1e-10, 50)              # Pinocchio's proximal solver: accuracy, μ, max iterations
LABELS = [f"joint, link ID {k}" for k in range(2, 8)]
V_KICK = 1e-6                              # rad/s: initial rates off the constraint, to show the stabilisation


def pinocchio_model():
    """(pin.Model, RigidConstraintModel) of the grasp from the documented parameters, by hand."""
    pm = pin.Model()
    pm.gravity = pin.Motion.Zero()
    jid = {}
    for arm, ids in ((1, (2, 3, 4)), (2, (5, 6, 7))):
        angle, pos = sc.HUB_MOUNTS[arm]
        parent, X = 0, pin.SE3(pin.utils.rpyToMatrix(0.0, 0.0, angle), np.array(pos))
        for link_id in ids:
            _, length, mass, com, inertia = sc.LINKS[link_id]
            jid[link_id] = pm.addJoint(parent, pin.JointModelRZ(), X, f"id{link_id}")
            pm.appendBodyToJoint(jid[link_id], pin.Inertia(mass, np.array(com), sc.link_inertia(*inertia)),
                                 pin.SE3.Identity())
            parent, X = jid[link_id], pin.SE3(np.eye(3), np.array([length, 0.0, 0.0]))
    tip1 = pin.SE3(np.eye(3), np.array([sc.LINKS[4][1], 0.0, 0.0]))     # target's grasp 0 = arm 1's E end
    mass, com, inertia = grasp.object_inertia()
    pm.appendBodyToJoint(jid[4], pin.Inertia(mass, com, inertia), tip1)
    tip2 = pin.SE3(np.eye(3), np.array([sc.LINKS[7][1], 0.0, 0.0]))     # arm 2's E end
    grasp1 = tip1 * pin.SE3(*grasp.grasp_pose())                      # target's grasp 1 in arm 1's tip joint
    cm = pin.RigidConstraintModel(pin.ContactType.CONTACT_6D, pm, jid[7], tip2, jid[4], grasp1,
                                  pin.ReferenceFrame.LOCAL)
    return pm, cm


class PinocchioLoop:
    """Pinocchio's constrained forward dynamics of the grasp with a Baumgarte corrector (K_p, K_d)."""

    def __init__(self, kp=0.0, kd=0.0):
        self.model, cm = pinocchio_model()
        gains = cm.m_baumgarte_parameters
        gains.Kp, gains.Kd = kp, kd
        cm.setBaumgarteCorrectorParameters(gains)
        self.constraint = cm
        self.data = self.model.createData()
        self.models = pin.StdVec_RigidConstraintModel()
        self.models.append(cm)
        self.datas = pin.StdVec_RigidConstraintData()
        self.datas.append(cm.createData())
        pin.initConstraintDynamics(self.model, self.data, self.models, self.datas)

    def acceleration(self, q, v, tau):
        prox = pin.ProximalSettings(*PROXIMAL)
        return pin.constraintDynamics(self.model, self.data, q, v, tau, self.models, self.datas, prox).copy()

    def error(self, q):
        """Planar loop error [angle z; x; y] of the cut frames' relative pose (arm 2's tip -> grasp 1)."""
        pin.forwardKinematics(self.model, self.data, q)
        cm = self.constraint
        X = (self.data.oMi[cm.joint1_id] * cm.joint1_placement).inverse() * (self.data.oMi[cm.joint2_id]
                                                                             * cm.joint2_placement)
        return np.r_[pin.log3(X.rotation)[2], (X.rotation.T @ X.translation)[:2]]


def jaxsoa_rollouts(model, closure, tau, dt, n_steps, cases):
    """q, v (len(cases), n_steps + 1, 6) of RK4 rollouts, one per (q0, v0, α, β) in cases, one compile."""
    @jax.jit
    def rollout(q0, v0, alpha, beta):
        return rollout_constrained(model, q0, v0, lambda t, q, v: tau, closure, dt, n_steps, baumgarte=(alpha, beta))

    out = [rollout(*(jnp.asarray(x, jnp.float64) for x in case)) for case in cases]
    return np.array([np.asarray(o[0]) for o in out]), np.array([np.asarray(o[1]) for o in out])


def plot(path, t, q, v, qdd, errors, title):
    """q, q̇ (jaxsoa solid, Pinocchio dotted), q̈, and the error curves (log scale)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(4, 1, sharex=True, figsize=(9.5, 9))
    for ax, (label, (ours, ref)) in zip(axes[:3], (("q [deg]", q), ("q̇ [deg/s]", v), ("q̈ [deg/s²]", qdd)),
                                        strict=True):
        for k in range(6):
            ax.plot(t, np.rad2deg(ours[:, k]), color=f"C{k}", label=f"{LABELS[k]} (jaxsoa)")
            ax.plot(t, np.rad2deg(ref[:, k]), color="k", linestyle=":", linewidth=0.8,
                    label="Pinocchio (each joint)" if k == 0 else None)
        ax.set(ylabel=label)
    axes[0].set_title(title, fontsize=9)
    legend_outside(axes[0], fontsize=7)
    for label, e in errors.items():
        axes[3].semilogy(t, np.maximum(e, 1e-20), label=label)
    axes[3].set(ylabel="max |jaxsoa − Pinocchio|\n[rad, rad/s, rad/s²]", xlabel="t [s]")
    legend_outside(axes[3], fontsize=7)
    for ax in axes:
        ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)


def plot_drift(path, t, drifts, title):
    """max |e|(t) of the cut for each run, log scale."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 3.5))
    for label, e in drifts.items():
        ax.semilogy(t, np.maximum(e, 1e-20), label=label)
    ax.set(xlabel="t [s]", ylabel="max |e| [rad, m]", title=title)
    ax.title.set_fontsize(9)
    ax.grid(alpha=0.3, which="both")
    legend_outside(ax, fontsize=7)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)


def run(out_dir, duration=10.0, dt=0.01, baumgarte=5.0):
    """Rows (quantity, value, acceptance bound or None) of the table; writes the plot, markdown and JSON to out_dir."""
    out = start_run(out_dir)
    start = time.perf_counter()
    top = grasp.topology()
    model, closure = grasp.model_and_closure()
    q0, v0, tau = grasp.Q0, np.zeros(6), grasp.control_torque()
    n = round(duration / dt)
    t = dt * np.arange(n + 1)

    # t = 0: joint accelerations (recursive: below, from the unstabilised trajectory's first state)
    qdd_dense = np.asarray(jax.jit(lambda: forward_dynamics_constrained(model, q0, v0, tau, closure,
                                                                        method="dense")[0])())
    qdd_pin = PinocchioLoop().acceleration(q0, v0, tau)
    model32, closure32 = grasp.model_and_closure(dtype=jnp.float32)
    qdd_32 = np.asarray(jax.jit(lambda q, v, u: forward_dynamics_constrained(model32, q, v, u, closure32)[0])(
        *(jnp.asarray(x, jnp.float32) for x in (q0, v0, tau))), np.float64)

    # trajectories: with (α = β) and without stabilisation, both engines
    gains = [(baumgarte, baumgarte), (0.0, 0.0)]
    v_kick = np.full(6, V_KICK)                                     # off the velocity constraint: G v ≠ 0
    cases = [(q0, v0, *gains[0]), (q0, v0, *gains[1]), (q0, v_kick, *gains[0]), (q0, v_kick, *gains[1])]
    qs, vs = jaxsoa_rollouts(model, closure, jnp.asarray(tau), dt, n, cases)
    accel_fn = jax.jit(jax.vmap(lambda q, v, alpha, beta: forward_dynamics_constrained(
        model, q, v, jnp.asarray(tau), closure, baumgarte=(alpha, beta))[0], in_axes=(0, 0, None, None)))
    qdd_rec = np.asarray(accel_fn(jnp.asarray(qs[1]), jnp.asarray(vs[1]), 0.0, 0.0))[0]      # q0, v0, α = β = 0
    errors_fn = jax.jit(jax.vmap(lambda q: constraint_error(model, q, closure)))
    drift = [np.abs(np.asarray(errors_fn(jnp.asarray(q)))).max(axis=1) for q in qs]          # (T,) per run
    ref = {}
    for (alpha, beta), name in zip(gains, ("stabilised", "free"), strict=True):
        loop = PinocchioLoop(kp=beta ** 2, kd=2 * alpha)
        ref[name] = pin_rollout(loop.model, q0, v0, lambda tk, c, q, v, loop=loop: loop.acceleration(q, v, tau), n, dt)
        ref[name + "_drift"] = max(np.abs(loop.error(q)).max() for q in ref[name][0])
        if name == "stabilised":
            ref["qdd"] = np.array([loop.acceleration(q, v, tau) for q, v in zip(*ref[name], strict=True)])
    qdd_traj = np.asarray(accel_fn(jnp.asarray(qs[0]), jnp.asarray(vs[0]), baumgarte, baumgarte))
    e_q, e_v = (np.abs(x[0] - r).max(axis=1) for x, r in ((qs, ref["stabilised"][0]), (vs, ref["stabilised"][1])))
    e_a = np.abs(qdd_traj - ref["qdd"]).max(axis=1)
    e_free = np.abs(qs[1] - ref["free"][0]).max()
    elapsed = time.perf_counter() - start

    over = f"over {duration:g} s"
    rows = [                                                        # (quantity, value, acceptance bound or None)
        ("max |q̈(0)| [rad/s²]", np.abs(qdd_pin).max(), None),
        ("max |q̈(0) jaxsoa (recursive) − Pinocchio| [rad/s²]", np.abs(qdd_rec - qdd_pin).max(), 1e-9),
        ("max |q̈(0) jaxsoa (dense KKT) − Pinocchio| [rad/s²]", np.abs(qdd_dense - qdd_pin).max(), 1e-9),
        ("max |q̈(0) jaxsoa float32 − Pinocchio| / max |q̈(0)|", np.abs(qdd_32 - qdd_pin).max() / np.abs(qdd_pin).max(),
         None),
        (f"max |q jaxsoa − Pinocchio| {over}, Baumgarte [rad]", e_q.max(), 1e-8),
        (f"max |q̇ jaxsoa − Pinocchio| {over}, Baumgarte [rad/s]", e_v.max(), 1e-8),
        (f"max |q̈ jaxsoa − Pinocchio| {over}, Baumgarte [rad/s²]", e_a.max(), 1e-8),
        (f"max |q jaxsoa − Pinocchio| {over}, no stabilisation [rad]", e_free, 1e-8),
        (f"constraint drift max |e| {over}, jaxsoa, Baumgarte α = β = {baumgarte:g} /s", drift[0].max(), 1e-8),
        (f"constraint drift max |e| {over}, jaxsoa, no stabilisation", drift[1].max(), None),
        (f"constraint drift max |e| {over}, Pinocchio, K_p = {baumgarte ** 2:g}, K_d = {2 * baumgarte:g}",
         ref["stabilised_drift"], None),
        (f"constraint drift max |e| {over}, Pinocchio, no corrector", ref["free_drift"], None),
        (f"kicked start (q̇0 = {V_KICK:g} rad/s on every joint): final |e|, jaxsoa, Baumgarte", drift[2][-1], None),
        (f"kicked start (q̇0 = {V_KICK:g} rad/s on every joint): final |e|, jaxsoa, no stabilisation", drift[3][-1],
         None),
    ]
    rows = [(a, float(b), c) for a, b, c in rows]
    title = (f"Closed-loop grasp: q0 = −45°, 0.1 N·m on 5 joints, RK4 dt = {dt:g} s, Baumgarte α = β = {baumgarte:g}\n"
             "jaxsoa solid, Pinocchio dotted")
    plot(out / "seed000_loop.png", t, (qs[0], ref["stabilised"][0]), (vs[0], ref["stabilised"][1]),
         (qdd_traj, ref["qdd"]), {"q [rad]": e_q, "q̇ [rad/s]": e_v, "q̈ [rad/s²]": e_a}, title)
    plot_drift(out / "seed000_loop_drift.png", t, dict(zip(
        ["Baumgarte", "no stabilisation", "kicked start, Baumgarte", "kicked start, no stabilisation"], drift,
        strict=True)), f"Constraint error of the cut, jaxsoa, RK4 dt = {dt:g} s, α = β = {baumgarte:g} /s")
    p_text = "\n".join("    " + " ".join(str(int(x)) for x in r) for r in top.P)
    cut = ", ".join(f"{f} = {int(getattr(top, f)[0])}" for f in ("cut_link_a", "cut_interface_a", "cut_link_b",
                                                                   "cut_interface_b", "cut_type"))
    lines = markdown_table(("quantity", "value", "acceptance"),
                           [(a, f"{b:.3e}", "-" if c is None else f"≤ {c:g}") for a, b, c in rows])
    table = "\n".join([
        f"Closed-loop grasp (seed 000 §4.3), {duration:g} s, dt = {dt:g} s, float64, zero gravity ({elapsed:.1f} s)",
        "", lines, "",
        f"cut (storage indices = link ID − 1): {cut}",
        f"P of the cut tree (the seed's eq. 30), rows/columns = link IDs 1..8:\n{p_text}"])
    print(table)
    write_text(out / "seed000_loop_table.md", table + "\n")
    write_text(out / "seed000_loop_table.json", json.dumps([dict(quantity=a, value=b, bound=c)
                                                             for a, b, c in rows], indent=1, ensure_ascii=False))
    print(f"wrote {out / 'seed000_loop_table.md'}, {out / 'seed000_loop.png'} and {out / 'seed000_loop_drift.png'}")
    return rows


@interruptible(NO_RESUME_NOTE)
def main(argv=None):
    return run_command(run, __doc__, argv, "outputs/seed000-loop", ("--duration", 10.0, "simulated time [s]"),
                ("--dt", 0.01, "RK4 step [s]"), ("--baumgarte", 5.0, "Baumgarte α = β [1/s]", "nonnegative"),
                out_help="folder for the plot and tables")


if __name__ == "__main__":
    sys.exit(main())
