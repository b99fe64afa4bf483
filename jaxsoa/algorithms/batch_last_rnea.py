"""Inverse dynamics (RNEA) on the batch-last layout (`jaxsoa.multibody.batch_last`), with its reverse
mode written by hand: the path a leading-batch call `rnea(model, q[B, nq], …)` takes, and the residual
of ABA's adjoint on that path (`jaxsoa.algorithms.batch_last`).

Forward (Featherstone's RNEA, link-frame external wrenches, armature):

    outward  v_t = X_t v_p + S q̇_t,   a_t = X_t a_p + S q̈_t + v_t ×m S q̇_t,   a_world = [0; −g]
    local    F_t = I_t a_t + v_t ×* I_t v_t − f_ext,t
    inward   f_t = F_t + Σ_c X_cᵀ f_c,  τ_t = Sᵀ f_t

(X_t = X_parent_t⁻¹ on motions; Xᵀ is the force transform to the parent.) Reverse, for the cotangent
f̄ of the link forces, the passes swap direction (the transpose of an inward sum is an outward copy):

    outward  φ_t = f̄_t + X_t φ_p                     (the cotangent of f_t, φ_world = 0)
    local    (Ī, v̄, ā, f̄_ext) = VJP of F at φ        (all links at once)
    inward   Ā_t = ā_t + Σ_c X_cᵀ Ā_c,   V̄_t = v̄_t + S q̇_t ×* Ā_t + Σ_c X_cᵀ V̄_c
    inputs   (S q̇)‾ = V̄ − v ×* Ā,  (S q̈)‾ = Ā,  ḡ = −(Σ_roots X_tᵀ Ā_t)_linear,
             ξ̄ = −[X v_p ×* V̄ + X a_p ×* Ā + X φ_p ×* f]  (the cotangent of a twist ξ of the joint in the
             child frame, closed form: d(X u)/dξ = −ξ ×m X u), θ̄ = Sᵀ ξ̄ for a 1-DoF joint's coordinate, the
             child-frame operands X v_p = v − S q̇, X a_p = a − S q̈ − v ×m S q̇, X φ_p = φ − f̄ at hand,
             (R, p)‾ = VJP of the three transforms at (V̄, Ā, φ_p), with the parent-frame operands
             recovered in the child frame (v_p = X_t⁻¹ (v_t − S q̇_t), …), so no parent gather; formed only
             where the model's placements are differentiated: the frames are computed with q held and
             `_turn`ed inside the rule by θ (1-DoF joints) and by `batch_last_frames.joint_twists` (free,
             spherical, planar, unbounded), whose derivatives JAX takes to q.

Frames, joint motions and model data around the passes are elementwise and differentiated by JAX
(`jaxsoa.algorithms.adjoint.custom_reverse` joins the two; forward mode is JAX's JVP). Two scans
forward and two back: the reverse costs about two RNEAs where JAX's transpose of the staged passes
cost about seven (docs/performance.md, "Gradients on this path").

Shapes: q (B, nq), v / a (B, nv), f_ext (B, n, 6) or None; per-link arrays (n, k, B) in depth order
(model data (n, k, 1) when shared by the batch); result (B, nv).
"""

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

from jaxsoa.algorithms import batch_last_frames as fr
from jaxsoa.algorithms import batch_last_slots as sl
from jaxsoa.algorithms.adjoint import custom_reverse
from jaxsoa.multibody import batch_last as bl
from jaxsoa.multibody import batched
from jaxsoa.multibody.model import Model
from jaxsoa.spatial import batch_last as sp

SAVED = "rnea_passes"
"""The name of the link motions and forces the passes leave for the hand-written reverse mode: what a chunk of
a leading-batch RNEA keeps for reverse mode (`BatchedPath.saves`)."""

LONG_MODEL_LINKS = 32
"""RNEA on models of more links runs in chunks of half `BATCH_CHUNK` samples: its per-link buffers then stay
in cache, 1.1–1.4× faster on revolute chains of 64–256 links (robots of 10–33 links: within 4 % either way;
ABA gains nothing and keeps whole chunks; docs/performance.md, "Chunks")."""


