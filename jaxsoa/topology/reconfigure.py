"""Reconfigurable systems: a `Model` whose topology, placements and asymmetric-link inertias all follow
traced configuration parameters (docs/user_guide.md §7).

Link design (host, numpy; `LinkDesign`), per link k of s, with n_if interfaces (pad unused ones):

* ``interface_rotation (s, n_if, 3, 3)``, ``interface_translation (s, n_if, 3)``: pose of interface
  i's frame in link k's fixed *design frame*;
* ``mass (s,)``, ``com (s, 3)``, ``inertia_com (s, 3, 3)``: the link's inertia in the design frame
  (centre of mass, rotational inertia about it);
* ``joint_types`` (static): the type of link k's *inboard* joint, whichever interface is inboard.
  Revolute and prismatic joints act about / along the z axis of the inboard interface's frame;
* ``root_rotation (3, 3)``, ``root_translation (3,)``: pose, in the world, of the joint frame of the
  root's virtual joint (default identity).

Conventions. With interface i inboard, link k's frame is interface i's frame (origin at its inboard
joint, docs/conventions.md), so its inertia there is ``m``, ``c_i = R_iᵀ (c − p_i)``, ``J_i = R_iᵀ J R_i``.
When interface i of link k is mated to interface m of its parent, at zero joint coordinate the two
interface frames coincide: the joint frame of link k is the parent's interface m frame, placed in the
parent's link frame (its inboard interface a) as ``inv(T_a) ∘ T_m``, both poses in the parent's
design frame.

`apply_configuration(template, arrays, interfaces)` recomputes ``parent``, ``inboard_interface``,
placements (broadcast over the interface axis: all columns equal) and per-interface inertias from the
traced topology: jittable, vmappable over ``interfaces`` and usable inside `lax.scan`. Invalid
configuration parameters give an unspecified model: check
``topology_from_configuration_traced(...).valid`` where that matters. `reconfigurable_model` is the
validating host entry point.

State at a topology switch (`remap_state`, applied by `jaxsoa.integrators.rollout_switching`): a
*kinematic re-docking*. Each link's joint coordinates are its inboard joint's; where a link keeps its
inboard interface they are carried over unchanged (even if its parent changed), where its inboard
interface changes its joint coordinates are reset to neutral and its joint rates to zero. Neither
momentum nor the links' world poses are conserved across a switch; a momentum-consistent impulse map
is future work.
"""

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsoa.multibody.arguments import default_dtype, nan_unless
from jaxsoa.multibody.build import STANDARD_GRAVITY, build_model
from jaxsoa.multibody.config_space import neutral
from jaxsoa.multibody.joints import JointType
from jaxsoa.multibody.model import Model
from jaxsoa.spatial.algebra import mat_mul, mat_tvec, se3_compose, se3_inverse, transpose
from jaxsoa.topology.configuration_parameters import topology_from_configuration, topology_from_configuration_traced


@dataclasses.dataclass(frozen=True)
class LinkDesign:
    interface_rotation: np.ndarray
    interface_translation: np.ndarray
    mass: np.ndarray
    com: np.ndarray
    inertia_com: np.ndarray
    joint_types: tuple
    root_rotation: np.ndarray = dataclasses.field(default_factory=lambda: np.eye(3))
    root_translation: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(3))
    link_names: tuple = None


class DesignArrays(NamedTuple):
    """Traced (differentiable) fields of a `LinkDesign`."""
    interface_rotation: jax.Array
    interface_translation: jax.Array
    mass: jax.Array
    com: jax.Array
    inertia_com: jax.Array
    root_rotation: jax.Array
    root_translation: jax.Array


def design_arrays(design: LinkDesign, dtype=None) -> DesignArrays:
    return DesignArrays(*(jnp.asarray(getattr(design, f), default_dtype(dtype)) for f in DesignArrays._fields))


