"""Counting what a traced program contains."""

import jax
import jax.extend.core


def count_primitive(jaxpr, name: str) -> int:
    """Occurrences of primitive `name` in a jaxpr, nested jaxprs included."""
    total = 0
    for eqn in jaxpr.eqns:
        total += eqn.primitive.name == name
        for sub in jax.extend.core.jaxprs_in_params(eqn.params):
            total += count_primitive(sub, name)
    return total


def count_float_barriers(jaxpr, nested: bool = True) -> int:
    """`optimization_barrier` equations with a floating-point operand (the tie and the fence of
    `jaxsoa.multibody.tied`, not the integer predicate of `jaxsoa.multibody.batch_last.always`), in `jaxpr`
    alone or with its nested jaxprs."""
    total = 0
    for eqn in jaxpr.eqns:
        total += eqn.primitive.name == "optimization_barrier" and any(
            jax.numpy.issubdtype(x.aval.dtype, jax.numpy.inexact) for x in eqn.invars)
        if nested:
            total += sum(count_float_barriers(sub) for sub in jax.extend.core.jaxprs_in_params(eqn.params))
    return total
