"""The run directory of a chunked, resumable sweep: a zarr group (zarr format 3, which zarr-python,
TensorStore, zarrs and zarr.js read) holding the sweep's record and its per-sample arrays.

    DIR/zarr.json         the group; attribute ``"jaxsoa_sweep"``: the record (below)
    DIR/inputs/<name>     (N, ...) per-sample inputs      } one zarr chunk = one sweep chunk of C
    DIR/outputs/<name>    (N, ...) per-sample outputs     } samples along axis 0 (the last one shorter)
    DIR/done              (K,) bool, K = ceil(N / C): chunk k is committed

Rows of chunks not yet done hold the fill value (NaN for floats, 0 for integers, False for booleans):
`read_sweep` returns them with the per-sample ``done`` mask, so the finished samples of an
unfinished run can be read at any time (``outputs[name][done]``).

**Commit protocol.** Chunk k writes its input and output rows, one zarr chunk file per array (zarr's
local store writes each to a temporary file and renames it into place), and only then ``done[k]``
(its own file). Readers and resumes trust only committed chunks, so a crash, a signal or a full
disk at any moment leaves every committed chunk intact and the rest to recompute. A new store is
built in a temporary sibling directory and renamed to DIR in one step: DIR is either a complete,
empty store or absent. The record is written once, at creation, and never rewritten.

**Record.** ``count`` N, ``chunk`` C, ``parameters`` (the caller's JSON dict: seed, steps, ...),
``inputs`` / ``outputs`` ({name: {"shape": per-sample shape, "dtype"}}), ``fingerprint`` (SHA-256
of the input arrays), ``environment`` (versions, devices, creation time) and ``notes`` (free JSON,
e.g. the command line). Reopening with ``resume=True`` compares all but the environment and the
notes and refuses with a `SweepMismatchError` naming every field that differs; environment changes
are only reported (`environment_changes`).
"""

import hashlib
import json
import os
import pathlib
import platform
import shutil
import time
import uuid
from importlib import metadata
from typing import NamedTuple

import numpy as np

RECORD_KEY = "jaxsoa_sweep"
FORMAT = 1
COMPARED = ("format", "count", "chunk", "inputs", "outputs", "fingerprint")


class SweepMismatchError(ValueError):
    """A resumed sweep's parameters differ from those stored in its run directory."""


class SweepExistsError(FileExistsError):
    """The run directory already holds a sweep (or other files) and ``resume`` was not asked for."""


class SweepData(NamedTuple):
    """A run directory read back: ``inputs`` / ``outputs`` {name: (N, ...) numpy}, ``done`` (N,)
    bool (the committed samples), ``record`` (dict, module doc)."""
    inputs: dict
    outputs: dict
    done: np.ndarray
    record: dict


def require_zarr():
    """The zarr module, or an ImportError saying how to install it."""
    try:
        import zarr
    except ImportError as error:
        raise ImportError("sweep run directories need zarr: pip install 'jaxsoa[sweeps]' (or pip install zarr)") \
            from error
    return zarr


def probe_writable(path) -> pathlib.Path:
    """Create the folder ``path`` (and its parents) and write, fsync and remove a probe file in it,
    so that an unwritable or full location fails before any compute. OSError naming the path."""
    path = pathlib.Path(path)
    probe = path / f".write-probe-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        path.mkdir(parents=True, exist_ok=True)
        with open(probe, "wb") as f:
            f.write(b"jaxsoa write probe\n")
            f.flush()
            os.fsync(f.fileno())
    except OSError as error:
        raise OSError(error.errno, f"cannot write to {path}: {error.strerror}", str(path)) from error
    finally:
        try:
            probe.unlink(missing_ok=True)
        except OSError:
            pass
    return path


def describe(arrays: dict, batched: bool = True) -> dict:
    """{name: {"shape": per-sample shape, "dtype": str}} of {name: array (N, ...)} (``batched``)
    or of per-sample shapes (anything with ``shape`` and ``dtype``, e.g. `jax.ShapeDtypeStruct`)."""
    return {k: {"shape": [int(n) for n in (v.shape[1:] if batched else v.shape)], "dtype": np.dtype(v.dtype).str}
            for k, v in sorted(arrays.items())}


