"""Inertial parameters of a `Model` and the linear inverse-dynamics regressor τ = Y(q, v, a) θ.

Parameter vector of one link (Pinocchio's `Inertia.toDynamicParameters` order), in the link's
frame (origin at its inboard joint, the frame of the selected inboard interface):

    π = [m, h_x, h_y, h_z, I_xx, I_xy, I_yy, I_xz, I_yz, I_zz]     h = m c,  I = I_com + m (|c|² 1 − c cᵀ)

with I the rotational inertia about the link frame's origin. A model's parameters θ (n, 10) stack
one π per link in storage order; the regressor's columns follow θ.reshape(-1) (link-major).

The link wrench f = M(π) α + V ×* M(π) V is linear in π, with the spatial inertia
M(π) = [[I, ĥ], [ĥᵀ, m 1]], so `body_regressor` is the exact Jacobian of that linear map, and
`joint_torque_regressor` (Pinocchio's `computeJointTorqueRegressor`) is assembled in world axes:

    Y[j, k] = P[j, k] S_jᵀ(world) X*_world_k A_k(V_k, α_k),   τ_j = Σ_{k in subtree(j)} Y[j, k] π_k

(P the path matrix, O(n²) memory). No external wrenches enter Y.
"""

import dataclasses
import functools

import jax
import jax.numpy as jnp

from jaxsoa.algorithms.kinematics import (
    forward_kinematics,
    from_slots,
    link_motion,
    motion_subspaces,
    world_acceleration,
)
from jaxsoa.multibody.arguments import entry_point
from jaxsoa.multibody.config_space import random_configuration
from jaxsoa.multibody.model import Model, link_inertia
from jaxsoa.multibody.traversal import path_matrix
from jaxsoa.spatial.algebra import cross_force, force_transform, mat_mul, mat_vec, motion_transform, skew

N_PARAMETERS = 10
# (row, column) of I_xx, I_xy, I_yy, I_xz, I_yz, I_zz in the 3x3 inertia
_INERTIA_ENTRIES = ((0, 0), (0, 1), (1, 1), (0, 2), (1, 2), (2, 2))


def rotational_inertia(entries):
    """(..., 6) [I_xx, I_xy, I_yy, I_xz, I_yz, I_zz] -> (..., 3, 3) symmetric matrix."""
    xx, xy, yy, xz, yz, zz = (entries[..., i] for i in range(6))
    return jnp.stack([jnp.stack([xx, xy, xz], -1), jnp.stack([xy, yy, yz], -1), jnp.stack([xz, yz, zz], -1)], -2)


def inertia_entries(inertia):
    """(..., 3, 3) -> (..., 6) in the order of `rotational_inertia`."""
    return jnp.stack([inertia[..., i, j] for i, j in _INERTIA_ENTRIES], -1)


def parameters_from_inertia(mass, com, inertia_com):
    """(...,), (..., 3), (..., 3, 3) -> π (..., 10): h = m c, I = I_com + m (|c|² 1 − c cᵀ)."""
    m = mass[..., None, None]
    c_hat = skew(com)
    inertia_origin = inertia_com - m * (c_hat @ c_hat)                  # −ĉĉ = |c|² 1 − c cᵀ
    return jnp.concatenate([mass[..., None], mass[..., None] * com, inertia_entries(inertia_origin)], -1)


def inertia_from_parameters(theta):
    """π (..., 10) -> mass (...,), com (..., 3), inertia_com (..., 3, 3): c = h / m,
    I_com = I + ĥĥ / m. Needs m > 0 wherever h ≠ 0; a link with m = 0 gets c = 0 (its h must be 0,
    which every physically consistent π satisfies)."""
    mass, h = theta[..., 0], theta[..., 1:4]
    positive = mass > 0
    inv_mass = jnp.where(positive, 1.0 / jnp.where(positive, mass, 1.0), 0.0)
    h_hat = skew(h)
    inertia_com = rotational_inertia(theta[..., 4:]) + inv_mass[..., None, None] * (h_hat @ h_hat)
    return mass, h * inv_mass[..., None], inertia_com


