"""Trajectory optimisation with gradients through rollouts: a free-floating 7-DOF space arm's
point-to-point motion with the least hub attitude disturbance.

    python -m experiments.trajopt [--problem arm|tether] [--out outputs/trajopt] [--iters 150] [--harmonics 3]

`--problem tether` runs the tether retrieval profile with minimal final libration instead
(`experiments/trajopt_tether.py`, its own options: `python -m experiments.trajopt_tether --help`).
The rest of this text is the arm problem (the default).

System: `sims/space_arm_7dof.py` on its free-floating 2000 kg hub, zero gravity, zero initial
momentum. The arm moves its joints from q_a to q_b in T seconds. The naive trajectory is the quintic
rest-to-rest blend q(t) = q_a + (q_b − q_a) s(t/T), s = 10τ³ − 15τ⁴ + 6τ⁵. The optimised one adds
Σ_k c_jk (1 − cos 2πk t/T) per joint j (k = 1..K): zero value and zero rate at both ends, so every
candidate is still rest-to-rest between the same joint angles. The decision variables are the 7 K
coefficients c.

With the momentum zero the hub's twist follows the joints, v_hub = −M_bb⁻¹ M_bm q̇ (jaxsoa's
`hub_response`, from CRBA), so the hub attitude is a rollout of that kinematic map (explicit midpoint
on the configuration manifold, `jaxsoa.integrate`). Loss: the mean squared hub attitude deviation
|log(R₀ᵀ R(t))|² along the motion, plus the final deviation squared (weight 10), plus 1e-6 times the
mean squared joint acceleration. Gradients come from `jax.value_and_grad` through the whole rollout;
optax's Adam takes the steps.

Check by a second code path: the optimised joint motion is replayed through the *dynamics* — the
torques from `rnea_free_floating` along the planned motion drive `aba_free_floating` in an RK4
rollout — and the hub attitude reached is compared with the kinematic prediction.

Writes trajopt.png (hub attitude deviation and joint angles, naive vs optimised; loss curve),
trajopt.json and prints a table.

Saving and reruns: trajopt.png and trajopt.json are written atomically, once the optimisation is done.
The optimisation is checkpointed to trajopt.checkpoint.npz in --out (coefficients, Adam's state, the
iteration count, the loss history; atomically, every 10 iterations, at the last one and at Ctrl-C,
which exits 130): a rerun with the same settings resumes from the iteration saved (it prints which) and
ends with the same result as an uninterrupted run; the checkpoint is removed once trajopt.json is
written. trajopt.json and the checkpoint record every setting (iters, harmonics, steps, duration, lr)
and the sources' fingerprint; an --out holding either of other settings is refused (exit 2, naming the
settings that differ) unless --overwrite is given (a checkpoint of the same settings is resumed even
then); a finished run's settings are recomputed and replaced. When stderr is not a terminal, a
progress line is printed every 30 s.
"""

import dataclasses
import pathlib
import sys

import jax
import jax.numpy as jnp
import matplotlib
import numpy as np
import optax

import jaxsoa
from experiments._checkpoint import CHECKPOINT_EVERY, Checkpoint, checkpoint_note, descend
from experiments._common import (
    OneLineParser,
    Record,
    SettingsMismatchError,
    add_overwrite,
    check_out,
    command_parser,
    exit_status,
    interruptible,
    markdown_table,
    nonnegative_int,
    open_record,
    positive_float,
    positive_int,
    save_figure,
    write_json,
)
from jaxsoa.algorithms.free_floating import base_and_joint_dofs, hub_response, rnea_free_floating
from jaxsoa.spatial.rotation import log_so3, quat_to_rotation
from sims import space_arm_7dof as arm

matplotlib.use("Agg")
import matplotlib.pyplot as plt

Q_A = np.deg2rad([0.0, 0.0, 20.0, -40.0, 20.0, 0.0, 0.0])
Q_B = np.deg2rad([60.0, 30.0, -30.0, 50.0, -40.0, 30.0, 45.0])


@dataclasses.dataclass(frozen=True)
class Problem:
    duration: float = 4.0
    steps: int = 200
    harmonics: int = 3
    final_weight: float = 10.0
    accel_weight: float = 1e-6


def joint_motion(problem: Problem, coeffs, t):
    """Planned joint angle, rate and acceleration (7,) each at time t; coeffs (7, K)."""
    T = problem.duration
    tau = t / T
    s = tau**3 * (10 - 15 * tau + 6 * tau**2)
    ds = 30 * tau**2 * (1 - tau) ** 2 / T
    dds = 60 * tau * (1 - tau) * (1 - 2 * tau) / T**2
    w = 2 * jnp.pi * jnp.arange(1, problem.harmonics + 1, dtype=coeffs.dtype) / T
    q = Q_A + (Q_B - Q_A) * s + coeffs @ (1 - jnp.cos(w * t))
    qd = (Q_B - Q_A) * ds + coeffs @ (w * jnp.sin(w * t))
    qdd = (Q_B - Q_A) * dds + coeffs @ (w**2 * jnp.cos(w * t))
    return q, qd, qdd


