"""Learned controllers trained by backpropagation through the differentiable simulator, against
computed-torque control.

    python -m experiments.train_controller [--out outputs/train] [--task space_arm|reconfigurable|all]
                                           [--batch 128] [--iters 120] [--horizon 60]
                                           [--dynamics adjoint|autodiff]

Tasks (each a batch of parallel rollouts per training step; gradients flow through every step):
* `space_arm`: the free-floating 7-DOF space arm (`sims/space_arm_7dof.py`) reaches random joint targets
  q* ~ U(−0.5, 0.5) rad from q = 0 at rest while keeping its hub still. Observation: q − q*, q̇ (joints),
  the hub attitude log(R₀ᵀR) and angular rate; action: 7 joint torques, |τ| ≤ 1000 N·m (tanh).
  Cost per step: |q − q*|² + 0.1 |q̇|² + 10 |log R₀ᵀR|² + 1e-8 |τ|².
* `reconfigurable`: the planar dual-arm spacecraft (`sims/dual_arm_spacecraft.py`, fixed hub) in a random
  one of its three configurations per rollout — a different kinematic tree each, built inside the compiled
  call by `jaxsoa.topology.reconfigure.apply_configuration` — regulates its 6 joints to random targets. One policy
  for every topology: the observation adds a one-hot of the configuration; |τ| ≤ 2000 N·m. Cost per
  step: |q − q*|² + 0.1 |q̇|² + 1e-8 |τ|².
Dynamics: semi-implicit Euler (one ABA per step, dt = 0.03 s), float32. `--dynamics adjoint` (default)
differentiates the training loss through `jaxsoa.aba`'s adjoint on the batch-last core; `autodiff`
through `jaxsoa.algorithms.dynamics.aba_autodiff` (plain reverse mode through ABA's scans, per sample
under `vmap`: the path before the adjoint), to measure the change in training time; evaluation uses
`jaxsoa.aba` either way. Policy: a plain-JAX MLP
(2 hidden layers of 64, tanh) — plain JAX because the network is tiny and it keeps the dependency list
to jax + optax (flax/equinox would add a package for two matrix products); Adam with gradient clipping.

Honest comparison: the trained policy and the untrained one (same initialisation) and computed-torque
control (model-based inverse dynamics plus critically damped PD, K_p = ω², K_d = 2ω, saturated at the
same torque limit, ω from --ct-omega) are evaluated on the same held-out batch of targets with the
same cost. The table reports the first training step (compilation included) and the median of the
others. Writes train_<task>.png (training curve; held-out joint error over time per controller),
policy_<task>.npz (the trained weights), train_controller.json, and prints a table.

Saving and reruns: every file is written atomically (a crash never leaves a half-written one), and
each task's files and its entry in train_controller.json are written as soon as that task finishes.
train_controller.json records the settings (batch, iters, horizon, lr, eval, ct-omega, seed, dynamics)
with the sources' fingerprint. A task in training is checkpointed to train_<task>.checkpoint.npz in
--out every 10 steps and at Ctrl-C (`experiments._checkpoint`: the weights, Adam's state, the step count,
the loss and step-time histories; the batches come from the seed and the step index, so no random
state is kept); the file is removed once the task is recorded. Rerunning with the same settings skips
the tasks already finished (it prints which), resumes an interrupted one from its checkpoint (printing
the step) and gives the same final results as an uninterrupted run (the timings aside: a resumed
task's first new step compiles again). An --out holding results or a checkpoint of other settings is
refused (exit 2, naming the settings that differ) unless --overwrite is given, which recomputes them
(a checkpoint of the same settings is resumed even then). Ctrl-C exits 130 keeping the finished tasks
and the checkpoint. When stderr is not a terminal, a progress line is printed every 30 s.
"""

import pathlib
import sys
import time

import jax
import jax.numpy as jnp
import matplotlib
import numpy as np
import optax

import jaxsoa
from experiments._checkpoint import CHECKPOINT_EVERY, Checkpoint, run_steps
from experiments._common import (
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
    report_resume,
    save_figure,
    save_npz,
)
from experiments._train_tasks import DT, F32, TASKS, Task  # the tasks (space_arm, reconfigurable)
from jaxsoa.algorithms.dynamics import aba_autodiff

