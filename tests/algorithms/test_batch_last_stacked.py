"""Per-sample trees on the batch-last core: a stacked model (`jaxsoa.stack_models`, every field with a
leading batch axis, the topology included) runs RNEA and ABA for the whole batch in one call.

Checked, in float64:
* against Pinocchio, sample by sample (each sample its own random tree stored in its own order, a
  free-flyer root, armature and link wrenches), tolerance 1e-9 relative as the other Pinocchio tests;
* against the per-sample recursions vmapped over the models, in both ways of reaching a per-sample
  parent row (gathers and masked sums, `jaxsoa.multibody.batch_last.dense_access`), 1e-12: the same
  equations in another order of operations, so only rounding differs;
* one compilation for stacks of different trees, and the call really takes the batch-last path;
* gradients w.r.t. the stacked model's masses, CoMs and placements and the states equal plain
  autodiff of the per-sample recursion (1e-10);
* bad stacks and states whose batch disagrees with the stack are rejected by name.
"""

import dataclasses

import jax
import jax.extend.core
import jax.numpy as jnp
import numpy as np
import pinocchio as pin
import pytest

import jaxsoa
from jaxsoa.algorithms import batch_last_rnea, dynamics
from jaxsoa.multibody import batch_last as bl
from jaxsoa.multibody.joints import JointType
from tests.helpers.trees import (
    coordinate_maps,
    counting,
    fext_to_pinocchio,
    random_group,
    random_state,
    relative_error,
    stack_models,
    to_jaxsoa,
)

R, P, F, X = JointType.REVOLUTE, JointType.PRISMATIC, JointType.FREE, JointType.FIXED


@pytest.fixture(params=["gather", "dense"])
def access(request, monkeypatch):
    """Both ways of reaching a per-sample parent row (read at trace time)."""
    monkeypatch.setattr(bl, "DENSE_MAX_LINKS", 0 if request.param == "gather" else 10_000)
    return request.param


def _group(seed, n_links, n_models, root_type=F):
    cases = random_group(np.random.default_rng(seed), n_links, n_models, joint_types=(R, P, X),
                         root_type=root_type, root_at=None if root_type is None else 2)
    return [(model, pin_model) for _, model, pin_model in cases]


def _per_model(fn, stacked, *states):
    """The per-sample recursion `fn(model_b, *state_b)` vmapped over the stack and the states, jitted."""
    return jax.jit(jax.vmap(fn))(stacked, *states)


def test_stacked_trees_against_pinocchio(access):
    rng = np.random.default_rng(11)
    group = _group(11, 7, 5)
    rows = []
    for model, pin_model in group:                   # one state per model, in its own coordinates
        arm = rng.uniform(0.05, 0.3, model.nv)
        arm[model.v_columns(F).ravel()] = 0.0
        _, v_index = coordinate_maps(model, pin_model)
        pin_model.armature = arm[np.argsort(v_index)]
        state = random_state(rng, pin_model, 1)
        f_ext = rng.normal(size=(model.n_links, 6))
        data = pin_model.createData()
        fext = fext_to_pinocchio(model, pin_model, f_ext)
        rnea_ref = pin.rnea(pin_model, data, state["q"][0], state["v"][0], state["a"][0], fext)[v_index]
        aba_ref = pin.aba(pin_model, data, state["q"][0], state["v"][0], state["tau"][0], fext)[v_index]
        rows.append((dataclasses.replace(model, armature=jnp.asarray(arm)), to_jaxsoa(model, pin_model, state),
                     f_ext, rnea_ref, aba_ref))
    stacked = stack_models([r[0] for r in rows])
    s = {k: jnp.concatenate([r[1][k] for r in rows]) for k in ("q", "v", "a", "tau")}
    f_ext = jnp.asarray(np.stack([r[2] for r in rows]))
    rnea = jax.jit(jaxsoa.rnea)(stacked, s["q"], s["v"], s["a"], f_ext)
    aba = jax.jit(jaxsoa.aba)(stacked, s["q"], s["v"], s["tau"], f_ext)
    for b, row in enumerate(rows):
        assert relative_error(rnea[b], row[3]) < 1e-9
        assert relative_error(aba[b], row[4]) < 1e-9


