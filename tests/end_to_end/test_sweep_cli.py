"""`python -m experiments sweep` in a subprocess, interrupted and on a full disk, on the toy system of
tests/helpers/sweep_toy.py (run through its launcher, which registers it): finished chunks survive,
the printed resume command computes only the rest, and the result equals an uninterrupted run bit
for bit. The in-process checks of the options are in tests/workflows/test_sweep_command.py."""

import json
import os
import pathlib
import shlex
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from experiments import sweep
from jaxsoa.workflows.store import read_sweep
from tests.helpers import sweep_toy
from tests.workflows.test_sweep_runner import assert_equal_runs

pytestmark = pytest.mark.slow            # end to end: deselect with -m "not slow"

ROOT = pathlib.Path(__file__).resolve().parents[2]
DELAY = "0.3"                            # s per chunk: the test can signal between chunks
ARGV = ["--system", "toy", "--count", "24", "--chunk", "4", "--steps", "2", "--progress-every", "0.1"]


def launch(argv, **env):
    """The toy launcher (`python -m tests.helpers.sweep_toy ARGV`) as a subprocess."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SWEEP_TOY_DELAY": DELAY, **env}
    return subprocess.Popen([sys.executable, "-m", "tests.helpers.sweep_toy", *argv], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def committed(run) -> int:
    done = run / "done" / "c"
    return len([p for p in done.iterdir() if not p.name.endswith(".partial")]) if done.is_dir() else 0


def resume_command(err: str) -> list:
    """The arguments of the printed ``resume with: python -m experiments sweep ARGS``."""
    line = next(line for line in err.splitlines() if line.startswith("resume with: "))
    words = shlex.split(line.removeprefix("resume with: "))
    assert words[:4] == ["python", "-m", "experiments", "sweep"] and words[-1] == "--resume", line
    return words[4:]


@pytest.fixture
def reference(tmp_path, monkeypatch):
    """An uninterrupted run of the same command, in this process (same program: the same delay)."""
    monkeypatch.setitem(sweep.SYSTEMS, "toy", sweep_toy.TOY)
    monkeypatch.setenv("SWEEP_TOY_DELAY", DELAY)
    assert sweep.main([*ARGV, "--out", str(tmp_path / "reference")]) == 0
    return tmp_path / "reference" / "toy"


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupted_sweep_resumes_to_the_uninterrupted_result(signum, reference, tmp_path):
    """A signal after 2 of 6 chunks: exit 128 + n, the finished chunks on disk, the samples saved and
    the resume command printed; that command computes only the missing samples and the result
    equals the uninterrupted run bit for bit."""
    out = tmp_path / "out"
    proc = launch([*ARGV, "--out", str(out)])
    deadline = time.monotonic() + 240
    while committed(out / "toy") < 2 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signum, err[-3000:]
    saved = int(read_sweep(out / "toy").done.sum())
    assert 8 <= saved < 24 and saved % 4 == 0
    assert f"stopped by {signal.Signals(signum).name}: toy: {saved} of 24 samples saved in {out / 'toy'}" in err
    assert "Traceback" not in err and json.loads((out / "sweep_summary.json").read_text())["rows"]
    resumed = launch(resume_command(err))
    _, err = resumed.communicate(timeout=240)
    assert resumed.returncode == 0, err[-3000:]
    throughput = json.loads((out / "sweep_summary.json").read_text())["throughput"]
    assert (throughput[0]["computed"], throughput[0]["done"]) == (24 - saved, 24)
    assert_equal_runs(out / "toy", reference)
    assert (out / "sweep_toy.png").is_file()


def test_full_disk_is_reported_with_the_path_and_the_run_stays_resumable(reference, tmp_path):
    """After 2 committed chunks the file-size limit drops to 1 KB (RLIMIT_FSIZE: the next 2 KB chunk
    file fails with EFBIG, as on a full disk): exit 1, the error names the run directory, the 2
    chunks stay intact and the failed one leaves no file; the printed resume command finishes the
    run, equal to the uninterrupted one."""
    out = tmp_path / "out"
    proc = launch([*ARGV, "--out", str(out)], SWEEP_TOY_FSIZE="2:1024")
    _, err = proc.communicate(timeout=240)
    assert proc.returncode == 1, err[-3000:]
    assert f"error: writing chunk 2 of the sweep in {out / 'toy'}: File too large" in err and "Traceback" not in err
    assert f"toy: 8 of 24 samples saved in {out / 'toy'}" in err
    partial, whole = read_sweep(out / "toy"), read_sweep(reference)
    assert partial.done.tolist() == [True] * 8 + [False] * 16
    for name, values in partial.outputs.items():
        np.testing.assert_array_equal(values[:8], whole.outputs[name][:8], err_msg=name)
    files = [p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()]
    assert not [f for f in files if f.endswith(".partial") or "/c/2" in f], files      # nothing of the failed chunk
    resumed = launch(resume_command(err))
    _, err = resumed.communicate(timeout=240)
    assert resumed.returncode == 0, err[-3000:]
    assert_equal_runs(out / "toy", reference)
