"""Random kinematic trees built identically in jaxsoa and Pinocchio, and the maps between the two.

Import as ``from tests.helpers.trees import ...``.

A *tree* is a dict of numpy arrays in "tree order" (`random_tree` draws parent[k] < k, not
necessarily depth-first; the builders accept any valid parent array):

    parent (n,) int64              -1 for the single root
    joint_types (n,) int64         `jaxsoa.JointType` values (FIXED, REVOLUTE, PRISMATIC, SPHERICAL, FREE,
                                   PLANAR, REVOLUTE_UNBOUNDED)
    joint_axis (n, 3)              unit axis (revolute / prismatic / revolute-unbounded; a unit vector
                                   for every link)
    placement_rotation (n, 3, 3)   pose of link k's joint frame in its parent's link frame
    placement_translation (n, 3)
    mass (n,), com (n, 3), inertia_com (n, 3, 3)   inertia of link k in its own frame
    link_names, link_joint_names   tuples of str

API:
    random_tree(rng, n_links, joint_types=None, floating=False, link_types=None) -> tree
    random_group(rng, n_links, n_models, joint_types=None, root_type=None, root_at=None)
        -> [(tree, jaxsoa model, pinocchio model)]: random trees whose jaxsoa models share one
        joint-type sequence in storage order (model 0 in tree order when the root may sit at
        index 0, the others in random storage orders), so `stack_models` can batch them
    build_jaxsoa(tree, dtype=jnp.float64, permutation=None) -> jaxsoa.Model
        (`permutation[i]` = tree link stored at jaxsoa index i; q/v follow that storage order)
    build_pinocchio(tree) -> pin.Model   (joints added depth-first, as Pinocchio requires;
        FIXED links merged into their moving ancestor; one OP_FRAME per link, named after it)
    link_map(model, pin_model) -> (joint_ids [int], placements [pin.SE3]) for each jaxsoa link:
        the Pinocchio joint that carries it and the link frame's pose in that joint's frame
    coordinate_maps(model, pin_model) -> (q_index, v_index): q_jaxsoa = q_pin[q_index], same for v
    random_state(rng, pin_model, n_states, position_bound=np.pi) -> dict q, v, a, tau (pin layout)
    to_jaxsoa(model, pin_model, state) -> same dict in jaxsoa layout
    fext_to_pinocchio(model, pin_model, f_ext) -> list of pin.Force (one per Pinocchio joint)
    motion_to_jaxsoa(vector6) / jacobian_to_jaxsoa(J): Pinocchio [linear; angular] -> [angular; linear]
    stack_models(models) -> one Model batched on a leading axis (same joint types; names replaced
        by canonical ones, since names are static metadata): vmap over topologies, one compile
    relative_error(x, ref) = max|x - ref| / max(1, max|ref|)
    jaxsoa_dynamics(model, q, v, a, tau, f_ext) -> dict rnea, rnea_fext, aba, aba_fext, crba
    pinocchio_dynamics(pin_model, state, fext) -> the same dict, Pinocchio layout, batched

`link_map` and `coordinate_maps` work by name, so they serve URDF robots too: jaxsoa links are
found among Pinocchio's frames by link name (URDF body frames; `build_pinocchio`'s frames), a
name absent from the frames maps to the universe at the identity (a fixed URDF root).
"""

import dataclasses

import jax.numpy as jnp
import numpy as np
import pinocchio as pin

import jaxsoa
from jaxsoa.multibody.joints import JointType
from tests.helpers.random_models import random_inertia, random_rotation

MOVING_TYPES = (JointType.REVOLUTE, JointType.PRISMATIC, JointType.SPHERICAL)


# ---------------------------------------------------------------------------------------------
# random data

def _unit(x):
    return x / np.linalg.norm(x)


