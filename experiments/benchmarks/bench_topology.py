"""Topology as traced data: dynamics over batches of random trees, recursive vs dense-operator form.

Run from the repository root:  .venv/bin/python -m experiments.benchmarks.bench_topology [--quick]

1. Sweep: `--batch` random trees of `--n` revolute links, given as configuration parameters (interfaces
   arrays) and turned into parent arrays *inside* the compiled call by `topology_from_configuration_traced`,
   then inverse dynamics and forward dynamics in one `jit(vmap(...))` call: recursive (`rnea`, `aba`) and
   dense (`inverse_dynamics_operator`, `forward_dynamics_operator`). Compared with a single-topology batch
   of the same size (one model repeated, passed the same way), traces counted, dense vs recursive checked.
2. Crossover: per-sample time of aba vs forward_dynamics_operator and rnea vs inverse_dynamics_operator
   (float32, random topologies, same pipeline) for `--crossover-n` links at `--crossover-batch`, and the
   traced topology builder alone (its cost is inside every other column).
Timing protocol: `bench_common.measure` (median of `--repeats` rounds). See experiments/benchmarks/README.md.
"""

import argparse
import os
import platform
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
    one_of,
    positive_float,
    positive_int,
)
from experiments._progress import progress
from experiments.benchmarks import bench_common as bc

RESULTS = Path(__file__).parent / "results"
FORMS = {"recursive": ("rnea", "aba"), "dense": ("inverse_dynamics_operator", "forward_dynamics_operator")}
PAIRS = (("aba", "forward_dynamics_operator"), ("rnea", "inverse_dynamics_operator"))
QUICK = dict(n=4, batch=64, dtypes=("float32",), crossover_n=(4, 8), crossover_batch=32, repeats=3,
             target_s=0.02, out=RESULTS / "bench_topology_quick.json")


def parse_args(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    p = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=positive_int, default=8, help="links per tree in the sweep")
    p.add_argument("--batch", type=positive_int, default=4096, help="random topologies in the sweep")
    p.add_argument("--dtypes", type=comma_list(one_of(("float32", "float64"))), default=("float32", "float64"),
                   help="comma-separated dtypes of the sweep")
    p.add_argument("--crossover-n", type=comma_list(positive_int), default=(4, 8, 16, 32, 64),
                   help="link counts of the crossover")
    p.add_argument("--crossover-batch", type=positive_int, default=256, help="batch of the crossover (float32)")
    p.add_argument("--n-models", type=positive_int, default=16,
                   help="distinct link data sets (build_model calls), tiled")
    p.add_argument("--check", type=positive_int, default=8, help="samples on which dense and recursive are compared")
    p.add_argument("--repeats", type=positive_int, default=5, help="timed rounds per case (the median is reported)")
    p.add_argument("--target-s", type=positive_float, default=0.2, help="approximate duration of one timed round")
    p.add_argument("--seed", type=nonnegative_int, default=0)
    p.add_argument("--quick", action="store_true", help="smoke test (< 1 min): n=4, batch 64, float32, "
                   "crossover n=4,8 at batch 32, 3 repeats; explicit options override these")
    p.add_argument("--out", type=Path, default=RESULTS / "bench_topology.json",
                   help="JSON output (default results/bench_topology.json, with --quick bench_topology_quick.json)")
    if "--quick" in argv:
        p.set_defaults(**QUICK)
    return p.parse_args(argv)


# ---------------------------------------------------------------------------------------------
# random trees: parent arrays -> configuration parameters, and link data through build_model

def random_parent(rng, n):
    return np.array([-1] + [rng.integers(0, k) for k in range(1, n)], np.int64)


def interfaces_of(parent, rng):
    """(n, n) int32 configuration parameters of a tree: link k (ID k + 1) lists its parent's ID (n + 1, the
    virtual joint, at the root) and its children's IDs, in random interface order, padded with 0."""
    n = len(parent)
    out = np.zeros((n, n), np.int32)
    for k in range(n):
        row = [n + 1 if parent[k] < 0 else parent[k] + 1] + [c + 1 for c in np.flatnonzero(parent == k)]
        out[k, :len(row)] = rng.permutation(row)
    return out


def _rotation(rng):
    Q, R = np.linalg.qr(rng.normal(size=(3, 3)))
    Q = Q * np.sign(np.diag(R))                                      # uniform (Haar) orthogonal
    return Q * np.array([np.linalg.det(Q), 1.0, 1.0])                # proper rotation


