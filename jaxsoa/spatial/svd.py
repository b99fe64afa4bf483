"""Singular values and pseudo-inverses of small matrices by one-sided Jacobi (Hestenes), in elementwise
ops without LAPACK custom calls (those hang intermittently with several XLA host devices;
`jaxsoa.spatial.small_linalg`, docs/performance.md "Batch-last core").

One-sided Jacobi rotates pairs of columns of A (m, n) until all are orthogonal: A V = W with V
orthogonal and W's columns w_i = σ_i u_i. Then σ_i = |w_i| (accurate in relative terms for small σ,
unlike the eigenvalues of AᵀA) and A⁺ = V diag(1/σ_i²) Wᵀ over the kept σ_i. A sweep visits the
n(n−1)/2 pairs in a `lax.fori_loop` (one rotation in the loop body, so the program does not grow with
n²); sweeps repeat until no pair is rotated by more than the dtype's round-off (quadratic convergence:
5–9 sweeps for n ≤ 30 in float64), at most `MAX_SWEEPS`. A wide A (n > m) is rotated as Aᵀ, so the
columns rotated are min(m, n). Derivatives are closed forms (custom JVPs), never autodiff of the sweeps.
"""

import jax
import jax.numpy as jnp
import numpy as np

MAX_SWEEPS = 40
"""Upper bound on the Jacobi sweeps (reached only by a non-finite input)."""


def _check_matrix(name, A):
    if A.ndim < 2:
        raise ValueError(f"argument '{name}' has shape {tuple(A.shape)}: expected (..., m, n), a matrix")
    if not jnp.issubdtype(A.dtype, jnp.floating):
        raise ValueError(f"argument '{name}' has dtype {A.dtype}: expected a floating dtype")


def _rotation(a, b):
    """(c, s, measure) of the Hestenes rotation making columns a, b (..., m) orthogonal: tan θ = t, the
    smaller root of t² + 2ζt − 1 with ζ = (|b|² − |a|²) / (2 a·b); measure = |a·b| / (|a| |b|)."""
    alpha, beta, gamma = jnp.sum(a * a, -1), jnp.sum(b * b, -1), jnp.sum(a * b, -1)
    active = gamma != 0
    zeta = (beta - alpha) / (2 * jnp.where(active, gamma, 1))
    size = jnp.abs(zeta)
    big = size > 1
    root = jnp.where(big, size * (1 + jnp.sqrt(1 + 1 / jnp.where(big, size, 1) ** 2)), size + jnp.sqrt(1 + size**2))
    t = jnp.where(active, jnp.where(zeta >= 0, 1.0, -1.0) / root, 0)
    c = 1 / jnp.sqrt(1 + t**2)
    norms = jnp.sqrt(alpha * beta)
    return c, c * t, jnp.where(active, jnp.abs(gamma) / jnp.where(norms > 0, norms, 1), 0)


def _pairs(n):
    """(P, 2) int32 column pairs (i, j), i < j, in cyclic row order."""
    return np.asarray([(i, j) for i in range(n - 1) for j in range(i + 1, n)], np.int32).reshape(-1, 2)


def _jacobi(A):
    """(W, V) with W = A V (..., m, n) of orthogonal columns and V (..., n, n) orthogonal."""
    n = A.shape[-1]
    pairs = jnp.asarray(_pairs(n))
    tol = jnp.finfo(A.dtype).eps * n

    def rotate(k, state):                           # [w_i, w_j] ← [c w_i − s w_j, s w_i + c w_j], same on V
        W, V, measure = state
        i, j = pairs[k, 0], pairs[k, 1]
        w_i, w_j = jnp.take(W, i, -1), jnp.take(W, j, -1)
        c, s, m_k = _rotation(w_i, w_j)
        c, s = c[..., None, None], s[..., None, None]

        def apply(X, x_i, x_j):
            X = jax.lax.dynamic_update_index_in_dim(X, c * x_i - s * x_j, i, X.ndim - 1)
            return jax.lax.dynamic_update_index_in_dim(X, s * x_i + c * x_j, j, X.ndim - 1)
        W = apply(W, w_i[..., None], w_j[..., None])
        V = apply(V, jnp.take(V, i, -1)[..., None], jnp.take(V, j, -1)[..., None])
        return W, V, jnp.maximum(measure, m_k)

    def sweep(state):
        W, V, _, count = state
        W, V, measure = jax.lax.fori_loop(0, pairs.shape[0], rotate, (W, V, jnp.zeros(A.shape[:-2], A.dtype)))
        return W, V, measure, count + 1

    def unfinished(state):
        return (state[3] < MAX_SWEEPS) & jnp.any(state[2] > tol)

    V = jnp.broadcast_to(jnp.eye(n, dtype=A.dtype), (*A.shape[:-2], n, n))
    start = (A, V, jnp.full(A.shape[:-2], jnp.inf, A.dtype), jnp.zeros((), jnp.int32))
    if n < 2:
        return A, V
    W, V, _, _ = jax.lax.while_loop(unfinished, sweep, start)
    return W, V


