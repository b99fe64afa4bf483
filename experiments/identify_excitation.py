"""The data of the inertial identification (experiments/identify_inertia.py, its module doc "Data"): the
Fourier excitation references, their computed-torque tracking by RK4 sampled every `stride` steps, the
measurement noise, and the joint-torque regressor stacked over the samples."""

import functools

import jax
import jax.numpy as jnp
import numpy as np

import jaxsoa
from jaxsoa.algorithms import regressor
from jaxsoa.algorithms.free_floating import base_and_joint_dofs
from jaxsoa.multibody.joints import JointType

DT = 0.01                       # s, RK4 step
PERIOD = 10.0                   # s, base period of the Fourier reference
N_HARMONICS = 5
GAINS = jaxsoa.critically_damped_gains(10.0)


def floating(model) -> bool:
    return model.joint_types[0] == JointType.FREE


def joint_dofs(model) -> np.ndarray:
    return base_and_joint_dofs(model)[1] if floating(model) else np.arange(model.nv)


def fourier_coefficients(rng, n_joints, amplitude):
    """Amplitudes A (n_joints, L) with Σ_l A_jl = amplitude and phases ϕ (n_joints, L)."""
    weights = rng.uniform(0.2, 1.0, (n_joints, N_HARMONICS))
    return amplitude * weights / weights.sum(axis=1, keepdims=True), rng.uniform(0, 2 * np.pi, (n_joints, N_HARMONICS))


def fourier_reference(A, phase, t):
    """(q, v, a) at time t of q_j = Σ_l A_jl sin(l ω t + ϕ_jl), ω = 2π / PERIOD."""
    omega = 2 * np.pi / PERIOD * jnp.arange(1, N_HARMONICS + 1, dtype=A.dtype)[None, :]
    arg = omega * t + phase
    return (jnp.sum(A * jnp.sin(arg), 1), jnp.sum(A * omega * jnp.cos(arg), 1),
            -jnp.sum(A * omega**2 * jnp.sin(arg), 1))


@functools.partial(jax.jit, static_argnames=("n_steps", "stride"))
def _tracked_samples(model, A, phase, n_steps, stride):
    """Computed-torque tracking of the reference (torque held over each RK4 step), sampled every
    `stride` steps: q, v, τ (hub rows zero), q̈ = ABA(q, v, τ)."""
    def full_torque(t, q, v):
        q_ref, v_ref, a_ref = fourier_reference(A, phase, t)
        if floating(model):
            tau = jaxsoa.computed_torque_free_floating(model, q, v, q_ref, v_ref, a_ref, *GAINS)
        else:
            tau = jaxsoa.computed_torque(model, q, v, q_ref, v_ref, a_ref, *GAINS)
        return jnp.zeros(model.nv, q.dtype).at[joint_dofs(model)].set(tau)

    q_ref0, v_ref0, _ = fourier_reference(A, phase, jnp.zeros((), A.dtype))
    hub = jnp.array([0.0, 0, 0, 0, 0, 0, 1], A.dtype)
    q0 = jnp.concatenate([hub, q_ref0]) if floating(model) else q_ref0
    v0 = jnp.concatenate([jnp.zeros(6, A.dtype), v_ref0]) if floating(model) else v_ref0
    qs, vs = jaxsoa.rollout(model, q0, v0, full_torque, DT, n_steps)
    qs, vs = qs[:-1:stride], vs[:-1:stride]
    tau = jax.vmap(full_torque)(jnp.arange(qs.shape[0], dtype=A.dtype) * (stride * DT), qs, vs)
    return qs, vs, tau, jax.vmap(jaxsoa.aba, in_axes=(None, 0, 0, 0))(model, qs, vs, tau)


def simulate(model, rng, duration, stride, amplitude):
    """Samples q (N, nq), v (N, nv), τ (N, nv), q̈ (N, nv) of one random tracked reference."""
    A, phase = fourier_coefficients(rng, len(joint_dofs(model)), amplitude)
    out = _tracked_samples(model, jnp.asarray(A), jnp.asarray(phase), round(duration / DT), stride)
    return tuple(np.asarray(x) for x in out)


def add_noise(rng, x, level, rows):
    """x + level · RMS_j(x) · N(0, 1) on columns `rows` (RMS over samples, per coordinate)."""
    x = x.copy()
    rms = np.sqrt(np.mean(x[:, rows] ** 2, axis=0))
    x[:, rows] += level * rms * rng.standard_normal((x.shape[0], len(rows)))
    return x


_batched_regressor = jax.jit(jax.vmap(regressor.joint_torque_regressor, in_axes=(None, 0, 0, 0)))


def stacked_regressor(model, q, v, a):
    """(N · nv, 10 n) regressor rows of N samples."""
    Y = _batched_regressor(model, q, v, a)
    return np.asarray(Y).reshape(-1, Y.shape[-1])
