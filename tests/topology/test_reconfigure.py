"""Reconfigurable systems: the dual-arm spacecraft (sims/dual_arm_spacecraft.py) with asymmetric links,
configurations 1–3. Inertia of reversed links about the other end, rnea == an independently built model (hand-computed
placements, numpy homogeneous matrices, literal topology), vmap over topologies compiles once,
gradients w.r.t. design masses, and a rollout through three topology switches (compiles once, equals
the segments run separately with the documented state map)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from jaxsoa import build_model, rnea, rollout, semi_implicit_euler_step
from jaxsoa.integrators import TopologySchedule, rollout_switching
from jaxsoa.multibody.joints import JointType
from jaxsoa.topology.reconfigure import (
    LinkDesign,
    apply_configuration,
    design_arrays,
    reconfigurable_model,
)
from sims.dual_arm_spacecraft import CONFIGURATIONS

L = 0.8                                                    # arm link length
ARM_IF1_R = Rotation.from_rotvec([0.3, 0.0, 0.0]).as_matrix()            # interface 1 of an arm link: tilted
HUB_IF_R = [np.eye(3), np.eye(3), Rotation.from_rotvec([0.0, 0.0, np.pi]).as_matrix()]
HUB_IF_P = [[0.0, 0.0, -0.2], [0.5, 0.0, 0.0], [-0.5, 0.0, 0.0]]


def spacecraft_design():
    """Hub (free joint; interfaces [virtual, arm 1, arm 2]) and six 2-interface arm links (revolute,
    interface 0 at the design origin, interface 1 at (L, 0, 0) tilted; third slot padding), each with
    its centre of mass off the middle and a full inertia tensor."""
    rng = np.random.default_rng(3)
    R = np.tile(np.eye(3), (7, 3, 1, 1))
    p = np.zeros((7, 3, 3))
    R[0], p[0] = HUB_IF_R, HUB_IF_P
    R[1:, 1], p[1:, 1] = ARM_IF1_R, [L, 0.0, 0.0]
    mass = np.array([20.0, 1.1, 1.3, 0.9, 1.2, 1.0, 0.8])
    com = np.array([[0.02, -0.01, 0.03]] + [[0.27 * L + 0.01 * k, 0.03, -0.02] for k in range(6)])
    inertia = []
    for _ in range(7):
        Q, _ = np.linalg.qr(rng.normal(size=(3, 3)))                   # random principal axes
        inertia.append(Q @ np.diag(rng.uniform(0.1, 0.15, 3)) @ Q.T)
    types = (JointType.FREE,) + (JointType.REVOLUTE,) * 6
    return LinkDesign(R, p, mass, com, np.array(inertia), types)


def state(model, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.normal(size=model.nq)
    q[3:7] /= np.linalg.norm(q[3:7])
    return jnp.asarray(q), jnp.asarray(rng.normal(size=model.nv)), jnp.asarray(rng.normal(size=model.nv))


def homog(R, p):
    H = np.eye(4)
    H[:3, :3], H[:3, 3] = R, p
    return H


def test_configuration_3_reversed_link_inertia():
    design = spacecraft_design()
    model = reconfigurable_model(design, CONFIGURATIONS[3])
    np.testing.assert_array_equal(model.inboard_interface, [0, 1, 1, 1, 0, 0, 0])
    rows = np.arange(7)
    sel = np.asarray(model.inboard_interface)
    m, c, J = (np.asarray(x)[rows, sel] for x in (model.mass, model.com, model.inertia_com))
    np.testing.assert_array_equal(m, design.mass)                                # mass unchanged
    # link 2 (storage 1) hangs by its tip: com measured from interface 1, in its tilted frame
    np.testing.assert_allclose(c[1], ARM_IF1_R.T @ (design.com[1] - [L, 0, 0]), atol=1e-14)
    np.testing.assert_allclose(c[1][0], 0.27 * L - L, atol=1e-14)
    np.testing.assert_allclose(J[1], ARM_IF1_R.T @ design.inertia_com[1] @ ARM_IF1_R, atol=1e-14)
    np.testing.assert_allclose(c[4], design.com[4], atol=1e-14)                  # link 5: not reversed


def _hand_model(design, parent, inboard, attach):
    """Independent path: literal topology, homogeneous matrices, then `build_model`."""
    H = [[homog(design.interface_rotation[k, i], design.interface_translation[k, i]) for i in range(3)]
         for k in range(7)]
    Rp, pp, com, J = [], [], [], []
    for k in range(7):
        if parent[k] < 0:
            X = np.eye(4)
        else:
            j = parent[k]
            X = np.linalg.inv(H[j][inboard[j]]) @ H[j][attach[k]]
        Rp.append(X[:3, :3])
        pp.append(X[:3, 3])
        Hi_inv = np.linalg.inv(H[k][inboard[k]])
        com.append((Hi_inv @ np.append(design.com[k], 1.0))[:3])
        J.append(Hi_inv[:3, :3] @ design.inertia_com[k] @ Hi_inv[:3, :3].T)
    return build_model(parent, design.joint_types, np.tile([0.0, 0.0, 1.0], (7, 1)), Rp, pp, design.mass,
                       com, J, dtype=jnp.float64)


HAND_TOPOLOGY = {   # parent (storage), inboard interface, parent's attachment interface: by hand
    1: ([-1, 0, 1, 2, 0, 4, 5], [0, 0, 0, 0, 0, 0, 0], [-1, 1, 1, 1, 2, 1, 1]),
    2: ([-1, 6, 0, 2, 0, 4, 5], [0, 0, 0, 0, 0, 0, 0], [-1, 1, 1, 1, 2, 1, 1]),
    3: ([-1, 2, 3, 6, 0, 4, 5], [0, 1, 1, 1, 0, 0, 0], [-1, 0, 0, 1, 2, 1, 1]),
}


@pytest.mark.parametrize("config", [1, 2, 3])
def test_rnea_matches_hand_built_model(config):
    design = spacecraft_design()
    model = reconfigurable_model(design, CONFIGURATIONS[config])
    hand = _hand_model(design, *HAND_TOPOLOGY[config])
    q, v, a = state(model)
    np.testing.assert_allclose(rnea(model, q, v, a), rnea(hand, q, v, a), rtol=0, atol=1e-10)


def test_vmap_over_configurations_compiles_once_and_grad_masses():
    design = spacecraft_design()
    template = reconfigurable_model(design, CONFIGURATIONS[1])
    arrays = design_arrays(design)
    q, v, a = state(template, seed=1)
    traces = []

    @jax.jit
    def torques(arrays, stacked):
        traces.append(1)
        return jax.vmap(lambda ifs: rnea(apply_configuration(template, arrays, ifs), q, v, a))(stacked)

    stacked = jnp.asarray([CONFIGURATIONS[c] for c in (1, 2, 3)], jnp.int32)
    out = torques(arrays, stacked)
    out2 = torques(arrays, stacked[::-1])
    assert len(traces) == 1
    for i, c in enumerate((1, 2, 3)):
        expected = rnea(reconfigurable_model(design, CONFIGURATIONS[c]), q, v, a)
        np.testing.assert_allclose(out[i], expected, rtol=0, atol=1e-10)
        np.testing.assert_allclose(out2[2 - i], expected, rtol=0, atol=1e-10)
    assert not np.allclose(out[0], out[2])

    def scalar(mass):
        return jnp.sum(torques(arrays._replace(mass=mass), stacked) ** 2)

    g = jax.grad(scalar)(arrays.mass)
    eps = 1e-6
    fd = [(scalar(arrays.mass.at[k].add(eps)) - scalar(arrays.mass.at[k].add(-eps))) / (2 * eps)
          for k in range(7)]
    np.testing.assert_allclose(g, np.array(fd), rtol=1e-6, atol=1e-6)
    assert len(traces) == 1                                  # grad and FD reuse the one trace


def test_rollout_switching_three_switches():
    design = spacecraft_design()
    schedule = [1, 3, 2, 1]
    switch_steps = [0, 4, 9, 13]
    n_steps, dt = 17, 0.01
    models = [reconfigurable_model(design, CONFIGURATIONS[c], gravity=(0.0, 0.0, 0.0)) for c in schedule]
    template, arrays = models[0], design_arrays(design)
    q0, v0, _ = state(template, seed=2)

    def control(t, q, v):
        return -0.5 * v + 0.1 * jnp.sin(3.0 * t)

    traces = []

    @jax.jit
    def run(sched, steps, q0, v0):
        traces.append(1)
        return rollout_switching(template, arrays, q0, v0, control, dt, n_steps,
                                 schedule=TopologySchedule(sched, steps), step=semi_implicit_euler_step)

    sched = jnp.asarray([CONFIGURATIONS[c] for c in schedule], jnp.int32)
    qs, vs = run(sched, jnp.asarray(switch_steps), q0, v0)
    run(sched[::-1], jnp.asarray([0, 2, 5, 11]), q0, v0)                 # other topologies and times
    assert len(traces) == 1

    # reference: the segments separately; links 2, 3, 4 (q 7..9, v 6..8) change inboard interface at the
    # switches 1 -> 3 and 3 -> 2 (reset to 0), not at 2 -> 1 (link 2 changes parent only: carried over)
    reset = [None, True, True, False]
    bounds = [*switch_steps, n_steps]
    q, v = q0, v0
    ref_q, ref_v = [q0[None]], [v0[None]]
    for j, model in enumerate(models):
        if reset[j]:
            q, v = q.at[7:10].set(0.0), v.at[6:9].set(0.0)
        k0, n = bounds[j], bounds[j + 1] - bounds[j]
        seg_q, seg_v = rollout(model, q, v, lambda t, q, v, k0=k0: control(t + k0 * dt, q, v), dt, n,
                               step=semi_implicit_euler_step)
        ref_q.append(seg_q[1:])
        ref_v.append(seg_v[1:])
        q, v = seg_q[-1], seg_v[-1]
    np.testing.assert_allclose(qs, jnp.concatenate(ref_q), rtol=0, atol=1e-10)
    np.testing.assert_allclose(vs, jnp.concatenate(ref_v), rtol=0, atol=1e-10)


def test_validation_errors():
    design = spacecraft_design()
    bad = np.array(CONFIGURATIONS[1])
    bad[1, 1] = 0                                            # one-sided pointer 3 -> 2
    with pytest.raises(ValueError, match="one-sided"):
        reconfigurable_model(design, bad)
    with pytest.raises(ValueError, match="interfaces must be"):
        reconfigurable_model(design, np.array(CONFIGURATIONS[1])[:, :2])