def interface_inertias(arrays: DesignArrays):
    """Inertia of each link in each interface's frame: mass (s, n_if), com (s, n_if, 3), J (s, n_if, 3, 3)."""
    R, p = arrays.interface_rotation, arrays.interface_translation
    n_if = R.shape[1]
    com = mat_tvec(R, arrays.com[:, None, :] - p)                              # c_i = R_iᵀ (c − p_i)
    J = mat_mul(mat_mul(transpose(R), arrays.inertia_com[:, None]), R)          # J_i = R_iᵀ J R_i
    mass = jnp.broadcast_to(arrays.mass[:, None], (R.shape[0], n_if))
    return mass, com, J


def apply_configuration(template: Model, arrays: DesignArrays, interfaces, link_ids=None) -> Model:
    """Model for configuration parameters ``interfaces (s, n_if)`` (traced), from a template with the
    static layout (joint types, names) of `reconfigurable_model`. See the module doc. Invalid
    parameters (``topology_from_configuration_traced(...).valid`` False) give a model whose masses
    are NaN: every dynamics result and rollout on it is then NaN (`Trajectory.first_nonfinite` = 0),
    and `jaxsoa.multibody.checks.model_valid` is False."""
    R, p = arrays.interface_rotation, arrays.interface_translation
    s, n_if = R.shape[:2]
    _check_arrays(template, arrays, interfaces)
    top = topology_from_configuration_traced(interfaces, link_ids=link_ids)
    has_parent = top.parent >= 0
    par = jnp.maximum(top.parent, 0)
    a = top.inboard_interface[par]                                 # parent's inboard interface
    m = jnp.maximum(top.parent_interface, 0)                       # parent's attachment interface
    R_ia, p_ia = se3_inverse(R[par, a], p[par, a])
    R_pl, p_pl = se3_compose(R_ia, p_ia, R[par, m], p[par, m])
    R_pl = jnp.where(has_parent[:, None, None], R_pl, arrays.root_rotation)
    p_pl = jnp.where(has_parent[:, None], p_pl, arrays.root_translation)
    mass, com, J = interface_inertias(arrays)
    mass = nan_unless(top.valid, mass)                 # an invalid configuration NaN-marks the model
    dt = template.mass.dtype
    return dataclasses.replace(
        template.with_parent(top.parent), inboard_interface=top.inboard_interface,
        placement_rotation=jnp.broadcast_to(R_pl[:, None], (s, n_if, 3, 3)).astype(dt),
        placement_translation=jnp.broadcast_to(p_pl[:, None], (s, n_if, 3)).astype(dt),
        mass=mass.astype(dt), com=com.astype(dt), inertia_com=J.astype(dt))


def _check_arrays(template: Model, arrays: DesignArrays, interfaces):
    """The traced design's fields and `interfaces` shaped for the template's s links (ValueError naming
    the field: a (1,) mass would be broadcast to every link). Static shapes: free under `jit`."""
    s, n_if = jnp.shape(arrays.interface_rotation)[:2]
    if s != template.n_links:
        raise ValueError(f"field 'interface_rotation' has {s} links, the template {template.n_links}")
    shapes = dict(interface_rotation=(s, n_if, 3, 3), interface_translation=(s, n_if, 3), mass=(s,), com=(s, 3),
                  inertia_com=(s, 3, 3), root_rotation=(3, 3), root_translation=(3,))
    for name, shape in shapes.items():
        if jnp.shape(getattr(arrays, name)) != shape:
            raise ValueError(f"field '{name}' has shape {jnp.shape(getattr(arrays, name))}, expected {shape}")
    if jnp.shape(interfaces) != (s, n_if):
        raise ValueError(f"argument 'interfaces' has shape {jnp.shape(interfaces)}, expected ({s}, {n_if}): one "
                         "entry per link and interface")


