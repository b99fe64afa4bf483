"""Energies and the centre-of-mass Jacobian (Pinocchio's `computeKineticEnergy`,
`computePotentialEnergy` and `jacobianCenterOfMass`).

Shapes: q (nq,), v (nv,) of one sample (a leading batch axis through the entry point); energies are
scalars, the Jacobian (3, nv). Links welded to the world (a fixed base) carry no energy and are left
out of the centre of mass, as in Pinocchio.
"""

import jax.numpy as jnp

from jaxsoa.algorithms.kinematics import (
    forward_kinematics,
    joint_jacobians_at,
    link_spatial_inertia,
    link_velocities,
    welded_to_world,
)
from jaxsoa.multibody.arguments import entry_point
from jaxsoa.multibody.model import Model, link_inertia
from jaxsoa.spatial.algebra import mat_vec


def _moving_mass_and_com(model: Model, placements):
    """(n,) masses (zero on links welded to the world) and (n, 3) centres of mass, world frame."""
    R_world_link, p_world_link = placements
    mass, com, _ = link_inertia(model)
    return jnp.where(welded_to_world(model), 0.0, mass), p_world_link + mat_vec(R_world_link, com)


@entry_point(q='q', v='v')
def kinetic_energy(model: Model, q, v):
    """T = ½ Σ_k V_kᵀ I_k V_k over the links (link frames), Pinocchio's `computeKineticEnergy`. The rotor
    inertia `model.armature` is not a link's: ½ vᵀ M v = T + ½ Σ armature ⊙ v² (M from `crba`)."""
    V = link_velocities(model, q, v)                                          # (n, 6)
    return 0.5 * jnp.sum(V * mat_vec(link_spatial_inertia(model), V))


@entry_point(q='q')
def potential_energy(model: Model, q):
    """U = −Σ_k m_k gᵀ c_k (world frame, links that can move), Pinocchio's `computePotentialEnergy`: zero
    at the world origin, so U(q) + T(q, v) is conserved by the unforced dynamics."""
    mass, com_world = _moving_mass_and_com(model, forward_kinematics(model, q))
    return -jnp.sum(mass * (com_world @ model.gravity))


@entry_point(q='q')
def center_of_mass_jacobian(model: Model, q):
    """(3, nv) J_c with ċ = J_c v (Pinocchio's `jacobianCenterOfMass`): J_c = Σ m_k (J_v,k − [c_k]× J_ω,k) /
    Σ m_k from the world-origin Jacobians (the velocity of the point c_k is v_O + ω × c_k)."""
    placements = forward_kinematics(model, q)
    J = joint_jacobians_at(model, placements, "world")                        # (n, 6, nv) [ω; v_O]
    mass, com_world = _moving_mass_and_com(model, placements)
    J_point = J[:, 3:] - jnp.cross(com_world[:, :, None], J[:, :3], axis=1)   # v_c = v_O − c × ω
    return jnp.sum(mass[:, None, None] * J_point, 0) / jnp.sum(mass)
