"""One-step integrators: an explicit Runge–Kutta scheme written once as a Butcher tableau (classical
RK4 is the tableau in use), applied to flat PyTree states (`ode_rk4_step`) and on the configuration
manifold (`rk4_step`, Runge–Kutta–Munthe-Kaas: quaternions stay unit through `jaxsoa.integrate`),
and semi-implicit Euler. Rollouts of these steps are in `jaxsoa.integrators.rollout`.

Multibody state x = (q (nq,), v (nv,)); the force of a step is an array τ (nv,) held over the step or
a function `tau(offset, q_i, v_i) -> τ (nv,)` of the stage's time offset in the step.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from jaxsoa.algorithms.dynamics import aba
from jaxsoa.multibody.arguments import entry_point
from jaxsoa.multibody.config_space import dexp_inv, integrate
from jaxsoa.multibody.model import Model
from jaxsoa.multibody.scalars import check_scalar


@dataclasses.dataclass(frozen=True)
class ButcherTableau:
    """An explicit Runge–Kutta scheme as data: stage i is evaluated at time t + c_i dt and state
    x + dt Σ_{j<i} a_ij k_j, the step is x + dt Σ_i b_i k_i. `a` holds the strictly lower triangle
    by rows (row i has i entries); consistency c_i = Σ_j a_ij is checked. Hashable (a static
    argument)."""
    a: tuple
    b: tuple
    c: tuple

    def __post_init__(self):
        if not len(self.a) == len(self.b) == len(self.c):
            raise ValueError(f"a, b, c need one entry per stage, got {len(self.a)}, {len(self.b)}, {len(self.c)}")
        for i, (row, c_i) in enumerate(zip(self.a, self.c, strict=True)):
            if len(row) != i:
                raise ValueError(f"row {i} of a must have {i} entries (explicit scheme), got {len(row)}")
            if abs(sum(row) - c_i) > 1e-12:
                raise ValueError(f"stage {i}: c_i = {c_i} differs from Σ_j a_ij = {sum(row)}")


RK4 = ButcherTableau(a=((), (0.5,), (0.0, 0.5), (0.0, 0.0, 1.0)), b=(1 / 6, 1 / 3, 1 / 3, 1 / 6),
                     c=(0.0, 0.5, 0.5, 1.0))
"""The classical fourth-order Runge–Kutta scheme."""


def _float_dtype(x):
    """The dtype of a PyTree's first floating leaf (stage times are computed in it)."""
    for leaf in jax.tree.leaves(x):
        if jnp.issubdtype(jnp.result_type(leaf), jnp.floating):
            return jnp.result_type(leaf)
    return jnp.result_type(float)


def ode_rk4_step(f, t, x, dt, *, tableau=RK4):
    """One explicit Runge–Kutta step of x' = f(t, x) for any PyTree x (f returns a PyTree of the same
    structure and dtypes): k_i = f(t + c_i dt, x + dt Σ_j a_ij k_j), x ← x + dt Σ_i b_i k_i, with
    `tableau` (`ButcherTableau`, default the classical `RK4`). The stages run in a `lax.fori_loop`
    over a stacked buffer of the k_i, so `f` is traced and compiled once per step, not once per
    stage; the stage time is in the dtype of x's first floating leaf. For flat states without a
    manifold, e.g. a tether's nodes (`jaxsoa.systems.tether.reels`). t, dt: real scalars, finite when concrete."""
    check_scalar("t", t)
    check_scalar("dt", dt)
    _check_tableau(tableau)
    for leaf in jax.tree.leaves(x):
        if not jnp.issubdtype(jnp.result_type(leaf), jnp.floating):
            raise TypeError(f"argument 'x': every leaf must be a floating-point array, "
                            f"got dtype {jnp.result_type(leaf)}")
    n_stages = len(tableau.c)
    A = np.zeros((n_stages, n_stages))
    for i, row in enumerate(tableau.a):
        A[i, :i] = row
    time_dtype = _float_dtype(x)
    c = jnp.asarray(tableau.c, time_dtype)
    t, dt = jnp.asarray(t, time_dtype), jnp.asarray(dt, time_dtype)

    def combine(weights, ks):                          # x + dt Σ_j w_j k_j, leaf by leaf
        return jax.tree.map(lambda x_leaf, k_leaf: x_leaf + (dt * jnp.tensordot(
            jnp.asarray(weights, k_leaf.dtype), k_leaf, axes=1)).astype(k_leaf.dtype), x, ks)

    def stage(i, ks):                                  # k_i = f(t + c_i dt, x + dt Σ_j a_ij k_j)
        k_i = _like_state("f", f(t + c[i] * dt, combine(jnp.asarray(A)[i], ks)), x)
        return jax.tree.map(lambda buffer, k: buffer.at[i].set(k.astype(buffer.dtype)), ks, k_i)

    ks = jax.tree.map(lambda leaf: jnp.zeros((n_stages, *jnp.shape(leaf)), jnp.result_type(leaf)), x)
    ks = jax.lax.fori_loop(0, n_stages, stage, ks)
    return combine(np.asarray(tableau.b), ks)


