"""`jax.experimental.checkify` checks for traced inputs, which cannot raise inside `jit`.

    checked = checkify.checkify(lambda m, q: (check_model(m), check_configuration(m, q)))
    err, _ = jax.jit(checked)(model, q); err.throw()

Use them when a topology, inertia or configuration is produced inside a traced program (a
topology switch in a rollout, an optimiser step on inertias); host-built models are already
validated by `build_model`.
"""

import jax.numpy as jnp
from jax.experimental import checkify

from jaxsoa.multibody.config_space import quaternion_columns
from jaxsoa.multibody.model import Model, link_inertia


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
    reaches_root = model.traversal.depth < n          # `link_depth`: ≥ n for a link in a cycle
    checkify.check(jnp.all(reaches_root), "links in a cycle (do not reach the root): {bad}", bad=~reaches_root)
    mass, _, inertia_com = link_inertia(model)
    checkify.check(jnp.all(mass >= 0), "negative mass: {m}", m=mass)
    eig_min = jnp.linalg.eigvalsh(inertia_com)[:, 0]
    checkify.check(jnp.all(eig_min >= -1e-12 * jnp.max(jnp.abs(inertia_com))),
                   "rotational inertia not positive semi-definite, smallest eigenvalues {e}", e=eig_min)


def check_configuration(model: Model, q, tol=1e-6):
    """Unit quaternions (within `tol`) and finite entries in q (nq,)."""
    checkify.check(jnp.all(jnp.isfinite(q)), "q has non-finite entries: {q}", q=q)
    cols = quaternion_columns(model)
    if cols.size:
        norms = jnp.linalg.norm(q[cols], axis=-1)
        checkify.check(jnp.all(jnp.abs(norms - 1) < tol), "quaternion norms {n} are not 1", n=norms)

