"""The free-floating variants, forward kinematics and one link's Jacobian: the per-sample path under
`jax.vmap` against the leading-batch call (the batch-last core), with Pinocchio's `abaInParallel` (2
threads, float64, τ = 0 on the free-flyer: the same forward dynamics as `aba_free_floating`) as the anchor,
all in one process.

    .venv/bin/python -m experiments.benchmarks.bench_free_floating [--quick] [--robots solo12,talos]

Cases per robot: `aba_free_floating`, `rnea_free_floating`, `generalized_jacobian` (last link, hub frame
aligned with the world), `frame_jacobian` (last link, local) and `forward_kinematics`, each as
`jit(vmap(per-sample call))` ("vmap") and `jit(leading-batch call)` ("batch-last"). Rounds are interleaved
(`bench_batch_last.interleaved`); the table gives the median per-sample time, the median per-round ratio to
Pinocchio's ABA, the gain of the batch-last call over vmap and, for `aba_free_floating`, the error of the first
sample against Pinocchio's. XLA's fusion emitters are off as in
bench_batch_last.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from experiments._common import BENCH_NOTE, OneLineParser, interruptible, positive_float, positive_int
from experiments.benchmarks import bench_common as bc
from experiments.benchmarks.batch_last_cases import _pinocchio_cases
from experiments.benchmarks.bench_batch_last import _dtypes, _positive_ints, interleaved

RESULTS = Path(__file__).parent / "results"
FLOATING = tuple(name for name, (_, floating) in bc.ROBOTS.items() if floating)


def _robots(text):
    names = [x for x in text.split(",") if x]
    for name in names:
        if name not in FLOATING:
            raise argparse.ArgumentTypeError(f"{name!r} is not one of the free-flyer robots {', '.join(FLOATING)}")
    return names


def parse_args(argv=None):
    p = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batches", type=_positive_ints, default=[8192], help="comma-separated batch sizes (default 8192)")
    p.add_argument("--dtypes", type=_dtypes, default=["float32"], help="comma-separated dtypes (default float32)")
    p.add_argument("--robots", type=_robots, default=list(FLOATING),
                   help=f"comma-separated free-flyer robots of {', '.join(FLOATING)} (default all)")
    p.add_argument("--rounds", type=positive_int, default=5, help="interleaved timed rounds (default 5)")
    p.add_argument("--target-s", type=positive_float, default=0.05, help="approximate duration of one case in a round")
    p.add_argument("--quick", action="store_true", help="smoke test: batch 256, Solo-12, 2 rounds")
    p.add_argument("--out", type=Path, default=RESULTS / "bench_free_floating.json", help="JSON output")
    opts = p.parse_args(argv)
    if opts.quick:
        opts.batches, opts.robots, opts.rounds, opts.target_s = [256], ["solo12"], 2, 0.01
    return opts


def _jax_cases(robot, batch, dtype_name):
    import jax
    import jax.numpy as jnp

    import jaxsoa
    from jaxsoa.algorithms import free_floating, kinematics

    dtype = jnp.dtype(dtype_name)
    model = jaxsoa.load_urdf(str(jaxsoa.io.example_robot_urdf(robot)), floating_base=True, dtype=dtype)
    q, v, u = (jnp.asarray(x, dtype) for x in bc.make_inputs(model.nq, model.nv, batch, floating=True))
    u = u[:, 6:]
    link = model.n_links - 1
    calls = {
        "aba_free_floating": lambda q, v, u: free_floating.aba_free_floating(model, q, v, u),
        "rnea_free_floating": lambda q, v, u: free_floating.rnea_free_floating(model, q, v, u),
        "generalized_jacobian": lambda q, v, u: free_floating.generalized_jacobian(model, q, link),
        "frame_jacobian": lambda q, v, u: kinematics.frame_jacobian(model, q, link),
        "forward_kinematics": lambda q, v, u: kinematics.forward_kinematics(model, q),
    }
    cases, errors = {}, {}
    ref = _pinocchio_free_floating_aba(robot, *(np.asarray(x[0], np.float64) for x in (q, v, u)))
    for name, fn in calls.items():
        for path, f in (("vmap", jax.vmap(fn)), ("batch-last", fn)):
            compiled = jax.jit(f).lower(q, v, u).compile()
            cases[f"jaxsoa {name} {path}"] = (lambda c=compiled: jax.block_until_ready(c(q, v, u)))
            if name == "aba_free_floating":
                out = np.asarray(compiled(q, v, u)[0], np.float64)
                errors[f"jaxsoa {name} {path}"] = float(np.abs(out - ref).max() / np.abs(ref).max())
    return cases, errors


def _pinocchio_free_floating_aba(robot, q, v, tau_joints):
    """Pinocchio's ABA of one sample with no force on the free-flyer (float64)."""
    import pinocchio as pin

    pm = bc.pin_model(robot)
    return pin.aba(pm, pm.createData(), q, v, np.concatenate([np.zeros(6), tau_joints]))


def run(opts):
    """Records {robot, case, batch, dtype, median per-sample µs, ratio to Pinocchio's ABA, gain over vmap}."""
    records = []
    for robot, batch, dtype_name in bc.robot_grid(opts.robots, opts.dtypes, opts.batches, "free-floating bench"):
        anchor = "pinocchio aba 2t"
        jax_cases, errors = _jax_cases(robot, batch, dtype_name)
        cases = {anchor: _pinocchio_cases(robot, batch)[anchor], **jax_cases}
        times = interleaved(cases, opts.rounds, opts.target_s)
        for name, ts in times.items():
            vmap_name = name.replace("batch-last", "vmap")
            gain = (statistics.median(a / t for t, a in zip(ts, times[vmap_name], strict=True))
                    if name.endswith("batch-last") else None)
            records.append({"robot": robot, "case": name, "batch": batch,
                            "dtype": dtype_name if "jaxsoa" in name else "float64",
                            "per_sample_us": statistics.median(ts) / batch * 1e6,
                            "ratio_to_pinocchio_aba": statistics.median(t / a for t, a in
                                                                        zip(ts, times[anchor], strict=True)),
                            "gain_over_vmap": gain, "rel_error_vs_pinocchio": errors.get(name)})
    return records


@interruptible(BENCH_NOTE)
def main(argv=None):
    start = time.perf_counter()
    opts = parse_args(argv)
    bc.fusion_emitters_off()                                             # before JAX starts
    records = run(opts)
    rows = [(r["robot"], r["case"], r["batch"], r["dtype"], r["per_sample_us"], r["ratio_to_pinocchio_aba"],
             r["gain_over_vmap"], r["rel_error_vs_pinocchio"]) for r in records]
    print(bc.md_table(["robot", "case", "batch", "dtype", "µs/sample", "× Pinocchio ABA 2t", "gain over vmap",
                       "rel. error vs Pinocchio"], rows))
    bc.finish("bench_free_floating", start, opts.out, {"records": records, "machine": bc.machine_info()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
