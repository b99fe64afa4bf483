"""The free-floating variants, forward kinematics, composite inertias and one link's frame Jacobian on the
batch-last core: a leading-batch call (`rnea_free_floating(model, q[B, nq], …)`) runs the same body as
one sample, with the inner entry points (`rnea`, `aba`, `crba`, `composite_inertias`,
`forward_kinematics`, `joint_jacobians`) dispatched by shape to the batch-last passes.

* every such entry point against the per-sample path under `jax.vmap` (a second code path), float64,
  on Solo-12 (free-flyer), the free-floating space arm and a random floating tree with external
  wrenches: 1e-11 relative (the hub response solves M_bb x = M_bm, whose condition number on these
  models is ~1e2–1e3, so 1e-13 observed);
* a traced link index for the batched frame Jacobian: equal to the static one, NaN out of range;
* bad arguments of a batched call are named before the dispatch;
* the batched call takes the batch-last passes: its program has their `cond` stage barriers, the
  per-sample program under `vmap` has none;
* the hub wrench from the hub's own motion against the link motion pass (`link_motion`, the formula
  this module used before): 1e-12; NaN where a moving joint lies above the hub, finite where the
  links above it are welded;
* gradients of the batched free-floating ABA against the per-sample path's (1e-10).
* `rnea_free_floating` with a moving branch beside the hub (not below it), one sample (the hub's
  mass-matrix columns from the composite inertias) and a leading batch (a second RNEA): its torques fed
  back to `aba` give the joint and hub accelerations (1e-10), the branch's torques are RNEA's alone.

The free-floating dynamics themselves are checked against Pinocchio in test_free_floating.py, whose
batched calls now take this path.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsoa
from jaxsoa.algorithms import dynamics, free_floating, kinematics
from jaxsoa.multibody.joints import JointType
from sims import space_arm_7dof
from tests.helpers.trees import build_jaxsoa, random_tree, relative_error

TOL = 1e-11
B = 6


def _model(name, robot_models):
    if name == "solo12":
        return robot_models["solo12"][0]
    if name == "space_arm":
        return space_arm_7dof.build(floating=True, dtype=jnp.float64)
    rng = np.random.default_rng(11)
    types = (JointType.REVOLUTE, JointType.PRISMATIC, JointType.FIXED)
    return build_jaxsoa(random_tree(rng, 9, joint_types=types, floating=True))


def _state(model, seed):
    rng = np.random.default_rng(seed)
    q = jax.vmap(lambda k: jaxsoa.random_configuration(model, k))(jax.random.split(jax.random.key(seed), B))
    v, tau = (jnp.asarray(rng.normal(size=(B, n))) for n in (model.nv, model.nv - 6))
    return q, v, tau, jnp.asarray(rng.normal(size=(B, model.n_links, 6)))


def _generalized_jacobian(model, link, reference, q, v, t, f):
    return free_floating.generalized_jacobian(model, q, link, reference)


def _cases(model):
    link = model.n_links - 1
    return {
        "aba_free_floating": lambda q, v, t, f: free_floating.aba_free_floating(model, q, v, t, f),
        "rnea_free_floating": lambda q, v, t, f: free_floating.rnea_free_floating(model, q, v, t, f),
        "rnea_free_floating (no f_ext)": lambda q, v, t, f: free_floating.rnea_free_floating(model, q, v, t),
        "hub_response": lambda q, v, t, f: free_floating.hub_response(model, q),
        **{f"generalized_jacobian {ref}": functools.partial(_generalized_jacobian, model, link, ref)
           for ref in ("local", "world", "local_world_aligned")},
        "frame_jacobian local": lambda q, v, t, f: kinematics.frame_jacobian(model, q, link, "local"),
        "frame_jacobian world": lambda q, v, t, f: kinematics.frame_jacobian(model, q, 1, "world"),
        "forward_kinematics": lambda q, v, t, f: kinematics.forward_kinematics(model, q),
        "composite_inertias": lambda q, v, t, f: dynamics.composite_inertias(model, q),
    }


@pytest.mark.parametrize("name", ["solo12", "space_arm", "random"])
def test_batched_calls_equal_the_per_sample_path(robot_models, name):
    model = _model(name, robot_models)
    state = _state(model, 3)
    for case, fn in _cases(model).items():
        got, ref = jax.jit(fn)(*state), jax.jit(jax.vmap(fn))(*state)
        for g, r in zip(jax.tree.leaves(got), jax.tree.leaves(ref), strict=True):
            assert g.shape == r.shape, case
            assert relative_error(g, r) < TOL, case


def test_traced_link_of_the_batched_frame_jacobian(robot_models):
    """A traced link index: the same Jacobian as a static one, NaN outside [0, n)."""
    model = robot_models["solo12"][0]
    q = _state(model, 8)[0]
    fn = jax.jit(lambda q, link: kinematics.frame_jacobian(model, q, link, "world"))
    static = jax.jit(lambda q: kinematics.frame_jacobian(model, q, 4, "world"))(q)
    assert relative_error(fn(q, jnp.int32(4)), static) < 1e-15
    assert bool(jnp.all(jnp.isnan(fn(q, jnp.int32(model.n_links)))))
    assert bool(jnp.all(jnp.isnan(fn(q, jnp.int32(-1)))))


def test_batched_calls_check_their_arguments(robot_models):
    """The checks run before the batch-last dispatch: a wrong trailing length or two different batches
    are named."""
    model = robot_models["solo12"][0]
    q, v, tau, _ = _state(model, 9)
    with pytest.raises(ValueError, match="qdd_joints"):
        free_floating.rnea_free_floating(model, q, v, v)                   # (B, nv) where (B, nv − 6) is expected
    with pytest.raises(ValueError, match="different leading shapes"):
        free_floating.aba_free_floating(model, q, v[:3], tau)
    with pytest.raises(TypeError, match="tau_joints"):
        free_floating.aba_free_floating(model, q, v, tau.astype(jnp.int32))


def _conds(fn, *args):
    return str(jax.make_jaxpr(fn)(*args)).count(" cond[")


def test_batched_calls_take_the_batch_last_passes(robot_models):
    model = robot_models["solo12"][0]
    state = _state(model, 4)
    for case, fn in _cases(model).items():
        assert _conds(fn, *state) > 0, case
        assert _conds(jax.vmap(fn), *state) == 0, case


def _wrench_from_link_motion(model, q, v, qdd, f_ext):
    """I a + v ×* I v − f_ext of the hub from the link motion pass over the whole tree."""
    base = free_floating.floating_base(model)
    v_links, a_links = kinematics.link_motion(model, q, v, qdd, kinematics.world_acceleration(model))
    I_hub = kinematics.link_spatial_inertia(model)[base]
    h = I_hub @ v_links[base]
    w, lin = v_links[base][:3], v_links[base][3:]
    v_cross_h = jnp.concatenate([jnp.cross(w, h[:3]) + jnp.cross(lin, h[3:]), jnp.cross(w, h[3:])])
    return I_hub @ a_links[base] + v_cross_h - f_ext[base]


@pytest.mark.parametrize("above", [JointType.FIXED, JointType.REVOLUTE])
def test_hub_wrench_against_the_link_motion_pass(above):
    """A hub below one link: welded there (a fixed joint) the wrench is the hub's, NaN below a revolute."""
    rng = np.random.default_rng(5)
    types = (above, JointType.FREE, JointType.REVOLUTE, JointType.PRISMATIC, JointType.REVOLUTE)
    model = build_jaxsoa(random_tree(rng, 5, link_types=types))
    q, v, tau, f = _state(model, 6)
    out = jax.jit(lambda *a: free_floating.rnea_free_floating(model, *a))(q, v, tau, f)
    assert bool(jnp.all(jnp.isfinite(out.tau_joints)))
    if above == JointType.REVOLUTE:
        assert bool(jnp.all(jnp.isnan(out.base_wrench)))
        return
    base_dofs, joint_dofs = free_floating.base_and_joint_dofs(model)
    qdd = jnp.zeros((B, model.nv)).at[:, joint_dofs].set(tau).at[:, base_dofs].set(out.base_acceleration)
    ref = jax.jit(jax.vmap(lambda *a: _wrench_from_link_motion(model, *a)))(q, v, qdd, f)
    assert relative_error(out.base_wrench, ref) < 1e-12