def random_tree(rng, n_links, joint_types=None, floating=False, link_types=None) -> dict:
    """Random tree of `n_links` links (parent[k] uniform in [0, k)). Non-root joints are drawn
    uniformly from `joint_types` (default revolute, prismatic, spherical); the root gets a free
    joint if `floating`, else a type drawn the same way. `link_types` (n,), if given, sets every
    link's joint type instead (then `joint_types` and `floating` are ignored)."""
    joint_types = MOVING_TYPES if joint_types is None else tuple(joint_types)
    parent = np.array([-1] + [rng.integers(0, k) for k in range(1, n_links)], dtype=np.int64)
    types = np.array([joint_types[rng.integers(len(joint_types))] for _ in range(n_links)], dtype=np.int64)
    if floating:
        types[0] = JointType.FREE
    if link_types is not None:
        types = np.array(link_types, dtype=np.int64)
    inertias = [random_inertia(rng) for _ in range(n_links)]
    return dict(
        parent=parent,
        joint_types=types,
        joint_axis=np.stack([_unit(rng.normal(size=3)) for _ in range(n_links)]),
        placement_rotation=np.stack([random_rotation(rng) for _ in range(n_links)]),
        placement_translation=rng.normal(0.0, 0.3, (n_links, 3)),
        mass=np.array([m for m, _, _ in inertias]),
        com=np.stack([c for _, c, _ in inertias]),
        inertia_com=np.stack([J for _, _, J in inertias]),
        link_names=tuple(f"link{k}" for k in range(n_links)),
        link_joint_names=tuple(f"joint{k}" for k in range(n_links)),
    )


def random_permutation(rng, n_links, root_at=None) -> np.ndarray:
    """Storage order for `build_jaxsoa`: permutation[i] = tree link stored at index i; the root
    (tree link 0) is stored at `root_at` if given."""
    perm = rng.permutation(n_links)
    if root_at is not None:
        perm = np.insert(np.delete(perm, np.flatnonzero(perm == 0)), root_at, 0)
    return perm


def random_group(rng, n_links, n_models, joint_types=None, root_type=None, root_at=None) -> list:
    """`n_models` random trees whose jaxsoa models share one joint-type sequence in storage order.

    The sequence is drawn from `joint_types` (default revolute, prismatic, spherical), with
    `root_type` (e.g. FREE) at storage index `root_at` if given (random index if `root_at` is
    None), and at least one moving joint. Model 0 is stored in tree order when the root's slot
    allows it, the others in random permutations; each tree's joint types are chosen so that its
    permuted storage order has the group's sequence. Returns [(tree, jaxsoa model, pin model)].
    """
    joint_types = MOVING_TYPES if joint_types is None else tuple(joint_types)
    if root_type is not None and root_at is None:
        root_at = int(rng.integers(n_links))
    while True:
        seq = np.array([joint_types[i] for i in rng.integers(len(joint_types), size=n_links)], dtype=np.int64)
        if root_type is not None:
            seq[root_at] = root_type
        if (seq != JointType.FIXED).any():
            break
    group = []
    for j in range(n_models):
        in_tree_order = j == 0 and root_at in (None, 0)
        perm = np.arange(n_links) if in_tree_order else random_permutation(rng, n_links, root_at)
        tree = random_tree(rng, n_links, link_types=seq[np.argsort(perm)])    # link k: seq[perm⁻¹(k)]
        model = build_jaxsoa(tree, permutation=perm)
        assert model.joint_types == tuple(seq.tolist())
        group.append((tree, model, build_pinocchio(tree)))
    return group


# ---------------------------------------------------------------------------------------------
# builders

def build_jaxsoa(tree, dtype=jnp.float64, permutation=None) -> jaxsoa.Model:
    """jaxsoa model of `tree` with link `permutation[i]` stored at index i (identity if None)."""
    n = len(tree["parent"])
    perm = np.arange(n) if permutation is None else np.asarray(permutation)
    inverse = np.argsort(perm)
    old_parent = tree["parent"][perm]
    parent = np.where(old_parent >= 0, inverse[np.maximum(old_parent, 0)], -1)
    return jaxsoa.build_model(
        parent=parent, joint_types=tree["joint_types"][perm], joint_axis=tree["joint_axis"][perm],
        placement_rotation=tree["placement_rotation"][perm],
        placement_translation=tree["placement_translation"][perm],
        mass=tree["mass"][perm], com=tree["com"][perm], inertia_com=tree["inertia_com"][perm],
        link_names=[tree["link_names"][k] for k in perm],
        link_joint_names=[tree["link_joint_names"][k] for k in perm], dtype=dtype)


