"""The public API under `jax.jit` and `jax.vmap`.

Walks the `__all__` of `jaxsoa` and of every subpackage (`PACKAGES`; a module without `__all__`
contributes the public names it defines). Each public callable is either

* a case of `CASES`: run on a small system (a 4-link tree, its free-floating variant, the
  closed-loop grasp of sims/dual_arm_grasp.py, a 4-element tether, the tethered robot of
  sims/tethered_robot.py, the Stewart platform of sims/stewart_gas.py, a flexible arm). A case with
  vmap axes runs as `jax.jit(jax.vmap(fn))` over a batch of two states (one compilation) and must
  agree with `jax.jit(fn)` at each state (the batching rules against the unbatched program; calling
  such a case eagerly, one dispatched and compiled primitive at a time, cost 4-10x its two jits). A
  case without vmap axes runs as `jax.jit(fn)` and must agree with the eager call. The result must
  be a PyTree of arrays with the reference's structure and agree with it to 1e-12 (relative to
  max(1, max |reference|), float64: the same operations, compiled differently). The cases in
  `SLOW` (each compiles for many seconds) carry the `slow` marker;
* a class of `TYPES`: an instance must be a registered PyTree of arrays (it passes through
  `jax.jit` unchanged);
* or listed in `HOST_ONLY` with the reason (builders, validators raising `ValueError`, file I/O,
  host drivers, numpy results).

`test_every_public_name_is_covered` fails on a public name in none of them, and on a stale entry.
"""

import dataclasses
import functools
import importlib
import inspect
from types import SimpleNamespace
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import checkify

import jaxsoa
from jaxsoa import algorithms, constraints, integrators, multibody, spatial, topology, workflows
from jaxsoa.multibody.joints import JointType
from tests.helpers.trees import build_jaxsoa, random_tree

PACKAGES = ("spatial", "multibody", "algorithms", "constraints", "topology", "integrators", "systems.orbit",
            "systems.tether", "systems.stewart", "systems.flexible", "workflows", "io", "")
TOL = 1e-12


def public_api() -> dict:
    """{key: object} of every public callable, keyed by the first package that exports it
    ("algorithms.rnea"; "" for the top level only), each object once."""
    found, seen = {}, set()
    for package in PACKAGES:
        module = importlib.import_module("jaxsoa." + package if package else "jaxsoa")
        names = getattr(module, "__all__", None)
        if names is None:
            names = [n for n, obj in vars(module).items()
                     if not n.startswith("_") and getattr(obj, "__module__", None) == module.__name__]
        for name in names:
            obj = getattr(module, name)
            if inspect.ismodule(obj) or not callable(obj) or id(obj) in seen:
                continue
            seen.add(id(obj))
            found[f"{package}.{name}" if package else name] = obj
    return found


# ---------------------------------------------------------------------------------------------
# small systems, built once

def _states(model, rng, n_states=2, extra=None):
    """Two states of `model`: q, v, a, tau standard normal (quaternions normalised), f_ext (n, 6)."""
    out = []
    quaternions = multibody.quaternion_columns(model)
    for _ in range(n_states):
        q = rng.normal(size=model.nq)
        q[quaternions] /= np.linalg.norm(q[quaternions], axis=-1, keepdims=True)
        q = jnp.asarray(q)
        v, a, tau = (jnp.asarray(rng.normal(size=model.nv)) for _ in range(3))
        state = dict(q=q, v=v, a=a, tau=tau, f_ext=jnp.asarray(rng.normal(size=(model.n_links, 6))))
        state.update(extra(rng) if extra else {})
        out.append(state)
    return out


def _tree(rng):
    R, P, S = JointType.REVOLUTE, JointType.PRISMATIC, JointType.SPHERICAL
    model = build_jaxsoa(random_tree(rng, 4, link_types=(R, S, P, R)))
    return SimpleNamespace(model=model, states=_states(model, rng))


def _free(rng):
    R, P = JointType.REVOLUTE, JointType.PRISMATIC
    model = build_jaxsoa(random_tree(rng, 4, link_types=(JointType.FREE, R, P, R)))
    arm = lambda r: dict(arm=jnp.asarray(r.normal(size=3)), arm_v=jnp.asarray(r.normal(size=3)))  # noqa: E731
    return SimpleNamespace(model=model, states=_states(model, rng, extra=arm))


def _hinge(rng):
    R, P = JointType.REVOLUTE, JointType.PRISMATIC
    model = build_jaxsoa(random_tree(rng, 3, link_types=(R, P, R)))
    return SimpleNamespace(model=model, states=_states(model, rng))


def _loop(rng):
    from sims import dual_arm_grasp

    model, closure = dual_arm_grasp.model_and_closure(gravity=(0.0, 0.0, -9.81))
    q0 = jnp.asarray(dual_arm_grasp.Q0, jnp.float64)
    states = [dict(q=q0 + 1e-3 * k, v=jnp.asarray(rng.normal(size=model.nv)),
                   tau=jnp.asarray(rng.normal(size=model.nv))) for k in range(2)]
    return SimpleNamespace(model=model, closure=closure, states=states, topology=dual_arm_grasp.topology(),
                           configuration=dual_arm_grasp.CONFIGURATION)


def _design(rng):
    from sims import dual_arm_spacecraft

    design = dual_arm_spacecraft.design()
    configurations = jnp.asarray(np.stack([dual_arm_spacecraft.configuration(k) for k in (1, 2, 3)]), jnp.int32)
    # the template's static layout (parent, inboard interface) is the first configuration's; apply_configuration
    # fills the rest per configuration
    template = topology.reconfigurable_model(design, configurations[0], dual_arm_spacecraft.IDS, dtype=jnp.float64)
    return SimpleNamespace(template=template, arrays=topology.design_arrays(design), configurations=configurations,
                           ids=jnp.asarray(dual_arm_spacecraft.IDS, jnp.int32), states=_states(template, rng))


def _ident(rng):
    """Stand-in regressors Y (m, 10 n) for the tree's θ (n, 10): the identification maths is generic."""
    return SimpleNamespace(Y=[jnp.asarray(rng.normal(size=(30, 40))) for _ in range(2)], columns=np.arange(20),
                           theta=jnp.asarray(np.tile([2.0, 0.1, -0.2, 0.3, 0.5, 0.01, 0.6, -0.02, 0.03, 0.7], (4, 1))))


class Systems:
    """The small systems, each built on first use by `_<name>(rng)` with its own seeded generator."""

    def __getattr__(self, name):
        build = globals().get(f"_{name}")
        if build is None:
            raise AttributeError(name)
        value = build(np.random.default_rng(sum(map(ord, name))))
        setattr(self, name, value)
        return value


@pytest.fixture(scope="session")
def sy():
    return Systems()


@pytest.fixture(scope="session")
def reference(sy):
    """reference(name, k=0): case `name` at state k, computed once: by `jax.jit(fn)` for a case with
    vmap axes (one compilation serves both states), eagerly for the others (module docstring)."""
    cache, jitted = {}, {}

    def result(name, k=0):
        if (name, k) not in cache:
            case = CASES[name]
            fn = case.fn if case.in_axes is None else jitted.setdefault(name, jax.jit(case.fn))
            cache[name, k] = fn(*case.args(sy, k))
        return cache[name, k]

    return result


# ---------------------------------------------------------------------------------------------
# cases

class Case(NamedTuple):
    """fn: every positional argument a PyTree of arrays (static options bound inside); args(sy, k):
    the arguments at state k ∈ {0, 1}; in_axes: vmap axes of the arguments, None for jit only."""
    fn: object
    args: object
    in_axes: tuple | None = None


def on(fn, system, fields, vmap=True, **static):
    """Case fn(model, *fields of state k) on `sy.<system>`, static keywords bound, vmapped over the fields."""
    fields = fields.split()
    bound = functools.partial(fn, **static) if static else fn
    return Case(bound, lambda sy, k: (getattr(sy, system).model, *(getattr(sy, system).states[k][f] for f in fields)),
                (None, *(0,) * len(fields)) if vmap else None)


def with_closure(fn, fields, vmap=True, **static):
    """Case fn(model, *fields, closure) on the closed-loop grasp."""
    fields = fields.split()
    return Case(functools.partial(fn, **static) if static else fn,
                lambda sy, k: (sy.loop.model, *(sy.loop.states[k][f] for f in fields), sy.loop.closure),
                (None, *(0,) * len(fields), None) if vmap else None)


