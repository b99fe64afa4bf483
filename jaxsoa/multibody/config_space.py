"""Configuration space: neutral and random configurations, integration q ⊕ v on the joints'
Lie groups (quaternions and the planar and revolute-unbounded joints' (cos θ, sin θ) stay unit), its
inverse q1 ⊖ q0 and the geodesic interpolation, the time derivative q̇(q, v) and the inverse
differential of the exponential used by the manifold Runge–Kutta steps.

Pinocchio's names: `neutral`, `random_configuration` (`randomConfiguration`), `integrate`,
`difference`, `interpolate`.

Every per-joint-type rule lives in `jaxsoa.multibody.lie_groups.RULES`, one `LieGroup` per `JointType`. The
public functions apply each rule to the links of its type (static columns of q and v, `Model.q_columns`).
"""

import jax
import jax.numpy as jnp
import numpy as np

from jaxsoa.multibody.arguments import check_model_type, entry_point
from jaxsoa.multibody.joints import JointType
from jaxsoa.multibody.lie_groups import RULES, joint_groups
from jaxsoa.multibody.model import Model
from jaxsoa.multibody.scalars import check_scalar


def neutral(model: Model, dtype=None):
    """(nq,) zero angles and displacements, identity quaternions, free and planar joints at the origin
    (a planar joint's q is Pinocchio's neutral (0, 0, 1, 0), a revolute-unbounded joint's (1, 0)); in
    `dtype` (a floating dtype; default the model's)."""
    check_model_type(model)
    if dtype is not None and not jnp.issubdtype(dtype, jnp.floating):
        raise TypeError(f"argument 'dtype' must be a floating-point dtype, got {jnp.dtype(dtype)}")
    q = np.concatenate([np.zeros(0)] + [np.asarray(RULES[JointType(t)].neutral) for t in model.joint_types])
    return jnp.asarray(q, dtype or model.joint_axis.dtype)


def random_configuration(model: Model, key, angle_range=jnp.pi, position_range=1.0):
    """(nq,) angles and displacements uniform in ±range, uniform random unit quaternions
    (normalised Gaussians), free- and planar-joint positions uniform in ±position_range and planar and
    revolute-unbounded angles θ uniform in ±angle_range, stored as (cos θ, sin θ) (both ranges finite
    scalars ≥ 0)."""
    check_model_type(model)
    if not (isinstance(key, jax.Array) and (jnp.issubdtype(key.dtype, jax.dtypes.prng_key) or key.shape == (2,))):
        raise TypeError(f"argument 'key' must be a JAX PRNG key (jax.random.key or jax.random.PRNGKey), got {key!r}")
    angle_range, position_range = check_scalar("angle_range", angle_range, 0.0), check_scalar(
        "position_range", position_range, 0.0)
    k_scalar, k_rotation, k_position = jax.random.split(key, 3)
    q = jax.random.uniform(k_scalar, (model.nq,), model.joint_axis.dtype, -angle_range, angle_range)
    for joint_type, group in joint_groups(model):
        cols = model.q_columns(joint_type)
        q = q.at[cols].set(group.random(q[cols], k_rotation, k_position, angle_range, position_range))
    return q


@entry_point(q='q', v='v')
def integrate(model: Model, q, v):
    """q ⊕ v: q + v for revolute and prismatic joints, (cos θ, sin θ) ⊗ (cos ω, sin ω) for
    revolute-unbounded joints, q ⊗ exp(ω) for spherical joints, the SE(3) exponential of the body
    twist (v, ω) for free joints and the SE(2) exponential of the body twist (v_x, v_y, ω) for planar
    joints (Pinocchio's `integrate`). (nq,), (nv,) -> (nq,)."""
    out = q
    for joint_type, group in joint_groups(model):
        cols, vcols = model.q_columns(joint_type), model.v_columns(joint_type)
        out = out.at[cols].set(group.integrate(q[cols], v[vcols]))
    return out


