"""Checks of the scalar and gain arguments that are not model states (docs/user_guide.md, "Errors and
checks"): step counts, time steps, ranges, frequencies and PD gains. Each names the argument and what was
expected; a traced value is checked for its shape only (its value is data, unknown at trace time)."""

import jax
import jax.numpy as jnp
import numpy as np


def check_positive_steps(name: str, n_steps) -> int:
    """A static step count ≥ 1."""
    if isinstance(n_steps, (bool, np.bool_)) or not isinstance(n_steps, (int, np.integer)):
        raise TypeError(f"argument '{name}' must be a Python int, got {type(n_steps).__name__}")
    if n_steps < 1:
        raise ValueError(f"argument '{name}' = {n_steps} must be at least 1")
    return int(n_steps)


def _real(name: str, value):
    """`value` as an array of a real (integer or floating) dtype (TypeError otherwise)."""
    try:
        dtype = jnp.result_type(value)
    except TypeError as err:
        raise TypeError(f"argument '{name}' must be a real number or array, got {type(value).__name__}") from err
    if not (jnp.issubdtype(dtype, jnp.floating) or jnp.issubdtype(dtype, jnp.integer)) or dtype == jnp.bool_:
        raise TypeError(f"argument '{name}' must be real, got dtype {dtype}")
    return value


def check_scalar(name: str, value, low=None, strict=False):
    """A real scalar; when concrete, finite and ≥ `low` (> `low` if `strict`; no bound when `low` is None)."""
    _real(name, value)
    if jnp.ndim(value) != 0:
        raise ValueError(f"argument '{name}' must be a scalar, got shape {jnp.shape(value)}")
    if not isinstance(value, jax.core.Tracer):
        x = float(value)
        bound = "" if low is None else f" and {'>' if strict else '≥'} {low:g}"
        if not np.isfinite(x) or (low is not None and (x <= low if strict else x < low)):
            raise ValueError(f"argument '{name}' = {x} must be finite{bound}")
    return value


def check_time_step(name: str, dt):
    """dt: a scalar; when concrete, finite and > 0 (ValueError otherwise)."""
    return check_scalar(name, dt, 0.0, strict=True)


def check_gain(name: str, value, size=None, positive=False):
    """A gain or rate: a real scalar or, with `size`, a (size,) array (one per joint; any shape when `size` is
    None); when concrete, finite and ≥ 0 (> 0 if `positive`)."""
    _real(name, value)
    if size is not None and jnp.shape(value) not in ((), (size,)):
        raise ValueError(f"argument '{name}' has shape {jnp.shape(value)}: expected a scalar or ({size},), "
                         "one per joint")
    if not isinstance(value, jax.core.Tracer):
        x = np.asarray(value, np.float64)
        if not np.all(np.isfinite(x)) or np.any(x <= 0 if positive else x < 0):
            raise ValueError(f"argument '{name}' = {x.tolist()} must be finite and {'>' if positive else '≥'} 0")
    return value
