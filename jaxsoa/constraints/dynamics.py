"""Dynamics of closed loops cut into a tree (docs/user_guide.md §6), with the constraints of
`jaxsoa.constraints.closure`:

    M q̈ + C = τ + G_cᵀ λ          G_c q̈ = −Ġ_c q̇ − 2α G_c q̇ − β² e      (Baumgarte; α = β = 0 off)

"recursive": λ first from the Delassus system (G M⁻¹ Gᵀ) λ = rhs − G q̈_free, with M⁻¹ Gᵀ from
one ABA per constraint row (gravity-free, zero velocity: aba(q, 0, g) = M⁻¹ g; vmapped, the
articulated inertias are shared), then q̈ = q̈_free + M⁻¹ Gᵀ λ (= ABA(τ + Gᵀ λ), by linearity).
"dense": CRBA mass matrix and the KKT system [[M, Gᵀ], [G, 0]] [q̈; −λ] = [τ − C; rhs].

Rank-deficient G_c (redundant cuts, planar loops closed with spatial cut rows, singular poses):
both methods use a pseudo-inverse (`jaxsoa.spatial.svd.pinv`: one-sided Jacobi, no LAPACK, so these
run over several host devices; differentiable at constant rank) with
singular values below `rcond` · σ_max dropped: q̈ is the unique constrained acceleration and λ
the minimum-norm multipliers (any split of a redundant reaction is physically equivalent).
`rcond` is relative to the Delassus matrix (recursive) or the KKT matrix (dense); default
1000 · eps of the dtype. Never NaN: dropped directions give zero multipliers.
"""

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsoa.algorithms.adjoint import implicit_dynamics, with_symmetric_inertia, without_gravity
from jaxsoa.algorithms.dynamics import aba, aba_autodiff, crba, rnea
from jaxsoa.constraints.closure import (
    LoopClosure,
    closure_terms,
    constraint_bias,
    constraint_error,
    constraint_jacobian,
)
from jaxsoa.multibody.arguments import entry_point
from jaxsoa.multibody.config_space import integrate
from jaxsoa.multibody.model import Model
from jaxsoa.multibody.scalars import check_scalar
from jaxsoa.spatial.svd import pinv, singular_values


def _rtol(rcond, dtype):
    """The relative cutoff of the pseudo-inverses: `rcond` (a real scalar, finite and ≥ 0 when concrete), or
    1000 ε of `dtype` when None."""
    return 1000 * jnp.finfo(dtype).eps if rcond is None else check_scalar("rcond", rcond, 0.0)


def _baumgarte_gains(baumgarte, dtype):
    """None, or the Baumgarte gains (α, β) as `dtype` scalars: a pair of real scalars, finite and ≥ 0 when
    concrete (TypeError / ValueError naming 'baumgarte')."""
    if baumgarte is None:
        return None
    if not isinstance(baumgarte, (tuple, list)) or len(baumgarte) != 2:
        raise TypeError(f"argument 'baumgarte' must be None or a pair (alpha, beta), got {baumgarte!r}")
    for i, gain in enumerate(baumgarte):
        check_scalar(f"baumgarte[{i}]", gain, 0.0)
    return tuple(jnp.asarray(g, dtype) for g in baumgarte)


def inverse_mass_columns(model: Model, q, B, fd=aba):
    """M⁻¹ Bᵀ (nv, m) for B (m, nv): one ABA (`fd`) per row of B on a gravity-free copy at zero velocity."""
    free = without_gravity(model)
    zero = jnp.zeros(model.nv, B.dtype)
    return jax.vmap(lambda g: fd(free, q, zero, g), out_axes=1)(B)


def _acceleration_rhs(model, q, v, closure, baumgarte):
    """G (m, nv) and the constraint-acceleration target rhs = −Ġ v − 2α G v − β² e (m,)."""
    if baumgarte is None:
        return constraint_jacobian(model, q, closure), -constraint_bias(model, q, v, closure)
    e, G, bias = closure_terms(model, q, v, closure)
    alpha, beta = baumgarte
    return G, -bias - 2 * alpha * (G @ v) - beta**2 * e


class ConstrainedDynamics(NamedTuple):
    """qdd q̈ (nv,) and lam λ (6·n_cuts,), the cut wrenches' constrained components (module docstring)."""
    qdd: jax.Array
    lam: jax.Array


