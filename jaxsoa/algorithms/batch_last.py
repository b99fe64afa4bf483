"""RNEA and ABA on the batch-last layout (`jaxsoa.multibody.batch_last`): the path a leading-batch
call `rnea(model, q[B, nq], …)` / `aba(model, q[B, nq], …)` takes when every joint has at most one
degree of freedom (fixed, revolute, prismatic); other models run the per-sample recursions under
`jax.vmap`. Same equations as `jaxsoa.algorithms.dynamics` (Featherstone's ABA, with armature
and link-frame external wrenches), written per link on lists of (B,) arrays.

Shapes: q (B, nq), v / a / tau (B, nv), f_ext (B, n, 6) or None; results (B, nv). The topology stays
traced (one compile for every tree with these joint types); the model's data are shared by the
batch.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsoa.algorithms.adjoint import adjoint_forward_dynamics
from jaxsoa.multibody import batch_last as bl
from jaxsoa.multibody.joints import JointType
from jaxsoa.multibody.model import Model, link_inertia, link_placement
from jaxsoa.spatial import batch_last as sp

ONE_DOF = (JointType.FIXED, JointType.REVOLUTE, JointType.PRISMATIC)


def supports(model: Model) -> bool:
    """Whether the batch-last path handles `model`: every joint fixed, revolute or prismatic."""
    return all(JointType(t) in ONE_DOF for t in model.joint_types)


class LinkData(NamedTuple):
    """Per-link model data in depth order, batch axis of size 1 (shared): R_parent_joint (n, 9, 1),
    p_parent_joint (n, 3, 1), axis (n, 3, 1), S (n, 6, 1) motion subspace, inertia (n, 21, 1),
    d_offset (n, 1) added to D (armature; 1 for a fixed joint), revolute / prismatic (n, 1) 0/1."""
    R_parent_joint: jax.Array
    p_parent_joint: jax.Array
    axis: jax.Array
    S: jax.Array
    inertia: jax.Array
    d_offset: jax.Array
    revolute: jax.Array
    prismatic: jax.Array


def _link_slots(model: Model) -> np.ndarray:
    """(n,) index of each link's coordinate in q and v (nv for a fixed joint)."""
    return np.where([JointType(t).nv == 1 for t in model.joint_types], model.idx_v, model.nv).astype(np.int32)


def _dof_links(model: Model) -> np.ndarray:
    """(nv,) the link of each joint velocity."""
    return np.flatnonzero([JointType(t).nv == 1 for t in model.joint_types]).astype(np.int32)


def link_data(model: Model) -> LinkData:
    """The model's per-link data in the batch-last layout (`LinkData`)."""
    trav, dtype = model.traversal, model.dtype
    R, p = link_placement(model)
    mass, com, inertia_com = link_inertia(model)
    inertia = jnp.stack(sp.spatial_inertia(mass, list(com.T), list(inertia_com.reshape(-1, 9).T)), 1)
    revolute = jnp.asarray([t == JointType.REVOLUTE for t in model.joint_types], dtype)
    prismatic = jnp.asarray([t == JointType.PRISMATIC for t in model.joint_types], dtype)
    armature = jnp.concatenate([model.armature, jnp.zeros(1, dtype)])[_link_slots(model)]
    fixed = jnp.asarray([t == JointType.FIXED for t in model.joint_types], dtype)
    S = jnp.concatenate([model.joint_axis * revolute[:, None], model.joint_axis * prismatic[:, None]], 1)
    return LinkData(*(bl.per_link(trav, x) for x in (R.reshape(-1, 9), p, model.joint_axis, S, inertia)),
                    (armature + fixed)[trav.order][:, None], revolute[trav.order][:, None],
                    prismatic[trav.order][:, None])


def joint_frames(model: Model, d: LinkData, q_links):
    """X_parent_child of every link in depth order, from coordinates q_links (n, B):
    R (n, 9, B) = R_parent_joint exp(â q_rev), p (n, 3, B) = p_parent_joint + R_parent_joint a q_pri."""
    axis = bl.rows(jnp.moveaxis(d.axis, 1, 0))
    s, c = bl.stage(model.traversal.order[0] >= 0, lambda x: [jnp.sin(x), jnp.cos(x)], q_links * d.revolute)
    R_joint_child = sp.rodrigues(axis, s, c)                            # exp(â θ)
    R_parent_joint = bl.rows(jnp.moveaxis(d.R_parent_joint, 1, 0))
    p_joint_child = sp.scale(q_links * d.prismatic, axis)
    R = sp.mat_mul(R_parent_joint, R_joint_child)
    p = sp.add(bl.rows(jnp.moveaxis(d.p_parent_joint, 1, 0)), sp.mat_vec(R_parent_joint, p_joint_child))
    return jnp.stack(R, 1), jnp.stack(p, 1)


