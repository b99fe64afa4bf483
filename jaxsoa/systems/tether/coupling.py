"""Two free-floating multibody systems joined by a reeling tether: coupled forward dynamics, one RK4
step of the joint state, momentum, and the reduced (point-mass) model (docs/tether.md §9).

Body P (the platform: its reel pays out at the exit point C_P) and body M (the robot, exit point C_M)
are free-floating models (root a free joint stored first, `jaxsoa.algorithms.free_floating`); the
tether is the FEM of `jaxsoa.systems.tether.fem` with its end nodes on C_P and C_M. The tether's end
forces are affine in the exit-point accelerations (`end_coupling`: F_e = f_e − Σ_f m_ef a_f); each
body's exit-point acceleration is affine in the force on it, a_e = a0_e + G_e F_e (a0 from the
free-floating ABA without the tether force, G = J_C M⁻¹ J_Cᵀ from three ABAs at rest), so one 6×6
solve gives both:  (I + G m) a = a0 + G f,  F = f − m a.

The stored tether ρ s_P, ρ (L − s_M) rides on the bodies as point masses at C_P, C_M. The joints after
each root are held by PD torques τ = −K_p (q − q_ref) − K_d v. With an orbit every link, node and
stored mass feels its gravity gradient (`jaxsoa.systems.orbit`, non-rotating orbital frame); without
one the system is in free space.
"""

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsoa.algorithms.free_floating import aba_free_floating
from jaxsoa.algorithms.kinematics import (
    center_of_mass,
    forward_kinematics,
    joint_jacobians_at,
    link_motion,
    spatial_momentum,
)
from jaxsoa.integrators.steps import ode_rk4_step
from jaxsoa.multibody.arguments import entry_point, nan_unless
from jaxsoa.multibody.config_space import dexp_inv, integrate, neutral
from jaxsoa.multibody.model import Model
from jaxsoa.spatial.algebra import skew
from jaxsoa.spatial.rotation import rotation_to_quat
from jaxsoa.spatial.small_linalg import solve
from jaxsoa.systems import orbit as orb
from jaxsoa.systems.tether.energy_consistent import node_rates
from jaxsoa.systems.tether.fem import TetherParams, TetherState, straight_state
from jaxsoa.systems.tether.fem_energy import tether_momentum
from jaxsoa.systems.tether.reels import TetherInputs, end_coupling, tether_dynamics


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class TetheredRobot:
    """The system (a PyTree: vmap over tether parameters, masses, orbit). platform, robot: the
    free-floating models P and M; exit_links (static) the links carrying C_P, C_M and exit_offsets
    (2, 3) C_P, C_M in those links' frames; gains (2,) the joints' PD (K_p, K_d); orbit None = free space."""
    platform: Model
    robot: Model
    tether: TetherParams
    exit_offsets: jax.Array
    gains: jax.Array
    orbit: orb.OrbitParams | None
    exit_links: tuple = dataclasses.field(metadata=dict(static=True))


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class TetheredRobotState:
    """q_platform, v_platform, q_robot, v_robot: free-floating layouts of the two bodies; tether: nodes
    (ends on C_P, C_M) and s."""
    q_platform: jax.Array
    v_platform: jax.Array
    q_robot: jax.Array
    v_robot: jax.Array
    tether: TetherState


class ExitPoint(NamedTuple):
    """A body-fixed point, world frame: position (3,), velocity (3,), point Jacobian (3, nv)."""
    position: jax.Array
    velocity: jax.Array
    jacobian: jax.Array


class CoupledAccelerations(NamedTuple):
    """a_platform (nv_P,), a_robot (nv_M,): the bodies' accelerations; node_accel (n+1, 3) the rate of the
    tether state's v (r̈ for "nodal"; exit points' a_e and interior u̇ for "energy_consistent"); s_ddot (2,);
    end_force (2, 3) the tether's forces on the bodies at C_P, C_M; node_velocity (n+1, 3) the nodes' ṙ;
    exit_tension (2,) the tension the reels hold (the consistent reaction −R_e·u_e for "energy_consistent",
    the exit elements' N for "nodal")."""
    a_platform: jax.Array
    a_robot: jax.Array
    node_accel: jax.Array
    s_ddot: jax.Array
    end_force: jax.Array
    node_velocity: jax.Array
    exit_tension: jax.Array


def _bodies(system: TetheredRobot, state: TetheredRobotState):
    return ((system.platform, state.q_platform, state.v_platform), (system.robot, state.q_robot, state.v_robot))


