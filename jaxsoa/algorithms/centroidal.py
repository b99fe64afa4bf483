"""The centroidal momentum matrix, its time derivative and the centroidal composite inertia (Pinocchio's
`computeCentroidalMap` / `ccrba`, `computeCentroidalMapTimeVariation` / `dccrba` and `data.Ig`).

Shapes: q (nq,), v (nv,) of one sample (a leading batch axis through the entry point). Rows are
`[angular; linear]`, as `centroidal_momentum` returns h_G (Pinocchio's `Ag`, `dAg`, `Ig.matrix()` and `hg`
are `[linear; angular]`: jaxsoa's A_g is Pinocchio's Ag[[3, 4, 5, 0, 1, 2]], I_G the same permutation of
rows and columns). Momenta are about the centre of mass c, world axes. As in Pinocchio and
`center_of_mass`, links welded to the world (a fixed base) are left out.

The passes are Pinocchio's: world-frame link inertias oY_k = X*_world_k Y_k X_world_k⁻¹, their subtree sums
oYcrb_j (one inward pass), A_O[:, c] = oYcrb_j S_c for the world column S_c of velocity c (joint of link j),
then the moment moved from the world origin to c: n_G = n_O − c × f.
"""

import jax
import jax.numpy as jnp

from jaxsoa.algorithms.jacobian_derivatives import joint_columns, velocity_links, world_kinematics
from jaxsoa.algorithms.kinematics import forward_kinematics, joint_jacobians_at, link_spatial_inertia, welded_to_world
from jaxsoa.multibody.arguments import entry_point
from jaxsoa.multibody.model import Model
from jaxsoa.multibody.traversal import inward
from jaxsoa.spatial.algebra import (
    cross_motion,
    force_cross_matrix,
    mat_mul,
    mat_vec,
    motion_cross_matrix,
    transform_inertia,
)


def _world_inertias(model: Model, placements):
    """(n, 6, 6) oY_k = X*_world_k Y_k X_world_k⁻¹ about the world origin, zero on links welded to the world."""
    oY = transform_inertia(*placements, link_spatial_inertia(model))
    return jnp.where(welded_to_world(model)[:, None, None], 0.0, oY)


def _subtree_sums(model: Model, per_link):
    """Pytree of (n, ...) world-frame quantities -> their sums over each link's subtree (inward pass):
    oYcrb_j = oY_j + Σ_children oYcrb_c, no transform since every term is in the world frame."""
    def step(x_k, x_children):
        total = jax.tree.map(jnp.add, x_k, x_children)
        return total, total

    return inward(model.traversal, step, per_link, jax.tree.map(lambda x: jnp.zeros_like(x[0]), per_link))


def _mass_and_com(oY_total):
    """Mass m and centre of mass c (3,) of a world-frame spatial inertia [[J + m ĉĉᵀ, m ĉ], [m ĉᵀ, m 1]]
    (Pinocchio's `oYcrb[0].lever()`): the off-diagonal block is m ĉ."""
    mass = oY_total[3, 3]
    m_c_hat = oY_total[:3, 3:]
    return mass, jnp.stack([m_c_hat[2, 1], m_c_hat[0, 2], m_c_hat[1, 0]]) / mass


def _about_com(A_O, c):
    """(nv, 6) momentum columns about the world origin -> about c, world axes: n_G = n_O − c × f."""
    return jnp.concatenate([A_O[:, :3] - jnp.cross(c[None], A_O[:, 3:]), A_O[:, 3:]], -1)


def _composite(model: Model, per_link):
    """Subtree sums (`_subtree_sums`) of (oY, …) and the mass and centre of mass of the whole, from oY (n, 6, 6)."""
    mass, c = _mass_and_com(jnp.sum(per_link[0], 0))                    # oYcrb[0] = Σ_k oY_k
    return _subtree_sums(model, per_link), mass, c


@entry_point(q='q')
def centroidal_momentum_matrix(model: Model, q):
    """(6, nv) centroidal momentum matrix A_g(q), h_G = A_g v = `centroidal_momentum(model, q, v)` (Pinocchio's
    `computeCentroidalMap` / `ccrba`'s `Ag` with its rows reordered to `[angular; linear]`)."""
    placements = forward_kinematics(model, q)
    (oYcrb,), _, c = _composite(model, (_world_inertias(model, placements),))
    J_cols = joint_columns(model, joint_jacobians_at(model, placements, "world"))
    return _about_com(mat_vec(oYcrb[velocity_links(model)], J_cols), c).T     # A_O[:, c] = oYcrb_j S_c


@entry_point(q='q')
def centroidal_inertia(model: Model, q):
    """(6, 6) centroidal composite rigid-body inertia I_G(q) of the links that can move, about the centre of mass,
    world axes: [[I_c, 0], [0, m 1]] in `[angular; linear]` order (Pinocchio's `data.Ig` after `ccrba`), so that
    h_G = I_G v_G defines the average spatial velocity v_G. A function of its own rather than a second result
    of `centroidal_momentum_matrix` (as `center_of_mass` and `center_of_mass_jacobian`): each result composes
    with `jax.vmap` / `jax.jacfwd` alone, and it costs one forward kinematics and a sum, no Jacobian."""
    oY_total = jnp.sum(_world_inertias(model, forward_kinematics(model, q)), 0)
    _, c = _mass_and_com(oY_total)
    R_com_world = jnp.eye(3, dtype=oY_total.dtype)
    return transform_inertia(R_com_world, -c, oY_total)                  # I_G = X*_G_O oYcrb[0] X*_G_Oᵀ


@entry_point(q='q', v='v')
def centroidal_momentum_matrix_time_variation(model: Model, q, v):
    """(6, nv) dA_g/dt along the motion with velocity v, so that dh_G/dt = A_g a + (dA_g/dt) v (Pinocchio's
    `dccrba` / `computeCentroidalMapTimeVariation`'s `dAg`, rows reordered to `[angular; linear]`).

    doY_k = V_k ×* oY_k − oY_k V_k × (world velocities, Pinocchio's `Inertia::variation`), summed over subtrees;
    dA_O[:, c] = doYcrb_j S_c + oYcrb_j (V_j × S_c); moved to c: dn_G = dn_O − c × df − ċ × f, ċ = f v / m.
    """
    kin = world_kinematics(model, q, v)
    oY = _world_inertias(model, kin.placements)
    doY = mat_mul(force_cross_matrix(kin.V_world), oY) - mat_mul(oY, motion_cross_matrix(kin.V_world))
    (oYcrb, doYcrb), mass, c = _composite(model, (oY, doY))
    links = velocity_links(model)
    J_cols = joint_columns(model, kin.J_world)
    dJ_cols = cross_motion(kin.V_world[links], J_cols)                 # d/dt X_world_j S_c = V_j × X_world_j S_c
    A_G = _about_com(mat_vec(oYcrb[links], J_cols), c)
    dA_O = mat_vec(doYcrb[links], J_cols) + mat_vec(oYcrb[links], dJ_cols)
    c_dot = (A_G[:, 3:].T @ v) / mass                                    # ċ = h_lin / m
    c_dot_cross_f = jnp.cross(c_dot[None], A_G[:, 3:])
    return (_about_com(dA_O, c) - jnp.concatenate([c_dot_cross_f, jnp.zeros_like(c_dot_cross_f)], -1)).T
