"""Dense spatial-operator path (docs/user_guide.md §7): the masked transfer operator φ = P_s ⊙ φ_o
and the operator-form dynamics built from it, as a second code path beside the O(n) recursions.

Coordinates: **link frames** (the recursions' choice). Every per-link quantity is expressed in its
own link frame, origin at its inboard joint; the 6x6 block φ(i, j) is the force transform from
link j's frame to link i's frame, X*_i_j = (X*_world_i)⁻¹ X*_world_j, so φ(i, j)ᵀ = X_j_i maps a
motion vector from link i to link j. Link velocities, accelerations and forces are those of
`jaxsoa.rnea` / `jaxsoa.link_motion` (not world-aligned).

Layout: stacked spatial vectors are (6n,) with link k at rows 6k .. 6k+5 (storage order); joint
quantities live in padded slots (n·d,) with link k at k·d .. k·d+d-1, d = `model.dof_max`.
Operators are flat matrices:

    φ_o, φ, M, ψ   (6n, 6n)          block (i, j) at [6i:6i+6, 6j:6j+6]
    H              (n·d, 6n)         blockdiag(S_kᵀ), padded rows zero
    K              (6n, n·d)         block (p(k), k) = φ(p(k), k) G(k)
    D              (n·d, n·d)        blockdiag(S_kᵀ 𝒫_k S_k), identity on the padded slots

Padded slots are dropped at the end with the static index of `model.v_slots` (as `crba` does).
Gravity enters as the world's fictitious acceleration α_world = [0; −g], carried to each link by
the transfer from the world (every link is outboard of the world): α_g(k) = X_k_world α_world.

    V = φᵀ Hᵀ θ̇      α = φᵀ (Hᵀ θ̈ + a) + α_g      f = φ (M α + b − f_ext)      T = H f
    𝓜 = H φ M φᵀ Hᵀ      C = H φ (M (φᵀ a + α_g) + b − f_ext)      T = 𝓜 θ̈ + C

Only φ (through the path matrix P) and a depend on the topology, and both are arrays: batches
of different trees share one compilation. Cost: O(n²) memory, O(n³) flops, all dense products.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxsoa.algorithms.kinematics import (
    forward_kinematics,
    from_slots,
    joint_frames,
    link_spatial_inertia,
    motion_subspaces,
    to_slots,
    world_acceleration,
)
from jaxsoa.multibody.arguments import entry_point
from jaxsoa.multibody.model import Model
from jaxsoa.multibody.traversal import inward, path_matrix
from jaxsoa.spatial.algebra import (
    cross_force,
    cross_motion,
    force_transform,
    inv_act_motion,
    inverse_spd,
    se3_inverse,
)
from jaxsoa.spatial.small_linalg import solve

# ---------------------------------------------------------------------------------------------
# layout helpers

def blocks_to_flat(B):
    """(n, m, r, c) blocks -> (n·r, m·c) matrix, block (i, j) at [i·r:(i+1)·r, j·c:(j+1)·c]."""
    n, m, r, c = B.shape
    return jnp.transpose(B, (0, 2, 1, 3)).reshape(n * r, m * c)


def block_diag(blocks):
    """(n, r, c) -> (n·r, n·c) block-diagonal matrix."""
    n = blocks.shape[0]
    eye = jnp.eye(n, dtype=blocks.dtype)
    return blocks_to_flat(eye[:, :, None, None] * blocks[:, None])


# ---------------------------------------------------------------------------------------------
# the transfer operator

@entry_point(q='q')
def transfer_operator_virtual(model: Model, q):
    """φ_o (6n, 6n): block (i, j) = X*_i_j = (X*_world_i)⁻¹ X*_world_j for EVERY pair (i, j),
    as if each link were inboard of every other. Needs only the world poses of the links."""
    R_world, p_world = forward_kinematics(model, q)
    X_link_world = force_transform(*se3_inverse(R_world, p_world))        # (n, 6, 6)
    X_world_link = force_transform(R_world, p_world)
    return blocks_to_flat(jnp.einsum("iab,jbc->ijac", X_link_world, X_world_link))


def path_selector(model: Model):
    """P_s (6n, 6n): the path matrix P (P[i, j] = 1 iff link i is on the path from link j to the
    root, i == j included) with each 1 replaced by a 6x6 identity and each 0 by a 6x6 zero block."""
    P = path_matrix(model.traversal).astype(model.joint_axis.dtype)
    return jnp.kron(P, jnp.ones((6, 6), P.dtype))


@entry_point(q='q')
def transfer_operator(model: Model, q):
    """φ = P_s ⊙ φ_o (6n, 6n): block (i, j) = φ(i, j) where link i is on link j's path to the
    root, zero elsewhere."""
    return path_selector(model) * transfer_operator_virtual(model, q)


class OperatorTerms(NamedTuple):
    """The stacked operators at (q, v): phi (6n, 6n), H (n·d, 6n), M (6n, 6n),
    a (6n,) Coriolis accelerations V_k × S_k θ̇_k, b (6n,) gyroscopic forces V_k ×* M_k V_k,
    a_g (6n,) gravity acceleration X_k_world α_world, V (n, 6) link velocities (= φᵀ Hᵀ θ̇)."""
    phi: jax.Array
    H: jax.Array
    M: jax.Array
    a: jax.Array
    b: jax.Array
    a_g: jax.Array
    V: jax.Array


def _checked_phi(model: Model, phi):
    """A transfer operator given by the caller: (6n, 6n) and floating (ValueError / TypeError naming 'phi'),
    in the model's dtype."""
    size = 6 * model.n_links
    if jnp.shape(phi) != (size, size):
        raise ValueError(f"argument 'phi' has shape {jnp.shape(phi)}, expected ({size}, {size}) (6n × 6n)")
    if not jnp.issubdtype(jnp.result_type(phi), jnp.floating):
        raise TypeError(f"argument 'phi' must be a floating-point array, got dtype {jnp.result_type(phi)}")
    return jnp.asarray(phi, model.dtype)


