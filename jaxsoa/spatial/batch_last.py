"""Spatial algebra on the batch-last layout: every quantity is a Python list of arrays whose
trailing axis is the batch (shape (B,), or (1,) for data shared by the batch), so each operation
below is an elementwise op over the batch, which XLA's CPU backend vectorises (the minor axis of
a (B, 6, 6) layout is a 6-wide spatial axis it cannot; docs/performance.md, "Batch-last core").

Storage: 3-vectors are 3-lists, rotations 9-lists (row-major), spatial vectors 6-lists
[angular; linear], and a spatial inertia about a frame origin [[A, Bm], [Bmᵀ, C]] a 21-list
(A and C symmetric in the 6 entries xx yy zz xy xz yz, Bm row-major). A rigid body's inertia (C = m 1,
Bm = ĥ), whose sums and transforms stay rigid (composite inertias), may be a 10-list
[m; h = m c; I_o] instead: mass, first moment and the rotational inertia about the frame origin
(6 symmetric entries). Conventions are those of
`jaxsoa.spatial.algebra`: (R, p) = X_a_b is the pose of frame b in frame a.
"""

import jax.numpy as jnp

SYM_IJ = ((0, 0), (1, 1), (2, 2), (0, 1), (0, 2), (1, 2))
"""(i, j) of each of the 6 entries of a symmetric 3x3 block."""
_SYM = ((0, 3, 4), (3, 1, 5), (4, 5, 2))


def add(a, b):
    return [x + y for x, y in zip(a, b, strict=True)]


def sub(a, b):
    return [x - y for x, y in zip(a, b, strict=True)]


def scale(s, a):
    return [s * x for x in a]


def dot(a, b):
    """Σ_i a_i b_i."""
    out = a[0] * b[0]
    for x, y in zip(a[1:], b[1:], strict=True):
        out = out + x * y
    return out


def cross(a, b):
    """a × b of 3-lists."""
    return [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]


def mat_vec(R, x):
    """R x for a 9-list R."""
    return [R[3 * i] * x[0] + R[3 * i + 1] * x[1] + R[3 * i + 2] * x[2] for i in range(3)]


def mat_tvec(R, x):
    """Rᵀ x for a 9-list R."""
    return [R[i] * x[0] + R[3 + i] * x[1] + R[6 + i] * x[2] for i in range(3)]


def mat_mul(a, b):
    """a b of 9-lists."""
    return [a[3 * i] * b[j] + a[3 * i + 1] * b[3 + j] + a[3 * i + 2] * b[6 + j] for i in range(3) for j in range(3)]


def rodrigues(axis, s, c):
    """exp(â θ) as a 9-list for a unit axis (3-list), from s = sin θ and c = cos θ:
    R = c 1 + s â + (1 − c) a aᵀ."""
    x, y, z = axis
    t = 1 - c
    return [c + t * x * x, t * x * y - s * z, t * x * z + s * y,
            t * x * y + s * z, c + t * y * y, t * y * z - s * x,
            t * x * z - s * y, t * y * z + s * x, c + t * z * z]


def inv_act_motion(R, p, m):
    """X_a_b⁻¹ m: ω_b = Rᵀ ω_a, v_b = Rᵀ (v_a − p × ω_a)."""
    return mat_tvec(R, m[:3]) + mat_tvec(R, sub(m[3:], cross(p, m[:3])))


def act_motion(R, p, m):
    """X_a_b m: ω_a = R ω_b, v_a = R v_b + p × ω_a (the inverse of `inv_act_motion`)."""
    w_a = mat_vec(R, m[:3])
    return w_a + add(mat_vec(R, m[3:]), cross(p, w_a))


def act_force(R, p, f):
    """X*_a_b f: f_a = R f_b, n_a = R n_b + p × f_a."""
    f_a = mat_vec(R, f[3:])
    return add(mat_vec(R, f[:3]), cross(p, f_a)) + f_a


