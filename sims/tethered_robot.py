"""Space tethered robot (seed 001): a floating platform and a floating operating robot joined by a
reeling tether, in the non-rotating orbital frame (jaxsoa.orbit) or in free space.

Bodies (jaxsoa free-floating models, zero gravity field; the orbit enters as gravity-gradient f_ext):

| body     | link        | joint      | geometry                  | mass [kg] | inertia about com [kg m²]          |
|----------|-------------|------------|---------------------------|-----------|------------------------------------|
| platform | hub         | free       | cube, edge 1.2 m          | 200       | 48 about each axis                 |
| platform | deployer_1  | revolute y | rod 0.6 m along +x        | 4         | 0.12 transverse, 1.25e-3 axial     |
| platform | deployer_2  | revolute y | rod 0.6 m along +x        | 3         | 0.09 transverse, 9.4e-4 axial      |
| robot    | base        | free       | cube, edge 0.4 m          | 8         | 0.2133 about each axis             |
| robot    | link_1      | revolute z | rod 0.3 m along +z        | 1         | m L²/12 transverse, m r²/2 axial   |
| robot    | link_2      | revolute y | rod 0.3 m along +x        | 0.8       | (rods: radius r = 0.025 m)         |
| robot    | link_3      | revolute y | rod 0.3 m along +x        | 0.6       |                                    |

The deployer rises from the hub's +x face (mount (0.6, 0, 0)); its tip, 0.6 m along deployer_2's
x axis, is the tether exit C_P. The robot's arm is mounted on its base's +x face; the tether exit C_M
is the centre of the base's −x face, (−0.2, 0, 0), facing the platform. With all joints at zero the
tether runs along +x from C_P to C_M. Totals: platform 207 kg, robot 10.4 kg.

Tether (default `TETHER`): ρ = 2e-3 kg/m, EA = 2.5 N, α = 0.05 s, L = 2000 m, lumped mass, n = 4
elements. It is deliberately soft so that explicit RK4 stays affordable at l = 10 m: the highest
element frequency is 2 n c / l with c = √(EA/ρ) ≈ 35 m/s (28 rad/s at 10 m, dt ≲ 0.05 s) and the
Kelvin–Voigt rate α ω² bounds dt as well; at 1 km in a 7000 km orbit the gravity-gradient tension
3 n² l μ ≈ 35 mN stretches it by 1.4 %. Joints are held by PD torques (`GAINS`: soft, because with
the base free the wrist's effective inertia is small and stiffer gains made RK4 unstable at dt = 0.4 s).
The stored tether ρ s_P, ρ (L − s_M) rides on the bodies as point masses at C_P, C_M.

Coupled dynamics (one RK4 step over (q_P, v_P, q_M, v_M, tether)): the tether's end forces are affine
in the exit-point accelerations (`jaxsoa.reel.end_coupling`: F_e = f_e − Σ m_ef a_f); each body's
exit-point acceleration is affine in the force on it (a_e = a0_e + G_e F_e, from jaxsoa's free-floating
ABA: a0 with no tether force, G = J_C M⁻¹ J_Cᵀ from three ABAs at rest), so one 6×6 solve gives both.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

import jaxsoa
from jaxsoa import joints
from jaxsoa import orbit as orb
from jaxsoa.integrators import dexp_inv, ode_rk4_step
from jaxsoa.kinematics import frame_jacobian, link_accelerations, link_velocities
from jaxsoa.reel import TetherInputs, end_coupling, tether_dynamics, tether_inputs
from jaxsoa.tether import TetherParams, TetherState, straight_state, tether_momentum, tether_params

HUB_MASS, HUB_EDGE = 200.0, 1.2
DEPLOYER = ((0.6, 4.0), (0.6, 3.0))                 # (length [m], mass [kg]) of the two deployer links
BASE_MASS, BASE_EDGE = 8.0, 0.4
ROBOT_ARM = ((0.3, 1.0, (0.0, 0.0, 1.0)), (0.3, 0.8, (0.0, 1.0, 0.0)), (0.3, 0.6, (0.0, 1.0, 0.0)))
EXIT_P = (0.6, 0.0, 0.0)                            # C_P in deployer_2's frame (its tip)
EXIT_M = (-0.2, 0.0, 0.0)                           # C_M in the robot base frame (−x face centre)
GAINS = (0.05, 0.01)                                 # joint PD (K_p [N m/rad], K_d [N m s/rad])


def _rod(mass, length, direction):
    """Inertia of a thin uniform rod about its centre, axis `direction` (radius 0.025 m)."""
    d = np.asarray(direction, float)
    axial, transverse = mass * 0.025**2 / 2, mass * length**2 / 12
    return transverse * (np.eye(3) - np.outer(d, d)) + axial * np.outer(d, d)


def _free_arm(base_mass, base_edge, mount, links):
    """A free-floating box base with a revolute chain: links = [(length, mass, axis, direction)]."""
    n = 1 + len(links)
    rot, trans = np.tile(np.eye(3), (n, 1, 1)), np.zeros((n, 3))
    com, inertia = np.zeros((n, 3)), np.zeros((n, 3, 3))
    mass, axis = np.zeros(n), np.zeros((n, 3))
    mass[0], inertia[0] = base_mass, base_mass * base_edge**2 / 6 * np.eye(3)
    trans[1] = mount
    for k, (length, m, ax, direction) in enumerate(links, 1):
        d = np.asarray(direction, float)
        mass[k], axis[k], com[k], inertia[k] = m, ax, d * length / 2, _rod(m, length, d)
        if k + 1 < n:
            trans[k + 1] = d * length
    return jaxsoa.build_model(parent=np.arange(n) - 1, joint_types=[joints.FREE] + [joints.REVOLUTE] * (n - 1),
                              joint_axis=axis, placement_rotation=rot, placement_translation=trans, mass=mass,
                              com=com, inertia_com=inertia, gravity=(0.0, 0.0, 0.0), dtype=jnp.float64)


def build_platform():
    """Hub + 2-joint deployer arm (pitch joints about y, links along +x)."""
    return _free_arm(HUB_MASS, HUB_EDGE, (HUB_EDGE / 2, 0, 0), [(L, m, (0, 1.0, 0), (1.0, 0, 0)) for L, m in DEPLOYER])


def build_robot():
    """Robot base + 3-link arm mounted on the base's +x face (the tether leaves from the −x face)."""
    links = [(L, m, ax, (0, 0, 1.0) if k == 0 else (1.0, 0, 0)) for k, (L, m, ax) in enumerate(ROBOT_ARM)]
    return _free_arm(BASE_MASS, BASE_EDGE, (BASE_EDGE / 2, 0, 0), links)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class TetheredRobot:
    """The system (a PyTree: vmap over tether parameters, masses, orbit). exit_links static;
    exit_offsets (2, 3) C_P, C_M in their link frames; gains (2,) joint PD; orbit None = free space."""
    platform: jaxsoa.Model
    robot: jaxsoa.Model
    tether: TetherParams
    exit_offsets: jax.Array
    gains: jax.Array
    orbit: orb.OrbitParams | None
    exit_links: tuple = dataclasses.field(metadata=dict(static=True))


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class State:
    """q_platform, v_platform, q_robot, v_robot: free-flyer layouts of the two bodies; tether: nodes
    (ends = C_P, C_M) and s."""
    q_platform: jax.Array
    v_platform: jax.Array
    q_robot: jax.Array
    v_robot: jax.Array
    tether: TetherState