def _pin_joint_model(joint_type, axis):
    if joint_type == JointType.REVOLUTE:
        return pin.JointModelRevoluteUnaligned(axis)
    if joint_type == JointType.PRISMATIC:
        return pin.JointModelPrismaticUnaligned(axis)
    if joint_type == JointType.SPHERICAL:
        return pin.JointModelSpherical()
    if joint_type == JointType.FREE:
        return pin.JointModelFreeFlyer()
    if joint_type == JointType.PLANAR:
        return pin.JointModelPlanar()
    if joint_type == JointType.REVOLUTE_UNBOUNDED:
        return pin_revolute_unbounded(axis)
    raise ValueError(f"joint type {joint_type} has no Pinocchio joint model")


def pin_revolute_unbounded(axis) -> pin.JointModel:
    """Pinocchio's revolute-unbounded joint about the unit `axis` (3,): `JointModelRUBX/RUBY/RUBZ` for a
    coordinate axis, else `JointModelRevoluteUnboundedUnaligned`, whose Python binding (Pinocchio 4.1) has no
    axis argument: it is taken from a one-joint URDF (`continuous`) parsed by Pinocchio (the axis is written
    with `repr`, which round-trips the float64 values exactly)."""
    axis = np.asarray(axis, dtype=np.float64)
    for k, joint in enumerate((pin.JointModelRUBX, pin.JointModelRUBY, pin.JointModelRUBZ)):
        if np.array_equal(axis, np.eye(3)[k]):
            return joint()
    xyz = " ".join(repr(float(x)) for x in axis)
    inertia = '<inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="1"/>'
    urdf = (f'<robot name="r"><link name="a"/><link name="b"><inertial><mass value="1"/>{inertia}</inertial></link>'
            f'<joint name="j" type="continuous"><parent link="a"/><child link="b"/><axis xyz="{xyz}"/></joint>'
            '</robot>')
    joint = pin.buildModelFromXML(urdf).joints[1]
    assert joint.shortname() in ("JointModelRevoluteUnboundedUnaligned", "JointModelRUBX", "JointModelRUBY",
                                 "JointModelRUBZ"), joint.shortname()
    return joint


def depth_first_order(parent) -> list:
    """Links of a parent array in depth-first preorder (children by increasing index)."""
    children = {k: [] for k in range(-1, len(parent))}
    for k, p in enumerate(parent):
        children[int(p)].append(k)
    order, stack = [], list(reversed(children[-1]))
    while stack:
        k = stack.pop()
        order.append(k)
        stack.extend(reversed(children[k]))
    return order


def build_pinocchio(tree) -> pin.Model:
    """Pinocchio model of `tree`: joints added in depth-first order (Pinocchio's algorithms assume
    each subtree's velocities are contiguous), FIXED links welded to their moving ancestor."""
    model = pin.Model()
    joint_of, offset = {}, {}            # link -> carrying pin joint, link frame pose in that joint
    for k in depth_first_order(tree["parent"]):
        p = int(tree["parent"][k])
        parent_joint, parent_offset = (0, pin.SE3.Identity()) if p < 0 else (joint_of[p], offset[p])
        placement = parent_offset * pin.SE3(tree["placement_rotation"][k], tree["placement_translation"][k])
        joint_type = int(tree["joint_types"][k])
        if joint_type == JointType.FIXED:
            joint_of[k], offset[k] = parent_joint, placement
        else:
            joint_of[k] = model.addJoint(parent_joint, _pin_joint_model(joint_type, tree["joint_axis"][k]),
                                         placement, tree["link_joint_names"][k])
            offset[k] = pin.SE3.Identity()
        model.appendBodyToJoint(joint_of[k], pin.Inertia(float(tree["mass"][k]), tree["com"][k],
                                                         tree["inertia_com"][k]), offset[k])
        model.addFrame(pin.Frame(tree["link_names"][k], joint_of[k], offset[k], pin.FrameType.OP_FRAME))
    return model


