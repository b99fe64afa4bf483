"""A linear map with a hand-written transpose, as JAX's reverse mode sees it (docs/performance.md,
"Gradients on this path" and "`vmap` of the entry points"), and `replaced`, with which the custom
derivatives built on it differentiate a subset of a call's leaves."""

import jax
import jax.numpy as jnp


def linear_map(apply, transpose, u: tuple, like):
    """L u for the tangents u (a tuple of float arrays), where apply(u) -> L u (a PyTree shaped like `like`)
    and transpose(c) -> Lᵀ c (a tuple shaped like u). Reverse mode runs `transpose` and never transposes
    `apply`; forward mode (and every higher derivative) differentiates `apply`.

    L u is the second block of the solution of the unit-triangular system N⁻¹ (u, w) = (u, 0),
    N (u, w) = (u, w + L u): a `lax.custom_linear_solve` whose solve applies N (`apply`) and whose
    transpose_solve applies Nᵀ (ū, w̄) = (ū + Lᵀ w̄, w̄) (`transpose`). JAX transposes a linear solve by its
    transpose_solve; N⁻¹ is a true matvec, so higher derivatives stay exact."""
    def matvec(z):                                  # N⁻¹ (u, w) = (u, w − L u)
        Lu = apply(z[0])
        tied = jnp.sum(jax.tree.leaves(Lu)[0]) * 0  # u + 0 · Σ L u: the block's derivative w.r.t. L is a zero
        return (tuple(x + tied.astype(x.dtype) for x in z[0]),  # linear in it, not a constant (reverse over forward)
                jax.tree.map(jnp.subtract, z[1], Lu))

    def solve(_, b):                                # N (u, w) = (u, w + L u)
        return b[0], jax.tree.map(jnp.add, b[1], apply(b[0]))

    def transpose_solve(_, c):                      # Nᵀ (ū, w̄) = (ū + Lᵀ w̄, w̄)
        return tuple(jax.tree.map(jnp.add, c[0], tuple(transpose(c[1])))), c[1]

    zero = jnp.sum(u[0]) * 0                        # b must be linear in the tangents: w = 0 · Σ u₀
    b = (tuple(u), jax.tree.map(lambda o: jnp.broadcast_to(zero.astype(o.dtype), jnp.shape(o)), like))
    x = jax.lax.custom_linear_solve(matvec, b, solve, transpose_solve)
    unused = jnp.sum(x[0][0]) * 0                   # x's first block used (times 0), so its cotangent is never
    return jax.tree.map(lambda w: w + unused.astype(w.dtype), x[1])    # a symbolic zero (forward over reverse)


def replaced(items, indices, values) -> list:
    """A copy of the list `items` with items[i] = value for i, value in zip(indices, values)."""
    new = list(items)
    for i, value in zip(indices, values, strict=True):
        new[i] = value
    return new