TETHER = dict(rho=2e-3, EA=2.5, alpha=0.05, length=2000.0, n_elements=4, lumped=True)


def build(tether=None, orbit=None, gains=GAINS) -> TetheredRobot:
    """The default system; `tether` overrides fields of `TETHER`; orbit an OrbitParams or None."""
    platform = build_platform()
    return TetheredRobot(platform=platform, robot=build_robot(), tether=tether_params(**{**TETHER, **(tether or {})}),
                         exit_offsets=jnp.asarray([EXIT_P, EXIT_M]), gains=jnp.asarray(gains),
                         orbit=orbit, exit_links=(platform.n_links - 1, 0))


def _bodies(system: TetheredRobot, state: State):
    return ((system.platform, state.q_platform, state.v_platform), (system.robot, state.q_robot, state.v_robot))


def exit_point(model, q, v, link, offset):
    """Position, velocity (3,) and point Jacobian J_C (3, nv) of a body-fixed point, world frame:
    v_C = R (v + ω × c), J_C = R (J_lin − [c]× J_ang)."""
    R, p = jaxsoa.forward_kinematics(model, q)
    J = frame_jacobian(model, q, link, "local")
    J_point = R[link] @ (J[3:] - jaxsoa.spatial.skew(offset) @ J[:3])
    return p[link] + R[link] @ offset, J_point @ v, J_point