matplotlib.use("Agg")
import matplotlib.pyplot as plt

DYNAMICS = {"adjoint": jaxsoa.aba, "autodiff": aba_autodiff}     # --dynamics: the training gradient's path


def init_policy(key, n_obs, n_act, width=64):
    """MLP parameters; the last layer starts small so the untrained policy applies ~zero torque."""
    sizes = (n_obs, width, width, n_act)
    keys = jax.random.split(key, len(sizes) - 1)
    return [(jax.random.normal(k, (a, b), F32) * ((0.01 if b == n_act else 1.0) / a**0.5), jnp.zeros(b, F32))
            for k, a, b in zip(keys, sizes[:-1], sizes[1:], strict=True)]


def policy(params, obs, tau_max):
    """τ = τ_max tanh(MLP(obs))."""
    x = obs
    for W, b in params[:-1]:
        x = jnp.tanh(x @ W + b)
    W, b = params[-1]
    return tau_max * jnp.tanh(x @ W + b)


def rollout_cost(task: Task, controller, key, horizon, dynamics=jaxsoa.aba):
    """Mean cost per step and the joint error |q − q*| per step (horizon,) of one rollout from task.init(key),
    q̈ from `dynamics(model, q, v, τ)`."""
    q, v, target, context = task.init(key)
    model = task.model_of(context)

    def step(state, _):
        q, v = state
        tau_act = controller(q, v, target, context)
        tau = jnp.zeros(model.nv, F32).at[task.act].set(tau_act)
        q_next, v_next = jaxsoa.semi_implicit_euler_step(model, q, v, tau, DT, dynamics=dynamics)
        error = jnp.linalg.norm(task.observe(q_next, v_next, target, context)[:task.act.size])
        return (q_next, v_next), (task.cost(q_next, v_next, tau_act, target, context), error)

    _, (costs, errors) = jax.lax.scan(step, (q, v), None, length=horizon)
    return jnp.mean(costs), errors


def batch_cost(task, controller, keys, horizon, dynamics=jaxsoa.aba):
    costs, errors = jax.vmap(lambda k: rollout_cost(task, controller, k, horizon, dynamics))(keys)
    return jnp.mean(costs), errors


def train(task: Task, batch, iters, horizon, lr, seed, progress=True, dynamics="adjoint", checkpoint=None,
          every=CHECKPOINT_EVERY):
    """Adam through `batch` parallel rollouts per step, the gradient through `DYNAMICS[dynamics]`, from the
    step saved in `checkpoint` (`experiments._checkpoint.Checkpoint`, or None) and saving to it every `every`
    steps and at Ctrl-C; returns (params, initial params, losses, seconds per step (iters,), the first one's
    and a resumed run's first one's compilation included). Step i's batch is drawn from `seed` and i alone."""
    key = jax.random.PRNGKey(seed)
    params0 = init_policy(key, task.n_obs, task.act.size)

    def loss(params, keys):
        controller = lambda q, v, target, context: policy(params, task.observe(q, v, target, context),  # noqa: E731
                                                          task.tau_max)
        return batch_cost(task, controller, keys, horizon, DYNAMICS[dynamics])[0]

    optimizer = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(lr))
    value_and_grad = jax.jit(jax.value_and_grad(loss))

    def step(i, params, state):
        keys = jax.random.split(jax.random.fold_in(key, i + 1), batch)
        start = time.perf_counter()
        value, grads = jax.block_until_ready(value_and_grad(params, keys))
        seconds = time.perf_counter() - start
        if not np.isfinite(float(value)):
            raise FloatingPointError(f"{task.name}: the training loss became {float(value)} at step {i}; "
                                     "lower --lr, or shorten --horizon")
        updates, state = optimizer.update(grads, state)
        return value, optax.apply_updates(params, updates), state, (seconds,)

    params, _, losses, history, _ = run_steps(step, params0, optimizer.init(params0), iters, checkpoint, every,
                                              f"train {task.name}", progress, ("step_seconds",), "step")
    return params, params0, np.array(losses), np.array(history["step_seconds"])


