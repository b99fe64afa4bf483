"""Orbit frames and gravity gradient (jaxsoa.systems.orbit) against closed forms and the full two-body
field: Clohessy–Wiltshire free motion, first-order tidal field, frame round trips, the nonlinear
LVLH equations against an ECI two-body propagation, and rigid-body pitch libration of a jaxsoa
free-floating body."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsoa
from jaxsoa.algorithms.dynamics import generalized_force
from jaxsoa.integrators.steps import ode_rk4_step
from jaxsoa.multibody.joints import JointType
from jaxsoa.systems import orbit as orb

ORBIT = orb.circular_orbit(7.0e6)
N = float(orb.mean_motion(ORBIT))
PERIOD = 2 * np.pi / N
ELLIPTIC = orb.OrbitParams(mu=orb.EARTH_MU, a=8.0e6, e=0.1, mean_anomaly0=0.3)


def rk4_scan(deriv, x0, dt, n_steps):
    """`jaxsoa.integrators.steps.ode_rk4_step` scanned over n_steps: (n_steps + 1, dim)."""
    def body(x, k):
        x = ode_rk4_step(deriv, k * dt, x, dt)
        return x, x
    _, xs = jax.lax.scan(body, x0, jnp.arange(n_steps, dtype=x0.dtype))
    return jnp.concatenate([x0[None], xs])


def cw_closed_form(t, x0, y0, z0, vx0, vy0, vz0, n):
    """Clohessy–Wiltshire solution (x radial, y along-track, z normal)."""
    s, c = np.sin(n * t), np.cos(n * t)
    x = (4 - 3 * c) * x0 + s / n * vx0 + 2 / n * (1 - c) * vy0
    y = 6 * (s - n * t) * x0 + y0 - 2 / n * (1 - c) * vx0 + (4 * s - 3 * n * t) / n * vy0
    z = z0 * c + vz0 / n * s
    return np.stack([x, y, z], -1)


def test_kepler_solution():
    # Kepler's equation residual and f ↔ E relation at e = 0.1 and 0.7 (Newton converges to round-off)
    for e in (0.1, 0.7):
        M = jnp.linspace(-3.0, 3.0, 41)
        E = orb.eccentric_anomaly(M, e)
        assert float(jnp.max(jnp.abs(E - e * jnp.sin(E) - M))) < 1e-13
    # ḟ from the closed form equals d f / dt by central differences (1e-7 relative: FD truncation)
    t = 1234.0
    f_dot, _ = orb.true_anomaly_rates(ELLIPTIC, orb.true_anomaly(ELLIPTIC, t))
    fd = (orb.true_anomaly(ELLIPTIC, t + 1.0) - orb.true_anomaly(ELLIPTIC, t - 1.0)) / 2.0
    assert abs(float(fd / f_dot) - 1) < 1e-7


@pytest.mark.parametrize("frame", ["lvlh", "orbital"])
def test_clohessy_wiltshire(frame):
    x0 = 10.0
    n_steps = 2000                                         # dt = T/2000 ≈ 2.9 s
    dt = PERIOD / n_steps
    r0, v0 = jnp.array([x0, 0.0, 0.0]), jnp.zeros(3)
    if frame == "lvlh":
        def deriv(t, x):
            return jnp.concatenate([x[3:], orb.lvlh_acceleration(ORBIT, t, x[:3], x[3:])])
        start = jnp.concatenate([r0, v0])
    else:                                                  # non-rotating frame, −n² A_f r
        def deriv(t, x):
            return jnp.concatenate([x[3:], orb.gravity_gradient_acceleration(ORBIT, t, x[:3])])
        start = jnp.concatenate(orb.lvlh_to_orbital(ORBIT, 0.0, r0, v0))
    xs = jax.jit(rk4_scan, static_argnums=(0, 3))(deriv, start, dt, n_steps)
    t = np.arange(n_steps + 1) * dt
    if frame == "orbital":
        xs = jnp.concatenate(jax.vmap(lambda tk, x: orb.orbital_to_lvlh(ORBIT, tk, x[:3], x[3:]))(t, xs), -1)
    ref = cw_closed_form(t, x0, 0, 0, 0, 0, 0, N)
    # RK4 with n dt = 2π/2000: global error ~ (n dt)⁴ × |y| ~ 1e-10 × 400 m; 1e-6 m leaves margin
    assert np.max(np.abs(np.asarray(xs[:, :3]) - ref)) < 1e-6
    assert abs(float(xs[-1, 0]) - x0) < 1e-6
    assert abs(float(xs[-1, 1]) + 12 * np.pi * x0) < 1e-6      # y(T) = −12π x₀


def test_gravity_gradient_is_first_order_tidal_field():
    # |g(R + r) − g(R) − (−k A_f r)| = O(|r|²): halving r divides it by 4 (±0.1%: next order ~ r/R ≈ 5e-4)
    t = 777.0
    direction = jnp.array([0.6, -0.48, 0.64])
    def residual(scale):
        r = scale * direction
        return float(jnp.linalg.norm(orb.relative_two_body_acceleration(ELLIPTIC, t, r)
                                     - orb.gravity_gradient_acceleration(ELLIPTIC, t, r)))
    ratios = [residual(s) / residual(s / 2) for s in (4000.0, 2000.0, 1000.0)]
    assert all(abs(ratio - 4) < 4e-3 for ratio in ratios), ratios


def test_frame_round_trips():
    key = jax.random.PRNGKey(0)
    r, v = jax.random.normal(key, (2, 3)) * jnp.array([[100.0], [0.1]])
    t = 2500.0
    back = orb.orbital_to_lvlh(ELLIPTIC, t, *orb.lvlh_to_orbital(ELLIPTIC, t, r, v))
    assert max(float(jnp.max(jnp.abs(a - b))) for a, b in zip(back, (r, v), strict=True)) < 1e-12
    back = orb.eci_to_orbital(ELLIPTIC, t, *orb.orbital_to_eci(ELLIPTIC, t, r, v))
    # through ECI the positions are ~8e6 m: round-off 1e-16 × 8e6 ≈ 1e-9 m absolute; 1e-12 relative
    assert float(jnp.max(jnp.abs(back[0] - r))) < 1e-12 * ELLIPTIC.a
    assert float(jnp.max(jnp.abs(back[1] - v))) < 1e-12 * 1e4
    # the reference point itself: ECI state of the origin is (R, V), energy −μ/2a, |R × V| = √(μp)
    R, V = orb.reference_state(ELLIPTIC, t)
    energy = 0.5 * V @ V - ELLIPTIC.mu / jnp.linalg.norm(R)
    assert abs(float(energy * 2 * ELLIPTIC.a / ELLIPTIC.mu) + 1) < 1e-12


def test_nonlinear_lvlh_matches_eci_two_body():
    # a deputy 2 km away on the elliptic orbit: propagate in ECI (two-body) and in LVLH (nonlinear
    # relative equations with ḟ, f̈ frame terms) for 4000 s, over half an orbit
    r0, v0 = jnp.array([1000.0, -1500.0, 500.0]), jnp.array([0.5, -1.0, 0.3])
    n_steps, dt = 4000, 1.0
    def lvlh(t, x):
        return jnp.concatenate([x[3:], orb.lvlh_acceleration(ELLIPTIC, t, x[:3], x[3:], linear=False)])
    def eci(t, x):
        return jnp.concatenate([x[3:], orb.two_body_acceleration(ELLIPTIC.mu, x[:3])])
    run = jax.jit(rk4_scan, static_argnums=(0, 3))
    xs_lvlh = run(lvlh, jnp.concatenate([r0, v0]), dt, n_steps)
    start = jnp.concatenate(orb.orbital_to_eci(ELLIPTIC, 0.0, *orb.lvlh_to_orbital(ELLIPTIC, 0.0, r0, v0)))
    xs_eci = run(eci, start, dt, n_steps)
    t_end = n_steps * dt
    r_end, _ = orb.orbital_to_lvlh(ELLIPTIC, t_end, *orb.eci_to_orbital(ELLIPTIC, t_end, xs_eci[-1, :3],
                                                                          xs_eci[-1, 3:]))
    # the ECI run carries RK4's error on the whole orbit, ~(n dt)⁴ n t R ≈ 7e-7 m at dt = 1 s (1.1e-5 m
    # measured at dt = 2 s: 16× more, RK4's order), plus round-off ~1e-9 m per step on 8e6 m: 3e-6 m
    assert float(jnp.max(jnp.abs(r_end - xs_lvlh[-1, :3]))) < 3e-6
    assert float(jnp.linalg.norm(xs_lvlh[-1, :3] - r0)) > 100.0      # it did move


def single_body(inertia):
    """One free-floating rigid body (jaxsoa FREE root), centre of mass at its origin."""
    return jaxsoa.build_model(parent=[-1], joint_types=[JointType.FREE], joint_axis=np.zeros((1, 3)),
                              placement_rotation=np.eye(3)[None], placement_translation=np.zeros((1, 3)),
                              mass=[50.0], com=np.zeros((1, 3)), inertia_com=np.diag(inertia)[None],
                              gravity=(0.0, 0.0, 0.0), dtype=jnp.float64)


def test_pitch_libration_frequency():
    # body axes = LVLH axes at equilibrium: I_radial (x) < I_along (y); pitch about the normal (z)
    I_radial, I_along, I_normal = 100.0, 300.0, 350.0
    expected = N * np.sqrt(3 * (I_along - I_radial) / I_normal)
    model = single_body([I_radial, I_along, I_normal])
    theta0 = 0.01                                         # rad; amplitude shift of ω ~ θ₀²/16 ≈ 6e-6
    R0 = np.array(jaxsoa.spatial.rotation.exp_so3(jnp.array([0.0, 0.0, theta0])))
    q0 = jnp.concatenate([jnp.zeros(3), jaxsoa.spatial.rotation.rotation_to_quat(jnp.asarray(R0))])
    v0 = jnp.concatenate([jnp.zeros(3), jnp.asarray(R0.T @ np.array([0.0, 0.0, N]))])   # ω = n ẑ, body frame

    def control(t, q, v):
        return generalized_force(model, q, orb.gravity_gradient_wrenches(model, ORBIT, t, q))

    dt, n_steps = 10.0, 1800                                # 3.1 orbits, ~4 libration periods
    qs, _ = jax.jit(lambda q, v: jaxsoa.rollout(model, q, v, control, dt, n_steps, control_at_stages=True))(q0, v0)
    t = np.arange(n_steps + 1) * dt
    x_body = np.asarray(jax.vmap(jaxsoa.spatial.rotation.quat_to_rotation)(qs[:, 3:7]))[:, :, 0]
    f = np.asarray(orb.true_anomaly(ORBIT, jnp.asarray(t)))
    pitch = np.arctan2(x_body[:, 1], x_body[:, 0]) - f
    pitch = (pitch + np.pi) % (2 * np.pi) - np.pi
    # frequency from the upward zero crossings (linear interpolation), averaged over whole periods
    up = np.flatnonzero((pitch[:-1] < 0) & (pitch[1:] >= 0))
    crossings = t[up] - pitch[up] * dt / (pitch[up + 1] - pitch[up])
    measured = 2 * np.pi * (len(crossings) - 1) / (crossings[-1] - crossings[0])
    assert len(crossings) >= 3
    assert abs(measured / expected - 1) < 5e-3, (measured, expected)          # 0.5 % bar
    assert abs(np.max(np.abs(pitch)) / theta0 - 1) < 1e-2                     # small, bounded libration