def _point_acceleration(model, q, v, a, link, offset):
    """a_C = R (a + α × c + ω × (v + ω × c)) from link spatial velocity / acceleration (local)."""
    R, _ = jaxsoa.forward_kinematics(model, q)
    vel, acc = link_velocities(model, q, v)[link], link_accelerations(model, q, v, a)[link]
    omega, lin = vel[:3], vel[3:]
    return R[link] @ (acc[3:] + jnp.cross(acc[:3], offset) + jnp.cross(omega, lin + jnp.cross(omega, offset)))


def _point_force(model, link, offset, force_link):
    """f_ext (n, 6) for a force (3,) at `offset` on `link`, link frame: [c × F; F]."""
    f = jnp.zeros((model.n_links, 6), force_link.dtype)
    return f.at[link].set(jnp.concatenate([jnp.cross(offset, force_link), force_link]))


def with_exit_nodes(system: TetheredRobot, state: State) -> TetherState:
    """The tether state with its end nodes placed at the bodies' exit points C_P, C_M."""
    ends = [exit_point(m, q, v, link, c)[:2] for (m, q, v), link, c
            in zip(_bodies(system, state), system.exit_links, system.exit_offsets, strict=True)]
    r = state.tether.r.at[0].set(ends[0][0]).at[-1].set(ends[1][0])
    v = state.tether.v.at[0].set(ends[0][1]).at[-1].set(ends[1][1])
    return dataclasses.replace(state.tether, r=r, v=v)


def stored_mass(system: TetheredRobot, tether: TetherState):
    """(ρ s_P, ρ (L − s_M)): tether material on the reels, carried at C_P and C_M."""
    return system.tether.rho * jnp.stack([tether.s[0], system.tether.length - tether.s[1]])


def accelerations(system: TetheredRobot, t, state: State, inputs: TetherInputs, q_ref):
    """Coupled accelerations: (a_P (nv_P,), a_M (nv_M,), tether node accelerations (n+1, 3), s̈ (2,),
    end forces on the bodies (2, 3)). q_ref: (joints_P, joints_M) held by PD torques."""
    tether = with_exit_nodes(system, state)
    ext = None if system.orbit is None else (lambda r: orb.gravity_gradient_acceleration(system.orbit, t, r))
    cpl = end_coupling(system.tether, tether, inputs, ext)
    m_stored = stored_mass(system, tether)
    force = cpl.force if ext is None else cpl.force + m_stored[:, None] * ext(tether.r[jnp.array([0, -1])])
    mass = cpl.mass + jnp.diag(m_stored)                                   # F_e = f_e − Σ_f m_ef a_f
    a0, gains, responses, bodies = [], [], [], _bodies(system, state)
    for (model, q, v), link, c, ref in zip(bodies, system.exit_links, system.exit_offsets, q_ref, strict=True):
        tau = -system.gains[0] * (q[7:] - ref) - system.gains[1] * v[6:]
        f_ext = None if system.orbit is None else orb.gravity_gradient_wrenches(system.orbit, t, model, q)
        qdd0 = jaxsoa.free_floating_aba(model, q, v, tau, f_ext)               # no tether force
        R_link = jaxsoa.forward_kinematics(model, q)[0][link]
        unit = jax.vmap(lambda F, model=model, link=link, c=c, R=R_link, q=q: jaxsoa.free_floating_aba(
            model, q, jnp.zeros_like(F, shape=model.nv), jnp.zeros(model.nv - 6, F.dtype),
            _point_force(model, link, c, R.T @ F)))(jnp.eye(3, dtype=q.dtype))    # M⁻¹ J_Cᵀ e_k (3, nv)
        J_point = exit_point(model, q, v, link, c)[2]
        a0.append(_point_acceleration(model, q, v, qdd0, link, c))
        gains.append(J_point @ unit.T)                                          # G = J_C M⁻¹ J_Cᵀ
        responses.append((qdd0, unit))
    eye3 = jnp.eye(3, dtype=mass.dtype)
    G = jax.scipy.linalg.block_diag(*gains)
    mass6 = jnp.kron(mass, eye3)
    a_end = jnp.linalg.solve(jnp.eye(6, dtype=G.dtype) + G @ mass6,
                             jnp.concatenate(a0) + G @ force.reshape(6))       # (I + G m) a = a0 + G f
    F = force - (mass6 @ a_end).reshape(2, 3)
    (qdd0_P, unit_P), (qdd0_M, unit_M) = responses
    a_end = a_end.reshape(2, 3)
    nodes = jnp.concatenate([a_end[:1], cpl.interior_accel + cpl.interior_gain @ a_end, a_end[1:]])
    return qdd0_P + F[0] @ unit_P, qdd0_M + F[1] @ unit_M, nodes, cpl.s_ddot, F


