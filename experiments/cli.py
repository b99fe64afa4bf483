"""`python -m experiments`: one entry point to the reproductions, workflows and benchmarks.

    python -m experiments reproduce [seed000|seed000-loop|seed001|seed002|seed004|core|all] [--out DIR]
    python -m experiments sweep | identify | trajopt | train | bench  [options; see `... CMD --help`]

Run from the repository root (`experiments/` is a folder of the checkout, not an installed package).
Each subcommand runs one module under `experiments/`: the options after the subcommand are that
module's own, so `python -m experiments sweep --help` prints the sweep's help. Outputs go under `--out` (default
`outputs/`), and each command prints where they went. A user mistake (an unknown subcommand or
reproduction, a bad option) prints a message and exits with status 2, never a traceback. Every command
but `bench` keeps its compiled programs on disk for the next run (`experiments._common.use_compilation_cache`:
$JAXSOA_COMPILATION_CACHE, default ~/.cache/jaxsoa/jax, "" turns it off).
"""

import argparse
import importlib
import sys

from experiments._common import EXIT_INTERRUPTED, OneLineParser, use_compilation_cache

PROG = "python -m experiments"

# subcommand: (module run with the remaining arguments, one-line description)
COMMANDS = {
    "reproduce": ("experiments.reproduce", "the reproductions of the seed systems, small defaults (tables, plots)"),
    "sweep": ("experiments.sweep", "Monte Carlo sweeps over topologies, parameters and initial states"),
    "identify": ("experiments.identify_inertia", "inertial parameter identification (least squares and GD)"),
    "trajopt": ("experiments.trajopt", "trajectory optimisation with gradients through rollouts"),
    "train": ("experiments.train_controller", "train a neural controller through the simulator"),
    "bench": ("experiments.benchmarks.__main__", "the benchmark suite (JSON and markdown tables)"),
}


def _parser():
    lines = [f"  {name:<10} {desc}" for name, (_, desc) in COMMANDS.items()]
    parser = OneLineParser(
        prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="commands:\n" + "\n".join(lines))
    parser.add_argument("command", choices=sorted(COMMANDS), metavar="COMMAND", help="one of: " + ", ".join(COMMANDS))
    parser.add_argument("args", nargs=argparse.REMAINDER,
                        help="options of the command (see `python -m experiments COMMAND --help`)")
    return parser


def _reproduce_argv(args):
    """`reproduce seed001 --out x` -> `--only seed001 --out x`; `all` or nothing -> every reproduction."""
    names = []
    while args and not args[0].startswith("-"):
        names.append(args.pop(0))
    if names == ["all"]:
        names = []
    return (["--only", *names] if names else []) + args


def main(argv=None):
    """Parse `python -m experiments COMMAND ...` and run the command's module `main(argv)`; returns the exit status."""
    parsed = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    module_name, _ = COMMANDS[parsed.command]
    args = list(parsed.args)
    if parsed.command == "reproduce":
        args = _reproduce_argv(args)
    if parsed.command != "bench":               # benchmarks time compiles: they never read a cache
        use_compilation_cache()
    sys.argv[0] = f"{PROG} {parsed.command}"
    try:
        module = importlib.import_module(module_name)
        status = module.main(args)
    except KeyboardInterrupt:                   # the commands catch it themselves; this covers their imports
        print(f"{PROG} {parsed.command}: interrupted (Ctrl-C)", file=sys.stderr)
        return EXIT_INTERRUPTED
    return status if isinstance(status, int) else 0      # a command's own status: 1 for non-finite results


if __name__ == "__main__":
    sys.exit(main())
