"""Run the reproductions on small defaults, print their tables and write their plots.

    python -m experiments.reproduce [--out outputs] [--only NAME ...]

Available now: `core` (jaxsoa vs Pinocchio on the Panda in float64/float32, and the pendulum's
exact period), `seed000` (the variable-topology dual-arm spacecraft: inverse dynamics of
configurations 1-3 by the masked-operator method vs hand-built Pinocchio models, planar fixed hub and
a 3-D free-hub variant), `seed002` (the 7-DOF space arm: fixed and free-floating forward/inverse
dynamics and computed-torque control vs Pinocchio and MuJoCo), `seed000-loop` (the closed-loop
grasp: both arm tips welded to one target, constrained forward dynamics vs Pinocchio's
`constraintDynamics`, 10 s with Baumgarte stabilisation), `seed004` (the gas-assisted Gough-Stewart
platform: Kane inverse dynamics of the electric cylinders with no gas, individual tanks, a shared tank
and light legs, a forward-dynamics replay, the power balance, a tank volume × precharge sweep) and
`seed001` (the space tethered robot in circular orbit: coupled platform + reeling tether + robot,
deployment from 10 m to 1 km, libration damping and retrieval to 50 m by jaxsoa.systems.tether.reel_control, tension,
libration, energy budget, and a vmapped dispersion over 1024 draws of the tether and reel parameters).

Saving and reruns: each reproduction writes its files atomically under --out/NAME/, and, once it has
finished, is entered with the list of its files and the sources' fingerprint in --out/reproduce.json. A
rerun skips (and says so) every reproduction entered there by the same sources whose files are all
present, so an interrupted `reproduce` resumes at the first unfinished one, and a reproduction made by
other sources runs again; --overwrite recomputes them all. Ctrl-C exits 130 keeping the finished
reproductions.
"""

import pathlib
import sys
import time

from experiments import (
    reproduce_core,
    reproduce_seed000,
    reproduce_seed000_loop,
    reproduce_seed001,
    reproduce_seed002,
    reproduce_seed004,
)
from experiments._common import (
    CACHE_ENV,
    RESUME_NOTE,
    add_overwrite,
    check_out,
    code_fingerprint,
    command_parser,
    interruptible,
    open_record,
    report_resume,
    use_compilation_cache,
)
from experiments._progress import progress

REPRODUCTIONS = {
    "core": reproduce_core.run,
    "seed000": reproduce_seed000.run,
    "seed000-loop": reproduce_seed000_loop.run,
    "seed001": reproduce_seed001.run,
    "seed002": reproduce_seed002.run,
    "seed004": reproduce_seed004.run,
}


RECORD = "reproduce.json"
SETTINGS = {"parameters": "each reproduction's small defaults"}    # the command has no others


def finished_files(folder) -> list[str]:
    """The files a reproduction left in `folder` (names, sorted), temporary ones excluded."""
    return sorted(p.name for p in pathlib.Path(folder).iterdir() if p.is_file() and not p.name.startswith("."))


def is_done(record, out, name) -> bool:
    """Reproduction `name` is entered in `record` and every file it wrote is still in out/name."""
    item = record.items.get(name, {})
    files = item.get("files", [])
    return bool(files) and item.get("code") == code_fingerprint() and record.done(name, [out / name / f for f in files])


@interruptible(RESUME_NOTE)
def main(argv=None):
    parser = command_parser(__doc__, "outputs", "root folder for the outputs (default: outputs)")
    parser.add_argument("--only", nargs="+", choices=sorted(REPRODUCTIONS), help="run only these")
    add_overwrite(parser)
    args = parser.parse_args(argv)
    out = check_out(parser, args.out)
    record = open_record(parser, out / RECORD, SETTINGS, args.overwrite, code=False)
    cache = use_compilation_cache()
    print(f"compilation cache: {cache or 'off'} (${CACHE_ENV}; a second run skips XLA's compiles)")
    names = args.only or list(REPRODUCTIONS)
    report_resume("reproduce", [n for n in names if is_done(record, out, n)], len(names))
    for name in progress(names, desc="reproductions", unit="reproduction"):
        if is_done(record, out, name):
            print(f"\n== {name} == skipped: finished earlier, its files are in {out / name}")
            continue
        print(f"\n== {name} ==")
        start = time.perf_counter()
        REPRODUCTIONS[name](out / name)
        record.add(name, {"files": finished_files(out / name), "code": code_fingerprint(),
                          "seconds": time.perf_counter() - start})
    print(f"\nall outputs under {out.resolve()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
