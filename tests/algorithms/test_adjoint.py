"""The adjoint of forward dynamics (`jaxsoa.algorithms.adjoint`): `aba`, `aba_free_floating` and
`forward_dynamics_constrained` (both methods) differentiated by their custom JVP rule, checked

* against central finite differences (`jax.test_util.check_grads`, forward and reverse mode, order
  1, float64) in every floating argument: q, v, τ, f_ext and every float field of the model
  (mass, com, inertia_com, placements, joint axes, gravity, armature; the cut frames for closures);
* against plain autodiff of the same recursions (`aba_autodiff`,
  `forward_dynamics_constrained_autodiff`): every cotangent, model parameters included.

Systems: the Panda, a random free-floating tree, a random 30-link tree (revolute, prismatic and
spherical joints), the four-bar loop and the planar grasp of tests/constraints/test_closure.py,
and Talos (free-flyer). Each test compiles gradients of both paths (18–37 s at load ~1.4 on a
2-core machine, 2–4x that under load), so the fast set is the 4-link free-floating tree (about 20 s
per test) and the float0 check; the other systems, the closed loops, forward mode / Hessians and a
rollout gradient are marked `slow`.

Where the two derivatives legitimately differ (both are derivatives of extensions of the dynamics
off its domain, which agree on it):
* `inertia_com`: only the symmetric part, which is what the adjoint returns (the recursions assume a
  symmetric inertia; autodiff through ABA adds an antisymmetric component; finite differences step
  symmetrically);
* the dense constrained method, `placement_rotation`: only the component tangent to SO(3),
  skew(Rᵀ R̄) (its forward solve uses CRBA, the adjoint residual RNEA; the two agree on rotations,
  not on arbitrary 3x3 matrices), so finite differences step placement rotations on SO(3);
* closure `basis`: only its non-zero entries, the others held at zero. Its sparsity pattern is
  structure, not a parameter: a non-zero entry in an unused row adds a constraint (a rank change of
  G_c: the dynamics jump; autodiff of the pseudo-inverse returns its constant-rank formula there,
  the adjoint zero), and one in the rotation-about-z column switches the cut's rotation error to the
  log map (`jaxsoa.constraints.closure`).
"""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import jaxsoa
from jaxsoa.algorithms.dynamics import aba, aba_autodiff
from jaxsoa.algorithms.free_floating import aba_free_floating, base_and_joint_dofs
from jaxsoa.constraints.dynamics import forward_dynamics_constrained, forward_dynamics_constrained_autodiff
from jaxsoa.multibody.config_space import quaternion_columns
from jaxsoa.multibody.joints import JointType
from jaxsoa.spatial.rotation import exp_so3
from tests.constraints.test_closure import EYE, _closed_cut, four_bar, four_bar_state, grasp_model, to_joint
from tests.helpers.trees import build_jaxsoa, random_tree

MODEL_FIELDS = ("placement_rotation", "placement_translation", "mass", "com", "inertia_com", "joint_axis", "gravity",
                "armature")
# Two float64 evaluation orders of the same derivative: measured agreement 1e-16 … 1e-12 relative to
# max(1, max |gradient|) (gradients up to ~1e4 on the 30-link tree); 1e-9 leaves room for other BLAS.
AUTODIFF_TOL = 1e-9
# Central differences with step 1e-6 (check_grads' default 1e-4 leaves a truncation error ~1e-8 f'''
# of 6e-7 relative on the Panda's q̈ ~ 2e3, above its tolerance on the small entries): truncation
# ~1e-12 f''', round-off ~1e-16 |f| / 1e-6 <= 1e-6 for |f| <= 1e4; check_grads' default float64
# tolerance (1e-5, relative and absolute, scaled by its own eps factor) is kept.
FD_STEP = 1e-6


