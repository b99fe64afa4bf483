"""`jaxsoa.integrators.tangents.with_carried_tangents`: a rollout whose initial state is constant is linearised once.

Counted with a custom-JVP probe in the controller that sees which of its inputs carry tangents (symbolic zeros on):
without the carried tangents JAX's scan fixpoint linearises the step twice, first with v's tangent a symbolic zero;
with them once, every input live. The values and the gradients (against a Python loop of the same steps, and
against central differences) are unchanged; outside differentiation the step is not traced again."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsoa.integrators import rk4_step, rollout, rollout_steps
from jaxsoa.integrators.tangents import with_carried_tangents
from tests.integrators.test_rollout import chain  # noqa: F401  (fixture)


def probed(calls):
    """u + w whose JVP rule records, per trace, which inputs have a tangent."""
    @jax.custom_jvp
    def probe(u, w):
        return u + w

    def probe_jvp(primals, tangents):
        calls.append(tuple(not isinstance(t, jax.custom_derivatives.SymbolicZero) for t in tangents))
        u_dot, w_dot = (jnp.zeros_like(x) if isinstance(t, jax.custom_derivatives.SymbolicZero) else t
                        for x, t in zip(primals, tangents, strict=True))
        return probe(*primals), u_dot + w_dot

    probe.defjvp(probe_jvp, symbolic_zeros=True)
    return probe


def mass_loss(model, probe, n_steps=4):
    """Σ |q|² of a rollout from a constant state (q0 fixed, v0 = 0) as a function of the masses."""
    q0, v0 = jnp.asarray([0.3, -0.2, 0.4]), jnp.zeros(3)

    def loss(mass):
        control = lambda t, q, v: probe(-0.3 * v, 0.1 * mass[:, 0])         # noqa: E731  reads the state and the masses
        trajectory = rollout(dataclasses.replace(model, mass=mass), q0, v0, control, 0.01, n_steps)
        return jnp.sum(trajectory.q**2)
    return loss


def test_the_step_is_linearised_once(chain):  # noqa: F811
    calls = []
    jax.grad(mass_loss(chain, probed(calls)))(chain.mass)
    assert calls == [(True, True)], calls


def test_gradient_equals_a_python_loop_and_central_differences(chain):  # noqa: F811
    loss = mass_loss(chain, lambda u, w: u + w)
    mass = chain.mass

    def loop_loss(mass):                                   # the same steps, no scan, no carried tangents
        model, q, v, total = dataclasses.replace(chain, mass=mass), jnp.asarray([0.3, -0.2, 0.4]), jnp.zeros(3), 0.0
        total = jnp.sum(q**2)
        for _ in range(4):
            q, v = rk4_step(model, q, v, -0.3 * v + 0.1 * mass[:, 0], 0.01)
            total = total + jnp.sum(q**2)
        return total

    grad = jax.grad(loss)(mass)
    np.testing.assert_allclose(grad, jax.grad(loop_loss)(mass), rtol=1e-12, atol=1e-15)   # same arithmetic
    h = 1e-6                                               # central differences: truncation ~1e-12, round-off ~1e-10
    fd = [(loss(mass.at[i, 0].add(h)) - loss(mass.at[i, 0].add(-h))) / (2 * h) for i in range(mass.shape[0])]
    np.testing.assert_allclose(grad[:, 0], np.stack(fd), rtol=1e-6, atol=1e-9)


def test_values_keep_the_initial_state_and_integer_leaves():
    def body(x, k):
        return {"n": x["n"] + 1, "y": x["y"] * k}, x["y"]

    init = {"n": jnp.int32(2), "y": jnp.asarray([1.0, 2.0])}
    out = jax.jit(lambda s: jax.grad(lambda s: jnp.sum(with_carried_tangents(
        lambda x, k: body(x, k * s), init, 1.0)["y"]) * s)(s))(3.0)
    assert out == pytest.approx(3.0)                         # d/ds (s Σ y0) with y0 held
    kept = with_carried_tangents(body, init, 1.0)
    assert kept is init                                      # outside differentiation: returned as given


def test_outside_differentiation_the_step_is_traced_once(chain, monkeypatch):  # noqa: F811
    traced = []
    original = jax.closure_convert
    monkeypatch.setattr(jax, "closure_convert", lambda *a: traced.append(1) or original(*a))
    jax.jit(lambda q0: rollout_steps(lambda t, x, k: x * 0.5, q0, 0.1, 3))(jnp.ones(3))
    assert traced == []
    jax.grad(lambda q0: jnp.sum(rollout_steps(lambda t, x, k: x * q0, jnp.ones(3), 0.1, 3)))(jnp.ones(3))
    assert traced == [1]
