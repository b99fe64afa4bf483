"""Bad inputs that the identification helpers, the spatial helpers and the traced reconfiguration used to
truncate, clamp or broadcast (an audit): an inertial parameter vector of 9 or 11 entries, torques or weights of
another length than the regressor's rows, a quaternion of 3 entries, a rotation vector of 4, a (1,) mass in a
design, a configuration of the wrong shape, negative or float step counts of `fit_log_cholesky`. Each error
names the argument or field."""

import jax.numpy as jnp
import numpy as np
import pytest

from jaxsoa.spatial import algebra, rotation
from jaxsoa.topology.reconfigure import apply_configuration, design_arrays, remap_state
from jaxsoa.workflows import identification as idf
from sims import dual_arm_spacecraft as sc


@pytest.mark.parametrize("size", [9, 11])
def test_inertial_parameters_need_ten_entries(size):
    with pytest.raises(ValueError, match="argument 'theta' has shape"):
        idf.pseudo_inertia(jnp.ones(size))
    with pytest.raises(ValueError, match="argument 'phi' has shape"):
        idf.log_cholesky_factor(jnp.ones(size))
    assert idf.pseudo_inertia(jnp.ones((2, 10))).shape == (2, 4, 4)


def test_regression_rows_are_checked():
    rng = np.random.default_rng(0)
    Y, tau = jnp.asarray(rng.normal(size=(8, 3))), jnp.asarray(rng.normal(size=8))
    with pytest.raises(ValueError, match="argument 'weights' has shape \\(1,\\), expected \\(8,\\)"):
        idf.least_squares(Y, tau, jnp.ones(1))
    with pytest.raises(ValueError, match="argument 'tau' has shape \\(7,\\), expected \\(8,\\)"):
        idf.least_squares(Y, tau[:7])
    np.testing.assert_allclose(idf.least_squares(Y, tau, jnp.ones(8)), np.linalg.lstsq(Y, tau, rcond=None)[0],
                               atol=1e-12)
    Y10 = jnp.asarray(rng.normal(size=(8, 10)))
    with pytest.raises(ValueError, match="argument 'tau' has shape \\(1,\\), expected \\(8,\\)"):
        idf.regression_loss(jnp.zeros((1, 10)), Y10, jnp.ones(1), jnp.ones(8))
    with pytest.raises(ValueError, match="argument 'phi' has shape \\(2, 10\\), expected \\(1, 10\\)"):
        idf.regression_loss(jnp.zeros((2, 10)), Y10, jnp.ones(8), jnp.ones(8))