def fingerprint(arrays: dict) -> str:
    """SHA-256 (hex) of {name: array}: names, shapes, dtypes and bytes, in name order."""
    digest = hashlib.sha256()
    for name in sorted(arrays):
        x = np.ascontiguousarray(arrays[name])
        digest.update(json.dumps([name, list(x.shape), x.dtype.str]).encode())
        digest.update(x.tobytes())
    return digest.hexdigest()


def environment(devices=()) -> dict:
    """Versions of the packages that compute and store a sweep, the devices, the creation time."""
    def version(name):
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    return {**{name: version(name) for name in ("jaxsoa", "jax", "jaxlib", "numpy", "zarr")},
            "python": platform.python_version(), "devices": [str(d) for d in devices],
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}


def sweep_record(count: int, chunk: int, inputs: dict, outputs: dict, parameters=None, devices=(),
                 notes=None) -> dict:
    """The record of a new sweep: ``inputs`` {name: (N, ...) array}, ``outputs`` {name: per-sample
    shape/dtype} (`describe` with ``batched=False``), ``parameters`` a JSON-serialisable dict
    (compared on resume), ``notes`` one more (e.g. the command line; recorded, never compared). count and
    chunk are positive integers (ValueError naming them)."""
    for name, value in (("count", count), ("chunk", chunk)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
            raise ValueError(f"'{name}' must be a positive integer, got {value!r}")
    return {"format": FORMAT, "count": int(count), "chunk": int(chunk),
            "parameters": json.loads(json.dumps(parameters or {})), "inputs": describe(inputs),
            "outputs": describe(outputs, batched=False), "fingerprint": fingerprint(inputs),
            "environment": environment(devices), "notes": json.loads(json.dumps(notes or {}))}


def differences(stored: dict, requested: dict) -> list[str]:
    """The fields of two records that differ, one ``"name: stored …, requested …"`` string each
    (each parameter separately; the environment is not compared)."""
    out = []
    for key in COMPARED:
        if stored.get(key) != requested.get(key):
            what = "the input arrays" if key == "fingerprint" else key
            out.append(f"{what}: stored {stored.get(key)!r}, requested {requested.get(key)!r}")
    old, new = stored.get("parameters", {}), requested.get("parameters", {})
    for key in sorted(set(old) | set(new)):
        if old.get(key) != new.get(key):
            out.append(f"{key}: stored {old.get(key, '(absent)')!r}, requested {new.get(key, '(absent)')!r}")
    return out


def environment_changes(stored: dict, current: dict) -> list[str]:
    """Package versions and devices that differ between two environments (not an error: results
    may still differ in round-off)."""
    keys = ("jaxsoa", "jax", "jaxlib", "numpy", "zarr", "devices")
    return [f"{k}: stored {stored.get(k)!r}, now {current.get(k)!r}" for k in keys if stored.get(k) != current.get(k)]


def _fill(dtype):
    dtype = np.dtype(dtype)
    return np.nan if dtype.kind in "fc" else (False if dtype.kind == "b" else 0)


class SweepStore:
    """An open run directory (module doc). Host side; not thread-safe (one writer)."""

    def __init__(self, path, group, record):
        self.path, self.group, self.record = pathlib.Path(path), group, record
        self.count, self.chunk = record["count"], record["chunk"]
        self.n_chunks = -(-self.count // self.chunk)
        self._arrays = {(kind, name): group[f"{kind}/{name}"]
                        for kind in ("inputs", "outputs") for name in record[kind]}

    def done(self) -> np.ndarray:
        """(K,) bool: the committed chunks."""
        return np.asarray(self.group["done"][:], bool)

    def done_samples(self) -> np.ndarray:
        """(N,) bool: the samples of committed chunks."""
        return np.repeat(self.done(), self.chunk)[:self.count]

    def rows(self, k: int) -> slice:
        """The sample rows of chunk k."""
        return slice(k * self.chunk, min(self.count, (k + 1) * self.chunk))

    def write_chunk(self, k: int, inputs: dict, outputs: dict):
        """Commit chunk k: its input and output rows {name: (rows, ...)} (exactly the record's
        names), then ``done[k]``. OSError (disk full, ...) naming the run directory and chunk."""
        rows = self.rows(k)
        for kind, arrays in (("inputs", inputs), ("outputs", outputs)):
            if set(arrays) != set(self.record[kind]):
                raise ValueError(f"chunk {k}: {kind} {sorted(arrays)}, expected {sorted(self.record[kind])}")
        try:
            for kind, arrays in (("inputs", inputs), ("outputs", outputs)):
                for name, values in arrays.items():
                    self._arrays[kind, name][rows] = np.asarray(values)
            self.group["done"][k] = True
        except OSError as error:
            self._discard(k)
            raise OSError(error.errno, f"writing chunk {k} of the sweep in {self.path}: {error.strerror or error}",
                          str(self.path)) from error

    def _discard(self, k: int):
        """Best effort: delete the files an uncommitted chunk k wrote, so it reads as fill values."""
        for array in self._arrays.values():
            key = array.metadata.encode_chunk_key((k, *[0] * (array.ndim - 1)))
            try:
                (self.path / array.path / key).unlink(missing_ok=True)
            except OSError:
                pass

    def read(self) -> SweepData:
        """Every array and the done mask (`SweepData`)."""
        arrays = {kind: {name: self._arrays[kind, name][:] for name in self.record[kind]}
                  for kind in ("inputs", "outputs")}
        return SweepData(arrays["inputs"], arrays["outputs"], self.done_samples(), self.record)

    def remove_partial_files(self) -> int:
        """Delete temporary files a killed writer left behind (``*.partial``); returns their number."""
        leftovers = list(self.path.rglob("*.partial"))
        for p in leftovers:
            p.unlink(missing_ok=True)
        return len(leftovers)


def open_store(path, mode: str = "r") -> SweepStore:
    """Open an existing run directory (``mode`` "r" or "r+"); FileNotFoundError / ValueError if
    ``path`` is not one."""
    zarr, path = require_zarr(), pathlib.Path(path)
    if not (path / "zarr.json").is_file():
        raise FileNotFoundError(f"{path} is not a sweep run directory (no zarr.json)")
    group = zarr.open_group(store=str(path), mode=mode)
    record = group.attrs.asdict().get(RECORD_KEY)
    if record is None:
        raise ValueError(f"{path} is a zarr group but not a sweep run directory (no '{RECORD_KEY}' attribute)")
    return SweepStore(path, group, record)


def create_store(path, record: dict) -> SweepStore:
    """A new, empty run directory at ``path`` (absent or an empty folder), built in a temporary
    sibling and renamed into place. SweepExistsError if ``path`` holds anything."""
    zarr, path = require_zarr(), pathlib.Path(path)
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise SweepExistsError(f"{path} exists and is not an empty folder: choose another directory")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.creating")
    try:
        group = zarr.open_group(store=str(tmp), mode="w-")
        n_chunks = -(-record["count"] // record["chunk"])
        for kind in ("inputs", "outputs"):
            for name, spec in record[kind].items():
                group.create_array(f"{kind}/{name}", shape=(record["count"], *spec["shape"]), dtype=spec["dtype"],
                                   chunks=(record["chunk"], *spec["shape"]), fill_value=_fill(spec["dtype"]))
        group.create_array("done", shape=(n_chunks,), chunks=(1,), dtype=bool, fill_value=False)
        group.attrs[RECORD_KEY] = record
        os.rename(tmp, path)              # atomic; replaces an empty folder
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return open_store(path, "r+")


def open_or_create(path, record: dict, resume: bool = False) -> SweepStore:
    """The run directory at ``path`` for ``record``: created if absent or empty; with ``resume``,
    an existing one with an equal record (else `SweepMismatchError` listing the differences); without,
    an existing sweep is refused (`SweepExistsError`), never overwritten."""
    path = pathlib.Path(path)
    if not (path / "zarr.json").is_file():
        return create_store(path, record)
    store = open_store(path, "r+")
    if not resume:
        done = int(store.done_samples().sum())
        raise SweepExistsError(f"{path} already holds a sweep ({done} of {store.count} samples done): resume it, "
                               "or choose another directory")
    changed = differences(store.record, record)
    if changed:
        raise SweepMismatchError(f"the sweep in {path} was run with different parameters: " + "; ".join(changed)
                            + ". Resume with the same parameters, or choose another directory")
    store.remove_partial_files()
    return store


def read_sweep(path) -> SweepData:
    """The arrays, done mask and record of a run directory, finished or not (`SweepData`)."""
    return open_store(path, "r").read()
