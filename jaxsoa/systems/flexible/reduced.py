"""Assumed modes through the same recursions: a Rayleigh–Ritz reduction of the rigid-finite-element
links of `jaxsoa.systems.flexible.rfem` (docs/flexible.md §8).

Each beam's deformation-joint angles follow m assumed shapes per bending axis, η ∈ ℝᵐ:
the piece i of a beam is oriented by the slope w' at its middle (piece 0, welded to the link, by 0,
the clamped root), so with w = Σ_j φ_j η_j, φ_j = (x/L)^(j+1),

    θ_i = w'(ξ_i) − w'(ξ_{i−1}),   ξ_0 = 0, ξ_i = i h (i < N), ξ_N = L − h/4,    i.e. θ_def = Ψ η.

Reduced coordinates q_r = (rigid q, η), v_r = (rigid v, η̇); the full velocities are v = T v_r with
a constant T (identity on rigid velocities, Ψ on the deformation joints), so Lagrange's equations
of the constrained chain are exact projections of the full ones:

    (Tᵀ 𝓜 T) v̇_r = τ_r − Tᵀ (C(q, v) − Q_e),    𝓜, C from CRBA + RNEA ("recursive") or the dense
    masked operators ("dense").

The chain's kinematics are exact, so geometric stiffening is present (as in the chain itself).
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from jaxsoa.algorithms.dynamics import crba, nonlinear_effects
from jaxsoa.algorithms.operators import bias_operator, mass_matrix_operator
from jaxsoa.multibody.scalars import check_positive_steps
from jaxsoa.spatial.small_linalg import solve
from jaxsoa.systems.flexible.rfem import FlexibleModel, elastic_forces


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class ReducedModel:
    """A `FlexibleModel`, the velocity map T (nv, nv_r), the basis Ψ (n_def, n_η) with
    θ_def = Ψ η, and the static q indices of the rigid coordinates `q_rigid`."""
    flexible: FlexibleModel
    T: jax.Array
    basis: jax.Array
    q_rigid: tuple = dataclasses.field(metadata=dict(static=True))


def _slope_basis(n_segments, length, n_modes):
    """(N, m) Ψ of one bending axis of one beam: θ_i = Σ_j (φ_j'(ξ_i) − φ_j'(ξ_{i−1})) η_j."""
    h = length / n_segments
    xi = np.concatenate([[0.0], h * np.arange(1, n_segments), [length - h / 4]])
    powers = np.arange(2, n_modes + 2)
    slope = powers * (xi[:, None] / length) ** (powers - 1) / length            # φ_j'(ξ_i)
    return np.diff(slope, axis=0)


def reduce(fm: FlexibleModel, n_modes, beams):
    """Host builder: `ReducedModel` of `fm` with `n_modes` shapes per bending axis. `beams` is the
    {link: Beam} dictionary `fm` was built from (same order as `fm.beams`). Checks: `n_modes` an int
    (TypeError for a float such as 2.0) in [1, n_segments] of every beam, each Beam (`Beam.validate`),
    and that the beams have `fm`'s deformation joints."""
    n_modes = check_positive_steps("n_modes", n_modes)
    blocks = []
    for link, beam in sorted(beams.items()):
        beam.validate(f"beams[{link}]")
        if n_modes > beam.n_segments:
            raise ValueError(f"argument 'n_modes' = {n_modes} exceeds the beam's n_segments = {beam.n_segments}")
        psi = _slope_basis(beam.n_segments, beam.length, n_modes)
        n_axes = len(beam.bending_axes)
        block = np.zeros((beam.n_segments * n_axes, n_axes * n_modes))
        for a in range(n_axes):                       # joints of one node are consecutive: (z, y) per node
            block[a::n_axes, a * n_modes:(a + 1) * n_modes] = psi
        blocks.append(block)
    rows = sum(b.shape[0] for b in blocks)
    if rows != len(fm.v_index):
        raise ValueError("field 'beams' does not match the FlexibleModel's deformation joints")
    basis = np.zeros((rows, sum(b.shape[1] for b in blocks)))
    r = c = 0
    for b in blocks:
        basis[r:r + b.shape[0], c:c + b.shape[1]] = b
        r, c = r + b.shape[0], c + b.shape[1]
    model = fm.model
    v_rigid = np.setdiff1d(np.arange(model.nv), fm.v_index)
    T = np.zeros((model.nv, v_rigid.size + basis.shape[1]))
    T[v_rigid, np.arange(v_rigid.size)] = 1.0
    T[np.asarray(fm.v_index, np.int64), v_rigid.size:] = basis
    q_rigid = tuple(np.setdiff1d(np.arange(model.nq), fm.q_index).tolist())
    dtype = fm.stiffness.dtype
    return ReducedModel(fm, jnp.asarray(T, dtype), jnp.asarray(basis, dtype), q_rigid)


def _check_reduced(rm: ReducedModel, **states):
    """Each state of one sample: q_r (rigid nq + n_η,), v_r and tau_r (nv_r,) (ValueError naming it: another
    length failed deep inside a product, or had its slots clamped)."""
    sizes = dict(q_r=len(rm.q_rigid) + rm.basis.shape[1])
    for name, value in states.items():
        expected = (sizes.get(name, rm.T.shape[1]),)
        if jnp.shape(value) != expected:
            raise ValueError(f"argument '{name}' has shape {jnp.shape(value)}, expected {expected}")


def expand(rm: ReducedModel, q_r, v_r):
    """Full (q (nq,), v (nv,)) of the chain from reduced coordinates (q_r = (rigid q, η)); the shapes of
    q_r and v_r are checked. A model with no rigid coordinates (a clamped beam) has q_r = η."""
    _check_reduced(rm, q_r=q_r, v_r=v_r)
    n_rigid = len(rm.q_rigid)
    q = jnp.zeros(rm.flexible.model.nq, q_r.dtype).at[np.asarray(rm.q_rigid, np.intp)].set(q_r[:n_rigid])
    q = q.at[np.asarray(rm.flexible.q_index, np.intp)].set(rm.basis @ q_r[n_rigid:])
    return q, rm.T @ v_r


def forward_dynamics_reduced(rm: ReducedModel, q_r, v_r, tau_r, method="recursive"):
    """v̇_r = (Tᵀ𝓜T)⁻¹ (τ_r − Tᵀ(C − Q_e)); τ_r: rigid joint torques then modal forces. (nv_r,).
    The shapes of q_r, v_r and tau_r are checked."""
    if method not in ("recursive", "dense"):
        raise ValueError(f"method must be 'recursive' or 'dense', got {method!r}")
    _check_reduced(rm, tau_r=tau_r)
    fm = rm.flexible
    q, v = expand(rm, q_r, v_r)
    if method == "recursive":
        M, C = crba(fm.model, q), nonlinear_effects(fm.model, q, v)
    else:
        M, C = mass_matrix_operator(fm.model, q), bias_operator(fm.model, q, v)
    rhs = tau_r - rm.T.T @ (C - elastic_forces(fm, q, v))
    return solve(rm.T.T @ M @ rm.T, rhs)
