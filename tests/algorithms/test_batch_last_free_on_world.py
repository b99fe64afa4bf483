"""Free joints hanging on a root welded to the world (MJCF's world body holding several free bodies,
`load_mjcf`) on the batch-last ABA with a traced topology.

Before, the batch-last ABA took a free joint only at a root, and a traced model whose free joints
hang on a fixed root (two MuJoCo humanoids in one scene) gave a NaN-marked q̈ for every sample. Now
such a free link's 6×6 solve starts from its parent's acceleration X⁻¹ a_world.

Checked in float64 on a 7-link tree (a fixed root with a rotated, translated placement, so X⁻¹ a_world
is not a_world; two free links on it with revolute, spherical and prismatic descendants; gravity on):
* the traced model under a 20-sample `vmap` (the batch-last core) against the dense solve
  M(q)⁻¹ (τ − b(q, v)) from CRBA and RNEA (an independent path): 1e-10 relative (float64, 13 dofs);
* against the per-sample recursion (the concrete model under `vmap`, which keeps it): 1e-10;
* gradients of Σ w ⊙ q̈ w.r.t. q, v, τ and the masses through the core (a leading-batch call: the
  adjoint) against the per-sample recursion: 1e-9 relative;
* a free joint on a fixed link that is not a root, or on a moving link: the entry point's `lax.cond`
  (`jaxsoa.multibody.batched.guarded`) runs the per-sample recursion, equal to the concrete model's call
  to 1e-12 (this was NaN-marked before the twelfth session).
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsoa
from jaxsoa.algorithms import batch_last
from jaxsoa.multibody import batched
from jaxsoa.multibody.joints import JointType
from tests.helpers.trees import build_jaxsoa, random_tree, relative_error

F, R, S, P, X = JointType.FREE, JointType.REVOLUTE, JointType.SPHERICAL, JointType.PRISMATIC, JointType.FIXED
TYPES = (X, F, R, S, F, P, R)
PARENT = (-1, 0, 1, 2, 0, 4, 4)
BATCH = 20


def _model(parent=PARENT, types=TYPES):
    tree = random_tree(np.random.default_rng(3), len(types), link_types=types)
    tree["parent"] = np.asarray(parent)
    return build_jaxsoa(tree)


def _states(model, seed=0):
    rng = np.random.default_rng(seed)
    keys = jax.random.split(jax.random.PRNGKey(seed), BATCH)
    q = jax.vmap(lambda k: jaxsoa.random_configuration(model, k))(keys)
    v, tau = (jnp.asarray(rng.normal(size=(BATCH, model.nv))) for _ in range(2))
    return q, v, tau


_traced_aba = jax.jit(jax.vmap(lambda m, q, v, u: jaxsoa.aba(m, q, v, u), in_axes=(None, 0, 0, 0)))


def test_traced_core_matches_the_dense_solve_and_the_recursion():
    model = _model()
    assert batch_last.supports(model)
    q, v, tau = _states(model)
    got = _traced_aba(model, q, v, tau)
    M = jax.vmap(lambda q: jaxsoa.crba(model, q))(q)
    bias = jax.vmap(lambda q, v: jaxsoa.rnea(model, q, v, jnp.zeros(model.nv)))(q, v)
    dense = jnp.linalg.solve(M, (tau - bias)[..., None])[..., 0]
    per_sample = jnp.stack([jax.jit(lambda q, v, u: jaxsoa.aba(model, q, v, u))(q[i], v[i], tau[i])
                            for i in range(BATCH)])
    assert not np.isnan(np.asarray(got)).any()
    assert relative_error(got, dense) <= 1e-10
    assert relative_error(got, per_sample) <= 1e-10


def test_core_gradients_match_the_recursion():
    """4 samples: the leading-batch call takes the core, a 4-sample `vmap` the per-sample recursion."""
    model = _model()
    q, v, tau = (x[:4] for x in _states(model, seed=1))
    w = jnp.asarray(np.random.default_rng(2).normal(size=(4, model.nv)))

    def loss(mass, q, v, tau, core):
        m = dataclasses.replace(model, mass=mass)
        qdd = jaxsoa.aba(m, q, v, tau) if core else jax.vmap(lambda q, v, u: jaxsoa.aba(m, q, v, u))(q, v, tau)
        return jnp.sum(w * qdd)

    args = (model.mass, q, v, tau)
    core = jax.jit(jax.grad(lambda *a: loss(*a, True), argnums=(0, 1, 2, 3)))(*args)
    recursion = jax.jit(jax.grad(lambda *a: loss(*a, False), argnums=(0, 1, 2, 3)))(*args)
    for name, a, b in zip(("mass", "q", "v", "tau"), core, recursion, strict=True):
        assert not np.isnan(np.asarray(a)).any(), name
        assert relative_error(a, b) <= 1e-9, name


@pytest.mark.parametrize("parent, types", [
    ((-1, 0, 1, 2, 0, 4, 4), (X, X, F, S, F, P, R)),       # free on a fixed link that is not a root
    ((-1, 0, 1, 2, 0, 4, 4), (X, R, F, S, F, P, R)),       # free on a revolute link
], ids=["fixed-not-root", "moving-parent"])
def test_free_joint_elsewhere_runs_the_per_sample_recursion(parent, types):
    model = _model(parent, types)
    assert not batch_last.supports(model)                   # concrete: the per-sample recursion
    q, v, tau = _states(model)
    got = np.asarray(_traced_aba(model, q, v, tau))
    assert np.isfinite(got).all()
    assert relative_error(got, jax.vmap(lambda q, v, u: jaxsoa.aba(model, q, v, u))(q, v, tau)) <= 1e-12


def test_fallback_runs_in_chunks(monkeypatch):
    """The per-sample fallback of a traced topology runs `BATCH_CHUNK` samples at a time (here 8: 20 samples
    in 3 chunks, the last padded): values and gradients equal the concrete model's per-sample call."""
    monkeypatch.setattr(batched, "BATCH_CHUNK", 8)
    model = _model((-1, 0, 1, 2, 0, 4, 4), (X, R, F, S, F, P, R))           # a free joint on a moving link
    q, v, tau = _states(model, seed=4)
    w = jnp.asarray(np.random.default_rng(5).normal(size=(BATCH, model.nv)))

    def loss(m, mass, q):
        return jnp.sum(w * jaxsoa.aba(dataclasses.replace(m, mass=mass), q, v, tau))
    got = jax.jit(jax.value_and_grad(loss, argnums=(1, 2)))(model, model.mass, q)
    ref = jax.value_and_grad(lambda mass, q: jnp.sum(w * jax.vmap(
        lambda q, v, u: jaxsoa.aba(dataclasses.replace(model, mass=mass), q, v, u))(q, v, tau)), argnums=(0, 1))(
        model.mass, q)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(ref), strict=True):
        assert np.isfinite(np.asarray(a)).all()
        assert relative_error(a, b) <= 1e-12


@pytest.mark.optimized       # XLA's buffer assignment is what this is about
def test_guarded_call_temporaries_do_not_grow_with_the_batch():
    """The traced topology's call compiles the per-sample fallback beside the core; as one `vmap` of the whole
    batch its temporaries grew with the batch (8× from 1024 to 8192 samples), in chunks they do not."""
    model = _model()

    def temporaries(batch):
        q, v = jnp.zeros((batch, model.nq)), jnp.zeros((batch, model.nv))
        compiled = jax.jit(lambda m, q, v: jaxsoa.aba(m, q, v, v)).lower(model, q, v).compile()
        return compiled.memory_analysis().temp_size_in_bytes
    assert temporaries(8 * batched.BATCH_CHUNK) < 1.5 * temporaries(2 * batched.BATCH_CHUNK)
