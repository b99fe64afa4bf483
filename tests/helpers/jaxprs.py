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
