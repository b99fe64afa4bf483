"""Integrators by convergence order (halving dt divides the RK4 error by ~16, semi-implicit
Euler's by ~2) against the pendulum's exact elliptic-integral solution, and quaternions kept unit."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.special import ellipj, ellipk

import jaxsoa
from jaxsoa.integrators import rk4_step, rollout, semi_implicit_euler_step

G, L = 9.81, 1.0


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
