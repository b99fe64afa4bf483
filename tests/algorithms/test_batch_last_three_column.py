"""Three-column joints on the batch-last core: spherical and planar (`jaxsoa.algorithms.batch_last_slots.TRIPLES`:
the frame (R(quaternion), 0) or (R_z(θ), (x, y, 0)) and the joint motion [ω; 0] or [0, 0, ω; v_x, v_y, 0] set
before the scans like a free joint's; `jaxsoa.algorithms.batch_last`: ABA eliminates the link's three constant
columns (e_z, e_y, e_x angular; or ω_z, v_x, v_y) in one step, the 3×3 joint as three rank-1 eliminations in
the one link frame). Every test runs for both joint types (`JOINTS`).

Checked in float64:
* RNEA, ABA and CRBA of leading-batch calls against Pinocchio on random fixed-base and free-floating
  trees of revolute, prismatic, fixed and the three-column joint stored in random order, with armature on
  every column and link wrenches, and on a chain of three-column joints only: 1e-9 relative, as the other
  Pinocchio tests (float64 sums of O(n) terms);
* every batch-path entry point these models reach (RNEA, ABA, CRBA, composite inertias, forward
  kinematics, joint Jacobians, the free-floating ABA) against the per-sample recursions under `jax.vmap`
  (a second code path): 1e-10;
* M⁻¹ b from the forward ABA's factor (`solve_mass_matrix`, the adjoint's solve) against a dense solve
  with CRBA's M (an independent algorithm): 1e-10, in tests/algorithms/test_batch_last_solve.py;
* stacked per-sample trees with three-column joints against Pinocchio, one compilation for two stacks;
* the adjoint's gradients (states, wrenches, model fields) against plain autodiff of the per-sample ABA:
  1e-10;
* the float32 error against Pinocchio, measured (printed) and bounded.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pinocchio as pin
import pytest

import jaxsoa
from jaxsoa.algorithms import batch_last, dynamics, free_floating, kinematics
from jaxsoa.multibody.joints import JointType
from tests.algorithms.test_batch_last import assert_adjoint_gradients_equal_plain_autodiff
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
    stack_models,
    to_jaxsoa,
)

R, P, S, F, X = JointType.REVOLUTE, JointType.PRISMATIC, JointType.SPHERICAL, JointType.FREE, JointType.FIXED
JOINTS = [JointType.SPHERICAL, JointType.PLANAR]
JOINT_IDS = ["spherical", "planar"]
TOL = 1e-9


def _case(seed, n_links=9, floating=False, chain=False, joint=S):
    """(rng, model, pin model): a random tree with `joint` (three-column) joints (one at the root when
    fixed-base; every joint `joint` when `chain`, then a chain), stored in random order, armature on every
    column but a free joint's, the same tree in Pinocchio."""
    rng = np.random.default_rng(seed)
    tree = random_tree(rng, n_links, joint_types=(R, P, joint, X), floating=floating,
                       link_types=[joint] * n_links if chain else None)
    if chain:
        tree["parent"] = np.arange(-1, n_links - 1)
    elif not floating:
        tree["joint_types"][0] = joint
    model, pin_model = build_jaxsoa(tree, permutation=random_permutation(rng, n_links)), build_pinocchio(tree)
    assert len(model.links_of_type(joint)) >= 1 and batch_last.supports(model)
    arm = rng.uniform(0.05, 0.3, model.nv)
    arm[model.v_columns(F).ravel()] = 0.0
    pin_model.armature = arm[np.argsort(coordinate_maps(model, pin_model)[1])]
    return rng, dataclasses.replace(model, armature=jnp.asarray(arm)), pin_model


def _pinocchio(pin_model, state, fext):
    """Pinocchio's RNEA, ABA (with link wrenches) and CRBA (mirrored) per state."""
    data, out = pin_model.createData(), {"rnea": [], "aba": [], "crba": []}
    for i, (q, v, a, tau) in enumerate(zip(state["q"], state["v"], state["a"], state["tau"], strict=True)):
        out["rnea"].append(pin.rnea(pin_model, data, q, v, a, fext[i]).copy())
        out["aba"].append(pin.aba(pin_model, data, q, v, tau, fext[i]).copy())
        M = pin.crba(pin_model, data, q).copy()
        out["crba"].append(np.triu(M) + np.triu(M, 1).T)                  # Pinocchio fills the upper triangle
    return {k: np.stack(x) for k, x in out.items()}


