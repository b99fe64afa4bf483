"""The wider API on one tree with every joint type (fixed, revolute, revolute-unbounded, prismatic, spherical,
planar, and a free-flyer root or a planar root), float64, against Pinocchio 4.1 built from the same data and against
second code paths in jaxsoa:

* Pinocchio: `computeRNEADerivatives` (∂τ/∂q in the tangent space, ∂τ/∂v), `computeABADerivatives` (∂q̈/∂q),
  `computeCentroidalMap` (rows reordered to jaxsoa's [angular; linear]), `computeCoriolisMatrix`, the kinetic and
  potential energies;
* second code paths: the dense SOA operators (𝓜, forward and inverse dynamics, the innovations factorisation)
  against CRBA / ABA / RNEA, `minverse` against a dense inverse of CRBA, C v = nle − g, the joint-torque regressor
  times the inertial parameters against RNEA; a 20-step RK4 rollout stays finite;
* a leading-batch rollout on the batch-last core against per-sample rollouts (a second code path).

Tolerance 1e-11 relative to max(1, max |reference|): float64 sums over 8 links agree to ~1e-14 (measured ≤ 1.3e-14);
a wrong joint convention is O(1).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pinocchio as pin
import pytest

import jaxsoa
from jaxsoa import algorithms
from jaxsoa.algorithms import batch_last_frames
from jaxsoa.multibody.joints import JointType as J
from tests.helpers.trees import build_jaxsoa, build_pinocchio, coordinate_maps, random_state, random_tree, to_jaxsoa

TOL = 1e-11
CENTROIDAL_ROWS = [3, 4, 5, 0, 1, 2]                   # Pinocchio's Ag rows [linear; angular] -> [angular; linear]


def _relative(x, ref):
    x, ref = np.asarray(x), np.asarray(ref)
    return float(np.abs(x - ref).max() / max(1.0, np.abs(ref).max()))


def _jaxsoa(model, q, v, a, tau):
    """Every jaxsoa quantity of the test at one state, in one compiled program."""
    M, C = jaxsoa.crba(model, q), jaxsoa.coriolis_matrix(model, q, v)
    rnea_derivatives = jaxsoa.rnea_derivatives(model, q, v, a)
    return dict(
        M=M, C=C, dtau_dq=rnea_derivatives.dtau_dq, dtau_dv=rnea_derivatives.dtau_dv,
        ddq_dq=jaxsoa.aba_derivatives(model, q, v, tau).ddq_dq, Ag=jaxsoa.centroidal_momentum_matrix(model, q),
        kinetic=jaxsoa.kinetic_energy(model, q, v), potential=jaxsoa.potential_energy(model, q),
        aba=jaxsoa.aba(model, q, v, tau), rnea=jaxsoa.rnea(model, q, v, a),
        mass_matrix_operator=jaxsoa.mass_matrix_operator(model, q),
        forward_dynamics_operator=jaxsoa.forward_dynamics_operator(model, q, v, tau),
        forward_dynamics_innovations=jaxsoa.forward_dynamics_innovations(model, q, v, tau),
        inverse_dynamics_operator=jaxsoa.inverse_dynamics_operator(model, q, v, a),
        minverse=jaxsoa.minverse(model, q),
        nle_minus_g=jaxsoa.nonlinear_effects(model, q, v) - jaxsoa.generalized_gravity(model, q),
        regressor_times_parameters=algorithms.joint_torque_regressor(model, q, v, a)
        @ algorithms.inertial_parameters(model).ravel(),
        rollout=jaxsoa.rollout(model, q, v, lambda t, q, v: jnp.zeros(model.nv), 0.01, 20))


@pytest.mark.parametrize("root", [J.PLANAR, J.FREE], ids=["planar_root", "free_root"])
def test_every_joint_type_through_the_wider_api(root):
    rng = np.random.default_rng(1)
    types = [root, J.REVOLUTE_UNBOUNDED, J.REVOLUTE, J.PLANAR, J.FIXED, J.SPHERICAL, J.PRISMATIC, J.REVOLUTE_UNBOUNDED]
    tree = random_tree(rng, len(types), link_types=types)
    model, pin_model = build_jaxsoa(tree), build_pinocchio(tree)
    state = random_state(rng, pin_model, 1)
    q, v, a, tau = (jnp.asarray(x[0]) for x in (to_jaxsoa(model, pin_model, state)[k] for k in ("q", "v", "a", "tau")))
    q_pin, v_pin, a_pin, tau_pin = (state[k][0] for k in ("q", "v", "a", "tau"))
    index = coordinate_maps(model, pin_model)[1]
    square = np.ix_(index, index)
    data = pin_model.createData()
    got = jax.jit(_jaxsoa)(model, q, v, a, tau)
    pin.computeRNEADerivatives(pin_model, data, q_pin, v_pin, a_pin)
    dtau_dq, dtau_dv = data.dtau_dq[square].copy(), data.dtau_dv[square].copy()
    pin.computeABADerivatives(pin_model, data, q_pin, v_pin, tau_pin)
    C = got["C"]
    errors = {
        "dtau_dq": _relative(got["dtau_dq"], dtau_dq),
        "dtau_dv": _relative(got["dtau_dv"], dtau_dv),
        "ddq_dq": _relative(got["ddq_dq"], data.ddq_dq[square]),
        "Ag": _relative(got["Ag"], pin.computeCentroidalMap(pin_model, data, q_pin)[CENTROIDAL_ROWS][:, index]),
        "coriolis": _relative(C, pin.computeCoriolisMatrix(pin_model, data, q_pin, v_pin)[square]),
        "kinetic": _relative(got["kinetic"], pin.computeKineticEnergy(pin_model, data, q_pin, v_pin)),
        "potential": _relative(got["potential"], pin.computePotentialEnergy(pin_model, data, q_pin)),
        "mass_matrix_operator": _relative(got["mass_matrix_operator"], got["M"]),
        "forward_dynamics_operator": _relative(got["forward_dynamics_operator"], got["aba"]),
        "forward_dynamics_innovations": _relative(got["forward_dynamics_innovations"], got["aba"]),
        "inverse_dynamics_operator": _relative(got["inverse_dynamics_operator"], got["rnea"]),
        "minverse": _relative(got["minverse"], np.linalg.inv(np.asarray(got["M"]))),
        "C v": _relative(C @ v, got["nle_minus_g"]),
        "regressor": _relative(got["regressor_times_parameters"], got["rnea"]),
    }
    print(errors)                                                            # shown with `pytest -s`
    assert all(e < TOL for e in errors.values()), errors
    assert float(np.abs(dtau_dq).max()) > 1e-2 and float(np.abs(C).max()) > 1e-2       # not a comparison of zeros
    trajectory = got["rollout"]
    assert np.isfinite(np.asarray(trajectory.q)).all() and np.isfinite(np.asarray(trajectory.v)).all()


def test_leading_batch_rollout_on_the_core_equals_per_sample_rollouts():
    """A leading-batch RK4 rollout (q0 (B, nq): the batch-last core at every stage, `rollout`'s batched path) of a
    tree with planar, unbounded, revolute and spherical joints under a damping controller equals the per-sample
    rollouts: 30 steps, 1e-12 (float64 rounding of the same equations in another order; measured 3e-15)."""
    rng = np.random.default_rng(0)
    types = [J.PLANAR, J.REVOLUTE_UNBOUNDED, J.REVOLUTE, J.SPHERICAL, J.REVOLUTE_UNBOUNDED]
    model = build_jaxsoa(random_tree(rng, len(types), link_types=types))
    assert batch_last_frames.supports(model)
    q0 = jax.vmap(lambda k: jaxsoa.random_configuration(model, k))(jax.random.split(jax.random.key(1), 4))
    v0 = jnp.asarray(rng.normal(size=(4, model.nv)))
    simulate = jax.jit(lambda q, v: jaxsoa.rollout(model, q, v, lambda t, q, v: -0.5 * v, 0.01, 30))
    batch = simulate(q0, v0)
    for b in range(4):
        one = simulate(q0[b], v0[b])
        assert _relative(batch.q[b], one.q) < 1e-12 and _relative(batch.v[b], one.v) < 1e-12
