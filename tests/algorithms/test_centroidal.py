"""`centroidal_momentum_matrix` (A_g), `centroidal_inertia` (I_G) and `centroidal_momentum_matrix_time_variation`
(dA_g/dt) against Pinocchio 4.1 (`computeCentroidalMap`, `ccrba`'s `Ag`, `hg` and `Ig`, `dccrba`,
`computeCentroidalMapTimeVariation`) and against identities that do not use them, float64, on the random trees of
`test_jacobian_derivatives.case`: revolute / prismatic links in a random storage order, a free-flyer root with
spherical joints, a spherical root, and welded links at the root (a fixed base), inside and at the tips.

Pinocchio's rows are `[linear; angular]`; jaxsoa's are `[angular; linear]` as `centroidal_momentum` returns h_G:
A_g = Ag[[3, 4, 5, 0, 1, 2]], I_G the same permutation of Ig's rows and columns.

Error measure: relative_error(x, ref) = max |x − ref| / max(1, max |ref|) over states and entries.

* against Pinocchio: 1e-12 (sums of ≤ 8 transformed inertias in float64 in both engines; measured ≤ 3e-15);
* A_g v equals `centroidal_momentum` (Σ of link momenta moved to the centre of mass, no A_g): 1e-12;
* dA_g/dt equals the forward mode of A_g along q(t) = integrate(q, t v) (`jax.jvp`): 1e-12 (exact derivative);
* dh_G/dt = A_g a + (dA_g/dt) v equals the forward mode of `centroidal_momentum` along (q(t), v + t a): 1e-12;
* float32 models: the error against the float64 result, measured on the free-flyer tree, is 2.0e-6 (A_g),
  2.5e-6 (I_G) and 1.3e-6 (dA_g), a few ulp of the O(1–10) entries; asserted ≤ 1e-5.

Pinocchio's `computeCentroidalMapTimeVariation` reads the centre-of-mass velocity `data.vcom[0]` without computing
it (`dccrba` computes it): the test sets it first with `pin.centerOfMass(model, data, q, v)`.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pinocchio as pin
import pytest

import jaxsoa
from jaxsoa.algorithms.centroidal import (
    centroidal_inertia,
    centroidal_momentum_matrix,
    centroidal_momentum_matrix_time_variation,
)
from tests.algorithms.test_jacobian_derivatives import KINDS, N_STATES, along_motion, case, pinocchio_columns
from tests.helpers.trees import relative_error

TOL = 1e-12             # float64: see the module docstring
TOL_FLOAT32 = 1e-5      # float32 against float64: measured ≤ 2.5e-6 (module docstring)


def jaxsoa_centroidal(model, q, v, a) -> dict:
    """A_g, I_G, dA_g at one state, and the momenta and forward-mode references they must reproduce."""
    A = centroidal_momentum_matrix(model, q)
    dA = centroidal_momentum_matrix_time_variation(model, q, v)
    dh_G = jax.jvp(lambda t: jaxsoa.centroidal_momentum(model, jaxsoa.integrate(model, q, t * v), v + t * a),
                   (jnp.zeros((), q.dtype),), (jnp.ones((), q.dtype),))[1]
    return dict(Ag=A, Ig=centroidal_inertia(model, q), dAg=dA, hg=A @ v, dhg=A @ a + dA @ v,
                hg_reference=jaxsoa.centroidal_momentum(model, q, v), dhg_reference=dh_G,
                dAg_reference=along_motion(model, lambda q_t: centroidal_momentum_matrix(model, q_t), q, v))


def pinocchio_centroidal(model, pin_model, state) -> dict:
    """Pinocchio's centroidal quantities, batched over the states, in jaxsoa's layout."""
    rows, v_index = pinocchio_columns(model, pin_model)
    out = {key: [] for key in ("Ag", "Ag_ccrba", "hg", "Ig", "dAg", "dAg_map")}
    for q, v in zip(state["q"], state["v"], strict=True):
        out["Ag"].append(pin.computeCentroidalMap(pin_model, pin_model.createData(), q)[rows][:, v_index])
        data = pin_model.createData()
        out["Ag_ccrba"].append(pin.ccrba(pin_model, data, q, v)[rows][:, v_index])
        out["hg"].append(data.hg.vector[rows])
        out["Ig"].append(data.Ig.matrix()[rows][:, rows])
        out["dAg"].append(pin.dccrba(pin_model, pin_model.createData(), q, v)[rows][:, v_index])
        data = pin_model.createData()
        pin.centerOfMass(pin_model, data, q, v)                        # sets data.vcom[0], read below
        out["dAg_map"].append(pin.computeCentroidalMapTimeVariation(pin_model, data, q, v)[rows][:, v_index])
    return {key: np.stack(x) for key, x in out.items()}


_batched = jax.jit(jax.vmap(jaxsoa_centroidal, in_axes=(None, 0, 0, 0)))


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_matches_pinocchio(kind):
    model, pin_model, state, js = case(kind)
    got, expected = _batched(model, js["q"], js["v"], js["a"]), pinocchio_centroidal(model, pin_model, state)
    errors = {key: relative_error(got[key.removesuffix("_ccrba").removesuffix("_map")], x)
              for key, x in expected.items()}
    print(kind, errors)                                                    # shown with `pytest -s`
    assert all(e <= TOL for e in errors.values()), errors
    assert float(np.abs(expected["dAg"]).max()) > 1e-2                      # not a comparison of zeros


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_identities(kind):
    model, _, _, js = case(kind)
    got = _batched(model, js["q"], js["v"], js["a"])
    errors = {key: relative_error(got[key], got[f"{key}_reference"]) for key in ("hg", "dhg", "dAg")}
    print(kind, errors)
    assert all(e <= TOL for e in errors.values()), errors
    I_G = np.asarray(got["Ig"])
    assert np.abs(I_G[:, :3, 3:]).max() <= TOL * np.abs(I_G).max()          # about the centre of mass: no lever


def test_jit_vmap_and_a_leading_batch_axis():
    model, _, _, js = case("spherical")
    q, v = js["q"], js["v"]
    functions = {"Ag": lambda q, v: centroidal_momentum_matrix(model, q),
                 "Ig": lambda q, v: centroidal_inertia(model, q),
                 "dAg": lambda q, v: centroidal_momentum_matrix_time_variation(model, q, v)}
    for name, fn in functions.items():
        single = jax.jit(fn)
        loop = np.stack([single(q[i], v[i]) for i in range(N_STATES)])
        batch = jax.jit(fn)(q.reshape(2, 2, -1), v.reshape(2, 2, -1))          # a (2, 2) leading batch
        assert batch.shape == (2, 2, *loop.shape[1:]), name
        assert relative_error(batch.reshape(loop.shape), loop) <= TOL, name
        assert relative_error(jax.jit(jax.vmap(fn))(q, v), loop) <= TOL, name


def test_bad_arguments_are_named():
    model, _, _, js = case("free")
    q, v = js["q"][0], js["v"][0]
    for fn in (centroidal_momentum_matrix, centroidal_inertia):
        with pytest.raises(ValueError, match="'q'"):
            fn(model, q[:-1])
    with pytest.raises(ValueError, match="'q'"):
        centroidal_momentum_matrix_time_variation(model, jnp.zeros(model.nq + 1), v)
    with pytest.raises(ValueError, match="'v'"):
        centroidal_momentum_matrix_time_variation(model, q, v[:-1])


def test_float32_error():
    model, _, _, js = case("free")
    model32 = case("free", jnp.float32)[0]
    exact = _batched(model, js["q"], js["v"], js["a"])
    got = jax.jit(jax.vmap(jaxsoa_centroidal, in_axes=(None, 0, 0, 0)))(
        model32, *(js[key].astype(jnp.float32) for key in ("q", "v", "a")))
    errors = {key: relative_error(np.asarray(got[key], np.float64), exact[key]) for key in ("Ag", "Ig", "dAg")}
    print(errors)
    assert got["Ag"].dtype == jnp.float32
    assert all(e <= TOL_FLOAT32 for e in errors.values()), errors