def _factors(A):
    """(σ, u, v) unsorted: σ (..., r), u (..., m, r), v (..., n, r), r = min(m, n), A = u diag(σ) vᵀ."""
    wide = A.shape[-1] > A.shape[-2]
    W, V = _jacobi(jnp.swapaxes(A, -1, -2) if wide else A)
    sigma = jnp.sqrt(jnp.sum(W * W, -2))
    u = W / jnp.where(sigma > 0, sigma, 1)[..., None, :]
    return (sigma, V, u) if wide else (sigma, u, V)


@jax.custom_jvp
def _singular_values(A):
    return -jnp.sort(-_factors(A)[0], axis=-1)


@_singular_values.defjvp
def _singular_values_jvp(primals, tangents):
    (A,), (A_dot,) = primals, tangents
    sigma, u, v = _factors(A)
    sigma_dot = jnp.einsum("...ki,...kl,...li->...i", u, A_dot, v)       # σ̇_i = u_iᵀ Ȧ v_i
    order = jnp.argsort(-sigma, axis=-1)
    return jnp.take_along_axis(sigma, order, -1), jnp.take_along_axis(sigma_dot, order, -1)


def singular_values(A):
    """(..., min(m, n)) singular values of A (..., m, n), descending (module docstring). Derivative
    σ̇_i = u_iᵀ Ȧ v_i (a custom JVP; defined for distinct σ, like LAPACK's). ValueError naming 'A' for a
    non-matrix or a non-floating dtype."""
    _check_matrix("A", A)
    return _singular_values(A)


@jax.custom_jvp
def _pinv(A, rtol):
    sigma, u, v = _factors(A)
    keep = sigma > rtol * jnp.max(sigma, -1, keepdims=True)
    inverse = jnp.where(keep, 1 / jnp.where(keep, sigma, 1), 0)
    return jnp.einsum("...ik,...k,...jk->...ij", v, inverse, u)             # A⁺ = V diag(1/σ) Uᵀ


@_pinv.defjvp
def _pinv_jvp(primals, tangents):
    (A, rtol), (A_dot, _) = primals, tangents                  # the cutoff's tangent does not move A⁺
    P = _pinv(A, rtol)
    Pt, A_dot_t = jnp.swapaxes(P, -1, -2), jnp.swapaxes(A_dot, -1, -2)
    eye_m, eye_n = jnp.eye(A.shape[-2], dtype=A.dtype), jnp.eye(A.shape[-1], dtype=A.dtype)
    # Golub–Pereyra at constant rank: Ṗ = −P Ȧ P + P Pᵀ Ȧᵀ (1 − A P) + (1 − P A) Ȧᵀ Pᵀ P
    P_dot = -P @ A_dot @ P + P @ Pt @ A_dot_t @ (eye_m - A @ P) + (eye_n - P @ A) @ A_dot_t @ Pt @ P
    return P, P_dot


def pinv(A, rtol):
    """(..., n, m) Moore–Penrose pseudo-inverse of A (..., m, n), singular values ≤ rtol · σ_max dropped
    (as `jnp.linalg.pinv(A, rtol)`), by one-sided Jacobi (module docstring). Differentiable at constant
    rank (a custom JVP, the Golub–Pereyra formula). rtol: a float scalar (traced or not). ValueError naming 'A' for a
    non-matrix or a non-floating dtype, naming 'rtol' for a negative or non-float value."""
    _check_matrix("A", A)
    if jnp.ndim(rtol) != 0 or not jnp.issubdtype(jnp.result_type(rtol), jnp.floating):
        raise ValueError(f"argument 'rtol' is {rtol!r}: expected a float scalar")
    if not isinstance(rtol, jax.core.Tracer) and not float(rtol) >= 0:
        raise ValueError(f"argument 'rtol' is {rtol!r}: expected ≥ 0")
    return _pinv(A, jnp.asarray(rtol, A.dtype))