def cross_motion(a, b):
    """a ×m b = [ω_a × ω_b; v_a × ω_b + ω_a × v_b]."""
    return cross(a[:3], b[:3]) + add(cross(a[3:], b[:3]), cross(a[:3], b[3:]))


def cross_force(a, f):
    """a ×* f = [ω × n + v × f; ω × f]."""
    return add(cross(a[:3], f[:3]), cross(a[3:], f[3:])) + cross(a[:3], f[3:])


def _full(sym6):
    return [[sym6[_SYM[i][j]] for j in range(3)] for i in range(3)]


def _rows(m9):
    return [m9[3 * i: 3 * i + 3] for i in range(3)]


def inertia_vec(I, x):
    """[[A, Bm], [Bmᵀ, C]] x for a 21-list I and a 6-list x."""
    A, Bm, C = _full(I[0:6]), _rows(I[6:15]), _full(I[15:21])
    w, v = x[:3], x[3:]
    top = [dot(A[i], w) + dot(Bm[i], v) for i in range(3)]
    bottom = [Bm[0][i] * w[0] + Bm[1][i] * w[1] + Bm[2][i] * w[2] + dot(C[i], v) for i in range(3)]
    return top + bottom


def spatial_inertia(mass, com, inertia_com):
    """21-list of [[J + m ĉĉᵀ, m ĉ], [m ĉᵀ, m 1]] from m, c (3-list), J (9-list), as
    `jaxsoa.spatial.algebra.spatial_inertia`."""
    c2 = dot(com, com)
    I_o = [inertia_com[3 * i + j] + mass * ((c2 if i == j else 0.0) - com[i] * com[j]) for i, j in SYM_IJ]
    return rigid_to_inertia([mass, *scale(mass, com), *I_o])           # h = m c


def rigid_inertia(I):
    """The 10-list [m; h; I_o] of a rigid body's 21-list inertia [[I_o, ĥ], [ĥᵀ, m 1]]."""
    return [I[15], I[13], I[8], I[9], *I[0:6]]                      # ĥ = [0, −h_z, h_y; h_z, 0, −h_x; …]


def rigid_to_inertia(rigid):
    """The 21-list [[I_o, ĥ], [ĥᵀ, m 1]] of a 10-list [m; h; I_o] (`rigid_inertia`'s inverse)."""
    m, (x, y, z) = rigid[0], rigid[1:4]
    zero = jnp.zeros_like(m)
    return [*rigid[4:10], zero, -z, y, z, zero, -x, -y, x, zero, m, m, m, zero, zero, zero]


def rigid_inertia_vec(rigid, x):
    """I x for a 10-list rigid inertia [m; h; I_o] and a 6-list x = [ω; v]: [I_o ω + h × v; m v − h × ω]."""
    m, h, w, v = rigid[0], rigid[1:4], x[:3], x[3:]
    I_full = _full(rigid[4:10])
    return add([dot(I_full[i], w) for i in range(3)], cross(h, v)) + sub(scale(m, v), cross(h, w))


def transform_rigid_inertia(R, p, rigid):
    """X*_a_b I X_a_b⁻¹ for a 10-list rigid inertia [m; h; I_o] in frame b, as a 10-list in frame a:
    h_a = r + m p with r = R h;  I_a = R I_o Rᵀ + 2 (p·u) 1 − p uᵀ − u pᵀ with u = r + m p / 2
    (−Σ m_i [R r_i + p]ₓ² expanded; [x]ₓ[y]ₓ = y xᵀ − (x·y) 1)."""
    m, h, I_full, R_rows = rigid[0], rigid[1:4], _full(rigid[4:10]), _rows(R)
    r = mat_vec(R, h)
    u = add(r, scale(0.5 * m, p))
    RI = [[dot(R_rows[i], I_full[j]) for j in range(3)] for i in range(3)]        # R I_o (I_o symmetric)
    pu = 2 * dot(p, u)
    I_a = [dot(RI[i], R_rows[j]) - p[i] * u[j] - u[i] * p[j] for i, j in SYM_IJ]
    I_a = [x + pu for x in I_a[:3]] + I_a[3:]                       # + 2 (p·u) on the diagonal (xx, yy, zz)
    return [m, *add(r, scale(m, p)), *I_a]


