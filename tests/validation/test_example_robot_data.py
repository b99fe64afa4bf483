"""Robots beyond the reference three: example-robot-data URDFs loaded as Pinocchio loads them.

Real robot files carry inertias that are not physically consistent (ANYmal's, Go1's, B1's and
HyQ's base: principal moments [−2e−22, 9e−23, 3e−6], which break the triangle inequality; TIAGo's
antennas: not positive semi-definite), massless links on moving joints (the human model's
"virtual" links between the three joints of a hip) and free-flyer roots whose inertia sits on
links fixed to them (A1, Z1, UR5 on a free flyer). `load_urdf` refuses the first two by default,
naming the link and the option, and with `check_inertia="warn"` loads them with a warning each;
the third loads by default. Every loaded robot is checked against Pinocchio's RNEA (with and
without link wrenches), ABA and CRBA at random states, float64.

Robots whose M(q) is singular (Romeo's massless finger links) give a NaN ABA in Pinocchio; jaxsoa's
ABA must give a non-finite result there too, and the other quantities are compared as usual.

`continuous` joints are one angle in jaxsoa and (cos, sin) in Pinocchio; the states are mapped
with θ = atan2(sin, cos) (TIAGo's and PR2's wheels, Kinova's joints).

Tolerance: relative error (max |x − ref| / max(1, max |ref|)) ≤ 1e-9, as for the reference
robots: float64 O(n) recursions agree to ~1e-13; the margin is M⁻¹'s conditioning in ABA (light
fingers, massless virtual links).
"""

import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pinocchio as pin
import pytest

import jaxsoa
from jaxsoa.io import example_robot_data_dir
from jaxsoa.multibody.joints import JointType
from tests.helpers.trees import (
    fext_to_pinocchio,
    jaxsoa_dynamics,
    link_map,
    pinocchio_dynamics,
    random_state,
    relative_error,
)

REL_TOL = 1e-9
N_STATES = 3
_dynamics = jax.jit(jax.vmap(jaxsoa_dynamics, in_axes=(None, 0, 0, 0, 0, 0)))


def _path(relative):
    path = example_robot_data_dir() / relative
    if not path.is_file():                    # an older example-robot-data release
        pytest.skip(f"{relative} is not in this example-robot-data release")
    return path


def _load(path, floating, check_inertia="raise", check_mimic="raise"):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = jaxsoa.load_urdf(path, floating_base=floating, check_inertia=check_inertia, check_mimic=check_mimic,
                                 dtype=jnp.float64)
    pin_model = pin.buildModelFromUrdf(str(path), pin.JointModelFreeFlyer()) if floating \
        else pin.buildModelFromUrdf(str(path))
    return model, pin_model, [str(w.message) for w in caught if issubclass(w.category, UserWarning)]


def _coordinates(model, pin_model):
    """Per moving jaxsoa joint: (Pinocchio q slice start, Pinocchio nq, jaxsoa nq), and v_index with
    v_jaxsoa = v_pin[v_index]."""
    joint_ids, _ = link_map(model, pin_model)
    q_parts, v_index = [], []
    for k, joint_type in enumerate(model.joint_types):
        if joint_type == JointType.FIXED:
            continue
        jid, t = joint_ids[k], JointType(joint_type)
        assert pin_model.nvs[jid] == t.nv
        assert pin_model.nqs[jid] == t.nq or (pin_model.nqs[jid], t.nq) == (2, 1)   # continuous: (cos, sin)
        q_parts.append((pin_model.idx_qs[jid], pin_model.nqs[jid], t.nq))
        v_index.extend(pin_model.idx_vs[jid] + np.arange(t.nv))
    assert sorted(v_index) == list(range(pin_model.nv))
    return q_parts, np.asarray(v_index, np.int64)


def _q_to_jaxsoa(q_parts, q):
    return np.concatenate([q[..., i:i + nq] if nq == nq_j else np.arctan2(q[..., i + 1:i + 2], q[..., i:i + 1])
                           for i, nq, nq_j in q_parts], axis=-1)


