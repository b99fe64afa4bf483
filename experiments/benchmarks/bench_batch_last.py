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

import numpy as np

from experiments._common import BENCH_NOTE, OneLineParser, interruptible, positive_float, positive_int, progress
from experiments.benchmarks import bench_common as bc
from experiments.benchmarks.robot_models import ROBOT_NAMES, jaxsoa_model, pinocchio_model, robot_inputs

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


def _pinocchio_cases(robot, batch):
    import pinocchio as pin

    pm = pinocchio_model(robot)
    pool = pin.ModelPool(pm, 2)
    q, v, u = robot_inputs(robot, pm.nq, pm.nv, batch)
    out = np.zeros((pm.nv, batch), order="F")
    args = [np.asfortranarray(x.T) for x in (q, v, u)]
    def call(algo):
        fn = getattr(pin, f"{algo}InParallel")
        return lambda: fn(2, pool, *args, out)

    data, columns = pm.createData(), list(q)

    def crba_loop():                  # no batched CRBA in Pinocchio: its C++ crba per sample, from Python
        for q_i in columns:
            pin.crba(pm, data, q_i)

    return {**{f"pinocchio {algo} 2t": call(algo) for algo in ("rnea", "aba")}, "pinocchio crba loop": crba_loop}


def anchor_of(name: str) -> str:
    """The Pinocchio case a jaxsoa case is compared with."""
    algo = name.split()[1].split("+")[0]
    return "pinocchio crba loop" if algo == "crba" else f"pinocchio {algo} 2t"


def _gradient_cases(model, q, v, u):
    """value+grad of Σ w·sin(q̈) (ABA, its adjoint) and of Σ w·sin(τ) (RNEA: the hand-written reverse
    mode, and plain autodiff of the same passes) w.r.t. the three states, on the two paths."""
    import jax
    import jax.numpy as jnp

    import jaxsoa
    from jaxsoa.algorithms import batch_last_rnea, dynamics
    from jaxsoa.multibody import vmap_rule

    w = jnp.cos(jnp.arange(model.nv, dtype=q.dtype))

    def per_sample(fn):
        return lambda m, q, v, u: jax.vmap(lambda q, v, u: fn(m, q, v, u))(q, v, u)

    def per_sample_adjoint(m, q, v, u):                # the adjoint on the per-sample recursion (no vmap rule)
        return dynamics._aba_adjoint_per_sample(m, q, v, u, None)

    losses = {"aba+grad vmap": per_sample(per_sample_adjoint), "aba+grad batch-last": jaxsoa.aba,
              "aba+grad vmap rule": per_sample(jaxsoa.aba),
              "rnea+grad vmap": per_sample(jaxsoa.rnea), "rnea+grad batch-last": jaxsoa.rnea,
              "rnea+grad vmap rule": per_sample(jaxsoa.rnea),
              "rnea+grad batch-last autodiff": batch_last_rnea.rnea_autodiff}
    cases, rule_minimum = {}, vmap_rule.VMAP_MIN_BATCH
    for name, fn in losses.items():
        def loss(m, q, v, u, fn=fn):
            return jnp.sum(w * jnp.sin(fn(m, q, v, u)))
        vmap_rule.VMAP_MIN_BATCH = 2**62 if name.endswith(" vmap") else rule_minimum   # read at trace time
        compiled = jax.jit(jax.value_and_grad(loss, argnums=(1, 2, 3))).lower(model, q, v, u).compile()
        vmap_rule.VMAP_MIN_BATCH = rule_minimum
        cases[f"jaxsoa {name}"] = (lambda c=compiled: jax.block_until_ready(c(model, q, v, u)))
    return cases


def value_of(name: str) -> str:
    """The value case a gradient case is compared with ("jaxsoa aba+grad vmap" -> "jaxsoa aba vmap")."""
    return name.replace("+grad", "").replace(" autodiff", "")


