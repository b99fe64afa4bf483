"""Reproduction of the dual-arm spacecraft (sims/dual_arm_spacecraft.py): configurations 1-3, inverse
dynamics by the masked-operator method vs hand-built Pinocchio models and vs the recursive rnea,
planar fixed hub and 3-D free hub; the generated path matrices; the plots and table are written."""

import numpy as np
import pytest

from experiments import reproduce_seed000
from sims import dual_arm_spacecraft as sc
from tests.topology.test_configuration_parameters import CONFIGURATIONS, EXPECTED_P

pytestmark = pytest.mark.slow            # end to end: deselect with -m "not slow"


def test_configurations_and_path_matrices():
    for k in (1, 2, 3):
        np.testing.assert_array_equal(sc.configuration(k), CONFIGURATIONS[k])
        np.testing.assert_array_equal(sc.path_matrix(k), EXPECTED_P[k])
    model = sc.model(3)
    np.testing.assert_array_equal(model.inboard_interface, [0, 1, 1, 1, 0, 0, 0])       # arm 1 reversed
    np.testing.assert_array_equal(model.parent, reproduce_seed000.HAND_TOPOLOGY[3][0])


def test_seed000_reproduction(tmp_path):
    # a short period: torques of order 1e2-1e4 N m, so the absolute bounds are meaningful
    rows = reproduce_seed000.run(tmp_path, period=10.0, samples=11)
    assert [(r[0], r[1]) for r in rows] == [(v, k) for v in ("planar, fixed hub", "3-D, free hub") for k in (1, 2, 3)]
    for variant, config, tau_max, err_pin, err_rnea in rows:
        assert tau_max > 1.0, (variant, config)
        assert err_pin <= 1e-9, (variant, config, err_pin)
        assert err_rnea <= 1e-10, (variant, config, err_rnea)
    pngs = sorted(p.name for p in tmp_path.glob("seed000_*.png"))
    assert pngs == sorted([f"seed000_config{k}{s}.png" for k in (1, 2, 3) for s in ("", "_floating")])
    assert all((tmp_path / name).stat().st_size > 0 for name in pngs)
    assert "| planar, fixed hub | 3 |" in (tmp_path / "seed000_table.md").read_text()


def test_configurations_differ():
    """The three topologies give different torques for the same motion (the test is not vacuous)."""
    import jax
    jax.config.update("jax_enable_x64", True)
    q, v, a = reproduce_seed000.motion(np.array([0.3, 0.7]), 2.0)
    op, _ = reproduce_seed000.jaxsoa_torques(False, q, v, a)
    assert np.abs(op[0] - op[1]).max() > 1.0 and np.abs(op[1] - op[2]).max() > 1.0
