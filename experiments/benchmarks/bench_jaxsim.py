"""jaxsoa against jaxsim (ami-iit/jaxsim) in the same run: batched forward dynamics (ABA) and inverse dynamics
(RNEA) on the Franka Panda (fixed base), float32 and float64, with Pinocchio as the accuracy reference.

Run from the repository root:  .venv/bin/python -m experiments.benchmarks.bench_jaxsim [--quick]
(jaxsim is an optional extra: pip install -e '.[bench]'; without it the JSON records why nothing ran.)

Both engines run in the same worker process, one per dtype: jaxsim switches `jax_enable_x64` on when it is
imported unless JAX_ENABLE_X64=0, so the worker gets JAX_ENABLE_X64=0 (float32) or 1 (float64) before JAX
starts. Timed: `jax.jit(jax.vmap(f))` with the model as a jit argument and f from (q, v, u) batches to the joint
output, where f is `jaxsoa.aba` / `jaxsoa.rnea` on one side and, on the other, `JaxSimModelData.build`
(inertial-fixed velocity representation) followed by `js.model.forward_dynamics_aba` /
`js.model.inverse_dynamics` (XLA drops the forward kinematics that `build` computes and the dynamics do not use).
Compile time (`lower().compile()`) is reported apart. The two engines' timed rounds alternate (`--repeats` rounds
of ~`--target-s` each, `bench_common.measure`), so that a shared machine's drifting load weighs on both alike; the
table gives the median round per sample and the ratio of the medians and of the fastest rounds. Accuracy: the
largest absolute difference on the first sample from Pinocchio's float64 aba / rnea, and between the engines.

jaxsim's URDF import needs Gazebo's `gz sdf` converter, which is not installable from PyPI, so the URDF is
converted here into a `rod.Model` in the URDF frame convention: massless links on fixed joints (panda_link8,
panda_hand_tcp) are folded into their parent's joint placements, as sdformat does, and the root is welded to
`world` (jaxsim's fixed base). Mimic tags are ignored on both sides (the finger joints are independent), as in
Pinocchio's default URDF import.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

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
from experiments.benchmarks import bench_common as bc

ROOT = Path(__file__).resolve().parents[2]
RESULTS = Path(__file__).parent / "results"
ALGOS = ("aba", "rnea")
JAXSIM_FN = {"aba": "forward_dynamics_aba", "rnea": "inverse_dynamics"}
QUICK = dict(batches=(8, 64), repeats=3, target_s=0.01)
Z_AXIS = (0.0, 0.0, 1.0)


def _ints(text):
    return tuple(int(x) for x in text.split(",") if x)


def parse_args(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    p = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batches", type=_ints, default=(1024, 8192), help="comma-separated batch sizes")
    p.add_argument("--dtypes", type=comma_list(one_of(("float32", "float64"))), default="float32,float64",
                   help="comma-separated dtypes (one worker process each)")
    p.add_argument("--repeats", type=positive_int, default=7, help="timed rounds per case (the median is reported)")
    p.add_argument("--target-s", type=positive_float, default=0.2, help="approximate duration of one timed round")
    p.add_argument("--quick", action="store_true", help="smoke test: batches 8,64, 3 short rounds")
    p.add_argument("--out", type=Path, default=None,
                   help="JSON output (default results/bench_jaxsim.json, with --quick results/bench_jaxsim_quick.json)")
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    if "--quick" in argv:
        p.set_defaults(**QUICK)
    args = p.parse_args(argv)
    args.out = args.out or RESULTS / ("bench_jaxsim_quick.json" if args.quick else "bench_jaxsim.json")
    return args


def _origin(element):
    """[x, y, z, roll, pitch, yaw] of a URDF element's <origin> (SDF's pose uses the same rpy convention)."""
    origin = element.find("origin")
    return [float(x) for k in ("xyz", "rpy") for x in (origin.get(k, "0 0 0") if origin is not None
                                                         else "0 0 0").split()]


def rod_model(path):
    """A fixed-base `rod.Model` of a URDF in the URDF frame convention (no Gazebo needed): links of zero mass on
    fixed joints are folded into their parent (jaxsim drops massless links), the root is welded to `world`."""
    import rod

    root = ET.parse(path).getroot()
    inertials = {}
    for link in root.findall("link"):
        inertial = link.find("inertial")
        if inertial is not None and float(inertial.find("mass").get("value")) > 0:
            inertia = inertial.find("inertia")
            inertials[link.get("name")] = rod.Inertial(
                mass=float(inertial.find("mass").get("value")),
                pose=rod.Pose(relative_to=link.get("name"), pose=_origin(inertial)),
                inertia=rod.Inertia(**{k: float(inertia.get(k)) for k in ("ixx", "iyy", "izz", "ixy", "ixz", "iyz")}))
    joint_of = {joint.find("child").get("link"): joint for joint in root.findall("joint")}
    joints = []
    for child, joint in joint_of.items():
        if child not in inertials:
            continue
        parent, X_parent_joint = joint.find("parent").get("link"), rod.Pose(pose=_origin(joint)).transform()
        while parent not in inertials:             # X_ancestor_joint = X_ancestor_massless · X_massless_joint
            if joint_of[parent].get("type") != "fixed":
                raise ValueError(f"URDF link '{parent}': massless link on a moving joint (jaxsim drops it)")
            up = joint_of[parent]
            X_parent_joint = rod.Pose(pose=_origin(up)).transform() @ X_parent_joint
            parent = up.find("parent").get("link")
        axis, limit = joint.find("axis"), joint.find("limit")
        kind = {"continuous": "revolute"}.get(joint.get("type"), joint.get("type"))
        joints.append(rod.Joint(
            name=joint.get("name"), type=kind, parent=parent, child=child,
            pose=rod.Pose.from_transform(relative_to=parent, transform=X_parent_joint),
            axis=rod.Axis(xyz=rod.Xyz([float(x) for x in axis.get("xyz").split()] if axis is not None else Z_AXIS),
                          limit=rod.Limit(lower=float(limit.get("lower")), upper=float(limit.get("upper")))
                          if limit is not None and kind in ("revolute", "prismatic") else None)))
    base = next(name for name in inertials if name not in joint_of)
    joints.insert(0, rod.Joint(name=f"world_to_{base}", type="fixed", parent="world", child=base,
                               pose=rod.Pose(relative_to="world", pose=[0.0] * 6), axis=rod.Axis(xyz=rod.Xyz(Z_AXIS))))
    frame_of = {joint.child: joint.name for joint in joints}
    links = [rod.Link(name=name, inertial=inertial,
                      pose=rod.Pose(relative_to="world" if name == base else frame_of[name], pose=[0.0] * 6))
             for name, inertial in inertials.items()]
    return rod.Model(name=root.get("name"), canonical_link=base, link=links, joint=joints)


def jaxsim_batched(algo):
    """jit-able (model, q, v, u) -> (batch, dofs) of jaxsim's forward or inverse dynamics, u = τ or q̈."""
    import jax
    import jaxsim.api as js

    def single(model, q, v, u):
        data = js.data.JaxSimModelData.build(model, joint_positions=q, joint_velocities=v,
                                             velocity_representation=js.common.VelRepr.Inertial)
        key = "joint_forces" if algo == "aba" else "joint_accelerations"
        return getattr(js.model, JAXSIM_FN[algo])(model, data, **{key: u})[1]

    return lambda model, q, v, u: jax.vmap(single, in_axes=(None, 0, 0, 0))(model, q, v, u)


