"""Finite elements of a reeling tether on the normalised material coordinate s̄ = (s − s_P)/l ∈ [0, 1]
(derivation in docs/tether.md §2–3).

The deployed segment [s_P, s_M] (unstretched length l = s_M − s_P) is cut into n equal elements with
n + 1 nodes at fixed s̄_i = i/n, so the shapes never change while the tether pays out or reels in.
Nodes are *not* material points: a material point moves at v = ∂_t r̄ − w ∂_s̄ r̄ with the transport
velocity w(s̄) = (ṡ_P + s̄ l̇)/l. Element k joins nodes k and k+1 (k = 0 … n−1); node 0 is the exit
point C_P, node n the exit point C_M.

Galerkin weighting of ρ Dv/Dt = ∂n/∂s + f gives, per node i (every term exact for linear elements):

    (M r̈)_i + T_i = F_int,i + F_ext,i + R_i          (R_i: force of the bodies on the end nodes)

    M        ρ l ∫ N_i N_j ds̄ (consistent) or its row-sum lumping
    T_i      ρ l ∫ N_i [−2 w ∂_s̄ṙ̄ + (w w' − ∂_t w) ∂_s̄ r̄] ds̄ + ρ l w_i² [∂_s̄ r̄]_i   (transport terms)
    F_int,i  n_i − n_{i−1}   (element tension vectors n_k = N_k τ_k)
    F_ext,i  (M a_ext(r))_i  (exact for an acceleration field linear in r, e.g. gravity gradient)

`jaxsoa.systems.tether.reels` adds the reels, the exit jump (thrust, Carnot loss) and the end bodies.
"""

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import checkify

from jaxsoa.multibody.arguments import default_dtype


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class TetherParams:
    """Tether material (scalars, traced: vmap / grad over them) and mesh (static).

    rho: linear density per unstretched length [kg/m]; EA: axial stiffness [N]; alpha: Kelvin–Voigt
    time constant [s] (N = EA (ε + α ε̇)); length: total material L [m], stored + deployed.
    n_elements: elements of the deployed segment (n + 1 nodes); lumped: row-sum lumped mass matrix;
    formulation: "energy_consistent" (the state carries nodal material velocities, docs/tether.md §5.1)
    or "nodal" (node velocities ∂_t r̄, §3); static, so one jit serves each."""
    rho: jax.Array
    EA: jax.Array
    alpha: jax.Array
    length: jax.Array
    n_elements: int = dataclasses.field(metadata=dict(static=True))
    lumped: bool = dataclasses.field(default=False, metadata=dict(static=True))
    formulation: str = dataclasses.field(default="energy_consistent", metadata=dict(static=True))


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class TetherState:
    """r (n+1, 3): node positions; v (n+1, 3): at the end nodes the exit points' velocities ∂_t r̄; at the
    interior nodes ∂_t r̄ ("nodal") or the material velocity u_i ("energy_consistent", ∂_t r̄ = u + w ḡ);
    s (2,): material coordinates (s_P, s_M) at the exit points; s_dot (2,): their rates."""
    r: jax.Array
    v: jax.Array
    s: jax.Array
    s_dot: jax.Array


FORMULATIONS = ("energy_consistent", "nodal")
"""The two Galerkin forms of the reeling tether (docs/tether.md §3 and §5.1); the first is the default."""


def tether_params(rho, EA, alpha, length, n_elements, lumped=False, dtype=None,
                  formulation=FORMULATIONS[0]) -> TetherParams:
    """Host-side builder: validates every field (ValueError naming it) and casts to `dtype`."""
    for name, value, ok in (("rho", rho, rho > 0), ("EA", EA, EA > 0), ("alpha", alpha, alpha >= 0),
                            ("length", length, length > 0)):
        if not (np.ndim(value) == 0 and np.isfinite(value) and ok):
            raise ValueError(f"TetherParams.{name} must be a finite scalar ({'≥ 0' if name == 'alpha' else '> 0'}),"
                             f" got {value!r}")
    if not (isinstance(n_elements, int | np.integer) and n_elements >= 2):
        raise ValueError(f"TetherParams.n_elements must be an int ≥ 2 (one interior node), got {n_elements!r}")
    if formulation not in FORMULATIONS:
        raise ValueError(f"TetherParams.formulation must be one of {FORMULATIONS}, got {formulation!r}")
    dtype = default_dtype(dtype)
    cast = lambda x: jnp.asarray(x, dtype)  # noqa: E731
    return TetherParams(cast(rho), cast(EA), cast(alpha), cast(length), int(n_elements), bool(lumped), formulation)


