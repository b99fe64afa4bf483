"""The batch-last core (`jaxsoa.algorithms.batch_last`), reached by leading-batch calls
`rnea(model, q[B, nq], …)` / `aba(model, q[B, nq], …)` on models whose joints are fixed,
revolute, prismatic, spherical or free (at a root; spherical joints: tests/algorithms/test_batch_last_three_column.py):

* against Pinocchio (float64) on the Panda, Solo-12 (free-flyer) and random fixed-base and
  free-floating trees with fixed / revolute / prismatic joints stored in random order, with
  armature and external wrenches: 1e-9 relative (float64 sums of O(n) terms, as tests/validation);
* against the per-sample recursions under `jax.vmap` (a second code path), values and gradients
  (q, v, τ, f_ext and model parameters) of the adjoint: 1e-10 relative;
* the float32 error against Pinocchio, measured and bounded (printed; docs/performance.md);
* the dispatch: a model with a free joint below the root keeps the per-sample path, several leading axes, shared
  (unbatched) arguments broadcast, one compilation for every tree of the same joint types.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pinocchio as pin
import pytest

import jaxsoa
from jaxsoa.algorithms import batch_last, batch_last_rnea, dynamics
from jaxsoa.multibody.joints import JointType
from tests.helpers.trees import (
    build_jaxsoa,
    build_pinocchio,
    coordinate_maps,
    counting,
    fext_to_pinocchio,
    random_group,
    random_permutation,
    random_state,
    random_tree,
    relative_error,
    to_jaxsoa,
)

TOL = 1e-9
ONE_DOF = (JointType.REVOLUTE, JointType.PRISMATIC, JointType.FIXED)


def _tree_case(seed, n_links=9, armature=True, floating=False):
    rng = np.random.default_rng(seed)
    tree = random_tree(rng, n_links, joint_types=ONE_DOF, floating=floating)
    if not floating:
        tree["joint_types"][0] = JointType.REVOLUTE                  # at least one moving joint at the root
    model, pin_model = build_jaxsoa(tree, permutation=random_permutation(rng, n_links)), build_pinocchio(tree)
    if armature:
        arm = rng.uniform(0.05, 0.3, model.nv)
        arm[model.v_columns(JointType.FREE).ravel()] = 0.0            # no rotor on a free joint
        model = dataclasses.replace(model, armature=jnp.asarray(arm))
        pin_model.armature = arm[np.argsort(_v_index(model, pin_model))]
    return rng, model, pin_model


def _v_index(model, pin_model):
    return coordinate_maps(model, pin_model)[1]


def _pin_batch(pin_model, state, fext=None):
    data = pin_model.createData()
    rnea, aba = [], []
    for i, (q, v, a, tau) in enumerate(zip(state["q"], state["v"], state["a"], state["tau"], strict=True)):
        args = () if fext is None else (fext[i],)
        rnea.append(pin.rnea(pin_model, data, q, v, a, *args).copy())
        aba.append(pin.aba(pin_model, data, q, v, tau, *args).copy())
    return np.stack(rnea), np.stack(aba)


def _free_joint_below_the_root():
    """A 4-link floating tree whose free link and its first child swap places (the free joint inboard
    of a revolute / prismatic / fixed root)."""
    _, model, _ = _tree_case(9, n_links=4, floating=True)
    root = int(model.links_of_type(JointType.FREE)[0])
    child = int(np.flatnonzero(np.asarray(model.parent) == root)[0])
    return model.with_parent(np.where(np.arange(4) == root, child, np.where(np.arange(4) == child, -1,
                                                                             np.asarray(model.parent))))


def test_supports_every_joint_type_with_free_joints_at_roots(panda, robot_models):
    assert batch_last.supports(panda) and batch_last.supports(robot_models["solo12"][0])
    rng = np.random.default_rng(0)
    spherical = (JointType.FREE, JointType.REVOLUTE, JointType.SPHERICAL, JointType.PRISMATIC)
    assert batch_last.supports(build_jaxsoa(random_tree(rng, 4, link_types=spherical)))
    model, inner = _tree_case(9, n_links=4, floating=True)[1], _free_joint_below_the_root()
    assert not batch_last.supports(inner)                            # a free joint below the root: per sample
    q = jnp.broadcast_to(jaxsoa.neutral(model), (2, model.nq))
    v = jnp.zeros((2, model.nv))
    traced = jax.jit(lambda parent: batch_last.aba(model.with_parent(parent), q, v, v))(inner.parent)
    assert np.isnan(np.asarray(traced)).all()                        # the same, traced: a NaN-marked result


@pytest.mark.parametrize("robot", ["panda", "solo12"])
def test_robots_against_pinocchio(robot_models, robot):
    model, pin_model = robot_models[robot]
    state = random_state(np.random.default_rng(1), pin_model, 16)
    rnea_ref, aba_ref = _pin_batch(pin_model, state)
    s = to_jaxsoa(model, pin_model, state)
    assert relative_error(jaxsoa.rnea(model, s["q"], s["v"], s["a"]), rnea_ref[:, _v_index(model, pin_model)]) < TOL
    assert relative_error(jaxsoa.aba(model, s["q"], s["v"], s["tau"]), aba_ref[:, _v_index(model, pin_model)]) < TOL


@pytest.mark.parametrize("seed, floating", [(2, False), (3, True)])
def test_random_trees_with_armature_and_wrenches_against_pinocchio(seed, floating):
    rng, model, pin_model = _tree_case(seed, floating=floating)
    state = random_state(rng, pin_model, 8)
    f_ext = rng.normal(size=(8, model.n_links, 6))
    fext = [fext_to_pinocchio(model, pin_model, f) for f in f_ext]
    v_index = _v_index(model, pin_model)
    s = to_jaxsoa(model, pin_model, state)
    for wrenches, pin_fext in ((None, None), (f_ext, fext)):
        rnea_ref, aba_ref = _pin_batch(pin_model, state, pin_fext)
        rnea = jax.jit(jaxsoa.rnea)(model, s["q"], s["v"], s["a"], wrenches)
        aba = jax.jit(jaxsoa.aba)(model, s["q"], s["v"], s["tau"], wrenches)
        assert relative_error(rnea, rnea_ref[:, v_index]) < TOL
        assert relative_error(aba, aba_ref[:, v_index]) < TOL


def test_float32_error_against_pinocchio(robot_models):
    """float32 on the Panda: measured ~2e-7 (RNEA) and ~1e-6 (ABA) of max |result|; bound 1e-5."""
    model64, pin_model = robot_models["panda"]
    model = jaxsoa.load_urdf(str(jaxsoa.io.example_robot_urdf("panda")), dtype=jnp.float32)
    state = random_state(np.random.default_rng(4), pin_model, 64)
    rnea_ref, aba_ref = (x[:, _v_index(model64, pin_model)] for x in _pin_batch(pin_model, state))
    s = {k: jnp.asarray(x, jnp.float32) for k, x in to_jaxsoa(model64, pin_model, state).items()}
    errors = {name: float(np.abs(np.asarray(out, np.float64) - ref).max() / np.abs(ref).max())
              for name, out, ref in (("rnea", jaxsoa.rnea(model, s["q"], s["v"], s["a"]), rnea_ref),
                                     ("aba", jaxsoa.aba(model, s["q"], s["v"], s["tau"]), aba_ref))}
    print("float32 relative error vs Pinocchio:", errors)
    assert all(e < 1e-5 for e in errors.values())


def _per_sample(fn, model, *xs):
    """jax.vmap of the per-sample `fn`, jitted (one compile, not one per primitive)."""
    return jax.jit(jax.vmap(lambda *x: fn(model, *x)))(*xs)


@pytest.mark.parametrize("floating", [False, True])
def test_equals_the_per_sample_recursions(floating):
    rng, model, _ = _tree_case(5, n_links=12, floating=floating)
    q = jax.vmap(lambda k: jaxsoa.random_configuration(model, k))(jax.random.split(jax.random.key(5), 6))
    v, a = (jnp.asarray(rng.normal(size=(6, model.nv))) for _ in range(2))
    f_ext = jnp.asarray(rng.normal(size=(6, model.n_links, 6)))
    assert relative_error(batch_last_rnea.rnea(model, q, v, a, f_ext),
                          _per_sample(dynamics.rnea.__wrapped__, model, q, v, a, f_ext)) < 1e-10
    assert relative_error(batch_last.aba(model, q, v, a, f_ext),
                          _per_sample(dynamics._aba_recursion, model, q, v, a, f_ext)) < 1e-10


def assert_adjoint_gradients_equal_plain_autodiff(model, rng, seed):
    """The batched adjoint against plain autodiff of the per-sample recursion (`aba_autodiff`), in
    every state argument and the model's mass, com, placements, gravity and armature (summed over a
    batch of 4), 1e-10."""
    q = jax.vmap(lambda k: jaxsoa.random_configuration(model, k))(jax.random.split(jax.random.key(seed), 4))
    v, tau = (jnp.asarray(rng.normal(size=(4, model.nv))) for _ in range(2))
    f_ext = jnp.asarray(rng.normal(size=(4, model.n_links, 6)))
    weights = jnp.asarray(rng.normal(size=(4, model.nv)))
    fields = ("mass", "com", "placement_translation", "placement_rotation", "gravity", "armature")

    def loss(aba_fn, params, q, v, tau, f_ext):
        m = dataclasses.replace(model, **params)
        return jnp.sum(weights * jnp.sin(aba_fn(m, q, v, tau, f_ext)))

    params = {f: getattr(model, f) for f in fields}
    got = jax.jit(jax.grad(lambda *a: loss(jaxsoa.aba, *a), argnums=(0, 1, 2, 3, 4)))(params, q, v, tau, f_ext)
    ref = jax.jit(jax.grad(lambda p, q, v, tau, f: loss(
        lambda m, *x: jax.vmap(lambda *y: dynamics.aba_autodiff(m, *y))(*x), p, q, v, tau, f),
        argnums=(0, 1, 2, 3, 4)))(params, q, v, tau, f_ext)
    for g, r in zip(jax.tree.leaves(got), jax.tree.leaves(ref), strict=True):
        assert relative_error(g, r) < 1e-10


@pytest.mark.slow            # two gradient compiles of a free-floating tree (~1-2 min on a loaded 2-core machine)
def test_gradients_equal_plain_autodiff_per_sample():
    rng, model, _ = _tree_case(6, n_links=6, floating=True)
    assert_adjoint_gradients_equal_plain_autodiff(model, rng, 6)


def test_dispatch_shapes_and_fallback(panda):
    rng = np.random.default_rng(7)
    q = jnp.asarray(rng.normal(size=(2, 3, panda.nq)))
    v = jnp.asarray(rng.normal(size=(2, 3, panda.nv)))
    tau = jnp.asarray(rng.normal(size=panda.nv))                   # shared by the batch
    out = jax.jit(jaxsoa.aba)(panda, q, v, tau)
    assert out.shape == (2, 3, panda.nv)
    ref = _per_sample(dynamics._aba_recursion, panda, q.reshape(6, -1), v.reshape(6, -1), jnp.tile(tau, (6, 1)))
    assert relative_error(out.reshape(6, -1), ref) < 1e-10
    floating = _free_joint_below_the_root()                          # not supported: the per-sample path
    assert not batch_last.supports(floating)
    q = jax.vmap(lambda k: jaxsoa.random_configuration(floating, k))(jax.random.split(jax.random.key(0), 3))
    state = [q, *(jnp.asarray(rng.normal(size=(3, floating.nv))) for _ in range(2))]
    assert relative_error(jax.jit(lambda *x: jaxsoa.aba(floating, *x))(*state),          # a concrete tree
                          _per_sample(dynamics._aba_recursion, floating, *state)) < 1e-12


def test_one_compilation_for_every_tree_of_the_same_joint_types():
    """Five random trees sharing one joint-type sequence (tests/helpers/trees.random_group's rule):
    the leading-batch ABA compiles once, and agrees with the per-sample path on each."""
    rng = np.random.default_rng(8)
    group = [model for _, model, _ in random_group(rng, 8, 5, joint_types=ONE_DOF)]
    names = {f: getattr(group[0], f) for f in ("link_names", "link_joint_names")}   # static: one set for all
    models = [dataclasses.replace(model, **names) for model in group]
    fn, count = counting(lambda m, q, v, tau: jaxsoa.aba(m, q, v, tau))
    compiled = jax.jit(fn)
    for model in models:
        q, v, tau = (jnp.asarray(rng.normal(size=(4, model.nv))) for _ in range(3))
        ref = _per_sample(dynamics._aba_recursion, model, q, v, tau)
        assert relative_error(compiled(model, q, v, tau), ref) < 1e-10
    assert count[0] == 1


def test_direct_calls_check_their_batch(panda):
    """`batch_last_rnea.rnea` / `batch_last.aba` called directly need one leading batch axis and the model's shapes."""
    q = jnp.zeros((3, panda.nq))
    with pytest.raises(ValueError, match="argument 'q' has shape"):
        batch_last.aba(panda, q[:, :-1], q, q)
    with pytest.raises(ValueError, match="one leading batch axis"):
        batch_last_rnea.rnea(panda, q[0], q[0], q[0])
    with pytest.raises(ValueError, match="different batch sizes"):
        batch_last_rnea.rnea(panda, q, q[:2], q)
    with pytest.raises(ValueError, match="argument 'f_ext'"):
        batch_last.aba(panda, q, q, q, jnp.zeros((3, panda.n_links, 3)))
