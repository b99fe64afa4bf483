"""The revolute-unbounded joint (`JointType.REVOLUTE_UNBOUNDED`, Pinocchio's `JointModelRevoluteUnbounded`:
q = (cos θ, sin θ), v = θ̇ about the joint axis) against Pinocchio 4.1 and closed forms.

Systems: a random 7-link tree mixing unbounded (one about a coordinate axis: Pinocchio's `JointModelRUBY`; the
others unaligned), revolute, prismatic, planar and welded links (`tests/helpers/trees.py`, built identically in
both engines); a URDF chain with three `continuous` joints loaded by `jaxsoa.load_urdf(..., continuous="unbounded")`
and `pin.buildModelFromUrdf`; a pendulum (point mass m at distance l from the axis).

Tolerances: float64 on O(1) states of ≤ 7 links: RNEA, ABA, CRBA, kinematics and the configuration-space maps agree
with Pinocchio to ~1e-15, asserted at 1e-11 (a convention error — the direction of the rotation, the (cos, sin)
order, a body vs world twist — is O(1)). The pendulum's θ̈ = −(g/l) sin θ holds to the round-off of values of
size g/l ≈ 20 (asserted 1e-13 × g/l). RK4 on a pendulum turning over the top (through θ = ±π) against its closed form
θ = 2 am(Ω t / 2 | k²), k = 2 √(g/l) / Ω (SciPy's `ellipj`), Ω = 10 rad/s: error O(dt⁴) (measured 5.5e-7 at
dt = 0.01 over 1 s, 3.4e-8 at dt = 0.005: ratio 16.2; asserted ≤ 2e-6 and ratio > 12); energy drift 4.8e-9
relative over 1 s at dt = 0.005 (asserted ≤ 5e-8; a wrong sign or axis is O(1)); |(cos θ, sin θ)| stays 1 to
2.2e-16 (asserted 1e-14: `integrate` renormalises every step, so there is no drift to bound). float32 against
Pinocchio's float64: measured RNEA 1.4e-7, ABA 1.2e-7, CRBA 4.2e-7 (asserted < 1e-5).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pinocchio as pin
import pytest
import scipy.special
from jax.experimental import checkify

import jaxsoa
from jaxsoa.algorithms import batch_last_crba, batch_last_frames
from jaxsoa.multibody.checks import check_configuration
from jaxsoa.multibody.config_space import dexp_inv
from jaxsoa.multibody.joints import JointType
from tests.algorithms.test_batch_last import assert_adjoint_gradients_equal_plain_autodiff
from tests.algorithms.test_batch_last_three_column import _forbid_the_per_sample_path
from tests.algorithms.test_kinematics import jaxsoa_kinematics, pinocchio_kinematics
from tests.helpers.joint_checks import (
    URDF_LIMIT,
    batch_calls,
    compare,
    configuration_space_against_pinocchio,
    pinocchio_and_jaxsoa_states,
    urdf_joint,
    urdf_link,
)
from tests.helpers.trees import (
    build_jaxsoa,
    build_pinocchio,
    coordinate_maps,
    counting,
    fext_to_pinocchio,
    jaxsoa_dynamics,
    motion_to_jaxsoa,
    pinocchio_dynamics,
    pinocchio_to_jaxsoa_dynamics,
    random_state,
    random_tree,
    relative_error,
    stack_models,
)

TOL = 1e-11
N_STATES = 6
F, R, P, PL, U = (JointType.FIXED, JointType.REVOLUTE, JointType.PRISMATIC, JointType.PLANAR,
                  JointType.REVOLUTE_UNBOUNDED)
TYPES = (U, R, U, PL, F, P, U)
ALIGNED = 6                                   # this link's unbounded joint turns about e_y (Pinocchio's RUBY)
G, MASS, LENGTH = 9.81, 2.0, 0.5              # the pendulum
REFERENCES = {"local": pin.ReferenceFrame.LOCAL, "world": pin.ReferenceFrame.WORLD,
              "local_world_aligned": pin.ReferenceFrame.LOCAL_WORLD_ALIGNED}

_dynamics = jax.jit(jax.vmap(jaxsoa_dynamics, in_axes=(None, 0, 0, 0, 0, 0)))
_kinematics = jax.jit(jax.vmap(jaxsoa_kinematics, in_axes=(None, 0, 0, 0)))


def _tree(seed=3):
    tree = random_tree(np.random.default_rng(seed), len(TYPES), link_types=TYPES)
    tree["joint_axis"][ALIGNED] = (0.0, 1.0, 0.0)
    return tree


def _pair(seed=3):
    tree = _tree(seed)
    return build_jaxsoa(tree), build_pinocchio(tree)


@pytest.fixture(scope="module")
def pair():
    """(jaxsoa model, Pinocchio model) of the random unbounded / revolute / prismatic / planar / welded tree."""
    return _pair()


@pytest.fixture(scope="module")
def states(pair):
    """N_STATES random states, Pinocchio's layout (`pin.randomConfiguration`: unbounded θ uniform in [−π, π]) and
    jaxsoa's."""
    return pinocchio_and_jaxsoa_states(pair, N_STATES)


