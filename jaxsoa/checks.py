"""`jax.experimental.checkify` checks for traced inputs, which cannot raise inside `jit`.

    checked = checkify.checkify(lambda m, q: (check_model(m), check_configuration(m, q)))
    err, _ = jax.jit(checked)(model, q); err.throw()

Use them when a topology, inertia or configuration is produced inside a traced program (a
topology switch in a rollout, an optimiser step on inertias); host-built models are already
validated by `build_model`.
"""

import jax.numpy as jnp
from jax.experimental import checkify

from jaxsoa import joints
from jaxsoa.model import Model, link_inertia


def check_model(model: Model):
    """Traced topology and inertia checks: parents in range and not self, exactly one root, no
    cycle (every link reaches the root within n − 1 steps), masses ≥ 0, rotational inertias
    with non-negative eigenvalues."""
    n = model.n_links
    parent = model.parent
    links = jnp.arange(n, dtype=parent.dtype)
    checkify.check(jnp.all((parent >= -1) & (parent < n) & (parent != links)),
                   "parent out of range or pointing at itself: {p}", p=parent)
    checkify.check(jnp.sum(parent == -1) == 1, "expected exactly one root (parent -1), parents {p}", p=parent)
    reaches_root = _reaches_root(parent)
    checkify.check(jnp.all(reaches_root), "links in a cycle (do not reach the root): {bad}", bad=~reaches_root)
    mass, _, inertia_com = link_inertia(model)
    checkify.check(jnp.all(mass >= 0), "negative mass: {m}", m=mass)
    eig_min = jnp.linalg.eigvalsh(inertia_com)[:, 0]
    checkify.check(jnp.all(eig_min >= -1e-12 * jnp.max(jnp.abs(inertia_com))),
                   "rotational inertia not positive semi-definite, smallest eigenvalues {e}", e=eig_min)


def _reaches_root(parent):
    """(n,) bool: following parents from each link ends at -1 (pointer doubling, 2^k ≥ n steps)."""
    ancestor = parent
    for _ in range(max(1, (parent.shape[0] - 1).bit_length()) + 1):
        ancestor = jnp.where(ancestor >= 0, ancestor[jnp.maximum(ancestor, 0)], -1)   # a ← a∘a
    return ancestor == -1


def check_configuration(model: Model, q, tol=1e-6):
    """Unit quaternions (within `tol`) and finite entries in q (nq,)."""
    checkify.check(jnp.all(jnp.isfinite(q)), "q has non-finite entries: {q}", q=q)
    for joint_type in (joints.SPHERICAL, joints.FREE):
        cols = model.q_columns(joint_type)
        if cols.size:
            norms = jnp.linalg.norm(q[cols[:, -4:]], axis=-1)
            checkify.check(jnp.all(jnp.abs(norms - 1) < tol), "quaternion norms {n} are not 1", n=norms)

