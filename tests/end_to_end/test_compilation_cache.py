"""The commands' persistent compilation cache (`experiments._common.use_compilation_cache`): the folder
comes from $JAXSOA_COMPILATION_CACHE, "" turns it off, a second process reads what the first wrote."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow            # subprocesses: deselect with -m "not slow"

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = """
import jax, jax.numpy as jnp
from experiments._common import use_compilation_cache
print("folder", use_compilation_cache())
f = jax.jit(lambda x: jnp.sin(x) @ jnp.cos(x).T)
compiled = f.lower(jnp.ones((64, 64))).compile()
print("sum", float(compiled(jnp.ones((64, 64))).sum()))
"""


def _run(folder):
    env = dict(os.environ, JAXSOA_COMPILATION_CACHE=folder, JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
               JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0", PYTHONPATH=str(ROOT))
    result = subprocess.run([sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True, cwd=ROOT,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    return dict(line.split(" ", 1) for line in result.stdout.splitlines())


def test_the_folder_is_filled_once_and_reused(tmp_path):
    folder = tmp_path / "cache"
    first = _run(str(folder))
    assert first["folder"] == str(folder)
    entries = sorted(p.name for p in folder.iterdir())
    assert entries, "the first run wrote no compiled program"
    second = _run(str(folder))
    assert second["sum"] == first["sum"]
    assert sorted(p.name for p in folder.iterdir()) == entries      # a hit: nothing new compiled and written


def test_an_empty_folder_name_turns_it_off(tmp_path):
    assert _run("")["folder"] == "None"
