"""Dynamics of closed loops cut into a tree (soa.md §7), with the constraints of `jaxsoa.constraints`:

    M q̈ + C = τ + G_cᵀ λ          G_c q̈ = −Ġ_c q̇ − 2α G_c q̇ − β² e      (Baumgarte; α = β = 0 off)

"recursive": λ first from the Delassus system (G M⁻¹ Gᵀ) λ = rhs − G q̈_free, with M⁻¹ Gᵀ from
one ABA per constraint row (gravity-free, zero velocity: aba(q, 0, g) = M⁻¹ g; vmapped, the
articulated inertias are shared), then q̈ = q̈_free + M⁻¹ Gᵀ λ (= ABA(τ + Gᵀ λ), by linearity).
"dense": CRBA mass matrix and the KKT system [[M, Gᵀ], [G, 0]] [q̈; −λ] = [τ − C; rhs].

Rank-deficient G_c (redundant cuts, planar loops closed with spatial cut rows, singular poses):
both methods use a pseudo-inverse (SVD, `jnp.linalg.pinv`, differentiable at constant rank) with
singular values below `rcond` · σ_max dropped: q̈ is the unique constrained acceleration and λ
the minimum-norm multipliers (any split of a redundant reaction is physically equivalent).
`rcond` is relative to the Delassus matrix (recursive) or the KKT matrix (dense); default
1000 · eps of the dtype. Never NaN: dropped directions give zero multipliers.
"""

import dataclasses

import jax
import jax.numpy as jnp

from jaxsoa.configuration import integrate
from jaxsoa.constraints import (
    LoopClosure,
    closure_terms,
    constraint_bias,
    constraint_error,
    constraint_jacobian,
)
from jaxsoa.integrators import rk4_step
from jaxsoa.model import Model
from jaxsoa.recursive import aba, crba, rnea


def _rtol(rcond, dtype):
    return 1000 * jnp.finfo(dtype).eps if rcond is None else rcond


def inverse_mass_columns(model: Model, q, B):
    """M⁻¹ Bᵀ (nv, m) for B (m, nv): one ABA per row of B on a gravity-free copy at zero velocity."""
    free = dataclasses.replace(model, gravity=jnp.zeros_like(model.gravity))
    zero = jnp.zeros(model.nv, B.dtype)
    return jax.vmap(lambda g: aba(free, q, zero, g), out_axes=1)(B)


def _acceleration_rhs(model, q, v, closure, baumgarte):
    """G (m, nv) and the constraint-acceleration target rhs = −Ġ v − 2α G v − β² e (m,)."""
    if baumgarte is None:
        return constraint_jacobian(model, q, closure), -constraint_bias(model, q, v, closure)
    e, G, bias = closure_terms(model, q, v, closure)
    alpha, beta = baumgarte
    return G, -bias - 2 * alpha * (G @ v) - beta**2 * e


def constrained_forward_dynamics(model: Model, q, v, tau, closure: LoopClosure, f_ext=None, *, baumgarte=None,
                                 method="recursive", rcond=None):
    """(q̈ (nv,), λ (6·n_cuts,)) of the closed-loop system (module docstring). `baumgarte` =
    (α, β) adds −2α G v − β² e to the constraint acceleration (None: none). f_ext (n, 6) link-frame
    wrenches or None."""
    G, rhs = _acceleration_rhs(model, q, v, closure, baumgarte)
    rtol = _rtol(rcond, G.dtype)
    if method == "recursive":
        qdd_free = aba(model, q, v, tau, f_ext)                          # q̈_free = M⁻¹ (τ − C)
        Minv_Gt = inverse_mass_columns(model, q, G)
        delassus = G @ Minv_Gt                                          # (G M⁻¹ Gᵀ) λ = rhs − G q̈_free
        lam = jnp.linalg.pinv(delassus, rtol, hermitian=True) @ (rhs - G @ qdd_free)
        return qdd_free + Minv_Gt @ lam, lam                            # q̈ = q̈_free + M⁻¹ Gᵀ λ
    if method == "dense":
        M = crba(model, q)
        C = rnea(model, q, v, jnp.zeros_like(v), f_ext)
        m = G.shape[0]
        kkt = jnp.block([[M, G.T], [G, jnp.zeros((m, m), G.dtype)]])      # [[M, Gᵀ], [G, 0]] [q̈; −λ] = [τ − C; rhs]
        sol = jnp.linalg.pinv(kkt, rtol, hermitian=True) @ jnp.concatenate([tau - C, rhs])
        return sol[: model.nv], -sol[model.nv:]
    raise ValueError(f"method must be 'recursive' or 'dense', got {method!r}")


