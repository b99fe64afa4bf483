"""`load_mjcf` against MuJoCo on the same compiled model, float64, contacts, limits, friction loss
and actuation disabled (`mjDSBL_CONSTRAINT | mjDSBL_ACTUATION`; springs, dampers and gravity on).

At `N_STATES` random states of each model (hinge / slide angles uniform in ±π around qpos0,
uniform random quaternions, free positions around qpos0 ± 1, qvel / qacc / qfrc standard normal):

* mass matrix: MuJoCo's `mj_fullM` (armature included) against Tᵀ crba(q) T (`Model.armature`
  included), with T = ∂v/∂qvel the velocity map of `from_mujoco`;
* inverse dynamics: `mj_inverse`'s qfrc_inverse against rnea (armature included) through the force
  and acceleration maps, minus `passive_force`; passive forces against `qfrc_passive`;
* forward dynamics: `mj_forward`'s qacc against the dense solve and against `aba` (the recursive
  method), both with the model's armature.

Models: dm_control's suite (`pip install dm_control`: the XML files only are read, its Python
package is never imported) as shipped, plus quadruped and manipulator with their tendons,
equality constraints and actuators deleted through `mujoco.MjSpec` (as shipped they are rejected,
tested below); hand-written snippets for each joint type, multi-joint bodies, joint anchors and
refs, defaults classes, childclass, inertiafromgeom, every orientation form and both angle units.

Error measure: max |x − ref| / max(1, max |ref|) over all states and entries (`relative_error`).
"""

import contextlib
import importlib.util
import os
import pathlib
import sys

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest
from jax.test_util import check_grads

import jaxsoa
from jaxsoa.io import (
    acceleration_from_mujoco,
    acceleration_to_mujoco,
    force_from_mujoco,
    force_to_mujoco,
    from_mujoco,
    mjcf_joint_properties,
    passive_force,
    to_mujoco,
)
from jaxsoa.multibody.joints import JointType
from tests.helpers.trees import relative_error

N_STATES = 20
# float64 recursions over ≤ 25 links agree with MuJoCo's to ≤ 1e-11 (measured: M and inverse
# dynamics ≤ 5e-15, forward ≤ 9e-12, humanoid through aba); 1e-9 leaves room for the conditioning
# of M without hiding a modelling error (a wrong frame or convention gives O(1)).
REL_TOL = 1e-9
# host arithmetic on the same numbers (a sum of placements, an eigendecomposition rebuilt): 1e-12
EXACT = 1e-12
DATA = pathlib.Path(__file__).parents[1] / "data" / "mjcf"
_spec = importlib.util.find_spec("dm_control")
SUITE = pathlib.Path(_spec.submodule_search_locations[0]) / "suite" if _spec else None
SUITE_MODELS = ("humanoid", "cheetah", "walker", "hopper", "finger", "reacher", "acrobot", "cartpole")
STRIPPED_MODELS = ("quadruped", "manipulator")                 # tendons / equalities deleted


@contextlib.contextmanager
def _in(folder):
    """Run in `folder`: MuJoCo writes its warnings (cheetah's deprecated settotalmass) to
    MUJOCO_LOG.TXT in the working directory."""
    here = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(here)


def _suite_model(name, tmp):
    if SUITE is None:
        pytest.fail("dm_control (a dev dependency) is not installed: pip install -e '.[dev]'")
    with _in(tmp):
        if name not in STRIPPED_MODELS:
            return mujoco.MjModel.from_xml_path(str(SUITE / f"{name}.xml"))
        spec = mujoco.MjSpec.from_file(str(SUITE / f"{name}.xml"))
        for collection in ("sensors", "actuators", "tendons", "equalities", "excludes"):
            for element in list(getattr(spec, collection)):
                spec.delete(element)
        return spec.compile()


def _without_constraints(m):
    m.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONSTRAINT) | int(mujoco.mjtDisableBit.mjDSBL_ACTUATION)
    return m


