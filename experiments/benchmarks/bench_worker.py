"""The JAX worker of `bench_core`: jaxsoa's RNEA / ABA / CRBA variants and MJX's forward, timed in one process
with its own XLA setting and dtype (`bench_common` holds the loaders, inputs, timing and the C/C++ anchors).
"""

import os
import time

import numpy as np

from experiments.benchmarks.bench_common import (
    ALGOS,
    ROBOTS,
    VARIANTS,
    _blocking,
    dist_version,
    has_mujoco_anchor,
    make_inputs,
    measure,
    mujoco_model,
    pin_model,
    pin_reference,
)
from jaxsoa.io import robots


def jax_cases(batches, variant_batches, variant_algos, mjx):
    """(impl, variant, algo, batch) run by one JAX worker, in run order."""
    cases = []
    for batch in batches:
        for algo in ALGOS:
            extra = batch in variant_batches and algo in variant_algos
            names = [name for name in VARIANTS if name == "seq-u1" or extra]
            cases += [("jaxsoa", name, algo, batch) for name in names]
    if mjx:
        cases += [("mjx", "forward", "forward", batch) for batch in batches]
    return cases


def run_worker(opts):
    """JAX records (jaxsoa variants, MJX) in this process's XLA setting, for the one dtype opts.dtypes[0];
    yields the records, then {"meta": ...}."""
    import jax

    dtype_name, repeats, target_s, skip_mjx = opts.dtypes[0], opts.repeats, opts.target_s, opts.skip_mjx or None
    if dtype_name == "float64":
        jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import jaxlib

    import jaxsoa

    dtype = jnp.dtype(dtype_name)
    path, floating = robots.example_robot_urdf(opts.robot), ROBOTS[opts.robot][1]
    model = jaxsoa.load_urdf(str(path), floating_base=floating, dtype=dtype)
    pm = pin_model(opts.robot)
    mjx_state = {}
    cases = jax_cases(opts.batches, opts.variant_batches, opts.variant_algos,
                      not opts.no_mjx and has_mujoco_anchor(opts.robot))
    for impl, variant, algo, batch in cases:
        rec = {"impl": impl, "variant": variant, "algo": algo, "batch": batch, "dtype": dtype_name}
        q, v, u = make_inputs(model.nq, model.nv, batch, floating=floating)
        ref = pin_reference(pm, q[0], v[0], u[0])
        q, v, u = (jnp.asarray(x, dtype) for x in (q, v, u))
        if impl == "jaxsoa":
            strategy, unroll = VARIANTS[variant]
            unroll = model.n_links if unroll is None else unroll
            rec["unroll"] = unroll

            def batched(m, q, v, u, algo=algo):
                if algo == "crba":
                    return jax.vmap(lambda q: jaxsoa.crba(m, q))(q)
                return jax.vmap(lambda q, v, u: getattr(jaxsoa, algo)(m, q, v, u))(q, v, u)

            args = (model.with_parent(model.parent, strategy=strategy, unroll=unroll), q, v, u)
            t0 = time.perf_counter()
            compiled = jax.jit(batched).lower(*args).compile()
        else:
            predicted = mjx_state.get("per_sample_s", 0.0) * batch
            if not skip_mjx and predicted > opts.max_call_s:
                skip_mjx = (f"skipped from batch {batch}: predicted {predicted:.3g} s per call "
                            f"(> --max-call-s) from the smaller batch")
            if skip_mjx:
                yield {**rec, "skipped": skip_mjx}
                continue
            if not mjx_state:
                from mujoco import mjx as mjx_mod

                mx = mjx_mod.put_model(mujoco_model(path))
                mjx_state.update(mx=mx, data=mjx_mod.make_data(mx), forward=mjx_mod.forward)
            args = (mjx_state["mx"], jax.vmap(_mjx_state_of, in_axes=(None, 0, 0, 0))(mjx_state["data"], q, v, u))
            t0 = time.perf_counter()
            compiled = jax.jit(jax.vmap(mjx_state["forward"], in_axes=(None, 0))).lower(*args).compile()
        rec["compile_s"] = time.perf_counter() - t0
        out = compiled(*args)
        out = out.qacc if impl == "mjx" else out
        rec["out_dtype"] = str(out.dtype)
        rec["err"] = float(np.abs(np.asarray(out[0], np.float64) - ref["aba" if impl == "mjx" else algo]).max())
        res = measure(_blocking, (compiled, *args), repeats, target_s,
                      opts.max_call_s if impl == "mjx" else None)
        if impl == "mjx":
            mjx_state["per_sample_s"] = res["call_s"] / batch
        if impl == "mjx" and res["slow"]:
            skip_mjx = f"skipped after a {res['call_s']:.3g} s call at batch {batch}"
        yield {**rec, "per_sample_us": res["call_s"] / batch * 1e6, **res}
    yield {"meta": {"jax": jax.__version__, "jaxlib": jaxlib.__version__, "mujoco_mjx": dist_version("mujoco-mjx"),
                    "devices": [str(d) for d in jax.devices()], "xla_flags": os.environ.get("XLA_FLAGS", ""),
                    "x64": bool(jax.config.jax_enable_x64), "dtype": dtype_name, "n_links": model.n_links,
                    "nq": model.nq, "nv": model.nv, "mjx_impl": str(getattr(mjx_state.get("mx"), "impl", None)),
                    "loadavg_end": os.getloadavg()}}


def _mjx_state_of(data, q, v, u):
    return data.replace(qpos=q, qvel=v, qfrc_applied=u)
