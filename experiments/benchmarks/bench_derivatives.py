"""jaxsoa's Pinocchio-equivalent functions against Pinocchio 4.1's C++, per sample, in one process.

    .venv/bin/python -m experiments.benchmarks.bench_derivatives [--quick]

Functions (jaxsoa / Pinocchio): `rnea_derivatives` / `computeRNEADerivatives`, `aba_derivatives` /
`computeABADerivatives` (jaxsoa: `jax.jacrev` through `integrate`), `minverse` / `computeMinverse`,
`coriolis_matrix` / `computeCoriolisMatrix`, `centroidal_momentum_matrix` / `computeCentroidalMap`, on the
robots of `robot_models` (the same model and the same B samples in both engines; v, and a or τ, standard
normal).

* jaxsoa: `jax.jit` of the leading-batch call (`fn(model, q, v, u)` on (B, nq) / (B, nv) arrays), compiled
  before timing, each call ended by `block_until_ready`.
* Pinocchio: its C++ function called once per sample from a Python loop over the B samples (as
  `bench_batch_last`'s CRBA loop; Pinocchio has no batched version of these), one thread, float64. The time
  includes Python's per-call overhead (the loop, the binding's argument conversion, the returned arrays);
  an empty Python loop over the same samples is timed in the same rounds and reported
  (`(empty Python loop)` row, `empty_loop_us` in the JSON) so that it can be subtracted.

Rounds are interleaved (every case once per round, order reversed every other round, `bench_batch_last.interleaved`);
the table gives the median per-sample time in µs and the median of the per-round ratios jaxsoa ÷ Pinocchio.
Correctness, once per robot: the float64 jaxsoa results on the first samples against Pinocchio's, the
largest relative difference max |x − ref| / max |ref| over each function's results (Pinocchio's upper-triangular
M and M⁻¹ symmetrised; its centroidal rows [linear; angular] reordered to jaxsoa's [angular; linear]; the URDF
robots' coordinates are in the same order in both, `robot_models`). XLA's CPU fusion emitters are off, as in
bench_batch_last.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from experiments._common import BENCH_NOTE, OneLineParser, interruptible, positive_float, positive_int
from experiments._progress import progress
from experiments.benchmarks import bench_common as bc
from experiments.benchmarks.bench_batch_last import interleaved, robot_list
from experiments.benchmarks.robot_models import ROBOT_NAMES, jaxsoa_model, pinocchio_model, robot_inputs

RESULTS = Path(__file__).parent / "results"
FUNCTIONS = {                                  # jaxsoa name: (Pinocchio name, number of state arguments)
    "rnea_derivatives": ("computeRNEADerivatives", 3),
    "aba_derivatives": ("computeABADerivatives", 3),
    "minverse": ("computeMinverse", 1),
    "coriolis_matrix": ("computeCoriolisMatrix", 2),
    "centroidal_momentum_matrix": ("computeCentroidalMap", 1),
}
EMPTY_LOOP = "(empty Python loop)"
CHECK_SAMPLES = 4                              # samples of the correctness check
CENTROIDAL_ROWS = [3, 4, 5, 0, 1, 2]           # Pinocchio's [linear; angular] -> jaxsoa's [angular; linear]


def parse_args(argv=None):
    p = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--robots", type=robot_list, default=["panda", "solo12"],
                   help=f"comma-separated robots of {', '.join(sorted(ROBOT_NAMES))} (default panda,solo12)")
    p.add_argument("--batch", type=positive_int, default=1024, help="samples per call (default 1024)")
    p.add_argument("--dtype", choices=("float64", "float32"), default="float64",
                   help="jaxsoa's dtype (default float64; Pinocchio and the correctness check are float64)")
    p.add_argument("--rounds", type=positive_int, default=7, help="interleaved timed rounds (default 7)")
    p.add_argument("--target-s", type=positive_float, default=0.05,
                   help="approximate duration of one case in a round (default 0.05)")
    p.add_argument("--quick", action="store_true", help="smoke test: panda, batch 16, 1 round")
    p.add_argument("--out", type=Path, default=None, help="JSON output (default results/bench_derivatives.json)")
    opts = p.parse_args(argv)
    if opts.quick:
        opts.robots, opts.batch, opts.rounds, opts.target_s = ["panda"], 16, 1, 0.002
    return opts


def _parts(x):
    """A result (an array or a NamedTuple of arrays) as a list of float64 arrays."""
    return [np.asarray(p, np.float64) for p in (x if isinstance(x, tuple) else (x,))]


def _symmetric(M):
    return np.triu(M) + np.triu(M, 1).T


def _pinocchio_reference(pm, name, args):
    """Pinocchio's result of jaxsoa's function `name` at one sample, in jaxsoa's layout (float64 arrays)."""
    import pinocchio as pin

    data = pm.createData()                      # kept alive: the returned arrays may be views of it
    out = getattr(pin, FUNCTIONS[name][0])(pm, data, *args)
    if name in ("rnea_derivatives", "aba_derivatives"):          # (d/dq, d/dv, M or M⁻¹: upper triangle)
        d_q, d_v, last = (np.array(x) for x in out)
        return [d_q, d_v, _symmetric(last)]
    if name == "minverse":
        return [_symmetric(np.array(out))]
    if name == "centroidal_momentum_matrix":
        return [np.array(out)[CENTROIDAL_ROWS]]
    return [np.array(out)]