def random_model(rng, n, dtype, parent=None):
    """Revolute joints about random unit axes, random placements, valid inertias (as tests/trees.py);
    a random tree unless `parent` is given."""
    mass = rng.uniform(0.2, 3.0, n)
    s = rng.uniform(0.002, 0.05, (n, 3))
    inertia = []
    for k in range(n):
        R = _rotation(rng)
        J = R @ np.diag(mass[k] * (s[k].sum() - s[k])) @ R.T
        inertia.append(0.5 * (J + J.T))
    axis = rng.normal(size=(n, 3))
    parent = random_parent(rng, n) if parent is None else parent
    return jaxsoa.build_model(parent=parent, joint_types=[jaxsoa.JointType.REVOLUTE] * n,
                              joint_axis=axis / np.linalg.norm(axis, axis=1, keepdims=True),
                              placement_rotation=np.stack([_rotation(rng) for _ in range(n)]),
                              placement_translation=rng.normal(0.0, 0.3, (n, 3)), mass=mass,
                              com=rng.normal(0.0, 0.15, (n, 3)), inertia_com=np.stack(inertia), dtype=dtype)


def make_data(rng, n, batch, n_models, dtype):
    """(random-topology args, single-topology args): (model batched, interfaces, q, v, u), the same shapes."""
    models = [random_model(rng, n, dtype) for _ in range(n_models)]
    stacked = jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *models)
    tiled = jax.tree_util.tree_map(lambda x: x[np.arange(batch) % n_models], stacked)
    repeated = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (batch, *x.shape)), models[0])
    trees = [random_parent(rng, n) for _ in range(batch)]
    interfaces = np.stack([interfaces_of(p, rng) for p in trees])
    for p, itf in zip(trees[:4], interfaces[:4], strict=True):       # host builder agrees on a few samples
        assert (jaxsoa.topology_from_configuration(np.arange(1, n + 1), itf).parent == p).all()
    single = np.broadcast_to(interfaces_of(np.asarray(models[0].parent), rng), interfaces.shape)
    q, v, u = (jnp.asarray(x, dtype) for x in bc.make_inputs(n, n, batch, seed=int(rng.integers(2**31))))
    return (tiled, jnp.asarray(interfaces), q, v, u), (repeated, jnp.asarray(single), q, v, u)


def compiled_call(fn_names, check_valid=True):
    """(jit(vmap(f)), trace counter): f derives the parent array from the interfaces, then runs fn_names;
    it returns the traced `valid` flag too (its checks cost more than `parent` at large n), else the parent."""
    count = [0]

    def one(model, interfaces, q, v, u):
        count[0] += 1
        topo = jaxsoa.topology_from_configuration_traced(interfaces)
        m = model.with_parent(topo.parent)
        return topo.valid if check_valid else topo.parent, tuple(getattr(jaxsoa, name)(m, q, v, u) for name in fn_names)

    return jax.jit(jax.vmap(one)), count


def time_call(fn, args, opts):
    t0 = time.perf_counter()
    valid, out = jax.block_until_ready(fn(*args))
    first = time.perf_counter() - t0
    assert valid.dtype != bool or bool(np.all(valid)), "a topology came out invalid"
    res = bc.measure(bc._blocking, (fn, *args), opts.repeats, opts.target_s)
    batch = args[1].shape[0]
    return out, {"first_call_s": first, "compile_s": first - res["call_s"], "per_sample_us": res["call_s"] / batch
                 * 1e6, **res}


def sweep(opts, rng, bar):
    records = []
    for dtype in opts.dtypes:
        rand, single = make_data(rng, opts.n, opts.batch, opts.n_models, dtype)
        outs = {}
        for form, names in FORMS.items():
            fn, count = compiled_call(names)
            for topo, args in (("random", rand), ("single", single)):
                out, res = time_call(fn, args, opts)
                outs[(form, topo)] = out
                records.append({"part": "sweep", "form": form, "topologies": topo, "dtype": dtype, "n": opts.n,
                                "batch": opts.batch, **res})
                bar.update()
            records[-1]["traces"] = records[-2]["traces"] = count[0]     # both batches: one trace
        rec = {(r["form"], r["topologies"]): r for r in records if r["dtype"] == dtype}
        for form in FORMS:
            rec[(form, "random")]["x_single"] = rec[(form, "random")]["per_sample_us"] / \
                rec[(form, "single")]["per_sample_us"]
            rec[(form, "random")]["x_recursive"] = rec[(form, "random")]["per_sample_us"] / \
                rec[("recursive", "random")]["per_sample_us"]
        for topo in ("random", "single"):                                 # dense vs recursive, first samples
            for i, key in enumerate(("diff_inverse", "diff_forward")):
                rec_out, dense_out = (np.asarray(outs[(f, topo)][i][:opts.check], np.float64) for f in FORMS)
                rec[("dense", topo)][key] = float(np.abs(dense_out - rec_out).max())
    return records


