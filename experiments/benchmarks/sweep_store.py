"""The cost of durability: a sweep committed chunk by chunk to a run directory
(`jaxsoa.workflows.runner.run_sweep`: zarr store, local or Dask executor) against the same sweep
in memory (`jaxsoa.workflows.sharding.sharded_map`), as a ratio of wall times (target ≤ 1.1× for
chunks of ≥ 4096 samples).

    python -m experiments.benchmarks.sweep_store [--workload space_arm aba] [--count 16384] [--chunk 4096]
                                                 [--steps 50] [--repeats 3] [--dask] [--out results/sweep_store.json]

Workloads: ``space_arm``, the coasting 7-DOF arm of ``python -m experiments sweep`` (`--steps` RK4
steps per sample: a realistic per-sample cost), and ``aba``, one free-floating ABA of the dual-arm
spacecraft per sample in a random topology (microseconds per sample: the worst case, where writing
the inputs and outputs is largest against the compute). Every method runs the same compiled
program: the persistent compilation cache (a temporary folder) is filled by a warm-up run, so the
timed runs measure tracing, dispatch, transfers and, for the store, the zarr writes and commits, not
XLA compilation. Each method is timed ``--repeats`` times, into a fresh run directory each time;
the ratio is that of the fastest runs (the least disturbed by other load on a shared machine; the
medians' ratio is reported too). ``--dask`` adds the Dask executor on a `LocalCluster` of one worker process
(one thread): its ratio also contains the task round trips and the pickling of the inputs.
Writes the JSON (or --out) and prints a markdown table.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from experiments._common import BENCH_NOTE, OneLineParser, interruptible, positive_int

RESULTS = Path(__file__).parent / "results"


def parse_args(argv=None):
    p = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workload", nargs="+", choices=("space_arm", "aba"), default=["space_arm", "aba"])
    p.add_argument("--count", type=positive_int, default=16384, help="samples per sweep")
    p.add_argument("--chunk", type=positive_int, default=4096, help="samples per chunk")
    p.add_argument("--steps", type=positive_int, default=50, help="RK4 steps per sample (space_arm)")
    p.add_argument("--repeats", type=positive_int, default=3, help="timed runs per method (the median is reported)")
    p.add_argument("--dask", action="store_true", help="also the Dask executor (LocalCluster, 1 worker process)")
    p.add_argument("--out", type=Path, default=RESULTS / "sweep_store.json", help="JSON output")
    return p.parse_args(sys.argv[1:] if argv is None else argv)


def workload(name, count, steps):
    """(fn(sample) -> outputs, host batch) of a workload."""
    import numpy as np

    if name == "space_arm":
        from experiments.sweep_systems import SYSTEMS

        spec = SYSTEMS["space_arm"]
        return spec.simulator(steps), spec.sample(np.random.default_rng(0), count)
    import jax.numpy as jnp

    from jaxsoa import aba_free_floating
    from jaxsoa.topology.reconfigure import apply_configuration, design_arrays
    from sims import dual_arm_spacecraft as dual

    template, arrays = dual.model(1, floating=True), design_arrays(dual.design(floating=True))
    table = jnp.asarray([dual.CONFIGURATIONS[k] for k in (1, 2, 3)], jnp.int32)

    def fn(s):                                  # ABA in the sample's topology (1-3), at a random state
        model = apply_configuration(template, arrays, table[s["configuration"]], jnp.asarray(dual.IDS, jnp.int32))
        q = jnp.concatenate([s["hub_position"], s["hub_quat"] / jnp.linalg.norm(s["hub_quat"]), s["q_joints"]])
        return {"qdd": aba_free_floating(model, q, s["v"], s["tau"])}

    rng = np.random.default_rng(0)
    return fn, {"configuration": rng.integers(0, 3, count), "hub_position": rng.normal(size=(count, 3)),
                "hub_quat": rng.normal(size=(count, 4)), "q_joints": rng.uniform(-1, 1, (count, 6)),
                "v": rng.normal(size=(count, 12)), "tau": rng.normal(size=(count, 6))}


def timed(run, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times)


def methods(fn, batch, opts, folder: Path, client=None) -> dict:
    """{method: run()} of one workload; each store run writes a fresh run directory under ``folder``."""
    from jaxsoa.workflows import DaskExecutor, run_sweep, sharded_map

    runs = iter(range(10**6))
    out = {"sharded_map (in memory)": lambda: sharded_map(fn, batch, chunk_size=opts.chunk),
           "run_sweep local (zarr store)": lambda: run_sweep(fn, batch, folder / f"r{next(runs)}",
                                                              chunk_size=opts.chunk)}
    if client is not None:
        out["run_sweep dask (1 worker, zarr store)"] = lambda: run_sweep(
            fn, batch, folder / f"r{next(runs)}", chunk_size=opts.chunk, executor=DaskExecutor(client=client))
    return out


@interruptible(BENCH_NOTE)
def main(argv=None):
    opts = parse_args(argv)
    start = time.perf_counter()
    cache = tempfile.mkdtemp(prefix="jax-cache-")
    os.environ.update(JAX_COMPILATION_CACHE_DIR=cache, JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
                      JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0")        # also read by Dask workers
    os.environ.setdefault("XLA_FLAGS", "--xla_cpu_use_fusion_emitters=false")
    import jax

    jax.config.update("jax_enable_x64", True)
    from experiments.benchmarks import bench_common as bc

    records, cluster, client = [], None, None
    if opts.dask:
        import distributed

        cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None)
        client = distributed.Client(cluster)
    with tempfile.TemporaryDirectory(prefix="sweep-store-") as tmp:
        for name in opts.workload:
            fn, batch = workload(name, opts.count, opts.steps)
            base = None
            for method, run in methods(fn, batch, opts, Path(tmp) / name, client).items():
                t0 = time.perf_counter()
                run()                                                  # warm-up: fills the compilation cache
                warm = time.perf_counter() - t0
                median, best = timed(run, opts.repeats)
                base = (median, best) if base is None else base
                records.append({"workload": name, "method": method, "count": opts.count, "chunk": opts.chunk,
                                "steps": opts.steps if name == "space_arm" else None, "warmup_s": warm,
                                "median_s": median, "min_s": best, "samples_per_s": opts.count / best,
                                "ratio": best / base[1], "ratio_median": median / base[0]})
                print(f"{name:9s} {method:40s} {best:8.3f} s  x{best / base[1]:.3f}", flush=True)
    if cluster is not None:
        client.close()
        cluster.close()
    rows = [[r["workload"], r["method"], r["count"], r["chunk"], r["min_s"], r["median_s"], r["samples_per_s"],
             r["ratio"], r["ratio_median"]] for r in records]
    print("\n" + bc.md_table(["workload", "method", "samples", "chunk", "fastest s", "median s", "samples/s",
                              "× sharded_map (fastest)", "× (median)"], rows))
    bc.finish("sweep_store", start, opts.out, {"records": records, "target_ratio": 1.1})


if __name__ == "__main__":
    sys.exit(main())
