"""RNEA, ABA (with and without external forces) and CRBA against Pinocchio on random trees of
2 to 30 links, built in both engines from the same random data (`tests/helpers/trees.py`): random parent
arrays, revolute / prismatic joints about random unit axes, spherical joints, welded (FIXED)
links in some trees, a free-flyer root in others, random joint placements and random physically
valid inertias.

Link IDs are arbitrary in jaxsoa, so most models store their links in a random permutation of the
tree order (parents remapped, q and v laid out in that storage order) and are compared with
Pinocchio (whose joints are added depth-first) by mapping back. Each group shares one jaxsoa
joint-type sequence in storage order: its models differ in topology, storage order, placements
and inertias, which are all traced data, so the group is evaluated by one compiled
`jit(vmap(vmap(...)))` over (model, state).

Error measure: relative_error(x, ref) = max |x - ref| / max(1, max |ref|) over all models,
states and entries.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsoa.multibody.joints import JointType
from tests.helpers.trees import (
    MOVING_TYPES,
    fext_to_pinocchio,
    jaxsoa_dynamics,
    pinocchio_dynamics,
    pinocchio_to_jaxsoa_dynamics,
    random_group,
    random_state,
    relative_error,
    stack_models,
    to_jaxsoa,
)

# float64 recursions over ≤ 30 links agree with Pinocchio to ~1e-13; 1e-9 leaves room for the
# conditioning of random light links in ABA's M⁻¹ without hiding any modelling error.
REL_TOL = 1e-9
N_MODELS = 4          # topologies per group (model 0 in tree order when possible, others permuted)
N_STATES = 7          # states per model: 4 groups x 4 models x 7 states = 112 states

WELDED = (JointType.FIXED, *MOVING_TYPES)
GROUPS = {
    # id: (n_links, joint types drawn from, root joint type (None: drawn), root's storage index)
    "n2-moving-root": (2, MOVING_TYPES, None, None),
    "n9-welded-root-stored-inside": (9, WELDED, JointType.FIXED, 4),
    "n17-floating-welded-root-stored-inside": (17, WELDED, JointType.FREE, 6),
    "n30-floating-root-stored-first": (30, MOVING_TYPES, JointType.FREE, 0),
}

_batched_dynamics = jax.jit(jax.vmap(jax.vmap(jaxsoa_dynamics, in_axes=(None, 0, 0, 0, 0, 0))))


@pytest.mark.parametrize("group", list(GROUPS))
def test_random_trees_match_pinocchio(group):
    n_links, types, root_type, root_at = GROUPS[group]
    rng = np.random.default_rng(sum(map(ord, group)))
    cases = random_group(rng, n_links, N_MODELS, types, root_type, root_at)

    inputs, expected = [], []
    for _, model, pin_model in cases:
        state = random_state(rng, pin_model, N_STATES)
        f_ext = rng.normal(size=(N_STATES, n_links, 6))
        fext = [fext_to_pinocchio(model, pin_model, f) for f in f_ext]
        expected.append(pinocchio_to_jaxsoa_dynamics(model, pin_model, pinocchio_dynamics(pin_model, state, fext)))
        js = to_jaxsoa(model, pin_model, state)
        inputs.append((js["q"], js["v"], js["a"], js["tau"], f_ext))
    batch = [jnp.asarray(np.stack(x)) for x in zip(*inputs, strict=True)]       # (models, states, ...)
    got = _batched_dynamics(stack_models([model for _, model, _ in cases]), *batch)

    errors = {key: max(relative_error(got[key][j], expected[j][key]) for j in range(N_MODELS))
              for key in expected[0]}
    print(group, errors)             # shown with `pytest -s` (max errors for reports)
    assert all(e <= REL_TOL for e in errors.values()), errors


def test_storage_permutation_is_exercised():
    """The groups really store links out of tree order, with the root away from index 0."""
    rng = np.random.default_rng(0)
    cases = random_group(rng, 9, N_MODELS, WELDED)
    parents = [np.asarray(model.parent) for _, model, _ in cases]
    assert any(np.flatnonzero(p == -1)[0] != 0 for p in parents)
    assert any((p > np.arange(len(p))).any() for p in parents)       # a parent stored after its child
