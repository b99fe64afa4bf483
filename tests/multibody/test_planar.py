"""The planar joint (`JointType.PLANAR`, Pinocchio's `JointModelPlanar`: q = (x, y, cos θ, sin θ), v = (v_x, v_y, ω)
in the child frame) against Pinocchio 4.1 and closed forms.

Systems: a random 6-link tree mixing planar, revolute, prismatic and welded links (`tests/helpers/trees.py`, built
identically in both engines), and a URDF chain (revolute, planar, prismatic, a welded link, a second planar joint)
loaded by `jaxsoa.load_urdf` and `pin.buildModelFromUrdf`.

Tolerances: float64 on O(1) states of ≤ 6 links: RNEA, ABA, CRBA, kinematics and the configuration-space maps agree
with Pinocchio to ~1e-14, asserted at 1e-11 (a convention error — the S column order, body vs world twist, the
direction of R(θ) — is O(1)). Pinocchio's SE(2) log, α = θ sin θ / (2 (1 − cos θ)), loses ε / θ² relative to
cancellation at small rotations (5.7e-9 at θ = 2e-4, just above its Taylor branch); jaxsoa's (θ/2) cot(θ/2) has
none, so `difference` is compared at small angles with the SE(2) log whose α is a Taylor series (no
cancellation) instead (4 ulps). RK4: the error against the closed form of a free planar body spinning at 2.5 rad/s
is O(dt⁴) (measured 1.5e-7 at dt = 0.02 over 1 s, 9.3e-9 at dt = 0.01: ratio 15.9); the kinetic energy of the
torque-free chain drifts 5.5e-12 relative over 1 s at dt = 0.005 (asserted ≤ 1e-9).
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pinocchio as pin
import pytest

import jaxsoa
from jaxsoa.algorithms import batch_last_frames
from jaxsoa.multibody.config_space import dexp_inv
from jaxsoa.multibody.joints import JointType
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
    fext_to_pinocchio,
    jaxsoa_dynamics,
    pinocchio_dynamics,
    pinocchio_to_jaxsoa_dynamics,
    random_state,
    random_tree,
    stack_models,
)

TOL = 1e-11
N_STATES = 6
F, R, P, PL = JointType.FIXED, JointType.REVOLUTE, JointType.PRISMATIC, JointType.PLANAR
TYPES = (PL, R, PL, F, P, PL)

_dynamics = jax.jit(jax.vmap(jaxsoa_dynamics, in_axes=(None, 0, 0, 0, 0, 0)))
_kinematics = jax.jit(jax.vmap(jaxsoa_kinematics, in_axes=(None, 0, 0, 0)))


def _pair(seed=3):
    tree = random_tree(np.random.default_rng(seed), len(TYPES), link_types=TYPES)
    return build_jaxsoa(tree), build_pinocchio(tree)


@pytest.fixture(scope="module")
def pair():
    """(jaxsoa model, Pinocchio model) of the random planar / revolute / prismatic / welded tree."""
    return _pair()


@pytest.fixture(scope="module")
def states(pair):
    """N_STATES random states, Pinocchio's layout (`pin.randomConfiguration`) and jaxsoa's."""
    return pinocchio_and_jaxsoa_states(pair, N_STATES)


def _planar_urdf(tmp_path, axis='<axis xyz="0 0 1"/>'):
    """A URDF chain: revolute shoulder, planar `table` (rotated origin, normal `axis`), prismatic slide, a welded
    tool, a second planar `puck` (no <limit>: URDF needs none on planar joints)."""
    link, joint, limit = urdf_link, urdf_joint, URDF_LIMIT
    body = "\n".join([
        link("base", 1.0, "0 0 0"), link("arm", 2.0, "0.1 0 0"), link("sled", 1.5, "0 0.1 0.05"),
        link("slider", 0.7, "0 0 0.1"), link("tool", 0.3, "0.05 0 0"), link("disc", 0.9, "0.02 0.03 0"),
        joint("shoulder", "revolute", "base", "arm", "0 0 0.2", f'<axis xyz="0 1 0"/>{limit}'),
        joint("table", "planar", "arm", "sled", "0.3 0 0", axis + '<dynamics damping="0.1"/>'),
        joint("slide", "prismatic", "sled", "slider", "0 0.1 0", f'<axis xyz="1 0 0"/>{limit}'),
        joint("weld", "fixed", "slider", "tool", "0.1 0 0"),
        joint("puck", "planar", "tool", "disc", "0 0 0.1", '<axis xyz="0 0 2"/>'),
    ])
    path = tmp_path / "planar.urdf"
    path.write_text(f'<?xml version="1.0"?>\n<robot name="planar">\n{body}\n</robot>\n')
    return path


# --------------------------------------------------------------------------------------------- #
# against Pinocchio
# --------------------------------------------------------------------------------------------- #

def test_dynamics_match_pinocchio(pair, states):
    """RNEA, ABA (± f_ext) and CRBA on the planar tree at random states, to 1e-11 relative."""
    model, pin_model = pair
    state, js = states
    f_ext = np.random.default_rng(1).normal(size=(N_STATES, model.n_links, 6))
    fext = [fext_to_pinocchio(model, pin_model, f) for f in f_ext]
    got = _dynamics(model, js["q"], js["v"], js["a"], js["tau"], jnp.asarray(f_ext))
    compare(TOL, got, pinocchio_to_jaxsoa_dynamics(model, pin_model, pinocchio_dynamics(pin_model, state, fext)))


def test_kinematics_match_pinocchio(pair, states):
    """Forward kinematics (`data.oMi`), link velocities and accelerations, joint Jacobians in the three reference
    frames, centre of mass and momenta, to 1e-11."""
    model, pin_model = pair
    state, js = states
    compare(TOL, _kinematics(model, js["q"], js["v"], js["a"]), pinocchio_kinematics(model, pin_model, state))


def test_configuration_space_matches_pinocchio(pair, states):
    """`neutral`, `integrate`, `difference` and `interpolate` (u = 0.3 and 1.6) equal Pinocchio's, to 1e-11."""
    model, pin_model = pair
    state, js = states
    compare(TOL, *configuration_space_against_pinocchio(model, pin_model, state, js))


