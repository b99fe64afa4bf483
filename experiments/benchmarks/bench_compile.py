"""Compile time of every seed system's value and gradient, cold and with the persistent cache (suite part (g)).

    python -m experiments.benchmarks.bench_compile [--quick] [--systems dual_arm,space_arm,...] [--out PATH]

Programs (float64 unless --dtype says otherwise):
* the four sweep systems of `experiments/sweep_systems.py`, one per seed: `dual_arm` (seed 000: dual-arm
  spacecraft, per-sample topology, computed torque, RK4), `tether` (seed 001: orbital tethered dumbbell,
  RK4 on the FEM), `space_arm` (seed 002: 7-DOF arm on a free hub, RK4), `stewart` (seed 004: Kane's
  inverse dynamics along a profile). Value: `jit(vmap(simulate))` over --batch samples of --steps steps;
  gradient: `jit(grad)` of the sum of every output w.r.t. every float input of the sample;
* `panda_rollout` and `space_arm_rollout`: the leading-batch closed-loop RK4 rollouts of `bench_adjoint`
  (the batch-last core, 256 rollouts of 100 steps, float32), value and value+gradient w.r.t. (q0, v0, k_d):
  the largest compiles measured before (docs/performance.md, "Rollouts on the batch-last core").

Each program is compiled in two fresh processes sharing an empty JAX persistent compilation cache (the one
`python -m experiments ...` commands use, `experiments._common.use_compilation_cache`): the first pays
trace, lowering and XLA (cold), the second reads XLA's result from the cache (warm: trace and lowering
only, plus the cache read). Reported per program: trace s, lower s, XLA compile s, total cold, total warm,
and whether each is within the 10 s target. Writes results/bench_compile.json (or --out) and prints a table.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from experiments._common import BENCH_NOTE, OneLineParser, interruptible, positive_int
from experiments._progress import progress
from experiments.benchmarks import bench_common as bc

RESULTS = Path(__file__).parent / "results"
SWEEP_SYSTEMS = ("dual_arm", "tether", "space_arm", "stewart")
ROLLOUTS = {"panda_rollout": "panda", "space_arm_rollout": "space_arm_free"}
TARGET_S = 10.0


def parse_args(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    p = OneLineParser(prog="python -m experiments.benchmarks.bench_compile", description=__doc__,
                      formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--systems", default=",".join((*SWEEP_SYSTEMS, *ROLLOUTS)),
                   help=f"comma-separated programs of {', '.join((*SWEEP_SYSTEMS, *ROLLOUTS))}")
    p.add_argument("--batch", type=positive_int, default=8, help="samples per sweep-system call (default 8)")
    p.add_argument("--steps", type=positive_int, default=20, help="steps per sweep-system sample (default 20)")
    p.add_argument("--dtype", default="float64", choices=("float32", "float64"), help="sweep systems' dtype")
    p.add_argument("--quick", action="store_true", help="smoke test: the stewart and tether systems only")
    p.add_argument("--out", type=Path, default=RESULTS / "bench_compile.json", help="JSON output")
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    opts = p.parse_args(argv)
    if opts.quick:
        opts.systems = "stewart,tether"
    names = [x for x in opts.systems.split(",") if x]
    known = (*SWEEP_SYSTEMS, *ROLLOUTS)
    unknown = [x for x in names if x not in known]
    if unknown or not names:
        p.error(f"argument --systems: unknown program(s) {unknown}; choose from {', '.join(known)}")
    opts.names = names
    return opts


def _programs(name, opts):
    """{case: (fn, args)}: the value and gradient programs of one system."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    if name in ROLLOUTS:
        from experiments.benchmarks import adjoint_cases as ba
        model = ba.systems(jnp.float32)[ROLLOUTS[name]][0]
        cases = ba.batch_rollout_cases(model, 256, 100, jnp.float32, False, np.random.default_rng(0))
        return {"value": cases["value batch-last"], "gradient": cases["adjoint batch-last"]}
    from experiments.sweep_systems import SYSTEMS

    system = SYSTEMS[name]
    dtype = jnp.dtype(opts.dtype)
    sample = {k: jnp.asarray(v, dtype if np.issubdtype(np.asarray(v).dtype, np.floating) else None)
              for k, v in system.sample(np.random.default_rng(0), opts.batch).items()}
    simulate = jax.vmap(system.simulator(opts.steps))
    floats = sorted(k for k, v in sample.items() if jnp.issubdtype(v.dtype, jnp.floating))

    def loss(x, rest):
        return sum(jnp.sum(out) for out in jax.tree.leaves(simulate({**rest, **x})))

    x = {k: sample[k] for k in floats}
    rest = {k: v for k, v in sample.items() if k not in floats}
    return {"value": (simulate, (sample,)), "gradient": (jax.grad(loss), (x, rest))}


