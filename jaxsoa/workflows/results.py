"""Result files and summary statistics of sweeps (host side, numpy): a flat ``{name: array}`` of
per-sample results is summarised per name (`summarize`) and written, with its metadata, to one
``.npz`` (`write_results`; `read_results` reads it back without pickle).

Names are flat strings; nested result PyTrees are flattened to ``"a/b"`` names by `flatten`.
"""

import json
import pathlib

import jax
import numpy as np

METADATA_KEY = "__metadata_json__"
QUANTILES = (0.05, 0.5, 0.95)


def flatten(tree) -> dict:
    """{"a/b": numpy array} from a PyTree of arrays (dict keys, sequence indices, attribute names)."""
    def name(path):
        return "/".join(str(getattr(k, "key", getattr(k, "idx", getattr(k, "name", k)))) for k in path)

    return {name(path): np.asarray(leaf) for path, leaf in jax.tree_util.tree_leaves_with_path(tree)}


def summarize(results: dict, quantiles=QUANTILES) -> dict:
    """Per name: count, mean, std (population, ddof = 0), min, max and the given quantiles (linear
    interpolation, numpy's default) over *all* entries, plus ``nonfinite``, the number of NaN/inf
    entries (any such entry makes the statistics NaN: never hidden)."""
    summary = {}
    for key, values in results.items():
        x = np.asarray(values, np.float64).ravel()
        if x.size == 0:
            raise ValueError(f"results['{key}'] is empty")
        stats = {"count": int(x.size), "nonfinite": int(np.count_nonzero(~np.isfinite(x))),
                 "mean": float(np.mean(x)), "std": float(np.std(x)), "min": float(np.min(x)), "max": float(np.max(x))}
        stats.update({f"q{100 * q:g}": float(v) for q, v in zip(quantiles, np.quantile(x, quantiles), strict=True)})
        summary[key] = stats
    return summary


def write_results(path, results: dict, metadata: dict) -> pathlib.Path:
    """Write ``results`` {name: array} and ``metadata`` (JSON-serialisable) to one ``.npz``; returns
    the path (suffix ``.npz`` added if missing)."""
    path = pathlib.Path(path).with_suffix(".npz")
    if METADATA_KEY in results:
        raise ValueError(f"results may not use the reserved name '{METADATA_KEY}'")
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **{k: np.asarray(v) for k, v in results.items()},
             **{METADATA_KEY: np.array(json.dumps(metadata, sort_keys=True))})
    return path


def read_results(path):
    """(results {name: array}, metadata dict) of a file written by `write_results`."""
    with np.load(path, allow_pickle=False) as data:
        metadata = json.loads(str(data[METADATA_KEY]))
        return {k: data[k] for k in data.files if k != METADATA_KEY}, metadata
