"""The implicit derivative of `rnea_free_floating` (`jaxsoa.algorithms.free_floating._hub_dynamics`): the hub's
acceleration a_b and the joint torques τ_j are the root of r = [0; τ_j] − RNEA(q, v, [a_b; q̈_j], f_ext), so
reverse mode is one RNEA VJP and a 6×6 solve. Checked (float64)

* against central finite differences (`jax.test_util.check_grads`, forward and reverse mode, order 1) of all
  three outputs (τ_j, a_b and the hub wrench) in q, v, q̈_j, f_ext and every float field of the model;
* against plain autodiff of an independent dense path: M = `crba`, the bias from `rnea` at q̈ = 0, a_b = −M_bb⁻¹
  (h_b + M_bj q̈_j), τ_j = M_jb a_b + M_jj q̈_j + h_j (tolerance `AUTODIFF_TOL` of tests/algorithms/test_adjoint.py:
  two float64 evaluation orders of one derivative);
* a leading batch (the batch-last core) against the per-sample call under `vmap`.

Where two derivatives may differ, off the model's domain: `inertia_com` (compared symmetric), `placement_rotation`
(compared along SO(3), skew(Rᵀ R̄)) and `joint_axis` (compared along the unit sphere, ā − (āᵀa) a). Both are
derivatives of extensions of the dynamics that agree on rotations, symmetric inertias and unit axes; finite
differences step inertias symmetrically and rotations on SO(3) (`perturbed`).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import jaxsoa
from jaxsoa.algorithms.free_floating import base_and_joint_dofs
from tests.algorithms.test_adjoint import (
    FD_STEP,
    _tree,
    assert_close,
    params_of,
    perturbed,
    state,
    symmetric_part,
    tangent_part,
    with_params,
)


@pytest.fixture(scope="module")
def floating_tree():
    return _tree(4, True, 3)


def dense_inverse_dynamics(model, q, v, qdd_joints, f_ext):
    """(τ_j, a_b) from the dense mass matrix and one bias RNEA, differentiated by plain autodiff."""
    base, joints = base_and_joint_dofs(model)
    M = jaxsoa.crba(model, q)
    h = jaxsoa.rnea(model, q, v, jnp.zeros(model.nv), f_ext)
    a_base = -jnp.linalg.solve(M[np.ix_(base, base)], h[base] + M[np.ix_(base, joints)] @ qdd_joints)
    tau_joints = M[np.ix_(joints, base)] @ a_base + M[np.ix_(joints, joints)] @ qdd_joints + h[joints]
    return tau_joints, a_base


def loss_of(function, model):
    """L(params, q, v, q̈_j, f_ext) = Σ w ⊙ (τ_j, a_b) + ½ |τ_j|² (fixed random weights)."""
    rng = np.random.default_rng(11)
    w_tau, w_base = jnp.asarray(rng.normal(size=model.nv - 6)), jnp.asarray(rng.normal(size=6))

    def loss(params, q, v, qdd_joints, f_ext):
        tau_joints, a_base = function(with_params(model, params), q, v, qdd_joints, f_ext)
        return jnp.sum(w_tau * tau_joints) + jnp.sum(w_base * a_base) + 0.5 * jnp.sum(tau_joints**2)
    return loss


def on_domain(grads, model):
    """The components of a (params, ...) cotangent that both derivatives define (module docstring)."""
    params = dict(grads[0], inertia_com=symmetric_part(grads[0]["inertia_com"]),
                  placement_rotation=tangent_part(model.placement_rotation, grads[0]["placement_rotation"]))
    axis, axis_bar = model.joint_axis, params["joint_axis"]
    params["joint_axis"] = axis_bar - jnp.sum(axis_bar * axis, -1, keepdims=True) * axis
    return params, *grads[1:]


def joint_state(model, seed):
    q, v, tau, f_ext = state(model, np.random.default_rng(seed))
    return q, v, tau[base_and_joint_dofs(model).joint_dofs], f_ext


def test_check_grads_every_output(floating_tree):
    """Forward and reverse mode of τ_j, a_b and the hub wrench against central differences."""
    model = floating_tree
    delta, at = perturbed(model)

    def outputs(delta, q, v, qdd_joints, f_ext):
        result = jaxsoa.rnea_free_floating(at(delta), q, v, qdd_joints, f_ext)
        return jnp.concatenate([result.tau_joints, result.base_acceleration, result.base_wrench])

    check_grads(jax.jit(outputs), (delta, *joint_state(model, 1)), order=1, modes=("fwd", "rev"), eps=FD_STEP)


def test_gradients_equal_dense_autodiff(floating_tree):
    """Every cotangent (model parameters included) equals plain autodiff of the dense path."""
    model = floating_tree

    def implicit(model, q, v, qdd_joints, f_ext):
        result = jaxsoa.rnea_free_floating(model, q, v, qdd_joints, f_ext)
        return result.tau_joints, result.base_acceleration

    args = (params_of(model), *joint_state(model, 2))
    grads = jax.jit(lambda *a: [on_domain(jax.grad(loss_of(f, model), argnums=(0, 1, 2, 3, 4))(*a), model)
                                for f in (implicit, dense_inverse_dynamics)])(*args)
    assert_close(*grads)


@pytest.mark.slow
def test_leading_batch_gradients_equal_the_per_sample_call(floating_tree):
    """The batch-last core's gradient of a leading batch of 3 equals the per-sample call's under `vmap`."""
    model = floating_tree
    q, v, qdd_joints, f_ext = (jnp.stack(x) for x in zip(*[joint_state(model, s) for s in (3, 4, 5)], strict=True))

    def total(params, q, v, qdd_joints, f_ext, per_sample):
        call = jax.vmap(jaxsoa.rnea_free_floating, (None, 0, 0, 0, 0)) if per_sample else jaxsoa.rnea_free_floating
        result = call(with_params(model, params), q, v, qdd_joints, f_ext)
        return jnp.sum(result.tau_joints**2) + jnp.sum(jnp.sin(result.base_acceleration)) + jnp.sum(result.base_wrench)

    grads = jax.jit(lambda *a: [on_domain(jax.grad(total, argnums=(0, 1, 2, 3, 4))(*a, per_sample), model)
                                for per_sample in (False, True)])(params_of(model), q, v, qdd_joints, f_ext)
    assert_close(*grads)


def test_hessian_equals_dense_autodiff(floating_tree):
    """Second derivatives through the rule (forward over reverse, `jax.hessian`) in v, q̈_j and q."""
    model = floating_tree
    q, v, qdd_joints, f_ext = joint_state(model, 7)

    def implicit(model, q, v, qdd_joints, f_ext):
        result = jaxsoa.rnea_free_floating(model, q, v, qdd_joints, f_ext)
        return result.tau_joints, result.base_acceleration

    def loss(function):
        def value(q, v, qdd_joints):
            tau_joints, a_base = function(model, q, v, qdd_joints, f_ext)
            return jnp.sum(tau_joints**3) + jnp.sum(jnp.sin(a_base))
        return value

    hessians = jax.jit(lambda *a: [jax.hessian(loss(f), argnums=(0, 1, 2))(*a)
                                   for f in (implicit, dense_inverse_dynamics)])(q, v, qdd_joints)
    assert_close(*hessians)