def _against_pinocchio(model, pin_model, rng, n_states=6, dtype=jnp.float64):
    """(jaxsoa's RNEA, ABA, CRBA of one leading-batch call each, Pinocchio's in jaxsoa's coordinates)."""
    state = random_state(rng, pin_model, n_states)
    f_ext = rng.normal(size=(n_states, model.n_links, 6))
    ref = _pinocchio(pin_model, state, [fext_to_pinocchio(model, pin_model, f) for f in f_ext])
    v_index = coordinate_maps(model, pin_model)[1]
    ref = {"rnea": ref["rnea"][:, v_index], "aba": ref["aba"][:, v_index],
           "crba": ref["crba"][:, v_index][:, :, v_index]}
    s = {k: jnp.asarray(x, dtype) for k, x in to_jaxsoa(model, pin_model, state).items()}
    f_ext = jnp.asarray(f_ext, dtype)
    got = {"rnea": jax.jit(jaxsoa.rnea)(model, s["q"], s["v"], s["a"], f_ext),
           "aba": jax.jit(jaxsoa.aba)(model, s["q"], s["v"], s["tau"], f_ext),
           "crba": jax.jit(jaxsoa.crba)(model, s["q"])}
    return got, ref


@pytest.mark.parametrize("joint", JOINTS, ids=JOINT_IDS)
@pytest.mark.parametrize("seed, floating, chain", [(1, False, False), (2, True, False), (3, False, True)],
                         ids=["tree", "free-flyer", "chain"])
def test_rnea_aba_crba_against_pinocchio(seed, floating, chain, joint, monkeypatch):
    rng, model, pin_model = _case(seed, floating=floating, chain=chain, joint=joint)
    _forbid_the_per_sample_path(monkeypatch)
    got, ref = _against_pinocchio(model, pin_model, rng)
    for name in ("rnea", "aba", "crba"):
        assert relative_error(got[name], ref[name]) < TOL, name


@pytest.mark.parametrize("joint", JOINTS, ids=JOINT_IDS)
def test_float32_error_against_pinocchio(joint):
    """float32, a 9-link tree with three-column joints: measured (spherical / planar) 4.6e-7 / 2.3e-7 (RNEA),
    1.1e-6 / 1.0e-6 (ABA), 5.1e-7 / 3.0e-7 (CRBA) of max |result|; bound 1e-5, as the Panda's."""
    rng, model64, pin_model = _case(4, joint=joint)
    model = jax.tree.map(lambda x: x.astype(jnp.float32) if jnp.issubdtype(x.dtype, jnp.floating) else x, model64)
    got, ref = _against_pinocchio(model, pin_model, rng, n_states=32, dtype=jnp.float32)
    errors = {k: float(np.abs(np.asarray(got[k], np.float64) - ref[k]).max() / np.abs(ref[k]).max()) for k in ref}
    print(f"float32 relative error vs Pinocchio, {joint.name.lower()} joints:", errors)
    assert all(e < 1e-5 for e in errors.values())


def _forbid_the_per_sample_path(monkeypatch):
    """Make the per-sample RNEA / ABA / CRBA raise: a batched call must take the batch-last passes. A traced
    model with free joints also traces the per-sample ABA as the fallback branch of the entry point's
    `lax.cond` (`jaxsoa.multibody.batched.guarded`): that ABA returns NaN here, so a run that took the
    branch fails the comparison."""
    def per_sample_path(*_):
        raise AssertionError("a batched call took the per-sample path")
    for name in ("_aba_adjoint", "motion_pass", "motion_subspaces"):      # per-sample ABA; RNEA and CRBA
        monkeypatch.setattr(dynamics, name, per_sample_path)
    monkeypatch.setattr(dynamics, "_aba_adjoint_per_sample",
                        lambda model, q, v, tau, f_ext=None: jnp.full_like(v, jnp.nan))


def _per_sample(fn, *xs):
    return jax.jit(jax.vmap(fn))(*xs)


@pytest.mark.parametrize("joint", JOINTS, ids=JOINT_IDS)
def test_every_batch_path_entry_point_equals_the_per_sample_recursions(joint):
    rng, model, _ = _case(5, n_links=8, floating=True, joint=joint)
    q = jax.vmap(lambda k: jaxsoa.random_configuration(model, k))(jax.random.split(jax.random.key(5), 5))
    v, a = (jnp.asarray(rng.normal(size=(5, model.nv))) for _ in range(2))
    tau_joints = a[:, 6:]
    f_ext = jnp.asarray(rng.normal(size=(5, model.n_links, 6)))
    link = int(model.links_of_type(joint)[-1])
    cases = {
        "rnea": (lambda q, v, a, f: jaxsoa.rnea(model, q, v, a, f), dynamics.rnea.__wrapped__),
        "aba": (lambda q, v, a, f: jaxsoa.aba(model, q, v, a, f), dynamics._aba_recursion),
        "aba_free_floating": (lambda q, v, a, f: free_floating.aba_free_floating(model, q, v, a[..., 6:], f),
                              lambda m, q, v, a, f: free_floating._aba_free_floating(m, q, v, a[6:], f)),
        "crba": (lambda q, v, a, f: jaxsoa.crba(model, q), lambda m, q, v, a, f: dynamics.crba.__wrapped__(m, q)),
        "composite_inertias": (lambda q, v, a, f: dynamics.composite_inertias(model, q),
                               lambda m, q, v, a, f: dynamics.composite_inertias.__wrapped__(m, q)),
        "forward_kinematics": (lambda q, v, a, f: kinematics.forward_kinematics(model, q),
                               lambda m, q, v, a, f: kinematics.forward_kinematics.__wrapped__(m, q)),
        "joint_jacobians": (lambda q, v, a, f: kinematics.joint_jacobians(model, q, "local"),
                            lambda m, q, v, a, f: kinematics.joint_jacobians.__wrapped__(m, q, "local")),
        "frame_jacobian": (lambda q, v, a, f: kinematics.frame_jacobian(model, q, link, "world"),
                           lambda m, q, v, a, f: kinematics.frame_jacobian.__wrapped__(m, q, link, "world")),
    }
    assert tau_joints.shape[1] == model.nv - 6
    for name, (batched, per_sample) in cases.items():
        got = jax.jit(batched)(q, v, a, f_ext)
        ref = _per_sample(lambda *x, fn=per_sample: fn(model, *x), q, v, a, f_ext)
        for g, r in zip(jax.tree.leaves(got), jax.tree.leaves(ref), strict=True):
            assert relative_error(g, r) < 1e-10, name


