"""Durable, resumable Monte Carlo sweeps: `run_sweep(fn, batch, path)` evaluates a per-sample
function over a batch PyTree chunk by chunk, committing each finished chunk to a run directory
(`jaxsoa.workflows.store`), so that nothing finished is ever lost.

    outcome = run_sweep(lambda s: {"peak": simulate(model, s["q0"], s["v0"])}, {"q0": Q0, "v0": V0},
                        "runs/peak", chunk_size=4096, parameters={"seed": 0}, resume=True)
    data = read_sweep("runs/peak")          # data.outputs["peak"][data.done]: the finished samples

* **Chunks.** The N samples are cut into chunks of C samples (``chunk_size`` rounded up to the
  executor's device count; default ``min(N, 1024 × devices)``); chunk k holds samples
  [kC, min(N, (k + 1)C)), and every chunk runs the same compiled program (`executors.ChunkTask`).
* **Resume.** ``resume=True`` on an existing run directory checks that its record (N, C, the input
  arrays' fingerprint, the output shapes, ``parameters``) equals this call's, refusing with a
  `SweepMismatchError` naming what differs, and computes only the chunks not yet committed. A sample's
  result depends only on its inputs and its chunk's compiled program, so a resumed run equals an
  uninterrupted one bit for bit (same chunking, same inputs — PRNG keys included — same per-device
  batch). Without ``resume`` an existing sweep is refused (`SweepExistsError`), never overwritten.
* **Stopping.** ``stop()`` is polled after every committed chunk; when true the sweep returns
  (``stopped=True``) after dropping the chunks in flight. `StopOnSignals` makes SIGINT/SIGTERM
  such a stop request. An exception (a write error, a failed task) leaves every committed chunk.
* **Executors.** `executors.LocalExecutor` (default: every device of every process) or
  `executors.DaskExecutor` (a Dask cluster). With several `jax.distributed` processes every
  process calls `run_sweep` with the same arguments; process 0 opens and writes the run directory
  and broadcasts which chunks are done; stop requests and write errors are agreed on after every
  chunk, so all processes stop together.
"""

import pathlib
import signal
import threading
from typing import NamedTuple

import jax
import numpy as np
from jax.experimental import multihost_utils

from jaxsoa.workflows.executors import ChunkTask, LocalExecutor
from jaxsoa.workflows.results import flatten, path_name
from jaxsoa.workflows.sharding import DEFAULT_CHUNK_PER_DEVICE, batch_count, chunk_length
from jaxsoa.workflows.store import environment_changes, open_or_create, open_store, sweep_record

_OK, _STOP, _FAILED = 0, 1, 2


class SweepOutcome(NamedTuple):
    """What `run_sweep` did: the run directory ``path``; ``count`` N and ``chunk`` C; ``done``
    samples committed in total and ``computed`` by this call; ``complete`` (all N done),
    ``stopped`` (a stop request ended it early); ``environment_changes`` (strings: versions or
    devices that differ from the run's creation, empty when new)."""
    path: pathlib.Path
    count: int
    chunk: int
    done: int
    computed: int
    complete: bool
    stopped: bool
    environment_changes: tuple


class StopOnSignals:
    """``with StopOnSignals() as stop: run_sweep(..., stop=stop)``: the first SIGINT or SIGTERM is
    recorded (``received``: its number) instead of ending the process, so the sweep commits the
    chunk being fetched and returns; a second one runs the previous handler (KeyboardInterrupt,
    termination). ``exit_code``: 128 + the signal number (130 SIGINT, 143 SIGTERM), else 0. Outside
    the main thread no handler can be installed and it never requests a stop."""

    def __init__(self, signals=(signal.SIGINT, signal.SIGTERM)):
        self.signals, self.received, self._previous = tuple(signals), None, {}

    def _handle(self, signum, frame):
        if self.received is None:
            self.received = signum
            return
        signal.signal(signum, self._previous.get(signum, signal.SIG_DFL))
        signal.raise_signal(signum)

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self._previous = {s: signal.signal(s, self._handle) for s in self.signals}
        return self

    def __exit__(self, *exc):
        for s, handler in self._previous.items():
            signal.signal(s, handler)
        self._previous = {}

    def __call__(self) -> bool:
        return self.received is not None

    @property
    def exit_code(self) -> int:
        return 0 if self.received is None else 128 + int(self.received)


def _agree(flag: int) -> int:
    """The largest ``flag`` over all processes (a collective: every process calls it)."""
    if jax.process_count() == 1:
        return flag
    return int(np.max(multihost_utils.process_allgather(np.int32(flag))))


