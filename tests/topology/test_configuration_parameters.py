"""Topology from configuration parameters: hand-derived path matrices for the dual-arm
spacecraft (sims/dual_arm_spacecraft.py), S·P = E, host builder == traced builder (jit, vmap over topologies,
lax.scan) and the host builder's validation errors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsoa.multibody.traversal import path_matrix, tree_traversal
from jaxsoa.topology.configuration_parameters import topology_from_configuration, topology_from_configuration_traced
from sims.dual_arm_spacecraft import CONFIGURATIONS

# Dual-arm spacecraft: hub 1, arm 1 = links 2, 3, 4, arm 2 = links 5, 6, 7; s + 1 = 8.
IDS = np.arange(1, 8)
DEGREES = np.array([3, 2, 2, 2, 2, 2, 2])
# P[i, j] = 1 iff link i+1 lies on the path from link j+1 to the root (columns: inboard sequences)
EXPECTED_P = {
    1: [[1, 1, 1, 1, 1, 1, 1],
        [0, 1, 1, 1, 0, 0, 0],
        [0, 0, 1, 1, 0, 0, 0],
        [0, 0, 0, 1, 0, 0, 0],
        [0, 0, 0, 0, 1, 1, 1],
        [0, 0, 0, 0, 0, 1, 1],
        [0, 0, 0, 0, 0, 0, 1]],
    2: [[1, 1, 1, 1, 1, 1, 1],
        [0, 1, 0, 0, 0, 0, 0],
        [0, 0, 1, 1, 0, 0, 0],
        [0, 0, 0, 1, 0, 0, 0],
        [0, 1, 0, 0, 1, 1, 1],
        [0, 1, 0, 0, 0, 1, 1],
        [0, 1, 0, 0, 0, 0, 1]],
    3: [[1, 1, 1, 1, 1, 1, 1],
        [0, 1, 0, 0, 0, 0, 0],
        [0, 1, 1, 0, 0, 0, 0],
        [0, 1, 1, 1, 0, 0, 0],
        [0, 1, 1, 1, 1, 1, 1],
        [0, 1, 1, 1, 0, 1, 1],
        [0, 1, 1, 1, 0, 0, 1]],
}
EXPECTED_PARENT = {1: [-1, 0, 1, 2, 0, 4, 5], 2: [-1, 6, 0, 2, 0, 4, 5], 3: [-1, 2, 3, 6, 0, 4, 5]}
EXPECTED_INBOARD = {1: [0, 0, 0, 0, 0, 0, 0], 2: [0, 0, 0, 0, 0, 0, 0], 3: [0, 1, 1, 1, 0, 0, 0]}
EXPECTED_PARENT_INTERFACE = {1: [-1, 1, 1, 1, 2, 1, 1], 2: [-1, 1, 1, 1, 2, 1, 1], 3: [-1, 0, 0, 1, 2, 1, 1]}


def _check_s_p(top):
    S, P = np.asarray(top.S), np.asarray(top.P).astype(np.int32)
    np.testing.assert_array_equal(S @ P, np.eye(S.shape[0], dtype=np.int32))


@pytest.mark.parametrize("config", [1, 2, 3])
def test_dual_arm_spacecraft_hand_derived(config):
    interfaces = np.array(CONFIGURATIONS[config])
    host = topology_from_configuration(IDS, interfaces, DEGREES)
    np.testing.assert_array_equal(host.P, np.array(EXPECTED_P[config], bool))
    np.testing.assert_array_equal(host.parent, EXPECTED_PARENT[config])
    np.testing.assert_array_equal(host.inboard_interface, EXPECTED_INBOARD[config])
    np.testing.assert_array_equal(host.parent_interface, EXPECTED_PARENT_INTERFACE[config])
    _check_s_p(host)
    traced = jax.jit(topology_from_configuration_traced)(jnp.asarray(interfaces, jnp.int32))
    assert bool(traced.valid)
    _assert_same(host, traced)
    np.testing.assert_array_equal(path_matrix(tree_traversal(jnp.asarray(host.parent, jnp.int32))), host.P)


def random_configuration(rng, s, max_degree):
    """Random configuration parameters from a random tree: random parent array, random interface
    slots (0 pads free ends), random storage order and random ID permutation. Returns link_ids,
    interfaces (s, max_degree) and the expected parent (storage indices)."""
    tree_parent = np.array([-1] + [int(rng.integers(k)) for k in range(1, s)])
    while np.bincount(tree_parent[1:], minlength=s).max() + 1 > max_degree:
        tree_parent = np.array([-1] + [int(rng.integers(k)) for k in range(1, s)])
    storage = rng.permutation(s)                     # tree node t is stored at storage[t]
    link_ids = rng.permutation(s) + 1                # link at storage index k has ID link_ids[k]
    node_id = link_ids[storage]
    interfaces = np.zeros((s, max_degree), np.int64)
    for t in range(s):
        neighbours = [s + 1 if t == 0 else node_id[tree_parent[t]]]
        neighbours += [node_id[c] for c in np.flatnonzero(tree_parent == t)]
        slots = rng.permutation(max_degree)[:len(neighbours)]
        interfaces[storage[t], slots] = neighbours
    parent = np.full(s, -1)
    parent[storage[1:]] = storage[tree_parent[1:]]
    return link_ids, interfaces, parent


def _assert_same(host, traced):
    for name in ("parent", "inboard_interface", "parent_interface", "S", "P", "depth", "order"):
        np.testing.assert_array_equal(np.asarray(getattr(traced, name)), getattr(host, name), err_msg=name)


def test_random_trees_s_p_identity_and_traced_equals_host():
    rng = np.random.default_rng(0)
    traced_fn = jax.jit(topology_from_configuration_traced)
    for s in (1, 2, 5, 9):
        for _ in range(5):
            link_ids, interfaces, parent = random_configuration(rng, s, 4)
            host = topology_from_configuration(link_ids, interfaces)
            np.testing.assert_array_equal(host.parent, parent)
            _check_s_p(host)
            trav = tree_traversal(jnp.asarray(parent, jnp.int32))
            np.testing.assert_array_equal(path_matrix(trav), host.P)
            np.testing.assert_array_equal(trav.order, host.order)
            traced = traced_fn(jnp.asarray(interfaces, jnp.int32), link_ids=jnp.asarray(link_ids, jnp.int32))
            assert bool(traced.valid)
            _assert_same(host, traced)
            _check_s_p(traced)


def test_vmap_over_topologies_compiles_once_and_scan_switches_topology():
    rng = np.random.default_rng(1)
    s, D, batch = 8, 4, 6
    count = [0]

    def counted(interfaces, link_ids):
        count[0] += 1
        return topology_from_configuration_traced(interfaces, link_ids=link_ids)

    batched = jax.jit(jax.vmap(counted))
    for _ in range(3):
        cases = [random_configuration(rng, s, D) for _ in range(batch)]
        interfaces = jnp.asarray(np.stack([c[1] for c in cases]), jnp.int32)
        link_ids = jnp.asarray(np.stack([c[0] for c in cases]), jnp.int32)
        out = batched(interfaces, link_ids)
        assert bool(jnp.all(out.valid))
        for b, (ids, ifs, _) in enumerate(cases):
            _assert_same(topology_from_configuration(ids, ifs), jax.tree_util.tree_map(lambda x, b=b: x[b], out))
    assert count[0] == 1

    # inside lax.scan: the topology switches at each step (carry the path matrix of the step)
    def step(carry, xs):
        top = topology_from_configuration_traced(xs[0], link_ids=xs[1])
        return carry + jnp.sum(top.P, dtype=jnp.int32), top.P

    total, Ps = jax.jit(lambda xs: jax.lax.scan(step, jnp.int32(0), xs))((interfaces, link_ids))
    for b, (ids, ifs, _) in enumerate(cases):
        np.testing.assert_array_equal(Ps[b], topology_from_configuration(ids, ifs).P)
    assert int(total) == int(sum(np.sum(topology_from_configuration(c[0], c[1]).P) for c in cases))


def test_root_hint():
    interfaces = jnp.asarray(CONFIGURATIONS[1], jnp.int32)
    top = jax.jit(topology_from_configuration_traced)(interfaces, jnp.int32(0))
    assert bool(top.valid)
    np.testing.assert_array_equal(top.parent, EXPECTED_PARENT[1])
    wrong = jax.jit(topology_from_configuration_traced)(interfaces, jnp.int32(3))
    assert not bool(wrong.valid)


def _modified(config, changes, ids=IDS):
    interfaces = np.array(CONFIGURATIONS[config])
    for (k, m), value in changes.items():
        interfaces[k, m] = value
    return ids, interfaces


ERROR_CASES = {
    "dangling": (_modified(1, {(3, 1): 9}), r"link 4 interface 1: dangling pointer to 9"),
    "negative": (_modified(1, {(3, 1): -2}), r"link 4 interface 1: dangling pointer to -2"),
    "one_sided": (_modified(1, {(3, 1): 7}), r"link 4 interface 1: one-sided pointer to link 7"),
    "self": (_modified(1, {(3, 1): 4}), r"link 4 interface 1: points to the link itself"),
    "no_root": (_modified(1, {(0, 0): 0}), r"no root"),
    "two_roots": (_modified(1, {(3, 1): 8}), r"link 1 interface 0, link 4 interface 1"),
    "unreachable": (_modified(1, {(0, 2): 0, (4, 0): 0}), r"link 5 is not connected to the root link 1"),
    "loop": (_modified(1, {(3, 1): 7, (6, 1): 4}), r"link 7 is reached twice \(again from link 4 interface 1\)"),
    "double_pointer": (_modified(1, {(1, 2): 1, (0, 0): 8}), r"link 2 interface 2: second pointer to 1"),
    "id_range": (_modified(1, {}, ids=np.array([1, 2, 3, 4, 5, 6, 9])), r"link ID 9 \(storage index 6\)"),
    "id_duplicate": (_modified(1, {}, ids=np.array([1, 2, 3, 4, 5, 6, 6])), r"link ID 6 is duplicated"),
}


@pytest.mark.parametrize("case", sorted(ERROR_CASES))
def test_host_validation_errors(case):
    (ids, interfaces), message = ERROR_CASES[case]
    with pytest.raises(ValueError, match=message):
        topology_from_configuration(ids, interfaces)
    top = topology_from_configuration_traced(jnp.asarray(interfaces, jnp.int32), link_ids=jnp.asarray(ids, jnp.int32))
    assert not bool(top.valid)                                        # the traced flag agrees


def test_degree_padding_is_checked():
    interfaces = np.array(CONFIGURATIONS[1])
    interfaces[1, 2] = 5                                              # beyond link 2's degree 2
    with pytest.raises(ValueError, match=r"link 2 interface 2: beyond its degree 2"):
        topology_from_configuration(IDS, interfaces, DEGREES)


def test_traced_valid_flag_agrees_with_host_on_random_corruptions():
    rng = np.random.default_rng(2)
    traced_fn = jax.jit(topology_from_configuration_traced)
    raised = 0
    for _ in range(60):
        link_ids, interfaces, _ = random_configuration(rng, 6, 3)
        for _ in range(int(rng.integers(1, 3))):                      # overwrite one or two slots
            interfaces[rng.integers(6), rng.integers(3)] = rng.integers(-1, 9)
        try:
            host = topology_from_configuration(link_ids, interfaces)
        except ValueError:
            host = None
        raised += host is None
        top = traced_fn(jnp.asarray(interfaces, jnp.int32), link_ids=jnp.asarray(link_ids, jnp.int32))
        assert bool(top.valid) == (host is not None), interfaces
        if host is not None:
            _assert_same(host, top)
    assert 10 < raised < 60                                           # both outcomes exercised