def _continuous_urdf(tmp_path):
    """A URDF chain: continuous `hub` (axis 0 0 1: Pinocchio's RUBZ), revolute `shoulder`, continuous `wheel`
    (axis 0.3 -0.5 0.8, unnormalised: unaligned), prismatic `slide`, a welded tool, planar `puck`, continuous
    `spinner` (axis 1 0 0); no <limit> on the continuous joints (URDF needs none)."""
    link, joint, limit = urdf_link, urdf_joint, URDF_LIMIT
    body = "\n".join([
        link("base", 1.0, "0 0 0"), link("hubl", 1.2, "0.05 0 0"), link("arm", 2.0, "0.1 0 0"),
        link("rim", 1.5, "0 0.1 0.05"), link("slider", 0.7, "0 0 0.1"), link("tool", 0.3, "0.05 0 0"),
        link("disc", 0.9, "0.02 0.03 0"), link("rotor", 0.4, "0 0.02 0.01"),
        joint("hub", "continuous", "base", "hubl", "0 0 0.1", '<axis xyz="0 0 1"/>'),
        joint("shoulder", "revolute", "hubl", "arm", "0 0 0.2", f'<axis xyz="0 1 0"/>{limit}'),
        joint("wheel", "continuous", "arm", "rim", "0.3 0 0", '<axis xyz="0.3 -0.5 0.8"/><dynamics damping="0.1"/>'),
        joint("slide", "prismatic", "rim", "slider", "0 0.1 0", f'<axis xyz="1 0 0"/>{limit}'),
        joint("weld", "fixed", "slider", "tool", "0.1 0 0"),
        joint("puck", "planar", "tool", "disc", "0 0 0.1", '<axis xyz="0 0 1"/>'),
        joint("spinner", "continuous", "disc", "rotor", "0.1 0 0.1", '<axis xyz="1 0 0"/>'),
    ])
    path = tmp_path / "continuous.urdf"
    path.write_text(f'<?xml version="1.0"?>\n<robot name="continuous">\n{body}\n</robot>\n')
    return path


def _pendulum(dtype=jnp.float64):
    """A point mass MASS at distance LENGTH below an unbounded joint about x (on the world): θ̈ = −(g/l) sin θ."""
    return jaxsoa.build_model([-1], [U], [[1.0, 0.0, 0.0]], [np.eye(3)], [[0.0, 0.0, 0.0]], [MASS],
                              [[0.0, 0.0, -LENGTH]], [np.zeros((3, 3))], gravity=(0.0, 0.0, -G), dtype=dtype)


def _cos_sin(theta):
    theta = np.asarray(theta, np.float64)
    return np.stack([np.cos(theta), np.sin(theta)], -1)


# --------------------------------------------------------------------------------------------- #
# against Pinocchio
# --------------------------------------------------------------------------------------------- #

def test_dynamics_match_pinocchio(pair, states):
    """RNEA, ABA (± f_ext) and CRBA on the unbounded tree at random states, to 1e-11 relative."""
    model, pin_model = pair
    state, js = states
    assert [j.shortname() for j in pin_model.joints].count("JointModelRevoluteUnboundedUnaligned") == 2
    assert "JointModelRUBY" in [j.shortname() for j in pin_model.joints]
    f_ext = np.random.default_rng(1).normal(size=(N_STATES, model.n_links, 6))
    fext = [fext_to_pinocchio(model, pin_model, f) for f in f_ext]
    got = _dynamics(model, js["q"], js["v"], js["a"], js["tau"], jnp.asarray(f_ext))
    compare(TOL, got, pinocchio_to_jaxsoa_dynamics(model, pin_model, pinocchio_dynamics(pin_model, state, fext)))


