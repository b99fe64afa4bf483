"""The hand-written reverse mode of the batch-last RNEA (`jaxsoa.algorithms.batch_last_rnea`) and the
rule that carries it (`jaxsoa.algorithms.adjoint.custom_reverse`), in float64:

* `custom_reverse` on a small function: reverse mode really is the hand-written `bwd` (a `bwd` scaled
  by 2 doubles the gradient and leaves forward mode alone), and with a correct `bwd` gradients,
  JVPs and Hessians equal plain autodiff (1e-14: the same arithmetic in another order); reverse mode
  saves only `fwd`'s residuals, not the linearisation of the function's scans (plain autodiff, the
  control, saves those), and the batch-last RNEA saves no more per-sample arrays than its `fwd` returns;
* the batch-last RNEA's cotangents (q, v, a, f_ext and every float field of the model) equal plain
  autodiff of the same passes (`rnea_autodiff`, JAX's transpose) on random fixed-base and
  free-floating trees with armature and link wrenches, and on a stack of different trees: 1e-12
  relative (sums of O(n) terms in another order);
* against the per-sample recursions (independent code): the state cotangents and the model fields
  both paths parametrise alike, 1e-10; `inertia_com` only in its symmetric part and `joint_axis` only
  tangent to the unit sphere, since the two paths extend the dynamics differently off those sets
  (the batch-last inertia reads the upper triangle, its joint rotation assumes a unit axis);
* forward mode, Hessian-vector products and `check_grads` (orders 1 and 2, both modes) against
  finite differences.
"""

import contextlib
import dataclasses
import io

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.ad_checkpoint import print_saved_residuals
from jax.test_util import check_grads

import jaxsoa
from jaxsoa.algorithms import batch_last_rnea as br
from jaxsoa.algorithms import dynamics
from jaxsoa.algorithms.adjoint import custom_reverse
from jaxsoa.multibody.joints import JointType
from tests.algorithms.test_batch_last import _tree_case
from tests.helpers.trees import (
    build_jaxsoa,
    random_group,
    random_permutation,
    random_tree,
    relative_error,
    stack_models,
)

FIELDS = ("mass", "com", "inertia_com", "placement_translation", "placement_rotation", "joint_axis", "gravity",
          "armature")


def _poly(context, x, y):
    """A nonlinear map (x (3,), y (2,)) -> (4,) with `context` a constant."""
    return jnp.stack([x[0] * y[1], jnp.sin(x[1]) * y[0] ** 2, x[2] * x[0] * context, jnp.exp(y[1]) * x[1]])


def _poly_rule(scale):
    def fwd(context, x, y):
        return _poly(context, x, y), (context, x, y)

    def bwd(_, res, g):
        context, x, y = res
        _, vjp = jax.vjp(lambda x, y: _poly(context, x, y), x, y)
        return tuple(scale * c for c in vjp(g))
    return custom_reverse(_poly, fwd, bwd)


def test_custom_reverse_uses_the_hand_written_bwd_and_keeps_higher_derivatives():
    x, y, c = jnp.array([0.3, -0.7, 1.1]), jnp.array([0.4, 0.9]), jnp.asarray(1.7)
    w = jnp.array([1.0, -2.0, 0.5, 3.0])

    def loss(f):
        return lambda x, y: jnp.dot(w, jnp.sin(f(c, x, y)))

    exact, doubled = _poly_rule(1.0), _poly_rule(2.0)
    ref = jax.grad(loss(_poly), argnums=(0, 1))(x, y)
    got = jax.grad(loss(exact), argnums=(0, 1))(x, y)
    twice = jax.grad(loss(doubled), argnums=(0, 1))(x, y)
    for g, r, t in zip(got, ref, twice, strict=True):
        assert relative_error(g, r) < 1e-14
        assert relative_error(t, 2 * r) < 1e-14                      # reverse mode is bwd
    tangents = (jnp.array([0.2, 0.1, -0.3]), jnp.array([1.0, 0.5]))
    assert relative_error(jax.jvp(lambda x, y: doubled(c, x, y), (x, y), tangents)[1],
                          jax.jvp(lambda x, y: _poly(c, x, y), (x, y), tangents)[1]) < 1e-14   # forward mode is JAX's
    assert relative_error(jax.hessian(loss(exact))(x, y), jax.hessian(loss(_poly))(x, y)) < 1e-14
    assert relative_error(jax.jacrev(jax.jacrev(loss(exact)))(x, y), jax.hessian(loss(_poly))(x, y)) < 1e-14
    check_grads(lambda x, y: exact(c, x, y), (x, y), order=2, modes=("fwd", "rev"))


