"""`python -m experiments.benchmarks.bench_compile`: bad flags exit 2 in one line, and a quick run compiles
the value and gradient of two seed systems cold and warm (the persistent cache's second process)."""

import json

import pytest

from experiments.benchmarks import bench_compile
from tests.helpers.cli import assert_bad_flag_exits_2


@pytest.mark.parametrize("argv, message", [(["--systems", "pendulum"], "--systems"), (["--systems", ","], "--systems"),
                                           (["--batch", "0"], "--batch"), (["--dtype", "float16"], "--dtype")])
def test_bad_flags_exit_2_naming_the_flag(argv, message, capsys):
    assert_bad_flag_exits_2(bench_compile.parse_args, argv, message, capsys)


@pytest.mark.slow            # four processes, eight compiles (~50 s on 2 cores)
def test_quick_run_reports_cold_and_warm_compiles(tmp_path, capsys):
    out = tmp_path / "compile.json"
    bench_compile.main(["--quick", "--batch", "2", "--steps", "3", "--out", str(out)])
    records = json.loads(out.read_text())["records"]
    assert {(r["system"], r["case"]) for r in records} == {
        (s, c) for s in ("stewart", "tether") for c in ("value", "gradient")}
    for r in records:
        parts = r["trace_s"] + r["lower_s"] + r["xla_compile_s"]
        assert 0 < parts <= r["compile_s"] * (1 + 1e-9)
        # the warm process reads XLA's result from the cache: its XLA step is shorter than the cold one's
        assert r["warm_xla_s"] < r["xla_compile_s"]
    text = capsys.readouterr().out
    assert "largest cold compile" in text and f"wrote {out}" in text
