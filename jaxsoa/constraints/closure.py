"""Loop-closure constraints (docs/user_guide.md §6): each loop is cut at one joint, and the cut joint becomes
a constraint between two frames — one on link a, one on link b (link −1 is the world).

Conventions. The cut frames `ca` (on a) and `cb` (on b) coincide when the loop is closed. The
relative pose is X_ca_cb = (R_ab, p_ab), and the relative twist of b w.r.t. a across the cut is
the body velocity of that pose, in cut-b axes and at the cut-b origin:

    V_rel = X_cb_world (V_b − V_a)          (V_k: world-frame spatial velocities, `[ω; v]`)

`basis` (6, 6) selects the constrained directions of V_rel (rows; unused rows zero). The
multipliers λ are the components, along those rows, of the wrench `[moment; force]` that link a
applies to link b at the cut-b origin in cut-b axes (−that wrench acts on a):

    G_c = basis · X_cb_world (J_b − J_a)      Ġ_c v = basis · (X_cb_world (A_b − A_a) − V_b ×m V_rel)
    e   = basis · [e_rot; R_abᵀ p_ab]          ė = G_c v on the closed manifold (e = 0)

with e_rot = log(R_ab) when the basis constrains the rotation about the cut z axis (weld, planar
weld) and e_rot = (R_abᵀ z) × z (the misalignment of the revolute axis z, consistent for any
joint angle) otherwise. Inactive cuts (`active` False) give zero rows everywhere, so one compiled
program serves grasping and releasing.

Shapes: n_cuts is static (the leading axis of every field); rows are stacked cut by cut, (6·n_cuts,).
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import checkify

from jaxsoa.algorithms.kinematics import forward_kinematics, joint_jacobians, link_motion
from jaxsoa.multibody.arguments import default_dtype, entry_point
from jaxsoa.multibody.model import Model
from jaxsoa.multibody.scalars import check_scalar
from jaxsoa.spatial.algebra import act_motion, cross_motion, inv_act_motion, mat_vec, se3_compose, se3_inverse
from jaxsoa.spatial.rotation import log_so3

CUT_TYPES = ("weld", "spherical", "revolute")
# constrained rows of [ω; v] in the cut frame; planar variants for motion in the cut x-y plane
_ROWS = {("weld", False): (0, 1, 2, 3, 4, 5), ("spherical", False): (3, 4, 5),
         ("revolute", False): (0, 1, 3, 4, 5), ("weld", True): (2, 3, 4), ("revolute", True): (3, 4)}


class LoopClosure(NamedTuple):
    """Cut joints, a PyTree of arrays with a static leading axis n_cuts (see the module docstring).

    link_a, link_b (n_cuts,) int (−1 = world); R_a_cut (n_cuts, 3, 3), p_a_cut (n_cuts, 3): cut
    frame in link a's frame (world if −1); R_b_cut, p_b_cut likewise on b; basis (n_cuts, 6, 6)
    rows = constrained directions of V_rel; active (n_cuts,) bool."""
    link_a: jax.Array
    link_b: jax.Array
    R_a_cut: jax.Array
    p_a_cut: jax.Array
    R_b_cut: jax.Array
    p_b_cut: jax.Array
    basis: jax.Array
    active: jax.Array


def _rotation_to_z(axis):
    """A rotation R with R e_z = axis (unit), numpy."""
    z = np.array([0.0, 0.0, 1.0])
    c, w = float(axis @ z), np.cross(z, axis)
    s = np.linalg.norm(w)
    if s < 1e-12:
        return np.eye(3) if c > 0 else np.diag([1.0, -1.0, -1.0])
    k = w / s
    K = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + s * K + (1 - c) * K @ K


def loop_closure(link_a, link_b, X_a_cut, X_b_cut, cut_type, axis=(0.0, 0.0, 1.0), planar=False,
                 active=True, *, model=None, dtype=None, name="cut"):
    """Host builder of one cut joint -> `LoopClosure` with n_cuts = 1 (stack with `stack_closures`).

    X_a_cut, X_b_cut: (R (3, 3), p (3,)) cut frame in link a's / b's frame. cut_type: "weld",
    "spherical" or "revolute" (about `axis`, given in the cut frame: the cut frames are rotated so
    that their z axis is `axis`). planar=True keeps only the rows of motion in the cut x-y plane
    (revolute: linear x, y; weld: angular z, linear x, y). `model`, if given, checks link indices
    and sets the default dtype (else JAX's default float, as `build_model`). ValueError names `name` and the field."""
    if cut_type not in CUT_TYPES:
        raise ValueError(f"{name}: field 'cut_type' = {cut_type!r} is not one of {CUT_TYPES}")
    if (cut_type, bool(planar)) not in _ROWS:
        raise ValueError(f"{name}: field 'planar' is not available for a {cut_type} cut")
    n_links = None if model is None else model.n_links
    for field, flag in (("planar", planar), ("active", active)):
        if not isinstance(flag, (bool, np.bool_)):
            raise TypeError(f"{name}: field '{field}' must be True or False, got {flag!r}")
    for field, link in (("link_a", link_a), ("link_b", link_b)):
        if isinstance(link, (bool, np.bool_)) or not isinstance(link, (int, np.integer)):
            raise TypeError(f"{name}: field '{field}' must be an int link index (or -1 for the world), got {link!r}")
        if link < -1 or (n_links is not None and link >= n_links):
            raise ValueError(f"{name}: field '{field}' = {link} is not a link index (or -1 for the world)")
    if link_a == link_b:
        raise ValueError(f"{name}: fields 'link_a' and 'link_b' are the same link {link_a}")
    axis = np.asarray(axis, np.float64)
    if axis.shape != (3,) or not np.all(np.isfinite(axis)) or abs(np.linalg.norm(axis) - 1) > 1e-9:
        raise ValueError(f"{name}: field 'axis' must be a finite unit 3-vector, got {axis}")
    R_align = _rotation_to_z(axis)
    frames = []
    for field, X in (("X_a_cut", X_a_cut), ("X_b_cut", X_b_cut)):
        if not isinstance(X, (tuple, list)) or len(X) != 2:
            raise ValueError(f"{name}: field '{field}' must be a finite (R (3, 3), p (3,)) pair, "
                             f"got {type(X).__name__}")
        R, p = np.asarray(X[0], np.float64), np.asarray(X[1], np.float64)
        if R.shape != (3, 3) or p.shape != (3,) or not (np.all(np.isfinite(R)) and np.all(np.isfinite(p))):
            raise ValueError(f"{name}: field '{field}' must be a finite (R (3, 3), p (3,)) pair")
        if np.abs(R.T @ R - np.eye(3)).max() > 1e-9 or np.linalg.det(R) < 0:
            raise ValueError(f"{name}: field '{field}' rotation is not a rotation matrix")
        frames.append((R @ R_align, p))
    basis = np.zeros((6, 6))
    rows = list(_ROWS[(cut_type, bool(planar))])
    basis[rows, rows] = 1.0
    dtype = default_dtype(dtype) if model is None or dtype is not None else model.dtype
    (R_a, p_a), (R_b, p_b) = frames

    def arr(x):
        return jnp.asarray(x, dtype)[None]

    return LoopClosure(link_a=jnp.asarray([link_a], jnp.int32), link_b=jnp.asarray([link_b], jnp.int32),
                       R_a_cut=arr(R_a), p_a_cut=arr(p_a), R_b_cut=arr(R_b), p_b_cut=arr(p_b),
                       basis=arr(basis), active=jnp.asarray([active], bool))


def stack_closures(*closures) -> LoopClosure:
    """Concatenate closures along the cut axis (n_cuts adds up). TypeError unless every argument is a
    `LoopClosure` and their frames share one dtype (a mixed stack would promote silently)."""
    if not closures or not all(isinstance(c, LoopClosure) for c in closures):
        raise TypeError("stack_closures: expected one or more LoopClosure arguments, got "
                        f"{[type(c).__name__ for c in closures]}")
    dtypes = {jnp.result_type(c.R_a_cut) for c in closures}
    if len(dtypes) > 1:
        raise TypeError(f"stack_closures: the closures have different dtypes {sorted(map(str, dtypes))}")
    return LoopClosure(*(jnp.concatenate(fields) for fields in zip(*closures, strict=True)))


def _at(values, world_value, link):
    """Per-cut value of per-link `values` (n, ...) at `link` (n_cuts,), `world_value` where −1."""
    padded = jnp.concatenate([values, world_value[None].astype(values.dtype)])
    return padded[jnp.where(link < 0, values.shape[0], link)]


def _cut_poses(closure: LoopClosure, R_world, p_world):
    """World poses of the cut frames on a and b from the link poses (n, ...): (R, p) of ca and of cb."""
    eye, zero = jnp.eye(3, dtype=R_world.dtype), jnp.zeros(3, R_world.dtype)
    X_world_ca = se3_compose(_at(R_world, eye, closure.link_a), _at(p_world, zero, closure.link_a),
                             closure.R_a_cut, closure.p_a_cut)
    X_world_cb = se3_compose(_at(R_world, eye, closure.link_b), _at(p_world, zero, closure.link_b),
                             closure.R_b_cut, closure.p_b_cut)
    return X_world_ca, X_world_cb


def _rows(closure: LoopClosure, x6):
    """(n_cuts, 6) cut-frame vectors -> (6·n_cuts,) basis-projected, zero for inactive cuts."""
    projected = mat_vec(closure.basis, x6) * closure.active[:, None].astype(x6.dtype)
    return projected.reshape(-1)


def _error(closure: LoopClosure, X_world_ca, X_world_cb):
    R_ab, p_ab = se3_compose(*se3_inverse(*X_world_ca), *X_world_cb)          # X_ca_cb = X_ca_w X_w_cb
    R_ba = jnp.swapaxes(R_ab, -1, -2)
    z = jnp.zeros_like(p_ab).at[:, 2].set(1.0)
    uses_log = jnp.any(closure.basis[:, :, 2] != 0, axis=-1)                  # rotation about z constrained
    e_rot = jnp.where(uses_log[:, None], log_so3(R_ab), jnp.cross(mat_vec(R_ba, z), z))   # log R or (Rᵀz) × z
    return _rows(closure, jnp.concatenate([e_rot, mat_vec(R_ba, p_ab)], -1))  # e_lin = R_abᵀ p_ab


def _jacobian(model: Model, q, closure: LoopClosure, X_world_cb):
    J_world = joint_jacobians(model, q, "world")                              # (n, 6, nv)
    zero = jnp.zeros(J_world.shape[1:], J_world.dtype)
    J_rel = _at(J_world, zero, closure.link_b) - _at(J_world, zero, closure.link_a)
    to_cut = jax.vmap(inv_act_motion, in_axes=(None, None, 1), out_axes=1)   # over the nv columns
    J_cut = jax.vmap(to_cut)(*X_world_cb, J_rel)                              # X_cb_w (J_b − J_a)
    G = jnp.einsum("cij,cjk->cik", closure.basis, J_cut) * closure.active[:, None, None].astype(J_cut.dtype)
    return G.reshape(-1, model.nv)


def _bias(model: Model, q, v, closure: LoopClosure, link_poses, X_world_cb):
    v_links, a_links = link_motion(model, q, v, jnp.zeros_like(v), jnp.zeros(6, v.dtype))
    V_world, A_world = act_motion(*link_poses, v_links), act_motion(*link_poses, a_links)   # (n, 6)
    zero = jnp.zeros(6, V_world.dtype)
    V_b_cut = inv_act_motion(*X_world_cb, _at(V_world, zero, closure.link_b))
    V_rel = V_b_cut - inv_act_motion(*X_world_cb, _at(V_world, zero, closure.link_a))
    A_rel = inv_act_motion(*X_world_cb, _at(A_world, zero, closure.link_b) - _at(A_world, zero, closure.link_a))
    return _rows(closure, A_rel - cross_motion(V_b_cut, V_rel))               # X_cb_w (A_b − A_a) − V_b × V_rel


class ClosureTerms(NamedTuple):
    """error e (6·n_cuts,), jacobian G_c (6·n_cuts, nv), bias Ġ_c v (6·n_cuts,): the results of
    `constraint_error`, `constraint_jacobian` and `constraint_bias`."""
    error: jax.Array
    jacobian: jax.Array
    bias: jax.Array


@entry_point(q='q', v='v', closure='closure')
def closure_terms(model: Model, q, v, closure: LoopClosure) -> ClosureTerms:
    """`ClosureTerms` at (q, v), sharing one forward-kinematics and one motion pass."""
    link_poses = forward_kinematics(model, q)
    X_world_ca, X_world_cb = _cut_poses(closure, *link_poses)
    return ClosureTerms(_error(closure, X_world_ca, X_world_cb), _jacobian(model, q, closure, X_world_cb),
                        _bias(model, q, v, closure, link_poses, X_world_cb))


@entry_point(q='q', closure='closure')
def constraint_error(model: Model, q, closure: LoopClosure):
    """(6·n_cuts,) position error e = basis · [e_rot; R_abᵀ p_ab] of each cut (module docstring)."""
    return _error(closure, *_cut_poses(closure, *forward_kinematics(model, q)))


@entry_point(q='q', closure='closure')
def constraint_jacobian(model: Model, q, closure: LoopClosure):
    """G_c (6·n_cuts, nv): G_c v = basis · V_rel, V_rel = X_cb_world (V_b − V_a) (module docstring)."""
    return _jacobian(model, q, closure, _cut_poses(closure, *forward_kinematics(model, q))[1])


@entry_point(q='q', v='v', closure='closure')
def constraint_bias(model: Model, q, v, closure: LoopClosure):
    """Ġ_c v (6·n_cuts,): the relative acceleration of the cut at q̈ = 0,
    basis · (X_cb_world (A_b − A_a) − V_b ×m V_rel), A_k world-frame spatial accelerations."""
    link_poses = forward_kinematics(model, q)
    return _bias(model, q, v, closure, link_poses, _cut_poses(closure, *link_poses)[1])


@entry_point(q='q', closure='closure')
def check_closure(model: Model, q, closure: LoopClosure, tol=1e-6):
    """checkify check: every active cut's position error is below `tol` (a closure whose frames do
    not meet — an inconsistent loop or a configuration far off the constraint manifold)."""
    err = jnp.max(jnp.abs(constraint_error(model, q, closure)), initial=0.0)
    checkify.check(err <= tol, "loop-closure error {e} exceeds tolerance", e=err)


@jax.jit
def _jacobian_and_error(model, q, closure):
    return constraint_jacobian(model, q, closure), constraint_error(model, q, closure)


class ClosureDiagnosis(NamedTuple):
    """Host (Python and numpy) values: rank of G_c, n_rows (constrained active rows), condition
    (σ_max / σ_min over the kept singular values; inf if rank 0), singular_values (n_rows,),
    redundant_rows (indices into the 6·n_cuts rows that are linear combinations of earlier rows),
    error (max |e|)."""
    rank: int
    n_rows: int
    condition: float
    singular_values: np.ndarray
    redundant_rows: list
    error: float


@entry_point(q='q', closure='closure')
def diagnose_closure(model: Model, q, closure: LoopClosure, rcond=1e-10) -> ClosureDiagnosis:
    """Host-side rank analysis of G_c at q (`ClosureDiagnosis`); singular values below
    `rcond` · σ_max count as zero (a finite rcond ≥ 0)."""
    check_scalar("rcond", rcond, 0.0)
    G, error = (np.asarray(x, np.float64) for x in _jacobian_and_error(model, q, closure))
    used = (np.abs(np.asarray(closure.basis)).sum(-1) > 0) & np.asarray(closure.active)[:, None]
    rows = np.flatnonzero(used.reshape(-1))
    sigma = np.linalg.svd(G[rows], compute_uv=False) if rows.size else np.zeros(0)
    cutoff = rcond * (sigma.max() if sigma.size else 0.0)
    kept = sigma[sigma > cutoff]
    redundant, rank = [], 0
    for i in range(rows.size):                 # a row is redundant if it does not raise the rank
        r = np.linalg.matrix_rank(G[rows[: i + 1]], tol=cutoff) if cutoff > 0 else 0
        if r > rank:
            rank = r
        else:
            redundant.append(int(rows[i]))
    return ClosureDiagnosis(rank=int(kept.size), n_rows=int(rows.size),
                            condition=float(kept.max() / kept.min()) if kept.size else float("inf"),
                            singular_values=sigma, redundant_rows=redundant,
                            error=float(np.abs(error).max(initial=0.0)))