@pytest.mark.parametrize("n_links, root_type", [(5, None), (20, F)])
def test_stacked_equals_the_per_sample_recursions(access, n_links, root_type):
    """Per-sample trees, inertias, placements, gravity and armature, in both access modes."""
    rng = np.random.default_rng(n_links)
    models = [m for m, _ in _group(n_links, n_links, 4, root_type)]
    models = [dataclasses.replace(m, gravity=jnp.asarray(rng.normal(size=3)),
                                  armature=jnp.asarray(rng.uniform(0.0, 0.2, m.nv))) for m in models]
    stacked = stack_models(models)
    q = jax.vmap(lambda k: jaxsoa.random_configuration(models[0], k))(jax.random.split(jax.random.key(1), 4))
    v, a = (jnp.asarray(rng.normal(size=(4, models[0].nv))) for _ in range(2))
    f_ext = jnp.asarray(rng.normal(size=(4, n_links, 6)))
    rnea = jax.jit(jaxsoa.rnea)(stacked, q, v, a, f_ext)
    aba = jax.jit(jaxsoa.aba)(stacked, q, v, a, f_ext)
    assert relative_error(rnea, _per_model(dynamics.rnea.__wrapped__, stacked, q, v, a, f_ext)) < 1e-12
    assert relative_error(aba, _per_model(dynamics._aba_recursion, stacked, q, v, a, f_ext)) < 1e-12
    shared = jax.jit(jaxsoa.aba)(stacked, q[0], v[0], a[0])           # states shared by the stack
    assert relative_error(shared, _per_model(lambda m: dynamics._aba_recursion(m, q[0], v[0], a[0]), stacked)) < 1e-12


def test_one_compilation_and_the_batch_last_path(monkeypatch):
    group = [m for m, _ in _group(3, 8, 6)]
    first, second = stack_models(group[:3]), stack_models(group[3:])
    assert not np.array_equal(first.parent, second.parent)
    fn, count = counting(lambda m, q, v, tau: (jaxsoa.rnea(m, q, v, tau), jaxsoa.aba(m, q, v, tau)))
    compiled = jax.jit(fn)

    def per_sample_path(*_):
        raise AssertionError("a stacked model took the per-sample path")
    monkeypatch.setattr(dynamics, "_aba_adjoint", per_sample_path)   # the per-sample ABA's body calls it
    q = jax.vmap(lambda k: jaxsoa.random_configuration(group[0], k))(jax.random.split(jax.random.key(2), 3))
    v = jnp.ones((3, group[0].nv))
    for stacked in (first, second, first):
        compiled(stacked, q, v, v)
    assert count[0] == 1


@pytest.mark.slow            # a gradient compile of the stacked adjoint and one of plain autodiff (~1 min)
def test_gradients_through_a_stack_equal_plain_autodiff():
    rng = np.random.default_rng(5)
    models = [m for m, _ in _group(5, 5, 3)]
    stacked = stack_models(models)
    q = jax.vmap(lambda k: jaxsoa.random_configuration(models[0], k))(jax.random.split(jax.random.key(5), 3))
    v, tau = (jnp.asarray(rng.normal(size=(3, models[0].nv))) for _ in range(2))
    weights = jnp.asarray(rng.normal(size=(3, models[0].nv)))
    fields = ("mass", "com", "placement_translation", "placement_rotation", "gravity")

    def loss(aba_fn, params, q, v, tau):
        return jnp.sum(weights * jnp.sin(aba_fn(dataclasses.replace(stacked, **params), q, v, tau)))

    params = {f: getattr(stacked, f) for f in fields}
    got = jax.jit(jax.grad(lambda *x: loss(jaxsoa.aba, *x), argnums=(0, 1, 2, 3)))(params, q, v, tau)
    ref = jax.jit(jax.grad(lambda *x: loss(jax.vmap(dynamics.aba_autodiff), *x), argnums=(0, 1, 2, 3)))(
        params, q, v, tau)
    for g, r in zip(jax.tree.leaves(got), jax.tree.leaves(ref), strict=True):
        assert relative_error(g, r) < 1e-10