# ---------------------------------------------------------------------------------------------
# maps between the engines

def link_map(model: jaxsoa.Model, pin_model: pin.Model):
    """For each jaxsoa link: the Pinocchio joint carrying it and its frame's pose in that joint."""
    joint_ids, placements = [], []
    for k, name in enumerate(model.link_names):
        kind = pin.FrameType.BODY if pin_model.existFrame(name, pin.FrameType.BODY) else None
        if pin_model.existFrame(name):                  # a URDF joint may share the link's name (SO-100)
            frame = pin_model.frames[pin_model.getFrameId(name) if kind is None else pin_model.getFrameId(name, kind)]
            jid, placement = int(frame.parentJoint), frame.placement
        else:                                        # e.g. a fixed URDF root at the world origin
            jid, placement = 0, pin.SE3.Identity()
        if model.joint_types[k] != JointType.FIXED:
            assert pin_model.names[jid] == model.link_joint_names[k], (name, pin_model.names[jid])
            assert np.allclose(placement.homogeneous, np.eye(4)), name
        joint_ids.append(jid)
        placements.append(placement)
    return joint_ids, placements


def coordinate_maps(model: jaxsoa.Model, pin_model: pin.Model):
    """(q_index (nq,), v_index (nv,)) with q_jaxsoa = q_pin[q_index], v_jaxsoa = v_pin[v_index]."""
    joint_ids, _ = link_map(model, pin_model)
    q_index, v_index = [], []
    for k, joint_type in enumerate(model.joint_types):
        if joint_type == JointType.FIXED:
            continue
        jid = joint_ids[k]
        assert (pin_model.nqs[jid], pin_model.nvs[jid]) == (JointType(joint_type).nq, JointType(joint_type).nv)
        q_index.extend(pin_model.idx_qs[jid] + np.arange(pin_model.nqs[jid]))
        v_index.extend(pin_model.idx_vs[jid] + np.arange(pin_model.nvs[jid]))
    q_index, v_index = np.array(q_index, dtype=np.int64), np.array(v_index, dtype=np.int64)
    assert sorted(q_index) == list(range(pin_model.nq)) and sorted(v_index) == list(range(pin_model.nv))
    return q_index, v_index


def random_state(rng, pin_model: pin.Model, n_states: int, position_bound=np.pi) -> dict:
    """n_states random states in Pinocchio's layout: q from `pin.randomConfiguration` within the
    model's position limits clipped to ±position_bound (finite bounds: free-flyer positions and
    unlimited joints get ±position_bound; quaternions are uniform unit), v, a, tau standard Gaussian."""
    pin.seed(int(rng.integers(2**31)))
    lower = np.maximum(pin_model.lowerPositionLimit, -position_bound)
    upper = np.minimum(pin_model.upperPositionLimit, position_bound)
    q = np.stack([pin.randomConfiguration(pin_model, lower, upper) for _ in range(n_states)])
    v, a, tau = (rng.normal(size=(n_states, pin_model.nv)) for _ in range(3))
    return dict(q=q, v=v, a=a, tau=tau)


def to_jaxsoa(model: jaxsoa.Model, pin_model: pin.Model, state: dict) -> dict:
    """A state dict (q, and any of v, a, tau; batched on the leading axis) in jaxsoa's layout."""
    q_index, v_index = coordinate_maps(model, pin_model)
    return {key: np.asarray(x)[..., q_index if key == "q" else v_index] for key, x in state.items()}


def fext_to_pinocchio(model: jaxsoa.Model, pin_model: pin.Model, f_ext) -> list:
    """jaxsoa (n, 6) link-frame wrenches [moment; force] -> Pinocchio `fext` (one pin.Force per
    joint, in the joint's frame; wrenches on welded links are moved to their joint and summed)."""
    joint_ids, placements = link_map(model, pin_model)
    fext = [pin.Force.Zero() for _ in range(pin_model.njoints)]
    for k, f in enumerate(np.asarray(f_ext)):
        fext[joint_ids[k]] += placements[k].act(pin.Force(f[3:], f[:3]))
    return fext


