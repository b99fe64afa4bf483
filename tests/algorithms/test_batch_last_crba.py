"""The batch-last CRBA (`jaxsoa.algorithms.batch_last_crba`), reached by a leading-batch call
`crba(model, q[B, nq])` on models whose joints are fixed, revolute, prismatic, spherical or free:

* against Pinocchio's `crba` (float64, upper triangle mirrored) on the Panda, Solo-12 (free-flyer)
  and random trees with armature, stored in random order: 1e-9 relative (float64 sums of O(n)
  terms, as tests/validation);
* against the per-sample CRBA under `jax.vmap` (a second code path) on random trees with a free
  joint at the root and one below it (the batch-last CRBA, unlike its ABA, takes a free joint
  anywhere): 1e-10 relative;
* the float32 error against Pinocchio, measured and bounded (printed);
* one compilation for every tree of the same joint types; the direct call checks its batch;
* the joint Jacobians of the same module (`joint_jacobians(model, q[B, nq], reference)`) against
  Pinocchio's `getJointJacobian` in its three reference frames (1e-10) and against the per-sample
  Jacobians under `jax.vmap` on trees with free joints anywhere (1e-12).
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pinocchio as pin
import pytest

import jaxsoa
from jaxsoa.algorithms import batch_last_crba, dynamics, kinematics
from jaxsoa.multibody.joints import JointType
from tests.algorithms.test_batch_last import ONE_DOF, TOL, _tree_case, _v_index
from tests.helpers.trees import (
    build_jaxsoa,
    counting,
    random_group,
    random_state,
    random_tree,
    relative_error,
    to_jaxsoa,
)


def _pin_crba(pin_model, qs):
    data, out = pin_model.createData(), []
    for q in qs:
        M = pin.crba(pin_model, data, q).copy()
        out.append(np.triu(M) + np.triu(M, 1).T)                  # Pinocchio fills the upper triangle
    return np.stack(out)


def _against_pinocchio(model, pin_model, rng, n_states=8, dtype=jnp.float64):
    state = random_state(rng, pin_model, n_states)
    v_index = _v_index(model, pin_model)
    ref = _pin_crba(pin_model, state["q"])[:, v_index][:, :, v_index]
    q = jnp.asarray(to_jaxsoa(model, pin_model, state)["q"], dtype)
    return jax.jit(jaxsoa.crba)(model, q), ref


@pytest.mark.parametrize("robot", ["panda", "solo12"])
def test_robots_against_pinocchio(robot_models, robot):
    model, pin_model = robot_models[robot]
    M, ref = _against_pinocchio(model, pin_model, np.random.default_rng(1))
    assert M.shape == ref.shape
    assert relative_error(M, ref) < TOL


@pytest.mark.parametrize("seed, floating", [(2, False), (3, True)])
def test_random_trees_with_armature_against_pinocchio(seed, floating):
    rng, model, pin_model = _tree_case(seed, floating=floating)
    M, ref = _against_pinocchio(model, pin_model, rng)
    assert relative_error(M, ref) < TOL


def test_float32_error_against_pinocchio(robot_models):
    """float32 on the Panda: measured ~1e-7 of max |M|; bound 1e-5."""
    model64, pin_model = robot_models["panda"]
    model = jaxsoa.load_urdf(str(jaxsoa.io.example_robot_urdf("panda")), dtype=jnp.float32)
    rng = np.random.default_rng(4)
    state = random_state(rng, pin_model, 32)
    v_index = _v_index(model64, pin_model)
    ref = _pin_crba(pin_model, state["q"])[:, v_index][:, :, v_index]
    M = jaxsoa.crba(model, jnp.asarray(to_jaxsoa(model64, pin_model, state)["q"], jnp.float32))
    error = float(np.abs(np.asarray(M, np.float64) - ref).max() / np.abs(ref).max())
    print(f"float32 CRBA relative error vs Pinocchio: {error:.2e}")
    assert error < 1e-5


def test_free_joints_anywhere_equal_the_per_sample_crba():
    """A floating tree with a second free joint below the root, spherical-free so the batch path
    applies, with armature: the batch-last CRBA against `jax.vmap` of the per-sample CRBA."""
    rng = np.random.default_rng(5)
    R, P, F = JointType.REVOLUTE, JointType.PRISMATIC, JointType.FREE
    model = build_jaxsoa(random_tree(rng, 6, link_types=(F, R, P, F, R, JointType.FIXED)))
    model = dataclasses.replace(model, armature=jnp.asarray(rng.uniform(0.05, 0.3, model.nv)))
    assert batch_last_crba.supports(model) and int(model.parent[model.links_of_type(F)[1]]) >= 0
    q = jax.vmap(lambda k: jaxsoa.random_configuration(model, k))(jax.random.split(jax.random.key(5), 5))
    ref = jax.jit(jax.vmap(lambda x: dynamics.crba.__wrapped__(model, x)))(q)
    M = jax.jit(jaxsoa.crba)(model, q)
    assert relative_error(M, ref) < 1e-10
    # mirrored across links; within one link's block (a free joint) both orders are computed: rounding
    assert relative_error(M, jnp.swapaxes(M, 1, 2)) < 1e-14


def test_one_compilation_for_every_tree_of_the_same_joint_types():
    rng = np.random.default_rng(8)
    group = [model for _, model, _ in random_group(rng, 8, 4, joint_types=ONE_DOF)]
    names = {f: getattr(group[0], f) for f in ("link_names", "link_joint_names")}   # static: one set for all
    fn, count = counting(lambda m, q: jaxsoa.crba(m, q))
    compiled = jax.jit(fn)
    for model in (dataclasses.replace(m, **names) for m in group):
        q = jnp.asarray(rng.normal(size=(3, model.nq)))
        ref = jax.vmap(lambda x, m=model: dynamics.crba.__wrapped__(m, x))(q)
        assert relative_error(compiled(model, q), ref) < 1e-10
    assert count[0] == 1


def test_direct_call_checks_its_batch_and_spherical_joints_take_the_batch_path(panda):
    q = jnp.zeros((3, panda.nq))
    with pytest.raises(ValueError, match="argument 'q' has shape"):
        batch_last_crba.crba(panda, q[:, :-1])
    with pytest.raises(ValueError, match="one leading batch axis"):
        batch_last_crba.crba(panda, q[0])
    with pytest.raises(ValueError, match="'q'"):                   # the entry point, batched: before dispatch
        jaxsoa.crba(panda, q[:, :-1])
    with pytest.raises((TypeError, ValueError), match="'q'"):
        jaxsoa.crba(panda, jnp.zeros((3, panda.nq), jnp.int32))
    rng = np.random.default_rng(9)
    spherical = build_jaxsoa(random_tree(rng, 4, link_types=(JointType.REVOLUTE, JointType.SPHERICAL,
                                                               JointType.PRISMATIC, JointType.SPHERICAL)))
    assert batch_last_crba.supports(spherical)
    q = jax.vmap(lambda k: jaxsoa.random_configuration(spherical, k))(jax.random.split(jax.random.key(9), 2))
    ref = jax.vmap(lambda x: dynamics.crba.__wrapped__(spherical, x))(q)
    assert relative_error(jaxsoa.crba(spherical, q), ref) < 1e-12


# ---------------------------------------------------------------------------------------------
# joint Jacobians: `joint_jacobians(model, q[B, nq], reference)` on the batch-last path

@pytest.mark.parametrize("robot", ["panda", "solo12"])
def test_joint_jacobians_against_pinocchio(robot_models, robot):
    """Every link's Jacobian in the three reference frames against Pinocchio's `getJointJacobian`
    (tests/algorithms/test_kinematics.py's reference, links mapped by name): 1e-10 (products of ≤ 30
    rigid transforms, as there)."""
    from tests.algorithms.test_kinematics import REFERENCES, pinocchio_kinematics

    model, pin_model = robot_models[robot]
    state = random_state(np.random.default_rng(12), pin_model, 6)
    expected = pinocchio_kinematics(model, pin_model, state)
    q = jnp.asarray(to_jaxsoa(model, pin_model, state)["q"])
    jacobians = jax.jit(jaxsoa.joint_jacobians, static_argnames="reference")
    for reference in REFERENCES:
        J = jacobians(model, q, reference=reference)
        assert J.shape == (6, model.n_links, 6, model.nv)
        assert relative_error(J, expected[f"J_{reference}"]) < 1e-10, reference
    # float32 (the same states): measured ~1e-7 of max |J| (world frame, Panda), bound 1e-5
    model32 = jaxsoa.load_urdf(str(jaxsoa.io.example_robot_urdf(robot)), floating_base=jaxsoa.io.ROBOTS[robot][1],
                               dtype=jnp.float32)
    J = np.asarray(jacobians(model32, q.astype(jnp.float32), reference="world"), np.float64)
    error = float(np.abs(J - expected["J_world"]).max() / np.abs(expected["J_world"]).max())
    print(f"float32 {robot} joint Jacobians (world) relative error vs Pinocchio: {error:.2e}")
    assert error < 1e-5


def test_joint_jacobians_with_free_joints_anywhere_equal_the_per_sample_path():
    """A tree with a free joint at the root and one below it, stored in random order: the batch-last
    Jacobians against `jax.vmap` of the per-sample ones (a second code path), every reference, 1e-12;
    one compilation serves two trees of the same joint types; the frame is checked by name."""
    rng = np.random.default_rng(13)
    R, P, F = JointType.REVOLUTE, JointType.PRISMATIC, JointType.FREE
    types = (F, R, P, F, R, JointType.FIXED, R)
    per_sample_jacobians = kinematics.joint_jacobians.__wrapped__              # no batch dispatch
    fn, count = counting(lambda m, q, reference: jaxsoa.joint_jacobians(m, q, reference))
    compiled = jax.jit(fn, static_argnums=2)
    names, permutation = None, np.r_[0, 1 + rng.permutation(6)]   # one storage order: the same static joint types
    for seed in (0, 1):
        model = build_jaxsoa(random_tree(rng, 7, link_types=types), permutation=permutation)
        names = names or {f: getattr(model, f) for f in ("link_names", "link_joint_names")}
        model = dataclasses.replace(model, **names)
        assert batch_last_crba.supports(model) and int(model.parent[model.links_of_type(F)[1]]) >= 0
        q = jax.vmap(lambda k, m=model: jaxsoa.random_configuration(m, k))(jax.random.split(jax.random.key(seed), 4))
        for reference in ("world", "local", "local_world_aligned"):
            per_sample = jax.jit(jax.vmap(lambda x, m=model, r=reference: per_sample_jacobians(m, x, r)))(q)
            assert relative_error(compiled(model, q, reference), per_sample) < 1e-12, reference
    assert count[0] == 3                                          # one per reference, shared by both trees
    with pytest.raises(ValueError, match="reference"):
        batch_last_crba.joint_jacobians(model, q, "body")
    with pytest.raises(ValueError, match="reference"):                # the public batched call
        jaxsoa.joint_jacobians(model, q, "body")
    with pytest.raises(ValueError, match="'q'"):                      # checked before the dispatch
        jaxsoa.joint_jacobians(model, q[:, :-1])
    with pytest.raises(ValueError, match="one leading batch axis"):
        batch_last_crba.joint_jacobians(model, q[0])
