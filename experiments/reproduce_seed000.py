"""Seed 000: the variable-topology dual-arm spacecraft (sims/dual_arm_spacecraft.py), inverse dynamics
of configurations 1-3 by the masked-operator method (φ_r = P_s ⊙ φ_o, docs/derivations.md) against Pinocchio.

    python -m experiments.reproduce_seed000 [--out outputs/seed000] [--period 2000] [--samples 401]

The motion: fixed hub, planar, all joints start at 0 and every arm joint follows
q = 45°·sin(π t / T) (T = ``--period``, default 2000 s), sampled at ``--samples`` points
over [0, T]; inverse dynamics is algebraic, so no integration. jaxsoa: `inverse_dynamics_operator` on
`apply_configuration(template, arrays, interfaces)`, all three configurations in one
``jit(vmap(...))`` over the stacked configuration parameters; the recursive `jaxsoa.rnea` on the same
models as a cross-check. Also the 3-D variant (free hub at rest, tilted joint axes, hub wrench in the
first six entries) unless ``--planar-only``.

Reference: Pinocchio models built here from each configuration's tree written by hand (parent,
inboard interface, parent's attachment interface) and the design table (`pin.Model`, `addJoint`
with `JointModelRZ`, `appendBodyToJoint`), with each link's frame at its inboard interface (reversed
links: com and inertia re-expressed about the E end), not through jaxsoa's topology code.
Torques are matched by joint name. Gravity zero.
"""

import pathlib
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import pinocchio as pin

import jaxsoa
from experiments._common import (
    NO_RESUME_NOTE,
    check_out,
    command_parser,
    interruptible,
    legend_outside,
    markdown_table,
    positive_float,
    positive_int,
    save_figure,
    start_run,
    write_text,
)
from jaxsoa.topology.reconfigure import apply_configuration, design_arrays
from sims import dual_arm_spacecraft as sc

AMPLITUDE = np.deg2rad(45.0)
CONFIGS = (1, 2, 3)
# by hand, storage index = link ID − 1: parent, inboard interface, parent's attachment interface
HAND_TOPOLOGY = {
    1: ([-1, 0, 1, 2, 0, 4, 5], [0, 0, 0, 0, 0, 0, 0], [-1, 1, 1, 1, 2, 1, 1]),
    2: ([-1, 6, 0, 2, 0, 4, 5], [0, 0, 0, 0, 0, 0, 0], [-1, 1, 1, 1, 2, 1, 1]),
    3: ([-1, 2, 3, 6, 0, 4, 5], [0, 1, 1, 1, 0, 0, 0], [-1, 0, 0, 1, 2, 1, 1]),
}


def motion(t, period, xp=np):
    """q, q̇, q̈ (…, 6) of q = A sin(π t / T) on every arm joint."""
    w = np.pi / period
    s, c = xp.sin(w * t)[..., None], xp.cos(w * t)[..., None]
    ones = xp.ones(6)
    return AMPLITUDE * s * ones, AMPLITUDE * w * c * ones, -AMPLITUDE * w ** 2 * s * ones


def full_state(q, v, a, floating, xp=np):
    """Prepend the hub's state (identity pose, at rest) for the floating variant."""
    if not floating:
        return q, v, a
    lead = q.shape[:-1]
    pose = xp.broadcast_to(xp.asarray([0.0, 0, 0, 0, 0, 0, 1]), (*lead, 7))
    zero = xp.zeros((*lead, 6))
    return xp.concatenate([pose, q], -1), xp.concatenate([zero, v], -1), xp.concatenate([zero, a], -1)


def hand_homog(link_id, interface, floating):
    """4×4 pose of an interface frame in its link's design frame, from the design table."""
    H = np.eye(4)
    if link_id == 1:
        angle, pos = sc.HUB_MOUNTS[interface]
        c, s = np.cos(angle), np.sin(angle)
        H[:2, :2], H[:3, 3] = [[c, -s], [s, c]], pos
    elif interface == 1:
        tilt = sc.TILT_3D if floating else 0.0
        c, s = np.cos(tilt), np.sin(tilt)
        H[1:3, 1:3], H[0, 3] = [[c, -s], [s, c]], sc.LINKS[link_id][1]
    return H


