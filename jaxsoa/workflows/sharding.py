"""Monte Carlo sweeps over every device: `sharded_map(fn, batch)` evaluates a per-sample function
over a batch PyTree, splits the batch axis across a 1-D mesh of the devices, and streams the results
to host numpy in fixed-size chunks.

    out = sharded_map(lambda s: {"peak": simulate(model, s["q0"], s["v0"])}, {"q0": Q0, "v0": V0},
                      chunk_size=4096, progress=True)      # out["peak"]: numpy (N, ...)

How it works (usage in docs/user_guide.md §4):

* **Sharding.** ``jit(shard_map(vmap(fn)))`` over a 1-D `Mesh` of the devices (axis ``"batch"``),
  inputs placed with `NamedSharding(mesh, P("batch"))`. Each device runs `vmap(fn)` on its own
  contiguous block of a chunk. `shard_map` rather than `jit` with in/out shardings, because samples
  are independent: with `shard_map` the per-device program is *exactly* `vmap(fn)` on the local
  block, so XLA's partitioner can never insert a collective (for a gather over a traced index, a
  sort) and a sample's result depends on the device count only through the per-device batch size
  that XLA vectorises (round-off: 3e-17 relative measured, tests/workflows/test_sharding.py).
* **Chunks.** The N samples are processed in chunks of C samples (C a multiple of the device
  count D; `chunk_size` is rounded *up* to one, default ``min(N, 1024 D)``), so device memory is
  bounded by two chunks in flight whatever N is. The last chunk is padded to C by repeating the
  last sample (a real, valid input: no NaN from zero quaternions) and the padding's results are cut
  off: all N samples come back, none twice. Every chunk has the same shape, so the program compiles
  **once** per call; chunk k + 1 is dispatched before chunk k is copied to the host.
* **Inputs** are host arrays (numpy, or anything `np.asarray` takes; raw ``uint32`` PRNG keys, not
  typed keys) with one leading batch axis; the whole batch stays on the host, only chunks go to the
  devices. Arrays that `fn` closes over (a model) go to every device whole.

Multi-host use (one process per host, e.g. several GPU nodes)::

    initialize_distributed("10.0.0.1:1234", num_processes=4, process_id=rank)   # before any JAX work
    out = sharded_map(fn, batch)           # the same call, the same full `batch`, on every process

`jax.distributed.initialize` joins the processes; `jax.devices()` then lists every process's
devices, the mesh spans them all, `jax.make_array_from_callback` hands each process only the rows
of its own devices, and `process_allgather` gives every process the full result (write files from
`jax.process_index() == 0` only). On CPU hosts the collectives use gloo (JAX's default; set it with
``jax.config.update("jax_cpu_collectives_implementation", "gloo")`` on versions without that
default). Tested: `initialize_distributed` with one process and 4 devices, through
experiments/sweep.py's ``--coordinator`` options (tests/workflows/test_sharding.py), and two
processes of 2 CPU devices each on the loopback address, whose durable sweep
(`jaxsoa.workflows.runner.run_sweep`, built on `chunk_program` and `to_host`) equals one process
with 4 devices bit for bit (tests/workflows/test_sweep_runner.py). Not tested here: processes on
separate hosts.
"""

import math

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P
from tqdm import tqdm

AXIS = "batch"
DEFAULT_CHUNK_PER_DEVICE = 1024


def initialize_distributed(coordinator=None, num_processes=None, process_id=None):
    """Join a multi-process run with `jax.distributed.initialize` (call it before any other JAX
    work). All three None: a single process, nothing to do (returns False). Otherwise all three
    are required: ``coordinator`` "host:port" of process 0, ``num_processes`` ≥ 1,
    ``0 ≤ process_id < num_processes``; returns True."""
    given = dict(coordinator=coordinator, num_processes=num_processes, process_id=process_id)
    if all(v is None for v in given.values()):
        return False
    missing = [name for name, v in given.items() if v is None]
    if missing:
        raise ValueError(f"multi-process run: '{missing[0]}' is required with the other options")
    if num_processes < 1:
        raise ValueError(f"'num_processes' must be >= 1, got {num_processes}")
    if not 0 <= process_id < num_processes:
        raise ValueError(f"'process_id' must be in [0, {num_processes}), got {process_id}")
    jax.distributed.initialize(coordinator_address=coordinator, num_processes=num_processes, process_id=process_id)
    return True


def device_mesh(devices=None) -> Mesh:
    """1-D `Mesh` (axis ``"batch"``) over ``devices`` (default: all devices of all processes)."""
    devices = jax.devices() if devices is None else list(devices)
    if not devices:
        raise ValueError("'devices' is empty")
    return Mesh(np.array(devices), (AXIS,))


