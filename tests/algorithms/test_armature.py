"""Joint armature (`Model.armature`, Pinocchio's `model.armature`): RNEA, ABA and CRBA against
Pinocchio with the same random armature on a random floating tree (revolute, prismatic and
spherical joints), the dense operator path and the free-floating inverse dynamics against the
recursions, and `build_model`'s validation of the field. Tolerance 1e-9 relative: float64 sums of
O(n) terms (the Pinocchio comparisons of tests/validation use the same)."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsoa
from tests.helpers.trees import (
    build_jaxsoa,
    build_pinocchio,
    coordinate_maps,
    fext_to_pinocchio,
    jaxsoa_dynamics,
    pinocchio_dynamics,
    pinocchio_to_jaxsoa_dynamics,
    random_state,
    random_tree,
    relative_error,
    to_jaxsoa,
)

TOL = 1e-9


@pytest.fixture(scope="module")
def armed():
    rng = np.random.default_rng(11)
    tree = random_tree(rng, 6, floating=True)
    model, pin_model = build_jaxsoa(tree), build_pinocchio(tree)
    _, v_index = coordinate_maps(model, pin_model)
    armature_pin = rng.uniform(0.05, 0.5, pin_model.nv)
    armature_pin[:6] = 0.0                                   # the hub's free joint: no rotor
    pin_model.armature = armature_pin
    model = dataclasses.replace(model, armature=jnp.asarray(armature_pin[v_index]))
    return model, pin_model, rng


def test_dynamics_with_armature_match_pinocchio(armed):
    model, pin_model, rng = armed
    state = random_state(rng, pin_model, 4)
    f_ext = rng.normal(size=(4, model.n_links, 6))
    reference = pinocchio_to_jaxsoa_dynamics(model, pin_model, pinocchio_dynamics(
        pin_model, state, [fext_to_pinocchio(model, pin_model, f) for f in f_ext]))
    s = to_jaxsoa(model, pin_model, state)
    got = jax.jit(jax.vmap(jaxsoa_dynamics, (None, 0, 0, 0, 0, 0)))(model, s["q"], s["v"], s["a"], s["tau"],
                                                                     jnp.asarray(f_ext))
    for key, value in reference.items():
        assert relative_error(got[key], value) < TOL, key
    assert not np.allclose(jaxsoa.crba(dataclasses.replace(model, armature=0 * model.armature), s["q"][0]),
                           got["crba"][0])                  # the armature is not a no-op


def test_operator_path_and_free_floating_include_armature(armed):
    model, _, rng = armed
    q = jaxsoa.random_configuration(model, jax.random.PRNGKey(0), 0.7)
    v, tau = (jnp.asarray(rng.normal(size=model.nv)) for _ in range(2))
    np.testing.assert_allclose(jaxsoa.mass_matrix_operator(model, q), jaxsoa.crba(model, q), rtol=0, atol=1e-11)
    qdd = jaxsoa.aba(model, q, v, tau)
    np.testing.assert_allclose(jaxsoa.forward_dynamics_operator(model, q, v, tau), qdd, rtol=0, atol=1e-10)
    np.testing.assert_allclose(jaxsoa.forward_dynamics_innovations(model, q, v, tau), qdd, rtol=0, atol=1e-10)
    np.testing.assert_allclose(jaxsoa.inverse_dynamics_operator(model, q, v, qdd), tau, rtol=0, atol=1e-10)
    free = jaxsoa.aba_free_floating(model, q, v, tau[6:])             # zero hub force: the mixed inverse
    back = jaxsoa.rnea_free_floating(model, q, v, free[6:])             # problem must give τ back
    np.testing.assert_allclose(back.tau_joints, tau[6:], rtol=0, atol=1e-10)
    np.testing.assert_allclose(back.base_acceleration, free[:6], rtol=0, atol=1e-10)


def test_build_model_validates_armature():
    rng = np.random.default_rng(0)
    tree = random_tree(rng, 3, joint_types=(jaxsoa.JointType.REVOLUTE,))
    fields = {k: tree[k] for k in ("parent", "joint_types", "joint_axis", "placement_rotation",
                                   "placement_translation", "mass", "com", "inertia_com")}
    model = jaxsoa.build_model(**fields, armature=[0.1, 0.0, 0.2])
    np.testing.assert_array_equal(model.armature, [0.1, 0.0, 0.2])
    np.testing.assert_array_equal(jaxsoa.build_model(**fields).armature, np.zeros(3))
    for bad in ([0.1, 0.2], [0.1, -0.2, 0.0], [0.1, np.nan, 0.0]):
        with pytest.raises(ValueError, match="'armature'"):
            jaxsoa.build_model(**fields, armature=bad)
