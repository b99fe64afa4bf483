"""ABA on the batch-last layout (`jaxsoa.multibody.batch_last`): the path a leading-batch
call `aba(model, q[B, nq], …)` takes (RNEA: `jaxsoa.algorithms.batch_last_rnea`) for every joint type
(`batch_last_frames.supports`) with free joints on the world (roots, or children of a root welded to
the world); a concrete tree with a free joint elsewhere runs the per-sample recursions under
`jax.vmap`, and a traced one runs `lax.cond(free_joints_valid, this path, the per-sample recursions)`
(`jaxsoa.multibody.batched.guarded`, at `aba`'s entry point). Same equations as
`jaxsoa.algorithms.dynamics` (Featherstone's ABA with armature and link-frame external wrenches),
written per link on lists of (B,) arrays. A free joint must be on the world for ABA (its 6x6
articulated inertia is solved after the inward pass, from its parent's acceleration, which is then
known; elsewhere the result here is NaN, which the entry point's `lax.cond` never returns); RNEA takes
it anywhere. A three-column joint (spherical or planar, anywhere; `batch_last_slots.TRIPLES`) is eliminated
inside the link step as three 1-DoF columns, constant unit vectors in its own frame (`_triple_eliminations`),
which is its 3×3 articulated-body step; models without one compile the 1-DoF step only.

Shapes: q (B, nq), v / a / tau (B, nv), f_ext (B, n, 6) or None; results (B, nv). The topology stays
traced (one compile for every tree with these joint types); the model's data are shared by the
batch.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

from jaxsoa.algorithms import batch_last_frames as fr
from jaxsoa.algorithms import batch_last_slots as sl
from jaxsoa.algorithms.adjoint import adjoint_forward_dynamics
from jaxsoa.algorithms.batch_last_rnea import rnea, rnea_at
from jaxsoa.multibody import batch_last as bl
from jaxsoa.multibody.arguments import nan_unless
from jaxsoa.multibody.joints import JointType
from jaxsoa.multibody.model import Model
from jaxsoa.spatial import batch_last as sp

supports = fr.supports
free_joints_valid = fr.free_joints_valid
SAVED = "aba_factor"
"""The name of q̈ and the `Factor`: the only values of a leading-batch ABA that its adjoint's reverse mode
keeps (`BatchedPath.saves`); the model's per-link data, frames and indices are recomputed."""


class Factor(NamedTuple):
    """What the adjoint reuses from a forward ABA: for M(q)⁻¹ b (`solve_mass_matrix`) the frames R
    (n, 9, B) and p (n, 3, B), G = U / D and D⁻¹ of each column (n, 7 m, B) in depth order, and each free
    root's articulated inertia 𝒫 (21, B) (stacked: one residual for reverse mode, not 21); for the
    residual's RNEA (`batch_last_rnea.rnea_at`) the link motions [v; a] (n, 12, B) (its reverse pass sums
    the link forces again: docs/performance.md, "The link forces in the reverse pass")."""
    R: jax.Array
    p: jax.Array
    G_D_inv: jax.Array
    P_free: tuple
    motion: jax.Array


def _free_root_solve(model, P, z, a_prime, tau, k_index):
    """(a, S q̈) of free root k_index (6-lists): with its articulated inertia 𝒫, bias z and
    a' = X⁻¹ a_world + c, the joint-space D = Sᵀ 𝒫 S + armature, q̈ = D⁻¹ (τ − Sᵀ (z + 𝒫 a')) and
    a = a' + S q̈."""
    A, Bm, C = sp.inertia_blocks(P)
    P_full = [A[i] + Bm[i] for i in range(3)] + [[Bm[j][i] for j in range(3)] + C[i] for i in range(3)]
    swap = [3, 4, 5, 0, 1, 2]                                           # S = [[0, 1], [1, 0]]: Sᵀ x = x[swap]
    columns = model.v_columns(JointType.FREE)[k_index]
    arm = [model.armature[..., c] for c in columns]
    D = [[P_full[swap[i]][swap[j]] + (arm[i] if i == j else 0.0) for j in range(6)] for i in range(6)]
    rest = sp.add(z, sp.inertia_vec(P, a_prime))
    rhs = [tau[:, columns[i]] - rest[swap[i]] for i in range(6)]
    qdd = sp.solve_spd(D, rhs)
    joint = [qdd[swap[i]] for i in range(6)]
    return sp.add(a_prime, joint), joint