def jaxsoa_batched(algo):
    """jit-able (model, q, v, u) -> (batch, nv) of jaxsoa's aba or rnea."""
    import jax

    import jaxsoa

    fn = getattr(jaxsoa, algo)
    return lambda model, q, v, u: jax.vmap(fn, in_axes=(None, 0, 0, 0))(model, q, v, u)


def run_worker(dtype_name, args):
    """Records of both engines for one dtype (JAX_ENABLE_X64 set by the parent); yields them, then {"meta": ...}."""
    import jax
    import jax.numpy as jnp

    import jaxsoa

    try:
        import jaxsim
        import jaxsim.api as js
    except ImportError as exc:
        why = f"jaxsim is not installed ({exc}); pip install -e '.[bench]'"
        yield {"meta": {"dtype": dtype_name, "unavailable": why}}
        return
    dtype, path = jnp.dtype(dtype_name), bc.panda_urdf()
    if jnp.zeros(()).dtype != jnp.dtype(dtype_name):
        raise RuntimeError(f"worker for {dtype_name} runs with x64={jax.config.jax_enable_x64}")
    pm = bc.pin_model("panda")
    names = [pm.names[i] for i in range(1, pm.njoints)]
    models = {"jaxsoa": jaxsoa.load_urdf(str(path), dtype=dtype),
              "jaxsim": js.model.JaxSimModel.build_from_model_description(rod_model(path))}
    perm = np.array([names.index(name) for name in models["jaxsim"].joint_names()])   # jaxsim order -> pin order
    for batch in args.batches:
        q, v, u = bc.make_inputs(pm.nq, pm.nv, batch)
        ref = bc.pin_reference(pm, q[0], v[0], u[0])
        for algo in ALGOS:
            recs, outs, timed = {}, {}, {}
            for impl, batched, cols in (("jaxsoa", jaxsoa_batched, slice(None)), ("jaxsim", jaxsim_batched, perm)):
                args_ = (models[impl], *(jnp.asarray(x[:, cols], dtype) for x in (q, v, u)))
                t0 = time.perf_counter()
                compiled = jax.jit(batched(algo)).lower(*args_).compile()
                compile_s = time.perf_counter() - t0
                out = compiled(*args_)
                outs[impl] = np.asarray(out[0], np.float64)[np.argsort(perm) if impl == "jaxsim" else slice(None)]
                timed[impl] = (_blocking, (compiled, *args_))
                recs[impl] = {"impl": impl, "algo": algo, "batch": batch, "dtype": dtype_name,
                              "out_dtype": str(out.dtype), "compile_s": compile_s,
                              "err_pin": float(np.abs(outs[impl] - ref[algo]).max())}
            for impl, res in measure_interleaved(timed, args.repeats, args.target_s).items():
                yield {**recs[impl], "per_sample_us": res["call_s"] / batch * 1e6,
                       "per_sample_us_min": res["call_s_min"] / batch * 1e6, **res}
            yield {"pair": algo, "batch": batch, "dtype": dtype_name,
                   "err_jaxsoa_jaxsim": float(np.abs(outs["jaxsoa"] - outs["jaxsim"]).max())}
    yield {"meta": {"jax": jax.__version__, "jaxsim": jaxsim.__version__, "devices": [str(d) for d in jax.devices()],
                    "xla_flags": os.environ.get("XLA_FLAGS", ""), "x64": bool(jax.config.jax_enable_x64),
                    "dtype": dtype_name, "jaxsim_joints": list(models["jaxsim"].joint_names()),
                    "jaxsim_floating_base": bool(models["jaxsim"].floating_base()), "loadavg_end": os.getloadavg()}}


