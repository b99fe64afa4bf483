"""A free joint below a moving link, with the topology traced (a model passed to `jax.jit`, a stack of
models, a tree switched inside a scan): the batch-last ABA solves a free joint's 6×6 block only on the
world, so the entry point runs it under `lax.cond(every free joint on the world, batch-last core,
per-sample ABA)` (`jaxsoa.multibody.batched.guarded`). Before, such a call returned NaN.

References: Pinocchio 4.1's `aba` on the same tree (an independent code) at 1e-9 relative (float64; the
recursions agree to ~1e-13, the margin covers ill-conditioned random inertias), and the concrete-model
call (which never takes the batch-last core for such a tree) for gradients at 1e-10."""

import jax
import jax.numpy as jnp
import numpy as np
import pinocchio as pin
import pytest

import jaxsoa
from jaxsoa.multibody.joints import JointType as J
from tests.helpers.trees import (
    build_jaxsoa,
    build_pinocchio,
    coordinate_maps,
    counting,
    random_state,
    random_tree,
    relative_error,
    to_jaxsoa,
)

TYPES = [J.FIXED, J.PRISMATIC, J.FREE, J.REVOLUTE, J.SPHERICAL, J.REVOLUTE]
PARENT_BELOW = np.array([-1, 0, 1, 2, 2, 0])        # the free joint (link 2) hangs on the prismatic link 1
PARENT_ROOT = np.array([-1, 0, 0, 2, 2, 1])         # the same joint types, the free joint on the welded root
BATCH = 16                                           # ≥ VMAP_MIN_BATCH: `vmap` reaches the core's dispatch


def _case(parent, seed=0):
    """(jaxsoa model, state in jaxsoa's layout, Pinocchio's aba in jaxsoa's layout) of the tree `parent`."""
    tree = random_tree(np.random.default_rng(seed), len(TYPES), link_types=TYPES)
    tree["parent"] = parent
    model, pin_model = build_jaxsoa(tree), build_pinocchio(tree)
    state = random_state(np.random.default_rng(seed + 1), pin_model, BATCH)
    data = pin_model.createData()
    reference = np.stack([pin.aba(pin_model, data, q, v, tau) for q, v, tau in zip(state["q"], state["v"],
                                                                                      state["tau"], strict=True)])
    _, v_index = coordinate_maps(model, pin_model)
    return model, {k: jnp.asarray(x) for k, x in to_jaxsoa(model, pin_model, state).items()}, reference[:, v_index]


@pytest.fixture(scope="module")
def below():
    return _case(PARENT_BELOW)


@pytest.fixture(scope="module")
def root():
    return _case(PARENT_ROOT, seed=3)


def test_concrete_call_matches_pinocchio(below):
    model, s, ref = below
    assert relative_error(np.asarray(jaxsoa.aba(model, s["q"], s["v"], s["tau"])), ref) < 1e-9


def test_model_passed_to_jit_is_not_nan_and_compiles_once(below, root):
    fn, count = counting(jaxsoa.aba)
    jitted = jax.jit(fn)
    for model, s, ref in (below, root):
        qdd = np.asarray(jitted(model, s["q"], s["v"], s["tau"]))
        assert np.all(np.isfinite(qdd))
        assert relative_error(qdd, ref) < 1e-9
    assert count[0] == 1                              # one program for both trees: the topology stays traced


def test_vmap_of_per_sample_calls_with_a_traced_model(below):
    model, s, ref = below
    f = jax.jit(jax.vmap(jaxsoa.aba, in_axes=(None, 0, 0, 0)))
    assert relative_error(np.asarray(f(model, s["q"], s["v"], s["tau"])), ref) < 1e-9


def test_stacked_models_mixing_valid_and_invalid_trees(below, root):
    (m_below, s_below, ref_below), (m_root, s_root, ref_root) = below, root
    stacked = jax.tree.map(lambda a, b: jnp.stack([a, b]), m_below, m_root)
    q, v, tau = (jnp.stack([s_below[k][0], s_root[k][0]]) for k in ("q", "v", "tau"))
    qdd = np.asarray(jax.jit(jaxsoa.aba)(stacked, q, v, tau))
    assert relative_error(qdd[0], ref_below[0]) < 1e-9 and relative_error(qdd[1], ref_root[0]) < 1e-9


