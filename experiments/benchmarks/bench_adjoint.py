"""Gradients by the adjoint of forward dynamics against plain autodiff and Pinocchio's analytical
derivatives, same process, as ratios (docs/performance.md, "Gradients: the adjoint").

    python -m experiments.benchmarks.bench_adjoint [--quick] [--systems panda,space_arm_free]
        [--call-batches 256,8192] [--roll-batch 256] [--batch-rollout 256] [--steps 100] [--dtype float32]
        [--wrt state|all]

For the Franka Panda (fixed base) and the 7-DOF space arm on its free-floating hub
(`sims/space_arm_7dof.py`):

* **call**: one batched forward-dynamics call, loss Σ w ⊙ q̈ (w fixed, random), its value and its
  value+gradient w.r.t. (q, v, τ) (`--wrt state`) or also every float field of the model
  (`--wrt all`), for each batch of `--call-batches`;
* **rollout**: a batch of `--roll-batch` RK4 rollouts of `--steps` steps (dt = 0.01 s) under open-loop
  torques held per step, loss Σ_k |q_k|² + |v_k|² (as `bench_gradient`), value and value+gradient
  w.r.t. (q0, v0, τ_0 … τ_{K−1});
* **rollout-batch**: `--batch-rollout` closed-loop RK4 rollouts (τ = −k_d ⊙ v + u₀ sin t, the gains
  shared), value and value+gradient w.r.t. (q0, v0, k_d), once per sample under `jax.vmap` and once as
  a leading-batch `rollout` (the batch-last core; its × value is against its own value);
* gradient paths: `adjoint` (`jaxsoa.aba`: its custom JVP, reverse mode by transposition),
  `autodiff` (`jaxsoa.algorithms.dynamics.aba_autodiff`: reverse mode through ABA's scans) and, for
  the call, `custom_vjp` (the same adjoint written as a `jax.custom_vjp`, the measured alternative,
  which has no forward mode);
* Pinocchio: `computeABADerivatives` (∂q̈/∂q, ∂q̈/∂v, M⁻¹) and `aba`, Python loop per sample,
  float64.

Each group (system, kind, batch) is timed in interleaved rounds (order reversed every other round);
reported: median µs per sample, the median of the per-round ratios to the group's value, compile
time split into trace+lower and XLA compile (after a warm-up lowering, so that the first case does
not carry the process's one-time tracing costs), XLA's temporary memory per sample, and the largest
gradient difference adjoint vs autodiff relative to max |autodiff|, and whether every output is finite (the
groups whose value or gradient is not, a rollout diverged for the random draw, are named after the table).
Writes results/bench_adjoint.json (or --out).
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("XLA_FLAGS", "--xla_cpu_use_fusion_emitters=false")

import jax
import jax.numpy as jnp
import numpy as np

from experiments._common import (
    BENCH_NOTE,
    OneLineParser,
    comma_list,
    interruptible,
    nonnegative_int,
    positive_float,
    positive_int,
)
from experiments.benchmarks import bench_common as bc
from experiments.benchmarks.adjoint_cases import batch_rollout_cases, call_cases, rollout_cases, systems, warm_up

RESULTS = Path(__file__).parent / "results"
SKIPPABLE = ("adjoint", "autodiff", "custom_vjp", "adjoint batch-last")
QUICK = dict(steps=10, call_batches=(64,), roll_batch=16, batch_rollout=16, repeats=3, target_s=0.05, pin_samples=64,
             out=RESULTS / "bench_adjoint_quick.json")


def parse_args(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    names = lambda s: tuple(x for x in s.split(",") if x)           # noqa: E731
    p = OneLineParser(prog="python -m experiments.benchmarks.bench_adjoint", description=__doc__,
                      formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--systems", type=names, default=("panda", "space_arm_free"))
    p.add_argument("--call-batches", type=comma_list(positive_int), default=(256, 8192),
                   help="batches of the single call")
    p.add_argument("--roll-batch", type=nonnegative_int, default=256, help="rollouts per call (0: no rollout cases)")
    p.add_argument("--batch-rollout", type=nonnegative_int, default=256,
                   help="closed-loop rollouts per call, per-sample vs "
                                                                   "batch-last core (0: none)")
    p.add_argument("--steps", type=positive_int, default=100, help="RK4 steps per rollout")
    p.add_argument("--dtype", default="float32", choices=("float32", "float64"))
    p.add_argument("--wrt", default="state", choices=("state", "all"), help="call gradient w.r.t. (q, v, τ) or "
                                                                           "also the model's float fields")
    p.add_argument("--checkpoint", action="store_true", help="rollout(..., checkpoint=True)")
    p.add_argument("--repeats", type=positive_int, default=5, help="interleaved rounds (medians reported)")
    p.add_argument("--target-s", type=positive_float, default=0.2, help="approximate duration of one case in a round")
    p.add_argument("--pin-samples", type=nonnegative_int, default=1024, help="states of the Pinocchio loops (0: skip)")
    p.add_argument("--quick", action="store_true", help="smoke test: 10 steps, batch 64 / 16, 3 rounds")
    p.add_argument("--skip-cases", type=names, default=(),
                   help=f"gradient cases left out of every group, of {', '.join(SKIPPABLE)} (e.g. autodiff at large "
                        "batches, where one per-sample autodiff call takes minutes)")
    p.add_argument("--out", type=Path, default=RESULTS / "bench_adjoint.json")
    if "--quick" in argv:
        p.set_defaults(**QUICK)
    opts = p.parse_args(argv)
    unknown = [c for c in opts.skip_cases if c not in SKIPPABLE]
    if unknown:
        p.error(f"argument --skip-cases: unknown case(s) {unknown}; choose from {', '.join(SKIPPABLE)}")
    return opts


# ---------------------------------------------------------------------------------------------
# timing

def compiled_case(fn, args):
    """(compiled, record): trace+lower and XLA compile seconds, temporary bytes."""
    t0 = time.perf_counter()
    lowered = jax.jit(fn).lower(*args)
    t1 = time.perf_counter()
    compiled = lowered.compile()
    t2 = time.perf_counter()
    memory = compiled.memory_analysis()
    return compiled, {"lower_s": t1 - t0, "xla_compile_s": t2 - t1, "compile_s": t2 - t0,
                      "temp_bytes": getattr(memory, "temp_size_in_bytes", None)}


def _run(fn, args, number):
    t0 = time.perf_counter()
    for _ in range(number):
        jax.block_until_ready(fn(*args))
    return (time.perf_counter() - t0) / number


def interleaved(cases, repeats, target_s):
    """{name: [s per call, one per round]}: rounds over every case, order reversed every other round."""
    numbers = {}
    for name, (fn, args) in cases.items():
        first = _run(fn, args, 1)
        numbers[name] = max(1, int(target_s / max(_run(fn, args, 1) if first < 0.5 else first, 1e-7)))
    names, times = list(cases), {name: [] for name in cases}
    for r in range(repeats):
        for name in names if r % 2 == 0 else names[::-1]:
            times[name].append(_run(*cases[name], numbers[name]))
    return times


def gradient_difference(a, b):
    """max |a − b| / max |b| over the floating leaves of two gradients."""
    pairs = [(np.asarray(x, np.float64), np.asarray(y, np.float64)) for x, y in zip(jax.tree.leaves(a),
                                                                                  jax.tree.leaves(b), strict=True)
             if jnp.issubdtype(jnp.result_type(x), jnp.floating)]
    scale = max(np.abs(y).max() for _, y in pairs)
    return float(max(np.abs(x - y).max() for x, y in pairs) / scale)


def time_group(system, kind, batch, cases, opts):
    """Records of one group: compile, time (interleaved), ratios to the group's value."""
    compiled, records, outputs = {}, {}, {}
    cases = {name: case for name, case in cases.items() if name not in opts.skip_cases}
    for name, (fn, args) in cases.items():
        compiled[name], records[name] = compiled_case(fn, args)
        outputs[name] = compiled[name](*args)
    times = interleaved({k: (compiled[k], cases[k][1]) for k in cases}, opts.repeats, opts.target_s)
    out = []
    for name, ts in times.items():
        value = times["value batch-last" if name.endswith("batch-last") and "value batch-last" in times else "value"]
        record = {"system": system, "kind": kind, "case": name, "batch": batch, "dtype": opts.dtype,
                  "wrt": opts.wrt if kind == "call" else "state", **records[name],
                  "per_sample_us": statistics.median(ts) / batch * 1e6,
                  "x_value": statistics.median(t / v for t, v in zip(ts, value, strict=True)),
                  "x_value_min": min(t / v for t, v in zip(ts, value, strict=True)),
                  "x_value_max": max(t / v for t, v in zip(ts, value, strict=True))}
        if record["temp_bytes"] is not None:
            record["temp_bytes_per_sample"] = record["temp_bytes"] / batch
        record["finite"] = all(bool(np.all(np.isfinite(np.asarray(x)))) for x in jax.tree.leaves(outputs[name])
                               if jnp.issubdtype(jnp.result_type(x), jnp.inexact))
        if not name.startswith("value") and "autodiff" in outputs:
            record["grad_rel_diff_vs_autodiff"] = gradient_difference(outputs[name][1], outputs["autodiff"][1])
        out.append(record)
    return out