def random_mujoco_states(m, rng, n):
    """(qpos, qvel, qacc, qfrc) of n random MuJoCo states, (n, nq) and (n, nv) x3."""
    qpos = np.tile(m.qpos0, (n, 1))
    for j in range(m.njnt):
        a, kind = m.jnt_qposadr[j], m.jnt_type[j]
        if kind == mujoco.mjtJoint.mjJNT_FREE:
            qpos[:, a:a + 3] += rng.uniform(-1, 1, (n, 3))
            a += 3
        if kind in (mujoco.mjtJoint.mjJNT_FREE, mujoco.mjtJoint.mjJNT_BALL):
            quat = rng.normal(size=(n, 4))
            qpos[:, a:a + 4] = quat / np.linalg.norm(quat, axis=1, keepdims=True)
        else:
            qpos[:, a] += rng.uniform(-np.pi, np.pi, n)
    return (qpos, *rng.normal(size=(3, n, m.nv)))


def mujoco_terms(m, states):
    """MuJoCo's M, qfrc_inverse, qfrc_passive and qacc (twice: for the dense and the recursive path)."""
    d = mujoco.MjData(m)
    out = {key: [] for key in ("M", "inverse", "passive", "forward", "forward_aba")}
    for qpos, qvel, qacc, qfrc in zip(*states, strict=True):
        d.qpos[:], d.qvel[:], d.qfrc_applied[:] = qpos, qvel, qfrc
        mujoco.mj_forward(m, d)
        M = np.zeros((m.nv, m.nv))
        mujoco.mj_fullM(m, d, M)
        out["M"].append(M)
        out["forward"].append(d.qacc.copy())
        out["forward_aba"].append(d.qacc.copy())
        out["passive"].append(d.qfrc_passive.copy())
        d.qacc[:] = qacc
        mujoco.mj_inverse(m, d)
        out["inverse"].append(d.qfrc_inverse.copy())
    return {key: np.stack(x) for key, x in out.items()}


def _jaxsoa_terms(model, joints, qpos, qvel, qacc, qfrc):
    """The same quantities from jaxsoa for one state (MuJoCo's coordinates)."""
    q, v = from_mujoco(model, qpos, qvel)
    T = jax.jacobian(lambda u: from_mujoco(model, qpos, u)[1])(qvel)               # v = T qvel
    M = T.T @ jaxsoa.crba(model, q) @ T                                           # M_mj = Tᵀ (M + A) T
    passive = passive_force(model, joints, q, v)
    a = acceleration_from_mujoco(model, qpos, qvel, qacc)
    # qfrc_inverse = M_mj qacc + bias − passive (armature on the joints' own rates, where T = 1)
    inverse = force_to_mujoco(model, q, jaxsoa.rnea(model, q, v, a) - passive)
    forward = jnp.linalg.solve(M, qfrc - (inverse - M @ qacc))                    # M qacc = qfrc − bias + passive
    forward_aba = acceleration_to_mujoco(model, q, v, jaxsoa.aba(model, q, v, force_from_mujoco(model, qpos, qfrc)
                                                                 + passive))
    return dict(M=M, inverse=inverse, passive=force_to_mujoco(model, q, passive), forward=forward,
                forward_aba=forward_aba)


_batched_terms = jax.jit(jax.vmap(_jaxsoa_terms, in_axes=(None, None, 0, 0, 0, 0)))


def assert_matches_mujoco(m, label, seed=0):
    """Load `m`, compare every term at N_STATES states; returns the loaded model."""
    m = _without_constraints(m)
    model, joints = jaxsoa.load_mjcf(m, dtype=jnp.float64), mjcf_joint_properties(m, dtype=jnp.float64)
    states = random_mujoco_states(m, np.random.default_rng(seed), N_STATES)
    expected = mujoco_terms(m, states)
    got = _batched_terms(model, joints, *map(jnp.asarray, states))
    errors = {key: relative_error(got[key], expected[key]) for key in expected}
    print(label, {key: f"{e:.1e}" for key, e in errors.items()})    # shown with `pytest -s` (for reports)
    assert all(e <= REL_TOL for e in errors.values()), errors
    return model