def worker(opts):
    """Compile every program of opts.worker (one system) in this process; print one JSON line per program."""
    if opts.dtype == "float64" and opts.worker not in ROLLOUTS:
        import jax
        jax.config.update("jax_enable_x64", True)
    import jax

    from experiments._common import use_compilation_cache
    use_compilation_cache()
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    for case, (fn, args) in _programs(opts.worker, opts).items():
        t0 = time.perf_counter()
        traced = jax.jit(fn).trace(*args)
        t1 = time.perf_counter()
        lowered = traced.lower()
        t2 = time.perf_counter()
        lowered.compile()
        t3 = time.perf_counter()
        print(json.dumps({"system": opts.worker, "case": case, "trace_s": t1 - t0, "lower_s": t2 - t1,
                          "xla_compile_s": t3 - t2, "compile_s": t3 - t0}), flush=True)


def _run_worker(name, opts, cache):
    env = {**os.environ, "JAXSOA_COMPILATION_CACHE": cache}
    cmd = [sys.executable, "-m", "experiments.benchmarks.bench_compile", "--worker", name, "--batch", str(opts.batch),
           "--steps", str(opts.steps), "--dtype", opts.dtype]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"compile worker for {name} failed:\n{proc.stderr[-3000:]}")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


@interruptible(BENCH_NOTE)
def main(argv=None):
    opts = parse_args(argv)
    if opts.worker:
        return worker(opts)
    bc.fusion_emitters_off()
    start, records = time.perf_counter(), []
    for name in progress(opts.names, desc="bench_compile", unit="system"):
        with tempfile.TemporaryDirectory() as cache:
            cold, warm = _run_worker(name, opts, cache), _run_worker(name, opts, cache)
        for c, w in zip(cold, warm, strict=True):
            records.append({**c, "warm_compile_s": w["compile_s"], "warm_xla_s": w["xla_compile_s"],
                            "cold_met": c["compile_s"] <= TARGET_S, "warm_met": w["compile_s"] <= TARGET_S})
    rows = [[r["system"], r["case"], r["trace_s"], r["lower_s"], r["xla_compile_s"], r["compile_s"],
             r["warm_compile_s"], "yes" if r["cold_met"] else "no", "yes" if r["warm_met"] else "no"] for r in records]
    print(bc.md_table(["system", "case", "trace s", "lower s", "XLA s", "cold total s", "warm total s",
                       f"cold ≤ {TARGET_S:g} s", f"warm ≤ {TARGET_S:g} s"], rows))
    worst = max(records, key=lambda r: r["compile_s"])
    print(f"\nlargest cold compile: {worst['system']} {worst['case']} {worst['compile_s']:.1f} s; "
          f"largest warm: {max(r['warm_compile_s'] for r in records):.1f} s")
    bc.finish("bench_compile", start, opts.out, {"batch": opts.batch, "steps": opts.steps, "dtype": opts.dtype,
                                                 "target_s": TARGET_S, "records": records})


if __name__ == "__main__":
    sys.exit(main())
