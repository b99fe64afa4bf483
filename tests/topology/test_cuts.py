"""Closed loops in the configuration-parameter topology (docs/user_guide.md §6–7):
a link reached twice is cut. Hand-derived P, S and cut records for a ring-chain mixed system (two
dual-arm spacecraft holding one object, the second hub an ordinary link) and for the grasp of sims/dual_arm_grasp.py;
host == traced on random loop systems, checked against an independent graph search; cut overflow; a
vmapped batch of loop topologies compiles once; validation errors; `closure_from_topology`'s cut
frames against hand-derived poses."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.sparse.csgraph import shortest_path

from jaxsoa.multibody.joints import JointType
from jaxsoa.topology.configuration_inputs import CUT_FIELDS
from jaxsoa.topology.configuration_parameters import (
    topology_from_configuration,
    topology_from_configuration_traced,
)
from jaxsoa.topology.cuts import closure_from_topology, cut_interfaces
from jaxsoa.topology.reconfigure import LinkDesign
from sims import dual_arm_grasp
from sims import dual_arm_spacecraft as sc
from tests.topology.test_configuration_parameters import random_configuration

MAX_CUTS = 4                                   # static bound of the traced builder in these tests
TREE_FIELDS = ("parent", "inboard_interface", "parent_interface", "S", "P", "depth", "order")

# Two dual-arm spacecraft (A: hub 1, arms 2-3-4 and 5-6-7; B: hub 8, arms 9-10-11 and 12-13-14) whose
# four tips hold one object 15 (interfaces 0..3 -> tips 4, 7, 11, 14). Hub A is the root (pointer 16 =
# s + 1); hub B has no virtual joint: an ordinary link (a ring-chain mixed system).
TWO_CRAFT = np.array([
    [16, 2, 5, 0], [1, 3, 0, 0], [2, 4, 0, 0], [3, 15, 0, 0], [1, 6, 0, 0], [5, 7, 0, 0], [6, 15, 0, 0],
    [0, 9, 12, 0], [8, 10, 0, 0], [9, 11, 0, 0], [10, 15, 0, 0], [8, 13, 0, 0], [12, 14, 0, 0], [13, 15, 0, 0],
    [4, 7, 11, 14]])
# By hand, breadth first from hub 1: levels {1}, {2, 5}, {3, 6}, {4, 7}, {15} (reached from 4 and 7:
# 4 has the lower storage index, so 7-15 is cut), {11, 14}, {10, 13}, {9, 12}, {8} (reached from 9
# and 12: 12-8 is cut). Inboard sequences (path to the root, link IDs) = columns of P:
TWO_CRAFT_PATHS = {1: [1], 2: [1, 2], 3: [1, 2, 3], 4: [1, 2, 3, 4], 5: [1, 5], 6: [1, 5, 6], 7: [1, 5, 6, 7],
                   15: [1, 2, 3, 4, 15], 11: [1, 2, 3, 4, 15, 11], 10: [1, 2, 3, 4, 15, 11, 10],
                   9: [1, 2, 3, 4, 15, 11, 10, 9], 8: [1, 2, 3, 4, 15, 11, 10, 9, 8], 14: [1, 2, 3, 4, 15, 14],
                   13: [1, 2, 3, 4, 15, 14, 13], 12: [1, 2, 3, 4, 15, 14, 13, 12]}
# (inboard link ID, outboard link ID) of each joint: S[in, h] = -1, S[out, h] = +1 (h = outboard)
TWO_CRAFT_JOINTS = [(1, 2), (2, 3), (3, 4), (1, 5), (5, 6), (6, 7), (4, 15), (15, 11), (11, 10), (10, 9), (9, 8),
                    (15, 14), (14, 13), (13, 12)]
# cuts (storage index = ID - 1): (link_a, interface_a, link_b, interface_b)
TWO_CRAFT_CUTS = [(6, 1, 14, 1), (11, 0, 7, 2)]
# inboard interface by hand: arm links of B and hub B hang on their E end / arm-1 mount
TWO_CRAFT_INBOARD = [0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 0]


def _host(ids, interfaces, max_cuts=MAX_CUTS, codes=None):
    return topology_from_configuration(ids, interfaces, max_cuts=max_cuts, cut_joint_types=codes)


@pytest.fixture(scope="module")
def traced_fn():
    return jax.jit(topology_from_configuration_traced, static_argnames="max_cuts")


def _assert_same(host, traced):
    for name in TREE_FIELDS:
        np.testing.assert_array_equal(np.asarray(getattr(traced, name)), getattr(host, name), err_msg=name)
    assert int(traced.n_cuts) == host.n_cuts
    for name in CUT_FIELDS:
        got = np.asarray(getattr(traced, name))
        np.testing.assert_array_equal(got[:host.n_cuts], getattr(host, name), err_msg=name)
        assert (got[host.n_cuts:] == -1).all(), name                      # padding


def test_two_spacecraft_ring_chain_hand_derived(traced_fn):
    ids = np.arange(1, 16)
    top = _host(ids, TWO_CRAFT)
    P = np.zeros((15, 15), int)
    for j, path in TWO_CRAFT_PATHS.items():
        P[np.array(path) - 1, j - 1] = 1
    S = np.eye(15, dtype=int)
    for inboard, outboard in TWO_CRAFT_JOINTS:
        S[inboard - 1, outboard - 1] = -1
    np.testing.assert_array_equal(top.P, P.astype(bool))
    np.testing.assert_array_equal(top.S, S)
    np.testing.assert_array_equal(S @ P, np.eye(15, dtype=int))           # S·P = E
    np.testing.assert_array_equal(top.inboard_interface, TWO_CRAFT_INBOARD)
    assert top.n_cuts == 2
    cuts = list(zip(*(getattr(top, f).tolist() for f in CUT_FIELDS[:4]), strict=True))
    assert cuts == TWO_CRAFT_CUTS
    np.testing.assert_array_equal(top.cut_type, [0, 0])                   # default: welds
    traced = traced_fn(jnp.asarray(TWO_CRAFT, jnp.int32), max_cuts=MAX_CUTS)
    assert bool(traced.valid) and not bool(traced.cuts_overflow)
    _assert_same(top, traced)
    # the cut tree's configuration parameters are a tree with the same topology
    tree = topology_from_configuration(ids, cut_interfaces(TWO_CRAFT, top))
    np.testing.assert_array_equal(tree.parent, top.parent)
    np.testing.assert_array_equal(cut_interfaces(jnp.asarray(TWO_CRAFT), traced, jnp), cut_interfaces(TWO_CRAFT, top))


def _two_craft_design():
    """15-link design: two copies of the dual-arm spacecraft's interface poses, plus the object (4
    interfaces at unit distance along ±x, ±y). Only the interface poses matter here."""
    R1, p1 = sc.interface_poses()
    R = np.tile(np.eye(3), (15, 4, 1, 1))
    p = np.zeros((15, 4, 3))
    R[:7, :3], R[7:14, :3], p[:7, :3], p[7:14, :3] = R1, R1, p1, p1
    p[14] = [(1, 0, 0), (0, 1, 0), (-1, 0, 0), (0, -1, 0)]
    inertia = np.tile(np.eye(3), (15, 1, 1))
    return LinkDesign(R, p, np.ones(15), np.zeros((15, 3)), inertia, (JointType.FIXED,) + (JointType.REVOLUTE,) * 14)


def test_closure_from_topology_frames_hand_derived():
    codes = np.zeros((15, 4), np.int64)
    codes[[6, 14], [1, 1]] = 1                                           # 7-15: revolute; 12-8: weld
    top = _host(np.arange(1, 16), TWO_CRAFT, codes=codes)
    closure = closure_from_topology(_two_craft_design(), top)
    np.testing.assert_array_equal(closure.link_a, [6, 11])
    np.testing.assert_array_equal(closure.link_b, [14, 7])
    # cut 0: link 7 (inboard at its S end, interface 0 at the origin) at its E end (1.1, 0, 0); the
    # object (inboard interface 0 at (1, 0, 0)) at interface 1 (0, 1, 0): (0, 1, 0) - (1, 0, 0)
    np.testing.assert_allclose(closure.p_a_cut[0], [sc.LINKS[7][1], 0, 0], atol=1e-15)
    np.testing.assert_allclose(closure.p_b_cut[0], [-1, 1, 0], atol=1e-15)
    # cut 1: link 12 hangs on its E end (L = 1.4), cut at its S end: (-1.4, 0, 0) in its frame; hub B
    # hangs on its arm-1 mount ((1, 0, 0), identity), cut at the arm-2 mount ((-1, 0, 0), Rz(π)):
    # inv(T_1) ∘ T_2 = (Rz(π), (-2, 0, 0))
    np.testing.assert_allclose(closure.p_a_cut[1], [-sc.LINKS[12 - 7][1], 0, 0], atol=1e-15)
    np.testing.assert_allclose(closure.R_a_cut[1], np.eye(3), atol=1e-15)
    np.testing.assert_allclose(closure.p_b_cut[1], [-2, 0, 0], atol=1e-15)
    np.testing.assert_allclose(closure.R_b_cut[1], np.diag([-1.0, -1.0, 1.0]), atol=1e-15)
    # constrained rows: revolute (spatial) = 5 rows, weld = 6 rows
    np.testing.assert_array_equal(np.asarray(closure.basis).sum(axis=(1, 2)), [5, 6])


def test_seed_grasp_topology_and_closure():
    """The grasp of sims/dual_arm_grasp.py: cut between arm 2's tip (ID 7) and the target (ID 8),
    a planar weld; P by hand; the cut frames are arm 2's E end and the target's grasp 1."""
    top = dual_arm_grasp.topology()
    paths = {1: [1], 2: [1, 2], 3: [1, 2, 3], 4: [1, 2, 3, 4], 5: [1, 5], 6: [1, 5, 6], 7: [1, 5, 6, 7],
             8: [1, 2, 3, 4, 8]}
    P = np.zeros((8, 8), bool)
    for j, path in paths.items():
        P[np.array(path) - 1, j - 1] = True
    np.testing.assert_array_equal(top.P, P)
    assert [int(getattr(top, f)[0]) for f in CUT_FIELDS] == [6, 1, 7, 1, 3]
    closure = closure_from_topology(dual_arm_grasp.design(), top)
    np.testing.assert_allclose(closure.p_a_cut[0], [1.1, 0, 0], atol=1e-15)
    R_grasp, p_grasp = dual_arm_grasp.grasp_pose()
    np.testing.assert_allclose(closure.p_b_cut[0], p_grasp, atol=1e-15)
    np.testing.assert_allclose(closure.R_b_cut[0], R_grasp, atol=1e-15)
    np.testing.assert_array_equal(np.flatnonzero(np.diagonal(closure.basis[0])), [2, 3, 4])   # ω_z, v_x, v_y


def random_loop_system(rng, s, D, n_extra):
    """A random tree (random storage order and IDs) plus up to n_extra extra mated pairs between links
    with free slots. Returns link_ids, interfaces, cut_joint_types (equal at both ends of every pair),
    the number of extra pairs."""
    link_ids, interfaces, _ = random_configuration(rng, s, D)
    added = 0
    for _ in range(4 * n_extra):
        i, j = rng.choice(s, 2, replace=False)
        free_i, free_j = np.flatnonzero(interfaces[i] == 0), np.flatnonzero(interfaces[j] == 0)
        if added == n_extra or not len(free_i) or not len(free_j) or link_ids[j] in interfaces[i]:
            continue
        interfaces[i, rng.choice(free_i)], interfaces[j, rng.choice(free_j)] = link_ids[j], link_ids[i]
        added += 1
    codes = np.zeros((s, D), np.int64)
    for i in range(s):
        for m in range(D):
            if 0 < interfaces[i, m] <= s and i < (j := int(np.flatnonzero(link_ids == interfaces[i, m])[0])):
                codes[i, m] = codes[j, list(interfaces[j]).index(link_ids[i])] = rng.integers(5)
    return link_ids, interfaces, codes, added


def _independent_checks(link_ids, interfaces, top, added):
    s = len(link_ids)
    index = {int(lid): k for k, lid in enumerate(link_ids)}
    adjacency = np.zeros((s, s))
    pairs = set()
    for k in range(s):
        for m, t in enumerate(interfaces[k]):
            if 0 < t <= s:
                adjacency[k, index[int(t)]] = 1
                pairs.add(frozenset([(k, m), (index[int(t)], list(interfaces[index[int(t)]]).index(link_ids[k]))]))
    # depth = graph distance from the root (the traversal is breadth first)
    root = int(np.flatnonzero((interfaces == s + 1).any(axis=1))[0])
    np.testing.assert_array_equal(top.depth, shortest_path(adjacency, unweighted=True, indices=root))
    # tree joints and cuts partition the mated pairs
    tree = {frozenset([(k, top.inboard_interface[k]), (top.parent[k], top.parent_interface[k])])
            for k in range(s) if top.parent[k] >= 0}
    cuts = {frozenset([(a, ia), (b, ib)]) for a, ia, b, ib in zip(*(getattr(top, f) for f in CUT_FIELDS[:4]),
                                                                    strict=True)}
    assert tree | cuts == pairs and not tree & cuts and top.n_cuts == added
    for a, b in zip(top.cut_link_a, top.cut_link_b, strict=True):     # b is the link reached again
        assert (top.depth[a], a) < (top.depth[b], b)
    np.testing.assert_array_equal(top.S @ top.P.astype(int), np.eye(s, dtype=int))


def test_random_loop_systems_host_equals_traced(traced_fn):
    rng = np.random.default_rng(3)
    for s in (3, 6, 9):
        for n_extra in (0, 1, 2, 4):
            link_ids, interfaces, codes, added = random_loop_system(rng, s, 4, n_extra)
            host = _host(link_ids, interfaces, codes=codes)
            _independent_checks(link_ids, interfaces, host, added)
            np.testing.assert_array_equal(host.cut_type, codes[host.cut_link_a, host.cut_interface_a])
            traced = traced_fn(jnp.asarray(interfaces, jnp.int32), link_ids=jnp.asarray(link_ids, jnp.int32),
                               max_cuts=MAX_CUTS, cut_joint_types=jnp.asarray(codes, jnp.int32))
            assert bool(traced.valid) and not bool(traced.cuts_overflow)
            _assert_same(host, traced)
            cut_tree = topology_from_configuration(link_ids, cut_interfaces(interfaces, host))   # max_cuts = 0
            np.testing.assert_array_equal(cut_tree.parent, host.parent)


def test_cut_overflow(traced_fn):
    traced = traced_fn(jnp.asarray(TWO_CRAFT, jnp.int32), max_cuts=1)
    assert bool(traced.cuts_overflow) and not bool(traced.valid) and int(traced.n_cuts) == 2
    assert traced.cut_link_a.shape == (1,) and int(traced.cut_link_a[0]) == 6     # the first cut is kept
    with pytest.raises(ValueError, match=r"link 8 is reached twice \(again from link 12 interface 0\).*max_cuts = 1"):
        topology_from_configuration(np.arange(1, 16), TWO_CRAFT, max_cuts=1)
    default = traced_fn(jnp.asarray(TWO_CRAFT, jnp.int32))                       # max_cuts = 0: trees only
    assert not bool(default.valid)


def test_vmapped_loop_topologies_compile_once():
    rng = np.random.default_rng(4)
    s, D, batch = 8, 4, 5
    count = [0]

    def counted(interfaces, link_ids, codes):
        count[0] += 1
        return topology_from_configuration_traced(interfaces, link_ids=link_ids, max_cuts=MAX_CUTS,
                                                  cut_joint_types=codes)

    batched = jax.jit(jax.vmap(counted))
    for _ in range(3):
        cases = [random_loop_system(rng, s, D, int(rng.integers(0, 4))) for _ in range(batch)]
        out = batched(*(jnp.asarray(np.stack([c[i] for c in cases]), jnp.int32) for i in (1, 0, 2)))
        assert bool(jnp.all(out.valid))
        for b, (ids, ifs, codes, _) in enumerate(cases):
            _assert_same(_host(ids, ifs, codes=codes), jax.tree_util.tree_map(lambda x, b=b: x[b], out))
    assert count[0] == 1


def _grasp_modified(changes=None, code_changes=None):
    interfaces, codes = dual_arm_grasp.CONFIGURATION.copy(), dual_arm_grasp.CUT_JOINT_TYPES.copy()
    for (k, m), value in (changes or {}).items():
        interfaces[k, m] = value
    for (k, m), value in (code_changes or {}).items():
        codes[k, m] = value
    return interfaces, codes


ERROR_CASES = {
    "cut_types_differ": (_grasp_modified(code_changes={(7, 1): 1}),
                         r"link 7 interface 1 and link 8 interface 1: cut joint types differ \(3 vs 1\)"),
    "cut_type_range": (_grasp_modified(code_changes={(2, 0): 5}), r"link 3 interface 0: cut_joint_types = 5"),
    "double_pointer": (_grasp_modified({(7, 2): 4, (3, 2): 8}), r"link 4 interface 2: second pointer to 8"),
    "one_sided_loop": (_grasp_modified({(6, 1): 0}), r"link 8 interface 1: one-sided pointer to link 7"),
}


@pytest.mark.parametrize("case", sorted(ERROR_CASES))
def test_loop_validation_errors(case, traced_fn):
    (interfaces, codes), message = ERROR_CASES[case]
    with pytest.raises(ValueError, match=message):
        _host(dual_arm_grasp.IDS, interfaces, codes=codes)
    top = traced_fn(jnp.asarray(interfaces, jnp.int32), max_cuts=MAX_CUTS,
                    cut_joint_types=jnp.asarray(codes, jnp.int32))
    assert not bool(top.valid)                                        # the traced flag agrees


def test_cut_types_shape_and_no_cut_closure():
    with pytest.raises(ValueError, match=r"cut_joint_types must be an integer array of shape \(8, 3\)"):
        _host(dual_arm_grasp.IDS, dual_arm_grasp.CONFIGURATION, codes=np.zeros((8, 2), np.int64))
    tree = topology_from_configuration(sc.IDS, sc.configuration(1))
    with pytest.raises(ValueError, match=r"records no cut"):
        closure_from_topology(sc.design(), tree)


def test_ring_chain_constrained_dynamics():
    """The two-spacecraft ring chain as a dynamic system: tree from `cut_interfaces`, closure from
    `closure_from_topology` (planar revolute at 7-15, planar weld at 12-8), random state and torques.
    Independent checks: the equations of motion M q̈ + C = τ + G_cᵀ λ (residual through RNEA, a
    separate code path from ABA/M⁻¹), the constraint acceleration G_c q̈ + Ġ_c q̇ = 0, and the dense
    KKT solve against the recursive one. 1e-9 relative: float64 round-off through 15-link recursions."""
    import jaxsoa
    from jaxsoa.topology.reconfigure import reconfigurable_model

    rng = np.random.default_rng(3)
    ids = np.arange(1, 16)
    codes = np.zeros((15, 4), np.int64)
    codes[[6, 14], [1, 1]] = 4                                             # 7-15: planar revolute
    codes[[11, 7], [0, 2]] = 3                                             # 12-8: planar weld
    top = _host(ids, TWO_CRAFT, codes=codes)
    design = _two_craft_design()
    model = reconfigurable_model(design, cut_interfaces(TWO_CRAFT, top), ids, gravity=(0.0, 0.0, 0.0))
    closure = closure_from_topology(design, top)
    assert np.asarray(closure.basis).sum() == 2 + 3                       # planar rows only
    q, v, tau = (jnp.asarray(rng.normal(size=model.nv)) for _ in range(3))

    @jax.jit
    def solve(q, v, tau):
        qdd, lam = jaxsoa.forward_dynamics_constrained(model, q, v, tau, closure)
        qdd_dense, lam_dense = jaxsoa.forward_dynamics_constrained(model, q, v, tau, closure, method="dense")
        G = jaxsoa.constraint_jacobian(model, q, closure)
        residual = jaxsoa.rnea(model, q, v, qdd) - tau - G.T @ lam
        return qdd, lam, qdd_dense, lam_dense, residual, G @ qdd + jaxsoa.constraint_bias(model, q, v, closure)

    qdd, lam, qdd_dense, lam_dense, residual, constraint_accel = solve(q, v, tau)
    scale = max(1.0, float(jnp.abs(qdd).max()))
    assert float(jnp.abs(residual).max()) < 1e-9 * max(1.0, float(jnp.abs(tau).max()), float(jnp.abs(lam).max()))
    assert float(jnp.abs(constraint_accel).max()) < 1e-9 * scale
    np.testing.assert_allclose(qdd_dense, qdd, atol=1e-9 * scale)
    np.testing.assert_allclose(lam_dense, lam, atol=1e-9 * max(1.0, float(jnp.abs(lam).max())))