def hub_velocity(model, problem, coeffs, q_hub, t):
    """(nv,) generalized velocity with the joints as planned and the hub moving at zero momentum."""
    base_dofs, joint_dofs = base_and_joint_dofs(model)
    q_joints, qd_joints, _ = joint_motion(problem, coeffs, t)
    q = jnp.concatenate([q_hub, q_joints])
    v_hub = -hub_response(model, q) @ qd_joints                              # v_b = −M_bb⁻¹ M_bm q̇
    return q, jnp.zeros(model.nv, q.dtype).at[base_dofs].set(v_hub).at[joint_dofs].set(qd_joints)


def attitude_rollout(model, problem, coeffs):
    """Hub attitude deviation |log R₀ᵀR| (steps + 1,) and joint accelerations (steps + 1, 7) along the plan."""
    dt = problem.duration / problem.steps
    q0_hub = jaxsoa.neutral(model, coeffs.dtype)[:7]

    def step(q_hub, t):                                               # explicit midpoint on the manifold
        q, v = hub_velocity(model, problem, coeffs, q_hub, t)
        q_mid = jaxsoa.integrate(model, q, 0.5 * dt * v)
        _, v_mid = hub_velocity(model, problem, coeffs, q_mid[:7], t + 0.5 * dt)
        return jaxsoa.integrate(model, q, dt * v_mid)[:7], q_hub

    times = jnp.arange(problem.steps + 1, dtype=coeffs.dtype) * dt
    q_last, hubs = jax.lax.scan(step, q0_hub, times[:-1])
    hubs = jnp.concatenate([hubs, q_last[None]])
    R0 = quat_to_rotation(q0_hub[3:])
    deviation = jax.vmap(lambda quat: jnp.linalg.norm(log_so3(R0.T @ quat_to_rotation(quat))))(hubs[:, 3:])
    qdd = jax.vmap(lambda t: joint_motion(problem, coeffs, t)[2])(times)
    return deviation, qdd, hubs


def loss_fn(model, problem, coeffs):
    deviation, qdd, _ = attitude_rollout(model, problem, coeffs)
    return jnp.mean(deviation**2) + problem.final_weight * deviation[-1] ** 2 + problem.accel_weight * jnp.mean(qdd**2)


def dynamic_replay(model, problem, coeffs):
    """Hub attitude deviation (steps + 1,) when the planned motion's feed-forward torques (free-floating RNEA,
    evaluated at every RK4 stage) drive the forward dynamics with no force on the hub (ABA)."""
    dt = problem.duration / problem.steps
    q0 = jaxsoa.neutral(model, coeffs.dtype).at[7:].set(Q_A)
    _, joint_dofs = base_and_joint_dofs(model)

    def control(t, q, v):
        _, _, qdd = joint_motion(problem, coeffs, t)
        return jnp.zeros(model.nv, q.dtype).at[joint_dofs].set(rnea_free_floating(model, q, v, qdd).tau_joints)

    qs, _ = jaxsoa.rollout(model, q0, jnp.zeros(model.nv, q0.dtype), control, dt, problem.steps,
                           control_at_stages=True)
    R0 = quat_to_rotation(q0[3:7])
    return jax.vmap(lambda quat: jnp.linalg.norm(log_so3(R0.T @ quat_to_rotation(quat))))(qs[:, 3:7]), qs


def optimise(model, problem, iters, lr, progress=True, checkpoint=None, every=CHECKPOINT_EVERY):
    """Adam on the coefficients from zero (the naive trajectory), or from the iteration saved in `checkpoint`
    (`experiments._checkpoint.descend`); returns (coeffs, loss history, seconds)."""
    value_and_grad = jax.jit(jax.value_and_grad(lambda c: loss_fn(model, problem, c)))
    coeffs = jnp.zeros((7, problem.harmonics), model.joint_axis.dtype)
    return descend(value_and_grad, coeffs, optax.adam(lr), iters, checkpoint, every, "trajopt", progress)


RECORD = "trajopt.json"
CHECKPOINT = "trajopt.checkpoint.npz"


def settings(iters=150, harmonics=3, steps=200, duration=4.0, lr=0.02):
    """Every setting of the run, as recorded in trajopt.json."""
    return dict(iters=iters, harmonics=harmonics, steps=steps, duration=duration, lr=lr)


