"""Checks of the configuration parameters' inputs (`jaxsoa.topology.configuration_parameters`): the host
builder's link IDs, interface pointers, degrees and cut joint codes (ValueError naming the link ID and the
interface), the traced builder's shapes and dtypes (checked at trace time) and `max_cuts`; and the codes of the cut
joints.
"""

import jax.numpy as jnp
import numpy as np

# cut joint codes (``cut_joint_types``) -> (`jaxsoa.constraints.closure.loop_closure` cut_type, planar)
CUT_JOINT_TYPES = (("weld", False), ("revolute", False), ("spherical", False), ("weld", True), ("revolute", True))
CUT_FIELDS = ("cut_link_a", "cut_interface_a", "cut_link_b", "cut_interface_b", "cut_type")


def validated_slots(link_ids, interfaces, degree):
    """(link_ids (s,), each link's interface pointers up to its degree, {link ID: storage index}) of the host
    builder's inputs, or ValueError naming the link ID and interface (module docstring of
    `jaxsoa.topology.configuration_parameters`)."""
    link_ids = np.asarray(link_ids)
    interfaces = np.asarray(interfaces)
    if link_ids.ndim != 1 or interfaces.ndim != 2 or interfaces.shape[0] != link_ids.shape[0]:
        raise ValueError(f"link_ids must be (s,) and interfaces (s, max_degree); got {link_ids.shape}, "
                         f"{interfaces.shape}")
    if not (np.issubdtype(link_ids.dtype, np.integer) and np.issubdtype(interfaces.dtype, np.integer)):
        raise ValueError("link_ids and interfaces must be integer arrays")
    s = link_ids.shape[0]
    if s == 0:
        raise ValueError("a system needs at least one link")
    seen = {}
    for k, lid in enumerate(link_ids.tolist()):
        if not 1 <= lid <= s:
            raise ValueError(f"link ID {lid} (storage index {k}) is out of range 1..{s}")
        if lid in seen:
            raise ValueError(f"link ID {lid} is duplicated (storage indices {seen[lid]} and {k})")
        seen[lid] = k
    if degree is None:
        degree = np.full(s, interfaces.shape[1])
    degree = np.asarray(degree)
    if degree.shape != (s,):
        raise ValueError(f"degree must be (s,) = ({s},), got {degree.shape}")
    if not np.issubdtype(degree.dtype, np.integer):                   # a float degree would be truncated
        raise ValueError(f"degree must be an integer array, got dtype {degree.dtype}")
    slots = []
    for k, lid in enumerate(link_ids.tolist()):
        d = int(degree[k])
        if not 0 <= d <= interfaces.shape[1]:
            raise ValueError(f"link {lid}: degree {d} outside 0..{interfaces.shape[1]}")
        for m in range(d, interfaces.shape[1]):
            if interfaces[k, m] != 0:
                raise ValueError(f"link {lid} interface {m}: beyond its degree {d} but not padded with 0")
        row = interfaces[k, :d].tolist()
        for m, target in enumerate(row):
            if not 0 <= target <= s + 1:
                raise ValueError(f"link {lid} interface {m}: dangling pointer to {target}, not a link ID "
                                 f"(1..{s}), 0 (free end) or {s + 1} (virtual joint)")
            if target == lid:
                raise ValueError(f"link {lid} interface {m}: points to the link itself")
            if target != 0 and row.index(target) != m:
                raise ValueError(f"link {lid} interface {m}: second pointer to {target} (first at interface "
                                 f"{row.index(target)}): two joints between one pair of links (ambiguous pairing)")
        slots.append(row)
    return link_ids, slots, seen


def validated_cut_types(cut_joint_types, shape, link_ids):
    """(s, max_degree) codes in `CUT_JOINT_TYPES` (zeros, welds, when None), or ValueError naming the link and
    interface of a bad code."""
    if cut_joint_types is None:
        return np.zeros(shape, np.int64)
    codes = np.asarray(cut_joint_types)
    if codes.shape != shape or not np.issubdtype(codes.dtype, np.integer):
        raise ValueError(f"cut_joint_types must be an integer array of shape {shape}, got {codes.dtype} {codes.shape}")
    bad = np.argwhere((codes < 0) | (codes >= len(CUT_JOINT_TYPES)))
    if len(bad):
        k, m = bad[0]
        raise ValueError(f"link {link_ids[k]} interface {m}: cut_joint_types = {codes[k, m]} is not a code "
                         f"0..{len(CUT_JOINT_TYPES) - 1} of CUT_JOINT_TYPES")
    return codes


def check_max_cuts(max_cuts):
    """`max_cuts`: a static int ≥ 0 (ValueError naming it otherwise)."""
    if isinstance(max_cuts, (bool, np.bool_)) or not isinstance(max_cuts, (int, np.integer)) or max_cuts < 0:
        raise ValueError(f"argument 'max_cuts' must be an int ≥ 0, got {max_cuts!r}")


def check_traced_inputs(interfaces, link_ids, cut_joint_types):
    """Shapes and integer dtypes of the traced builder's arrays (static, so checked at trace time)."""
    interfaces, link_ids, cut_joint_types = (x if x is None or hasattr(x, "dtype") else np.asarray(x)
                                             for x in (interfaces, link_ids, cut_joint_types))
    if jnp.ndim(interfaces) != 2 or not jnp.issubdtype(jnp.result_type(interfaces), jnp.integer):
        raise ValueError(f"argument 'interfaces' must be an int (s, max_degree) array, got "
                         f"{jnp.result_type(interfaces)}{list(jnp.shape(interfaces))}")
    for name, value, shape in (("link_ids", link_ids, jnp.shape(interfaces)[:1]),
                               ("cut_joint_types", cut_joint_types, jnp.shape(interfaces))):
        if value is not None and (jnp.shape(value) != shape or not jnp.issubdtype(jnp.result_type(value), jnp.integer)):
            raise ValueError(f"argument '{name}' must be an int {shape} array, got "
                             f"{jnp.result_type(value)}{list(jnp.shape(value))}")
