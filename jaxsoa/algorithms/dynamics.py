"""O(n) recursions over a traced topology: RNEA (inverse dynamics), ABA in the innovations form
of docs/derivations.md (forward dynamics, differentiated by its adjoint: `jaxsoa.algorithms.adjoint`)
and CRBA (joint-space mass matrix).

Shapes: q (nq,), v / a / tau (nv,), f_ext (n, 6) link-frame wrenches `[moment; force]` acting on
each link (Pinocchio's `fext` convention) or None. Gravity enters as the world's fictitious
acceleration α_world = [0; −g]. Every pass goes through `jaxsoa.multibody.traversal`.
"""

import jax.numpy as jnp

from jaxsoa.algorithms import batch_last, batch_last_crba, batch_last_rnea, batch_last_vmap
from jaxsoa.algorithms.adjoint import adjoint_forward_dynamics
from jaxsoa.algorithms.kinematics import (
    forward_kinematics,
    from_slots,
    joint_frames,
    link_spatial_inertia,
    motion_pass,
    motion_subspaces,
    to_slots,
    world_acceleration,
)
from jaxsoa.multibody.arguments import BatchedPath, entry_point
from jaxsoa.multibody.model import Model
from jaxsoa.multibody.traversal import inward, outward, path_matrix
from jaxsoa.multibody.vmap_rule import values_to_batch
from jaxsoa.spatial.algebra import (
    act_force,
    cross_force,
    cross_motion,
    force_transform,
    inv_act_motion,
    inverse_spd,
    mat_mul,
    mat_tvec,
    mat_vec,
    motion_transform,
    transform_inertia,
)


def _bias_forces(I, v_links, f_ext):
    """b_k − f_ext,k = V_k ×* (M_k V_k) − f_ext,k, all links at once: (n, 6); v_links None: at rest (b = 0)."""
    b = jnp.zeros(I.shape[:2], I.dtype) if v_links is None else cross_force(v_links, mat_vec(I, v_links))
    return b if f_ext is None else b - f_ext


@entry_point(q='q', v='v', a='v', f_ext='f_ext',
             batched=BatchedPath(batch_last.supports, batch_last_rnea.rnea, stacked=True, reverse=True,
                                 chunk=batch_last_rnea.chunk_samples, saves=batch_last_rnea.SAVED))
def rnea(model: Model, q, v, a, f_ext=None):
    """Inverse dynamics τ = M(q) a + C(q, v) v + g(q) − Σ Jᵀ f_ext, (nv,)."""
    frames, S = joint_frames(model, q), motion_subspaces(model)
    v_links, a_links = motion_pass(model.traversal, frames, S, to_slots(model, v), to_slots(model, a),
                                   world_acceleration(model))
    I = link_spatial_inertia(model)
    f_links = mat_vec(I, a_links) + _bias_forces(I, v_links, f_ext)

    def step(d, f_children):                   # f(k) = Σ_c φ(k,c) f(c) + M α + b − f_ext;  T = H f
        R, p, S_k, f_k = d
        f_total = f_k + f_children
        return mat_tvec(S_k, f_total), act_force(R, p, f_total)

    tau_slots = inward(model.traversal, step, (*frames, S, f_links), jnp.zeros(6, f_links.dtype))
    return from_slots(model, tau_slots) + model.armature * a                 # τ += armature ⊙ q̈


@entry_point(q='q', v='v')
def nonlinear_effects(model: Model, q, v):
    """C(q, v) v + g(q) (Pinocchio's `nonLinearEffects`), (nv,)."""
    return rnea(model, q, v, jnp.zeros_like(v))


@entry_point(q='q')
def generalized_gravity(model: Model, q):
    """g(q) (Pinocchio's `computeGeneralizedGravity`), (nv,)."""
    zero = jnp.zeros(model.nv, model.gravity.dtype)
    return rnea(model, q, zero, zero)


@entry_point(q='q', f_ext='f_ext')
def generalized_force(model: Model, q, f_ext):
    """Generalized force Σ_k J_kᵀ f_ext,k (nv,) of link wrenches f_ext (n, 6), from two RNEAs at
    rest: τ = RNEA(q, 0, 0) − RNEA(q, 0, 0, f_ext) (gravity cancels)."""
    zero = jnp.zeros(model.nv, q.dtype)
    return rnea(model, q, zero, zero) - rnea(model, q, zero, zero, f_ext)


