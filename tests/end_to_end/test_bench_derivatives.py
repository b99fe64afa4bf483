"""`python -m experiments.benchmarks.bench_derivatives`: flags checked in one line (exit 2), and a quick run
that writes one record per (robot, function) with its times against Pinocchio and its difference to Pinocchio."""

import json
import math

import pytest

from experiments.benchmarks import bench_derivatives
from tests.helpers.cli import assert_bad_flag_exits_2


@pytest.mark.parametrize("argv, message", [(["--robots", "atlas"], "--robots"), (["--robots", ","], "--robots"),
                                           (["--batch", "0"], "--batch"), (["--dtype", "float16"], "--dtype"),
                                           (["--rounds", "-1"], "--rounds")])
def test_bad_flags_exit_2_naming_the_flag(argv, message, capsys):
    assert_bad_flag_exits_2(bench_derivatives.parse_args, argv, message, capsys)


def test_bad_robot_names_the_allowed_ones(capsys):
    with pytest.raises(SystemExit) as exit_info:
        bench_derivatives.main(["--robots", "panda,atlas"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "'atlas'" in err and "panda" in err and "solo12" in err


@pytest.mark.slow            # compiles 5 programs (~20 s on 2 cores)
def test_quick_run_writes_every_function(tmp_path, capsys):
    out = tmp_path / "x.json"
    assert bench_derivatives.main(["--quick", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    records = result["records"]
    assert sorted((r["robot"], r["function"]) for r in records) == sorted(
        ("panda", name) for name in bench_derivatives.FUNCTIONS)
    for r in records:
        for key in ("jaxsoa_us", "pinocchio_us", "ratio_to_pinocchio"):
            assert math.isfinite(r[key]) and r[key] > 0, (r["function"], key)
        assert r["max_rel_difference"] < 1e-9, r["function"]           # float64 against float64 Pinocchio
    assert result["empty_loop_us"]["panda"] > 0
    assert f"wrote {out}" in capsys.readouterr().out
