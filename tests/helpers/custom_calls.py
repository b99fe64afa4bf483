"""The custom calls (LAPACK's and others) in a function's lowered program."""

import re

import jax


def custom_calls(fn, *args) -> set:
    """Names of the custom-call targets in `jax.jit(fn).lower(*args)` (empty: only XLA's own ops)."""
    text = jax.jit(fn).lower(*args).as_text()
    return set(re.findall(r"custom_call @(\w+)", text)) | set(re.findall(r'call_target_name = "(\w+)"', text))
