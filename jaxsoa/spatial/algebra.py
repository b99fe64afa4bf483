"""Spatial (6-D) algebra, `[angular; linear]` order (Featherstone's; docs/conventions.md).

Motion vectors are `m = [ω; v]`, force vectors `f = [n; f]` (moment first). A rigid transform is
the pair `(R, p)` = the pose of a child frame in a parent frame (Pinocchio's `SE3`): `R` maps child
coordinates to parent coordinates and `p` is the child origin in parent coordinates. Variable
names carry the frames: `R_parent_child`, `p_parent_child`.

Every function acts on the trailing axes, so it broadcasts over links and batches.
"""

import jax.numpy as jnp


def mat_mul(a, b):
    """(..., i, k) @ (..., k, j). For 6x6 spatial matrices (i, k, j ≥ 6) it is written as a
    broadcast product and sum, which XLA fuses across a vmapped batch: a batched `dot` of 6x6
    matrices is 2-3x slower on CPU (measured on ABA and CRBA, docs/benchmarks.md). Smaller
    products (3x3 rotations, single-DoF columns) are faster as a `dot`."""
    if min(a.shape[-2], a.shape[-1], b.shape[-1]) < 6:
        return a @ b
    return jnp.sum(a[..., :, :, None] * b[..., None, :, :], axis=-2)


def mat_vec(a, x):
    """(..., i, k) @ (..., k) -> (..., i)."""
    return jnp.einsum("...ik,...k->...i", a, x)


def mat_tvec(a, x):
    """(..., k, i)ᵀ @ (..., k) -> (..., i)."""
    return jnp.einsum("...ki,...k->...i", a, x)


def transpose(a):
    """Swap the two trailing axes."""
    return jnp.swapaxes(a, -1, -2)


def trailing(name: str, x, shape: tuple):
    """x if its trailing axes are `shape` (ValueError naming `name` otherwise: these helpers index their
    components, so a shorter or longer vector would be clamped or truncated). Static: free under `jit`."""
    if tuple(jnp.shape(x)[jnp.ndim(x) - len(shape):]) != shape or jnp.ndim(x) < len(shape):
        raise ValueError(f"argument '{name}' has shape {jnp.shape(x)}, expected (..., {', '.join(map(str, shape))})")
    return x


def skew(w):
    """(..., 3) -> (..., 3, 3): the matrix ŵ with ŵ x = w × x."""
    trailing("w", w, (3,))
    z = jnp.zeros_like(w[..., 0])
    return jnp.stack([
        jnp.stack([z, -w[..., 2], w[..., 1]], -1),
        jnp.stack([w[..., 2], z, -w[..., 0]], -1),
        jnp.stack([-w[..., 1], w[..., 0], z], -1),
    ], -2)


def _block(a, b, c, d):
    """Assemble (..., 6, 6) from four (..., 3, 3) blocks [[a, b], [c, d]]."""
    return jnp.concatenate([jnp.concatenate([a, b], -1), jnp.concatenate([c, d], -1)], -2)


def motion_cross_matrix(m):
    """(..., 6) -> (..., 6, 6): m×  = [[ω̂, 0], [v̂, ω̂]] (acts on motion vectors)."""
    w_hat, v_hat = skew(m[..., :3]), skew(m[..., 3:])
    return _block(w_hat, jnp.zeros_like(w_hat), v_hat, w_hat)


def force_cross_matrix(m):
    """(..., 6) -> (..., 6, 6): m×* = −(m×)ᵀ = [[ω̂, v̂], [0, ω̂]] (acts on force vectors)."""
    w_hat, v_hat = skew(m[..., :3]), skew(m[..., 3:])
    return _block(w_hat, v_hat, jnp.zeros_like(w_hat), w_hat)


def cross_motion(m1, m2):
    """m1 ×m m2 = [ω1×ω2; v1×ω2 + ω1×v2], (..., 6) each."""
    w1, v1, w2, v2 = m1[..., :3], m1[..., 3:], m2[..., :3], m2[..., 3:]
    return jnp.concatenate([jnp.cross(w1, w2), jnp.cross(v1, w2) + jnp.cross(w1, v2)], -1)


def cross_force(m, f):
    """m ×* f = [ω×n + v×f; ω×f], (..., 6) each."""
    w, v, n, f_lin = m[..., :3], m[..., 3:], f[..., :3], f[..., 3:]
    return jnp.concatenate([jnp.cross(w, n) + jnp.cross(v, f_lin), jnp.cross(w, f_lin)], -1)


def se3_compose(R_a_b, p_a_b, R_b_c, p_b_c):
    """Pose of c in a from poses of b in a and c in b: (R_ab R_bc, p_ab + R_ab p_bc)."""
    return mat_mul(R_a_b, R_b_c), p_a_b + mat_vec(R_a_b, p_b_c)


