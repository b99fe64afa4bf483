"""What the experiments' commands share: the parser with `--out` and their `main`, the run set-up,
markdown tables, legends beside the data, Ctrl-C (the progress bars that stay out of captured logs are in
`experiments._progress`). The atomic writers (`experiments._outputs`) and the --out records
(`experiments._record`) are re-exported."""

import argparse
import functools
import math
import numbers
import os
import pathlib
import sys

from experiments._outputs import (  # noqa: F401 (re-exported: the commands import them from here)
    atomic_path,
    open_atomic,
    save_figure,
    save_npz,
    write_json,
    write_text,
)
from experiments._record import (  # noqa: F401 (re-exported, as above)
    OVERWRITE_HELP,
    Record,
    SettingsMismatchError,
    add_overwrite,
    check_out,
    code_fingerprint,
    differences,
    open_record,
    report_resume,
)

CACHE_ENV = "JAXSOA_COMPILATION_CACHE"
DEFAULT_CACHE = pathlib.Path.home() / ".cache" / "jaxsoa" / "jax"


def use_compilation_cache():
    """Keep compiled programs on disk across runs (JAX's persistent compilation cache), so a command
    run again skips XLA's compile of every program that took ≥ 1 s (docs/performance.md, "Persistent compilation
    cache"); the trace is still paid. The folder is $JAXSOA_COMPILATION_CACHE (default
    ~/.cache/jaxsoa/jax; "" turns it off); a cache folder configured already is kept. Returns the
    folder in use, or None."""
    import jax

    if jax.config.jax_compilation_cache_dir:
        return jax.config.jax_compilation_cache_dir
    folder = os.environ.get(CACHE_ENV, str(DEFAULT_CACHE))
    if folder:
        jax.config.update("jax_compilation_cache_dir", folder)
    return folder or None


class OneLineParser(argparse.ArgumentParser):
    """An `argparse` parser whose usage errors are one line, ``PROG: error: argument --flag: ...``, exit 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def _number(kind, strict):
    """An argparse type: a finite `kind` (int or float) > 0 (`strict`) or ≥ 0."""
    def parse(text):
        try:
            x = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}, "
                                             f"got {text!r}") from None
        if not math.isfinite(x):
            raise argparse.ArgumentTypeError(f"must be finite, got {text!r}")
        if x < 0 or (strict and x == 0):
            raise argparse.ArgumentTypeError(f"must be {'> 0' if strict else '≥ 0'}, got {text!r}")
        return x

    parse.__name__ = f"{'positive' if strict else 'non-negative'} {kind.__name__}"
    return parse


positive_int, nonnegative_int = _number(int, True), _number(int, False)
positive_float, nonnegative_float = _number(float, True), _number(float, False)


def one_of(choices):
    """An argparse type for one item of a list: a member of `choices`."""
    def parse(text):
        if text not in choices:
            raise argparse.ArgumentTypeError(f"{text!r} is not one of {', '.join(choices)}")
        return text
    return parse


def comma_list(parse=None, allow_empty=False):
    """An argparse type: comma-separated items, each checked by `parse` (e.g. `positive_int`,
    ``one_of(...)``; None: any non-empty text), returned as a tuple; empty only if `allow_empty`."""
    def convert(text):
        items = [x.strip() for x in text.split(",") if x.strip()]
        if not items and not allow_empty:
            raise argparse.ArgumentTypeError(f"expected a comma-separated list, got {text!r}")
        return tuple(parse(x) if parse else x for x in items)
    return convert


def number_type(default, minimum="positive"):
    """The argparse type for an option whose default is `default`: positive or non-negative (`minimum`)."""
    strict = {"positive": True, "nonnegative": False}[minimum]
    return _number(int if isinstance(default, int) else float, strict)


def command_parser(doc, out, out_help="folder for plots and tables"):
    """An `argparse` parser (`OneLineParser`) showing `doc` verbatim, with `--out` (default `out`) already added."""
    parser = OneLineParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=out, help=out_help)
    return parser


def run_command(run, doc, argv, out, *options, out_help="folder for plots and tables", record=None):
    """Parse `argv` for `--out` and `options` and call ``run(Path(out), *values)`` in option order.

    An option is ``(flag, default, help)`` or ``(flag, default, help, "nonnegative")``: a number of the
    default's type, > 0 (or ≥ 0) and finite (`number_type`), "(default …)" appended to the help; or
    ``(flag, kwargs)`` passed to `add_argument` as they are. --out is created and checked writable
    before any work (`check_out`). ``record=(file name, settings(*values) -> dict)``: the command keeps a
    `Record` in --out; ``--overwrite`` is added, other settings in --out exit 2 (`open_record`) and `run`
    gets ``overwrite=``; a `SettingsMismatchError` that `run` raises (a checkpoint of other settings
    in --out, `experiments._checkpoint`) exits 2 the same way. Returns `exit_status` of the result."""
    parser = command_parser(doc, out, out_help)
    for flag, *spec in options:
        if len(spec) == 1:
            parser.add_argument(flag, **spec[0])
        else:
            default, text, *minimum = spec
            parser.add_argument(flag, type=number_type(default, *minimum), default=default,
                                help=f"{text} (default {default:g})")
    if record is not None:
        add_overwrite(parser)
    args = vars(parser.parse_args(argv))
    values = [args[flag.lstrip("-").replace("-", "_")] for flag, *_ in options]
    folder, kwargs = check_out(parser, args["out"]), {}
    if record is not None:
        name, settings = record
        open_record(parser, folder / name, settings(*values), args["overwrite"])
        kwargs["overwrite"] = args["overwrite"]
    try:
        result = run(pathlib.Path(args["out"]), *values, **kwargs)
    except SettingsMismatchError as error:
        parser.error(f"argument --out: {error}")
    return exit_status(result, parser.prog)


def _numbers(result):
    """Every real number in nested dicts / lists / tuples / arrays of `result`."""
    if isinstance(result, dict):
        for value in result.values():
            yield from _numbers(value)
    elif isinstance(result, (list, tuple)):
        for value in result:
            yield from _numbers(value)
    elif isinstance(result, numbers.Real) and not isinstance(result, bool):
        yield float(result)
    elif hasattr(result, "dtype") and getattr(result.dtype, "kind", "") == "f":
        yield from (float(x) for x in result.reshape(-1).tolist())


def exit_status(result, prog) -> int:
    """0, or 1 after a one-line report when the command's result holds NaN or inf (never exit 0 on NaN)."""
    bad = sum(not math.isfinite(x) for x in _numbers(result))
    if bad:
        print(f"{prog}: error: {bad} non-finite result(s) (NaN or inf); see the tables above", file=sys.stderr)
        return 1
    return 0


