"""Inertial parameter identification: a physically consistent parametrisation, numerical
identifiability (base parameters), least squares, and gradient descent (optax).

Parametrisation (Rucker & Wensing 2022, "Smooth parameterization of rigid-body inertia"). The
pseudo-inertia of a link with parameters π (`jaxsoa.algorithms.regressor`'s order) is the 4x4 matrix

    J(π) = [[Σ, h], [hᵀ, m]],   Σ = ½ tr(I) 1 − I  (the second moment ∫ x xᵀ dm about the origin)

and π is physically consistent (some mass distribution has it: m > 0, I_com positive definite
and its principal moments obey the triangle inequalities) iff J ≻ 0. The log-Cholesky vector
φ = [α, d₁, d₂, d₃, s₁₂, s₂₃, s₁₃, t₁, t₂, t₃] ∈ ℝ¹⁰ gives J = U Uᵀ with the upper-triangular

    U = e^α [[e^{d₁}, s₁₂, s₁₃, t₁], [0, e^{d₂}, s₂₃, t₂], [0, 0, e^{d₃}, t₃], [0, 0, 0, 1]],

so every φ is a real body (m = e^{2α}) and the map is a diffeomorphism onto J ≻ 0.

Identifiability: Y θ depends on θ only through the base parameters β = θ_b + K θ_d (`base_parameters`:
QR with column pivoting of a stacked regressor, Gautier 1990), with Y θ = Y_b β, Y_b = Y[:, b].

Free-floating systems with no external wrench: the hub's rows of τ = Y θ read 0 = Y_hub θ (the
rate of the system momentum, seen from the hub, is zero). They are kept as equations with target
zero next to the measured joint torques, so the hub's own parameters become identifiable.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
import scipy.linalg
from jax.experimental import checkify

from jaxsoa.algorithms.regressor import inertia_entries, rotational_inertia

# (row, column) of s₁₂, s₂₃, s₁₃, t₁, t₂, t₃ in U
_OFF_DIAGONAL = ((0, 1), (1, 2), (0, 2), (0, 3), (1, 3), (2, 3))


def _eye(x, n):
    """n x n identity broadcast over the batch axes of x (..., k) (explicit: no rank promotion)."""
    return jnp.broadcast_to(jnp.eye(n, dtype=x.dtype), (*x.shape[:-1], n, n))


def _last_axis(name, x, size):
    """x if its last axis has `size` entries (ValueError naming `name`: a longer one would be truncated)."""
    if jnp.ndim(x) < 1 or jnp.shape(x)[-1] != size:
        raise ValueError(f"argument '{name}' has shape {jnp.shape(x)}, expected (..., {size})")
    return x


def _rows(name, x, m, what="one per row of the regressor"):
    """x if it is (m,) (ValueError naming `name`: another length would be broadcast)."""
    if x is not None and jnp.shape(x) != (m,):
        raise ValueError(f"argument '{name}' has shape {jnp.shape(x)}, expected ({m},): {what}")
    return x


def pseudo_inertia(theta):
    """π (..., 10) -> J (..., 4, 4) = [[½ tr(I) 1 − I, h], [hᵀ, m]]."""
    _last_axis("theta", theta, 10)
    inertia = rotational_inertia(theta[..., 4:])
    sigma = 0.5 * jnp.trace(inertia, axis1=-2, axis2=-1)[..., None, None] * _eye(theta, 3) - inertia
    h, m = theta[..., 1:4], theta[..., 0]
    top = jnp.concatenate([sigma, h[..., :, None]], -1)
    return jnp.concatenate([top, jnp.concatenate([h, m[..., None]], -1)[..., None, :]], -2)


def parameters_from_pseudo_inertia(J):
    """J (..., 4, 4) -> π (..., 10): I = tr(Σ) 1 − Σ, h = J[:3, 3], m = J[3, 3]."""
    sigma = J[..., :3, :3]
    inertia = jnp.trace(sigma, axis1=-2, axis2=-1)[..., None, None] * _eye(J[..., 0], 3) - sigma
    return jnp.concatenate([J[..., 3, 3, None], J[..., :3, 3], inertia_entries(inertia)], -1)


def log_cholesky_factor(phi):
    """φ (..., 10) -> U (..., 4, 4) upper triangular with positive diagonal (module doc)."""
    _last_axis("phi", phi, 10)
    alpha, d1, d2, d3, s12, s23, s13, t1, t2, t3 = (phi[..., i] for i in range(10))
    zero, one = jnp.zeros_like(alpha), jnp.ones_like(alpha)
    rows = ((jnp.exp(d1), s12, s13, t1), (zero, jnp.exp(d2), s23, t2), (zero, zero, jnp.exp(d3), t3),
            (zero, zero, zero, one))
    U = jnp.stack([jnp.stack(row, -1) for row in rows], -2)
    return jnp.exp(alpha)[..., None, None] * U


def parameters_from_log_cholesky(phi):
    """φ (..., 10) -> π (..., 10) of a physically consistent body: J = U Uᵀ."""
    U = log_cholesky_factor(phi)
    return parameters_from_pseudo_inertia(U @ jnp.swapaxes(U, -1, -2))


def log_cholesky_from_parameters(theta):
    """π (..., 10) with J(π) ≻ 0 -> φ (..., 10). U = E chol(E J E) E with E the order reversal
    (the 'upper' Cholesky factor); NaN where J is not positive definite (check first with
    `physical_consistency`)."""
    flip = jnp.eye(4, dtype=theta.dtype)[::-1]
    U = flip @ jnp.linalg.cholesky(flip @ pseudo_inertia(theta) @ flip) @ flip
    scale = U[..., 3, 3]
    V = U / scale[..., None, None]
    d = jnp.log(jnp.stack([V[..., i, i] for i in range(3)], -1))
    off = jnp.stack([V[..., i, j] for i, j in _OFF_DIAGONAL], -1)
    return jnp.concatenate([jnp.log(scale)[..., None], d, off], -1)


def physical_consistency(theta):
    """(...,) smallest eigenvalue of J(π) relative to its largest: > 0 iff π is a real body."""
    eig = jnp.linalg.eigvalsh(pseudo_inertia(theta))
    return eig[..., 0] / eig[..., -1]


def check_physical_consistency(theta):
    """`jax.experimental.checkify` check that every π (..., 10) is a real body (J(π) ≻ 0); use
    inside a function wrapped by `checkify.checkify`."""
    checkify.check(jnp.all(physical_consistency(theta) > 0),
                   "inertial parameters are not physically consistent: pseudo-inertia not positive definite")


class BaseParameters(NamedTuple):
    """β = θ[independent] + K θ[dependent]; Y θ = Y[:, independent] β. Host (numpy) arrays:
    independent (r,), dependent (p − r,), K (r, p − r), singular_values (p,) of the stacked
    regressor with unit-norm columns."""
    independent: np.ndarray
    dependent: np.ndarray
    K: np.ndarray
    singular_values: np.ndarray

    @property
    def rank(self) -> int:
        return len(self.independent)

    def __call__(self, theta):
        """θ (..., p) -> β (..., r)."""
        return theta[..., self.independent] + theta[..., self.dependent] @ jnp.asarray(self.K).T


def base_parameters(Y_stacked, rtol=1e-9) -> BaseParameters:
    """Identifiable combinations of a stacked regressor (m, p) from QR with column pivoting of its
    unit-norm columns Y D⁻¹ (D the column norms): Y D⁻¹ P = Q [R₁ R₂], rank r = #{|R_ii| > rtol |R₁₁|},
    K = D_b⁻¹ R₁⁻¹ R₂ D_d
    (host-side, numpy)."""
    Y = np.asarray(Y_stacked, np.float64)
    norms = np.linalg.norm(Y, axis=0)
    scale = np.where(norms > rtol * norms.max(), norms, 0.0)    # columns of rounding noise count as zero
    Y_unit = Y * np.divide(1.0, scale, out=np.zeros_like(scale), where=scale > 0)   # rank free of units
    _, R, pivot = scipy.linalg.qr(Y_unit, mode="economic", pivoting=True)
    diag = np.abs(np.diag(R))
    rank = int(np.sum(diag > rtol * diag[0]))
    K_scaled = scipy.linalg.solve_triangular(R[:rank, :rank], R[:rank, rank:])
    independent, dependent = pivot[:rank], pivot[rank:]
    K = K_scaled * scale[dependent][None, :] / scale[independent][:, None]   # Y_d = Y_b K
    return BaseParameters(independent, dependent, K, np.linalg.svd(Y_unit, compute_uv=False))


def condition_number(Y_base) -> float:
    """σ_max / σ_min of a (m, r) base regressor, each column first scaled to unit norm
    (so the number measures excitation, not the units of the parameters)."""
    Y = np.asarray(Y_base, np.float64)
    s = np.linalg.svd(Y / np.linalg.norm(Y, axis=0), compute_uv=False)
    return float(s[0] / s[-1])


def least_squares(Y_base, tau, weights=None):
    """β̂ = argmin Σ wᵢ (Y_b β − τ)ᵢ² for rows (m, r), (m,), weights (m,) or None (ordinary)."""
    _rows("tau", tau, jnp.shape(Y_base)[0])
    _rows("weights", weights, jnp.shape(Y_base)[0])
    if weights is None:
        return jnp.linalg.lstsq(Y_base, tau)[0]
    root = jnp.sqrt(weights)
    return jnp.linalg.lstsq(root[:, None] * Y_base, root * tau)[0]


def residual_weights(residual, floor=1e-12):
    """(N, nv) residuals of an ordinary fit -> (N, nv) weights 1 / σ_j², σ_j² the residual
    variance of coordinate j (Gautier & Poignet's weighted least squares), with σ_j² raised to at
    least `floor` · max_j σ_j² so that an exactly fitted coordinate does not get an infinite weight."""
    variance = jnp.mean(residual**2, axis=0)
    return jnp.broadcast_to(1.0 / jnp.maximum(variance, floor * jnp.max(variance)), residual.shape)


def _weighted_residual(phi, Y_stacked, tau, weights):
    """r(φ) = √(w / m) (Y θ(φ) − τ), so that Σ r² = `regression_loss`; φ (n, 10)."""
    m = jnp.shape(Y_stacked)[0]
    _rows("tau", tau, m)
    _rows("weights", weights, m)
    if jnp.shape(Y_stacked)[-1] != 10 * jnp.shape(phi)[0]:
        raise ValueError(f"argument 'phi' has shape {jnp.shape(phi)}, expected ({jnp.shape(Y_stacked)[-1] // 10}, 10): "
                         "one row per link of the regressor")
    theta = parameters_from_log_cholesky(phi).reshape(-1)
    return jnp.sqrt(weights / tau.shape[0]) * (Y_stacked @ theta - tau)


def regression_loss(phi, Y_stacked, tau, weights):
    """Weighted mean squared torque error of φ (n, 10): mean w (Y θ(φ) − τ)²."""
    return jnp.sum(_weighted_residual(phi, Y_stacked, tau, weights) ** 2)


class Fit(NamedTuple):
    """phi (n, 10) the estimate; losses (adam + lbfgs + gauss_newton steps,) the loss before each step."""
    phi: jax.Array
    losses: jax.Array


def _stage_steps(name, steps) -> int:
    """A static step count ≥ 0 (0 skips the stage): TypeError unless a Python or NumPy int (not a bool; `lax.scan`
    truncated 2.5 to 2), ValueError naming `name` below 0."""
    if isinstance(steps, (bool, np.bool_)) or not isinstance(steps, (int, np.integer)):
        raise TypeError(f"argument '{name}' must be a Python int, got {type(steps).__name__}")
    if steps < 0:
        raise ValueError(f"argument '{name}' = {steps} must be ≥ 0 (0 skips the stage)")
    return int(steps)


def _optax_descent(loss, optimizer, phi, steps, line_search=False):
    """`steps` optax updates of φ under `lax.scan`; returns (φ, loss before each step)."""
    value_and_grad = optax.value_and_grad_from_state(loss) if line_search else None

    def step(state, _):
        phi, opt_state = state
        if line_search:
            value, grad = value_and_grad(phi, state=opt_state)
            updates, opt_state = optimizer.update(grad, opt_state, phi, value=value, grad=grad, value_fn=loss)
        else:
            value, grad = jax.value_and_grad(loss)(phi)
            updates, opt_state = optimizer.update(grad, opt_state, phi)
        return (optax.apply_updates(phi, updates), opt_state), value

    (phi, _), losses = jax.lax.scan(step, (phi, optimizer.init(phi)), length=steps)
    return phi, losses


def _levenberg_marquardt(residual, phi, steps, damping=1e-3):
    """Levenberg–Marquardt on r(φ): δ = −(JᵀJ + μ tr(JᵀJ)/p 1)⁻¹ Jᵀ r, accepted iff Σ r² drops
    (then μ /= 3, else μ *= 4). Returns (φ, loss before each step)."""
    shape = phi.shape

    def flat_residual(x):
        return residual(x.reshape(shape))

    def step(state, _):
        x, mu = state
        r, J = flat_residual(x), jax.jacfwd(flat_residual)(x)
        G = J.T @ J
        delta = -jnp.linalg.solve(G + mu * jnp.trace(G) / x.size * jnp.eye(x.size, dtype=x.dtype), J.T @ r)
        loss = jnp.sum(r**2)
        better = jnp.sum(flat_residual(x + delta) ** 2) < loss
        return (jnp.where(better, x + delta, x), jnp.where(better, mu / 3, mu * 4)), loss

    (x, _), losses = jax.lax.scan(step, (phi.reshape(-1), jnp.asarray(damping, phi.dtype)), length=steps)
    return x.reshape(shape), losses


def fit_log_cholesky(phi0, Y_stacked, tau, weights, adam_steps=500, lbfgs_steps=200, gauss_newton_steps=30,
                     learning_rate=1e-2) -> Fit:
    """Minimise `regression_loss` over φ (n, 10) from φ0, in three stages, every iterate a real body:
    Adam (optax), L-BFGS (optax, zoom line search), then Levenberg–Marquardt on the residual. The
    first-order stages stall in the curved, partly flat valleys of φ (unidentifiable directions);
    the Gauss–Newton stage converges to the (physically constrained) least-squares optimum.
    Rows (m, p), (m,), weights (m,); jit with the step counts static. Each step count must be an int ≥ 0
    (0 skips that stage; TypeError for a float or bool, ValueError naming the count below 0)."""
    adam_steps, lbfgs_steps, gauss_newton_steps = (_stage_steps(name, steps) for name, steps in (
        ("adam_steps", adam_steps), ("lbfgs_steps", lbfgs_steps), ("gauss_newton_steps", gauss_newton_steps)))

    def loss(phi):
        return regression_loss(phi, Y_stacked, tau, weights)

    with jax.numpy_dtype_promotion("standard"):          # optax mixes int32 step counts with floats
        phi, adam_losses = _optax_descent(loss, optax.adam(learning_rate), phi0, adam_steps)
        phi, lbfgs_losses = _optax_descent(loss, optax.lbfgs(), phi, lbfgs_steps, line_search=True)
    phi, lm_losses = _levenberg_marquardt(lambda x: _weighted_residual(x, Y_stacked, tau, weights), phi,
                                          gauss_newton_steps)
    return Fit(phi, jnp.concatenate([adam_losses, lbfgs_losses, lm_losses]))