def _free_root_acceleration(model, d, R, p, cb, acc, tau, a_parent, pos, k_index):
    """(a, S q̈, 𝒫) of the free root at sequence position `pos`: 𝒫 and z are its own terms plus the
    inward pass's accumulator, a' = X⁻¹ a_parent + c (`_free_root_solve`; a_parent: the world's, or that
    of the root it hangs on, `batch_last_frames.free_parent_acceleration`)."""
    own = bl.read_rows(acc, pos)
    P = sp.add(bl.read_rows(d.inertia, pos), own[:21])
    c_b = bl.read_rows(cb, pos)
    a_prime = sp.add(sp.inv_act_motion(bl.read_rows(R, pos), bl.read_rows(p, pos), a_parent), c_b[:6])
    return (*_free_root_solve(model, P, sp.add(c_b[6:], own[21:]), a_prime, tau, k_index), P)


def _accelerations(model, d, R, p, G_nu, c, a_world, a_free):
    """The outward pass a' = X⁻¹ a_p + c;  q̈ = ν − Gᵀ a';  a = a' + S q̈ (a free root's a: `a_free`,
    already solved). With three-column joints a link first solves its columns S₃ then S₂ (q̈_k = ν_k −
    G_kᵀ a', a' += S_k q̈_k) before adding c: the reverse of `_triple_eliminations`. G_nu (n, 7 m, B):
    G and ν of each of the m columns (m = 3 with three-column joints, else 1); c (n, ≥6, B) or None
    (zero). Returns q̈ (n, B), or (n, 3, B) with three-column joints (columns S₁, S₂, S₃), and a (n, 6, B)."""
    triples = G_nu.shape[1] > 7

    def acceleration_step(t, live, parent):
        def fa(parent, t):
            a_t = sp.inv_act_motion(bl.read_rows(R, t), bl.read_rows(p, t), parent)
            return a_t if c is None or triples else sp.add(a_t, bl.read_rows(c, t)[:6])
        a_t = bl.stage(live, fa, parent, t)

        def f(a_t, t):
            out, extra = bl.read_rows(G_nu, t), []
            if triples:
                S_triple = bl.read_rows(d.S_triple, t)
                for k in (1, 0):                                        # S₃, then S₂
                    qdd_k = out[13 + 7 * k] - sp.dot(out[7 + 7 * k:13 + 7 * k], a_t)
                    a_t, extra = sp.add(a_t, sp.scale(qdd_k, S_triple[6 * k:6 * k + 6])), [qdd_k, *extra]
                a_t = a_t if c is None else sp.add(a_t, bl.read_rows(c, t)[:6])
            qdd = out[6] - sp.dot(out[:6], a_t)
            a_new = sp.add(a_t, sp.scale(qdd, bl.read_rows(d.S, t)))
            free = bl.read(d.free, t)
            return [*sp.add(sp.scale(1 - free, a_new), sp.scale(free, bl.read_rows(a_free, t))), qdd, *extra]
        r = bl.stage(live, f, a_t, t)
        return r[:6], ((jnp.stack(r[6:]) if triples else r[6]), jnp.stack(r[:6]))

    return bl.outward(model.traversal, acceleration_step, a_world, R.shape[-1], R.dtype)