def assert_kinematics_match_mujoco(m, model, seed=1):
    """Each body's centre of mass and orientation in the world against MuJoCo's xipos / xmat."""
    d = mujoco.MjData(m)
    qpos = random_mujoco_states(m, np.random.default_rng(seed), 1)[0][0]
    d.qpos[:] = qpos
    mujoco.mj_kinematics(m, d)
    R, p = jaxsoa.forward_kinematics(model, from_mujoco(model, jnp.asarray(qpos), jnp.zeros(m.nv))[0])
    for b in range(1, m.nbody):
        k = model.link_names.index(m.body(b).name)
        com = p[k] + R[k] @ model.com[k, 0]
        np.testing.assert_allclose(np.asarray(R[k]), d.xmat[b].reshape(3, 3), rtol=0, atol=EXACT)
        np.testing.assert_allclose(np.asarray(com), d.xipos[b], rtol=0, atol=EXACT)


# --------------------------------------------------------------------------------------------- #
# hand-written snippets
# --------------------------------------------------------------------------------------------- #

JOINTS = """<mujoco model="joints">
  <option gravity="0.3 -0.2 -9.81"/>
  <worldbody>
    <body name="base" pos="0.1 0.2 1.0" quat="0.9 0.1 0.3 -0.2">
      <freejoint name="root"/>
      <geom type="box" size="0.2 0.15 0.1" mass="3"/>
      <body name="ball_link" pos="0.2 0 0.1" euler="0.3 -0.2 0.5">
        <joint name="shoulder" type="ball" pos="0.01 0.02 -0.03" damping="0.4" armature="0.02"/>
        <geom type="capsule" fromto="0 0 0 0.3 0.1 0" size="0.04"/>
        <body name="two_hinges" pos="0.3 0.1 0" axisangle="0 1 1 0.7">
          <joint name="elbow_a" type="hinge" axis="0 1 0" pos="0.05 0 0" ref="0.3" stiffness="5" springref="0.1"/>
          <joint name="elbow_b" type="hinge" axis="1 1 0" pos="0 0.04 0.02" damping="0.3" armature="0.1"/>
          <geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.035"/>
          <body name="slider" pos="0 0 -0.3">
            <joint name="slide" type="slide" axis="0 0.6 0.8" ref="0.05" pos="0.1 0 0" stiffness="20"/>
            <joint name="wrist" type="hinge" axis="0 0 1" pos="0 0.02 0"/>
            <inertial pos="0.02 0.01 0" quat="0.7 0.1 0.7 0" mass="0.4" diaginertia="0.003 0.002 0.0015"/>
          </body>
        </body>
      </body>
      <body name="ball_slide" pos="-0.2 0 0">
        <joint name="hip_ball" type="ball"/>
        <joint name="hip_slide" type="slide" axis="1 0 0" pos="0 0 0.05" damping="1"/>
        <geom type="ellipsoid" size="0.05 0.08 0.12" pos="0 0 -0.1"/>
      </body>
    </body>
  </worldbody>
</mujoco>"""

DEFAULTS = """<mujoco model="defaults">
  <compiler angle="{angle}" inertiafromgeom="true" eulerseq="zyx"/>
  <default>
    <joint damping="0.1" armature="0.02"/>
    <geom density="800"/>
    <default class="leg">
      <joint type="hinge" axis="0 1 0" pos="0 0 0.05" range="{r60}" stiffness="2" springref="{r10}"/>
      <geom type="capsule" size="0.03" density="1200"/>
      <default class="knee"><joint axis="1 0 0" ref="{r15}"/></default>
    </default>
    <default class="slider"><joint type="slide" axis="0 0 1"/></default>
  </default>
  <worldbody>
    <body name="table" pos="0 0 0.5"><geom type="box" size="0.3 0.3 0.02"/></body>
    <body name="torso" pos="0 0 1" euler="{r10} {r20} {r30}">
      <joint name="lift" class="slider"/>
      <geom type="box" size="0.1 0.2 0.05" euler="{r5} 0 {r15}"/>
      <body name="thigh" childclass="leg" pos="0.1 0 0" axisangle="1 1 0 {r30}">
        <joint name="hip"/>
        <geom fromto="0 0 0 0 0 -0.3"/>
        <body name="shin" pos="0 0 -0.3" xyaxes="0 1 0 -1 0 0.2">
          <joint name="knee" class="knee"/>
          <geom fromto="0 0 0 0.05 0 -0.25"/>
          <body name="foot" pos="0 0 -0.25" zaxis="1 0 1">
            <joint name="ankle"/>
            <geom type="box" size="0.05 0.02 0.01" quat="0.9 0 0.2 0.1"/>
            <geom type="cylinder" size="0.02 0.04" pos="0.03 0 0" axisangle="0 1 0 {r90}"/>
          </body>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>"""