def _frame_velocities(model, q, v):
    links = jnp.arange(model.n_links)
    return {ref: jax.vmap(lambda k, r=ref: jaxsoa.frame_velocity(model, q, v, k, r))(links) for ref in REFERENCES}


def test_kinematics_match_pinocchio(pair, states):
    """Forward kinematics (`data.oMi`), link velocities and accelerations, joint Jacobians in the three reference
    frames, centre of mass and momenta, and `frame_velocity` of every link in the three frames
    (`getFrameVelocity`), to 1e-11."""
    model, pin_model = pair
    state, js = states
    got = dict(_kinematics(model, js["q"], js["v"], js["a"]))
    expected = pinocchio_kinematics(model, pin_model, state)
    frames = jax.jit(jax.vmap(_frame_velocities, (None, 0, 0)))(model, js["q"], js["v"])
    data = pin_model.createData()
    for ref, pin_ref in REFERENCES.items():
        rows = []
        for q, v in zip(state["q"], state["v"], strict=True):
            pin.forwardKinematics(pin_model, data, q, v)
            pin.updateFramePlacements(pin_model, data)
            rows.append([motion_to_jaxsoa(pin.getFrameVelocity(pin_model, data, pin_model.getFrameId(name),
                                                                pin_ref).vector) for name in model.link_names])
        got[f"frame_velocity {ref}"], expected[f"frame_velocity {ref}"] = frames[ref], np.asarray(rows)
    compare(TOL, got, expected)


def test_configuration_space_matches_pinocchio(pair, states):
    """`neutral`, `integrate`, `difference` and `interpolate` (u = 0.3 and 1.6) equal Pinocchio's, to 1e-11; a
    `random_configuration` holds unit (cos θ, sin θ) with θ spread over (−π, π] (Pinocchio's range)."""
    model, pin_model = pair
    state, js = states
    compare(TOL, *configuration_space_against_pinocchio(model, pin_model, state, js))
    keys = jax.random.split(jax.random.key(0), 64)
    q = np.asarray(jax.vmap(jaxsoa.random_configuration, (None, 0))(model, keys))[:, model.q_columns(U)]
    np.testing.assert_allclose(np.linalg.norm(q, axis=-1), 1.0, rtol=0, atol=1e-15)
    theta = np.arctan2(q[..., 1], q[..., 0])
    assert theta.min() < -2.5 and theta.max() > 2.5                          # uniform in ±π, not one half-turn


def _urdf_states(pin_model, seed=2):
    state = random_state(np.random.default_rng(seed), pin_model, N_STATES)
    return state, {k: jnp.asarray(x) for k, x in state.items()}


def test_urdf_continuous_unbounded_loads_like_pinocchio(tmp_path):
    """The URDF chain with `continuous="unbounded"`: Pinocchio's joint types and coordinate layout (nq = 12,
    nv = 8, q's and v's columns unpermuted: the same q vectors go to both engines), RNEA, ABA and CRBA to 1e-11
    at random states; the unnormalised axis is normalised."""
    path = _continuous_urdf(tmp_path)
    model = jaxsoa.load_urdf(path, continuous="unbounded", dtype=jnp.float64)
    pin_model = pin.buildModelFromUrdf(str(path))
    assert model.joint_types == (F, U, R, U, P, PL, U)
    assert [j.shortname() for j in pin_model.joints][1:] == [
        "JointModelRUBZ", "JointModelRY", "JointModelRevoluteUnboundedUnaligned", "JointModelPX", "JointModelPlanar",
        "JointModelRUBX"]
    assert (model.nq, model.nv) == (pin_model.nq, pin_model.nv) == (12, 8)
    q_index, v_index = coordinate_maps(model, pin_model)
    np.testing.assert_array_equal(q_index, np.arange(12))
    np.testing.assert_array_equal(v_index, np.arange(8))
    np.testing.assert_allclose(np.asarray(model.joint_axis[3]), np.array([0.3, -0.5, 0.8]) / np.sqrt(0.98),
                               rtol=0, atol=1e-16)
    state, js = _urdf_states(pin_model)
    fext = [[pin.Force.Zero()] * pin_model.njoints] * N_STATES
    got = _dynamics(model, js["q"], js["v"], js["a"], js["tau"], jnp.zeros((N_STATES, model.n_links, 6)))
    compare(TOL, got, pinocchio_dynamics(pin_model, state, fext))


