"""Per-sample trees on the batch-last core: a batch of different random topologies against one shared tree.

    .venv/bin/python -m experiments.benchmarks.bench_stacked [--quick]

For each link count n: one random revolute model (`bench_topology.random_model`) and a batch of B random
trees on its link data, each stored in its own random order (a stacked model, `jaxsoa.stack_models`'s
layout, built by `jax.vmap(model.with_parent)`). Cases, per algorithm (RNEA, ABA), all in one process,
rounds interleaved (order reversed every other round), the table giving the median of the per-round
ratios to the shared-tree call:

* `shared tree`: `aba(model, q[B], …)`, the batch-last core on one tree (the reference);
* `stacked, gather` / `stacked, dense`: `aba(stacked, q[B], …)` with the per-sample parent rows reached by
  gathers on the link axis (the inward pass by first-child / next-sibling chains) or by masked sums
  over the n + 1 rows
  (`jaxsoa.multibody.batch_last.DENSE_MAX_LINKS` set before tracing);
* `stacked, one tree`: the same stacked call where every sample has the shared tree (the cost of
  per-sample data and positions without different topologies);
* `per-sample core`: `jit(vmap(aba_autodiff))` (ABA's recursion; `vmap(aba)` runs the core by its batching rule)
  or `jit(vmap(rnea))` over the stacked model (the engine before the batch-last path).

The crossover (the n from which gathers beat masked sums) is printed and is what DENSE_MAX_LINKS encodes.
XLA's CPU fusion emitters are off, as in bench_batch_last.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from experiments._common import BENCH_NOTE, OneLineParser, interruptible, nonnegative_int, positive_float, positive_int
from experiments._progress import progress
from experiments.benchmarks.bench_batch_last import interleaved

RESULTS = Path(__file__).parent / "results"
CASES = ("shared tree", "stacked, gather", "stacked, dense", "stacked, one tree", "per-sample core")


def _links(text):
    try:
        values = [int(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers") from None
    if not values or min(values) < 2:
        raise argparse.ArgumentTypeError(f"{text!r}: every link count must be at least 2")
    return values


def parse_args(argv=None):
    p = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--links", type=_links, default=[4, 7, 16, 32, 64], help="link counts (default 4,7,16,32,64)")
    p.add_argument("--batch", type=positive_int, default=4096, help="samples (random trees) per call (default 4096)")
    p.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    p.add_argument("--rounds", type=positive_int, default=5, help="interleaved timed rounds (default 5)")
    p.add_argument("--target-s", type=positive_float, default=0.05, help="approximate duration of one case in a round")
    p.add_argument("--seed", type=nonnegative_int, default=0)
    p.add_argument("--quick", action="store_true", help="smoke test: links 4,8, batch 128, 2 rounds")
    p.add_argument("--out", type=Path, default=None, help="JSON output (default results/bench_stacked.json)")
    opts = p.parse_args(argv)
    if opts.quick:
        opts.links, opts.batch, opts.rounds, opts.target_s = [4, 8], 128, 2, 0.01
    return opts


def _stacked_trees(model, rng, batch):
    """The model's link data on `batch` random trees, each relabelled by its own random permutation."""
    import jax
    import jax.numpy as jnp

    from experiments.benchmarks.bench_topology import random_parent

    n = model.n_links
    parents = []
    for _ in range(batch):
        tree, perm = random_parent(rng, n), rng.permutation(n)
        parent = np.full(n, -1, np.int64)
        parent[perm] = np.where(tree >= 0, perm[np.maximum(tree, 0)], -1)     # link k of the tree is stored at perm[k]
        parents.append(parent)
    return jax.vmap(lambda p: model.with_parent(p))(jnp.asarray(np.stack(parents), jnp.int32))


