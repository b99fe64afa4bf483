"""Gas-assisted Gough-Stewart platform (docs/user_guide.md §9): parameters, geometry, inverse kinematics,
Jacobian and singularity / stroke checks. Dynamics: `jaxsoa.systems.stewart.dynamics`.

Nine UPS legs: legs 0-5 are electric cylinders (actuated), legs 6-8 pneumatic cylinders (passive
gas springs). Frames: {W} the base (world), {L} the platform with origin at the control point O_L.
The pose of {L} in {W} is `(p_world_platform (3,), R_world_platform (3, 3))` (p, R); the twist is
`u = [v_P; ω_P]` (LINEAR FIRST; world components; v_P the velocity of O_L).
Leg i runs from the base joint B_i (`b_i`, in {W}) to the platform joint A_i (`a_i`, in {L}):

    l_i n_i = p + R a_i − b_i                   (position)
    l̇_i = n_i · v_Ai,  v_Ai = v_P + ω_P × R a_i  (velocity, rows of J: l̇ = J u)
    ω_i = n_i × v_Ai / l_i                        (leg angular velocity, no spin about n_i)
    l̈_i = n_i · a_Ai + l_i |ω_i|²,  α_i = (n_i × a_Ai − 2 l̇_i ω_i) / l_i   (accelerations)

Reference geometry (`seed_points`): joints on circles of radius r_A (platform) / r_B (base) forming
semi-regular hexagons whose short edges (A_6 A_1, A_2 A_3, A_4 A_5) have length d_A / d_B and are
bisected by the x-axis and its ±120° rotations; gas joints form equilateral triangles on radii
r_PA / r_PB at `gas_phase` + 0°, 120°, 240° (default 60°, between the electric pairs).
"""

import dataclasses
import typing

import jax
import jax.numpy as jnp
import numpy as np

from jaxsoa.multibody.arguments import default_dtype
from jaxsoa.spatial.svd import singular_values

N_ELECTRIC, N_LEGS = 6, 9
GAS_MODES = ("none", "individual", "shared")
CONDITION_MARGIN = 10.0
"""Default singularity threshold of `build_stewart`: max_condition = CONDITION_MARGIN × the home
pose's condition number (the force-scale argument is in `build_stewart`'s docstring)."""


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class StewartParams:
    """Platform parameters (SI units). Legs: (9,) arrays, electric 0-5 then gas 6-8.

    platform_points (9, 3) A_i in {L};  base_points (9, 3) B_i in {W}
    platform_mass (), platform_com (3,) c in {L}, platform_inertia (3, 3) about C, {L} axes
        (moving platform + payload)
    barrel_mass, barrel_com, barrel_inertia (9,): barrel mass, its centre of mass at distance
        barrel_com from B_i along n_i, transverse moment of inertia about that centre
    rod_mass, rod_com, rod_inertia (9,): rod likewise, centre of mass at rod_com from A_i towards B_i
        (legs are axisymmetric and do not spin about n_i, so the axial moment never enters)
    stroke_min, stroke_max (9,): admissible leg lengths |A_i − B_i|
    piston_area (), tank_volume () (per tank, or the shared tank), precharge () gauge pressure at
        the mid pose, ambient_pressure () (0: the absolute-pressure formula with no
        back pressure), gas_length_mid (3,) gas column length in each barrel at the mid pose,
        leg_length_mid (3,) gas legs' lengths at the mid pose
    gravity (3,) in {W};  max_condition () J₁₋₆ with a larger condition number counts as singular
        (`build_stewart` derives the default from the home pose)
    gas_mode (static): "none" (vented), "individual" (one tank per gas cylinder), "shared"
    """
    platform_points: jax.Array
    base_points: jax.Array
    platform_mass: jax.Array
    platform_com: jax.Array
    platform_inertia: jax.Array
    barrel_mass: jax.Array
    barrel_com: jax.Array
    barrel_inertia: jax.Array
    rod_mass: jax.Array
    rod_com: jax.Array
    rod_inertia: jax.Array
    stroke_min: jax.Array
    stroke_max: jax.Array
    piston_area: jax.Array
    tank_volume: jax.Array
    precharge: jax.Array
    ambient_pressure: jax.Array
    gas_length_mid: jax.Array
    leg_length_mid: jax.Array
    gravity: jax.Array
    max_condition: jax.Array
    gas_mode: str = dataclasses.field(default="individual", metadata=dict(static=True))