def _check_design(design: LinkDesign, interfaces):
    R = np.asarray(design.interface_rotation, np.float64)
    s, n_if = R.shape[:2]
    shapes = dict(interface_rotation=(s, n_if, 3, 3), interface_translation=(s, n_if, 3), mass=(s,),
                  com=(s, 3), inertia_com=(s, 3, 3), root_rotation=(3, 3), root_translation=(3,))
    for name, shape in shapes.items():
        if np.shape(getattr(design, name)) != shape:
            raise ValueError(f"field '{name}' has shape {np.shape(getattr(design, name))}, expected {shape}")
    if len(design.joint_types) != s:
        raise ValueError(f"field 'joint_types' needs {s} entries, got {len(design.joint_types)}")
    if np.shape(interfaces) != (s, n_if):
        raise ValueError(f"interfaces must be (s, n_if) = {(s, n_if)}, got {np.shape(interfaces)}")
    for k in range(s):
        for i in range(n_if):
            if np.abs(R[k, i].T @ R[k, i] - np.eye(3)).max() > 1e-9 or np.linalg.det(R[k, i]) < 0:
                raise ValueError(f"link {k + 1} interface {i}: field 'interface_rotation' is not a rotation")


def reconfigurable_model(design: LinkDesign, interfaces, link_ids=None, *, gravity=STANDARD_GRAVITY,
                         dtype=None) -> Model:
    """Host entry point: validate the design and the configuration parameters (host topology builder,
    `ValueError` on bad input), and return the `Model` of that configuration (`apply_configuration`,
    then `build_model`'s validation of every per-interface inertia)."""
    interfaces = np.asarray(interfaces)
    _check_design(design, interfaces)
    s, n_if = interfaces.shape
    link_ids = np.arange(1, s + 1) if link_ids is None else np.asarray(link_ids)
    top = topology_from_configuration(link_ids, interfaces)
    axis = np.tile([0.0, 0.0, 1.0], (s, 1))
    eye = np.broadcast_to(np.eye(3), (s, n_if, 3, 3))   # unit placeholders, replaced by the design's below
    bare = build_model(top.parent, design.joint_types, axis, eye, np.zeros((s, n_if, 3)), np.ones((s, n_if)),
                       np.zeros((s, n_if, 3)), eye,
                       inboard_interface=top.inboard_interface, link_names=design.link_names,
                       gravity=gravity, dtype=dtype)
    model = apply_configuration(bare, design_arrays(design, dtype), jnp.asarray(interfaces, jnp.int32),
                                jnp.asarray(link_ids, jnp.int32))
    np.testing.assert_array_equal(np.asarray(model.parent), top.parent)          # host == traced
    np.testing.assert_array_equal(np.asarray(model.inboard_interface), top.inboard_interface)
    fields = ("placement_rotation", "placement_translation", "mass", "com", "inertia_com")
    return build_model(top.parent, design.joint_types, axis, *(np.asarray(getattr(model, f)) for f in fields),
                       inboard_interface=top.inboard_interface, link_names=model.link_names,
                       link_joint_names=model.link_joint_names, gravity=gravity, dtype=dtype)


def remap_state(model: Model, previous_inboard, q, v):
    """State map at a topology switch (module doc): links whose inboard interface differs from
    ``previous_inboard (s,)`` get neutral joint coordinates and zero joint rates; others keep theirs."""
    if jnp.shape(previous_inboard) != (model.n_links,):
        raise ValueError(f"argument 'previous_inboard' has shape {jnp.shape(previous_inboard)}, expected "
                         f"({model.n_links},): one inboard interface per link")
    for name, value, size in (("q", q, model.nq), ("v", v, model.nv)):
        if jnp.shape(value) != (size,):
            raise ValueError(f"argument '{name}' has shape {jnp.shape(value)}, expected ({size},)")
    link_of_q = np.repeat(np.arange(model.n_links), [JointType(t).nq for t in model.joint_types])
    link_of_v = np.repeat(np.arange(model.n_links), [JointType(t).nv for t in model.joint_types])
    changed = model.inboard_interface != previous_inboard
    q = jnp.where(changed[link_of_q], neutral(model).astype(q.dtype), q)
    v = jnp.where(changed[link_of_v], jnp.zeros_like(v), v)
    return q, v