def _saved(fn, *args):
    """(aval, source) lines of the residuals reverse mode of fn saves (`jax.ad_checkpoint`)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        print_saved_residuals(fn, *args)
    return out.getvalue().splitlines()


def _cumulative(context, x, y):
    """A scan whose linearisation saves per-step values (the sine's cosine, the carries)."""
    def body(c, x_k):
        c = jnp.sin(c) * x_k + y * context
        return c, c * c
    return jax.lax.scan(body, jnp.zeros_like(y), x)[1]


def test_custom_reverse_saves_only_the_forward_residuals():
    def fwd(context, x, y):
        return _cumulative(context, x, y), (x, y)

    def bwd(context, res, g):
        return jax.vjp(lambda x, y: _cumulative(context, x, y), *res)[1](g)

    rule = custom_reverse(_cumulative, fwd, bwd)
    x, y = jnp.ones((7, 5)), jnp.full(5, 0.5)
    plain = _saved(lambda x, y: jnp.sum(_cumulative(2.0, x, y)), x, y)
    custom = _saved(lambda x, y: jnp.sum(rule(2.0, x, y)), x, y)
    assert sum("output of scan" in line for line in plain) >= 2             # the control: autodiff saves them
    assert not any("output of scan" in line for line in custom), custom
    assert sum("[7,5]" in line for line in custom) == 1                       # x, what fwd returns


def test_batch_last_rnea_reverse_saves_what_fwd_returns():
    _, model, _ = _tree_case(0)
    batch = 13
    q, v, a, _ = _state(np.random.default_rng(1), model, batch)
    lines = _saved(lambda q, v, a: jnp.sum(jaxsoa.rnea(model, q, v, a)), q, v, a)
    per_sample = [line for line in lines if f",{batch}]" in line or f"[{batch}," in line]
    # fwd returns R, p, v_joint, a_joint, va (n, 12, B), f (n, 6, B); the frames add sin, cos (n, B), the
    # coordinates' gathers a few (B, 1); none of the (n, B) arrays of the passes' own linearisation
    assert len(per_sample) <= 12, "\n".join(per_sample)          # measured 11; before the fix, 82
    assert not any("output of scan" in line and f"{model.n_links},{batch}]" in line for line in per_sample)


def _state(rng, model, batch):
    q = jax.vmap(lambda k: jaxsoa.random_configuration(model, k))(jax.random.split(jax.random.key(3), batch))
    v, a = (jnp.asarray(rng.normal(size=(batch, model.nv))) for _ in range(2))
    return q, v, a, jnp.asarray(rng.normal(size=(batch, model.n_links, 6)))


def _loss(rnea, model, weights, fields=FIELDS):
    def loss(params, q, v, a, f_ext):
        return jnp.sum(weights * jnp.sin(rnea(dataclasses.replace(model, **params), q, v, a, f_ext)))
    return loss, {f: getattr(model, f) for f in fields}


def _gradients(rnea, model, weights, state, fields=FIELDS):
    loss, params = _loss(rnea, model, weights, fields)
    return jax.jit(jax.grad(loss, argnums=(0, 1, 2, 3, 4)))(params, *state)


@pytest.mark.parametrize("floating", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_reverse_mode_equals_plain_autodiff_of_the_passes(floating):
    rng, model, _ = _tree_case(11, n_links=7, floating=floating)
    _assert_equal_to_autodiff(rng, model, 4)


def _assert_equal_to_autodiff(rng, model, batch):
    """Every cotangent of a random loss (state and model fields) of `br.rnea` against `rnea_autodiff`'s: 1e-12."""
    state = _state(rng, model, batch)
    weights = jnp.asarray(rng.normal(size=(batch, model.nv)))
    got = _gradients(br.rnea, model, weights, state)
    ref = _gradients(br.rnea_autodiff, model, weights, state)
    for (path, g), r in zip(jax.tree_util.tree_leaves_with_path(got), jax.tree.leaves(ref), strict=True):
        assert relative_error(g, r) < 1e-12, jax.tree_util.keystr(path)


@pytest.mark.slow            # two gradient compiles of a stacked model (~30 s on a 2-core machine)
def test_reverse_mode_through_a_stack_of_trees():
    cases = random_group(np.random.default_rng(4), 6, 3, joint_types=(JointType.REVOLUTE, JointType.PRISMATIC,
                                                                       JointType.FIXED), root_type=JointType.FREE,
                         root_at=1)
    stacked = stack_models([m for _, m, _ in cases])
    rng = np.random.default_rng(5)
    q = jnp.stack([jaxsoa.random_configuration(m, jax.random.key(i)) for i, (_, m, _) in enumerate(cases)])
    v, a = (jnp.asarray(rng.normal(size=(3, stacked.nv))) for _ in range(2))
    state = (q, v, a, jnp.asarray(rng.normal(size=(3, stacked.n_links, 6))))
    weights = jnp.asarray(rng.normal(size=(3, stacked.nv)))
    got = _gradients(br.rnea, stacked, weights, state)
    ref = _gradients(br.rnea_autodiff, stacked, weights, state)
    for (path, g), r in zip(jax.tree_util.tree_leaves_with_path(got), jax.tree.leaves(ref), strict=True):
        assert relative_error(g, r) < 1e-12, jax.tree_util.keystr(path)


@pytest.mark.slow            # a gradient compile of each path (~20 s)
def test_reverse_mode_against_the_per_sample_recursions():
    rng, model, _ = _tree_case(12, n_links=6, floating=True)
    state = _state(rng, model, 3)
    weights = jnp.asarray(rng.normal(size=(3, model.nv)))

    def per_sample(m, *x):
        return jax.vmap(lambda *y: dynamics.rnea.__wrapped__(m, *y))(*x)
    got = _gradients(br.rnea, model, weights, state)
    ref = _gradients(per_sample, model, weights, state)
    for name in FIELDS:
        g, r = got[0][name], ref[0][name]
        if name == "inertia_com":
            g, r = g + jnp.swapaxes(g, -1, -2), r + jnp.swapaxes(r, -1, -2)
        if name == "joint_axis":                   # the component tangent to the unit sphere
            axis = model.joint_axis
            g, r = (x - jnp.sum(x * axis, -1, keepdims=True) * axis for x in (g, r))
        assert relative_error(g, r) < 1e-10, name
    for g, r in zip(got[1:], ref[1:], strict=True):
        assert relative_error(g, r) < 1e-10


def test_forward_mode_and_hessian_vector_products():
    rng, model, _ = _tree_case(13, n_links=4, floating=False)
    q, v, a, f_ext = _state(rng, model, 2)
    weights = jnp.asarray(rng.normal(size=(2, model.nv)))
    t = jnp.asarray(rng.normal(size=q.shape))

    def loss(fn):
        return lambda q: jnp.sum(weights * jnp.sin(fn(model, q, v, a, f_ext)))
    assert relative_error(jax.jvp(lambda q: br.rnea(model, q, v, a, f_ext), (q,), (t,))[1],
                          jax.jvp(lambda q: br.rnea_autodiff(model, q, v, a, f_ext), (q,), (t,))[1]) < 1e-12
    assert relative_error(jax.jvp(jax.grad(loss(br.rnea)), (q,), (t,))[1],
                          jax.jvp(jax.grad(loss(br.rnea_autodiff)), (q,), (t,))[1]) < 1e-12


@pytest.mark.slow            # check_grads of order 2 compiles every mode of every order (~70 s)
def test_check_grads_against_finite_differences():
    rng, model, _ = _tree_case(13, n_links=4, floating=False)
    q, v, a, f_ext = _state(rng, model, 2)
    check_grads(jax.jit(lambda q, v, mass: br.rnea(dataclasses.replace(model, mass=mass), q, v, a, f_ext)),
                (q, v, model.mass), order=2, modes=("fwd", "rev"))


def _every_joint_type():
    """(rng, model): a 9-link tree with a free root and every other joint type, stored in random order."""
    types = (JointType.REVOLUTE, JointType.PRISMATIC, JointType.SPHERICAL, JointType.PLANAR,
             JointType.REVOLUTE_UNBOUNDED, JointType.FIXED)
    rng = np.random.default_rng(21)
    tree = random_tree(rng, 9, link_types=(JointType.FREE, *types, JointType.REVOLUTE, JointType.PRISMATIC))
    return rng, build_jaxsoa(tree, permutation=random_permutation(rng, 9, root_at=4))


@pytest.mark.slow            # two gradient compiles of a tree with every joint type (~15 s)
def test_reverse_mode_equals_plain_autodiff_on_every_joint_type():
    # the coordinates' cotangents in closed form (θ̄ = Sᵀ ξ̄ for revolute and prismatic joints, ξ̄ through
    # `joint_twists` for free, spherical, planar and unbounded ones) beside the placements', on one tree of all of them
    _assert_equal_to_autodiff(*_every_joint_type(), 3)


def test_second_derivatives_across_placements_and_coordinates():
    # the frames are computed with q held and turned by θ − stop_gradient(θ) and the joint twists inside the rule
    # (`_turn`); the mixed derivatives ∂²/∂placement ∂q must still be those of the frames' true dependence
    rng, model, _ = _tree_case(14, n_links=4, floating=False)
    q, v, a, f_ext = _state(rng, model, 2)
    weights = jnp.asarray(rng.normal(size=(2, model.nv)))

    def mixed(fn):
        def loss(rotation, translation, q):
            m = dataclasses.replace(model, placement_rotation=rotation, placement_translation=translation)
            return jnp.sum(weights * jnp.sin(fn(m, q, v, a, f_ext)))
        return jax.jacfwd(jax.grad(loss, 2), (0, 1))(model.placement_rotation, model.placement_translation, q)
    for g, r in zip(mixed(br.rnea), mixed(br.rnea_autodiff), strict=True):
        assert relative_error(g, r) < 1e-12


@pytest.mark.optimized       # XLA's dead-code elimination is what this is about
@pytest.mark.parametrize("every_type", [False, True], ids=["fixed-base-1-dof", "every-joint-type"])
def test_coordinate_cotangent_forms_no_frame_cotangent(every_type):
    # q's cotangent is the closed form alone (θ̄ = Sᵀ ξ̄ for 1-DoF joints, ξ̄ through `joint_twists` for the free,
    # spherical, planar and unbounded ones): the stage forming the frames' cotangents (R̄, p̄) is compiled only
    # when a placement is differentiated too
    rng, model = _every_joint_type() if every_type else _tree_case(13, n_links=5, floating=False)[:2]
    q, v, a, f_ext = _state(rng, model, 4)

    def loss(translation, q):
        m = dataclasses.replace(model, placement_translation=translation)
        return jnp.sum(jnp.sin(br.rnea(m, q, v, a, f_ext)))

    def stages(argnums):
        hlo = jax.jit(jax.grad(loss, argnums)).lower(model.placement_translation, q).compile().as_text()
        return hlo.count("conditional(")
    assert stages(1) == stages((0, 1)) - 1
