"""The Lie groups of the joints' configuration spaces: one `LieGroup` per `JointType` in `RULES` (neutral
configuration, random draw, q ⊕ v, q1 ⊖ q0, dexp⁻¹ and the unit-norm columns of q), each acting on k joints at
once. `jaxsoa.multibody.config_space` applies them to a model's columns; a new joint type adds its member in
`jaxsoa.multibody.joints` and its row here.
"""

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxsoa.multibody.joints import JointType, unit_complex
from jaxsoa.multibody.model import Model
from jaxsoa.spatial.algebra import skew
from jaxsoa.spatial.rotation import (
    log_so3,
    quat_exp,
    quat_multiply,
    quat_normalize,
    quat_to_rotation,
)


class LieGroup(NamedTuple):
    """Configuration-space rules of one joint type, for k joints at once.

    neutral: q of one joint at its neutral configuration (nq values).
    random(u, key_rotation, key_position, angle_range, position_range) -> (k, nq), with u (k, nq)
        uniform in ±angle_range.
    integrate(q (k, nq), v (k, nv)) -> q ⊕ v (k, nq).
    dexp_inv(δ (k, nv), v (k, nv)) -> δ̇ (k, nv), or None where the group is a vector space (δ̇ = v).
    quaternion: the q columns holding a unit quaternion (x, y, z, w), or None.
    difference(q0 (k, nq), q1 (k, nq)) -> v (k, nv) with integrate(q0, v) = q1, the shortest such v.
    unit_complex: the q columns holding a unit complex number (cos θ, sin θ), or None.
    """
    neutral: tuple
    random: Callable
    integrate: Callable
    dexp_inv: Callable | None = None
    quaternion: slice | None = None
    difference: Callable | None = None
    unit_complex: slice | None = None


def _random_quaternions(key, k, dtype):
    """(k, 4) uniform random unit quaternions (normalised Gaussians)."""
    return quat_normalize(jax.random.normal(key, (k, 4), dtype))


def _random_free(u, key_rotation, key_position, angle_range, position_range):
    position = jax.random.uniform(key_position, (u.shape[0], 3), u.dtype, -position_range, position_range)
    return jnp.concatenate([position, _random_quaternions(key_rotation, u.shape[0], u.dtype)], -1)


def _random_planar(u, key_rotation, key_position, angle_range, position_range):
    """(x, y) uniform in ±position_range (a stream of its own), θ = u₂ uniform in ±angle_range."""
    k_planar = jax.random.fold_in(key_position, JointType.PLANAR)
    position = jax.random.uniform(k_planar, (u.shape[0], 2), u.dtype, -position_range, position_range)
    return jnp.concatenate([position, jnp.cos(u[:, 2:3]), jnp.sin(u[:, 2:3])], -1)    # (x, y, cos θ, sin θ)


def _integrate_spherical(q, v):
    return quat_normalize(quat_multiply(q, quat_exp(v)))                 # q ⊗ exp(ω)


def _integrate_free(q, v):
    """SE(3) exponential of the body twist (v, ω): p += R V(ω) v, quat ← quat ⊗ exp(ω)."""
    quat, lin, ang = q[:, 3:], v[:, :3], v[:, 3:]
    R = quat_to_rotation(quat_normalize(quat))
    step = jnp.einsum("kij,kj->ki", _so3_left_jacobian(ang), lin)
    return jnp.concatenate([q[:, :3] + jnp.einsum("kij,kj->ki", R, step), _integrate_spherical(quat, ang)], -1)


def _theta_coefficient(w, series, exact):
    """(k, 3) -> (k, 1, 1): a function of θ = |ω|, from its Taylor series `series(θ²)` where θ² < 1e-8 and
    `exact(θ, θ²)` elsewhere (double where: `exact` never sees θ = 0, so gradients stay finite there)."""
    theta2 = jnp.sum(w * w, -1)[:, None, None]
    small = theta2 < 1e-8
    theta2_safe = jnp.where(small, 1.0, theta2)
    return jnp.where(small, series(theta2), exact(jnp.sqrt(theta2_safe), theta2_safe))


def _so3_quadratic(w, a, b):
    """(k, 3) -> (k, 3, 3): I + a ω̂ + b ω̂²."""
    w_hat = skew(w)
    eye = jnp.broadcast_to(jnp.eye(3, dtype=w.dtype), w_hat.shape)
    return eye + a * w_hat + b * (w_hat @ w_hat)


