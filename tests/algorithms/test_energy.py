"""`kinetic_energy`, `potential_energy` and `center_of_mass_jacobian` against identities that do not use
them (Pinocchio's values: tests/validation/test_example_robot_kinematics.py), float64, on a random
6-link free-floating tree with revolute, prismatic and spherical joints and rotor armature:

* ½ vᵀ M(q) v (CRBA, armature included) = T + ½ Σ armature ⊙ v²: 1e-12 relative (one sum of ~40 terms);
* ∂U/∂q mapped to the tangent space equals the generalized gravity RNEA(q, 0, 0): 1e-10 (a derivative of
  a sum of products vs a recursion);
* J_c v equals d/dt c(integrate(q, t v)) at t = 0 (forward mode of `center_of_mass`): 1e-12;
* the unforced motion conserves T + U + ½ Σ armature v²: over 200 RK4 steps of 1 ms the relative drift is
  below 1e-9 (RK4's error ∝ dt⁴; a sign or factor error in either energy would drift at O(1));
* a fixed base: links welded to the world carry neither energy (U of a welded-only model is 0);
* states of the wrong length are refused naming the argument.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsoa
from jaxsoa.multibody.joints import JointType
from tests.helpers.trees import build_jaxsoa, random_tree, relative_error

TYPES = (JointType.FREE, JointType.REVOLUTE, JointType.PRISMATIC, JointType.SPHERICAL, JointType.REVOLUTE,
         JointType.REVOLUTE)


def _case(seed=0):
    rng = np.random.default_rng(seed)
    model = build_jaxsoa(random_tree(rng, len(TYPES), link_types=TYPES))
    model = dataclasses.replace(model, armature=jnp.asarray(rng.uniform(0.0, 0.1, model.nv)))
    q = jaxsoa.random_configuration(model, jax.random.PRNGKey(seed))
    v = jnp.asarray(rng.normal(size=model.nv))
    return model, q, v


def test_kinetic_energy_is_half_v_M_v_without_the_rotors():
    model, q, v = _case()
    rotors = 0.5 * jnp.sum(model.armature * v**2)
    T, M = jax.jit(lambda q, v: (jaxsoa.kinetic_energy(model, q, v), jaxsoa.crba(model, q)))(q, v)
    assert relative_error(T, 0.5 * v @ M @ v - rotors) <= 1e-12
    assert float(rotors) > 1e-3                                       # the armature is really there


def test_potential_energy_gradient_is_generalized_gravity():
    model, q, v = _case(1)
    dU, g = jax.jit(lambda q: (
        jax.grad(lambda dv: jaxsoa.potential_energy(model, jaxsoa.integrate(model, q, dv)))(jnp.zeros_like(v)),
        jaxsoa.rnea(model, q, jnp.zeros_like(v), jnp.zeros_like(v))))(q)
    assert relative_error(dU, g) <= 1e-10
    assert float(jnp.abs(g).max()) > 1e-2


def test_center_of_mass_jacobian_is_the_velocity_of_the_center_of_mass():
    model, q, v = _case(2)
    c_dot, J = jax.jit(lambda q, v: (
        jax.jvp(lambda t: jaxsoa.center_of_mass(model, jaxsoa.integrate(model, q, t * v)), (0.0,), (1.0,))[1],
        jaxsoa.center_of_mass_jacobian(model, q)))(q, v)
    assert J.shape == (3, model.nv)
    assert relative_error(J @ v, c_dot) <= 1e-12


def test_unforced_motion_conserves_energy():
    model, q, v = _case(3)

    def energy(q, v):
        return (jaxsoa.kinetic_energy(model, q, v) + jaxsoa.potential_energy(model, q)
                + 0.5 * jnp.sum(model.armature * v**2))

    qs, vs = jaxsoa.rollout(model, q, v, lambda t, q, v: jnp.zeros_like(v), 1e-3, 200)
    e = jax.jit(jax.vmap(energy))(jnp.concatenate([q[None], qs]), jnp.concatenate([v[None], vs]))
    assert float(jnp.abs(e - e[0]).max() / jnp.abs(e[0])) <= 1e-9
    assert float(jnp.abs(jaxsoa.potential_energy(model, qs[-1]) - jaxsoa.potential_energy(model, q))) > 1e-6


def test_links_welded_to_the_world_carry_no_energy():
    tree = random_tree(np.random.default_rng(4), 3, link_types=(JointType.FIXED,) * 3)
    model = build_jaxsoa(tree)
    q, v = jnp.zeros(0), jnp.zeros(0)
    assert float(jaxsoa.potential_energy(model, q)) == 0.0 and float(jaxsoa.kinetic_energy(model, q, v)) == 0.0


def test_bad_inputs_are_named():
    model, q, v = _case()
    with pytest.raises(ValueError, match="'v'"):
        jaxsoa.kinetic_energy(model, q, v[:-1])
    with pytest.raises(ValueError, match="'q'"):
        jaxsoa.potential_energy(model, q[:-1])
    with pytest.raises(ValueError, match="'q'"):
        jaxsoa.center_of_mass_jacobian(model, jnp.zeros(model.nq + 1))
