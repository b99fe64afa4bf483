"""`joint_jacobians_time_variation` (dJ/dt of every link's Jacobian) against Pinocchio 4.1's
`computeJointJacobiansTimeVariation` + `getJointJacobianTimeVariation` in the three reference frames, and against
identities that do not use it, float64, on random trees (`tests/helpers/trees.py`): revolute / prismatic links
stored in a random order, a free-flyer root with spherical joints, a spherical root, and (against the identities
only: Pinocchio merges welded links into their joint) welded links at the root, inside and at the tips.

Error measure: relative_error(x, ref) = max |x − ref| / max(1, max |ref|) over states, links and entries.

* Pinocchio's dJ, rows reordered to `[angular; linear]`, columns to jaxsoa's velocity order: 1e-12 (products of
  ≤ 8 rigid transforms and cross products in float64, both engines; measured ≤ 3e-15);
* forward mode of `joint_jacobians` along q(t) = integrate(q, t v) at t = 0 (`jax.jvp`, quaternion joints
  through their Lie-group integration): 1e-12 (an exact derivative of the same products; measured ≤ 3e-15);
* link accelerations: J_local a + dJ_local v equals `link_accelerations` (Pinocchio's `data.a`, an outward
  recursion that uses no Jacobian): 1e-12;
* float32 models: the error against the float64 result, measured on the free-flyer tree, is 7e-7 (world),
  4e-7 (local), 3e-7 (local world aligned), a few ulp of the O(1–10) entries; asserted ≤ 1e-5.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pinocchio as pin
import pytest

import jaxsoa
from jaxsoa.algorithms.jacobian_derivatives import joint_jacobians_time_variation
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

TOL = 1e-12             # float64: see the module docstring
TOL_FLOAT32 = 1e-5      # float32 against float64: measured ≤ 7e-7 (module docstring)
N_STATES = 4
REFERENCES = {"world": pin.ReferenceFrame.WORLD, "local": pin.ReferenceFrame.LOCAL,
              "local_world_aligned": pin.ReferenceFrame.LOCAL_WORLD_ALIGNED}
PIN_TO_JAXSOA = [3, 4, 5, 0, 1, 2]                 # Pinocchio rows [linear; angular] -> [angular; linear]
R, P, S, F, W = (JointType.REVOLUTE, JointType.PRISMATIC, JointType.SPHERICAL, JointType.FREE, JointType.FIXED)
KINDS = {                                          # joint type of each link in tree order (parent[k] < k)
    "tree": (R, P, R, R, P, R, R, P),
    "free": (F, R, S, P, R, S, R),
    "spherical": (S, R, S, P, R, S),
    "welded": (W, R, W, S, P, W, R, W),
}
PINOCCHIO_KINDS = ("tree", "free", "spherical")    # no welded links: each jaxsoa link is a Pinocchio joint


@functools.cache
def case(kind: str, dtype=jnp.float64):
    """(jaxsoa model, Pinocchio model, state in Pinocchio's layout, state in jaxsoa's as jnp arrays) of a
    random tree of `KINDS[kind]`, stored in a random order for "tree"; cached so each is compiled once."""
    rng = np.random.default_rng(sorted(KINDS).index(kind))
    tree = random_tree(rng, len(KINDS[kind]), link_types=KINDS[kind])
    permutation = random_permutation(rng, len(KINDS[kind])) if kind == "tree" else None
    model, pin_model = build_jaxsoa(tree, dtype, permutation), build_pinocchio(tree)
    state = random_state(rng, pin_model, N_STATES)
    js = {key: jnp.asarray(x, dtype) for key, x in to_jaxsoa(model, pin_model, state).items()}
    return model, pin_model, state, js


def pinocchio_columns(model, pin_model):
    """Pinocchio's motion rows and velocity columns in jaxsoa's layout: (rows, v_index)."""
    return PIN_TO_JAXSOA, coordinate_maps(model, pin_model)[1]


def pinocchio_dJ(model, pin_model, state) -> dict:
    """{reference: (N, n, 6, nv)} Pinocchio's dJ of each jaxsoa link's joint, in jaxsoa's layout."""
    rows, v_index = pinocchio_columns(model, pin_model)
    joint_ids = [pin_model.getJointId(name) for name in model.link_joint_names]
    data = pin_model.createData()
    out = {name: [] for name in REFERENCES}
    for q, v in zip(state["q"], state["v"], strict=True):
        pin.computeJointJacobiansTimeVariation(pin_model, data, q, v)
        for name, frame in REFERENCES.items():
            out[name].append(np.stack([pin.getJointJacobianTimeVariation(pin_model, data, j, frame)[rows][:, v_index]
                                       for j in joint_ids]))
    return {name: np.stack(x) for name, x in out.items()}


