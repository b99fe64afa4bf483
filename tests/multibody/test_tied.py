"""`jaxsoa.multibody.tied.tied_to_states`: the barrier that keeps JAX from splitting a differentiated call
into a model-only half and a state half appears only where JAX linearises (a JVP, hence reverse mode); an
undifferentiated call passes its arrays unchanged, so XLA may hoist the model's terms out of the chunk
loop (docs/performance.md, "The tie only where JAX linearises"). Values and derivatives are those of the
identity (exactly: the barrier computes nothing)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsoa
from jaxsoa.multibody import batched
from jaxsoa.multibody.joints import JointType
from jaxsoa.multibody.tied import tied_to_states
from tests.helpers.jaxprs import count_float_barriers, count_primitive
from tests.helpers.trees import build_jaxsoa, random_tree, relative_error


def _case(batch):
    rng = np.random.default_rng(4)
    model = build_jaxsoa(random_tree(rng, 5, joint_types=(JointType.REVOLUTE, JointType.PRISMATIC)))
    q, v, tau = (jnp.asarray(rng.normal(size=(batch, model.nv))) for _ in range(3))
    return model, q, v, tau


def test_values_pass_unchanged_and_derivatives_are_the_identity():
    model, q, v, _ = _case(3)
    shared, states = tied_to_states(model, dict(q=q, v=v))
    for a, b in zip(jax.tree.leaves((shared, states)), jax.tree.leaves((model, dict(q=q, v=v))), strict=True):
        np.testing.assert_array_equal(a, b)
    jaxpr = jax.make_jaxpr(lambda m, q: tied_to_states(m, q))(model, q)
    assert count_primitive(jaxpr.jaxpr, "optimization_barrier") == 0
    f = lambda q, mass: jnp.sum(tied_to_states(mass, q)[1] ** 2) * jnp.sum(tied_to_states(mass, q)[0])  # noqa: E731
    jvp = jax.make_jaxpr(lambda q, mass: jax.jvp(f, (q, mass), (q, mass)))(q, model.mass)
    assert count_primitive(jvp.jaxpr, "optimization_barrier") >= 1
    grad = jax.grad(f, argnums=(0, 1))(q, model.mass)
    np.testing.assert_array_equal(grad[0], 2 * q * jnp.sum(model.mass))
    np.testing.assert_array_equal(grad[1], jnp.full_like(model.mass, jnp.sum(q ** 2)))


def test_a_chunked_value_call_has_no_barrier_and_its_gradient_has_one_per_chunk_call(monkeypatch):
    """The leading-batch ABA over 3 chunks: the value's program has no barrier on floating-point arrays in the chunk
    loop (with the model passed as an argument, none at all; closed over, only the fence of its constants before the
    loop, `fenced_constants`); reverse mode's ties each chunk's call (the barrier sits in the chunk loop's body,
    traced once)."""
    monkeypatch.setattr(batched, "BATCH_CHUNK", 4)
    model, q, v, tau = _case(10)
    argument = jax.make_jaxpr(lambda m, q, v, tau: jaxsoa.aba(m, q, v, tau))(model, q, v, tau)
    assert count_float_barriers(argument.jaxpr) == 0
    closed = jax.make_jaxpr(lambda q, v, tau: jaxsoa.aba(model, q, v, tau))(q, v, tau)
    assert count_float_barriers(closed.jaxpr, nested=False) == 1 and count_float_barriers(closed.jaxpr) == 1
    grad = jax.make_jaxpr(jax.grad(lambda q, v, tau: jnp.sum(jnp.sin(jaxsoa.aba(model, q, v, tau)))))(q, v, tau)
    assert count_float_barriers(grad.jaxpr) >= 2


@pytest.mark.optimized             # XLA's own passes (constant folding) are what this is about
def test_a_closed_over_model_compiles_as_an_argument_does():
    """A model closed over by `jax.jit` (its arrays constants of the program) against the same model passed as an
    argument, a leading batch of 10 (one call): the optimised programs keep the same number of stage conditionals
    (the fusion barriers of `jaxsoa.multibody.batch_last.stage`; with a constant topology XLA folded `always`'s
    predicate and dropped one of ABA's 12 and two of RNEA's 6), and the results agree (1e-13 relative: the same
    operations, compiled apart). docs/performance.md, "A model closed over by `jax.jit`", has the timings."""
    model, q, v, tau = _case(10)
    for algo in (jaxsoa.rnea, jaxsoa.aba):
        argument = jax.jit(lambda m, q, v, tau, algo=algo: algo(m, q, v, tau)).lower(model, q, v, tau).compile()
        closed = jax.jit(lambda q, v, tau, algo=algo: algo(model, q, v, tau)).lower(q, v, tau).compile()
        assert argument.as_text().count(" conditional(") == closed.as_text().count(" conditional(") > 0
        assert relative_error(closed(q, v, tau), argument(model, q, v, tau)) < 1e-13


def test_second_derivatives_are_the_identitys():
    """A Hessian through the tie (the JVP of its JVP): that of Σ q³, diag(6 q), exactly."""
    q = jnp.asarray(np.random.default_rng(5).normal(size=4))
    mass = jnp.ones(3)
    hessian = jax.hessian(lambda q: jnp.sum(tied_to_states(mass, q)[1] ** 3))(q)
    np.testing.assert_array_equal(hessian, jnp.diag(6 * q))


def test_always_ties_the_values_without_a_derivative():
    """`always=True` (the forward of a `vmap` rule's reverse mode, evaluated on undifferentiated values inside the
    rule): the barrier is in the program of the plain call too; values unchanged and the derivatives the identity's
    (exactly); the parent array passes outside the barrier, as without `always`."""
    model, q, v, _ = _case(3)
    shared, states = tied_to_states(model, dict(q=q, v=v), always=True)
    for a, b in zip(jax.tree.leaves((shared, states)), jax.tree.leaves((model, dict(q=q, v=v))), strict=True):
        np.testing.assert_array_equal(a, b)
    assert shared.traversal.parent is model.traversal.parent
    jaxpr = jax.make_jaxpr(lambda m, q: tied_to_states(m, q, always=True))(model, q)
    assert count_primitive(jaxpr.jaxpr, "optimization_barrier") == 1
    grad = jax.grad(lambda q: jnp.sum(tied_to_states(model.mass, q, always=True)[1] ** 2))(q)
    np.testing.assert_array_equal(grad, 2 * q)