@entry_point(q='q', v='v')
def operator_terms(model: Model, q, v, phi=None) -> OperatorTerms:
    """`OperatorTerms` at (q, v); `phi` (6n, 6n) floating, if given, overrides the transfer operator."""
    n = model.n_links
    phi = transfer_operator(model, q) if phi is None else _checked_phi(model, phi)
    S = motion_subspaces(model)                                         # (n, 6, d)
    H = block_diag(jnp.swapaxes(S, -1, -2))
    I = link_spatial_inertia(model)
    qd_slots = to_slots(model, v)
    v_joint = jnp.einsum("kad,kd->ka", S, qd_slots)                     # Hᵀ θ̇, per link
    V = (phi.T @ v_joint.reshape(-1)).reshape(n, 6)                     # V = φᵀ Hᵀ θ̇
    a = cross_motion(V, v_joint)
    b = cross_force(V, jnp.einsum("kab,kb->ka", I, V))
    R_world, p_world = forward_kinematics(model, q)
    a_world = jnp.broadcast_to(world_acceleration(model), (n, 6))
    a_g = inv_act_motion(R_world, p_world, a_world)
    return OperatorTerms(phi=phi, H=H, M=block_diag(I), a=a.reshape(-1), b=b.reshape(-1), a_g=a_g.reshape(-1), V=V)


def _padded_mass_matrix(model: Model, t: OperatorTerms):
    """H φ M φᵀ Hᵀ + diag(armature) in padded slots."""
    Hphi = t.H @ t.phi
    return Hphi @ t.M @ Hphi.T + jnp.diag(to_slots(model, model.armature).reshape(-1))


