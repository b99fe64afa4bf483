"""`python -m experiments.benchmarks.bench_float32_gradients`: flags checked in one line (exit 2), and a quick
run whose float32 gradients of short horizons are within float32 round-off of the float64 reference."""

import json

import numpy as np
import pytest

from experiments.benchmarks import bench_float32_gradients
from tests.helpers.cli import assert_bad_flag_exits_2


@pytest.mark.parametrize("argv, message", [(["--systems", "talos"], "--systems"), (["--horizons", "0"], "--horizons"),
                                           (["--horizons", "a,5"], "--horizons"), (["--batch", "0"], "--batch")])
def test_bad_flags_exit_2_naming_the_flag(argv, message, capsys):
    assert_bad_flag_exits_2(bench_float32_gradients.parse_args, argv, message, capsys)


def test_per_sample_errors_take_the_worst_leaf_of_each_sample():
    reference = (np.array([[1.0, 2.0], [4.0, 1.0]]), np.array([[10.0], [1.0]]))
    grads = (np.array([[1.0, 2.2], [4.0, 1.0]]), np.array([[10.0], [1.5]]))
    np.testing.assert_allclose(bench_float32_gradients.per_sample_errors(grads, reference, 2), [0.1, 0.5])


@pytest.mark.slow            # compiles 9 programs
def test_quick_run_writes_every_case(tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert bench_float32_gradients.main(["--quick", "--out", str(out)]) == 0
    records = json.loads(out.read_text())["records"]
    assert {(r["program"], r["steps"], r["path"]) for r in records} == {
        (program, steps, path) for program, steps in (("one call", None), ("rollout", 5), ("rollout", 20))
        for path in ("adjoint", "autodiff")}
    for r in records:        # float32 round-off (eps 6e-8) times a modest growth over ≤ 20 steps
        assert 0 < r["median"] <= r["p90"] <= r["max"] < 1e-4
    assert f"wrote {out}" in capsys.readouterr().out
