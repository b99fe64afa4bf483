"""Result files and summary statistics of sweeps (host side, numpy): a flat ``{name: array}`` of
per-sample results is summarised per name (`summarize`, over the finite samples, saying how many
were excluded) and written, with its metadata, to one ``.npz`` (`write_results`; `read_results`
reads it back without pickle). Every file is written atomically (`write_atomic`): to a temporary
file in the same folder, then renamed over the target, so a crash or a full disk never leaves a
truncated file and never destroys the previous version.

Names are flat strings; nested result PyTrees are flattened to ``"a/b"`` names by `flatten`.
Chunked, resumable sweeps keep their results in a run directory instead (`jaxsoa.workflows.store`).
"""

import contextlib
import io
import json
import os
import pathlib
import uuid

import jax
import numpy as np

METADATA_KEY = "__metadata_json__"
QUANTILES = (0.05, 0.5, 0.95)


def path_name(path) -> str:
    """The flat name ``"a/b"`` of a PyTree key path (dict keys, sequence indices, attribute names)."""
    return "/".join(str(getattr(k, "key", getattr(k, "idx", getattr(k, "name", k)))) for k in path)


def flatten(tree) -> dict:
    """{"a/b": numpy array} from a PyTree of arrays (names: `path_name`); ValueError when two leaves get one
    name (e.g. keys "a/b" and "a" → "b"), which would drop one of them."""
    flat = {}
    for path, leaf in jax.tree_util.tree_leaves_with_path(tree):
        name = path_name(path)
        if name in flat:
            raise ValueError(f"two results are both named '{name}': rename one (a '/' in a key nests names)")
        flat[name] = np.asarray(leaf)
    return flat


def nonfinite_counts(results: dict) -> dict:
    """{name: number of NaN/inf entries} of a flat results dict (0 for integer and boolean arrays)."""
    counts = {}
    for key, values in results.items():
        x = np.asarray(values)
        counts[key] = int(np.count_nonzero(~np.isfinite(x))) if np.issubdtype(x.dtype, np.inexact) else 0
    return counts


def summarize(results: dict, quantiles=QUANTILES) -> dict:
    """Per name: ``count`` (all entries), ``nonfinite`` (NaN/inf entries, excluded from the
    statistics), ``finite`` (= count − nonfinite), and mean, std (population, ddof = 0), min, max
    and the given quantiles (``q5``, ``q50``, ...; linear interpolation, numpy's default) over the
    finite entries only. A name with no finite entry gets NaN statistics. `quantiles`: a sequence of
    levels in [0, 1] whose keys differ (0.5 and 0.5000001 would share ``q50``); complex results are refused
    (the statistics are of real numbers)."""
    if np.ndim(quantiles) != 1:
        raise ValueError(f"argument 'quantiles' must be a sequence of levels in [0, 1], got {quantiles!r}")
    keys = [f"q{100 * q:g}" for q in quantiles]
    if len(set(keys)) != len(keys):
        raise ValueError(f"argument 'quantiles' = {list(quantiles)} gives repeated keys {keys}")
    summary = {}
    for key, values in results.items():
        if np.iscomplexobj(values):
            raise TypeError(f"results['{key}'] is complex: summarize real quantities (e.g. abs or real/imag parts)")
        x = np.asarray(values, np.float64).ravel()
        if x.size == 0:
            raise ValueError(f"results['{key}'] is empty")
        ok = x[np.isfinite(x)]
        stats = {"count": int(x.size), "nonfinite": int(x.size - ok.size), "finite": int(ok.size)}
        if ok.size:
            stats.update(mean=float(np.mean(ok)), std=float(np.std(ok)), min=float(np.min(ok)), max=float(np.max(ok)))
            levels = np.quantile(ok, quantiles)
        else:
            stats.update(mean=np.nan, std=np.nan, min=np.nan, max=np.nan)
            levels = np.full(len(quantiles), np.nan)
        stats.update({k: float(v) for k, v in zip(keys, levels, strict=True)})
        summary[key] = stats
    return summary


@contextlib.contextmanager
def atomic_path(path):
    """Yield a temporary path beside ``path`` (same folder, same suffix, so writers that infer a format or
    append one, as ``np.savez`` does, keep it) for the caller to write the whole file to; then fsync it
    and `os.replace` it over ``path`` in one step. On any error the temporary file is removed and
    ``path`` keeps its previous content. Creates the parent folders."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.{uuid.uuid4().hex}.partial{path.suffix}")
    try:
        yield tmp
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_atomic(path, data) -> pathlib.Path:
    """Write ``data`` (bytes, or str as UTF-8) to ``path`` atomically (`atomic_path`); returns the path."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data.encode() if isinstance(data, str) else data)
    return pathlib.Path(path)


def write_results(path, results: dict, metadata: dict) -> pathlib.Path:
    """Write ``results`` {name: array} and ``metadata`` (JSON-serialisable) to one ``.npz``,
    atomically (`write_atomic`); returns the path (suffix ``.npz`` added if missing)."""
    path = pathlib.Path(path).with_suffix(".npz")
    if METADATA_KEY in results:
        raise ValueError(f"results may not use the reserved name '{METADATA_KEY}'")
    buffer = io.BytesIO()
    np.savez(buffer, **{k: np.asarray(v) for k, v in results.items()},
             **{METADATA_KEY: np.array(json.dumps(metadata, sort_keys=True))})
    return write_atomic(path, buffer.getvalue())


def read_results(path):
    """(results {name: array}, metadata dict) of a file written by `write_results`."""
    with np.load(path, allow_pickle=False) as data:
        metadata = json.loads(str(data[METADATA_KEY]))
        return {k: data[k] for k in data.files if k != METADATA_KEY}, metadata
