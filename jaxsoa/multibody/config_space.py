"""Configuration space: neutral and random configurations, integration q ⊕ v on the joints'
Lie groups (quaternions stay unit), the time derivative q̇(q, v) and the inverse differential
of the exponential used by the manifold Runge–Kutta steps.

Pinocchio's names: `neutral`, `random_configuration` (`randomConfiguration`), `integrate`.

Every per-joint-type rule lives in `_RULES` below, one `_LieGroup` per `JointType`: a new joint
type adds its member in `jaxsoa.multibody.joints` and its row here. The public functions apply
each rule to the links of its type (static columns of q and v, `Model.q_columns`).
"""

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsoa.multibody.arguments import check_model_type, entry_point
from jaxsoa.multibody.joints import JointType
from jaxsoa.multibody.model import Model
from jaxsoa.multibody.scalars import check_scalar
from jaxsoa.spatial.algebra import skew
from jaxsoa.spatial.rotation import quat_exp, quat_multiply, quat_normalize, quat_to_rotation


class _LieGroup(NamedTuple):
    """Configuration-space rules of one joint type, for k joints at once.

    neutral: q of one joint at its neutral configuration (nq values).
    random(u, key_rotation, key_position, angle_range, position_range) -> (k, nq), with u (k, nq)
        uniform in ±angle_range.
    integrate(q (k, nq), v (k, nv)) -> q ⊕ v (k, nq).
    dexp_inv(δ (k, nv), v (k, nv)) -> δ̇ (k, nv), or None where the group is a vector space (δ̇ = v).
    quaternion: the q columns holding a unit quaternion (x, y, z, w), or None.
    """
    neutral: tuple
    random: Callable
    integrate: Callable
    dexp_inv: Callable | None = None
    quaternion: slice | None = None


def _random_quaternions(key, k, dtype):
    """(k, 4) uniform random unit quaternions (normalised Gaussians)."""
    return quat_normalize(jax.random.normal(key, (k, 4), dtype))


def _random_free(u, key_rotation, key_position, angle_range, position_range):
    position = jax.random.uniform(key_position, (u.shape[0], 3), u.dtype, -position_range, position_range)
    return jnp.concatenate([position, _random_quaternions(key_rotation, u.shape[0], u.dtype)], -1)


def _integrate_spherical(q, v):
    return quat_normalize(quat_multiply(q, quat_exp(v)))                 # q ⊗ exp(ω)


def _integrate_free(q, v):
    """SE(3) exponential of the body twist (v, ω): p += R V(ω) v, quat ← quat ⊗ exp(ω)."""
    quat, lin, ang = q[:, 3:], v[:, :3], v[:, 3:]
    R = quat_to_rotation(quat_normalize(quat))
    step = jnp.einsum("kij,kj->ki", _so3_left_jacobian(ang), lin)
    return jnp.concatenate([q[:, :3] + jnp.einsum("kij,kj->ki", R, step), _integrate_spherical(quat, ang)], -1)


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


_RULES = {
    JointType.FIXED: _LieGroup((), lambda u, *_: u, lambda q, v: q),
    JointType.REVOLUTE: _LieGroup((0.0,), lambda u, *_: u, lambda q, v: q + v),
    JointType.PRISMATIC: _LieGroup((0.0,), lambda u, k_rot, k_pos, angle, position: u * position / angle,
                                   lambda q, v: q + v),
    JointType.SPHERICAL: _LieGroup((0.0, 0.0, 0.0, 1.0),
                                   lambda u, k_rot, *_: _random_quaternions(k_rot, u.shape[0], u.dtype),
                                   _integrate_spherical,
                                   lambda d, v: _dexp_inv_series(_so3_bracket, d, v), slice(0, 4)),
    JointType.FREE: _LieGroup((0.0,) * 6 + (1.0,), _random_free, _integrate_free,
                              lambda d, v: _dexp_inv_series(_se3_bracket, d, v), slice(3, 7)),
}


