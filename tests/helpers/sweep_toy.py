"""A toy sweep system for the sweep tests: compiles in well under a second, has a scalar, a vector
and a sometimes non-finite output, and can be slowed down or given a file-size limit so that a test
can interrupt it or fill the "disk" after some chunks.

    python -m tests.helpers.sweep_toy [options of python -m experiments sweep]

runs `experiments.sweep.main` with ``SYSTEMS["toy"]`` registered. Environment variables:

* ``SWEEP_TOY_DELAY``: seconds each chunk sleeps (a host callback inside the compiled call);
* ``SWEEP_TOY_FSIZE``: ``"K:BYTES"``: after K committed chunks, `resource.setrlimit(RLIMIT_FSIZE)`
  to BYTES, so the next chunk file larger than that fails with EFBIG, like a full disk (Python
  ignores SIGXFSZ, so the write raises instead of killing the process).

Outputs per sample: ``y`` = Σ x after ``steps`` iterations of x ← sin x + 0.1 (scalar; 0.1 a JAX array
closed over, as a model is),
``ratio`` = x₀ / k (k ∈ {0..3}: ±inf or NaN when k = 0), ``blob`` = sin(1000 x₀ j), j = 1..64
(64 incompressible float64: a chunk file of 4 samples is ~2 KB, larger than the metadata files).
"""

import functools
import os
import resource
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from experiments.sweep_systems import SweepSystem


def sample(rng, count):
    return {"x": rng.normal(size=(count, 3)), "k": rng.integers(0, 4, count)}


def _sleep(delay, log, y):
    if log:
        with open(log, "a") as f:
            f.write(f"{os.getpid()}\n")
    time.sleep(delay)
    return y


def simulator(steps, delay=None, log=None):
    """Per-sample toy; each chunk sleeps ``delay`` s (default $SWEEP_TOY_DELAY, else 0) and, with
    a ``log`` path, first appends a line (its process id) to that file: one line per chunk run."""
    delay = float(os.environ.get("SWEEP_TOY_DELAY", "0")) if delay is None else delay
    shift = jnp.asarray(0.1)                 # a JAX array closed over, as a model is (float64 under x64)

    def simulate(s):
        x = jax.lax.fori_loop(0, steps, lambda i, x: jnp.sin(x) + shift.astype(x.dtype), s["x"])
        y = jnp.sum(x)
        if delay:
            y = jax.pure_callback(functools.partial(_sleep, delay, log), jax.ShapeDtypeStruct(y.shape, y.dtype), y,
                                  vmap_method="broadcast_all")
        return {"y": y, "ratio": s["x"][0] / s["k"].astype(s["x"].dtype),
                "blob": jnp.sin(1e3 * s["x"][0] * jnp.arange(1, 65, dtype=s["x"].dtype))}

    return simulate


TOY = SweepSystem("toy: sin iterations, a ratio that is non-finite for k = 0, a 64-vector", sample, simulator,
                  {"y": "sum of x after the iterations", "ratio": "x0 / k", "blob": "sin(1000 x0 j)"})


def limit_file_size_after(chunks: int, size: int):
    """Wrap `SweepStore.write_chunk` so that after ``chunks`` commits the file-size limit is ``size``."""
    from jaxsoa.workflows import store

    original, done = store.SweepStore.write_chunk, [0]

    def write_chunk(self, k, inputs, outputs):
        if done[0] == chunks:
            resource.setrlimit(resource.RLIMIT_FSIZE, (size, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
        original(self, k, inputs, outputs)
        done[0] += 1

    store.SweepStore.write_chunk = write_chunk


def main(argv=None):
    from experiments import sweep

    sweep.SYSTEMS["toy"] = TOY
    if os.environ.get("SWEEP_TOY_FSIZE"):
        chunks, size = (int(v) for v in os.environ["SWEEP_TOY_FSIZE"].split(":"))
        limit_file_size_after(chunks, size)
    return sweep.main(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