def _triple_eliminations(d, P, z, t, b_triple, offsets):
    """A three-column link's columns S₂ and S₃ eliminated after S₁ (zero columns elsewhere, a no-op):
    U = 𝒫 S_k;  D = S_kᵀ U + offset;  ν = (b_k − S_kᵀ z) / D;  𝒫 ← 𝒫 − U Uᵀ / D;  z ← z + U ν.
    Three rank-1 eliminations in the one link frame are the 3×3 one (the link as a chain of three
    massless 1-DoF joints). Returns (𝒫, z, [G₂, ν₂, D₂⁻¹, G₃, ν₃, D₃⁻¹]) with G = U / D; b_triple: the
    two (B,) right-hand sides, offsets (2,) lists."""
    S_triple, out = bl.read_rows(d.S_triple, t), []
    for k in range(2):
        S_k = S_triple[6 * k:6 * k + 6]
        U = sp.inertia_vec(P, S_k)
        D_inv = 1.0 / (sp.dot(S_k, U) + offsets[k])
        G, nu = sp.scale(D_inv, U), (b_triple[k] - sp.dot(S_k, z)) * D_inv
        P, z = sp.inertia_sub_outer(P, U, G), sp.add(z, sp.scale(nu, U))
        out += [*G, nu, D_inv]
    return P, z, out