@entry_point(q='q', v='v', link='link')
def exit_point(model: Model, q, v, link, offset) -> ExitPoint:
    """The point `offset` (3,) of `link`: v_C = R (v + ω × c), J_C = R (J_lin − [c]× J_ang). A traced
    `link` outside [0, n) gives NaN (a static one raises `ValueError`)."""
    point = _exit_point_at(model, forward_kinematics(model, q), v, link, offset)
    return point if isinstance(link, int) else nan_unless((link >= 0) & (link < model.n_links), point)


def _exit_point_at(model: Model, placements, v, link, offset) -> ExitPoint:
    """`exit_point` at the placements (R, p) (n, 3, 3), (n, 3) of `forward_kinematics`."""
    R, p = placements
    J = joint_jacobians_at(model, placements, "local")[link]
    J_point = R[link] @ (J[3:] - skew(offset) @ J[:3])
    return ExitPoint(p[link] + R[link] @ offset, J_point @ v, J_point)


def _point_acceleration(model, q, v, a, link, offset, R_link):
    """a_C = R (a + α × c + ω × (v + ω × c)) from the link's spatial velocity / acceleration (local, one
    motion pass); R_link (3, 3) the link's orientation."""
    vel, acc = (x[link] for x in link_motion(model, q, v, a, jnp.zeros(6, v.dtype)))
    omega, lin = vel[:3], vel[3:]
    return R_link @ (acc[3:] + jnp.cross(acc[:3], offset) + jnp.cross(omega, lin + jnp.cross(omega, offset)))


def _point_force(model, link, offset, force_link):
    """f_ext (n, 6) for a force (3,) at `offset` on `link`, link frame: [c × F; F]."""
    f = jnp.zeros((model.n_links, 6), force_link.dtype)
    return f.at[link].set(jnp.concatenate([jnp.cross(offset, force_link), force_link]))


def _exit_points(system: TetheredRobot, state: TetheredRobotState, placements=None):
    """[ExitPoint of C_P, ExitPoint of C_M]; placements: the bodies' `forward_kinematics` if computed."""
    placements = placements or [forward_kinematics(m, q) for m, q, _ in _bodies(system, state)]
    return [_exit_point_at(m, X, v, link, c) for (m, _, v), X, link, c
            in zip(_bodies(system, state), placements, system.exit_links, system.exit_offsets, strict=True)]


def _on_exit_points(tether: TetherState, ends) -> TetherState:
    """The tether state with its end nodes at the exit points `ends`."""
    r = tether.r.at[0].set(ends[0].position).at[-1].set(ends[1].position)
    v = tether.v.at[0].set(ends[0].velocity).at[-1].set(ends[1].velocity)
    return dataclasses.replace(tether, r=r, v=v)


def with_exit_nodes(system: TetheredRobot, state: TetheredRobotState) -> TetherState:
    """The tether state with its end nodes placed at the bodies' exit points C_P, C_M."""
    return _on_exit_points(state.tether, _exit_points(system, state))


def stored_mass(system: TetheredRobot, tether: TetherState):
    """(ρ s_P, ρ (L − s_M)): tether material on the reels, carried at C_P and C_M."""
    return system.tether.rho * jnp.stack([tether.s[0], system.tether.length - tether.s[1]])