def along_motion(model, fn, q, v):
    """d/dt fn(integrate(q, t v)) at t = 0, by forward mode (the independent check of a time variation)."""
    return jax.jvp(lambda t: fn(jaxsoa.integrate(model, q, t * v)), (jnp.zeros((), q.dtype),),
                   (jnp.ones((), q.dtype),))[1]


def _all_references(model, q, v):
    return {name: joint_jacobians_time_variation(model, q, v, name) for name in REFERENCES}


def _by_forward_mode(model, q, v):
    return {name: along_motion(model, lambda q_t, name=name: jaxsoa.joint_jacobians(model, q_t, name), q, v)
            for name in REFERENCES}


_batched = jax.jit(jax.vmap(_all_references, in_axes=(None, 0, 0)))
_batched_forward_mode = jax.jit(jax.vmap(_by_forward_mode, in_axes=(None, 0, 0)))


@pytest.mark.parametrize("kind", PINOCCHIO_KINDS)
def test_matches_pinocchio(kind):
    model, pin_model, state, js = case(kind)
    got, expected = _batched(model, js["q"], js["v"]), pinocchio_dJ(model, pin_model, state)
    errors = {name: relative_error(got[name], expected[name]) for name in REFERENCES}
    print(kind, errors)                                                     # shown with `pytest -s`
    assert all(e <= TOL for e in errors.values()), errors
    assert all(float(np.abs(x).max()) > 1e-2 for x in expected.values())    # not a comparison of zeros


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_is_the_derivative_of_the_jacobians_along_the_motion(kind):
    model, _, _, js = case(kind)
    got, expected = _batched(model, js["q"], js["v"]), _batched_forward_mode(model, js["q"], js["v"])
    errors = {name: relative_error(got[name], expected[name]) for name in REFERENCES}
    print(kind, errors)                                                     # shown with `pytest -s`
    assert all(e <= TOL for e in errors.values()), errors


@pytest.mark.parametrize("kind", ["free", "welded"])
def test_local_jacobians_give_the_link_accelerations(kind):
    model, _, _, js = case(kind)
    q, v, a = js["q"][0], js["v"][0], js["a"][0]

    @jax.jit
    def both(q, v, a):
        J = jaxsoa.joint_jacobians(model, q, "local")
        dJ = joint_jacobians_time_variation(model, q, v, "local")
        return J @ a + dJ @ v, jaxsoa.link_accelerations(model, q, v, a)   # α_k = J_k a + dJ_k v

    got, expected = both(q, v, a)
    assert relative_error(got, expected) <= TOL


def test_jit_vmap_and_a_leading_batch_axis():
    model, _, _, js = case("free")
    q, v = js["q"], js["v"]
    single = jax.jit(lambda q, v: joint_jacobians_time_variation(model, q, v, "local"))
    loop = np.stack([single(q[i], v[i]) for i in range(N_STATES)])
    batch = jax.jit(lambda q, v: joint_jacobians_time_variation(model, q, v, "local"))(
        q.reshape(2, 2, -1), v.reshape(2, 2, -1))                          # a (2, 2) leading batch
    assert batch.shape == (2, 2, model.n_links, 6, model.nv)
    assert relative_error(batch.reshape(loop.shape), loop) <= TOL
    mapped = jax.jit(jax.vmap(lambda q, v: joint_jacobians_time_variation(model, q, v, reference="local")))(q, v)
    assert relative_error(mapped, loop) <= TOL


def test_bad_arguments_are_named():
    model, _, _, js = case("free")
    q, v = js["q"][0], js["v"][0]
    with pytest.raises(ValueError, match="'q'"):
        joint_jacobians_time_variation(model, q[:-1], v)
    with pytest.raises(ValueError, match="'v'"):
        joint_jacobians_time_variation(model, q, jnp.zeros(model.nv + 1))
    with pytest.raises(ValueError, match="reference"):
        joint_jacobians_time_variation(model, q, v, "body")


def test_float32_error():
    model, _, _, js = case("free")
    model32 = case("free", jnp.float32)[0]
    for name in REFERENCES:
        exact = _batched(model, js["q"], js["v"])[name]
        got = jax.jit(jax.vmap(lambda q, v, name=name: joint_jacobians_time_variation(model32, q, v, name)))(
            js["q"].astype(jnp.float32), js["v"].astype(jnp.float32))
        assert got.dtype == jnp.float32
        error = relative_error(np.asarray(got, np.float64), exact)
        print(name, error)                                                  # shown with `pytest -s`
        assert error <= TOL_FLOAT32
