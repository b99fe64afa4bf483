"""The batch-last ABA's factorisation reused by its adjoint (`jaxsoa.algorithms.batch_last`:
`_aba_factored`, `solve_mass_matrix`), in float64: M(q)⁻¹ b from a forward ABA's `Factor` against a
dense solve with CRBA's M (an independent algorithm), 1e-10 relative (a solve of a mass matrix with
condition numbers up to ~1e4), on fixed-base and free-floating trees with armature (with and without
spherical joints) and on a stack of
different trees; and ABA's gradient through it against plain autodiff of the per-sample ABA (1e-10).
The residual's RNEA at the forward's link motions and forces (`batch_last_rnea.rnea_at`) against RNEA
itself: value, VJP and JVP (1e-10), and two scans fewer in the gradient's program.
"""

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsoa
from jaxsoa.algorithms import batch_last, batch_last_rnea, dynamics
from jaxsoa.algorithms.adjoint import adjoint_forward_dynamics
from jaxsoa.multibody.joints import JointType
from tests.algorithms import test_batch_last_three_column
from tests.algorithms.test_batch_last import _tree_case
from tests.helpers.trees import random_group, relative_error, stack_models


def _dense_solve(model, q, b):
    M = jax.vmap(lambda q: jaxsoa.crba(model, q))(q)
    return jnp.linalg.solve(M, b[..., None])[..., 0]


@pytest.mark.parametrize("floating, joint", [(False, None), (True, None), (False, JointType.SPHERICAL),
                                             (True, JointType.SPHERICAL), (True, JointType.PLANAR)],
                         ids=["fixed", "floating", "fixed-spherical", "floating-spherical", "floating-planar"])
def test_solve_reusing_the_forward_factor_equals_a_dense_solve(floating, joint):
    if joint is not None:                       # a three-column link's columns in the factor
        rng, model, _ = test_batch_last_three_column._case(6, n_links=7, floating=floating, joint=joint)
    else:
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


def _count_scans(jaxpr) -> int:
    """Scans in a jaxpr, nested ones included."""
    count = 0
    for eqn in jaxpr.eqns:
        count += eqn.primitive.name == "scan"
        for param in eqn.params.values():
            for sub in param if isinstance(param, (list, tuple)) else [param]:
                if isinstance(sub, jax.extend.core.ClosedJaxpr):
                    count += _count_scans(sub.jaxpr)
                elif isinstance(sub, jax.extend.core.Jaxpr):
                    count += _count_scans(sub)
    return count


@pytest.mark.parametrize("joint", [None, JointType.SPHERICAL, JointType.PLANAR], ids=["1-dof", "spherical", "planar"])
def test_rnea_at_the_forward_factor_equals_rnea(joint):
    """The adjoint's residual reuses the forward ABA's link motions (`rnea_at`): its value, its VJP (all arrays
    and model fields) and its JVP equal RNEA's at q̈ = ABA(q, v, τ), 1e-10, and the gradient of ABA then traces
    one scan fewer (RNEA's motion pass) than with the plain RNEA. (The link forces are summed in the reverse
    pass either way; their forward pass, there for the value only, is traced in both and dead in both.)"""
    if joint is not None:
        rng, model, _ = test_batch_last_three_column._case(26, n_links=6, floating=True, joint=joint)
    else:
        rng, model, _ = _tree_case(25, n_links=7, floating=True)
    q = jax.vmap(lambda k: jaxsoa.random_configuration(model, k))(jax.random.split(jax.random.key(25), 4))
    v, tau, w = (jnp.asarray(rng.normal(size=(4, model.nv))) for _ in range(3))
    f_ext = jnp.asarray(rng.normal(size=(4, model.n_links, 6)))
    qdd, factor = jax.jit(batch_last._aba_factored)(model, q, v, tau, f_ext)
    args = (model, q, v, qdd, f_ext)
    plain = jax.jit(batch_last_rnea.rnea)

    def known(m, q, v, a, f):
        return batch_last_rnea.rnea_at(m, q, v, a, f, factor)
    assert relative_error(jax.jit(known)(*args), plain(*args)) < 1e-10
    assert relative_error(plain(*args), tau) < 1e-10                                  # q̈ solves RNEA = τ
    got, ref = (jax.vjp(fn, *args)[1](w) for fn in (known, batch_last_rnea.rnea))
    for g, r in zip(jax.tree.leaves(got), jax.tree.leaves(ref), strict=True):
        if jnp.issubdtype(r.dtype, jnp.floating):
            assert relative_error(g, r) < 1e-10
    tangents = (jnp.asarray(rng.normal(size=q.shape)), v * 0.3, qdd * 0.1)
    got, ref = (jax.jvp(lambda q, v, a, fn=fn: fn(model, q, v, a, f_ext), (q, v, qdd), tangents)[1]
                for fn in (known, batch_last_rnea.rnea))
    assert relative_error(got, ref) < 1e-10

    def without_reuse(m, q, v, a, f, _factor):
        return batch_last_rnea.rnea(m, q, v, a, f)
    recomputing = adjoint_forward_dynamics(batch_last._aba_recursion, batch_last_rnea.rnea, factored=(
        batch_last._aba_factored, batch_last.solve_mass_matrix, without_reuse))
    scans = [_count_scans(jax.make_jaxpr(jax.grad(lambda q, fd=fd: jnp.sum(w * fd(model, q, v, tau, f_ext))))(q).jaxpr)
             for fd in (batch_last._aba_adjoint, recomputing)]
    assert scans[0] == scans[1] - 1, scans
