"""The multibody model: a frozen PyTree whose per-link data, **topology included**, are arrays.

Traced (data) fields — a new value is a new array, never a recompile:
    traversal                  the topology: `parent` (n,) int (inboard link of each link, -1 for
                               the link attached to the world) and the order derived from it
                               (`jaxsoa.multibody.traversal.Traversal`), built once by the builders
    inboard_interface (n,) int which of the link's interfaces is inboard (selects the rows below)
    placement_rotation (n, n_if, 3, 3), placement_translation (n, n_if, 3)
                               pose of link k's joint frame in its parent's frame
    mass (n, n_if), com (n, n_if, 3), inertia_com (n, n_if, 3, 3)
                               inertia of link k in its own frame (origin at its inboard joint)
    joint_axis (n, 3)          unit axis of the joints whose type `uses_axis` (ignored otherwise)
    gravity (3,)               gravitational acceleration in the world frame
    armature (nv,)             rotor inertia reflected on each joint velocity (Pinocchio's and MuJoCo's
                               `armature`): M(q) + diag(armature) in RNEA, ABA and CRBA
Static (meta) fields — sizes and layout only:
    joint_types (n,) tuple of `JointType`, link_names, link_joint_names (and the traversal's
    strategy and unroll).

Link IDs are storage indices, in any order: the traversal orders them. Change the topology with
`model.with_parent(parent)`, which rebuilds the traversal (a traced `parent` stays traced).
Generalized coordinates are laid out link by link in storage order (Pinocchio's layout when
links are stored depth-first, which `load_urdf` does).
"""

import dataclasses
from functools import cached_property

import jax
import jax.numpy as jnp
import numpy as np

from jaxsoa.multibody.joints import JointType
from jaxsoa.multibody.traversal import Traversal, tree_traversal


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Model:
    traversal: Traversal                   # parent (n,) and its derived order, carried (not rebuilt)
    inboard_interface: jax.Array           # (n,) int
    placement_rotation: jax.Array          # (n, n_if, 3, 3)
    placement_translation: jax.Array       # (n, n_if, 3)
    mass: jax.Array                        # (n, n_if)
    com: jax.Array                         # (n, n_if, 3)
    inertia_com: jax.Array                 # (n, n_if, 3, 3)
    joint_axis: jax.Array                  # (n, 3)
    gravity: jax.Array                     # (3,)
    armature: jax.Array                    # (nv,)
    joint_types: tuple = dataclasses.field(metadata=dict(static=True))
    link_names: tuple = dataclasses.field(metadata=dict(static=True))
    link_joint_names: tuple = dataclasses.field(metadata=dict(static=True))

    @property
    def parent(self) -> jax.Array:
        """(n,) inboard link of each link, -1 at the root (traced)."""
        return self.traversal.parent

    def with_parent(self, parent, *, strategy=None, unroll=None) -> "Model":
        """The same model on the tree `parent` (n,), host or traced, with its traversal rebuilt:
        the one way to change the topology. `strategy` / `unroll` (see `tree_traversal`) default
        to this model's. A host `parent` is checked by `tree_traversal` (ValueError); a traced one that
        is not a tree (an index out of range or pointing at itself, a second root, a cycle) gives a
        model whose masses are NaN, so every result on it is NaN-marked (`jaxsoa.multibody.checks` names
        the rule)."""
        strategy = self.traversal.strategy if strategy is None else strategy
        unroll = self.traversal.unroll if unroll is None else unroll
        if jnp.shape(parent)[-1:] != (self.n_links,):
            raise ValueError(f"argument 'parent' has shape {jnp.shape(parent)}, expected ({self.n_links},): "
                             "one parent per link of the model")
        model = dataclasses.replace(self, traversal=tree_traversal(parent, strategy, unroll))
        if not isinstance(parent, jax.core.Tracer):
            return model
        trav = model.traversal
        links = jnp.arange(self.n_links, dtype=trav.parent.dtype)
        tree = (jnp.all((trav.parent >= -1) & (trav.parent < self.n_links) & (trav.parent != links))
                & (jnp.sum(trav.parent == -1) == 1) & jnp.all(trav.depth < self.n_links))
        return dataclasses.replace(model, mass=jnp.where(tree, model.mass, jnp.nan))

    @property
    def dtype(self):
        """Floating dtype of the model's arrays: the precision every computation on it runs in."""
        return self.mass.dtype

    @property
    def n_links(self) -> int:
        return len(self.joint_types)

    @property
    def nq(self) -> int:
        return sum(JointType(t).nq for t in self.joint_types)

    @property
    def nv(self) -> int:
        return sum(JointType(t).nv for t in self.joint_types)

    @property
    def dof_max(self) -> int:
        """Width of the padded per-link velocity slot (at least 1)."""
        return max([1] + [JointType(t).nv for t in self.joint_types])

    @property
    def joint_names(self) -> tuple:
        """Names of the joints that have coordinates, in q order."""
        return tuple(nm for nm, t in zip(self.link_joint_names, self.joint_types, strict=False) if JointType(t).nq)

    @cached_property
    def idx_q(self) -> tuple:
        """Start of each link's joint coordinates in q (Pinocchio's `idx_q`)."""
        return tuple(np.cumsum([0] + [JointType(t).nq for t in self.joint_types])[:-1].tolist())

    @cached_property
    def idx_v(self) -> tuple:
        """Start of each link's joint velocities in v (Pinocchio's `idx_v`)."""
        return tuple(np.cumsum([0] + [JointType(t).nv for t in self.joint_types])[:-1].tolist())

    @cached_property
    def v_slots(self) -> np.ndarray:
        """(n, dof_max) index into [v, 0]: link k's velocity slot, padding pointing at entry nv."""
        slots = np.full((self.n_links, self.dof_max), self.nv, dtype=np.int32)
        for k, t in enumerate(self.joint_types):
            slots[k, : JointType(t).nv] = self.idx_v[k] + np.arange(JointType(t).nv)
        return slots

    @cached_property
    def dof_index(self) -> np.ndarray:
        """(nv,) positions of the real joint velocities among the n·d flattened padded slots."""
        return np.argsort(self.v_slots.reshape(-1), kind="stable")[: self.nv]

    @cached_property
    def dof_mask(self) -> np.ndarray:
        """(n, dof_max) bool: which padded velocity slots are real joint velocities."""
        return self.v_slots < self.nv

    def links_of_type(self, joint_type: JointType) -> np.ndarray:
        """Static indices of the links whose joint has `joint_type`."""
        return np.flatnonzero(np.asarray(self.joint_types) == joint_type)

    def q_columns(self, joint_type: JointType) -> np.ndarray:
        """(k, nq_type) static indices into q for the links of `joint_type`."""
        links = self.links_of_type(joint_type)
        return np.asarray(self.idx_q)[links][:, None] + np.arange(JointType(joint_type).nq)

    def v_columns(self, joint_type: JointType) -> np.ndarray:
        """(k, nv_type) static indices into v for the links of `joint_type`."""
        links = self.links_of_type(joint_type)
        return np.asarray(self.idx_v)[links][:, None] + np.arange(JointType(joint_type).nv)