def evaluate(task: Task, params, params0, horizon, n_eval, ct_omega, seed):
    """Held-out mean cost and joint-error curves of the trained, untrained and computed-torque controllers."""
    keys = jax.random.split(jax.random.PRNGKey(seed + 10_000), n_eval)
    kp, kd = jaxsoa.critically_damped_gains(ct_omega)
    controllers = {
        "trained policy": lambda q, v, t, c: policy(params, task.observe(q, v, t, c), task.tau_max),
        "untrained policy": lambda q, v, t, c: policy(params0, task.observe(q, v, t, c), task.tau_max),
        f"computed torque (ω = {ct_omega:g})": lambda q, v, t, c: jnp.clip(
            task.computed_torque(q, v, t, c, kp, kd), -task.tau_max, task.tau_max),
    }
    out = {}
    for name, controller in controllers.items():
        cost, errors = jax.jit(lambda keys, controller=controller: batch_cost(task, controller, keys, horizon))(keys)
        out[name] = (float(cost), np.asarray(errors).mean(axis=0))
    return out


RECORD = "train_controller.json"


def settings(batch=128, iters=120, horizon=60, lr=1e-3, n_eval=256, ct_omega=3.0, seed=0, dynamics="adjoint"):
    """The settings a task's results depend on, as recorded in train_controller.json."""
    return dict(batch=batch, iters=iters, horizon=horizon, lr=lr, eval=n_eval, ct_omega=ct_omega, seed=seed,
                dynamics=dynamics)


def task_files(out_dir, name):
    """The files of task `name` besides its entry in train_controller.json."""
    return [out_dir / f"policy_{name}.npz", out_dir / f"train_{name}.png"]


def checkpoint_file(out_dir, name):
    """Task `name`'s training checkpoint while it trains (module doc)."""
    return pathlib.Path(out_dir) / f"train_{name}.checkpoint.npz"


CHECKPOINT_NOTE = (f"the finished tasks and the training task's last saved step (train_<task>.checkpoint.npz, every "
                   f"{CHECKPOINT_EVERY} steps and at Ctrl-C) are kept in --out; run the same command again to resume")


def run_task(out_dir, name, batch, iters, horizon, lr, n_eval, ct_omega, seed, progress, dynamics, checkpoint=None,
             every=CHECKPOINT_EVERY):
    """Train (resuming from `checkpoint`) and evaluate one task, write its weights and plot; returns its
    entry {"rows", "training"}."""
    task = TASKS[name]()
    params, params0, losses, step_s = train(task, batch, iters, horizon, lr, seed, progress, dynamics, checkpoint,
                                            every)
    seconds, later_s = float(step_s.sum()), float(np.median(step_s[1:])) if iters > 1 else float("nan")
    results = evaluate(task, params, params0, horizon, n_eval, ct_omega, seed)
    npz, png = task_files(out_dir, name)
    save_npz(npz, **{f"{kind}{i}": np.asarray(x) for i, (W, b) in enumerate(params)
                     for kind, x in (("W", W), ("b", b))})
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 4))
    ax0.semilogy(losses)
    ax0.set(xlabel="training step", ylabel=f"mean cost per step (batch {batch})",
            title=f"{name}: training ({seconds:.0f} s, {dynamics} gradient)")
    times = DT * np.arange(1, horizon + 1)
    rows = []
    for controller, (cost, error) in results.items():
        ax1.plot(times, error, label=f"{controller}: cost {cost:.3g}")
        rows.append({"task": name, "controller": controller, "held-out cost": cost,
                     "final joint error [rad]": float(error[-1]), "dynamics": dynamics, "train s": seconds,
                     "first step s": float(step_s[0]), "step s": later_s, "rollouts/s": batch / later_s})
    ax1.set(xlabel="t [s]", ylabel="mean |q − q*| [rad]", title=f"{name}: held-out, {n_eval} targets")
    ax1.legend()
    fig.tight_layout()
    save_figure(fig, png, dpi=120)
    plt.close(fig)
    return {"rows": rows, "training": {"losses": losses.tolist(), "seconds": seconds, "dynamics": dynamics,
                                       "step_seconds": step_s.tolist()}}


def summary(items: dict) -> dict:
    """train_controller.json's summary keys over the finished tasks: "rows" and "training" {task: ...}."""
    names = [n for n in TASKS if n in items]
    return {"rows": [r for n in names for r in items[n]["rows"]], "training": {n: items[n]["training"] for n in names}}