@pytest.mark.parametrize("call, match", [
    (lambda: algebra.skew(jnp.ones(2)), "argument 'w' has shape \\(2,\\), expected \\(..., 3\\)"),
    (lambda: rotation.quat_to_rotation(jnp.ones(3)), "argument 'quat_xyzw'"),
    (lambda: rotation.exp_so3(jnp.ones(4)), "argument 'rotvec'"),
    (lambda: rotation.rotation_to_quat(jnp.eye(2)), "argument 'R' has shape \\(2, 2\\)"),
    (lambda: rotation.log_so3(jnp.ones(3)), "argument 'R'"),
])
def test_spatial_helpers_check_their_vectors(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_traced_reconfiguration_checks_its_arrays():
    design = sc.design(floating=True)
    template, arrays = sc.model(1, floating=True), design_arrays(design)
    config = jnp.asarray(sc.configuration(1), jnp.int32)
    with pytest.raises(ValueError, match="argument 'interfaces' has shape"):
        apply_configuration(template, arrays, config[:, :-1])
    with pytest.raises(ValueError, match="field 'mass' has shape \\(1,\\)"):
        apply_configuration(template, arrays._replace(mass=jnp.ones(1)), config)
    model = apply_configuration(template, arrays, config, jnp.asarray(sc.IDS))
    q, v = jnp.zeros(model.nq), jnp.zeros(model.nv)
    with pytest.raises(ValueError, match="argument 'previous_inboard' has shape \\(\\)"):
        remap_state(model, 0, q, v)
    with pytest.raises(ValueError, match="argument 'q' has shape"):
        remap_state(model, model.inboard_interface, q[:-1], v)


def test_results_and_sweep_helpers_refuse_what_they_would_lose():
    from jaxsoa.workflows import results, sharding, store

    with pytest.raises(ValueError, match="both named 'a/b'"):
        results.flatten({"a/b": np.ones(2), "a": {"b": np.zeros(2)}})
    with pytest.raises(ValueError, match=r"argument .quantiles. = .* gives repeated keys"):
        results.summarize({"x": np.arange(4.0)}, quantiles=(0.5, 0.5000001))
    with pytest.raises(ValueError, match="argument 'quantiles' must be a sequence"):
        results.summarize({"x": np.arange(4.0)}, quantiles=0.5)
    with pytest.raises(TypeError, match="results\\['z'\\] is complex"):
        results.summarize({"z": np.ones(3) * 1j})
    assert results.summarize({"x": np.arange(5.0)}, quantiles=(0.5,))["x"]["q50"] == 2.0   # the median of 0..4
    with pytest.raises(ValueError, match="'count' must be a positive integer"):
        sharding.chunk_length(-3, 1)
    with pytest.raises(ValueError, match="'n_devices' must be a positive integer"):
        sharding.chunk_length(4, 0)
    with pytest.raises(ValueError, match="'count' must be a positive integer"):
        store.sweep_record(-1, 1, {"a": np.ones((1, 2))}, {})


@pytest.mark.parametrize("kwargs, error, name", [
    (dict(adam_steps=-1), ValueError, "adam_steps"), (dict(lbfgs_steps=-3), ValueError, "lbfgs_steps"),
    (dict(gauss_newton_steps=-1), ValueError, "gauss_newton_steps"), (dict(adam_steps=2.5), TypeError, "adam_steps"),
    (dict(lbfgs_steps=3.0), TypeError, "lbfgs_steps"),
    (dict(gauss_newton_steps=True), TypeError, "gauss_newton_steps")])
def test_fit_step_counts_are_checked(kwargs, error, name):
    """A negative count failed inside XLA; 2.5 ran 2 steps and True one (lax.scan truncates)."""
    Y = jnp.asarray(np.random.default_rng(1).normal(size=(12, 10)))
    with pytest.raises(error, match=rf"argument '{name}'"):
        idf.fit_log_cholesky(jnp.zeros((1, 10)), Y, jnp.ones(12), jnp.ones(12), **kwargs)


def test_fit_stages_can_be_skipped_and_recover_exact_data():
    """0 steps skips a stage: with no steps at all φ0 comes back with no losses; Levenberg–Marquardt alone, on
    torques generated exactly by a real body θ* (Y full rank), recovers θ*."""
    rng = np.random.default_rng(2)
    Y, phi_true = jnp.asarray(rng.normal(size=(40, 10))), jnp.asarray(rng.normal(0.0, 0.3, (1, 10)))
    theta_true = idf.parameters_from_log_cholesky(phi_true).reshape(-1)
    tau, phi0 = Y @ theta_true, phi_true + 0.05
    none = idf.fit_log_cholesky(phi0, Y, tau, jnp.ones(40), adam_steps=0, lbfgs_steps=0, gauss_newton_steps=0)
    assert none.losses.shape == (0,) and bool(jnp.all(none.phi == phi0))
    fit = idf.fit_log_cholesky(phi0, Y, tau, jnp.ones(40), adam_steps=0, lbfgs_steps=0, gauss_newton_steps=25)
    assert fit.losses.shape == (25,)
    np.testing.assert_allclose(idf.parameters_from_log_cholesky(fit.phi).reshape(-1), theta_true, rtol=1e-8,
                               atol=1e-8 * float(jnp.max(jnp.abs(theta_true))))