def defaults_xml(angle):
    """The DEFAULTS snippet with its angles written in `angle` units ('degree' or 'radian')."""
    scale = 1.0 if angle == "degree" else np.pi / 180
    values = {f"r{a}": f"{a * scale:.17g}" for a in (5, 10, 15, 20, 30, 60, 90)}
    values["r60"] = f"{-60 * scale:.17g} {60 * scale:.17g}"
    return DEFAULTS.format(angle=angle, **values)


SNIPPETS = {"joints": JOINTS, "defaults_degree": defaults_xml("degree"), "defaults_radian": defaults_xml("radian")}


@pytest.mark.slow
@pytest.mark.parametrize("name", [*SNIPPETS, "space_arm"])
def test_snippet_dynamics_match_mujoco(name):
    source = str(DATA / "space_arm_7dof.xml") if name == "space_arm" else SNIPPETS[name]
    m = mujoco.MjModel.from_xml_path(source) if name == "space_arm" else mujoco.MjModel.from_xml_string(source)
    assert_matches_mujoco(m, name)


@pytest.mark.parametrize("name", SNIPPETS)
def test_snippet_kinematics_match_mujoco(name):
    m = mujoco.MjModel.from_xml_string(SNIPPETS[name])
    assert_kinematics_match_mujoco(m, jaxsoa.load_mjcf(m, dtype=jnp.float64))


def test_body_velocities_match_mujoco():
    """Every body's angular velocity (body frame) and centre-of-mass velocity (world frame) against
    central differences of MuJoCo's own kinematics (`mj_integratePos`, `mj_kinematics`): pins the
    ball and free-joint velocity conventions of `from_mujoco`."""
    m = mujoco.MjModel.from_xml_string(JOINTS)
    model = jaxsoa.load_mjcf(m, dtype=jnp.float64)
    qpos, qvel = (x[0] for x in random_mujoco_states(m, np.random.default_rng(2), 1)[:2])
    h = 1e-6

    def pose(t):
        d = mujoco.MjData(m)
        d.qpos[:] = qpos
        mujoco.mj_integratePos(m, d.qpos, qvel, t)
        mujoco.mj_kinematics(m, d)
        return d.xipos.copy(), d.xmat.reshape(-1, 3, 3).copy()

    (c_plus, R_plus), (c_minus, R_minus), (_, R_mj) = pose(h), pose(-h), pose(0.0)
    com_rate = (c_plus - c_minus) / (2 * h)
    omega_hat = np.einsum("bji,bjk->bik", R_mj, (R_plus - R_minus) / (2 * h))        # Rᵀ Ṙ = ω̂ (body frame)
    q, v = from_mujoco(model, jnp.asarray(qpos), jnp.asarray(qvel))
    R, _ = jaxsoa.forward_kinematics(model, q)
    twist = jaxsoa.link_velocities(model, q, v)                     # [ω; v] of each link, link frame
    for b in range(1, m.nbody):
        k = model.link_names.index(m.body(b).name)
        omega, v_origin = twist[k, :3], twist[k, 3:]
        v_com = R[k] @ (v_origin + jnp.cross(omega, model.com[k, 0]))            # v_c = R (v + ω × c)
        # central differences: O(h²) truncation plus rounding ~1e-16 / h
        np.testing.assert_allclose(np.asarray(omega), omega_hat[b][[2, 0, 1], [1, 2, 0]], rtol=0, atol=1e-7)
        np.testing.assert_allclose(np.asarray(v_com), com_rate[b], rtol=0, atol=1e-7)