SLACK_TOLERANCE = 1e-9
"""Relative shortfall of the chord |r_M − r_P| below the deployed length that `straight_state` calls
slack (an unstretched tether, chord = length up to rounding, is taut at zero tension)."""


def straight_state(params: TetherParams, r_P, r_M, s, v_P=(0.0, 0.0, 0.0), v_M=(0.0, 0.0, 0.0),
                   s_dot=(0.0, 0.0), *, allow_slack=False) -> TetherState:
    """Host-side builder of a straight tether from r_P to r_M (nodes evenly spaced, node velocities
    ∂_t r̄ interpolated from the ends; "energy_consistent" stores at the interior nodes the material
    velocity u_i = ∂_t r̄_i − w_i (r_M − r_P) of that same motion). ValueError naming the argument for:
    s not 0 ≤ s_P < s_M ≤ L; a wrong shape or a non-finite entry; coincident ends r_P = r_M (every element
    of zero length, its tangent undefined); and, unless `allow_slack`, a slack tether — the chord |r_M − r_P| shorter
    than the deployed length s_M − s_P by more than `SLACK_TOLERANCE` (relative): a straight line
    shorter than its material is a compressed tether, not a hanging one, and carries no tension."""
    s = np.asarray(s, np.float64)
    if s.shape != (2,) or not (0 <= s[0] < s[1] <= float(params.length)):
        raise ValueError(f"TetherState.s must be (s_P, s_M) with 0 ≤ s_P < s_M ≤ L = {float(params.length)}, got {s}")
    for name, x in (("r_P", r_P), ("r_M", r_M), ("v_P", v_P), ("v_M", v_M), ("s_dot", s_dot)):
        shape = (2,) if name == "s_dot" else (3,)
        if np.shape(x) != shape:
            raise ValueError(f"straight_state: {name} must have shape {shape}, got {np.shape(x)}")
        if not np.all(np.isfinite(np.asarray(x, np.float64))):
            raise ValueError(f"straight_state: {name} = {x} is not finite")
    chord, length = float(np.linalg.norm(np.subtract(r_M, r_P, dtype=np.float64))), float(s[1] - s[0])
    if chord == 0:
        raise ValueError(f"straight_state: r_P and r_M coincide ({r_P}): every tether element would have zero "
                         "length")
    if not allow_slack and chord < length * (1 - SLACK_TOLERANCE):
        raise ValueError(f"straight_state: the tether is slack: |r_M − r_P| = {chord:.6g} m is shorter than the "
                         f"deployed length s_M − s_P = {length:.6g} m (s = {s}; strain {chord / length - 1:.3g}); "
                         "pass allow_slack=True to build it anyway")
    dtype = params.rho.dtype
    sbar = np.linspace(0.0, 1.0, params.n_elements + 1)[:, None]
    lerp = lambda a, b: (1 - sbar) * np.asarray(a, np.float64) + sbar * np.asarray(b, np.float64)  # noqa: E731
    v = lerp(v_P, v_M)
    if params.formulation == "energy_consistent":                  # u = ∂_t r̄ − w r̄' at the interior nodes
        rates = np.asarray(s_dot, np.float64)
        w = (rates[0] + sbar * (rates[1] - rates[0])) / length
        v[1:-1] -= w[1:-1] * np.subtract(r_M, r_P, dtype=np.float64)
    return TetherState(*(jnp.asarray(x, dtype) for x in (lerp(r_P, r_M), v, s, s_dot)))


def check_mesh(params: TetherParams, state: TetherState) -> TetherState:
    """`state` itself if its arrays fit the mesh of `params`: r, v (n + 1, 3), s, s_dot (2,) with
    n = params.n_elements (ValueError naming the field otherwise: a state of another mesh would be read
    with the wrong element length). Shapes are static, so this costs nothing under `jit`."""
    n = params.n_elements
    for name, shape in (("r", (n + 1, 3)), ("v", (n + 1, 3)), ("s", (2,)), ("s_dot", (2,))):
        if jnp.shape(getattr(state, name)) != shape:
            raise ValueError(f"TetherState.{name} has shape {jnp.shape(getattr(state, name))}, expected {shape} "
                             f"for params.n_elements = {n}")
    return state


