"""Checks shared by the tests of single joint types (tests/multibody/test_planar.py,
test_revolute_unbounded.py): the relative-error comparison, the entry points with a batch-last path, and
the configuration-space maps against Pinocchio's."""

import jax
import jax.numpy as jnp
import numpy as np
import pinocchio as pin

import jaxsoa
from tests.helpers.trees import coordinate_maps, random_state, relative_error, to_jaxsoa


def compare(tol: float, got: dict, expected: dict):
    """Every entry of `got` within `tol` (relative to max(1, max |expected|)) of `expected`'s; the errors are
    printed (shown with `pytest -s`)."""
    errors = {key: relative_error(got[key], expected[key]) for key in expected}
    print(errors)
    assert all(e <= tol for e in errors.values()), errors


def batch_calls(model, q, v, a):
    """The entry points with a batch-last path, at one state or a leading batch of them."""
    return dict(rnea=jaxsoa.rnea(model, q, v, a), aba=jaxsoa.aba(model, q, v, a), crba=jaxsoa.crba(model, q),
                jacobians=jaxsoa.joint_jacobians(model, q, "local"), placements=jaxsoa.forward_kinematics(model, q))


def configuration_space_against_pinocchio(model, pin_model, state: dict, js: dict):
    """(got, expected): jaxsoa's and Pinocchio's `integrate` (v doubled), `difference` and `interpolate`
    (u = 0.3, 1.6) between the states (B, ·) and the same states rolled by one, in jaxsoa's coordinates; the
    neutral configurations are asserted equal. state: Pinocchio's layout, js: jaxsoa's."""
    q_index, v_index = coordinate_maps(model, pin_model)
    np.testing.assert_array_equal(np.asarray(jaxsoa.neutral(model)), pin.neutral(pin_model)[q_index])
    q0, q1, v = state["q"], np.roll(state["q"], 1, axis=0), 2.0 * state["v"]
    j0, j1 = js["q"], jnp.roll(js["q"], 1, axis=0)

    def reference(fn, *args):
        return np.stack([fn(pin_model, *row) for row in zip(*args, strict=True)])

    got = dict(integrate=jax.vmap(jaxsoa.integrate, (None, 0, 0))(model, j0, 2.0 * js["v"]),
               difference=jax.vmap(jaxsoa.difference, (None, 0, 0))(model, j0, j1))
    expected = dict(integrate=reference(pin.integrate, q0, v)[:, q_index],
                    difference=reference(pin.difference, q0, q1)[:, v_index])
    for u in (0.3, 1.6):
        got[f"interpolate {u}"] = jax.vmap(jaxsoa.interpolate, (None, 0, 0, None))(model, j0, j1, u)
        expected[f"interpolate {u}"] = reference(pin.interpolate, q0, q1, [u] * len(q0))[:, q_index]
    return got, expected


URDF_LIMIT = '<limit lower="-1" upper="1" effort="5" velocity="2"/>'


def urdf_link(name, mass, com):
    """A URDF <link> with a rotated, off-diagonal inertia at `com` ("x y z")."""
    return (f'<link name="{name}"><inertial><origin xyz="{com}" rpy="0.1 -0.2 0.3"/><mass value="{mass}"/>'
            '<inertia ixx="0.02" ixy="0.001" ixz="0" iyy="0.03" iyz="0.002" izz="0.025"/></inertial></link>')


def urdf_joint(name, kind, parent, child, origin, extra=""):
    """A URDF <joint> of type `kind` at `origin` ("x y z", rotated by rpy 0.3 -0.5 0.7), `extra` inside it."""
    return (f'<joint name="{name}" type="{kind}"><parent link="{parent}"/><child link="{child}"/>'
            f'<origin xyz="{origin}" rpy="0.3 -0.5 0.7"/>{extra}</joint>')


def pinocchio_and_jaxsoa_states(pair, n_states: int, seed: int = 0):
    """(state, js): n_states random states of pair = (jaxsoa model, Pinocchio model) in Pinocchio's layout
    (`pin.randomConfiguration`) and in jaxsoa's (jnp arrays)."""
    model, pin_model = pair
    state = random_state(np.random.default_rng(seed), pin_model, n_states)
    return state, {k: jnp.asarray(x) for k, x in to_jaxsoa(model, pin_model, state).items()}
