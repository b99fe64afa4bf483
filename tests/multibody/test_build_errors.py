"""`build_model` against malformed fields: wrong shapes, fractional indices, wrong dtypes, NaN
gravity, no inertia at all; and a fuzz test — every random corruption of valid arguments either
builds the same model or raises `ValueError` / `TypeError`, never a different model silently."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsoa
from tests.multibody.test_build import valid_fields


def _with(**changes):
    fields = valid_fields()
    fields.update(changes)
    return fields


F = valid_fields()
BAD = {
    # case: (changes, exception, words the message must contain)
    "axis_n_by_2": (dict(joint_axis=F["joint_axis"][:, :2]), ValueError, ["'joint_axis'", "(4, 3)"]),
    "translation_1d": (dict(placement_translation=np.zeros(4)), ValueError, ["'placement_translation'"]),
    "mass_n_1_1": (dict(mass=F["mass"][:, None, None]), ValueError, ["'mass'"]),
    "gravity_2": (dict(gravity=(0.0, -9.81)), ValueError, ["'gravity'", "(3,)"]),
    "gravity_nan": (dict(gravity=(0.0, np.nan, -9.81)), ValueError, ["'gravity'", "not finite"]),
    "float16_mass": (dict(mass=F["mass"].astype(np.float16)), TypeError, ["'mass'", "float16"]),
    "int32_com": (dict(com=np.zeros((4, 3), np.int32)), TypeError, ["'com'", "int32"]),
    "parent_fraction": (dict(parent=np.array([-1, 0.7, 1, 1])), ValueError, ["'parent'", "0.7"]),
    "joint_type_fraction": (dict(joint_types=[4, 1.9, 2, 3]), ValueError, ["'joint_types'", "1.9", "'upper'"]),
    "joint_type_string": (dict(joint_types=["free", 1, 2, 3]), TypeError, ["'joint_types'"]),
    "all_zero_inertia": (dict(mass=np.zeros(4), inertia_com=np.zeros((4, 3, 3))), ValueError, ["'mass'", "zero"]),
    "too_few_names": (dict(link_names=("a", "b")), ValueError, ["'link_names'"]),
    "duplicate_names": (dict(link_names=("a", "b", "a", "c")), ValueError, ["'link_names'", "duplicate"]),
    "parent_2d": (dict(parent=np.array([[-1, 0, 1, 1]])), ValueError, ["'parent'"]),
    "inboard_fraction": (dict(inboard_interface=np.array([0, 0.5, 0, 0])), ValueError, ["'inboard_interface'"]),
    "empty": (dict(parent=np.zeros(0, int), joint_types=[], link_names=()), ValueError, ["'parent'", "empty"]),
}


@pytest.mark.parametrize("changes, error, words", BAD.values(), ids=BAD.keys())
def test_bad_fields(changes, error, words):
    with pytest.raises(error) as info:
        jaxsoa.build_model(**_with(**changes))
    for word in words:
        assert word in str(info.value), str(info.value)


def test_integer_valued_floats_and_python_numbers_are_accepted():
    """parent / joint types given as integral floats, masses as plain Python lists: the same model."""
    reference = jaxsoa.build_model(**valid_fields())
    changes = dict(parent=np.array([-1.0, 0.0, 1.0, 1.0]), mass=[3, 1, 0.5, 0.2],
                   joint_types=[4.0, 1.0, 2.0, 3.0])
    _assert_same(jaxsoa.build_model(**_with(**changes)), reference)


def test_default_dtype_is_jax_default_float():
    """No dtype= means JAX's default float: float64 here (the tests run with x64 enabled)."""
    assert jaxsoa.build_model(**valid_fields()).dtype == jnp.result_type(float) == jnp.float64
    assert jaxsoa.build_model(**valid_fields(), dtype=jnp.float32).dtype == jnp.float32


def _assert_same(model, reference):
    assert model.joint_types == reference.joint_types and model.link_names == reference.link_names
    for a, b in zip(jax.tree.leaves(model), jax.tree.leaves(reference), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def _corrupt(rng, fields):
    """One random corruption of one field (or none: the identity must build the same model)."""
    name = rng.choice(sorted(k for k in fields if k != "link_names"))
    value = fields[name]
    if name == "joint_types":
        value = list(value)
        value[rng.integers(len(value))] = rng.choice([-1, 5, 7, 1.5, 0, 1, 2, 3, 4])
        return name, value
    x = np.array(value, dtype=float)
    kind = rng.integers(8)
    flat = x.reshape(-1)
    i = rng.integers(flat.size)
    if kind == 0:
        flat[i] = np.nan
    elif kind == 1:
        flat[i] = rng.choice([np.inf, -np.inf, 1e300])
    elif kind == 2:
        flat[i] = -abs(flat[i]) - rng.uniform(0.1, 2)
    elif kind == 3:
        flat[i] += rng.choice([0.5, -0.5, 1e-3, 0.25])
    elif kind == 4:
        x = x[:-1]
    elif kind == 5:
        x = x[..., :-1] if x.ndim > 1 else x[:, None]
    elif kind == 6:
        x = x.astype(rng.choice([np.float16, np.int32]))
    else:
        pass                                            # unchanged: must build the reference model
    return name, x


def test_fuzz_build_model():
    """300 corruptions: each raises ValueError / TypeError, or builds the reference model (a no-op
    corruption), or — when the corrupted value is still physical (a different positive mass) —
    builds a model that stores exactly that value and passes the independent traced validator."""
    from jaxsoa.multibody.checks import model_valid

    rng = np.random.default_rng(2026)
    reference = jaxsoa.build_model(**valid_fields())
    outcomes = {"same": 0, "other valid": 0, "rejected": 0}
    for _ in range(300):
        fields = valid_fields()
        name, value = _corrupt(rng, fields)
        fields[name] = value
        try:
            model = jaxsoa.build_model(**fields)
        except (ValueError, TypeError) as err:
            assert str(err), name
            outcomes["rejected"] += 1
            continue
        same = all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in
                   zip(jax.tree.leaves(model), jax.tree.leaves(reference), strict=True))
        if same:
            outcomes["same"] += 1
            continue
        # a different model was accepted: it is valid and stores the corrupted value itself (no clamping)
        assert bool(model_valid(model)), (name, value)
        if name in ("mass", "com", "inertia_com", "placement_translation"):
            np.testing.assert_array_equal(np.asarray(getattr(model, name)).reshape(-1),
                                          np.asarray(value, np.float64).reshape(-1))
        outcomes["other valid"] += 1
    assert outcomes["rejected"] > 100 and outcomes["same"] > 10, outcomes