def _solve(model, q, v, tau, closure, f_ext, baumgarte, rtol, method, fd=aba):
    """((q̈, λ), aux) of the closed-loop system, forward dynamics `fd`; aux: what the adjoint's
    linear solves reuse — (G, M⁻¹ Gᵀ, (G M⁻¹ Gᵀ)⁺) recursive, (G, K⁺) dense."""
    G, rhs = _acceleration_rhs(model, q, v, closure, baumgarte)
    if method == "recursive":
        qdd_free = fd(model, q, v, tau, f_ext)                           # q̈_free = M⁻¹ (τ − C)
        Minv_Gt = inverse_mass_columns(model, q, G, fd)
        delassus_inv = pinv(G @ Minv_Gt, rtol)                            # (G M⁻¹ Gᵀ) λ = rhs − G q̈_free
        lam = delassus_inv @ (rhs - G @ qdd_free)
        return (qdd_free + Minv_Gt @ lam, lam), (G, Minv_Gt, delassus_inv)  # q̈ = q̈_free + M⁻¹ Gᵀ λ
    if method == "dense":
        M = crba(model, q)
        C = rnea(model, q, v, jnp.zeros_like(v), f_ext)
        m = G.shape[0]
        kkt = jnp.block([[M, G.T], [G, jnp.zeros((m, m), G.dtype)]])      # [[M, Gᵀ], [G, 0]] [q̈; −λ] = [τ − C; rhs]
        kkt_inv = pinv(kkt, rtol)
        sol = kkt_inv @ jnp.concatenate([tau - C, rhs])
        return (sol[: model.nv], -sol[model.nv:]), (G, kkt_inv)
    raise ValueError(f"method must be 'recursive' or 'dense', got {method!r}")


def _residual(p, x, _aux):
    """r = (τ + Gᵀ λ − RNEA(q, v, q̈, f_ext), rhs − G q̈): zero at the constrained solution."""
    model, q, v, tau, closure, f_ext, baumgarte, _ = p
    qdd, lam = x
    G, rhs = _acceleration_rhs(model, q, v, closure, baumgarte)
    return tau + G.T @ lam - rnea(with_symmetric_inertia(model), q, v, qdd, f_ext), rhs - G @ qdd


def _kkt_operators(method, p, x, aux):
    """A = −∂r/∂(q̈, λ) = [[M, −Gᵀ], [G, 0]]: A x, A⁻¹ b and A⁻ᵀ c, reusing the forward solve's
    factors (recursive: one gravity-free ABA per solve; dense: the KKT pseudo-inverse)."""
    model, q = without_gravity(p[0]), p[1]
    G, nv = aux[0], model.nv
    zero = jnp.zeros(nv, G.dtype)

    def matvec(x):                                         # (M q̈ − Gᵀ λ, G q̈)
        return rnea(model, q, zero, x[0]) - G.T @ x[1], G @ x[0]

    if method == "recursive":
        _, Minv_Gt, delassus_inv = aux

        def solve(_, b):                                   # λ = D⁺ (b₂ − G M⁻¹ b₁), q̈ = M⁻¹ (b₁ + Gᵀ λ)
            y = aba(model, q, zero, b[0])
            lam = delassus_inv @ (b[1] - G @ y)
            return y + Minv_Gt @ lam, lam

        def transpose_solve(_, c):                         # μ₂ = D⁺ (c₂ + G M⁻¹ c₁), μ₁ = M⁻¹ (c₁ − Gᵀ μ₂)
            y = aba(model, q, zero, c[0])
            mu = delassus_inv @ (c[1] + G @ y)
            return y - Minv_Gt @ mu, mu
    else:
        kkt_inv = aux[1]

        def solve(_, b):                                   # K [q̈; −λ] = [b₁; b₂]
            y = kkt_inv @ jnp.concatenate(b)
            return y[:nv], -y[nv:]

        def transpose_solve(_, c):                         # K [μ₁; μ₂] = [c₁; −c₂]
            y = kkt_inv @ jnp.concatenate([c[0], -c[1]])
            return y[:nv], y[nv:]
    return matvec, solve, transpose_solve


@functools.cache
def _adjoint(method):
    """(model, q, v, tau, closure, f_ext, baumgarte, rtol) -> (q̈, λ), differentiated by the adjoint
    of the KKT system (`jaxsoa.algorithms.adjoint.implicit_dynamics`)."""
    return implicit_dynamics(lambda *p: _solve(*p, method), _residual, functools.partial(_kkt_operators, method))


