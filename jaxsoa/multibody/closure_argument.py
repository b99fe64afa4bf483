"""The check of a `jaxsoa.constraints.LoopClosure` argument at the entry points that take one
(`jaxsoa.multibody.arguments.entry_point`'s "closure" kind; docs/user_guide.md, "Errors and checks")."""

import jax
import jax.numpy as jnp
import numpy as np

CLOSURE_FIELDS = {"link_a": (), "link_b": (), "R_a_cut": (3, 3), "p_a_cut": (3,), "R_b_cut": (3, 3),
                  "p_b_cut": (3,), "basis": (6, 6), "active": ()}
"""Per-cut shape of each field of a `jaxsoa.constraints.LoopClosure` (leading axis: the cuts)."""


def check_loop_closure(name, closure, model):
    """A `LoopClosure`'s fields: each (n_cuts, ...) as `CLOSURE_FIELDS` says, integer links, bool `active`,
    floating frames and basis (cast to the model's dtype); concrete link indices in [−1, n) (−1: the
    world), traced ones pass. TypeError / ValueError naming the argument, the field and the cut."""
    if not all(hasattr(closure, field) for field in CLOSURE_FIELDS) or not hasattr(closure, "_replace"):
        raise TypeError(f"argument '{name}' must be a LoopClosure, got {type(closure).__name__}")
    n_cuts = jnp.shape(closure.link_a)[:1]
    for field, shape in CLOSURE_FIELDS.items():
        value = getattr(closure, field)
        if jnp.ndim(value) != 1 + len(shape) or tuple(jnp.shape(value)) != (*n_cuts, *shape):
            expected = "(n_cuts" + "".join(f", {d}" for d in shape) + ")"
            raise ValueError(f"argument '{name}': field '{field}' has shape {tuple(jnp.shape(value))}, expected "
                             f"{expected}, n_cuts = {n_cuts[0] if n_cuts else 'the length of link_a'}")
        kind = jnp.result_type(value)
        want = ("integer" if field.startswith("link") else "bool" if field == "active" else "floating")
        ok = (jnp.issubdtype(kind, jnp.integer) if want == "integer" else kind == jnp.bool_ if want == "bool"
              else jnp.issubdtype(kind, jnp.floating))
        if not ok:
            raise TypeError(f"argument '{name}': field '{field}' must have {'an' if want == 'integer' else 'a'} {want} "
                            f"dtype, got {kind}")
    for field in ("link_a", "link_b"):
        links = getattr(closure, field)
        if isinstance(links, jax.core.Tracer):
            continue
        links = np.asarray(links)
        bad = (links < -1) | (links >= model.n_links)
        if bad.any():
            raise ValueError(f"argument '{name}': cut {int(np.flatnonzero(bad)[0])} field '{field}' = "
                             f"{int(links[bad][0])} is not a link of the model ({model.n_links} links; -1 = world)")
    return closure._replace(**{f: jnp.asarray(getattr(closure, f), model.dtype)
                               for f in ("R_a_cut", "p_a_cut", "R_b_cut", "p_b_cut", "basis")})
