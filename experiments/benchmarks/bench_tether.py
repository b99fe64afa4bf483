"""Reeling tether (jaxsoa.systems.tether.fem / jaxsoa.systems.tether.reels) on CPU: cost per RK4 step vs
node count, and batch throughput.

Run from the repository root:  .venv/bin/python -m experiments.benchmarks.bench_tether [--elements 4,16,64,256]

The model is the dumbbell of `tether_dynamics` (two end masses, consistent mass, Kelvin–Voigt, both reels
rate-driven and paying out). One compiled call runs `--steps` RK4 steps in a `lax.scan`:
1. single tether: µs per step for each element count in `--elements` (nodes = elements + 1);
2. batch: `jit(vmap(...))` over `--batch` draws of (EA, α, reel rate), µs per tether-step and tether-steps/s.
Timing: `bench_common.measure` (median of `--repeats` rounds of ~`--target-s`); compile time reported apart.
Writes a JSON file (default experiments/benchmarks/results/tether_cpu.json) and prints a markdown table.
"""

import argparse
import dataclasses
import os
import platform
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from experiments._common import BENCH_NOTE, OneLineParser, comma_list, interruptible, positive_float, positive_int
from experiments._progress import progress
from experiments.benchmarks import bench_common as bc
from jaxsoa.integrators.steps import ode_rk4_step
from jaxsoa.systems.tether.fem import straight_state, tether_params
from jaxsoa.systems.tether.reels import tether_dynamics, tether_inputs

RESULTS = Path(__file__).parent / "results"


def parse_args(argv=None):
    p = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--elements", type=comma_list(positive_int), default=(4, 16, 64, 256),
                   help="element counts (nodes = elements + 1)")
    p.add_argument("--batch", type=comma_list(positive_int), default=(64,), help="batch sizes of the vmapped run")
    p.add_argument("--batch-elements", type=positive_int, default=16, help="element count of the batched run")
    p.add_argument("--steps", type=positive_int, default=100, help="RK4 steps per compiled call (lax.scan)")
    p.add_argument("--dtype", default="float64", choices=("float32", "float64"))
    p.add_argument("--repeats", type=positive_int, default=5, help="timed rounds per case (the median is reported)")
    p.add_argument("--target-s", type=positive_float, default=0.2, help="approximate duration of one timed round")
    p.add_argument("--out", type=Path, default=RESULTS / "tether_cpu.json", help="JSON output")
    return p.parse_args(sys.argv[1:] if argv is None else argv)


def setup(n, dtype):
    """A 10 m deployed segment (of 30 m) between 3 and 2 kg masses, paying out at 0.2 m/s at both ends."""
    params = tether_params(0.5, 1000.0, 1e-3, 30.0, n, dtype=dtype)
    state = straight_state(params, [0.0, 0.0, 0.0], [10.2, 0.0, 0.0], [5.0, 15.0], v_P=[0.0, -1.0, 0.0],
                           v_M=[0.0, 1.5, 0.0], s_dot=(-0.2, 0.2))
    return params, tether_inputs(end_mass=(3.0, 2.0), dtype=dtype), state


def rollout_fn(steps, dt):
    def run(params, inputs, state):
        f = lambda t, x: tether_dynamics(params, x, inputs)  # noqa: E731
        return jax.lax.scan(lambda x, _: (ode_rk4_step(f, 0.0, x, dt), None), state, None, length=steps)[0]
    return run


def batched_fn(steps, dt):
    run = rollout_fn(steps, dt)

    def one(params, inputs, state, EA, alpha, rate):
        params = dataclasses.replace(params, EA=EA, alpha=alpha)
        return run(params, inputs, dataclasses.replace(state, s_dot=jnp.stack([-rate, rate])))
    return jax.vmap(one, in_axes=(None, None, None, 0, 0, 0))


def timed(fn, args, opts):
    t0 = time.perf_counter()
    compiled = jax.jit(fn).lower(*args).compile()
    compile_s = time.perf_counter() - t0
    out = jax.block_until_ready(compiled(*args))
    assert bool(jnp.all(jnp.isfinite(out.r))), "non-finite state"
    return compile_s, bc.measure(bc._blocking, (compiled, *args), opts.repeats, opts.target_s)


def run(opts):
    dtype, dt = jnp.dtype(opts.dtype), 1e-4
    records = []
    with progress(total=len(opts.elements) + len(opts.batch), desc="bench_tether", unit="case") as bar:
        for n in opts.elements:
            compile_s, res = timed(rollout_fn(opts.steps, dt), setup(n, dtype), opts)
            records.append({"part": "single", "elements": n, "nodes": n + 1, "batch": 1, "dtype": opts.dtype,
                            "compile_s": compile_s, "us_per_step": res["call_s"] / opts.steps * 1e6, **res})
            bar.update()
        rng = np.random.default_rng(0)
        for batch in opts.batch:
            draws = (rng.uniform(800, 1200, batch), rng.uniform(0, 2e-3, batch), rng.uniform(0.1, 0.3, batch))
            args = (*setup(opts.batch_elements, dtype), *(jnp.asarray(x, dtype) for x in draws))
            compile_s, res = timed(batched_fn(opts.steps, dt), args, opts)
            per = res["call_s"] / opts.steps / batch
            records.append({"part": "batch", "elements": opts.batch_elements, "nodes": opts.batch_elements + 1,
                            "batch": batch, "dtype": opts.dtype, "compile_s": compile_s, "us_per_step": per * 1e6,
                            "tether_steps_per_s": 1 / per, **res})
            bar.update()
    return records


@interruptible(BENCH_NOTE)
def main(argv=None):
    opts = parse_args(argv)
    if opts.dtype == "float64":
        jax.config.update("jax_enable_x64", True)
    start = time.perf_counter()
    meta = {"command": [Path(sys.executable).name, "-m", "experiments.benchmarks.bench_tether", *sys.argv[1:]],
            "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(opts).items()},
            "platform": platform.platform(), "cpu_count": os.cpu_count(), "jax": jax.__version__,
            "devices": [str(d) for d in jax.devices()], "xla_flags": os.environ.get("XLA_FLAGS", ""),
            "loadavg_start": os.getloadavg()}
    records = run(opts)
    meta.update(loadavg_end=os.getloadavg(), total_s=time.perf_counter() - start)
    print(f"# bench_tether: {meta['platform']}, {meta['cpu_count']} CPUs, jax {meta['jax']}; load average "
          f"{meta['loadavg_start'][0]:.2f} -> {meta['loadavg_end'][0]:.2f}; {opts.steps} RK4 steps per call\n")
    print(bc.md_table(["part", "elements", "nodes", "batch", "dtype", "µs / tether-step", "tether-steps / s",
                       "compile s"],
                      [[r["part"], r["elements"], r["nodes"], r["batch"], r["dtype"], r["us_per_step"],
                        r.get("tether_steps_per_s", 1e6 / r["us_per_step"]), r["compile_s"]] for r in records]))
    opts.out.parent.mkdir(parents=True, exist_ok=True)
    bc.write_json(opts.out, {"meta": meta, "records": records})
    print(f"\nwrote {opts.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
