"""Argument checks at every public entry point (`jaxsoa.multibody.arguments.entry_point`).

Every function of the package that carries `argument_kinds` is called here with valid arguments
(it must run), then with each state argument one entry short, one entry long, with a trailing unit
axis and with an integer dtype, and each required one as None: each must raise naming the argument.
Valid inputs are unchanged by the checks: float32 states on a float64 model are cast (equal to the
float64 call to float32 rounding), and a leading batch equals `jax.vmap` of the per-sample call exactly
(the same program).
"""

import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import checkify

import jaxsoa
from jaxsoa.multibody.arguments import SHAPES
from jaxsoa.multibody.joints import JointType
from tests.helpers.trees import build_jaxsoa, random_tree

NAMESPACES = (jaxsoa.algorithms, jaxsoa.constraints, jaxsoa.integrators, jaxsoa.multibody, jaxsoa.workflows, jaxsoa.io)
SKIP = {"rollout_switching",          # needs a reconfigurable design: tests/integrators/test_rollout_checks.py
        "passive_force"}              # needs MJCF joint properties: tests/io/test_mjcf.py


def _entry_points():
    found = {}
    for namespace in NAMESPACES:
        for name in dir(namespace):
            fn = getattr(namespace, name)
            if callable(fn) and hasattr(fn, "argument_kinds") and name not in SKIP:
                found[name] = fn
    return found


ENTRY_POINTS = _entry_points()


@pytest.fixture(scope="module")
def models():
    rng = np.random.default_rng(3)
    fixed = build_jaxsoa(random_tree(rng, 4, joint_types=(JointType.REVOLUTE, JointType.PRISMATIC)))
    free = build_jaxsoa(random_tree(rng, 4, joint_types=(JointType.REVOLUTE,), floating=True))
    return fixed, free


def _value(kind, model, rng):
    if kind == "link":
        return 2
    if kind == "dt":
        return 0.01
    if kind == "steps":
        return 2
    if kind == "closure":
        return jaxsoa.loop_closure(1, 3, (np.eye(3), np.zeros(3)), (np.eye(3), np.zeros(3)), "spherical",
                                   model=model)
    if kind == "mask_v":
        return jnp.ones(model.nv, bool)
    if kind == "q":
        return jaxsoa.random_configuration(model, jax.random.PRNGKey(0), 0.5)
    return jnp.asarray(0.1 * rng.normal(size=SHAPES[kind](model)))


def _call_arguments(name, fn, model):
    """Valid keyword arguments for `fn` on `model` (kinds from `argument_kinds`, the rest by name)."""
    rng = np.random.default_rng(0)
    kwargs = {next(iter(inspect.signature(fn).parameters)): model}
    for arg, kind in fn.argument_kinds.items():
        kwargs[arg] = _value(kind, model, rng)
    params = inspect.signature(fn).parameters
    if "control" in params:
        kwargs["control"] = lambda t, q, v: jnp.zeros(model.nv)
    if "kp" in params:
        kwargs.update(kp=1.0, kd=1.0)
    if "actuated" in params:
        kwargs["actuated"] = jnp.ones(model.nv, bool)
    if "u" in params:                                       # interpolate's fraction of the way
        kwargs["u"] = 0.5
    return kwargs


def _model_for(name, models):
    fixed, free = models
    needs_free = name in {"aba_free_floating", "rnea_free_floating", "hub_response", "generalized_jacobian",
                          "computed_torque_free_floating"}
    return free if needs_free else fixed


def test_every_public_state_function_is_checked():
    """The algorithm entry points named in the user guide all carry checks (nothing forgotten)."""
    expected = {"aba", "rnea", "crba", "forward_kinematics", "frame_jacobian", "aba_free_floating",
                "rnea_free_floating", "forward_dynamics_constrained", "inverse_dynamics_constrained",
                "integrate", "rk4_step", "rollout", "rollout_constrained", "computed_torque",
                "mass_matrix_operator", "forward_dynamics_operator", "joint_torque_regressor", "center_of_mass"}
    assert expected <= set(ENTRY_POINTS), expected - set(ENTRY_POINTS)


