"""The `python -m experiments sweep` command in this process, on the toy system of
tests/helpers/sweep_toy.py (compiles in well under a second): every option validated before any
work (exit 2, one line naming the option), an unwritable --out refused before compute, existing
runs and resumes with other parameters refused naming what differs, the non-finite policy, and
progress lines that do not flood a captured log. The interrupted and disk-full runs, in
subprocesses, are in tests/end_to_end/test_sweep_cli.py."""

import json

import numpy as np
import pytest

from experiments import cli, sweep
from jaxsoa.workflows.store import read_sweep
from tests.helpers import sweep_toy


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setitem(sweep.SYSTEMS, "toy", sweep_toy.TOY)
    monkeypatch.delenv("SWEEP_TOY_DELAY", raising=False)
    return ["--system", "toy", "--steps", "2"]


BAD = {
    "--count -5": (["--count", "-5"], "argument --count: must be a positive integer, got '-5'"),
    "--count x": (["--count", "x"], "argument --count: must be a positive integer"),
    "--seed -1": (["--seed", "-1"], "argument --seed: must be a non-negative integer, got '-1'"),
    "--chunk 0": (["--chunk", "0"], "argument --chunk: must be a positive integer, got '0'"),
    "--steps 0": (["--steps", "0"], "argument --steps: must be a positive integer"),
    "--progress-every nan": (["--progress-every", "nan"], "argument --progress-every: must be a positive number"),
    "--system": (["--system", "nope"], "argument --system: invalid choice: 'nope'"),
    "--executor": (["--executor", "ray"], "argument --executor: invalid choice: 'ray'"),
    "--on-nonfinite": (["--on-nonfinite", "ignore"], "argument --on-nonfinite: invalid choice"),
    "--out empty": (["--out", " "], "argument --out: must be a non-empty path"),
    "dask without scheduler": (["--executor", "dask"], "argument --scheduler: required with --executor dask"),
    "scheduler without dask": (["--scheduler", "tcp://h:8786"], "argument --scheduler: only with --executor dask"),
    "bad scheduler": (["--executor", "dask", "--scheduler", "h"], "argument --scheduler: must be [tcp://]HOST:PORT"),
    "coordinator alone": (["--coordinator", "h:1"], "argument --num-processes: required with --coordinator"),
    "bad port": (["--coordinator", "h:0"], "argument --coordinator: must be HOST:PORT"),
    "process id": (["--coordinator", "h:1", "--num-processes", "2", "--process-id", "2"],
                   "argument --process-id: must be below --num-processes 2, got 2"),
    "dask and multi-host": (["--executor", "dask", "--scheduler", "h:1", "--coordinator", "h:1",
                             "--num-processes", "1", "--process-id", "0"], "argument --executor: dask does not"),
}


@pytest.mark.parametrize("argv, message", BAD.values(), ids=BAD.keys())
def test_every_option_is_validated_before_work(argv, message, capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(sweep, "run", lambda *a, **k: pytest.fail("the sweep started"))
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["sweep", *argv, *([] if "--out" in argv else ["--out", str(tmp_path / "o")])])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and message in err, err
    assert not (tmp_path / "o").exists()


def test_unwritable_out_is_refused_before_compute(toy, capsys, monkeypatch, tmp_path):
    (tmp_path / "file").write_text("x")
    monkeypatch.setattr(sweep, "run_sweep", lambda *a, **k: pytest.fail("computed"))
    with pytest.raises(SystemExit) as exit_info:
        sweep.main([*toy, "--out", str(tmp_path / "file" / "out")])
    captured = capsys.readouterr()
    assert exit_info.value.code == 2 and "writing to" not in captured.out
    assert f"argument --out: cannot write to {tmp_path / 'file' / 'out'}: Not a directory" in captured.err


