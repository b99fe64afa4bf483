"""Topology from configuration parameters: incidence and path matrices, loop cuts, reconfigurable models."""

from jaxsoa.topology import configuration_parameters, cuts, reconfigure
from jaxsoa.topology.configuration_inputs import CUT_FIELDS, CUT_JOINT_TYPES
from jaxsoa.topology.configuration_parameters import (
    ConfigurationTopology,
    TracedConfigurationTopology,
    incidence_matrix,
    topology_from_configuration,
    topology_from_configuration_traced,
)
from jaxsoa.topology.cuts import closure_from_topology, cut_interfaces
from jaxsoa.topology.reconfigure import (
    DesignArrays,
    LinkDesign,
    apply_configuration,
    design_arrays,
    interface_inertias,
    reconfigurable_model,
    remap_state,
)

__all__ = [
    "CUT_FIELDS",
    "CUT_JOINT_TYPES",
    "ConfigurationTopology",
    "DesignArrays",
    "LinkDesign",
    "TracedConfigurationTopology",
    "apply_configuration",
    "closure_from_topology",
    "configuration_parameters",
    "cut_interfaces",
    "cuts",
    "design_arrays",
    "incidence_matrix",
    "interface_inertias",
    "reconfigurable_model",
    "reconfigure",
    "remap_state",
    "topology_from_configuration",
    "topology_from_configuration_traced",
]