def link_inertia(model: Model):
    """Per-link data of the selected inboard interface: mass (n,), com (n, 3), inertia_com (n, 3, 3)."""
    rows = jnp.arange(model.n_links)
    sel = model.inboard_interface
    return model.mass[rows, sel], model.com[rows, sel], model.inertia_com[rows, sel]


def link_placement(model: Model):
    """Pose of each link's joint frame in its parent frame: R (n, 3, 3), p (n, 3)."""
    rows = jnp.arange(model.n_links)
    sel = model.inboard_interface
    return model.placement_rotation[rows, sel], model.placement_translation[rows, sel]


FIELD_RANKS = dict(inboard_interface=1, placement_rotation=4, placement_translation=3, mass=2, com=3,
                   inertia_com=4, joint_axis=2, gravity=1, armature=1)
"""Rank of each array field of one model (the traversal's arrays are rank 1)."""


def stack_models(models) -> Model:
    """One model whose every array field (the topology included) carries a leading batch axis
    (B,): sample b is `models[b]`. The entry points run it as a batch of per-sample models
    (`rnea(stacked, q[B, nq], …)`), RNEA and ABA on the batch-last core, in one compilation for
    every stack of these joint types. The models must share `joint_types` (the compile key), link
    and joint names (static metadata) and dtype; ValueError names the first model that does not."""
    if isinstance(models, Model):
        raise TypeError("stack_models: expected a sequence of jaxsoa Models, got a single Model "
                        "(pass [model_0, model_1, ...])")
    try:
        models = list(models)
    except TypeError as err:
        raise TypeError(f"stack_models: expected a sequence of jaxsoa Models, got {type(models).__name__}") from err
    if not models or not all(isinstance(m, Model) for m in models):
        raise TypeError("stack_models: expected a non-empty sequence of jaxsoa Models")
    first = models[0]
    if model_batch(first):
        raise ValueError(f"stack_models: models[0] is already a stack of {model_batch(first)} models: "
                         "stack single models")
    for b, m in enumerate(models[1:], 1):
        for what in ("joint_types", "link_names", "link_joint_names", "dtype"):
            if getattr(m, what) != getattr(first, what):
                raise ValueError(f"stack_models: models[{b}].{what} = {getattr(m, what)} differs from "
                                 f"models[0].{what} = {getattr(first, what)}")
        if model_batch(m) != model_batch(first):
            raise ValueError(f"stack_models: models[{b}] has batch shape {model_batch(m)}, "
                             f"models[0] {model_batch(first)}")
        if (m.traversal.strategy, m.traversal.unroll) != (first.traversal.strategy, first.traversal.unroll):
            raise ValueError(f"stack_models: models[{b}] has another traversal strategy / unroll than models[0]")
    return jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *models)


def model_batch(model: Model) -> tuple:
    """The leading batch shape of a stacked model (`stack_models`), () for a single model;
    ValueError naming the first field whose leading axes disagree with the parent array's."""
    batch = tuple(jnp.shape(model.parent)[:-1])
    fields = {f"traversal.{f.name}": 1 for f in dataclasses.fields(model.traversal)
              if not f.metadata.get("static")}
    for name, rank in {**fields, **FIELD_RANKS}.items():
        value = getattr(model.traversal, name.split(".")[1]) if name.startswith("traversal.") else getattr(model, name)
        shape = tuple(jnp.shape(value))
        if len(shape) != len(batch) + rank or shape[:len(batch)] != batch:
            raise ValueError(f"model field '{name}' has shape {shape}: expected leading batch axes {batch} "
                             f"(the parent array's) and {rank} more (build stacked models with stack_models)")
    return batch
