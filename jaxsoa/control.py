"""Computed-torque control (inverse dynamics plus PD), seed 002 §4, for fixed and free-floating
bases.

With a perfect model the joint error e = q_des − q obeys ë + K_d ė + K_p e = 0; with
K_p = ω², K_d = 2ω it is critically damped: e(t) = (e₀ + (ė₀ + ω e₀) t) e^{−ωt}.
"""


from jaxsoa import joints
from jaxsoa.floating import base_and_joint_dofs, free_floating_rnea
from jaxsoa.model import Model
from jaxsoa.recursive import rnea


def critically_damped_gains(omega):
    """(K_p, K_d) = (ω², 2ω) for a closed-loop natural frequency ω [rad/s]."""
    return omega**2, 2 * omega


def commanded_acceleration(q, v, q_des, v_des, a_des, kp, kd):
    """a_cmd = a_des + K_d (v_des − v) + K_p (q_des − q) for 1-DoF joint coordinates."""
    return a_des + kd * (v_des - v) + kp * (q_des - q)


def computed_torque(model: Model, q, v, q_des, v_des, a_des, kp, kd, f_ext=None):
    """Fixed base: τ = RNEA(q, v, a_cmd). All joints must be 1-DoF (q − q_des is then a tangent
    vector); for a floating hub use `free_floating_computed_torque`."""
    if any(joints.NQ[t] != joints.NV[t] for t in model.joint_types):
        raise ValueError("computed_torque needs 1-DoF joints only; use free_floating_computed_torque")
    return rnea(model, q, v, commanded_acceleration(q, v, q_des, v_des, a_des, kp, kd), f_ext)


def free_floating_computed_torque(model: Model, q, v, q_des, v_des, a_des, kp, kd, f_ext=None):
    """Free-floating hub: joint torques (nv − 6,) that give the joints a_cmd while the hub moves
    freely (momentum conserved). q_des, v_des, a_des are joint-space targets (nv − 6,); the joints
    other than the hub's must be 1-DoF."""
    _, joint_dofs = base_and_joint_dofs(model)
    if model.joint_types[0] != joints.FREE or model.nq - 7 != joint_dofs.shape[0]:
        raise ValueError("free_floating_computed_torque needs the hub stored first and 1-DoF arm joints")
    a_cmd = commanded_acceleration(q[7:], v[joint_dofs], q_des, v_des, a_des, kp, kd)
    return free_floating_rnea(model, q, v, a_cmd, f_ext).tau_joints


