"""The traversal carried by `Model`: built once by the builders, rebuilt by `Model.with_parent`
(the one way to change the topology), traced (a new parent never recompiles) and batched.

Tolerances: traversals are integer arrays, compared exactly. A model moved to a new tree and a
model built afresh on that tree hold equal arrays and run one compiled program, so their results
are compared bitwise; against Pinocchio (float64, ≤ 8 links) 1e-9 relative, as in
`tests/validation/test_random_trees.py`; a vmapped batch against per-model calls 1e-12 relative
(other association orders only).
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsoa
from jaxsoa.multibody.joints import JointType
from jaxsoa.multibody.traversal import tree_traversal
from tests.helpers.random_models import random_parent
from tests.helpers.trees import (
    build_jaxsoa,
    build_pinocchio,
    counting,
    fext_to_pinocchio,
    jaxsoa_dynamics,
    pinocchio_dynamics,
    pinocchio_to_jaxsoa_dynamics,
    random_state,
    random_tree,
    relative_error,
    to_jaxsoa,
)

# joint type of each link in storage order; the free-flyer root is link 0 of every tree below
TYPES = (JointType.FREE, JointType.REVOLUTE, JointType.SPHERICAL, JointType.PRISMATIC, JointType.FIXED,
         JointType.REVOLUTE, JointType.SPHERICAL, JointType.REVOLUTE)
N = len(TYPES)
TRAVERSAL_FIELDS = ("parent", "depth", "order", "parent_pos", "inverse_order")

_batched_dynamics = jax.jit(jax.vmap(jaxsoa_dynamics, in_axes=(None, 0, 0, 0, 0, 0)))


def tree_order_parent(rng, n):
    """A random parent array with parent[k] < k (link 0 the root), as `random_tree` draws."""
    return np.array([-1] + [int(rng.integers(0, k)) for k in range(1, n)])


def ancestor_count(parent, k):
    """Depth of link k by walking its parents (the reference for `Traversal.depth`)."""
    count = 0
    while parent[k] >= 0:
        k, count = parent[k], count + 1
    return count


def assert_traversal_of(traversal, parent, strategy="sequential", unroll=1):
    fresh = tree_traversal(jnp.asarray(parent), strategy, unroll)
    for field in TRAVERSAL_FIELDS:
        np.testing.assert_array_equal(getattr(traversal, field), getattr(fresh, field), err_msg=field)
    assert (traversal.strategy, traversal.unroll) == (strategy, unroll)
    np.testing.assert_array_equal(traversal.depth, [ancestor_count(parent, k) for k in range(len(parent))])


@pytest.mark.parametrize("seed", range(3))
def test_builders_and_with_parent_carry_the_traversal_of_the_parent(seed):
    """build_model (with its `strategy` keyword), with_parent on a host and on a traced parent
    (strategy kept unless given) all carry `tree_traversal(parent)`; depths are also checked by
    walking the parents. Parents in random storage orders (a parent may be stored after its child)."""
    rng = np.random.default_rng(seed)
    tree = random_tree(rng, N, link_types=TYPES)
    parent, _ = random_parent(rng, N)
    model = jaxsoa.build_model(parent, TYPES, tree["joint_axis"], tree["placement_rotation"],
                               tree["placement_translation"], tree["mass"], tree["com"], tree["inertia_com"],
                               dtype=jnp.float64, strategy="levels")
    assert_traversal_of(model.traversal, parent, "levels")
    other, _ = random_parent(rng, N)
    assert_traversal_of(model.with_parent(other).traversal, other, "levels")
    traced = jax.jit(lambda m, p: m.with_parent(p, strategy="sequential", unroll=2))(model, jnp.asarray(other))
    assert_traversal_of(traced.traversal, other, "sequential", 2)
    assert_traversal_of(build_jaxsoa(tree).traversal, tree["parent"])


def test_parent_is_not_a_field_to_replace():
    """The topology changes only through `with_parent`, so the traversal cannot go stale."""
    model = build_jaxsoa(random_tree(np.random.default_rng(0), N, link_types=TYPES))
    with pytest.raises(TypeError, match="parent"):
        dataclasses.replace(model, parent=model.parent)


@pytest.mark.parametrize("seed", [4, 5])
def test_with_parent_matches_a_model_built_on_that_tree_and_pinocchio(seed):
    """A model moved to tree B equals a model built afresh on B (bitwise, same program) and
    Pinocchio on B (1e-9), and differs from the model on its old tree A."""
    rng = np.random.default_rng(seed)
    tree_a = random_tree(rng, N, link_types=TYPES)
    tree_b = dict(tree_a, parent=tree_order_parent(rng, N))
    assert not np.array_equal(tree_a["parent"], tree_b["parent"])
    model_a, fresh, pin_b = build_jaxsoa(tree_a), build_jaxsoa(tree_b), build_pinocchio(tree_b)
    moved = model_a.with_parent(tree_b["parent"])

    state = random_state(rng, pin_b, 3)
    f_ext = rng.normal(size=(3, N, 6))
    js = to_jaxsoa(fresh, pin_b, state)
    inputs = [jnp.asarray(x) for x in (js["q"], js["v"], js["a"], js["tau"], f_ext)]
    got, ref = _batched_dynamics(moved, *inputs), _batched_dynamics(fresh, *inputs)
    old = _batched_dynamics(model_a, *inputs)
    fext = [fext_to_pinocchio(fresh, pin_b, f) for f in f_ext]
    expected = pinocchio_to_jaxsoa_dynamics(fresh, pin_b, pinocchio_dynamics(pin_b, state, fext))
    for key in expected:
        np.testing.assert_array_equal(got[key], ref[key], err_msg=key)
        assert relative_error(got[key], expected[key]) <= 1e-9, key
        assert relative_error(old[key], expected[key]) > 1e-3, key          # the tree really changed


def test_a_new_parent_does_not_recompile_and_batches():
    """One compiled RNEA serves every parent (the traversal is traced data); only a new strategy
    (static) compiles again. Models moved inside `vmap` form a batch of trees whose rows equal
    the per-model results."""
    rng = np.random.default_rng(6)
    model = build_jaxsoa(random_tree(rng, N, link_types=TYPES))
    q = jaxsoa.random_configuration(model, jax.random.key(6))
    v, a = (jnp.asarray(rng.normal(size=model.nv)) for _ in range(2))
    rnea, count = counting(jaxsoa.rnea)
    rnea = jax.jit(rnea)
    parents = np.stack([tree_order_parent(rng, N) for _ in range(4)])
    per_model = [rnea(model.with_parent(p), q, v, a) for p in parents]
    assert count[0] == 1
    assert min(np.abs(per_model[0] - tau).max() for tau in per_model[1:]) > 1e-3
    rnea(model.with_parent(parents[0], strategy="levels"), q, v, a)
    assert count[0] == 2

    batch = jax.vmap(model.with_parent)(jnp.asarray(parents))
    assert batch.traversal.order.shape == (4, N)
    batched = jax.jit(jax.vmap(jaxsoa.rnea, in_axes=(0, None, None, None)))(batch, q, v, a)
    for row, tau in zip(batched, per_model, strict=True):
        assert relative_error(row, tau) <= 1e-12