def forward_dynamics_coupled(system: TetheredRobot, t, state: TetheredRobotState, inputs: TetherInputs,
                             q_ref) -> CoupledAccelerations:
    """Accelerations of bodies, tether nodes and reels at time t (module docstring). q_ref:
    (joints_P, joints_M) the PD references of the joints after each root."""
    placements = [forward_kinematics(m, q) for m, q, _ in _bodies(system, state)]    # X_world_link per body
    ends = _exit_points(system, state, placements)
    tether = _on_exit_points(state.tether, ends)
    ext = None if system.orbit is None else (lambda r: orb.gravity_gradient_acceleration(system.orbit, t, r))
    cpl = end_coupling(system.tether, tether, inputs, ext)
    m_stored = stored_mass(system, tether)
    force = cpl.force if ext is None else cpl.force + m_stored[:, None] * ext(tether.r[jnp.array([0, -1])])
    mass = cpl.mass + jnp.diag(m_stored)                                   # F_e = f_e − Σ_f m_ef a_f
    a0, gains, responses = [], [], []
    for (model, q, v), X, link, c, ref, end in zip(_bodies(system, state), placements, system.exit_links,
                                                   system.exit_offsets, q_ref, ends, strict=True):
        tau = -system.gains[0] * (q[7:] - ref) - system.gains[1] * v[6:]
        f_ext = (jnp.zeros((model.n_links, 6), v.dtype) if system.orbit is None
                 else orb.gravity_gradient_wrenches_at(model, system.orbit, t, X))
        R_link = X[0][link]
        # one vmapped ABA: column 0 without the tether force, columns 1-3 at rest under unit forces at C
        unit_forces = jax.vmap(lambda F, model=model, link=link, c=c, R=R_link: _point_force(model, link, c, R.T @ F))(
            jnp.eye(3, dtype=q.dtype))
        at_rest = jnp.zeros((3, model.nv), v.dtype)
        qdd = jax.vmap(lambda v_k, tau_k, f_k, model=model, q=q: aba_free_floating(model, q, v_k, tau_k, f_k))(
            jnp.concatenate([v[None], at_rest]), jnp.concatenate([tau[None], at_rest[:, 6:]]),
            jnp.concatenate([f_ext[None], unit_forces]))
        qdd0, unit = qdd[0], qdd[1:]                                        # q̈ free, M⁻¹ J_Cᵀ e_k (3, nv)
        a0.append(_point_acceleration(model, q, v, qdd0, link, c, R_link))
        gains.append(end.jacobian @ unit.T)                                 # G = J_C M⁻¹ J_Cᵀ
        responses.append((qdd0, unit))
    G = jax.scipy.linalg.block_diag(*gains)
    mass6 = jnp.kron(mass, jnp.eye(3, dtype=mass.dtype))
    a_end = solve(jnp.eye(6, dtype=G.dtype) + G @ mass6,
                  jnp.concatenate(a0) + G @ force.reshape(6))                  # (I + G m) a = a0 + G f
    F = force - (mass6 @ a_end).reshape(2, 3)                                  # F = f − m a
    (qdd0_P, unit_P), (qdd0_M, unit_M) = responses
    a_end = a_end.reshape(2, 3)
    nodes = jnp.concatenate([a_end[:1], cpl.interior_accel + cpl.interior_gain @ a_end, a_end[1:]])
    reaction = cpl.force - cpl.mass @ a_end - cpl.exit.thrust                  # −R_e: the tether's pull on C_e
    exit_tension = (jnp.sum(reaction * cpl.exit.u, axis=1) if system.tether.formulation == "energy_consistent"
                    else cpl.exit.tension)
    return CoupledAccelerations(qdd0_P + F[0] @ unit_P, qdd0_M + F[1] @ unit_M, nodes, cpl.s_ddot, F,
                                node_rates(system.tether, tether), exit_tension)


def rk4_step_coupled(system: TetheredRobot, t, state: TetheredRobotState, inputs: TetherInputs, q_ref, reel_accel,
                     dt, power=None):
    """One classical RK4 step (`jaxsoa.integrators.steps.ode_rk4_step`) of the coupled system, the
    bodies on their configuration manifolds as in `jaxsoa.integrators.steps.rk4_step`: the stepped
    state is (δ_P, v_P, δ_M, v_M, tether) with q = q(t) ⊕ δ and δ̇ = dexp⁻¹_δ(v), from δ = 0.
    reel_accel(t, state) -> s̈ (2,) sets `inputs.reel_accel` at every stage. `power(t, state, acc)`
    (acc: CoupledAccelerations) -> (k,), optional: its integral over the step is carried by the same
    RK4 stages, and the step returns (state, ∫ power dt) instead of the state."""
    def at(x):                                                     # the stage state q(t) ⊕ δ
        dq_P, v_P, dq_M, v_M, tether, _ = x
        return TetheredRobotState(integrate(system.platform, state.q_platform, dq_P), v_P,
                                  integrate(system.robot, state.q_robot, dq_M), v_M, tether)

    def rate(time, x):                      # ẋ = (dexp⁻¹_δ_P v_P, a_P, dexp⁻¹_δ_M v_M, a_M, (ṙ, v̇, ṡ, s̈), P)
        stage = at(x)
        stage_inputs = dataclasses.replace(inputs, reel_accel=reel_accel(time, stage))
        acc = forward_dynamics_coupled(system, time, stage, stage_inputs, q_ref)
        work_rate = jnp.zeros(0, x[1].dtype) if power is None else power(time, stage, acc)
        return (dexp_inv(system.platform, x[0], x[1]), acc.a_platform, dexp_inv(system.robot, x[2], x[3]),
                acc.a_robot, TetherState(acc.node_velocity, acc.node_accel, x[4].s_dot, acc.s_ddot), work_rate)

    shape = None if power is None else jax.eval_shape(
        lambda: power(t, state, forward_dynamics_coupled(system, t, state, inputs, q_ref)))
    work = jnp.zeros(0, state.v_platform.dtype) if power is None else jnp.zeros(shape.shape, shape.dtype)
    start = (jnp.zeros_like(state.v_platform), state.v_platform, jnp.zeros_like(state.v_robot), state.v_robot,
             state.tether, work)
    end = ode_rk4_step(rate, t, start, dt)
    new = at(end)
    new = dataclasses.replace(new, tether=with_exit_nodes(system, new))
    return new if power is None else (new, end[5])


