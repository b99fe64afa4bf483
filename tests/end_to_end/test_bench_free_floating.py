"""`python -m experiments.benchmarks.bench_free_floating`: flags checked in one line (exit 2), and a quick
run that writes its JSON with every case, the gains over vmap and the free-floating ABA's error against
Pinocchio."""

import json

import pytest

from experiments.benchmarks import bench_free_floating
from tests.helpers.cli import assert_bad_flag_exits_2


@pytest.mark.parametrize("argv, message", [(["--batches", "0"], "--batches"), (["--dtypes", "float16"], "--dtypes"),
                                           (["--robots", "panda"], "--robots"), (["--rounds", "-1"], "--rounds")])
def test_bad_flags_exit_2_naming_the_flag(argv, message, capsys):
    assert_bad_flag_exits_2(bench_free_floating.parse_args, argv, message, capsys)


@pytest.mark.slow            # compiles 10 programs
def test_quick_run_writes_every_case(tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert bench_free_floating.main(["--quick", "--out", str(out)]) == 0
    records = json.loads(out.read_text())["records"]
    names = ("aba_free_floating", "rnea_free_floating", "generalized_jacobian", "frame_jacobian", "forward_kinematics")
    assert {r["case"] for r in records} == {f"jaxsoa {n} {p}" for n in names for p in ("vmap", "batch-last")} | {
        "pinocchio aba 2t"}
    for r in records:
        assert r["per_sample_us"] > 0 and r["ratio_to_pinocchio_aba"] > 0
        assert (r["gain_over_vmap"] is not None) == r["case"].endswith("batch-last")
        if "aba_free_floating" in r["case"]:
            assert r["rel_error_vs_pinocchio"] < 1e-5               # float32 against float64 Pinocchio
    assert f"wrote {out}" in capsys.readouterr().out