def _padded_bias(t: OperatorTerms, f_ext):
    """C in padded slots: H φ (M (φᵀ a + α_g) + b − f_ext)."""
    alpha = t.phi.T @ t.a + t.a_g
    f = t.M @ alpha + t.b
    if f_ext is not None:
        f = f - f_ext.reshape(-1)
    return t.H @ (t.phi @ f)


# ---------------------------------------------------------------------------------------------
# operator-form dynamics

@entry_point(q='q')
def mass_matrix_operator(model: Model, q, phi=None):
    """𝓜 = H φ M φᵀ Hᵀ (nv, nv). `phi` overrides the transfer operator (e.g. the unmasked φ_o)."""
    v = jnp.zeros(model.nv, model.joint_axis.dtype)
    M_pad = _padded_mass_matrix(model, operator_terms(model, q, v, phi))
    index = model.dof_index
    return M_pad[index][:, index]


@entry_point(q='q', v='v', f_ext='f_ext')
def bias_operator(model: Model, q, v, f_ext=None):
    """C(q, v) = H φ (M (φᵀ a + α_g) + b − f_ext) (nv,): Coriolis, centrifugal, gravity and
    external forces (`f_ext` (n, 6) link-frame wrenches or None)."""
    return from_slots(model, _padded_bias(operator_terms(model, q, v), f_ext).reshape(model.n_links, -1))


@entry_point(q='q', v='v', a='v', f_ext='f_ext')
def inverse_dynamics_operator(model: Model, q, v, a, f_ext=None):
    """T = 𝓜 θ̈ + C, evaluated as the operator chain α = φᵀ (Hᵀ θ̈ + a) + α_g,
    f = φ (M α + b − f_ext), T = H f. Returns (nv,)."""
    t = operator_terms(model, q, v)
    qdd = to_slots(model, a).reshape(-1)
    alpha = t.phi.T @ (t.H.T @ qdd + t.a) + t.a_g
    f = t.M @ alpha + t.b
    if f_ext is not None:
        f = f - f_ext.reshape(-1)
    return from_slots(model, (t.H @ (t.phi @ f)).reshape(model.n_links, -1)) + model.armature * a


@entry_point(q='q', v='v', tau='v', f_ext='f_ext')
def forward_dynamics_operator(model: Model, q, v, tau, f_ext=None):
    """θ̈ = 𝓜⁻¹ (T − C) by a dense solve of the operator-form mass matrix (`jaxsoa.spatial.small_linalg.solve`:
    no LAPACK, so it runs over several host devices). (nv,)."""
    t = operator_terms(model, q, v)
    index = model.dof_index
    M = _padded_mass_matrix(model, t)[index][:, index]
    C = _padded_bias(t, f_ext)[index]
    return solve(M, tau - C)


# ---------------------------------------------------------------------------------------------
# innovations factorization (docs/derivations.md, "ABA in innovations form")

class InnovationsFactors(NamedTuple):
    """Innovations factors of the padded mass matrix, all flat (see the module docstring): H (n·d, 6n),
    phi (6n, 6n), K (6n, n·d), D (n·d, n·d), D_inv, psi (6n, 6n), tau_bar (6n, 6n), E (6n, 6n) the
    one-step transfer (block (p(k), k) = φ(p(k), k)). The real slots are `model.dof_index`."""
    H: jax.Array
    phi: jax.Array
    K: jax.Array
    D: jax.Array
    D_inv: jax.Array
    psi: jax.Array
    tau_bar: jax.Array
    E: jax.Array


def _nilpotent_inverse(X, n: int):
    """(I − X)⁻¹ = Σ_{k<n} Xᵏ for a one-step transfer X along a tree of n links (Xⁿ = 0: block (i, j) of
    Xᵏ is nonzero only for i the k-th ancestor of j), as ∏_j (I + X^(2^j)) over ⌈log₂ n⌉ factors: dense
    products only, exact for any traced tree, and no LAPACK call (docs/performance.md, "Batch-last core")."""
    psi, power = jnp.eye(X.shape[-1], dtype=X.dtype), X
    for _ in range((n - 1).bit_length()):            # ψ ← ψ (I + X^(2^j));  X^(2^j) ← (X^(2^j))²
        psi, power = psi + psi @ power, power @ power
    return psi