def se3_inverse(R_a_b, p_a_b):
    """Pose of a in b: (Rᵀ, −Rᵀ p)."""
    return transpose(R_a_b), -mat_tvec(R_a_b, p_a_b)


def motion_transform(R_a_b, p_a_b):
    """(..., 6, 6) matrix mapping motion vectors from b to a coordinates: [[R, 0], [p̂R, R]]."""
    return _block(R_a_b, jnp.zeros_like(R_a_b), mat_mul(skew(p_a_b), R_a_b), R_a_b)


def force_transform(R_a_b, p_a_b):
    """(..., 6, 6) matrix mapping force vectors from b to a coordinates: [[R, p̂R], [0, R]]."""
    return _block(R_a_b, mat_mul(skew(p_a_b), R_a_b), jnp.zeros_like(R_a_b), R_a_b)


def act_motion(R_a_b, p_a_b, m_b):
    """m_a = X_a_b m_b: ω_a = R ω_b, v_a = R v_b + p × ω_a."""
    w_a = mat_vec(R_a_b, m_b[..., :3])
    v_a = mat_vec(R_a_b, m_b[..., 3:]) + jnp.cross(p_a_b, w_a)
    return jnp.concatenate([w_a, v_a], -1)


def inv_act_motion(R_a_b, p_a_b, m_a):
    """m_b = X_a_b⁻¹ m_a: ω_b = Rᵀ ω_a, v_b = Rᵀ (v_a − p × ω_a)."""
    w_a, v_a = m_a[..., :3], m_a[..., 3:]
    w_b = mat_tvec(R_a_b, w_a)
    v_b = mat_tvec(R_a_b, v_a - jnp.cross(p_a_b, w_a))
    return jnp.concatenate([w_b, v_b], -1)


def act_force(R_a_b, p_a_b, f_b):
    """f_a = X*_a_b f_b: f_a = R f_b, n_a = R n_b + p × f_a."""
    f_a = mat_vec(R_a_b, f_b[..., 3:])
    n_a = mat_vec(R_a_b, f_b[..., :3]) + jnp.cross(p_a_b, f_a)
    return jnp.concatenate([n_a, f_a], -1)


def inv_act_force(R_a_b, p_a_b, f_a):
    """f_b = X*_a_b⁻¹ f_a: n_b = Rᵀ (n_a − p × f_a), f_b = Rᵀ f_a."""
    n_a, f_lin_a = f_a[..., :3], f_a[..., 3:]
    n_b = mat_tvec(R_a_b, n_a - jnp.cross(p_a_b, f_lin_a))
    f_b = mat_tvec(R_a_b, f_lin_a)
    return jnp.concatenate([n_b, f_b], -1)


def spatial_inertia(mass, com, inertia_com):
    """(...,), (..., 3), (..., 3, 3) -> (..., 6, 6) about the frame origin:
    M = [[J + m ĉ ĉᵀ, m ĉ], [m ĉᵀ, m 1]] with J the rotational inertia about the centre of mass."""
    m = mass[..., None, None]
    c_hat = skew(com)
    c_hat_t = transpose(c_hat)
    eye = jnp.broadcast_to(jnp.eye(3, dtype=c_hat.dtype), c_hat.shape)
    return _block(inertia_com + m * mat_mul(c_hat, c_hat_t), m * c_hat, m * c_hat_t, m * eye)


def transform_inertia(R_a_b, p_a_b, inertia_b):
    """Spatial inertia from b to a coordinates: I_a = X*_a_b I_b X_a_b⁻¹."""
    X_force = force_transform(R_a_b, p_a_b)
    return mat_mul(mat_mul(X_force, inertia_b), transpose(X_force))


def inverse_spd(D):
    """(..., d, d) -> D⁻¹ of a symmetric positive definite D (d static): a division when d = 1, else
    Gauss-Jordan elimination without pivoting (stable for SPD: every pivot is positive), unrolled in
    elementwise ops. No LAPACK custom call: those hang intermittently with several XLA host devices
    (docs/performance.md, "Batch-last core"). D not SPD (a zero or negative pivot): inf / NaN or a wrong
    inverse, not an error (traced values are not checked); ValueError if D is not (..., d, d)."""
    if D.ndim < 2 or D.shape[-1] != D.shape[-2]:
        raise ValueError(f"argument 'D' has shape {tuple(D.shape)}: expected (..., d, d), a square matrix")
    d = D.shape[-1]
    if d == 1:
        return 1.0 / D
    A = jnp.concatenate([D, jnp.broadcast_to(jnp.eye(d, dtype=D.dtype), D.shape)], -1)   # [D | 1] -> [1 | D⁻¹]
    for k in range(d):
        row = A[..., k:k + 1, :] / A[..., k:k + 1, k:k + 1]            # pivot row: A_k / A_kk
        A = (A - A[..., :, k:k + 1] * row).at[..., k, :].set(row[..., 0, :])   # A_i -= A_ik row (i != k)
    return A[..., d:]
