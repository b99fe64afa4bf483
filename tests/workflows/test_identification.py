"""Inertial parameters, the joint-torque regressor, the log-Cholesky parametrisation, base
parameters, least squares and the log-Cholesky fit (jaxsoa/regressor.py, jaxsoa/identify.py),
and the identification experiment."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pinocchio as pin
import pytest
from jax.experimental import checkify

import jaxsoa
from experiments import identify_inertia
from jaxsoa.algorithms import regressor
from jaxsoa.multibody.build import validate_inertia
from jaxsoa.workflows import identification as identify
from sims import space_arm_7dof as arm
from tests.helpers.trees import build_jaxsoa, build_pinocchio, coordinate_maps, counting, link_map, random_tree

batched_regressor = jax.jit(jax.vmap(regressor.joint_torque_regressor, in_axes=(None, 0, 0, 0)))
single_regressor = jax.jit(regressor.joint_torque_regressor)
batched_rnea = jax.jit(jax.vmap(jaxsoa.rnea, in_axes=(None, 0, 0, 0)))
N_STATES = 30                   # states per batch: one shape, so each batched function compiles once per model
fit = jax.jit(identify.fit_log_cholesky, static_argnames=("adam_steps", "lbfgs_steps", "gauss_newton_steps"))


def relative(x, ref):
    return float(np.abs(np.asarray(x) - np.asarray(ref)).max() / np.abs(np.asarray(ref)).max())


@pytest.fixture(scope="module")
def arm_fixed():
    """Fixed-base space arm with gravity switched on (so gravity terms enter the regressor)."""
    return dataclasses.replace(arm.build(False), gravity=jnp.array([0.3, -0.2, -9.81]))


@pytest.fixture(scope="module")
def arm_floating():
    return arm.build(True)


def random_states(model, key, n):
    k_q, k_v, k_a = jax.random.split(key, 3)
    q = jax.vmap(lambda k: jaxsoa.random_configuration(model, k))(jax.random.split(k_q, n))
    return q, jax.random.normal(k_v, (n, model.nv)), jax.random.normal(k_a, (n, model.nv))


def test_regressor_matches_pinocchio_on_random_trees():
    """Y against Pinocchio's computeJointTorqueRegressor on a random free-floating tree with
    revolute, prismatic and spherical joints (columns and rows mapped by name), and π against
    Inertia.toDynamicParameters. Tolerance 1e-10 relative: both are float64 sums of O(10) terms;
    measured ~1e-15."""
    rng = np.random.default_rng(3)
    tree = random_tree(rng, 6, floating=True)
    tree["mass"][0] = 0.0                                   # a massless link: π = 0 must be representable
    tree["com"][0] = tree["inertia_com"][0] = 0.0
    model, pin_model = build_jaxsoa(tree), build_pinocchio(tree)
    model = dataclasses.replace(model, gravity=jnp.array([0.0, 0.0, -9.81]))
    joint_ids, _ = link_map(model, pin_model)
    _, v_index = coordinate_maps(model, pin_model)
    columns = np.concatenate([10 * (jid - 1) + np.arange(10) for jid in joint_ids])
    data = pin_model.createData()
    theta = np.asarray(regressor.inertial_parameters(model))
    pin_theta = np.stack([pin_model.inertias[jid].toDynamicParameters() for jid in joint_ids])
    assert relative(theta, pin_theta) < 1e-12
    for _ in range(3):
        q = pin.randomConfiguration(pin_model, -np.pi * np.ones(pin_model.nq), np.pi * np.ones(pin_model.nq))
        v, a = rng.normal(size=(2, pin_model.nv))
        Y_pin = pin.computeJointTorqueRegressor(pin_model, data, q, v, a)[v_index][:, columns]
        q_index, _ = coordinate_maps(model, pin_model)
        Y = single_regressor(model, jnp.asarray(q[q_index]), jnp.asarray(v[v_index]),
                                             jnp.asarray(a[v_index]))
        assert relative(Y, Y_pin) < 1e-10


def test_regressor_times_parameters_is_rnea(arm_fixed, arm_floating):
    """Y(q, v, a) θ = rnea(with_inertial_parameters(model, θ), q, v, a) for the true θ and for random
    physically consistent θ (a second code path: RNEA on a rebuilt model), and Y equals the
    forward-mode Jacobian of that RNEA with respect to θ (RNEA is linear in θ). Tolerances: 1e-12
    relative for Y θ (measured ~1e-15), 1e-10 for the Jacobian (c = h/m inside the
    rebuilt model rounds; measured ~1e-14)."""
    for model, key in ((arm_fixed, 0), (arm_floating, 1)):
        q, v, a = random_states(model, jax.random.key(key), N_STATES)
        Y = batched_regressor(model, q, v, a)
        theta_true = regressor.inertial_parameters(model)
        assert relative(Y @ theta_true.reshape(-1), batched_rnea(model, q, v, a)) < 1e-12
        theta = identify.parameters_from_log_cholesky(jax.random.normal(jax.random.key(key + 10), (8, 10)))
        tau = batched_rnea(regressor.with_inertial_parameters(model, theta), q, v, a)
        assert relative(Y @ theta.reshape(-1), tau) < 1e-12


    def rnea_of(theta_flat, q, v, a):
        return jaxsoa.rnea(regressor.with_inertial_parameters(arm_fixed, theta_flat.reshape(-1, 10)), q, v, a)

    q, v, a = (x[0] for x in random_states(arm_fixed, jax.random.key(2), 1))
    J = jax.jit(jax.jacfwd(rnea_of))(theta.reshape(-1), q, v, a)
    assert relative(J, single_regressor(arm_fixed, q, v, a)) < 1e-10


def test_pseudo_inertia_of_point_masses():
    """J(π) = Σ m_i [x_i; 1][x_i; 1]ᵀ for a cloud of point masses whose π is summed directly
    (m = Σ m_i, h = Σ m_i x_i, I = Σ m_i (|x_i|² 1 − x_i x_iᵀ)), both directions. 1e-12 relative."""
    rng = np.random.default_rng(0)
    m, x = rng.uniform(0.1, 2.0, 7), rng.normal(size=(7, 3))
    I = sum(mi * (xi @ xi * np.eye(3) - np.outer(xi, xi)) for mi, xi in zip(m, x, strict=True))
    theta = np.r_[m.sum(), m @ x, I[0, 0], I[0, 1], I[1, 1], I[0, 2], I[1, 2], I[2, 2]]
    x1 = np.c_[x, np.ones(7)]
    J = (m[:, None, None] * x1[:, :, None] * x1[:, None, :]).sum(0)
    assert relative(identify.pseudo_inertia(jnp.asarray(theta)), J) < 1e-12
    assert relative(identify.parameters_from_pseudo_inertia(jnp.asarray(J)), theta) < 1e-12


def test_log_cholesky_round_trip_and_consistency(arm_floating):
    """φ -> θ -> φ and θ -> φ -> θ to 1e-12 (relative), and every random φ is a real body by
    `build.validate_inertia` (m > 0, I_com positive definite, triangle inequalities — an independent
    host check) and by J(θ) ≻ 0."""
    phi = 0.5 * jax.random.normal(jax.random.key(0), (500, 10))
    theta = identify.parameters_from_log_cholesky(phi)
    assert relative(identify.log_cholesky_from_parameters(theta), phi) < 1e-12
    theta_true = regressor.inertial_parameters(arm_floating)
    back = identify.parameters_from_log_cholesky(identify.log_cholesky_from_parameters(theta_true))
    assert relative(back, theta_true) < 1e-12
    wide = identify.parameters_from_log_cholesky(1.5 * jax.random.normal(jax.random.key(1), (1000, 10)))
    mass, _, inertia_com = regressor.inertia_from_parameters(wide)
    assert float(mass.min()) > 0
    validate_inertia(np.asarray(mass)[:, None], np.asarray(inertia_com)[:, None], [str(k) for k in range(1000)])
    assert float(identify.physical_consistency(wide).min()) > 0
    checked = checkify.checkify(identify.check_physical_consistency)
    checked(wide)[0].throw()                                              # every body passes
    with pytest.raises(checkify.JaxRuntimeError, match="not physically consistent"):
        checked(wide.at[3, 0].set(-1.0))[0].throw()                       # negative mass fails


def test_base_parameters_and_least_squares(arm_fixed, arm_floating):
    """Base parameters from one random data set: the rank equals that of Pinocchio's stacked
    regressor; on a fresh data set Y θ = Y_b β(θ) for random θ (1e-10 relative); noise-free
    ordinary least squares recovers β to 1e-6 (measured ~1e-13); the weighted solution satisfies
    its normal equations Y_bᵀ W (Y_b β − τ) = 0 (1e-9 relative to |Y_bᵀ W τ|)."""
    pin_model = arm.build_pinocchio(False)
    pin_model.gravity.linear = np.asarray(arm_fixed.gravity)
    data = pin_model.createData()
    q, v, a = (np.asarray(x) for x in random_states(arm_fixed, jax.random.key(5), N_STATES))
    Y_pin = np.concatenate([pin.computeJointTorqueRegressor(pin_model, data, *s) for s in zip(q, v, a, strict=True)])
    bp_fixed = identify.base_parameters(batched_regressor(arm_fixed, *random_states(arm_fixed, jax.random.key(2),
                                                                                    N_STATES)).reshape(-1, 80))
    assert bp_fixed.rank == np.linalg.matrix_rank(Y_pin / np.maximum(np.linalg.norm(Y_pin, axis=0), 1e-300))

    for model, key in ((arm_fixed, 3), (arm_floating, 4)):
        Y_first = batched_regressor(model, *random_states(model, jax.random.key(key), N_STATES))
        bp = identify.base_parameters(Y_first.reshape(-1, 10 * model.n_links))
        Y = batched_regressor(model, *random_states(model, jax.random.key(key + 20), N_STATES))
        Y = Y.reshape(-1, 10 * model.n_links)
        theta = identify.parameters_from_log_cholesky(jax.random.normal(jax.random.key(key), (model.n_links, 10)))
        theta = theta.reshape(-1)
        assert relative(Y[:, bp.independent] @ bp(theta), Y @ theta) < 1e-10
        tau = Y @ theta
        beta = identify.least_squares(Y[:, bp.independent], tau)
        assert relative(beta, bp(theta)) < 1e-6
        weights = jax.random.uniform(jax.random.key(key), tau.shape, minval=0.1, maxval=10.0)
        noisy = tau + 0.1 * jax.random.normal(jax.random.key(key + 1), tau.shape)
        Y_b = Y[:, bp.independent]
        beta_w = identify.least_squares(Y_b, noisy, weights)
        normal = Y_b.T @ (weights * (Y_b @ beta_w - noisy))
        assert float(jnp.abs(normal).max() / jnp.abs(Y_b.T @ (weights * noisy)).max()) < 1e-9


def test_free_floating_identification_noise_free(arm_floating):
    """Free-floating arm, data from `rnea_free_floating` (joint accelerations given, hub acceleration
    from momentum conservation; an independent code path): the hub rows of τ = Y θ are zero, and
    least squares on [0; τ_joints] recovers all structural base parameters (rank 59) to 1e-6."""
    model = arm_floating
    q, v, _ = random_states(model, jax.random.key(7), N_STATES)
    qdd_joints = jax.random.normal(jax.random.key(8), (N_STATES, 7))

    def inverse(q, v, qdd):
        out = jaxsoa.rnea_free_floating(model, q, v, qdd)
        return out.base_acceleration, out.tau_joints

    base_acceleration, tau_joints = jax.jit(jax.vmap(inverse))(q, v, qdd_joints)
    a = jnp.concatenate([base_acceleration, qdd_joints], axis=1)
    tau = jnp.concatenate([jnp.zeros((N_STATES, 6)), tau_joints], axis=1).reshape(-1)
    Y = batched_regressor(model, q, v, a).reshape(-1, 10 * model.n_links)
    bp = identify.base_parameters(Y)
    theta_true = regressor.inertial_parameters(model).reshape(-1)
    assert bp.rank == 59
    assert relative(identify.least_squares(Y[:, bp.independent], tau), bp(theta_true)) < 1e-6


def test_log_cholesky_fit_reaches_least_squares_optimum(arm_fixed):
    """Noise-free data (fixed-base arm, 30 random states): the log-Cholesky fit from a prior 0.3
    log-Cholesky units off (masses off by up to ~2x) reaches the least-squares optimum — loss below
    1e-20 (LS: ~1e-27, rounding) and base parameters within 1e-6 relative (measured ~1e-12);
    Adam + L-BFGS alone lower the loss by > 100x (measured ~1e4x); every iterate is a real body."""
    q, v, a = random_states(arm_fixed, jax.random.key(11), N_STATES)
    Y = batched_regressor(arm_fixed, q, v, a).reshape(-1, 80)
    theta_true = regressor.inertial_parameters(arm_fixed)
    tau = Y @ theta_true.reshape(-1)
    bp = identify.base_parameters(Y)
    weights = jnp.ones_like(tau) / jnp.mean(tau**2)
    phi0 = identify.log_cholesky_from_parameters(theta_true) + 0.3 * jax.random.normal(jax.random.key(12), (8, 10))
    result = fit(phi0, Y, tau, weights, adam_steps=200, lbfgs_steps=100, gauss_newton_steps=40)
    assert float(result.losses[300]) < 1e-2 * float(result.losses[0])
    beta = bp(identify.parameters_from_log_cholesky(result.phi).reshape(-1))
    assert float(identify.regression_loss(result.phi, Y, tau, weights)) < 1e-20
    assert relative(beta, bp(theta_true.reshape(-1))) < 1e-6


def test_batch_of_parameter_sets_compiles_once(arm_fixed):
    """RNEA of a vmapped batch of log-Cholesky parameter sets compiles once for two different
    batches, and each batch element equals Y θ (1e-12 relative)."""
    def torques(phi, q, v, a):
        model = regressor.with_inertial_parameters(arm_fixed, identify.parameters_from_log_cholesky(phi))
        return jaxsoa.rnea(model, q, v, a)

    counted, count = counting(torques)
    batched = jax.jit(jax.vmap(counted, in_axes=(0, None, None, None)))
    q, v, a = (x[0] for x in random_states(arm_fixed, jax.random.key(13), 1))
    Y = single_regressor(arm_fixed, q, v, a)
    for key in (14, 15):
        phi = jax.random.normal(jax.random.key(key), (5, 8, 10))
        tau = batched(phi, q, v, a)
        reference = identify.parameters_from_log_cholesky(phi).reshape(5, -1) @ Y.T
        assert relative(tau, reference) < 1e-12
    assert count[0] == 1


@pytest.mark.slow            # runs experiments/identify_inertia.py
def test_identification_experiment(tmp_path):
    """The experiment runs on a tiny horizon, writes its plots and tables; with noise off, least
    squares recovers the base parameters (1e-6 relative) and the fit is physically consistent."""
    rows = identify_inertia.run(tmp_path, systems=("arm_fixed",), duration=2.0, stride=5, noise=0.0,
                                adam_steps=20, lbfgs_steps=5, gauss_newton_steps=10)
    by_method = {r["method"]: r for r in rows}
    assert set(by_method) == {"prior", "OLS", "WLS", "GD"}
    assert by_method["OLS"]["base_error"] < 1e-6
    assert by_method["GD"]["min_pseudo_inertia_eig"] > 0
    for name in ("identify_loss.png", "identify_heldout.png", "identify_inertia.json", "identify_inertia.md"):
        assert (tmp_path / name).stat().st_size > 0