def _so3_left_jacobian(w):
    """(k, 3) -> (k, 3, 3): V(ω) = I + (1−cosθ)/θ² ω̂ + (θ−sinθ)/θ³ ω̂², with 1 − cos θ = 2 sin²(θ/2) (no
    cancellation at small θ, where 1 − cos θ loses ε/θ² relative; the ω̂² term's loss is O(ε) in V)."""
    a = _theta_coefficient(w, lambda t2: 0.5 - t2 / 24.0, lambda t, t2: 2 * jnp.sin(0.5 * t) ** 2 / t2)
    b = _theta_coefficient(w, lambda t2: 1.0 / 6.0 - t2 / 120.0, lambda t, t2: (t - jnp.sin(t)) / (t * t2))
    return _so3_quadratic(w, a, b)


def _so3_left_jacobian_inverse(w):
    """(k, 3) -> (k, 3, 3): V(ω)⁻¹ = I − ½ ω̂ + (1 − (θ/2) cot(θ/2))/θ² ω̂², for θ ≤ π (singular at 2π)."""
    c = _theta_coefficient(w, lambda t2: 1.0 / 12.0 + t2 / 720.0,
                           lambda t, t2: (1 - 0.5 * t * jnp.cos(0.5 * t) / jnp.sin(0.5 * t)) / t2)
    return _so3_quadratic(w, -0.5, c)


def _difference_spherical(q0, q1):
    """log3(R0ᵀ R1): the rotation vector of angle ≤ π (R(q) = R(−q): the double cover drops out)."""
    R0, R1 = quat_to_rotation(quat_normalize(q0)), quat_to_rotation(quat_normalize(q1))
    return log_so3(jnp.einsum("kji,kjl->kil", R0, R1))                             # ω = log3(R0ᵀ R1)


def _difference_free(q0, q1):
    """log6(M0⁻¹ M1), body twist [v; ω]: ω = log3(R0ᵀ R1), v = V(ω)⁻¹ R0ᵀ (p1 − p0) (inverse of `_integrate_free`)."""
    ang = _difference_spherical(q0[:, 3:], q1[:, 3:])                              # ω = log3(R0ᵀ R1)
    R0 = quat_to_rotation(quat_normalize(q0[:, 3:]))
    p_rel = jnp.einsum("kji,kj->ki", R0, q1[:, :3] - q0[:, :3])                    # R0ᵀ (p1 − p0)
    lin = jnp.einsum("kij,kj->ki", _so3_left_jacobian_inverse(ang), p_rel)        # v = V(ω)⁻¹ R0ᵀ Δp
    return jnp.concatenate([lin, ang], -1)


def _z_cross(x):
    """(k, 2) -> (k, 2): ẑ × x = (−x_y, x_x) in the plane."""
    return jnp.concatenate([-x[:, 1:], x[:, :1]], -1)


def _rotate2(cos_sin, x):
    """(k, 2) unit (cos θ, sin θ), (k, 2) -> (k, 2): R(θ) x = cos θ x + sin θ ẑ × x (the complex product)."""
    return cos_sin[:, :1] * x + cos_sin[:, 1:] * _z_cross(x)


def _about_z(angle):
    """(k, 1) -> (k, 3): the rotation vector (0, 0, ω) (se(2) ⊂ se(3): V(ω) is the x-y block of SO(3)'s)."""
    return jnp.pad(angle, ((0, 0), (2, 0)))


def _turn(angle):
    """(k, 1) -> (k, 2): the unit complex number e^{iω} = (cos ω, sin ω)."""
    return jnp.concatenate([jnp.cos(angle), jnp.sin(angle)], -1)


def _relative_turn(cos_sin0, cos_sin1):
    """(k, 2), (k, 2) -> e^{−iθ0} (k, 2) and ω = arg(e^{−iθ0} e^{iθ1}) in [−π, π] (k, 1): log(R0ᵀ R1) of SO(2)."""
    cos_sin = unit_complex(cos_sin0)
    inverse = jnp.concatenate([cos_sin[:, :1], -cos_sin[:, 1:]], -1)                     # e^{−iθ0}
    turn = _rotate2(inverse, unit_complex(cos_sin1))                                      # e^{iω} = e^{−iθ0} e^{iθ1}
    return inverse, jnp.arctan2(turn[:, 1:], turn[:, :1])                                # ω = arg e^{iω}


def _integrate_unbounded(q, v):
    """SO(2) exponential: e^{iθ} ← e^{iθ} e^{iω} (Pinocchio's `SpecialOrthogonalOperationTpl<2>::integrate`)."""
    return _rotate2(unit_complex(q), _turn(v))


