"""What the experiments' commands share: the parser with `--out` and their `main`, the run set-up,
markdown tables, progress bars that stay out of captured logs, legends beside the data."""

import argparse
import math
import numbers
import os
import pathlib
import sys
import time

from tqdm import tqdm

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


def number_type(default, minimum="positive"):
    """The argparse type for an option whose default is `default`: positive or non-negative (`minimum`)."""
    strict = {"positive": True, "nonnegative": False}[minimum]
    return _number(int if isinstance(default, int) else float, strict)


def command_parser(doc, out, out_help="folder for plots and tables"):
    """An `argparse` parser (`OneLineParser`) showing `doc` verbatim, with `--out` (default `out`) already added."""
    parser = OneLineParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=out, help=out_help)
    return parser


def run_command(run, doc, argv, out, *options, out_help="folder for plots and tables"):
    """Parse `argv` for `--out` and `options` and call ``run(Path(out), *values)`` in option order.

    An option is ``(flag, default, help)`` or ``(flag, default, help, "nonnegative")``: a number of the
    default's type, > 0 (or ≥ 0) and finite (`number_type`), "(default …)" appended to the help; or
    ``(flag, kwargs)`` passed to `add_argument` as they are. Returns `exit_status` of the result."""
    parser = command_parser(doc, out, out_help)
    for flag, *spec in options:
        if len(spec) == 1:
            parser.add_argument(flag, **spec[0])
        else:
            default, text, *minimum = spec
            parser.add_argument(flag, type=number_type(default, *minimum), default=default,
                                help=f"{text} (default {default:g})")
    args = vars(parser.parse_args(argv))
    result = run(pathlib.Path(args["out"]), *(args[flag.lstrip("-").replace("-", "_")] for flag, *_ in options))
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


def progress(iterable=None, enabled=True, **kwargs):
    """A tqdm bar on a terminal only: none when stderr is not a TTY (a captured log, a pipe, pytest)
    or `enabled` is false, redrawn at most once a second."""
    return tqdm(iterable, disable=None if enabled else True, mininterval=1.0, **kwargs)


def advance(t_end, step, desc):
    """Call ``t = step(t)`` from t = 0 until t ≥ t_end; returns the final t.

    The bar counts simulated seconds and ends at t_end exactly; it opens after the first call, so the
    compile time of that call does not enter its rate or ETA. One summary line is printed at the end
    (the only output where the bar is off)."""
    start = time.perf_counter()
    t = step(0.0)
    with progress(total=t_end, initial=min(t, t_end), desc=desc, unit="s", unit_scale=True) as bar:
        while t < t_end:
            t = step(t)
            bar.update(min(t, t_end) - bar.n)
    print(f"{desc}: {t:g} s simulated in {time.perf_counter() - start:.1f} s")
    return t


def legend_outside(ax, **kwargs):
    """The legend to the right of the axes, outside the data (`fig.tight_layout` makes room for it)."""
    return ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, **kwargs)