def pinocchio_records(system, pin_model, samples, repeats, target_s):
    """Per-sample µs of Pinocchio's `aba` and `computeABADerivatives` (Python loop, float64)."""
    import pinocchio as pin

    data = pin_model.createData()
    q, v, tau = bc.make_inputs(pin_model.nq, pin_model.nv, samples, seed=5, floating=pin_model.nq > pin_model.nv)

    def loop(fn):
        def run():
            for i in range(samples):
                fn(pin_model, data, q[i], v[i], tau[i])
        return run

    cases = {"pin aba": (loop(pin.aba), ()), "pin computeABADerivatives": (loop(pin.computeABADerivatives), ())}
    times = interleaved(cases, repeats, target_s)
    return [{"system": system, "kind": "pinocchio", "case": name, "batch": samples, "dtype": "float64",
             "per_sample_us": statistics.median(ts) / samples * 1e6,
             "x_value": statistics.median(t / a for t, a in zip(ts, times["pin aba"], strict=True))}
            for name, ts in times.items()]


@interruptible(BENCH_NOTE)
def main(argv=None):
    opts = parse_args(argv)
    jax.config.update("jax_enable_x64", opts.dtype == "float64")
    dtype, start, records = jnp.dtype(opts.dtype), time.perf_counter(), []
    models = {k: m for k, m in systems(dtype).items() if k in opts.systems}
    warm_up(next(iter(models.values()))[0])
    for name, (model, pin_model) in models.items():
        rng = np.random.default_rng(0)
        for batch in opts.call_batches:
            print(f"[bench_adjoint] {name} call batch {batch}", flush=True)
            records += time_group(name, "call", batch, call_cases(model, batch, dtype, opts.wrt, rng), opts)
        if opts.roll_batch:
            print(f"[bench_adjoint] {name} rollout batch {opts.roll_batch}", flush=True)
            records += time_group(name, "rollout", opts.roll_batch,
                                  rollout_cases(model, opts.roll_batch, opts.steps, dtype, opts.checkpoint, rng), opts)
        if opts.batch_rollout:
            print(f"[bench_adjoint] {name} closed-loop rollout batch {opts.batch_rollout}", flush=True)
            records += time_group(name, "rollout-batch", opts.batch_rollout, batch_rollout_cases(
                model, opts.batch_rollout, opts.steps, dtype, opts.checkpoint, rng), opts)
        if opts.pin_samples:
            records += pinocchio_records(name, pin_model, opts.pin_samples, opts.repeats, opts.target_s)
    pin_derivatives = {r["system"]: r["per_sample_us"] for r in records if r["case"] == "pin computeABADerivatives"}
    rows = []
    for r in records:
        r["x_pin_derivatives"] = (r["per_sample_us"] / pin_derivatives[r["system"]]
                                  if r["system"] in pin_derivatives and r["kind"] == "call" else None)
        rows.append([r["system"], r["kind"], r["batch"], r["case"], r["per_sample_us"], r["x_value"],
                     r["x_pin_derivatives"], r.get("lower_s"), r.get("xla_compile_s"), r.get("temp_bytes_per_sample"),
                     r.get("grad_rel_diff_vs_autodiff")])
    table = bc.md_table(["system", "kind", "batch", "case", "µs/sample", "× value (target ≤ 3)",
                         "× pin ABA derivatives", "trace+lower s", "XLA compile s", "temp bytes/sample",
                         "grad rel. diff vs autodiff"], rows)
    print(f"# bench_adjoint: {opts.dtype}, call batches {opts.call_batches}, rollout batch {opts.roll_batch} × "
          f"{opts.steps} steps, wrt {opts.wrt}, checkpoint {opts.checkpoint}, {jax.devices()[0]}, "
          f"load {os.getloadavg()[0]:.1f}\n\n{table}")
    diverged = sorted({f"{r['system']} {r['kind']} batch {r['batch']}" for r in records if r.get("finite") is False})
    if diverged:                       # times of NaN arithmetic, and a NaN difference: say so, do not hide it
        print(f"\nnon-finite value or gradient (the rollout diverged for this draw): {'; '.join(diverged)}")
    bc.finish("bench_adjoint", start, opts.out, {"records": records, "table": table})
    return 0


if __name__ == "__main__":
    sys.exit(main())