def run(out_dir, tasks=("space_arm", "reconfigurable"), batch=128, iters=120, horizon=60, lr=1e-3, n_eval=256,
        ct_omega=3.0, seed=0, progress=True, dynamics="adjoint", overwrite=False, checkpoint_every=CHECKPOINT_EVERY):
    """Train and evaluate each task, saving each as it finishes, skipping those already finished with
    the same settings and resuming one interrupted from its checkpoint (module doc); returns the table
    rows of `tasks`. Results or a checkpoint of other settings raise `SettingsMismatchError` before any
    work unless `overwrite`."""
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    record = Record(out_dir / RECORD, settings(batch, iters, horizon, lr, n_eval, ct_omega, seed, dynamics), overwrite,
                    summary)
    checkpoints = {n: Checkpoint(checkpoint_file(out_dir, n), {**record.settings, "task": n}, overwrite)
                   for n in tasks}
    report_resume("train", [n for n in tasks if record.done(n, task_files(out_dir, n))], len(tasks))
    for name in tasks:
        if not record.done(name, task_files(out_dir, name)):
            entry = run_task(out_dir, name, batch, iters, horizon, lr, n_eval, ct_omega, seed, progress, dynamics,
                             checkpoints[name], checkpoint_every)
            record.add(name, entry)
            print(f"train {name}: done, saved {RECORD}, policy_{name}.npz and train_{name}.png", flush=True)
        checkpoints[name].remove()                   # the task is recorded: nothing left to resume
    rows = [r for name in tasks for r in record.items[name]["rows"]]
    print(markdown_table(("task", "controller", "held-out cost", "final joint error [rad]", "gradient", "train s",
                          "first step s", "step ms", "rollouts/s"),
                         ((r["task"], r["controller"], f"{r['held-out cost']:.4g}",
                           f"{r['final joint error [rad]']:.3g}", r["dynamics"], f"{r['train s']:.0f}",
                           f"{r['first step s']:.1f}", f"{1e3 * r['step s']:.0f}", f"{r['rollouts/s']:.0f}")
                          for r in rows)))
    print(f"wrote {out_dir}/train_*.png, policy_*.npz, {RECORD}")
    return rows


@interruptible(CHECKPOINT_NOTE)
def main(argv=None):
    parser = command_parser(__doc__, "outputs/train", "output folder (default outputs/train)")
    parser.add_argument("--task", default="all", choices=[*TASKS, "all"], help="which task (default all)")
    parser.add_argument("--batch", type=positive_int, default=128,
                        help="parallel rollouts per training step (default 128)")
    parser.add_argument("--iters", type=positive_int, default=120, help="training steps (default 120)")
    parser.add_argument("--horizon", type=positive_int, default=60, help="steps per rollout, dt = 0.03 s (default 60)")
    parser.add_argument("--lr", type=positive_float, default=1e-3, help="Adam learning rate (default 1e-3)")
    parser.add_argument("--eval", type=positive_int, default=256, help="held-out rollouts (default 256)")
    parser.add_argument("--ct-omega", type=positive_float, default=3.0,
                        help="computed-torque bandwidth ω [rad/s] (default 3)")
    parser.add_argument("--seed", type=nonnegative_int, default=0, help="random seed (default 0)")
    parser.add_argument("--dynamics", default="adjoint", choices=tuple(DYNAMICS),
                        help="the training gradient's path: the adjoint of jaxsoa.aba, or plain autodiff "
                             "through ABA's scans (default adjoint)")
    add_overwrite(parser)
    args = parser.parse_args(argv)
    tasks = tuple(TASKS) if args.task == "all" else (args.task,)
    out = check_out(parser, args.out)
    open_record(parser, out / RECORD, settings(args.batch, args.iters, args.horizon, args.lr, args.eval,
                                               args.ct_omega, args.seed, args.dynamics), args.overwrite)
    try:
        rows = run(args.out, tasks, args.batch, args.iters, args.horizon, args.lr, args.eval, args.ct_omega,
                   args.seed, dynamics=args.dynamics, overwrite=args.overwrite)
    except SettingsMismatchError as error:            # a checkpoint of other settings in --out
        parser.error(f"argument --out: {error}")
    return exit_status(rows, parser.prog)


if __name__ == "__main__":
    sys.exit(main())
