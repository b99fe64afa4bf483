"""What the experiments' commands share: the parser with `--out` and their `main`, the run set-up,
markdown tables, progress bars that stay out of captured logs, legends beside the data."""

import argparse
import pathlib
import time

from tqdm import tqdm


def command_parser(doc, out, out_help="folder for plots and tables"):
    """An `argparse` parser showing `doc` verbatim, with `--out` (default `out`) already added."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=out, help=out_help)
    return parser


def run_command(run, doc, argv, out, *options, out_help="folder for plots and tables"):
    """Parse `argv` for `--out` and `options` and call ``run(Path(out), *values)`` in option order.

    An option is ``(flag, default, help)``, its type that of the default and "(default …)" appended to
    the help, or ``(flag, kwargs)`` passed to `add_argument` as they are."""
    parser = command_parser(doc, out, out_help)
    for flag, *spec in options:
        if len(spec) == 1:
            parser.add_argument(flag, **spec[0])
        else:
            default, text = spec
            parser.add_argument(flag, type=type(default), default=default, help=f"{text} (default {default:g})")
    args = vars(parser.parse_args(argv))
    return run(pathlib.Path(args["out"]), *(args[flag.lstrip("-").replace("-", "_")] for flag, *_ in options))


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
