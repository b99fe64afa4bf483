"""The batch-last core against the per-sample core and Pinocchio's C++, in one process.

    .venv/bin/python -m experiments.benchmarks.bench_batch_last [--quick]

Cases, per algorithm (RNEA, ABA, CRBA) and batch: Pinocchio's `rneaInParallel` / `abaInParallel` with 2
threads (the anchor; for CRBA, which Pinocchio does not batch, its C++ `crba` called per sample from a Python
loop, one thread), jaxsoa's per-sample recursions under `jax.vmap` ("vmap": `jit(vmap(lambda q, v, u:
rnea(m, q, v, u)))` with the batching rule of `jaxsoa.multibody.vmap_rule` switched off; for ABA's gradient
the per-sample adjoint: the core before the batch-last path), the same `jax.vmap` with the rule on ("vmap
rule": it runs the batch-last core) and the leading-batch call (`jit(lambda q, v, u: aba(m, q, v, u))` on
(B, nq) arrays: the batch-last path). Rounds are interleaved (order reversed every other round) and the
table gives the median of the per-round ratios to the anchor. `--devices 2` reruns the jaxsoa cases in a
subprocess with two XLA host devices, the batch split by `shard_map`. XLA's CPU fusion emitters are
turned off (`--xla_cpu_use_fusion_emitters=false`, docs/benchmarks.md) unless XLA_FLAGS already sets
them. `--gradients` adds value+grad of an ABA loss (its adjoint) and of an RNEA loss (the hand-written
reverse mode, and plain autodiff of the same passes) w.r.t. the three states on the three paths (under
`vmap` the rule's reverse mode is the leading-batch call's VJP), with the ratio to the value in the same
rounds.
`--chunks 0,512,…` adds the leading-batch RNEA and ABA compiled with `jaxsoa.multibody.batched.BATCH_CHUNK`
set to each value (0: the whole batch in one call), for the chunk-size choice.
`--chain-links` times the leading-batch RNEA and ABA on revolute chains of those lengths (per-sample
time against n).
"""

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from experiments._common import BENCH_NOTE, OneLineParser, interruptible, positive_float, positive_int
from experiments._progress import progress
from experiments.benchmarks import bench_common as bc
from experiments.benchmarks.batch_last_cases import _chain_cases, _jax_cases, _pinocchio_cases, anchor_of, value_of
from experiments.benchmarks.robot_models import ROBOT_NAMES

RESULTS = Path(__file__).parent / "results"


def _positive_ints(text):
    return [positive_int(x) for x in text.split(",") if x]


def _chunk_sizes(text):
    sizes = [int(x) if x.strip().isdigit() else -1 for x in text.split(",") if x]
    if any(size < 0 for size in sizes):
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers ≥ 0")
    return sizes


def _dtypes(text):
    names = [x for x in text.split(",") if x]
    for name in names:
        if name not in ("float32", "float64"):
            raise argparse.ArgumentTypeError(f"{name!r} is not float32 or float64")
    return names


def robot_list(text):
    """argparse type: a comma-separated list of `ROBOT_NAMES` (ArgumentTypeError naming the unknown one)."""
    names = [x.strip() for x in text.split(",") if x.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"expected a comma-separated list of robots, got {text!r}")
    for name in names:
        if name not in ROBOT_NAMES:
            raise argparse.ArgumentTypeError(f"{name!r} is not one of {', '.join(sorted(ROBOT_NAMES))}")
    return names


def parse_args(argv=None):
    p = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batches", type=_positive_ints, default=[1024, 8192],
                   help="comma-separated batch sizes (default 1024,8192)")
    p.add_argument("--dtypes", type=_dtypes, default=["float32", "float64"],
                   help="comma-separated dtypes (default float32,float64)")
    p.add_argument("--robots", type=robot_list, default=["panda"],
                   help=f"comma-separated robots of {', '.join(sorted(ROBOT_NAMES))} (default panda)")
    p.add_argument("--rounds", type=positive_int, default=7, help="interleaved timed rounds (default 7)")
    p.add_argument("--target-s", type=positive_float, default=0.05, help="approximate duration of one case in a round")
    p.add_argument("--devices", type=positive_int, default=1, help="XLA host devices for the jaxsoa cases")
    p.add_argument("--chain-links", type=_positive_ints, default=[],
                   help="comma-separated chain lengths for the scaling cases")
    p.add_argument("--gradients", action="store_true",
                   help="also time value+grad of an ABA loss (adjoint) on both paths (single device)")
    p.add_argument("--chunks", type=_chunk_sizes, default=[],
                   help="comma-separated BATCH_CHUNK values to also time RNEA/ABA batch-last with (0: no chunks)")
    p.add_argument("--quick", action="store_true", help="smoke test: batch 256, float32, 2 rounds")
    p.add_argument("--out", type=Path, default=None, help="JSON output (default results/bench_batch_last.json)")
    opts = p.parse_args(argv)
    if opts.quick:
        opts.batches, opts.dtypes, opts.rounds, opts.target_s = [256], ["float32"], 2, 0.01
    return opts


