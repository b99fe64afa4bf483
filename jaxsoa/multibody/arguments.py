"""Argument checks at the public entry points (docs/user_guide.md, "Errors and checks").

Every public function that takes a model and states is wrapped by `entry_point`, which checks,
in Python and so for free under `jit` (shapes and dtypes are static):

* the model is a `Model`;
* each state's *trailing* axes against the model — q (nq,), v / τ / a (nv,), f_ext (n, 6), the
  joint-space vectors of a free-floating model (nv − 6,) — raising `ValueError` that names the
  argument, the expected and the received shape;
* dtypes: a state must be floating point (else `TypeError`) and is cast to the model's dtype
  (the one rule at every entry point: the model's dtype is the precision of the computation);
* link indices: Python / NumPy / concrete integers must lie in [0, n) (`ValueError`), a traced
  index must be an integer scalar (an out-of-range traced index gives a NaN result, see
  `nan_unless`).

Leading axes are a batch: `aba(model, q[B, nq], v[B, nv], tau[B, nv])` runs the per-sample
function under `jax.vmap` (every batched argument must have the same leading shape; arguments
without leading axes are shared by the batch), or, where the entry point has a `BatchedPath` that
supports the model, that batched function on the leading axes flattened to one (the batch-last core,
`jaxsoa.algorithms.batch_last`). A per-sample call of such an entry point is `vmap`-aware: `jax.vmap` of it
over at least `VMAP_MIN_BATCH` samples calls the entry point once with the batch leading
(`jaxsoa.multibody.vmap_rule`), unless an argument is a function (a controller).

A stacked model (`jaxsoa.multibody.model.stack_models`, leading batch (B,) on every field) is a batch
of per-sample models: the batched states must have that leading shape (or none, and are shared), and
the call runs the `BatchedPath` where it takes stacked models, else the per-sample function under
`jax.vmap` over model and states.
"""

import functools
import inspect
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from jaxsoa.multibody.batched import (
    BatchedPath,
    guarded,
    guarded_residuals,
    in_per_sample_only,
    mapped_in_chunks,
    run_batched,
)
from jaxsoa.multibody.closure_argument import check_loop_closure
from jaxsoa.multibody.model import Model, model_batch
from jaxsoa.multibody.scalars import check_positive_steps, check_time_step
from jaxsoa.multibody.vmap_rule import vmappable_call


def _free_joint_dofs(model: Model) -> int:
    return model.nv - 6


def _free_joint_coordinates(model: Model) -> int:
    return model.nq - 7


SHAPES: dict[str, Callable] = {
    "q": lambda m: (m.nq,),
    "v": lambda m: (m.nv,),
    "f_ext": lambda m: (m.n_links, 6),
    "joints": lambda m: (_free_joint_dofs(m),),
    "joint_q": lambda m: (_free_joint_coordinates(m),),
}
"""Expected per-sample shape of each kind of state argument, from the model."""

SCALAR_KINDS = ("link", "dt", "steps", "closure", "mask_v")
"""Argument kinds checked by their own rule: a link index, a time step, a step count, a
`LoopClosure` (its link indices against the model) and a (nv,) mask of any dtype."""


def check_model_type(model, name="model") -> Model:
    """`model` itself, or `TypeError` if it is not a `Model`."""
    if not isinstance(model, Model):
        raise TypeError(f"argument '{name}' must be a jaxsoa Model, got {type(model).__name__}")
    return model


def as_state(name: str, value, dtype):
    """`value` as a floating array of `dtype` (TypeError for a non-floating or non-numeric value)."""
    if not isinstance(value, (jax.Array, np.ndarray, np.generic)):
        try:
            value = np.asarray(value)
        except (TypeError, ValueError) as err:
            raise TypeError(f"argument '{name}' must be an array, got {type(value).__name__}") from err
        if value.dtype.kind in "iub":                  # Python numbers in a list: take the model's dtype
            value = value.astype(np.float64)
    dtype_in = jnp.result_type(value)
    if not jnp.issubdtype(dtype_in, jnp.floating):
        raise TypeError(f"argument '{name}' must be a floating-point array, got dtype {dtype_in}")
    return jnp.asarray(value, dtype)


def batch_shape(name: str, shape: tuple, expected: tuple) -> tuple:
    """The leading (batch) axes of `shape` whose trailing axes must equal `expected`."""
    k = len(expected)
    if len(shape) < k or tuple(shape[len(shape) - k:]) != tuple(expected):
        raise ValueError(f"argument '{name}' has shape {tuple(shape)}, expected {tuple(expected)} "
                         f"(or (..., {', '.join(map(str, expected))}) for a batch)")
    return tuple(shape[: len(shape) - k])


