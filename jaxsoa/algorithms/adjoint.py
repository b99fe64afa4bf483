"""The adjoint of forward dynamics: an acceleration solved from a linear system is differentiated
as the implicit solution of that system, never through the solver's recursions.

Forward dynamics x*(p) (x = q̈, or (q̈, λ) for closed loops) is the root of a residual r(p, x) = 0
that is linear in x, e.g. r = τ − RNEA(q, v, q̈, f_ext; θ) with p = (θ, q, v, τ, f_ext) and
θ every float field of the model. With A = −∂r/∂x (the mass matrix M for ABA, the KKT matrix for
closed loops), the implicit-function theorem gives

    tangent (forward mode):  ẋ = A⁻¹ (∂r/∂p · ṗ)          at x = x*, r's tangent taken by `jax.jvp`
    adjoint (reverse mode):  μ = A⁻ᵀ x̄,  p̄ = μᵀ ∂r/∂p      (JAX's transpose of the tangent)

For ABA: μ = λ = M⁻¹ g (one ABA at v = 0 with gravity off), τ̄ = λ and
(θ̄, q̄, v̄, f̄_ext) = −λᵀ ∂RNEA/∂(θ, q, v, f_ext): one ABA-type solve and one RNEA VJP, where plain
autodiff transposes ABA's three scans (docs/performance.md, "Gradients: the adjoint").

The rule is a `jax.custom_jvp` whose solve is `lax.custom_linear_solve`, so forward mode (`jvp`,
`jacfwd`), reverse mode (JAX transposes the linear solve with `transpose_solve`, and r's tangent into
its VJP) and higher derivatives all work. `inertia_com` enters the residual through its symmetric
part (`with_symmetric_inertia`), so its cotangent is the symmetric part of plain autodiff's (the
recursions assume a symmetric inertia; autodiff through ABA adds an antisymmetric component that has
no physical meaning) and its tangent is defined along symmetric directions. Integer model fields
(the topology) get `float0` cotangents.
"""

import dataclasses
import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp

from jaxsoa.multibody.linear_map import linear_map, replaced
from jaxsoa.multibody.model import Model


def without_gravity(model: Model) -> Model:
    """The same model with gravity zero: RNEA(q, 0, a) = M a and ABA(q, 0, b) = M⁻¹ b on it."""
    return dataclasses.replace(model, gravity=jnp.zeros_like(model.gravity))


def with_symmetric_inertia(model: Model) -> Model:
    """The same model with `inertia_com` replaced by its symmetric part ½ (I + Iᵀ) (exact, the same
    model, for a symmetric I). The adjoints' residuals use it, so their `inertia_com` cotangent is
    symmetric: the gradient on the space of physical inertias."""
    inertia = model.inertia_com
    return dataclasses.replace(model, inertia_com=0.5 * (inertia + jnp.swapaxes(inertia, -1, -2)))


def implicit_dynamics(solve: Callable, residual: Callable, operators: Callable) -> Callable:
    """x*(p) = solve(*p)[0] differentiated implicitly (module docstring).

    solve(*p) -> (x, aux): the forward solution and what the linear solves reuse (or None);
    residual(p, x, aux) -> r with r(p, x*) = 0, linear in x, same PyTree structure as x (aux: what the
    forward solve computed at this p, held constant; e.g. intermediates the residual's VJP reuses);
    operators(p, x, aux) -> (matvec, solve_A, transpose_solve_A): x ↦ A x, (matvec, b) ↦ A⁻¹ b and
    (vecmat, c) ↦ A⁻ᵀ c for A = −∂r/∂x (transpose_solve_A None: A symmetric).
    Returns f(*p) -> x with a custom JVP (p: PyTrees of arrays; integer leaves are not differentiated).
    """

    @jax.custom_jvp
    def f(*p):
        return solve(*p)[0]

    def f_jvp(p, p_dot):
        x, aux = solve(*p)
        leaves, tree = jax.tree.flatten(p)
        live = [(i, t) for i, t in enumerate(jax.tree.leaves(p_dot, is_leaf=_is_zero)) if not _is_zero(t)]

        def residual_of(*live_leaves):                     # r with the undifferentiated leaves held constant
            return residual(jax.tree.unflatten(tree, replaced(leaves, [i for i, _ in live], live_leaves)), x, aux)

        _, r_dot = jax.jvp(residual_of, tuple(leaves[i] for i, _ in live), tuple(t for _, t in live))  # ∂r/∂p · ṗ
        matvec, solve_A, transpose_solve_A = operators(p, x, aux)
        x_dot = jax.lax.custom_linear_solve(matvec, r_dot, solve_A, transpose_solve_A,
                                            symmetric=transpose_solve_A is None)    # ẋ = A⁻¹ ∂r/∂p · ṗ
        return x, _tied(x_dot)

    f.defjvp(f_jvp, symbolic_zeros=True)        # arguments not differentiated stay out of r's tangent
    return f


