"""`jax.vmap` of the per-sample `aba` runs on the batch-last core (`jaxsoa.multibody.vmap_rule`, a
`custom_vmap` rule on the primal solve of the adjoint; its derivatives come from the implicit rule).

Checked against the per-sample recursion under `jax.vmap` (`dynamics._aba_recursion`, plain autodiff for
gradients: a second code path), float64: values 1e-12 relative (the same equations in another order),
gradients 1e-10 (they go through a linear solve); that the batch-last core is reached (its staged
passes are in the program) and the per-sample recursion is not (a guard that raises); shared and per-sample models,
unbatched arguments, nested `vmap`, `jacfwd` and a Hessian; and the fallback for a concrete tree with a
free joint below its root and for a vmap smaller than `VMAP_MIN_BATCH` (no staged passes, the
recursion's values).
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsoa
from jaxsoa.algorithms import dynamics
from jaxsoa.multibody import vmap_rule
from jaxsoa.multibody.joints import JointType
from tests.algorithms.test_batch_last import _free_joint_below_the_root, _tree_case
from tests.helpers.trees import build_jaxsoa, random_group, random_tree, relative_error, stack_models

B = vmap_rule.VMAP_MIN_BATCH                     # the smallest vmap that runs on the core


def _states(model, rng, batch=B):
    q = jax.vmap(lambda k: jaxsoa.random_configuration(model, k))(jax.random.split(jax.random.key(2), batch))
    v, tau = (jnp.asarray(rng.normal(size=(batch, model.nv))) for _ in range(2))
    return q, v, tau, jnp.asarray(rng.normal(size=(batch, model.n_links, 6)))


def _models():
    rng = np.random.default_rng(4)
    spherical = (JointType.FREE, JointType.REVOLUTE, JointType.SPHERICAL, JointType.PRISMATIC, JointType.FIXED)
    return {"fixed base": _tree_case(1, n_links=7)[1], "free-flyer": _tree_case(2, n_links=7, floating=True)[1],
            "spherical": build_jaxsoa(random_tree(rng, len(spherical), link_types=spherical))}


@pytest.fixture
def recursion(monkeypatch):
    """The per-sample recursion, which from now on raises if it runs under `jax.vmap` (a guard: the
    batch must take the core)."""
    original = dynamics._aba_recursion

    def guarded(model, q, *args):
        if "Batch" in type(q).__name__:
            raise AssertionError("the per-sample recursion ran under vmap")
        return original(model, q, *args)

    monkeypatch.setattr(dynamics, "_aba_recursion", guarded)
    return original


def _on_core(fn, *args):
    """Whether fn's program has the batch-last core's staged passes (`lax.cond` fusion barriers)."""
    return "cond[" in str(jax.make_jaxpr(fn)(*args))


@pytest.mark.parametrize("name", ["fixed base", "free-flyer", "spherical"])
def test_vmap_runs_on_the_batch_last_core_and_equals_the_recursion(name, recursion):
    model = _models()[name]
    q, v, tau, f_ext = _states(model, np.random.default_rng(5))
    mapped = jax.vmap(lambda *x: jaxsoa.aba(model, *x))
    assert _on_core(mapped, q, v, tau, f_ext)
    got = jax.jit(mapped)(q, v, tau, f_ext)
    ref = jax.jit(jax.vmap(lambda *x: recursion(model, *x)))(q, v, tau, f_ext)
    assert relative_error(got, ref) < 1e-12
    shared = jax.jit(jax.vmap(lambda q, v: jaxsoa.aba(model, q, v, tau[0])))(q, v)     # τ unbatched
    assert relative_error(shared, jax.vmap(lambda q, v: recursion(model, q, v, tau[0]))(q, v)) < 1e-12
    nested = jax.jit(jax.vmap(jax.vmap(lambda *x: jaxsoa.aba(model, *x))))(
        *(x.reshape(1, B, *x.shape[1:]) for x in (q, v, tau, f_ext)))
    assert relative_error(nested[0], ref) < 1e-12


def test_gradients_under_vmap_equal_plain_autodiff(recursion):
    """vmap(grad) and grad(vmap) w.r.t. the states, the wrenches and the links' masses."""
    model = _models()["free-flyer"]
    rng = np.random.default_rng(6)
    q, v, tau, f_ext = _states(model, rng)
    weights = jnp.asarray(rng.normal(size=model.nv))

    def loss(fd):
        def f(mass, q, v, tau, f_ext):
            return jnp.sum(weights * jnp.sin(fd(dataclasses.replace(model, mass=mass), q, v, tau, f_ext)))
        return f

    argnums = (0, 1, 2, 3, 4)
    got = jax.jit(jax.vmap(jax.grad(loss(jaxsoa.aba), argnums), (None, 0, 0, 0, 0)))(model.mass, q, v, tau, f_ext)
    ref = jax.jit(jax.vmap(jax.grad(loss(recursion), argnums), (None, 0, 0, 0, 0)))(model.mass, q, v, tau, f_ext)
    for g, r in zip(got, ref, strict=True):
        assert relative_error(g, r) < 1e-10

    def total(fd):
        return lambda mass, *x: jnp.sum(jax.vmap(loss(fd), (None, 0, 0, 0, 0))(mass, *x))
    got = jax.jit(jax.grad(total(jaxsoa.aba), argnums))(model.mass, q, v, tau, f_ext)
    ref = jax.jit(jax.grad(total(recursion), argnums))(model.mass, q, v, tau, f_ext)
    for g, r in zip(got, ref, strict=True):
        assert relative_error(g, r) < 1e-10