def _check_ring(names, radius, short_edge, gas_radius):
    """ValueError naming the bad dimension unless `radius` and `gas_radius` are finite and > 0 and
    0 < `short_edge` < √3 `radius` (the semi-regular hexagon's short edges, shorter than the chord of 120°)."""
    r_name, d_name, rp_name = names
    for name, r in ((r_name, radius), (rp_name, gas_radius)):
        if not (np.isfinite(r) and r > 0):
            raise ValueError(f"argument '{name}' must be a positive radius, got {r}")
    if not (0 < short_edge < np.sqrt(3) * radius):
        raise ValueError(f"argument '{d_name}' = {short_edge} must lie in (0, √3 {r_name} = "
                         f"{np.sqrt(3) * radius:.6g}): a semi-regular hexagon needs short edges shorter than the "
                         "chord of 120°")


def hexapod_points(radius, short_edge, gas_radius, center, gas_phase=np.pi / 3):
    """(9, 3) joint positions (traceable): six on a circle of `radius` about `center` (3,) forming the
    semi-regular hexagon with short edge `short_edge`, three gas joints on `gas_radius` at `gas_phase` +
    k·120°. All in the plane z = center_z. ValueError naming the argument for scalars of another shape, a
    `center` not (3,), and, when the three dimensions are concrete (not traced), a radius not finite and
    > 0 or a short edge outside (0, √3 radius) (NaN or a reflected hexagon otherwise)."""
    for name, value in (("radius", radius), ("short_edge", short_edge), ("gas_radius", gas_radius),
                        ("gas_phase", gas_phase)):
        if jnp.ndim(value) != 0:
            raise ValueError(f"argument '{name}' must be a scalar, got shape {jnp.shape(value)}")
    if jnp.shape(center) != (3,):
        raise ValueError(f"argument 'center' has shape {jnp.shape(center)}, expected (3,)")
    if not any(isinstance(x, jax.core.Tracer) for x in (radius, short_edge, gas_radius)):
        _check_ring(("radius", "short_edge", "gas_radius"), float(radius), float(short_edge), float(gas_radius))
    half = jnp.arcsin(short_edge / (2 * radius))                       # half-angle of a short edge
    k = jnp.arange(3, dtype=jnp.result_type(half)) * (2 * np.pi / 3)
    angles = jnp.stack([k + half, k + 2 * np.pi / 3 - half], -1).reshape(-1)   # A1, A2, ..., A6
    gas_angles = gas_phase + k
    radii = jnp.concatenate([jnp.broadcast_to(radius, (6,)), jnp.broadcast_to(gas_radius, (3,))])
    theta = jnp.concatenate([angles, gas_angles])
    ring = jnp.stack([radii * jnp.cos(theta), radii * jnp.sin(theta), jnp.zeros_like(theta)], -1)
    return ring + center[None]


def seed_points(r_A, d_A, r_PA, r_B, d_B, r_PB, platform_center=(0.0, 0.0, 0.0), base_center=(0.0, 0.0, 0.0),
                gas_phase=np.pi / 3):
    """Host builder of the reference geometry: (platform_points, base_points) (9, 3) numpy arrays.
    `platform_center` is the upper circle's centre O_1 in {L} (the control-point offset ᴸw),
    `base_center` the lower circle's centre O in {W} (w_1). ValueError names a bad dimension."""
    for name, r, d, rp in (("A", r_A, d_A, r_PA), ("B", r_B, d_B, r_PB)):
        _check_ring((f"r_{name}", f"d_{name}", f"r_P{name}"), r, d, rp)
    top = hexapod_points(r_A, d_A, r_PA, jnp.asarray(platform_center, default_dtype()), gas_phase)
    bottom = hexapod_points(r_B, d_B, r_PB, jnp.asarray(base_center, default_dtype()), gas_phase)
    return np.asarray(top), np.asarray(bottom)