def _chunk_cases(model, q, v, u, chunks):
    """The leading-batch RNEA and ABA compiled with `BATCH_CHUNK` set to each of `chunks` (0: one call
    for the whole batch), read at trace time: "jaxsoa aba batch-last chunk=512"."""
    import jax

    import jaxsoa
    from jaxsoa.multibody import batched

    default, cases = batched.BATCH_CHUNK, {}
    try:
        for chunk in chunks:
            batched.BATCH_CHUNK = chunk or q.shape[0]
            for algo in ("rnea", "aba"):
                fn = getattr(jaxsoa, algo)
                compiled = jax.jit(lambda q, v, u, fn=fn: fn(model, q, v, u)).lower(q, v, u).compile()
                cases[f"jaxsoa {algo} batch-last chunk={chunk}"] = (
                    lambda c=compiled: jax.block_until_ready(c(q, v, u)))
    finally:
        batched.BATCH_CHUNK = default
    return cases


def _jax_cases(robot, batch, dtype_name, devices, gradients=False, chunks=()):
    import jax
    import jax.numpy as jnp

    import jaxsoa
    from jaxsoa.multibody import vmap_rule

    rule_minimum = vmap_rule.VMAP_MIN_BATCH
    dtype = jnp.dtype(dtype_name)
    model = jaxsoa_model(robot, dtype)
    inputs = robot_inputs(robot, model.nq, model.nv, batch)                 # Pinocchio's layout = jaxsoa's
    q, v, u = (jnp.asarray(x, dtype) for x in inputs)
    cases, errors = {}, {}
    ref = bc.pin_reference(pinocchio_model(robot), *(x[0] for x in inputs))
    for algo in ("rnea", "aba", "crba"):
        fn = getattr(jaxsoa, algo)

        def leading(m, q, v, u, fn=fn, algo=algo):
            return fn(m, q) if algo == "crba" else fn(m, q, v, u)
        variants = {"vmap": jax.vmap(leading, in_axes=(None, 0, 0, 0)), "batch-last": leading,
                    "vmap rule": jax.vmap(lambda *x, f=leading: f(*x), in_axes=(None, 0, 0, 0))}
        mesh = jax.sharding.Mesh(np.asarray(jax.devices()[:devices]), ("batch",))
        spec, shared = jax.sharding.PartitionSpec("batch"), jax.sharding.PartitionSpec()
        for kind, f in variants.items():
            if devices > 1:
                f = jax.shard_map(f, mesh=mesh, in_specs=(shared, spec, spec, spec), out_specs=spec, check_vma=False)
            name = f"jaxsoa {algo} {kind}"
            vmap_rule.VMAP_MIN_BATCH = 2**62 if kind == "vmap" else rule_minimum   # read at trace time
            compiled = jax.jit(f).lower(model, q, v, u).compile()
            vmap_rule.VMAP_MIN_BATCH = rule_minimum
            out = compiled(model, q, v, u)
            first = np.asarray(out, np.float64)[0]           # host copy first: no eager op on a sharded array
            errors[name] = float(np.abs(first - ref[algo]).max() / np.abs(ref[algo]).max())
            cases[name] = (lambda c=compiled: jax.block_until_ready(c(model, q, v, u)))
    if gradients:
        cases.update(_gradient_cases(model, q, v, u))
    cases.update(_chunk_cases(model, q, v, u, chunks))
    return cases, errors


def _chain_cases(links, dtype_name, batch):
    import jax
    import jax.numpy as jnp

    import jaxsoa

    dtype = jnp.dtype(dtype_name)
    n = links
    model = jaxsoa.build_model(np.arange(-1, n - 1), [jaxsoa.JointType.REVOLUTE] * n,
                               np.tile([0.0, 0.0, 1.0], (n, 1)), np.broadcast_to(np.eye(3), (n, 3, 3)),
                               np.tile([0.1, 0.0, 0.0], (n, 1)), np.ones(n), np.tile([0.05, 0.0, 0.0], (n, 1)),
                               np.broadcast_to(0.01 * np.eye(3), (n, 3, 3)), dtype=dtype)
    q, v, u = (jnp.asarray(x, dtype) for x in bc.make_inputs(n, n, batch))
    cases = {}
    for algo in ("rnea", "aba"):
        fn = getattr(jaxsoa, algo)
        compiled = jax.jit(lambda m, q, v, u, fn=fn: fn(m, q, v, u)).lower(model, q, v, u).compile()
        cases[f"chain{n} {algo}"] = (lambda c=compiled: jax.block_until_ready(c(model, q, v, u)))
    return cases


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
