"""`JointType`: its sizes against the coordinate table of docs/conventions.md and against
Pinocchio's joint models, and the completeness of the per-type rules (a new member without its
transform, motion subspace or configuration-space rules fails here).

Tolerances: sizes are integers, compared exactly; the neutral configuration of each type is the
identity transform to 1e-15 (float64 round-off).
"""

import pathlib
import re

import jax.numpy as jnp
import numpy as np
import pinocchio as pin
import pytest

import jaxsoa
from jaxsoa.multibody import lie_groups
from jaxsoa.multibody.joints import JointType, joint_transform, motion_subspace

CONVENTIONS = pathlib.Path(__file__).parents[2] / "docs" / "conventions.md"
PINOCCHIO = {JointType.REVOLUTE: pin.JointModelRZ(), JointType.PRISMATIC: pin.JointModelPZ(),
             JointType.SPHERICAL: pin.JointModelSpherical(), JointType.FREE: pin.JointModelFreeFlyer(),
             JointType.PLANAR: pin.JointModelPlanar(), JointType.REVOLUTE_UNBOUNDED: pin.JointModelRUBZ()}


def documented_sizes() -> dict:
    """{joint name: (nq, nv)} from the "Coordinates" table of docs/conventions.md."""
    section = CONVENTIONS.read_text().split("## Coordinates", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| *([a-z_]+) *\| *(\d+) *\| *(\d+) *\|", section, flags=re.M)
    return {name: (int(nq), int(nv)) for name, nq, nv in rows}


def test_sizes_match_the_documented_coordinate_table():
    assert documented_sizes() == {t.name.lower(): (t.nq, t.nv) for t in JointType}


@pytest.mark.parametrize("joint_type", list(PINOCCHIO))
def test_sizes_match_pinocchio(joint_type):
    assert (joint_type.nq, joint_type.nv) == (PINOCCHIO[joint_type].nq, PINOCCHIO[joint_type].nv)


def test_members_are_the_stored_ints():
    """`Model.joint_types` holds `JointType` members, equal (and hashing equal) to their ints, so
    models built from ints or members share one compile key."""
    assert [int(t) for t in JointType] == list(range(len(JointType)))
    assert JointType(4) is JointType.FREE and hash(JointType.FREE) == hash(4)
    model = jaxsoa.build_model([-1, 0], [4, 1], [[0, 0, 1.0]] * 2, [np.eye(3)] * 2, [[0, 0, 0.0]] * 2,
                               [1.0, 1.0], [[0, 0, 0.0]] * 2, [np.eye(3)] * 2)
    assert model.joint_types == (JointType.FREE, JointType.REVOLUTE)
    assert all(type(t) is JointType for t in model.joint_types)


@pytest.mark.parametrize("joint_type", list(JointType))
def test_every_type_has_its_rules(joint_type):
    """Each member has a transform, a motion subspace of nv columns and configuration-space rules
    whose neutral configuration (nq values) is the identity transform."""
    rules = lie_groups.RULES[joint_type]
    assert len(rules.neutral) == joint_type.nq
    axis = jnp.asarray([[0.0, 0.0, 1.0]])
    q = jnp.asarray([rules.neutral])
    R, p = joint_transform(joint_type, axis, q)
    np.testing.assert_allclose(R[0], np.eye(3), atol=1e-15)
    np.testing.assert_allclose(p[0], np.zeros(3), atol=1e-15)
    S = motion_subspace(joint_type, axis, 6)
    assert S.shape == (1, 6, 6) and np.linalg.matrix_rank(np.asarray(S[0])) == joint_type.nv
    if joint_type.nq:
        assert rules.integrate(q, jnp.zeros((1, joint_type.nv))).shape == (1, joint_type.nq)
