"""Bad inputs that reached the algorithms' insides before: a fixed-base model given to the free-floating
entry points (the shape check ran first and reported an expected shape of (-3,)), a transfer operator `phi`
of another shape or an integer dtype, and Python lists given to the virtual-base state maps. Each error
names the argument."""

import jax.numpy as jnp
import numpy as np
import pytest

import jaxsoa
from jaxsoa.multibody.joints import JointType


@pytest.fixture(scope="module")
def fixed():
    n = 3
    return jaxsoa.build_model(np.arange(-1, n - 1), [JointType.REVOLUTE] * n, np.tile([0.0, 0.0, 1.0], (n, 1)),
                              np.broadcast_to(np.eye(3), (n, 3, 3)), np.tile([0.3, 0.0, 0.0], (n, 1)), np.ones(n),
                              np.tile([0.1, 0.02, 0.0], (n, 1)), np.broadcast_to(np.diag([0.1, 0.2, 0.25]), (n, 3, 3)),
                              dtype=jnp.float64)


def test_free_floating_entry_points_name_the_missing_free_joint(fixed):
    q, v = jnp.zeros(fixed.nq), jnp.zeros(fixed.nv)
    with pytest.raises(ValueError, match="needs exactly one free joint, found 0"):
        jaxsoa.aba_free_floating(fixed, q, v, jnp.zeros(0))
    with pytest.raises(ValueError, match="needs exactly one free joint, found 0"):
        jaxsoa.rnea_free_floating(fixed, q, v, jnp.zeros(0))


def test_mass_matrix_operator_checks_phi(fixed):
    q = jnp.zeros(fixed.nq)
    with pytest.raises(ValueError, match="argument 'phi' has shape \\(5, 5\\), expected \\(18, 18\\)"):
        jaxsoa.mass_matrix_operator(fixed, q, phi=jnp.zeros((5, 5)))
    with pytest.raises(TypeError, match="argument 'phi' must be a floating-point array"):
        jaxsoa.mass_matrix_operator(fixed, q, phi=jnp.eye(18, dtype=jnp.int32))
    phi = jaxsoa.transfer_operator(fixed, q)
    np.testing.assert_allclose(jaxsoa.mass_matrix_operator(fixed, q, phi=phi), jaxsoa.crba(fixed, q), atol=1e-12)


def test_virtual_base_maps_take_lists():
    q = [0.1, 0.2, 0.3, 0.0, 0.0, 0.0, 1.0, 0.4, 0.5]
    v = [0.01 * k for k in range(8)]
    q_virtual, v_virtual = jaxsoa.to_virtual_base_state(q, v)
    q_back, v_back = jaxsoa.from_virtual_base_state(q_virtual, v_virtual)
    np.testing.assert_allclose(q_back, q, atol=1e-6)
    np.testing.assert_allclose(v_back, v, atol=1e-6)
    with pytest.raises(TypeError, match="argument 'q' must be a floating-point array"):
        jaxsoa.to_virtual_base_state([0] * 9, v)