def check_tether_state(params: TetherParams, state: TetherState):
    """Traced checks (`jax.experimental.checkify`) for states produced inside a program (a rollout, an
    optimiser): 0 ≤ s_P < s_M ≤ L, no element of zero length (its tangent, hence τ and its gradient,
    would be undefined), everything finite.

        err, _ = jax.jit(checkify.checkify(check_tether_state))(params, state); err.throw()

    The shapes are checked first, at trace time (`check_mesh`)."""
    check_mesh(params, state)
    checkify.check((state.s[0] >= 0) & (state.s[0] < state.s[1]) & (state.s[1] <= params.length),
                   "tether material out of range: (s_P, s_M) = {s}, L = {L}", s=state.s, L=params.length)
    checkify.check(jnp.all(jnp.linalg.norm(jnp.diff(state.r, axis=0), axis=1) > 0),
                   "a tether element has zero length (coincident nodes)")
    finite = [jnp.all(jnp.isfinite(x)) for x in (state.r, state.v, state.s, state.s_dot)]
    checkify.check(jnp.all(jnp.stack(finite)), "non-finite tether state")


# ---------------------------------------------------------------------------------------------
# kinematics of the mesh

def transport_velocity(state: TetherState, s_ddot):
    """Nodal w_i = (ṡ_P + s̄_i l̇)/l and its rate ∂_t w|_s̄ = (s̈_P + s̄_i l̈)/l − w_i l̇/l, (n+1,) each;
    w' = ∂_s̄ w = l̇/l is a scalar. s_ddot (2,): (s̈_P, s̈_M)."""
    sbar = jnp.linspace(0.0, 1.0, state.r.shape[0], dtype=state.r.dtype)
    l, l_dot, l_ddot = state.s[1] - state.s[0], state.s_dot[1] - state.s_dot[0], s_ddot[1] - s_ddot[0]
    w = (state.s_dot[0] + sbar * l_dot) / l                        # w = (ṡ_P + s̄ l̇)/l
    w_t = (s_ddot[0] + sbar * l_ddot) / l - w * l_dot / l           # ∂_t w at fixed s̄
    return w, w_t, l_dot / l


class ElementStrain(NamedTuple):
    """Per element: strain eps (n,), material strain rate eps_dot (n,), unit tangent (n, 3)."""
    eps: jax.Array
    eps_dot: jax.Array
    tangent: jax.Array


def material_velocities(params: TetherParams, state: TetherState):
    """Nodal material velocities u (n+1, 3) of the "energy_consistent" form: the state's v at the interior
    nodes and u_e = v_e − w_e r̄'_e at the exits (r̄' of the exit element), i.e. the exit point's velocity
    plus the exit jump Δv_e (docs/tether.md §5.1). Not defined for "nodal", whose u jumps at the nodes."""
    if params.formulation != "energy_consistent":
        raise ValueError(f"material_velocities: the {params.formulation!r} formulation has no nodal material "
                         "velocities (its material velocity is discontinuous at the nodes)")
    w, _, _ = transport_velocity(state, jnp.zeros_like(state.s))
    d = params.n_elements * jnp.diff(state.r, axis=0)
    return state.v.at[0].add(-w[0] * d[0]).at[-1].add(-w[-1] * d[-1])             # u_e = v_e − w_e r̄'_e


def element_strain(params: TetherParams, state: TetherState):
    """Per element k: ε_k = |r̄'|/l − 1, material strain rate ε̇_k and the unit tangent τ_k (n, 3), with
    r̄' = n (r_{k+1} − r_k). "nodal": ε̇_k = (r̄'·ṙ̄')/(l|r̄'|) − (l̇/l)|r̄'|/l; "energy_consistent":
    ε̇_k = τ_k · ∂_s u = n τ_k·(u_{k+1} − u_k)/l. Returns ElementStrain (eps (n,), eps_dot (n,), tau (n, 3))."""
    n = params.n_elements
    check_mesh(params, state)
    l, l_dot = state.s[1] - state.s[0], state.s_dot[1] - state.s_dot[0]
    d = n * jnp.diff(state.r, axis=0)                                               # r̄'
    stretch = jnp.linalg.norm(d, axis=1)                                            # |r̄'|
    eps, tau = stretch / l - 1, d / stretch[:, None]
    if params.formulation == "energy_consistent":                                   # ε̇ = τ·∂_s u
        return ElementStrain(eps, n * jnp.sum(tau * jnp.diff(material_velocities(params, state), axis=0), axis=1) / l,
                             tau)
    d_dot = n * jnp.diff(state.v, axis=0)                                           # ṙ̄'
    return ElementStrain(eps, jnp.sum(d * d_dot, axis=1) / (l * stretch) - l_dot * stretch / l**2, tau)


