"""A heavy-duty gas-assisted motion platform (seed 004): six electric cylinders and three gas springs
carrying a 12 t turret-like payload (the seed's reference system, Moog's turret test platform,
carried dynamic loads up to 235.2 kN = 12 t × 2 g).

Geometry (seed §1, `jaxsoa.systems.stewart.geometry.seed_points`), metres:
| circle | radius | short edge | gas radius | centre |
|---|---|---|---|---|
| platform (A) | r_A = 1.2 | d_A = 0.3 | r_PA = 0.9 | O_1 = (0, 0, −0.2) in {L}: O_L 0.2 m above the joints |
| base (B) | r_B = 1.8 | d_B = 2.6 | r_PB = 0.9 | O = (0, 0, 0) in {W} |

Mid (home) pose p = (0, 0, 1.6) m, R = I: electric legs 1.81 m, gas legs vertical, 1.40 m.
Stroke: every leg ±0.45 m about its mid length. Singularity threshold: `build_stewart`'s default,
max_condition = 10 × the home pose's condition number 1.72 = 17.2.

| body | mass [kg] | centre of mass | inertia about the centre [kg m²] |
|---|---|---|---|
| platform + payload | 12 000 | c = (0.1, 0, 0.9) m in {L} | diag(20 000, 24 000, 32 000) |
| electric barrel (×6) | 150 | 0.60 m from B_i | 20 (transverse) |
| electric rod (×6) | 60 | 0.50 m from A_i | 6 |
| gas barrel (×3) | 90 | 0.50 m from B_i | 10 |
| gas rod (×3) | 35 | 0.45 m from A_i | 3 |

Gas springs: bore 0.32 m (A_P = 0.0804 m²), gas column 0.60 m in each barrel at mid pose, tank
0.06 m³ per cylinder (or one 0.18 m³ shared tank), precharge 0.48 MPa gauge at mid pose, ambient
101 325 Pa, isothermal: at the mid pose the gas carries 116 kN of the 118 kN platform + payload
weight. (The tank volume × precharge sweep of experiments/reproduce_seed004.py finds, for the sine
profile, an optimum near 0.01 m³ and 0.49 MPa: a stiffer spring partly cancels the heave inertia.)

Motion profiles (`pose_path(s) -> (p, R)`, `R = Rz(yaw) Ry(pitch) Rx(roll)` about the mid pose):
`sine_profile()` heave 0.15 m at 0.5 Hz, pitch 6° at 0.4 Hz, roll 5° at 0.3 Hz;
`random_profile(seed)` band-limited noise (24 random-phase sinusoids per axis, 0.1-1 Hz, flat
spectrum), 0.03 m RMS surge and sway, 0.04 m RMS heave, 1.5° RMS per rotation.
"""

import jax.numpy as jnp
import numpy as np

from jaxsoa.spatial.rotation import exp_so3
from jaxsoa.systems.stewart.geometry import build_stewart, seed_points

HOME = (0.0, 0.0, 1.6)
STROKE = 0.45
TANK_VOLUME, PRECHARGE, SHARED_TANK_VOLUME = 0.06, 0.48e6, 0.18


def build(gas_mode="individual", tank_volume=None, precharge=PRECHARGE):
    """`StewartParams` of the table above (tank_volume default 0.06 m³, or 0.18 m³ when shared)."""
    top, bottom = seed_points(1.2, 0.3, 0.9, 1.8, 2.6, 0.9, platform_center=(0.0, 0.0, -0.2))
    length_mid = np.linalg.norm(np.asarray(HOME) + top - bottom, axis=1)
    electric, gas = np.arange(9) < 6, np.arange(9) >= 6
    if tank_volume is None:
        tank_volume = SHARED_TANK_VOLUME if gas_mode == "shared" else TANK_VOLUME
    return build_stewart(
        top, bottom, HOME, platform_mass=12000.0, platform_com=(0.1, 0.0, 0.9),
        platform_inertia=np.diag([2.0e4, 2.4e4, 3.2e4]),
        barrel_mass=np.where(electric, 150.0, 90.0), barrel_com=np.where(electric, 0.6, 0.5),
        barrel_inertia=np.where(electric, 20.0, 10.0), rod_mass=np.where(electric, 60.0, 35.0),
        rod_com=np.where(gas, 0.45, 0.5), rod_inertia=np.where(electric, 6.0, 3.0),
        stroke_min=length_mid - STROKE, stroke_max=length_mid + STROKE, piston_area=np.pi * 0.16 ** 2,
        tank_volume=tank_volume, precharge=precharge, gas_length_mid=0.6, gas_mode=gas_mode)


def euler_path(offset):
    """pose_path from `offset(s) -> (6,)` [x, y, z, roll, pitch, yaw] about the mid pose."""
    def pose_path(s):
        x = offset(s)
        axes = jnp.eye(3, dtype=x.dtype)
        R = exp_so3(axes[2] * x[5]) @ exp_so3(axes[1] * x[4]) @ exp_so3(axes[0] * x[3])
        return jnp.asarray(HOME, x.dtype) + x[:3], R
    return pose_path


def sine_profile(heave=0.15, pitch_deg=6.0, roll_deg=5.0, frequencies=(0.5, 0.4, 0.3)):
    """Heave, pitch and roll sinusoids (amplitudes in m / degrees, frequencies in Hz)."""
    pitch, roll = np.radians(pitch_deg), np.radians(roll_deg)
    f = 2 * np.pi * np.asarray(frequencies)

    def offset(s):
        z = jnp.zeros_like(s)
        return jnp.stack([z, z, heave * jnp.sin(f[0] * s), roll * jnp.sin(f[2] * s), pitch * jnp.sin(f[1] * s), z])
    return euler_path(offset)


def random_profile(seed=0, n_tones=24, band=(0.1, 1.0), rms=(0.03, 0.03, 0.04, 1.5, 1.5, 1.5)):
    """Band-limited noise: per axis, `n_tones` sinusoids of equal amplitude at uniform random
    frequencies in `band` [Hz] with random phases, scaled to the given RMS (m for x, y, z; degrees
    for roll, pitch, yaw)."""
    rms = np.asarray(rms, float) * np.array([1.0] * 3 + [np.pi / 180] * 3)
    rng = np.random.default_rng(seed)
    freq = 2 * np.pi * rng.uniform(*band, (6, n_tones))
    phase = rng.uniform(0, 2 * np.pi, (6, n_tones))
    amp = rms[:, None] * np.sqrt(2.0 / n_tones) * np.ones((6, n_tones))

    def offset(s):
        return jnp.sum(amp * jnp.sin(freq * s + phase), axis=1)
    return euler_path(offset)