def _cases(n, opts, rng):
    """{(algorithm, case): call} compiled, and {(algorithm, case): relative error vs the per-sample core}."""
    import jax
    import jax.numpy as jnp

    import jaxsoa
    from experiments.benchmarks import bench_common as bc
    from experiments.benchmarks.bench_topology import random_model
    from jaxsoa.algorithms.dynamics import aba_autodiff
    from jaxsoa.multibody import batch_last as bl

    dtype = jnp.dtype(opts.dtype)
    model = random_model(rng, n, dtype)
    stacked = _stacked_trees(model, rng, opts.batch)
    one_tree = jax.tree.map(lambda x: jnp.broadcast_to(x, (opts.batch, *x.shape)), model)
    q, v, u = (jnp.asarray(x, dtype) for x in bc.make_inputs(n, n, opts.batch, seed=opts.seed))
    calls, errors, default = {}, {}, bl.DENSE_MAX_LINKS
    for algo in ("rnea", "aba"):
        fn = getattr(jaxsoa, algo)
        setups = {"shared tree": (model, default), "stacked, gather": (stacked, 0),
                  "stacked, dense": (stacked, 10**9), "stacked, one tree": (one_tree, default)}
        outputs = {}
        for case, (m, dense_max) in setups.items():
            bl.DENSE_MAX_LINKS = dense_max                            # read while tracing, below
            compiled = jax.jit(lambda m, q, v, u, fn=fn: fn(m, q, v, u)).lower(m, q, v, u).compile()
            calls[(algo, case)] = lambda c=compiled, m=m: jax.block_until_ready(c(m, q, v, u))
            outputs[case] = compiled(m, q, v, u)
        bl.DENSE_MAX_LINKS = default
        recursion = aba_autodiff if algo == "aba" else fn             # `vmap(aba)` would run the core by its rule
        per_sample = jax.jit(jax.vmap(lambda m, q, v, u, f=recursion: f(m, q, v, u))).lower(stacked, q, v, u).compile()
        calls[(algo, "per-sample core")] = lambda c=per_sample: jax.block_until_ready(c(stacked, q, v, u))
        reference = np.asarray(per_sample(stacked, q, v, u), np.float64)
        scale = max(1.0, float(np.abs(reference).max()))
        for case in ("stacked, gather", "stacked, dense"):
            errors[(algo, case)] = float(np.abs(np.asarray(outputs[case], np.float64) - reference).max() / scale)
    return calls, errors


def run(opts):
    import jax

    if opts.dtype == "float64":
        jax.config.update("jax_enable_x64", True)
    rng = np.random.default_rng(opts.seed)
    records = []
    for n in progress(opts.links, desc="stacked trees"):
        calls, errors = _cases(n, opts, rng)
        times = interleaved(calls, opts.rounds, opts.target_s)
        for (algo, case), ts in times.items():
            anchor = times[(algo, "shared tree")]
            records.append({"links": n, "algorithm": algo, "case": case, "batch": opts.batch, "dtype": opts.dtype,
                            "per_sample_us": statistics.median(ts) / opts.batch * 1e6,
                            "ratio_to_shared_tree": statistics.median(t / a for t, a in zip(ts, anchor, strict=True)),
                            "rel_error_vs_per_sample_core": errors.get((algo, case))})
    return records


def crossover(records):
    """{algorithm: smallest n at which the gathers are faster than the masked sums (None: never)}."""
    out = {}
    for algo in ("rnea", "aba"):
        by_n = {}
        for r in records:
            if r["algorithm"] == algo and r["case"] in ("stacked, gather", "stacked, dense"):
                by_n.setdefault(r["links"], {})[r["case"]] = r["per_sample_us"]
        faster = [n for n, t in sorted(by_n.items()) if t["stacked, gather"] < t["stacked, dense"]]
        out[algo] = faster[0] if faster else None
    return out


@interruptible(BENCH_NOTE)
def main(argv=None):
    start = time.perf_counter()
    opts = parse_args(argv)
    from experiments.benchmarks import bench_common as bc

    bc.fusion_emitters_off()                                             # before JAX starts

    records = run(opts)
    rows = [(r["links"], r["algorithm"], r["case"], r["batch"], r["dtype"], r["per_sample_us"],
             r["ratio_to_shared_tree"], r["rel_error_vs_per_sample_core"]) for r in records]
    print(bc.md_table(["links", "algorithm", "case", "batch", "dtype", "µs/sample", "× shared tree",
                       "rel. error vs per-sample core"], rows))
    cross = crossover(records)
    print(f"\ngathers faster than masked sums from n = {cross['rnea']} (RNEA), {cross['aba']} (ABA)")
    out = opts.out or RESULTS / "bench_stacked.json"
    bc.finish("bench_stacked", start, out, {"records": records, "crossover": cross, "machine": bc.machine_info()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
