"""Configuration space: neutral and random configurations, integration q ⊕ v on the joints'
Lie groups (quaternions stay unit), and the time derivative q̇(q, v).

Pinocchio's names: `neutral`, `random_configuration` (`randomConfiguration`), `integrate`.
"""

import jax
import jax.numpy as jnp

from jaxsoa import joints
from jaxsoa.model import Model
from jaxsoa.rotation import quat_exp, quat_multiply, quat_normalize, quat_to_rotation
from jaxsoa.spatial import skew


def neutral(model: Model, dtype=None):
    """(nq,) zero angles and displacements, identity quaternions, free joints at the origin."""
    q = jnp.zeros(model.nq, dtype or model.joint_axis.dtype)
    for joint_type in (joints.SPHERICAL, joints.FREE):
        cols = model.q_columns(joint_type)
        if cols.size:
            q = q.at[cols[:, -1]].set(1.0)
    return q


def random_configuration(model: Model, key, angle_range=jnp.pi, position_range=1.0):
    """(nq,) angles and displacements uniform in ±range, uniform random unit quaternions
    (normalised Gaussians) and free-joint positions uniform in ±position_range."""
    k_scalar, k_quat, k_pos = jax.random.split(key, 3)
    dtype = model.joint_axis.dtype
    q = jax.random.uniform(k_scalar, (model.nq,), dtype, -angle_range, angle_range)
    for joint_type in (joints.PRISMATIC,):
        cols = model.q_columns(joint_type)
        if cols.size:
            q = q.at[cols[:, 0]].set(q[cols[:, 0]] * position_range / angle_range)
    for joint_type in (joints.SPHERICAL, joints.FREE):
        cols = model.q_columns(joint_type)
        if cols.size:
            quats = quat_normalize(jax.random.normal(k_quat, (cols.shape[0], 4), dtype))
            q = q.at[cols[:, -4:]].set(quats)
    cols = model.q_columns(joints.FREE)
    if cols.size:
        q = q.at[cols[:, :3]].set(jax.random.uniform(k_pos, (cols.shape[0], 3), dtype,
                                                     -position_range, position_range))
    return q


def integrate(model: Model, q, v):
    """q ⊕ v: q + v for 1-DoF joints, q ⊗ exp(ω) for spherical joints and the SE(3) exponential
    of the body twist (v, ω) for free joints (Pinocchio's `integrate`). (nq,), (nv,) -> (nq,)."""
    out = q
    for joint_type in (joints.REVOLUTE, joints.PRISMATIC):
        cols, vcols = model.q_columns(joint_type), model.v_columns(joint_type)
        if cols.size:
            out = out.at[cols[:, 0]].add(v[vcols[:, 0]])
    cols, vcols = model.q_columns(joints.SPHERICAL), model.v_columns(joints.SPHERICAL)
    if cols.size:
        out = out.at[cols].set(quat_normalize(quat_multiply(q[cols], quat_exp(v[vcols]))))
    cols, vcols = model.q_columns(joints.FREE), model.v_columns(joints.FREE)
    if cols.size:
        quat, twist = q[cols[:, 3:]], v[vcols]
        lin, ang = twist[:, :3], twist[:, 3:]
        R = quat_to_rotation(quat_normalize(quat))
        step = jnp.einsum("kij,kj->ki", _so3_left_jacobian(ang), lin)    # p += R V(ω) v
        out = out.at[cols[:, :3]].add(jnp.einsum("kij,kj->ki", R, step))
        out = out.at[cols[:, 3:]].set(quat_normalize(quat_multiply(quat, quat_exp(ang))))
    return out


def _so3_left_jacobian(w):
    """(k, 3) -> (k, 3, 3): V(ω) = I + (1−cosθ)/θ² ω̂ + (θ−sinθ)/θ³ ω̂²."""
    theta2 = jnp.sum(w * w, -1)[:, None, None]
    small = theta2 < 1e-8
    theta = jnp.sqrt(jnp.where(small, 1.0, theta2))
    a = jnp.where(small, 0.5 - theta2 / 24.0, (1 - jnp.cos(theta)) / jnp.where(small, 1.0, theta2))
    b = jnp.where(small, 1.0 / 6.0 - theta2 / 120.0, (theta - jnp.sin(theta)) / (theta * jnp.where(small, 1.0, theta2)))
    w_hat = skew(w)
    eye = jnp.broadcast_to(jnp.eye(3, dtype=w.dtype), w_hat.shape)
    return eye + a * w_hat + b * (w_hat @ w_hat)


def configuration_derivative(model: Model, q, v):
    """q̇ (nq,) for velocity v: θ̇ for 1-DoF joints, ½ q ⊗ (ω, 0) for quaternions and
    ṗ = R v_linear for free-joint positions."""
    return jax.jvp(lambda t: integrate(model, q, t * v), (jnp.zeros((), v.dtype),),
                   (jnp.ones((), v.dtype),))[1]
