"""Bad inputs to the configuration-parameter builders: a non-integer degree (was truncated: 1.7 → 1), a
fractional or negative `max_cuts`, and traced link IDs, cut types or interfaces of a float dtype or another
shape (`valid` was True for link IDs 1.5, 2, 3). Each error names the argument."""

import numpy as np
import pytest

from jaxsoa.topology.configuration_parameters import topology_from_configuration, topology_from_configuration_traced
from tests.topology.test_configuration_parameters import CONFIGURATIONS, DEGREES, IDS


def test_host_builder_checks_degree_and_max_cuts():
    interfaces = np.array(CONFIGURATIONS[1])
    with pytest.raises(ValueError, match="degree must be an integer array"):
        topology_from_configuration(IDS, interfaces, np.asarray(DEGREES, float) + 0.7)
    for max_cuts in (1.5, -1, True):
        with pytest.raises(ValueError, match="argument 'max_cuts' must be an int ≥ 0"):
            topology_from_configuration(IDS, interfaces, DEGREES, max_cuts=max_cuts)
    assert topology_from_configuration(IDS, interfaces, DEGREES).parent.shape == (len(IDS),)


def test_traced_builder_checks_dtypes_and_shapes():
    interfaces = np.array(CONFIGURATIONS[1])
    s, d = interfaces.shape
    with pytest.raises(ValueError, match="argument 'link_ids' must be an int"):
        topology_from_configuration_traced(interfaces, link_ids=np.asarray(IDS, float) + 0.5)
    with pytest.raises(ValueError, match="argument 'link_ids' must be an int"):
        topology_from_configuration_traced(interfaces, link_ids=np.asarray(IDS)[:-1])
    with pytest.raises(ValueError, match="argument 'cut_joint_types' must be an int"):
        topology_from_configuration_traced(interfaces, cut_joint_types=np.zeros((s, d + 1), np.int32))
    with pytest.raises(ValueError, match="argument 'interfaces' must be an int \\(s, max_degree\\)"):
        topology_from_configuration_traced(interfaces[0])
    with pytest.raises(ValueError, match="argument 'interfaces' must be an int"):
        topology_from_configuration_traced(interfaces.astype(float))
    with pytest.raises(ValueError, match="argument 'max_cuts'"):
        topology_from_configuration_traced(interfaces, max_cuts=-1)
    assert bool(topology_from_configuration_traced(interfaces, link_ids=np.asarray(IDS)).valid)