def total_momentum(system: TetheredRobot, state: TetheredRobotState):
    """Linear and angular momentum (about the origin, world/orbital axes) of bodies + stored tether +
    deployed tether, each (3,)."""
    tether = with_exit_nodes(system, state)
    linear, angular = tether_momentum(system.tether, tether)
    for model, q, v in _bodies(system, state):
        h = spatial_momentum(model, q, v)
        linear, angular = linear + h[3:], angular + h[:3]
    m_stored = stored_mass(system, tether)[:, None]
    ends_r, ends_v = tether.r[jnp.array([0, -1])], tether.v[jnp.array([0, -1])]
    return (linear + jnp.sum(m_stored * ends_v, 0),
            angular + jnp.sum(m_stored * jnp.cross(ends_r, ends_v), 0))


def initial_state(system: TetheredRobot, distance, s, rotation=None, omega=(0.0, 0.0, 0.0), s_dot=None,
                  separation=0.0):
    """Host-side: joints at zero, roots unrotated, the robot moved so that C_M − C_P = `distance` x̂,
    the straight tether between them, the whole system's centre of mass at the origin, then turned by
    `rotation` (3, 3) and moving rigidly at angular velocity `omega` (3,) (e.g. n ẑ: at rest in LVLH).
    s = (s_P, s_M). `separation` [m/s]: the robot recedes from the platform along the tether at this
    rate (momentum zero: each body gets its share), paid out by the platform reel (s_dot default
    (−separation, 0)). Returns (state, q_ref (joints_P, joints_M) = zeros)."""
    platform, robot = system.platform, system.robot
    dtype = platform.mass.dtype
    q_P, q_M = np.array(neutral(platform)), np.array(neutral(robot))
    c_P, c_M0 = (np.asarray(exit_point(model, jnp.asarray(q), jnp.zeros(model.nv, dtype), link, offset).position)
                 for model, q, link, offset in zip((platform, robot), (q_P, q_M), system.exit_links,
                                                   system.exit_offsets, strict=True))
    c_M = c_P + np.array([distance, 0, 0])
    q_M[:3] = c_M - c_M0                                            # the robot's root moved: C_M − C_P = d x̂
    rho, length = float(system.tether.rho), float(system.tether.length)
    m_P, m_M = float(jnp.sum(platform.mass)), float(jnp.sum(robot.mass))
    l = s[1] - s[0]
    com = (m_P * np.asarray(center_of_mass(platform, jnp.asarray(q_P)))
           + m_M * np.asarray(center_of_mass(robot, jnp.asarray(q_M)))
           + rho * (s[0] * c_P + (length - s[1]) * c_M + l * (c_P + c_M) / 2)) / (m_P + m_M + rho * length)
    R0, w = np.eye(3) if rotation is None else np.asarray(rotation, float), np.asarray(omega, float)
    quat = np.asarray(rotation_to_quat(jnp.asarray(R0)))
    u = R0[:, 0]                                                              # tether direction
    kicks = (-separation * m_M / (m_P + m_M) * u, separation * m_P / (m_P + m_M) * u)
    bodies = []
    for q, model, kick in ((q_P, platform, kicks[0]), (q_M, robot, kicks[1])):
        p = R0 @ (q[:3] - com)
        v = np.concatenate([R0.T @ (np.cross(w, p) + kick), R0.T @ w, np.zeros(model.nv - 6)])
        bodies += [jnp.asarray(np.concatenate([p, quat, q[7:]]), dtype), jnp.asarray(v, dtype)]
    r_P, r_M = R0 @ (c_P - com), R0 @ (c_M - com)
    s_dot = (-separation, 0.0) if s_dot is None else s_dot
    tether = straight_state(system.tether, r_P, r_M, s, np.cross(w, r_P) + kicks[0], np.cross(w, r_M) + kicks[1],
                            s_dot)
    return TetheredRobotState(*bodies, tether), (jnp.zeros(platform.nv - 6, dtype), jnp.zeros(robot.nv - 6, dtype))


def rk4_step_dumbbell(params: TetherParams, orbit, t, tether: TetherState, inputs: TetherInputs, reel_accel,
                      dt) -> TetherState:
    """One RK4 step of the reduced model: the two bodies as point masses `inputs.end_mass` at the tether
    ends (`jaxsoa.systems.tether.reels.tether_dynamics`), the gravity gradient of `orbit` (None: free
    space) on every mass. reel_accel(t, tether) -> s̈ (2,) sets `inputs.reel_accel` at every stage."""
    def rate(time, x):
        ext = None if orbit is None else (lambda r: orb.gravity_gradient_acceleration(orbit, time, r))
        return tether_dynamics(params, x, dataclasses.replace(inputs, reel_accel=reel_accel(time, x)), ext)

    return ode_rk4_step(rate, t, tether, dt)