def build_stewart(platform_points, base_points, home_translation, *, platform_mass, platform_com, platform_inertia,
                  barrel_mass, barrel_com, barrel_inertia, rod_mass, rod_com, rod_inertia, stroke_min, stroke_max,
                  piston_area, tank_volume, precharge, gas_length_mid, ambient_pressure=101325.0,
                  gas_mode="individual", gravity=(0.0, 0.0, -9.81), max_condition=None, dtype=None):
    """Host builder: validated `StewartParams`. The mid pose (where the gas is precharged) is
    p = `home_translation`, R = I. Per-leg fields accept a scalar or (9,). ValueError names the field.

    `max_condition` (the singularity threshold of `pose_status`) defaults to `CONDITION_MARGIN` (10)
    times the condition number κ₀ of J₁₋₆ at the home pose. The choice, against the platform's
    nominal force scale: the electric forces for a wrench w are F = J₁₋₆⁻ᵀ w, so their worst-case
    gain is |F| / |w| ≤ 1/σ_min = κ / σ_max, and σ_max changes little over the workspace (1.88–2.20
    over the reachable poses of sims/stewart_gas.py); the forces the platform needs at home for its
    load are its nominal force scale, and a pose with κ > 10 κ₀ needs forces an order of magnitude
    beyond that scale for the same load — numbers a user would not trust. For sims/stewart_gas.py
    κ₀ = 1.72, so the threshold is 17.2: there merely holding the platform still (yawed by 81°)
    takes 2.5e5 N in one leg, 8× the 31 kN a leg carries at home with the gas vented and more than
    the whole platform's rated dynamic load (235 kN); a fixed threshold of 1e6 passed the pose at
    κ = 1.6e4 (yaw 89.99°) that needs 2.6e8 N. An explicit `max_condition` must be ≥ κ₀."""
    def arr(name, value, shape, positive=False, nonneg=False):
        a = np.broadcast_to(np.asarray(value, np.float64), shape) if np.ndim(value) == 0 and shape \
            else np.asarray(value, np.float64)
        if a.shape != shape:
            raise ValueError(f"{name} must have shape {shape}, got {a.shape}")
        if not np.all(np.isfinite(a)):
            raise ValueError(f"{name} has non-finite entries: {a}")
        if positive and np.any(a <= 0):
            raise ValueError(f"{name} must be > 0, got {a}")
        if nonneg and np.any(a < 0):
            raise ValueError(f"{name} must be ≥ 0, got {a}")
        return a

    if gas_mode not in GAS_MODES:
        raise ValueError(f"gas_mode must be one of {GAS_MODES}, got {gas_mode!r}")
    f = dict(platform_points=arr("platform_points", platform_points, (9, 3)),
             base_points=arr("base_points", base_points, (9, 3)),
             platform_mass=arr("platform_mass", platform_mass, (), positive=True),
             platform_com=arr("platform_com", platform_com, (3,)),
             platform_inertia=arr("platform_inertia", platform_inertia, (3, 3)),
             piston_area=arr("piston_area", piston_area, (), positive=True),
             tank_volume=arr("tank_volume", tank_volume, (), nonneg=True),
             precharge=arr("precharge", precharge, ()),
             ambient_pressure=arr("ambient_pressure", ambient_pressure, (), nonneg=True),
             gas_length_mid=arr("gas_length_mid", gas_length_mid, (3,), positive=True),
             gravity=arr("gravity", gravity, (3,)))
    for name, value in (("barrel_mass", barrel_mass), ("barrel_com", barrel_com), ("barrel_inertia", barrel_inertia),
                        ("rod_mass", rod_mass), ("rod_com", rod_com), ("rod_inertia", rod_inertia)):
        f[name] = arr(name, value, (9,), nonneg=True)
    f["stroke_min"] = arr("stroke_min", stroke_min, (9,), positive=True)
    f["stroke_max"] = arr("stroke_max", stroke_max, (9,), positive=True)
    inertia = f["platform_inertia"]
    if not np.allclose(inertia, inertia.T, atol=1e-12 * np.abs(inertia).max()) or np.linalg.eigvalsh(inertia)[0] <= 0:
        raise ValueError(f"platform_inertia must be symmetric positive definite, got {inertia}")
    if np.any(f["stroke_min"] >= f["stroke_max"]):
        raise ValueError(f"stroke_min must be < stroke_max, got {f['stroke_min']} and {f['stroke_max']}")
    home = arr("home_translation", home_translation, (3,))
    length_home = np.linalg.norm(home + f["platform_points"] - f["base_points"], axis=1)
    outside = np.flatnonzero((length_home < f["stroke_min"]) | (length_home > f["stroke_max"]))
    if outside.size:
        raise ValueError(f"home_translation puts legs {outside.tolist()} out of stroke: lengths {length_home[outside]}")
    f["leg_length_mid"] = length_home[N_ELECTRIC:]
    gas_at_min = f["gas_length_mid"] - (length_home[N_ELECTRIC:] - f["stroke_min"][N_ELECTRIC:])
    if np.any(gas_at_min <= 0):
        raise ValueError(f"gas_length_mid {f['gas_length_mid']} is not longer than the gas legs' retraction to "
                         f"stroke_min {length_home[N_ELECTRIC:] - f['stroke_min'][N_ELECTRIC:]}")
    if f["precharge"] + f["ambient_pressure"] <= 0:
        raise ValueError(f"precharge {f['precharge']} + ambient_pressure must be a positive absolute pressure")
    dtype = default_dtype(dtype)
    params = StewartParams(**{k: jnp.asarray(v, dtype) for k, v in f.items()}, max_condition=jnp.asarray(np.inf, dtype),
                           gas_mode=gas_mode)
    condition_home = float(electric_condition(params, jnp.asarray(home, dtype), jnp.eye(3, dtype=dtype))[1])
    if not np.isfinite(condition_home):
        raise ValueError(f"the home pose is singular: J₁₋₆ condition number {condition_home:.3g}")
    if max_condition is None:
        max_condition = CONDITION_MARGIN * condition_home
    max_condition = arr("max_condition", max_condition, (), positive=True)
    if condition_home > max_condition:
        raise ValueError(f"the home pose counts as singular: J₁₋₆ condition number {condition_home:.3g} > "
                         f"max_condition = {float(max_condition):.3g}")
    return dataclasses.replace(params, max_condition=jnp.asarray(max_condition, dtype))