RK4_NODES = (0.0, 0.5, 0.5, 1.0)             # stage offsets c_i (× dt) of the classical RK4 tableau
RK4_WEIGHTS = (1 / 6, 1 / 3, 1 / 3, 1 / 6)


def rk4_step(system: TetheredRobot, t, state: State, reel_accel, q_ref, dt, inputs: TetherInputs):
    """One classical RK4 step of the coupled system, bodies on their configuration manifolds as in
    `jaxsoa.rk4_step` (stage i at q ⊕ c_i dt k_{i−1}, tangent rate dexp⁻¹). The four stages run in a
    `fori_loop`, so the coupled dynamics are traced once. reel_accel(t, state) -> s̈ (2,)."""
    nodes, weights = jnp.asarray(RK4_NODES, state.v_platform.dtype), jnp.asarray(RK4_WEIGHTS, state.v_platform.dtype)

    def derivative(offset, delta):
        """k = (dexp⁻¹ rates (2,), v̇ (2,), ḃ tether) at q ⊕ δ_q, v + δ_v, tether + δ_tether."""
        (dq_P, dq_M), (dv_P, dv_M), d_tether = delta
        tether = jax.tree.map(jnp.add, state.tether, d_tether)
        stage = State(jaxsoa.integrate(system.platform, state.q_platform, dq_P), state.v_platform + dv_P,
                      jaxsoa.integrate(system.robot, state.q_robot, dq_M), state.v_robot + dv_M, tether)
        stage_inputs = dataclasses.replace(inputs, reel_accel=reel_accel(t + offset, stage))
        a_P, a_M, r_dd, s_dd, _ = accelerations(system, t + offset, stage, stage_inputs, q_ref)
        rates = (dexp_inv(system.platform, dq_P, stage.v_platform), dexp_inv(system.robot, dq_M, stage.v_robot))
        return rates, (a_P, a_M), TetherState(tether.v, r_dd, tether.s_dot, s_dd)

    def stage(i, carry):
        k_prev, total = carry
        k = derivative(nodes[i] * dt, jax.tree.map(lambda x: nodes[i] * dt * x, k_prev))   # δ_i = c_i dt k_{i−1}
        return k, jax.tree.map(lambda acc, x: acc + weights[i] * dt * x, total, k)           # Σ b_i dt k_i

    zero = jax.tree.map(jnp.zeros_like, ((state.v_platform, state.v_robot), (state.v_platform, state.v_robot),
                                          state.tether))
    _, ((dq_P, dq_M), (dv_P, dv_M), d_tether) = jax.lax.fori_loop(0, 4, stage, (zero, zero))
    new = State(jaxsoa.integrate(system.platform, state.q_platform, dq_P), state.v_platform + dv_P,
                jaxsoa.integrate(system.robot, state.q_robot, dq_M), state.v_robot + dv_M,
                jax.tree.map(jnp.add, state.tether, d_tether))
    return dataclasses.replace(new, tether=with_exit_nodes(system, new))


def total_momentum(system: TetheredRobot, state: State):
    """Linear and angular momentum (about the origin, world/orbital axes) of bodies + stored tether +
    deployed tether, each (3,)."""
    tether = with_exit_nodes(system, state)
    linear, angular = tether_momentum(system.tether, tether)
    for model, q, v in _bodies(system, state):
        h = jaxsoa.spatial_momentum(model, q, v)
        linear, angular = linear + h[3:], angular + h[:3]
    m_stored = stored_mass(system, tether)[:, None]
    ends_r, ends_v = tether.r[jnp.array([0, -1])], tether.v[jnp.array([0, -1])]
    return (linear + jnp.sum(m_stored * ends_v, 0),
            angular + jnp.sum(m_stored * jnp.cross(ends_r, ends_v), 0))


