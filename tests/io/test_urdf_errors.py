"""Strict URDF reading (`jaxsoa.io.urdf_xml`): every malformed file or broken tree raises
`ValueError` naming the line or the element (link / joint) and field, never a silently different
robot; valid files load exactly the models of before (tests/io/test_urdf.py compares them with
Pinocchio); and the fuzz test: ~300 random corruptions of the Panda URDF (fixed seed), each of
which must either load a model equal in every field to the clean Panda's or raise `ValueError`.
"""

import copy
import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from lxml import etree

import jaxsoa
from tests.io.test_urdf import inertial, joint, link, write_urdf


@pytest.fixture(scope="module")
def panda_text():
    return jaxsoa.io.example_robot_urdf("panda").read_text()


@pytest.fixture(scope="module")
def panda_model():
    return jaxsoa.load_urdf(jaxsoa.io.example_robot_urdf("panda"))


def load_text(tmp_path, text, name="robot.urdf"):
    path = tmp_path / name
    path.write_text(text)
    return jaxsoa.load_urdf(path)


def raises(tmp_path, text, *fragments):
    """Loading `text` raises ValueError whose message holds every fragment (regex)."""
    with pytest.raises(ValueError) as info:
        load_text(tmp_path, text)
    for fragment in fragments:
        assert re.search(fragment, str(info.value)), (fragment, str(info.value))
    return str(info.value)


