"""Kinematics against Pinocchio on the reference robots and on random trees (`tests/helpers/trees.py`):
forward kinematics (`data.oMi`), link velocities and accelerations (`data.v`, `data.a` after
`pin.forwardKinematics(model, data, q, v, a)`), frame Jacobians in the three reference frames
(`pin.getJointJacobian`), centre of mass (`pin.centerOfMass`), centroidal momentum
(`pin.computeCentroidalMomentum`) and spatial momentum about the world origin.

jaxsoa links map to Pinocchio joints by name; welded (FIXED) links of random trees map to the
joint carrying them through their placement in it (`trees.link_map`).

Both engines leave links welded to the world (a fixed base such as Panda's `panda_link0`) out of
the centre of mass (Pinocchio issues #1230 / #1286), so `center_of_mass` and
`centroidal_momentum` compare directly.

Error measure: relative_error(x, ref) = max |x - ref| / max(1, max |ref|) over states and entries.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pinocchio as pin
import pytest

import jaxsoa
from jaxsoa.multibody.joints import JointType
from tests.helpers.trees import (
    MOVING_TYPES,
    coordinate_maps,
    link_map,
    random_group,
    random_state,
    relative_error,
    stack_models,
    to_jaxsoa,
)

# Kinematics are products of ≤ 30 rigid transforms in float64: Pinocchio agrees to ~1e-14;
# 1e-10 is far below any modelling error and above accumulated rounding.
TOL = 1e-10
N_STATES = 10
REFERENCES = {"world": pin.ReferenceFrame.WORLD, "local": pin.ReferenceFrame.LOCAL,
              "local_world_aligned": pin.ReferenceFrame.LOCAL_WORLD_ALIGNED}


def jaxsoa_kinematics(model, q, v, a) -> dict:
    """Every kinematic quantity at one state; Jacobians of all links (vmapped over the link)."""
    R, p = jaxsoa.forward_kinematics(model, q)
    links = jnp.arange(model.n_links)
    out = dict(R=R, p=p, v=jaxsoa.link_velocities(model, q, v), a=jaxsoa.link_accelerations(model, q, v, a),
               com=jaxsoa.center_of_mass(model, q), hg=jaxsoa.centroidal_momentum(model, q, v),
               h=jaxsoa.spatial_momentum(model, q, v))
    for name in REFERENCES:
        out[f"J_{name}"] = jax.vmap(lambda k, name=name: jaxsoa.frame_jacobian(model, q, k, name))(links)
    return out


def _skew(w):
    return np.array([[0.0, -w[2], w[1]], [w[2], 0.0, -w[0]], [-w[1], w[0], 0.0]])


def _vec(m) -> np.ndarray:
    """pin.Motion / pin.Force -> jaxsoa 6-vector [angular; linear]."""
    return np.concatenate([m.angular, m.linear])


def pinocchio_kinematics(model, pin_model, state) -> dict:
    """The quantities of `jaxsoa_kinematics` from Pinocchio, batched, in jaxsoa's layouts
    (links in jaxsoa storage order, Jacobian columns in jaxsoa's velocity order)."""
    joint_ids, placements = link_map(model, pin_model)
    _, v_index = coordinate_maps(model, pin_model)
    data = pin_model.createData()
    out = {key: [] for key in ("R", "p", "v", "a", "com", "hg", "h", *(f"J_{n}" for n in REFERENCES))}
    for q, v, a in zip(state["q"], state["v"], state["a"], strict=True):
        pin.forwardKinematics(pin_model, data, q, v, a)
        pin.computeJointJacobians(pin_model, data, q)
        poses = [data.oMi[j] * X for j, X in zip(joint_ids, placements, strict=True)]
        out["R"].append(np.stack([M.rotation for M in poses]))
        out["p"].append(np.stack([M.translation for M in poses]))
        out["v"].append(np.stack([_vec(X.actInv(data.v[j])) for j, X in zip(joint_ids, placements, strict=True)]))
        out["a"].append(np.stack([_vec(X.actInv(data.a[j])) for j, X in zip(joint_ids, placements, strict=True)]))
        jac = {name: [] for name in REFERENCES}
        for j, X, M in zip(joint_ids, placements, poses, strict=True):
            J_world = pin.getJointJacobian(pin_model, data, j, pin.ReferenceFrame.WORLD)
            J_local = X.toActionMatrixInverse() @ pin.getJointJacobian(pin_model, data, j, REFERENCES["local"])
            J_lwa = pin.getJointJacobian(pin_model, data, j, REFERENCES["local_world_aligned"]).copy()
            J_lwa[:3] -= _skew(M.translation - data.oMi[j].translation) @ J_lwa[3:]   # joint origin -> link origin
            for name, J in (("world", J_world), ("local", J_local), ("local_world_aligned", J_lwa)):
                jac[name].append(np.concatenate([J[3:], J[:3]])[:, v_index])
        for name in REFERENCES:
            out[f"J_{name}"].append(np.stack(jac[name]))
        out["com"].append(pin.centerOfMass(pin_model, data, q).copy())
        hg = pin.computeCentroidalMomentum(pin_model, data, q, v)
        out["hg"].append(np.concatenate([hg.angular, hg.linear]))
        momentum = pin.Force.Zero()                               # Σ oMi (I_i v_i), about the world origin
        for i in range(1, pin_model.njoints):
            momentum += data.oMi[i].act(pin_model.inertias[i] * data.v[i])
        out["h"].append(_vec(momentum))
    return {key: np.stack(x) for key, x in out.items()}


_batched = jax.jit(jax.vmap(jaxsoa_kinematics, in_axes=(None, 0, 0, 0)))
_batched_models = jax.jit(jax.vmap(jax.vmap(jaxsoa_kinematics, in_axes=(None, 0, 0, 0))))


def _compare(got, expected) -> dict:
    errors = {key: relative_error(got[key], expected[key]) for key in expected}
    assert all(e <= TOL for e in errors.values()), errors
    return errors


@pytest.mark.parametrize("robot", ["panda", "ur5", "solo12"])
def test_kinematics_match_pinocchio_robots(robot_models, robot):
    model, pin_model = robot_models[robot]
    rng = np.random.default_rng(sum(map(ord, robot)))
    state = random_state(rng, pin_model, N_STATES)
    js = {key: jnp.asarray(x) for key, x in to_jaxsoa(model, pin_model, state).items()}
    got = _batched(model, js["q"], js["v"], js["a"])
    print(robot, _compare(got, pinocchio_kinematics(model, pin_model, state)))   # shown with `pytest -s`
    h, hg, com = (np.asarray(got[k]) for k in ("h", "hg", "com"))
    # spatial momentum about the origin = centroidal momentum moved back: n_O = n_G + c × p
    assert relative_error(h, np.concatenate([hg[:, :3] + np.cross(com, hg[:, 3:]), hg[:, 3:]], 1)) <= TOL


def test_kinematics_match_pinocchio_random_trees():
    """Welded links (a welded root stored inside, welded leaves and inner links), spherical
    joints, random storage orders: 3 topologies in one compiled call."""
    rng = np.random.default_rng(7)
    cases = random_group(rng, 12, 3, (JointType.FIXED, *MOVING_TYPES), root_type=JointType.FIXED, root_at=5)
    states = [random_state(rng, pin_model, N_STATES) for _, _, pin_model in cases]
    js = [to_jaxsoa(model, pin_model, s) for (_, model, pin_model), s in zip(cases, states, strict=True)]
    batch = [jnp.asarray(np.stack([x[key] for x in js])) for key in ("q", "v", "a")]
    got = _batched_models(stack_models([model for _, model, _ in cases]), *batch)
    for j, (_, model, pin_model) in enumerate(cases):
        expected = pinocchio_kinematics(model, pin_model, states[j])
        print(j, _compare({key: x[j] for key, x in got.items()}, expected))


def test_floating_random_tree_kinematics():
    """A free-flyer root stored last, spherical and welded links."""
    rng = np.random.default_rng(11)
    (_, model, pin_model), = random_group(rng, 8, 1, (JointType.FIXED, *MOVING_TYPES), root_type=JointType.FREE,
                                          root_at=7)
    state = random_state(rng, pin_model, N_STATES)
    js = {key: jnp.asarray(x) for key, x in to_jaxsoa(model, pin_model, state).items()}
    print(_compare(_batched(model, js["q"], js["v"], js["a"]), pinocchio_kinematics(model, pin_model, state)))
