"""The cases `bench_batch_last` times (experiments/benchmarks/bench_batch_last.py, its module doc), each a
compiled call with no arguments: Pinocchio's anchors, jaxsoa's RNEA, ABA and CRBA on the "vmap", "vmap rule"
and "batch-last" paths (with their first-sample errors against Pinocchio), the gradient cases, the
`BATCH_CHUNK` cases and the revolute chains; and which anchor or value each case is compared with.
`_pinocchio_cases` is also the anchor of `bench_free_floating`."""

import numpy as np

from experiments.benchmarks import bench_common as bc
from experiments.benchmarks.robot_models import jaxsoa_model, pinocchio_model, robot_inputs


def _pinocchio_cases(robot, batch):
    import pinocchio as pin

    pm = pinocchio_model(robot)
    pool = pin.ModelPool(pm, 2)
    q, v, u = robot_inputs(robot, pm.nq, pm.nv, batch)
    out = np.zeros((pm.nv, batch), order="F")
    args = [np.asfortranarray(x.T) for x in (q, v, u)]
    def call(algo):
        fn = getattr(pin, f"{algo}InParallel")
        return lambda: fn(2, pool, *args, out)

    data, columns = pm.createData(), list(q)

    def crba_loop():                  # no batched CRBA in Pinocchio: its C++ crba per sample, from Python
        for q_i in columns:
            pin.crba(pm, data, q_i)

    return {**{f"pinocchio {algo} 2t": call(algo) for algo in ("rnea", "aba")}, "pinocchio crba loop": crba_loop}


def anchor_of(name: str) -> str:
    """The Pinocchio case a jaxsoa case is compared with."""
    algo = name.split()[1].split("+")[0]
    return "pinocchio crba loop" if algo == "crba" else f"pinocchio {algo} 2t"


def _gradient_cases(model, q, v, u):
    """value+grad of Σ w·sin(q̈) (ABA, its adjoint) and of Σ w·sin(τ) (RNEA: the hand-written reverse
    mode, and plain autodiff of the same passes) w.r.t. the three states, on the two paths."""
    import jax
    import jax.numpy as jnp

    import jaxsoa
    from jaxsoa.algorithms import batch_last_rnea, dynamics
    from jaxsoa.multibody import vmap_rule

    w = jnp.cos(jnp.arange(model.nv, dtype=q.dtype))

    def per_sample(fn):
        return lambda m, q, v, u: jax.vmap(lambda q, v, u: fn(m, q, v, u))(q, v, u)

    def per_sample_adjoint(m, q, v, u):                # the adjoint on the per-sample recursion (no vmap rule)
        return dynamics._aba_adjoint_per_sample(m, q, v, u, None)

    losses = {"aba+grad vmap": per_sample(per_sample_adjoint), "aba+grad batch-last": jaxsoa.aba,
              "aba+grad vmap rule": per_sample(jaxsoa.aba),
              "rnea+grad vmap": per_sample(jaxsoa.rnea), "rnea+grad batch-last": jaxsoa.rnea,
              "rnea+grad vmap rule": per_sample(jaxsoa.rnea),
              "rnea+grad batch-last autodiff": batch_last_rnea.rnea_autodiff}
    cases, rule_minimum = {}, vmap_rule.VMAP_MIN_BATCH
    for name, fn in losses.items():
        def loss(m, q, v, u, fn=fn):
            return jnp.sum(w * jnp.sin(fn(m, q, v, u)))
        vmap_rule.VMAP_MIN_BATCH = 2**62 if name.endswith(" vmap") else rule_minimum   # read at trace time
        compiled = jax.jit(jax.value_and_grad(loss, argnums=(1, 2, 3))).lower(model, q, v, u).compile()
        vmap_rule.VMAP_MIN_BATCH = rule_minimum
        cases[f"jaxsoa {name}"] = (lambda c=compiled: jax.block_until_ready(c(model, q, v, u)))
    return cases


def value_of(name: str) -> str:
    """The value case a gradient case is compared with ("jaxsoa aba+grad vmap" -> "jaxsoa aba vmap")."""
    return name.replace("+grad", "").replace(" autodiff", "")


