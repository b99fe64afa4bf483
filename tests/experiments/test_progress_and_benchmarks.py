"""Progress inside identify_inertia's per-system fit (one line per stage, the staged fit equal to the
single call) and the benchmark commands' Ctrl-C and flags: every part module (and the suite) exits 130
with one line on Ctrl-C and leaves the previous JSON whole; a finished part exits 0; bench_gradient's
--checkpoints, --unroll and --systems are checked (exit 2, one line naming the flag)."""

import importlib
import io
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments import identify_inertia
from experiments._progress import LineProgress
from experiments.benchmarks import bench_gradient
from jaxsoa.workflows import identification as identify
from tests.helpers.cli import assert_bad_flag_exits_2


def _toy_fit_problem():
    """Two bodies' log-Cholesky parameters seen through a random (60, 20) regressor, a prior 0.3 off."""
    rng = np.random.default_rng(0)
    phi_true = jnp.asarray(rng.normal(0.0, 0.5, (2, 10)))
    Y = jnp.asarray(rng.normal(size=(60, 20)))
    tau = Y @ identify.parameters_from_log_cholesky(phi_true).reshape(-1)
    return phi_true + 0.3 * jnp.asarray(rng.normal(size=(2, 10))), Y, tau, jnp.ones(60)


def test_staged_fit_reports_each_stage_and_equals_one_call():
    """The stages as separate compiled calls reach the same φ and losses as `fit_log_cholesky` in one
    (each stage starts afresh from the φ reached; equal to 1e-12 relative, measured bit for bit)."""
    phi0, Y, tau, weights = _toy_fit_problem()
    steps = dict(adam_steps=6, lbfgs_steps=3, gauss_newton_steps=2)
    lines = []
    staged = identify_inertia.staged_fit(phi0, Y, tau, weights, steps, lines.append)
    one = identify_inertia._fit(phi0, Y, tau, weights, **steps)
    np.testing.assert_allclose(staged.phi, one.phi, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(staged.losses, one.losses, rtol=1e-12)
    assert len(lines) == 3 and [line.split(":")[0] for line in lines] == ["Adam", "L-BFGS", "Levenberg–Marquardt"]
    assert lines[0].startswith("Adam: 6 steps in ") and " s (compile included)" in lines[0]
    skipped = []
    only_lm = identify_inertia.staged_fit(phi0, Y, tau, weights, dict(steps, adam_steps=0, lbfgs_steps=0),
                                          skipped.append)
    assert len(skipped) == 1 and skipped[0].startswith("Levenberg–Marquardt: 2 steps") and only_lm.losses.shape == (2,)


def _fake_system(name, seed, duration, stride, amplitude, noise, prior_sigma, steps, say):
    say("Adam: 1 steps in 0.0 s")
    rows = [dict(system=name, method=m, parameters=10, structural_rank=5, trajectory_rank=5, condition_number=1.0,
                 base_error=0.1, heldout_torque_rms=0.1, train_loss=0.1) for m in ("prior", "OLS", "WLS", "GD")]
    held = {k: np.zeros(3) for k in ("prior", "OLS", "WLS", "GD", "truth")}
    return rows, dict(losses=np.ones(3), wls_loss=0.5, steps=steps, t=np.arange(3.0), joint=1, heldout=held)


def test_identify_prints_each_system_start_stages_and_time(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(identify_inertia, "identify_system", _fake_system)
    identify_inertia.run(tmp_path, systems=("arm_fixed", "dual_arm"), adam_steps=1, lbfgs_steps=1,
                         gauss_newton_steps=1)
    out = capsys.readouterr().out
    assert "identify arm_fixed (1 of 2): simulating" in out and "identify dual_arm (2 of 2): simulating" in out
    assert "identify dual_arm: Adam: 1 steps" in out
    assert "identify arm_fixed: done in " in out and " s, saved in identify_inertia.json" in out


BENCH_MODULES = ["bench_adjoint", "bench_batch_last", "bench_compile", "bench_core", "bench_free_floating",
                 "bench_float32_gradients", "bench_gradient", "bench_jaxsim", "bench_scaling", "bench_stacked",
                 "bench_stewart", "bench_tether", "bench_topology", "sweep_store"]


def _interrupt(*_, **__):
    raise KeyboardInterrupt


@pytest.mark.parametrize("name", [*BENCH_MODULES, "__main__"])
def test_benchmark_ctrl_c_exits_130_with_one_line(name, tmp_path, monkeypatch, capsys):
    module = importlib.import_module(f"experiments.benchmarks.{name}")
    if name == "__main__":                         # the suite: Ctrl-C outside a part (a part's own is tested below)
        monkeypatch.setattr(module, "target_rows", _interrupt)
        argv = ["--report", "--results", str(tmp_path)]
    else:
        monkeypatch.setattr(module, "parse_args", _interrupt)
        argv = []
    assert module.main(argv) == 130
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "interrupted (Ctrl-C)" in err and ("intact" in err or "kept" in err), err


def test_suite_ctrl_c_during_a_part(tmp_path, monkeypatch, capsys):
    suite = importlib.import_module("experiments.benchmarks.__main__")
    monkeypatch.setattr(suite.subprocess, "run", _interrupt)
    assert suite.main(["--only", "stewart", "--results", str(tmp_path)]) == 130
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "during stewart" in err and not (tmp_path / "suite.json").exists()


def _fake_timed(calls):
    def timed(fn, args, opts):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt                          # Ctrl-C while timing the second case
        return {"compile_s": 1.0, "per_sample_us": 2.0 * len(calls), "temp_bytes_per_sample": None, "call_s": 1.0}
    return timed


def test_bench_gradient_ctrl_c_keeps_the_previous_json_and_a_full_run_exits_0(tmp_path, monkeypatch, capsys):
    out = tmp_path / "g.json"
    out.write_text('{"old": 1}')
    argv = ["--quick", "--systems", "panda", "--checkpoints", "off,step", "--out", str(out)]
    calls = []
    monkeypatch.setattr(bench_gradient, "timed", _fake_timed(calls))
    assert bench_gradient.main(argv) == 130
    assert json.loads(out.read_text()) == {"old": 1} and [p.name for p in tmp_path.iterdir()] == ["g.json"]
    assert "nothing of this run was written" in capsys.readouterr().err
    monkeypatch.setattr(bench_gradient, "timed", lambda fn, args, opts: {"compile_s": 1.0, "per_sample_us": 2.0,
                                                                         "temp_bytes_per_sample": None})
    assert bench_gradient.main(argv) == 0                   # an exit status, not the records (exit 1 via sys.exit)
    records = json.loads(out.read_text())["records"]
    assert [(r["mode"], r["checkpoint"]) for r in records] == [("rollout", "off"), ("grad", "off"), ("grad", "step")]


@pytest.mark.parametrize("argv, flag", [
    (["--checkpoints", "off,foo"], "--checkpoints"),
    (["--checkpoints", "save_only_these_names"], "--checkpoints"),      # a policy factory, not a policy
    (["--checkpoints", ","], "--checkpoints"),
    (["--unroll", "0"], "--unroll"),
    (["--unroll", "two"], "--unroll"),
    (["--systems", "panda,ur5"], "--systems"),
])
def test_bench_gradient_flags_are_checked(argv, flag, capsys):
    assert_bad_flag_exits_2(bench_gradient.parse_args, argv, flag, capsys)


def test_bench_gradient_accepts_every_listed_checkpoint():
    opts = bench_gradient.parse_args(["--checkpoints", ",".join(bench_gradient.CHECKPOINTS), "--unroll", "full"])
    assert opts.checkpoints == bench_gradient.CHECKPOINTS and opts.unroll == "full"
    for name in bench_gradient.POLICIES:                           # each is a policy: called on a primitive
        assert isinstance(bench_gradient.checkpoint_option(name)(jax.lax.sin_p), bool)


def test_line_progress_does_not_repeat_its_last_line():
    stream = io.StringIO()
    list(LineProgress(range(3), desc="x", every=0.0, stream=stream))
    lines = stream.getvalue().splitlines()
    assert [line.split(" (")[0] for line in lines] == ["x: 1/3 it", "x: 2/3 it", "x: 3/3 it"]