def test_difference_at_small_angles_is_exact():
    """Small relative rotations (1e-2 … 1e-7 rad, where Pinocchio's SE(2) log cancels: module docstring): jaxsoa's
    `difference` equals log(M0⁻¹ M1) evaluated with V(ω)⁻¹'s α = (ω/2) cot(ω/2) as its Taylor series
    1 − ω²/12 − ω⁴/720 − ω⁶/30240 (truncation < 1e-22 for |ω| ≤ 1e-2: no cancellation) to 4 ulps, and so does
    `integrate` its inverse."""
    model = build_jaxsoa(random_tree(np.random.default_rng(0), 1, link_types=(PL,)))
    theta0, angles = 0.5, np.array([1e-2, 1e-3, 2e-4, 1e-5, 1e-7])
    q0 = np.array([0.2, -0.4, np.cos(theta0), np.sin(theta0)])
    q1 = np.stack([[1.9, 0.8, np.cos(theta0 + w), np.sin(theta0 + w)] for w in angles])
    got = np.asarray(jax.vmap(jaxsoa.difference, (None, None, 0))(model, jnp.asarray(q0), jnp.asarray(q1)))
    c0, s0, c1, s1 = q0[2], q0[3], q1[:, 2], q1[:, 3]
    w = np.arctan2(c0 * s1 - s0 * c1, c0 * c1 + s0 * s1)                     # ω = arg(e^{−iθ0} e^{iθ1})
    dx, dy = q1[:, 0] - q0[0], q1[:, 1] - q0[1]
    tx, ty = c0 * dx + s0 * dy, -s0 * dx + c0 * dy                           # R0ᵀ (p1 − p0)
    alpha = 1 - w**2 / 12 - w**4 / 720 - w**6 / 30240                         # V(ω)⁻¹ = [[α, ω/2], [−ω/2, α]]
    expected = np.stack([alpha * tx + w / 2 * ty, -w / 2 * tx + alpha * ty, w], -1)
    np.testing.assert_allclose(got, expected, rtol=0, atol=4 * np.finfo(np.float64).eps * np.abs(expected).max())
    back = jax.vmap(jaxsoa.integrate, (None, None, 0))(model, jnp.asarray(q0), jnp.asarray(got))
    np.testing.assert_allclose(np.asarray(back), q1, rtol=0, atol=1e-15)