@entry_point(q='q', v='v', tau='v', closure='closure', f_ext='f_ext')
def forward_dynamics_constrained(model: Model, q, v, tau, closure: LoopClosure, f_ext=None, *, baumgarte=None,
                                 method="recursive", rcond=None) -> ConstrainedDynamics:
    """`ConstrainedDynamics` (q̈, λ) of the closed-loop system (module docstring). `baumgarte` =
    (α, β) adds −2α G v − β² e to the constraint acceleration (None: none). f_ext (n, 6) link-frame
    wrenches or None. Differentiated by the adjoint of the KKT system: with A = [[M, −Gᵀ], [G, 0]]
    the cotangents (q̈̄, λ̄) give μ = A⁻ᵀ (q̈̄, λ̄) by one more ABA and the Delassus factor
    (recursive) or the KKT pseudo-inverse (dense), then the VJP of the residual
    (τ + Gᵀ λ − RNEA, rhs − G q̈) at μ."""
    if method not in ("recursive", "dense"):
        raise ValueError(f"method must be 'recursive' or 'dense', got {method!r}")
    rtol = jnp.asarray(_rtol(rcond, model.dtype), model.dtype)
    gains = _baumgarte_gains(baumgarte, model.dtype)
    return ConstrainedDynamics(*_adjoint(method)(model, q, v, tau, closure, f_ext, gains, rtol))


@entry_point(q='q', v='v', tau='v', closure='closure', f_ext='f_ext')
def forward_dynamics_constrained_autodiff(model: Model, q, v, tau, closure: LoopClosure, f_ext=None, *,
                                          baumgarte=None, method="recursive", rcond=None) -> ConstrainedDynamics:
    """`forward_dynamics_constrained` differentiated through its solves by plain autodiff (the
    reference path of the adjoint's tests)."""
    rtol = _rtol(rcond, model.dtype)
    gains = _baumgarte_gains(baumgarte, model.dtype)
    return ConstrainedDynamics(*_solve(model, q, v, tau, closure, f_ext, gains, rtol, method, aba_autodiff)[0])


class ConstrainedInverseDynamics(NamedTuple):
    """tau τ (nv,), zero on passive dofs; lam λ (6·n_cuts,); rank () of [S_aᵀ G_cᵀ] (nv for a
    uniquely solvable, consistent problem; unused, it costs nothing under `jit`)."""
    tau: jax.Array
    lam: jax.Array
    rank: jax.Array


@entry_point(q='q', v='v', qdd='v', closure='closure', actuated='mask_v', f_ext='f_ext')
def inverse_dynamics_constrained(model: Model, q, v, qdd, closure: LoopClosure, actuated, f_ext=None, *,
                                 rcond=None) -> ConstrainedInverseDynamics:
    """Torques of the actuated joints and multipliers that produce q̈ with the passive joints
    unactuated: least squares / minimum norm of [S_aᵀ  G_cᵀ] [τ; λ] = M q̈ + C, S_a = diag(actuated).
    actuated (nv,) bool. Returns `ConstrainedInverseDynamics` (τ, λ, rank)."""
    G = constraint_jacobian(model, q, closure)
    mask = jnp.asarray(actuated).astype(G.dtype)
    A = jnp.concatenate([jnp.diag(mask), G.T], axis=1)                 # (nv, nv + m)
    rtol = _rtol(rcond, G.dtype)
    x = pinv(A, rtol) @ rnea(model, q, v, qdd, f_ext)                  # M q̈ + C = S_aᵀ τ + Gᵀ λ
    sigma = singular_values(A)
    return ConstrainedInverseDynamics(x[: model.nv] * mask, x[model.nv:], jnp.sum(sigma > rtol * sigma[0]))


@entry_point(q='q', v='v', closure='closure')
def project_velocity(model: Model, q, v, closure: LoopClosure, rcond=None):
    """Plastic impact onto the constraint: v⁺ = v − M⁻¹ Gᵀ (G M⁻¹ Gᵀ)⁺ G v, the M-orthogonal
    projection (the velocity after an inelastic impulse at the cut; G v⁺ = 0). (nv,)."""
    G = constraint_jacobian(model, q, closure)
    Minv_Gt = inverse_mass_columns(model, q, G)
    impulse = pinv(G @ Minv_Gt, _rtol(rcond, G.dtype)) @ (G @ v)
    return v - Minv_Gt @ impulse


@entry_point(q='q', v='v', closure='closure')
def project_state(model: Model, q, v, closure: LoopClosure, iterations=3, rcond=None):
    """(q, v) moved onto the constraint manifold: `iterations` Gauss–Newton steps
    q ← q ⊕ (−G⁺ e) (minimum-norm correction), then `project_velocity`. iterations: an int ≥ 0."""
    if isinstance(iterations, (bool, np.bool_)) or not isinstance(iterations, (int, np.integer)) or iterations < 0:
        raise ValueError(f"argument 'iterations' must be an int ≥ 0, got {iterations!r}")
    for _ in range(iterations):
        G = constraint_jacobian(model, q, closure)
        step = pinv(G, _rtol(rcond, G.dtype)) @ constraint_error(model, q, closure)
        q = integrate(model, q, -step)
    return q, project_velocity(model, q, v, closure, rcond)