def state(model, rng, scale=1.0):
    """q (unit quaternions), v, τ, f_ext of a random state."""
    q = rng.uniform(-1.0, 1.0, model.nq)
    columns = quaternion_columns(model)
    q[columns] /= np.linalg.norm(q[columns], axis=-1, keepdims=True)
    return (jnp.asarray(q), jnp.asarray(scale * rng.normal(size=model.nv)), jnp.asarray(rng.normal(size=model.nv)),
            jnp.asarray(0.5 * rng.normal(size=(model.n_links, 6))))


def params_of(model):
    return {name: getattr(model, name) for name in MODEL_FIELDS}


RELATIVE_FIELDS = ("mass", "inertia_com")


def perturbed(model):
    """(zeros like the model's float fields, δ -> the model at θ + δ): finite differences in θ with a
    step relative to the mass and inertia entries (a 1e-4 step on a 1e-5 kg m² finger inertia would
    not be a small step) and absolute in the other fields; inertia steps symmetric and placement
    rotations stepped on SO(3), R exp([δω]×) (module docstring)."""
    params = params_of(model)
    R = params.pop("placement_rotation")

    def at(delta):
        delta = dict(delta, inertia_com=symmetric_part(delta["inertia_com"]))
        rotation = R @ exp_so3(delta["placement_rotation"])
        return with_params(model, {k: x * (1 + delta[k]) if k in RELATIVE_FIELDS else x + delta[k]
                                   for k, x in params.items()} | {"placement_rotation": rotation})
    zero = jax.tree.map(jnp.zeros_like, params) | {"placement_rotation": jnp.zeros(R.shape[:-1], R.dtype)}
    return zero, at


def with_params(model, params):
    return dataclasses.replace(model, **params)


def symmetric_part(x):
    return 0.5 * (x + jnp.swapaxes(x, -1, -2))


def tangent_part(R, R_bar):
    """skew(Rᵀ R̄): the component of a rotation-matrix cotangent along SO(3)."""
    A = jnp.swapaxes(R, -1, -2) @ R_bar
    return A - jnp.swapaxes(A, -1, -2)


def assert_close(adjoint, autodiff, tol=AUTODIFF_TOL):
    """Every leaf: max |a − b| / max(1, max |b|) below tol; reports the worst leaf."""
    paths = jax.tree_util.tree_leaves_with_path(autodiff)
    for (path, ref), x in zip(paths, jax.tree.leaves(adjoint), strict=True):
        x, ref = np.asarray(x), np.asarray(ref)
        error = np.abs(x - ref).max(initial=0.0) / max(1.0, np.abs(ref).max(initial=0.0))
        assert error < tol, f"{jax.tree_util.keystr(path)}: {error:.2e}"


def comparable(grads, model, dense=False):
    """The parts of a (params, ...) cotangent both derivatives define (module docstring)."""
    params = dict(grads[0], inertia_com=symmetric_part(grads[0]["inertia_com"]))
    if dense:
        params["placement_rotation"] = tangent_part(model.placement_rotation, params["placement_rotation"])
    return params, *grads[1:]


# ---------------------------------------------------------------------------------------------
# tree systems: aba and aba_free_floating

def _tree(n_links, floating, seed):
    """A random tree; the free-floating one has a free root and 1-DoF joints (one spherical-free
    compile), the 30-link one revolute, prismatic and spherical joints."""
    rng = np.random.default_rng(seed)
    types = (JointType.REVOLUTE, JointType.PRISMATIC) if floating else None
    return build_jaxsoa(random_tree(rng, n_links, joint_types=types, floating=floating))


@pytest.fixture(scope="module")
def trees(panda):
    return {"panda": panda, "floating_tree": _tree(4, True, 3), "tree30": _tree(30, False, 4)}


def aba_loss(fd, model):
    """L(params, q, v, τ, f_ext) = Σ w ⊙ q̈ + ½ |q̈|² / nv (a fixed random weight w)."""
    w = jnp.asarray(np.random.default_rng(9).normal(size=model.nv))

    def loss(params, q, v, tau, f_ext):
        qdd = fd(with_params(model, params), q, v, tau, f_ext)
        return jnp.sum(w * qdd) + 0.5 * jnp.sum(qdd**2) / model.nv
    return loss


