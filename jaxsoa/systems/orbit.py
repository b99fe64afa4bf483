"""Keplerian reference orbit and the three frames of the tethered system (docs/tether.md).

Frames (all right-handed, SI units):

* ECI — Earth-centred inertial. The reference orbit lies in the ECI x-y plane, perigee on +x,
  motion counter-clockwise about +z (choose the ECI axes that way; any other orbit is a rotation).
* orbital — non-rotating orbital frame: origin at the reference point R(t) on the orbit, axes
  parallel to ECI. A point at r (orbital) is at R + r (ECI). It falls freely, so a mass element
  at r feels only the tidal (gravity-gradient) acceleration g(R + r) − g(R) ≈ −(μ/R³) A_f r,
  A_f = I − 3 i iᵀ, i = (cos f, sin f, 0) the radial unit vector turning with the true anomaly f.
  For a circular orbit μ/R³ = ω̄² (the field −ω̄² A_f r of docs/tether.md §3); for an elliptic
  one we use the instantaneous μ/R³ (the exact first-order tidal term), which ω̄² only approximates.
* LVLH — rotating Hill frame at the same origin: x radial (i), y along-track (in plane, ⊥ i,
  towards the motion), z orbit normal; it turns at ω = ḟ z relative to the orbital frame.

A rigid body (centre of mass c, inertia J about it) gets the force −m (μ/R³) A_f c and the torque
3 (μ/R³) i × (J i) (both first order in the body's size over R; i and J in the same frame).
"""

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
from jax.experimental import checkify

from jaxsoa.algorithms.kinematics import LinkPlacements, forward_kinematics
from jaxsoa.multibody.model import Model, link_inertia
from jaxsoa.spatial.algebra import trailing

EARTH_MU = 3.986004418e14        # m³/s², Earth's gravitational parameter
KEPLER_ITERATIONS = 12           # Newton steps on Kepler's equation: quadratic convergence, e ≤ 0.9


class OrbitParams(NamedTuple):
    """Reference orbit (a PyTree: vmap / grad over it). mu [m³/s²], a semi-major axis [m],
    e eccentricity in [0, 1), mean_anomaly0 mean anomaly at t = 0 [rad]. Build it with `orbit_params`
    (or `circular_orbit`), which checks the fields; `check_orbit` checks traced ones."""
    mu: float = EARTH_MU
    a: float = 7.0e6
    e: float = 0.0
    mean_anomaly0: float = 0.0


def orbit_params(a=7.0e6, e=0.0, mean_anomaly0=0.0, mu=EARTH_MU) -> OrbitParams:
    """Host builder of `OrbitParams`: ValueError naming the field unless a and mu are finite real scalars
    > 0, e in [0, 1) and mean_anomaly0 finite (an e ≥ 1 gives NaN, a negative e a finite wrong orbit)."""
    values = dict(a=a, e=e, mean_anomaly0=mean_anomaly0, mu=mu)
    for name, value in values.items():
        if np.ndim(value) != 0 or not np.isreal(value) or not np.isfinite(value):
            raise ValueError(f"field '{name}' = {value!r} must be a finite real scalar")
    if not (a > 0 and mu > 0):
        raise ValueError(f"fields 'a' = {a} and 'mu' = {mu} must be positive")
    if not 0 <= e < 1:
        raise ValueError(f"field 'e' = {e} must be in [0, 1) (an ellipse)")
    return OrbitParams(mu=mu, a=a, e=e, mean_anomaly0=mean_anomaly0)


def circular_orbit(a=7.0e6, mu=EARTH_MU) -> OrbitParams:
    """Circular orbit of radius a, starting at f = 0 (`orbit_params` with e = 0)."""
    return orbit_params(a=a, e=0.0, mean_anomaly0=0.0, mu=mu)


def check_orbit(orbit: OrbitParams):
    """checkify checks of an orbit made inside a program: a, mu > 0 and 0 ≤ e < 1, all finite."""
    fields = jnp.stack([jnp.asarray(x, float) for x in orbit])
    checkify.check(jnp.all(jnp.isfinite(fields)) & (orbit.a > 0) & (orbit.mu > 0) & (orbit.e >= 0) & (orbit.e < 1),
                   "orbit fields (mu, a, e, mean_anomaly0) = {f} must be finite with a, mu > 0, 0 ≤ e < 1", f=fields)