def _aba_recursion(model: Model, q, v, tau, f_ext=None):
    """Forward dynamics θ̈ = M⁻¹ (τ − C v − g + Σ Jᵀ f_ext) by the articulated-body algorithm,
    written with the innovations factors 𝒫, D, G, ε, ν of docs/derivations.md. Returns (nv,).
    v None: at rest (v = 0), without the velocity pass (the adjoint's solve M⁻¹ b on a gravity-free model)."""
    frames, S = joint_frames(model, q), motion_subspaces(model)
    I = link_spatial_inertia(model)
    if v is None:                                            # V = 0: no Coriolis acceleration, no gyroscopic force
        coriolis = jnp.zeros((model.n_links, 6), I.dtype)
        bias = _bias_forces(I, None, f_ext)
    else:
        qd_slots = to_slots(model, v)
        v_links, _ = motion_pass(model.traversal, frames, S, qd_slots, jnp.zeros_like(qd_slots), jnp.zeros(6, v.dtype))
        coriolis = cross_motion(v_links, mat_vec(S, qd_slots))   # a(k) = V × H^T θ̇
        bias = _bias_forces(I, v_links, f_ext)                                      # b(k) − f_ext(k)
    pad = jnp.asarray(~model.dof_mask, I.dtype)

    def inward_step(d, acc):
        R, p, S_k, I_k, a_k, b_k, tau_k, pad_k, armature_k = d
        P_children, z_children = acc
        P = I_k + P_children                         # 𝒫(k) = M(k) + Σ_c φ 𝒫⁺(c) φᵀ
        z = mat_vec(P, a_k) + b_k + z_children              # z(k) = Σ_c φ z⁺(c) + 𝒫 a + b − f_ext
        U = mat_mul(P, S_k)
        D_inv = inverse_spd(mat_mul(S_k.T, U) + jnp.diag(pad_k + armature_k))   # D = H 𝒫 Hᵀ + armature
        G = mat_mul(U, D_inv)                               # G = 𝒫 Hᵀ D⁻¹
        eps = tau_k - mat_tvec(S_k, z)                     # ε = T − H z
        nu = mat_vec(D_inv, eps)                            # ν = D⁻¹ ε
        P_plus = P - mat_mul(G, U.T)                        # 𝒫⁺ = (I − G H) 𝒫
        z_plus = z + mat_vec(G, eps)                        # z⁺ = z + G ε
        X_force = force_transform(R, p)
        return (G, nu), (mat_mul(mat_mul(X_force, P_plus), X_force.T), mat_vec(X_force, z_plus))

    data = (*frames, S, I, coriolis, bias, to_slots(model, tau), pad, to_slots(model, model.armature))
    zero_acc = (jnp.zeros((6, 6), I.dtype), jnp.zeros(6, I.dtype))
    G, nu = inward(model.traversal, inward_step, data, zero_acc)
    qdd_slots = _outward_accelerations(model, frames, S, coriolis, G, nu)
    return from_slots(model, qdd_slots)


def _aba_batch(model: Model, q, v, tau, f_ext=None):
    """The leading-batch `aba`, v None at rest."""
    return aba(model, q, jnp.zeros_like(tau) if v is None else v, tau, f_ext)


_aba_solve = values_to_batch(lambda *args: _aba_recursion(*args), _aba_batch, ("model", *["state"] * 4))
"""`_aba_recursion` (model, q, v, tau, f_ext) -> (nv,): the primal solve of `aba`'s adjoint, whose `jax.vmap`
runs the batch on the batch-last core (the leading-batch `aba`; model shared, or stacked when the `vmap`
batches any of its fields) and whose own JVP (used only inside higher derivatives: the adjoint's rule
differentiated again) is the recursion's. So a `vmap` of `aba`'s gradient runs its two solves on the core."""


_aba_adjoint = adjoint_forward_dynamics(_aba_solve, rnea)
_aba_adjoint_per_sample = adjoint_forward_dynamics(_aba_recursion, rnea)


def _aba_at(qdd, model: Model, q, v, tau, f_ext=None):
    """q̈ (nv,), `aba`'s value at these arguments, given, with `aba`'s derivatives (`BatchedPath.given`): its
    reverse mode is the adjoint's solve and RNEA VJP without a second forward ABA."""
    adjoint = _aba_adjoint if batch_last.supports(model) else _aba_adjoint_per_sample
    return adjoint(model, q, v, tau, f_ext, qdd)