TREE_CASES = [pytest.param("panda", marks=pytest.mark.slow), "floating_tree",
              pytest.param("tree30", marks=pytest.mark.slow)]


@pytest.mark.parametrize("name", TREE_CASES)
def test_aba_gradients_match_autodiff(trees, name):
    """Reverse mode: the adjoint's cotangents of every argument equal plain autodiff's, two states
    (one batched call of each)."""
    model = trees[name]
    rng = np.random.default_rng(1)
    states = [state(model, rng) for _ in range(2)]
    q, v, tau, f_ext = (jnp.stack(x) for x in zip(*states, strict=True))

    @jax.jit
    def both(params, q, v, tau, f_ext):
        grads = [jax.vmap(jax.grad(aba_loss(fd, model), argnums=(0, 1, 2, 3, 4)), (None, 0, 0, 0, 0))(
            params, q, v, tau, f_ext) for fd in (aba, aba_autodiff)]
        return [comparable(g, model) for g in grads]

    adjoint, autodiff = both(params_of(model), q, v, tau, f_ext)
    assert_close(adjoint, autodiff)


@pytest.mark.parametrize("name", TREE_CASES)
def test_aba_check_grads(trees, name):
    """Forward and reverse mode of `aba` against central differences in q, v, τ, f_ext and every
    model parameter."""
    model = trees[name]
    q, v, tau, f_ext = state(model, np.random.default_rng(2))
    delta, at = perturbed(model)
    fd = jax.jit(lambda delta, q, v, tau, f_ext: aba(at(delta), q, v, tau, f_ext))
    check_grads(fd, (delta, q, v, tau, f_ext), order=1, modes=("fwd", "rev"), eps=FD_STEP)


@pytest.mark.slow
def test_aba_free_floating(trees):
    """`aba_free_floating` (its hub force is zero; the adjoint acts through `aba`): central
    differences in both modes, and equality with autodiff of the recursion."""
    model = trees["floating_tree"]
    q, v, tau, f_ext = state(model, np.random.default_rng(3))
    _, joints = base_and_joint_dofs(model)
    tau_joints = tau[joints]

    def reference(model, q, v, tau_joints, f_ext):
        return aba_autodiff(model, q, v, jnp.zeros(model.nv).at[joints].set(tau_joints), f_ext)

    delta, at = perturbed(model)
    fd = jax.jit(lambda delta, q, v, t, f: aba_free_floating(at(delta), q, v, t, f))
    check_grads(fd, (delta, q, v, tau_joints, f_ext), order=1, modes=("fwd", "rev"), eps=FD_STEP)
    args = (params_of(model), q, v, tau_joints, f_ext)
    grads = jax.jit(lambda *a: [comparable(jax.grad(aba_loss(f, model), argnums=(0, 1, 2, 3, 4))(*a), model)
                                for f in (aba_free_floating, reference)])(*args)
    assert_close(*grads)


@pytest.mark.slow
def test_forward_mode_and_hessian_match_autodiff(trees):
    """jacfwd and the Hessian (forward over reverse through the custom rule) equal autodiff's."""
    model = trees["floating_tree"]
    q, v, tau, f_ext = state(model, np.random.default_rng(4))

    @jax.jit
    def both(q, v):
        out = []
        for fd in (aba, aba_autodiff):
            loss = aba_loss(fd, model)
            out.append((jax.jacfwd(lambda q, fd=fd: fd(model, q, v, tau, f_ext))(q),
                        jax.hessian(lambda v, loss=loss: loss(params_of(model), q, v, tau, f_ext))(v)))
        return out

    assert_close(*both(q, v))