def _tied(blocks):
    """Each block + 0 · Σ of every block (the same values). Its transpose gives every block a cotangent that
    depends on the others', so a block the caller drops (λ of a closed loop) does not reach the transposed
    linear solve as a constant zero, whose derivative JAX's `custom_linear_solve` JVP cannot take
    (forward over reverse and reverse over reverse: `jax.hessian`)."""
    leaves = jax.tree.leaves(blocks)
    if len(leaves) == 1:                              # ABA's q̈: no block to drop, nothing added to its hot path
        return blocks
    tie = sum(jnp.sum(b) for b in leaves) * 0
    return jax.tree.map(lambda b: b + tie.astype(b.dtype), blocks)


def _is_zero(tangent):
    return isinstance(tangent, jax.custom_derivatives.SymbolicZero)


def adjoint_forward_dynamics(aba_recursion: Callable, rnea: Callable, factored=None) -> Callable:
    """fd(model, q, v, tau, f_ext) -> q̈ (nv,) = aba_recursion(...), differentiated as the solution
    of rnea(model, q, v, q̈, f_ext) = τ: A = M, applied as RNEA(q, 0, x) and inverted as
    ABA(q, 0, b) on the gravity-free model (M symmetric, so the adjoint solve is the same ABA; aba_recursion
    is called with v None there, at rest), or,
    with `factored = (aba_factored, solve_mass)`, by solve_mass(model, aux, b) reusing the forward
    call's aux from aba_factored(...) -> (q̈, aux), and the residual's RNEA by
    rnea_at(model, q, v, q̈, f_ext, aux): the same values and derivatives, its reverse mode reusing the
    link motions and forces the forward ABA computed (`factored = (aba_factored, solve_mass, rnea_at)`).
    Arguments after f_ext go to aba_factored only (e.g. a forward solve already done, which it returns)
    and are held constant by the derivatives; without `factored`, one such argument is q̈ already solved,
    returned as the value (reverse mode then runs no forward pass). Per sample: q (nq,), v / tau (nv,),
    f_ext (n, 6) or None (or the same with one leading batch axis for a batched recursion)."""

    def solve(model, q, v, tau, f_ext, *given):
        if factored is None:
            return (given[0] if given else aba_recursion(model, q, v, tau, f_ext)), None
        return factored[0](model, q, v, tau, f_ext, *given)

    def residual(p, qdd, aux):
        model, q, v, tau, f_ext = p[:5]
        if factored is not None:
            return tau - factored[2](with_symmetric_inertia(model), q, v, qdd, f_ext, aux)
        return tau - rnea(with_symmetric_inertia(model), q, v, qdd, f_ext)   # r = τ − RNEA(q, v, q̈, f_ext; θ)

    def operators(p, qdd, aux):
        free, q, zero = without_gravity(p[0]), p[1], jnp.zeros_like(qdd)
        if factored is None:
            inverse = lambda _, b: aba_recursion(free, q, None, b, None)     # noqa: E731  M⁻¹ b, at rest
        else:
            inverse = lambda _, b: factored[1](p[0], aux, b)                  # noqa: E731  M⁻¹ b, reused
        return lambda x: rnea(free, q, zero, x, None), inverse, None          # M x

    return implicit_dynamics(solve, residual, operators)


def custom_reverse(fn: Callable, fwd: Callable, bwd: Callable) -> Callable:
    """f(context, *arrays) = fn(context, *arrays) whose forward mode is JAX's JVP of fn and whose
    reverse mode is `bwd`, written by hand. `context` (a PyTree, e.g. the traversal) is not
    differentiated; fwd(context, *arrays) -> (out, res); bwd(context, res, out_bar) -> one
    cotangent per array, each of its array's shape.

    The tangent L ṗ (L = ∂fn/∂arrays) is `jaxsoa.multibody.linear_map.linear_map` of JAX's JVP of fn
    and of `bwd`, so reverse mode never transposes fn's JVP. The JVP is checkpointed: otherwise
    linearising the rule hoists the known half of fn's JVP (the linearisation of its scans) into the
    forward pass and saves it, though reverse mode only runs `bwd` on `fwd`'s residuals
    (docs/performance.md, "Gradients on this path")."""

    @jax.custom_jvp
    def f(context, *arrays):
        return fn(context, *arrays)

    def f_jvp(primals, tangents):
        context, arrays = primals[0], list(primals[1:])
        live = [i for i, t in enumerate(tangents[1:]) if not _is_zero(t)]
        out, res = fwd(context, *arrays)
        if not live:
            return out, jax.tree.map(jnp.zeros_like, out)

        @jax.checkpoint                                 # saves the arrays only, not fn's linearisation
        def tangent_map(live_arrays, u):                # L u, the live arrays' tangents u
            def fn_of(*live_arrays):
                return fn(context, *replaced(arrays, live, live_arrays))
            return jax.jvp(fn_of, live_arrays, tuple(u))[1]

        live_arrays = tuple(arrays[i] for i in live)

        def transpose(c):                               # Lᵀ c, the live arrays' cotangents
            cotangents = bwd(context, res, c)
            return tuple(cotangents[i] for i in live)

        u = tuple(tangents[1 + i] for i in live)
        return out, linear_map(functools.partial(tangent_map, live_arrays), transpose, u, out)

    f.defjvp(f_jvp, symbolic_zeros=True)
    return f
