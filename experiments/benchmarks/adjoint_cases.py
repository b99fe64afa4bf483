"""The programs `bench_adjoint` times (experiments/benchmarks/bench_adjoint.py, its module doc): the two
systems, the forward-dynamics paths (`adjoint`, `autodiff` and the `custom_vjp` alternative), and the
{case: (fn, args)} groups of the single batched call, the open-loop rollout and the closed-loop rollout
batch. Also used by `bench_float32_gradients` and `bench_compile`."""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

import jaxsoa
from experiments.benchmarks import bench_common as bc
from jaxsoa.algorithms.dynamics import aba_autodiff
from sims import space_arm_7dof

DT = 0.01


def systems(dtype):
    """{name: (jaxsoa model, pinocchio model)}: the Panda and the free-floating 7-DOF space arm."""
    panda = jaxsoa.load_urdf(str(bc.panda_urdf()), floating_base=False, dtype=dtype)
    return {"panda": (panda, bc.pin_model("panda")),
            "space_arm_free": (space_arm_7dof.build(floating=True, dtype=dtype),
                               space_arm_7dof.build_pinocchio(floating=True))}


# ---------------------------------------------------------------------------------------------
# the custom_vjp alternative (same adjoint, reverse mode only)

def _aba_custom_vjp():
    """aba(model, q, v, tau) as a `jax.custom_vjp`: λ = ABA(q, 0, g) without gravity, τ̄ = λ,
    (θ̄, q̄, v̄) = −λᵀ ∂RNEA/∂(θ, q, v) by `jax.vjp`; residuals (θ, q, v, q̈)."""
    @jax.custom_vjp
    def fd(model, q, v, tau):
        return aba_autodiff(model, q, v, tau)

    def fwd(model, q, v, tau):
        qdd = aba_autodiff(model, q, v, tau)
        return qdd, (model, q, v, qdd)

    def bwd(res, g):
        model, q, v, qdd = res
        free = dataclasses.replace(model, gravity=jnp.zeros_like(model.gravity))
        lam = aba_autodiff(free, q, jnp.zeros_like(v), g)
        _, vjp = jax.vjp(lambda m, q, v: jaxsoa.rnea(m, q, v, qdd), model, q, v)
        return (*vjp(-lam), lam)

    fd.defvjp(fwd, bwd)
    return fd


DYNAMICS = {"adjoint": jaxsoa.aba, "autodiff": aba_autodiff, "custom_vjp": _aba_custom_vjp()}


def call_cases(model, batch, dtype, wrt, rng):
    """{case: (fn, args)} of the single batched call."""
    q, v, tau = (jnp.asarray(x, dtype) for x in bc.make_inputs(model.nq, model.nv, batch, seed=5,
                                                                floating=model.nq > model.nv))
    w = jnp.asarray(rng.normal(size=(batch, model.nv)), dtype)      # an argument: a constant would be folded

    def loss(fd):
        return lambda m, q, v, tau, w: jnp.sum(w * jax.vmap(lambda q, v, t: fd(m, q, v, t))(q, v, tau))

    argnums = (1, 2, 3) if wrt == "state" else (0, 1, 2, 3)
    cases = {"value": (loss(jaxsoa.aba), (model, q, v, tau, w))}
    for name, fd in DYNAMICS.items():
        cases[name] = (jax.value_and_grad(loss(fd), argnums=argnums, allow_int=True), (model, q, v, tau, w))
    return cases


def rollout_cases(model, batch, steps, dtype, checkpoint, rng):
    """{case: (fn, args)} of the batched rollout loss."""
    q0 = jnp.broadcast_to(jaxsoa.neutral(model, dtype), (batch, model.nq))
    v0 = jnp.asarray(rng.normal(0.0, 0.1, (batch, model.nv)), dtype)
    taus = jnp.asarray(rng.normal(0.0, 1.0, (batch, steps, model.nv)), dtype)

    def loss(fd):
        step = functools.partial(jaxsoa.rk4_step, dynamics=fd)

        def per_sample(q0, v0, taus):
            control = lambda t, q, v: taus[jnp.round(t / DT).astype(jnp.int32)]   # noqa: E731
            qs, vs = jaxsoa.rollout(model, q0, v0, control, DT, steps, step=step, checkpoint=checkpoint)
            return jnp.sum(qs**2) + jnp.sum(vs**2)
        return per_sample

    cases = {"value": (jax.vmap(loss(jaxsoa.aba)), (q0, v0, taus))}
    for name in ("adjoint", "autodiff"):
        cases[name] = (jax.vmap(jax.value_and_grad(loss(DYNAMICS[name]), argnums=(0, 1, 2))), (q0, v0, taus))
    return cases


def batch_rollout_cases(model, batch, steps, dtype, checkpoint, rng):
    """{case: (fn, args)} of a closed-loop rollout loss, τ = −k_d ⊙ v + u₀ sin t with the gains k_d
    (nv,) shared by the batch: per sample (`jax.vmap` of one-sample rollouts: the per-sample core)
    and as one leading-batch call (the batch-last core); gradients w.r.t. (q0, v0, k_d)."""
    q0 = jnp.broadcast_to(jaxsoa.neutral(model, dtype), (batch, model.nq))
    v0 = jnp.asarray(rng.normal(0.0, 0.1, (batch, model.nv)), dtype)
    gains, u0 = (jnp.asarray(rng.uniform(0.5, 2.0, model.nv), dtype) for _ in range(2))

    def loss(leading, fd=jaxsoa.aba):
        step = jaxsoa.rk4_step if fd is jaxsoa.aba else functools.partial(jaxsoa.rk4_step, dynamics=fd)

        def total(q0, v0, gains):
            def roll(q0, v0):
                return jaxsoa.rollout(model, q0, v0, lambda t, q, v: -gains * v + u0 * jnp.sin(t), DT, steps,
                                      step=step, checkpoint=checkpoint)
            qs, vs = roll(q0, v0) if leading else jax.vmap(roll)(q0, v0)
            return jnp.sum(qs**2) + jnp.sum(vs**2)
        return total

    args = (q0, v0, gains)
    return {"value": (loss(False), args), "value batch-last": (loss(True), args),
            "adjoint": (jax.value_and_grad(loss(False), argnums=(0, 1, 2)), args),
            "adjoint batch-last": (jax.value_and_grad(loss(True), argnums=(0, 1, 2)), args),
            "autodiff": (jax.value_and_grad(loss(False, aba_autodiff), argnums=(0, 1, 2)), args)}


def warm_up(model):
    """Lower one gradient of each path on the model at batch 1 and drop it: JAX's one-time costs of a
    process (rule registration, lowering caches) would otherwise land on the first case timed."""
    for fn, args in call_cases(model, 1, model.dtype, "all", np.random.default_rng(0)).values():
        jax.jit(fn).lower(*args)