def pure(fn, *make, vmap=True):
    """Case fn(*arrays) with arrays make_i(sy, k); vmapped over all of them."""
    return Case(fn, lambda sy, k: tuple(m(sy, k) for m in make), (0,) * len(make) if vmap else None)


def normal(*shape):
    """Argument maker: a standard-normal array of `shape` (different for each state k)."""
    return lambda sy, k: jnp.asarray(np.random.default_rng([k, *shape]).normal(size=shape))


def scalar(value, step=1.0):
    """Argument maker: the scalar `value + step k` at state k."""
    return lambda sy, k: jnp.asarray(value + step * k, jnp.float64)


def rotation(sy, k):
    """Argument maker: a rotation matrix (different for each state k)."""
    return spatial.exp_so3(jnp.asarray([0.3, -0.2, 0.5]) * (k + 1))


def inertia_parameters(sy, k):
    """θ (4, 10) of a physically consistent body per link of the tree (state k shifts the masses)."""
    return algorithms.inertial_parameters(sy.tree.model) * (1.0 + 0.1 * k)


def checked(fn):
    """The `checkify` form of a check: the flags and floating-point payloads of its error (its
    integer codes and its structure, which holds tracebacks, differ between traces)."""
    def flags(*args):
        leaves = jax.tree_util.tree_leaves(checkify.checkify(fn)(*args)[0])
        return [x for x in leaves if x.dtype == bool or jnp.issubdtype(x.dtype, jnp.inexact)]
    return flags


def _spatial_cases():
    R, p, m6, f6 = rotation, normal(3), normal(6), normal(6)
    return {
        "spatial.act_force": pure(spatial.act_force, R, p, f6),
        "spatial.act_motion": pure(spatial.act_motion, R, p, m6),
        "spatial.cross_force": pure(spatial.cross_force, m6, f6),
        "spatial.cross_motion": pure(spatial.cross_motion, m6, normal(6)),
        "spatial.exp_so3": pure(spatial.exp_so3, normal(3)),
        "spatial.force_cross_matrix": pure(spatial.force_cross_matrix, m6),
        "spatial.force_transform": pure(spatial.force_transform, R, p),
        "spatial.inv_act_force": pure(spatial.inv_act_force, R, p, f6),
        "spatial.inv_act_motion": pure(spatial.inv_act_motion, R, p, m6),
        "spatial.inverse_spd": pure(spatial.inverse_spd,
                                    lambda sy, k: normal(6, 6)(sy, k) @ normal(6, 6)(sy, k).T + jnp.eye(6)),
        "spatial.log_so3": pure(spatial.log_so3, R),
        "spatial.mat_mul": pure(spatial.mat_mul, normal(6, 6), normal(6, 6)),
        "spatial.mat_tvec": pure(spatial.mat_tvec, normal(6, 6), m6),
        "spatial.mat_vec": pure(spatial.mat_vec, normal(6, 6), m6),
        "spatial.motion_cross_matrix": pure(spatial.motion_cross_matrix, m6),
        "spatial.motion_transform": pure(spatial.motion_transform, R, p),
        "spatial.quat_conjugate": pure(spatial.quat_conjugate, normal(4)),
        "spatial.quat_exp": pure(spatial.quat_exp, normal(3)),
        "spatial.quat_multiply": pure(spatial.quat_multiply, normal(4), normal(4)),
        "spatial.quat_normalize": pure(spatial.quat_normalize, normal(4)),
        "spatial.quat_to_rotation": pure(spatial.quat_to_rotation,
                                          lambda sy, k: spatial.quat_normalize(normal(4)(sy, k))),
        "spatial.rotation_to_quat": pure(spatial.rotation_to_quat, R),
        "spatial.se3_compose": pure(spatial.se3_compose, R, p, R, normal(3)),
        "spatial.se3_inverse": pure(spatial.se3_inverse, R, p),
        "spatial.skew": pure(spatial.skew, normal(3)),
        "spatial.spatial_inertia": pure(spatial.spatial_inertia, lambda sy, k: jnp.asarray(2.0 + k), p,
                                        lambda sy, k: jnp.eye(3) * (1.0 + k)),
        "spatial.transform_inertia": pure(spatial.transform_inertia, R, p, normal(6, 6)),
        "spatial.transpose": pure(spatial.transpose, normal(3, 4)),
    }


def _multibody_cases():
    tree = lambda sy, k: sy.tree.model.traversal  # noqa: E731
    parent = lambda sy, k: sy.tree.model.parent  # noqa: E731
    axis = lambda sy, k: jnp.asarray([[0.0, 0.6, 0.8], [0.6, 0.0, -0.8]])  # noqa: E731

    def step_out(d, value_parent):                       # outward: sum of ancestors' data
        return value_parent + d, d

    def step_in(d, acc):                                 # inward: subtree sums
        return d + acc, d + acc

    return {
        "multibody.check_configuration": on(checked(multibody.check_configuration), "tree", "q"),
        "multibody.check_model": on(checked(multibody.check_model), "tree", "", vmap=False),
        "multibody.configuration_derivative": on(multibody.configuration_derivative, "tree", "q v"),
        "multibody.dexp_inv": on(multibody.dexp_inv, "tree", "a v"),
        "multibody.integrate": on(multibody.integrate, "tree", "q v"),
        "multibody.difference": Case(multibody.difference, lambda sy, k: (sy.free.model, sy.free.states[k]["q"],
                                                                           sy.free.states[1 - k]["q"]), (None, 0, 0)),
        "multibody.interpolate": Case(functools.partial(multibody.interpolate, u=0.3), lambda sy, k: (
            sy.tree.model, sy.tree.states[k]["q"], sy.tree.states[1 - k]["q"]), (None, 0, 0)),
        "multibody.inward": pure(lambda trav, x: multibody.inward(trav, step_in, x, jnp.zeros(3)), tree, normal(4, 3),
                                 vmap=False),
        "multibody.joint_transform": pure(lambda a, q: multibody.joint_transform(JointType.REVOLUTE, a, q), axis,
                                          normal(2, 1)),
        "multibody.link_depth": pure(multibody.link_depth, parent, vmap=False),
        "multibody.link_inertia": on(multibody.link_inertia, "tree", "", vmap=False),
        "multibody.link_placement": on(multibody.link_placement, "tree", "", vmap=False),
        "multibody.motion_subspace": pure(lambda a: multibody.motion_subspace(JointType.PRISMATIC, a, 3), axis),
        "multibody.neutral": on(multibody.neutral, "tree", "", vmap=False),
        "multibody.outward": pure(lambda trav, x: multibody.outward(trav, step_out, x, jnp.zeros(3)), tree,
                                  normal(4, 3),
                                  vmap=False),
        "multibody.path_matrix": pure(multibody.path_matrix, tree, vmap=False),
        "multibody.random_configuration": Case(multibody.random_configuration,
                                               lambda sy, k: (sy.tree.model, jax.random.PRNGKey(k)), (None, 0)),
        "multibody.tree_traversal": pure(multibody.tree_traversal, parent, vmap=False),
    }


