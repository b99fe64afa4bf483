"""The reproductions run end to end on a short horizon, write their plots and tables, and meet the
tolerances they print (every row whose 'expected' column is a number)."""

import re

import pytest

from experiments import reproduce_core, reproduce_seed002

pytestmark = pytest.mark.slow            # end to end: deselect with -m "not slow"


def test_core_reproduction(tmp_path):
    rows, exact, pendulum = reproduce_core.run(tmp_path, n_states=10)
    errors = {(name, dtype): err for name, dtype, err in rows}
    assert max(errors[(name, "float64")] for name in ("rnea", "aba", "crba")) < 1e-9     # float64 bar
    assert max(errors[(name, "float32")] for name in ("rnea", "aba", "crba")) < 1e-3     # float32 budget
    assert abs(pendulum[-1][1] - exact) / exact < 1e-8                                     # RK4, dt = 5 ms
    assert (tmp_path / "core_validation.png").stat().st_size > 0


def test_seed002_reproduction(tmp_path):
    rows = reproduce_seed002.run(tmp_path, duration=1.0)
    checked = 0
    for run, quantity, reference, error, _, expected in rows:
        if re.fullmatch(r"1e-\d+", expected):
            assert float(error) <= float(expected), (run, quantity, reference, error, expected)
            checked += 1
    assert checked >= 15
    assert len(list(tmp_path.glob("seed002_*.png"))) == 5


def test_seed004_reproduction(tmp_path):
    from experiments import reproduce_seed004

    rows, checks = reproduce_seed004.run(tmp_path, duration=1.0, grid=3)
    assert len(rows) == 8                                      # 2 profiles × 4 cases
    assert all(row[-1].split("/")[0] == row[-1].split("/")[1] for row in rows)   # every pose valid
    assert checks["power_balance"] < 1e-9                      # Kane vs energies
    assert checks["replay_position"] < 1e-6 and checks["replay_rotation"] < 1e-6   # RK4 5 ms, ID -> FD replay
    assert len(list(tmp_path.glob("seed004_*.png"))) >= 5
