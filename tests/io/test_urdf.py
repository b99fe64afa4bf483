"""Validation in `load_urdf`: every bad URDF raises `ValueError` naming the offending link (or
joint) and field; a valid URDF with fixed and mimic joints loads as Pinocchio does, with Pinocchio's
link order.

Tolerances: the merged-inertia comparison with Pinocchio is float64 arithmetic on O(1) numbers
(a parallel-axis shift and a sum), so 1e-12 absolute.
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pinocchio as pin
import pytest

import jaxsoa
from jaxsoa.multibody.joints import JointType


def inertial(mass=1.0, xyz="0 0 0", rpy="0 0 0", ixx=0.01, iyy=0.01, izz=0.01, ixy=0.0, ixz=0.0, iyz=0.0):
    return (f'<inertial><origin xyz="{xyz}" rpy="{rpy}"/><mass value="{mass}"/>'
            f'<inertia ixx="{ixx}" ixy="{ixy}" ixz="{ixz}" iyy="{iyy}" iyz="{iyz}" izz="{izz}"/></inertial>')


def link(name, inertial_xml=None):
    return f'<link name="{name}">{inertial_xml if inertial_xml is not None else inertial()}</link>'


def joint(name, jtype, parent, child, xyz="0 0 0", rpy="0 0 0", axis="0 0 1", extra=""):
    limit = '<limit lower="-1" upper="1" effort="10" velocity="1"/>' if jtype in ("revolute", "prismatic") else ""
    return (f'<joint name="{name}" type="{jtype}"><parent link="{parent}"/><child link="{child}"/>'
            f'<origin xyz="{xyz}" rpy="{rpy}"/><axis xyz="{axis}"/>{limit}{extra}</joint>')


def write_urdf(tmp_path, *elements, name="robot.urdf"):
    path = tmp_path / name
    path.write_text('<?xml version="1.0"?>\n<robot name="test">\n' + "\n".join(elements) + "\n</robot>\n")
    return path


def test_load_urdf_moving_link_without_inertial(tmp_path):
    path = write_urdf(tmp_path, link("base"), '<link name="arm"/>', joint("shoulder", "revolute", "base", "arm"))
    with pytest.raises(ValueError, match=r"'arm'.*<inertial>"):
        jaxsoa.load_urdf(path)


def test_load_urdf_fixed_link_without_inertial_is_fine(tmp_path):
    """A frame-only link welded by a fixed joint carries no mass and needs no <inertial>."""
    path = write_urdf(tmp_path, link("base"), '<link name="tool_frame"/>', joint("weld", "fixed", "base", "tool_frame"))
    model = jaxsoa.load_urdf(path)
    assert model.n_links == 1


def test_load_urdf_floating_base_without_inertial(tmp_path):
    path = write_urdf(tmp_path, '<link name="base"/>', link("arm"), joint("shoulder", "revolute", "base", "arm"))
    with pytest.raises(ValueError, match=r"'base'.*<inertial>"):
        jaxsoa.load_urdf(path, floating_base=True)


def test_load_urdf_unknown_joint_type(tmp_path):
    """A type outside the URDF specification is refused, naming the joint (every URDF type loads; planar joints:
    tests/multibody/test_planar.py)."""
    path = write_urdf(tmp_path, link("base"), link("slider"), joint("glide", "ball", "base", "slider"))
    with pytest.raises(ValueError, match=r"'glide'.*'ball' is not a URDF joint type"):
        jaxsoa.load_urdf(path)


def test_load_urdf_floating_joint_is_pinocchios_free_flyer(tmp_path):
    """A URDF `floating` joint below a fixed base (a satellite released from an arm's gripper frame) is a
    free joint, as Pinocchio's `JointModelFreeFlyer`: RNEA, ABA and CRBA agree with Pinocchio to 1e-9
    (float64, 4 random states; ABA on the per-sample recursion, the free joint not on the world)."""
    from tests.helpers.trees import (
        jaxsoa_dynamics,
        pinocchio_dynamics,
        pinocchio_to_jaxsoa_dynamics,
        random_state,
        relative_error,
        to_jaxsoa,
    )

    path = write_urdf(tmp_path, link("base"), link("arm", inertial(mass=2.0, xyz="0.1 0 0", ixx=0.02, iyy=0.03)),
                      link("body", inertial(mass=3.0, xyz="0 0.05 0", rpy="0.2 0 0.1", izz=0.015)),
                      link("flap", inertial(mass=0.5, xyz="0 0 0.1", ixx=0.005, iyy=0.006, izz=0.004)),
                      joint("shoulder", "revolute", "base", "arm", axis="0 1 0"),
                      joint("release", "floating", "arm", "body", xyz="0.3 0 0.1", rpy="0 0.4 0"),
                      joint("hinge", "revolute", "body", "flap", axis="1 0 0", xyz="0 0.2 0"))
    model = jaxsoa.load_urdf(path, dtype=jnp.float64)
    pin_model = pin.buildModelFromUrdf(str(path))
    assert (model.nq, model.nv) == (pin_model.nq, pin_model.nv) == (9, 8)
    assert JointType.FREE in model.joint_types
    state = random_state(np.random.default_rng(0), pin_model, 4)
    fext = [[pin.Force.Zero()] * pin_model.njoints] * 4
    expected = pinocchio_to_jaxsoa_dynamics(model, pin_model, pinocchio_dynamics(pin_model, state, fext))
    s = {k: jnp.asarray(x) for k, x in to_jaxsoa(model, pin_model, state).items()}
    got = jax.vmap(jaxsoa_dynamics, in_axes=(None, 0, 0, 0, 0, None))(model, s["q"], s["v"], s["a"], s["tau"],
                                                                      None)
    assert all(relative_error(got[k], expected[k]) <= 1e-9 for k in ("rnea", "aba", "crba"))


def test_load_urdf_two_root_links(tmp_path):
    path = write_urdf(tmp_path, link("base"), link("arm"), link("stray"), joint("shoulder", "revolute", "base", "arm"))
    with pytest.raises(ValueError, match="root") as info:
        jaxsoa.load_urdf(path)
    assert "'base'" in str(info.value) and "'stray'" in str(info.value)


def test_load_urdf_missing_file(tmp_path):
    missing = tmp_path / "nowhere.urdf"
    with pytest.raises(ValueError, match=re.escape(str(missing))):
        jaxsoa.load_urdf(missing)


BAD_URDF_INERTIA = {
    "negative_mass": (inertial(mass=-1.0), "mass"),
    "not_positive_definite": (inertial(ixx=-0.01), "inertia_com"),
    "triangle_inequality": (inertial(ixx=0.01, iyy=0.01, izz=0.05), "inertia_com"),
    "nan": (inertial(mass="nan"), "mass"),
}


@pytest.mark.parametrize("inertial_xml, field", BAD_URDF_INERTIA.values(), ids=BAD_URDF_INERTIA.keys())
def test_load_urdf_bad_inertia_names_link_and_field(tmp_path, inertial_xml, field):
    path = write_urdf(tmp_path, link("base"), link("arm", inertial_xml), joint("shoulder", "revolute", "base", "arm"))
    with pytest.raises(ValueError) as info:
        jaxsoa.load_urdf(path)
    assert "'arm'" in str(info.value) and f"'{field}'" in str(info.value), str(info.value)


def test_load_urdf_non_unit_axis_is_normalised(tmp_path):
    """URDF axes need not be unit length; the loader normalises them (as Pinocchio does)."""
    path = write_urdf(tmp_path, link("base"), link("arm"), joint("shoulder", "revolute", "base", "arm", axis="0 0 2"))
    np.testing.assert_allclose(np.asarray(jaxsoa.load_urdf(path, dtype=jnp.float64).joint_axis[1]), [0, 0, 1])


def test_load_urdf_zero_axis_names_joint(tmp_path):
    path = write_urdf(tmp_path, link("base"), link("arm"), joint("shoulder", "revolute", "base", "arm", axis="0 0 0"))
    with pytest.raises(ValueError, match=r"'shoulder'.*'axis'"):
        jaxsoa.load_urdf(path)


VALID_URDF = (
    link("base", inertial(mass=2.0, xyz="0 0 0.05", ixx=0.02, iyy=0.03, izz=0.04)),
    link("upper_arm", inertial(mass=1.0, xyz="0 0 0.2", rpy="0.1 0 0.3", ixx=0.01, iyy=0.012, izz=0.005, ixy=0.001)),
    # welded to upper_arm: merged into it
    link("sensor", inertial(mass=0.3, xyz="0.02 0 0", ixx=0.001, iyy=0.001, izz=0.0015)),
    link("finger", inertial(mass=0.1, xyz="0 0.01 0", ixx=1e-4, iyy=1e-4, izz=1e-4)),
    link("finger_mimic", inertial(mass=0.1, xyz="0 -0.01 0", ixx=1e-4, iyy=1e-4, izz=1e-4)),
    joint("shoulder", "revolute", "base", "upper_arm", xyz="0 0 0.1", axis="0 1 0"),
    joint("sensor_mount", "fixed", "upper_arm", "sensor", xyz="0 0.05 0.4", rpy="0 0.5 0.2"),
    # attached to the welded link: its placement composes through the fixed joint
    joint("finger_slide", "prismatic", "sensor", "finger", xyz="0.1 0 0", rpy="0.3 0 0", axis="1 0 0"),
    joint("finger_mimic_slide", "prismatic", "sensor", "finger_mimic", xyz="0.1 0 0", axis="1 0 0",
          extra='<mimic joint="finger_slide" multiplier="-1" offset="0"/>'),
)


@pytest.mark.parametrize("floating_base", [False, True])
def test_load_urdf_merges_fixed_joints_like_pinocchio(tmp_path, floating_base):
    path = write_urdf(tmp_path, *VALID_URDF)
    model = jaxsoa.load_urdf(path, floating_base=floating_base, dtype=jnp.float64)
    # siblings in joint-name order (Pinocchio's): finger_mimic_slide < finger_slide
    assert model.link_names == ("base", "upper_arm", "finger_mimic", "finger")
    assert model.link_joint_names == ("root_joint", "shoulder", "finger_mimic_slide", "finger_slide")
    root_type = JointType.FREE if floating_base else JointType.FIXED
    assert model.joint_types == (root_type, JointType.REVOLUTE, JointType.PRISMATIC, JointType.PRISMATIC)
    np.testing.assert_array_equal(model.parent, [-1, 0, 1, 1])
    np.testing.assert_allclose(float(jnp.sum(model.mass)), 2.0 + 1.0 + 0.3 + 0.1 + 0.1, rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.asarray(model.mass[:, 0]), [2.0, 1.3, 0.1, 0.1], rtol=0, atol=1e-12)

    pin_model = (pin.buildModelFromUrdf(str(path), pin.JointModelFreeFlyer()) if floating_base
                 else pin.buildModelFromUrdf(str(path)))
    # the mimic joint is loaded as an independent joint with its own coordinate (Pinocchio's default)
    assert model.joint_names[-2:] == ("finger_mimic_slide", "finger_slide")
    assert (model.nq, model.nv) == (pin_model.nq, pin_model.nv) == ((7 if floating_base else 0) + 3,
                                                                     (6 if floating_base else 0) + 3)
    # jaxsoa link k <-> Pinocchio joint k + 1 with a free-flyer; with a fixed base, link 0 (welded
    # to the world) <-> Pinocchio's universe 0 and link k <-> joint k.
    offset = 1 if floating_base else 0
    for k in range(model.n_links):
        j = k + offset
        inertia = pin_model.inertias[j]
        np.testing.assert_allclose(float(model.mass[k, 0]), inertia.mass, rtol=0, atol=1e-12)
        np.testing.assert_allclose(np.asarray(model.com[k, 0]), inertia.lever, rtol=0, atol=1e-12)
        np.testing.assert_allclose(np.asarray(model.inertia_com[k, 0]), inertia.inertia, rtol=0, atol=1e-12)
        if k > 0:
            placement = pin_model.jointPlacements[j]
            np.testing.assert_allclose(np.asarray(model.placement_rotation[k, 0]), placement.rotation,
                                       rtol=0, atol=1e-12)
            np.testing.assert_allclose(np.asarray(model.placement_translation[k, 0]), placement.translation,
                                       rtol=0, atol=1e-12)


def test_load_urdf_orders_siblings_like_pinocchio(tmp_path):
    """Pinocchio (through urdfdom's name-sorted joint map) visits a link's child joints in name
    order, depth first, whatever the file order: q must follow the same layout."""
    path = write_urdf(tmp_path, link("base"), link("z_link"), link("a_link"), link("m_link"), link("tip"),
                      link("welded"), link("behind_weld"),
                      joint("c_joint", "revolute", "base", "a_link"), joint("a_joint", "revolute", "base", "z_link"),
                      joint("b_joint", "prismatic", "base", "m_link"), joint("0_joint", "revolute", "m_link", "tip"),
                      joint("aa_weld", "fixed", "base", "welded"),
                      joint("x_joint", "revolute", "welded", "behind_weld"))
    model = jaxsoa.load_urdf(path)
    pin_model = pin.buildModelFromUrdf(str(path))
    assert model.joint_names == tuple(pin_model.names)[1:] == ("a_joint", "x_joint", "b_joint", "0_joint", "c_joint")
    pin_parents = [pin_model.names[p] for p in pin_model.parents[1:]]
    jax_parents = [model.link_joint_names[p] for p in np.asarray(model.parent)[1:]]
    assert [p if p != "root_joint" else "universe" for p in jax_parents] == pin_parents