def _algorithms_cases():
    def motion_pass(model, q, v, a):
        return algorithms.motion_pass(model.traversal, algorithms.joint_frames(model, q),
                                      algorithms.motion_subspaces(model), algorithms.to_slots(model, v),
                                      algorithms.to_slots(model, a), algorithms.world_acceleration(model))

    def link_motion(model, q, v, a):
        return algorithms.link_motion(model, q, v, a, algorithms.world_acceleration(model))

    blocks = normal(3, 2, 6, 6)
    return {
        "algorithms.aba": on(algorithms.aba, "tree", "q v tau f_ext"),
        "algorithms.aba_free_floating": on(algorithms.aba_free_floating, "free", "q v arm"),
        "algorithms.bias_operator": on(algorithms.bias_operator, "tree", "q v f_ext"),
        "algorithms.block_diag": pure(algorithms.block_diag, normal(3, 6, 2)),
        "algorithms.blocks_to_flat": pure(algorithms.blocks_to_flat, blocks),
        "algorithms.body_regressor": pure(algorithms.body_regressor, normal(6), normal(6)),
        "algorithms.center_of_mass": on(algorithms.center_of_mass, "tree", "q"),
        "algorithms.center_of_mass_jacobian": on(algorithms.center_of_mass_jacobian, "tree", "q"),
        "algorithms.kinetic_energy": on(algorithms.kinetic_energy, "tree", "q v"),
        "algorithms.potential_energy": on(algorithms.potential_energy, "tree", "q"),
        "algorithms.centroidal_momentum": on(algorithms.centroidal_momentum, "tree", "q v"),
        "algorithms.composite_inertias": on(algorithms.composite_inertias, "tree", "q"),
        "algorithms.crba": on(algorithms.crba, "tree", "q"),
        "algorithms.forward_dynamics_innovations": on(algorithms.forward_dynamics_innovations, "tree", "q v tau f_ext"),
        "algorithms.forward_dynamics_operator": on(algorithms.forward_dynamics_operator, "tree", "q v tau f_ext"),
        "algorithms.forward_kinematics": on(algorithms.forward_kinematics, "tree", "q"),
        "algorithms.frame_jacobian": on(algorithms.frame_jacobian, "tree", "q", link=2),
        "algorithms.frame_velocity": on(algorithms.frame_velocity, "tree", "q v", link=2, reference="world"),
        "algorithms.frame_acceleration": on(algorithms.frame_acceleration, "tree", "q v a", link=2,
                                            reference="local_world_aligned"),
        "algorithms.frame_classical_acceleration": on(algorithms.frame_classical_acceleration, "tree", "q v a", link=2),
        "algorithms.joint_jacobians_time_variation": on(algorithms.joint_jacobians_time_variation, "tree", "q v",
                                                        reference="local"),
        "algorithms.centroidal_momentum_matrix": on(algorithms.centroidal_momentum_matrix, "free", "q"),
        "algorithms.centroidal_inertia": on(algorithms.centroidal_inertia, "free", "q"),
        "algorithms.centroidal_momentum_matrix_time_variation": on(
            algorithms.centroidal_momentum_matrix_time_variation, "free", "q v"),
        "algorithms.minverse": on(algorithms.minverse, "tree", "q"),
        "algorithms.coriolis_matrix": on(algorithms.coriolis_matrix, "tree", "q v"),
        "algorithms.rnea_derivatives": on(algorithms.rnea_derivatives, "tree", "q v a f_ext"),
        "algorithms.aba_derivatives": on(algorithms.aba_derivatives, "tree", "q v tau f_ext"),
        "algorithms.from_slots": Case(algorithms.from_slots, lambda sy, k: (sy.tree.model, normal(4, 3)(sy, k)),
                                      (None, 0)),
        "algorithms.from_virtual_base_state": pure(algorithms.from_virtual_base_state, normal(9), normal(9)),
        "algorithms.generalized_force": on(algorithms.generalized_force, "tree", "q f_ext"),
        "algorithms.generalized_gravity": on(algorithms.generalized_gravity, "tree", "q"),
        "algorithms.generalized_jacobian": on(algorithms.generalized_jacobian, "free", "q", link=3),
        "algorithms.hub_response": on(algorithms.hub_response, "free", "q"),
        "algorithms.inertia_entries": pure(algorithms.inertia_entries, normal(3, 3)),
        "algorithms.inertia_from_parameters": pure(algorithms.inertia_from_parameters, inertia_parameters),
        "algorithms.inertial_parameters": on(algorithms.inertial_parameters, "tree", "", vmap=False),
        "algorithms.innovations_factors": on(algorithms.innovations_factors, "tree", "q"),
        "algorithms.inverse_dynamics_operator": on(algorithms.inverse_dynamics_operator, "tree", "q v a f_ext"),
        "algorithms.joint_frames": on(algorithms.joint_frames, "tree", "q"),
        "algorithms.joint_jacobians": on(algorithms.joint_jacobians, "tree", "q", reference="local_world_aligned"),
        "algorithms.joint_torque_regressor": on(algorithms.joint_torque_regressor, "tree", "q v a"),
        "algorithms.link_accelerations": on(algorithms.link_accelerations, "tree", "q v a"),
        "algorithms.link_motion": on(link_motion, "tree", "q v a"),
        "algorithms.link_spatial_inertia": on(algorithms.link_spatial_inertia, "tree", "", vmap=False),
        "algorithms.link_velocities": on(algorithms.link_velocities, "tree", "q v"),
        "algorithms.mass_matrix_operator": on(algorithms.mass_matrix_operator, "tree", "q"),
        "algorithms.motion_pass": on(motion_pass, "tree", "q v a"),
        "algorithms.motion_subspaces": on(algorithms.motion_subspaces, "tree", "", vmap=False),
        "algorithms.nonlinear_effects": on(algorithms.nonlinear_effects, "tree", "q v"),
        "algorithms.operator_terms": on(algorithms.operator_terms, "tree", "q v"),
        "algorithms.parameters_from_inertia": pure(
            lambda theta: algorithms.parameters_from_inertia(*algorithms.inertia_from_parameters(theta)),
            inertia_parameters),
        "algorithms.per_link": on(lambda m: algorithms.per_link(m, lambda t, links: (m.joint_axis[links],),
                                                             jnp.float64),
                                   "tree", "", vmap=False),
        "algorithms.path_selector": on(algorithms.path_selector, "tree", "", vmap=False),
        "algorithms.random_regressor": Case(functools.partial(algorithms.random_regressor, n_samples=2),
                                            lambda sy, k: (sy.tree.model, jax.random.PRNGKey(k)), (None, 0)),
        "algorithms.rnea": on(algorithms.rnea, "tree", "q v a f_ext"),
        "algorithms.rnea_free_floating": on(algorithms.rnea_free_floating, "free", "q v arm f_ext"),
        "algorithms.rotational_inertia": pure(algorithms.rotational_inertia, normal(6)),
        "algorithms.spatial_inertia_from_parameters": pure(algorithms.spatial_inertia_from_parameters,
                                                           inertia_parameters),
        "algorithms.spatial_momentum": on(algorithms.spatial_momentum, "tree", "q v"),
        "algorithms.to_slots": on(algorithms.to_slots, "tree", "v"),
        "algorithms.to_virtual_base_state": on(lambda model, q, v: algorithms.to_virtual_base_state(q, v), "free",
                                               "q v"),
        "algorithms.transfer_operator": on(algorithms.transfer_operator, "tree", "q"),
        "algorithms.transfer_operator_virtual": on(algorithms.transfer_operator_virtual, "tree", "q"),
        "algorithms.welded_to_world": on(algorithms.welded_to_world, "tree", "", vmap=False),
        "algorithms.with_inertial_parameters": Case(algorithms.with_inertial_parameters,
                                                    lambda sy, k: (sy.tree.model, inertia_parameters(sy, k)),
                                                    (None, 0)),
        "algorithms.world_acceleration": on(algorithms.world_acceleration, "tree", "", vmap=False),
    }


def _constraints_cases():
    def inverse(model, q, v, closure):
        qdd = constraints.forward_dynamics_constrained(model, q, v, jnp.zeros_like(v), closure).qdd
        return constraints.inverse_dynamics_constrained(model, q, v, qdd, closure, jnp.ones(model.nv, bool))

    return {
        "constraints.check_closure": with_closure(checked(constraints.check_closure), "q"),
        "constraints.closure_terms": with_closure(constraints.closure_terms, "q v"),
        "constraints.constraint_bias": with_closure(constraints.constraint_bias, "q v"),
        "constraints.constraint_error": with_closure(constraints.constraint_error, "q"),
        "constraints.constraint_jacobian": with_closure(constraints.constraint_jacobian, "q"),
        "constraints.forward_dynamics_constrained": with_closure(constraints.forward_dynamics_constrained, "q v tau",
                                                                 baumgarte=(1.0, 2.0)),
        "constraints.inverse_dynamics_constrained": with_closure(inverse, "q v"),
        "constraints.inverse_mass_columns": Case(constraints.inverse_mass_columns,
                                                 lambda sy, k: (sy.tree.model, sy.tree.states[k]["q"],
                                                                normal(2, sy.tree.model.nv)(sy, k)), (None, 0, 0)),
        "constraints.project_state": with_closure(constraints.project_state, "q v", iterations=2),
        "constraints.project_velocity": with_closure(constraints.project_velocity, "q v"),
        "constraints.stack_closures": Case(lambda c: constraints.stack_closures(c, c),
                                            lambda sy, k: (sy.loop.closure,)),
    }


