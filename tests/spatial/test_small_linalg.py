"""`jaxsoa.spatial.small_linalg` against numpy's LAPACK (solve) and a dense solve (tridiagonal), in
float64; derivatives against finite differences (`check_grads`); no custom call in the lowered program
(the point of the module: LAPACK's custom calls hang with several XLA host devices)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

from jaxsoa.spatial.small_linalg import solve, tridiagonal_solve
from tests.helpers.custom_calls import custom_calls

jax.config.update("jax_enable_x64", True)


@pytest.mark.parametrize("d", [1, 2, 3, 6, 9])
def test_solve_equals_numpy(d):
    # Random (4, 3, d, d) matrices, vector and matrix right-hand sides. Bound: 1e-13 × cond(A) × |x|
    # (backward-stable elimination with partial pivoting; numpy's LU has the same bound).
    rng = np.random.default_rng(d)
    A, b, B = rng.normal(size=(4, 3, d, d)), rng.normal(size=(4, 3, d)), rng.normal(size=(4, 3, d, 2))
    x, X = np.asarray(solve(jnp.asarray(A), jnp.asarray(b))), np.asarray(solve(jnp.asarray(A), jnp.asarray(B)))
    x_ref, X_ref = np.linalg.solve(A, b[..., None])[..., 0], np.linalg.solve(A, B)
    bound = 1e-13 * np.linalg.cond(A).max() * max(np.abs(x_ref).max(), np.abs(X_ref).max())
    assert np.abs(x - x_ref).max() <= bound and np.abs(X - X_ref).max() <= bound


def test_solve_pivots_a_zero_diagonal():
    # A permutation matrix has zeros on its diagonal: elimination without pivoting divides by zero.
    P = np.eye(6)[[3, 0, 5, 1, 2, 4]]
    b = np.arange(1.0, 7.0)
    np.testing.assert_array_equal(np.asarray(solve(jnp.asarray(P), jnp.asarray(b))), np.linalg.solve(P, b))


def test_solve_broadcasts_a_shared_matrix():
    rng = np.random.default_rng(0)
    A, B = rng.normal(size=(5, 5)), rng.normal(size=(7, 5, 2))
    np.testing.assert_allclose(np.asarray(solve(jnp.asarray(A), jnp.asarray(B))),
                               np.linalg.solve(A, B), rtol=0, atol=1e-12 * np.linalg.cond(A))


def test_solve_derivatives_and_no_custom_call():
    rng = np.random.default_rng(1)
    A, b = jnp.asarray(rng.normal(size=(6, 6)) + 3 * np.eye(6)), jnp.asarray(rng.normal(size=6))
    check_grads(solve, (A, b), order=2, modes=("fwd", "rev"))
    grad = jax.grad(lambda A, b: jnp.sum(jnp.sin(solve(A, b))), (0, 1))(A, b)
    grad_lapack = jax.grad(lambda A, b: jnp.sum(jnp.sin(jnp.linalg.solve(A, b))), (0, 1))(A, b)
    for g, g_ref in zip(grad, grad_lapack, strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(g_ref), rtol=1e-12, atol=1e-13)
    assert custom_calls(solve, A, b) == set()
    assert custom_calls(jnp.linalg.solve, A, b) != set()          # the check can fail


@pytest.mark.parametrize("A_shape, b_shape, name", [((3, 4), (3,), "'A'"), ((3,), (3,), "'A'"),
                                                    ((3, 3), (4,), "'b'"), ((3, 3), (2, 2), "'b'")])
def test_solve_names_a_bad_argument(A_shape, b_shape, name):
    with pytest.raises(ValueError, match=name):
        solve(jnp.ones(A_shape), jnp.ones(b_shape))


def _tridiagonal(n, k, seed):
    """An SPD tridiagonal system like the tether's consistent mass matrix: diagonal 2/6, off-diagonal 1/6
    of random positive masses, plus positive end masses."""
    rng = np.random.default_rng(seed)
    m = rng.uniform(0.5, 2.0, n - 1)
    diag = np.zeros(n)
    diag[:-1] += m / 3
    diag[1:] += m / 3
    diag[[0, -1]] += rng.uniform(0.1, 5.0, 2)
    off = m / 6
    return np.r_[0.0, off], diag, np.r_[off, 0.0], rng.normal(size=(n, k))


@pytest.mark.parametrize("n", [2, 5, 33])
def test_tridiagonal_solve_equals_a_dense_solve(n):
    lower, diag, upper, b = _tridiagonal(n, 4, n)
    dense = np.diag(diag) + np.diag(lower[1:], -1) + np.diag(upper[:-1], 1)
    x = np.asarray(tridiagonal_solve(*(jnp.asarray(a) for a in (lower, diag, upper, b))))
    bound = 1e-13 * np.linalg.cond(dense) * np.abs(b).max()
    np.testing.assert_allclose(x, np.linalg.solve(dense, b), rtol=0, atol=bound)


def test_tridiagonal_solve_derivatives_and_no_custom_call():
    args = tuple(jnp.asarray(a) for a in _tridiagonal(6, 2, 0))
    check_grads(lambda d, b: tridiagonal_solve(args[0], d, args[2], b), (args[1], args[3]), order=1,
                modes=("fwd", "rev"))
    assert custom_calls(tridiagonal_solve, *args) == set()
    with pytest.raises(ValueError, match="'upper'"):
        tridiagonal_solve(args[0], args[1], args[2][:-1], args[3])
    with pytest.raises(ValueError, match="'b'"):
        tridiagonal_solve(args[0], args[1], args[2], args[3][:, 0])


def test_integer_arguments_are_named():
    # A non-floating dtype is rejected with the argument named (jnp.linalg.solve promotes it silently).
    A, b = jnp.eye(3, dtype=jnp.int32), jnp.ones(3, jnp.int32)
    with pytest.raises(ValueError, match="'A' has dtype int32"):
        solve(A, b.astype(float))
    with pytest.raises(ValueError, match="'b' has dtype int32"):
        solve(A.astype(float), b)
    with pytest.raises(ValueError, match="'diag' has dtype int32"):
        tridiagonal_solve(jnp.zeros(3), b, jnp.zeros(3), jnp.ones((3, 1)))


def test_solve_program_does_not_grow_with_the_size():
    # One elimination step per iteration of a loop: the lowered program of a 40x40 solve is no longer than a 4x4's.
    def size(d):
        args = (jnp.eye(d), jnp.ones(d))
        return len(jax.jit(solve).lower(*args).as_text())
    assert size(40) <= 1.1 * size(4)