def rel_difference(ours, reference) -> float:
    """max over parts of max |x − ref| / max |ref|."""
    return max(float(np.abs(x - r).max() / np.abs(r).max()) for x, r in zip(ours, reference, strict=True))


def _pinocchio_cases(robot, inputs):
    """{case: call}: each Pinocchio function over the B samples from a Python loop, and the empty loop."""
    import pinocchio as pin

    pm = pinocchio_model(robot)
    data = pm.createData()
    qs, vs, us = (list(x) for x in inputs)                     # rows: contiguous (n,) float64 arrays

    def loop(fn, arity):
        if arity == 1:
            def run():
                for q_i in qs:
                    fn(pm, data, q_i)
        elif arity == 2:
            def run():
                for q_i, v_i in zip(qs, vs, strict=True):
                    fn(pm, data, q_i, v_i)
        else:
            def run():
                for q_i, v_i, u_i in zip(qs, vs, us, strict=True):
                    fn(pm, data, q_i, v_i, u_i)
        return run

    def empty():
        for q_i, v_i, u_i in zip(qs, vs, us, strict=True):      # noqa: B007 (the loop's own cost)
            pass

    cases = {f"pinocchio {name}": loop(getattr(pin, pin_name), arity)
             for name, (pin_name, arity) in FUNCTIONS.items()}
    return {**cases, EMPTY_LOOP: empty}


def _compile(model, name, q, v, u):
    """`jax.jit` of jaxsoa's `name` on the leading batch, compiled: (compiled, seconds to compile)."""
    import jax

    import jaxsoa

    fn, arity = getattr(jaxsoa, name), FUNCTIONS[name][1]

    def leading(m, q, v, u):
        return fn(m, *(q, v, u)[:arity])

    t0 = time.perf_counter()
    compiled = jax.jit(leading).lower(model, q, v, u).compile()
    return compiled, time.perf_counter() - t0