def _topology_cases():
    def interfaces(sy, k):
        return sy.design.configurations[k]

    def apply(template, arrays, interfaces, ids):
        return topology.apply_configuration(template, arrays, interfaces, ids)

    def remap(template, arrays, interfaces, ids, q, v):
        model = topology.apply_configuration(template, arrays, interfaces, ids)
        return topology.remap_state(model, template.inboard_interface, q, v)

    design = lambda sy, k: (sy.design.template, sy.design.arrays, interfaces(sy, k), sy.design.ids)  # noqa: E731
    state = lambda sy, k: (sy.design.states[k]["q"], sy.design.states[k]["v"])  # noqa: E731
    return {
        "topology.apply_configuration": Case(apply, design, (None, None, 0, None)),
        "topology.cut_interfaces": Case(lambda i, t: topology.cut_interfaces(i, t, xp=jnp),
                                        lambda sy, k: (jnp.asarray(sy.loop.configuration), sy.loop.topology)),
        "topology.incidence_matrix": Case(lambda parent: topology.incidence_matrix(parent, xp=jnp),
                                          lambda sy, k: (sy.tree.model.parent,)),
        "topology.interface_inertias": Case(topology.interface_inertias, lambda sy, k: (sy.design.arrays,)),
        "topology.remap_state": Case(remap, lambda sy, k: (*design(sy, k), *state(sy, k)), (None, None, 0, None, 0, 0)),
        "topology.topology_from_configuration_traced": Case(
            functools.partial(topology.topology_from_configuration_traced, max_cuts=2),
            lambda sy, k: (interfaces(sy, k),), (0,)),
    }


def _integrators_cases():
    def control(t, q, v):
        return -0.5 * v

    return {
        "integrators.ode_rk4_step": pure(lambda t, x: integrators.ode_rk4_step(lambda t, x: jnp.sin(t) * x, t, x, 0.1),
                                         lambda sy, k: jnp.asarray(0.1 * k), normal(3)),
        "integrators.rk4_step": on(functools.partial(integrators.rk4_step, dt=0.01), "tree", "q v tau"),
        "integrators.rollout": on(lambda m, q, v: integrators.rollout(m, q, v, control, 0.01, 3), "tree", "q v"),
        "integrators.rollout_constrained": with_closure(
            lambda m, q, v, c: integrators.rollout_constrained(m, q, v, control, c, 0.01, 2), "q v", vmap=False),
        "integrators.rollout_steps": pure(
            lambda x: integrators.rollout_steps(lambda t, x, k: x + 0.1 * jnp.cos(t) * x, x, 0.1, 4), normal(3)),
        "integrators.rollout_switching": Case(
            lambda tpl, arr, sched, q, v: integrators.rollout_switching(
                tpl, arr, q, v, control, 0.01, 4, schedule=integrators.TopologySchedule(sched, jnp.asarray([0, 2]))),
            lambda sy, k: (sy.design.template, sy.design.arrays, sy.design.configurations[:2],
                           *(sy.design.states[k][f] for f in ("q", "v")))),
        "integrators.semi_implicit_euler_step": on(functools.partial(integrators.semi_implicit_euler_step, dt=0.01),
                                                   "tree", "q v tau"),
    }


def _workflows_cases():
    phi = normal(4, 10)
    regressor = lambda sy, k: sy.ident.Y[k]  # noqa: E731
    torques = lambda sy, k: sy.ident.Y[k] @ sy.ident.theta.reshape(-1)  # noqa: E731
    weights = lambda sy, k: jnp.ones(regressor(sy, k).shape[0])  # noqa: E731
    free_targets = ("arm", "arm_v", "arm")
    return {
        "workflows.check_physical_consistency": pure(checked(workflows.check_physical_consistency), inertia_parameters),
        "workflows.commanded_acceleration": pure(workflows.commanded_acceleration, *(normal(3),) * 5,
                                                 lambda sy, k: jnp.asarray(4.0), lambda sy, k: jnp.asarray(2.0)),
        "workflows.computed_torque": Case(
            lambda m, q, v, a: workflows.computed_torque(m, q, v, q, v, a, 4.0, 2.0),
            lambda sy, k: (sy.hinge.model, *(sy.hinge.states[k][f] for f in ("q", "v", "a"))), (None, 0, 0, 0)),
        "workflows.computed_torque_free_floating": on(
            lambda m, q, v, q_des, v_des, a_des: workflows.computed_torque_free_floating(m, q, v, q_des, v_des, a_des,
                                                                                        4.0, 2.0),
            "free", "q v " + " ".join(free_targets)),
        "workflows.critically_damped_gains": pure(workflows.critically_damped_gains, scalar(3.0)),
        "workflows.fit_log_cholesky": Case(
            functools.partial(workflows.fit_log_cholesky, adam_steps=3, lbfgs_steps=2, gauss_newton_steps=2),
            lambda sy, k: (workflows.log_cholesky_from_parameters(inertia_parameters(sy, 1)), regressor(sy, k),
                           torques(sy, k), weights(sy, k))),
        "workflows.least_squares": pure(workflows.least_squares, lambda sy, k: regressor(sy, k)[:, sy.ident.columns],
                                         torques, weights),
        "workflows.log_cholesky_factor": pure(workflows.log_cholesky_factor, phi),
        "workflows.log_cholesky_from_parameters": pure(workflows.log_cholesky_from_parameters, inertia_parameters),
        "workflows.parameters_from_log_cholesky": pure(workflows.parameters_from_log_cholesky, phi),
        "workflows.parameters_from_pseudo_inertia": pure(
            lambda theta: workflows.parameters_from_pseudo_inertia(workflows.pseudo_inertia(theta)),
            inertia_parameters),
        "workflows.physical_consistency": pure(workflows.physical_consistency, inertia_parameters),
        "workflows.pseudo_inertia": pure(workflows.pseudo_inertia, inertia_parameters),
        "workflows.regression_loss": pure(workflows.regression_loss, phi, regressor, torques, weights),
        "workflows.residual_weights": pure(workflows.residual_weights, normal(5, 3)),
    }


# ---------------------------------------------------------------------------------------------
# the domain systems

def _orbit(rng):
    from jaxsoa.systems import orbit

    return jax.tree_util.tree_map(jnp.asarray, orbit.circular_orbit()._replace(e=0.05, mean_anomaly0=0.3))


def _tether(rng):
    from jaxsoa.systems import tether

    params = tether.tether_params(rho=2e-3, EA=2.5, alpha=0.05, length=2000.0, n_elements=4)
    states = []
    for k in range(2):
        straight = tether.straight_state(params, (0.0, 0.0, 0.0), (3.0, 1.0, 100.0 + k), (10.0, 110.0 + k),
                                         v_M=(0.01, 0.0, 0.02), s_dot=(0.1, -0.2))
        bend = jnp.asarray(rng.normal(0.0, 0.5, (params.n_elements - 1, 3)))
        states.append(dataclasses.replace(straight, r=straight.r.at[1:-1].add(bend),
                                          v=straight.v + jnp.asarray(rng.normal(0.0, 0.01, straight.v.shape))))
    inputs = tether.tether_inputs(reel_accel=(0.01, -0.02), reel_force=(0.1, 0.2), reel_damping=(0.5, 0.5),
                                  force_driven=(True, False))
    return SimpleNamespace(params=params, states=states, inputs=inputs, law=tether.reel_law(),
                           times=(jnp.asarray(100.0), jnp.asarray(300.0)))


def _robot(rng):
    from jaxsoa.systems import tether
    from sims import tethered_robot

    system = tethered_robot.build(orbit=_orbit(rng))
    states = []
    for k in range(2):                     # the robot 40 m out along x; the tether's ends follow the bodies
        q_P, q_M = jaxsoa.neutral(system.platform), jaxsoa.neutral(system.robot).at[0].set(40.0 + k)
        v_P, v_M = (jnp.asarray(rng.normal(0.0, 0.01, m.nv)) for m in (system.platform, system.robot))
        line = tether.straight_state(system.tether, (0.6, 0.0, 0.0), (39.8 + k, 0.0, 0.0), (10.0, 49.2 + k),
                                     s_dot=(0.1, -0.1))
        states.append(tether.TetheredRobotState(q_P, v_P, q_M, v_M, line))
    q_ref = tuple(jnp.asarray(rng.normal(0.0, 0.1, m.nv - 6)) for m in (system.platform, system.robot))
    return SimpleNamespace(system=system, states=states, q_ref=q_ref, inputs=_tether(rng).inputs)


