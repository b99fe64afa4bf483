"""Flexible links as generalized joint-plus-deformation bodies that run through the SAME recursions
(RNEA, ABA, CRBA) and the SAME dense masked operators as rigid links (docs/flexible.md §1).

An Euler–Bernoulli beam of length L along its link's x axis (bending stiffness EI, mass per length
ρA) is discretised by rigid finite elements (Kruszewski's RFEM, a Hencky bar chain): with
h = L / N, elastic revolute *deformation joints* sit at x_i = (i − ½) h, i = 1 … N, each with the
element stiffness k = EI / h (and optional Kelvin–Voigt damping c = β k). The link's own body is
the piece [0, h/2] carried by the link's joint; the pieces [x_i, x_i + h] (the last [x_N, L]) are
new links, uniform rods with the beam's distributed mass. Bending about z only ("z", planar,
deflection along y) or about z then y ("yz", a massless intermediate link per node). Children of
the flexible link attach to its tip piece at (L, 0, 0).

The deformation coordinates η are the deformation joints' angles: they extend q and v, so every
algorithm is the rigid one on the extended model with the elastic generalized force
Q_e = −K η − C η̇ added to τ (docs/flexible.md). Centrifugal (geometric) stiffening is not an
added term here: the chain's kinematics are exact, so it is always present; the linear
assumed-modes model of `jaxsoa.systems.flexible.modal` offers it as an option.

Host side: `Beam`, `insert_flexible_links(tree, beams)`, `flexible_model(tree, beams)`,
`tree_from_model(model)`. Traced: `elastic_forces`, `forward_dynamics`, `inverse_dynamics`,
`forward_dynamics_driven`, `mechanical_energy`, `natural_frequencies`, `tip_position`.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from jaxsoa.algorithms.dynamics import aba, crba, rnea
from jaxsoa.algorithms.kinematics import forward_kinematics
from jaxsoa.algorithms.operators import forward_dynamics_operator, inverse_dynamics_operator
from jaxsoa.multibody.build import STANDARD_GRAVITY, build_model
from jaxsoa.multibody.joints import JointType
from jaxsoa.multibody.model import Model, link_inertia, link_placement
from jaxsoa.spatial.small_linalg import solve

BENDING_AXES = {"z": ((0.0, 0.0, 1.0),), "yz": ((0.0, 0.0, 1.0), (0.0, 1.0, 0.0))}


@dataclasses.dataclass(frozen=True)
class Beam:
    """Host-side description of a uniform Euler–Bernoulli beam along its link's x axis (SI units).

    length L, bending_stiffness EI, mass_per_length ρA, n_segments N (deformation joints per
    bending axis), bending_axes "z" or "yz", damping β (C = β K, Kelvin–Voigt, seconds),
    axial_inertia_per_length ρJ (polar rotary inertia of an axisymmetric section, kg m; 0 for the
    Euler–Bernoulli line mass). `validate` (run by every builder that takes a Beam): ValueError naming
    the field unless L, EI, ρA are finite and > 0, β, ρJ finite and ≥ 0, N ≥ 1 (TypeError when N is not
    an int: 4.0 is refused) and bending_axes one of `BENDING_AXES`."""
    length: float
    bending_stiffness: float
    mass_per_length: float
    n_segments: int
    bending_axes: str = "z"
    damping: float = 0.0
    axial_inertia_per_length: float = 0.0

    def validate(self, where):
        for name in ("length", "bending_stiffness", "mass_per_length"):
            value = getattr(self, name)
            if not (np.isfinite(value) and value > 0):
                raise ValueError(f"{where}: field '{name}' = {value} must be positive and finite")
        for name in ("damping", "axial_inertia_per_length"):
            value = getattr(self, name)
            if not (np.isfinite(value) and value >= 0):
                raise ValueError(f"{where}: field '{name}' = {value} must be non-negative and finite")
        n = self.n_segments
        if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)):
            raise TypeError(f"{where}: field 'n_segments' = {n!r} must be an int, got {type(n).__name__}")
        if n < 1:
            raise ValueError(f"{where}: field 'n_segments' = {n} must be a positive integer")
        if self.bending_axes not in BENDING_AXES:
            raise ValueError(f"{where}: field 'bending_axes' = {self.bending_axes!r} must be 'z' or 'yz'")


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class FlexibleModel:
    """The extended rigid `model`, the deformation joints' stiffness and damping (n_def,), their
    static q / v indices, and per beam the static (root link, tip link, tip offset in the tip frame)."""
    model: Model
    stiffness: jax.Array
    damping: jax.Array
    q_index: tuple = dataclasses.field(metadata=dict(static=True))
    v_index: tuple = dataclasses.field(metadata=dict(static=True))
    beams: tuple = dataclasses.field(metadata=dict(static=True))


# ---------------------------------------------------------------------------------------------
# host-side construction

def tree_from_model(model: Model) -> dict:
    """A tree dict (the layout of `insert_flexible_links`, writable numpy copies) of `model`'s
    selected interfaces."""
    R, p = link_placement(model)
    mass, com, inertia = link_inertia(model)
    return dict(parent=np.array(model.parent), joint_types=np.array(model.joint_types),
                joint_axis=np.array(model.joint_axis), placement_rotation=np.array(R),
                placement_translation=np.array(p), mass=np.array(mass), com=np.array(com),
                inertia_com=np.array(inertia), link_names=model.link_names,
                link_joint_names=model.link_joint_names)


def _rod(beam: Beam, length):
    """(mass, com (3,), inertia about the com (3, 3)) of a uniform rod piece along x; an axisymmetric
    section of polar inertia ρJ adds ρJ l about x and ρJ l / 2 about y and z (perpendicular axes)."""
    m = beam.mass_per_length * length
    transverse = m * length ** 2 / 12.0 + beam.axial_inertia_per_length * length / 2
    return m, np.array([length / 2, 0.0, 0.0]), np.diag([beam.axial_inertia_per_length * length,
                                                         transverse, transverse])


def insert_flexible_links(tree: dict, beams: dict):
    """Replace each link `k` of `beams = {k: Beam}` by its rigid-finite-element chain.

    tree: dict of per-link arrays parent, joint_types, joint_axis, placement_rotation (n, 3, 3),
    placement_translation (n, 3), mass, com, inertia_com, link_names, link_joint_names.
    Returns (extended tree, deformation joint link indices (n_def,), stiffness (n_def,),
    damping (n_def,), beams as (root link, tip link, tip offset (3,)))."""
    out = {key: list(np.asarray(value)) if key not in ("link_names", "link_joint_names") else list(value)
           for key, value in tree.items()}
    names = out["link_names"]
    def_links, stiffness, damping, beam_info = [], [], [], []
    for k, beam in sorted(beams.items()):
        if not 0 <= k < len(tree["parent"]):
            raise ValueError(f"beams: link index {k} out of range")
        where = f"link '{names[k]}'"
        beam.validate(where)
        h, L = beam.length / beam.n_segments, beam.length
        children = [c for c in range(len(tree["parent"])) if tree["parent"][c] == k]
        for c in children:
            if np.abs(np.asarray(tree["placement_translation"][c]) - [L, 0.0, 0.0]).max() > 1e-9 * L:
                raise ValueError(f"{where}: child '{names[c]}' is not at the beam tip (L, 0, 0) "
                                 "(field 'placement_translation')")
        out["mass"][k], out["com"][k], out["inertia_com"][k] = _rod(beam, h / 2)        # piece [0, h/2]
        previous = k
        for i in range(1, beam.n_segments + 1):
            piece = _rod(beam, h if i < beam.n_segments else h / 2)
            for j, axis in enumerate(BENDING_AXES[beam.bending_axes]):
                last_axis = j == len(BENDING_AXES[beam.bending_axes]) - 1
                mass, com, inertia = piece if last_axis else (0.0, np.zeros(3), np.zeros((3, 3)))
                offset = (h / 2 if i == 1 else h) if j == 0 else 0.0
                suffix = "" if len(BENDING_AXES[beam.bending_axes]) == 1 else "zy"[j]
                for key, value in (("parent", previous), ("joint_types", JointType.REVOLUTE),
                                   ("joint_axis", np.array(axis)), ("placement_rotation", np.eye(3)),
                                   ("placement_translation", np.array([offset, 0.0, 0.0])),
                                   ("mass", mass), ("com", com), ("inertia_com", inertia),
                                   ("link_names", f"{names[k]}_seg{i}{suffix}"),
                                   ("link_joint_names", f"{names[k]}_flex{i}{suffix}")):
                    out[key].append(value)
                previous = len(out["parent"]) - 1
                def_links.append(previous)
                stiffness.append(beam.bending_stiffness / h)                 # k = EI / h
                damping.append(beam.damping * beam.bending_stiffness / h)    # c = β k
        tip_offset = (h / 2, 0.0, 0.0)
        for c in children:                                                  # tip piece frame at x_N = L − h/2
            out["parent"][c] = previous
            out["placement_translation"][c] = np.asarray(out["placement_translation"][c]) - [L - h / 2, 0.0, 0.0]
        beam_info.append((k, previous, tip_offset))
    arrays = {key: (tuple(v) if key in ("link_names", "link_joint_names") else np.asarray(v))
              for key, v in out.items()}
    return arrays, np.asarray(def_links), np.asarray(stiffness), np.asarray(damping), tuple(beam_info)


def flexible_model(tree: dict, beams: dict, gravity=STANDARD_GRAVITY, dtype=None) -> FlexibleModel:
    """Validated `FlexibleModel` of `tree` (see `insert_flexible_links`) with `beams = {link: Beam}`."""
    ext, def_links, stiffness, damping, beam_info = insert_flexible_links(tree, beams)
    model = build_model(ext["parent"], ext["joint_types"], ext["joint_axis"], ext["placement_rotation"],
                        ext["placement_translation"], ext["mass"], ext["com"], ext["inertia_com"],
                        link_names=ext["link_names"], link_joint_names=ext["link_joint_names"],
                        gravity=gravity, dtype=dtype)
    q_index = tuple(model.idx_q[k] for k in def_links)
    v_index = tuple(model.idx_v[k] for k in def_links)
    return FlexibleModel(model, jnp.asarray(stiffness, model.dtype), jnp.asarray(damping, model.dtype), q_index,
                         v_index, beam_info)


# ---------------------------------------------------------------------------------------------
# traced dynamics: the rigid algorithms with Q_e = −K η − C η̇ added

def _check_state(fm: FlexibleModel, **states):
    """Each state q (nq,) / v, tau, a (nv,) of one sample (ValueError naming it: a shorter one would be
    indexed with its slots clamped)."""
    sizes = {"q": fm.model.nq}
    for name, value in states.items():
        expected = (sizes.get(name, fm.model.nv),)
        if value is not None and jnp.shape(value) != expected:
            raise ValueError(f"argument '{name}' has shape {jnp.shape(value)}, expected {expected}")


def elastic_forces(fm: FlexibleModel, q, v):
    """Q_e (nv,): −k η − c η̇ on the deformation joints, zero on the others."""
    _check_state(fm, q=q, v=v)
    q_def, v_def = q[np.asarray(fm.q_index, np.int64)], v[np.asarray(fm.v_index, np.int64)]
    return jnp.zeros_like(v).at[np.asarray(fm.v_index, np.int64)].set(-fm.stiffness * q_def - fm.damping * v_def)


def forward_dynamics(fm: FlexibleModel, q, v, tau, f_ext=None, method="recursive"):
    """θ̈ = 𝓜⁻¹ (τ + Q_e − C), by ABA ("recursive") or the dense masked operators ("dense")."""
    if method not in ("recursive", "dense"):
        raise ValueError(f"method must be 'recursive' or 'dense', got {method!r}")
    fd = aba if method == "recursive" else forward_dynamics_operator
    return fd(fm.model, q, v, tau + elastic_forces(fm, q, v), f_ext)


def inverse_dynamics(fm: FlexibleModel, q, v, a, f_ext=None, method="recursive"):
    """τ = 𝓜 θ̈ + C − Q_e (zero on the deformation joints along a true motion), by RNEA or operators."""
    if method not in ("recursive", "dense"):
        raise ValueError(f"method must be 'recursive' or 'dense', got {method!r}")
    inv = rnea if method == "recursive" else inverse_dynamics_operator
    return inv(fm.model, q, v, a, f_ext) - elastic_forces(fm, q, v)


def forward_dynamics_driven(fm: FlexibleModel, q, v, a_driven, driven, tau=None):
    """Mixed dynamics: the velocities `driven` (static indices) follow prescribed accelerations
    `a_driven`; the others obey  M_ff θ̈_f = τ_f + Q_e,f − RNEA(q, v, θ̈⁰)_f  with θ̈⁰ = a_driven on
    the driven slots, 0 elsewhere (RNEA and CRBA of the same model). Returns the full θ̈ (nv,)."""
    driven = np.asarray(driven)
    nv = fm.model.nv
    if driven.ndim != 1 or not np.issubdtype(driven.dtype, np.integer) or np.any((driven < 0) | (driven >= nv)) \
            or len(set(driven.tolist())) != driven.size:
        raise ValueError(f"argument 'driven' must be distinct velocity indices in [0, {nv}), got {driven.tolist()}")
    if jnp.shape(a_driven) != driven.shape:
        raise ValueError(f"argument 'a_driven' has shape {jnp.shape(a_driven)}, expected {driven.shape}: one "
                         "acceleration per driven index")
    _check_state(fm, q=q, v=v, tau=tau)
    free = np.setdiff1d(np.arange(nv), driven)
    tau = jnp.zeros_like(v) if tau is None else tau
    a0 = jnp.zeros_like(v).at[driven].set(a_driven)
    residual = tau + elastic_forces(fm, q, v) - rnea(fm.model, q, v, a0)
    M_ff = crba(fm.model, q)[free][:, free]
    return a0.at[free].set(solve(M_ff, residual[free]))


def mechanical_energy(fm: FlexibleModel, q, v):
    """E = ½ vᵀ 𝓜 v + ½ Σ k η² − Σ_k m_k g · c_k, a scalar."""
    model = fm.model
    kinetic = 0.5 * v @ crba(model, q) @ v
    elastic = 0.5 * jnp.sum(fm.stiffness * q[np.asarray(fm.q_index, np.int64)] ** 2)
    mass, com, _ = link_inertia(model)
    R_world, p_world = forward_kinematics(model, q)
    com_world = p_world + jnp.einsum("kij,kj->ki", R_world, com)
    return kinetic + elastic - jnp.sum(mass * (com_world @ model.gravity))


def natural_frequencies(fm: FlexibleModel, q):
    """(n_def,) ω in rad/s, ascending, of the deformation joints about configuration q with every
    other joint held: eigenvalues of K ω² = M_dd(q) ω² (M_dd from CRBA), by a Cholesky whitening."""
    index = np.asarray(fm.v_index, np.int64)
    M_dd = crba(fm.model, q)[index][:, index]
    L_inv = jnp.linalg.inv(jnp.linalg.cholesky(M_dd))
    return jnp.sqrt(jnp.linalg.eigvalsh(L_inv @ jnp.diag(fm.stiffness) @ L_inv.T))


def tip_position(fm: FlexibleModel, q, beam=0):
    """(3,) tip point of beam `beam` (an index into fm.beams) in its root link's frame: (L, 0, 0) undeformed."""
    if isinstance(beam, (bool, np.bool_)) or not isinstance(beam, (int, np.integer)) or not 0 <= beam < len(fm.beams):
        raise ValueError(f"argument 'beam' must be an int in [0, {len(fm.beams)}), got {beam!r}")
    root, tip, offset = fm.beams[beam]
    R_world, p_world = forward_kinematics(fm.model, q)
    p_tip = p_world[tip] + R_world[tip] @ jnp.asarray(offset, p_world.dtype)
    return R_world[root].T @ (p_tip - p_world[root])
