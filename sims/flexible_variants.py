"""Flexible-link variants of the two reference systems (jaxsoa.systems.flexible.rfem, docs/flexible.md), built
from the rigid models of sims/dual_arm_spacecraft.py and sims/space_arm_7dof.py without editing them.

Each flexible link keeps its rigid twin's length and mass, spread uniformly (ρA = m / L) over an
Euler–Bernoulli beam along the link's x axis; its rigid centre-of-mass offset and inertia are
replaced by the beam's. Bending stiffnesses are chosen (the seeds give none) so that the first
clamped frequency ω₁ = 1.8751² √(EI / (ρA L⁴)) is low enough to matter:

| system | flexible links | EI [N m²] | ρA [kg/m] | ω₁ clamped [rad/s] | bending |
|---|---|---|---|---|---|
| dual-arm spacecraft | first two links of each arm (IDs 2, 3, 5, 6) | 5.0e4 | m / L | 78 – 134 | z (planar), yz (3-D) |
| 7-DOF space arm | lower boom (elbow to wrist) | 2.0e5 | 35 / 1.5 | 145 | yz |

`dual_arm_flexible(configuration=1, n_segments=3, floating=False)` and
`space_arm_flexible_boom(n_segments=4, floating=True)` return `jaxsoa.systems.flexible.rfem.FlexibleModel`s;
`clamped_frequencies(...)` gives each beam's Euler–Bernoulli ω₁ for the table.
"""

import numpy as np

from jaxsoa.systems.flexible.rfem import Beam, flexible_model, tree_from_model
from sims import dual_arm_spacecraft as dual_arm
from sims import space_arm_7dof as space_arm

DUAL_ARM_EI = 5.0e4
DUAL_ARM_FLEXIBLE_IDS = (2, 3, 5, 6)
BOOM_EI = 2.0e5
BOOM_LINK = 4                                 # jaxsoa index of lower_boom (hub = 0)
BETA1_L = 1.8751040687


def dual_arm_beams(n_segments, bending_axes="z"):
    """{storage index (ID − 1): Beam} of the flexible arm links."""
    beams = {}
    for link_id in DUAL_ARM_FLEXIBLE_IDS:
        _, length, mass, _, _ = dual_arm.LINKS[link_id]
        beams[link_id - 1] = Beam(length, DUAL_ARM_EI, mass / length, n_segments, bending_axes)
    return beams


def dual_arm_flexible(configuration=1, n_segments=3, floating=False):
    """The dual-arm spacecraft of configuration 1 (each flexible link carried by its inboard
    interface 0, children at its far end) with flexible arm links. Bending "z" in the planar
    model, "yz" in the 3-D floating one."""
    if configuration != 1:
        raise ValueError("field 'configuration': flexible links need their children at the beam tip, "
                         "which holds in configuration 1 only")
    rigid = dual_arm.model(configuration, floating=floating)
    beams = dual_arm_beams(n_segments, "yz" if floating else "z")
    return flexible_model(tree_from_model(rigid), beams, gravity=(0.0, 0.0, 0.0))


def boom_beam(n_segments):
    """The lower boom as a tube-section beam (axial inertia of the thin-walled tube)."""
    link = space_arm.ARM[BOOM_LINK - 1]
    inner = link.outer_radius - link.wall
    rho_a = link.mass / link.length
    return Beam(link.length, BOOM_EI, rho_a, n_segments, "yz",
                axial_inertia_per_length=rho_a * (link.outer_radius ** 2 + inner ** 2) / 2)


def space_arm_flexible_boom(n_segments=4, floating=True):
    """The 7-DOF space arm (seed 002) with its lower boom flexible, hub free (default) or fixed."""
    rigid = space_arm.build(floating)
    return flexible_model(tree_from_model(rigid), {BOOM_LINK: boom_beam(n_segments)}, gravity=(0.0, 0.0, 0.0))


def clamped_frequencies():
    """{name: ω₁ rad/s} of every flexible beam clamped at its root (Euler–Bernoulli)."""
    beams = {dual_arm.LINKS[k + 1][0]: b for k, b in dual_arm_beams(1).items()}
    beams["lower_boom"] = boom_beam(1)
    return {name: BETA1_L ** 2 * np.sqrt(b.bending_stiffness / (b.mass_per_length * b.length ** 4))
            for name, b in beams.items()}


if __name__ == "__main__":
    for name, omega in clamped_frequencies().items():
        print(f"{name}: ω₁ = {omega:.1f} rad/s")