def test_forward_mode_and_hessian_under_vmap():
    model = _models()["fixed base"]
    rng = np.random.default_rng(7)
    q, v, tau, _ = _states(model, rng)
    jac = jax.jit(jax.vmap(jax.jacfwd(lambda q, v, t: jaxsoa.aba(model, q, v, t))))(q, v, tau)
    jac_ref = jax.jit(jax.vmap(jax.jacfwd(lambda q, v, t: dynamics.aba_autodiff(model, q, v, t))))(q, v, tau)
    assert relative_error(jac, jac_ref) < 1e-10

    def energy(fd):
        return lambda q, v, t: jnp.sum(jnp.sin(fd(model, q, v, t)))
    hessian = jax.jit(jax.vmap(jax.hessian(energy(jaxsoa.aba), argnums=2)))(q, v, tau)
    hessian_ref = jax.jit(jax.vmap(jax.hessian(energy(dynamics.aba_autodiff), argnums=2)))(q, v, tau)
    assert relative_error(hessian, hessian_ref) < 1e-10


def test_per_sample_models_run_stacked(recursion):
    """vmap over models (per-sample trees and masses, as `stack_models` builds) and over one batched
    field of a shared model (the rest broadcast): both on the core, equal to the recursion."""
    rng = np.random.default_rng(8)
    models = [m for _, m, _ in random_group(rng, 6, B, joint_types=(JointType.REVOLUTE, JointType.PRISMATIC))]
    names = {f: getattr(models[0], f) for f in ("link_names", "link_joint_names")}
    stacked = stack_models([dataclasses.replace(m, **names) for m in models])
    q, v, tau, _ = _states(models[0], rng)
    assert _on_core(jax.vmap(jaxsoa.aba), stacked, q, v, tau)
    got = jax.jit(jax.vmap(jaxsoa.aba))(stacked, q, v, tau)
    ref = jax.jit(jax.vmap(recursion))(stacked, q, v, tau)
    assert relative_error(got, ref) < 1e-12
    masses = models[0].mass[None] * jnp.asarray(rng.uniform(0.5, 2.0, (B, 1, 1)))
    got = jax.jit(jax.vmap(lambda m, *x: jaxsoa.aba(dataclasses.replace(models[0], mass=m), *x)))(masses, q, v, tau)
    ref = jax.jit(jax.vmap(lambda m, *x: recursion(dataclasses.replace(models[0], mass=m), *x)))(masses, q, v, tau)
    assert relative_error(got, ref) < 1e-12


def test_a_free_joint_below_the_root_keeps_the_recursion(recursion):
    """A concrete tree the core does not take (`batch_last.supports` is decided where the closed-over
    topology is still concrete): the per-sample recursion under vmap, with the right values (the core
    would NaN-mark them)."""
    model = _free_joint_below_the_root()
    q, v, tau, _ = _states(model, np.random.default_rng(9), batch=3)
    mapped = jax.vmap(lambda *x: jaxsoa.aba(model, *x))
    assert not _on_core(mapped, q, v, tau)
    got = jax.jit(mapped)(q, v, tau)
    assert relative_error(got, jax.vmap(lambda *x: recursion(model, *x))(q, v, tau)) < 1e-12


def test_a_small_vmap_keeps_the_recursion():
    recursion = dynamics._aba_recursion
    model = _models()["free-flyer"]
    q, v, tau, f_ext = _states(model, np.random.default_rng(10), batch=B - 1)
    mapped = jax.vmap(lambda *x: jaxsoa.aba(model, *x))
    assert not _on_core(mapped, q, v, tau, f_ext)
    ref = jax.vmap(lambda *x: recursion(model, *x))(q, v, tau, f_ext)
    assert relative_error(jax.jit(mapped)(q, v, tau, f_ext), ref) < 1e-12


def test_bad_inputs_under_vmap_are_named():
    """The per-sample checks run before the batching rule: a short q, a short τ and an integer v are
    rejected by the argument's name, also for a batch that would take the core."""
    model = _models()["fixed base"]
    q, v, tau, _ = _states(model, np.random.default_rng(11))
    mapped = jax.vmap(lambda *x: jaxsoa.aba(model, *x))
    with pytest.raises(ValueError, match="'q'"):
        mapped(q[:, :-1], v, tau)
    with pytest.raises(ValueError, match="'tau'"):
        mapped(q, v, tau[:, :-1])
    with pytest.raises(TypeError, match="'v'"):
        mapped(q, v.astype(jnp.int32), tau)