def mean_motion(orbit: OrbitParams):
    """ω̄ = n = √(μ / a³) [rad/s]."""
    return jnp.sqrt(orbit.mu / orbit.a**3)


def eccentric_anomaly(mean_anomaly, e):
    """Solve Kepler's equation E − e sin E = M by a fixed number of Newton steps (jittable,
    differentiable): E ← E − (E − e sin E − M) / (1 − e cos E), from E₀ = M + e sin M."""
    E = mean_anomaly + e * jnp.sin(mean_anomaly)
    for _ in range(KEPLER_ITERATIONS):
        E = E - (E - e * jnp.sin(E) - mean_anomaly) / (1 - e * jnp.cos(E))
    return E


def true_anomaly(orbit: OrbitParams, t):
    """f(t): M = M₀ + n t, Kepler's equation, tan(f/2) = √((1+e)/(1−e)) tan(E/2)."""
    E = eccentric_anomaly(orbit.mean_anomaly0 + mean_motion(orbit) * t, orbit.e)
    return 2 * jnp.arctan2(jnp.sqrt(1 + orbit.e) * jnp.sin(E / 2), jnp.sqrt(1 - orbit.e) * jnp.cos(E / 2))


def _semi_latus_rectum(orbit: OrbitParams):
    return orbit.a * (1 - orbit.e**2)


def orbit_radius(orbit: OrbitParams, f):
    """R = p / (1 + e cos f), p = a (1 − e²)."""
    return _semi_latus_rectum(orbit) / (1 + orbit.e * jnp.cos(f))


def true_anomaly_rates(orbit: OrbitParams, f):
    """(ḟ, f̈): ḟ = √(μ p) / R², f̈ = −2 ḟ Ṙ / R with Ṙ = √(μ / p) e sin f."""
    p = _semi_latus_rectum(orbit)
    R = orbit_radius(orbit, f)
    f_dot = jnp.sqrt(orbit.mu * p) / R**2
    R_dot = jnp.sqrt(orbit.mu / p) * orbit.e * jnp.sin(f)
    return f_dot, -2 * f_dot * R_dot / R


def radial_unit(f):
    """i = (cos f, sin f, 0): the reference point's radial direction, ECI / orbital axes."""
    return jnp.stack([jnp.cos(f), jnp.sin(f), jnp.zeros_like(f)], -1)


def reference_state(orbit: OrbitParams, t):
    """Position R (3,) and velocity V (3,) of the reference point, ECI:
    R = R(f) i, V = √(μ/p) (−sin f, e + cos f, 0)."""
    f = true_anomaly(orbit, t)
    speed = jnp.sqrt(orbit.mu / _semi_latus_rectum(orbit))
    V = speed * jnp.stack([-jnp.sin(f), orbit.e + jnp.cos(f), jnp.zeros_like(f)])
    return orbit_radius(orbit, f) * radial_unit(f), V


def gravity_gradient_rate(orbit: OrbitParams, t):
    """k = μ / R³ at time t (= ω̄² on a circular orbit), and the radial unit vector i (3,)."""
    f = true_anomaly(orbit, t)
    return orbit.mu / orbit_radius(orbit, f) ** 3, radial_unit(f)


def gravity_gradient_acceleration(orbit: OrbitParams, t, r):
    """Linearised tidal acceleration −(μ/R³) A_f r = −(μ/R³) (r − 3 i (i·r)), orbital frame.
    r (..., 3) -> (..., 3) (ValueError naming `r` for another trailing axis)."""
    trailing("r", r, (3,))
    k, i = gravity_gradient_rate(orbit, t)
    i = jnp.broadcast_to(i, r.shape)
    return -k * (r - 3 * i * jnp.sum(i * r, -1, keepdims=True))