def assert_models_equal(model, reference):
    """Every field: the static ones (names, joint types, traversal options) through the treedef,
    every array exactly, dtype included."""
    leaves, tree = jax.tree_util.tree_flatten(model)
    ref_leaves, ref_tree = jax.tree_util.tree_flatten(reference)
    assert tree == ref_tree
    for a, b in zip(leaves, ref_leaves, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape and bool(jnp.all(a == b))


# ---------------------------------------------------------------------------------------------
# the bad inputs of the Panda URDF

def test_panda_loads_its_ten_links(panda_model):
    assert panda_model.n_links == 10 and (panda_model.nq, panda_model.nv) == (9, 9)


def test_panda_missing_end_tag_names_the_line(tmp_path, panda_text):
    """One `</joint>` deleted: the parser's error and line, not a 2-link robot."""
    start = panda_text.index("</joint>")
    line = panda_text[:start].count("\n") + 1
    bad = panda_text[:start] + panda_text[start + len("</joint>"):]
    message = raises(tmp_path, bad, "not well-formed XML", r"line \d+")
    assert int(re.search(r"line (\d+)", message).group(1)) > line          # where the mismatch shows


@pytest.mark.parametrize("fraction", [0.1, 0.5, 0.9, 0.999])
def test_truncated_file(tmp_path, panda_text, fraction):
    raises(tmp_path, panda_text[:int(len(panda_text) * fraction)], "not well-formed XML", r"line \d+")


def test_link_with_two_parent_joints(tmp_path, panda_text):
    bad = panda_text.replace('<child link="panda_link3"/>', '<child link="panda_link2"/>')
    raises(tmp_path, bad, "link 'panda_link2'", "'panda_joint2'", "'panda_joint3'")


def test_duplicate_link_and_joint_names(tmp_path, panda_text):
    raises(tmp_path, panda_text.replace('<link name="panda_link3">', '<link name="panda_link2">'),
           "link 'panda_link2'", "duplicate link name")
    raises(tmp_path, panda_text.replace('<joint name="panda_joint3"', '<joint name="panda_joint2"'),
           "joint 'panda_joint2'", "duplicate joint name")


def test_cycle(tmp_path, panda_text):
    """panda_link0 hung below panda_link3: a loop link0 → … → link3 → link0, no root."""
    extra = ('<joint name="loop" type="fixed"><parent link="panda_link3"/><child link="panda_link0"/></joint>'
             '</robot>')
    raises(tmp_path, panda_text.replace("</robot>", extra), "cycle", "'panda_link0'", "'loop'")


def test_cycle_beside_a_root(tmp_path):
    elements = [link(n) for n in ("base", "a", "b")] + [joint("ab", "fixed", "a", "b"), joint("ba", "fixed", "b", "a")]
    raises(tmp_path, write_urdf(tmp_path, *elements).read_text(), "cycle", "'a'", "'b'", "'ab'", "'ba'")


def test_self_parent(tmp_path):
    raises(tmp_path, write_urdf(tmp_path, link("base"), joint("me", "fixed", "base", "base")).read_text(),
           "cycle", "'base'", "'me'")


def test_joint_naming_a_missing_link(tmp_path, panda_text):
    raises(tmp_path, panda_text.replace('<child link="panda_link4"/>', '<child link="panda_link44"/>'),
           "joint 'panda_joint4'", "'panda_link44'")
    raises(tmp_path, panda_text.replace('<parent link="panda_link4"/>', '<parent link="nowhere"/>'),
           "joint 'panda_joint5'", "'nowhere'")


def test_sdf_root(tmp_path):
    raises(tmp_path, '<?xml version="1.0"?>\n<sdf version="1.6"><model name="m"><link name="a"/></model></sdf>\n',
           "<sdf>", "not <robot>", r"line 2")


def test_robot_without_name(tmp_path):
    raises(tmp_path, '<robot><link name="a"/></robot>', "<robot>", "'name'")


def test_not_a_file_of_xml(tmp_path):
    raises(tmp_path, "", "not well-formed XML")
    raises(tmp_path, "link name=a", "not well-formed XML", "line 1")


ELEMENTS = (link("base"), link("arm"))


@pytest.mark.parametrize("jtype", ["revolute", "prismatic"])
def test_missing_limit(tmp_path, jtype):
    plain = joint("shoulder", jtype, "base", "arm")
    raises(tmp_path, write_urdf(tmp_path, *ELEMENTS, re.sub(r"<limit[^>]*/>", "", plain)).read_text(),
           "joint 'shoulder'", "<limit>")
    for attribute in ("effort", "velocity"):
        bad = re.sub(rf' {attribute}="[^"]*"', "", plain)
        raises(tmp_path, write_urdf(tmp_path, *ELEMENTS, bad).read_text(), "joint 'shoulder'", f"'{attribute}'")


def test_continuous_and_fixed_joints_need_no_limit(tmp_path):
    model = load_text(tmp_path, write_urdf(tmp_path, *ELEMENTS, joint("shoulder", "continuous", "base", "arm"),
                                           link("tool"), joint("weld", "fixed", "arm", "tool")).read_text())
    assert model.n_links == 2


def test_axis_without_xyz(tmp_path):
    bad = joint("shoulder", "revolute", "base", "arm").replace('<axis xyz="0 0 1"/>', "<axis/>")
    raises(tmp_path, write_urdf(tmp_path, *ELEMENTS, bad).read_text(), "joint 'shoulder'", "<axis>", "'xyz'")


BAD_NUMBERS = {
    "xyz_garbage": (dict(xyz="0 zero 0.1"), "'xyz' of <origin>"),
    "xyz_short": (dict(xyz="0 0"), "'xyz' of <origin>"),
    "xyz_long": (dict(xyz="0 0 0 1"), "'xyz' of <origin>"),
    "rpy_nan": (dict(rpy="0 nan 0"), "'rpy' of <origin>"),
    "rpy_inf": (dict(rpy="0 0 inf"), "'rpy' of <origin>"),
    "axis_short": (dict(axis="0 1"), "'xyz' of <axis>"),
    "axis_garbage": (dict(axis="0 1 z"), "'xyz' of <axis>"),
    "axis_nan": (dict(axis="nan 0 1"), "'xyz' of <axis>"),
}


@pytest.mark.parametrize("kwargs, field", BAD_NUMBERS.values(), ids=BAD_NUMBERS.keys())
def test_bad_numbers_name_joint_and_field(tmp_path, kwargs, field):
    path = write_urdf(tmp_path, *ELEMENTS, joint("shoulder", "revolute", "base", "arm", **kwargs))
    raises(tmp_path, path.read_text(), "joint 'shoulder'", re.escape(field), r"line \d+")


def test_limit_number_is_checked(tmp_path):
    bad = joint("shoulder", "revolute", "base", "arm").replace('effort="10"', 'effort="ten"')
    raises(tmp_path, write_urdf(tmp_path, *ELEMENTS, bad).read_text(), "joint 'shoulder'", "'effort' of <limit>")


BAD_INERTIALS = {
    "negative_mass": (inertial(mass=-1.0), "'mass'"),
    "nan_mass": (inertial(mass="nan"), "'mass'"),
    "garbage_mass": (inertial(mass="heavy"), "'mass'"),
    "nan_com": (inertial(xyz="0 nan 0"), "'xyz' of <origin>"),
    "nan_inertia": (inertial(ixy="nan"), "'inertia_com'"),
    "not_positive_definite": (inertial(ixx=-0.01), "'inertia_com'"),
    "triangle_inequality": (inertial(izz=0.05), "'inertia_com'"),
    "no_mass": (re.sub(r"<mass[^>]*/>", "", inertial()), "<mass>"),
    "no_inertia": (re.sub(r"<inertia [^>]*/>", "", inertial()), "<inertia>"),
    "missing_moment": (inertial().replace(' iyz="0.0"', ""), "'iyz'"),
    "two_masses": (inertial().replace("<mass", '<mass value="1"/><mass'), "more than one <mass>"),
}


@pytest.mark.parametrize("inertial_xml, field", BAD_INERTIALS.values(), ids=BAD_INERTIALS.keys())
@pytest.mark.parametrize("jtype", ["revolute", "fixed"])
def test_bad_inertial_names_link_and_field(tmp_path, inertial_xml, field, jtype):
    """Checked on the URDF link itself, also when it is welded by a fixed joint and merged into its
    parent (where a negative or non-positive-definite inertia could hide in the sum)."""
    path = write_urdf(tmp_path, link("base", inertial(mass=5.0, ixx=1.0, iyy=1.0, izz=1.0)),
                      link("arm", inertial_xml), joint("shoulder", jtype, "base", "arm"))
    raises(tmp_path, path.read_text(), "link 'arm'", re.escape(field))


def test_repeated_joint_elements(tmp_path):
    bad = joint("shoulder", "revolute", "base", "arm").replace("<axis", '<origin xyz="0 0 1"/><axis')
    raises(tmp_path, write_urdf(tmp_path, *ELEMENTS, bad).read_text(), "joint 'shoulder'", "more than one <origin>")
    bad = joint("shoulder", "revolute", "base", "arm").replace("<child", '<child link="base"/><child')
    raises(tmp_path, write_urdf(tmp_path, *ELEMENTS, bad).read_text(), "joint 'shoulder'", "more than one <child>")


def test_joint_without_parent_or_type(tmp_path):
    bad = re.sub(r"<parent[^>]*/>", "", joint("shoulder", "revolute", "base", "arm"))
    raises(tmp_path, write_urdf(tmp_path, *ELEMENTS, bad).read_text(), "joint 'shoulder'", "no <parent>")
    bad = joint("shoulder", "revolute", "base", "arm").replace(' type="revolute"', "")
    raises(tmp_path, write_urdf(tmp_path, *ELEMENTS, bad).read_text(), "joint 'shoulder'", "type None")
    bad = joint("shoulder", "revolute", "base", "arm").replace('"revolute"', '"hinge"')
    raises(tmp_path, write_urdf(tmp_path, *ELEMENTS, bad).read_text(), "joint 'shoulder'", "'hinge'")


def test_mimic_of_a_missing_joint(tmp_path):
    bad = joint("shoulder", "revolute", "base", "arm", extra='<mimic joint="elbow"/>')
    raises(tmp_path, write_urdf(tmp_path, *ELEMENTS, bad).read_text(), "joint 'shoulder'", "'elbow'")


def test_loader_errors_name_the_file(tmp_path, panda_text):
    """The checks after the strict read (a moving link without <inertial>) name the file too."""
    start = panda_text.index("<inertial>", panda_text.index('<link name="panda_link3">'))
    end = panda_text.index("</inertial>", start) + len("</inertial>")
    message = raises(tmp_path, panda_text[:start] + panda_text[end:], "'panda_link3'", "<inertial>")
    assert str(tmp_path / "robot.urdf") in message


def test_unnamed_link(tmp_path):
    raises(tmp_path, write_urdf(tmp_path, link("base"), "<link/>").read_text(), "<link>", "'name'")


# ---------------------------------------------------------------------------------------------
# the dtype rule: JAX's default float, no warnings

def test_default_dtype_without_warnings():
    path = jaxsoa.io.example_robot_urdf("panda")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model64 = jaxsoa.load_urdf(path)                      # the suite runs with jax_enable_x64
        with jax.enable_x64(False):
            model32 = jaxsoa.load_urdf(path)
    assert not caught, [str(w.message) for w in caught]
    assert model64.dtype == jnp.float64 and model32.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(model32.inertia_com), np.asarray(model64.inertia_com), rtol=1e-6)
    assert_models_equal(model64, jaxsoa.load_urdf(path, dtype=jnp.float64))