def element_tension(params: TetherParams, eps, eps_dot):
    """Kelvin–Voigt tension with slack: N = max(EA (ε + α ε̇), 0), (n,). Written `where(N > 0, N, 0)`, so
    at N = 0 exactly jax.grad sees the slack branch (derivative 0); everywhere else the active branch."""
    tension = params.EA * (eps + params.alpha * eps_dot)
    return jnp.where(tension > 0, tension, jnp.zeros_like(tension))


# ---------------------------------------------------------------------------------------------
# Galerkin matrices and nodal forces

def mass_bands(params: TetherParams, l):
    """Tridiagonal mass matrix ρ l ∫ N_i N_j ds̄ as (diagonal (n+1,), off-diagonal (n,)): consistent
    ρ l h [1/3, 2/3, …, 2/3, 1/3] and ρ l h/6, or lumped ρ l h [1/2, 1, …, 1, 1/2] and 0 (h = 1/n)."""
    n = params.n_elements
    ends = jnp.zeros(n + 1, l.dtype).at[0].set(1.0).at[-1].set(1.0)
    weight = params.rho * l / n
    if params.lumped:
        return weight * (1 - ends / 2), jnp.zeros(n, l.dtype)
    return weight * (2 - ends) / 3, weight * jnp.ones(n, l.dtype) / 6


def mass_apply(diag, off, x):
    """M x for the tridiagonal M = bands(diag, off) and x (n+1, 3)."""
    out = diag[:, None] * x
    out = out.at[:-1].add(off[:, None] * x[1:])
    return out.at[1:].add(off[:, None] * x[:-1])


def element_weights(c, h):
    """∫ N_i c ds̄ over each element for c linear between nodal values c (n+1,): node k and node k+1
    shares h (c_k/3 + c_{k+1}/6) and h (c_k/6 + c_{k+1}/3), each (n,)."""
    return h * (c[:-1] / 3 + c[1:] / 6), h * (c[:-1] / 6 + c[1:] / 3)


def _scatter(left, right, vec):
    """Assemble per-element nodal shares: node k gets left_k vec_k, node k+1 gets right_k vec_k."""
    out = jnp.zeros((vec.shape[0] + 1, vec.shape[1]), vec.dtype)
    return out.at[:-1].add(left[:, None] * vec).at[1:].add(right[:, None] * vec)


def transport_forces(params: TetherParams, state: TetherState, s_ddot):
    """T (n+1, 3): the inertia terms of a moving mesh, ρ l ∫ N_i [−2 w ṙ̄' + (w w' − ∂_t w) r̄'] ds̄ plus the
    node jumps ρ l w_i² (r̄'_i − r̄'_{i−1}) of w² r̄'' at interior nodes (zero for a fixed length)."""
    n = params.n_elements
    l = state.s[1] - state.s[0]
    w, w_t, w_s = transport_velocity(state, s_ddot)
    d, d_dot = n * jnp.diff(state.r, axis=0), n * jnp.diff(state.v, axis=0)
    out = _scatter(*element_weights(-2 * w, 1.0 / n), d_dot)                  # −2 w ṙ̄'
    out = out + _scatter(*element_weights(w * w_s - w_t, 1.0 / n), d)         # (w w' − ∂_t w) r̄'
    jump = jnp.zeros_like(state.r).at[1:-1].set(d[1:] - d[:-1])                 # [r̄'] at interior nodes
    return params.rho * l * (out + w[:, None] ** 2 * jump)


def internal_forces(tension, tau):
    """F_int (n+1, 3): element k pulls node k by +N_k τ_k and node k+1 by −N_k τ_k."""
    n_vec = tension[:, None] * tau
    return jnp.zeros((tau.shape[0] + 1, 3), tau.dtype).at[:-1].add(n_vec).at[1:].add(-n_vec)


def nodal_forces(params: TetherParams, state: TetherState, s_ddot, external_accel=None):
    """Right-hand side F_int + F_ext − T of M r̈ = F_int + F_ext − T + R (n+1, 3) of the "nodal" form
    (`jaxsoa.systems.tether.energy_consistent.galerkin_forces` covers both), and the element
    (eps, eps_dot, tau, tension) it used. `external_accel` (n+1, 3): a per-point acceleration field at the
    nodes (e.g. gravity gradient −ω̄² A_f r_i); F_ext = M a_ext, exact for fields linear in r."""
    eps, eps_dot, tau = element_strain(params, state)
    tension = element_tension(params, eps, eps_dot)
    rhs = internal_forces(tension, tau) - transport_forces(params, state, s_ddot)
    if external_accel is not None:
        rhs = rhs + mass_apply(*mass_bands(params, state.s[1] - state.s[0]), external_accel)
    return rhs, (eps, eps_dot, tau, tension)
