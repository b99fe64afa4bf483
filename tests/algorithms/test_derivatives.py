"""`rnea_derivatives` and `aba_derivatives` (jaxsoa/algorithms/derivatives.py) against Pinocchio 4.1's
`computeRNEADerivatives` / `computeABADerivatives`, central finite differences through `integrate`, and the
identities linking them, float64, on three random trees (`tests/helpers/trees.py`): revolute and prismatic
joints only, a free flyer at the root (with a welded link), and two spherical joints (the configuration
derivative is the tangent one, ∂f(q ⊕ δ)/∂δ, (nv, nv) as in Pinocchio).

Pinocchio fills only the upper triangle of `data.M` / `data.Minv`: they are symmetrised before comparing.
Error measure: relative_error(x, ref) = max |x − ref| / max(1, max |ref|).

float32 (a float32 model and states against the float64 result, same tree, 3 states): measured
relative errors, RNEA derivatives / ABA derivatives: revolute-prismatic 3.3e-7 / 4.8e-7, free flyer
3.8e-7 / 2.6e-6, spherical 3.6e-7 / 3.2e-7 (cond(M) 5e1–6e2; M⁻¹ amplifies rounding by it); the test
checks the free flyer, the worst, at 4e-6 / 3e-5.
"""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pinocchio as pin
import pytest

import jaxsoa
from jaxsoa.algorithms.derivatives import ABADerivatives, RNEADerivatives, aba_derivatives, rnea_derivatives
from jaxsoa.multibody.joints import JointType
from tests.helpers.trees import (
    build_jaxsoa,
    build_pinocchio,
    coordinate_maps,
    fext_to_pinocchio,
    random_state,
    random_tree,
    relative_error,
    to_jaxsoa,
)

J = JointType
TREES = {
    "revolute_prismatic": (J.REVOLUTE, J.PRISMATIC, J.REVOLUTE, J.REVOLUTE, J.PRISMATIC, J.REVOLUTE),
    "free_flyer": (J.FREE, J.REVOLUTE, J.PRISMATIC, J.REVOLUTE, J.FIXED, J.REVOLUTE),
    "spherical": (J.REVOLUTE, J.SPHERICAL, J.REVOLUTE, J.SPHERICAL, J.PRISMATIC),
}
N_STATES = 3
TOL_RNEA = 1e-12       # measured ≤ 3e-15: both are sums of ~n² products of the same rigid-body terms
TOL_ABA = 1e-11        # measured ≤ 6e-14: M⁻¹ amplifies rounding by cond(M) (~1e2–1e3 for random light links)


@jax.jit
def _derivatives(model, q, v, a, tau, f_ext):
    """Both derivative sets, without and with f_ext, on a leading batch of states."""
    return (rnea_derivatives(model, q, v, a), aba_derivatives(model, q, v, tau),
            rnea_derivatives(model, q, v, a, f_ext), aba_derivatives(model, q, v, tau, f_ext))


def _pinocchio(pin_model, state, fext):
    """Pinocchio's derivatives (M, Minv symmetrised) without and with `fext`, stacked over states."""
    data, out = pin_model.createData(), []
    for i in range(N_STATES):
        q, v, a, tau = (state[key][i] for key in ("q", "v", "a", "tau"))
        for extra in ((), (fext[i],)):
            d_q, d_v, M = (np.array(x) for x in pin.computeRNEADerivatives(pin_model, data, q, v, a, *extra))
            out.append(("rnea", bool(extra), i, (d_q, d_v, np.triu(M) + np.triu(M, 1).T)))
            d_q, d_v, Minv = (np.array(x) for x in pin.computeABADerivatives(pin_model, data, q, v, tau, *extra))
            out.append(("aba", bool(extra), i, (d_q, d_v, np.triu(Minv) + np.triu(Minv, 1).T)))
    return out


