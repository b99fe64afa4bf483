"""The dense masked-operator path (docs/user_guide.md §7) agrees with the O(n) recursions (crba, rnea,
aba) to 1e-10 in float64; the path-matrix mask matters; a batch of topologies compiles once;
gradients flow through the masked operator; the innovations factorization identities hold."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import jaxsoa
from jaxsoa.algorithms import operators
from jaxsoa.multibody.joints import JointType
from tests.helpers.trees import (
    build_jaxsoa,
    counting,
    random_group,
    random_permutation,
    random_tree,
    relative_error,
    stack_models,
)

TOL = 1e-10

# (seed, n links, joint types of the non-root links, floating root, permuted storage order)
CASES = [
    (0, 2, (JointType.REVOLUTE,), False, False),
    (1, 5, (JointType.REVOLUTE, JointType.PRISMATIC, JointType.SPHERICAL), False, True),
    (2, 8, (JointType.SPHERICAL, JointType.REVOLUTE), True, True),
    (3, 12, (JointType.REVOLUTE, JointType.PRISMATIC, JointType.SPHERICAL), True, True),
]


def _case(seed, n, types, floating, permuted):
    rng = np.random.default_rng(seed)
    tree = random_tree(rng, n, types, floating=floating)
    model = build_jaxsoa(tree, permutation=random_permutation(rng, n) if permuted else None)
    q = jaxsoa.random_configuration(model, jax.random.PRNGKey(seed))
    v, a, tau = (jnp.asarray(rng.normal(size=model.nv)) for _ in range(3))
    f_ext = jnp.asarray(rng.normal(size=(n, 6)))
    return model, q, v, a, tau, f_ext


@jax.jit
def _everything(model, q, v, a, tau, f_ext):
    """Both code paths at one state, one compilation per model."""
    fac = operators.innovations_factors(model, q)
    terms = operators.operator_terms(model, q, v)
    return dict(
        M_op=operators.mass_matrix_operator(model, q), M_rec=jaxsoa.crba(model, q),
        M_virtual=operators.mass_matrix_operator(model, q, operators.transfer_operator_virtual(model, q)),
        T_op=operators.inverse_dynamics_operator(model, q, v, a, f_ext), T_rec=jaxsoa.rnea(model, q, v, a, f_ext),
        T0_op=operators.inverse_dynamics_operator(model, q, v, a), T0_rec=jaxsoa.rnea(model, q, v, a),
        C_op=operators.bias_operator(model, q, v, f_ext),
        qdd_op=operators.forward_dynamics_operator(model, q, v, tau, f_ext),
        qdd_inn=operators.forward_dynamics_innovations(model, q, v, tau, f_ext),
        qdd_rec=jaxsoa.aba(model, q, v, tau, f_ext),
        V_op=terms.V, V_rec=jaxsoa.link_velocities(model, q, v),
        phi_masked=operators.transfer_operator(model, q), phi_o=operators.transfer_operator_virtual(model, q),
        P=jaxsoa.path_matrix(model.traversal), M_blocks=terms.M, **fac._asdict())


def _case_id(c):
    return f"n{c[1]}{'-free' if c[3] else ''}{'-perm' if c[4] else ''}"


@pytest.fixture(scope="module", params=CASES, ids=_case_id)
def case(request):
    model, q, v, a, tau, f_ext = _case(*request.param)
    return model, (q, v, a, tau, f_ext), jax.device_get(_everything(model, q, v, a, tau, f_ext))


def test_mass_matrix_matches_crba(case):
    model, _, r = case
    assert r["M_op"].shape == (model.nv, model.nv)
    assert relative_error(r["M_op"], r["M_rec"]) < TOL
    np.testing.assert_allclose(r["M_op"], r["M_op"].T, atol=1e-12)


def test_inverse_dynamics_matches_rnea_with_gravity_and_fext(case):
    model, (_, _, a, _, _), r = case
    assert np.abs(np.asarray(model.gravity)).max() > 1.0                # gravity is really in play
    assert relative_error(r["T_op"], r["T_rec"]) < TOL
    assert relative_error(r["T0_op"], r["T0_rec"]) < TOL
    assert relative_error(r["M_op"] @ np.asarray(a) + r["C_op"], r["T_rec"]) < TOL   # T = 𝓜 θ̈ + C
    np.testing.assert_allclose(r["V_op"], r["V_rec"], atol=1e-12)        # V = φᵀ Hᵀ θ̇


def test_forward_dynamics_matches_aba(case):
    _, _, r = case
    assert relative_error(r["qdd_op"], r["qdd_rec"]) < TOL
    assert relative_error(r["qdd_inn"], r["qdd_rec"]) < TOL


def test_mask_structure_and_the_mask_matters(case):
    model, _, r = case
    n = model.n_links
    np.testing.assert_array_equal(r["phi"], r["phi_masked"])
    phi, phi_o = r["phi"].reshape(n, 6, n, 6), r["phi_o"].reshape(n, 6, n, 6)
    P = np.asarray(r["P"])
    off_path = np.abs(phi).max(axis=(1, 3))[~P]
    assert off_path.size == 0 or off_path.max() == 0.0                  # block (i, j) zero where P = 0
    np.testing.assert_array_equal(phi.transpose(0, 2, 1, 3)[P], phi_o.transpose(0, 2, 1, 3)[P])
    for k in range(n):
        np.testing.assert_allclose(phi_o[k, :, k], np.eye(6), atol=1e-13)
    blocks_o = phi_o.transpose(0, 2, 1, 3)                               # φ_o(i,k) = φ_o(i,j) φ_o(j,k)
    np.testing.assert_allclose(np.einsum("ijab,jkbc->ikac", blocks_o, blocks_o),
                               n * blocks_o, atol=1e-10 * max(1.0, np.abs(blocks_o).max()))
    identity = np.eye(6 * n)                                             # φ = (I − E)⁻¹, recursion-free
    np.testing.assert_allclose(r["phi"] @ (identity - r["E"]), identity, atol=1e-10)
    if not P.all():                                                      # a branch or a chain: unmasked is wrong
        assert relative_error(r["M_virtual"], r["M_rec"]) > 1e-3


def test_innovations_factorization_identities(case):
    model, _, r = case
    n, size, index = model.n_links, model.n_links * model.dof_max, model.dof_index
    identity = np.eye(size)
    H, phi, K, psi = r["H"], r["phi"], r["K"], r["psi"]
    pad = np.diag((~model.dof_mask).reshape(-1).astype(float))
    M_pad = H @ phi @ r["M_blocks"] @ phi.T @ H.T
    np.testing.assert_allclose(M_pad[index][:, index], r["M_rec"], atol=TOL * max(1.0, np.abs(r["M_rec"]).max()))
    L = identity + H @ phi @ K
    L_inv = identity - H @ psi @ K
    scale = max(1.0, np.abs(M_pad).max())
    np.testing.assert_allclose(L @ r["D"] @ L.T, M_pad + pad, atol=TOL * scale)      # 𝓜 = (I+HφK) D (I+HφK)ᵀ
    np.testing.assert_allclose(L_inv @ L, identity, atol=TOL)                       # (I+HφK)⁻¹ = I − HψK
    M_inv = L_inv.T @ r["D_inv"] @ L_inv                                              # 𝓜⁻¹ = (I−HψK)ᵀ D⁻¹ (I−HψK)
    np.testing.assert_allclose(M_inv @ (M_pad + pad), identity, atol=TOL * scale)
    np.testing.assert_allclose(M_inv[index][:, index], np.linalg.inv(r["M_rec"]),
                               atol=TOL * max(1.0, np.abs(M_inv).max()))
    P = np.asarray(r["P"])                                               # ψ is built "like φ"
    psi_blocks = psi.reshape(n, 6, n, 6).transpose(0, 2, 1, 3)
    assert np.abs(psi_blocks[~P]).max(initial=0.0) < 1e-12
    eye6n = np.eye(6 * n)                                                # ψ = (I − E τ̄)⁻¹ (a product series)
    np.testing.assert_allclose(psi @ (eye6n - r["E"] @ r["tau_bar"]), eye6n, atol=1e-10 * max(1.0, np.abs(psi).max()))
    E_blocks, tau_bar = r["E"].reshape(n, 6, n, 6).transpose(0, 2, 1, 3), r["tau_bar"].reshape(n, 6, n, 6)
    for k, p in enumerate(np.asarray(model.parent)):
        if p >= 0:
            np.testing.assert_allclose(psi_blocks[p, k], E_blocks[p, k] @ tau_bar[k, :, k], atol=1e-10)




def test_batch_of_topologies_compiles_once():
    cases = random_group(np.random.default_rng(11), 6, 6, root_type=JointType.FREE, root_at=2)
    models = [model for _, model, _ in cases]
    ref = jax.jit(lambda m, q, v, a: (jaxsoa.crba(m, q), jaxsoa.rnea(m, q, v, a), jaxsoa.aba(m, q, v, a)))

    def all_ops(model, q, v, a):
        return (operators.mass_matrix_operator(model, q), operators.inverse_dynamics_operator(model, q, v, a),
                operators.forward_dynamics_operator(model, q, v, a))

    counted, count = counting(all_ops)
    batched = jax.jit(jax.vmap(counted))
    first, second = stack_models(models[:3]), stack_models(models[3:])
    assert not np.array_equal(first.parent, second.parent)
    for batch, seed in ((first, 0), (second, 1)):
        keys = jax.random.split(jax.random.PRNGKey(seed), 3)
        q = jax.vmap(lambda k: jaxsoa.random_configuration(models[0], k))(keys)
        v, a = (jax.random.normal(jax.random.PRNGKey(seed + i), (3, models[0].nv), jnp.float64) for i in (1, 2))
        out = batched(batch, q, v, a)
        for i in range(3):
            model_i = jax.tree_util.tree_map(lambda x, i=i: x[i], batch)
            for got, want in zip(out, ref(model_i, q[i], v[i], a[i]), strict=True):
                assert relative_error(got[i], want) < TOL
    assert count[0] == 1


def test_gradients_through_the_masked_operator():
    rng = np.random.default_rng(5)
    tree = random_tree(rng, 4, (JointType.REVOLUTE, JointType.PRISMATIC))
    model = build_jaxsoa(tree, permutation=np.array([2, 0, 3, 1]))
    q = jnp.asarray(rng.normal(size=model.nq))
    weights = jnp.asarray(rng.normal(size=(model.nv, model.nv)))

    @jax.jit
    def of_q(q):
        return jnp.sum(weights * operators.mass_matrix_operator(model, q))

    @jax.jit
    def of_mass(mass):
        return jnp.sum(weights * operators.mass_matrix_operator(dataclasses.replace(model, mass=mass), q))

    check_grads(of_q, (q,), order=1, modes=("rev",), atol=1e-6, rtol=1e-6)
    check_grads(of_mass, (model.mass,), order=1, modes=("rev",), atol=1e-6, rtol=1e-6)
    grad_q = jax.jit(jax.grad(of_q))(q)                                   # and the two paths agree
    grad_q_rec = jax.jit(jax.grad(lambda q: jnp.sum(weights * jaxsoa.crba(model, q))))(q)
    assert relative_error(grad_q, grad_q_rec) < TOL


@pytest.mark.parametrize("n", [16, 17])
def test_innovations_on_a_serial_chain(n):
    # ψ = Σ_{k<n} (E τ̄)ᵏ needs every power up to the chain's depth n − 1: 16 links are covered by
    # ⌈log₂ 16⌉ = 4 product factors exactly, 17 need a fifth. The innovations form must equal ABA
    # (1e-9 relative: float64 round-off through the dense 6n x 6n products of a deep, permuted chain).
    rng = np.random.default_rng(n)
    tree = random_tree(rng, n, (JointType.REVOLUTE,))
    tree["parent"] = np.arange(-1, n - 1)
    model = build_jaxsoa(tree, permutation=random_permutation(rng, n))
    q = jaxsoa.random_configuration(model, jax.random.PRNGKey(n))
    v, tau = (jnp.asarray(rng.normal(size=model.nv)) for _ in range(2))
    fac = operators.innovations_factors(model, q)
    eye6n = np.eye(6 * n)
    np.testing.assert_allclose(fac.psi @ (eye6n - fac.E @ fac.tau_bar), eye6n, atol=1e-10 * np.abs(fac.psi).max())
    assert relative_error(operators.forward_dynamics_innovations(model, q, v, tau), jaxsoa.aba(model, q, v, tau)) < 1e-9
