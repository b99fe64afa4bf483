"""Kinematics of the example-robot-data robots of `test_example_robot_data.py` against Pinocchio.

The six robots of that module (ANYmal, A1 and UR5 on a free flyer, TIAGo, the human model, Kinova;
loaded as there, with `check_inertia="warn"` where the default refuses the file) at 3 random states
each, float64. For every jaxsoa link, against Pinocchio's BODY frame of the same name (a link
merges the links fixed to it, so its frame is that URDF link's frame):

* placements: `forward_kinematics` (R, p) vs `data.oMf`;
* link velocities and accelerations (own frame): `link_velocities`, `link_accelerations` vs
  `getFrameVelocity` / `getFrameAcceleration` in LOCAL (spatial, not classical, acceleration);
* link Jacobians in the three reference frames: `frame_jacobian` for each link and
  `joint_jacobians` vs `getFrameJacobian` (WORLD: at the world origin; LOCAL_WORLD_ALIGNED: at the
  link origin, world axes; LOCAL), each through both jaxsoa code paths: per sample (under a `vmap`
  below `VMAP_MIN_BATCH`) and, with the placements, the batch-last core (the leading-batch calls;
  a second compiled program per robot, so that test is marked `slow`);

and for the whole robot:

* centre of mass (`center_of_mass` vs `pin.centerOfMass`; both leave links welded to the world out);
* its Jacobian: `center_of_mass_jacobian` and, as a second path, d/dδ `center_of_mass(integrate(q, δ))`
  at δ = 0 (forward mode), vs `pin.jacobianCenterOfMass` (both in Pinocchio's tangent space: a free
  flyer's columns are the base-frame twist [v; ω]);
* spatial momentum about the world origin (`spatial_momentum` vs Σ oMi (I_i v_i)) and centroidal
  momentum (`centroidal_momentum` vs `computeCentroidalMomentum`), `[angular; linear]` in jaxsoa;
* kinetic energy: `kinetic_energy`, ½ Σ V_kᵀ I_k V_k from `link_velocities` and `link_spatial_inertia`,
  and ½ vᵀ M(q) v from `crba` (these robots have no armature), all vs `computeKineticEnergy`;
* potential energy: `potential_energy` and −Σ m_k gᵀ c_k over the links that can move (`forward_kinematics`,
  `link_inertia`, `welded_to_world`, `model.gravity`) vs `computePotentialEnergy`, which sums over
  Pinocchio's joints 1…, so it too leaves out what is welded to the world.

Continuous joints: θ = atan2(sin, cos) (`_q_to_jaxsoa`); Jacobian columns follow jaxsoa's velocity
order (`_coordinates`' v_index). Pinocchio's 6-vectors are [linear; angular], jaxsoa's [angular; linear].

Tolerance: relative error (max |x − ref| / max(1, max |ref|), over states, links and entries) ≤ 1e-9,
as in `test_example_robot_data.py`. These are products of ≤ 16 rigid transforms along a path (TIAGo's
fingers) and sums over ≤ 49 links in float64: they agree with Pinocchio to ~1e-15 (measured ≤ 3e-15);
1e-9 is far above the accumulated rounding and far below what a wrong frame, reference point or
coordinate order gives (errors of the order of the quantities themselves).
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pinocchio as pin
import pytest

import jaxsoa
from tests.helpers.trees import random_state, relative_error
from tests.validation.test_example_robot_data import ROBOTS, _coordinates, _load, _path, _q_to_jaxsoa

REL_TOL = 1e-9
N_STATES = 3
REFERENCES = {"world": pin.ReferenceFrame.WORLD, "local": pin.ReferenceFrame.LOCAL,
              "local_world_aligned": pin.ReferenceFrame.LOCAL_WORLD_ALIGNED}


def _per_sample(model, q, v, a) -> dict:
    """Every kinematic quantity at one state, on the per-sample code (vmapped by the caller)."""
    R, p = jaxsoa.forward_kinematics(model, q)
    V = jaxsoa.link_velocities(model, q, v)
    links = jnp.arange(model.n_links)
    mass, com, _ = jaxsoa.multibody.link_inertia(model)
    moving_mass = jnp.where(jaxsoa.algorithms.welded_to_world(model), 0.0, mass)
    com_world = p + jnp.einsum("nij,nj->ni", R, com)
    out = dict(R=R, p=p, v=V, a=jaxsoa.link_accelerations(model, q, v, a),
               com=jaxsoa.center_of_mass(model, q),
               Jcom=jax.jacfwd(lambda dv: jaxsoa.center_of_mass(model, jaxsoa.integrate(model, q, dv)))(
                   jnp.zeros_like(v)),
               h=jaxsoa.spatial_momentum(model, q, v), hg=jaxsoa.centroidal_momentum(model, q, v),
               kinetic=0.5 * jnp.sum(V * jnp.einsum("nij,nj->ni", jaxsoa.algorithms.link_spatial_inertia(model), V)),
               kinetic_crba=0.5 * (v @ (jaxsoa.crba(model, q) @ v)),
               potential=-jnp.sum(moving_mass * (com_world @ model.gravity)),
               Jcom_api=jaxsoa.center_of_mass_jacobian(model, q), kinetic_api=jaxsoa.kinetic_energy(model, q, v),
               potential_api=jaxsoa.potential_energy(model, q))
    for name in REFERENCES:
        out[f"J_{name}"] = jax.vmap(lambda k, name=name: jaxsoa.frame_jacobian(model, q, k, name))(links)
        out[f"Jall_{name}"] = jaxsoa.joint_jacobians(model, q, name)
    return out


def _leading_batch(model, q) -> dict:
    """The quantities with a batch-last path, called with q (B, nq) (the batch-last core)."""
    R, p = jaxsoa.forward_kinematics(model, q)
    out = dict(R=R, p=p)
    links = jnp.arange(model.n_links)
    for name in REFERENCES:
        out[f"J_{name}"] = jax.vmap(lambda k, name=name: jaxsoa.frame_jacobian(model, q, k, name),
                                    out_axes=1)(links)
        out[f"Jall_{name}"] = jaxsoa.joint_jacobians(model, q, name)
    return out


_per_sample_batch = jax.jit(jax.vmap(_per_sample, in_axes=(None, 0, 0, 0)))   # one compiled call per robot
_leading_batch_jit = jax.jit(_leading_batch)


def _vec(m) -> np.ndarray:
    """pin.Motion / pin.Force -> jaxsoa 6-vector [angular; linear]."""
    return np.concatenate([m.angular, m.linear])


def _pinocchio_kinematics(model, pin_model, state, v_index) -> dict:
    """The quantities of `_per_sample` from Pinocchio, in jaxsoa's layouts (links in jaxsoa storage
    order, Jacobian columns in jaxsoa's velocity order)."""
    frames = [pin_model.getFrameId(name, pin.FrameType.BODY) for name in model.link_names]
    assert all(f < pin_model.nframes for f in frames)                    # every link has its BODY frame
    data = pin_model.createData()
    out = {}

    def add(key, x):
        out.setdefault(key, []).append(np.asarray(x).copy())

    for q, v, a in zip(state["q"], state["v"], state["a"], strict=True):
        pin.forwardKinematics(pin_model, data, q, v, a)
        pin.updateFramePlacements(pin_model, data)
        pin.computeJointJacobians(pin_model, data, q)
        add("R", [data.oMf[f].rotation for f in frames])
        add("p", [data.oMf[f].translation for f in frames])
        add("v", [_vec(pin.getFrameVelocity(pin_model, data, f, pin.ReferenceFrame.LOCAL)) for f in frames])
        add("a", [_vec(pin.getFrameAcceleration(pin_model, data, f, pin.ReferenceFrame.LOCAL)) for f in frames])
        for name, reference in REFERENCES.items():
            J = np.stack([pin.getFrameJacobian(pin_model, data, f, reference) for f in frames])
            add(f"J_{name}", np.concatenate([J[:, 3:], J[:, :3]], axis=1)[..., v_index])
        momentum = pin.Force.Zero()                               # Σ oMi (I_i v_i), about the world origin
        for i in range(1, pin_model.njoints):
            momentum += data.oMi[i].act(pin_model.inertias[i] * data.v[i])
        add("h", _vec(momentum))
        add("com", pin.centerOfMass(pin_model, data, q))
        add("Jcom", pin.jacobianCenterOfMass(pin_model, data, q)[:, v_index])
        add("hg", _vec(pin.computeCentroidalMomentum(pin_model, data, q, v)))
        add("kinetic", pin.computeKineticEnergy(pin_model, data, q, v))
        add("potential", pin.computePotentialEnergy(pin_model, data, q))
    out = {key: np.stack(x) for key, x in out.items()}
    out["kinetic_crba"] = out["kinetic_api"] = out["kinetic"]
    out["potential_api"], out["Jcom_api"] = out["potential"], out["Jcom"]
    for name in REFERENCES:
        out[f"Jall_{name}"] = out[f"J_{name}"]
    return out


