"""Per-sample cost against link count (suite parts (f), (g)): random chains and random trees of 4 to 256
revolute links, the O(n) recursions (`rnea`, `aba`, `crba`) and the dense masked-operator forms
(`inverse_dynamics_operator`, `forward_dynamics_operator`, O(n²) memory, O(n³) work), with the compile
time of every case and the fitted slope of log(µs/sample) against log(n).

    python -m experiments.benchmarks.bench_scaling [--quick] [--ns 4,8,...] [--batch 256] [--dtype float32]

The slope is fitted over n ≥ `--fit-from` (16), on each case's fastest timed round (robust to other load
on a shared machine): at small n the per-call overhead dominates. A slope
near 1 is O(n) per sample; CRBA builds the n×n mass matrix, so its slope is ~2 by construction. The
dense forms stop at `--dense-max-n` (64): φ alone holds (6n)² numbers per sample.
Writes results/bench_scaling.json (or --out) and prints a markdown table.
"""

import argparse
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
    nonnegative_int,
    positive_float,
    positive_int,
)
from experiments._progress import progress
from experiments.benchmarks import bench_common as bc
from experiments.benchmarks.bench_topology import random_model, random_parent

RESULTS = Path(__file__).parent / "results"
RECURSIVE = ("rnea", "aba", "crba")
DENSE = ("inverse_dynamics_operator", "forward_dynamics_operator")
QUICK = dict(ns=(4, 8, 16, 32), batch=32, repeats=3, target_s=0.02, dense_max_n=16, fit_from=8,
             out=RESULTS / "bench_scaling_quick.json")


def parse_args(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    p = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ns", type=comma_list(positive_int), default=(4, 8, 16, 32, 64, 128, 256),
                   help="link counts")
    p.add_argument("--batch", type=positive_int, default=256, help="samples per call")
    p.add_argument("--dtype", default="float32", choices=("float32", "float64"))
    p.add_argument("--dense-max-n", type=positive_int, default=64, help="largest n for the dense operator forms")
    p.add_argument("--fit-from", type=positive_int, default=16, help="smallest n in the fitted slope")
    p.add_argument("--repeats", type=positive_int, default=5, help="timed rounds per case (the median is reported)")
    p.add_argument("--target-s", type=positive_float, default=0.1, help="approximate duration of one timed round")
    p.add_argument("--seed", type=nonnegative_int, default=0)
    p.add_argument("--quick", action="store_true", help="smoke test (< 1 min): n = 4..32, batch 32")
    p.add_argument("--out", type=Path, default=RESULTS / "bench_scaling.json", help="JSON output")
    if "--quick" in argv:
        p.set_defaults(**QUICK)
    return p.parse_args(argv)


def batched(name):
    """jit(vmap) of one algorithm over (q, v, u) with the model broadcast."""
    fn = getattr(jaxsoa, name)
    if name == "crba":
        return jax.jit(jax.vmap(lambda m, q, v, u: fn(m, q), in_axes=(None, 0, 0, 0)))
    return jax.jit(jax.vmap(fn, in_axes=(None, 0, 0, 0)))


def run_case(name, model, inputs, opts):
    """Compile time (lower + compile) and the per-sample time of one algorithm."""
    t0 = time.perf_counter()
    compiled = batched(name).lower(model, *inputs).compile()
    compile_s = time.perf_counter() - t0
    res = bc.measure(bc._blocking, (compiled, model, *inputs), opts.repeats, opts.target_s)
    return {"compile_s": compile_s, "per_sample_us": res["call_s"] / opts.batch * 1e6,
            "per_sample_us_min": res["call_s_min"] / opts.batch * 1e6, **res}


def fitted_slope(records, shape, algo, fit_from):
    """Least-squares slope of log(µs/sample) against log(n) over n ≥ fit_from, on the fastest round of each
    case (the least disturbed by other load on a shared machine)."""
    pts = [(r["n"], r["per_sample_us_min"]) for r in records if r["shape"] == shape and r["algo"] == algo
           and r["n"] >= fit_from]
    if len(pts) < 2:
        return None
    n, t = np.log(np.array(pts)).T
    return float(np.polyfit(n, t, 1)[0])


@interruptible(BENCH_NOTE)
def main(argv=None):
    opts = parse_args(argv)
    jax.config.update("jax_enable_x64", opts.dtype == "float64")
    rng, dtype, start = np.random.default_rng(opts.seed), jnp.dtype(opts.dtype), time.perf_counter()
    cases = [(shape, n, algo) for n in opts.ns for shape in ("chain", "tree")
             for algo in RECURSIVE + (DENSE if n <= opts.dense_max_n else ())]
    records = []
    for shape, n, algo in progress(cases, desc="bench_scaling", unit="case"):
        parent = np.arange(-1, n - 1) if shape == "chain" else random_parent(rng, n)
        model = random_model(rng, n, dtype, parent=parent)
        inputs = tuple(jnp.asarray(x, dtype) for x in bc.make_inputs(n, n, opts.batch, seed=n))
        records.append({"shape": shape, "n": n, "algo": algo, "batch": opts.batch, "dtype": opts.dtype,
                        **run_case(algo, model, inputs, opts)})
    slopes = {f"{shape} {algo}": fitted_slope(records, shape, algo, opts.fit_from)
              for shape in ("chain", "tree") for algo in RECURSIVE + DENSE}
    algos = RECURSIVE + DENSE
    by = {(r["shape"], r["n"], r["algo"]): r for r in records}
    rows = [[shape, n, *(by.get((shape, n, a), {}).get("per_sample_us") for a in algos),
             max(by[(shape, n, a)]["compile_s"] for a in algos if (shape, n, a) in by)]
            for shape in ("chain", "tree") for n in opts.ns]
    table = bc.md_table(["shape", "n", *(f"µs {a}" for a in algos), "max compile s"], rows)
    slope_rows = [[k, v] for k, v in slopes.items() if v is not None]
    print(f"# bench_scaling: {opts.dtype}, batch {opts.batch}, {jax.devices()[0]}\n\n{table}\n\n"
          f"fitted slope of log(µs/sample) vs log(n), n ≥ {opts.fit_from}:\n\n"
          f"{bc.md_table(['shape algo', 'slope'], slope_rows)}")
    bc.finish("bench_scaling", start, opts.out, {"slopes": slopes, "records": records, "table": table})
    return 0


if __name__ == "__main__":
    sys.exit(main())