def _chunk_cases(model, q, v, u, chunks):
    """The leading-batch RNEA and ABA compiled with `BATCH_CHUNK` set to each of `chunks` (0: one call
    for the whole batch), read at trace time: "jaxsoa aba batch-last chunk=512"."""
    import jax

    import jaxsoa
    from jaxsoa.multibody import batched

    default, cases = batched.BATCH_CHUNK, {}
    try:
        for chunk in chunks:
            batched.BATCH_CHUNK = chunk or q.shape[0]
            for algo in ("rnea", "aba"):
                fn = getattr(jaxsoa, algo)
                compiled = jax.jit(lambda q, v, u, fn=fn: fn(model, q, v, u)).lower(q, v, u).compile()
                cases[f"jaxsoa {algo} batch-last chunk={chunk}"] = (
                    lambda c=compiled: jax.block_until_ready(c(q, v, u)))
    finally:
        batched.BATCH_CHUNK = default
    return cases


def _jax_cases(robot, batch, dtype_name, devices, gradients=False, chunks=()):
    import jax
    import jax.numpy as jnp

    import jaxsoa
    from jaxsoa.multibody import vmap_rule

    rule_minimum = vmap_rule.VMAP_MIN_BATCH
    dtype = jnp.dtype(dtype_name)
    model = jaxsoa_model(robot, dtype)
    inputs = robot_inputs(robot, model.nq, model.nv, batch)                 # Pinocchio's layout = jaxsoa's
    q, v, u = (jnp.asarray(x, dtype) for x in inputs)
    cases, errors = {}, {}
    ref = bc.pin_reference(pinocchio_model(robot), *(x[0] for x in inputs))
    for algo in ("rnea", "aba", "crba"):
        fn = getattr(jaxsoa, algo)

        def leading(m, q, v, u, fn=fn, algo=algo):
            return fn(m, q) if algo == "crba" else fn(m, q, v, u)
        variants = {"vmap": jax.vmap(leading, in_axes=(None, 0, 0, 0)), "batch-last": leading,
                    "vmap rule": jax.vmap(lambda *x, f=leading: f(*x), in_axes=(None, 0, 0, 0))}
        mesh = jax.sharding.Mesh(np.asarray(jax.devices()[:devices]), ("batch",))
        spec, shared = jax.sharding.PartitionSpec("batch"), jax.sharding.PartitionSpec()
        for kind, f in variants.items():
            if devices > 1:
                f = jax.shard_map(f, mesh=mesh, in_specs=(shared, spec, spec, spec), out_specs=spec, check_vma=False)
            name = f"jaxsoa {algo} {kind}"
            vmap_rule.VMAP_MIN_BATCH = 2**62 if kind == "vmap" else rule_minimum   # read at trace time
            compiled = jax.jit(f).lower(model, q, v, u).compile()
            vmap_rule.VMAP_MIN_BATCH = rule_minimum
            out = compiled(model, q, v, u)
            first = np.asarray(out, np.float64)[0]           # host copy first: no eager op on a sharded array
            errors[name] = float(np.abs(first - ref[algo]).max() / np.abs(ref[algo]).max())
            cases[name] = (lambda c=compiled: jax.block_until_ready(c(model, q, v, u)))
    if gradients:
        cases.update(_gradient_cases(model, q, v, u))
    cases.update(_chunk_cases(model, q, v, u, chunks))
    return cases, errors


def _chain_cases(links, dtype_name, batch):
    import jax
    import jax.numpy as jnp

    import jaxsoa

    dtype = jnp.dtype(dtype_name)
    n = links
    model = jaxsoa.build_model(np.arange(-1, n - 1), [jaxsoa.JointType.REVOLUTE] * n,
                               np.tile([0.0, 0.0, 1.0], (n, 1)), np.broadcast_to(np.eye(3), (n, 3, 3)),
                               np.tile([0.1, 0.0, 0.0], (n, 1)), np.ones(n), np.tile([0.05, 0.0, 0.0], (n, 1)),
                               np.broadcast_to(0.01 * np.eye(3), (n, 3, 3)), dtype=dtype)
    q, v, u = (jnp.asarray(x, dtype) for x in bc.make_inputs(n, n, batch))
    cases = {}
    for algo in ("rnea", "aba"):
        fn = getattr(jaxsoa, algo)
        compiled = jax.jit(lambda m, q, v, u, fn=fn: fn(m, q, v, u)).lower(model, q, v, u).compile()
        cases[f"chain{n} {algo}"] = (lambda c=compiled: jax.block_until_ready(c(model, q, v, u)))
    return cases