@entry_point(q='q', v='v', tau='v', f_ext='f_ext',
             batched=BatchedPath(batch_last.supports, batch_last.aba, stacked=True, reverse=True,
                                 saves=batch_last.SAVED, residuals=(batch_last_vmap.aba_forward,
                                                                    batch_last_vmap.aba_given,
                                                                    batch_last_vmap.aba_placeholder),
                                 valid=batch_last.free_joints_valid, given=_aba_at))
def aba(model: Model, q, v, tau, f_ext=None):
    """Forward dynamics θ̈ = M⁻¹ (τ − C v − g + Σ Jᵀ f_ext) by the articulated-body algorithm
    (innovations form of docs/derivations.md), (nv,). Differentiated by its adjoint
    (`jaxsoa.algorithms.adjoint`): reverse mode costs one more ABA-type solve and one RNEA VJP,
    forward mode one RNEA JVP and one solve. `aba_autodiff` is the same recursion under plain autodiff.
    Under `jax.vmap` the call runs on the batch-last core (`jaxsoa.multibody.vmap_rule`) where it takes the
    model (`batch_last.supports`, decided here, while a closed-over topology is still concrete), as a
    leading-batch call does; under a `vmap` of its derivatives the adjoint's two solves do (`_aba_solve`)
    and the RNEA of its residual stays per sample."""
    if batch_last.supports(model):
        return _aba_adjoint(model, q, v, tau, f_ext)
    return _aba_adjoint_per_sample(model, q, v, tau, f_ext)


@entry_point(q='q', v='v', tau='v', f_ext='f_ext')
def aba_autodiff(model: Model, q, v, tau, f_ext=None):
    """`aba` differentiated through its recursions by plain autodiff (the reference path of the
    adjoint's tests; its `inertia_com` gradient carries an unphysical antisymmetric part). (nv,)."""
    return _aba_recursion(model, q, v, tau, f_ext)


def _outward_accelerations(model, frames, S, coriolis, G, nu):
    """α⁺(k) = φᵀ α(p(k));  θ̈ = ν − Gᵀ α⁺;  α(k) = α⁺ + Hᵀ θ̈ + a(k).  Returns θ̈ slots (n, d)."""
    def step(d, a_parent):
        R, p, S_k, a_k, G_k, nu_k = d
        a_plus = inv_act_motion(R, p, a_parent)
        qdd = nu_k - mat_tvec(G_k, a_plus)
        return a_plus + mat_vec(S_k, qdd) + a_k, qdd

    _, qdd_slots = outward(model.traversal, step, (*frames, S, coriolis, G, nu), world_acceleration(model))
    return qdd_slots


@entry_point(q='q', batched=BatchedPath(batch_last_crba.supports, batch_last_crba.composite_inertia_matrices))
def composite_inertias(model: Model, q):
    """(n, 6, 6) composite inertia of each link's subtree in the link frame:
    Ic(k) = M(k) + Σ_c φ(k,c) Ic(c) φᵀ(k,c)."""

    def step(d, Ic_children):
        R, p, I_k = d
        Ic = I_k + Ic_children
        X_force = force_transform(R, p)
        return Ic, mat_mul(mat_mul(X_force, Ic), X_force.T)

    I = link_spatial_inertia(model)
    return inward(model.traversal, step, (*joint_frames(model, q), I), jnp.zeros((6, 6), I.dtype))


@entry_point(q='q', batched=BatchedPath(batch_last_crba.supports, batch_last_crba.crba))
def crba(model: Model, q):
    """Joint-space mass matrix M(q) (nv, nv) from composite inertias (`composite_inertias`):
    M[i, j] = S_iᵀ Ic_j S_j in world axes for every link i on the path from j to the root
    (masked by the path matrix), symmetrised."""
    S = motion_subspaces(model)
    Ic = composite_inertias(model, q)
    R_world, p_world = forward_kinematics(model, q)
    S_world = mat_mul(motion_transform(R_world, p_world), S)                      # (n, 6, d)
    F_world = mat_mul(transform_inertia(R_world, p_world, Ic), S_world)
    P = path_matrix(model.traversal)
    B = jnp.einsum("iad,jae->idje", S_world, F_world) * P.astype(S_world.dtype)[:, None, :, None]
    eye = jnp.eye(model.n_links, dtype=B.dtype)[:, None, :, None]
    M_slots = B + jnp.transpose(B, (2, 3, 0, 1)) - B * eye                 # (n, d, n, d)
    n_slots = model.n_links * model.dof_max
    M_flat = M_slots.reshape(n_slots, n_slots)
    return M_flat[model.dof_index][:, model.dof_index] + jnp.diag(model.armature)     # + rotor inertia
