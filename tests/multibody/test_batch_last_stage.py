"""`jaxsoa.multibody.batch_last.stage`: a fusion barrier whose derivatives are those of the staged
function (checked against the same function without the barrier, the second code path), with the
closed-over tracers of the staged function differentiated too, and whose tangent carries no cond."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxsoa.multibody import batch_last as bl
from tests.helpers.jaxprs import count_primitive


def _staged_and_plain(x, w):
    """The same function of (x, w) with its middle part staged (w closed over) and not staged."""
    def inner(a):
        return [jnp.sin(a) * w, a * a]

    def with_stage(x):
        live = x.sum() > -jnp.inf
        y, z = bl.stage(live, inner, jnp.cos(x))
        return jnp.sum(y * z) + jnp.sum(w * x)

    def plain(x):
        y, z = inner(jnp.cos(x))
        return jnp.sum(y * z) + jnp.sum(w * x)
    return with_stage(x), plain(x)


def _inputs():
    rng = np.random.default_rng(3)
    return jnp.asarray(rng.normal(size=5)), jnp.asarray(rng.normal(size=5))


def test_value_and_derivatives_equal_the_unstaged_function():
    # tolerance 1e-13 (float64): the two paths evaluate the same operations in the same order.
    x, w = _inputs()
    staged = jax.jit(lambda x, w: _staged_and_plain(x, w)[0])
    plain = jax.jit(lambda x, w: _staged_and_plain(x, w)[1])
    np.testing.assert_allclose(staged(x, w), plain(x, w), rtol=1e-13)
    for argnums in (0, 1):                                   # w is closed over by the staged function
        np.testing.assert_allclose(jax.grad(staged, argnums)(x, w), jax.grad(plain, argnums)(x, w),
                                   rtol=1e-13, atol=1e-14)
    t = jnp.linspace(-1.0, 1.0, 5)
    np.testing.assert_allclose(jax.jvp(lambda w: staged(x, w), (w,), (t,))[1],
                               jax.jvp(lambda w: plain(x, w), (w,), (t,))[1], rtol=1e-13)
    np.testing.assert_allclose(jax.hessian(staged, 1)(x, w), jax.hessian(plain, 1)(x, w), rtol=1e-12, atol=1e-13)


def test_the_tangent_has_no_cond_and_the_primal_keeps_its_barrier():
    x, w = _inputs()
    fn = lambda x: _staged_and_plain(x, w)[0]              # noqa: E731
    _, f_jvp = jax.linearize(fn, x)
    assert count_primitive(jax.make_jaxpr(f_jvp)(x).jaxpr, "cond") == 0
    assert count_primitive(jax.make_jaxpr(fn)(x).jaxpr, "cond") == 1
