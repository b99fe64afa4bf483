"""Flexible links: rigid-finite-element beams through the engine's recursions, assumed-modes reference, modal
reduction."""

from jaxsoa.systems.flexible import modal, reduced, rfem
from jaxsoa.systems.flexible.modal import (
    HubBeamModes,
    forward_dynamics_modal,
    hub_beam_modes,
    modal_bias,
    modal_driven_dynamics,
    modal_energy,
    modal_mass_matrix,
    modal_tip_deflection,
    rotating_frequencies,
)
from jaxsoa.systems.flexible.reduced import ReducedModel, expand, forward_dynamics_reduced, reduce
from jaxsoa.systems.flexible.rfem import (
    BENDING_AXES,
    Beam,
    FlexibleModel,
    elastic_forces,
    flexible_model,
    forward_dynamics,
    forward_dynamics_driven,
    insert_flexible_links,
    inverse_dynamics,
    mechanical_energy,
    natural_frequencies,
    tip_position,
    tree_from_model,
)

__all__ = [
    "BENDING_AXES",
    "Beam",
    "FlexibleModel",
    "HubBeamModes",
    "ReducedModel",
    "elastic_forces",
    "expand",
    "flexible_model",
    "forward_dynamics",
    "forward_dynamics_driven",
    "forward_dynamics_modal",
    "forward_dynamics_reduced",
    "hub_beam_modes",
    "insert_flexible_links",
    "inverse_dynamics",
    "mechanical_energy",
    "modal",
    "modal_bias",
    "modal_driven_dynamics",
    "modal_energy",
    "modal_mass_matrix",
    "modal_tip_deflection",
    "natural_frequencies",
    "reduce",
    "reduced",
    "rfem",
    "rotating_frequencies",
    "tip_position",
    "tree_from_model",
]