def motion_to_jaxsoa(vector):
    """Pinocchio 6-vector(s) [linear; angular] (leading axis) -> jaxsoa [angular; linear]."""
    vector = np.asarray(vector)
    return np.concatenate([vector[3:], vector[:3]], axis=0)


def jacobian_to_jaxsoa(J):
    """Pinocchio (6, nv) Jacobian rows [linear; angular] -> jaxsoa rows [angular; linear]."""
    return motion_to_jaxsoa(J)


# ---------------------------------------------------------------------------------------------
# batched evaluation and references

def stack_models(models) -> jaxsoa.Model:
    """Stack models with equal `joint_types` on a new leading axis (topology, placements and
    inertias are traced data, so one compilation serves them all). Names are static metadata,
    so they are replaced by canonical ones: build any name-based maps before stacking."""
    n = models[0].n_links
    names = tuple(f"link{i}" for i in range(n))
    joint_names = tuple(f"joint{i}" for i in range(n))
    models = [dataclasses.replace(m, link_names=names, link_joint_names=joint_names) for m in models]
    return jaxsoa.stack_models(models)


def relative_error(x, ref) -> float:
    """max |x - ref| / max(1, max |ref|): absolute below unit scale, relative above."""
    x, ref = np.asarray(x), np.asarray(ref)
    return float(np.abs(x - ref).max(initial=0.0) / max(1.0, np.abs(ref).max(initial=0.0)))     # 0 for empty arrays


def jaxsoa_dynamics(model, q, v, a, tau, f_ext) -> dict:
    """All dynamics algorithms at one state (to be vmapped / jitted once per model)."""
    return dict(rnea=jaxsoa.rnea(model, q, v, a), rnea_fext=jaxsoa.rnea(model, q, v, a, f_ext),
                aba=jaxsoa.aba(model, q, v, tau), aba_fext=jaxsoa.aba(model, q, v, tau, f_ext),
                crba=jaxsoa.crba(model, q))


def pinocchio_dynamics(pin_model: pin.Model, state: dict, fext: list) -> dict:
    """Pinocchio's rnea / aba (without and with `fext[i]`, a list of pin.Force per joint) and
    crba (upper triangle symmetrised), for a batched state in Pinocchio's layout."""
    data = pin_model.createData()
    out = {key: [] for key in ("rnea", "rnea_fext", "aba", "aba_fext", "crba")}
    for i, (q, v, a, tau) in enumerate(zip(state["q"], state["v"], state["a"], state["tau"], strict=True)):
        out["rnea"].append(pin.rnea(pin_model, data, q, v, a).copy())
        out["rnea_fext"].append(pin.rnea(pin_model, data, q, v, a, fext[i]).copy())
        out["aba"].append(pin.aba(pin_model, data, q, v, tau).copy())
        out["aba_fext"].append(pin.aba(pin_model, data, q, v, tau, fext[i]).copy())
        M = pin.crba(pin_model, data, q)
        out["crba"].append(np.triu(M) + np.triu(M, 1).T)
    return {key: np.stack(x) for key, x in out.items()}


def pinocchio_to_jaxsoa_dynamics(model, pin_model, reference: dict) -> dict:
    """Reorder `pinocchio_dynamics` output (batched) into jaxsoa's velocity layout."""
    _, v_index = coordinate_maps(model, pin_model)
    out = {key: x[..., v_index] for key, x in reference.items() if key != "crba"}
    out["crba"] = reference["crba"][..., v_index[:, None], v_index[None, :]]
    return out


def counting(fn):
    """(wrapped fn, [count]): each trace of the wrapped fn (= each compilation under jit)
    increments the count, so a test can assert how often a program compiled."""
    count = [0]

    def wrapped(*args):
        count[0] += 1
        return fn(*args)

    return wrapped, count
