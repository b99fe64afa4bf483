"""Monte Carlo sweeps of the sims/ systems (experiments/sweep_systems.py), durable and resumable:
each system's samples are committed chunk by chunk to its own run directory
(`jaxsoa.workflows.runner.run_sweep`), so an interruption, a crash or a full disk loses nothing done.

    python -m experiments sweep [--system space_arm dual_arm] [--count 512] [--chunk 256] [--steps 200]
        [--seed 0] [--out outputs/sweep] [--resume] [--executor local|dask --scheduler ADDR]
        [--on-nonfinite report|fail] [--progress-every 30]
        [--coordinator HOST:PORT --num-processes N --process-id I]

Writes under --out (and prints where): ``<system>/``, one run directory per system (zarr; read it,
finished or not, with `jaxsoa.workflows.store.read_sweep`: inputs, outputs and the per-sample
``done`` mask), ``sweep_<system>.png`` (histograms, once a system is complete), and
``sweep_summary.md`` / ``.json`` (per output: mean / std / quantiles over the finite samples done,
the number of non-finite ones, the throughput), also written when the sweep stops early.

* ``--resume`` continues the run directories in --out: only the chunks not yet committed are
  computed, and the result equals an uninterrupted run bit for bit. The parameters (count, chunk,
  steps, seed) must be those of the first run (a difference is refused, naming it). Without
  ``--resume`` an existing run is never overwritten.
* SIGINT / SIGTERM: the chunk being fetched is committed, the one in flight dropped; the command
  prints the samples saved and the command that resumes, and exits 130 / 143.
* ``--executor dask --scheduler tcp://HOST:8786``: the chunks run as tasks on a Dask cluster
  (`jaxsoa.workflows.executors.DaskExecutor`); this process writes the results.
* Multi-host: the three ``--coordinator`` options call `jax.distributed.initialize`; every process
  runs the same command, process 0 writes.

Exit status: 0 done; 1 a write or executor error (its message names the path; the run stays
resumable); 2 a usage error (a bad option, an unwritable --out, an existing run without --resume,
a resume with other parameters); 3 done, but with non-finite outputs under ``--on-nonfinite fail``;
130 / 143 stopped by SIGINT / SIGTERM.
"""

import json
import pathlib
import shlex
import signal
import sys
import time
from typing import NamedTuple

import jax
import matplotlib
import numpy as np

from experiments import sweep_cli
from experiments._common import markdown_table, save_figure
from experiments.sweep_systems import DT, OMEGA, SYSTEMS, TETHER_DT, SweepSystem  # noqa: F401  (re-exported)
from jaxsoa.workflows.results import nonfinite_counts, summarize, write_atomic
from jaxsoa.workflows.runner import StopOnSignals, run_sweep
from jaxsoa.workflows.sharding import initialize_distributed
from jaxsoa.workflows.store import (
    SweepExistsError,
    SweepMismatchError,
    differences,
    open_store,
    probe_writable,
    read_sweep,
)

matplotlib.use("Agg")
PROG = "python -m experiments sweep"
STATS = ("mean", "std", "q5", "q50", "q95", "max")


class SweepRun(NamedTuple):
    """What `run` did: summary ``rows``, ``throughput`` (one dict per system run), ``outcomes``
    {system: `SweepOutcome`}, ``nonfinite`` {system: {output: count}} over the samples done."""
    rows: list
    throughput: list
    outcomes: dict
    nonfinite: dict


def parameters(system: str, count: int, chunk: int, steps: int, seed: int) -> dict:
    """The parameters a run directory is created with and a resume must match."""
    return {"system": system, "count": count, "chunk": chunk, "steps": steps, "seed": seed,
            "dt": TETHER_DT if system == "tether" else DT}


def check_out(out_dir, systems, params: dict, resume: bool):
    """Before any compute: --out writable, and each system's run directory absent, or present with
    ``resume`` and the same parameters (SweepExistsError / SweepMismatchError otherwise)."""
    probe_writable(out_dir)
    for system in systems:
        path = pathlib.Path(out_dir) / system
        if not (path / "zarr.json").is_file():
            continue
        store = open_store(path)
        if not resume:
            done = int(store.done_samples().sum())
            raise SweepExistsError(f"{path} already holds a sweep ({done} of {store.count} samples done): "
                                   "pass --resume to continue it, or choose another --out")
        changed = differences({"parameters": store.record["parameters"]}, {"parameters": params[system]})
        if changed:
            raise SweepMismatchError(f"{path} was run with other parameters: {'; '.join(changed)}")


def saved(out_dir, systems) -> list[str]:
    """"system: n of N samples in DIR" for each system with a run directory."""
    lines = []
    for system in systems:
        path = pathlib.Path(out_dir) / system
        if (path / "zarr.json").is_file():
            store = open_store(path)
            lines.append(f"{system}: {int(store.done_samples().sum())} of {store.count} samples saved in {path}")
    return lines