def test_joint_snippet_layout():
    """Every joint type, a chain of massless links for multi-joint bodies, the body name on the last."""
    model = jaxsoa.load_mjcf(JOINTS, dtype=jnp.float64)
    F, S, R, P = JointType.FREE, JointType.SPHERICAL, JointType.REVOLUTE, JointType.PRISMATIC
    assert model.joint_types == (F, S, R, R, P, R, S, P)
    assert model.link_names == ("base", "ball_link", "two_hinges:elbow_a", "two_hinges", "slider:slide", "slider",
                                "ball_slide:hip_ball", "ball_slide")
    assert model.joint_names == ("root", "shoulder", "elbow_a", "elbow_b", "slide", "wrist", "hip_ball", "hip_slide")
    np.testing.assert_array_equal(model.parent, [-1, 0, 1, 2, 3, 4, 0, 6])
    np.testing.assert_array_equal(np.asarray(model.mass[[2, 4, 6], 0]), 0.0)
    np.testing.assert_allclose(np.asarray(model.gravity), [0.3, -0.2, -9.81], rtol=0, atol=0)


def test_defaults_snippet_layout_and_angle_units():
    """Two bodies on the world: the world is link 0. Degrees and radians load the same model."""
    degree, radian = (jaxsoa.load_mjcf(defaults_xml(a), dtype=jnp.float64) for a in ("degree", "radian"))
    assert degree.link_names == ("world", "table", "torso", "thigh", "shin", "foot")
    assert degree.joint_types[:2] == (JointType.FIXED, JointType.FIXED)
    assert degree.link_joint_names == ("world", "table_weld", "lift", "hip", "knee", "ankle")
    for a, b in zip(jax.tree_util.tree_leaves(degree), jax.tree_util.tree_leaves(radian), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=0, atol=EXACT)
    joints = mjcf_joint_properties(defaults_xml("degree"), dtype=jnp.float64)
    np.testing.assert_allclose(np.asarray(joints.stiffness), [0, 2, 2, 2])           # the leg class
    np.testing.assert_allclose(np.asarray(joints.spring_reference)[1:], np.deg2rad(10), rtol=1e-15)
    np.testing.assert_allclose(np.asarray(joints.damping), 0.1)                        # the top default


def test_include(tmp_path):
    """`<include>` resolves relative to the file (MuJoCo's compiler does it)."""
    (tmp_path / "arm.xml").write_text('<mujoco><body name="arm" pos="0 0 0.1"><joint name="j" axis="0 1 0"/>'
                                      '<geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.05"/></body></mujoco>')
    (tmp_path / "main.xml").write_text('<mujoco><worldbody><body name="base"><geom size="0.1"/>'
                                       '<include file="arm.xml"/></body></worldbody></mujoco>')
    model = jaxsoa.load_mjcf(tmp_path / "main.xml")
    assert model.link_names == ("base", "arm") and model.joint_names == ("j",)


# --------------------------------------------------------------------------------------------- #
# dm_control suite
# --------------------------------------------------------------------------------------------- #

@pytest.mark.slow
@pytest.mark.parametrize("name", SUITE_MODELS + STRIPPED_MODELS)
def test_suite_model_matches_mujoco(name, tmp_path):
    m = _suite_model(name, tmp_path)
    model = assert_matches_mujoco(m, name)
    assert_kinematics_match_mujoco(m, model)
    assert model.nq == m.nq and model.nv == m.nv
    assert set(model.link_names) >= {m.body(b).name for b in range(1, m.nbody)}


MJX_SCENES = ("humanoid/02_humanoids.xml", "shadow_hand/scene_right.xml", "barkour_v0/assets/barkour_v0_mjx.xml")


