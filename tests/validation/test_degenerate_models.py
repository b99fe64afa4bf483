"""The smallest models a user can build, through the whole public API: every link welded (nv = 0), one revolute
link, one spherical link, one free body (n = 1, a rigid body in space), per sample and in batches of 20 (`jax.vmap`
at or above `VMAP_MIN_BATCH` and a leading batch: the batch-last core), float64.

* Pinocchio 4.1, built from the same data: RNEA, ABA (± f_ext) and CRBA, per sample and on the batch-last core
  (1e-11 relative to max(1, max |reference|), as the other Pinocchio comparisons: sums over one or two links agree
  to ~1e-15; nv = 0 gives empty arrays of the right shapes).
* A closed form for the welded model: each link's world pose is the product of the placements (1e-12) and the kinetic
  energy is zero; its potential energy is zero and its centre of mass NaN (0 / 0), as Pinocchio's (both count only
  the links that can move: Pinocchio merges links welded to the world into its universe body).
* Every case of tests/test_public_api.py that runs on its small tree, hinge or free-floating tree, re-run on each
  of these models: `jax.jit(jax.vmap(fn))` over 20 states must equal `jax.jit(fn)` (1e-12), or the call must be
  refused with a `ValueError` that says why (a link index the model does not have, a free-floating function on a
  model without exactly one free joint, `computed_torque` on a free joint). Before this test, a welded model's
  leading batch, `coriolis_matrix` and `forward_dynamics_operator` failed with TypeError / ZeroDivisionError.
"""

from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pinocchio as pin
import pytest

import jaxsoa
from jaxsoa.multibody.joints import JointType as J
from tests import test_public_api as api
from tests.helpers import trees
from tests.helpers.trees import build_jaxsoa, build_pinocchio, random_tree, relative_error

MODELS = {"welded": (J.FIXED, J.FIXED, J.FIXED), "one_revolute": (J.REVOLUTE,), "one_spherical": (J.SPHERICAL,),
          "free_body": (J.FREE,)}
BATCH = 20
TOL = 1e-11
REFUSALS = ("is out of range", "needs exactly one free joint", "expected (7 + joints,)", "which no torque actuates")
"""What a refusal on these models may say: a case's link index past the model's links, a free-floating function on a
model without one free joint, `to_virtual_base_state` without a hub, `computed_torque` on a free joint."""


def _tree(name):
    return random_tree(np.random.default_rng(sum(map(ord, name))), len(MODELS[name]), link_types=MODELS[name])


@pytest.mark.parametrize("name", sorted(MODELS))
def test_dynamics_against_pinocchio(name):
    tree = _tree(name)
    model, pin_model = build_jaxsoa(tree), build_pinocchio(tree)
    rng = np.random.default_rng(1)
    state = trees.random_state(rng, pin_model, BATCH)
    f_ext = rng.normal(size=(BATCH, model.n_links, 6))
    expected = trees.pinocchio_to_jaxsoa_dynamics(model, pin_model, trees.pinocchio_dynamics(
        pin_model, state, [trees.fext_to_pinocchio(model, pin_model, f) for f in f_ext]))
    x = {key: jnp.asarray(value) for key, value in trees.to_jaxsoa(model, pin_model, state).items()}
    f_ext = jnp.asarray(f_ext)
    dynamics = jax.jit(lambda *args: trees.jaxsoa_dynamics(model, *args))
    leading = dynamics(x["q"], x["v"], x["a"], x["tau"], f_ext)                             # the batch-last core
    one = dynamics(x["q"][3], x["v"][3], x["a"][3], x["tau"][3], f_ext[3])                  # per sample
    for key, reference in expected.items():
        assert leading[key].shape == reference.shape, (key, leading[key].shape)
        assert relative_error(leading[key], reference) < TOL, key
        assert relative_error(one[key], reference[3]) < TOL, key


def test_welded_model_closed_forms():
    tree = _tree("welded")
    model, pin_model = build_jaxsoa(tree), build_pinocchio(tree)
    q, v = jnp.zeros((BATCH, 0)), jnp.zeros((BATCH, 0))
    placements = jaxsoa.forward_kinematics(model, q)
    R, p = np.eye(3), np.zeros(3)
    for k in range(model.n_links):                                  # a chain: parent k − 1
        assert tree["parent"][k] == k - 1
        R, p = R @ tree["placement_rotation"][k], p + R @ tree["placement_translation"][k]
        assert relative_error(placements.R_world_link[:, k], np.broadcast_to(R, (BATCH, 3, 3))) < 1e-12
        assert relative_error(placements.p_world_link[:, k], np.broadcast_to(p, (BATCH, 3))) < 1e-12
    data = pin_model.createData()
    assert pin_model.nv == 0 and pin.computePotentialEnergy(pin_model, data, pin.neutral(pin_model)) == 0.0
    assert np.all(np.isnan(pin.centerOfMass(pin_model, data, pin.neutral(pin_model))))
    assert np.all(np.asarray(jaxsoa.kinetic_energy(model, q, v)) == 0.0)
    assert np.all(np.asarray(jaxsoa.potential_energy(model, q)) == 0.0)
    assert np.all(np.isnan(np.asarray(jaxsoa.center_of_mass(model, q))))


def _systems(name):
    """A stand-in for test_public_api's systems: its tree, hinge and free-floating tree all replaced by `name`."""
    model = build_jaxsoa(_tree(name))
    rng = np.random.default_rng(2)
    arm = max(model.nv - 6, 0)
    extra = lambda r: dict(arm=jnp.asarray(r.normal(size=arm)), arm_v=jnp.asarray(r.normal(size=arm)))  # noqa: E731
    system = SimpleNamespace(model=model, states=api._states(model, rng, extra=extra))
    return SimpleNamespace(tree=system, hinge=system, free=system)


def _cases(systems):
    """{name: case} of test_public_api's cases whose arguments come from the tree, hinge or free-floating tree."""
    out = {}
    for name, case in sorted(api.CASES.items()):
        try:
            case.args(systems, 0)
        except AttributeError:                                      # another system (a loop, a tether, …)
            continue
        out[name] = case
    return out


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_tree_case_runs_or_says_why(name):
    systems = _systems(name)
    cases, refused = _cases(systems), []
    assert len(cases) > 60                                         # the tree cases of test_public_api
    for case_name, case in cases.items():
        try:
            reference = jax.jit(case.fn)(*case.args(systems, 0))
        except ValueError as error:
            assert any(reason in str(error) for reason in REFUSALS), (case_name, str(error))
            refused.append(case_name)
            continue
        if case.in_axes is None:
            continue
        states = [case.args(systems, k) for k in (0, 1)]
        batched = [a if axis is None else jax.tree.map(lambda *x: jnp.stack([x[i % 2] for i in range(BATCH)]), a, b)
                   for axis, a, b in zip(case.in_axes, *states, strict=True)]
        out = jax.jit(jax.vmap(case.fn, in_axes=case.in_axes))(*batched)
        api.assert_same(jax.tree.map(lambda x: x[0], out), reference)
    assert len(refused) < len(cases) // 4, refused