def pinocchio_model(config, floating=False):
    """Pinocchio model of a configuration from HAND_TOPOLOGY and the table. Joint names 'id<k>'."""
    parent, inboard, attach = HAND_TOPOLOGY[config]
    pm = pin.Model()
    pm.gravity = pin.Motion.Zero()
    jid = {}
    if floating:
        jid[0] = pm.addJoint(0, pin.JointModelFreeFlyer(), pin.SE3.Identity(), "id1")
        hub_i = sc.HUB_MASS * sc.HUB_EDGE ** 2 / 6.0
        pm.appendBodyToJoint(jid[0], pin.Inertia(sc.HUB_MASS, np.zeros(3), hub_i * np.eye(3)), pin.SE3.Identity())
    else:
        jid[0] = 0                                            # hub = universe (fixed, hub frame = world)
    pending = [k for k in range(1, 7)]
    while pending:                                            # add parents before children
        k = next(k for k in pending if parent[k] in jid)
        pending.remove(k)
        j = parent[k]
        X = np.linalg.inv(hand_homog(j + 1, inboard[j], floating)) @ hand_homog(j + 1, attach[k], floating)
        jid[k] = pm.addJoint(jid[j], pin.JointModelRZ(), pin.SE3(X[:3, :3], X[:3, 3]), f"id{k + 1}")
        _, _, mass, com, inertia = sc.LINKS[k + 1]
        Hi = np.linalg.inv(hand_homog(k + 1, inboard[k], floating))    # design frame -> link frame
        c = Hi[:3, :3] @ np.asarray(com) + Hi[:3, 3]                     # reversed: com − (L, 0, 0), tilted
        J = Hi[:3, :3] @ sc.link_inertia(*inertia) @ Hi[:3, :3].T
        pm.appendBodyToJoint(jid[k], pin.Inertia(mass, c, J), pin.SE3.Identity())
    return pm


def pinocchio_torques(config, floating, q, v, a):
    """pin.rnea over samples, reordered to jaxsoa's v layout (hub, then link IDs 2..7)."""
    pm = pinocchio_model(config, floating)
    pd = pm.createData()
    qs, vs, as_ = full_state(q, v, a, floating)
    names = (["id1"] if floating else []) + [f"id{k}" for k in range(2, 8)]
    jids = [pm.getJointId(n) for n in names]
    order = np.concatenate([np.arange(pm.idx_vs[j], pm.idx_vs[j] + pm.nvs[j]) for j in jids])
    qorder = np.concatenate([np.arange(pm.idx_qs[j], pm.idx_qs[j] + pm.nqs[j]) for j in jids])
    out = []
    for qk, vk, ak in zip(qs, vs, as_, strict=True):
        pq, pv, pa = np.empty(pm.nq), np.empty(pm.nv), np.empty(pm.nv)
        pq[qorder], pv[order], pa[order] = qk, vk, ak
        out.append(pin.rnea(pm, pd, pq, pv, pa)[order])
    return np.array(out)


def jaxsoa_torques(floating, q, v, a):
    """(operator, recursive) torques (3, T, nv), all configurations in one jit(vmap(...)) call."""
    design = sc.design(floating)
    template, arrays = sc.model(1, floating), design_arrays(design)
    stacked = jnp.asarray([sc.configuration(k) for k in CONFIGS], jnp.int32)
    ids = jnp.asarray(sc.IDS, jnp.int32)

    @jax.jit
    def torques(stacked, q, v, a):
        def one(interfaces):
            mdl = apply_configuration(template, arrays, interfaces, ids)
            return (jax.vmap(lambda *x: jaxsoa.inverse_dynamics_operator(mdl, *x))(q, v, a),
                    jax.vmap(lambda *x: jaxsoa.rnea(mdl, *x))(q, v, a))
        return jax.vmap(one)(stacked)

    op, rec = torques(stacked, *(jnp.asarray(x) for x in full_state(q, v, a, floating)))
    return np.asarray(op), np.asarray(rec)