@functools.cache
def _case(name):
    """Tree, model, states (jaxsoa layout), f_ext, jaxsoa results and Pinocchio's (jaxsoa layout) of TREES[name]."""
    types = TREES[name]
    rng = np.random.default_rng(list(TREES).index(name))
    tree = random_tree(rng, len(types), link_types=types)
    model, pin_model = build_jaxsoa(tree), build_pinocchio(tree)
    state = random_state(rng, pin_model, N_STATES)
    f_ext = rng.normal(size=(N_STATES, model.n_links, 6))
    js = {key: jnp.asarray(x) for key, x in to_jaxsoa(model, pin_model, state).items()}
    ours = _derivatives(model, js["q"], js["v"], js["a"], js["tau"], jnp.asarray(f_ext))
    _, v_index = coordinate_maps(model, pin_model)
    pin_fext = [fext_to_pinocchio(model, pin_model, f) for f in f_ext]
    reference = [(*key, tuple(x[np.ix_(v_index, v_index)] for x in mats))
                 for *key, mats in _pinocchio(pin_model, state, pin_fext)]
    return dict(tree=tree, model=model, state=js, f_ext=jnp.asarray(f_ext), ours=ours, reference=reference)


@pytest.fixture(scope="module", params=list(TREES))
def case(request):
    return _case(request.param)


def test_results_are_named_tuples_of_tangent_jacobians(case):
    model = case["model"]
    rnea_d, aba_d = case["ours"][:2]
    assert isinstance(rnea_d, RNEADerivatives) and isinstance(aba_d, ABADerivatives)
    assert all(x.shape == (N_STATES, model.nv, model.nv) for x in (*rnea_d, *aba_d))


def test_derivatives_match_pinocchio(case):
    ours = dict(zip([("rnea", False), ("aba", False), ("rnea", True), ("aba", True)], case["ours"], strict=True))
    for algorithm, with_fext, i, mats in case["reference"]:
        tol = TOL_RNEA if algorithm == "rnea" else TOL_ABA
        for name, x, ref in zip(ours[algorithm, with_fext]._fields, ours[algorithm, with_fext], mats, strict=True):
            assert relative_error(x[i], ref) <= tol, (algorithm, with_fext, name, i)
    assert float(jnp.abs(case["ours"][0].dtau_dq).max()) > 1e-2          # the q-derivative is not trivially zero


def _with_armature(model, seed):
    return dataclasses.replace(model, armature=jnp.asarray(np.random.default_rng(seed).uniform(0.0, 0.1, model.nv)))


@jax.jit
def _central_differences(model, q, v, a, tau, f_ext):
    """Central differences (h = 1e-5) of RNEA and ABA along each tangent direction of q, v and a / τ: (nv, nv)."""
    h, eye = 1e-5, jnp.eye(model.nv)

    def columns(f):
        return (jax.vmap(lambda e: f(h * e))(eye) - jax.vmap(lambda e: f(-h * e))(eye)).T / (2 * h)

    def both(fn, u):
        return (columns(lambda d: fn(model, jaxsoa.integrate(model, q, d), v, u, f_ext)),
                columns(lambda d: fn(model, q, v + d, u, f_ext)), columns(lambda d: fn(model, q, v, u + d, f_ext)))

    return both(jaxsoa.rnea, a), both(jaxsoa.aba, tau)


def test_derivatives_match_central_differences_through_integrate(case):
    """Independent of Pinocchio, with rotor armature and external wrenches; one state."""
    model = _with_armature(case["model"], 1)
    q, v, a, tau = (case["state"][key][0] for key in ("q", "v", "a", "tau"))
    f_ext = case["f_ext"][0]
    fd_rnea, fd_aba = _central_differences(model, q, v, a, tau, f_ext)
    ours_rnea, ours_aba = jax.jit(lambda *x: (rnea_derivatives(model, *x[:3], x[4]),
                                             aba_derivatives(model, *x[:2], *x[3:])))(q, v, a, tau, f_ext)
    # truncation h² f''' and rounding ε/h of O(10) values, measured ≤ 1.4e-10: 1e-8
    for x, ref in zip((*ours_rnea, *ours_aba), (*fd_rnea, *fd_aba), strict=True):
        assert relative_error(x, ref) <= 1e-8