def _states(model: Model, *xs):
    slots = _link_slots(model)
    return [bl.to_depth_order(model.traversal, slots, x) for x in xs]


def _external(model: Model, f_ext, batch, dtype):
    """(B, n, 6) link wrenches -> (n, 6, B) in depth order (zeros when None)."""
    if f_ext is None:
        return jnp.zeros((model.n_links, 6, 1), dtype)
    return jnp.transpose(f_ext[:, model.traversal.order], (1, 2, 0))


def rnea(model: Model, q, v, a, f_ext=None):
    """Inverse dynamics τ = M(q) a + C(q, v) v + g(q) − Σ Jᵀ f_ext on batches: (B, nv)."""
    trav, d, batch = model.traversal, link_data(model), q.shape[0]
    q_links, v_links, a_links = _states(model, q, v, a)
    R, p = joint_frames(model, d, q_links)

    def motion_step(t, parent):         # v = X⁻¹ v_p + S q̇;  a = X⁻¹ a_p + S q̈ + v ×m S q̇
        def f(parent, t):
            R_t, p_t, S_t = (bl.rows(bl.read(x, t)) for x in (R, p, d.S))
            v_joint = sp.scale(bl.read(v_links, t), S_t)
            v_t = sp.add(sp.inv_act_motion(R_t, p_t, parent[:6]), v_joint)
            a_t = sp.add(sp.add(sp.inv_act_motion(R_t, p_t, parent[6:]), sp.scale(bl.read(a_links, t), S_t)),
                         sp.cross_motion(v_t, v_joint))
            return v_t + a_t
        va = bl.stage(t >= 0, f, parent, t)
        return va, jnp.stack(va)

    root = [0.0] * 9 + [-model.gravity[i] for i in range(3)]           # a_world = [0; −g]
    va = bl.outward(trav, motion_step, root, batch, q.dtype)                     # (n, 12, B)
    V, A = bl.rows(jnp.moveaxis(va[:, :6], 1, 0)), bl.rows(jnp.moveaxis(va[:, 6:], 1, 0))
    inertia = bl.rows(jnp.moveaxis(d.inertia, 1, 0))
    h = bl.stage(trav.order[0] >= 0, sp.inertia_vec, inertia, V)
    external = bl.rows(jnp.moveaxis(_external(model, f_ext, batch, q.dtype), 1, 0))
    f_links = sp.sub(sp.add(sp.inertia_vec(inertia, A), sp.cross_force(V, h)), external)   # f = I a + v ×* I v − f_ext
    F = jnp.stack(f_links, 1)                                           # (n, 6, B)

    def force_step(t, children):        # f_t += Σ_c X* f_c;  τ_t = Sᵀ f_t
        def g(children, t):
            f_t = sp.add(bl.rows(bl.read(F, t)), children)
            return [*f_t, sp.dot(bl.rows(bl.read(d.S, t)), f_t)]
        r = bl.stage(t >= 0, g, children, t)
        return sp.act_force(bl.rows(bl.read(R, t)), bl.rows(bl.read(p, t)), r[:6]), r[6]

    tau = bl.inward(trav, force_step, 6, batch, q.dtype)
    return bl.from_depth_order(trav, _dof_links(model), tau) + model.armature[None] * a    # τ += armature ⊙ q̈


