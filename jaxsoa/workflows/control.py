"""Computed-torque control (inverse dynamics plus PD) for fixed and free-floating bases
(conventions in docs/conventions.md, "Free-floating systems").

With a perfect model the joint error e = q_des − q obeys ë + K_d ė + K_p e = 0; with
K_p = ω², K_d = 2ω it is critically damped: e(t) = (e₀ + (ė₀ + ω e₀) t) e^{−ωt}.
"""

from typing import NamedTuple

from jax.typing import ArrayLike

from jaxsoa.algorithms.dynamics import rnea
from jaxsoa.algorithms.free_floating import base_and_joint_dofs, floating_base, rnea_free_floating
from jaxsoa.multibody.arguments import entry_point
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
    """a_cmd = a_des + K_d (v_des − v) + K_p (q_des − q) for 1-DoF joint coordinates."""
    return a_des + kd * (v_des - v) + kp * (q_des - q)


def _one_dof(joint_types) -> bool:
    """Whether every joint's coordinates are its velocities (nq = nv: 1-DoF or fixed), so that
    q − q_des is a tangent vector."""
    return all(JointType(t).nq == JointType(t).nv for t in joint_types)


def _require_one_dof(model: Model):
    if not _one_dof(model.joint_types):
        raise ValueError("computed_torque needs 1-DoF joints only; use computed_torque_free_floating")


def _require_free_floating_arm(model: Model):
    if floating_base(model) != 0 or not _one_dof(model.joint_types[1:]):
        raise ValueError("computed_torque_free_floating needs the hub stored first and 1-DoF arm joints")


@entry_point(_require_one_dof, q='q', v='v', q_des='q', v_des='v', a_des='v', f_ext='f_ext')
def computed_torque(model: Model, q, v, q_des, v_des, a_des, kp, kd, f_ext=None):
    """Fixed base: τ = RNEA(q, v, a_cmd). All joints must be 1-DoF (q − q_des is then a tangent
    vector); for a floating hub use `computed_torque_free_floating`. kp, kd: scalars or (nv,), ≥ 0."""
    kp, kd = check_gain("kp", kp, model.nv), check_gain("kd", kd, model.nv)
    return rnea(model, q, v, commanded_acceleration(q, v, q_des, v_des, a_des, kp, kd), f_ext)


@entry_point(_require_free_floating_arm, q='q', v='v', q_des='joints', v_des='joints', a_des='joints', f_ext='f_ext')
def computed_torque_free_floating(model: Model, q, v, q_des, v_des, a_des, kp, kd, f_ext=None):
    """Free-floating hub: joint torques (nv − 6,) that give the joints a_cmd while the hub moves
    freely (momentum conserved). q_des, v_des, a_des are joint-space targets (nv − 6,); the joints
    other than the hub's must be 1-DoF. kp, kd: scalars or (nv − 6,), ≥ 0."""
    kp, kd = check_gain("kp", kp, model.nv - 6), check_gain("kd", kd, model.nv - 6)
    _, joint_dofs = base_and_joint_dofs(model)
    a_cmd = commanded_acceleration(q[JointType.FREE.nq:], v[joint_dofs], q_des, v_des, a_des, kp, kd)
    return rnea_free_floating(model, q, v, a_cmd, f_ext).tau_joints


