"""Integrators by convergence order (halving dt divides the RK4 error by ~16, a 2nd-order tableau's by
~4, semi-implicit Euler's by ~2): the flat PyTree stepper against a closed-form ODE solution, the
manifold stepper against the pendulum's exact elliptic-integral solution and the closed-form motion of
a torque-free axisymmetric body on a spherical and on a free joint; quaternions kept unit; tableau
validation. Observed orders must be within 0.3 of the theoretical ones."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.special import ellipj, ellipk, erf

import jaxsoa
from jaxsoa.integrators import RK4, ButcherTableau, ode_rk4_step, rk4_step, rollout, semi_implicit_euler_step
from jaxsoa.multibody.joints import JointType
from jaxsoa.spatial.rotation import exp_so3, log_so3, quat_to_rotation, rotation_to_quat

G, L = 9.81, 1.0
MIDPOINT = ButcherTableau(a=((), (0.5,)), b=(0.0, 1.0), c=(0.0, 0.5))      # explicit midpoint, order 2


def observed_orders(errors):
    """log2 of the error ratios of successive halvings of dt."""
    return np.log2(np.array(errors[:-1]) / np.array(errors[1:]))


@pytest.fixture(scope="module")
def pendulum():
    """Point mass at distance L on a revolute joint about x; q = 0 hangs down."""
    return jaxsoa.build_model([-1], [1], [[1.0, 0, 0]], [np.eye(3)], [[0, 0, 0.0]], [1.0], [[0, 0, -L]],
                              [np.zeros((3, 3))], gravity=(0, 0, -G), dtype=jnp.float64)


def exact_angle(theta0, t):
    """θ(t) = 2 asin(k sn(K − ω t, k²)), k = sin(θ0/2), for release from rest at θ0."""
    k = np.sin(theta0 / 2)
    omega = np.sqrt(G / L)
    sn, _, _, _ = ellipj(ellipk(k * k) - omega * t, k * k)
    return 2 * np.arcsin(k * sn)


@pytest.mark.parametrize(("step", "order"), [(rk4_step, 4), (semi_implicit_euler_step, 1)])
def test_convergence_order(pendulum, step, order):
    theta0, horizon = 2.0, 1.0
    errors = []
    for n_steps in (50, 100, 200):
        run = jax.jit(lambda m, n=n_steps: rollout(m, jnp.array([theta0]), jnp.zeros(1),
                                                   lambda t, q, v: jnp.zeros(1), horizon / n, n, step=step))
        qs, _ = run(pendulum)
        errors.append(abs(float(qs[-1, 0]) - exact_angle(theta0, horizon)))
    rates = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    # the observed order must be within 0.3 of the theoretical one on both refinements
    assert np.all(np.abs(rates - order) < 0.3), (errors, rates)


def test_quaternion_stays_unit():
    """A free-floating spinning body: |quat| = 1 to 1e-12 after 200 RK4 steps (integration on
    the group, not in the embedding)."""
    model = jaxsoa.build_model([-1], [4], [[1.0, 0, 0]], [np.eye(3)], [[0, 0, 0.0]], [2.0], [[0.1, 0, 0]],
                               [np.diag([0.1, 0.2, 0.3])], gravity=(0, 0, 0), dtype=jnp.float64)
    v0 = jnp.array([0.1, 0.0, 0.2, 1.0, 3.0, 0.5])
    qs, _ = jax.jit(lambda m: rollout(m, jaxsoa.neutral(m), v0, lambda t, q, v: jnp.zeros(6), 0.01, 200))(model)
    assert np.abs(np.linalg.norm(np.asarray(qs[:, 3:]), axis=1) - 1).max() < 1e-12


def test_checkpointed_rollout_gradient(pendulum):
    """`checkpoint=True` rematerialises the steps but must give the same gradient (same
    arithmetic, so 1e-12), and both match central finite differences (1e-6: FD truncation)."""
    def final_angle(theta0, checkpoint):
        qs, _ = rollout(pendulum, theta0[None], jnp.zeros(1), lambda t, q, v: jnp.zeros(1), 0.01, 100,
                        step=semi_implicit_euler_step, checkpoint=checkpoint)
        return qs[-1, 0]

    theta0 = jnp.array(1.2)
    g_plain = jax.jit(jax.grad(final_angle), static_argnums=1)(theta0, False)
    g_ckpt = jax.jit(jax.grad(final_angle), static_argnums=1)(theta0, True)
    np.testing.assert_allclose(g_ckpt, g_plain, rtol=1e-12)
    h = 1e-5
    forward = jax.jit(final_angle, static_argnums=1)
    fd = (forward(theta0 + h, False) - forward(theta0 - h, False)) / (2 * h)
    np.testing.assert_allclose(g_plain, fd, rtol=1e-6)


@pytest.mark.parametrize(("tableau", "order"), [(RK4, 4), (MIDPOINT, 2)])
def test_ode_step_convergence_order(tableau, order):
    """x' = f(t, x) on a PyTree (a dict of a scalar and a (2,) array) with a time-dependent rate:
    y' = −2 t y, z' = (y, −t y): y = exp(−t²), z = z0 + (√π/2 erf(t), (exp(−t²) − 1)/2)."""
    def f(t, x):
        return {"y": -2 * t * x["y"], "z": jnp.stack([x["y"], -t * x["y"]])}

    x0, horizon = {"y": jnp.float64(1.0), "z": jnp.array([0.3, -0.2])}, 1.5
    exact = np.array([0.3 + np.sqrt(np.pi) / 2 * erf(horizon), -0.2 + (np.exp(-horizon**2) - 1) / 2])
    errors = []
    for n_steps in (20, 40, 80):
        dt = horizon / n_steps
        x = jax.jit(lambda x, n=n_steps, dt=dt: jax.lax.fori_loop(
            0, n, lambda k, x: ode_rk4_step(f, k * dt, x, dt, tableau=tableau), x))(x0)
        errors.append(max(abs(float(x["y"]) - np.exp(-horizon**2)), np.abs(np.asarray(x["z"]) - exact).max()))
    assert np.all(np.abs(observed_orders(errors) - order) < 0.3), errors


def axisymmetric_body(joint_type):
    """One link on a spherical or free joint, centre of mass at the joint, inertia diag(I1, I1, I3)."""
    return jaxsoa.build_model([-1], [joint_type], [[1.0, 0, 0]], [np.eye(3)], [[0, 0, 0.0]], [2.0], [[0, 0, 0.0]],
                              [np.diag([1.0, 1.0, 0.4])], gravity=(0, 0, -G), dtype=jnp.float64)


def exact_pose(R0, omega0, v0, t, inertia=(1.0, 0.4)):
    """Torque-free axisymmetric body: R(t) = exp(t L̂_w / I1) R0 exp(−Ω t ê3), L_w = R0 I ω0,
    Ω = (I3 − I1) ω3 / I1 (then Rᵀ Ṙ = Rᵀ L_w / I1 − Ω e3 = ω); the centre of mass moves uniformly:
    p(t) = R0 v0 t (v0 its body-frame velocity at t = 0)."""
    I1, I3 = inertia
    L_world = R0 @ (np.array([I1, I1, I3]) * omega0)
    Omega = (I3 - I1) * omega0[2] / I1
    R = np.asarray(exp_so3(jnp.asarray(t * L_world / I1))) @ R0 @ np.asarray(exp_so3(jnp.array([0, 0, -Omega * t])))
    return R, R0 @ v0 * t


@pytest.mark.parametrize(("joint_type", "tableau", "order"),
                         [(JointType.SPHERICAL, RK4, 4), (JointType.FREE, RK4, 4), (JointType.FREE, MIDPOINT, 2)])
def test_manifold_convergence_order(joint_type, tableau, order):
    """`rk4_step` with a tableau on SO(3) and SE(3) (Munthe-Kaas stages, dexp⁻¹ rates) against the
    closed-form free rigid body: rotation error |log(R_exactᵀ R)| and position error after 1.2 s.
    Gravity acts on a joint through the centre of mass: no torque (spherical); the free body falls,
    so its position gets −½ g t² in z."""
    model = axisymmetric_body(joint_type)
    R0 = np.asarray(exp_so3(jnp.array([0.3, -0.5, 0.8])))
    omega0, v_body, horizon = np.array([1.0, 0.5, 2.0]), np.array([0.2, -0.1, 0.4]), 1.2
    quat0 = rotation_to_quat(jnp.asarray(R0))
    if joint_type == JointType.FREE:
        q0, v0 = jnp.concatenate([jnp.zeros(3), quat0]), jnp.asarray(np.concatenate([v_body, omega0]))
    else:
        q0, v0, v_body = quat0, jnp.asarray(omega0), np.zeros(3)
    R_exact, p_exact = exact_pose(R0, omega0, v_body, horizon)
    p_exact = p_exact + (joint_type == JointType.FREE) * np.array([0, 0, -0.5 * G * horizon**2])
    step = jax.jit(lambda q, v, dt: rk4_step(model, q, v, jnp.zeros(model.nv), dt, tableau=tableau))
    errors = []
    for n_steps in (25, 50, 100):                       # one compiled step (dt traced), a Python loop
        q, v = q0, v0
        for _ in range(n_steps):
            q, v = step(q, v, horizon / n_steps)
        q = np.asarray(q)
        R = np.asarray(quat_to_rotation(jnp.asarray(q[-4:])))
        rotation_error = np.linalg.norm(np.asarray(log_so3(jnp.asarray(R_exact.T @ R))))
        position_error = np.abs(q[:3] - p_exact).max() if joint_type == JointType.FREE else 0.0
        errors.append(max(rotation_error, position_error))
    assert np.all(np.abs(observed_orders(errors) - order) < 0.3), errors


def test_tableau_validation():
    """A tableau that is not explicit or not consistent (c_i ≠ Σ_j a_ij) is rejected."""
    with pytest.raises(ValueError, match="explicit"):
        ButcherTableau(a=((), (0.5, 0.5)), b=(0.5, 0.5), c=(0.0, 1.0))
    with pytest.raises(ValueError, match="differs"):
        ButcherTableau(a=((), (0.5,)), b=(0.0, 1.0), c=(0.0, 1.0))
    with pytest.raises(ValueError, match="one entry per stage"):
        ButcherTableau(a=((), (0.5,)), b=(1.0,), c=(0.0, 0.5))
