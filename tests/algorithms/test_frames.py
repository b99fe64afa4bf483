"""`frame_velocity`, `frame_acceleration` and `frame_classical_acceleration` (jaxsoa/algorithms/frames.py)
against Pinocchio 4.1's `getFrameVelocity`, `getFrameAcceleration` and `getFrameClassicalAcceleration` after
`forwardKinematics(model, data, q, v, a)` and `updateFramePlacements`, in the three reference frames, float64,
for every link of two random trees (`tests/helpers/trees.py`, one Pinocchio OP_FRAME per jaxsoa link, welded
links included): a free flyer with a spherical joint, and a fixed-base tree whose root is welded to the world.
An independent check: the classical acceleration of a link origin in world axes is d²/dt² of its position
along q(t) = q ⊕ (t v + ½ t² a) (nested `jax.jvp`).

Error measure: relative_error(x, ref) = max |x − ref| / max(1, max |ref|).
float32 (a float32 model and states against float64, all links, frames and states): measured, velocity /
acceleration / classical acceleration, free flyer 4.1e-7 / 1.6e-7 / 3.1e-7, fixed base 1.0e-7 / 3.5e-7 /
3.5e-7; the test checks the free flyer at 4e-6.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pinocchio as pin
import pytest

import jaxsoa
from jaxsoa.algorithms.frames import frame_acceleration, frame_classical_acceleration, frame_velocity
from jaxsoa.multibody.joints import JointType
from tests.helpers.trees import (
    build_jaxsoa,
    build_pinocchio,
    motion_to_jaxsoa,
    random_state,
    random_tree,
    relative_error,
    to_jaxsoa,
)

J = JointType
TREES = {
    "free_flyer": (J.FREE, J.REVOLUTE, J.SPHERICAL, J.FIXED, J.PRISMATIC, J.REVOLUTE),
    "fixed_base": (J.FIXED, J.REVOLUTE, J.SPHERICAL, J.PRISMATIC, J.FIXED, J.REVOLUTE),
}
REFERENCES = {"local": pin.ReferenceFrame.LOCAL, "world": pin.ReferenceFrame.WORLD,
              "local_world_aligned": pin.ReferenceFrame.LOCAL_WORLD_ALIGNED}
FUNCTIONS = {"velocity": (frame_velocity, pin.getFrameVelocity),
             "acceleration": (frame_acceleration, pin.getFrameAcceleration),
             "classical": (frame_classical_acceleration, pin.getFrameClassicalAcceleration)}
N_STATES = 3
TOL = 1e-12            # measured ≤ 1.4e-15: a few rigid transforms of O(10) vectors in float64


def _all_frames(model, q, v, a):
    """{(quantity, reference): (n, B, 6)} of every link (traced link index), states batched (B leading)."""
    links = jnp.arange(model.n_links)
    out = {}
    for reference in REFERENCES:
        out["velocity", reference] = jax.vmap(lambda k, r=reference: frame_velocity(model, q, v, k, r))(links)
        for name in ("acceleration", "classical"):
            fn = FUNCTIONS[name][0]
            out[name, reference] = jax.vmap(lambda k, r=reference, fn=fn: fn(model, q, v, a, k, r))(links)
    return out


@functools.cache
def _case(name):
    """Tree, model, states (jaxsoa layout), all jaxsoa frame quantities and Pinocchio's."""
    types = TREES[name]
    rng = np.random.default_rng(10 + list(TREES).index(name))
    tree = random_tree(rng, len(types), link_types=types)
    model, pin_model = build_jaxsoa(tree), build_pinocchio(tree)
    state = random_state(rng, pin_model, N_STATES)
    js = {key: jnp.asarray(x) for key, x in to_jaxsoa(model, pin_model, state).items()}
    ours = jax.jit(_all_frames)(model, js["q"], js["v"], js["a"])
    data, reference = pin_model.createData(), {key: np.zeros((model.n_links, N_STATES, 6)) for key in ours}
    for i in range(N_STATES):
        pin.forwardKinematics(pin_model, data, state["q"][i], state["v"][i], state["a"][i])
        pin.updateFramePlacements(pin_model, data)
        for k, link_name in enumerate(model.link_names):
            frame = pin_model.getFrameId(link_name)
            for (name_, ref), out in reference.items():
                out[k, i] = motion_to_jaxsoa(FUNCTIONS[name_][1](pin_model, data, frame, REFERENCES[ref]).vector)
    return dict(tree=tree, model=model, state=js, ours=ours, reference=reference)