def gravity_gradient_torque(orbit: OrbitParams, t, inertia, radial=None):
    """3 (μ/R³) i × (J i) about a body's centre of mass, with J (..., 3, 3) and `radial` i
    (..., 3) in the same frame (default: orbital axes, i from the orbit). ValueError naming `inertia`
    or `radial` for other trailing axes."""
    trailing("inertia", inertia, (3, 3))
    if radial is not None:
        trailing("radial", radial, (3,))
    k, i = gravity_gradient_rate(orbit, t)
    i = jnp.broadcast_to(i, inertia.shape[:-1]) if radial is None else radial
    return 3 * k * jnp.cross(i, jnp.einsum("...ij,...j->...i", inertia, i))


def gravity_gradient_wrenches(model: Model, orbit: OrbitParams, t, q):
    """Gravity-gradient wrench on every link as jaxsoa's f_ext (n, 6) `[moment; force]`, link
    frames, about the link origins; the model's world frame is the orbital frame. Per link, with c
    its centre of mass: F = −m (μ/R³) A_f c, moment about c 3 (μ/R³) i × (J i), shifted to the origin."""
    return gravity_gradient_wrenches_at(model, orbit, t, forward_kinematics(model, q))


def gravity_gradient_wrenches_at(model: Model, orbit: OrbitParams, t, placements: LinkPlacements):
    """`gravity_gradient_wrenches` at placements already computed by `forward_kinematics(model, q)`."""
    R_orbital_link, p_orbital_link = placements
    mass, com, inertia_com = link_inertia(model)
    c_orbital = p_orbital_link + jnp.einsum("kij,kj->ki", R_orbital_link, com)
    force_orbital = mass[:, None] * gravity_gradient_acceleration(orbit, t, c_orbital)
    force_link = jnp.einsum("kji,kj->ki", R_orbital_link, force_orbital)             # F = −m k A_f c
    _, i = gravity_gradient_rate(orbit, t)
    i_link = jnp.einsum("kji,j->ki", R_orbital_link, i)
    moment_link = gravity_gradient_torque(orbit, t, inertia_com, i_link) + jnp.cross(com, force_link)
    return jnp.concatenate([moment_link, force_link], -1)


def two_body_acceleration(mu, r_eci):
    """Point-mass gravity −μ r / |r|³, ECI. r (..., 3) -> (..., 3)."""
    trailing("r_eci", r_eci, (3,))
    return -mu * r_eci / jnp.linalg.norm(r_eci, axis=-1, keepdims=True) ** 3


def relative_two_body_acceleration(orbit: OrbitParams, t, r):
    """Exact tidal acceleration in the orbital frame: g(R + r) − g(R). r (..., 3) (ValueError naming `r`
    for another trailing axis)."""
    trailing("r", r, (3,))
    R = jnp.broadcast_to(reference_state(orbit, t)[0], r.shape)
    return two_body_acceleration(orbit.mu, R + r) - two_body_acceleration(orbit.mu, R)


def lvlh_rotation(orbit: OrbitParams, t):
    """R_orbital_lvlh (3, 3): columns i (radial), j (along-track), k (normal) in orbital axes."""
    f = true_anomaly(orbit, t)
    c, s, zero, one = jnp.cos(f), jnp.sin(f), jnp.zeros_like(f), jnp.ones_like(f)
    return jnp.stack([jnp.stack([c, s, zero]), jnp.stack([-s, c, zero]), jnp.stack([zero, zero, one])], 1)


def _lvlh_rate(orbit: OrbitParams, t):
    """ω, ω̇ of LVLH relative to the orbital frame, (3,) each, along z (orbital = LVLH z)."""
    f_dot, f_ddot = true_anomaly_rates(orbit, true_anomaly(orbit, t))
    zero = jnp.zeros_like(f_dot)
    return jnp.stack([zero, zero, f_dot]), jnp.stack([zero, zero, f_ddot])


def libration_angles(orbit: OrbitParams, t, chord):
    """In-plane θ = atan2(d_y, d_x) and out-of-plane φ = asin(d_z/|d|) of a chord d (..., 3) given in the
    orbital frame, in LVLH: θ = φ = 0 on the local vertical (d along +i, radially out), θ > 0 leaning
    along-track. Angles (...,) each; ValueError naming `chord` for another trailing axis."""
    d = trailing("chord", chord, (3,)) @ lvlh_rotation(orbit, t)
    return jnp.arctan2(d[..., 1], d[..., 0]), jnp.arcsin(d[..., 2] / jnp.linalg.norm(d, axis=-1))