def inertia_sub_outer(I, U, W):
    """I − U Wᵀ for a 21-list I and 6-lists U, W whose outer product U Wᵀ is symmetric (U ∥ W)."""
    A = [I[k] - U[i] * W[j] for k, (i, j) in enumerate(SYM_IJ)]
    Bm = [I[6 + 3 * i + j] - U[i] * W[3 + j] for i in range(3) for j in range(3)]
    C = [I[15 + k] - U[3 + i] * W[3 + j] for k, (i, j) in enumerate(SYM_IJ)]
    return A + Bm + C


def rotate_inertia_left(R, I):
    """The 27-list [R A; R Bm; R C] (full 3x3 products, row-major): the first half of R I Rᵀ."""
    out = []
    for X in (_full(I[0:6]), _rows(I[6:15]), _full(I[15:21])):
        out += [R[3 * i] * X[0][j] + R[3 * i + 1] * X[1][j] + R[3 * i + 2] * X[2][j]
                for i in range(3) for j in range(3)]
    return out


def rotate_inertia_right(T, R):
    """The 21-list of (R A) Rᵀ, (R Bm) Rᵀ, (R C) Rᵀ from `rotate_inertia_left`'s 27-list T."""
    TA, TB, TC = ([T[9 * k + 3 * i: 9 * k + 3 * i + 3] for i in range(3)] for k in range(3))
    Rr = _rows(R)
    A = [dot(TA[i], Rr[j]) for i, j in SYM_IJ]
    Bm = [dot(TB[i], Rr[j]) for i in range(3) for j in range(3)]
    C = [dot(TC[i], Rr[j]) for i, j in SYM_IJ]
    return A + Bm + C


def translate_inertia(p, I):
    """T* I T⁻¹ for the translation p (X* = [[1, p̂], [0, 1]] on forces):
    [[A + M + Mᵀ − N p̂, Bm + N], [., C]] with M = p̂ Bmᵀ, N = p̂ C."""
    Bm, C = _rows(I[6:15]), _full(I[15:21])
    N = [list(row) for row in zip(*[cross(p, [C[0][j], C[1][j], C[2][j]]) for j in range(3)], strict=True)]
    M = [list(row) for row in zip(*[cross(p, Bm[j]) for j in range(3)], strict=True)]
    N_p = [[-x for x in cross(p, N[i])] for i in range(3)]          # (N p̂)[i, :] = −p × N[i, :]
    A = [I[k] + M[i][j] + M[j][i] - N_p[i][j] for k, (i, j) in enumerate(SYM_IJ)]
    TR = [Bm[i][j] + N[i][j] for i in range(3) for j in range(3)]
    return A + TR + list(I[15:21])


def solve_spd(D, b):
    """D⁻¹ b for a symmetric positive definite D (nested k×k list) and a k-list b, by Cholesky
    D = L Lᵀ and two triangular solves, written out entry by entry."""
    k = len(b)
    L = [[None] * k for _ in range(k)]
    for j in range(k):
        diagonal = D[j][j] - sum((L[j][m] * L[j][m] for m in range(j)), 0.0)
        L[j][j] = jnp.sqrt(diagonal)
        for i in range(j + 1, k):
            L[i][j] = (D[i][j] - sum((L[i][m] * L[j][m] for m in range(j)), 0.0)) / L[j][j]
    y = []
    for i in range(k):                                              # L y = b
        y.append((b[i] - sum((L[i][m] * y[m] for m in range(i)), 0.0)) / L[i][i])
    x = [None] * k
    for i in reversed(range(k)):                                    # Lᵀ x = y
        x[i] = (y[i] - sum((L[m][i] * x[m] for m in range(i + 1, k)), 0.0)) / L[i][i]
    return x


def inertia_blocks(I):
    """The blocks (A, Bm, C) of a 21-list inertia as nested 3x3 lists."""
    return _full(I[0:6]), _rows(I[6:15]), _full(I[15:21])