def chunk_samples(model: Model) -> int:
    """Samples per chunk of a leading-batch RNEA on `model` (`jaxsoa.multibody.batched.BatchedPath.chunk`)."""
    chunk = batched.BATCH_CHUNK
    return chunk if model.n_links <= LONG_MODEL_LINKS else max(1, chunk // 2)


def _motion_pass(trav, R, p, v_joint, a_joint, gravity):
    """(n, 12, B) [v; a] of every link in depth order."""
    def motion_step(t, live, parent):         # v = X v_p + S q̇;  a = X a_p + S q̈ + v ×m S q̇
        def f(parent, t):
            R_t, p_t, vJ, aJ = (bl.read_rows(x, t) for x in (R, p, v_joint, a_joint))
            v_t = sp.add(sp.inv_act_motion(R_t, p_t, parent[:6]), vJ)
            a_t = sp.add(sp.add(sp.inv_act_motion(R_t, p_t, parent[6:]), aJ), sp.cross_motion(v_t, vJ))
            return v_t + a_t
        va = bl.stage(live, f, parent, t)
        return va, jnp.stack(va)

    root = [0.0] * 9 + [-gravity[..., i] for i in range(3)]             # a_world = [0; −g]
    return bl.outward(trav, motion_step, root, R.shape[-1], R.dtype)


def _local_forces(inertia, V, A, external):
    """F = I a + v ×* I v − f_ext of all links at once (6-list of (n, B)); inertia a rigid 10-list."""
    return sp.sub(sp.add(sp.rigid_inertia_vec(inertia, A), sp.cross_force(V, sp.rigid_inertia_vec(inertia, V))),
                  external)


def _turned(R, p, S, delta, twist):
    """The frames (R, p) moved in the child frame by δ (n, B) along each joint's motion subspace S (n, 6, ·) and
    by the twist [w; u] (n, 6, B): R exp(δ ŝ_ω) E(w) and p + R (δ s_v + u), with exp(δ K) = 1 + sin δ K +
    (1 − cos δ) K² (K = ŝ_ω; exact for a unit s_ω and for s_ω = 0) and E(w) = 1 + ŵ + ŵ² / (1 + √(1 − |w|²)), the
    rotation whose `joint_twists` vee is w."""
    s_w, s_v = bl.components(S)[:3], bl.components(S)[3:]
    w, u = bl.components(twist)[:3], bl.components(twist)[3:]
    K, W = _hat(s_w), _hat(w)
    eye = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
    turn = sp.add(sp.add(eye, sp.scale(jnp.sin(delta), K)), sp.scale(1 - jnp.cos(delta), sp.mat_mul(K, K)))
    E = sp.add(sp.add(eye, W), sp.scale(1 / (1 + jnp.sqrt(1 - sp.dot(w, w))), sp.mat_mul(W, W)))
    R_c = bl.components(R)
    p_new = sp.add(bl.components(p), sp.mat_vec(R_c, sp.add(sp.scale(delta, s_v), u)))
    return jnp.stack(sp.mat_mul(sp.mat_mul(R_c, turn), E), 1), jnp.stack(p_new, 1)


def _hat(w):
    """ŵ (the cross-product matrix) of a 3-list, as a 9-list."""
    return [0.0, -w[2], w[1], w[2], 0.0, -w[0], -w[1], w[0], 0.0]


@jax.custom_jvp
def _turn(R, p, S, theta, twist):
    """(R, p) as they are, differentiated as `_turned` by θ − stop_gradient(θ) and the twist (zero): the frames
    carry the derivatives of the 1-DoF coordinates θ (n, B) and of the other joints' coordinates
    (`batch_last_frames.joint_twists`), to every order, and their value costs nothing."""
    return R, p


@_turn.defjvp
def _turn_jvp(primals, tangents):
    return jax.jvp(lambda R, p, S, theta, twist: _turned(R, p, S, theta - jax.lax.stop_gradient(theta), twist),
                   primals, tangents)


def _forces_at(trav, R, p, theta, S, twist, *rest):
    """The link forces (n, 6, B) at the frames (R, p) `_turn`ed by θ and the twists: the frames computed with
    the coordinates held constant (`_rnea`), θ and the twists then carry their derivatives, since
    d(X_J(δ) X)/dδ at δ = 0 is that of X along its coordinates, to every order. The function the reverse rule
    stands for."""
    return _forces_fwd(trav, *_turn(R, p, S, theta, twist), *rest)[0]


def _forces_fwd(trav, R, p, v_joint, a_joint, inertia, external, gravity):
    """(f (n, 6, B), residuals): every link's total force, and what the reverse pass reads."""
    va = _motion_pass(trav, R, p, v_joint, a_joint, gravity)
    f = _force_pass(trav, R, p, va, inertia, external)
    return f, (R, p, v_joint, a_joint, inertia, external, gravity, checkpoint_name(va, SAVED))


def _force_pass(trav, R, p, va, inertia, external):
    """The link forces (n, 6, B) from the link motions va = [v; a] (n, 12, B)."""
    V, A, I = bl.components(va[:, :6]), bl.components(va[:, 6:]), bl.components(inertia)
    h = bl.stage(bl.always(trav), sp.rigid_inertia_vec, I, V)
    F = jnp.stack(sp.sub(sp.add(sp.rigid_inertia_vec(I, A), sp.cross_force(V, h)), bl.components(external)), 1)

    def force_step(t, live, children):        # f_t = F_t + Σ_c X_cᵀ f_c
        f_t = bl.stage(live, lambda c, t: sp.add(bl.read_rows(F, t), c), children, t)
        return sp.act_force(bl.read_rows(R, t), bl.read_rows(p, t), f_t), jnp.stack(f_t)

    return bl.inward(trav, force_step, 6, R.shape[-1], R.dtype)[1]


def _rule_fwd(trav, R, p, theta, S, twist, *rest):
    """`_forces_at`'s value and the residuals of `_forces_bwd`."""
    f, res = _forces_fwd(trav, *_turn(R, p, S, theta, twist), *rest)
    return f, (R, p, theta, S, twist, *res[2:])


def _forces_bwd(trav, res, f_bar):
    """Cotangents of (R, p, θ, S, twist, v_joint, a_joint, inertia, external, gravity) for f̄ (n, 6, B). The link
    forces are summed again in the inward adjoint pass, not kept from the forward (docs/performance.md, "The
    link forces in the reverse pass")."""
    R, p, _, S, _, v_joint, a_joint, inertia, external, gravity, va = res
    batch, dtype = f_bar.shape[-1], f_bar.dtype

    def phi_step(t, live, parent):            # φ_t = f̄_t + X_t φ_p
        phi = bl.stage(live, lambda u, t: sp.add(sp.inv_act_motion(bl.read_rows(R, t), bl.read_rows(p, t), u),
                                                  bl.read_rows(f_bar, t)), parent, t)
        return phi, jnp.stack(phi)

    phi = bl.outward(trav, phi_step, [0.0] * 6, batch, dtype)                         # (n, 6, B)
    V, A, Phi = bl.components(va[:, :6]), bl.components(va[:, 6:]), bl.components(phi)
    F, local_vjp = jax.vjp(_local_forces, bl.components(inertia), V, A, bl.components(external))
    inertia_bar, v_bar, a_bar, external_bar = local_vjp(Phi)
    local = jnp.stack(a_bar + v_bar + F, 1)                                            # (n, 18, B)

    def motion_adjoint_step(t, live, children):   # Ā = ā + Σ Xᵀ Ā_c;  V̄ = v̄ + S q̇ ×* Ā + Σ Xᵀ V̄_c;  f = F + Σ Xᵀ f_c
        def g(children, t):
            own = bl.read_rows(local, t)
            A_bar = sp.add(own[:6], children[:6])
            V_bar = sp.add(sp.add(own[6:12], children[6:12]), sp.cross_force(bl.read_rows(v_joint, t), A_bar))
            return A_bar + V_bar + sp.add(own[12:], children[12:])
        r = bl.stage(live, g, children, t)
        R_t, p_t = bl.read_rows(R, t), bl.read_rows(p, t)
        return [x for k in range(3) for x in sp.act_force(R_t, p_t, r[6 * k:6 * k + 6])], jnp.stack(r)

    acc, AVf = bl.inward(trav, motion_adjoint_step, 18, batch, dtype)                # acc[n]: the world's
    AV, f = AVf[:, :12], AVf[:, 12:]                                                  # [Ā; V̄], forces (n, 6, B)

    def transformed(va, AV, v_joint, a_joint, phi, f_bar):
        """The operands of the three transforms, in the child frame: X_t v_p, X_t a_p, X_t φ_p."""
        V, A, vJ = bl.components(va[:, :6]), bl.components(va[:, 6:]), bl.components(v_joint)
        return (sp.sub(V, vJ), sp.sub(sp.sub(A, bl.components(a_joint)), sp.cross_motion(V, vJ)),
                sp.sub(bl.components(phi), bl.components(f_bar)))

    def joint_cotangents(va, AV, v_joint, a_joint, phi, f_bar, f, S):
        # ξ̄ = −[X v_p ×* V̄ + X a_p ×* Ā + X φ_p ×* f], θ̄ = Sᵀ ξ̄  (d(X u)/dξ = −ξ ×m X u, d(Xᵀ f)/dξ = Xᵀ (ξ ×* f))
        A_bar, V_bar = bl.components(AV[:, :6]), bl.components(AV[:, 6:])
        v_child, a_child, phi_child = transformed(va, AV, v_joint, a_joint, phi, f_bar)
        forces = bl.components(f)
        twist_bar = sp.scale(-1.0, sp.add(sp.add(sp.cross_force(v_child, V_bar), sp.cross_force(a_child, A_bar)),
                                          sp.cross_force(phi_child, forces)))
        return [sp.dot(bl.components(S), twist_bar), *twist_bar,
                *sp.sub(V_bar, sp.cross_force(bl.components(va[:, :6]), A_bar))]

    def transform_cotangents(R, p, va, AV, v_joint, a_joint, phi, f_bar, f):
        A_bar, V_bar, Rl, pl = bl.components(AV[:, :6]), bl.components(AV[:, 6:]), bl.components(R), bl.components(p)
        v_parent, a_parent, phi_parent = (sp.act_motion(Rl, pl, x)                        # X⁻¹ (X u)
                                          for x in transformed(va, AV, v_joint, a_joint, phi, f_bar))
        forces = bl.components(f)

        def transforms(R, p):
            return sp.inv_act_motion(R, p, v_parent), sp.inv_act_motion(R, p, a_parent), sp.act_force(R, p, forces)

        R_bar, p_bar = jax.vjp(transforms, Rl, pl)[1]((V_bar, A_bar, phi_parent))
        return [*R_bar, *p_bar]

    always = bl.always(trav)
    joint = bl.stage(always, joint_cotangents, va, AV, v_joint, a_joint, phi, f_bar, f, S)
    frames = bl.stage(always, transform_cotangents, R, p, va, AV, v_joint, a_joint, phi, f_bar, f)
    g_bar = -acc[-1, 3:6]                                                            # a_world = [0; −g]
    g_bar = jnp.sum(g_bar, -1) if gravity.ndim == 1 else g_bar.T
    cotangents = (jnp.stack(frames[:9], 1), jnp.stack(frames[9:], 1), joint[0], jnp.zeros_like(S),
                  jnp.stack(joint[1:7], 1), jnp.stack(joint[7:], 1), AV[:, :6], jnp.stack(inertia_bar, 1),
                  jnp.stack(external_bar, 1), g_bar)
    return tuple(_sum_to(x, y.shape) for x, y in zip(cotangents, res[:10], strict=True))


def _sum_to(x, shape):
    """x summed over the axes where `shape` has a broadcast 1 (data shared by the batch)."""
    axes = tuple(i for i, (a, b) in enumerate(zip(x.shape, shape, strict=True)) if b == 1 and a != 1)
    return jnp.sum(x, axes, keepdims=True) if axes else x


_link_forces = custom_reverse(_forces_at, _rule_fwd, _forces_bwd)


def _known_forces_fwd(context, *arrays):
    """`_forces_fwd` for link motions already known at these arrays: no motion pass."""
    trav, motion = context
    R, p, _, _, _, _, _, inertia, external, _ = arrays
    return _force_pass(trav, R, p, motion, inertia, external), (*arrays, motion)


_link_forces_known = custom_reverse(lambda context, *arrays: _forces_at(context[0], *arrays), _known_forces_fwd,
                                    lambda context, res, f_bar: _forces_bwd(context[0], res, f_bar))


def rnea(model: Model, q, v, a, f_ext=None):
    """Inverse dynamics τ = M(q) a + C(q, v) v + g(q) − Σ Jᵀ f_ext on batches: (B, nv); reverse mode
    by the hand-written passes."""
    return _rnea(_link_forces, model, q, v, a, f_ext)


def rnea_at(model: Model, q, v, a, f_ext, known):
    """`rnea` at a state whose link motions are already known, known.motion [v; a] (n, 12, B) in depth order
    (a forward ABA's, `batch_last.Factor`, at q̈ = a): the same value and derivatives; reverse mode runs only
    the reverse passes, on these (the value's force pass is left to whoever reads the value; forward mode
    recomputes the passes in its JVP)."""
    return _rnea(lambda trav, *arrays: _link_forces_known((trav, known.motion), *arrays),
                 model, q, v, a, f_ext)


def rnea_autodiff(model: Model, q, v, a, f_ext=None):
    """`rnea` differentiated by plain autodiff (JAX's transpose of the passes): the second code path
    the hand-written reverse mode is tested and benchmarked against."""
    return _rnea(lambda trav, R, p, theta, S, twist, *rest: _forces_fwd(trav, R, p, *rest)[0], model, q, v, a, f_ext,
                 held=False)


def _rnea(link_forces, model, q, v, a, f_ext, held=True):
    """τ (B, nv) with link_forces(trav, R, p, θ, S, twist, v_joint, a_joint, inertia, external, gravity); `held`:
    the frames computed with the coordinates held constant, their derivatives left to link_forces (θ, and
    `joint_twists` where a joint is not 1-DoF)."""
    fr.check_batch(model, q=("q", q), v=("v", v), a=("v", a), f_ext=("f_ext", f_ext))
    d = fr.link_data(model)
    q_links, v_links, a_links = sl.scalar_coordinates(model, q, v, a)
    if held:
        R, p = fr.joint_frames(model, d, jax.lax.stop_gradient(q), jax.lax.stop_gradient(q_links))
        twist = fr.joint_twists(model, q)
    else:
        R, p = fr.joint_frames(model, d, q, q_links)
        twist = jnp.zeros((model.n_links, 6, 1), q.dtype)
    v_joint, a_joint = fr.joint_motion(model, d, v, v_links), fr.joint_motion(model, d, a, a_links)
    external = fr.external_wrenches(model, f_ext, q.dtype)
    f = link_forces(model.traversal, R, p, q_links, d.S, twist, v_joint, a_joint, fr.rigid_link_inertias(d),
                    external, model.gravity)
    tau_links = sp.dot(bl.components(d.S), bl.components(f))                        # τ = Sᵀ f
    free = [bl.read_rows(f, pos) for pos in sl.free_positions(model)]               # τ_free = f
    triple = [[bl.read_rows(f, pos)[i] for i in triple.spatial]                     # τ_triple = Sᵀ f
              for (_, triple), pos in zip(sl.triple_links(model), sl.triple_positions(model), strict=True)]
    armature = jnp.broadcast_to(model.armature, a.shape)                      # (nv,) or a stack's (B, nv)
    return sl.joint_vector(model, tau_links, free, triple) + armature * a      # τ += armature ⊙ q̈