def test_urdf_planar_joints_load_like_pinocchio(tmp_path):
    """The URDF chain: same coordinate layout as Pinocchio (nq = 10, nv = 8, q's columns unpermuted), RNEA, ABA
    and CRBA to 1e-11 at random states; a `0 0 2` normal is normalised."""
    path = _planar_urdf(tmp_path)
    model, pin_model = jaxsoa.load_urdf(path, dtype=jnp.float64), pin.buildModelFromUrdf(str(path))
    assert model.joint_types == (F, R, PL, P, PL)
    assert (model.nq, model.nv) == (pin_model.nq, pin_model.nv) == (10, 8)
    q_index, v_index = coordinate_maps(model, pin_model)
    np.testing.assert_array_equal(q_index, np.arange(10))
    np.testing.assert_array_equal(v_index, np.arange(8))
    np.testing.assert_array_equal(np.asarray(model.joint_axis[model.links_of_type(PL)]), [[0.0, 0.0, 1.0]] * 2)
    state = random_state(np.random.default_rng(2), pin_model, N_STATES)
    zero = np.zeros((N_STATES, model.n_links, 6))
    fext = [[pin.Force.Zero()] * pin_model.njoints] * N_STATES
    js = {k: jnp.asarray(x) for k, x in state.items()}
    got = _dynamics(model, js["q"], js["v"], js["a"], js["tau"], jnp.asarray(zero))
    compare(TOL, got, pinocchio_dynamics(pin_model, state, fext))


@pytest.mark.parametrize("axis", ['<axis xyz="1 0 0"/>', '<axis xyz="0 0 -1"/>', '<axis xyz="0 0.1 1"/>', ""],
                         ids=["x", "minus-z", "tilted", "omitted"])
def test_urdf_planar_joint_with_another_normal_is_refused(tmp_path, axis):
    """Pinocchio's URDF parser ignores a planar joint's <axis> (the plane moves with the joint frame's x-y plane
    whatever it says), so jaxsoa refuses a normal other than 0 0 1, the URDF default 1 0 0 of an omitted <axis>
    included, naming the joint and the expected axis."""
    with pytest.raises(ValueError, match=r"joint 'table'.*planar joint.*must be '0 0 1'"):
        jaxsoa.load_urdf(_planar_urdf(tmp_path, axis))


# --------------------------------------------------------------------------------------------- #
# identities and closed forms
# --------------------------------------------------------------------------------------------- #

@jax.jit
def _identities(model, one, q, q1, v, a):
    """{name: (got, expected)} of the identities of `test_identities`; `one` a model of one planar joint."""
    cols, vcols = model.q_columns(PL)[0], model.v_columns(PL)[0]
    c, s = q[cols[2]], q[cols[3]]
    small = 0.3 * v                                                          # rotations below π: the log inverts
    out = dict(aba_rnea=(jaxsoa.aba(model, q, v, jaxsoa.rnea(model, q, v, a)), a),
               integrate_difference=(jaxsoa.integrate(model, q, jaxsoa.difference(model, q, q1)), q1),
               difference_integrate=(jaxsoa.difference(model, q, jaxsoa.integrate(model, q, small)), small),
               configuration_derivative=(jaxsoa.configuration_derivative(model, q, v)[cols], jnp.stack(
                   [c * v[vcols[0]] - s * v[vcols[1]], s * v[vcols[0]] + c * v[vcols[1]],       # R(θ) v_xy
                    -s * v[vcols[2]], c * v[vcols[2]]])),                                          # ω ẑ × (c, s)
               direction_only=(jaxsoa.forward_kinematics(model, q.at[cols[2:]].multiply(2.5)),
                               jaxsoa.forward_kinematics(model, q)))
    w, d, h = jnp.asarray([0.2, 0.7, -0.4]), jnp.asarray([0.5, -0.3, 0.8]), 1e-6
    for scale in (0.1, 0.05):                                                # δ̇ by central differences of the log
        ends = [jaxsoa.difference(one, q[cols], jaxsoa.integrate(one, jaxsoa.integrate(one, q[cols], scale * d), t * w))
                for t in (h, -h)]
        out[f"dexp_inv {scale}"] = ((ends[0] - ends[1]) / (2 * h), dexp_inv(one, scale * d, w))
    return out