def inertial_parameters(model: Model):
    """θ (n, 10) of the model's links, each in its selected inboard interface's frame."""
    return parameters_from_inertia(*link_inertia(model))


def with_inertial_parameters(model: Model, theta) -> Model:
    """The model with θ (n, 10) written into each link's *selected* inboard interface (other
    interfaces keep their values). Pure and traceable: vmap over θ for a batch of parameter sets.
    θ is not validated here (traced): see `jaxsoa.workflows.identification.check_physical_consistency`."""
    mass, com, inertia_com = inertia_from_parameters(theta.astype(model.mass.dtype))
    rows, sel = jnp.arange(model.n_links), model.inboard_interface
    return dataclasses.replace(model, mass=model.mass.at[rows, sel].set(mass), com=model.com.at[rows, sel].set(com),
                               inertia_com=model.inertia_com.at[rows, sel].set(inertia_com))


def spatial_inertia_from_parameters(theta):
    """π (..., 10) -> (..., 6, 6) M(π) = [[I, ĥ], [ĥᵀ, m 1]], linear in π."""
    inertia = rotational_inertia(theta[..., 4:])
    h_hat = skew(theta[..., 1:4])
    m_eye = theta[..., 0, None, None] * jnp.broadcast_to(jnp.eye(3, dtype=theta.dtype), inertia.shape)
    top = jnp.concatenate([inertia, h_hat], -1)
    return jnp.concatenate([top, jnp.concatenate([jnp.swapaxes(h_hat, -1, -2), m_eye], -1)], -2)


def body_regressor(velocity, acceleration):
    """A (6, 10) with f = M(π) α + V ×* M(π) V = A(V, α) π, for one link's (6,) V and α (link
    frame, gravity included in α). Exact: the Jacobian of a linear map."""
    def wrench(theta):
        M = spatial_inertia_from_parameters(theta)
        return mat_vec(M, acceleration) + cross_force(velocity, mat_vec(M, velocity))

    return jax.jacfwd(wrench)(jnp.zeros(N_PARAMETERS, velocity.dtype))


@entry_point(q='q', v='v', a='v')
def joint_torque_regressor(model: Model, q, v, a):
    """Y (nv, 10 n) with τ = rnea(model, q, v, a) = Y θ.reshape(-1) for every θ (module doc)."""
    v_links, a_links = link_motion(model, q, v, a, world_acceleration(model))   # α includes −g
    A = jax.vmap(body_regressor)(v_links, a_links)                                    # (n, 6, 10)
    R_world_link, p_world_link = forward_kinematics(model, q)
    A_world = force_transform(R_world_link, p_world_link) @ A                       # X*_world_k A_k
    S_world = mat_mul(motion_transform(R_world_link, p_world_link), motion_subspaces(model))  # (n, 6, d)
    P = path_matrix(model.traversal).astype(A.dtype)
    Y_slots = jnp.einsum("jad,kap,jk->kpjd", S_world, A_world, P)                   # (n, 10, n, d)
    return from_slots(model, Y_slots).reshape(model.n_links * N_PARAMETERS, model.nv).T


@functools.partial(jax.jit, static_argnames="n_samples")
def random_regressor(model: Model, key, n_samples: int):
    """(n_samples · nv, 10 n) regressor stacked over random states (q from `random_configuration`,
    v and a standard normal): the input of `jaxsoa.workflows.identification.base_parameters` for the structural
    identifiability of a model, independent of any trajectory."""
    k_q, k_v, k_a = jax.random.split(key, 3)
    q = jax.vmap(lambda k: random_configuration(model, k))(jax.random.split(k_q, n_samples))
    v, a = (jax.random.normal(k, (n_samples, model.nv), model.joint_axis.dtype) for k in (k_v, k_a))
    Y = jax.vmap(joint_torque_regressor, in_axes=(None, 0, 0, 0))(model, q, v, a)
    return Y.reshape(-1, Y.shape[-1])