def batch_count(batch) -> int:
    """Number of samples N of a batch PyTree: the common leading dimension of its leaves
    (ValueError naming the leaf otherwise)."""
    leaves = jax.tree_util.tree_leaves_with_path(batch)
    if not leaves:
        raise ValueError("'batch' has no arrays")
    for path, leaf in leaves:
        if np.ndim(leaf) == 0:
            raise ValueError(f"batch{jax.tree_util.keystr(path)} is a scalar: every leaf needs a leading batch axis")
    first_path, first = leaves[0]
    count = np.shape(first)[0]
    for path, leaf in leaves[1:]:
        if np.shape(leaf)[0] != count:
            raise ValueError(f"batch{jax.tree_util.keystr(path)} has leading dimension {np.shape(leaf)[0]}, "
                             f"expected {count} (that of batch{jax.tree_util.keystr(first_path)})")
    if count == 0:
        raise ValueError("'batch' has zero samples")
    return count


def chunk_length(count: int, n_devices: int, chunk_size=None) -> int:
    """Samples per compiled call: ``chunk_size`` (default ``min(count, 1024 n_devices)``) rounded up
    to a multiple of the device count. count ≥ 1 and n_devices ≥ 1 (ValueError naming them)."""
    for name, value in (("count", count), ("n_devices", n_devices)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
            raise ValueError(f"'{name}' must be a positive integer, got {value!r}")
    if chunk_size is None:
        chunk_size = min(count, DEFAULT_CHUNK_PER_DEVICE * n_devices)
    elif isinstance(chunk_size, bool) or not isinstance(chunk_size, int | np.integer) or chunk_size <= 0:
        raise ValueError(f"'chunk_size' must be a positive integer, got {chunk_size!r}")
    return math.ceil(chunk_size / n_devices) * n_devices


def pad_rows(x: np.ndarray, rows: int) -> np.ndarray:
    """x (k, ...) -> (rows, ...) by repeating its last row (a real, valid input)."""
    return x if x.shape[0] == rows else np.concatenate([x, np.repeat(x[-1:], rows - x.shape[0], axis=0)])


def to_host(tree):
    """A PyTree of (possibly sharded, possibly multi-process) device arrays as numpy arrays: every
    process gets the whole of every array (`process_allgather` when there are several processes)."""
    if jax.process_count() > 1:
        return multihost_utils.process_allgather(tree, tiled=True)
    return jax.tree_util.tree_map(np.asarray, tree)


def chunk_program(fn, mesh: Mesh):
    """``launch(rows) -> device PyTree``: dispatch one chunk of host rows (leading axis C, a multiple
    of ``mesh.size``) through ``jit(shard_map(vmap(fn)))`` over ``mesh`` (asynchronous; module doc).
    Every process passes the same whole chunk; each places only the rows of its own devices."""
    sharding = NamedSharding(mesh, P(AXIS))
    # check_vma=False: fn is per-sample code, unaware of the mesh (a scan carry started from a constant
    # would fail the varying-manual-axes type check); no collectives are involved, so nothing is lost
    compiled = jax.jit(jax.shard_map(jax.vmap(fn), mesh=mesh, in_specs=P(AXIS), out_specs=P(AXIS),
                                     check_vma=False))

    def launch(rows):
        placed = jax.tree_util.tree_map(
            lambda x: jax.make_array_from_callback(x.shape, sharding, lambda index, x=x: x[index]), rows)
        return compiled(placed)

    return launch


def sharded_map(fn, batch, *, chunk_size=None, devices=None, progress=False):
    """``fn(sample) -> PyTree`` over every sample of ``batch`` (a PyTree of arrays with a common
    leading axis N), sharded over ``devices`` in chunks (module doc). Returns the output PyTree as
    numpy arrays with leading axis N, in sample order. ``progress``: a tqdm bar (bool) or its label
    (str)."""
    count = batch_count(batch)
    mesh = device_mesh(devices)
    chunk = chunk_length(count, mesh.size, chunk_size)
    host = jax.tree_util.tree_map(np.asarray, batch)
    program = chunk_program(fn, mesh)

    def launch(start):                      # dispatch one chunk (asynchronous)
        return start, program(jax.tree_util.tree_map(lambda x: pad_rows(x[start:start + chunk], chunk), host))

    out, treedef, pending = None, None, None
    label = progress if isinstance(progress, str) else "sharded_map"
    with tqdm(total=count, desc=label, unit="sample", disable=not progress) as bar:
        for start in [*range(0, count, chunk), None]:
            launched = None if start is None else launch(start)
            if pending is not None:                                    # fetch the previous chunk
                done, result = pending
                leaves, treedef = jax.tree_util.tree_flatten(to_host(result))
                valid = min(chunk, count - done)                       # drop the padding rows
                if out is None:
                    out = [np.empty((count, *r.shape[1:]), r.dtype) for r in leaves]
                for o, r in zip(out, leaves, strict=True):
                    o[done:done + valid] = r[:valid]
                bar.update(valid)
            pending = launched
    return jax.tree_util.tree_unflatten(treedef, out)