def constrained_inverse_dynamics(model: Model, q, v, qdd, closure: LoopClosure, actuated, f_ext=None, *,
                                 rcond=None, with_rank=False):
    """Torques of the actuated joints and multipliers that produce q̈ with the passive joints
    unactuated: least squares / minimum norm of [S_aᵀ  G_cᵀ] [τ; λ] = M q̈ + C, S_a = diag(actuated).
    actuated (nv,) bool. Returns (τ (nv,), zero on passive dofs; λ (6·n_cuts,)) and, with
    `with_rank`, the rank of [S_aᵀ G_cᵀ] (nv for a uniquely solvable, consistent problem)."""
    G = constraint_jacobian(model, q, closure)
    mask = jnp.asarray(actuated).astype(G.dtype)
    A = jnp.concatenate([jnp.diag(mask), G.T], axis=1)                 # (nv, nv + m)
    rtol = _rtol(rcond, G.dtype)
    x = jnp.linalg.pinv(A, rtol) @ rnea(model, q, v, qdd, f_ext)       # M q̈ + C = S_aᵀ τ + Gᵀ λ
    out = (x[: model.nv] * mask, x[model.nv:])
    if not with_rank:
        return out
    sigma = jnp.linalg.svd(A, compute_uv=False)
    return (*out, jnp.sum(sigma > rtol * sigma[0]))


def project_velocity(model: Model, q, v, closure: LoopClosure, rcond=None):
    """Plastic impact onto the constraint: v⁺ = v − M⁻¹ Gᵀ (G M⁻¹ Gᵀ)⁺ G v, the M-orthogonal
    projection (the velocity after an inelastic impulse at the cut; G v⁺ = 0). (nv,)."""
    G = constraint_jacobian(model, q, closure)
    Minv_Gt = inverse_mass_columns(model, q, G)
    impulse = jnp.linalg.pinv(G @ Minv_Gt, _rtol(rcond, G.dtype), hermitian=True) @ (G @ v)
    return v - Minv_Gt @ impulse


def project_state(model: Model, q, v, closure: LoopClosure, iterations=3, rcond=None):
    """(q, v) moved onto the constraint manifold: `iterations` Gauss–Newton steps
    q ← q ⊕ (−G⁺ e) (minimum-norm correction), then `project_velocity`."""
    for _ in range(iterations):
        G = constraint_jacobian(model, q, closure)
        step = jnp.linalg.pinv(G, _rtol(rcond, G.dtype)) @ constraint_error(model, q, closure)
        q = integrate(model, q, -step)
    return q, project_velocity(model, q, v, closure, rcond)


def constrained_rollout(model: Model, q0, v0, control, dt, n_steps, closure: LoopClosure, active=None, *,
                        baumgarte=None, method="recursive", rcond=None, impact=True):
    """RK4 (`jaxsoa.rk4_step` with constrained dynamics) for `n_steps` steps in one `lax.scan`.

    control(t, q, v) -> τ (nv,), held over each step. active (n_steps, n_cuts) bool: which cuts
    hold during each step (default `closure.active` throughout), so grasping at t1 and releasing
    at t2 is data, not a recompile. With `impact`, a cut switching on at step k first applies the
    plastic impact `project_velocity` (its position error is then left to Baumgarte). Returns
    q (n_steps+1, nq), v (n_steps+1, nv), initial state included."""
    active = jnp.broadcast_to(closure.active, (n_steps, closure.active.shape[0])) if active is None else active

    def body(state, xs):
        q, v, was_active = state
        k, active_k = xs
        closure_k = closure._replace(active=active_k)
        if impact:
            v = project_velocity(model, q, v, closure._replace(active=active_k & ~was_active), rcond)

        def dynamics(m, q_i, v_i, tau_i):
            return constrained_forward_dynamics(m, q_i, v_i, tau_i, closure_k, baumgarte=baumgarte, method=method,
                                                rcond=rcond)[0]

        q_next, v_next = rk4_step(model, q, v, control(k * dt, q, v), dt, dynamics=dynamics)
        return (q_next, v_next, active_k), (q_next, v_next)

    steps = jnp.arange(n_steps, dtype=v0.dtype)
    _, (qs, vs) = jax.lax.scan(body, (q0, v0, active[0]), (steps, active))
    return jnp.concatenate([q0[None], qs]), jnp.concatenate([v0[None], vs])
