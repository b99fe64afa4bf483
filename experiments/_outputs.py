"""The experiments' outputs, written atomically: a temporary file beside the target, renamed over it once
whole, so a crash, a Ctrl-C or a full disk keeps the previous file (text, JSON, figures, npz)."""

import contextlib
import json
import pathlib


@contextlib.contextmanager
def atomic_path(path):
    """`jaxsoa.workflows.results.atomic_path` (a temporary file beside `path`, renamed over it once whole;
    the previous content kept on any error), with an `OSError` (a full disk) re-raised naming `path`, the
    file meant, instead of the temporary one."""
    from jaxsoa.workflows.results import atomic_path as shared

    try:
        with shared(path) as tmp:
            yield tmp
    except OSError as error:
        raise OSError(error.errno, f"writing {path} failed ({error.strerror or error})") from error


@contextlib.contextmanager
def open_atomic(path, mode="w", **kwargs):
    """``open`` for writing, atomically (`atomic_path`): the file appears at `path` only once closed whole."""
    with atomic_path(path) as tmp, open(tmp, mode, **kwargs) as f:
        yield f


def write_text(path, text: str) -> pathlib.Path:
    """Write `text` (UTF-8) to `path` atomically; returns the path."""
    with open_atomic(path, "w", encoding="utf-8") as f:
        f.write(text)
    return pathlib.Path(path)


def jsonable(x):
    """numpy / JAX scalars and arrays as Python numbers and lists (``json.dumps(default=...)``)."""
    if hasattr(x, "tolist"):
        return x.tolist()
    raise TypeError(f"not JSON serializable: {type(x).__name__}")


def write_json(path, obj) -> pathlib.Path:
    """Write `obj` as indented JSON (numpy values as numbers / lists) to `path` atomically."""
    return write_text(path, json.dumps(obj, indent=1, default=jsonable) + "\n")


def save_figure(fig, path, **kwargs) -> pathlib.Path:
    """``fig.savefig`` to `path` atomically, the format taken from the suffix (``.png``); closes nothing."""
    path = pathlib.Path(path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=path.suffix.lstrip(".") or "png", **kwargs)
    return path


def save_npz(path, **arrays) -> pathlib.Path:
    """``np.savez(path, **arrays)`` atomically (the temporary name ends in ``.npz`` too)."""
    import numpy as np

    with atomic_path(path) as tmp:
        np.savez(tmp, **arrays)
    return pathlib.Path(path)
