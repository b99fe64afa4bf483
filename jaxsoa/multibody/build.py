"""Host-side model builder with full validation: bad input raises `ValueError` naming the link
and the field, because traced code cannot raise."""

import warnings

import jax.numpy as jnp
import numpy as np

from jaxsoa.multibody.arguments import default_dtype
from jaxsoa.multibody.joints import JointType
from jaxsoa.multibody.model import Model
from jaxsoa.multibody.traversal import tree_traversal

STANDARD_GRAVITY = (0.0, 0.0, -9.81)


def _check_finite(name, value, link_names):
    bad = ~np.isfinite(value.reshape(value.shape[0], -1)).all(axis=1)
    if bad.any():
        raise ValueError(f"link '{link_names[np.flatnonzero(bad)[0]]}': field '{name}' is not finite")


def validate_parent(parent, link_names):
    """Check a parent array describes one tree: indices in range, exactly one root, no cycle."""
    parent = np.asarray(parent)
    n = parent.shape[0]
    for k, p in enumerate(parent):
        if not -1 <= p < n or p == k:
            raise ValueError(f"link '{link_names[k]}': field 'parent' = {p} is out of range or itself")
    roots = np.flatnonzero(parent == -1)
    if len(roots) != 1:
        names = [link_names[r] for r in roots]
        raise ValueError(f"field 'parent' must have exactly one root (parent -1), found {names}")
    for k in range(n):
        seen, j = {k}, parent[k]
        while j != -1:
            if j in seen:
                raise ValueError(f"link '{link_names[k]}': field 'parent' forms a cycle through "
                                 f"'{link_names[j]}'")
            seen.add(j)
            j = parent[j]


def validate_inertia(mass, inertia_com, link_names, tol=1e-12, check_inertia="raise"):
    """Physical consistency per link and interface: m >= 0 and J symmetric (always raised), J
    positive semi-definite and satisfying the triangle inequalities of its principal moments
    (raised, or with ``check_inertia="warn"`` a `UserWarning` naming the link, as Pinocchio loads such
    inertias: real robot files carry slightly inconsistent ones)."""
    check_inertia_option(check_inertia)
    for k in range(mass.shape[0]):
        for i in range(mass.shape[1]):
            where = f"link '{link_names[k]}' (interface {i})"
            if mass[k, i] < 0:
                raise ValueError(f"{where}: field 'mass' = {mass[k, i]} is negative")
            J = inertia_com[k, i]
            scale = max(1.0, np.abs(J).max())
            if np.abs(J - J.T).max() > 1e-9 * scale:
                raise ValueError(f"{where}: field 'inertia_com' is not symmetric")
            eig = np.linalg.eigvalsh(J)
            if eig[0] < -tol * scale:
                inconsistent(f"{where}: field 'inertia_com' is not positive definite (eigenvalues {eig})",
                             check_inertia)
            elif eig[0] + eig[1] < eig[2] * (1 - 1e-9) - tol * scale:
                inconsistent(f"{where}: field 'inertia_com' violates the triangle inequality "
                             f"(principal moments {eig})", check_inertia)


def check_inertia_option(check_inertia):
    """ValueError naming 'check_inertia' unless it is "raise" or "warn"."""
    if check_inertia not in ("raise", "warn"):
        raise ValueError(f"argument 'check_inertia' must be 'raise' or 'warn', got {check_inertia!r}")


def inconsistent(message, check_inertia):
    """Raise `ValueError(message)`, or with ``check_inertia="warn"`` warn (`UserWarning`) and go on."""
    if check_inertia == "raise":
        raise ValueError(message + " (check_inertia='warn' loads it with a warning)")
    warnings.warn(message, UserWarning, stacklevel=3)