@pytest.mark.slow
def test_rollout_gradient_matches_autodiff(trees):
    """Reverse mode through a 20-step RK4 rollout (the integrator's stage loop and the step scan)
    of the free-floating tree: gradient w.r.t. q0, v0, the torques and the masses."""
    model = trees["floating_tree"]
    q0, v0, _, _ = state(model, np.random.default_rng(5), scale=0.3)
    taus = jnp.asarray(np.random.default_rng(6).normal(size=(20, model.nv)))

    def loss(fd, mass, q0, v0, taus):
        control = lambda t, q, v: taus[jnp.round(t / 0.01).astype(jnp.int32)]   # noqa: E731
        step = lambda *a, **k: jaxsoa.rk4_step(*a, **k, dynamics=fd)          # noqa: E731
        qs, vs = jaxsoa.rollout(dataclasses.replace(model, mass=mass), q0, v0, control, 0.01, 20, step=step)
        return jnp.sum(qs**2) + jnp.sum(vs**2)

    grads = jax.jit(lambda *a: [jax.grad(functools.partial(loss, fd), argnums=(0, 1, 2, 3))(*a)
                                for fd in (aba, aba_autodiff)])(model.mass, q0, v0, taus)
    assert_close(*grads)


@pytest.mark.slow
def test_talos_gradients_match_autodiff():
    """Talos (free-flyer, 39 links): reverse-mode cotangents equal autodiff's, one state."""
    path = str(jaxsoa.io.example_robot_urdf("talos"))
    model = jaxsoa.load_urdf(path, floating_base=True, dtype=jnp.float64)
    args = (params_of(model), *state(model, np.random.default_rng(7)))
    grads = jax.jit(lambda *a: [comparable(jax.grad(aba_loss(fd, model), argnums=(0, 1, 2, 3, 4))(*a), model)
                                for fd in (aba, aba_autodiff)])(*args)
    assert_close(*grads)


# ---------------------------------------------------------------------------------------------
# closed loops: forward_dynamics_constrained

@pytest.fixture(scope="module")
def loops():
    """{name: (model, closure, (q, v, τ, f_ext))}: the four-bar 1e-2 off its manifold (Baumgarte
    on) and the grasp closed at its state."""
    rng = np.random.default_rng(8)
    model, closure = four_bar()
    q, v = (jnp.asarray(x) for x in to_joint(*four_bar_state(0.7, 1.3)))
    out = {"four_bar": (model, closure, (q + 0.01, v, jnp.asarray(rng.normal(size=3)),
                                          jnp.asarray(rng.normal(size=(3, 6)))))}
    model = grasp_model()
    q = jnp.asarray([-1.2, 0.6, -2.0])
    grasp = _closed_cut(model, q, 2, 3, (EYE, np.array([0.5, 0, 0])), "revolute", planar=True)
    out["grasp"] = (model, grasp, (q, jnp.asarray([0.5, 0.0, -1.0]), jnp.asarray(rng.normal(size=3)),
                                   jnp.asarray(rng.normal(size=(4, 6)))))
    return out


def float_closure(closure):
    """The closure's floating fields (the differentiable ones) and a rebuild from them that keeps
    the basis entries that are zero at zero (module docstring)."""
    used = np.asarray(closure.basis) != 0

    def rebuild(fields):
        return closure._replace(**dict(fields, basis=jnp.where(used, fields["basis"], 0.0)))
    return {k: jnp.asarray(getattr(closure, k)) for k in ("R_a_cut", "p_a_cut", "R_b_cut", "p_b_cut", "basis")}, rebuild


def constrained_loss(fd, model, rebuild, method):
    w = jnp.asarray(np.random.default_rng(10).normal(size=model.nv))

    def loss(params, q, v, tau, f_ext, cut):
        qdd, lam = fd(with_params(model, params), q, v, tau, rebuild(cut), f_ext, baumgarte=(5.0, 7.0),
                      method=method)
        return jnp.sum(w * qdd) + 0.5 * jnp.sum(qdd**2) + jnp.sum(jnp.sin(lam))
    return loss