def _time(fn, number):
    t0 = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - t0) / number


def interleaved(cases: dict, rounds: int, target_s: float) -> dict:
    """{name: [seconds per call, one per round]}: every case once per round, order reversed every other round."""
    numbers = {}
    for name, fn in cases.items():
        fn()
        first = _time(fn, 1)
        numbers[name] = max(1, int(target_s / max(first, 1e-7)))
    times = {name: [] for name in cases}
    for r in range(rounds):
        for name in (list(cases) if r % 2 == 0 else list(cases)[::-1]):
            times[name].append(_time(cases[name], numbers[name]))
    return times


def run(opts):
    """Records {case, batch, dtype, devices, median per-sample µs, ratio to the anchor, error}."""
    records = []
    for robot, batch, dtype_name in bc.robot_grid(opts.robots, opts.dtypes, opts.batches, "batch-last bench"):
        jax_cases, errors = _jax_cases(robot, batch, dtype_name, opts.devices, opts.gradients,
                                       opts.chunks)
        cases = {**_pinocchio_cases(robot, batch), **jax_cases}
        times = interleaved(cases, opts.rounds, opts.target_s)
        for name, ts in times.items():
            anchor = times[anchor_of(name)]
            records.append({"robot": robot, "case": name, "batch": batch,
                            "dtype": dtype_name if "jaxsoa" in name else "float64",
                            "devices": opts.devices if "jaxsoa" in name else ("1 thread" if "loop" in name
                                                                                else "2 threads"),
                            "per_sample_us": statistics.median(ts) / batch * 1e6,
                            "ratio_to_pinocchio": statistics.median(t / a for t, a in zip(ts, anchor, strict=True)),
                            "rel_error_vs_pinocchio": errors.get(name),
                            "ratio_to_value": (statistics.median(t / a for t, a in zip(ts, times[value_of(name)],
                                                                                         strict=True))
                                               if "+grad" in name else None)})
    for links in progress(opts.chain_links, desc="chains"):
        times = interleaved(_chain_cases(links, opts.dtypes[0], opts.batches[0]), opts.rounds, opts.target_s)
        records += [{"case": name, "batch": opts.batches[0], "dtype": opts.dtypes[0], "devices": opts.devices,
                     "links": links, "per_sample_us": statistics.median(ts) / opts.batches[0] * 1e6}
                    for name, ts in times.items()]
    return records


@interruptible(BENCH_NOTE)
def main(argv=None):
    start = time.perf_counter()
    opts = parse_args(argv)
    bc.fusion_emitters_off()                                             # before JAX starts
    if opts.devices > 1 and f"device_count={opts.devices}" not in os.environ.get("XLA_FLAGS", ""):
        env = {**os.environ, "XLA_FLAGS": (os.environ.get("XLA_FLAGS", "") +
                                           f" --xla_force_host_platform_device_count={opts.devices}").strip()}
        return subprocess.call([sys.executable, "-m", "experiments.benchmarks.bench_batch_last",
                                *(argv if argv is not None else sys.argv[1:])], env=env)
    records = run(opts)
    rows = [(r.get("robot", "chain"), r["case"], r.get("links"), r["batch"], r["dtype"], r["devices"],
             r["per_sample_us"], r.get("ratio_to_pinocchio"), r.get("ratio_to_value"), r.get("rel_error_vs_pinocchio"))
            for r in records]
    print(bc.md_table(["robot", "case", "links", "batch", "dtype", "devices", "µs/sample", "× Pinocchio",
                       "× value", "rel. error vs Pinocchio"], rows))
    out = opts.out or RESULTS / ("bench_batch_last.json" if opts.devices == 1 else
                                 f"bench_batch_last_{opts.devices}dev.json")
    bc.finish("bench_batch_last", start, out, {"records": records, "machine": bc.machine_info()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