@entry_point(q='q')
def innovations_factors(model: Model, q) -> InnovationsFactors:
    """`InnovationsFactors` at q.

    The articulated inertias 𝒫 come from one inward pass (a Riccati recursion; the dense
    operators are then assembled from its per-link outputs):
        𝒫(k) = M(k) + Σ_c φ(k,c) 𝒫⁺(c) φᵀ(k,c),  D = H 𝒫 Hᵀ,  G = 𝒫 Hᵀ D⁻¹,  τ̄ = I − G H,  𝒫⁺ = τ̄ 𝒫.
    K = E · blockdiag(G),  ψ = (I − E · blockdiag(τ̄))⁻¹ (`_nilpotent_inverse`; so ψ(p(k), k) = φ(p(k), k) τ̄(k) and
    ψ(i, j) = ψ(i, p(j)) ψ(p(j), j), built "like φ", since φ = (I − E)⁻¹). Identities:
        𝓜 = (I + HφK) D (I + HφK)ᵀ,   (I + HφK)⁻¹ = I − HψK,   𝓜⁻¹ = (I − HψK)ᵀ D⁻¹ (I − HψK)
    on the padded slots (D is the identity there, so the padded block is decoupled)."""
    n = model.n_links
    frames, S = joint_frames(model, q), motion_subspaces(model)
    I = link_spatial_inertia(model)
    pad = jnp.asarray(~model.dof_mask, I.dtype)
    eye6 = jnp.eye(6, dtype=I.dtype)

    def step(data, P_children):
        R, p, S_k, I_k, pad_k, armature_k = data
        P = I_k + P_children
        U = P @ S_k
        D = S_k.T @ U + jnp.diag(pad_k + armature_k)                 # D = H 𝒫 Hᵀ + armature
        D_inv = inverse_spd(D)
        G = U @ D_inv
        tau_bar = eye6 - G @ S_k.T
        X = force_transform(R, p)
        return (D, D_inv, G, tau_bar), X @ (tau_bar @ P) @ X.T

    data = (*frames, S, I, pad, to_slots(model, model.armature))
    D, D_inv, G, tau_bar = inward(model.traversal, step, data, jnp.zeros((6, 6), I.dtype))
    phi_o = transfer_operator_virtual(model, q)
    links = jnp.arange(n, dtype=model.parent.dtype)
    parent_mask = (model.parent[None, :] == links[:, None]).astype(I.dtype)      # [i, j] = 1 iff i = p(j)
    E = jnp.kron(parent_mask, jnp.ones((6, 6), I.dtype)) * phi_o
    psi = _nilpotent_inverse(E @ block_diag(tau_bar), n)
    H = block_diag(jnp.swapaxes(S, -1, -2))
    return InnovationsFactors(H=H, phi=path_selector(model) * phi_o, K=E @ block_diag(G), D=block_diag(D),
                              D_inv=block_diag(D_inv), psi=psi, tau_bar=block_diag(tau_bar), E=E)


@entry_point(q='q', v='v', tau='v', f_ext='f_ext')
def forward_dynamics_innovations(model: Model, q, v, tau, f_ext=None):
    """θ̈ = (I − HψK)ᵀ D⁻¹ (I − HψK) (T − C), the innovations form of 𝓜⁻¹, dense. (nv,)."""
    fac = innovations_factors(model, q)
    t = operator_terms(model, q, v, fac.phi)
    index, size = model.dof_index, model.n_links * model.dof_max
    rhs = jnp.zeros(size, tau.dtype).at[index].set(tau - _padded_bias(t, f_ext)[index])
    L = jnp.eye(size, dtype=tau.dtype) - fac.H @ fac.psi @ fac.K
    return (L.T @ (fac.D_inv @ (L @ rhs)))[index]