def _types(model: Model):
    """The joint types present in `model`, each once, with their rules (static)."""
    return [(t, _RULES[t]) for t in dict.fromkeys(JointType(t) for t in model.joint_types) if t.nq]


def neutral(model: Model, dtype=None):
    """(nq,) zero angles and displacements, identity quaternions, free joints at the origin; in `dtype`
    (a floating dtype; default the model's)."""
    check_model_type(model)
    if dtype is not None and not jnp.issubdtype(dtype, jnp.floating):
        raise TypeError(f"argument 'dtype' must be a floating-point dtype, got {jnp.dtype(dtype)}")
    q = np.concatenate([np.zeros(0)] + [np.asarray(_RULES[JointType(t)].neutral) for t in model.joint_types])
    return jnp.asarray(q, dtype or model.joint_axis.dtype)


def random_configuration(model: Model, key, angle_range=jnp.pi, position_range=1.0):
    """(nq,) angles and displacements uniform in ±range, uniform random unit quaternions
    (normalised Gaussians) and free-joint positions uniform in ±position_range (both finite scalars ≥ 0)."""
    check_model_type(model)
    if not (isinstance(key, jax.Array) and (jnp.issubdtype(key.dtype, jax.dtypes.prng_key) or key.shape == (2,))):
        raise TypeError(f"argument 'key' must be a JAX PRNG key (jax.random.key or jax.random.PRNGKey), got {key!r}")
    angle_range, position_range = check_scalar("angle_range", angle_range, 0.0), check_scalar(
        "position_range", position_range, 0.0)
    k_scalar, k_rotation, k_position = jax.random.split(key, 3)
    q = jax.random.uniform(k_scalar, (model.nq,), model.joint_axis.dtype, -angle_range, angle_range)
    for joint_type, group in _types(model):
        cols = model.q_columns(joint_type)
        q = q.at[cols].set(group.random(q[cols], k_rotation, k_position, angle_range, position_range))
    return q


@entry_point(q='q', v='v')
def integrate(model: Model, q, v):
    """q ⊕ v: q + v for 1-DoF joints, q ⊗ exp(ω) for spherical joints and the SE(3) exponential
    of the body twist (v, ω) for free joints (Pinocchio's `integrate`). (nq,), (nv,) -> (nq,)."""
    out = q
    for joint_type, group in _types(model):
        cols, vcols = model.q_columns(joint_type), model.v_columns(joint_type)
        out = out.at[cols].set(group.integrate(q[cols], v[vcols]))
    return out


@entry_point(q='q', v='v')
def configuration_derivative(model: Model, q, v):
    """q̇ (nq,) for velocity v: θ̇ for 1-DoF joints, ½ q ⊗ (ω, 0) for quaternions and
    ṗ = R v_linear for free-joint positions."""
    return jax.jvp(lambda t: integrate(model, q, t * v), (jnp.zeros((), v.dtype),),
                   (jnp.ones((), v.dtype),))[1]


@entry_point(delta='v', v='v')
def dexp_inv(model: Model, delta, v):
    """Rate of the tangent coordinate δ (q(t) = q ⊕ δ(t)) for body velocity v:
    δ̇ = v + ½ [δ, v] + 1/12 [δ, [δ, v]] (dexp⁻¹ truncated; the next term is O(|δ|⁴)), with the
    so(3) bracket for spherical joints and the se(3) bracket for free joints ([v; ω] layout);
    identity for 1-DoF joints. (nv,), (nv,) -> (nv,)."""
    out = v
    for joint_type, group in _types(model):
        if group.dexp_inv is not None:
            vcols = model.v_columns(joint_type)
            out = out.at[vcols].set(group.dexp_inv(delta[vcols], v[vcols]))
    return out


def quaternion_columns(model: Model) -> np.ndarray:
    """(k, 4) static indices into q of every unit quaternion (x, y, z, w) in the model."""
    cols = [model.q_columns(t)[:, g.quaternion] for t, g in _types(model) if g.quaternion is not None]
    return np.concatenate([np.zeros((0, 4), np.int64), *cols])
