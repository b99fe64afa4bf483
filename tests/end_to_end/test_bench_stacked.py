"""`python -m experiments.benchmarks.bench_stacked`: flags checked in one line (exit 2), and a quick run
that writes every case with its ratio to the shared tree and the stacked paths' error against the
per-sample core."""

import json

import pytest

from experiments.benchmarks import bench_stacked
from tests.helpers.cli import assert_bad_flag_exits_2


@pytest.mark.parametrize("argv, message", [(["--links", "1"], "--links"), (["--links", "a,b"], "--links"),
                                           (["--batch", "0"], "--batch"), (["--dtype", "float16"], "--dtype")])
def test_bad_flags_exit_2_naming_the_flag(argv, message, capsys):
    assert_bad_flag_exits_2(bench_stacked.parse_args, argv, message, capsys)


@pytest.mark.slow            # compiles 18 programs (~30 s on 2 cores)
def test_quick_run_writes_every_case(tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert bench_stacked.main(["--quick", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    records = result["records"]
    assert {(r["links"], r["algorithm"], r["case"]) for r in records} == {
        (n, algo, case) for n in (4, 8) for algo in ("rnea", "aba") for case in bench_stacked.CASES}
    for r in records:
        assert r["per_sample_us"] > 0 and r["ratio_to_shared_tree"] > 0
        if r["case"] in ("stacked, gather", "stacked, dense"):
            assert r["rel_error_vs_per_sample_core"] < 1e-5           # float32, two orders of operations
    assert set(result["crossover"]) == {"rnea", "aba"}
    assert f"wrote {out}" in capsys.readouterr().out