def _flexible(rng):
    from jaxsoa.systems import flexible

    R = JointType.REVOLUTE
    beams = {1: flexible.Beam(length=0.6, bending_stiffness=30.0, mass_per_length=2.0, n_segments=2, damping=0.01)}
    arm = random_tree(rng, 3, link_types=(R, R, R))
    arm["placement_translation"][arm["parent"] == 1] = (beams[1].length, 0.0, 0.0)     # children at the tip
    fm = flexible.flexible_model(arm, beams)
    rm = flexible.reduce(fm, 2, beams)
    n_q, n_v = len(rm.q_rigid) + rm.basis.shape[1], rm.T.shape[1]
    reduced_states = [dict(q=jnp.asarray(rng.normal(0.0, 0.3, n_q)), v=jnp.asarray(rng.normal(0.0, 0.3, n_v)),
                           tau=jnp.asarray(rng.normal(0.0, 0.3, n_v))) for _ in range(2)]
    modes = flexible.hub_beam_modes(flexible.Beam(1.0, 1.0, 1.0, 1, damping=0.01), 3, hub_inertia=1.0)
    return SimpleNamespace(model=fm, states=_states(fm.model, rng), reduced=rm, reduced_states=reduced_states,
                           modes=modes)


def _stewart(rng):
    from sims import stewart_gas

    poses = [(jnp.asarray(stewart_gas.HOME) + 0.02 * k, spatial.exp_so3(jnp.asarray([0.02, -0.01, 0.03]) * (k + 1)),
              jnp.asarray(rng.normal(0.0, 0.1, 6)), jnp.asarray(rng.normal(0.0, 0.1, 6)),
              jnp.asarray(rng.normal(0.0, 1e4, 6))) for k in range(2)]
    return SimpleNamespace(params=stewart_gas.build(), poses=poses)