def test_free_floating_aba_gradients_equal_the_per_sample_path(robot_models):
    model = robot_models["solo12"][0]
    q, v, tau, f = _state(model, 7)

    def loss(fn):
        return lambda q, v, tau, f: jnp.sum(jnp.sin(fn(q, v, tau, f)))

    fn = _cases(model)["aba_free_floating"]
    got = jax.jit(jax.grad(loss(fn), argnums=(0, 1, 2, 3)))(q, v, tau, f)
    ref = jax.jit(jax.grad(loss(jax.vmap(fn)), argnums=(0, 1, 2, 3)))(q, v, tau, f)
    for g, r in zip(got, ref, strict=True):
        assert relative_error(g, r) < 1e-10


@pytest.mark.parametrize("batched", [False, True], ids=["per_sample", "leading_batch"])
def test_torques_with_a_branch_beside_the_hub(batched):
    """A hub welded below a fixed root with a moving branch beside it (links 3 and 4, not below the hub):
    the joint torques of `rnea_free_floating`, fed back to `aba` with no force on the hub, give the joint
    accelerations asked for and the hub acceleration it returned (a second code path, forward dynamics).
    The hub's mass-matrix columns reach only the links below it; the branch's torques are RNEA's alone.
    1e-10: float64 round-off through M⁻¹ (condition ~1e3 here), measured ~1e-14."""
    rng = np.random.default_rng(8)
    types = (JointType.FIXED, JointType.FREE, JointType.REVOLUTE, JointType.REVOLUTE, JointType.PRISMATIC,
             JointType.PRISMATIC)
    tree = random_tree(rng, 6, link_types=types)
    tree["parent"] = np.array([-1, 0, 1, 0, 3, 2])
    model = build_jaxsoa(tree)
    q, v, qdd_joints, f = _state(model, 9)
    base_dofs, joint_dofs = free_floating.base_and_joint_dofs(model)
    if batched:
        out = free_floating.rnea_free_floating(model, q, v, qdd_joints, f)
        qdd = dynamics.aba(model, q, v, jnp.zeros((B, model.nv)).at[:, joint_dofs].set(out.tau_joints), f)
    else:
        out = jax.vmap(lambda *a: free_floating.rnea_free_floating(model, *a))(q, v, qdd_joints, f)
        qdd = jax.vmap(lambda q, v, t, f: dynamics.aba(model, q, v, jnp.zeros(model.nv).at[joint_dofs].set(t), f))(
            q, v, out.tau_joints, f)
    assert relative_error(qdd[:, joint_dofs], qdd_joints) < 1e-10
    assert relative_error(qdd[:, base_dofs], out.base_acceleration) < 1e-10
    branch = np.concatenate([np.arange(model.idx_v[k], model.idx_v[k] + 1) for k in (3, 4)])
    held = jax.vmap(lambda q, v, a, f: dynamics.rnea(model, q, v, jnp.zeros(model.nv).at[joint_dofs].set(a), f))(
        q, v, qdd_joints, f)
    assert relative_error(out.tau_joints[:, np.searchsorted(joint_dofs, branch)], held[:, branch]) < 1e-12