@functools.cache
def _case(robot):
    """(model, q, v, a in jaxsoa's layout, Pinocchio's quantities) for `robot`, shared by the two tests."""
    relative, floating, refused = ROBOTS[robot]
    model, pin_model, _ = _load(_path(relative), floating, "raise" if refused is None else "warn")
    rng = np.random.default_rng(sum(map(ord, robot)))
    state = random_state(rng, pin_model, N_STATES)
    q_parts, v_index = _coordinates(model, pin_model)
    expected = _pinocchio_kinematics(model, pin_model, state, v_index)
    # the comparisons are not vacuous: the robot moves, and the energies are not zero
    assert relative_error(expected["v"], 0.0 * expected["v"]) > 1e-2
    assert min(np.abs(expected["kinetic"]).min(), np.abs(expected["potential"]).min()) > 1e-3
    q = jnp.asarray(_q_to_jaxsoa(q_parts, state["q"]))
    return model, q, *(jnp.asarray(state[k][..., v_index]) for k in ("v", "a")), expected


def _compare(robot, got, expected) -> dict:
    for key, x in got.items():
        assert x.dtype == jnp.float64 and x.shape == expected[key].shape, (key, x.dtype, x.shape)
    errors = {key: relative_error(got[key], expected[key]) for key in got}
    print(robot, errors)                          # shown with `pytest -s` (max errors for reports)
    assert all(e <= REL_TOL for e in errors.values()), errors
    return errors


@pytest.mark.parametrize("robot", ROBOTS)
def test_kinematics_match_pinocchio(robot):
    """Every quantity, on the per-sample code (3 states under `vmap`)."""
    model, q, v, a, expected = _case(robot)
    got = _per_sample_batch(model, q, v, a)
    assert set(got) == set(expected)
    _compare(robot, got, expected)


@pytest.mark.slow
@pytest.mark.parametrize("robot", ROBOTS)
def test_batch_last_kinematics_match_pinocchio(robot):
    """Placements and Jacobians on the batch-last core (leading-batch calls); slow: a second compiled
    program per robot (~4 s each, cold, on 2 cores)."""
    model, q, _, _, expected = _case(robot)
    got = _leading_batch_jit(model, q)
    assert set(got) == {"R", "p", *(f"J{s}_{n}" for s in ("", "all") for n in REFERENCES)}
    _compare(robot, got, expected)