def _open(path, record, resume, writer, n_chunks):
    """(store or None, (K,) bool done chunks, environment changes): process 0 opens, all learn."""
    store, error = None, None
    if writer:
        try:
            store = open_or_create(path, record, resume)
        except Exception as caught:          # re-raised below, after the other processes know
            error = caught
    if jax.process_count() > 1:
        local = np.zeros(n_chunks + 1, np.int32)
        if store is not None:
            local[1:] = store.done()
        local[0] = _FAILED if error is not None else _OK
        shared = np.asarray(multihost_utils.broadcast_one_to_all(local))
        if shared[0] != _OK and error is None:
            raise RuntimeError(f"process 0 could not open the run directory {path} (see its error)")
    if error is not None:
        raise error
    done = store.done() if store is not None else shared[1:].astype(bool)
    changes = () if store is None else tuple(environment_changes(store.record["environment"], record["environment"]))
    return store, done, changes


def run_sweep(fn, batch, path, *, chunk_size=None, parameters=None, resume=False, executor=None, stop=None,
              on_chunk=None, notes=None) -> SweepOutcome:
    """``fn(sample) -> PyTree`` over every sample of ``batch`` (a PyTree of host arrays with a
    common leading axis N), committed chunk by chunk to the run directory ``path`` (module doc).
    ``parameters``: a JSON dict recorded with the run and compared on resume (``notes``: one
    recorded but not compared, e.g. the command line); ``executor``: a
    `LocalExecutor` (default) or `DaskExecutor`; ``stop()`` -> bool, polled after each chunk;
    ``on_chunk(done, count)`` is called after each commit (progress). Returns a `SweepOutcome`;
    read the results with `jaxsoa.workflows.store.read_sweep`."""
    path = pathlib.Path(path)
    count = batch_count(batch)
    executor = LocalExecutor() if executor is None else executor
    host = jax.tree_util.tree_map(np.asarray, batch)
    inputs = flatten(host)
    multiple = executor.chunk_multiple()
    writer = executor.is_writer()
    if chunk_size is None and resume and writer and (path / "zarr.json").is_file():
        chunk = open_store(path).chunk                           # resume: the stored chunking by default
    else:
        chunk = chunk_length(count, multiple, chunk_size if chunk_size is not None
                             else min(count, DEFAULT_CHUNK_PER_DEVICE * multiple))
    if jax.process_count() > 1:                                  # process 0's choice for every process
        chunk = int(multihost_utils.broadcast_one_to_all(np.int32(chunk)))
    sample = jax.tree_util.tree_map(lambda x: jax.ShapeDtypeStruct(x.shape[1:], x.dtype), host)
    outputs = {path_name(p): leaf for p, leaf in jax.tree_util.tree_leaves_with_path(jax.eval_shape(fn, sample))}
    devices = getattr(executor, "devices", None) or (jax.devices() if isinstance(executor, LocalExecutor) else ())
    record = sweep_record(count, chunk, inputs, outputs, parameters, devices, notes)
    n_chunks = -(-count // chunk)
    store, done_chunks, changes = _open(path, record, resume, writer, n_chunks)
    todo = [k for k in range(n_chunks) if not done_chunks[k]]

    def rows(k):
        return slice(k * chunk, min(count, (k + 1) * chunk))

    done = int(np.minimum(chunk, count - chunk * np.flatnonzero(done_chunks)).sum())
    computed, stopped = 0, False
    chunks = executor.map_chunks(ChunkTask(fn, chunk), todo,
                                 lambda k: jax.tree_util.tree_map(lambda x: x[rows(k)], host))
    try:
        for k, out in chunks:
            flag, error = _OK, None
            if store is not None:
                try:
                    store.write_chunk(k, {name: x[rows(k)] for name, x in inputs.items()}, out)
                except OSError as caught:
                    flag, error = _FAILED, caught
            if flag == _OK and stop is not None and stop():
                flag = _STOP
            flag = _agree(flag)
            if flag == _FAILED:
                raise error if error is not None else RuntimeError(f"process 0 failed to write {path} (see its error)")
            n = rows(k).stop - rows(k).start
            done, computed = done + n, computed + n
            if on_chunk is not None:
                on_chunk(done, count)
            if flag == _STOP:
                stopped = done < count
                break
    finally:
        chunks.close()
    return SweepOutcome(path, count, chunk, done, computed, done == count, stopped, changes)
