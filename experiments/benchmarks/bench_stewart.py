"""Stewart-platform inverse dynamics over a batch of poses (suite part (e)).

    python -m experiments.benchmarks.bench_stewart [--quick] [--batches 1,1024,16384] [--dtypes float32,float64]

The heavy-duty gas-assisted platform of `sims/stewart_gas.py` (individual tanks): Kane's inverse dynamics
with the masses of all 19 bodies (`jaxsoa.systems.stewart.dynamics.inverse_dynamics`) and the light-leg
approximation, at random poses around the home pose (±0.1 m, ±5°) with random twists and accelerations,
`jit(vmap)` over the batch. Reported: µs per pose, poses per second, compile time, the fraction of poses
flagged invalid (must be 0 here) and, for float32, the largest force error against float64 relative to
the largest force. Writes results/bench_stewart.json (or --out) and prints a markdown table.
"""

import argparse
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

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
from jaxsoa.spatial.rotation import exp_so3
from jaxsoa.systems.stewart import dynamics as sd
from sims import stewart_gas

RESULTS = Path(__file__).parent / "results"
QUICK = dict(batches=(1, 64), repeats=3, target_s=0.02, out=RESULTS / "bench_stewart_quick.json")
ALGOS = {"kane": sd.inverse_dynamics, "light_legs": sd.inverse_dynamics_light_leg}


def parse_args(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    p = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batches", type=comma_list(positive_int), default=(1, 1024, 16384),
                   help="poses per call")
    p.add_argument("--dtypes", type=comma_list(one_of(("float32", "float64"))), default=("float32", "float64"))
    p.add_argument("--repeats", type=positive_int, default=5, help="timed rounds per case (the median is reported)")
    p.add_argument("--target-s", type=positive_float, default=0.1, help="approximate duration of one timed round")
    p.add_argument("--quick", action="store_true", help="smoke test: batches 1, 64")
    p.add_argument("--out", type=Path, default=RESULTS / "bench_stewart.json", help="JSON output")
    if "--quick" in argv:
        p.set_defaults(**QUICK)
    return p.parse_args(argv)


def poses(batch, seed=0):
    """float64 (p (B, 3), R (B, 3, 3), u (B, 6), u̇ (B, 6)) around the home pose."""
    rng = np.random.default_rng(seed)
    p = np.asarray(stewart_gas.HOME) + rng.uniform(-0.1, 0.1, (batch, 3))
    R = np.asarray(jax.vmap(exp_so3)(jnp.asarray(rng.uniform(-1.0, 1.0, (batch, 3)) * np.deg2rad(5.0))))
    return p, R, rng.normal(0.0, 0.2, (batch, 6)), rng.normal(0.0, 1.0, (batch, 6))


def cast(tree, dtype):
    return jax.tree_util.tree_map(lambda x: jnp.asarray(x, dtype) if jnp.issubdtype(jnp.asarray(x).dtype, jnp.floating)
                                  else x, tree)


@interruptible(BENCH_NOTE)
def main(argv=None):
    opts = parse_args(argv)
    jax.config.update("jax_enable_x64", True)            # float64 reference; float32 cases cast explicitly
    params64, start, records = stewart_gas.build("individual"), time.perf_counter(), []
    cases = [(algo, dtype, batch) for algo in ALGOS for dtype in opts.dtypes for batch in opts.batches]
    for algo, dtype, batch in progress(cases, desc="bench_stewart", unit="case"):
        fn = jax.jit(jax.vmap(lambda p, *x, f=ALGOS[algo]: f(p, *x).force, in_axes=(None, 0, 0, 0, 0)))
        params, inputs = cast((params64, tuple(map(jnp.asarray, poses(batch)))), jnp.dtype(dtype))
        t0 = time.perf_counter()
        compiled = fn.lower(params, *inputs).compile()
        compile_s = time.perf_counter() - t0
        force = np.asarray(compiled(params, *inputs), np.float64)
        reference = np.asarray(fn(params64, *map(jnp.asarray, poses(batch))))
        res = bc.measure(bc._blocking, (compiled, params, *inputs), opts.repeats, opts.target_s)
        records.append({"algo": algo, "dtype": dtype, "batch": batch, "compile_s": compile_s,
                        "per_sample_us": res["call_s"] / batch * 1e6, "poses_per_s": batch / res["call_s"],
                        "invalid_fraction": float(np.mean(~np.isfinite(force).all(axis=1))),
                        "rel_err_vs_f64": float(np.nanmax(np.abs(force - reference)) / np.nanmax(np.abs(reference))),
                        **res})
    table = bc.md_table(["algo", "dtype", "batch", "µs/pose", "poses/s", "compile s", "invalid", "err vs f64"],
                        [[r["algo"], r["dtype"], r["batch"], r["per_sample_us"], r["poses_per_s"], r["compile_s"],
                          r["invalid_fraction"], r["rel_err_vs_f64"]] for r in records])
    print(f"# bench_stewart: {jax.devices()[0]}\n\n{table}")
    bc.finish("bench_stewart", start, opts.out, {"records": records, "table": table})
    return 0


if __name__ == "__main__":
    sys.exit(main())
