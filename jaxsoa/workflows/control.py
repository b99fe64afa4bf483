"""Computed-torque control (inverse dynamics plus PD) for fixed and free-floating bases
(conventions in docs/conventions.md, "Free-floating systems").

With a perfect model the joint error e = q_des − q obeys ë + K_d ė + K_p e = 0; with
K_p = ω², K_d = 2ω it is critically damped: e(t) = (e₀ + (ė₀ + ω e₀) t) e^{−ωt}.

On a fixed base the position error is the tangent vector e = q_des ⊖ q (`jaxsoa.difference`, Pinocchio's
`difference(q, q_des)`): q_des − q for revolute and prismatic joints, the shortest turn for revolute-unbounded
joints (so the closed form above holds for them too, across θ = ±π), log(R_qᵀ R_des) for spherical joints and
the SE(2) log for planar ones (for these the error law holds to first order in e).
"""

from typing import NamedTuple

import jax.numpy as jnp
from jax.typing import ArrayLike

from jaxsoa.algorithms.dynamics import rnea
from jaxsoa.algorithms.free_floating import base_and_joint_dofs, floating_base, rnea_free_floating
from jaxsoa.multibody.arguments import entry_point
from jaxsoa.multibody.config_space import difference
from jaxsoa.multibody.joints import JointType
from jaxsoa.multibody.model import Model
from jaxsoa.multibody.scalars import check_gain


class PDGains(NamedTuple):
    """Proportional and derivative gains kp K_p, kd K_d (scalars or (n,)), in the argument order of
    `computed_torque`: `computed_torque(model, q, v, q_des, v_des, a_des, *gains)`."""
    kp: ArrayLike
    kd: ArrayLike


def critically_damped_gains(omega) -> PDGains:
    """(K_p, K_d) = (ω², 2ω) for a closed-loop natural frequency ω [rad/s] (> 0; a scalar or one per joint)."""
    check_gain("omega", omega, positive=True)
    return PDGains(omega**2, 2 * omega)


def commanded_acceleration(q, v, q_des, v_des, a_des, kp, kd):
    """a_cmd = a_des + K_d (v_des − v) + K_p (q_des − q) for 1-DoF joint coordinates (with q = 0 and q_des = e:
    for the tangent error e = q_des ⊖ q of any joints)."""
    return a_des + kd * (v_des - v) + kp * (q_des - q)


def _require_no_free_joint(model: Model):
    free = model.links_of_type(JointType.FREE)
    if len(free):
        raise ValueError(f"computed_torque: link '{model.link_names[free[0]]}' has a free joint, which no torque "
                         "actuates; for a floating hub use computed_torque_free_floating")


def _require_hub_first(model: Model):
    if floating_base(model) != 0:
        raise ValueError("computed_torque_free_floating needs the hub (a free joint) stored first, as link 0")


@entry_point(_require_no_free_joint, q='q', v='v', q_des='q', v_des='v', a_des='v', f_ext='f_ext')
def computed_torque(model: Model, q, v, q_des, v_des, a_des, kp, kd, f_ext=None):
    """Fixed base: τ = RNEA(q, v, a_cmd) with e = q_des ⊖ q (module docstring), every joint type but free;
    for a floating hub use `computed_torque_free_floating`. q, q_des (nq,); v, v_des, a_des (nv,); kp, kd:
    scalars or (nv,), ≥ 0. Returns τ (nv,)."""
    kp, kd = check_gain("kp", kp, model.nv), check_gain("kd", kd, model.nv)
    e = difference(model, q, q_des)                                      # q_des ⊖ q
    a_cmd = commanded_acceleration(jnp.zeros_like(e), v, e, v_des, a_des, kp, kd)
    return rnea(model, q, v, a_cmd, f_ext)


@entry_point(_require_hub_first, q='q', v='v', q_des='joint_q', v_des='joints', a_des='joints', f_ext='f_ext')
def computed_torque_free_floating(model: Model, q, v, q_des, v_des, a_des, kp, kd, f_ext=None):
    """Free-floating hub: joint torques (nv − 6,) that give the joints a_cmd while the hub moves
    freely (momentum conserved), with e = q_des ⊖ q over the joints (module docstring; any joint type below
    the hub). q_des: the joints' configuration (nq − 7,), q without the hub's 7 entries; v_des, a_des
    (nv − 6,); kp, kd: scalars or (nv − 6,), ≥ 0. For 1-DoF joints q_des, v_des, a_des all have nv − 6
    entries."""
    kp, kd = check_gain("kp", kp, model.nv - 6), check_gain("kd", kd, model.nv - 6)
    _, joint_dofs = base_and_joint_dofs(model)
    hub = JointType.FREE.nq
    e = difference(model, q, jnp.concatenate([q[:hub], q_des]))[joint_dofs]     # q_des ⊖ q (zero on the hub)
    a_cmd = commanded_acceleration(jnp.zeros_like(e), v[joint_dofs], e, v_des, a_des, kp, kd)
    return rnea_free_floating(model, q, v, a_cmd, f_ext).tau_joints