def plot(path, title, t, tau, errors, labels):
    """τ (T, k) and its error vs Pinocchio (T, k); the hub's six entries (labels before the joints')
    dashed and the joints solid, each group on the colour cycle, so every series has its own style."""
    import matplotlib.pyplot as plt

    n_hub = len(labels) - 6
    styles = [(f"C{k}", "--") for k in range(n_hub)] + [(f"C{k}", "-") for k in range(6)]
    units = "[N m]" + (" (hub: N, N m)" if n_hub else "")
    fig, axes = plt.subplots(2, 1, sharex=True, figsize=(9.5, 5.5))
    for k, (label, (colour, ls)) in enumerate(zip(labels, styles, strict=True)):
        axes[0].plot(t, tau[:, k], color=colour, ls=ls, label=label)
        axes[1].semilogy(t, np.maximum(errors[:, k], 1e-20), color=colour, ls=ls, label=label)
    axes[0].set(ylabel=f"τ {units}", title=title)
    axes[0].title.set_fontsize(9)
    legend_outside(axes[0], fontsize=7)
    axes[1].set(ylabel=f"|τ_jaxsoa − τ_Pinocchio|\n{units}", xlabel="t [s]")
    for ax in axes:
        ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)


def run(out: pathlib.Path, period=2000.0, samples=401, floating=True):
    """Rows (variant, configuration, max |τ|, max error vs Pinocchio, max |operator − rnea|)."""
    out = start_run(out)
    start = time.perf_counter()
    text = sc.print_path_matrices(CONFIGS)
    t = np.linspace(0.0, period, samples)
    q, v, a = motion(t, period)
    rows = []
    for flt in (False, True) if floating else (False,):
        variant = "3-D, free hub" if flt else "planar, fixed hub"
        op, rec = jaxsoa_torques(flt, q, v, a)
        for i, k in enumerate(CONFIGS):
            ref = pinocchio_torques(k, flt, q, v, a)
            e = np.abs(op[i] - ref)
            hub = [f"hub {c}" for c in ("f_x", "f_y", "f_z", "n_x", "n_y", "n_z")] if flt else []
            labels = hub + [f"joint, link ID {j}" for j in range(2, 8)]
            name = f"seed000_config{k}" + ("_floating" if flt else "")
            plot(out / f"{name}.png", f"Configuration {k} ({sc.CONFIGURATION_NAMES[k]}), {variant}, T = {period:g} s",
                 t, op[i], e, labels)
            rows.append((variant, k, float(np.abs(ref).max()), float(e.max()), float(np.abs(op[i] - rec[i]).max())))
    elapsed = time.perf_counter() - start
    table = "\n".join([
        f"Dual-arm spacecraft, q = 45° sin(π t / T), T = {period:g} s, {samples} samples, float64, zero gravity "
        f"({elapsed:.1f} s)", "",
        markdown_table(("variant", "configuration", "max abs τ", "max abs error vs Pinocchio", "relative",
                        "max abs operator − rnea"),
                       [(r[0], r[1], f"{r[2]:.3e}", f"{r[3]:.2e}", f"{r[3] / r[2]:.1e}", f"{r[4]:.2e}") for r in rows]),
    ])
    print(table)
    write_text(out / "seed000_table.md", "\n".join([table, "", *text]) + "\n")
    print(f"wrote {out / 'seed000_table.md'} and {len(rows)} plots seed000_*.png")
    return rows


@interruptible(NO_RESUME_NOTE)
def main(argv=None):
    parser = command_parser(__doc__, "outputs/seed000")
    parser.add_argument("--period", type=positive_float, default=2000.0,
                        help="T [s] of q = 45° sin(π t / T) (default 2000)")
    parser.add_argument("--samples", type=positive_int, default=401, help="time samples over [0, T] (default 401)")
    parser.add_argument("--planar-only", action="store_true", help="skip the 3-D free-hub variant")
    args = parser.parse_args(argv)
    run(check_out(parser, args.out), args.period, args.samples, not args.planar_only)
    return 0


if __name__ == "__main__":
    sys.exit(main())