def start_run(out) -> pathlib.Path:
    """Matplotlib's file backend (Agg), float64 in JAX, the output folder created; returns it as a Path."""
    import jax
    import matplotlib

    matplotlib.use("Agg")
    jax.config.update("jax_enable_x64", True)
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    return out


def markdown_table(header, rows) -> str:
    """A markdown table: the header row, the `|---|` rule, one line per row (cells formatted by `str`)."""
    return "\n".join(["| " + " | ".join(header) + " |", "|---" * len(header) + "|",
                      *("| " + " | ".join(map(str, r)) + " |" for r in rows)])


def legend_outside(ax, **kwargs):
    """The legend to the right of the axes, outside the data (`fig.tight_layout` makes room for it)."""
    return ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, **kwargs)


# --- the command entry: Ctrl-C ------------------------------------------------------------------------------

EXIT_INTERRUPTED = 130


def interruptible(saved: str):
    """Decorate a command's ``main``: Ctrl-C (KeyboardInterrupt) exits 130, and an `OSError` (a full disk
    while writing an output) exits 1, each with one line on stderr saying what happened and `saved` (what
    was kept and how to resume) instead of a traceback."""
    def wrap(main):
        @functools.wraps(main)
        def entry(*args, **kwargs):
            command = pathlib.Path(sys.argv[0]).name if sys.argv else "command"
            try:
                return main(*args, **kwargs)
            except KeyboardInterrupt:
                print(f"{command}: interrupted (Ctrl-C); {saved}", file=sys.stderr)
                return EXIT_INTERRUPTED
            except OSError as error:                   # e.g. a full disk while writing an output
                print(f"{command}: error: {error.strerror or error}; {saved}", file=sys.stderr)
                return 1
        return entry
    return wrap


RESUME_NOTE = "the finished parts are saved in --out; run the same command again to resume"
NO_RESUME_NOTE = "nothing of this run was written; the previous files in --out are intact"
BENCH_NOTE = ("nothing of this run was written (a benchmark writes its JSON whole, once, at the end); "
              "the previous JSON file is intact")
