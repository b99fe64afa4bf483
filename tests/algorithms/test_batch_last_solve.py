"""The batch-last ABA's factorisation reused by its adjoint (`jaxsoa.algorithms.batch_last`:
`_aba_factored`, `solve_mass_matrix`), in float64: M(q)⁻¹ b from a forward ABA's `Factor` against a
dense solve with CRBA's M (an independent algorithm), 1e-10 relative (a solve of a mass matrix with
condition numbers up to ~1e4), on fixed-base and free-floating trees with armature and on a stack of
different trees; and ABA's gradient through it against plain autodiff of the per-sample ABA (1e-10).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsoa
from jaxsoa.algorithms import batch_last, dynamics
from jaxsoa.multibody.joints import JointType
from tests.algorithms.test_batch_last import _tree_case
from tests.helpers.trees import random_group, relative_error, stack_models


def _dense_solve(model, q, b):
    M = jax.vmap(lambda q: jaxsoa.crba(model, q))(q)
    return jnp.linalg.solve(M, b[..., None])[..., 0]


@pytest.mark.parametrize("floating", [False, True])
def test_solve_reusing_the_forward_factor_equals_a_dense_solve(floating):
    rng, model, _ = _tree_case(21, n_links=8, floating=floating)
    q = jax.vmap(lambda k: jaxsoa.random_configuration(model, k))(jax.random.split(jax.random.key(21), 5))
    v, tau, b = (jnp.asarray(rng.normal(size=(5, model.nv))) for _ in range(3))
    _, factor = jax.jit(batch_last._aba_factored)(model, q, v, tau)
    got = jax.jit(batch_last.solve_mass_matrix)(model, factor, b)
    assert relative_error(got, _dense_solve(model, q, b)) < 1e-10


def test_solve_on_a_stack_of_trees():
    cases = random_group(np.random.default_rng(22), 7, 3, joint_types=(JointType.REVOLUTE, JointType.PRISMATIC,
                                                                        JointType.FIXED), root_type=JointType.FREE,
                         root_at=2)
    models = [m for _, m, _ in cases]
    stacked = stack_models(models)
    q = jnp.stack([jaxsoa.random_configuration(m, jax.random.key(i)) for i, m in enumerate(models)])
    rng = np.random.default_rng(23)
    v, tau, b = (jnp.asarray(rng.normal(size=(3, stacked.nv))) for _ in range(3))
    _, factor = jax.jit(batch_last._aba_factored)(stacked, q, v, tau)
    got = jax.jit(batch_last.solve_mass_matrix)(stacked, factor, b)
    ref = jnp.stack([_dense_solve(m, q[i:i + 1], b[i:i + 1])[0] for i, m in enumerate(models)])
    assert relative_error(got, ref) < 1e-10


def test_gradient_through_the_reused_factor():
    rng, model, _ = _tree_case(24, n_links=4, floating=False)
    q = jax.vmap(lambda k: jaxsoa.random_configuration(model, k))(jax.random.split(jax.random.key(24), 3))
    v, tau, w = (jnp.asarray(rng.normal(size=(3, model.nv))) for _ in range(3))

    def loss(fd):
        return lambda q, v, tau: jnp.sum(w * jnp.sin(fd(q, v, tau)))
    got = jax.jit(jax.grad(loss(lambda *x: jaxsoa.aba(model, *x)), argnums=(0, 1, 2)))(q, v, tau)
    ref = jax.jit(jax.grad(loss(jax.vmap(lambda *x: dynamics.aba_autodiff(model, *x))), argnums=(0, 1, 2)))(q, v, tau)
    for g, r in zip(got, ref, strict=True):
        assert relative_error(g, r) < 1e-10
    tangents = tuple(jnp.asarray(rng.normal(size=x.shape)) for x in (q, v, tau))
    per_sample = jax.vmap(lambda *x: dynamics.aba_autodiff(model, *x))
    assert relative_error(jax.jvp(lambda *x: jaxsoa.aba(model, *x), (q, v, tau), tangents)[1],
                          jax.jvp(per_sample, (q, v, tau), tangents)[1]) < 1e-10