def _aba_recursion(model: Model, q, v, tau, f_ext=None):
    """Forward dynamics q̈ = M⁻¹ (τ − C v − g + Σ Jᵀ f_ext) by the articulated-body algorithm: (B, nv)."""
    trav, d, batch = model.traversal, link_data(model), q.shape[0]
    q_links, v_links, tau_links = _states(model, q, v, tau)
    R, p = joint_frames(model, d, q_links)
    external = _external(model, f_ext, batch, q.dtype)

    def velocity_step(t, parent):       # v = X⁻¹ v_p + S q̇;  c = v ×m S q̇;  b = v ×* I v − f_ext
        def f(parent, t):
            R_t, p_t, S_t = (bl.rows(bl.read(x, t)) for x in (R, p, d.S))
            return sp.add(sp.inv_act_motion(R_t, p_t, parent), sp.scale(bl.read(v_links, t), S_t))
        v_t = bl.stage(t >= 0, f, parent, t)

        def g(v_t, t):
            v_joint = sp.scale(bl.read(v_links, t), bl.rows(bl.read(d.S, t)))
            return sp.cross_motion(v_t, v_joint) + sp.inertia_vec(bl.rows(bl.read(d.inertia, t)), v_t)
        r = bl.stage(t >= 0, g, v_t, t)
        b_t = sp.sub(sp.cross_force(v_t, r[6:]), bl.rows(bl.read(external, t)))
        return v_t, jnp.stack(r[:6] + b_t)

    cb = bl.outward(trav, velocity_step, [0.0] * 6, batch, q.dtype)             # (n, 12, B): c, b

    def articulated_step(t, children):  # 𝒫 = I + Σ X* 𝒫⁺ X⁻¹;  U = 𝒫 S;  D = Sᵀ U;  𝒫⁺ = 𝒫 − U Uᵀ/D
        def s_u(children, t):
            S_t = bl.rows(bl.read(d.S, t))
            P = sp.add(bl.rows(bl.read(d.inertia, t)), children[:21])
            z = sp.add(bl.rows(bl.read(cb, t))[6:], children[21:])
            U = sp.inertia_vec(P, S_t)
            D_inv = 1.0 / (sp.dot(S_t, U) + bl.read(d.d_offset, t))
            return U + sp.scale(D_inv, U) + [(bl.read(tau_links, t) - sp.dot(S_t, z)) * D_inv]
        r = bl.stage(t >= 0, s_u, children, t)
        U, G, nu = r[:6], r[6:12], r[12]                                # G = U / D;  ν = (τ − Sᵀ z) / D

        def plus(children, t):          # 𝒫⁺ = 𝒫 − U Gᵀ;  z⁺ = z + 𝒫⁺ c + U ν
            P = sp.add(bl.rows(bl.read(d.inertia, t)), children[:21])
            z = sp.add(bl.rows(bl.read(cb, t))[6:], children[21:])
            P_plus = sp.inertia_sub_outer(P, U, G)
            return P_plus + sp.add(sp.add(z, sp.inertia_vec(P_plus, bl.rows(bl.read(cb, t))[:6])), sp.scale(nu, U))
        r = bl.stage(t >= 0, plus, children, t)

        def rotate_left(r, t):
            R_t = bl.rows(bl.read(R, t))
            return sp.rotate_inertia_left(R_t, r[:21]) + sp.mat_vec(R_t, r[24:]) + sp.mat_vec(R_t, r[21:24])
        r = bl.stage(t >= 0, rotate_left, r, t)
        P_rot = bl.stage(t >= 0, lambda T, t: sp.rotate_inertia_right(T, bl.rows(bl.read(R, t))), r[:27], t)
        p_t = bl.rows(bl.read(p, t))
        f_lin, n_rot = r[27:30], r[30:33]                               # X* z⁺ = [R n + p × R f; R f]
        up = sp.translate_inertia(p_t, P_rot) + sp.add(n_rot, sp.cross(p_t, f_lin)) + f_lin
        return up, jnp.stack([*G, nu])

    G_nu = bl.inward(trav, articulated_step, 27, batch, q.dtype)        # (n, 7, B)

    def acceleration_step(t, parent):   # a' = X⁻¹ a_p + c;  q̈ = ν − Gᵀ a';  a = a' + S q̈
        def fa(parent, t):
            return sp.add(sp.inv_act_motion(bl.rows(bl.read(R, t)), bl.rows(bl.read(p, t)), parent),
                          bl.rows(bl.read(cb, t))[:6])
        a_t = bl.stage(t >= 0, fa, parent, t)

        def f(a_t, t):
            out = bl.rows(bl.read(G_nu, t))
            qdd = out[6] - sp.dot(out[:6], a_t)
            return [*sp.add(a_t, sp.scale(qdd, bl.rows(bl.read(d.S, t)))), qdd]
        r = bl.stage(t >= 0, f, a_t, t)
        return r[:6], r[6]

    root = [0.0] * 3 + [-model.gravity[i] for i in range(3)]           # a_world = [0; −g]
    qdd = bl.outward(trav, acceleration_step, root, batch, q.dtype)              # (n, B)
    return bl.from_depth_order(trav, _dof_links(model), qdd)


_aba_adjoint = adjoint_forward_dynamics(_aba_recursion, rnea)


def aba(model: Model, q, v, tau, f_ext=None):
    """Batched forward dynamics (B, nv), differentiated by its adjoint (`jaxsoa.algorithms.adjoint`)
    on the batch-last RNEA and ABA."""
    return _aba_adjoint(model, q, v, tau, f_ext)