def orbital_to_lvlh(orbit: OrbitParams, t, r, v):
    """(r, v) orbital -> LVLH: r_L = Cᵀ r, v_L = Cᵀ (v − ω × r), C = R_orbital_lvlh. r, v (..., 3)
    (ValueError naming the argument for another trailing axis)."""
    trailing("r", r, (3,))
    trailing("v", v, (3,))
    C, (omega, _) = lvlh_rotation(orbit, t), _lvlh_rate(orbit, t)
    return r @ C, (v - jnp.cross(omega, r)) @ C


def lvlh_to_orbital(orbit: OrbitParams, t, r_lvlh, v_lvlh):
    """(r, v) LVLH -> orbital: r = C r_L, v = C v_L + ω × r. r_lvlh, v_lvlh (..., 3) (ValueError naming
    the argument for another trailing axis)."""
    trailing("r_lvlh", r_lvlh, (3,))
    trailing("v_lvlh", v_lvlh, (3,))
    C, (omega, _) = lvlh_rotation(orbit, t), _lvlh_rate(orbit, t)
    r = r_lvlh @ C.T
    return r, v_lvlh @ C.T + jnp.cross(omega, r)


def eci_to_orbital(orbit: OrbitParams, t, r_eci, v_eci):
    """(r, v) ECI -> orbital: r = r_E − R, v = v_E − V (parallel axes). r_eci, v_eci (..., 3) (ValueError
    naming the argument for another trailing axis)."""
    trailing("r_eci", r_eci, (3,))
    trailing("v_eci", v_eci, (3,))
    R, V = reference_state(orbit, t)
    return r_eci - jnp.broadcast_to(R, r_eci.shape), v_eci - jnp.broadcast_to(V, v_eci.shape)


def orbital_to_eci(orbit: OrbitParams, t, r, v):
    """(r, v) orbital -> ECI: r_E = R + r, v_E = V + v. r, v (..., 3) (ValueError naming the argument for
    another trailing axis)."""
    trailing("r", r, (3,))
    trailing("v", v, (3,))
    R, V = reference_state(orbit, t)
    return jnp.broadcast_to(R, r.shape) + r, jnp.broadcast_to(V, v.shape) + v


def lvlh_acceleration(orbit: OrbitParams, t, r_lvlh, v_lvlh, *, linear=True):
    """Relative acceleration in LVLH (..., 3): tidal gravity (linearised −(μ/R³) diag(−2, 1, 1) r,
    or the full −μ (R x̂ + r)/|R x̂ + r|³ + μ/R² x̂) minus the frame terms
    2 ω × v + ω̇ × r + ω × (ω × r). Circular + linear: Clohessy–Wiltshire
    ẍ = 3n²x + 2nẏ, ÿ = −2nẋ, z̈ = −n²z. r_lvlh, v_lvlh (..., 3) (ValueError naming the argument for
    another trailing axis)."""
    trailing("r_lvlh", r_lvlh, (3,))
    trailing("v_lvlh", v_lvlh, (3,))
    f = true_anomaly(orbit, t)
    R = orbit_radius(orbit, f)
    omega, omega_dot, x_hat = (jnp.broadcast_to(x, r_lvlh.shape)      # (..., 3) like the states
                               for x in (*_lvlh_rate(orbit, t), jnp.eye(3, dtype=r_lvlh.dtype)[0]))
    if linear:
        gravity = -(orbit.mu / R**3) * (r_lvlh - 3 * x_hat * r_lvlh[..., :1])
    else:
        gravity = two_body_acceleration(orbit.mu, R * x_hat + r_lvlh) + orbit.mu / R**2 * x_hat
    frame = 2 * jnp.cross(omega, v_lvlh) + jnp.cross(omega_dot, r_lvlh) + jnp.cross(omega, jnp.cross(omega, r_lvlh))
    return gravity - frame
