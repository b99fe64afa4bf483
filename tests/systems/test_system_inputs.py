"""Bad inputs to the systems that returned numbers before (an audit): a tether state of another mesh than its
parameters (strain of the wrong element length, and `check_tether_state` passed it), reel inputs of another
length (used as s̈ as they were), a negative holding force, a negative or zero length in `stable_dt`, and the
flexible links' state lengths, driven indices (99 was accepted) and beam index. Each error names the field or
argument."""

import dataclasses

import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import checkify

from jaxsoa.systems.flexible import rfem as flexible
from jaxsoa.systems.tether import fem, reels
from jaxsoa.systems.tether.reel_control import stable_dt
from tests.systems.test_flexible import clamped_beam


@pytest.fixture(scope="module")
def mesh():
    p4, p6 = fem.tether_params(1.0, 1e4, 0.1, 100.0, 4), fem.tether_params(1.0, 1e4, 0.1, 100.0, 6)
    return p4, p6, fem.straight_state(p4, (0, 0, 0), (50, 0, 0), (0, 50))


def test_a_state_of_another_mesh_is_named(mesh):
    p4, p6, state = mesh
    with pytest.raises(ValueError, match="TetherState\\.r has shape \\(5, 3\\), expected \\(7, 3\\)"):
        fem.element_strain(p6, state)
    with pytest.raises(ValueError, match="TetherState\\.r has shape"):
        checkify.checkify(fem.check_tether_state)(p6, state)
    with pytest.raises(ValueError, match="TetherState\\.r has shape"):
        reels.tether_dynamics(p6, state, reels.tether_inputs())
    np.testing.assert_allclose(fem.element_strain(p4, state).eps, 0.0, atol=1e-12)   # 50 m of material on 50 m


def test_reel_inputs_are_checked(mesh):
    p4, _, state = mesh
    for bad in (jnp.array([1.0, 2.0, 3.0]), jnp.array([1.0])):
        inputs = dataclasses.replace(reels.tether_inputs(), reel_accel=bad)
        with pytest.raises(ValueError, match="TetherInputs\\.reel_accel has shape"):
            reels.tether_dynamics(p4, state, inputs)
    with pytest.raises(ValueError, match="TetherInputs\\.reel_force must be ≥ 0"):
        reels.tether_inputs(reel_force=(-5.0, 0.0))
    with pytest.raises(ValueError, match="TetherInputs\\.force_driven must hold 2 flags"):
        reels.tether_inputs(force_driven=(True, False, False))
    np.testing.assert_allclose(reels.tether_dynamics(p4, state, reels.tether_inputs(reel_accel=(0.5, -0.5))).s_dot,
                               [0.5, -0.5])


def test_stable_dt_rejects_non_physical_values(mesh):
    p4, _, _ = mesh
    for kwargs, name in ((dict(l=-10.0), "'l'"), (dict(l=0.0), "'l'"), (dict(dt_max=-1.0), "'dt_max'"),
                         (dict(EA=-1.0), "'EA'"), (dict(alpha=np.nan), "'alpha'")):
        arguments = dict(l=10.0, dt_max=0.1) | kwargs
        with pytest.raises(ValueError, match=f"argument {name}"):
            stable_dt(p4, arguments.pop("l"), arguments.pop("dt_max"), **arguments)
    assert 0 < stable_dt(p4, 10.0, 0.1) <= 0.1


def test_flexible_states_driven_indices_and_beam_are_checked():
    fm = clamped_beam(2)
    q, v = jnp.zeros(fm.model.nq), jnp.zeros(fm.model.nv)
    with pytest.raises(ValueError, match="argument 'q' has shape \\(1,\\)"):
        flexible.elastic_forces(fm, jnp.ones(1), v)
    with pytest.raises(ValueError, match="argument 'driven' must be distinct velocity indices"):
        flexible.forward_dynamics_driven(fm, q, v, jnp.ones(1), (99,))
    with pytest.raises(ValueError, match="argument 'driven' must be distinct"):
        flexible.forward_dynamics_driven(fm, q, v, jnp.ones(2), (0, 0))
    with pytest.raises(ValueError, match="argument 'a_driven' has shape \\(2,\\), expected \\(1,\\)"):
        flexible.forward_dynamics_driven(fm, q, v, jnp.ones(2), (0,))
    for beam in (1, -1, True):
        with pytest.raises(ValueError, match="argument 'beam' must be an int in \\[0, 1\\)"):
            flexible.tip_position(fm, q, beam=beam)
    np.testing.assert_allclose(flexible.tip_position(fm, q), [1.0, 0.0, 0.0], atol=1e-12)   # undeformed: (L, 0, 0)


def test_orbits_are_checked():
    from jaxsoa.systems import orbit

    for kwargs, field in ((dict(e=1.5), "'e'"), (dict(e=-0.2), "'e'"), (dict(a=-7e6), "'a'"),
                          (dict(a=float("nan")), "'a'"), (dict(mu=0.0), "'mu'")):
        with pytest.raises(ValueError, match=field):
            orbit.orbit_params(**kwargs)
    with pytest.raises(ValueError, match="'a'"):
        orbit.circular_orbit(a=float("nan"))
    good = orbit.orbit_params(a=8.0e6, e=0.1)
    assert checkify.checkify(orbit.check_orbit)(good)[0].get() is None
    assert "0 ≤ e < 1" in checkify.checkify(orbit.check_orbit)(good._replace(e=jnp.asarray(1.5)))[0].get()
    with pytest.raises(ValueError, match="argument 'r_eci' has shape \\(2,\\)"):
        orbit.two_body_acceleration(orbit.EARTH_MU, jnp.ones(2))
    r = jnp.asarray([7.0e6, 0.0, 0.0])                                              # closed form: −μ/r² along x
    np.testing.assert_allclose(orbit.two_body_acceleration(orbit.EARTH_MU, r), [-orbit.EARTH_MU / 7.0e6**2, 0, 0])