def _systems_cases():
    from jaxsoa.systems import flexible, orbit, stewart, tether

    time = lambda sy, k: sy.tether.times[k]  # noqa: E731
    orb = lambda sy, k: sy.orbit  # noqa: E731
    r3, v3 = normal(3), normal(3)

    def on_orbit(fn, *make):
        """fn(orbit, t, *arrays), vmapped over t and the arrays."""
        return Case(fn, lambda sy, k: (sy.orbit, time(sy, k), *(m(sy, k) for m in make)), (None, 0, *(0,) * len(make)))

    def on_tether(fn, *make, vmap=True):
        """fn(params, state k, *arrays), vmapped over the state and the arrays."""
        return Case(fn, lambda sy, k: (sy.tether.params, sy.tether.states[k], *(m(sy, k) for m in make)),
                    (None, 0, *(0,) * len(make)) if vmap else None)

    def with_inputs(fn):
        """fn(params, state k, inputs)."""
        return Case(fn, lambda sy, k: (sy.tether.params, sy.tether.states[k], sy.tether.inputs), (None, 0, None))

    def on_law(fn):
        """fn(params, orbit, t, state k, law)."""
        return Case(fn, lambda sy, k: (sy.tether.params, sy.orbit, time(sy, k), sy.tether.states[k], sy.tether.law),
                    (None, None, 0, 0, None))

    def on_robot(fn, *make, vmap=True):
        """fn(system, state k, *more)."""
        return Case(fn, lambda sy, k: (sy.robot.system, sy.robot.states[k], *(m(sy, k) for m in make)),
                    (None, 0, *(None,) * len(make)) if vmap else None)

    def on_platform(fn, n_args, vmap=True):
        """fn(params, p, R_world_platform, u, udot / force)[: n_args] at pose k."""
        return Case(fn, lambda sy, k: (sy.stewart.params, *sy.stewart.poses[k][:n_args]),
                    (None, *(0,) * n_args) if vmap else None)

    def on_flexible(fn, fields, **static):
        fields = fields.split()
        bound = functools.partial(fn, **static) if static else fn
        return Case(bound, lambda sy, k: (sy.flexible.model, *(sy.flexible.states[k][f] for f in fields)),
                    (None, *(0,) * len(fields)))

    def on_reduced(fn, fields):
        fields = fields.split()
        return Case(fn, lambda sy, k: (sy.flexible.reduced, *(sy.flexible.reduced_states[k][f] for f in fields)),
                    (None, *(0,) * len(fields)))

    def on_modes(fn, *make):
        return Case(fn, lambda sy, k: (sy.flexible.modes, *(m(sy, k) for m in make)), (None, *(0,) * len(make)))

    s_ddot = normal(2)
    strain = lambda sy, k: tether.element_strain(sy.tether.params, sy.tether.states[k])  # noqa: E731
    tension = lambda sy, k: tether.element_tension(sy.tether.params, *strain(sy, k)[:2])  # noqa: E731
    tangent = lambda sy, k: strain(sy, k)[2]  # noqa: E731

    def exit_point(model, q, v):
        return tether.exit_point(model, q, v, 2, jnp.asarray([0.1, 0.0, 0.05]))

    def exit_state(params, state):
        eps, eps_dot, tau = tether.element_strain(params, state)
        return tether.exit_state(params, state, eps, tether.element_tension(params, eps, eps_dot), tau)

    def forward_dynamics_coupled(system, state, inputs, q_ref):
        return tether.forward_dynamics_coupled(system, jnp.asarray(10.0), state, inputs, q_ref)

    def coupled_step(system, state, inputs, q_ref):
        return tether.rk4_step_coupled(system, jnp.asarray(0.0), state, inputs, q_ref, lambda t, x: jnp.zeros(2), 0.5)

    def dumbbell_step(params, orbit_, state, inputs):
        return tether.rk4_step_dumbbell(params, orbit_, jnp.asarray(0.0), state, inputs, lambda t, x: jnp.zeros(2),
                                        0.5)

    def simulate(params, p, R, u):
        return stewart.simulate(params, p, spatial.rotation_to_quat(R), u, lambda t, p, R, u: jnp.zeros(6), 1e-3, 3)

    from sims import stewart_gas
    pose_path = stewart_gas.sine_profile()
    cases = {
        "systems.orbit.eccentric_anomaly": pure(orbit.eccentric_anomaly, normal(), lambda sy, k: jnp.asarray(0.1)),
        "systems.orbit.check_orbit": Case(checked(orbit.check_orbit), lambda sy, k: (sy.orbit,)),
        "systems.orbit.eci_to_orbital": on_orbit(orbit.eci_to_orbital, lambda sy, k: 7.0e6 + r3(sy, k), v3),
        "systems.orbit.gravity_gradient_acceleration": on_orbit(orbit.gravity_gradient_acceleration, r3),
        "systems.orbit.gravity_gradient_rate": on_orbit(orbit.gravity_gradient_rate),
        "systems.orbit.gravity_gradient_torque": on_orbit(orbit.gravity_gradient_torque,
                                                          lambda sy, k: jnp.diag(jnp.asarray([1.0, 2.0, 3.0 + k]))),
        "systems.orbit.gravity_gradient_wrenches": Case(orbit.gravity_gradient_wrenches,
                                                        lambda sy, k: (sy.tree.model, sy.orbit, time(sy, k),
                                                                       sy.tree.states[k]["q"]), (None, None, 0, 0)),
        "systems.orbit.gravity_gradient_wrenches_at": Case(
            orbit.gravity_gradient_wrenches_at, lambda sy, k: (
                sy.tree.model, sy.orbit, time(sy, k), jaxsoa.forward_kinematics(sy.tree.model, sy.tree.states[k]["q"])),
            (None, None, 0, 0)),
        "systems.orbit.libration_angles": on_orbit(orbit.libration_angles, r3),
        "systems.orbit.lvlh_acceleration": on_orbit(orbit.lvlh_acceleration, r3, v3),
        "systems.orbit.lvlh_rotation": on_orbit(orbit.lvlh_rotation),
        "systems.orbit.lvlh_to_orbital": on_orbit(orbit.lvlh_to_orbital, r3, v3),
        "systems.orbit.mean_motion": Case(orbit.mean_motion, lambda sy, k: (orb(sy, k),)),
        "systems.orbit.orbit_radius": on_orbit(orbit.orbit_radius),
        "systems.orbit.orbital_to_eci": on_orbit(orbit.orbital_to_eci, r3, v3),
        "systems.orbit.orbital_to_lvlh": on_orbit(orbit.orbital_to_lvlh, r3, v3),
        "systems.orbit.radial_unit": pure(orbit.radial_unit, normal()),
        "systems.orbit.reference_state": on_orbit(orbit.reference_state),
        "systems.orbit.relative_two_body_acceleration": on_orbit(orbit.relative_two_body_acceleration, r3),
        "systems.orbit.true_anomaly": on_orbit(orbit.true_anomaly),
        "systems.orbit.true_anomaly_rates": on_orbit(orbit.true_anomaly_rates),
        "systems.orbit.two_body_acceleration": pure(orbit.two_body_acceleration, lambda sy, k: sy.orbit.mu,
                                                    lambda sy, k: 7.0e6 + r3(sy, k)),
        "systems.tether.check_tether_state": on_tether(checked(tether.check_tether_state)),
        "systems.tether.chord_libration": Case(tether.chord_libration,
                                               lambda sy, k: (sy.orbit, time(sy, k), sy.tether.states[k]),
                                               (None, 0, 0)),
        "systems.tether.commanded_rate": on_law(tether.commanded_rate),
        "systems.tether.deployment_profile": Case(tether.deployment_profile, lambda sy, k: (sy.tether.law, time(sy, k)),
                                                  (None, 0)),
        "systems.tether.elastic_energy": on_tether(tether.elastic_energy),
        "systems.tether.element_strain": on_tether(tether.element_strain),
        "systems.tether.element_tension": Case(tether.element_tension,
                                               lambda sy, k: (sy.tether.params, *strain(sy, k)[:2]), (None, 0, 0)),
        "systems.tether.convection_forces": on_tether(
            lambda p, x: tether.convection_forces(p, x, tether.material_velocities(p, x))),
        "systems.tether.end_coupling": with_inputs(tether.end_coupling),
        "systems.tether.energy_rates": with_inputs(tether.energy_rates),
        "systems.tether.exit_correction": on_tether(tether.exit_correction, s_ddot),
        "systems.tether.exit_point": on(exit_point, "free", "q v"),
        "systems.tether.exit_state": on_tether(exit_state),
        "systems.tether.exit_tension": with_inputs(tether.exit_tension),
        "systems.tether.forward_dynamics_coupled": on_robot(forward_dynamics_coupled, lambda sy, k: sy.robot.inputs,
                                                            lambda sy, k: sy.robot.q_ref),
        "systems.tether.galerkin_forces": on_tether(tether.galerkin_forces, s_ddot),
        "systems.tether.internal_forces": pure(tether.internal_forces, tension, tangent),
        "systems.tether.mass_apply": Case(lambda p, s, x: tether.mass_apply(*tether.mass_bands(p, s.s[1] - s.s[0]), x),
                                          lambda sy, k: (sy.tether.params, sy.tether.states[k], sy.tether.states[k].r),
                                          (None, 0, 0)),
        "systems.tether.mass_bands": Case(tether.mass_bands, lambda sy, k: (sy.tether.params, jnp.asarray(100.0 + k)),
                                          (None, 0)),
        "systems.tether.material_velocities": on_tether(tether.material_velocities),
        "systems.tether.nodal_forces": on_tether(tether.nodal_forces, s_ddot),
        "systems.tether.node_rates": on_tether(tether.node_rates),
        "systems.tether.node_tangents": on_tether(tether.node_tangents),
        "systems.tether.reel_acceleration": on_law(tether.reel_acceleration),
        "systems.tether.reel_accelerations": with_inputs(tether.reel_accelerations),
        "systems.tether.reel_gain": on_tether(tether.reel_gain),
        "systems.tether.rigid_tension": pure(tether.rigid_tension,
                                             *(scalar(c, 0.1) for c in (1e-3, 1.0, 100.0, 0.3, 0.01))),
        "systems.tether.rk4_step_coupled": on_robot(coupled_step, lambda sy, k: sy.robot.inputs,
                                                    lambda sy, k: sy.robot.q_ref, vmap=False),
        "systems.tether.rk4_step_dumbbell": Case(dumbbell_step, lambda sy, k: (sy.tether.params, sy.orbit,
                                                                               sy.tether.states[k], sy.tether.inputs),
                                                 (None, None, 0, None)),
        "systems.tether.stored_mass": Case(tether.stored_mass,
                                           lambda sy, k: (sy.robot.system, sy.robot.states[k].tether),
                                           (None, 0)),
        "systems.tether.system_energy": with_inputs(tether.system_energy),
        "systems.tether.system_momentum": with_inputs(tether.system_momentum),
        "systems.tether.tether_dynamics": with_inputs(tether.tether_dynamics),
        "systems.tether.tether_kinetic_energy": on_tether(tether.tether_kinetic_energy),
        "systems.tether.tether_momentum": on_tether(tether.tether_momentum),
        "systems.tether.total_momentum": on_robot(tether.total_momentum),
        "systems.tether.transport_forces": on_tether(tether.transport_forces, s_ddot),
        "systems.tether.transport_velocity": Case(tether.transport_velocity,
                                                  lambda sy, k: (sy.tether.states[k], s_ddot(sy, k)), (0, 0)),
        "systems.tether.viscous_dissipation_rate": on_tether(tether.viscous_dissipation_rate),
        "systems.tether.with_exit_nodes": on_robot(tether.with_exit_nodes),
        "systems.stewart.check_pose": on_platform(lambda *a: checked(stewart.check_pose)(stewart.pose_status(*a)), 2),
        "systems.stewart.forward_dynamics": Case(
            stewart.forward_dynamics,
            lambda sy, k: (sy.stewart.params, *sy.stewart.poses[k][:3], sy.stewart.poses[k][4]),
            (None, 0, 0, 0, 0)),
        "systems.stewart.gas_springs": Case(stewart.gas_springs,
                                            lambda sy, k: (sy.stewart.params, stewart.leg_lengths(
                                                sy.stewart.params, *sy.stewart.poses[k][:2])[2][6:]), (None, 0)),
        "systems.stewart.generalized_forces": on_platform(stewart.generalized_forces, 4),
        "systems.stewart.inverse_dynamics": on_platform(stewart.inverse_dynamics, 4),
        "systems.stewart.inverse_dynamics_light_leg": on_platform(stewart.inverse_dynamics_light_leg, 4),
        "systems.stewart.jacobian": on_platform(stewart.jacobian, 2),
        "systems.stewart.leg_lengths": on_platform(stewart.leg_lengths, 2),
        "systems.stewart.leg_motion": on_platform(stewart.leg_motion, 4),
        "systems.stewart.path_state": pure(lambda s: stewart.path_state(pose_path, s), scalar(0.3)),
        "systems.stewart.platform_wrench": Case(stewart.platform_wrench,
                                                lambda sy, k: (sy.stewart.params, *sy.stewart.poses[k][1:4]),
                                                (None, 0, 0, 0)),
        "systems.stewart.pose_status": on_platform(stewart.pose_status, 2),
        "systems.stewart.simulate": on_platform(simulate, 3, vmap=False),
        "systems.stewart.task_space_mass_matrix": on_platform(stewart.task_space_mass_matrix, 3),
        "systems.stewart.without_leg_inertia": Case(stewart.without_leg_inertia, lambda sy, k: (sy.stewart.params,)),
        "systems.flexible.elastic_forces": on_flexible(flexible.elastic_forces, "q v"),
        "systems.flexible.expand": on_reduced(flexible.expand, "q v"),
        "systems.flexible.forward_dynamics": on_flexible(flexible.forward_dynamics, "q v tau", method="dense"),
        "systems.flexible.forward_dynamics_driven": on_flexible(
            lambda fm, q, v, a, tau: flexible.forward_dynamics_driven(fm, q, v, a[:1], (0,), tau), "q v a tau"),
        "systems.flexible.forward_dynamics_modal": on_modes(flexible.forward_dynamics_modal, normal(4), normal(4),
                                                            normal()),
        "systems.flexible.forward_dynamics_reduced": on_reduced(flexible.forward_dynamics_reduced, "q v tau"),
        "systems.flexible.inverse_dynamics": on_flexible(flexible.inverse_dynamics, "q v a f_ext"),
        "systems.flexible.mechanical_energy": on_flexible(flexible.mechanical_energy, "q v"),
        "systems.flexible.modal_bias": on_modes(flexible.modal_bias, normal(4), normal(4)),
        "systems.flexible.modal_driven_dynamics": on_modes(flexible.modal_driven_dynamics, normal(3), normal(3),
                                                           normal(), normal()),
        "systems.flexible.modal_energy": on_modes(flexible.modal_energy, normal(4), normal(4)),
        "systems.flexible.modal_mass_matrix": on_modes(flexible.modal_mass_matrix, normal(4)),
        "systems.flexible.modal_tip_deflection": on_modes(flexible.modal_tip_deflection, normal(3)),
        "systems.flexible.natural_frequencies": on_flexible(flexible.natural_frequencies, "q"),
        "systems.flexible.rotating_frequencies": on_modes(flexible.rotating_frequencies, scalar(1.0)),
        "systems.flexible.tip_position": on_flexible(flexible.tip_position, "q"),
    }
    return cases