def test_gradients_equal_the_concrete_call(below):
    model, s, _ = below

    def loss(model, q, v, tau):
        return jnp.sum(jnp.sin(jaxsoa.aba(model, q, v, tau)))

    want = jax.grad(loss, argnums=(1, 2, 3))(model, s["q"], s["v"], s["tau"])
    got = jax.jit(jax.grad(loss, argnums=(1, 2, 3)))(model, s["q"], s["v"], s["tau"])
    for g, w in zip(got, want, strict=True):
        assert relative_error(np.asarray(g), np.asarray(w)) < 1e-10


@pytest.mark.parametrize("case", ["below", "root"])
def test_vmap_of_per_sample_gradients_with_a_traced_model(case, request):
    """Under the guard the core's residuals serve the gradient where the tree is valid (root) and the
    per-sample fallback's derivative where it is not (below): both equal the concrete model's."""
    model, s, _ = request.getfixturevalue(case)

    def loss(model, q, v, tau):
        return jnp.sum(jnp.sin(jaxsoa.aba(model, q, v, tau)))

    want = jax.vmap(jax.grad(loss, argnums=(1, 2, 3)), in_axes=(None, 0, 0, 0))(model, s["q"], s["v"], s["tau"])
    per_sample = jax.jit(jax.vmap(jax.grad(loss, argnums=(1, 2, 3)), in_axes=(None, 0, 0, 0)))
    for g, w in zip(per_sample(model, s["q"], s["v"], s["tau"]), want, strict=True):
        assert relative_error(np.asarray(g), np.asarray(w)) < 1e-10


def test_switching_the_free_joint_below_a_link_inside_a_scan(below, root):
    """One compiled scan whose steps alternate the two trees (same joint types, parent traced per step)."""
    (m_below, s, ref_below), (m_root, _, _) = below, root
    m_root = m_below.with_parent(jnp.asarray(PARENT_ROOT))
    want_root = np.asarray(jaxsoa.aba(m_root, s["q"], s["v"], s["tau"]))
    parents = jnp.asarray(np.stack([PARENT_BELOW, PARENT_ROOT, PARENT_BELOW]), jnp.int32)

    def step(_, parent):
        return None, jaxsoa.aba(m_below.with_parent(parent), s["q"], s["v"], s["tau"])

    _, out = jax.jit(lambda p: jax.lax.scan(step, None, p))(parents)
    assert relative_error(np.asarray(out[0]), ref_below) < 1e-9
    assert relative_error(np.asarray(out[1]), want_root) < 1e-12
    assert relative_error(np.asarray(out[2]), ref_below) < 1e-9


def test_vmap_of_gradients_over_a_stack_mixing_valid_and_invalid_trees(below, root):
    """`jax.vmap` of a gradient over a stacked model (16 trees: 8 with the free joint below a link, 8 with it on
    the root) and states: the `vmap` rule's guarded residuals take the fallback for the whole stack (one tree is
    invalid), whose gradients equal each concrete model's (1e-10)."""
    (m_below, s_below, _), (m_root, s_root, _) = below, root
    half = BATCH // 2
    stacked = jax.tree.map(lambda a, b: jnp.stack([a] * half + [b] * half), m_below, m_root)
    q, v, tau = (jnp.concatenate([s_below[k][:half], s_root[k][:half]]) for k in ("q", "v", "tau"))

    def loss(model, q, v, tau):
        return jnp.sum(jnp.sin(jaxsoa.aba(model, q, v, tau)))

    got = jax.jit(jax.vmap(jax.grad(loss, argnums=(1, 2, 3))))(stacked, q, v, tau)
    for i in range(BATCH):
        model = m_below if i < half else m_root
        want = jax.grad(loss, argnums=(1, 2, 3))(model, q[i], v[i], tau[i])
        for g, w in zip(got, want, strict=True):
            assert relative_error(np.asarray(g[i]), np.asarray(w)) < 1e-10