class LegMotion(typing.NamedTuple):
    """Inverse kinematics of the nine legs, all in {W}: arm (9, 3) R a_i; joint (9, 3) A_i;
    length (9,) l_i; direction (9, 3) n_i; joint_velocity (9, 3) v_Ai; rate (9,) l̇_i; omega (9, 3) ω_i;
    joint_acceleration (9, 3) a_Ai; accel (9,) l̈_i; alpha (9, 3) α_i."""
    arm: jax.Array
    joint: jax.Array
    length: jax.Array
    direction: jax.Array
    joint_velocity: jax.Array
    rate: jax.Array
    omega: jax.Array
    joint_acceleration: jax.Array
    accel: jax.Array
    alpha: jax.Array


class LegGeometry(typing.NamedTuple):
    """arm R a_i (9, 3) and joint A_i (9, 3) in world axes, length l_i (9,), unit direction n_i (9, 3)."""
    arm: jax.Array
    joint: jax.Array
    length: jax.Array
    direction: jax.Array


def leg_lengths(params: StewartParams, p_world_platform, R_world_platform) -> LegGeometry:
    """`LegGeometry` of the nine legs at a pose: l n = p + R a − b."""
    arm = params.platform_points @ R_world_platform.T
    joint = p_world_platform[None] + arm
    leg = joint - params.base_points
    length = jnp.linalg.norm(leg, axis=-1)
    return LegGeometry(arm, joint, length, leg / length[:, None])


def leg_motion(params: StewartParams, p_world_platform, R_world_platform, u, udot):
    """Full inverse kinematics (closed form) for pose (p, R), twist u = [v; ω] (6,) and its rate
    udot = [v̇; ω̇] (6,) -> `LegMotion`."""
    arm, joint, length, n = leg_lengths(params, p_world_platform, R_world_platform)
    v, w, vdot, wdot = u[None, :3], u[None, 3:], udot[None, :3], udot[None, 3:]
    v_A = v + jnp.cross(w, arm)                                          # v_A = v + ω × R a
    rate = jnp.sum(n * v_A, -1)                                          # l̇ = n · v_A
    omega = jnp.cross(n, v_A) / length[:, None]                          # ω_i = n × v_A / l
    a_A = vdot + jnp.cross(wdot, arm) + jnp.cross(w, jnp.cross(w, arm))  # a_A = v̇ + α × Ra + ω × (ω × Ra)
    accel = jnp.sum(n * a_A, -1) + length * jnp.sum(omega * omega, -1)  # l̈ = n · a_A + l |ω_i|²
    alpha = (jnp.cross(n, a_A) - 2 * rate[:, None] * omega) / length[:, None]   # α_i = (n × a_A − 2 l̇ ω_i) / l
    return LegMotion(arm, joint, length, n, v_A, rate, omega, a_A, accel, alpha)


def jacobian(params: StewartParams, p_world_platform, R_world_platform):
    """(9, 6) J with l̇ = J [v_P; ω_P]: row i = [n_iᵀ, (R a_i × n_i)ᵀ]."""
    arm, _, _, n = leg_lengths(params, p_world_platform, R_world_platform)
    return jnp.concatenate([n, jnp.cross(arm, n)], -1)



def electric_condition(params: StewartParams, p_world_platform, R_world_platform):
    """(singular values (6,) of the electric legs' Jacobian J₁₋₆, descending; its condition number σ_max / σ_min,
    inf where σ_min = 0)."""
    sigma = singular_values(jacobian(params, p_world_platform, R_world_platform)[:N_ELECTRIC])
    return sigma, sigma[0] / sigma[-1]


__all__ = ["CONDITION_MARGIN", "GAS_MODES", "N_ELECTRIC", "N_LEGS", "LegGeometry", "LegMotion", "StewartParams",
           "build_stewart", "electric_condition", "hexapod_points", "jacobian", "leg_lengths", "leg_motion",
           "seed_points"]
