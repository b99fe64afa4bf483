"""Rotations: unit quaternions (x, y, z, w — Pinocchio's storage order), rotation matrices,
and the SO(3) exponential and logarithm maps.

All functions act on the trailing axes and are pure JAX (jit/vmap/grad safe).
"""

import jax.numpy as jnp

from jaxsoa.spatial.algebra import mat_mul, skew, trailing


def quat_normalize(quat_xyzw):
    """(..., 4) -> (..., 4): the unit quaternion q / |q|."""
    return quat_xyzw / jnp.linalg.norm(quat_xyzw, axis=-1, keepdims=True)


def quat_to_rotation(quat_xyzw):
    """(..., 4) unit quaternion (x, y, z, w) -> (..., 3, 3) rotation matrix R (child -> parent)."""
    trailing("quat_xyzw", quat_xyzw, (4,))
    x, y, z, w = (quat_xyzw[..., i] for i in range(4))
    row0 = jnp.stack([1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)], -1)
    row1 = jnp.stack([2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)], -1)
    row2 = jnp.stack([2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)], -1)
    return jnp.stack([row0, row1, row2], -2)


def rotation_to_quat(R):
    """(..., 3, 3) -> (..., 4) unit quaternion (x, y, z, w) with w >= 0 (Shepperd's method,
    branch-free: every candidate is computed and the best-conditioned one selected)."""
    trailing("R", R, (3, 3))
    t = jnp.trace(R, axis1=-2, axis2=-1)
    r00, r11, r22 = R[..., 0, 0], R[..., 1, 1], R[..., 2, 2]
    cands = jnp.stack([
        jnp.stack([R[..., 2, 1] - R[..., 1, 2], R[..., 0, 2] - R[..., 2, 0],
                   R[..., 1, 0] - R[..., 0, 1], 1 + t], -1),
        jnp.stack([1 + r00 - r11 - r22, R[..., 0, 1] + R[..., 1, 0],
                   R[..., 0, 2] + R[..., 2, 0], R[..., 2, 1] - R[..., 1, 2]], -1),
        jnp.stack([R[..., 0, 1] + R[..., 1, 0], 1 - r00 + r11 - r22,
                   R[..., 1, 2] + R[..., 2, 1], R[..., 0, 2] - R[..., 2, 0]], -1),
        jnp.stack([R[..., 0, 2] + R[..., 2, 0], R[..., 1, 2] + R[..., 2, 1],
                   1 - r00 - r11 + r22, R[..., 1, 0] - R[..., 0, 1]], -1),
    ], -2)
    best = jnp.argmax(jnp.stack([t, r00, r11, r22], -1), axis=-1)
    quat = jnp.take_along_axis(cands, best[..., None, None], axis=-2)[..., 0, :]
    quat = quat_normalize(quat)
    return quat * jnp.where(quat[..., 3:] < 0, -1.0, 1.0)


def quat_multiply(q1, q2):
    """Hamilton product q1 ⊗ q2 of (..., 4) quaternions (x, y, z, w); R(q1⊗q2) = R(q1) R(q2)."""
    v1, w1 = q1[..., :3], q1[..., 3:]
    v2, w2 = q2[..., :3], q2[..., 3:]
    v = w1 * v2 + w2 * v1 + jnp.cross(v1, v2)
    w = w1 * w2 - jnp.sum(v1 * v2, axis=-1, keepdims=True)
    return jnp.concatenate([v, w], -1)


def quat_conjugate(quat_xyzw):
    """(..., 4) -> (..., 4): the inverse rotation of a unit quaternion."""
    return jnp.concatenate([-quat_xyzw[..., :3], quat_xyzw[..., 3:]], axis=-1)      # (−x, −y, −z, w)


def quat_exp(rotvec):
    """(..., 3) rotation vector θ·u -> (..., 4) unit quaternion (u sin(θ/2), cos(θ/2)).
    Uses a Taylor branch near θ = 0 that keeps gradients finite."""
    theta2 = jnp.sum(rotvec * rotvec, axis=-1, keepdims=True)
    small = theta2 < 1e-8
    theta = jnp.sqrt(jnp.where(small, 1.0, theta2))
    half_sinc = jnp.where(small, 0.5 - theta2 / 48.0, jnp.sin(theta / 2) / theta)
    cos_half = jnp.where(small, 1.0 - theta2 / 8.0, jnp.cos(theta / 2))
    return jnp.concatenate([rotvec * half_sinc, cos_half], -1)


def exp_so3(rotvec):
    """(..., 3) -> (..., 3, 3): Rodrigues' formula R = I + sinθ/θ ŵ + (1−cosθ)/θ² ŵ²."""
    trailing("rotvec", rotvec, (3,))
    theta2 = jnp.sum(rotvec * rotvec, axis=-1)[..., None, None]
    small = theta2 < 1e-8
    theta = jnp.sqrt(jnp.where(small, 1.0, theta2))
    a = jnp.where(small, 1.0 - theta2 / 6.0, jnp.sin(theta) / theta)
    b = jnp.where(small, 0.5 - theta2 / 24.0, (1.0 - jnp.cos(theta)) / jnp.where(small, 1.0, theta2))
    w_hat = skew(rotvec)
    eye = jnp.broadcast_to(jnp.eye(3, dtype=rotvec.dtype), w_hat.shape)
    return eye + a * w_hat + b * mat_mul(w_hat, w_hat)


def log_so3(R):
    """(..., 3, 3) -> (..., 3) rotation vector, via the quaternion (accurate for angles up to π)."""
    quat = rotation_to_quat(R)
    v, w = quat[..., :3], quat[..., 3]
    sin_half2 = jnp.sum(v * v, axis=-1)
    small = sin_half2 < 1e-16
    sin_half = jnp.sqrt(jnp.where(small, 1.0, sin_half2))   # never the norm of 0: finite reverse-mode
    angle = 2.0 * jnp.arctan2(sin_half, w)                   # gradients at the identity
    scale = jnp.where(small, 2.0 / jnp.where(small, w, 1.0), angle / sin_half)
    return v * scale[..., None]