def default_inputs(dtype=jnp.float64) -> TetherInputs:
    """Rate-driven reels at both ends (s̈ set per stage by the reel law)."""
    return tether_inputs(dtype=dtype)


def initial_state(system: TetheredRobot, distance, s, rotation=None, omega=(0.0, 0.0, 0.0), s_dot=None,
                  separation=0.0):
    """Host-side: joints at zero, the straight tether along the rotated x axis with |C_M − C_P| =
    `distance`, the whole system's centre of mass at the origin, then turned by `rotation` (3, 3)
    and moving rigidly at angular velocity `omega` (3,) (e.g. n ẑ: at rest in LVLH). s = (s_P, s_M).
    `separation` [m/s]: the robot recedes from the platform along the tether at this rate (momentum
    zero: each body gets its share), paid out by the platform reel (s_dot default (−separation, 0))."""
    platform, robot = system.platform, system.robot
    q_P, q_M = np.array(jaxsoa.neutral(platform)), np.array(jaxsoa.neutral(robot))
    c_P = np.asarray(exit_point(platform, jnp.asarray(q_P), jnp.zeros(platform.nv), system.exit_links[0],
                                system.exit_offsets[0])[0])
    q_M[:3] = c_P + np.array([distance, 0, 0]) - np.asarray(system.exit_offsets[1])
    rho, length = float(system.tether.rho), float(system.tether.length)
    c_M = c_P + np.array([distance, 0, 0])
    m_P, m_M = float(jnp.sum(platform.mass)), float(jnp.sum(robot.mass))
    l = s[1] - s[0]
    com = (m_P * np.asarray(jaxsoa.center_of_mass(platform, jnp.asarray(q_P)))
           + m_M * np.asarray(jaxsoa.center_of_mass(robot, jnp.asarray(q_M)))
           + rho * (s[0] * c_P + (length - s[1]) * c_M + l * (c_P + c_M) / 2)) / (m_P + m_M + rho * length)
    R0, w = np.eye(3) if rotation is None else np.asarray(rotation, float), np.asarray(omega, float)
    quat = np.asarray(jaxsoa.rotation.rotation_to_quat(jnp.asarray(R0)))
    q_bodies, v_bodies = [], []
    u = R0[:, 0]                                                              # tether direction
    kick = {id(platform): -separation * m_M / (m_P + m_M) * u, id(robot): separation * m_P / (m_P + m_M) * u}
    for q, model in ((q_P, platform), (q_M, robot)):
        p = R0 @ (q[:3] - com)
        q_bodies.append(np.concatenate([p, quat, q[7:]]))
        v_bodies.append(np.concatenate([R0.T @ (np.cross(w, p) + kick[id(model)]), R0.T @ w, np.zeros(model.nv - 6)]))
    r_P, r_M = R0 @ (c_P - com), R0 @ (c_M - com)
    s_dot = (-separation, 0.0) if s_dot is None else s_dot
    tether = straight_state(system.tether, r_P, r_M, s, np.cross(w, r_P) + kick[id(platform)],
                            np.cross(w, r_M) + kick[id(robot)], s_dot)
    cast = lambda x: jnp.asarray(x, jnp.float64)  # noqa: E731
    state = State(cast(q_bodies[0]), cast(v_bodies[0]), cast(q_bodies[1]), cast(v_bodies[1]), tether)
    return state, (jnp.zeros(platform.nv - 6), jnp.zeros(robot.nv - 6))


def dumbbell_rk4_step(params: TetherParams, t, tether: TetherState, inputs: TetherInputs, orbit, reel_accel, dt):
    """One RK4 step of the reduced model: the two bodies as point masses `inputs.end_mass` at the tether
    ends (`jaxsoa.reel.tether_dynamics`), gravity gradient of `orbit` (None: free space) on every mass."""
    def deriv(time, x):
        ext = None if orbit is None else (lambda r: orb.gravity_gradient_acceleration(orbit, time, r))
        return tether_dynamics(params, x, dataclasses.replace(inputs, reel_accel=reel_accel(time, x)), ext)

    return ode_rk4_step(deriv, t, tether, dt)
