"""Where each joint's coordinates sit on the batch-last layout (`jaxsoa.multibody.batch_last`): which links
carry a 1-DoF joint (one scalar slot in the link scans), a three-column joint (spherical, planar: `TRIPLES`) or a
free joint, the index of each one's coordinates in q (B, nq) and v (B, nv), and the static gathers between those
vectors and the per-link (n, B) rows in the traversal's depth order. Everything here is decided by the joint types
(static); positions in the depth order are traced (`Traversal.inverse_order`).
"""

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from jaxsoa.multibody import batch_last as bl
from jaxsoa.multibody.joints import JointType
from jaxsoa.multibody.model import Model

HANDLED = (JointType.FIXED, JointType.REVOLUTE, JointType.PRISMATIC, JointType.SPHERICAL, JointType.FREE,
           JointType.PLANAR, JointType.REVOLUTE_UNBOUNDED)


class Triple(NamedTuple):
    """A three-column joint: `columns`, the offset in the joint's v of each motion-subspace column S₁, S₂, S₃;
    `spatial`, the index in a spatial vector [angular; linear] of each entry of the joint's v (S_k is the unit
    vector e_spatial[columns[k]])."""
    columns: tuple
    spatial: tuple


TRIPLES = {JointType.SPHERICAL: Triple((2, 1, 0), (0, 1, 2)),    # v = (ω_x, ω_y, ω_z); S₁, S₂, S₃ = e_z, e_y, e_x
           JointType.PLANAR: Triple((2, 0, 1), (3, 4, 2))}       # v = (v_x, v_y, ω_z); S₁, S₂, S₃ = ω_z, v_x, v_y


"""The joints ABA eliminates as three 1-DoF columns in the link frame (their 3×3 articulated-body step)."""


SCALAR = (JointType.REVOLUTE, JointType.PRISMATIC, JointType.REVOLUTE_UNBOUNDED)


"""The 1-DoF joints: one velocity, one motion-subspace column (`LinkData.S`)."""


def _scalar_joint(model: Model) -> np.ndarray:
    return np.isin(np.asarray(model.joint_types), SCALAR)


def scalar_links(model: Model) -> np.ndarray:
    """Static indices of the links with a 1-DoF (revolute, revolute-unbounded or prismatic) joint."""
    return np.flatnonzero(_scalar_joint(model))


def _triple_column(model: Model, k: int) -> np.ndarray:
    """(n,) index in v of each three-column link's column S_k (k = 0, 1, 2: S₁, S₂, S₃); nv for the others."""
    out = np.full(model.n_links, model.nv)
    for joint_type, triple in TRIPLES.items():
        links = model.links_of_type(joint_type)
        out[links] = np.asarray(model.idx_v)[links] + triple.columns[k]
    return out.astype(np.int32)


def link_slots(model: Model, of: str) -> np.ndarray:
    """(n,) index of each revolute or prismatic link's coordinate in q (`of="q"`), or of each 1-DoF link's
    velocity and each three-column link's S₁ column in v (`"v"`); nq / nv for the others."""
    if of == "q":
        angle_or_length = np.isin(np.asarray(model.joint_types), (JointType.REVOLUTE, JointType.PRISMATIC))
        return np.where(angle_or_length, model.idx_q, model.nq).astype(np.int32)
    return np.where(_scalar_joint(model), model.idx_v, _triple_column(model, 0)).astype(np.int32)


def triple_slots(model: Model) -> np.ndarray:
    """(2, n) index in v of each three-column link's S₂ and S₃ columns; nv for the others."""
    return np.stack([_triple_column(model, 1), _triple_column(model, 2)])


def triple_links(model: Model) -> list:
    """Static [(link, `Triple`)] of the three-column links (spherical, planar), in storage order."""
    types = np.asarray(model.joint_types)
    return [(int(k), TRIPLES[JointType(types[k])]) for k in np.flatnonzero(np.isin(types, list(TRIPLES)))]


def has_triples(model: Model) -> bool:
    """Whether the model has a three-column joint (ABA then runs three eliminations per link)."""
    return len(triple_links(model)) > 0


def free_links(model: Model) -> np.ndarray:
    """Static indices of the links with a free joint."""
    return model.links_of_type(JointType.FREE)


def scalar_coordinates(model: Model, q, *vs):
    """Depth-ordered (n, B) coordinates of the 1-DoF joints (0 elsewhere): q (B, nq), then each (B, nv)."""
    trav = model.traversal
    return [bl.to_depth_order(trav, link_slots(model, "q"), q)] + \
        [bl.to_depth_order(trav, link_slots(model, "v"), x) for x in vs]


def free_positions(model: Model):
    """Traced sequence positions of the free links (static list, one per free link)."""
    return [model.traversal.inverse_order[..., k] for k in free_links(model)]


def triple_positions(model: Model):
    """Traced sequence positions of the three-column links (static list, as `triple_links`)."""
    return [model.traversal.inverse_order[..., k] for k, _ in triple_links(model)]


def triple_coordinates(model: Model, x):
    """(2, n, B) depth-ordered S₂ and S₃ entries of x (B, nv) at the three-column links, 0 elsewhere."""
    return jnp.stack([bl.to_depth_order(model.traversal, slots, x) for slots in triple_slots(model)])


def free_spatial(model: Model, x, k_index: int):
    """The free joint k_index's (B, 6) entries [linear; angular] of x (B, nv) as a spatial 6-list
    [angular; linear] (S x for S = [[0, 1], [1, 0]])."""
    columns = model.v_columns(JointType.FREE)[k_index]
    return [x[:, c] for c in columns[3:]] + [x[:, c] for c in columns[:3]]


def joint_vector(model: Model, y_links, free_values, triple_values=()):
    """(B, nv) from the 1-DoF links' values y_links (n, B, depth order), each free joint's
    spatial 6-list [angular; linear] (stored [linear; angular]) and each three-column joint's 3-list in
    its v order (`triple_links`' order): one static row gather, no scatter."""
    scalar = scalar_links(model)
    sources = [bl.from_depth_order(model.traversal, scalar, y_links).T]          # (n_scalar, B)
    source_of = {int(c): i for i, c in enumerate(np.asarray(model.idx_v)[scalar])}
    for columns, value in zip(model.v_columns(JointType.FREE), free_values, strict=True):
        sources.append(jnp.stack(value[3:] + value[:3]))                           # (6, B)
        source_of.update({int(c): len(source_of) + j for j, c in enumerate(columns)})
    for (k, _), value in zip(triple_links(model), triple_values, strict=True):
        sources.append(jnp.stack(value))                                           # (3, B)
        source_of.update({int(model.idx_v[k]) + j: len(source_of) + j for j in range(3)})
    return jnp.concatenate(sources, 0)[np.asarray([source_of[c] for c in range(model.nv)], np.int32)].T
