"""The float32 error of forward-dynamics gradients: `jaxsoa.aba`'s adjoint and plain autodiff through the
recursions (`aba_autodiff`), both in float32, against the adjoint in float64 (which equals float64 autodiff to
1e-9, tests/algorithms/test_adjoint.py), for one batched call and for RK4 rollouts of growing horizon.

    .venv/bin/python -m experiments.benchmarks.bench_float32_gradients [--quick] [--horizons 10,50,100]

Programs (`adjoint_cases.call_cases` and `adjoint_cases.rollout_cases`, the same inputs in both dtypes): one call
`jax.vmap` over --batch samples, gradient of Σ w ⊙ q̈ w.r.t. (q, v, τ); rollouts of --batch samples from the
neutral pose, random torques held per step, loss Σ |q_k|² + |v_k|², gradient w.r.t. (q0, v0, the torques).
Error per sample: max |g₃₂ − g₆₄| / max |g₆₄| over every gradient entry of that sample; the table gives its
median, 90th percentile and maximum over the batch. Writes results/bench_float32_gradients.json (or --out).
"""

import argparse
import sys
from pathlib import Path

from experiments._common import OneLineParser, positive_int
from experiments._progress import progress
from experiments.benchmarks import bench_common as bc

RESULTS = Path(__file__).parent / "results"
SYSTEMS = ("panda", "space_arm_free")
COLUMNS = [("system", "system"), ("program", "program"), ("steps", "steps"), ("float32 path", "path"),
           ("median error", "median"), ("90 % error", "p90"), ("max error", "max")]


def _names(text, known, what):
    names = [x for x in text.split(",") if x]
    unknown = [x for x in names if x not in known]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown {what} {unknown}; choose from {', '.join(known)}")
    return names


def _horizons(text):
    try:
        steps = [int(x) for x in text.split(",") if x]
    except ValueError:
        steps = []
    if not steps or min(steps) < 1:
        raise argparse.ArgumentTypeError(f"expected comma-separated step counts ≥ 1, got {text!r}")
    return steps


def parse_args(argv=None):
    p = OneLineParser(prog="python -m experiments.benchmarks.bench_float32_gradients", description=__doc__,
                      formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--systems", type=lambda t: _names(t, SYSTEMS, "system(s)"), default=list(SYSTEMS),
                   help=f"comma-separated systems of {', '.join(SYSTEMS)} (default both)")
    p.add_argument("--horizons", type=_horizons, default=[10, 30, 50, 70, 100],
                   help="comma-separated rollout lengths in steps (default 10,30,50,70,100)")
    p.add_argument("--batch", type=positive_int, default=64, help="samples per program (default 64)")
    p.add_argument("--quick", action="store_true", help="smoke test: the Panda, 8 samples, horizons 5 and 20")
    p.add_argument("--out", type=Path, default=RESULTS / "bench_float32_gradients.json", help="JSON output")
    opts = p.parse_args(argv)
    if opts.quick:
        opts.systems, opts.batch, opts.horizons = ["panda"], 8, [5, 20]
    return opts


def per_sample_errors(grads, reference, batch):
    """(batch,) max over every gradient leaf of max |g − g_ref| / max |g_ref|, per sample (leaves batch-first)."""
    import numpy as np

    def leaf_error(g, ref):
        g, ref = (np.asarray(x, np.float64).reshape(batch, -1) for x in (g, ref))
        return np.abs(g - ref).max(1) / np.maximum(np.abs(ref).max(1), np.finfo(np.float64).tiny)
    return np.max([leaf_error(g, r) for g, r in zip(grads, reference, strict=True)], axis=0)


def run(opts):
    import jax
    import jax.numpy as jnp
    import numpy as np

    jax.config.update("jax_enable_x64", True)
    from experiments.benchmarks import adjoint_cases as ba

    records = []
    programs = [(s, h) for s in opts.systems for h in (None, *opts.horizons)]
    for system, steps in progress(programs, desc="bench_float32_gradients", unit="program"):
        grads = {}
        for dtype in (jnp.float64, jnp.float32):
            model = ba.systems(dtype)[system][0]
            rng = np.random.default_rng(0)
            cases = (ba.call_cases(model, opts.batch, dtype, "state", rng) if steps is None
                     else ba.rollout_cases(model, opts.batch, steps, dtype, False, rng))
            for path in ("adjoint", "autodiff") if dtype == jnp.float32 else ("adjoint",):
                fn, args = cases[path]
                grads[path, dtype] = jax.jit(fn)(*args)[1]
        for path in ("adjoint", "autodiff"):
            error = per_sample_errors(grads[path, jnp.float32], grads["adjoint", jnp.float64], opts.batch)
            records.append({"system": system, "program": "one call" if steps is None else "rollout",
                            "steps": steps, "path": path, "batch": opts.batch, "median": float(np.median(error)),
                            "p90": float(np.quantile(error, 0.9)), "max": float(error.max())})
    return records


main = bc.benchmark_main("bench_float32_gradients", lambda argv: parse_args(argv), lambda opts: run(opts), COLUMNS)


if __name__ == "__main__":
    sys.exit(main())