def _joint_properties(model):
    """A `JointProperties` for `model`: every term nonzero (armature, damping, ... = 0.1, 0.2, ...)."""
    return jaxsoa.io.JointProperties(*(jnp.full(model.nv, 0.1 * (i + 1)) for i in range(5)))


def _io_cases():
    io = jaxsoa.io
    return {
        "io.acceleration_from_mujoco": on(io.acceleration_from_mujoco, "free", "q v a"),
        "io.acceleration_to_mujoco": on(io.acceleration_to_mujoco, "free", "q v a"),
        "io.force_from_mujoco": on(io.force_from_mujoco, "free", "q tau"),
        "io.force_to_mujoco": on(io.force_to_mujoco, "free", "q tau"),
        "io.from_mujoco": on(io.from_mujoco, "free", "q v"),
        "io.passive_force": Case(io.passive_force, lambda sy, k: (sy.tree.model, _joint_properties(sy.tree.model),
                                                                  sy.tree.states[k]["q"], sy.tree.states[k]["v"]),
                                 (None, None, 0, 0)),
        "io.to_mujoco": on(io.to_mujoco, "tree", "q v"),
    }


CASES = {**_spatial_cases(), **_multibody_cases(), **_algorithms_cases(), **_constraints_cases(),
         **_topology_cases(), **_integrators_cases(), **_workflows_cases(), **_systems_cases(), **_io_cases()}

# cases and types that take more than a second on one core (a large program to compile, or a system that
# takes seconds to build: the grasp, the reconfigurable spacecraft, the tethered robot, the Stewart platform,
# the flexible arm) carry the `slow` marker
SLOW = {f"{package}.{name}" for package, names in {
    "algorithms": """aba aba_free_floating bias_operator body_regressor center_of_mass center_of_mass_jacobian
        centroidal_momentum crba kinetic_energy potential_energy rnea_derivatives aba_derivatives minverse
        coriolis_matrix centroidal_momentum_matrix centroidal_inertia centroidal_momentum_matrix_time_variation
        frame_velocity frame_acceleration frame_classical_acceleration joint_jacobians_time_variation
        forward_dynamics_innovations forward_dynamics_operator frame_jacobian from_virtual_base_state
        generalized_force generalized_gravity generalized_jacobian hub_response innovations_factors
        inverse_dynamics_operator joint_jacobians joint_torque_regressor mass_matrix_operator
        nonlinear_effects operator_terms random_regressor spatial_momentum""",
    "constraints": """ClosureDiagnosis LoopClosure check_closure closure_terms constraint_bias constraint_error
        constraint_jacobian forward_dynamics_constrained inverse_dynamics_constrained
        inverse_mass_columns project_state project_velocity stack_closures""",
    "integrators": """TopologySchedule rk4_step rollout rollout_constrained rollout_switching
        semi_implicit_euler_step""",
    "multibody": """check_model configuration_derivative random_configuration difference interpolate""",
    "systems.flexible": """FlexibleModel HubBeamModes ReducedModel elastic_forces expand forward_dynamics
        forward_dynamics_driven forward_dynamics_modal forward_dynamics_reduced inverse_dynamics
        mechanical_energy modal_bias modal_driven_dynamics modal_energy modal_mass_matrix
        modal_tip_deflection natural_frequencies rotating_frequencies tip_position""",
    "systems.orbit": """eci_to_orbital gravity_gradient_rate gravity_gradient_wrenches gravity_gradient_wrenches_at""",
    "systems.stewart": """StewartParams check_pose forward_dynamics gas_springs generalized_forces inverse_dynamics
        inverse_dynamics_light_leg jacobian leg_lengths leg_motion path_state platform_wrench
        pose_status simulate task_space_mass_matrix without_leg_inertia""",
    "systems.tether": """TetheredRobot TetheredRobotState check_tether_state chord_libration commanded_rate end_coupling
        exit_point forward_dynamics_coupled rk4_step_coupled rk4_step_dumbbell stored_mass
        tether_dynamics total_momentum with_exit_nodes""",
    "topology": """ConfigurationTopology DesignArrays apply_configuration cut_interfaces interface_inertias
        remap_state topology_from_configuration_traced""",
    "workflows": """check_physical_consistency computed_torque computed_torque_free_floating fit_log_cholesky
        least_squares""",
}.items() for name in names.split()}


# class -> an instance: the reference result of a case (its name) or made from the systems
TYPES = {
    "multibody.Model": lambda sy: sy.tree.model,
    "multibody.Traversal": lambda sy: sy.tree.model.traversal,
    "algorithms.DofSplit": lambda sy: algorithms.base_and_joint_dofs(sy.free.model),
    "algorithms.FreeFloatingInverseDynamics": "algorithms.rnea_free_floating",
    "algorithms.RNEADerivatives": "algorithms.rnea_derivatives",
    "algorithms.ABADerivatives": "algorithms.aba_derivatives",
    "algorithms.InnovationsFactors": "algorithms.innovations_factors",
    "algorithms.JointFrames": "algorithms.joint_frames",
    "algorithms.LinkMotion": "algorithms.link_motion",
    "algorithms.LinkPlacements": "algorithms.forward_kinematics",
    "algorithms.OperatorTerms": "algorithms.operator_terms",
    "constraints.ClosureDiagnosis": lambda sy: constraints.diagnose_closure(sy.loop.model, sy.loop.states[0]["q"],
                                                                            sy.loop.closure),
    "constraints.ClosureTerms": "constraints.closure_terms",
    "constraints.ConstrainedDynamics": "constraints.forward_dynamics_constrained",
    "constraints.ConstrainedInverseDynamics": "constraints.inverse_dynamics_constrained",
    "constraints.LoopClosure": lambda sy: sy.loop.closure,
    "topology.ConfigurationTopology": lambda sy: sy.loop.topology,
    "topology.DesignArrays": lambda sy: sy.design.arrays,
    "topology.TracedConfigurationTopology": "topology.topology_from_configuration_traced",
    "integrators.TopologySchedule": lambda sy: integrators.TopologySchedule(sy.design.configurations,
                                                                            jnp.asarray([0, 2, 3])),
    "integrators.Trajectory": "integrators.rollout",
    "workflows.BaseParameters": lambda sy: workflows.base_parameters(sy.ident.Y[0]),
    "workflows.Fit": "workflows.fit_log_cholesky",
    "workflows.PDGains": "workflows.critically_damped_gains",
    "systems.orbit.OrbitParams": lambda sy: sy.orbit,
    "systems.tether.CoupledAccelerations": "systems.tether.forward_dynamics_coupled",
    "systems.tether.EndCoupling": "systems.tether.end_coupling",
    "systems.tether.ElementStrain": "systems.tether.element_strain",
    "systems.tether.EnergyRates": "systems.tether.energy_rates",
    "systems.tether.ExitPoint": "systems.tether.exit_point",
    "systems.tether.ExitState": "systems.tether.exit_state",
    "systems.tether.Libration": "systems.tether.chord_libration",
    "systems.tether.ReelLaw": lambda sy: sy.tether.law,
    "systems.tether.TetherInputs": lambda sy: sy.tether.inputs,
    "systems.tether.TetherParams": lambda sy: sy.tether.params,
    "systems.tether.TetherState": lambda sy: sy.tether.states[0],
    "systems.tether.TetheredRobot": lambda sy: sy.robot.system,
    "systems.tether.TetheredRobotState": lambda sy: sy.robot.states[0],
    "systems.stewart.GasState": "systems.stewart.gas_springs",
    "systems.stewart.InverseDynamics": "systems.stewart.inverse_dynamics",
    "systems.stewart.LegGeometry": "systems.stewart.leg_lengths",
    "systems.stewart.LegMotion": "systems.stewart.leg_motion",
    "systems.stewart.PathState": "systems.stewart.path_state",
    "systems.stewart.PlatformTrajectory": "systems.stewart.simulate",
    "systems.stewart.PoseStatus": "systems.stewart.pose_status",
    "systems.stewart.StewartParams": lambda sy: sy.stewart.params,
    "systems.flexible.FlexibleModel": lambda sy: sy.flexible.model,
    "systems.flexible.HubBeamModes": lambda sy: sy.flexible.modes,
    "systems.flexible.ReducedModel": lambda sy: sy.flexible.reduced,
    "io.JointProperties": lambda sy: _joint_properties(sy.tree.model),
}