def summary_rows(system: str, spec: SweepSystem, inputs: dict, outputs: dict):
    """Table rows (system, group, output, n, finite, nonfinite, stats...) over the given samples,
    all and per group value; statistics over the finite samples only."""
    n = len(next(iter(outputs.values())))
    groups = [("all", np.ones(n, bool))]
    if spec.group is not None:
        groups += [(f"{spec.group} {g}", inputs[spec.group] == g) for g in np.unique(inputs[spec.group])]
    rows = []
    for label, mask in groups:
        if not mask.any():
            continue
        for name, stats in summarize({k: v[mask] for k, v in outputs.items()}).items():
            rows.append({"system": system, "group": label, "output": name, "n": stats["count"],
                         "finite": stats["finite"], "nonfinite": stats["nonfinite"], **{k: stats[k] for k in STATS}})
    return rows


def plot_histograms(path, system: str, spec: SweepSystem, inputs: dict, outputs: dict):
    import matplotlib.pyplot as plt

    names = list(outputs)
    fig, axes = plt.subplots(1, len(names), figsize=(3.6 * len(names), 3.0))
    groups = np.unique(inputs[spec.group]) if spec.group else [None]
    for ax, name in zip(np.atleast_1d(axes), names, strict=True):
        values = outputs[name].reshape(len(outputs[name]), -1)
        finite = values[np.isfinite(values)]
        bins = np.histogram_bin_edges(finite, bins=30) if finite.size else 30
        for g in groups:
            mask = np.ones(len(values), bool) if g is None else inputs[spec.group] == g
            chosen = values[mask]
            ax.hist(chosen[np.isfinite(chosen)], bins=bins, alpha=0.6, label=None if g is None else f"{spec.group} {g}")
        ax.set(xlabel=spec.outputs.get(name, name), ylabel="samples")
        if g is not None:
            ax.legend(fontsize=7)
    fig.suptitle(f"{system}: {spec.description} ({len(values)} samples)", fontsize=9)
    fig.tight_layout()
    save_figure(fig, path, dpi=100)
    plt.close(fig)


def markdown(rows, throughput) -> str:
    head = ["system", "group", "output", "n", "nonfinite", *STATS]
    stats = markdown_table(head, ([f"{r[h]:.4g}" if isinstance(r[h], float) else r[h] for h in head] for r in rows))
    speed = markdown_table(("system", "samples done", "computed now", "steps", "devices", "chunk",
                            "wall s (compile included)", "samples/s"),
                           ((t["system"], f"{t['done']} of {t['count']}", t["computed"], t["steps"], t["devices"],
                             t["chunk"], f"{t['wall_s']:.2f}", f"{t['samples_per_s']:.1f}") for t in throughput))
    return f"{stats}\n\n{speed}"


def merge_previous(path, systems, rows, throughput, nonfinite):
    """This run's summary (rows, throughput, nonfinite) of `systems` joined with the entries of the
    other systems in the summary already at `path` (a sweep of another system into the same --out), so
    no system's summary is lost."""
    try:
        old = json.loads(pathlib.Path(path).read_text())
    except (OSError, ValueError):
        return rows, throughput, nonfinite
    keep = [s for s in dict.fromkeys(r["system"] for r in old.get("throughput", [])) if s not in systems]
    return ([r for r in old.get("rows", []) if r["system"] in keep] + rows,
            [t for t in old.get("throughput", []) if t["system"] in keep] + throughput,
            {**{s: n for s, n in old.get("nonfinite", {}).items() if s in keep}, **nonfinite})