def test_aba_derivatives_are_minus_minv_times_rnea_derivatives(case):
    """At a = ABA(q, v, τ): ∂q̈/∂q = −M⁻¹ ∂τ/∂q, ∂q̈/∂v = −M⁻¹ ∂τ/∂v, and ∂q̈/∂τ · M = I."""
    model = _with_armature(case["model"], 2)

    @jax.jit
    def both(q, v, tau):
        return rnea_derivatives(model, q, v, jaxsoa.aba(model, q, v, tau)), aba_derivatives(model, q, v, tau)

    r, d = both(*(case["state"][key] for key in ("q", "v", "tau")))
    Minv = jnp.linalg.inv(r.dtau_da)
    # each side a product with M⁻¹ (cond(M) ~1e3): 1e-10 relative
    assert relative_error(d.ddq_dq, -Minv @ r.dtau_dq) <= 1e-10
    assert relative_error(d.ddq_dv, -Minv @ r.dtau_dv) <= 1e-10
    assert relative_error(d.ddq_dtau @ r.dtau_da, jnp.broadcast_to(jnp.eye(model.nv), r.dtau_da.shape)) <= 1e-10


def test_jit_vmap_and_leading_batch_agree():
    """The leading-batch call, `jax.vmap` of the per-sample call and a per-sample call agree (free flyer)."""
    case = _case("free_flyer")
    model, s = case["model"], case["state"]
    mapped = jax.jit(jax.vmap(lambda q, v, tau: aba_derivatives(model, q, v, tau)))(s["q"], s["v"], s["tau"])
    single = jax.jit(lambda q, v, a: rnea_derivatives(model, q, v, a))(s["q"][1], s["v"][1], s["a"][1])
    # the same per-sample arithmetic in differently fused programs: a few ulp
    for x, ref in zip(mapped, case["ours"][1], strict=True):
        assert relative_error(x, ref) <= 1e-12
    for x, ref in zip(single, case["ours"][0], strict=True):
        assert relative_error(x, ref[1]) <= 1e-12


def test_bad_inputs_are_named(case):
    model, s = case["model"], case["state"]
    q, v, a = s["q"][0], s["v"][0], s["a"][0]
    for args, name in (((q[:-1], v, a), "q"), ((q, v[:-1], a), "v"), ((q, v, a[:-1]), "a")):
        with pytest.raises(ValueError, match=f"'{name}'"):
            rnea_derivatives(model, *args)
    with pytest.raises(ValueError, match="'tau'"):
        aba_derivatives(model, q, v, jnp.zeros(model.nv + 1))
    with pytest.raises(ValueError, match="'f_ext'"):
        rnea_derivatives(model, q, v, a, jnp.zeros((model.n_links, 3)))


def test_float32_error():
    """A float32 model (same tree) against float64: the error the module docstring states (free flyer)."""
    case = _case("free_flyer")
    s = case["state"]
    model32 = build_jaxsoa(case["tree"], dtype=jnp.float32)
    f32 = {key: x.astype(jnp.float32) for key, x in s.items()}
    ours32 = jax.jit(lambda q, v, a, tau: (rnea_derivatives(model32, q, v, a), aba_derivatives(model32, q, v, tau)))(
        f32["q"], f32["v"], f32["a"], f32["tau"])
    assert ours32[0].dtau_dq.dtype == jnp.float32
    rnea_error = max(relative_error(x, ref) for x, ref in zip(ours32[0], case["ours"][0], strict=True))
    aba_error = max(relative_error(x, ref) for x, ref in zip(ours32[1], case["ours"][1], strict=True))
    assert rnea_error <= 4e-6 and aba_error <= 3e-5, (rnea_error, aba_error)    # ~10× the measured