def _corruptions(x):
    """(label, bad value): one short, one long, a trailing unit axis, an integer array."""
    x = jnp.asarray(x)
    if x.ndim == 1 and x.shape[0] > 1:
        yield "short", x[:-1]
    yield "long", jnp.concatenate([x, x[..., :1]], axis=-1)
    if x.size > 1:
        yield "trailing axis", x[..., None]
    yield "integer", jnp.zeros(x.shape, jnp.int32)


@pytest.mark.parametrize("name", sorted(ENTRY_POINTS))
def test_bad_state_shapes_and_dtypes_are_rejected(name, models):
    fn = ENTRY_POINTS[name]
    model = _model_for(name, models)
    kwargs = _call_arguments(name, fn, model)
    if name.startswith("check_"):                  # checkify checks: functionalised, the values may fail
        checkify.checkify(lambda **kw: fn(**kw))(**kwargs)
    else:
        jax.block_until_ready(fn(**kwargs))                                  # valid arguments run
    for arg, kind in fn.argument_kinds.items():
        if inspect.signature(fn).parameters[arg].default is inspect.Parameter.empty:
            with pytest.raises(TypeError, match=f"argument '{arg}' is required, got None"):
                fn(**{**kwargs, arg: None})
        if kind in ("link", "dt", "steps", "closure", "mask_v"):
            continue
        for label, bad in _corruptions(kwargs[arg]):
            error = TypeError if label == "integer" else ValueError
            with pytest.raises(error, match=f"'{arg}'"):
                fn(**{**kwargs, arg: bad})


def test_wrong_length_q_no_longer_returns_numbers(models):
    """The case that motivated the checks: `aba(chain, q[:-1], …)` used to return wrong numbers."""
    model = models[0]
    kwargs = _call_arguments("aba", jaxsoa.aba, model)
    with pytest.raises(ValueError, match=r"argument 'q' has shape \(3,\), expected \(4,\)"):
        jaxsoa.aba(model, kwargs["q"][:-1], kwargs["v"], kwargs["tau"])
    with pytest.raises(ValueError, match="'q'"):
        jax.jit(jaxsoa.rnea)(model, kwargs["q"][:, None], kwargs["v"], kwargs["v"])


def test_f_ext_shape_is_named(models):
    model = models[0]
    kwargs = _call_arguments("aba", jaxsoa.aba, model)
    with pytest.raises(ValueError, match=r"argument 'f_ext' has shape \(4, 3\), expected \(4, 6\)"):
        jaxsoa.aba(model, kwargs["q"], kwargs["v"], kwargs["tau"], jnp.zeros((4, 3)))


@pytest.mark.parametrize("link", [99, 4, -1])
def test_static_link_index_out_of_range(models, link):
    model = models[0]
    q = jaxsoa.neutral(model)
    with pytest.raises(ValueError, match="argument 'link'"):
        jaxsoa.frame_jacobian(model, q, link)
    with pytest.raises(ValueError, match="argument 'link'"):
        jax.jit(jaxsoa.frame_jacobian, static_argnums=2)(model, q, link)


def test_traced_link_index_out_of_range_is_nan(models):
    model = models[0]
    q = jaxsoa.neutral(model)
    J = jax.jit(jaxsoa.frame_jacobian)(model, q, jnp.int32(2))
    np.testing.assert_array_equal(J, jaxsoa.frame_jacobian(model, q, 2))
    assert np.all(np.isnan(jax.jit(jaxsoa.frame_jacobian)(model, q, jnp.int32(99))))
    with pytest.raises(TypeError, match="'link'"):
        jax.jit(jaxsoa.frame_jacobian)(model, q, jnp.float64(1.0))