def test_existing_runs_and_other_parameters_are_refused(toy, capsys, tmp_path):
    """A finished run: rerun without --resume -> exit 2, the run untouched; --resume with another
    --steps -> exit 2 naming it; --resume with the same options -> nothing to compute, exit 0."""
    out = ["--out", str(tmp_path), "--count", "6", "--chunk", "4"]
    assert sweep.main([*toy, *out]) == 0
    before = read_sweep(tmp_path / "toy")
    for extra, message in (([], "already holds a sweep (6 of 6 samples done): pass --resume"),
                           (["--resume", "--steps", "3"], "steps: stored 2, requested 3")):
        capsys.readouterr()
        with pytest.raises(SystemExit) as exit_info:
            sweep.main([*toy, *out, *extra])
        err = capsys.readouterr().err
        assert exit_info.value.code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert sweep.main([*toy, *out, "--resume"]) == 0
    summary = json.loads((tmp_path / "sweep_summary.json").read_text())
    assert summary["throughput"][0]["computed"] == 0 and summary["throughput"][0]["done"] == 6
    after = read_sweep(tmp_path / "toy")
    np.testing.assert_array_equal(after.outputs["y"], before.outputs["y"])


def test_nonfinite_outputs_are_counted_excluded_and_the_policy_decides(toy, capsys, tmp_path):
    """The toy's ratio x₀ / k is non-finite where k = 0: reported per output, excluded from the
    statistics (which stay finite), exit 0 under report and 3 under fail."""
    argv = [*toy, "--count", "12", "--chunk", "4"]
    assert sweep.main([*argv, "--out", str(tmp_path / "a")]) == 0
    data = read_sweep(tmp_path / "a" / "toy")
    bad = int(np.count_nonzero(~np.isfinite(data.outputs["ratio"])))
    assert bad == np.count_nonzero(data.inputs["k"] == 0) > 0
    err = capsys.readouterr().err
    assert f"non-finite samples (excluded from the statistics): toy/ratio: {bad}" in err
    rows = {r["output"]: r for r in json.loads((tmp_path / "a" / "sweep_summary.json").read_text())["rows"]}
    assert (rows["ratio"]["n"], rows["ratio"]["nonfinite"], rows["ratio"]["finite"]) == (12, bad, 12 - bad)
    assert np.isfinite(rows["ratio"]["mean"]) and rows["y"]["nonfinite"] == 0
    finite = data.outputs["ratio"][np.isfinite(data.outputs["ratio"])]
    assert rows["ratio"]["mean"] == pytest.approx(finite.mean(), rel=1e-15)
    assert sweep.main([*argv, "--out", str(tmp_path / "b"), "--on-nonfinite", "fail"]) == 3
    assert (tmp_path / "b" / "sweep_toy.png").is_file()        # the results are written all the same


def test_progress_is_rate_limited_off_a_terminal(toy, capsys, tmp_path):
    """stderr is captured (not a TTY): with --progress-every 3600 only the final progress line is
    printed for 5 chunks; the command says where it writes."""
    assert sweep.main([*toy, "--count", "20", "--chunk", "4", "--out", str(tmp_path), "--progress-every", "3600"]) == 0
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.startswith("toy: ")]
    assert len(lines) == 1 and lines[0].startswith("toy: 20/20 samples (100.0 %)"), captured.err
    assert f"writing to {tmp_path.resolve()}: toy/" in captured.out


def test_an_unreachable_scheduler_is_an_error_and_the_run_resumable(toy, capsys, tmp_path):
    import dask

    # distributed first: its import adds its defaults to dask's config, and a `dask.config.set` of a
    # "distributed.*" key made before that import would remove the whole "distributed" section on exit
    import distributed  # noqa: F401

    from tests.workflows.test_sharding import free_port

    argv = [*toy, "--count", "8", "--chunk", "4", "--out", str(tmp_path)]
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        status = sweep.main([*argv, "--executor", "dask", "--scheduler", f"tcp://127.0.0.1:{free_port()}"])
    err = capsys.readouterr().err
    assert status == 1 and "Traceback" not in err and "toy: 0 of 8 samples saved" in err
    assert "resume with: python -m experiments sweep --system toy" in err
    assert sweep.main([*argv, "--resume"]) == 0 and read_sweep(tmp_path / "toy").done.all()
