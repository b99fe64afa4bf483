"""Unit tests of `jaxsoa.multibody.traversal`: the path matrix, depths and order on hand-written trees whose
link IDs are not in topological order, the outward / inward passes, and the equivalence of the
"sequential" and "levels" strategies (and of `unroll` values) for RNEA, ABA and CRBA.

Tolerances: integer results (depths, orders, path matrices, subtree sizes) are exact. The
dynamics strategies perform the same arithmetic in different association orders (scan vs
segment_sum), so results agree to round-off: 1e-10 relative to the largest entry (float64,
O(10)-O(100) values from 6-link trees) leaves ~4 orders of margin.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsoa
from jaxsoa.multibody.joints import JointType
from jaxsoa.multibody.traversal import inward, link_depth, outward, path_matrix, tree_traversal
from tests.helpers.random_models import random_parent, random_rotation

# A tree stored out of topological order: link 1 is the root, link 0's parent (2) comes after it.
#        1
#        |
#        2
#       / \
#      0   3
#          |
#          4
PARENT = [2, -1, 1, 2, 3]
DEPTH = [2, 0, 1, 2, 3]
PATH = np.array([      # P[i, j] = 1 iff link i lies on the path from link j to the root (j included)
    # j: 0  1  2  3  4
    [1, 0, 0, 0, 0],    # i = 0: only on its own path
    [1, 1, 1, 1, 1],    # i = 1: the root is on every path
    [1, 0, 1, 1, 1],    # i = 2
    [0, 0, 0, 1, 1],    # i = 3
    [0, 0, 0, 0, 1],    # i = 4
], dtype=bool)

STRATEGIES = [("sequential", 1), ("sequential", 3), ("levels", 1)]


@functools.partial(jax.jit, static_argnums=(1, 2))
def jit_path_matrix(parent, strategy="sequential", unroll=1):
    return path_matrix(tree_traversal(parent, strategy, unroll))


def ancestors(parent, j):
    out = [j]
    while parent[out[-1]] >= 0:
        out.append(parent[out[-1]])
    return out


def reference_path_matrix(parent):
    n = len(parent)
    P = np.zeros((n, n), bool)
    for j in range(n):
        P[ancestors(parent, j), j] = True
    return P


# --------------------------------------------------------------------------------------------- #
# path matrix, depth, order
# --------------------------------------------------------------------------------------------- #

@pytest.mark.parametrize("strategy, unroll", STRATEGIES)
def test_path_matrix_hand_written_tree(strategy, unroll):
    trav = tree_traversal(jnp.asarray(PARENT), strategy, unroll)
    assert reference_path_matrix(PARENT).tolist() == PATH.tolist()      # the table above is right
    P = np.asarray(path_matrix(trav))
    assert P.dtype == bool
    np.testing.assert_array_equal(P, PATH)
    P = np.asarray(jit_path_matrix(jnp.asarray(PARENT), strategy, unroll))
    np.testing.assert_array_equal(P, PATH)


def test_depth_and_order_hand_written_tree():
    trav = tree_traversal(jnp.asarray(PARENT))
    np.testing.assert_array_equal(link_depth(jnp.asarray(PARENT)), DEPTH)
    np.testing.assert_array_equal(trav.depth, DEPTH)
    order = np.asarray(trav.order)
    assert sorted(order.tolist()) == list(range(5))
    assert order[0] == 1
    np.testing.assert_array_equal(np.asarray(trav.inverse_order)[order], np.arange(5))
    position = {int(link): t for t, link in enumerate(order)}
    for k, p in enumerate(PARENT):
        if p >= 0:
            assert position[p] < position[k], f"parent {p} of link {k} must come first"
    expected_parent_pos = [-1 if PARENT[k] < 0 else position[PARENT[k]] for k in order]
    np.testing.assert_array_equal(trav.parent_pos, expected_parent_pos)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 8, 9, 16, 17, 33])
def test_link_depth_of_reversed_chains(n):
    """Chains stored tip-first (parent[k] = k + 1) need every pointer-jumping round."""
    parent = np.append(np.arange(1, n), -1)
    np.testing.assert_array_equal(link_depth(jnp.asarray(parent)), np.arange(n)[::-1])
    order = np.asarray(tree_traversal(jnp.asarray(parent)).order)
    np.testing.assert_array_equal(order, np.arange(n)[::-1])


@pytest.mark.parametrize("n_tree, n_cycle", [(1, 1), (1, 2), (4, 3), (9, 8), (3, 14)])
def test_link_depth_flags_links_that_never_reach_the_root(n_tree, n_cycle):
    """A tree of `n_tree` links (reversed chain) beside a cycle of `n_cycle` links, one more link
    hanging on the cycle: pointer jumping gives the true depth to links that reach the root and a
    depth ≥ n to the others (the rule `check_model` reads from `model.traversal.depth`),
    against a host walk of the parents."""
    tree = np.append(np.arange(1, n_tree), -1)
    cycle = n_tree + (np.arange(1, n_cycle + 1) % n_cycle)           # link n_tree + i -> next one
    parent = np.concatenate([tree, cycle, [n_tree]])
    n = len(parent)
    depth = np.asarray(link_depth(jnp.asarray(parent)))
    for k in range(n):
        seen, j = {k}, parent[k]
        while j >= 0 and j not in seen:
            seen.add(j)
            j = parent[j]
        if j < 0:
            assert depth[k] == len(ancestors(parent, k)) - 1
        else:
            assert depth[k] >= n, (k, depth[k])


@pytest.mark.parametrize("seed", range(4))
def test_random_trees_depth_order_path(seed):
    rng = np.random.default_rng(seed)
    parent, _ = random_parent(rng, 12)
    trav = tree_traversal(jnp.asarray(parent))
    np.testing.assert_array_equal(trav.depth, [len(ancestors(parent, k)) - 1 for k in range(12)])
    position = np.empty(12, int)
    position[np.asarray(trav.order)] = np.arange(12)
    for k, p in enumerate(parent):
        assert p < 0 or position[p] < position[k]
    for strategy, unroll in STRATEGIES:
        np.testing.assert_array_equal(jit_path_matrix(jnp.asarray(parent), strategy, unroll),
                                      reference_path_matrix(parent))


def test_topology_is_traced():
    """One compiled function serves two different trees of the same size."""
    traces = []

    @jax.jit
    def fn(parent):
        traces.append(None)
        return path_matrix(tree_traversal(parent))

    chain = np.array([-1, 0, 1, 2, 3])
    np.testing.assert_array_equal(fn(jnp.asarray(PARENT, jnp.int32)), PATH)
    np.testing.assert_array_equal(fn(jnp.asarray(chain, jnp.int32)), reference_path_matrix(chain))
    assert len(traces) == 1


@pytest.mark.parametrize("strategy, unroll", STRATEGIES)
def test_outward_and_inward_passes(strategy, unroll):
    """Outward: depth = parent's depth + 1. Inward: subtree size = 1 + Σ children's sizes
    (and the value handed up is what the parent receives)."""
    rng = np.random.default_rng(11)
    parent, _ = random_parent(rng, 9)
    P = reference_path_matrix(parent)

    def step(d, acc):
        size = d + acc
        return (size, acc), size

    @jax.jit
    def passes(parent):
        trav = tree_traversal(parent, strategy, unroll)
        depth, extra = outward(trav, lambda d, vp: (vp + 1, 10 * d), jnp.arange(9), jnp.asarray(-1))
        return depth, extra, inward(trav, step, jnp.ones(9, jnp.int32), jnp.asarray(0, jnp.int32))

    depth, extra, (size, children) = passes(jnp.asarray(parent))
    np.testing.assert_array_equal(depth, [len(ancestors(parent, k)) - 1 for k in range(9)])
    np.testing.assert_array_equal(extra, 10 * np.arange(9))
    np.testing.assert_array_equal(size, P.sum(axis=1))
    np.testing.assert_array_equal(children, P.sum(axis=1) - 1)


@pytest.mark.parametrize("strategy", ["Sequential", "level", "", "scan"])
def test_invalid_strategy_raises(strategy):
    with pytest.raises(ValueError, match="strategy"):
        tree_traversal(jnp.asarray(PARENT), strategy)


def test_invalid_strategy_raises_through_the_model(robot_models):
    model = robot_models["panda"][0]
    with pytest.raises(ValueError, match="strategy"):
        model.with_parent(model.parent, strategy="level")
    with pytest.raises(ValueError, match="strategy"):
        random_model(np.random.default_rng(0), random_parent(np.random.default_rng(0), N)[0], strategy="level")


# --------------------------------------------------------------------------------------------- #
# dynamics: strategies, unroll and storage order give the same results
# --------------------------------------------------------------------------------------------- #

# Fixed joint types by storage index (every type, the root anywhere): with the topology traced,
# one compilation per (algorithm, strategy) serves every random tree below.
TYPES = (JointType.REVOLUTE, JointType.SPHERICAL, JointType.PRISMATIC, JointType.FIXED, JointType.FREE,
         JointType.REVOLUTE)
N = len(TYPES)


def random_model(rng, parent, **build_kwargs):
    """A model of `TYPES` on the tree `parent`, with random placements, axes and valid inertias."""
    axes = rng.normal(size=(N, 3))
    axes /= np.linalg.norm(axes, axis=1, keepdims=True)
    principal = rng.uniform(0.1, 0.19, size=(N, 3))          # any values in [a, 2a]: triangle inequality
    rotations = [random_rotation(rng) for _ in range(N)]
    inertia = np.stack([R @ np.diag(d) @ R.T for R, d in zip(rotations, principal, strict=True)])
    return jaxsoa.build_model(
        parent, TYPES, axes, np.stack([random_rotation(rng) for _ in range(N)]), rng.normal(size=(N, 3)) * 0.3,
        mass=rng.uniform(0.5, 2.0, size=N), com=rng.normal(size=(N, 3)) * 0.1, inertia_com=inertia,
        dtype=jnp.float64, **build_kwargs)


@functools.partial(jax.jit, static_argnames=("algorithm", "strategy", "unroll"))
def dynamics(model, q, v, x, f_ext, algorithm, strategy="sequential", unroll=1):
    """x is a (rnea), tau (aba) or unused (crba)."""
    model = model.with_parent(model.parent, strategy=strategy, unroll=unroll)
    if algorithm == "rnea":
        return jaxsoa.rnea(model, q, v, x, f_ext)
    if algorithm == "aba":
        return jaxsoa.aba(model, q, v, x, f_ext)
    return jaxsoa.crba(model, q)


def random_inputs(model, seed):
    rng = np.random.default_rng(seed)
    q = jax.jit(jaxsoa.random_configuration)(model, jax.random.key(seed))
    v, x = (jnp.asarray(rng.normal(size=model.nv)) for _ in range(2))
    return q, v, x, jnp.asarray(rng.normal(size=(model.n_links, 6)))


def assert_rel_close(x, y, rtol=1e-10):
    x, y = np.asarray(x), np.asarray(y)
    np.testing.assert_allclose(x, y, rtol=0, atol=rtol * max(1.0, np.abs(y).max()))


@pytest.mark.parametrize("algorithm", ["rnea", "aba", "crba"])
def test_levels_strategy_agrees_with_sequential(algorithm):
    results = []
    for seed in range(3):
        rng = np.random.default_rng(seed)
        model = random_model(rng, random_parent(rng, N)[0])
        inputs = random_inputs(model, seed)
        ref = dynamics(model, *inputs, algorithm)
        assert_rel_close(dynamics(model, *inputs, algorithm, "levels"), ref)
        results.append(np.asarray(ref))
    assert np.abs(results[0] - results[1]).max() > 1e-3, "different trees must give different results"
    if algorithm == "crba":
        for M in results:
            assert_rel_close(M, M.T)
            assert np.linalg.eigvalsh(M).min() > 0


def test_unroll_agrees():
    """`unroll` only changes how `lax.scan` is compiled; 4 does not divide the 6 links, so the
    remainder path runs too. ABA runs an outward, an inward and another outward scan, covering
    both scan directions (the cheaper passes are covered by the path-matrix and outward/inward
    tests above with unroll 3); one algorithm keeps compile time down."""
    for seed in range(2):
        rng = np.random.default_rng(seed)
        model = random_model(rng, random_parent(rng, N)[0])
        inputs = random_inputs(model, seed)
        assert_rel_close(dynamics(model, *inputs, "aba", unroll=4), dynamics(model, *inputs, "aba"))


def test_aba_inverts_rnea_on_random_trees():
    """The reference the strategies are compared against is itself right: ABA(RNEA(a)) = a."""
    for seed in range(3):
        rng = np.random.default_rng(seed)
        model = random_model(rng, random_parent(rng, N)[0])
        q, v, a, f_ext = random_inputs(model, seed)
        tau = dynamics(model, q, v, a, f_ext, "rnea")
        assert_rel_close(dynamics(model, q, v, tau, f_ext, "aba"), a, rtol=1e-9)


@pytest.mark.parametrize("seed", [3, 4])
def test_storage_order_does_not_change_the_dynamics(seed):
    """The same tree stored in another order (links shuffled among equal joint types, so the
    static layout is unchanged) gives the same τ, q̈ and M up to the coordinate permutation."""
    rng = np.random.default_rng(seed)
    parent, _ = random_parent(rng, N)
    model = random_model(rng, parent)
    sigma = np.arange(N)                                    # old link k is stored at sigma[k]
    revolute = np.flatnonzero(np.asarray(TYPES) == JointType.REVOLUTE)
    sigma[revolute] = revolute[::-1]                        # swap the two revolute links
    inv = np.argsort(sigma)                                 # new link j is old link inv[j]
    new_parent = np.where(parent[inv] < 0, -1, sigma[np.maximum(parent[inv], 0)])
    stored = jaxsoa.build_model(
        new_parent, TYPES, model.joint_axis[inv], model.placement_rotation[inv], model.placement_translation[inv],
        model.mass[inv], model.com[inv], model.inertia_com[inv], dtype=jnp.float64)
    q_index = np.concatenate([model.idx_q[i] + np.arange(JointType(TYPES[i]).nq) for i in inv]).astype(int)
    v_index = np.concatenate([model.idx_v[i] + np.arange(JointType(TYPES[i]).nv) for i in inv]).astype(int)
    q, v, x, f_ext = random_inputs(model, seed)
    new_inputs = (q[q_index], v[v_index], x[v_index], f_ext[inv])
    for algorithm in ("rnea", "aba", "crba"):
        ref = np.asarray(dynamics(model, q, v, x, f_ext, algorithm))
        ref = ref[np.ix_(v_index, v_index)] if algorithm == "crba" else ref[v_index]
        assert_rel_close(dynamics(stored, *new_inputs, algorithm), ref)


@pytest.mark.parametrize("parent", [[-1], [-1, -1, 0, 1, 0, 2, 2, 4], [3, -1, 1, -1, 3, 0, 0]])
def test_child_chains_list_each_links_children_in_sequence_order(parent):
    """`first_child` / `next_sibling` of one tree (roots as the world's children, trees stored out of
    topological order) against a brute-force listing of each position's children."""
    trav = tree_traversal(np.asarray(parent))
    n = len(parent)
    parent_pos = np.asarray(trav.parent_pos)
    first, nxt = np.asarray(trav.first_child), np.asarray(trav.next_sibling)
    assert first.shape == (n + 1,) and nxt.shape == (n,)
    for p in range(n + 1):
        children = [t for t in range(n) if (parent_pos[t] if parent_pos[t] >= 0 else n) == p]
        chain, c = [], first[p]
        while c != n:
            chain.append(int(c))
            c = nxt[c]
        assert chain == children