def test_other_entry_points_run_a_stack_per_sample():
    """Entry points without a stacked batch-last path vmap over the stack: CRBA, kinematics."""
    models = [m for m, _ in _group(7, 6, 3)]
    stacked = stack_models(models)
    q = jax.vmap(lambda k: jaxsoa.random_configuration(models[0], k))(jax.random.split(jax.random.key(7), 3))
    M = jax.jit(jaxsoa.crba)(stacked, q)
    com = jax.jit(jaxsoa.center_of_mass)(stacked, q)
    for b in range(3):
        model_b = jax.tree.map(lambda x, b=b: x[b], stacked)
        assert relative_error(M[b], jax.jit(jaxsoa.crba)(model_b, q[b])) < 1e-12
        assert relative_error(com[b], jax.jit(jaxsoa.center_of_mass)(model_b, q[b])) < 1e-12


def test_bad_stacks_and_batches_are_named():
    models = [m for m, _ in _group(9, 6, 3)]
    other = next(m for m, _ in _group(10, 6, 1, root_type=None))
    with pytest.raises(ValueError, match=r"models\[1\]\.joint_types"):
        jaxsoa.stack_models([models[0], other])
    with pytest.raises(ValueError, match=r"models\[2\]\.link_names"):
        jaxsoa.stack_models([models[0], models[0], dataclasses.replace(models[0], link_names=tuple("abcdef"))])
    with pytest.raises(TypeError, match="sequence of jaxsoa Models"):
        jaxsoa.stack_models([])
    stacked = stack_models(models)
    q = jax.vmap(lambda k: jaxsoa.random_configuration(models[0], k))(jax.random.split(jax.random.key(9), 4))
    with pytest.raises(ValueError, match=r"argument 'q' has batch shape \(4,\).*stack of 3 models"):
        jaxsoa.aba(stacked, q, q[:, :models[0].nv], q[:, :models[0].nv])
    half = dataclasses.replace(models[0], mass=jnp.stack([models[0].mass] * 3))   # only one field stacked
    with pytest.raises(ValueError, match="model field 'mass' has shape"):
        jaxsoa.rnea(half, q[0], q[0, :models[0].nv], q[0, :models[0].nv])
    with pytest.raises(ValueError, match="stack of"):
        batch_last_rnea.rnea(stacked, q, q[:, :models[0].nv], q[:, :models[0].nv])


def test_child_chains_list_every_child_once():
    """First-child / next-sibling links (sequence positions) that each stacked tree carries, against a
    brute-force listing, on a stack of random trees with several roots' worth of siblings."""
    stacked = stack_models([m for m, _ in _group(13, 9, 6, root_type=None)])
    first, nxt = (np.asarray(x).T for x in (stacked.traversal.first_child, stacked.traversal.next_sibling))
    parents = np.asarray(bl.world_positions(stacked.traversal))            # (n, B), n at a root
    n = parents.shape[0]
    for b in range(parents.shape[1]):
        for p in range(n + 1):
            children = sorted(np.flatnonzero(parents[:, b] == p))
            chain, c = [], first[p, b]
            while c != n:
                chain.append(c)
                c = nxt[c, b]
            assert chain == children


def test_per_sample_trees_sort_nothing_per_call():
    """The children chains come with the stacked model (built once with each tree), so a call on
    per-sample trees runs no sort; the model's construction does (the control)."""
    models = [m for m, _ in _group(14, 7, 5, root_type=None)]
    stacked = stack_models(models)
    q = jnp.zeros((5, models[0].nq))

    def sorts(jaxpr):
        return sum(eqn.primitive.name == "sort" for eqn in jaxpr.eqns) + sum(
            sorts(sub) for eqn in jaxpr.eqns for sub in jax.extend.core.jaxprs_in_params(eqn.params))

    call = jax.make_jaxpr(lambda m, q: jaxsoa.rnea(m, q, q[:, :m.nv], q[:, :m.nv]))(stacked, q).jaxpr
    build = jax.make_jaxpr(lambda parents: jax.vmap(models[0].with_parent)(parents))(stacked.parent).jaxpr
    assert sorts(call) == 0
    assert sorts(build) > 0