def test_urdf_continuous_default_is_one_coordinate(tmp_path):
    """Without `continuous` (and with "revolute") a continuous joint is a revolute joint, nq = 1 each (nq = 9);
    its dynamics at θ equal the unbounded model's at (cos θ, sin θ) to 1e-12."""
    path = _continuous_urdf(tmp_path)
    default, revolute = jaxsoa.load_urdf(path), jaxsoa.load_urdf(path, continuous="revolute")
    unbounded = jaxsoa.load_urdf(path, continuous="unbounded")
    assert default.joint_types == revolute.joint_types == (F, R, R, R, P, PL, R)
    assert (default.nq, default.nv) == (9, 8)
    state, js = _urdf_states(pin.buildModelFromUrdf(str(path)))
    q = np.zeros((N_STATES, default.nq))
    for k, t in enumerate(unbounded.joint_types):                            # same links, same v layout
        i, j = unbounded.idx_q[k], default.idx_q[k]
        if t == U:
            q[:, j] = np.arctan2(state["q"][:, i + 1], state["q"][:, i])     # θ from (cos θ, sin θ)
        else:
            q[:, j:j + t.nq] = state["q"][:, i:i + t.nq]
    zero = jnp.zeros((N_STATES, default.n_links, 6))
    compare(1e-12, _dynamics(default, jnp.asarray(q), js["v"], js["a"], js["tau"], zero),
            _dynamics(unbounded, js["q"], js["v"], js["a"], js["tau"], zero))


@pytest.mark.parametrize("value", ["Unbounded", "cos_sin", None, 2])
def test_urdf_continuous_unknown_value_is_refused(tmp_path, value):
    with pytest.raises(ValueError, match=r"argument 'continuous' must be 'revolute' or 'unbounded'"):
        jaxsoa.load_urdf(_continuous_urdf(tmp_path), continuous=value)


# --------------------------------------------------------------------------------------------- #
# closed forms
# --------------------------------------------------------------------------------------------- #

def test_pendulum_matches_the_closed_form():
    """ABA: θ̈ = −(g/l) sin θ at angles all round the circle (±π included) and any θ̇; RNEA: τ = m l² θ̈ +
    m g l sin θ, to 1e-13 × g/l."""
    model = _pendulum()
    theta = np.linspace(-np.pi, np.pi, 13)
    q, v = jnp.asarray(_cos_sin(theta)), jnp.asarray(np.linspace(-3.0, 3.0, 13)[:, None])
    acc = jax.jit(jax.vmap(jaxsoa.aba, (None, 0, 0, 0)))(model, q, v, jnp.zeros((13, 1)))
    np.testing.assert_allclose(np.asarray(acc)[:, 0], -G / LENGTH * np.sin(theta), rtol=0, atol=1e-13 * G / LENGTH)
    a = jnp.asarray(np.linspace(2.0, -1.0, 13)[:, None])
    tau = jax.jit(jax.vmap(jaxsoa.rnea, (None, 0, 0, 0)))(model, q, v, a)
    expected = MASS * LENGTH**2 * np.asarray(a)[:, 0] + MASS * G * LENGTH * np.sin(theta)
    np.testing.assert_allclose(np.asarray(tau)[:, 0], expected, rtol=0, atol=1e-13 * G / LENGTH)


def _turning_pendulum(t, omega):
    """Closed form of the pendulum from θ = 0 at θ̇ = Ω > 2 √(g/l) (it turns over the top): θ̇² = Ω² (1 − k² sin²(θ/2)),
    k = 2 √(g/l) / Ω, so θ/2 = am(Ω t / 2 | k²). Returns (cos θ, sin θ) (t, 2) and θ̇ (t,)."""
    sn, cn, dn, _ = scipy.special.ellipj(omega * np.asarray(t) / 2, 4 * G / LENGTH / omega**2)
    return np.stack([1 - 2 * sn**2, 2 * sn * cn], -1), omega * dn               # cos 2φ, sin 2φ; 2 φ̇


def _pendulum_rollout(dt, n, omega):
    model = _pendulum()
    return model, jaxsoa.rollout(model, jnp.asarray([1.0, 0.0]), jnp.asarray([omega]),
                                 lambda t, q, v: jnp.zeros(1), dt, n)