def _check_against_pinocchio(model, pin_model, seed=0):
    rng = np.random.default_rng(seed)
    state = random_state(rng, pin_model, N_STATES)
    f_ext = rng.normal(size=(N_STATES, model.n_links, 6))
    fext = [fext_to_pinocchio(model, pin_model, f) for f in f_ext]
    reference = pinocchio_dynamics(pin_model, state, fext)
    q_parts, v_index = _coordinates(model, pin_model)
    expected = {key: x[..., v_index] for key, x in reference.items() if key != "crba"}
    expected["crba"] = reference["crba"][..., v_index[:, None], v_index[None, :]]
    q = _q_to_jaxsoa(q_parts, state["q"])
    assert q.shape[-1] == model.nq
    got = _dynamics(model, jnp.asarray(q), *(jnp.asarray(state[k][..., v_index]) for k in ("v", "a", "tau")),
                    jnp.asarray(f_ext))
    singular = ~np.isfinite(expected["aba"]).all(-1)            # M(q) singular (massless leaves): Pinocchio's NaN
    if singular.any():
        M = expected["crba"][singular]
        assert np.abs(np.linalg.eigvalsh(M)).min() <= 1e-12 * np.abs(M).max()
        for key in ("aba", "aba_fext"):                          # jaxsoa's ABA reports it too
            assert not np.isfinite(np.asarray(got[key])[singular]).all(), key
    keys = [key for key in expected if not key.startswith("aba") or not singular.all()]
    errors = {key: relative_error(np.asarray(got[key])[~singular] if key.startswith("aba") else got[key],
                                  expected[key][~singular] if key.startswith("aba") else expected[key])
              for key in keys}
    assert all(e <= REL_TOL for e in errors.values()), errors
    return errors


# (URDF below the robots folder, floating base, what the default refuses: None or a regex of the error)
ROBOTS = {
    "anymal": ("anymal_b_simple_description/robots/anymal.urdf", True, r"link 'base'.*triangle inequality"),
    "tiago": ("tiago_description/robots/tiago.urdf", False,
              r"link 'base_antenna_left_link'.*not positive semi-definite"),
    "human": ("human_description/robots/human.urdf", True,
              r"link 'left_upperleg_virtual' \(child of moving joint 'left_hip_Z'\) has no <inertial>"),
    "a1": ("a1_description/urdf/a1.urdf", True, None),
    "ur5": ("ur_description/urdf/ur5_robot.urdf", True, None),
    "kinova": ("kinova_description/robots/kinova.urdf", False, None),
}


@pytest.mark.parametrize("robot", ROBOTS)
def test_default_check_names_the_link_and_the_option(robot):
    relative, floating, refused = ROBOTS[robot]
    path = _path(relative)
    if refused is None:                              # loads as it is: the root's inertia is on a fixed child
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert jaxsoa.load_urdf(path, floating_base=floating).n_links > 1
        return
    with pytest.raises(ValueError, match=refused) as error:
        jaxsoa.load_urdf(path, floating_base=floating)
    assert "check_inertia='warn'" in str(error.value) and str(path) in str(error.value)


@pytest.mark.parametrize("robot", ROBOTS)
def test_loaded_robot_matches_pinocchio(robot):
    relative, floating, refused = ROBOTS[robot]
    model, pin_model, caught = _load(_path(relative), floating, "raise" if refused is None else "warn")
    if refused is not None:                          # each inconsistency is reported, naming its link
        assert any(__import__("re").search(refused, message) for message in caught), caught
    _check_against_pinocchio(model, pin_model)


def test_massless_free_flyer_still_refused(tmp_path):
    """A free-flyer root with no inertia of its own nor on a fixed child, and one moving child: M is
    6 + 1 square with rank 6, so the default refuses it (the warning mode loads it, as Pinocchio)."""
    path = tmp_path / "r.urdf"
    inertial = ('<inertial><mass value="1"/><inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" '
                'izz="0.1"/></inertial>')
    path.write_text(f'<robot name="r"><link name="base"/><link name="arm">{inertial}</link>'
                    '<joint name="j" type="revolute"><parent link="base"/><child link="arm"/><axis xyz="0 0 1"/>'
                    '<limit effort="1" velocity="1"/></joint></robot>')
    with pytest.raises(ValueError, match=r"link 'base' \(floating base\) has no <inertial>"):
        jaxsoa.load_urdf(path, floating_base=True)
    with pytest.warns(UserWarning, match=r"link 'base' \(floating base\)"):
        model = jaxsoa.load_urdf(path, floating_base=True, check_inertia="warn")
    assert float(model.mass[0, 0]) == 0.0


def test_check_inertia_is_checked(tmp_path):
    with pytest.raises(ValueError, match=r"argument 'check_inertia' must be 'raise' or 'warn'"):
        jaxsoa.load_urdf(tmp_path / "missing.urdf", check_inertia="ignore")


