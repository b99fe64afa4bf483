"""RNEA, ABA (with and without external forces) and CRBA against Pinocchio on the reference
robots: Panda (9 dof, fixed base), UR5 (6 dof, fixed base) and Solo12 (free flyer + 12 joints),
100 random states each.

q comes from `pin.randomConfiguration` within finite bounds (the URDF joint limits clipped to ±π;
the free flyer's infinite position bounds become ±π m), v, a, tau and the link-frame wrenches
f_ext are standard Gaussian. jaxsoa is evaluated in one `jit(vmap(...))` per robot
(all algorithms in one compiled function: compilation, not evaluation, dominates the run time).

Error measure: relative_error(x, ref) = max |x - ref| / max(1, max |ref|) over all states and
entries (absolute below unit scale, relative above).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.helpers.trees import (
    fext_to_pinocchio,
    jaxsoa_dynamics,
    pinocchio_dynamics,
    pinocchio_to_jaxsoa_dynamics,
    random_state,
    relative_error,
    to_jaxsoa,
)

N_STATES = 100
# float64 O(n) recursions over ≤ 13 links agree with Pinocchio to ~1e-14; 1e-9 leaves room for
# the conditioning of M⁻¹ in ABA (light fingers / feet) without hiding any modelling error.
REL_TOL = 1e-9

_batched_dynamics = jax.jit(jax.vmap(jaxsoa_dynamics, in_axes=(None, 0, 0, 0, 0, 0)))


@pytest.mark.parametrize("robot", ["panda", "ur5", "solo12"])
def test_dynamics_match_pinocchio(robot_models, robot):
    model, pin_model = robot_models[robot]
    rng = np.random.default_rng(sum(map(ord, robot)))
    state = random_state(rng, pin_model, N_STATES)
    f_ext = rng.normal(size=(N_STATES, model.n_links, 6))
    fext = [fext_to_pinocchio(model, pin_model, f) for f in f_ext]

    expected = pinocchio_to_jaxsoa_dynamics(model, pin_model, pinocchio_dynamics(pin_model, state, fext))
    js = {key: jnp.asarray(x) for key, x in to_jaxsoa(model, pin_model, state).items()}
    got = _batched_dynamics(model, js["q"], js["v"], js["a"], js["tau"], jnp.asarray(f_ext))

    errors = {key: relative_error(got[key], expected[key]) for key in expected}
    print(robot, errors)             # shown with `pytest -s` (max errors for reports)
    assert all(e <= REL_TOL for e in errors.values()), errors
    # the external wrenches must actually change the result (guards against an ignored f_ext)
    assert relative_error(expected["rnea_fext"], expected["rnea"]) > 1e-3
    assert relative_error(expected["aba_fext"], expected["aba"]) > 1e-3
