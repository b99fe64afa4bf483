"""Validation in `build_model`: every bad input raises `ValueError` naming the offending link and
field; valid edge cases (spherical / free axes, zero mass, semidefinite inertia) are accepted.
URDF loading is tested in tests/io/test_urdf.py.
"""

import re

import jax.numpy as jnp
import numpy as np
import pytest

import jaxsoa
from jaxsoa.multibody.joints import JointType

# --------------------------------------------------------------------------------------------- #
# build_model
# --------------------------------------------------------------------------------------------- #

NAMES = ("base", "upper", "lower", "hand")


def valid_fields():
    """A 4-link chain-and-branch tree that `build_model` accepts."""
    return dict(
        parent=np.array([-1, 0, 1, 1]),
        joint_types=[JointType.FREE, JointType.REVOLUTE, JointType.PRISMATIC, JointType.SPHERICAL],
        joint_axis=np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]),
        placement_rotation=np.broadcast_to(np.eye(3), (4, 3, 3)).copy(),
        placement_translation=np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 0.5], [0.0, 0.0, 0.4], [0.1, 0.0, 0.4]]),
        mass=np.array([3.0, 1.0, 0.5, 0.2]),
        com=np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 0.2], [0.0, 0.0, 0.2], [0.05, 0.0, 0.0]]),
        inertia_com=np.stack([np.diag([0.1, 0.12, 0.15]), np.diag([0.02, 0.02, 0.01]),
                              np.diag([0.01, 0.01, 0.005]), np.diag([0.001, 0.001, 0.001])]),
        link_names=NAMES,
    )


def test_valid_fields_build():
    model = jaxsoa.build_model(**valid_fields(), dtype=jnp.float64)
    assert model.n_links == 4 and (model.nq, model.nv) == (7 + 1 + 1 + 4, 6 + 1 + 1 + 3)
    assert model.mass.shape == (4, 1) and model.inertia_com.shape == (4, 1, 3, 3)
    assert model.link_names == NAMES


def _set(field, index, value):
    def mutate(fields):
        fields[field] = np.array(fields[field], dtype=float if field != "parent" else int)
        fields[field][index] = value
    return mutate


def _rotation_z(angle):
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def _inboard(fields):
    fields["inboard_interface"] = np.array([0, 0, 1, 0])      # one interface per link: 1 is out of range


BAD_BUILD = {
    # case: (mutation, link named in the message, field named in the message)
    "negative_mass": (_set("mass", 2, -0.5), "lower", "mass"),
    "inertia_not_positive_definite": (_set("inertia_com", 1, np.diag([0.02, 0.02, -0.01])), "upper", "inertia_com"),
    "inertia_asymmetric": (_set("inertia_com", 3, [[0.001, 0.0005, 0.0], [0.0, 0.001, 0.0], [0.0, 0.0, 0.001]]),
                           "hand", "inertia_com"),
    "triangle_inequality": (_set("inertia_com", 2, np.diag([0.01, 0.01, 0.03])), "lower", "inertia_com"),
    "nan_mass": (_set("mass", 1, np.nan), "upper", "mass"),
    "nan_com": (_set("com", 3, [0.0, np.nan, 0.0]), "hand", "com"),
    "inf_placement": (_set("placement_translation", 2, [0.0, np.inf, 0.0]), "lower", "placement_translation"),
    "parent_cycle": (_set("parent", slice(2, 4), [3, 2]), "lower", "parent"),
    "parent_self": (_set("parent", 1, 1), "upper", "parent"),
    "parent_out_of_range": (_set("parent", 3, 4), "hand", "parent"),
    "parent_below_minus_one": (_set("parent", 3, -2), "hand", "parent"),
    "joint_axis_not_unit": (_set("joint_axis", 1, [0.0, 0.0, 2.0]), "upper", "joint_axis"),
    "joint_axis_zero": (_set("joint_axis", 2, [0.0, 0.0, 0.0]), "lower", "joint_axis"),
    "placement_scaled": (_set("placement_rotation", 1, 1.1 * np.eye(3)), "upper", "placement_rotation"),
    "placement_reflection": (_set("placement_rotation", 3, np.diag([1.0, 1.0, -1.0])), "hand", "placement_rotation"),
    "placement_skewed": (_set("placement_rotation", 2, _rotation_z(0.3) + 1e-6), "lower", "placement_rotation"),
    "inboard_interface": (_inboard, "lower", "inboard_interface"),
    "joint_type_unknown": (lambda f: f.__setitem__("joint_types", [JointType.FREE, 7, JointType.PRISMATIC,
                                                                     JointType.SPHERICAL]), "upper", "joint_types"),
}


@pytest.mark.parametrize("mutate, link, field", BAD_BUILD.values(), ids=BAD_BUILD.keys())
def test_build_model_rejects(mutate, link, field):
    fields = valid_fields()
    mutate(fields)
    with pytest.raises(ValueError) as info:
        jaxsoa.build_model(**fields)
    message = str(info.value)
    assert f"'{link}'" in message, message
    assert f"'{field}'" in message, message


def test_two_roots_names_both():
    fields = valid_fields()
    fields["parent"] = np.array([-1, 0, -1, 1])
    with pytest.raises(ValueError, match=re.escape("'parent'")) as info:
        jaxsoa.build_model(**fields)
    assert "'base'" in str(info.value) and "'lower'" in str(info.value)


def test_no_root():
    fields = valid_fields()
    fields["parent"] = np.array([1, 0, 1, 1])
    with pytest.raises(ValueError, match="'parent'"):
        jaxsoa.build_model(**fields)


def test_axis_of_spherical_and_free_joints_is_not_checked():
    """Only revolute and prismatic joints use their axis."""
    fields = valid_fields()
    fields["joint_axis"][0] = fields["joint_axis"][3] = 0.0
    jaxsoa.build_model(**fields)


def test_zero_mass_and_semidefinite_inertia_are_accepted():
    """Massless links (e.g. a URDF link that only carries a frame) and rod-like inertias are valid."""
    fields = valid_fields()
    fields["mass"][3] = 0.0
    fields["inertia_com"][3] = 0.0
    fields["inertia_com"][2] = np.diag([0.01, 0.01, 0.0])
    jaxsoa.build_model(**fields)


def test_wrong_row_count():
    fields = valid_fields()
    fields["com"] = fields["com"][:3]
    with pytest.raises(ValueError, match="'com'"):
        jaxsoa.build_model(**fields)