def _aba_factored(model: Model, q, v, tau, f_ext=None):
    """(q̈ (B, nv), `Factor`): forward dynamics q̈ = M⁻¹ (τ − C v − g + Σ Jᵀ f_ext) by the
    articulated-body algorithm, and what `solve_mass_matrix` reuses."""
    trav, d, batch = model.traversal, fr.link_data(model), q.shape[0]
    q_links, v_links, tau_links = sl.scalar_coordinates(model, q, v, tau)
    triples = sl.has_triples(model)
    tau_triple = sl.triple_coordinates(model, tau) if triples else None
    R, p = fr.joint_frames(model, d, q, q_links)
    v_joint = fr.joint_motion(model, d, v, v_links)
    external = fr.external_wrenches(model, f_ext, q.dtype)

    def velocity_step(t, live, parent):       # v = X⁻¹ v_p + S q̇;  c = v ×m S q̇;  b = v ×* I v − f_ext
        def f(parent, t):
            R_t, p_t, vJ = (bl.read_rows(x, t) for x in (R, p, v_joint))
            return sp.add(sp.inv_act_motion(R_t, p_t, parent), vJ)
        v_t = bl.stage(live, f, parent, t)

        def g(v_t, t):
            I_t = bl.read_rows(d.inertia, t)
            return sp.cross_motion(v_t, bl.read_rows(v_joint, t)) + sp.inertia_vec(I_t, v_t)
        r = bl.stage(live, g, v_t, t)
        b_t = sp.sub(sp.cross_force(v_t, r[6:]), bl.read_rows(external, t))
        return v_t, (jnp.stack(r[:6] + b_t), jnp.stack(v_t))

    cb, velocities = bl.outward(trav, velocity_step, [0.0] * 6, batch, q.dtype)   # (n, 12, B): c, b; (n, 6, B)

    def articulated_step(t, live, children):  # 𝒫 = I + Σ X* 𝒫⁺ X⁻¹;  U = 𝒫 S;  D = Sᵀ U;  𝒫⁺ = 𝒫 − U Uᵀ/D
        def s_u(children, t):
            S_t = bl.read_rows(d.S, t)
            P = sp.add(bl.read_rows(d.inertia, t), children[:21])
            z = sp.add(bl.read_rows(cb, t)[6:], children[21:])
            U = sp.inertia_vec(P, S_t)
            D_inv = 1.0 / (sp.dot(S_t, U) + bl.read(d.d_offset, t))
            return U + sp.scale(D_inv, U) + [(bl.read(tau_links, t) - sp.dot(S_t, z)) * D_inv, D_inv]
        r = bl.stage(live, s_u, children, t)
        U, G, nu, D_inv = r[:6], r[6:12], r[12], r[13]                  # G = U / D;  ν = (τ − Sᵀ z) / D

        def plus(children, t):          # 𝒫⁺ = 𝒫 − U Gᵀ;  z⁺ = z + 𝒫⁺ c + U ν
            P = sp.add(bl.read_rows(d.inertia, t), children[:21])
            z = sp.add(bl.read_rows(cb, t)[6:], children[21:])
            P_plus = sp.inertia_sub_outer(P, U, G)
            return P_plus + sp.add(sp.add(z, sp.inertia_vec(P_plus, bl.read_rows(cb, t)[:6])), sp.scale(nu, U))
        r = bl.stage(live, plus, children, t)
        if triples:
            def eliminate(r, t):
                P, z, out = _triple_eliminations(d, r[:21], r[21:], t, [bl.read(x, t) for x in tau_triple],
                                                 bl.read_rows(d.triple_offset, t))
                return P + z + out
            r = bl.stage(live, eliminate, r, t)
        r, triple_out = r[:27], r[27:]

        def rotate_left(r, t):
            R_t = bl.read_rows(R, t)
            return sp.rotate_inertia_left(R_t, r[:21]) + sp.mat_vec(R_t, r[24:]) + sp.mat_vec(R_t, r[21:24])
        r = bl.stage(live, rotate_left, r, t)
        P_rot = bl.stage(live, lambda T, t: sp.rotate_inertia_right(T, bl.read_rows(R, t)), r[:27], t)
        p_t = bl.read_rows(p, t)
        f_lin, n_rot = r[27:30], r[30:33]                               # X* z⁺ = [R n + p × R f; R f]
        up = sp.translate_inertia(p_t, P_rot) + sp.add(n_rot, sp.cross(p_t, f_lin)) + f_lin
        return up, jnp.stack([*G, nu, D_inv, *triple_out])

    acc, G_nu_D = bl.inward(trav, articulated_step, 27, batch, q.dtype)   # (n, 8 m, B): G, ν, D⁻¹
    G_nu_D = G_nu_D.reshape(G_nu_D.shape[0], -1, 8, batch)
    root = [0.0] * 3 + [-model.gravity[..., i] for i in range(3)]      # a_world = [0; −g]
    a_free, free_qdd, P_free = jnp.zeros((model.n_links, 6, batch), q.dtype), [], []
    for i, pos in enumerate(sl.free_positions(model)):
        a_parent = fr.free_parent_acceleration(model, R, p, root, sl.free_links(model)[i])
        a_root, joint, P = _free_root_acceleration(model, d, R, p, cb, acc, tau, a_parent, pos, i)
        a_free, free_qdd, P_free = bl.write(a_free, pos, jnp.stack(a_root)), [*free_qdd, joint], [*P_free, P]
    qdd, a = _accelerations(model, d, R, p, _flat(G_nu_D[:, :, :7]), cb, root, a_free)  # (n, B) or (n, 3, B)
    qdd = _joint_accelerations(model, qdd, free_qdd)
    G_D_inv = jnp.concatenate([G_nu_D[:, :, :6], G_nu_D[:, :, 7:]], 2)
    factor = Factor(R, p, _flat(G_D_inv), tuple(map(jnp.stack, P_free)), jnp.concatenate([velocities, a], 1))
    return jax.tree.map(lambda x: checkpoint_name(x, SAVED), (qdd, factor))


def _flat(x):
    """(n, m, k, B) per-column rows -> (n, m k, B)."""
    return x.reshape(x.shape[0], -1, x.shape[-1])


def _joint_accelerations(model, qdd, free_qdd):
    """(B, nv) from `_accelerations`' q̈ and the free roots' S q̈: a three-column joint's v entry j is its
    column S_k with `Triple.columns[k]` = j (spherical (ω_x, ω_y, ω_z) = (S₃, S₂, S₁), planar (v_x, v_y, ω_z) =
    (S₂, S₃, S₁))."""
    if qdd.ndim == 2:
        return sl.joint_vector(model, qdd, free_qdd)
    triple = [[bl.read(qdd, pos)[triple.columns.index(j)] for j in range(3)]
              for (_, triple), pos in zip(sl.triple_links(model), sl.triple_positions(model), strict=True)]
    return sl.joint_vector(model, qdd[:, 0], free_qdd, triple)


