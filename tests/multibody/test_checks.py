"""Traced validity (`model_valid`, `check_model`) agrees with the host builder on every rule.

Each corruption of tests/multibody/test_build.py's `BAD_BUILD` that `build_model` rejects is
written straight into a valid model's arrays (as an optimiser or a traced topology switch would):
the traced flag must be False, and `check_model` under `checkify` + `jit` must fail naming the
same field and the link's index; under `jax.vmap` the failing sample is named too. An invalid
traced configuration NaN-marks its model, so dynamics and rollouts on it are NaN and flagged.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import checkify

import jaxsoa
from jaxsoa.multibody.checks import check_model, model_valid
from tests.multibody.test_build import BAD_BUILD, NAMES, valid_fields

TRACED_CASES = {k: v for k, v in BAD_BUILD.items() if k != "joint_type_unknown"}   # joint types are static


def _traced_parent(model, parent):
    """model.with_parent(parent) built under `jit`: a traced parent array is data, so a bad one is not
    rejected there (a concrete one is, by `tree_traversal`) and reaches the traced checks."""
    return jax.jit(lambda m, p: m.with_parent(p))(model, jnp.asarray(parent, jnp.int32))


def _traced_corruption(mutate):
    """The valid float64 model with one field replaced by its corrupted value (no host validation)."""
    model = jaxsoa.build_model(**valid_fields(), dtype=jnp.float64)
    fields = valid_fields()
    mutate(fields)
    if not np.array_equal(fields["parent"], valid_fields()["parent"]):
        return _traced_parent(model, fields["parent"])
    if "inboard_interface" in fields:
        return dataclasses.replace(model, inboard_interface=jnp.asarray(fields["inboard_interface"], jnp.int32))
    changes = {}
    for name in ("mass", "com", "inertia_com", "placement_rotation", "placement_translation"):
        changes[name] = jnp.asarray(np.asarray(fields[name], np.float64)[:, None])     # one interface
    changes["joint_axis"] = jnp.asarray(np.asarray(fields["joint_axis"], np.float64))
    return dataclasses.replace(model, **changes)


def test_valid_model_passes():
    model = jaxsoa.build_model(**valid_fields(), dtype=jnp.float64)
    assert bool(jax.jit(model_valid)(model))
    err, _ = jax.jit(checkify.checkify(check_model))(model)
    assert err.get() is None


@pytest.mark.parametrize("mutate, link, field", TRACED_CASES.values(), ids=TRACED_CASES.keys())
def test_traced_checks_match_the_builder(mutate, link, field):
    bad = _traced_corruption(mutate)
    assert not bool(jax.jit(model_valid)(bad))
    err, _ = jax.jit(checkify.checkify(check_model))(bad)
    message = err.get()
    assert message is not None and f"'{field}'" in message, message
    assert f"at link index {NAMES.index(link)}" in message, message


def test_nan_mass_is_not_called_negative():
    bad = _traced_corruption(BAD_BUILD["nan_mass"][0])
    err, _ = checkify.checkify(check_model)(bad)
    assert "'mass' is not finite" in err.get()


def test_vmap_names_the_sample():
    good = jaxsoa.build_model(**valid_fields(), dtype=jnp.float64)
    bad = _traced_corruption(BAD_BUILD["negative_mass"][0])
    batch = jax.tree.map(lambda *x: jnp.stack(x), good, good, bad, good)
    assert np.array_equal(jax.vmap(model_valid)(batch), [True, True, False, True])
    err, _ = jax.jit(jax.vmap(checkify.checkify(check_model)))(batch)
    assert "at mapped index 2" in err.get() and "'mass' is negative" in err.get()


def test_gravity_and_missing_root():
    model = jaxsoa.build_model(**valid_fields(), dtype=jnp.float64)
    nan_gravity = dataclasses.replace(model, gravity=jnp.array([0.0, jnp.nan, -9.81]))
    assert not bool(model_valid(nan_gravity))
    err, _ = checkify.checkify(check_model)(nan_gravity)
    assert "'gravity'" in err.get()
    cyclic = _traced_parent(model, [1, 0, 1, 1])                           # no root: 0 ↔ 1
    assert not bool(model_valid(cyclic))


def test_invalid_traced_configuration_nan_marks_model_and_rollout():
    """A configuration that does not describe a tree: the model is NaN-marked, `model_valid` is
    False, forward dynamics is NaN and a rollout reports its first non-finite step (0)."""
    from sims.dual_arm_spacecraft import CONFIGURATIONS
    from tests.topology.test_reconfigure import spacecraft_design

    design, interfaces = spacecraft_design(), np.asarray(CONFIGURATIONS[1])
    model = jaxsoa.topology.reconfigure.reconfigurable_model(design, interfaces)
    arrays = jaxsoa.topology.reconfigure.design_arrays(design)
    broken = np.array(interfaces)
    broken[:] = 0                                               # every link claims the base: no tree
    bad = jax.jit(jaxsoa.topology.reconfigure.apply_configuration)(model, arrays, jnp.asarray(broken))
    good = jax.jit(jaxsoa.topology.reconfigure.apply_configuration)(model, arrays, jnp.asarray(interfaces))
    assert bool(model_valid(good)) and not bool(model_valid(bad))
    q, v = jaxsoa.neutral(model), jnp.zeros(model.nv)
    aba = jax.jit(jaxsoa.aba)                                   # jitted: one compile for both models
    assert np.all(np.isnan(aba(bad, q, v, v)))
    assert np.all(np.isfinite(aba(good, q, v, v)))
    trajectory = jax.jit(lambda m: jaxsoa.rollout(m, q, v, lambda t, q, v: jnp.zeros(model.nv), 0.01, 3))(bad)
    assert int(trajectory.first_nonfinite) == 1 and not bool(trajectory.finite)   # q0 given: k = 1 is the first step