EVERY_URDF = sorted(str(p.relative_to(example_robot_data_dir())) for p in example_robot_data_dir().rglob("*.urdf"))


def test_every_urdf_is_found():
    """The sweep below covers the installed example-robot-data (67 URDFs in 6.0.0)."""
    assert len(EVERY_URDF) >= 60, len(EVERY_URDF)


@pytest.mark.slow
@pytest.mark.parametrize("relative", EVERY_URDF)
def test_every_example_robot_matches_pinocchio(relative):
    """Every URDF of example-robot-data that Pinocchio loads, fixed and on a free flyer: jaxsoa loads
    it with `check_inertia="warn"` and `check_mimic="warn"` (alex_psyonic_hands has a `<mimic>` naming
    a joint the file does not have, which Pinocchio ignores) and agrees with Pinocchio (134 file × base
    pairs in 6.0.0; those Pinocchio refuses, e.g. a `<robot>` without a name, are skipped)."""
    path = example_robot_data_dir() / relative
    for floating in (False, True):
        try:
            pin_model = pin.buildModelFromUrdf(str(path), pin.JointModelFreeFlyer()) if floating \
                else pin.buildModelFromUrdf(str(path))
        except (RuntimeError, ValueError):
            continue
        model, pin_model, _ = _load(path, floating, "warn", "warn")
        if model.nv:                                 # a fixed base alone: nothing to compare
            _check_against_pinocchio(model, pin_model)


CONTINUOUS_URDF = [r for r in EVERY_URDF
                   if re.search(r"""type\s*=\s*["']continuous["']""", (example_robot_data_dir() / r).read_text())]


def test_continuous_urdfs_are_found():
    """The sweep below covers the example-robot-data URDFs with `continuous` joints (7 in 6.0.0: the continuous
    double pendulum, Kinova, PR2, three TIAGos, TIAGo Pro)."""
    assert len(CONTINUOUS_URDF) >= 5, CONTINUOUS_URDF


@pytest.mark.slow
@pytest.mark.parametrize("relative", CONTINUOUS_URDF)
def test_continuous_joints_loaded_unbounded_match_pinocchio(relative):
    """With `continuous="unbounded"` every `continuous` joint is Pinocchio's revolute-unbounded joint: the same nq
    as Pinocchio, each joint's q slice the same size and Pinocchio's (cos θ, sin θ) passed unchanged (no atan2 map),
    and RNEA (± link wrenches), ABA and CRBA agree with Pinocchio (1e-9), fixed base."""
    path = example_robot_data_dir() / relative
    pin_model = pin.buildModelFromUrdf(str(path))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)             # TIAGo's antennas: `check_inertia="warn"`
        model = jaxsoa.load_urdf(path, check_inertia="warn", check_mimic="warn", continuous="unbounded",
                                 dtype=jnp.float64)
    assert (model.nq, model.nv) == (pin_model.nq, pin_model.nv)
    assert JointType.REVOLUTE_UNBOUNDED in model.joint_types
    assert all(nq == nq_jaxsoa for _, nq, nq_jaxsoa in _coordinates(model, pin_model)[0])
    _check_against_pinocchio(model, pin_model)


def test_a_mimic_of_a_missing_joint_is_refused_or_a_named_warning(tmp_path):
    """The `<mimic>` check: "raise" (default) names the joint and line; "warn" loads the joint as an
    independent one, like any mimic joint, and names it in a UserWarning; another value is refused."""
    alex = example_robot_data_dir() / "alex_description" / "urdf" / "alex_psyonic_hands.urdf"
    with warnings.catch_warnings(), pytest.raises(ValueError, match=r"joint '.*' \(line \d+\): <mimic> names joint"):
        warnings.simplefilter("ignore")                     # its inertias' warnings (check_inertia="warn")
        jaxsoa.load_urdf(alex, check_inertia="warn")
    model, pin_model, messages = _load(alex, False, "warn", "warn")
    assert any("<mimic> names joint" in m and "check_mimic='warn'" in m for m in messages), messages
    assert (model.nq, model.nv) == (pin_model.nq, pin_model.nv)
    with pytest.raises(ValueError, match="argument 'check_mimic' must be 'raise' or 'warn'"):
        jaxsoa.load_urdf(alex, check_mimic="ignore")