@pytest.mark.parametrize("name", MJX_SCENES)
def test_mjx_scene_matches_mujoco(name):
    """Scenes of the test data that ship with MuJoCo's MJX: two free humanoids on the world body, a hand
    on a table and a quadruped. The free joints hang on the fixed world link, which the batch-last ABA
    (20 states, a traced model) used to NaN-mark (hidden then by a `max` over the errors)."""
    path = pathlib.Path(mujoco.__file__).parent / "mjx" / "test_data" / name
    if not path.is_file():
        pytest.skip(f"this MuJoCo release ships no {name}")
    m = mujoco.MjModel.from_xml_path(str(path))
    model = assert_matches_mujoco(m, name)
    assert model.nq == m.nq and model.nv == m.nv


@pytest.mark.parametrize("name, element", [("quadruped", "tendon 'coupling_front_left'"),
                                           ("manipulator", "tendon 'grasp'")])
def test_suite_model_with_tendons_is_rejected(name, element, tmp_path):
    if SUITE is None:
        pytest.fail("dm_control (a dev dependency) is not installed: pip install -e '.[dev]'")
    with pytest.raises(ValueError, match=element):
        with _in(tmp_path):
            jaxsoa.load_mjcf(SUITE / f"{name}.xml")


# --------------------------------------------------------------------------------------------- #
# state maps
# --------------------------------------------------------------------------------------------- #

@pytest.fixture(scope="module")
def joints_model():
    m = mujoco.MjModel.from_xml_string(JOINTS)
    return m, jaxsoa.load_mjcf(m, dtype=jnp.float64)


def test_state_maps_round_trip(joints_model):
    """to ∘ from is the identity on states, forces and accelerations, over a batch (..., n) and
    per sample alike; forces keep their power (qfrc · qvel = τ · v)."""
    m, model = joints_model
    qpos, qvel, qacc, qfrc = map(jnp.asarray, random_mujoco_states(m, np.random.default_rng(3), 5))
    q, v = from_mujoco(model, qpos, qvel)
    for got, want in zip(to_mujoco(model, q, v), (qpos, qvel), strict=True):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=0, atol=EXACT)
    tau = force_from_mujoco(model, qpos, qfrc)
    np.testing.assert_allclose(np.asarray(force_to_mujoco(model, q, tau)), np.asarray(qfrc), rtol=0, atol=EXACT)
    np.testing.assert_allclose(np.asarray(jnp.sum(tau * v, -1)), np.asarray(jnp.sum(qfrc * qvel, -1)),
                               rtol=0, atol=EXACT)
    a = acceleration_from_mujoco(model, qpos, qvel, qacc)
    np.testing.assert_allclose(np.asarray(acceleration_to_mujoco(model, q, v, a)), np.asarray(qacc),
                               rtol=0, atol=EXACT)
    per_sample = jax.vmap(from_mujoco, in_axes=(None, 0, 0))(model, qpos, qvel)
    for got, want in zip(per_sample, (q, v), strict=True):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=0, atol=EXACT)
    # the quaternions: MuJoCo's (w, x, y, z) at qpos[3:7] (free) and [7:11] (ball) -> (x, y, z, w)
    np.testing.assert_array_equal(np.asarray(q[:, 3:7]), np.asarray(qpos[:, [4, 5, 6, 3]]))
    np.testing.assert_array_equal(np.asarray(q[:, 7:11]), np.asarray(qpos[:, [8, 9, 10, 7]]))


def test_acceleration_map_is_the_derivative_of_the_velocity_map(joints_model):
    """a = dv/dt along a trajectory: finite differences of from_mujoco's v along MuJoCo's own
    integration (qvel ← qvel + h qacc, qpos ← qpos ⊕ h qvel) equal acceleration_from_mujoco."""
    m, model = joints_model
    qpos, qvel, qacc, _ = (x[0] for x in random_mujoco_states(m, np.random.default_rng(4), 1))
    h = 1e-6

    def v_at(t):
        qp = qpos.copy()
        mujoco.mj_integratePos(m, qp, qvel + t * qacc / 2, t)      # exact to O(t²) for constant qacc
        return np.asarray(from_mujoco(model, jnp.asarray(qp), jnp.asarray(qvel + t * qacc))[1])

    fd = (v_at(h) - v_at(-h)) / (2 * h)
    a = acceleration_from_mujoco(model, jnp.asarray(qpos), jnp.asarray(qvel), jnp.asarray(qacc))
    # central differences: O(h²) truncation plus rounding ~1e-16 / h
    np.testing.assert_allclose(np.asarray(a), fd, rtol=0, atol=1e-7)


