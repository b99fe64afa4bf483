"""Traced validity of models and configurations: a flag (`model_valid`) and `jax.experimental.checkify`
checks (`check_model`, `check_configuration`) for values that cannot raise inside `jit`.

    checked = checkify.checkify(lambda m, q: (check_model(m), check_configuration(m, q)))
    err, _ = jax.jit(checked)(model, q); err.throw()

Use them when a topology, inertia or configuration is produced inside a traced program (a
topology switch in a rollout, an optimiser step on inertias); host-built models are already
validated by `build_model`. `check_model` covers every field `build_model` validates, with the
same tolerances; its message names the field and the link (index and name). For a batch of
models, `jax.vmap(checkify.checkify(check_model))(models)` names the failing sample too
("at mapped index i: …").
"""

import jax.numpy as jnp
from jax.experimental import checkify

from jaxsoa.multibody.config_space import quaternion_columns, unit_complex_columns
from jaxsoa.multibody.model import Model

ORTHONORMAL_TOL = 1e-9      # |RᵀR − 1|, |‖axis‖ − 1|: build_model's tolerances (float64 inputs)


def _tolerance(model, tol):
    """`tol`, raised to 100 ε of the model's dtype (float32 models cannot hold 1e-9)."""
    return max(tol, 100 * float(jnp.finfo(model.dtype).eps))


def model_violations(model: Model) -> dict:
    """{description: (n,) bool} — which links break each rule of `build_model` (traced)."""
    n = model.n_links
    parent = model.parent
    links = jnp.arange(n, dtype=parent.dtype)
    per_link = lambda x: x.reshape(n, -1)                                              # noqa: E731
    finite = lambda x: jnp.all(jnp.isfinite(per_link(x)), axis=1)                      # noqa: E731
    tol = _tolerance(model, ORTHONORMAL_TOL)
    J = model.inertia_com
    scale = jnp.maximum(1.0, jnp.max(jnp.abs(per_link(J)), axis=1))
    eig = jnp.linalg.eigvalsh(jnp.where(jnp.isfinite(J), 0.5 * (J + jnp.swapaxes(J, -1, -2)), 0.0))
    R = model.placement_rotation
    RtR = jnp.swapaxes(R, -1, -2) @ R
    axis_norm = jnp.linalg.norm(model.joint_axis, axis=-1)
    uses_axis = jnp.asarray([t.uses_axis for t in model.joint_types])
    n_if = model.mass.shape[1]
    return {
        "field 'parent' out of range or pointing at itself": (parent < -1) | (parent >= n) | (parent == links),
        "field 'parent': a root other than the first (exactly one link may have parent -1)":
            (parent == -1) & (jnp.cumsum(parent == -1) > 1),
        "field 'parent': link in a cycle (does not reach the root)": model.traversal.depth >= n,
        "field 'inboard_interface' out of range": (model.inboard_interface < 0) | (model.inboard_interface >= n_if),
        "field 'mass' is not finite": ~finite(model.mass),
        "field 'mass' is negative": jnp.any(model.mass < 0, axis=1),
        "field 'com' is not finite": ~finite(model.com),
        "field 'inertia_com' is not finite": ~finite(J),
        "field 'inertia_com' is not symmetric":
            jnp.max(per_link(jnp.abs(J - jnp.swapaxes(J, -1, -2))), axis=1) > 1e-9 * scale,
        "field 'inertia_com' is not positive semi-definite": jnp.any(eig[..., 0] < -1e-12 * scale[:, None], axis=1),
        "field 'inertia_com' violates the triangle inequality":
            jnp.any(eig[..., 0] + eig[..., 1] < eig[..., 2] * (1 - 1e-9) - 1e-12 * scale[:, None], axis=1),
        "field 'placement_rotation' or 'placement_translation' is not finite":
            ~(finite(R) & finite(model.placement_translation)),
        "field 'placement_rotation' is not a rotation matrix":
            jnp.any(jnp.max(jnp.abs(RtR - jnp.broadcast_to(jnp.eye(3, dtype=R.dtype), RtR.shape)), axis=(-1, -2))
                    > tol, axis=1)
            | jnp.any(jnp.linalg.det(R) < 0, axis=1),
        "field 'joint_axis' is not a finite unit vector":
            uses_axis & ~(jnp.abs(axis_norm - 1) <= tol),
    }


def _no_root(model: Model):
    return ~jnp.any(model.parent == -1)


def model_valid(model: Model):
    """() bool: the model passes every check of `check_model` (traced; `jax.vmap` it for a batch)."""
    bad = jnp.stack([jnp.any(v) for v in model_violations(model).values()])
    return ~jnp.any(bad) & ~_no_root(model) & jnp.all(jnp.isfinite(model.gravity))


def check_model(model: Model):
    """checkify checks of every `model_violations` rule, one root and a finite gravity; the
    message names the rule, the first offending link's index and the model's link names."""
    names = ", ".join(f"{k}: {nm}" for k, nm in enumerate(model.link_names))
    for rule, bad in model_violations(model).items():
        checkify.check(~jnp.any(bad), f"{rule} at link index {{k}} (links {names})", k=jnp.argmax(bad))
    checkify.check(~_no_root(model), "field 'parent': no root (no link has parent -1)")
    checkify.check(jnp.all(jnp.isfinite(model.gravity)), "field 'gravity' is not finite: {g}", g=model.gravity)


def check_configuration(model: Model, q, tol=1e-6):
    """Unit quaternions, planar and revolute-unbounded joints' unit (cos θ, sin θ) (within `tol`) and finite
    entries in q (nq,)."""
    checkify.check(jnp.all(jnp.isfinite(q)), "q has non-finite entries: {q}", q=q)
    units = (("quaternion", quaternion_columns(model)),
             ("planar / revolute-unbounded (cos θ, sin θ)", unit_complex_columns(model)))
    for what, cols in units:
        if cols.size:
            norms = jnp.linalg.norm(q[cols], axis=-1)                                # |q_unit|
            checkify.check(jnp.all(jnp.abs(norms - 1) < tol), f"{what} norms {{n}} are not 1", n=norms)
