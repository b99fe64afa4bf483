"""`python -m experiments.benchmarks.bench_batch_last`: flags checked in one line (exit 2), and a
quick run that writes its JSON with every case, ratios and errors against Pinocchio."""

import json

import pytest

from experiments.benchmarks import bench_batch_last
from tests.helpers.cli import assert_bad_flag_exits_2


@pytest.mark.parametrize("argv, message", [(["--batches", "0"], "--batches"), (["--dtypes", "float16"], "--dtypes"),
                                           (["--robots", "atlas"], "--robots"), (["--rounds", "-1"], "--rounds")])
def test_bad_flags_exit_2_naming_the_flag(argv, message, capsys):
    assert_bad_flag_exits_2(bench_batch_last.parse_args, argv, message, capsys)


@pytest.mark.slow            # compiles 6 programs (~1 min on 2 busy cores)
def test_quick_run_writes_every_case(tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert bench_batch_last.main(["--quick", "--out", str(out)]) == 0
    records = json.loads(out.read_text())["records"]
    cases = {r["case"] for r in records}
    assert cases == {f"{impl} {algo} {path}" for impl, path in (("jaxsoa", "vmap"), ("jaxsoa", "batch-last"))
                     for algo in ("rnea", "aba", "crba")} | {"pinocchio rnea 2t", "pinocchio aba 2t",
                                                             "pinocchio crba loop"}
    for r in records:
        assert r["per_sample_us"] > 0 and r["ratio_to_pinocchio"] > 0
        if r["case"].startswith("jaxsoa"):
            assert r["rel_error_vs_pinocchio"] < 1e-5               # float32 against float64 Pinocchio
    assert f"wrote {out}" in capsys.readouterr().out