# ---------------------------------------------------------------------------------------------
# fuzz: random corruptions of the Panda URDF

# Deleting <origin>, <axis> or the <inertial> of a link not on a moving joint writes a different,
# valid robot (their defaults are part of the format): not a corruption; their numbers are
# corrupted instead. Everything else below either breaks the file or changes nothing a Model holds.
_DEFAULTED = ("origin", "axis")
_NUMBER = re.compile(r"^\s*-?[0-9.eE+-]+(\s+-?[0-9.eE+-]+)*\s*$")
_JUNK = ("nan", "inf", "-inf", "abc", "", "1.0.0", "0x10", "1e999", "1 2")


def _moving_children(root):
    return {j.find("child").get("link") for j in root.findall("joint") if j.get("type") != "fixed"}


def _corrupt(text, rng):
    """(kind, corrupted text) of one random corruption."""
    kind = rng.choice(["delete_element", "duplicate_element", "delete_tag", "truncate", "bad_number",
                       "rename_reference", "swap_tags"])
    if kind == "truncate":
        return kind, text[:rng.integers(0, len(text.rstrip()))]
    if kind in ("delete_tag", "swap_tags"):               # text level: tags of non-empty elements
        tags = [m for m in re.finditer(r"<(/?)([A-Za-z_][\w:.-]*)[^<>]*?(/?)>", text) if not m.group(3)]
        if kind == "delete_tag":
            m = tags[rng.integers(len(tags))]
            return kind, text[:m.start()] + text[m.end():]
        starts = [m for m in tags if not m.group(1)]
        while True:
            a, b = (starts[i] for i in rng.choice(len(starts), 2, replace=False))
            if a.group(2) != b.group(2):
                break
        a, b = sorted((a, b), key=lambda m: m.start())
        swap = lambda m, name: m.group(0).replace(m.group(2), name, 1)  # noqa: E731
        return kind, (text[:a.start()] + swap(a, b.group(2)) + text[a.end():b.start()] + swap(b, a.group(2))
                      + text[b.end():])
    root = etree.fromstring(text.encode())
    moving = _moving_children(root)
    elements = [e for e in root.iter() if isinstance(e.tag, str) and e is not root]
    if kind == "delete_element":
        elements = [e for e in elements if e.tag not in _DEFAULTED
                    and not (e.tag == "inertial" and e.getparent().get("name") not in moving)]
        victim = elements[rng.integers(len(elements))]
        victim.getparent().remove(victim)
    elif kind == "duplicate_element":
        victim = elements[rng.integers(len(elements))]
        victim.addnext(copy.deepcopy(victim))
    elif kind == "bad_number":
        fields = [(e, a) for e in elements for a, v in e.attrib.items() if _NUMBER.match(v)]
        e, a = fields[rng.integers(len(fields))]
        tokens = e.get(a).split()
        tokens[rng.integers(len(tokens))] = str(rng.choice(_JUNK))
        e.set(a, " ".join(tokens))
    else:                                                  # rename a reference to a name nobody has
        refs = ([(e, "link") for e in elements if e.tag in ("parent", "child") and e.getparent().tag == "joint"]
                + [(e, "name") for e in root.findall("link")] + [(e, "joint") for e in root.iter("mimic")])
        e, a = refs[rng.integers(len(refs))]
        e.set(a, e.get(a) + "_renamed")
    return kind, etree.tostring(root, encoding="unicode")


def test_fuzz_corruptions_load_the_same_robot_or_raise(tmp_path, panda_text, panda_model):
    rng = np.random.default_rng(20)
    outcomes = {}
    for trial in range(300):
        kind, text = _corrupt(panda_text, rng)
        path = tmp_path / f"corrupt_{trial}.urdf"
        path.write_text(text)
        try:
            model = jaxsoa.load_urdf(path)
        except ValueError as err:
            assert str(path) in str(err)
            outcome = "raised"
        else:
            assert_models_equal(model, panda_model)        # never a different robot
            outcome = "same"
        outcomes.setdefault(kind, {"raised": 0, "same": 0})[outcome] += 1
    assert len(outcomes) == 7, outcomes
    for kind in ("delete_tag", "truncate", "swap_tags", "rename_reference"):
        assert outcomes[kind]["same"] == 0, outcomes                     # always invalid
    assert sum(o["raised"] for o in outcomes.values()) > 200, outcomes
