"""Physics identities inside jaxsoa on random trees (docs/validation.md):

* ABA ∘ RNEA = identity (forward and inverse dynamics are independent recursions);
* CRBA = RNEA with unit accelerations (composite inertias vs Newton–Euler);
* M symmetric positive definite;
* Ṁ − 2C skew-symmetric, with C the Christoffel matrix built by autodiff of CRBA, and C v equal
  to RNEA's velocity terms (a third route);
* dE/dt = q̇ᵀτ along ABA's accelerations, E = ½ vᵀ M v − Σ m_k gᵀ c_k;
* RNEA's external wrenches equal −Σ J_kᵀ f_k with the local frame Jacobians.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsoa
from jaxsoa.algorithms.dynamics import generalized_force
from jaxsoa.multibody.joints import JointType
from jaxsoa.multibody.model import link_inertia
from tests.helpers.trees import MOVING_TYPES, build_jaxsoa, random_tree

ONE_DOF = (JointType.REVOLUTE, JointType.PRISMATIC)      # q lives in R^n: d/dq is the tangent derivative


def _state(rng, model):
    q = jax.jit(jaxsoa.random_configuration)(model, jax.random.PRNGKey(int(rng.integers(1 << 30))))
    v, a = (jnp.asarray(rng.normal(size=model.nv)) for _ in range(2))
    return q, v, a


@pytest.fixture(scope="module", params=[(2, False), (7, True), (16, False), (30, True)], ids=lambda p: f"n{p[0]}")
def general_tree(request):
    n, floating = request.param
    return build_jaxsoa(random_tree(np.random.default_rng(n), n, MOVING_TYPES, floating=floating))


@pytest.fixture(scope="module", params=[3, 12], ids=lambda n: f"n{n}")
def one_dof_tree(request):
    return build_jaxsoa(random_tree(np.random.default_rng(100 + request.param), request.param, ONE_DOF))


@jax.jit
def _inverse_forward_and_mass(model, q, v, a):
    tau = jaxsoa.rnea(model, q, v, a)
    bias = jaxsoa.rnea(model, q, v, jnp.zeros(model.nv))
    M_rnea = jax.vmap(lambda e: jaxsoa.rnea(model, q, v, e) - bias)(jnp.eye(model.nv)).T   # column j = M e_j
    return jaxsoa.aba(model, q, v, tau), jaxsoa.crba(model, q), M_rnea


def test_aba_inverts_rnea_and_crba_matches_rnea(general_tree):
    model, rng = general_tree, np.random.default_rng(1)
    q, v, a = _state(rng, model)
    qdd, M, M_rnea = _inverse_forward_and_mass(model, q, v, a)
    # M⁻¹ amplifies rounding by cond(M) (~1e4 for random light links): 1e-9 relative is ample
    np.testing.assert_allclose(qdd, a, rtol=0, atol=1e-9 * max(1.0, float(jnp.abs(a).max())))
    np.testing.assert_allclose(M, M_rnea, rtol=0, atol=1e-11 * float(jnp.abs(M).max()))  # ~100 ulp
    np.testing.assert_allclose(M_rnea, M_rnea.T, rtol=0, atol=1e-11 * float(jnp.abs(M).max()))
    assert float(jnp.linalg.eigvalsh(M).min()) > 0


def _christoffel_coriolis(model, q, v):
    """C_ij = Σ_k ½ (∂_k M_ij + ∂_j M_ik − ∂_i M_jk) v_k from autodiff of CRBA (1-DoF joints)."""
    dM = jax.jacfwd(lambda x: jaxsoa.crba(model, x))(q)          # dM[i, j, k] = ∂M_ij / ∂q_k
    return 0.5 * (jnp.einsum("ijk,k->ij", dM, v) + jnp.einsum("ikj,k->ij", dM, v) - jnp.einsum("jki,k->ij", dM, v))


@jax.jit
def _coriolis_and_power(model, q, v, tau):
    C = _christoffel_coriolis(model, q, v)
    M_dot = jax.jvp(lambda x: jaxsoa.crba(model, x), (q,), (v,))[1]
    coriolis_rnea = jaxsoa.nonlinear_effects(model, q, v) - jaxsoa.generalized_gravity(model, q)
    qdd = jaxsoa.aba(model, q, v, tau)

    def energy(x, xd):
        mass, com, _ = link_inertia(model)
        R, p = jaxsoa.forward_kinematics(model, x)
        com_world = p + jnp.einsum("nij,nj->ni", R, com)
        return 0.5 * xd @ jaxsoa.crba(model, x) @ xd - jnp.sum(mass * (com_world @ model.gravity))

    return C, M_dot, coriolis_rnea, jax.jvp(energy, (q, v), (v, qdd))[1]


def test_mdot_minus_2c_is_skew_and_energy_rate(one_dof_tree):
    model, rng = one_dof_tree, np.random.default_rng(2)
    q, v, _ = _state(rng, model)
    tau = jnp.asarray(rng.normal(size=model.nv))
    C, M_dot, coriolis_rnea, E_dot = _coriolis_and_power(model, q, v, tau)
    N = M_dot - 2 * C
    scale = float(jnp.abs(M_dot).max())
    np.testing.assert_allclose(N, -N.T, rtol=0, atol=1e-12 * scale)            # autodiff is exact: ulp level
    np.testing.assert_allclose(C @ v, coriolis_rnea, rtol=0, atol=1e-11 * float(jnp.abs(coriolis_rnea).max()))
    np.testing.assert_allclose(E_dot, v @ tau, rtol=1e-10)   # power balance, rounding of O(n) sums


@jax.jit
def _external_wrench_routes(model, q, v, a, f_ext):
    J_local = jaxsoa.joint_jacobians(model, q, "local")
    expected = jaxsoa.rnea(model, q, v, a) - jnp.einsum("kia,ki->a", J_local, f_ext)
    got = jaxsoa.rnea(model, q, v, a, f_ext)
    return expected, got, jaxsoa.aba(model, q, v, got, f_ext)


def test_external_wrenches_enter_through_local_jacobians(general_tree):
    model, rng = general_tree, np.random.default_rng(3)
    q, v, a = _state(rng, model)
    f_ext = jnp.asarray(rng.normal(size=(model.n_links, 6)))
    expected, got, qdd = _external_wrench_routes(model, q, v, a, f_ext)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-11 * float(jnp.abs(expected).max()))
    # and ABA sees the same wrenches: ABA(RNEA(q, v, a, f), f) = a
    np.testing.assert_allclose(qdd, a, rtol=0, atol=1e-9)


@jax.jit
def _generalized_force_routes(model, q, f_ext):
    J_local = jaxsoa.joint_jacobians(model, q, "local")
    return jnp.einsum("kia,ki->a", J_local, f_ext), generalized_force(model, q, f_ext)


def test_generalized_force_is_the_local_jacobians_transposed(general_tree):
    model, rng = general_tree, np.random.default_rng(4)
    q, _, _ = _state(rng, model)
    f_ext = jnp.asarray(rng.normal(size=(model.n_links, 6)))
    expected, got = _generalized_force_routes(model, q, f_ext)        # Σ_k J_kᵀ f_k against two RNEAs
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-11 * float(jnp.abs(expected).max()))