@pytest.mark.parametrize("joint", JOINTS, ids=JOINT_IDS)
def test_stacked_trees_with_three_column_joints_against_pinocchio_in_one_compilation(joint, monkeypatch):
    rng = np.random.default_rng(7)
    _forbid_the_per_sample_path(monkeypatch)
    cases = random_group(rng, 6, 6, joint_types=(R, joint, X), root_type=F, root_at=1)
    assert len(cases[0][1].links_of_type(joint)) >= 1
    fn, count = counting(lambda m, q, v, a, tau, f: (jaxsoa.rnea(m, q, v, a, f), jaxsoa.aba(m, q, v, tau, f)))
    compiled = jax.jit(fn)
    for group in (cases[:3], cases[3:]):
        rows = []
        for _, model, pin_model in group:
            state = random_state(rng, pin_model, 1)
            f_ext = rng.normal(size=(1, model.n_links, 6))
            ref = _pinocchio(pin_model, state, [fext_to_pinocchio(model, pin_model, f_ext[0])])
            v_index = coordinate_maps(model, pin_model)[1]
            rows.append((model, to_jaxsoa(model, pin_model, state), f_ext, ref["rnea"][0, v_index],
                         ref["aba"][0, v_index]))
        s = {k: jnp.concatenate([r[1][k] for r in rows]) for k in ("q", "v", "a", "tau")}
        rnea, aba = compiled(stack_models([r[0] for r in rows]), s["q"], s["v"], s["a"], s["tau"],
                             jnp.asarray(np.concatenate([r[2] for r in rows])))
        for b, row in enumerate(rows):
            assert relative_error(rnea[b], row[3]) < TOL
            assert relative_error(aba[b], row[4]) < TOL
    assert count[0] == 1


@pytest.mark.slow            # two gradient compiles (~1 min on a loaded 2-core machine)
@pytest.mark.parametrize("joint", JOINTS, ids=JOINT_IDS)
def test_adjoint_gradients_equal_plain_autodiff_per_sample(joint):
    """The batched adjoint (ABA, its factor's solve and RNEA's hand-written reverse mode, all with
    three-column joints) against plain autodiff of the per-sample ABA (`test_batch_last`'s check)."""
    rng, model, _ = _case(8, n_links=6, floating=True, joint=joint)
    assert_adjoint_gradients_equal_plain_autodiff(model, rng, 8)


@pytest.mark.parametrize("joint", JOINTS, ids=JOINT_IDS)
def test_bad_inputs_are_named_on_the_batch_path(joint):
    """A model with three-column joints takes the batch path, and its calls still reject wrong shapes and
    dtypes by argument name, before any work."""
    _, model, _ = _case(9, n_links=5, joint=joint)
    q = jnp.broadcast_to(jaxsoa.neutral(model), (3, model.nq))
    v = jnp.zeros((3, model.nv))
    with pytest.raises(ValueError, match="'q'"):
        jaxsoa.aba(model, q[:, :-1], v, v)                       # a quaternion or (cos, sin) entry missing
    with pytest.raises(ValueError, match="'tau'"):
        jaxsoa.aba(model, q, v, v[:, :-1])
    with pytest.raises(ValueError, match="'f_ext'"):
        jaxsoa.rnea(model, q, v, v, jnp.zeros((3, model.n_links + 1, 6)))
    with pytest.raises((TypeError, ValueError), match="'q'"):
        jaxsoa.crba(model, q.astype(jnp.int32))
    with pytest.raises(ValueError, match="batch"):
        batch_last.aba(model, q[0], v[0], v[0])                  # the direct call needs the batch axis