@entry_point(q0='q', q1='q')
def difference(model: Model, q0, q1):
    """q1 ⊖ q0: the velocity v (nv,) with integrate(q0, v) = q1 (Pinocchio's `difference`). (nq,), (nq,) -> (nv,).

    Revolute and prismatic joints: q1 − q0, not wrapped (a revolute joint's angle is one real number,
    so 2π apart is a full turn, not zero); revolute-unbounded joints: arg(e^{−iθ0} e^{iθ1}) (no jump
    where θ crosses ±π); spherical joints: log3(R0ᵀ R1); free joints: log6(M0⁻¹ M1) as the body twist
    [v; ω], the inverse of `integrate`'s SE(3) exponential; planar joints: the SE(2) log of M0⁻¹ M1 as
    (v_x, v_y, ω). Rotations take the shortest path (angle ≤ π; a quaternion and its negative give the
    same v); exactly at π the axis sign is either.
    Differentiable with finite gradients at q0 = q1."""
    out = jnp.zeros((model.nv,), q0.dtype)
    for joint_type, group in joint_groups(model):
        cols, vcols = model.q_columns(joint_type), model.v_columns(joint_type)
        out = out.at[vcols].set(group.difference(q0[cols], q1[cols]))   # v_k = q1_k ⊖ q0_k
    return out


@entry_point(q0='q', q1='q')
def interpolate(model: Model, q0, q1, u):
    """q0 ⊕ u (q1 ⊖ q0): the geodesic from q0 (u = 0) to q1 (u = 1), per joint (Pinocchio's
    `interpolate`); u a real scalar (outside [0, 1] extrapolates). (nq,), (nq,), () -> (nq,)."""
    u = jnp.asarray(check_scalar("u", u), q0.dtype)
    return integrate(model, q0, u * difference(model, q0, q1))      # q0 ⊕ u (q1 ⊖ q0)


@entry_point(q='q', v='v')
def configuration_derivative(model: Model, q, v):
    """q̇ (nq,) for velocity v: θ̇ for revolute and prismatic joints, ½ q ⊗ (ω, 0) for quaternions,
    ṗ = R v_linear for free- and planar-joint positions and ω ẑ × (cos θ, sin θ) for planar and
    revolute-unbounded angles."""
    return jax.jvp(lambda t: integrate(model, q, t * v), (jnp.zeros((), v.dtype),),
                   (jnp.ones((), v.dtype),))[1]


@entry_point(delta='v', v='v')
def dexp_inv(model: Model, delta, v):
    """Rate of the tangent coordinate δ (q(t) = q ⊕ δ(t)) for body velocity v:
    δ̇ = v + ½ [δ, v] + 1/12 [δ, [δ, v]] (dexp⁻¹ truncated; the next term is O(|δ|⁴)), with the
    so(3) bracket for spherical joints, the se(3) bracket for free joints ([v; ω] layout) and the
    se(2) bracket for planar joints ((v_x, v_y, ω) layout); identity for 1-DoF joints (SO(2) of a
    revolute-unbounded joint is abelian). (nv,), (nv,) -> (nv,)."""
    out = v
    for joint_type, group in joint_groups(model):
        if group.dexp_inv is not None:
            vcols = model.v_columns(joint_type)
            out = out.at[vcols].set(group.dexp_inv(delta[vcols], v[vcols]))
    return out


def _unit_columns(model: Model, field: str, width: int) -> np.ndarray:
    """(k, width) static indices into q of the `field` columns (a `LieGroup` slice) of every joint."""
    cols = [model.q_columns(t)[:, getattr(g, field)] for t, g in joint_groups(model) if getattr(g, field) is not None]
    return np.concatenate([np.zeros((0, width), np.int64), *cols])


def quaternion_columns(model: Model) -> np.ndarray:
    """(k, 4) static indices into q of every unit quaternion (x, y, z, w) in the model."""
    return _unit_columns(model, "quaternion", 4)


def unit_complex_columns(model: Model) -> np.ndarray:
    """(k, 2) static indices into q of every planar and revolute-unbounded joint's unit complex number
    (cos θ, sin θ)."""
    return _unit_columns(model, "unit_complex", 2)