def test_rk4_pendulum_turns_through_the_seam():
    """RK4 on the pendulum turning over the top (Ω = 10 rad/s, one turn in 0.87 s): q stays a unit complex number
    (to 1e-14), the error against the closed form at t = 1 s is O(dt⁴) (≤ 2e-6 at dt = 0.01, ≥ 12 × smaller at
    dt = 0.005), the energy ½ m l² θ̇² − m g l cos θ drifts ≤ 5e-8 relative, and θ passes ±π without a jump: the
    naive atan2 angle jumps by 2π there, `difference` of consecutive states stays |θ̇| dt and sums to the closed
    form's unwrapped angle."""
    omega = 10.0
    errors = []
    for n in (100, 200):
        model, traj = _pendulum_rollout(1.0 / n, n, omega)
        q_end, v_end = _turning_pendulum(1.0, omega)
        errors.append(max(np.abs(np.asarray(traj.q[-1]) - q_end).max(), abs(float(traj.v[-1, 0]) - v_end)))
    q, v = np.asarray(traj.q), np.asarray(traj.v)
    unit = float(np.abs(np.linalg.norm(q, axis=-1) - 1).max())
    energy = jax.jit(jax.vmap(lambda q, v: jaxsoa.kinetic_energy(model, q, v) + jaxsoa.potential_energy(model, q)))(
        traj.q, traj.v)
    drift = float(jnp.abs(energy - energy[0]).max() / jnp.abs(energy[0]))
    steps = np.asarray(jax.jit(jax.vmap(jaxsoa.difference, (None, 0, 0)))(model, traj.q[:-1], traj.q[1:]))[:, 0]
    naive = np.diff(np.arctan2(q[:, 1], q[:, 0]))
    print(dict(rk4=errors, ratio=errors[0] / errors[1], unit=unit, drift=drift))
    assert errors[0] <= 2e-6 and errors[0] / errors[1] > 12, errors
    assert unit <= 1e-14 and drift <= 5e-8, (unit, drift)
    assert np.abs(naive).max() > 6.0                                        # the seam is crossed (once)
    assert np.all(steps > 0) and np.all(steps <= np.abs(v).max() / 200 * (1 + 1e-12))
    t = np.arange(201) / 200
    cos_sin, _ = _turning_pendulum(t, omega)
    theta = np.unwrap(np.arctan2(cos_sin[:, 1], cos_sin[:, 0]))              # closed-form θ(t), unwrapped
    assert theta[-1] > np.pi
    np.testing.assert_allclose(np.cumsum(steps), theta[1:], rtol=0, atol=1e-7)


def test_difference_across_the_seam():
    """θ0 = π − 0.05 to θ1 = −π + 0.05 is a turn of +0.1 (a revolute angle would give 0.1 − 2π), as Pinocchio's
    `difference`, to 1e-15; `integrate` goes back, and ABA is continuous across the seam."""
    model = _pendulum()
    q0, q1 = jnp.asarray(_cos_sin(np.pi - 0.05)), jnp.asarray(_cos_sin(-np.pi + 0.05))
    pin_model = pin.Model()
    pin_model.addJoint(0, pin.JointModelRUBX(), pin.SE3.Identity(), "joint")
    expected = pin.difference(pin_model, np.asarray(q0), np.asarray(q1))
    np.testing.assert_allclose(np.asarray(jaxsoa.difference(model, q0, q1)), [0.1], rtol=0, atol=1e-15)
    np.testing.assert_allclose(np.asarray(jaxsoa.difference(model, q0, q1)), expected, rtol=0, atol=1e-15)
    np.testing.assert_allclose(np.asarray(jaxsoa.difference(model, q1, q0)), [-0.1], rtol=0, atol=1e-15)
    np.testing.assert_allclose(np.asarray(jaxsoa.integrate(model, q0, jnp.asarray([0.1]))), q1, rtol=0, atol=1e-15)
    np.testing.assert_allclose(np.asarray(jaxsoa.interpolate(model, q0, q1, 0.5)), [-1.0, 0.0], rtol=0, atol=1e-15)
    side = [float(jaxsoa.aba(model, jnp.asarray(_cos_sin(np.pi + s)), jnp.zeros(1), jnp.zeros(1))[0])
            for s in (-1e-9, 1e-9)]
    np.testing.assert_allclose(side, [-G / LENGTH * 1e-9, G / LENGTH * 1e-9], rtol=1e-6)


# --------------------------------------------------------------------------------------------- #
# identities
# --------------------------------------------------------------------------------------------- #