@pytest.mark.slow
def test_gradients_through_a_loaded_model(joints_model):
    """jax.grad through from_mujoco, aba and acceleration_to_mujoco (forward and reverse mode)."""
    m, model = joints_model
    qpos, qvel, _, qfrc = (jnp.asarray(x[0]) for x in random_mujoco_states(m, np.random.default_rng(5), 1))

    def qacc(qpos, qvel, qfrc):
        q, v = from_mujoco(model, qpos, qvel)
        return acceleration_to_mujoco(model, q, v, jaxsoa.aba(model, q, v, force_from_mujoco(model, qpos, qfrc)))

    # check_grads' float64 finite differences (eps 1e-6 for order 1) agree to its default 1e-5
    check_grads(jax.jit(qacc), (qpos, qvel, qfrc), order=1, modes=("fwd", "rev"))


# --------------------------------------------------------------------------------------------- #
# sources, options, floating base, the space arm
# --------------------------------------------------------------------------------------------- #

def _assert_same_model(a, b, tol=EXACT):
    assert (a.joint_types, a.link_names, a.link_joint_names) == (b.joint_types, b.link_names, b.link_joint_names)
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=tol, atol=tol)


def test_path_string_and_mjmodel_load_the_same(tmp_path):
    path = tmp_path / "joints.xml"
    path.write_text(JOINTS)
    models = [jaxsoa.load_mjcf(s, dtype=jnp.float64) for s in (path, str(path), JOINTS,
                                                               mujoco.MjModel.from_xml_string(JOINTS))]
    for other in models[1:]:
        _assert_same_model(models[0], other, tol=0)


def test_dtype_and_disabled_flags():
    m = mujoco.MjModel.from_xml_string(JOINTS)
    assert jaxsoa.load_mjcf(m, dtype=jnp.float32).mass.dtype == jnp.float32
    m.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_GRAVITY) | int(mujoco.mjtDisableBit.mjDSBL_DAMPER)
    np.testing.assert_array_equal(np.asarray(jaxsoa.load_mjcf(m).gravity), 0.0)
    joints = mjcf_joint_properties(m)
    np.testing.assert_array_equal(np.asarray(joints.damping), 0.0)
    assert np.asarray(joints.stiffness).any() and np.asarray(joints.armature).any()


def test_space_arm_mjcf_equals_its_urdf():
    """tests/data/mjcf/space_arm_7dof.xml is generated from the parameter table of
    sims/space_arm_7dof.py and loads to the URDF model, hub floating or welded."""
    from sims import space_arm_7dof

    path = DATA / "space_arm_7dof.xml"
    assert path.read_text() == space_arm_7dof.mjcf_text(), "regenerate the file: see its first line"
    for floating in (True, False):
        mjcf = jaxsoa.load_mjcf(path, dtype=jnp.float64, floating_base=None if floating else False)
        _assert_same_model(mjcf, space_arm_7dof.build(floating, dtype=jnp.float64))


def test_floating_base_adds_or_welds_the_root_free_joint():
    fixed = JOINTS.replace('<freejoint name="root"/>', "")
    added = jaxsoa.load_mjcf(fixed, dtype=jnp.float64, floating_base=True)
    written = jaxsoa.load_mjcf(JOINTS.replace('name="root"', 'name="root_joint"'), dtype=jnp.float64)
    _assert_same_model(added, written, tol=0)
    joints = mjcf_joint_properties(fixed, floating_base=True)
    np.testing.assert_array_equal(np.asarray(joints.damping[:6]), 0.0)
    assert joints.damping.shape == (added.nv,)
    welded = jaxsoa.load_mjcf(JOINTS, dtype=jnp.float64, floating_base=False)
    assert welded.joint_types[0] == JointType.FIXED and welded.nv == added.nv - 6
    assert mjcf_joint_properties(JOINTS, floating_base=False).damping.shape == (welded.nv,)
    np.testing.assert_allclose(np.asarray(welded.placement_translation[0, 0]), [0.1, 0.2, 1.0], rtol=0, atol=0)