def measure_interleaved(cases, repeats, target_s):
    """`bc.measure` of each {name: (fn, args)}, one timed round per case in turn (A B A B ...), so that the load
    of a shared machine, which drifts, weighs on every case alike; per case the median and minimum round."""
    rounds = {name: [] for name in cases}
    for _ in range(repeats):
        for name, (fn, args) in cases.items():
            rounds[name].append(bc.measure(fn, args, 1, target_s))
    return {name: {"call_s": statistics.median(r["call_s"] for r in res), "call_s_min": min(r["call_s"] for r in res),
                   "repeats": repeats, "number": [r["number"] for r in res], "slow": False}
            for name, res in rounds.items()}


def _blocking(fn, *args):
    import jax

    return jax.block_until_ready(fn(*args))


def spawn_worker(args, dtype):
    """One worker process per dtype (x64 is process-wide and jaxsim sets it on import); 'RECORD {json}' lines."""
    env = {**os.environ, "JAX_ENABLE_X64": "1" if dtype == "float64" else "0"}
    env.setdefault("XLA_FLAGS", "--xla_cpu_use_fusion_emitters=false")        # as the suite (docs/benchmarks.md)
    cmd = [sys.executable, "-m", "experiments.benchmarks.bench_jaxsim", "--worker", dtype, "--batches",
           ",".join(map(str, args.batches)), "--repeats", str(args.repeats), "--target-s", str(args.target_s)]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode:
        return [], {"dtype": dtype, "failed": f"rc={proc.returncode}: {proc.stderr[-3000:]}"}
    recs = [json.loads(line[len("RECORD "):]) for line in proc.stdout.splitlines() if line.startswith("RECORD ")]
    return [r for r in recs if "meta" not in r], next(r["meta"] for r in recs if "meta" in r)