def run(out_dir, systems=("space_arm", "dual_arm"), count=512, chunk=256, steps=200, seed=0, *, resume=False,
        executor=None, stop=None, progress=True, progress_every=30.0, command=None) -> SweepRun:
    """Sweep each system of ``systems`` over ``count`` samples of ``steps`` RK4 steps into the run
    directories ``out_dir/<system>`` (module doc), in chunks of ``chunk`` samples; process 0 writes
    the plots and the summary. ``stop()`` ends the sweep after the chunk being committed;
    ``progress``: a bar on a terminal, else a line at most every ``progress_every`` seconds."""
    unknown = [s for s in systems if s not in SYSTEMS]
    if unknown:
        raise ValueError(f"'system' {unknown[0]!r} is not one of {sorted(SYSTEMS)}")
    if steps < 1:
        raise ValueError(f"'steps' must be >= 1, got {steps}")
    out_dir, writer = pathlib.Path(out_dir), jax.process_index() == 0
    params = {s: parameters(s, count, chunk, steps, seed) for s in systems}
    if writer:
        check_out(out_dir, systems, params, resume)
        print(f"writing to {out_dir.resolve()}: " + ", ".join(f"{s}/" for s in systems), flush=True)
    rows, throughput, outcomes, nonfinite = [], [], {}, {}
    for system in systems:
        if stop is not None and stop():              # stopped at the end of the previous system
            break
        spec = SYSTEMS[system]
        batch = spec.sample(np.random.default_rng([seed, list(SYSTEMS).index(system)]), count)  # per-system stream
        if writer and resume and (out_dir / system / "zarr.json").is_file():
            done = int(open_store(out_dir / system).done_samples().sum())
            print(f"{system}: resuming: {done} of {count} samples already done", flush=True)
        bar = sweep_cli.Progress(system, count, progress_every) if writer and progress else None
        start = time.perf_counter()
        try:
            outcome = run_sweep(spec.simulator(steps), batch, out_dir / system, chunk_size=chunk,
                                parameters=params[system], resume=resume, executor=executor, stop=stop,
                                on_chunk=bar, notes={"command": command or []})
        finally:
            if bar is not None:
                bar.close()
        wall = time.perf_counter() - start
        outcomes[system] = outcome
        throughput.append({"system": system, "count": count, "done": outcome.done, "computed": outcome.computed,
                           "steps": steps, "devices": jax.device_count(), "chunk": outcome.chunk, "wall_s": wall,
                           "samples_per_s": outcome.computed / wall})
        if writer:
            for change in outcome.environment_changes:
                print(f"note: {system} was started in another environment ({change}); results may differ in round-off")
            data = read_sweep(out_dir / system)
            inputs = {k: v[data.done] for k, v in data.inputs.items()}
            outputs = {k: v[data.done] for k, v in data.outputs.items()}
            nonfinite[system] = {k: n for k, n in nonfinite_counts(outputs).items() if n}
            if outcome.done:
                rows += summary_rows(system, spec, inputs, outputs)
            if outcome.complete:
                plot_histograms(out_dir / f"sweep_{system}.png", system, spec, inputs, outputs)
        if outcome.stopped:
            break
    if writer:
        rows, throughput, nonfinite = merge_previous(out_dir / "sweep_summary.json", list(outcomes), rows, throughput,
                                                     nonfinite)
        table = markdown(rows, throughput)
        write_atomic(out_dir / "sweep_summary.md", table + "\n")
        write_atomic(out_dir / "sweep_summary.json", json.dumps({"rows": rows, "throughput": throughput,
                                                                 "nonfinite": nonfinite}, indent=1))
        print(table)
        print(f"wrote {', '.join(f'{s}/' for s in outcomes)}, sweep_summary.md and sweep_summary.json under "
              f"{out_dir.resolve()}", flush=True)
    return SweepRun(rows, throughput, outcomes, nonfinite)


def main(argv=None) -> int:
    """Run the command; returns the exit status (module doc)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = sweep_cli.parser(__doc__, sorted(SYSTEMS))
    args = parser.parse_args(argv)
    sweep_cli.check_combinations(parser, args)
    initialize_distributed(args.coordinator, args.num_processes, args.process_id)
    jax.config.update("jax_enable_x64", True)
    writer = jax.process_index() == 0
    executor = sweep_cli.executor(args)
    resume = f"{PROG} {shlex.join(argv if '--resume' in argv else [*argv, '--resume'])}"
    if writer:                                     # fail early: before any compute
        try:
            check_out(args.out, args.system, {s: parameters(s, args.count, args.chunk, args.steps, args.seed)
                                              for s in args.system}, args.resume)
        except (OSError, SweepExistsError, SweepMismatchError) as error:
            parser.error(f"argument --out: {sweep_cli.error_text(error)}")
    try:
        with StopOnSignals() as stop:
            result = run(args.out, args.system, args.count, args.chunk, args.steps, args.seed, resume=args.resume,
                         executor=executor, stop=stop, progress=True, progress_every=args.progress_every,
                         command=[PROG, *argv])
    except (SweepExistsError, SweepMismatchError) as error:
        parser.error(f"argument --out: {error}")
    except OSError as error:                       # a full disk, a lost scheduler: the run stays resumable
        print(f"{PROG}: error: {sweep_cli.error_text(error)}", file=sys.stderr)
        if writer:
            print("\n".join(saved(args.out, args.system)) + f"\nresume with: {resume}", file=sys.stderr)
        return 1
    finished = len(result.outcomes) == len(args.system) and all(o.complete for o in result.outcomes.values())
    if stop.received is not None and not finished:
        if writer:
            print(f"stopped by {signal.Signals(stop.received).name}: " + "; ".join(saved(args.out, args.system))
                  + f"\nresume with: {resume}", file=sys.stderr)
        return stop.exit_code
    return sweep_cli.nonfinite_status(result.nonfinite, args.on_nonfinite, writer)


if __name__ == "__main__":
    sys.exit(main())