def _aba_recursion(model: Model, q, v, tau, f_ext=None):
    """Forward dynamics q̈ = M⁻¹ (τ − C v − g + Σ Jᵀ f_ext) by the articulated-body algorithm: (B, nv)."""
    return _aba_factored(model, q, v, tau, f_ext)[0]


def solve_mass_matrix(model: Model, factor: Factor, b):
    """M(q)⁻¹ b (B, nv) for b (B, nv), reusing a forward ABA's `Factor` at the same q: the bias pass
    and the acceleration pass of ABA at v = 0 without gravity, its articulated inertias taken as
    they are (about a third of an ABA)."""
    d, batch = fr.link_data(model), b.shape[0]
    b_links = bl.to_depth_order(model.traversal, sl.link_slots(model, "v"), b)
    triples = sl.has_triples(model)
    b_triple = sl.triple_coordinates(model, b) if triples else None
    R, p, G_D_inv = factor.R, factor.p, factor.G_D_inv

    def bias_step(t, live, children):         # r = b − Sᵀ z;  ν = D⁻¹ r;  z⁺ = z + U ν = z + G r;  up = X* z⁺
        def f(z, t):
            G_D = bl.read_rows(G_D_inv, t)
            r = bl.read(b_links, t) - sp.dot(bl.read_rows(d.S, t), z)
            z, out = sp.add(z, sp.scale(r, G_D[:6])), [r * G_D[6]]
            if triples:                        # then S₂ and S₃ (`_triple_eliminations`)
                S_triple = bl.read_rows(d.S_triple, t)
                for k in range(2):
                    r = bl.read(b_triple[k], t) - sp.dot(S_triple[6 * k:6 * k + 6], z)
                    z, out = sp.add(z, sp.scale(r, G_D[7 + 7 * k:13 + 7 * k])), [*out, r * G_D[13 + 7 * k]]
            return [*z, *out]
        out = bl.stage(live, f, children, t)
        return sp.act_force(bl.read_rows(R, t), bl.read_rows(p, t), out[:6]), jnp.stack(out[6:])

    z, nu = bl.inward(model.traversal, bias_step, 6, batch, b.dtype)                 # nu (n, m, B)
    zero = [jnp.zeros((batch,), b.dtype)] * 6
    a_free, free_qdd = jnp.zeros((model.n_links, 6, batch), b.dtype), []
    for i, pos in enumerate(sl.free_positions(model)):       # a' = 0 at a free root (no gravity, v = 0)
        a_root, joint = _free_root_solve(model, list(factor.P_free[i]), bl.read_rows(z, pos), zero, b, i)
        a_free, free_qdd = bl.write(a_free, pos, jnp.stack(a_root)), [*free_qdd, joint]
    G = G_D_inv.reshape(G_D_inv.shape[0], -1, 7, batch)[:, :, :6]
    qdd = _accelerations(model, d, R, p, _flat(jnp.concatenate([G, nu[:, :, None]], 2)), None, zero, a_free)[0]
    return _joint_accelerations(model, qdd, free_qdd)


_aba_adjoint = adjoint_forward_dynamics(_aba_recursion, rnea, factored=(_aba_factored, solve_mass_matrix, rnea_at))


def aba(model: Model, q, v, tau, f_ext=None):
    """Batched forward dynamics (B, nv), differentiated by its adjoint (`jaxsoa.algorithms.adjoint`)
    on the batch-last RNEA and ABA."""
    fr.check_batch(model, q=("q", q), v=("v", v), tau=("v", tau), f_ext=("f_ext", f_ext))
    roots = jnp.all(fr.free_on_world(model), -1)                     # () or a stack's (B,)
    # NaN-marked outside the adjoint: where the entry point's guard discards this result (`guarded`), reverse
    # mode still runs the adjoint with a zero cotangent, which must stay finite (0 · NaN is NaN)
    return nan_unless(roots.reshape(roots.shape + (1,) * roots.ndim), _aba_adjoint(model, q, v, tau, f_ext))
