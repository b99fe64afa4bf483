"""The whole benchmark suite in one command, with the ratio table against its targets (the target
table of docs/benchmarks.md).

    python -m experiments.benchmarks [--quick] [--only core scaling ...] [--results DIR]
    python -m experiments bench [same options]

Parts (each is also its own command, `python -m experiments.benchmarks.bench_NAME --help`):
  core       (a) rnea, aba, crba on the Panda, Solo-12 and Talos, float32 and float64, against Pinocchio's
             C++ batched and per-call loop, MuJoCo and MJX (Panda: MuJoCo's URDF import welds the root)
  topology   (b) a batch of different topologies against a same-topology batch; dense vs recursive crossover
  gradient   (c) reverse-mode gradient of a 100-step RK4 rollout against the rollout
  tether     (d) tether step cost against node count and batch
  stewart    (e) Stewart-platform inverse dynamics over a batch of poses
  scaling    (f) per-sample cost against link count (4-256), chains and trees, recursive and dense
  compile    (g) compile time of every seed system's value and gradient, cold and with the persistent cache
  jaxsim     rnea and aba against jaxsim (installed with `pip install -e '.[bench]'`) on the Panda
Compile times are also in every part's records. Each part runs in its own process (XLA_FLAGS defaults to
`--xla_cpu_use_fusion_emitters=false`; bench_core measures both settings) and writes its JSON under --results; the suite
then prints and writes `suite.md` and `suite.json`: one row per target, measured value, target, met or not.
`--quick` runs every part as a smoke test (small batches; the ratios are then not meaningful).
Ctrl-C exits 130 with one line, in the suite and in every part: a part writes its JSON whole, once, at its
end, so an interrupted part leaves its previous JSON intact and the finished parts' files are kept.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from experiments._common import EXIT_INTERRUPTED, OneLineParser, check_out, interruptible, write_text
from experiments.benchmarks import bench_common as bc

RESULTS = Path(__file__).parent / "results"
FULL_BATCHES = "1,64,1024,8192,65536"
CPU_BATCHES_TALOS = "1,64,1024,8192"      # Talos float64 at 65536 ran out of memory on the 2-core machine


def parts(results, quick):
    """{name: (module, argv)}; the JSON of part `name` goes to results/NAME.json."""
    q = ["--quick"] if quick else []
    core = {f"core_{robot}": ("bench_core", [*q, "--robot", robot, "--out", str(results / f"core_{robot}.json"),
                                             *([] if quick else ["--batches", CPU_BATCHES_TALOS if robot == "talos"
                                                                 else FULL_BATCHES])]
                              + ([] if robot == "panda" else ["--settings", "emitters_off", "--variant-batches", ""]))
            for robot in bc.ROBOTS}
    rest = {name: (f"bench_{name}", [*q, "--out", str(results / f"{name}.json")])
            for name in ("topology", "gradient", "stewart", "scaling", "compile")}
    tether_quick = ["--elements", "4,8", "--batch", "16", "--steps", "10", "--repeats", "2"]
    rest["tether"] = ("bench_tether", [*(tether_quick if quick else []), "--out", str(results / "tether.json")])
    jaxsim = {"jaxsim": ("bench_jaxsim", [*q, "--out", str(results / "jaxsim.json")])}   # the '.[bench]' extra
    return {**core, **rest, **jaxsim}


def _load(results, name):
    path = results / f"{name}.json"
    return json.loads(path.read_text()) if path.is_file() else None


def _best(core, algo, dtype):
    """jaxsoa's fastest record of `algo` in `dtype` at the largest batch measured."""
    recs = [r for r in core["best"] if r["algo"] == algo and r["dtype"] == dtype]
    return max(recs, key=lambda r: r["batch"]) if recs else None