def rows_of(records):
    """[algo, dtype, batch, µs jaxsoa, µs jaxsim, jaxsoa/jaxsim of the medians and of the minima, compile s ×2,
    max errors ×3] per case."""
    by = {(r["impl"], r["algo"], r["dtype"], r["batch"]): r for r in records if "impl" in r}
    pair = {(r["pair"], r["dtype"], r["batch"]): r["err_jaxsoa_jaxsim"] for r in records if "pair" in r}
    rows = []
    for (algo, dtype, batch), err in pair.items():
        a, b = by[("jaxsoa", algo, dtype, batch)], by[("jaxsim", algo, dtype, batch)]
        ratio, ratio_min = a["call_s"] / b["call_s"], a["call_s_min"] / b["call_s_min"]
        rows.append([algo, dtype, batch, a["per_sample_us"], b["per_sample_us"], ratio, ratio_min, a["compile_s"],
                     b["compile_s"], a["err_pin"], b["err_pin"], err])
    return rows


HEADERS = ["algo", "dtype", "batch", "µs/sample jaxsoa", "µs/sample jaxsim", "jaxsoa / jaxsim",
           "jaxsoa / jaxsim (fastest rounds)", "compile s jaxsoa", "compile s jaxsim",
           "max err jaxsoa vs pin", "max err jaxsim vs pin", "max |jaxsoa − jaxsim|"]


@interruptible(BENCH_NOTE)
def main(argv=None):
    args = parse_args(argv)
    if args.worker:
        for rec in run_worker(args.worker, args):
            print("RECORD " + json.dumps(rec), flush=True)
        return
    start = time.perf_counter()
    meta = {"command": [Path(sys.executable).name, "-m", "experiments.benchmarks.bench_jaxsim", *sys.argv[1:]],
            "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}, "robot": "panda",
            **bc.machine_info(), "workers": []}
    records = []
    for dtype in (d for d in args.dtypes.split(",") if d):
        recs, worker_meta = spawn_worker(args, dtype)
        records += recs
        meta["workers"].append(worker_meta)
    meta.update(loadavg_end=os.getloadavg(), total_s=time.perf_counter() - start)
    rows = rows_of(records)
    table = [dict(zip(HEADERS, row, strict=True)) for row in rows]
    bc.write_json(args.out, {"meta": meta, "records": records, "table": table})
    w = meta["workers"][0] if meta["workers"] else {}
    print(f"# bench_jaxsim: Panda (fixed base), jax {w.get('jax')}, jaxsim {w.get('jaxsim')}, pin {meta['pinocchio']}, "
          f"{meta['cpu_count']} CPUs; load average {meta['loadavg_start'][0]:.1f} -> {meta['loadavg_end'][0]:.1f}; "
          f"total {meta['total_s']:.0f} s\n")
    print(bc.md_table(HEADERS, rows))
    for worker in meta["workers"]:
        for key in ("unavailable", "failed"):
            if key in worker:
                print(f"\n- {worker.get('dtype', '')} not measured: {worker[key]}")
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    sys.exit(main())
