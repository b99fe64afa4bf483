"""Helpers for `bench_core`: robot loading, inputs, timing, the C/C++ anchors and the JAX worker.

Every measurement is a *record* (a dict) with the per-sample time in µs (`per_sample_us`, the median
over `repeats` of the mean of `number` calls, divided by `batch`), the compile time (JAX only) and, where
it applies, `err`: the largest absolute difference from Pinocchio (float64) on the first sample.
"""

import functools
import os
import platform
import statistics
import time
import xml.etree.ElementTree as ET
from importlib import metadata
from pathlib import Path

import numpy as np

from jaxsoa.io import robots

ALGOS = ("rnea", "aba", "crba")
VARIANTS = {"seq-u1": ("sequential", 1), "seq-full": ("sequential", None), "levels": ("levels", 1)}
THREADS = (1, 2)


# the benchmarked robots of `jaxsoa.io.robots`: name -> (URDF below example-robot-data's robots/, free-flyer root)
ROBOTS = {name: robots.ROBOTS[name] for name in ("panda", "solo12", "talos")}


def panda_urdf() -> Path:
    """The Franka Panda URDF of example-robot-data."""
    return robots.example_robot_urdf("panda")


def pin_model(name):
    """Pinocchio model of a `ROBOTS` entry (free-flyer root where the entry says so)."""
    import pinocchio as pin

    path = str(robots.example_robot_urdf(name))
    return pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer()) if ROBOTS[name][1] else pin.buildModelFromUrdf(path)


def mujoco_model(path):
    """MuJoCo model of a URDF, dynamics only: <visual>, <collision> and <mimic> stripped (the mimic
    finger coupling would add an equality constraint), constraints disabled and joint damping zeroed,
    so that `qacc` is the forward dynamics that Pinocchio's ABA computes."""
    import mujoco

    root = ET.fromstring(Path(path).read_text())
    for element in list(root):
        for tag in ("visual", "collision", "mimic"):
            for child in element.findall(tag):
                element.remove(child)
    ET.SubElement(ET.SubElement(root, "mujoco"), "compiler", fusestatic="false", discardvisual="true")
    model = mujoco.MjModel.from_xml_string(ET.tostring(root, encoding="unicode"))
    model.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONSTRAINT
    model.dof_damping[:] = 0.0
    return model


def make_inputs(nq, nv, batch, seed=0, floating=False):
    """float64 (batch, ·) arrays: q uniform in [-1, 1], v and u (acceleration or torque) standard normal;
    with a free-flyer root (`floating`) q[3:7] is a unit quaternion."""
    rng = np.random.default_rng(seed)
    q = rng.uniform(-1.0, 1.0, (batch, nq))
    if floating:
        q[:, 3:7] /= np.linalg.norm(q[:, 3:7], axis=1, keepdims=True)
    return q, rng.normal(size=(batch, nv)), rng.normal(size=(batch, nv))


def pin_reference(pin_model, q, v, u):
    """Pinocchio's rnea, aba and (symmetrized) crba at one state."""
    import pinocchio as pin

    data = pin_model.createData()
    M = pin.crba(pin_model, data, q)
    return {"rnea": pin.rnea(pin_model, data, q, v, u).copy(), "aba": pin.aba(pin_model, data, q, v, u).copy(),
            "crba": np.triu(M) + np.triu(M, 1).T}


def measure(fn, args, repeats, target_s, max_call_s=None):
    """Warm up, then time `repeats` rounds of `number` calls fn(*args) (a round lasts ~target_s).
    If the warm-up call alone exceeds `max_call_s`, that single call is the measurement (slow=True)."""
    t0 = time.perf_counter()
    fn(*args)
    first = time.perf_counter() - t0
    if max_call_s is not None and first > max_call_s:
        return {"call_s": first, "call_s_min": first, "repeats": 1, "number": 1, "slow": True}
    if first < 0.5:
        fn(*args)
    number = max(1, min(20000, int(target_s / max(first, 1e-7))))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(number):
            fn(*args)
        times.append((time.perf_counter() - t0) / number)
    return {"call_s": statistics.median(times), "call_s_min": min(times), "repeats": repeats, "number": number,
            "slow": False}


def machine_info():
    import mujoco
    import pinocchio as pin

    return {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
            "cpu_count": os.cpu_count(), "python": platform.python_version(), "pinocchio": pin.__version__,
            "mujoco": mujoco.__version__, "numpy": np.__version__, "loadavg_start": os.getloadavg()}


def has_mujoco_anchor(robot):
    """MuJoCo's URDF import welds the root, so its anchors (and MJX) run on the fixed-base robots only."""
    return not ROBOTS[robot][1]


def anchor_cases(batches, robot="panda"):
    """(impl, variant, algo, batch) of the anchors, in run order."""
    cases = []
    for batch in batches:
        cases += [("pinocchio", "loop", algo, batch) for algo in ALGOS]
        cases += [("pinocchio", f"parallel-{t}t", algo, batch) for algo in ("rnea", "aba") for t in THREADS]
        if has_mujoco_anchor(robot):
            cases += [("mujoco", "mj_forward-loop", "forward", batch)]
            cases += [("mujoco", f"rollout-{t}t", "step", batch) for t in THREADS]
    return cases