def target_rows(results):
    """[target, measured, goal, met] rows from the parts' JSON files (rows whose part did not run are left out)."""
    rows = []
    for robot in bc.ROBOTS:
        core = _load(results, f"core_{robot}")
        if core is None:
            continue
        for dtype, goal in (("float32", 0.5), ("float64", 1.0)):
            r = _best(core, "aba", dtype)
            if r and r.get("x_pin_parallel") is not None:
                rows.append([f"{robot} ABA {dtype} batch {r['batch']}: × Pinocchio C++ batched (best of 1/2 threads)",
                             r["x_pin_parallel"], f"≤ {goal}", r["x_pin_parallel"] <= goal])
        r = _best(core, "aba", "float32")
        if r and r.get("x_mjx") is not None:
            rows.append([f"{robot} ABA float32 batch {r['batch']}: × MJX forward", r["x_mjx"], "≤ 0.1",
                         r["x_mjx"] <= 0.1])
    topo = _load(results, "topology")
    if topo:
        for r in (r for r in topo["records"] if r.get("topologies") == "random"):
            rows.append([f"different topologies ({r['form']}, {r['dtype']}): × same-topology batch", r["x_single"],
                         "≤ 1.3", r["x_single"] <= 1.3])
    grad = _load(results, "gradient")
    if grad:
        for system in sorted({r["system"] for r in grad["records"]}):
            x = min(r["x_rollout"] for r in grad["records"] if r["system"] == system and "x_rollout" in r)
            rows.append([f"{system}: value+grad of a rollout × the rollout (best checkpoint)", x, "≤ 4", x <= 4])
    compiles = [(name, r["compile_s"]) for name in ("gradient", "scaling") if _load(results, name)
                for r in _load(results, name)["records"] if r.get("compile_s") is not None]
    if compiles:
        name, worst = max(compiles, key=lambda c: c[1])
        rows.append([f"largest compile time ({name})", worst, "≤ 10 s", worst <= 10])
    seeds = _load(results, "compile")
    if seeds:
        for key, label in (("compile_s", "cold"), ("warm_compile_s", "persistent cache warm")):
            worst = max(seeds["records"], key=lambda r: r[key])
            rows.append([f"largest seed-system compile, {label} ({worst['system']} {worst['case']})", worst[key],
                         "≤ 10 s", worst[key] <= 10])
    tether = _load(results, "tether")
    if tether:
        cores = tether["meta"].get("cpu_count") or os.cpu_count()
        for r in (r for r in tether["records"] if r.get("part") == "batch"):
            rate = r["tether_steps_per_s"] * r["nodes"] / cores
            rows.append([f"tether node updates per second per core ({r['nodes']} nodes, batch {r['batch']}, "
                         f"{cores} cores)", rate, "≥ 1e6", rate >= 1e6])
    scaling = _load(results, "scaling")
    if scaling:
        for key in ("chain aba", "tree aba", "chain rnea", "tree rnea"):
            s = scaling["slopes"].get(key)
            if s is not None:
                rows.append([f"{key}: slope of log(µs/sample) vs log(n)", s, "≈ 1 (O(n))", s <= 1.2])
    jaxsim = _load(results, "jaxsim")
    if jaxsim:              # no design target: jaxsim is an anchor; "met" = jaxsoa no slower at the largest batch
        largest = {}
        for row in jaxsim["table"]:
            key = (row["algo"], row["dtype"])
            largest[key] = max(largest.get(key, row), row, key=lambda r: r["batch"])
        for (algo, dtype), row in sorted(largest.items()):
            x = row["jaxsoa / jaxsim"]
            rows.append([f"panda {algo.upper()} {dtype} batch {row['batch']}: × jaxsim", x, "≤ 1 (anchor)", x <= 1])
    return rows


SUITE_NOTE = ("the finished parts' JSON files are kept in --results (each written whole, so none is half-written); "
              "rerun with --only for the others")


@interruptible(SUITE_NOTE)
def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    prog = None if sys.argv[0].startswith("python -m experiments ") else "python -m experiments.benchmarks"
    p = OneLineParser(prog=prog, description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="smoke test of every part (a few minutes on 2 cores)")
    p.add_argument("--only", nargs="+", help="run only these parts (core_panda, core_solo12, core_talos, topology, "
                                             "gradient, tether, stewart, scaling, compile, jaxsim); default all")
    p.add_argument("--report", action="store_true", help="run nothing: only the target table from the JSON files")
    p.add_argument("--results", type=Path, default=None,
                   help="folder for the JSON files (default experiments/benchmarks/results/suite[_quick])")
    args = p.parse_args(argv)
    results = args.results or RESULTS / ("suite_quick" if args.quick else "suite")
    check_out(p, results, "--results")
    todo = parts(results, args.quick)
    unknown = sorted(set(args.only or ()) - set(todo))
    if unknown:
        p.error(f"unknown part(s) {unknown}; choose from {sorted(todo)}")
    env = dict(os.environ)       # one process per part; XLA's CPU fusion emitters off (docs/benchmarks.md)
    env.setdefault("XLA_FLAGS", "--xla_cpu_use_fusion_emitters=false")
    timings, failed = {}, []
    for name, (module, part_argv) in todo.items():
        if args.report or (args.only and name not in args.only):
            continue
        print(f"\n==== {name}: python -m experiments.benchmarks.{module} {' '.join(part_argv)}", flush=True)
        start = time.perf_counter()
        try:
            done = subprocess.run([sys.executable, "-m", f"experiments.benchmarks.{module}", *part_argv], env=env)
        except KeyboardInterrupt:
            print(f"interrupted (Ctrl-C) during {name}: the finished parts' JSON files are in {results}; "
                  "rerun with --only for the others", file=sys.stderr)
            return EXIT_INTERRUPTED
        timings[name] = time.perf_counter() - start
        if done.returncode:                 # keep going: the other parts still run; the failure is reported
            failed.append(f"{name} (exit status {done.returncode})")
    rows = target_rows(results)
    table = bc.md_table(["target", "measured", "goal", "met"], rows)
    print(f"\n# Targets (docs/benchmarks.md), from {results}\n\n{table}")
    write_text(results / "suite.md", table + "\n")
    bc.write_json(results / "suite.json", {"targets": rows, "part_seconds": timings, "failed": failed,
                                           "quick": args.quick})
    print(f"\nwrote {results / 'suite.md'} and {results / 'suite.json'}")
    if failed:
        print("FAILED parts: " + ", ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