def crossover(opts, rng, bar):
    records = []
    for n in opts.crossover_n:
        rand, _ = make_data(rng, n, opts.crossover_batch, min(opts.n_models, 4), "float32")
        for name in ("topology", *(name for pair in PAIRS for name in pair)):
            fn, count = compiled_call(() if name == "topology" else (name,), check_valid=False)
            _, res = time_call(fn, rand, opts)
            records.append({"part": "crossover", "algo": name, "n": n, "dtype": "float32",
                            "batch": opts.crossover_batch, "traces": count[0], **res})
            bar.update()
    return records


def crossover_n(records, recursive, dense):
    """Smallest n from which dense stays slower than recursive (None if dense is never slower)."""
    ps = {(r["algo"], r["n"]): r["per_sample_us"] for r in records}
    ns = sorted({r["n"] for r in records})
    slower = [ps[(dense, n)] > ps[(recursive, n)] for n in ns]
    for i, n in enumerate(ns):
        if all(slower[i:]):
            return n
    return None


def tables(records, summary):
    sw = [r for r in records if r["part"] == "sweep"]
    cx = [r for r in records if r["part"] == "crossover"]
    out = ["## 1. Random-topology sweep (topology built in the compiled call; one jit(vmap) per form)", "",
           bc.md_table(["form", "topologies", "dtype", "n", "batch", "µs/sample", "× single topology",
                        "× recursive", "first call s", "traces", "max |dense − rec| ID", "max |dense − rec| FD"],
                       [[r["form"], r["topologies"], r["dtype"], r["n"], r["batch"], r["per_sample_us"],
                         r.get("x_single"), r.get("x_recursive"), r["first_call_s"], r["traces"],
                         r.get("diff_inverse"), r.get("diff_forward")] for r in sw]), ""]
    rows = []
    ps = {(r["algo"], r["n"]): r for r in cx}
    for n in sorted({r["n"] for r in cx}):
        row = [n, ps[("topology", n)]["per_sample_us"]]
        for rec, dense in PAIRS:
            a, b = ps[(rec, n)], ps[(dense, n)]
            row += [a["per_sample_us"], b["per_sample_us"], b["per_sample_us"] / a["per_sample_us"],
                    a["compile_s"], b["compile_s"]]
        rows.append(row)
    heads = [f"{h} {k}" for k, _ in PAIRS for h in ("µs", "µs op", "× op/rec", "compile s", "compile s op")]
    out += ["## 2. Dense vs recursive crossover (float32, random topologies; 'op' = the *_dynamics_operator; "
            "every column includes the in-call topology, timed alone in 'topology only')", "",
            bc.md_table(["n", "µs topology only", *heads], rows), "",
            *(f"- crossover {k}: " + (f"the dense form is slower from n = {summary[k]} on" if summary[k]
                                     else "the dense form is not slower at the largest n") for k, _ in PAIRS)]
    return "\n".join(out)


@interruptible(BENCH_NOTE)
def main(argv=None):
    opts = parse_args(argv)
    jax.config.update("jax_enable_x64", True)          # float64 models; float32 models stay float32
    start, rng = time.perf_counter(), np.random.default_rng(opts.seed)
    meta = {"command": [Path(sys.executable).name, "-m", "experiments.benchmarks.bench_topology", *sys.argv[1:]],
            "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(opts).items()},
            "platform": platform.platform(), "cpu_count": os.cpu_count(), "jax": jax.__version__,
            "devices": [str(d) for d in jax.devices()], "xla_flags": os.environ.get("XLA_FLAGS", ""),
            "loadavg_start": os.getloadavg()}
    total = 4 * len(opts.dtypes) + 5 * len(opts.crossover_n)
    with progress(total=total, desc="bench_topology", unit="case") as bar:
        records = sweep(opts, rng, bar) + crossover(opts, rng, bar)
    cx = [r for r in records if r["part"] == "crossover"]
    summary = {rec: crossover_n(cx, rec, dense) for rec, dense in PAIRS}
    meta.update(loadavg_end=os.getloadavg(), total_s=time.perf_counter() - start)
    print(f"# bench_topology: {meta['platform']}, {meta['cpu_count']} CPUs, jax {meta['jax']}, "
          f"{meta['devices'][0]}; load average {meta['loadavg_start'][0]:.2f} -> {meta['loadavg_end'][0]:.2f}; "
          f"total {meta['total_s']:.0f} s\n")
    print(tables(records, summary))
    opts.out.parent.mkdir(parents=True, exist_ok=True)
    bc.write_json(opts.out, {"meta": meta, "crossover": summary, "records": records})
    print(f"\nwrote {opts.out}")


if __name__ == "__main__":
    sys.exit(main())
