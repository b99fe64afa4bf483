"""Reverse-mode gradient of a rollout loss against the rollout itself (suite parts (c), (g)).

    python -m experiments.benchmarks.bench_gradient [--quick] [--steps 100] [--batch 256]
        [--checkpoints off,step,nothing_saveable] [--unroll 1|N|full] [--systems panda,space_arm_free]

For the Franka Panda (fixed base) and the 7-DOF space arm on its free-floating hub
(`sims/space_arm_7dof.py`), a batch of `--batch` RK4 rollouts of `--steps` steps (dt = 0.01 s) under
open-loop torques τ_k (one per step, held over the step). The loss is Σ_k |q_k|² + |v_k|²; its gradient
with respect to the whole torque sequence and the initial state is taken by `jax.grad` (reverse mode),
with each step stored (`off`: `checkpoint=False`) or rematerialised in the backward pass (`step`:
`checkpoint=True`, `jax.checkpoint` around each step: memory O(1) per step instead of every RK4 stage's
intermediates), or checkpointed with a `jax.checkpoint_policies` policy named by `--checkpoints` (e.g.
`nothing_saveable`, `dots_with_no_batch_dims_saveable`). `--unroll` sets how many links each step of ABA's
per-link `lax.scan` handles (`full`: the link loops are unrolled into straight-line code).
Reported per case: µs per sample for the rollout and for value-and-gradient, their ratio (target ≤ 4,
the target table of docs/benchmarks.md), compile times, and XLA's estimate of temporary memory per sample
(`compiled.memory_analysis()`). Writes results/bench_gradient.json (or --out).
"""

import argparse
import functools
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import jaxsoa
from experiments._common import (
    BENCH_NOTE,
    OneLineParser,
    comma_list,
    interruptible,
    one_of,
    positive_float,
    positive_int,
)
from experiments._progress import progress
from experiments.benchmarks import bench_common as bc
from sims import space_arm_7dof

RESULTS = Path(__file__).parent / "results"
DT = 0.01
QUICK = dict(steps=10, batch=8, repeats=3, target_s=0.02, out=RESULTS / "bench_gradient_quick.json")
SYSTEMS = ("panda", "space_arm_free")
# the ready-made policies of jax.checkpoint_policies (the others, e.g. save_only_these_names, build a policy from
# arguments a flag cannot give)
POLICIES = tuple(name for name in ("nothing_saveable", "everything_saveable", "dots_saveable", "checkpoint_dots",
                                   "dots_with_no_batch_dims_saveable", "checkpoint_dots_with_no_batch_dims")
                 if hasattr(jax.checkpoint_policies, name))
CHECKPOINTS = ("off", "step", *POLICIES)


def unroll_type(text):
    """An argparse type for --unroll: 'full' or an integer ≥ 1, kept as its text (as recorded)."""
    if text != "full":
        positive_int(text)
    return text


def parse_args(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    p = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=positive_int, default=100, help="RK4 steps per rollout")
    p.add_argument("--batch", type=positive_int, default=256, help="rollouts per call")
    p.add_argument("--dtype", default="float32", choices=("float32", "float64"))
    p.add_argument("--repeats", type=positive_int, default=5, help="timed rounds per case (the median is reported)")
    p.add_argument("--target-s", type=positive_float, default=0.2, help="approximate duration of one timed round")
    p.add_argument("--checkpoints", type=comma_list(one_of(CHECKPOINTS)), default=("off", "step", "nothing_saveable"),
                   help=f"comma-separated, each one of: {', '.join(CHECKPOINTS)} (off, step, or a policy of "
                        "jax.checkpoint_policies; default off,step,nothing_saveable)")
    p.add_argument("--unroll", type=unroll_type, default="1",
                   help="links per scan iteration in ABA's traversal: an integer ≥ 1 or 'full' (default 1)")
    p.add_argument("--systems", type=comma_list(one_of(SYSTEMS)),
                   default=SYSTEMS, help=f"comma-separated, of {', '.join(SYSTEMS)} (default all)")
    p.add_argument("--quick", action="store_true", help="smoke test (< 1 min): 10 steps, batch 8")
    p.add_argument("--out", type=Path, default=RESULTS / "bench_gradient.json", help="JSON output")
    if "--quick" in argv:
        p.set_defaults(**QUICK)
    return p.parse_args(argv)


def systems(dtype):
    """{name: model}: the Panda (fixed base) and the free-floating 7-DOF space arm."""
    panda = jaxsoa.load_urdf(str(bc.panda_urdf()), floating_base=False, dtype=dtype)
    return {"panda": panda, "space_arm_free": space_arm_7dof.build(floating=True, dtype=dtype)}