def test_floating_base_needs_one_top_level_body():
    with pytest.raises(ValueError, match="exactly one body on the world"):
        jaxsoa.load_mjcf(defaults_xml("degree"), floating_base=True)
    hinge_root = '<mujoco><worldbody><body name="b"><joint name="j"/><geom size="0.1"/></body></worldbody></mujoco>'
    with pytest.raises(ValueError, match="body 'b'"):
        jaxsoa.load_mjcf(hinge_root, floating_base=True)


# --------------------------------------------------------------------------------------------- #
# errors
# --------------------------------------------------------------------------------------------- #

def _body(inner="", body="", top=""):
    return (f'<mujoco>{top}<worldbody><body name="b" {body}><joint name="j" {inner}/><geom size="0.1"/>'
            '<body name="c" pos="0 0 0.3"><joint name="k"/><geom size="0.1"/></body></body></worldbody></mujoco>')


def test_malformed_mjcf_raises_with_mujocos_message(tmp_path):
    with pytest.raises(ValueError, match=r"MuJoCo's compiler.*XML") as info:
        jaxsoa.load_mjcf("<mujoco><worldbody><body></worldbody>")
    assert "Line number=1" in str(info.value)
    with pytest.raises(ValueError, match="invalid keyword: 'bogus'"):
        jaxsoa.load_mjcf(_body('type="bogus"'))
    with pytest.raises(ValueError, match="does not exist"):
        jaxsoa.load_mjcf(tmp_path / "nowhere.xml")


UNSUPPORTED = {
    "tendon": (_body(top='<tendon><fixed name="t"><joint joint="j" coef="1"/></fixed></tendon>'), "tendon 't'"),
    "equality": (_body(top='<equality><joint name="e" joint1="j" joint2="k"/></equality>'), "equality 'e'"),
    "actuator_dynamics": (_body(top='<actuator><general name="act" joint="j" dyntype="filter"/></actuator>'),
                          "actuator 'act'"),
    "gravcomp": (_body(body='gravcomp="1"'), "body 'b'"),
    "fluid": (_body(top='<option density="1.2"/>'), "density"),
}


@pytest.mark.parametrize("xml, element", UNSUPPORTED.values(), ids=UNSUPPORTED.keys())
def test_unsupported_elements_are_rejected(xml, element):
    for load in (jaxsoa.load_mjcf, mjcf_joint_properties):
        with pytest.raises(ValueError, match=element):
            load(xml)


def test_unsupported_joint_properties_are_rejected():
    ball_spring = _body('type="ball" stiffness="2"')
    jaxsoa.load_mjcf(ball_spring)                                   # the tree loads
    with pytest.raises(ValueError, match=r"joint 'j' \(ball\): stiffness"):
        mjcf_joint_properties(ball_spring)
    with pytest.raises(ValueError, match=r"joint 'j' \(free\): armature"):
        mjcf_joint_properties(_body('type="free" armature="0.1"').replace('<joint name="k"/>', ""))
    m = mujoco.MjModel.from_xml_string(JOINTS)
    m.dof_damping[0] = 1.0                                          # anisotropic: only an MjModel edit does it
    with pytest.raises(ValueError, match="joint 'root' \\(free\\): damping"):
        mjcf_joint_properties(m)


def test_missing_mujoco_raises_import_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "mujoco", None)               # `import mujoco` now raises ImportError
    with pytest.raises(ImportError, match=r"jaxsoa\[mjcf\]"):
        jaxsoa.load_mjcf(JOINTS)


def test_jaxsoa_imports_without_mujoco():
    """mujoco is an optional extra: `import jaxsoa` (and jaxsoa.io) never imports it."""
    import subprocess

    code = "import sys; import jaxsoa, jaxsoa.io.mjcf; print('mujoco' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          cwd=pathlib.Path(__file__).parents[2])
    assert proc.returncode == 0 and proc.stdout.split()[-1] == "False", proc.stderr[-2000:]