def _integers(name, values, link_names=None):
    """(n,) int64 from integer-valued input (bool, fractional and non-numeric entries are refused)."""
    x = np.asarray(values)
    if x.ndim != 1:
        raise ValueError(f"field '{name}' must be a 1-D sequence of integers, got shape {x.shape}")
    if x.dtype.kind == "f":
        finite = np.nan_to_num(x)
        bad = np.flatnonzero(~np.isfinite(x) | (x != np.round(finite)) | (np.abs(finite) > 2**31))
        if bad.size:
            where = f"link '{link_names[bad[0]]}': " if link_names is not None and bad[0] < len(link_names) else ""
            raise ValueError(f"{where}field '{name}' = {x[bad[0]]} is not an integer")
    elif x.dtype.kind not in "iu" and x.size:
        raise TypeError(f"field '{name}' must hold integers, got dtype {x.dtype}")
    return x.astype(np.int64)


def _real(name, value, shapes):
    """Float64 copy of a real-valued field, with its shape one of `shapes` (TypeError for a
    non-float array: an array's dtype is the caller's choice, so only float32/float64 arrays and
    plain Python numbers are taken)."""
    if isinstance(value, (np.ndarray, np.generic)) or hasattr(value, "__jax_array__") or hasattr(value, "dtype"):
        dtype = np.dtype(getattr(value, "dtype", np.float64))
        if dtype not in (np.float32, np.float64):
            raise TypeError(f"field '{name}' must be a float32 or float64 array, got dtype {dtype}")
    try:
        x = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise TypeError(f"field '{name}' must be real numbers: {err}") from None
    if x.shape not in shapes:
        raise ValueError(f"field '{name}' has shape {x.shape}, expected " + " or ".join(map(str, shapes)))
    return x


def _check_carries_inertia(mass, inertia_com, nv):
    """With a joint that moves (nv > 0), at least one link must carry mass or inertia (else every dynamics
    call divides by zero). A single massless link is valid (a frame-only link; a massless leaf on a moving
    joint makes M(q) singular but leaves kinematics usable, as in Pinocchio), and so is a model of welded
    frames only (nv = 0: a static MJCF scene)."""
    if nv and not (np.any(mass != 0) or np.any(inertia_com != 0)):
        raise ValueError("fields 'mass' and 'inertia_com' are zero for every link: the model has no inertia")