def _check_tableau(tableau):
    if not isinstance(tableau, ButcherTableau):
        raise TypeError(f"argument 'tableau' must be a ButcherTableau, got {type(tableau).__name__}")


def _like_state(name, rate, state):
    """`rate` if it has `state`'s PyTree structure and leaf shapes (ValueError naming `name` otherwise: a
    rate of another shape would be broadcast into the state)."""
    if jax.tree.structure(rate) != jax.tree.structure(state):
        raise ValueError(f"argument '{name}' returned a {jax.tree.structure(rate)}, expected the state's structure "
                         f"{jax.tree.structure(state)}")
    for got, want in zip(jax.tree.leaves(rate), jax.tree.leaves(state), strict=True):
        if jnp.shape(got) != jnp.shape(want):
            raise ValueError(f"argument '{name}' returned shape {jnp.shape(got)}, "
                             f"expected the state's {jnp.shape(want)}")
    return rate


def _force_at(tau):
    """τ as a function of (stage time offset, q, v): a constant array is held over the step."""
    return tau if callable(tau) else (lambda offset, q, v: tau)


@entry_point(q='q', v='v', tau='v', dt='dt')
def rk4_step(model: Model, q, v, tau, dt, *, dynamics=aba, tableau=RK4):
    """One Runge–Kutta step on the configuration manifold (Runge–Kutta–Munthe-Kaas): the scheme of
    `ode_rk4_step` on the tangent increment (δ, δv), zero at the start of the step, with stages
    q_i = q ⊕ δ_i, v_i = v + δv_i and rates δ̇ = dexp⁻¹_δ(v_i), δv̇ = q̈(q_i, v_i); then q ⊕ δ, v + δv.
    So the step has the tableau's order (4 for `RK4`) for spherical and free joints too
    (integrating δ̇ = v instead is only 2nd order once ω changes direction). `tau` is an array held
    over the step (zero-order hold) or a function `tau(offset, q_i, v_i)` evaluated at each stage
    (offset c_i dt: 0, dt/2, dt/2, dt for RK4). `dynamics(model, q, v, tau) -> q̈` is the forward
    dynamics (ABA; e.g. constrained dynamics). q (nq,), v (nv,) -> (q, v)."""
    force = _force_at(tau)
    _check_tableau(tableau)

    def rate(offset, increment):
        dq, dv = increment
        q_i, v_i = _integrate(model, q, dq), v + dv                       # q_i = q ⊕ δ_i, v_i = v + δv_i
        return _dexp_inv(model, dq, v_i), _like_state("dynamics", dynamics(model, q_i, v_i, force(offset, q_i, v_i)), v)

    zero = jnp.zeros_like(v)
    dq, dv = ode_rk4_step(rate, 0.0, (zero, zero), dt, tableau=tableau)
    return _integrate(model, q, dq), v + dv


_integrate = jax.checkpoint(lambda model, q, v: integrate(model, q, v))
_dexp_inv = jax.checkpoint(lambda model, delta, v: dexp_inv(model, delta, v))
"""`rk4_step`'s manifold maps, recomputed in reverse mode instead of saving their intermediates: the
quaternion exponentials of free and spherical joints leave dozens of per-sample scalars per stage, each a
residual buffer of the rollout (space arm, 256 rollouts × 100 steps: value+grad 2212 → 1856 µs per sample
per-sample, 1916 → 1798 on the batch-last core; docs/performance.md, "Rollouts on the batch-last core")."""


@entry_point(q='q', v='v', tau='v', dt='dt')
def semi_implicit_euler_step(model: Model, q, v, tau, dt, *, dynamics=aba):
    """v_{n+1} = v_n + dt q̈(q_n, v_n, τ);  q_{n+1} = q_n ⊕ dt v_{n+1} (symplectic Euler), q̈ from
    `dynamics` (ABA). `tau` as in `rk4_step` (a function is evaluated once, at the start of the step)."""
    v_next = v + dt * _like_state("dynamics", dynamics(model, q, v, _force_at(tau)(0.0, q, v)), v)
    return integrate(model, q, dt * v_next), v_next
