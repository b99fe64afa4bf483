"""`jax.vmap` of every per-sample entry point with a whole-batch path (RNEA and what calls it, CRBA, composite
inertias, forward kinematics, the Jacobians, the free-floating variants) runs on the batch-last core
(`jaxsoa.multibody.vmap_rule`), as `aba` does (tests/algorithms/test_aba_vmap.py).

Checked, float64, against the per-sample functions under `jax.vmap` (the rule switched off by raising
`VMAP_MIN_BATCH`: a second code path): values 1e-12 relative (the same equations in another order and
layout); that the core is reached (its staged passes, `lax.cond`s, are in the program) and is not for a
`vmap` below `VMAP_MIN_BATCH`; a `vmap` over a link index (maps the per-sample function); gradients under
`vmap` (they run the per-sample JVP, 1e-12); per-sample models and one batched model field; `checkify`;
bad inputs named under `vmap`.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import checkify

import jaxsoa
from jaxsoa.algorithms import dynamics, free_floating
from jaxsoa.multibody import vmap_rule
from jaxsoa.multibody.joints import JointType
from tests.algorithms.test_aba_vmap import _models, _on_core, _states
from tests.algorithms.test_batch_last import _tree_case
from tests.helpers.trees import random_group, relative_error, stack_models

B = vmap_rule.VMAP_MIN_BATCH

CALLS = {
    "rnea": lambda m, q, v, a, f: jaxsoa.rnea(m, q, v, a, f),
    "nonlinear_effects": lambda m, q, v, a, f: jaxsoa.nonlinear_effects(m, q, v),
    "generalized_gravity": lambda m, q, v, a, f: jaxsoa.generalized_gravity(m, q),
    "generalized_force": lambda m, q, v, a, f: dynamics.generalized_force(m, q, f),
    "crba": lambda m, q, v, a, f: jaxsoa.crba(m, q),
    "composite_inertias": lambda m, q, v, a, f: jaxsoa.composite_inertias(m, q),
    "forward_kinematics": lambda m, q, v, a, f: jaxsoa.forward_kinematics(m, q),
    "joint_jacobians": lambda m, q, v, a, f: jaxsoa.joint_jacobians(m, q, "local"),
    "frame_jacobian": lambda m, q, v, a, f: jaxsoa.frame_jacobian(m, q, 3, "world"),
}
FREE_FLOATING = {
    "aba_free_floating": lambda m, q, v, a, f: free_floating.aba_free_floating(m, q, v, a[6:], f),
    "rnea_free_floating": lambda m, q, v, a, f: free_floating.rnea_free_floating(m, q, v, a[6:], f),
    "hub_response": lambda m, q, v, a, f: free_floating.hub_response(m, q),
    "generalized_jacobian": lambda m, q, v, a, f: free_floating.generalized_jacobian(m, q, 4),
}


@pytest.fixture
def per_sample(monkeypatch):
    """Runs a function with the rule switched off (every `vmap` then maps the per-sample function), traced
    anew (JAX caches traces by function)."""
    def run(fn, *args):
        def fresh(*xs):
            return fn(*xs)

        with monkeypatch.context() as patch:
            patch.setattr(vmap_rule, "VMAP_MIN_BATCH", 10**9)
            assert not _on_core(fresh, *args)
            return jax.jit(fresh)(*args)
    return run


def _cases():
    models = _models()
    cases = [(name, model, call) for name, model in models.items() for call in CALLS]
    return cases + [("free-flyer", models["free-flyer"], call) for call in FREE_FLOATING]


@pytest.mark.parametrize("name,model,call", _cases(), ids=[f"{c[0]}-{c[2]}" for c in _cases()])
def test_vmap_runs_on_the_batch_last_core(name, model, call, per_sample):
    fn = {**CALLS, **FREE_FLOATING}[call]
    states = _states(model, np.random.default_rng(1))
    mapped = jax.vmap(lambda *x: fn(model, *x))
    assert _on_core(mapped, *states)
    got, ref = jax.jit(mapped)(*states), per_sample(mapped, *states)
    assert jax.tree.structure(got) == jax.tree.structure(ref)
    for g, r in zip(jax.tree.leaves(got), jax.tree.leaves(ref), strict=True):
        assert g.shape == r.shape and g.shape[0] == B
        assert relative_error(g, r) < 1e-12


def test_unbatched_arguments_and_nested_vmap(per_sample):
    model = _models()["spherical"]
    q, v, a, f_ext = _states(model, np.random.default_rng(2))
    shared_a = jax.vmap(lambda q, v: jaxsoa.rnea(model, q, v, a[0], f_ext[0]))
    assert _on_core(shared_a, q, v)
    assert relative_error(jax.jit(shared_a)(q, v), per_sample(shared_a, q, v)) < 1e-12
    nested = jax.vmap(jax.vmap(lambda q: jaxsoa.crba(model, q)))
    q2 = q.reshape(2, B // 2, -1)
    inner_small = per_sample(nested, q2)                       # inner axis below the minimum: per sample
    assert relative_error(jax.jit(nested)(q2), inner_small) < 1e-12
    wide = q.reshape(1, B, -1)
    assert _on_core(nested, wide)
    assert relative_error(jax.jit(nested)(wide)[0], per_sample(nested, wide)[0]) < 1e-12


def test_a_small_vmap_and_a_batched_link_index_map_the_per_sample_function(per_sample):
    """Below `VMAP_MIN_BATCH` no core; a `vmap` over link indices maps the per-sample `frame_jacobian` (whose
    own forward kinematics, batched over q only, may take the core): equal to a Python loop."""
    model = _models()["free-flyer"]
    q, *_ = _states(model, np.random.default_rng(3))
    small = jax.vmap(lambda q: jaxsoa.crba(model, q))
    assert not _on_core(small, q[: B - 1])
    links = jnp.arange(B) % model.n_links
    by_link = jax.vmap(lambda q, k: jaxsoa.frame_jacobian(model, q, k))
    assert relative_error(jax.jit(by_link)(q, links), per_sample(by_link, q, links)) < 1e-12
    ref = np.stack([np.asarray(jaxsoa.frame_jacobian(model, q[i], int(links[i]))) for i in range(B)])
    assert relative_error(jax.jit(by_link)(q, links), ref) < 1e-12


def test_gradients_under_vmap(per_sample):
    """vmap(grad) and grad(vmap) of RNEA and CRBA w.r.t. the states and the links' masses: the per-sample
    JVP runs, so they equal the rule-free program; and finite differences (5e-6: central differences,
    step 1e-5)."""
    model = _models()["free-flyer"]
    rng = np.random.default_rng(4)
    q, v, a, _ = _states(model, rng)

    def loss(mass, q, v, a):
        m = dataclasses.replace(model, mass=mass)
        return jnp.sum(jnp.sin(jaxsoa.rnea(m, q, v, a))) + jnp.sum(jaxsoa.crba(m, q) ** 2)

    inner = jax.vmap(jax.grad(loss, (0, 2, 3)), (None, 0, 0, 0))
    outer = jax.grad(lambda mass, *x: jnp.sum(jax.vmap(loss, (None, 0, 0, 0))(mass, *x)), (0, 2, 3))
    for fn in (inner, outer):
        got, ref = jax.jit(fn)(model.mass, q, v, a), per_sample(fn, model.mass, q, v, a)
        for g, r in zip(got, ref, strict=True):
            assert relative_error(g, r) < 1e-12
    direction = jnp.asarray(rng.normal(size=v.shape))
    step = 1e-5
    total = jax.jit(lambda v: jnp.sum(jax.vmap(loss, (None, 0, 0, 0))(model.mass, q, v, a)))
    fd = (total(v + step * direction) - total(v - step * direction)) / (2 * step)
    analytic = jnp.sum(jax.jit(outer)(model.mass, q, v, a)[1] * direction)
    assert abs(fd - analytic) < 5e-6 * max(1.0, abs(float(analytic)))


def test_per_sample_models_and_a_batched_field(per_sample):
    """vmap over stacked models: RNEA on the core (it takes stacked models), CRBA per sample (its whole-batch
    path does not); vmap over one model field (masses): RNEA on the core with the rest broadcast."""
    rng = np.random.default_rng(5)
    models = [m for _, m, _ in random_group(rng, 6, B, joint_types=(JointType.REVOLUTE, JointType.PRISMATIC))]
    names = {f: getattr(models[0], f) for f in ("link_names", "link_joint_names")}
    stacked = stack_models([dataclasses.replace(m, **names) for m in models])
    q, v, a, _ = _states(models[0], rng)
    rnea = jax.vmap(jaxsoa.rnea)
    assert _on_core(rnea, stacked, q, v, a)
    assert relative_error(jax.jit(rnea)(stacked, q, v, a), per_sample(rnea, stacked, q, v, a)) < 1e-12
    crba = jax.vmap(jaxsoa.crba)
    assert not _on_core(crba, stacked, q)
    ref = np.stack([np.asarray(jaxsoa.crba(m, q[i])) for i, m in enumerate(models)])
    assert relative_error(jax.jit(crba)(stacked, q), ref) < 1e-12
    masses = models[0].mass[None] * jnp.asarray(rng.uniform(0.5, 2.0, (B, 1, 1)))
    by_mass = jax.vmap(lambda m, *x: jaxsoa.rnea(dataclasses.replace(models[0], mass=m), *x))
    assert _on_core(by_mass, masses, q, v, a)
    assert relative_error(jax.jit(by_mass)(masses, q, v, a), per_sample(by_mass, masses, q, v, a)) < 1e-12


def test_checkify_and_bad_inputs_under_vmap():
    model = _models()["fixed base"]
    q, v, a, _ = _states(model, np.random.default_rng(6))

    def checked(q, v, a):
        checkify.check(jnp.all(jnp.isfinite(q)), "q is not finite")
        return jax.vmap(lambda *x: jaxsoa.rnea(model, *x))(q, v, a)

    err, tau = jax.jit(checkify.checkify(checked))(q, v, a)
    assert err.get() is None and tau.shape == (B, model.nv)
    err, _ = jax.jit(checkify.checkify(checked))(q.at[3, 0].set(jnp.nan), v, a)
    assert "not finite" in err.get()
    mapped = jax.vmap(lambda *x: jaxsoa.rnea(model, *x))
    with pytest.raises(ValueError, match="'a'"):
        mapped(q, v, a[:, :-1])
    with pytest.raises(TypeError, match="'q'"):
        jax.vmap(lambda q: jaxsoa.crba(model, q))(q.astype(jnp.int32))


def _conds(fn, *args):
    return str(jax.make_jaxpr(fn)(*args)).count("cond[")


STATE_LOSSES = {
    "rnea": lambda m, q, v, a, f: jnp.sum(jnp.sin(jaxsoa.rnea(m, q, v, a, f))),
    "aba": lambda m, q, v, a, f: jnp.sum(jnp.sin(jaxsoa.aba(m, q, v, a, f))),
    "crba": lambda m, q, v, a, f: jnp.sum(jnp.sin(jaxsoa.crba(m, q))),
    "frame_jacobian": lambda m, q, v, a, f: jnp.sum(jnp.sin(jaxsoa.frame_jacobian(m, q, 2, "world"))),
    "rnea_free_floating": lambda m, q, v, a, f: jnp.sum(jnp.sin(
        free_floating.rnea_free_floating(m, q, v, a[6:], f).tau_joints)),
}


ROUTED = ("rnea", "aba")
"""The entry points whose `BatchedPath` has `reverse=True`."""


@pytest.mark.parametrize("loss", list(STATE_LOSSES))
def test_state_gradients_under_vmap(loss, per_sample):
    """Reverse mode w.r.t. the states under `vmap`: for RNEA and ABA the VJP of the leading-batch call (the
    core's backward passes are in the program: more staged passes than the value's), for the others the
    per-sample JVP (no more than the value's); vmap(grad) and grad(vmap) equal the per-sample program
    (1e-11: different reduction orders)."""
    model = _models()["free-flyer"]
    fn = STATE_LOSSES[loss]
    states = _states(model, np.random.default_rng(7))
    value = jax.vmap(lambda *x: fn(model, *x))
    inner = jax.vmap(jax.grad(lambda *x: fn(model, *x), argnums=(0, 1, 2, 3)))
    outer = jax.grad(lambda *x: jnp.sum(value(*x)), argnums=(0, 1, 2, 3))
    for grad in (inner, outer):
        assert (_conds(grad, *states) > _conds(value, *states)) == (loss in ROUTED)
        got, ref = jax.jit(grad)(*states), per_sample(grad, *states)
        for g, r in zip(got, ref, strict=True):
            assert relative_error(g, r) < 1e-11


def test_model_gradients_under_vmap_stay_per_sample(per_sample):
    """Differentiated w.r.t. a model field, the VJP runs per sample (it would need per-sample model
    cotangents from the core): no staged passes beyond the value's, the per-sample program's values."""
    model = _models()["fixed base"]
    q, v, a, _ = _states(model, np.random.default_rng(8))

    def loss(mass, q, v, a):
        return jnp.sum(jnp.sin(jaxsoa.rnea(dataclasses.replace(model, mass=mass), q, v, a)))
    grad = jax.vmap(jax.grad(loss, argnums=(0, 1)), (None, 0, 0, 0))
    value = jax.vmap(loss, (None, 0, 0, 0))
    assert _conds(grad, model.mass, q, v, a) == _conds(value, model.mass, q, v, a)
    for g, r in zip(jax.jit(grad)(model.mass, q, v, a), per_sample(grad, model.mass, q, v, a), strict=True):
        assert relative_error(g, r) < 1e-12


def test_jacrev_hessian_and_linear_transpose_of_rnea():
    """Derivatives that batch only cotangents or tangents, against closed forms: `jacrev` of RNEA w.r.t. q̈
    is M (CRBA; 20 dofs, so the `vmap` over the cotangents takes the core with the states broadcast; under
    a `vmap` of samples too, and with 10 dofs, below the rule's minimum), and
    so is `jax.linear_transpose` of q̈ ↦ RNEA(q, 0, q̈) − RNEA(q, 0, 0) (M symmetric); the Hessian of
    q̈ ↦ ½ q̈ᵀ (RNEA(q, 0, q̈) − g) under `vmap` is M (1e-12)."""
    _, model, _ = _tree_case(3, n_links=20, armature=False)
    q, v, a, _ = _states(model, np.random.default_rng(9))
    M = jax.jit(jax.vmap(lambda q: jaxsoa.crba(model, q)))(q)
    jac = jax.jit(jax.jacrev(lambda a: jaxsoa.rnea(model, q[0], v[0], a)))(a[0])
    assert relative_error(jac, M[0]) < 1e-12
    jacs = jax.jit(jax.vmap(jax.jacrev(lambda q, v, a: jaxsoa.rnea(model, q, v, a), argnums=2)))(q, v, a)
    assert relative_error(jacs, M) < 1e-12                       # both vmaps on the core
    small = _models()["free-flyer"]                              # 10 dofs: the cotangent vmap per sample
    qs, vs, as_, _ = _states(small, np.random.default_rng(10))
    jacs = jax.jit(jax.vmap(jax.jacrev(lambda q, v, a: jaxsoa.rnea(small, q, v, a), argnums=2)))(qs, vs, as_)
    assert relative_error(jacs, jax.vmap(lambda q: jaxsoa.crba(small, q))(qs)) < 1e-12
    zero = jnp.zeros(model.nv)

    def mass_times(x):
        return jaxsoa.rnea(model, q[1], zero, x) - jaxsoa.rnea(model, q[1], zero, zero)
    transposed = jax.linear_transpose(mass_times, a[1])(a[2])[0]
    assert relative_error(transposed, M[1] @ a[2]) < 1e-12

    def energy(q, a):
        return 0.5 * a @ (jaxsoa.rnea(model, q, zero, a) - jaxsoa.rnea(model, q, zero, zero))
    hessians = jax.jit(jax.vmap(jax.hessian(energy, argnums=1)))(q, a)
    assert relative_error(hessians, M) < 1e-12
