"""Where the chunks of a resumable sweep (`jaxsoa.workflows.runner.run_sweep`) are computed.

A `ChunkTask` is the per-chunk program: ``jit(shard_map(vmap(fn)))`` over the local devices
(`jaxsoa.workflows.sharding.chunk_program`), compiled once per process for a fixed chunk of C
samples (the last chunk padded by repeating its last sample, the padding cut off again). An
executor maps it over the chunks still to do and yields ``(k, outputs of chunk k)`` as they finish;
the caller commits each to the run directory. Closing the iterator early (a stop request) drops
the chunks in flight.

* `LocalExecutor`: this process (or every process of a `jax.distributed` run, which all iterate
  the same chunks in the same order; the mesh spans every process's devices). Chunk k + 1 is
  dispatched before chunk k is fetched, so the host writes chunk k while the devices compute.
* `DaskExecutor`: each chunk is a task on a `dask.distributed` cluster; a worker unpickles the task
  once, compiles it once and runs every chunk it is given on its own devices. Failed tasks are
  retried (``retries``); a task on a worker that dies is rescheduled by the Dask scheduler (up to
  its ``distributed.scheduler.allowed-failures``). Results come back to the client, which alone
  writes the store: the workers need no access to the run directory. At most ``in_flight`` tasks
  (default twice the workers) are queued, so memory stays bounded on both sides.

Bitwise equality between executors holds when the per-device batch is the same (C / devices per
process or worker) and XLA flags match (`jaxsoa.workflows.sharding`: results depend on the device
count only through the vectorised batch size).
"""

import math
import pickle
import uuid

import jax

from jaxsoa.workflows.results import flatten
from jaxsoa.workflows.sharding import chunk_program, device_mesh, pad_rows, to_host

_WORKER_TASKS = {}                      # token -> ChunkTask, per worker process (unpickled and compiled once)


def require_dask():
    """The `dask.distributed` module, or an ImportError saying how to install it."""
    try:
        import distributed
    except ImportError as error:
        raise ImportError("the Dask executor needs dask.distributed: pip install 'jaxsoa[sweeps]' "
                          "(or pip install 'dask[distributed]')") from error
    return distributed


class ChunkTask:
    """The per-chunk program of a sweep: ``fn(sample) -> PyTree`` on chunks of ``chunk`` samples.
    Picklable (cloudpickle) for remote workers; the compiled program is rebuilt, once, where the
    task runs, with the creator's ``jax_enable_x64`` setting."""

    def __init__(self, fn, chunk: int, x64=None):
        self.fn, self.chunk = fn, int(chunk)
        self.x64 = bool(jax.config.jax_enable_x64) if x64 is None else bool(x64)
        self.token = uuid.uuid4().hex
        self._programs = {}

    def __getstate__(self):
        return {**self.__dict__, "_programs": {}}

    def launch(self, rows, devices=None):
        """Dispatch one chunk of host rows {leaf: (n ≤ C, ...)} on ``devices`` (default all);
        returns a pending handle for `fetch`."""
        if bool(jax.config.jax_enable_x64) != self.x64:
            jax.config.update("jax_enable_x64", self.x64)
        key = None if devices is None else tuple(devices)
        if key not in self._programs:
            mesh = device_mesh(devices)
            self._programs[key] = (chunk_program(self.fn, mesh), math.ceil(self.chunk / mesh.size) * mesh.size)
        program, padded = self._programs[key]
        count = len(jax.tree_util.tree_leaves(rows)[0])
        return count, program(jax.tree_util.tree_map(lambda x: pad_rows(x, padded), rows))

    @staticmethod
    def fetch(pending) -> dict:
        """The flat outputs {name: (n, ...) numpy} of a launched chunk (padding cut off)."""
        count, result = pending
        return {name: value[:count] for name, value in flatten(to_host(result)).items()}

    def __call__(self, rows, devices=None) -> dict:
        return self.fetch(self.launch(rows, devices))


class LocalExecutor:
    """Chunks on this process's devices (``devices``, default all devices of all processes)."""

    def __init__(self, devices=None):
        self.devices = None if devices is None else list(devices)

    def chunk_multiple(self) -> int:
        """Chunk lengths are rounded up to a multiple of this (the device count)."""
        return device_mesh(self.devices).size

    def is_writer(self) -> bool:
        """Whether this process writes the run directory (process 0 of a multi-process run)."""
        return jax.process_index() == 0

    def map_chunks(self, task: ChunkTask, chunks, rows):
        """Yield ``(k, outputs)`` for each k of ``chunks`` in order; ``rows(k)`` the host input rows."""
        pending = None
        for k in [*chunks, None]:
            launched = None if k is None else (k, task.launch(rows(k), self.devices))
            if pending is not None:
                yield pending[0], task.fetch(pending[1])
            pending = launched


def _run_remote(payload: bytes, token: str, x64: bool, rows) -> dict:
    """Worker side of `DaskExecutor`: run chunk ``rows`` with the task unpickled once per worker.
    ``jax_enable_x64`` is set first: arrays the function closes over (a model) are unpickled as
    JAX arrays, and would be cast to float32 under the worker's default setting."""
    task = _WORKER_TASKS.get(token)
    if task is None:
        if bool(jax.config.jax_enable_x64) != x64:
            jax.config.update("jax_enable_x64", x64)
        _WORKER_TASKS.clear()                # one sweep at a time per worker: drop older programs
        task = _WORKER_TASKS[token] = pickle.loads(payload)
    return task(rows)


class DaskExecutor:
    """Chunks as tasks on a `dask.distributed` cluster: pass a ``client`` (e.g. of a
    `LocalCluster` or a dask-jobqueue `SLURMCluster`) or a ``scheduler`` address
    ("tcp://host:8786"; a client is opened and closed around the sweep). ``retries``: re-runs of
    a task that raised; ``in_flight``: most tasks queued at once (default 2 × workers, at least 2)."""

    def __init__(self, scheduler=None, client=None, retries: int = 3, in_flight=None):
        if (scheduler is None) == (client is None):
            raise ValueError("DaskExecutor needs exactly one of 'scheduler' and 'client'")
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ValueError(f"'retries' must be a non-negative integer, got {retries!r}")
        self.scheduler, self.client, self.retries, self.in_flight = scheduler, client, retries, in_flight

    def chunk_multiple(self) -> int:
        return 1                              # each worker pads a chunk to a multiple of its own devices

    def is_writer(self) -> bool:
        return True

    def map_chunks(self, task: ChunkTask, chunks, rows):
        """Yield ``(k, outputs)`` for each k of ``chunks`` as the tasks finish (any order)."""
        import cloudpickle

        distributed = require_dask()
        client = self.client or distributed.Client(self.scheduler)
        payload = cloudpickle.dumps(task)
        queue, pending, futures = iter(chunks), {}, distributed.as_completed()
        workers = len(client.scheduler_info().get("workers", {}))
        window = self.in_flight or max(2, 2 * workers)

        def submit():
            k = next(queue, None)
            if k is not None:
                future = client.submit(_run_remote, payload, task.token, task.x64, rows(k), retries=self.retries,
                                       key=f"jaxsoa-chunk-{task.token}-{k}")
                pending[future.key] = (k, future)
                futures.add(future)

        try:
            for _ in range(window):
                submit()
            for future in futures:
                k, _ = pending.pop(future.key)
                outputs = future.result()
                future.release()
                yield k, outputs
                submit()
        finally:
            if pending:                       # stopped early or failed: drop the queued chunks
                client.cancel([f for _, f in pending.values()])
            if self.client is None:
                client.close()