def build_model(parent, joint_types, joint_axis, placement_rotation, placement_translation, mass,
                com, inertia_com, *, inboard_interface=None, link_names=None, link_joint_names=None,
                gravity=STANDARD_GRAVITY, armature=None, dtype=None, strategy="sequential", unroll=1,
                check_inertia="raise"):
    """Validate host-side arrays and return a `Model` (see `jaxsoa.multibody.model` for the shapes)
    carrying the traversal of `parent` built with `strategy` and `unroll` (see `tree_traversal`).

    Per-interface fields may omit the interface axis (one interface per link). `dtype` defaults to
    JAX's default float (float64 under `jax_enable_x64`). `armature` (nv,) ≥ 0 is the rotor inertia
    on each joint velocity (default zero). Every field is checked for its shape,
    integer-ness (parent, joint types, inboard interface) and finiteness, and the inertias for
    physical consistency; a bad field raises `ValueError` (`TypeError` for a wrong dtype) naming
    the link and the field. ``check_inertia="warn"`` turns the inertias that are not positive
    semi-definite or break the triangle inequality into warnings (`validate_inertia`).
    """
    dtype = default_dtype(dtype)
    parent = _integers("parent", parent)
    n = parent.shape[0]
    if n == 0:
        raise ValueError("field 'parent' is empty: a model needs at least one link")
    link_names = tuple(link_names or (f"link{k}" for k in range(n)))
    link_joint_names = tuple(link_joint_names or (f"joint{k}" for k in range(n)))
    if isinstance(joint_types, (str, bytes)) or not hasattr(joint_types, "__len__"):
        raise TypeError(f"field 'joint_types' must be a sequence of JointType (one per link), got "
                        f"{type(joint_types).__name__}")
    if len(joint_types) != n or len(link_names) != n or len(link_joint_names) != n:
        raise ValueError(f"fields 'joint_types', 'link_names', 'link_joint_names' need one entry per link "
                         f"({n}), got {len(joint_types)}, {len(link_names)}, {len(link_joint_names)}")
    if len(set(link_names)) != n:
        raise ValueError("field 'link_names' has duplicate names")
    joint_types = _integers("joint_types", [int(t) if isinstance(t, JointType) else t for t in joint_types],
                            link_names)
    for k, t in enumerate(joint_types):
        if t not in tuple(JointType):
            raise ValueError(f"link '{link_names[k]}': field 'joint_types' = {t} is not a joint type")
    joint_types = tuple(JointType(int(t)) for t in joint_types)
    validate_parent(parent, link_names)
    if isinstance(mass, (list, tuple)):
        try:
            mass = np.asarray(mass)
        except ValueError as err:
            raise ValueError(f"field 'mass' is not a rectangular array: {err}") from None
    n_if = np.shape(mass)[1] if np.ndim(mass) == 2 and np.shape(mass)[1] > 0 else 1

    def per_interface(name, x, tail):
        x = _real(name, x, [(n, *tail), (n, n_if, *tail)])
        if x.ndim == 1 + len(tail) and n_if != 1:
            raise ValueError(f"field '{name}' has shape {x.shape} (one interface per link), but 'mass' has {n_if} "
                             f"interfaces: expected {(n, n_if, *tail)}")
        return x[:, None] if x.ndim == 1 + len(tail) else x

    mass = per_interface("mass", mass, ())
    com = per_interface("com", com, (3,))
    inertia_com = per_interface("inertia_com", inertia_com, (3, 3))
    placement_rotation = per_interface("placement_rotation", placement_rotation, (3, 3))
    placement_translation = per_interface("placement_translation", placement_translation, (3,))
    joint_axis = _real("joint_axis", joint_axis, [(n, 3)])
    gravity = _real("gravity", gravity, [(3,)])
    if not np.all(np.isfinite(gravity)):
        raise ValueError(f"field 'gravity' = {gravity} is not finite")
    fields = dict(mass=mass, com=com, inertia_com=inertia_com, joint_axis=joint_axis,
                  placement_rotation=placement_rotation, placement_translation=placement_translation)
    for name, value in fields.items():
        _check_finite(name, value, link_names)
    with np.errstate(over="ignore", invalid="ignore"):           # huge finite entries: rejected below, quietly
        validate_inertia(mass, inertia_com, link_names, check_inertia=check_inertia)
        for k, t in enumerate(joint_types):
            if t.uses_axis and abs(np.linalg.norm(joint_axis[k]) - 1) > 1e-9:
                raise ValueError(f"link '{link_names[k]}': field 'joint_axis' is not a unit vector")
        for k in range(n):
            for i, R in enumerate(placement_rotation[k]):
                if np.abs(R.T @ R - np.eye(3)).max() > 1e-9 or np.linalg.det(R) < 0:
                    raise ValueError(f"link '{link_names[k]}' (interface {i}): field "
                                     "'placement_rotation' is not a rotation matrix")
    inboard_interface = np.zeros(n, np.int64) if inboard_interface is None else \
        _integers("inboard_interface", inboard_interface, link_names)
    if inboard_interface.shape != (n,):
        raise ValueError(f"field 'inboard_interface' has shape {inboard_interface.shape}, expected {(n,)}")
    for k, i in enumerate(inboard_interface):
        if not 0 <= i < n_if:
            raise ValueError(f"link '{link_names[k]}': field 'inboard_interface' = {i} out of range")
    nv = sum(t.nv for t in joint_types)
    _check_carries_inertia(mass, inertia_com, nv)
    armature = np.zeros(nv) if armature is None else _real("armature", armature, [(nv,)])
    if not np.all(np.isfinite(armature) & (armature >= 0)):
        raise ValueError(f"field 'armature' must be finite and non-negative, got {armature}")

    def arr(x):
        return jnp.asarray(x, dtype=dtype)

    return Model(traversal=tree_traversal(jnp.asarray(parent, jnp.int32), strategy, unroll),
                 inboard_interface=jnp.asarray(inboard_interface, jnp.int32),
                 placement_rotation=arr(placement_rotation), placement_translation=arr(placement_translation),
                 mass=arr(mass), com=arr(com), inertia_com=arr(inertia_com), joint_axis=arr(joint_axis),
                 gravity=arr(gravity), armature=arr(armature), joint_types=joint_types, link_names=link_names,
                 link_joint_names=link_joint_names)
