"""Small dense linear solves (static size d, batched over leading axes) in elementwise ops, without
LAPACK custom calls: a general solve with partial pivoting and a tridiagonal solve (scans over the
rows). Singular values and pseudo-inverses: `jaxsoa.spatial.svd`.

With several XLA host devices, LAPACK's custom calls hang intermittently (a lone batched 6x6
`jnp.linalg.inv` under `shard_map` over two host devices in 5 of 20 runs; docs/performance.md,
"Batch-last core"), so the per-sample code that `run_sweep` / `sharded_map` shard over devices
uses these instead (SPD inverses: `jaxsoa.spatial.algebra.inverse_spd`). Both are loops (`solve`
over the columns, `tridiagonal_solve` over the rows), so their programs do not grow with the size.
"""

import jax
import jax.numpy as jnp


def _check_float(**arrays):
    """ValueError naming the first argument whose dtype is not floating."""
    for name, x in arrays.items():
        if not jnp.issubdtype(jnp.result_type(x), jnp.floating):
            raise ValueError(f"argument '{name}' has dtype {jnp.result_type(x)}: expected a floating dtype")


def _check_square(name, A):
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise ValueError(f"argument '{name}' has shape {tuple(A.shape)}: expected (..., d, d), a square matrix")
    _check_float(**{name: A})


def _gauss_jordan(A, B):
    """A⁻¹ B for A (..., d, d), B (..., d, k): Gauss-Jordan with partial pivoting, one column a step of
    a `lax.fori_loop` (the program does not grow with d). The row operations are taken from A alone, so
    the result is linear in B (JAX can transpose it in B)."""
    d = A.shape[-1]
    if d == 0:                                                          # nothing to eliminate (nor to trace)
        return B
    row_of = jnp.arange(d).reshape((1,) * (A.ndim - 2) + (d, 1))      # i, for a (..., d, ·) array

    def rows_at(X, i):                                                  # X[..., i:i+1, :]
        return jax.lax.dynamic_index_in_dim(X, i, X.ndim - 2)

    def column_at(X, k):                                                # X[..., :, k:k+1]
        return jax.lax.dynamic_index_in_dim(X, k, X.ndim - 1)

    def eliminate(k, AB):
        A, B = AB
        p = jnp.argmax(jnp.where(row_of >= k, jnp.abs(column_at(A, k)), -1.0), axis=-2, keepdims=True)
        swap = jnp.where(row_of == k, p, jnp.where(row_of == p, k, row_of))   # pivot: the largest |A_ik|, i ≥ k
        A = jnp.take_along_axis(A, jnp.broadcast_to(swap, A.shape), -2)         # rows k and p exchanged
        B = jnp.take_along_axis(B, jnp.broadcast_to(swap, B.shape), -2)
        row_A = rows_at(A, k)
        pivot = column_at(row_A, k)
        column = jnp.where(row_of != k, column_at(A, k), 0)                  # A_ik for i ≠ k
        row_A, row_B = row_A / pivot, rows_at(B, k) / pivot
        A = jnp.where(row_of == k, row_A, A - column * row_A)                # A_i −= A_ik A_k / A_kk;  A_k /= A_kk
        B = jnp.where(row_of == k, row_B, B - column * row_B)
        return A, B

    return jax.lax.fori_loop(0, d, eliminate, (A, B))[1]


@jax.custom_jvp
def _solve(A, B):
    return _gauss_jordan(A, B)


@_solve.defjvp
def _solve_jvp(primals, tangents):
    A, B = primals
    A_dot, B_dot = tangents
    X = _gauss_jordan(A, B)
    return X, _gauss_jordan(A, B_dot - A_dot @ X)          # Ẋ = A⁻¹ (Ḃ − Ȧ X)


def solve(A, b):
    """x = A⁻¹ b for a nonsingular A (..., d, d) and b (..., d) (as many leading axes as A) or
    (..., d, k), leading axes broadcast: Gauss-Jordan elimination with partial pivoting, in elementwise ops (no LAPACK).
    Differentiated implicitly (Ẋ = A⁻¹ (Ḃ − Ȧ X)), in forward and reverse mode. A singular A gives
    inf / NaN (traced values are not checked). ValueError naming 'A' or 'b' for a bad shape or a
    non-floating dtype."""
    _check_square("A", A)
    d = A.shape[-1]
    vector = b.ndim == A.ndim - 1
    if b.ndim < 1 or b.shape[-1 if vector else -2] != d:
        raise ValueError(f"argument 'b' has shape {tuple(b.shape)}: expected (..., {d}) or (..., {d}, k) "
                         f"for A of shape {tuple(A.shape)}")
    _check_float(b=b)
    B = b[..., None] if vector else b
    lead = jnp.broadcast_shapes(A.shape[:-2], B.shape[:-2])
    A, B = A.reshape((1,) * (len(lead) + 2 - A.ndim) + A.shape), B.reshape((1,) * (len(lead) + 2 - B.ndim) + B.shape)
    dtype = jnp.result_type(A, B)
    X = _solve(jnp.broadcast_to(A, (*lead, d, d)).astype(dtype),
               jnp.broadcast_to(B, (*lead, *B.shape[-2:])).astype(dtype))
    return X[..., 0] if vector else X


def tridiagonal_solve(lower, diag, upper, b):
    """x = T⁻¹ b for the tridiagonal T with sub-, main and super-diagonals lower, diag, upper (n,) each
    (lower[0] = upper[n−1] = 0, as `jax.lax.linalg.tridiagonal_solve`) and b (n, k): the Thomas algorithm
    (forward elimination c'_i = u_i / (d_i − l_i c'_{i−1}), then back substitution), a `lax.scan` each
    way, O(n), no LAPACK (`gtsv`). Without pivoting: for T symmetric positive definite or diagonally
    dominant (the tether's mass matrices), where every pivot d_i − l_i c'_{i−1} is positive.
    Differentiable by autodiff of the scans. ValueError naming the argument for a bad shape or a
    non-floating dtype."""
    n = diag.shape[0]
    for name, x in (("lower", lower), ("diag", diag), ("upper", upper)):
        if x.ndim != 1 or x.shape[0] != n:
            raise ValueError(f"argument '{name}' has shape {tuple(x.shape)}: expected ({n},)")
    if b.ndim != 2 or b.shape[0] != n:
        raise ValueError(f"argument 'b' has shape {tuple(b.shape)}: expected ({n}, k)")
    _check_float(lower=lower, diag=diag, upper=upper, b=b)

    def eliminate(previous, row):                  # c'_i = u_i / p_i,  b'_i = (b_i − l_i b'_{i−1}) / p_i
        c_prev, b_prev = previous
        l_i, d_i, u_i, b_i = row
        pivot = d_i - l_i * c_prev
        out = (u_i / pivot, (b_i - l_i * b_prev) / pivot)
        return out, out

    zero = (jnp.zeros((), diag.dtype), jnp.zeros(b.shape[1:], b.dtype))
    _, (c, b_prime) = jax.lax.scan(eliminate, zero, (lower, diag, upper, b))

    def substitute(x_next, row):                   # x_i = b'_i − c'_i x_{i+1}
        c_i, b_i = row
        x_i = b_i - c_i * x_next
        return x_i, x_i

    _, x = jax.lax.scan(substitute, zero[1], (c, b_prime), reverse=True)
    return x