@pytest.fixture(scope="module", params=list(TREES))
def case(request):
    return _case(request.param)


def test_frames_match_pinocchio(case):
    for key, ref in case["reference"].items():
        assert case["ours"][key].shape == (case["model"].n_links, N_STATES, 6)
        assert relative_error(case["ours"][key], ref) <= TOL, key
    assert float(jnp.abs(case["ours"]["classical", "world"] - case["ours"]["acceleration", "world"]).max()) > 1e-2


def test_local_frame_is_the_link_motion(case):
    """"local" is what `link_velocities` / `link_accelerations` give (the capability the frames build on)."""
    model, s = case["model"], case["state"]
    V = jaxsoa.link_velocities(model, s["q"], s["v"])
    A = jaxsoa.link_accelerations(model, s["q"], s["v"], s["a"])
    assert relative_error(case["ours"]["velocity", "local"], jnp.swapaxes(V, 0, 1)) <= 1e-14
    assert relative_error(case["ours"]["acceleration", "local"], jnp.swapaxes(A, 0, 1)) <= 1e-14


def test_classical_acceleration_is_the_second_derivative_of_the_origin():
    """p̈ of each link origin along q(t) = q ⊕ (t v + ½ t² a), world axes: the linear part of the
    "local_world_aligned" classical acceleration (body velocity v and acceleration a at t = 0)."""
    case = _case("free_flyer")
    model, s = case["model"], case["state"]
    q, v, a = s["q"][0], s["v"][0], s["a"][0]

    def position(t):
        return jaxsoa.forward_kinematics(model, jaxsoa.integrate(model, q, t * v + 0.5 * t**2 * a)).p_world_link

    def velocity(t):
        return jax.jvp(position, (t,), (jnp.ones(()),))[1]

    p_ddot = jax.jit(lambda t: jax.jvp(velocity, (t,), (jnp.ones(()),))[1])(jnp.zeros(()))
    assert relative_error(case["ours"]["classical", "local_world_aligned"][:, 0, 3:], p_ddot) <= 1e-12


def test_jit_vmap_and_leading_batch_agree():
    """A static link under `jax.jit`, `jax.vmap` over states and per-sample calls agree with the batched ones."""
    case = _case("free_flyer")
    model, s = case["model"], case["state"]
    mapped = jax.jit(jax.vmap(lambda q, v, a: frame_classical_acceleration(model, q, v, a, 2, "world")))(
        s["q"], s["v"], s["a"])
    single = frame_velocity(model, s["q"][1], s["v"][1], 4, reference="local_world_aligned")
    assert relative_error(mapped, case["ours"]["classical", "world"][2]) <= 1e-13       # same arithmetic, re-fused
    assert relative_error(single, case["ours"]["velocity", "local_world_aligned"][4, 1]) <= 1e-13


def test_bad_inputs_are_named():
    case = _case("fixed_base")
    model, s = case["model"], case["state"]
    q, v, a = s["q"][0], s["v"][0], s["a"][0]
    with pytest.raises(ValueError, match="reference"):
        frame_velocity(model, q, v, 1, reference="body")
    with pytest.raises(ValueError, match="reference"):
        frame_classical_acceleration(model, q, v, a, 1, "LOCAL")
    with pytest.raises(ValueError, match="'link'"):
        frame_acceleration(model, q, v, a, model.n_links)
    with pytest.raises(ValueError, match="'link'"):
        frame_velocity(model, q, v, -1)
    with pytest.raises(ValueError, match="'v'"):
        frame_velocity(model, q, v[:-1], 0)
    with pytest.raises(ValueError, match="'a'"):
        frame_acceleration(model, q, v, jnp.zeros(model.nv + 1), 0)
    traced = jax.jit(lambda k: frame_velocity(model, q, v, k, "world"))(jnp.asarray(model.n_links))
    assert bool(jnp.isnan(traced).all())                               # a traced link out of range: NaN


def test_float32_error():
    """A float32 model (same tree) against float64: the error the module docstring states (free flyer)."""
    case = _case("free_flyer")
    model32 = build_jaxsoa(case["tree"], dtype=jnp.float32)
    f32 = {key: x.astype(jnp.float32) for key, x in case["state"].items()}
    ours32 = jax.jit(_all_frames)(model32, f32["q"], f32["v"], f32["a"])
    errors = {key: relative_error(x, case["ours"][key]) for key, x in ours32.items()}
    assert ours32["velocity", "world"].dtype == jnp.float32
    assert max(errors.values()) <= 4e-6, errors                        # ~10× the measured