def check_index(name: str, index, size: int, what="link"):
    """A static index in [0, size), or a traced integer scalar (returned as is)."""
    if isinstance(index, (bool, np.bool_)):
        raise TypeError(f"argument '{name}' must be an integer {what} index, got {index!r}")
    if isinstance(index, jax.core.Tracer):
        if index.shape != () or not jnp.issubdtype(index.dtype, jnp.integer):
            raise TypeError(f"argument '{name}' must be an integer scalar, got {index.dtype}{list(index.shape)}")
        return index
    if isinstance(index, (jax.Array, np.ndarray)):
        if index.shape != () or not jnp.issubdtype(index.dtype, jnp.integer):
            raise TypeError(f"argument '{name}' must be an integer scalar, got {index.dtype}{list(index.shape)}")
        index = int(index)
    if not isinstance(index, (int, np.integer)):
        raise TypeError(f"argument '{name}' must be an integer {what} index, got {type(index).__name__}")
    if not 0 <= index < size:
        raise ValueError(f"argument '{name}' = {index} is out of range: the model has {size} {what}s (0 … {size - 1})")
    return int(index)


def nan_unless(ok, tree):
    """`tree` with every floating leaf NaN where the traced flag `ok` is False (a NaN-marked result)."""
    def mark(leaf):
        if not jnp.issubdtype(leaf.dtype, jnp.floating):
            return leaf
        return jnp.where(ok, leaf, jnp.nan)

    return jax.tree.map(mark, tree)


REFERENCE_FRAMES = ("world", "local", "local_world_aligned")
"""Pinocchio's ReferenceFrame names, as the Jacobians take them."""


def check_reference_frame(reference) -> str:
    """`reference` if it is one of `REFERENCE_FRAMES`, else ValueError naming the argument."""
    if reference not in REFERENCE_FRAMES:
        raise ValueError(f"reference must be 'world', 'local' or 'local_world_aligned', got {reference!r}")
    return reference


def _check_special(name, kind, value, model):
    if kind == "link":
        return check_index(name, value, model.n_links, kind)
    if kind == "dt":
        return check_time_step(name, value)
    if kind == "steps":
        return check_positive_steps(name, value)
    if kind == "closure":
        return check_loop_closure(name, value, model)
    if batch_shape(name, jnp.shape(value), (model.nv,)):
        raise ValueError(f"argument '{name}' has shape {jnp.shape(value)}, expected ({model.nv},): one mask shared "
                         "by the batch")
    return value


def _checked_arguments(fn_name, bound, specs, model):
    """Check and convert the state arguments in place; returns {name: batch shape} of the checked ones."""
    batches = {}
    for name, kind in specs.items():
        value = bound.arguments.get(name)
        if value is None and bound.signature.parameters[name].default is inspect.Parameter.empty:
            raise TypeError(f"{fn_name}: argument '{name}' is required, got None")
        if value is None or (callable(value) and not isinstance(value, (jax.Array, np.ndarray))):
            continue                                   # optional (None) or a function of time/state
        if kind in SCALAR_KINDS:
            bound.arguments[name] = _check_special(name, kind, value, model)
            continue
        x = as_state(name, value, model.dtype)
        batches[name] = batch_shape(name, jnp.shape(x), SHAPES[kind](model))
        bound.arguments[name] = x
    shapes = {b for b in batches.values() if b}
    if len(shapes) > 1:
        raise ValueError(f"{fn_name}: batched arguments have different leading shapes "
                         f"{ {n: b for n, b in batches.items() if b} }")
    return batches


def _trailing(specs: dict, model: Model) -> dict:
    """{argument: per-sample shape} of the state arguments among `specs`."""
    return {name: SHAPES[kind](model) for name, kind in specs.items() if kind in SHAPES}


