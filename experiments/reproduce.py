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
"""

import pathlib

from experiments import (
    reproduce_core,
    reproduce_seed000,
    reproduce_seed000_loop,
    reproduce_seed001,
    reproduce_seed002,
    reproduce_seed004,
)
from experiments._common import CACHE_ENV, command_parser, progress, use_compilation_cache

REPRODUCTIONS = {
    "core": reproduce_core.run,
    "seed000": reproduce_seed000.run,
    "seed000-loop": reproduce_seed000_loop.run,
    "seed001": reproduce_seed001.run,
    "seed002": reproduce_seed002.run,
    "seed004": reproduce_seed004.run,
}


def main(argv=None):
    parser = command_parser(__doc__, "outputs", "root folder for the outputs (default: outputs)")
    parser.add_argument("--only", nargs="+", choices=sorted(REPRODUCTIONS), help="run only these")
    args = parser.parse_args(argv)
    cache = use_compilation_cache()
    print(f"compilation cache: {cache or 'off'} (${CACHE_ENV}; a second run skips XLA's compiles)")
    names = args.only or list(REPRODUCTIONS)
    for name in progress(names, desc="reproductions"):
        print(f"\n== {name} ==")
        REPRODUCTIONS[name](pathlib.Path(args.out) / name)
    print(f"\nall outputs under {pathlib.Path(args.out).resolve()}")


if __name__ == "__main__":
    main()
