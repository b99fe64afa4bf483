"""`minverse` and `coriolis_matrix` (jaxsoa.algorithms.dynamics_matrices) against Pinocchio 4.1's
`computeMinverse` and `computeCoriolisMatrix` and against identities that do not use them, float64, on three
random trees stored in a random order: revolute and prismatic joints only, a free-flyer root with revolute,
prismatic and spherical joints, and a fixed-base tree with spherical joints and a welded (fixed-joint) link;
the last two with random armature (Pinocchio's `model.armature`). Tolerances are relative (`relative_error`)
and stated where asserted.

float32 (the same trees and states in float32, against the float64 results, `relative_error`): measured M⁻¹
≤ 6.5e-6 (cond(M) ≤ 2.6e3 bounds it by ~2e-4 at float32's 6e-8 rounding) and C ≤ 1.4e-6 (sums of products,
no solve); asserted at 1e-4 and 2e-5. float64 figures measured: M⁻¹ against Pinocchio ≤ 1.4e-14, C ≤ 1.6e-15,
C v ≤ 5.3e-15, Ṁ = C + Cᵀ ≤ 4.8e-15.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pinocchio as pin
import pytest

import jaxsoa
from jaxsoa.algorithms.dynamics_matrices import coriolis_matrix, minverse
from jaxsoa.multibody.joints import JointType
from tests.helpers.trees import (
    build_jaxsoa,
    build_pinocchio,
    coordinate_maps,
    random_permutation,
    random_state,
    random_tree,
    relative_error,
    to_jaxsoa,
)

R, P, S = JointType.REVOLUTE, JointType.PRISMATIC, JointType.SPHERICAL
FREE, FIXED = JointType.FREE, JointType.FIXED
CASES = {   # name: (tree seed, joint types in tree order, armature)
    "revolute_prismatic": (0, (R, P, R, R, P, R, R, P), False),
    "free_flyer": (1, (FREE, R, S, P, R, R, S), True),
    "spherical": (2, (R, S, R, FIXED, S, P, R), True),
}
N_STATES = 3


@jax.jit
def _jaxsoa_terms(model, q, v):
    """minverse, crba, coriolis_matrix, nle − g and Ṁ (by `jax.jvp` of `crba` along q(t) = q ⊕ t v) at a state."""
    M_dot = jax.jvp(lambda t: jaxsoa.crba(model, jaxsoa.integrate(model, q, t * v)), (jnp.zeros(()),),
                    (jnp.ones(()),))[1]
    return dict(Minv=minverse(model, q), M=jaxsoa.crba(model, q), C=coriolis_matrix(model, q, v),
                Cv=jaxsoa.nonlinear_effects(model, q, v) - jaxsoa.generalized_gravity(model, q), M_dot=M_dot)


def _pinocchio_terms(pin_model, state, v_index):
    """Pinocchio's M⁻¹ (upper triangle symmetrised) and C per state, reordered into jaxsoa's velocity layout."""
    data, out = pin_model.createData(), dict(Minv=[], C=[])
    for q, v in zip(state["q"], state["v"], strict=True):
        Minv = pin.computeMinverse(pin_model, data, q)
        out["Minv"].append(np.triu(Minv) + np.triu(Minv, 1).T)
        out["C"].append(pin.computeCoriolisMatrix(pin_model, data, q, v).copy())
    return {key: np.stack(x)[:, v_index[:, None], v_index[None, :]] for key, x in out.items()}


@pytest.fixture(scope="module", params=list(CASES), ids=list(CASES))
def case(request):
    seed, types, armature = CASES[request.param]
    rng = np.random.default_rng(seed)
    tree = random_tree(rng, len(types), link_types=types)
    permutation = random_permutation(rng, len(types))
    model, pin_model = build_jaxsoa(tree, permutation=permutation), build_pinocchio(tree)
    _, v_index = coordinate_maps(model, pin_model)
    if armature:
        armature_pin = rng.uniform(0.05, 0.5, pin_model.nv)
        pin_model.armature = armature_pin
        model = dataclasses.replace(model, armature=jnp.asarray(armature_pin[v_index]))
    state = random_state(rng, pin_model, N_STATES)
    s = to_jaxsoa(model, pin_model, state)
    got = jax.vmap(_jaxsoa_terms, (None, 0, 0))(model, jnp.asarray(s["q"]), jnp.asarray(s["v"]))
    return dict(tree=tree, permutation=permutation, model=model, q=s["q"], v=s["v"], got=got,
                pin=_pinocchio_terms(pin_model, state, v_index))


def test_minverse_matches_pinocchio_and_inverts_crba(case):
    got, model = case["got"], case["model"]
    # M⁻¹ amplifies rounding by cond(M) (≤ 2.6e3 on these light random links): 1e-11 relative, measured ≤ 1.4e-14
    assert relative_error(got["Minv"], case["pin"]["Minv"]) <= 1e-11
    assert relative_error(got["Minv"], np.linalg.inv(np.asarray(got["M"]))) <= 1e-11
    eye = np.broadcast_to(np.eye(model.nv), got["M"].shape)
    assert relative_error(np.asarray(got["Minv"]) @ np.asarray(got["M"]), eye) <= 1e-11     # M⁻¹ M = 1, same reason
    np.testing.assert_array_equal(got["Minv"], np.swapaxes(got["Minv"], -1, -2))           # symmetric by construction
    if float(jnp.abs(model.armature).max()) > 0:                                         # the armature is not a no-op
        bare = minverse(dataclasses.replace(model, armature=jnp.zeros_like(model.armature)), case["q"][0])
        assert relative_error(bare, got["Minv"][0]) > 1e-3


def test_coriolis_matrix_matches_pinocchio(case):
    # the same sums of products of ~n 6x6 terms in another order and frame: 1e-12 relative, measured ≤ 1.6e-15
    assert relative_error(case["got"]["C"], case["pin"]["C"]) <= 1e-12


def test_coriolis_matrix_times_v_is_the_velocity_terms_of_rnea(case):
    got = case["got"]
    Cv = jnp.einsum("bij,bj->bi", got["C"], jnp.asarray(case["v"]))
    assert relative_error(Cv, got["Cv"]) <= 1e-12       # C v vs the RNEA at zero acceleration (measured ≤ 5.3e-15)
    assert float(jnp.abs(got["Cv"]).max()) > 1e-2


def test_mass_matrix_derivative_is_c_plus_c_transpose(case):
    got = case["got"]
    C = got["C"]
    # Ṁ by forward-mode autodiff of CRBA along q ⊕ t v (quaternions on their manifold): 1e-12, measured ≤ 4.8e-15
    assert relative_error(C + jnp.swapaxes(C, -1, -2), got["M_dot"]) <= 1e-12
    assert float(jnp.abs(C - jnp.swapaxes(C, -1, -2)).max()) > 1e-3      # C itself is not symmetric


def test_jit_vmap_and_leading_batch_axis_agree(case):
    """A leading batch axis of 16 (the `vmap` size at which `crba` and the kinematics inside run on the
    batch-last core), `jax.vmap` and per-sample calls give the same matrices (1e-12: other summation orders)."""
    model = case["model"]
    q = jnp.asarray(np.resize(case["q"], (16, model.nq)))
    v = jnp.asarray(np.resize(case["v"], (16, model.nv)))
    batched_Minv, batched_C = minverse(model, q), coriolis_matrix(model, q, v)
    assert batched_Minv.shape == batched_C.shape == (16, model.nv, model.nv)
    mapped = jax.jit(jax.vmap(lambda q, v: (minverse(model, q), coriolis_matrix(model, q, v))))(q, v)
    for got, ref in ((batched_Minv, case["got"]["Minv"]), (batched_C, case["got"]["C"])):
        assert relative_error(got[:N_STATES], ref) <= 1e-12
    assert relative_error(mapped[0], batched_Minv) <= 1e-12 and relative_error(mapped[1], batched_C) <= 1e-12
    grid = minverse(model, q.reshape(4, 4, model.nq))                                 # several leading axes
    assert grid.shape == (4, 4, model.nv, model.nv)


def test_wrong_lengths_are_named(case):
    model, q, v = case["model"], jnp.asarray(case["q"][0]), jnp.asarray(case["v"][0])
    with pytest.raises(ValueError, match="'q'"):
        minverse(model, q[:-1])
    with pytest.raises(ValueError, match="'q'"):
        coriolis_matrix(model, jnp.concatenate([q, q[:1]]), v)
    with pytest.raises(ValueError, match="'v'"):
        coriolis_matrix(model, q, v[:-1])


def test_float32_error(case):
    model32 = build_jaxsoa(case["tree"], dtype=jnp.float32, permutation=case["permutation"])
    model32 = dataclasses.replace(model32, armature=case["model"].armature.astype(jnp.float32))
    q, v = jnp.asarray(case["q"], jnp.float32), jnp.asarray(case["v"], jnp.float32)
    Minv, C = jax.jit(jax.vmap(lambda q, v: (minverse(model32, q), coriolis_matrix(model32, q, v))))(q, v)
    assert Minv.dtype == C.dtype == jnp.float32
    assert relative_error(Minv, case["got"]["Minv"]) <= 1e-4       # measured ≤ 6.5e-6; cond(M) ≤ 2.6e3 × 6e-8
    assert relative_error(C, case["got"]["C"]) <= 2e-5             # measured ≤ 1.4e-6: sums of products, no solve