def _integrate_planar(q, v):
    """SE(2) exponential of the body twist (v_x, v_y, ω): p += R(θ) V(ω) v, e^{iθ} ← e^{iθ} e^{iω}."""
    cos_sin, lin, ang = unit_complex(q[:, 2:]), v[:, :2], v[:, 2:]
    step = jnp.einsum("kij,kj->ki", _so3_left_jacobian(_about_z(ang))[:, :2, :2], lin)     # V(ω) v
    return jnp.concatenate([q[:, :2] + _rotate2(cos_sin, step), _rotate2(cos_sin, _turn(ang))], -1)


def _difference_planar(q0, q1):
    """log SE(2) of M0⁻¹ M1, body twist (v_x, v_y, ω): ω = arg(e^{−iθ0} e^{iθ1}) in [−π, π],
    v = V(ω)⁻¹ R0ᵀ (p1 − p0) (inverse of `_integrate_planar`)."""
    inverse, ang = _relative_turn(q0[:, 2:], q1[:, 2:])                                  # e^{−iθ0}, ω
    p_rel = _rotate2(inverse, q1[:, :2] - q0[:, :2])                                      # R0ᵀ (p1 − p0)
    lin = jnp.einsum("kij,kj->ki", _so3_left_jacobian_inverse(_about_z(ang))[:, :2, :2], p_rel)  # V(ω)⁻¹ R0ᵀ Δp
    return jnp.concatenate([lin, ang], -1)


def _subtract(q0, q1):
    return q1 - q0


def _dexp_inv_series(bracket, delta, v):
    """δ̇ = v + ½ [δ, v] + 1/12 [δ, [δ, v]] (dexp⁻¹ truncated; the next term is O(|δ|⁴))."""
    once = bracket(delta, v)
    return v + 0.5 * once + bracket(delta, once) / 12


def _so3_bracket(d, y):
    return jnp.cross(d, y)


def _se3_bracket(d, y):
    """[(v₁, ω₁), (v₂, ω₂)] = (ω₁×v₂ − ω₂×v₁, ω₁×ω₂), twists in the [v; ω] layout."""
    return jnp.concatenate([jnp.cross(d[:, 3:], y[:, :3]) + jnp.cross(d[:, :3], y[:, 3:]),
                            jnp.cross(d[:, 3:], y[:, 3:])], axis=1)


def _se2_bracket(d, y):
    """[(v₁, ω₁), (v₂, ω₂)] = (ω₁ ẑ×v₂ − ω₂ ẑ×v₁, 0), twists in the (v_x, v_y, ω) layout."""
    lin = d[:, 2:] * _z_cross(y[:, :2]) - y[:, 2:] * _z_cross(d[:, :2])
    return jnp.concatenate([lin, jnp.zeros_like(d[:, 2:])], axis=1)


RULES = {
    JointType.FIXED: LieGroup((), lambda u, *_: u, lambda q, v: q),
    JointType.REVOLUTE: LieGroup((0.0,), lambda u, *_: u, lambda q, v: q + v, difference=_subtract),
    JointType.PRISMATIC: LieGroup((0.0,), lambda u, k_rot, k_pos, angle, position: u * position / angle,
                                   lambda q, v: q + v, difference=_subtract),
    JointType.SPHERICAL: LieGroup((0.0, 0.0, 0.0, 1.0),
                                   lambda u, k_rot, *_: _random_quaternions(k_rot, u.shape[0], u.dtype),
                                   _integrate_spherical,
                                   lambda d, v: _dexp_inv_series(_so3_bracket, d, v), slice(0, 4),
                                   _difference_spherical),
    JointType.FREE: LieGroup((0.0,) * 6 + (1.0,), _random_free, _integrate_free,
                              lambda d, v: _dexp_inv_series(_se3_bracket, d, v), slice(3, 7), _difference_free),
    JointType.PLANAR: LieGroup((0.0, 0.0, 1.0, 0.0), _random_planar, _integrate_planar,
                                lambda d, v: _dexp_inv_series(_se2_bracket, d, v), difference=_difference_planar,
                                unit_complex=slice(2, 4)),
    # SO(2): θ = u₀ uniform in ±angle_range (Pinocchio draws θ in [−π, π], the default); ω = log(R0ᵀ R1), no jump
    # where θ crosses ±π; abelian, so dexp⁻¹ is the identity
    JointType.REVOLUTE_UNBOUNDED: LieGroup((1.0, 0.0), lambda u, *_: _turn(u[:, :1]), _integrate_unbounded,
                                            difference=lambda q0, q1: _relative_turn(q0, q1)[1],
                                            unit_complex=slice(0, 2)),
}


def joint_groups(model: Model):
    """The joint types present in `model`, each once, with their rules (static)."""
    return [(t, RULES[t]) for t in dict.fromkeys(JointType(t) for t in model.joint_types) if t.nq]