LOOP_CASES = [pytest.param("four_bar", "recursive", marks=pytest.mark.slow),
              pytest.param("four_bar", "dense", marks=pytest.mark.slow),
              pytest.param("grasp", "recursive", marks=pytest.mark.slow),
              pytest.param("grasp", "dense", marks=pytest.mark.slow)]


@pytest.mark.parametrize(("name", "method"), LOOP_CASES)
def test_constrained_check_grads(loops, name, method):
    """The adjoint of the KKT system against central differences in both modes: q, v, τ, f_ext, the
    model parameters and the cut frames."""
    model, closure, (q, v, tau, f_ext) = loops[name]
    cut, rebuild = float_closure(closure)
    delta, at = perturbed(model)

    def fd(delta, q, v, tau, f_ext, cut):
        return forward_dynamics_constrained(at(delta), q, v, tau, rebuild(cut), f_ext, baumgarte=(5.0, 7.0),
                                            method=method)

    check_grads(jax.jit(fd), (delta, q, v, tau, f_ext, cut), order=1, modes=("fwd", "rev"), eps=FD_STEP)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "method"), [p.values for p in LOOP_CASES])
def test_constrained_gradients_match_autodiff(loops, name, method):
    """The adjoint of the KKT system: every cotangent equals autodiff's through the solves."""
    model, closure, (q, v, tau, f_ext) = loops[name]
    cut, rebuild = float_closure(closure)
    args = (params_of(model), q, v, tau, f_ext, cut)
    grads = jax.jit(lambda *a: [
        comparable(jax.grad(constrained_loss(f, model, rebuild, method), argnums=(0, 1, 2, 3, 4, 5))(*a), model,
                   dense=method == "dense")
        for f in (forward_dynamics_constrained, forward_dynamics_constrained_autodiff)])(*args)
    assert_close(*grads)


def test_integer_fields_get_float0_cotangents(trees):
    """The topology is data: `jax.grad(..., allow_int=True)` w.r.t. the whole model returns float0
    cotangents for its integer fields and the float cotangents above for the others."""
    model = trees["floating_tree"]
    q, v, tau, _ = state(model, np.random.default_rng(11))
    grad = jax.jit(jax.grad(lambda m: jnp.sum(aba(m, q, v, tau)), allow_int=True))(model)
    assert grad.traversal.parent.dtype == jax.dtypes.float0
    assert grad.inboard_interface.dtype == jax.dtypes.float0
    assert grad.mass.dtype == model.mass.dtype


@pytest.mark.parametrize("name", ["panda", "floating_tree"])
def test_adjoint_solve_at_rest_is_the_inverse_mass_matrix(trees, name):
    """The adjoint's solve M⁻¹ b (`_aba_recursion` with v None: no velocity pass) on the gravity-free model equals
    a dense solve with CRBA's M(q), a second code path (1e-10 relative, float64: M's condition number ~1e3), with
    and without external wrenches (then M⁻¹ (b + Σ Jᵀ f_ext), Jᵀ f_ext from `generalized_force`)."""
    from jaxsoa.algorithms import dynamics
    from jaxsoa.algorithms.adjoint import without_gravity
    model = without_gravity(trees[name])
    rng = np.random.default_rng(30)
    q, _, b, f_ext = state(model, rng)
    M = jaxsoa.crba(model, q)
    got = dynamics._aba_recursion(model, q, None, b)
    ref = jnp.linalg.solve(M, b)
    assert float(jnp.max(jnp.abs(got - ref)) / jnp.max(jnp.abs(ref))) < 1e-10
    got = dynamics._aba_recursion(model, q, None, b, f_ext)
    ref = jnp.linalg.solve(M, b + dynamics.generalized_force(model, q, f_ext))
    assert float(jnp.max(jnp.abs(got - ref)) / jnp.max(jnp.abs(ref))) < 1e-10