@jax.jit
def _identities(model, q, q1, v, a):
    """{name: (got, expected)} of the identities of `test_identities`."""
    cols, vcols = model.q_columns(U), model.v_columns(U)[:, 0]
    c, s, w = q[cols[:, 0]], q[cols[:, 1]], v[vcols]
    small = 0.3 * v                                                          # rotations below π: the log inverts
    return dict(aba_rnea=(jaxsoa.aba(model, q, v, jaxsoa.rnea(model, q, v, a)), a),
                integrate_difference=(jaxsoa.integrate(model, q, jaxsoa.difference(model, q, q1)), q1),
                difference_integrate=(jaxsoa.difference(model, q, jaxsoa.integrate(model, q, small)), small),
                configuration_derivative=(jaxsoa.configuration_derivative(model, q, v)[cols],
                                          jnp.stack([-s * w, c * w], -1)),                  # ω ẑ × (cos θ, sin θ)
                dexp_inv=(dexp_inv(model, 0.4 * v, v)[vcols], w),                            # SO(2) is abelian
                direction_only=(jaxsoa.forward_kinematics(model, q.at[cols].multiply(2.5)),
                                jaxsoa.forward_kinematics(model, q)))


def test_identities(pair, states):
    """aba(rnea(q, v, a)) = a; integrate(q, difference(q, q1)) = q1 and difference(q, integrate(q, v)) = v, to
    1e-12; q̇ = ω ẑ × (cos θ, sin θ) and dexp⁻¹ = identity on the unbounded columns; kinematics depend on
    (cos θ, sin θ) only through its direction."""
    model, _ = pair
    _, js = states
    for i in range(3):
        out = _identities(model, js["q"][i], js["q"][i + 1], js["v"][i], js["a"][i])
        errors = {key: max(float(jnp.abs(x - y).max()) for x, y in zip(jax.tree.leaves(got), jax.tree.leaves(expected),
                                                                        strict=True))
                  for key, (got, expected) in out.items()}
        print(errors)
        assert all(e <= 1e-12 for e in errors.values()), errors


# --------------------------------------------------------------------------------------------- #
# batches
# --------------------------------------------------------------------------------------------- #

def test_leading_batch_on_the_core_matches_pinocchio(pair, states, monkeypatch):
    """The batch-last core takes unbounded joints (its frame from the normalised (cos θ, sin θ), its column S = [a; 0]
    as a revolute joint's): leading-batch RNEA, ABA (± f_ext) and CRBA with the per-sample recursions made to fail
    (`_forbid_the_per_sample_path`), against Pinocchio to 1e-11."""
    model, pin_model = pair
    state, js = states
    _forbid_the_per_sample_path(monkeypatch)
    f_ext = np.random.default_rng(2).normal(size=(N_STATES, model.n_links, 6))
    got = jax.jit(jaxsoa_dynamics)(model, js["q"], js["v"], js["a"], js["tau"], jnp.asarray(f_ext))
    fext = [fext_to_pinocchio(model, pin_model, f) for f in f_ext]
    compare(TOL, got, pinocchio_to_jaxsoa_dynamics(model, pin_model, pinocchio_dynamics(pin_model, state, fext)))


def test_leading_batch_equals_per_sample_calls(pair, states):
    """Leading-batch calls (q (B, nq), the batch-last core), a stacked model and a `jax.vmap` of 16 samples equal
    per-sample calls to 1e-13 relative to the largest entry (float64 rounding of the same equations in another
    order); the leading-batch program compiles once for two trees of these types."""
    model, _ = pair
    _, js = states
    assert batch_last_frames.supports(model) and batch_last_crba.supports(model)
    q, v, a = js["q"], js["v"], js["a"]
    counted, count = counting(batch_calls)
    calls, single = jax.jit(counted), jax.jit(batch_calls)
    got, per_sample = calls(model, q, v, a), [single(model, q[b], v[b], a[b]) for b in range(N_STATES)]
    expected = jax.tree.map(lambda *x: jnp.stack(x), *per_sample)
    for x, y in zip(jax.tree.leaves(got), jax.tree.leaves(expected), strict=True):
        assert relative_error(x, y) < 1e-13
    other = _pair(4)[0]
    calls(other, jnp.flip(q, 0), v, a)
    assert count[0] == 1, count
    per_model = [model, other, _pair(5)[0]] * 2
    per_model_aba = jnp.stack([single(m, q[b], v[b], a[b])["aba"] for b, m in enumerate(per_model)])
    assert relative_error(jax.jit(jaxsoa.aba)(stack_models(per_model), q, v, a), per_model_aba) < 1e-13
    q16, v16, a16 = (jnp.tile(x, (3, 1))[:16] for x in (q, v, a))
    vmapped = jax.jit(jax.vmap(jaxsoa.aba, (None, 0, 0, 0)))(model, q16, v16, a16)      # the custom_vmap rule
    assert relative_error(vmapped, jnp.tile(expected["aba"], (3, 1))[:16]) < 1e-13