def _run_stacked(fn, batched, model_name, arguments, specs, batches, stacked):
    """fn on a stacked model of batch `stacked` (one axis): `batched.fn` where it takes stacked
    models, else `jax.vmap` over the model and the batched states."""
    if len(stacked) != 1:
        raise ValueError(f"{fn.__name__}: argument '{model_name}' is stacked with batch shape {stacked}: "
                         f"expected one leading axis")
    names = [name for name, b in batches.items() if b]
    for name in names:
        if batches[name] != stacked:
            raise ValueError(f"{fn.__name__}: argument '{name}' has batch shape {batches[name]}, but "
                             f"'{model_name}' is a stack of {stacked[0]} models: expected {stacked} or no batch axes")
    model = arguments[model_name]

    def per_sample(model_b, *xs):
        return fn(**{**arguments, model_name: model_b, **dict(zip(names, xs, strict=True))})

    def mapped():
        return jax.vmap(per_sample)(model, *(arguments[name] for name in names))

    if batched is not None and batched.stacked and stacked[0] > 0 and (in_per_sample_only() or batched.supports(model)):
        fallback = functools.partial(mapped_in_chunks, per_sample, (model, *(arguments[name] for name in names)),
                                     stacked)
        if in_per_sample_only():                          # a guard's fallback: per sample, in chunks
            return fallback()
        return guarded(batched, model, lambda: run_batched(batched, model, arguments, _trailing(specs, model),
                                                           stacked, model_name), fallback)
    return mapped()


def entry_point(precondition=None, batched: BatchedPath | None = None, **specs):
    """Decorator: check `fn(model, ...)`'s arguments named in `specs` ({argument: kind}, kinds in
    `SHAPES` or `SCALAR_KINDS`) and run it per sample over leading batch axes (module docstring),
    or as `batched.fn` when `batched.supports(model)`.
    `precondition(model)`, if given, runs first (a requirement on the model, e.g. its joint types,
    reported before any shape is compared)."""
    def wrap(fn):
        signature = inspect.signature(fn)
        model_name = next(iter(signature.parameters))

        @functools.wraps(fn)
        def checked(*args, **kwargs):
            try:
                bound = signature.bind(*args, **kwargs)
            except TypeError as err:
                raise TypeError(f"{fn.__name__}: {err}") from None
            model = check_model_type(bound.arguments[model_name], model_name)
            if precondition is not None:
                precondition(model)
            batches = _checked_arguments(fn.__name__, bound, specs, model)
            batched_names = [name for name, b in batches.items() if b]
            stacked = model_batch(model)
            if stacked:
                return _run_stacked(fn, batched, model_name, bound.arguments, specs, batches, stacked)
            arguments = dict(bound.arguments)
            if not batched_names and batched is not None and batched.supports(model):
                kinds = {name: "state" for name, kind in specs.items() if kind in SHAPES}
                kinds |= {model_name: "model"} if batched.stacked else {}
                residuals = batched.residuals
                if residuals is not None and batched.valid is not None and batched.valid(model) is not None:
                    residuals = guarded_residuals(batched, model_name, checked)
                return vmappable_call(checked, fn, arguments, kinds, batched.reverse, residuals, batched.given)
            if not batched_names:
                return fn(*bound.args, **bound.kwargs)
            lead = batches[batched_names[0]]

            def per_sample(*xs):
                return fn(**{**arguments, **dict(zip(batched_names, xs, strict=True))})

            def mapped():
                function = per_sample
                for _ in lead:
                    function = jax.vmap(function)
                return function(*(arguments[name] for name in batched_names))

            if batched is not None and np.prod(lead) > 0 and (in_per_sample_only() or batched.supports(model)):
                fallback = functools.partial(mapped_in_chunks, per_sample,
                                             tuple(arguments[name] for name in batched_names), lead)
                if in_per_sample_only():                  # a guard's fallback: per sample, in chunks
                    return fallback()
                return guarded(batched, model, lambda: run_batched(batched, model, arguments,
                                                                   _trailing(specs, model), lead), fallback)
            return mapped()

        checked.argument_kinds = dict(specs)          # read by the documentation and the tests
        return checked

    return wrap


MODEL_DTYPES = ("float32", "float64")
"""The dtypes a model (and so a computation) may have."""


def default_dtype(dtype=None):
    """`dtype`, or JAX's default float (float64 when `jax_enable_x64` is on, else float32); TypeError
    naming the argument 'dtype' unless it is float32 or float64 (an integer dtype would truncate the
    model's data, a half-precision one cannot hold its checks' tolerances)."""
    if dtype is None:
        return jnp.result_type(float)
    try:
        resolved = jnp.dtype(dtype)
    except TypeError as err:
        raise TypeError(f"argument 'dtype' must be float32 or float64, got {dtype!r}") from err
    if resolved.name not in MODEL_DTYPES:
        raise TypeError(f"argument 'dtype' must be float32 or float64, got {resolved.name}")
    return resolved
