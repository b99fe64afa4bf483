"""`jaxsoa.spatial.svd` (one-sided Jacobi) against numpy's LAPACK SVD and pseudo-inverse in float64, its
derivatives against finite differences (`check_grads`) and against JAX's LAPACK-based derivatives, and
no custom call in the lowered program."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

from jaxsoa.spatial.svd import pinv, singular_values
from tests.helpers.custom_calls import custom_calls

jax.config.update("jax_enable_x64", True)


@pytest.mark.parametrize("shape", [(1, 1), (3, 3), (6, 6), (4, 9), (9, 4), (18, 18), (30, 30)])
def test_singular_values_and_pinv_equal_numpy(shape):
    # Batched random matrices. σ: 1e-14 × σ_max (both backward stable). A⁺: 1e-13 × cond(A) relative to max |A⁺|.
    rng = np.random.default_rng(shape[0] * 31 + shape[1])
    A = rng.normal(size=(3, *shape))
    s, s_ref = np.asarray(singular_values(jnp.asarray(A))), np.linalg.svd(A, compute_uv=False)
    assert s.shape == s_ref.shape and np.abs(s - s_ref).max() <= 1e-14 * s_ref.max()
    P, P_ref = np.asarray(pinv(jnp.asarray(A), 1e-12)), np.linalg.pinv(A, rcond=1e-12)
    assert np.abs(P - P_ref).max() <= 1e-13 * np.linalg.cond(A).max() * np.abs(P_ref).max()


def test_small_singular_values_are_accurate():
    # σ from 1 to 1e-8: relative 1e-7 for σ_min (round-off 1e-16 × σ_max / σ_min for an unscaled matrix).
    rng = np.random.default_rng(2)
    U, V = np.linalg.qr(rng.normal(size=(6, 6)))[0], np.linalg.qr(rng.normal(size=(6, 6)))[0]
    sigma = np.logspace(0, -8, 6)
    s = np.asarray(singular_values(jnp.asarray(U @ np.diag(sigma) @ V.T)))
    assert np.abs(s / sigma - 1).max() <= 1e-7
    assert np.asarray(singular_values(jnp.zeros((6, 6)))).tolist() == [0.0] * 6


def test_pinv_drops_small_singular_values_like_numpy():
    # A symmetric rank-5 12x12 matrix (a redundant Delassus matrix): the dropped directions give zero.
    rng = np.random.default_rng(3)
    B = rng.normal(size=(12, 5))
    K = B @ B.T
    P = np.asarray(pinv(jnp.asarray(K), 1e-10))
    np.testing.assert_allclose(P, np.linalg.pinv(K, rcond=1e-10, hermitian=True), rtol=0, atol=1e-12 * np.abs(P).max())
    traced = jax.jit(lambda K, r: pinv(K, r))(jnp.asarray(K), 1e-10)           # a traced cutoff
    np.testing.assert_array_equal(np.asarray(traced), P)


@pytest.mark.parametrize("shape", [(6, 6), (4, 6), (6, 4)])
def test_derivatives_against_finite_differences_and_lapack(shape):
    rng = np.random.default_rng(4)
    A = jnp.asarray(rng.normal(size=shape))
    check_grads(lambda A: pinv(A, 1e-12), (A,), order=1, modes=("fwd", "rev"))
    check_grads(singular_values, (A,), order=1, modes=("fwd", "rev"))
    weights = jnp.arange(1.0, 1.0 + min(shape))
    pairs = [(lambda A: jnp.sum(jnp.sin(pinv(A, 1e-12))), lambda A: jnp.sum(jnp.sin(jnp.linalg.pinv(A, 1e-12)))),
             (lambda A: jnp.sum(weights * singular_values(A)),
              lambda A: jnp.sum(weights * jnp.linalg.svd(A, compute_uv=False)))]
    for ours, lapack in pairs:
        np.testing.assert_allclose(np.asarray(jax.grad(ours)(A)), np.asarray(jax.grad(lapack)(A)), rtol=1e-10,
                                   atol=1e-12)


def test_no_custom_call():
    A = jnp.ones((5, 7))
    assert custom_calls(lambda A: (pinv(A, 1e-12), singular_values(A)), A) == set()
    assert custom_calls(lambda A: jnp.linalg.pinv(A), A) != set()           # the check can fail


@pytest.mark.parametrize("call, message", [(lambda: singular_values(jnp.ones(3)), "'A'"),
                                           (lambda: singular_values(jnp.ones((3, 3), jnp.int32)), "'A' has dtype"),
                                           (lambda: pinv(jnp.ones((3,)), 1e-9), "'A'"),
                                           (lambda: pinv(jnp.ones((3, 3)), -1.0), "'rtol'"),
                                           (lambda: pinv(jnp.ones((3, 3)), jnp.ones(2)), "'rtol'")])
def test_bad_arguments_are_named(call, message):
    with pytest.raises(ValueError, match=message):
        call()