BUILDER = "host builder: validates Python / numpy input (ValueError naming the field)"
HOST_ONLY = {
    "multibody.JointType": "static metadata: an IntEnum, part of the compile key (Model.joint_types)",
    "multibody.build_model": BUILDER,
    "multibody.quaternion_columns": "static numpy indices from the static joint types",
    "multibody.unit_complex_columns": "static numpy indices from the static joint types",
    "multibody.model_batch": "host: the static batch shape of a stacked model (ValueError naming the field)",
    "multibody.stack_models": BUILDER + "; tests/algorithms/test_batch_last_stacked.py",
    "multibody.validate_inertia": BUILDER,
    "multibody.validate_parent": BUILDER,
    "algorithms.base_and_joint_dofs": "static numpy indices from the static joint types (DofSplit)",
    "algorithms.floating_base": "static index from the static joint types",
    "algorithms.with_virtual_base": BUILDER,
    "constraints.diagnose_closure": "host rank analysis (numpy SVD, Python ints; ClosureDiagnosis)",
    "constraints.loop_closure": BUILDER,
    "topology.LinkDesign": "host description (numpy arrays, static joint types) read by the builders",
    "topology.closure_from_topology": BUILDER,
    "topology.design_arrays": "host conversion of a LinkDesign into DesignArrays",
    "topology.reconfigurable_model": BUILDER,
    "topology.topology_from_configuration": BUILDER,
    "integrators.ButcherTableau": "static option (tuples of floats), part of the compile key",
    "workflows.base_parameters": "host QR with pivoting (numpy; BaseParameters)",
    "workflows.batch_count": "host: the batch size of a PyTree",
    "workflows.chunk_length": "host: chunk sizes of a sweep",
    "workflows.condition_number": "host: numpy SVD to a Python float",
    "workflows.device_mesh": "host: device setup",
    "workflows.flatten": "host: results to a dict of numpy arrays for a file",
    "workflows.initialize_distributed": "host: multi-process setup",
    "workflows.read_results": "file I/O",
    "workflows.sharded_map": "host driver: runs a jitted map chunk by chunk over devices",
    "workflows.summarize": "host: numpy quantiles of a results file",
    "workflows.write_results": "file I/O",
    "workflows.DaskExecutor": "host driver: sweep chunks as tasks on a Dask cluster",
    "workflows.LocalExecutor": "host driver: sweep chunks on this process's devices",
    "workflows.StopOnSignals": "host: signal handlers (SIGINT/SIGTERM) as a stop request",
    "workflows.SweepData": "host: numpy arrays and a dict read from a run directory",
    "workflows.SweepExistsError": "exception",
    "workflows.SweepMismatchError": "exception",
    "workflows.SweepOutcome": "host: what run_sweep did (a path and Python ints)",
    "workflows.nonfinite_counts": "host: numpy counts of a results dict",
    "workflows.open_store": "file I/O",
    "workflows.probe_writable": "file I/O",
    "workflows.read_sweep": "file I/O",
    "workflows.run_sweep": "host driver: chunks committed to a run directory",
    "workflows.write_atomic": "file I/O",
    "io.example_robot_data_dir": "file system",
    "io.example_robot_urdf": "file system",
    "io.load_urdf": "file I/O and host builder",
    "io.load_mjcf": "file I/O (MuJoCo's compiler) and host builder",
    "io.mjcf_joint_properties": "file I/O (MuJoCo's compiler): host arrays read from the compiled model",
    "systems.orbit.circular_orbit": BUILDER,
    "systems.orbit.orbit_params": BUILDER,
    "systems.stewart.build_stewart": BUILDER,
    "systems.stewart.hexapod_points": "host geometry (numpy) for build_stewart",
    "systems.stewart.raise_if_invalid": "host: raises ValueError on a PoseStatus (traced: check_pose)",
    "systems.stewart.seed_points": "host geometry (numpy) for build_stewart",
    "systems.tether.initial_state": BUILDER,
    "systems.tether.reel_law": BUILDER,
    "systems.tether.stable_dt": "host: a Python float time step",
    "systems.tether.straight_state": BUILDER,
    "systems.tether.tether_inputs": BUILDER,
    "systems.tether.tether_params": BUILDER,
    "systems.flexible.Beam": "host description (Python floats) read by the builders",
    "systems.flexible.flexible_model": BUILDER,
    "systems.flexible.hub_beam_modes": BUILDER,
    "systems.flexible.insert_flexible_links": BUILDER,
    "systems.flexible.reduce": BUILDER,
    "systems.flexible.tree_from_model": "host: a Model to a numpy tree dict for the builders",
}


# ---------------------------------------------------------------------------------------------
# tests

def assert_same(out, ref):
    """`out` (jitted) is a PyTree of arrays with `ref`'s structure; floats agree to TOL relative to
    max(1, max |ref|) (NaN where `ref` is NaN), integers and booleans exactly."""
    out_leaves, out_tree = jax.tree_util.tree_flatten(out)
    ref_leaves, ref_tree = jax.tree_util.tree_flatten(ref)
    assert out_tree == ref_tree
    for x, r in zip(out_leaves, ref_leaves, strict=True):
        assert isinstance(x, jax.Array), type(x)
        x, r = np.asarray(x), np.asarray(r)
        assert x.shape == r.shape
        if np.issubdtype(r.dtype, np.inexact):
            nan = np.isnan(r)
            np.testing.assert_array_equal(np.isnan(x), nan)
            scale = max(1.0, np.abs(np.where(nan, 0.0, r)).max(initial=0.0))
            assert np.abs(np.where(nan, 0.0, x - r)).max(initial=0.0) <= TOL * scale
        else:
            np.testing.assert_array_equal(x, r)


def test_every_public_name_is_covered():
    api = public_api()
    listed = [set(CASES), set(TYPES), set(HOST_ONLY)]
    assert not (listed[0] & listed[1] or listed[0] & listed[2] or listed[1] & listed[2])
    missing = sorted(set(api) - set.union(*listed))
    stale = sorted(set.union(*listed) - set(api))
    assert not missing, f"public names neither covered nor listed as host-only: {missing}"
    assert not stale, f"entries for names that are not public: {stale}"
    assert SLOW <= set(CASES) | set(TYPES), sorted(SLOW - set(CASES) - set(TYPES))
    assert all(inspect.isclass(api[name]) for name in TYPES)


def _marked(names, slow):
    return [pytest.param(n, marks=pytest.mark.slow) if slow(n) else n for n in sorted(names)]


@pytest.mark.parametrize("name", _marked(CASES, lambda n: n in SLOW))
def test_jit_and_vmap_match_the_reference(name, sy, reference):
    case = CASES[name]
    if case.in_axes is None:
        assert_same(jax.jit(case.fn)(*case.args(sy, 0)), reference(name))
        return
    args = [case.args(sy, k) for k in (0, 1)]
    batched = [a if axis is None else jax.tree_util.tree_map(lambda *x: jnp.stack(x), a, b)
               for axis, a, b in zip(case.in_axes, *args, strict=True)]
    out = jax.jit(jax.vmap(case.fn, in_axes=case.in_axes))(*batched)
    for k in (0, 1):
        assert_same(jax.tree_util.tree_map(lambda x, k=k: x[k], out), reference(name, k))


@pytest.mark.parametrize("name", _marked(TYPES, lambda n: n in SLOW or TYPES[n] in SLOW))
def test_types_are_registered_pytrees(name, sy, reference):
    instance = reference(TYPES[name]) if isinstance(TYPES[name], str) else TYPES[name](sy)
    assert isinstance(instance, public_api()[name])
    out = jax.jit(lambda x: x)(instance)
    assert type(out) is type(instance)
    assert_same(out, instance)