def test_identities(pair, states):
    """aba(rnea(q, v, a)) = a; integrate(q, difference(q, q1)) = q1 and difference(q, integrate(q, v)) = v, to
    1e-12; q̇ = (R(θ) v_xy, ω ẑ × (cos θ, sin θ)); kinematics depend on (cos θ, sin θ) only through its direction;
    dexp⁻¹ of the se(2) bracket is exact to O(|δ|⁴) (its error 16 × smaller at half the δ)."""
    model, _ = pair
    _, js = states
    one = build_jaxsoa(random_tree(np.random.default_rng(0), 1, link_types=(PL,)))
    out = _identities(model, one, js["q"][0], js["q"][1], js["v"][0], js["a"][0])
    errors = {key: max(float(jnp.abs(x - y).max()) for x, y in zip(jax.tree.leaves(got), jax.tree.leaves(expected),
                                                                    strict=True))
              for key, (got, expected) in out.items()}
    print(errors)
    dexp = [errors.pop(f"dexp_inv {scale}") for scale in (0.1, 0.05)]
    assert all(e <= 1e-12 for e in errors.values()), errors
    assert dexp[0] < 1e-6 and dexp[0] / dexp[1] > 12, dexp                  # O(|δ|⁴): 16 per halving


def _free_body(com):
    """One planar body on the world, its centre of mass off the joint axis, gravity normal to the plane."""
    return jaxsoa.build_model([-1], [PL], [[0.0, 0.0, 1.0]], [np.eye(3)], [[0.0, 0.0, 0.0]], [1.3], [com],
                              [[[0.04, 0.003, 0.002], [0.003, 0.05, 0.001], [0.002, 0.001, 0.06]]], dtype=jnp.float64)


def _free_body_closed_form(q0, v0, com, t):
    """Torque-free planar body: the centre of mass moves on a straight line at constant speed and θ̇ = ω (the joint
    holds the other directions). Returns q(t), v(t) (v in the body frame)."""
    theta0, w = np.arctan2(q0[3], q0[2]), v0[2]

    def rot(theta):
        return np.array([[np.cos(theta), -np.sin(theta)], [np.sin(theta), np.cos(theta)]])

    c = np.asarray(com[:2])
    v_com = rot(theta0) @ v0[:2] + w * rot(theta0 + np.pi / 2) @ c         # ṗ + ω ẑ × R c, constant
    theta = theta0 + w * t
    p = q0[:2] + rot(theta0) @ c + v_com * t - rot(theta) @ c
    v_lin = rot(theta).T @ (v_com - w * rot(theta + np.pi / 2) @ c)         # Rᵀ ṗ
    return np.r_[p, np.cos(theta), np.sin(theta)], np.r_[v_lin, w]


def test_rk4_free_planar_body_matches_the_closed_form():
    """RK4 (Munthe-Kaas, through the SE(2) exponential and dexp⁻¹) on a free planar body for 1 s: error O(dt⁴)
    against the closed form (≤ 1e-6 at dt = 0.02 with ω = 2.5 rad/s, ≥ 12 × smaller at dt = 0.01)."""
    com = [0.15, -0.1, 0.05]
    model = _free_body(com)
    q0 = np.array([0.3, -0.2, np.cos(0.7), np.sin(0.7)])
    v0 = np.array([0.8, -0.5, 2.5])
    q_end, v_end = _free_body_closed_form(q0, v0, com, 1.0)
    errors = []
    for n in (50, 100):
        traj = jaxsoa.rollout(model, jnp.asarray(q0), jnp.asarray(v0), lambda t, q, v: jnp.zeros(3), 1.0 / n, n)
        errors.append(max(np.abs(np.asarray(traj.q[-1]) - q_end).max(), np.abs(np.asarray(traj.v[-1]) - v_end).max()))
    print(errors)
    assert errors[0] <= 1e-6 and errors[0] / errors[1] > 12, errors