def _jax_cases(robot, inputs, dtype_name):
    """{case: call} of the jaxsoa functions in `dtype_name`, their compile times, and their float64 results on
    the first CHECK_SAMPLES samples (from the timed programs when float64, else from float64 programs)."""
    import jax
    import jax.numpy as jnp

    dtype = jnp.dtype(dtype_name)
    model = jaxsoa_model(robot, dtype)
    q, v, u = (jnp.asarray(x, dtype) for x in inputs)
    cases, compile_s, check = {}, {}, {}
    k = min(CHECK_SAMPLES, q.shape[0])
    if dtype_name != "float64":
        model64 = jaxsoa_model(robot, jnp.float64)
        q64, v64, u64 = (jnp.asarray(x[:k], jnp.float64) for x in inputs)
    for name in FUNCTIONS:
        compiled, compile_s[name] = _compile(model, name, q, v, u)
        cases[f"jaxsoa {name}"] = lambda c=compiled: jax.block_until_ready(c(model, q, v, u))
        if dtype_name == "float64":
            out = compiled(model, q, v, u)
        else:
            out = _compile(model64, name, q64, v64, u64)[0](model64, q64, v64, u64)
        check[name] = [p[:k] for p in _parts(out)]
    return cases, compile_s, check


def run(opts):
    """(records, {robot: empty-loop µs per sample}): one record per (robot, function)."""
    import jax

    jax.config.update("jax_enable_x64", True)                  # the float64 check; float32 arrays stay float32
    records, empty_loop = [], {}
    for robot in progress(opts.robots, desc="derivatives bench"):
        pm = pinocchio_model(robot)
        inputs = robot_inputs(robot, pm.nq, pm.nv, opts.batch)
        jax_cases, compile_s, check = _jax_cases(robot, inputs, opts.dtype)
        differences = {}
        for name, ours in check.items():
            arity = FUNCTIONS[name][1]
            per_sample = [rel_difference([p[i] for p in ours],
                                         _pinocchio_reference(pm, name, [x[i] for x in inputs[:arity]]))
                          for i in range(ours[0].shape[0])]
            differences[name] = max(per_sample)
        times = interleaved({**_pinocchio_cases(robot, inputs), **jax_cases}, opts.rounds, opts.target_s)
        empty_loop[robot] = statistics.median(times[EMPTY_LOOP]) / opts.batch * 1e6
        for name in FUNCTIONS:
            ours, theirs = times[f"jaxsoa {name}"], times[f"pinocchio {name}"]
            records.append({"robot": robot, "function": name, "pinocchio_function": FUNCTIONS[name][0],
                            "nq": pm.nq, "nv": pm.nv, "batch": opts.batch, "dtype": opts.dtype,
                            "rounds": opts.rounds, "compile_s": compile_s[name],
                            "jaxsoa_us": statistics.median(ours) / opts.batch * 1e6,
                            "pinocchio_us": statistics.median(theirs) / opts.batch * 1e6,
                            "empty_loop_us": empty_loop[robot],
                            "ratio_to_pinocchio": statistics.median(a / b for a, b in zip(ours, theirs, strict=True)),
                            "max_rel_difference": differences[name]})
    return records, empty_loop


@interruptible(BENCH_NOTE)
def main(argv=None):
    start = time.perf_counter()
    opts = parse_args(argv)
    bc.fusion_emitters_off()                                             # before JAX starts
    records, empty_loop = run(opts)
    rows = []
    for robot in opts.robots:
        rows += [(r["robot"], r["function"], r["jaxsoa_us"], r["pinocchio_us"], r["ratio_to_pinocchio"],
                  r["max_rel_difference"]) for r in records if r["robot"] == robot]
        rows.append((robot, EMPTY_LOOP, None, empty_loop[robot], None, None))
    print(f"batch {opts.batch}, jaxsoa {opts.dtype}, Pinocchio float64 (a Python loop of C++ calls; "
          f"its µs include the empty loop's), {opts.rounds} rounds\n")
    print(bc.md_table(["robot", "function", "jaxsoa µs/sample", "Pinocchio µs/sample", "× Pinocchio",
                       "max rel. difference"], rows))
    out = opts.out or RESULTS / "bench_derivatives.json"
    bc.finish("bench_derivatives", start, out, {"records": records, "empty_loop_us": empty_loop,
                                                "machine": bc.machine_info()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