def run_anchors(batches, repeats, target_s, robot="panda"):
    """Pinocchio (Python loop and C++ *InParallel) and MuJoCo C (mj_forward loop, rollout) records."""
    import mujoco
    import pinocchio as pin
    from mujoco import rollout

    path = robots.example_robot_urdf(robot)
    pm = pin_model(robot)
    pd, pool = pm.createData(), pin.ModelPool(pm, max(THREADS))
    if has_mujoco_anchor(robot):
        mm = mujoco_model(path)
        md = mujoco.MjData(mm)
    full = mujoco.mjtState.mjSTATE_FULLPHYSICS
    for impl, variant, algo, batch in anchor_cases(batches, robot):
        q, v, u = make_inputs(pm.nq, pm.nv, batch, floating=ROBOTS[robot][1])
        if variant == "loop" and algo == "crba":
            fn, args = _loop_crba, (pin.crba, pm, pd, q)
        elif variant == "loop":
            fn, args = _loop, (getattr(pin, algo), pm, pd, q, v, u)
        elif variant.startswith("parallel"):
            fn = getattr(pin, f"{algo}InParallel")
            args = (_threads(variant), pool, *(np.asfortranarray(x.T) for x in (q, v, u)),
                    np.zeros((pm.nv, batch), order="F"))
        elif variant == "mj_forward-loop":
            fn, args = _loop_mj_forward, (mujoco.mj_forward, mm, md, q, v, u)
        else:                                       # rollout: one mj_step per state, u as qfrc_applied
            state = np.zeros((batch, mujoco.mj_stateSize(mm, full)))
            for i in range(batch):
                md.qpos[:], md.qvel[:] = q[i], v[i]
                mujoco.mj_getState(mm, md, state[i], full)
            fn = functools.partial(rollout.rollout, control_spec=mujoco.mjtState.mjSTATE_QFRC_APPLIED, nstep=1)
            args = (mm, [mujoco.MjData(mm) for _ in range(_threads(variant))], state, u[:, None, :].copy())
        res = measure(fn, args, repeats, target_s)
        yield {"impl": impl, "variant": variant, "algo": algo, "batch": batch, "dtype": "float64", "setting": "-",
               "compile_s": None, "per_sample_us": res["call_s"] / batch * 1e6, **res}


def _loop(fn, pm, pd, q, v, u):
    for i in range(len(q)):
        fn(pm, pd, q[i], v[i], u[i])


def _loop_crba(fn, pm, pd, q):
    for i in range(len(q)):
        fn(pm, pd, q[i])


def _loop_mj_forward(fn, mm, md, q, v, u):
    for i in range(len(q)):
        md.qpos[:], md.qvel[:], md.qfrc_applied[:] = q[i], v[i], u[i]
        fn(mm, md)


def _blocking(fn, *args):
    import jax

    return jax.block_until_ready(fn(*args))


def _threads(variant):
    return int(variant.rsplit("-", 1)[1].rstrip("t"))


def dist_version(dist):
    """The installed version of distribution `dist`, None if absent."""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def fusion_emitters_off():
    """Turn XLA's CPU fusion emitters off (`--xla_cpu_use_fusion_emitters=false`, as the suite, docs/benchmarks.md)
    unless XLA_FLAGS already names them; call before JAX starts its backend."""
    if "--xla_cpu_use_fusion_emitters" not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_use_fusion_emitters=false").strip()


def robot_grid(robots, dtypes, batches, desc):
    """(robot, batch, dtype) for every combination, with a progress bar; turns on `jax_enable_x64` when
    float64 is among `dtypes`."""
    import jax

    from experiments._progress import progress

    if "float64" in dtypes:
        jax.config.update("jax_enable_x64", True)
    return progress([(r, b, d) for r in robots for d in dtypes for b in batches], desc=desc)


def md_table(headers, rows):
    """A markdown table; None is shown as an empty cell, floats with 3 significant digits."""
    def cell(x):
        if x is None:
            return ""
        return f"{x:.3g}" if isinstance(x, float) else str(x)

    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    return "\n".join(lines + ["| " + " | ".join(cell(x) for x in row) + " |" for row in rows])


def write_json(path, payload):
    """Write a benchmark's results (creating the folder); paths and numpy scalars become plain JSON."""
    import json

    from experiments._common import write_text  # atomic: a crash never leaves a half-written JSON

    write_text(path, json.dumps(payload, indent=1, default=lambda x: x.item() if hasattr(x, "item") else str(x)))


def jax_run_meta(module, start):
    """Metadata of a single-process JAX benchmark run: its command, versions, devices, XLA flags, load, time."""
    import sys
    import time

    import jax

    return {"command": [Path(sys.executable).name, "-m", f"experiments.benchmarks.{module}", *sys.argv[1:]],
            "jax": jax.__version__, "devices": [str(d) for d in jax.devices()], "cpu_count": os.cpu_count(),
            "xla_flags": os.environ.get("XLA_FLAGS", ""), "loadavg_end": os.getloadavg(),
            "total_s": time.perf_counter() - start}


def benchmark_main(module, parse_args, run, columns):
    """main(argv) of a one-process benchmark: parse_args(argv) -> opts (with `out`), XLA's fusion emitters off,
    run(opts) -> records, printed as a table (`report`) and written as JSON; Ctrl-C exits 130 in one line.
    Pass parse_args and run as lambdas over the module's names, so that tests can replace them."""
    from experiments._common import BENCH_NOTE, interruptible

    @interruptible(BENCH_NOTE)
    def main(argv=None):
        start = time.perf_counter()
        opts = parse_args(argv)
        fusion_emitters_off()                                            # before JAX starts
        report(module, start, opts.out, run(opts), columns)
        return 0
    return main


def report(module, start, path, records, columns):
    """Print `records` as a markdown table, columns = [(header, record key), ...], and `finish` with them."""
    print(md_table([h for h, _ in columns], [[r[k] for _, k in columns] for r in records]))
    finish(module, start, path, {"records": records})


def finish(module, start, path, payload):
    """Write {"meta": jax_run_meta(module, start), **payload} as JSON to `path` and say so."""
    write_json(path, {"meta": jax_run_meta(module, start), **payload})
    print(f"\nwrote {path}")