def test_rk4_conserves_the_energy_of_a_torque_free_chain(pair, states):
    """No gravity, no torque: the kinetic energy of the planar tree stays constant over 200 RK4 steps (dt = 0.005)
    to 1e-9 relative."""
    _, js = states
    model = dataclasses.replace(pair[0], gravity=jnp.zeros(3))
    traj = jaxsoa.rollout(model, js["q"][0], js["v"][0], lambda t, q, v: jnp.zeros(model.nv), 0.005, 200)
    energy = jax.vmap(jaxsoa.kinetic_energy, (None, 0, 0))(model, traj.q, traj.v)
    drift = float(jnp.abs(energy - energy[0]).max() / energy[0])
    print(drift)
    assert drift <= 1e-9


# --------------------------------------------------------------------------------------------- #
# batches
# --------------------------------------------------------------------------------------------- #

def test_leading_batch_equals_per_sample_calls(pair, states):
    """The batch-last core takes planar joints (`supports`; tests/algorithms/test_batch_last_three_column.py checks
    it against Pinocchio): leading-batch calls (q (B, nq)), a stacked model and a `jax.vmap` of 16 samples equal
    per-sample calls to 1e-13 (float64 rounding of the same equations in another order)."""
    model, _ = pair
    _, js = states
    assert batch_last_frames.supports(model)
    q, v, a = js["q"], js["v"], js["a"]
    calls, aba = jax.jit(batch_calls), jax.jit(jaxsoa.aba)
    got, per_sample = calls(model, q, v, a), [calls(model, q[b], v[b], a[b]) for b in range(N_STATES)]
    expected = jax.tree.map(lambda *x: jnp.stack(x), *per_sample)
    for x, y in zip(jax.tree.leaves(got), jax.tree.leaves(expected), strict=True):
        np.testing.assert_allclose(x, y, rtol=0, atol=1e-13)
    per_model = [model, *(_pair(seed)[0] for seed in (4, 5))] * 2
    per_model_aba = jnp.stack([aba(m, q[b], v[b], a[b]) for b, m in enumerate(per_model)])
    np.testing.assert_allclose(aba(stack_models(per_model), q, v, a), per_model_aba, rtol=0, atol=1e-13)
    q16, v16, a16 = (jnp.tile(x, (3, 1))[:16] for x in (q, v, a))
    vmapped = jax.jit(jax.vmap(aba, (None, 0, 0, 0)))(model, q16, v16, a16)             # the custom_vmap rule
    np.testing.assert_allclose(vmapped, aba(model, q16, v16, a16), rtol=0, atol=1e-13)


def test_float32_error_against_pinocchio(states):
    """The planar tree in float32 against Pinocchio's float64 (relative to max |reference|): measured RNEA 1.9e-7,
    ABA 5.0e-7, CRBA 5.0e-7 (`pytest -s` prints them); bound 1e-5, as for the robots (tests/algorithms)."""
    tree = random_tree(np.random.default_rng(3), len(TYPES), link_types=TYPES)      # `_pair`'s tree
    model, pin_model = build_jaxsoa(tree, dtype=jnp.float32), build_pinocchio(tree)
    state, js = states
    zero = np.zeros((N_STATES, model.n_links, 6))
    got = _dynamics(model, *(js[k].astype(jnp.float32) for k in ("q", "v", "a", "tau")), jnp.asarray(zero, jnp.float32))
    ref = pinocchio_to_jaxsoa_dynamics(model, pin_model, pinocchio_dynamics(
        pin_model, state, [fext_to_pinocchio(model, pin_model, f) for f in zero]))
    errors = {key: float(np.abs(np.asarray(got[key], np.float64) - ref[key]).max() / np.abs(ref[key]).max())
              for key in ("rnea", "aba", "crba")}
    print("float32 relative error vs Pinocchio:", errors)
    assert all(e < 1e-5 for e in errors.values()), errors