def checkpoint_option(name):
    """`rollout`'s checkpoint argument for a --checkpoints name."""
    if name in ("off", "step"):
        return name == "step"
    return getattr(jax.checkpoint_policies, name)


def rk4_with_unroll(unroll):
    """`rk4_step` whose ABA scans `unroll` links per iteration ('full': straight-line code)."""
    def dynamics(model, q, v, tau):
        n = True if unroll == "full" else int(unroll)
        return jaxsoa.aba(model.with_parent(model.parent, unroll=n), q, v, tau)
    return functools.partial(jaxsoa.rk4_step, dynamics=dynamics)


def rollout_loss(model, steps, checkpoint, unroll="1"):
    """loss(q0, v0, taus (steps, nv)) = Σ_k |q_k|² + |v_k|² along an RK4 rollout with τ held per step."""
    step = rk4_with_unroll(unroll)

    def loss(q0, v0, taus):
        control = lambda t, q, v: taus[jnp.round(t / DT).astype(jnp.int32)]   # noqa: E731
        qs, vs = jaxsoa.rollout(model, q0, v0, control, DT, steps, step=step, checkpoint=checkpoint_option(checkpoint))
        return jnp.sum(qs**2) + jnp.sum(vs**2)
    return loss


def timed(fn, args, opts):
    t0 = time.perf_counter()
    compiled = jax.jit(fn).lower(*args).compile()
    compile_s = time.perf_counter() - t0
    memory = compiled.memory_analysis()
    res = bc.measure(bc._blocking, (compiled, *args), opts.repeats, opts.target_s)
    temp = getattr(memory, "temp_size_in_bytes", None)
    return {"compile_s": compile_s, "per_sample_us": res["call_s"] / opts.batch * 1e6,
            "temp_bytes_per_sample": None if temp is None else temp / opts.batch, **res}


@interruptible(BENCH_NOTE)
def main(argv=None):
    opts = parse_args(argv)
    jax.config.update("jax_enable_x64", opts.dtype == "float64")
    dtype, start, records = jnp.dtype(opts.dtype), time.perf_counter(), []
    cases = [(name, "rollout", "off") for name in opts.systems]
    cases += [(name, "grad", ckpt) for name in opts.systems for ckpt in opts.checkpoints]
    models = {name: model for name, model in systems(dtype).items() if name in opts.systems}
    for name, mode, ckpt in progress(cases, desc="bench_gradient", unit="case"):
        model = models[name]
        rng = np.random.default_rng(0)
        q0 = jnp.broadcast_to(jaxsoa.neutral(model, dtype), (opts.batch, model.nq))
        v0 = jnp.asarray(rng.normal(0.0, 0.1, (opts.batch, model.nv)), dtype)
        taus = jnp.asarray(rng.normal(0.0, 1.0, (opts.batch, opts.steps, model.nv)), dtype)
        loss = rollout_loss(model, opts.steps, ckpt, opts.unroll)
        fn = jax.value_and_grad(loss, argnums=(0, 1, 2)) if mode == "grad" else loss
        records.append({"system": name, "mode": mode, "checkpoint": ckpt, "unroll": opts.unroll, "steps": opts.steps,
                        "batch": opts.batch, "dtype": opts.dtype, **timed(jax.vmap(fn), (q0, v0, taus), opts)})
    by = {(r["system"], r["mode"], r["checkpoint"]): r for r in records}
    rows = []
    for name in models:
        for ckpt in opts.checkpoints:
            ro, gr = by[(name, "rollout", "off")], by[(name, "grad", ckpt)]
            gr["x_rollout"] = gr["per_sample_us"] / ro["per_sample_us"]
            rows.append([name, ckpt, ro["per_sample_us"], gr["per_sample_us"], gr["x_rollout"], ro["compile_s"],
                         gr["compile_s"], gr["temp_bytes_per_sample"]])
    table = bc.md_table(["system", "checkpoint", "µs rollout", "µs value+grad", "× rollout (target ≤ 4)",
                         "compile s rollout", "compile s grad", "temp bytes/sample grad"], rows)
    print(f"# bench_gradient: {opts.steps} RK4 steps, batch {opts.batch}, {opts.dtype}, unroll {opts.unroll}, "
          f"{jax.devices()[0]}\n\n{table}")
    bc.finish("bench_gradient", start, opts.out, {"records": records, "table": table})
    return 0


if __name__ == "__main__":
    sys.exit(main())
