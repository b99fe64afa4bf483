"""Second derivatives of the entry points in every composition of the two modes (`jax.hessian` =
jacfwd ∘ jacrev, jacrev ∘ jacrev, jacfwd ∘ jacfwd, jacrev ∘ jacfwd), per sample and on a leading batch of 16
(the batch-last core and its `vmap` rule), against central differences of the gradient.

Reverse over forward (jacrev ∘ jacfwd, the Gauss–Newton / `grad` of a `jvp` pattern) failed inside JAX's
transpose of `lax.custom_linear_solve` before `jaxsoa.multibody.linear_map` tied the solve's first block to
the map (an AssertionError for `rnea` and `aba`).

Tolerances (float64): the four compositions are the same derivatives computed in another order: 1e-10
relative (measured ≤ 4e-13 on the free-flyer tree). Central differences of the gradient with h = 1e-5 leave
an O(h²) truncation and O(ε/h) rounding error: 1e-6 relative (measured ~1e-9).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsoa
from jaxsoa.multibody.joints import JointType
from tests.helpers.trees import build_jaxsoa, random_tree

R, P, S, F = JointType.REVOLUTE, JointType.PRISMATIC, JointType.SPHERICAL, JointType.FREE
MODES = {
    "hessian": jax.hessian,
    "jacrev(jacrev)": lambda f: jax.jacrev(jax.jacrev(f)),
    "jacfwd(jacfwd)": lambda f: jax.jacfwd(jax.jacfwd(f)),
    "jacrev(jacfwd)": lambda f: jax.jacrev(jax.jacfwd(f)),
}


def _case(types, batch, seed=0):
    rng = np.random.default_rng(seed)
    model = build_jaxsoa(random_tree(rng, len(types), link_types=types))
    keys = jax.random.split(jax.random.PRNGKey(seed), batch or 1)
    q = jnp.stack([jaxsoa.random_configuration(model, k) for k in keys])
    v, u = (jnp.asarray(rng.normal(size=(batch or 1, model.nv))) for _ in range(2))
    return (model, q, v, u) if batch else (model, q[0], v[0], u[0])


def _relative(x, ref):
    return float(np.abs(np.asarray(x) - ref).max() / max(1.0, np.abs(ref).max()))


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["rnea", "aba"])
@pytest.mark.parametrize("types,batch", [((R, P, R, R), None), ((F, R, S, P), 16)],
                         ids=["hinges", "free-flyer-batch16"])
def test_every_composition_of_modes_gives_the_same_hessian(algorithm, types, batch):
    model, q, v, u = _case(types, batch)
    fn = getattr(jaxsoa, algorithm)

    def scalar(x):                                      # a nonlinear scalar of the result: Σ sin(τ) or Σ sin(q̈)
        return jnp.sum(jnp.sin(fn(model, q, x, u)))

    hessians = {name: np.asarray(jax.jit(mode(scalar))(v)) for name, mode in MODES.items()}
    reference = hessians["hessian"]
    assert np.isfinite(reference).all() and np.abs(reference).max() > 1e-3
    errors = {name: _relative(h, reference) for name, h in hessians.items()}
    assert all(e < 1e-10 for e in errors.values()), errors

    grad = jax.jit(jax.grad(scalar))
    flat = v.reshape(-1)
    h = 1e-5
    columns = [(grad((flat + h * e).reshape(v.shape)) - grad((flat - h * e).reshape(v.shape))).reshape(-1) / (2 * h)
               for e in np.eye(flat.size)[: min(flat.size, 12)]]          # the first 12 columns
    fd = np.stack(columns, -1)
    assert _relative(reference.reshape(flat.size, flat.size)[:, : fd.shape[1]], fd) < 1e-6


@pytest.mark.parametrize("algorithm", ["rnea", "aba"])
def test_reverse_over_forward_in_the_configuration(algorithm):
    """jacrev ∘ jacfwd with respect to q (the frames and the tie of the model to the states move too) against
    `jax.hessian`: the fast subset's check (the test above runs every mode, the batch and the differences)."""
    model, q, v, u = _case((R, P, R, R), None, seed=1)
    fn = getattr(jaxsoa, algorithm)

    def scalar(x):
        return jnp.sum(jnp.sin(fn(model, x, v, u)))

    ref = np.asarray(jax.jit(jax.hessian(scalar))(q))
    assert np.abs(ref).max() > 1e-3
    assert _relative(jax.jit(jax.jacrev(jax.jacfwd(scalar)))(q), ref) < 1e-10


@pytest.mark.parametrize("method", ["recursive", "dense"])
def test_hessian_of_closed_loop_dynamics(method):
    """`forward_dynamics_constrained` of the dual-arm grasp (sims/dual_arm_grasp.py), a scalar of q̈ only, so λ's
    cotangent is zero: `jax.hessian` and jacrev ∘ jacrev failed inside JAX's JVP of the transposed linear solve
    (a constant zero block) before the adjoint tied its blocks (`jaxsoa.algorithms.adjoint._tied`). Against
    jacfwd ∘ jacfwd, which never transposes: 1e-10 relative (measured ~2e-14)."""
    from sims import dual_arm_grasp

    model, closure = dual_arm_grasp.model_and_closure(gravity=(0.0, 0.0, -9.81))
    q0 = jnp.asarray(dual_arm_grasp.Q0, jnp.float64)
    v0 = jnp.asarray(np.random.default_rng(2).normal(size=model.nv)) * 0.05
    tau = jnp.zeros(model.nv)

    def scalar(v):
        return jnp.sum(jnp.sin(jaxsoa.forward_dynamics_constrained(model, q0, v, tau, closure, method=method)[0]))

    reference = np.asarray(jax.jit(jax.jacfwd(jax.jacfwd(scalar)))(v0))
    assert np.abs(reference).max() > 1e-3
    for mode in ("hessian", "jacrev(jacrev)"):
        assert _relative(jax.jit(MODES[mode](scalar))(v0), reference) < 1e-10, mode