# --------------------------------------------------------------------------------------------- #
# bad inputs, float32
# --------------------------------------------------------------------------------------------- #

def test_bad_inputs(pair, states):
    """`check_configuration` flags a non-unit (cos θ, sin θ) (and passes a unit one); a q one entry short is refused
    by `rnea`, naming 'q'."""
    model, _ = pair
    _, js = states
    q, v = js["q"][0], js["v"][0]
    checked = jax.jit(checkify.checkify(check_configuration))
    checked(model, q)[0].throw()
    col = int(model.q_columns(U)[1, 0])
    err, _ = checked(model, q.at[col].multiply(1.01))
    with pytest.raises(checkify.JaxRuntimeError, match=r"revolute-unbounded \(cos θ, sin θ\) norms .* are not 1"):
        err.throw()
    with pytest.raises(ValueError, match=r"argument 'q' has shape"):
        jaxsoa.rnea(model, q[:-1], v, v)
    with pytest.raises(ValueError, match=r"argument 'q' has shape"):
        jaxsoa.rnea(_pendulum(), jnp.zeros(1), jnp.zeros(1), jnp.zeros(1))    # an angle is not a unit complex number


def test_build_model_needs_a_unit_axis():
    """An unbounded joint turns about `joint_axis`, which must be a unit vector, as a revolute joint's."""
    with pytest.raises(ValueError, match=r"field 'joint_axis' is not a unit vector"):
        jaxsoa.build_model([-1], [U], [[0.0, 0.0, 2.0]], [np.eye(3)], [[0.0, 0.0, 0.0]], [1.0], [[0.0, 0.0, 0.0]],
                           [np.eye(3)])


@pytest.mark.parametrize("path", ["per_sample", "batch_last"])
def test_float32_error_against_pinocchio(states, path):
    """The unbounded tree in float32 against Pinocchio's float64 (relative to max |reference|), per sample under
    `vmap` and on the batch-last core (one leading-batch call): measured RNEA 1.4e-7 / 1.1e-7, ABA 1.2e-7 / 8.4e-8,
    CRBA 4.2e-7 / 4.2e-7 (`pytest -s` prints them); bound 1e-5, as for the robots (tests/algorithms)."""
    tree = _tree()                                                           # `_pair`'s tree
    model, pin_model = build_jaxsoa(tree, dtype=jnp.float32), build_pinocchio(tree)
    state, js = states
    zero = np.zeros((N_STATES, model.n_links, 6))
    dynamics = _dynamics if path == "per_sample" else jax.jit(jaxsoa_dynamics)
    got = dynamics(model, *(js[k].astype(jnp.float32) for k in ("q", "v", "a", "tau")), jnp.asarray(zero, jnp.float32))
    ref = pinocchio_to_jaxsoa_dynamics(model, pin_model, pinocchio_dynamics(
        pin_model, state, [fext_to_pinocchio(model, pin_model, f) for f in zero]))
    errors = {key: float(np.abs(np.asarray(got[key], np.float64) - ref[key]).max() / np.abs(ref[key]).max())
              for key in ("rnea", "aba", "crba")}
    print(f"float32 relative error vs Pinocchio ({path}):", errors)
    assert all(e < 1e-5 for e in errors.values()), errors


@pytest.mark.slow            # two gradient compiles (~1 min on a loaded 2-core machine)
def test_adjoint_gradients_on_the_core_equal_plain_autodiff():
    """The batched adjoint on the batch-last core (ABA, its factor's solve, RNEA's hand-written reverse mode) with
    unbounded joints against plain autodiff of the per-sample ABA, in every state argument and model field
    (`test_batch_last`'s check, 1e-10): the (cos θ, sin θ) cotangents pass through the normalisation."""
    model = _pair()[0]
    assert_adjoint_gradients_equal_plain_autodiff(model, np.random.default_rng(11), 11)

