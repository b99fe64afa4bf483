"""Tying a call's constant inputs to its states, so that JAX's linearisation of an enclosing loop does not
split the call (docs/performance.md, "Loop-invariant hoisting")."""

import jax
import numpy as np

from jaxsoa.multibody.model import Model


def tied_to_states(shared, states, always: bool = False):
    """(shared, states) with every array leaf of both (the model's topology included, but its parent array, which
    tells the entry points a concrete topology from a traced one) tied together when they are differentiated:
    there, one `lax.optimization_barrier` makes each output depend on every input, so no value of the call
    depends on the model alone. Reason (docs/performance.md, "Loop-invariant
    hoisting"): linearising a loop, JAX evaluates the part of its body that depends only on loop constants
    (here the model) outside the loop; on the batch-last core that split every staged pass into a
    model-only half and a state half with batch-sized residuals between them, which made a rollout's
    gradient program 2.3× larger and its run 1.2–1.3× slower. A call that is not differentiated passes
    its arrays unchanged: there the barrier kept XLA from hoisting the model's terms out of the chunk
    loop, and cost ABA 1.25–2.7× (docs/performance.md, "The tie only where JAX linearises"). `always`: tie the
    values too, for a call that runs only under a derivative but on undifferentiated values (the forward with
    residuals of a `vmap` rule's reverse mode, evaluated inside the rule): JAX still linearises the loop around
    it and split it the same way (docs/performance.md, "The tie of a `vmap` rule's forward")."""
    kept = _parent_arrays((shared, states))
    leaves, tree = jax.tree.flatten((shared, states))
    arrays = [i for i, x in enumerate(leaves) if isinstance(x, (jax.Array, np.ndarray)) and id(x) not in kept]
    for i, x in zip(arrays, (_barrier if always else _tied)(*(leaves[i] for i in arrays)), strict=True):
        leaves[i] = x
    return jax.tree.unflatten(tree, leaves)


def fenced_constants(tree, traced: bool = False):
    """`tree` with its concrete array leaves (inside a trace: constants, such as a model closed over by a jitted
    function) passed through one `lax.optimization_barrier`, so that XLA cannot fold them into the batch-last
    passes; traced leaves, and a model's parent array (which the entry points read to tell a concrete topology
    from a traced one), are left as they are. Reason (docs/performance.md, "A model closed over by `jax.jit`"):
    XLA:CPU folded a closed-over model into the chunk loop's kernels (its inertias, and its traversal's indices
    into gathers), and ABA ran up to 1.9×, CRBA up to 2.5× slower than once fenced; behind the barrier the
    constants compile as arguments do, and the model's terms are still hoisted out of the loop. Constants are
    never differentiated, so no derivative rule is needed; reverse mode keeps the fenced arrays (the model's
    size, not the batch's) as residuals instead of reading them as constants. `traced`: fence traced leaves too
    (inside a `custom_vmap` rule, where a closed-over model arrives as a tracer that the compiled program
    replaces by its constant again)."""
    kept = _parent_arrays(tree)
    leaves, tree_def = jax.tree.flatten(tree)
    index = [i for i, x in enumerate(leaves) if isinstance(x, (jax.Array, np.ndarray))
             and (traced or not isinstance(x, jax.core.Tracer)) and id(x) not in kept]
    if index:
        for i, x in zip(index, jax.lax.optimization_barrier(tuple(leaves[i] for i in index)), strict=True):
            leaves[i] = x
    return jax.tree.unflatten(tree_def, leaves)


def _parent_arrays(tree) -> set:
    """ids of the parent arrays of the models in `tree`: the entry points read a concrete parent array as a concrete
    topology (no guard of a traced one, `jaxsoa.multibody.batched.guarded`), so ties and fences pass it unchanged."""
    models = [x for x in jax.tree.leaves(tree, is_leaf=lambda x: isinstance(x, Model)) if isinstance(x, Model)]
    return {id(model.traversal.parent) for model in models}


@jax.custom_jvp
def _tied(*arrays):
    """The arrays unchanged (a tuple); their JVP ties the primals (`_barrier`) and passes the tangents."""
    return tuple(arrays)


@jax.custom_jvp
def _barrier(*arrays):
    """The arrays through one `lax.optimization_barrier` (a tuple)."""
    return tuple(jax.lax.optimization_barrier(arrays))


def _tied_jvp(primals, tangents):
    """The primals through `_barrier` and the tangents unchanged, symbolic zeros kept (the barrier's own JVP
    instantiates them, which perturbs the undifferentiated model and makes reverse mode save and transpose
    its linearisation). `_barrier` has the same rule, so a JVP of this JVP keeps the zeros too."""
    return _barrier(*primals), tuple(tangents)


_tied.defjvp(_tied_jvp, symbolic_zeros=True)
_barrier.defjvp(_tied_jvp, symbolic_zeros=True)
