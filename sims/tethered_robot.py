"""Space tethered robot (seed 001): a floating platform and a floating operating robot joined by a
reeling tether, in the non-rotating orbital frame (jaxsoa.systems.orbit) or in free space.

Bodies (jaxsoa free-floating models, zero gravity field; the orbit enters as gravity-gradient f_ext):

| body     | link        | joint      | geometry                  | mass [kg] | inertia about com [kg m²]          |
|----------|-------------|------------|---------------------------|-----------|------------------------------------|
| platform | hub         | free       | cube, edge 1.2 m          | 200       | 48 about each axis                 |
| platform | deployer_1  | revolute y | rod 0.6 m along +x        | 4         | 0.12 transverse, 1.25e-3 axial     |
| platform | deployer_2  | revolute y | rod 0.6 m along +x        | 3         | 0.09 transverse, 9.4e-4 axial      |
| robot    | base        | free       | cube, edge 0.4 m          | 8         | 0.2133 about each axis             |
| robot    | link_1      | revolute z | rod 0.3 m along +z        | 1         | m L²/12 transverse, m r²/2 axial   |
| robot    | link_2      | revolute y | rod 0.3 m along +x        | 0.8       | (rods: radius r = 0.025 m)         |
| robot    | link_3      | revolute y | rod 0.3 m along +x        | 0.6       |                                    |

The deployer rises from the hub's +x face (mount (0.6, 0, 0)); its tip, 0.6 m along deployer_2's
x axis, is the tether exit C_P. The robot's arm is mounted on its base's +x face; the tether exit C_M
is the centre of the base's −x face, (−0.2, 0, 0), facing the platform. With all joints at zero the
tether runs along +x from C_P to C_M. Totals: platform 207 kg, robot 10.4 kg.

Tether (default `TETHER`): ρ = 2e-3 kg/m, EA = 2.5 N, α = 0.05 s, L = 2000 m, lumped mass, n = 4
elements. It is deliberately soft so that explicit RK4 stays affordable at l = 10 m: the highest
element frequency is 2 n c / l with c = √(EA/ρ) ≈ 35 m/s (28 rad/s at 10 m, dt ≲ 0.05 s) and the
Kelvin–Voigt rate α ω² bounds dt as well; at 1 km in a 7000 km orbit the gravity-gradient tension
3 n² l μ ≈ 35 mN stretches it by 1.4 %. Joints are held by PD torques (`GAINS`: soft, because with
the base free the wrist's effective inertia is small and stiffer gains made RK4 unstable at dt = 0.4 s).
The stored tether ρ s_P, ρ (L − s_M) rides on the bodies as point masses at C_P, C_M.

The coupled dynamics, RK4 step, momentum and initial state are `jaxsoa.systems.tether.coupling`'s;
`build` returns its `TetheredRobot`.
"""

import jax.numpy as jnp
import numpy as np

import jaxsoa
from jaxsoa.multibody.joints import JointType
from jaxsoa.systems.tether.coupling import TetheredRobot
from jaxsoa.systems.tether.fem import tether_params

HUB_MASS, HUB_EDGE = 200.0, 1.2
DEPLOYER = ((0.6, 4.0), (0.6, 3.0))                 # (length [m], mass [kg]) of the two deployer links
BASE_MASS, BASE_EDGE = 8.0, 0.4
ROBOT_ARM = ((0.3, 1.0, (0.0, 0.0, 1.0)), (0.3, 0.8, (0.0, 1.0, 0.0)), (0.3, 0.6, (0.0, 1.0, 0.0)))
EXIT_P = (0.6, 0.0, 0.0)                            # C_P in deployer_2's frame (its tip)
EXIT_M = (-0.2, 0.0, 0.0)                           # C_M in the robot base frame (−x face centre)
GAINS = (0.05, 0.01)                                 # joint PD (K_p [N m/rad], K_d [N m s/rad])


def _rod(mass, length, direction):
    """Inertia of a thin uniform rod about its centre, axis `direction` (radius 0.025 m)."""
    d = np.asarray(direction, float)
    axial, transverse = mass * 0.025**2 / 2, mass * length**2 / 12
    return transverse * (np.eye(3) - np.outer(d, d)) + axial * np.outer(d, d)


def _free_arm(base_mass, base_edge, mount, links):
    """A free-floating box base with a revolute chain: links = [(length, mass, axis, direction)]."""
    n = 1 + len(links)
    rot, trans = np.tile(np.eye(3), (n, 1, 1)), np.zeros((n, 3))
    com, inertia = np.zeros((n, 3)), np.zeros((n, 3, 3))
    mass, axis = np.zeros(n), np.zeros((n, 3))
    mass[0], inertia[0] = base_mass, base_mass * base_edge**2 / 6 * np.eye(3)
    trans[1] = mount
    for k, (length, m, ax, direction) in enumerate(links, 1):
        d = np.asarray(direction, float)
        mass[k], axis[k], com[k], inertia[k] = m, ax, d * length / 2, _rod(m, length, d)
        if k + 1 < n:
            trans[k + 1] = d * length
    return jaxsoa.build_model(parent=np.arange(n) - 1, joint_types=[JointType.FREE] + [JointType.REVOLUTE] * (n - 1),
                              joint_axis=axis, placement_rotation=rot, placement_translation=trans, mass=mass,
                              com=com, inertia_com=inertia, gravity=(0.0, 0.0, 0.0), dtype=jnp.float64)


def build_platform():
    """Hub + 2-joint deployer arm (pitch joints about y, links along +x)."""
    return _free_arm(HUB_MASS, HUB_EDGE, (HUB_EDGE / 2, 0, 0), [(L, m, (0, 1.0, 0), (1.0, 0, 0)) for L, m in DEPLOYER])


def build_robot():
    """Robot base + 3-link arm mounted on the base's +x face (the tether leaves from the −x face)."""
    links = [(L, m, ax, (0, 0, 1.0) if k == 0 else (1.0, 0, 0)) for k, (L, m, ax) in enumerate(ROBOT_ARM)]
    return _free_arm(BASE_MASS, BASE_EDGE, (BASE_EDGE / 2, 0, 0), links)


TETHER = dict(rho=2e-3, EA=2.5, alpha=0.05, length=2000.0, n_elements=4, lumped=True)


def build(tether=None, orbit=None, gains=GAINS) -> TetheredRobot:
    """The default system; `tether` overrides fields of `TETHER`; orbit an OrbitParams or None."""
    platform = build_platform()
    return TetheredRobot(platform=platform, robot=build_robot(), tether=tether_params(**{**TETHER, **(tether or {})}),
                         exit_offsets=jnp.asarray([EXIT_P, EXIT_M]), gains=jnp.asarray(gains),
                         orbit=orbit, exit_links=(platform.n_links - 1, 0))
