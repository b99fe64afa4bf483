"""Per-sample time of jaxsoa's RNEA, ABA and CRBA on a robot of example-robot-data (`--robot`: the Franka
Panda by default, Solo-12 and Talos with free-flyer roots), against Pinocchio and (Panda) MuJoCo/MJX.

Run from the repository root:  .venv/bin/python -m experiments.benchmarks.bench_core [--quick]

The C/C++ anchors (Pinocchio per-call loop and `*InParallel`, MuJoCo `mj_forward` loop and `rollout`) run
in this process. The JAX cases (jaxsoa's traversal variants, `mjx.forward`) run in one subprocess per
(XLA setting, dtype), because XLA_FLAGS is read when JAX starts: the CPU fusion emitters are switched
on, then off (`--xla_cpu_use_fusion_emitters`). See experiments/benchmarks/README.md.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from experiments._common import BENCH_NOTE, OneLineParser, comma_list, interruptible, positive_float, positive_int
from experiments._progress import progress
from experiments.benchmarks import bench_common as bc
from experiments.benchmarks import bench_worker as bw

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = {"emitters_on": "--xla_cpu_use_fusion_emitters=true", "emitters_off": "--xla_cpu_use_fusion_emitters=false"}
RESULTS = Path(__file__).parent / "results"
QUICK = dict(batches=(1, 8), variant_batches=(8,), variant_algos=("aba",), dtypes=("float32",), repeats=3,
             target_s=0.01, no_mjx=True)


def _ints(text):
    return comma_list(positive_int, allow_empty=True)(text)


def _words(text):
    return tuple(x for x in text.split(",") if x)


def parse_args(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    p = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--robot", default="panda", choices=sorted(bc.ROBOTS), help="robot (default panda)")
    p.add_argument("--batches", type=_ints, default=(1, 64, 1024, 8192), help="comma-separated batch sizes")
    p.add_argument("--variant-batches", type=_ints, default=(1024, 8192),
                   help="batches at which the traversal variants seq-full and levels are measured too")
    p.add_argument("--variant-algos", type=_words, default=bc.ALGOS, help="algorithms measured with the variants")
    p.add_argument("--dtypes", type=_words, default=("float32", "float64"), help="comma-separated JAX dtypes")
    p.add_argument("--settings", type=_words, default=tuple(SETTINGS), help="XLA settings: " + ", ".join(SETTINGS))
    p.add_argument("--repeats", type=positive_int, default=5, help="timed rounds per case (the median is reported)")
    p.add_argument("--target-s", type=positive_float, default=0.05, help="approximate duration of one timed round")
    p.add_argument("--max-call-s", type=positive_float, default=10.0,
                   help="MJX: a warm-up call slower than this is the only measurement, and the remaining MJX "
                        "cases of that XLA setting are skipped; so is a batch whose call would take longer, "
                        "predicted from the per-sample time at the previous batch")
    p.add_argument("--quick", action="store_true", help="smoke test (< 1 min): batches 1,8, float32, "
                   "variants for aba at batch 8 only, 3 repeats, no MJX; explicit options override these")
    p.add_argument("--no-mjx", action="store_true", help="skip the MJX cases")
    p.add_argument("--out", type=Path, default=None,
                   help="JSON output (default results/bench_core.json for the Panda, results/bench_core_ROBOT.json "
                        "for the others; with --quick results/bench_core_quick.json)")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--skip-mjx", default="", help=argparse.SUPPRESS)
    if "--quick" in argv:
        p.set_defaults(**QUICK)
    args = p.parse_args(argv)
    if args.out is None:
        name = "bench_core" + ("" if args.robot == "panda" else f"_{args.robot}") + ("_quick" if args.quick else "")
        args.out = RESULTS / f"{name}.json"
    return args


def worker_cmd(args, dtype, skip_mjx):
    cmd = [sys.executable, "-m", "experiments.benchmarks.bench_core", "--worker", "--robot", args.robot,
           "--dtypes", dtype,
           "--batches", ",".join(map(str, args.batches)), "--variant-batches", ",".join(map(str, args.variant_batches)),
           "--variant-algos", ",".join(args.variant_algos),
           "--repeats", str(args.repeats), "--target-s", str(args.target_s), "--max-call-s", str(args.max_call_s)]
    return cmd + (["--no-mjx"] if args.no_mjx else []) + (["--skip-mjx", skip_mjx] if skip_mjx else [])


def run_worker(args, setting, dtype, skip_mjx, bar):
    """One JAX subprocess; its records stream back as 'RECORD {json}' lines."""
    env = dict(os.environ)
    flags = [f for f in env.get("XLA_FLAGS", "").split() if not f.startswith("--xla_cpu_use_fusion_emitters")]
    env["XLA_FLAGS"] = " ".join([*flags, SETTINGS[setting]])
    records, meta = [], None
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(worker_cmd(args, dtype, skip_mjx), cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                stderr=err, text=True)
        for line in proc.stdout:
            if not line.startswith("RECORD "):
                continue
            rec = json.loads(line[len("RECORD "):])
            if "meta" in rec:
                meta = {**rec["meta"], "setting": setting}
                continue
            records.append({**rec, "setting": setting})
            bar.set_postfix_str(f"{setting} {dtype} {rec['impl']} {rec['variant']} {rec['algo']} b={rec['batch']}")
            bar.update()
        if proc.wait():
            err.seek(0)
            raise RuntimeError(f"worker {setting}/{dtype} failed (rc={proc.returncode}):\n{err.read()[-4000:]}")
    return records, meta


def analyse(records):
    """Adds ratios to the JAX records (per-sample / anchor per-sample) and returns the best jaxsoa configs."""
    ok = [r for r in records if "per_sample_us" in r]
    pin_par, pin_loop, mjx = {}, {}, {}
    for r in ok:
        key, ps = (r["algo"], r["batch"]), r["per_sample_us"]
        if r["impl"] == "pinocchio" and r["variant"].startswith("parallel"):
            pin_par[key] = min(pin_par.get(key, math.inf), ps)
        elif r["impl"] == "pinocchio":
            pin_loop[key] = ps
        elif r["impl"] == "mjx":
            mjx[(r["dtype"], r["batch"])] = min(mjx.get((r["dtype"], r["batch"]), math.inf), ps)
    for r in ok:
        if r["impl"] in ("jaxsoa", "mjx"):
            algo, ps = ("aba" if r["impl"] == "mjx" else r["algo"]), r["per_sample_us"]
            r["x_pin_parallel"] = ps / pin_par[(algo, r["batch"])] if (algo, r["batch"]) in pin_par else None
            r["x_pin_loop"] = ps / pin_loop[(algo, r["batch"])] if (algo, r["batch"]) in pin_loop else None
            r["x_mjx"] = ps / mjx[(r["dtype"], r["batch"])] if algo == "aba" and (r["dtype"], r["batch"]) in mjx \
                else None
    best = {}
    for r in ok:
        key = (r["algo"], r["dtype"], r["batch"])
        if r["impl"] == "jaxsoa" and (key not in best or r["per_sample_us"] < best[key]["per_sample_us"]):
            best[key] = r
    return [best[k] for k in sorted(best, key=lambda k: (bc.ALGOS.index(k[0]), k[1], k[2]))]


def tables(records, best, settings, robot):
    ok = {(r["impl"], r["variant"], r["algo"], r["dtype"], r["setting"], r["batch"]): r for r in records}
    batches = sorted({r["batch"] for r in records})
    anchor_cols = [c[:3] for c in bc.anchor_cases(batches[:1], robot)]
    anchor_rows = [[b] + [ok.get((*c, "float64", "-", b), {}).get("per_sample_us") for c in anchor_cols]
                   for b in batches]
    out = ["## Anchors (float64, µs per sample)", "",
           bc.md_table(["batch"] + [f"{i} {v} {a}" for i, v, a in anchor_cols], anchor_rows), ""]
    rows, seen = [], set()
    for r in records:
        key = (r["impl"], r["variant"], r["algo"], r["dtype"], r["batch"])
        if r["impl"] not in ("jaxsoa", "mjx") or key in seen:
            continue
        seen.add(key)
        per = [ok.get((*key[:4], s, key[4]), {}) for s in settings]
        fastest = min((p for p in per if "per_sample_us" in p), key=lambda p: p["per_sample_us"], default={})
        rows.append([*key, *(p.get("per_sample_us") for p in per), *(p.get("compile_s") for p in per),
                     fastest.get("x_pin_parallel"), fastest.get("x_pin_loop"), fastest.get("x_mjx"),
                     fastest.get("err")])
    headers = ["impl", "variant", "algo", "dtype", "batch", *(f"µs/sample {s}" for s in settings),
               *(f"compile s {s}" for s in settings), "× pin C++ batched", "× pin loop", "× MJX", "max err"]
    out += ["## JAX (µs per sample; ratios use the faster XLA setting; pin C++ batched = best of 1/2 threads)", "",
            bc.md_table(headers, rows), "", "## Fastest jaxsoa configuration per case", "",
            bc.md_table(["algo", "dtype", "batch", "variant", "setting", "µs/sample", "× pin C++ batched",
                         "× pin loop", "× MJX"],
                        [[r["algo"], r["dtype"], r["batch"], r["variant"], r["setting"], r["per_sample_us"],
                          r["x_pin_parallel"], r["x_pin_loop"], r["x_mjx"]] for r in best])]
    out += ["", "## Traversal variant × XLA setting: geometric mean of (µs/sample) / (fastest jaxsoa configuration), "
            "over the algorithms, dtypes and batches where every variant ran", "", variant_summary(records, best)]
    skipped = sorted({(r["setting"], r["dtype"], r["skipped"]) for r in records if "skipped" in r})
    out += ["", *(f"- MJX {s} {d}: {why}" for s, d, why in skipped)]
    return "\n".join(out)


def variant_summary(records, best):
    fastest = {(b["algo"], b["dtype"], b["batch"]): b["per_sample_us"] for b in best}
    full = {(r["algo"], r["dtype"], r["batch"]) for r in records if r["impl"] == "jaxsoa" and r["variant"] != "seq-u1"}
    logs = {}
    for r in records:
        key = (r["algo"], r["dtype"], r["batch"])
        if r["impl"] == "jaxsoa" and key in full:
            logs.setdefault((r["variant"], r["setting"]), []).append(math.log(r["per_sample_us"] / fastest[key]))
    rows = [[v, s, math.exp(sum(x) / len(x)), len(x)] for (v, s), x in sorted(logs.items())]
    return bc.md_table(["variant", "setting", "× fastest (geomean)", "cases"], rows)


@interruptible(BENCH_NOTE)
def main(argv=None):
    args = parse_args(argv)
    if args.worker:
        for rec in bw.run_worker(args):
            print("RECORD " + json.dumps(rec), flush=True)
        return
    start = time.perf_counter()
    meta = {"command": [Path(sys.executable).name, "-m", "experiments.benchmarks.bench_core", *sys.argv[1:]],
            "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
            "xla_settings": {s: SETTINGS[s] for s in args.settings}, **bc.machine_info(), "workers": []}
    mjx = not args.no_mjx and bc.has_mujoco_anchor(args.robot)
    n_jax = len(bw.jax_cases(args.batches, args.variant_batches, args.variant_algos, mjx))
    total = len(bc.anchor_cases(args.batches, args.robot)) + n_jax * len(args.settings) * len(args.dtypes)
    records = []
    with progress(total=total, desc="bench_core", unit="case") as bar:
        for rec in bc.run_anchors(args.batches, args.repeats, args.target_s, args.robot):
            records.append(rec)
            bar.set_postfix_str(f"{rec['impl']} {rec['variant']} {rec['algo']} b={rec['batch']}")
            bar.update()
        for setting in args.settings:
            skip_mjx = ""
            for dtype in args.dtypes:
                recs, worker_meta = run_worker(args, setting, dtype, skip_mjx, bar)
                records += recs
                meta["workers"].append(worker_meta)
                slow = [r for r in recs if r["impl"] == "mjx" and (r.get("slow") or r.get("skipped"))]
                if slow and not skip_mjx:
                    why = slow[0].get("skipped") or f"a {slow[0]['call_s']:.3g} s call at batch {slow[0]['batch']}"
                    skip_mjx = f"skipped because in {dtype} (same XLA setting): {why}"
    best = analyse(records)
    meta.update(loadavg_end=os.getloadavg(), total_s=time.perf_counter() - start)
    w = meta["workers"][0] if meta["workers"] else {}
    print(f"# bench_core: {args.robot} (nq={w.get('nq')}, n_links={w.get('n_links')}), {meta['platform']}, "
          f"{meta['cpu_count']} CPUs, jax {w.get('jax')}, pin {meta['pinocchio']}, mujoco {meta['mujoco']}, "
          f"mjx {w.get('mujoco_mjx')}; load average {meta['loadavg_start'][0]:.1f} -> {meta['loadavg_end'][0]:.1f}; "
          f"total {meta['total_s']:.0f} s\n")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    bc.write_json(args.out, {"meta": meta, "records": records, "best": best})
    print(tables(records, best, args.settings, args.robot))
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    sys.exit(main())
