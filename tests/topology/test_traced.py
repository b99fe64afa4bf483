"""The topology is data: a batch of different trees and a topology switch inside a rollout each
compile once; gradients flow to the link inertias; checkify catches bad traced models."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import checkify
from jax.test_util import check_grads

import jaxsoa
from jaxsoa.integrators.steps import semi_implicit_euler_step
from jaxsoa.multibody.checks import check_configuration, check_model
from tests.helpers.trees import counting, random_group, stack_models


@pytest.fixture(scope="module")
def group():
    """Eight random 6-link trees (free-flyer root at storage index 2) with one joint-type
    sequence: different parents, storage orders, placements and inertias."""
    cases = random_group(np.random.default_rng(7), 6, 8, root_type=jaxsoa.JointType.FREE, root_at=2)
    names = dict(link_names=tuple(f"l{k}" for k in range(6)), link_joint_names=tuple(f"j{k}" for k in range(6)))
    return [dataclasses.replace(model, **names) for _, model, _ in cases]   # names are static metadata




def _states(model, batch, seed):
    keys = jax.random.split(jax.random.PRNGKey(seed), batch)
    q = jax.vmap(lambda k: jaxsoa.random_configuration(model, k))(keys)
    v = jax.random.normal(jax.random.PRNGKey(seed + 1), (batch, model.nv), jnp.float64)
    return q, v


def test_batches_of_states_and_of_topologies_compile_once(group):
    aba_counted, count = counting(jaxsoa.aba)
    per_model = jax.jit(jax.vmap(aba_counted, in_axes=(0, 0, 0, 0)))
    first, second = stack_models(group[:4]), stack_models(group[4:])
    assert not np.array_equal(first.parent, second.parent)            # really different trees
    for batch_models, seed in ((first, 0), (second, 1), (first, 2)):
        q, v = _states(group[0], 4, seed)
        qdd = per_model(batch_models, q, v, v)
        for i in range(4):                                             # each row is its own tree
            model_i = jax.tree_util.tree_map(lambda x, i=i: x[i], batch_models)
            np.testing.assert_allclose(qdd[i], jax.jit(jaxsoa.aba)(model_i, q[i], v[i], v[i]), rtol=1e-12)
    assert count[0] == 1

    states_only, count_states = counting(jaxsoa.rnea)
    batched_states = jax.jit(jax.vmap(states_only, in_axes=(None, 0, 0, 0)))
    for seed in (3, 4):
        q, v = _states(group[0], 16, seed)
        batched_states(group[0], q, v, v)
    batched_states(group[5], q, v, v)                                   # another tree, same shapes
    assert count_states[0] == 1


def _switching_rollout(model_a, model_b, q0, v0, switch_step, n_steps, dt=1e-3):
    """Semi-implicit Euler rollout whose model is A before `switch_step` and B after: the
    topology switch is a traced select between two PyTrees of arrays."""
    def body(state, k):
        model = jax.tree_util.tree_map(lambda a, b: jnp.where(k < switch_step, a, b), model_a, model_b)
        q, v = semi_implicit_euler_step(model, *state, jnp.zeros_like(state[1]), dt)
        return (q, v), None

    return jax.lax.scan(body, (q0, v0), jnp.arange(n_steps))[0]


def test_topology_switch_inside_rollout_compiles_once(group):
    model_a, model_b = group[0], group[1]
    rollout_counted, count = counting(_switching_rollout)
    rollout = jax.jit(rollout_counted, static_argnums=(5,))
    q, v = _states(model_a, 1, 5)
    q0, v0 = q[0], v[0]
    switched = rollout(model_a, model_b, q0, v0, 20, 40)
    rollout(model_a, model_b, q0, v0, 30, 40)                           # switch time is traced too
    rollout(model_b, model_a, q0, v0, 10, 40)
    assert count[0] == 1
    # the switch really happened: A for 20 steps then B for 20 equals the two stages run apart
    mid = rollout(model_a, model_a, q0, v0, 0, 20)
    staged = rollout(model_b, model_b, *mid, 0, 20)
    pure_a = rollout(model_a, model_a, q0, v0, 0, 40)
    np.testing.assert_allclose(switched[0], staged[0], rtol=1e-12, atol=1e-12)
    assert np.abs(np.asarray(switched[0] - pure_a[0])).max() > 1e-6


def test_grad_of_aba_wrt_inertias_matches_finite_differences(group):
    model = group[3]
    q, v = _states(model, 1, 9)
    tau = jnp.linspace(-1.0, 1.0, model.nv)

    # inertia through its symmetric part: the dynamics is defined on symmetric inertias, and off them
    # ABA's recursion and the adjoint gradient (jaxsoa.algorithms.adjoint) extend it differently
    def loss(mass, com, inertia_com):
        symmetric = 0.5 * (inertia_com + jnp.swapaxes(inertia_com, -1, -2))
        m = dataclasses.replace(model, mass=mass, com=com, inertia_com=symmetric)
        qdd = jaxsoa.aba(m, q[0], v[0], tau)
        return jnp.sum(qdd * jnp.cos(jnp.arange(model.nv, dtype=qdd.dtype)))

    # central differences with eps = 1e-6 in float64: truncation ~eps², rounding ~1e-10 → 1e-5 rel
    check_grads(jax.jit(loss), (model.mass, model.com, model.inertia_com), order=1, modes=("rev", "fwd"),
                eps=1e-6, atol=1e-5, rtol=1e-5)


def test_checkify_reports_bad_traced_models(group):
    checked = jax.jit(checkify.checkify(lambda m, q: (check_model(m), check_configuration(m, q))))
    model = group[0]
    q = jaxsoa.neutral(model)
    err, _ = checked(model, q)
    err.throw()                                                         # a valid model passes
    root = int(model.parent.argmin())
    child = int(np.flatnonzero(np.asarray(model.parent) == root)[0])
    cyclic = jax.jit(lambda m, p: m.with_parent(p))(model, model.parent.at[root].set(child))   # root ↔ child, traced
    with pytest.raises(checkify.JaxRuntimeError, match=r"cycle|root"):
        checked(cyclic, q)[0].throw()
    with pytest.raises(checkify.JaxRuntimeError, match="'mass' is negative"):
        checked(dataclasses.replace(model, mass=-model.mass), q)[0].throw()
    with pytest.raises(checkify.JaxRuntimeError, match="quaternion"):
        checked(model, q.at[model.q_columns(jaxsoa.JointType.FREE)[0, -1]].set(2.0))[0].throw()