def run(out_dir, iters=150, harmonics=3, steps=200, duration=4.0, lr=0.02, progress=True, overwrite=False,
        checkpoint_every=CHECKPOINT_EVERY):
    """Optimise (resuming from the checkpoint in `out_dir` of the same settings), replay both trajectories
    through the dynamics, plot; returns the table rows. Refuses an `out_dir` holding results or a
    checkpoint of other settings unless `overwrite` (module doc)."""
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    record = Record(out_dir / RECORD, settings(iters, harmonics, steps, duration, lr), overwrite)
    checkpoint = Checkpoint(out_dir / CHECKPOINT, record.settings, overwrite)
    model = arm.build(floating=True)
    problem = Problem(duration=duration, steps=steps, harmonics=harmonics)
    coeffs, losses, seconds = optimise(model, problem, iters, lr, progress, checkpoint, checkpoint_every)
    plans = {"naive": jnp.zeros_like(coeffs), "optimised": coeffs}
    rollout = jax.jit(lambda c: attitude_rollout(model, problem, c)[0])
    replay = jax.jit(lambda c: dynamic_replay(model, problem, c)[0])
    rows, curves = [], {}
    for name, c in plans.items():
        kinematic, dynamic = np.asarray(rollout(c)), np.asarray(replay(c))
        curves[name] = kinematic
        rows.append({"plan": name, "final_deg": np.rad2deg(kinematic[-1]), "max_deg": np.rad2deg(kinematic.max()),
                     "loss": float(loss_fn(model, problem, c)),
                     "replay_final_deg": np.rad2deg(dynamic[-1]),
                     "replay_minus_plan_deg": np.rad2deg(np.abs(dynamic - kinematic).max())})
    times = np.linspace(0.0, duration, steps + 1)
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for name, c in plans.items():
        axes[0].plot(times, np.rad2deg(curves[name]), label=name)
        q = np.asarray(jax.vmap(lambda t, c=c: joint_motion(problem, c, t)[0])(jnp.asarray(times)))
        for j in range(7):
            axes[1].plot(times, np.rad2deg(q[:, j]), color=f"C{j}", ls="-" if name == "optimised" else ":")
    axes[0].set(xlabel="t [s]", ylabel="hub attitude deviation [deg]", title="hub attitude")
    axes[0].legend()
    axes[1].set(xlabel="t [s]", ylabel="joint angle [deg]", title="joints (dotted: naive, solid: optimised)")
    axes[2].semilogy(losses)
    axes[2].set(xlabel="Adam iteration", ylabel="loss", title=f"optimisation ({seconds:.1f} s)")
    fig.tight_layout()
    save_figure(fig, out_dir / "trajopt.png", dpi=120)
    plt.close(fig)
    summary = {"settings": record.settings, "rows": rows, "iters": iters,
               "seconds": seconds, "harmonics": harmonics, "steps": steps, "duration": duration, "lr": lr,
               "loss_curve": losses.tolist()}
    write_json(out_dir / RECORD, summary)
    checkpoint.remove()                                  # the results are written: nothing left to resume
    print(markdown_table(("plan", "final hub deviation [deg]", "max [deg]", "loss",
                          "replayed through the dynamics: final [deg]", "max |replay − plan| [deg]"),
                         ((r["plan"], f"{r['final_deg']:.4g}", f"{r['max_deg']:.4g}", f"{r['loss']:.3g}",
                           f"{r['replay_final_deg']:.4g}", f"{r['replay_minus_plan_deg']:.2g}") for r in rows)))
    print(f"optimised in {seconds:.1f} s ({iters} Adam steps); wrote {out_dir / 'trajopt.png'}, trajopt.json")
    return rows


@interruptible(checkpoint_note(CHECKPOINT))
def main(argv=None):
    pre = OneLineParser(add_help=False)
    pre.add_argument("--problem", default="arm")          # checked against its choices by the full parser
    known, rest = pre.parse_known_args(argv)
    if known.problem == "tether":                     # the tether retrieval profile, with its own options
        from experiments import trajopt_tether

        return trajopt_tether.main(rest)
    parser = command_parser(__doc__, "outputs/trajopt", "output folder (default outputs/trajopt)")
    parser.add_argument("--problem", choices=("arm", "tether"), default="arm",
                        help="arm: the free-floating arm (default); tether: the retrieval profile of "
                             "experiments.trajopt_tether (its options: python -m experiments.trajopt_tether --help)")
    parser.add_argument("--iters", type=nonnegative_int, default=150, help="Adam iterations (default 150)")
    parser.add_argument("--harmonics", type=positive_int, default=3, help="cosine harmonics per joint (default 3)")
    parser.add_argument("--steps", type=positive_int, default=200, help="rollout steps over the motion (default 200)")
    parser.add_argument("--duration", type=positive_float, default=4.0, help="motion time T [s] (default 4)")
    parser.add_argument("--lr", type=positive_float, default=0.02, help="Adam learning rate (default 0.02)")
    add_overwrite(parser)
    args = parser.parse_args(argv)
    out = check_out(parser, args.out)
    open_record(parser, out / RECORD, settings(args.iters, args.harmonics, args.steps, args.duration, args.lr),
                args.overwrite)
    jax.config.update("jax_enable_x64", True)
    try:
        rows = run(args.out, args.iters, args.harmonics, args.steps, args.duration, args.lr, overwrite=args.overwrite)
    except SettingsMismatchError as error:                # a checkpoint of other settings in --out
        parser.error(f"argument --out: {error}")
    return exit_status(rows, parser.prog)


if __name__ == "__main__":
    sys.exit(main())