def test_not_a_model(models):
    with pytest.raises(TypeError, match="argument 'model' must be a jaxsoa Model"):
        jaxsoa.aba({"mass": 1.0}, jnp.zeros(4), jnp.zeros(4), jnp.zeros(4))


def test_other_float_dtypes_are_cast_to_the_model_dtype(models):
    """The one dtype rule: states are cast to the model's dtype (float64 here): same numbers as
    the float64 call with inputs rounded to float32 (exactly: the cast is the only difference)."""
    model = models[0]
    kwargs = _call_arguments("aba", jaxsoa.aba, model)
    low = {k: jnp.asarray(kwargs[k], jnp.float32) for k in ("q", "v", "tau")}
    out = jaxsoa.aba(model, **low)
    assert out.dtype == jnp.float64
    np.testing.assert_array_equal(out, jaxsoa.aba(model, **{k: x.astype(jnp.float64) for k, x in low.items()}))
    lists = jaxsoa.rnea(model, [0.1, 0.2, 0.3, 0.4], [0, 0, 0, 0], [0.0] * 4)
    assert lists.dtype == jnp.float64


def test_leading_batch_equals_vmap(models):
    model = models[1]
    keys = jax.random.split(jax.random.PRNGKey(1), 5)
    q = jax.vmap(lambda k: jaxsoa.random_configuration(model, k, 0.5))(keys)
    v = jnp.asarray(np.random.default_rng(1).normal(size=(5, model.nv)))
    tau = jnp.ones(model.nv)                                       # shared by the batch
    batched = jax.jit(jaxsoa.aba)(model, q, v, tau)
    assert batched.shape == (5, model.nv)
    mapped = jax.jit(jax.vmap(jaxsoa.aba, (None, 0, 0, None)))(model, q, v, tau)
    # a free-flyer tree of 1-DoF joints: the leading batch runs the batch-last core, `vmap` the per-sample
    # recursions; the same equations in another evaluation order agree to float64 round-off
    np.testing.assert_allclose(batched, mapped, rtol=1e-12, atol=1e-12)
    crba = jax.jit(jaxsoa.crba)(model, q)                          # the batch-last CRBA: round-off again
    np.testing.assert_allclose(crba, jax.jit(jax.vmap(jaxsoa.crba, (None, 0)))(model, q), rtol=1e-12, atol=1e-12)
    placements = jax.jit(jaxsoa.forward_kinematics)(model, q)     # the batch-last outward pass: round-off
    mapped = jax.jit(jax.vmap(jaxsoa.forward_kinematics, (None, 0)))(model, q)
    for x, y in zip(jax.tree.leaves(placements), jax.tree.leaves(mapped), strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-12)
    com = jax.jit(jaxsoa.center_of_mass)(model, q)                 # no batch-last path: vmap of the per-sample code
    np.testing.assert_array_equal(com, jax.jit(jax.vmap(jaxsoa.center_of_mass, (None, 0)))(model, q))
    grid = jax.eval_shape(jaxsoa.crba, model, q.reshape(5, 1, model.nq))       # two leading axes
    assert grid.shape == (5, 1, model.nv, model.nv)
    result = jax.eval_shape(jaxsoa.rnea_free_floating, model, q, v, jnp.zeros(model.nv - 6))
    assert result.tau_joints.shape == (5, model.nv - 6) and result.base_wrench.shape == (5, 6)
    with pytest.raises(ValueError, match="different leading shapes"):
        jaxsoa.aba(model, q, v[:3], tau)


def test_checks_cost_no_recompilation(models):
    """The checks are Python on static shapes: one compilation for repeated jitted calls."""
    model = models[0]
    kwargs = _call_arguments("aba", jaxsoa.aba, model)
    traces = []

    @jax.jit
    def f(q, v, tau):
        traces.append(1)
        return jaxsoa.aba(model, q, v, tau)

    for scale in (1.0, 2.0, 3.0):
        f(scale * kwargs["q"], kwargs["v"], kwargs["tau"])
    assert len(traces) == 1
