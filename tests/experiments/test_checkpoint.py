"""Checkpointed optimisation (experiments/_checkpoint.py, used by trajopt and trajopt_tether): an
interrupted descent (Ctrl-C mid-iteration, or a crash) resumes from the last saved iteration and ends
with exactly the result of an uninterrupted one; checkpoints of other settings are refused in one line
(exit 2) unless --overwrite; Ctrl-C exits 130 saying where the progress is kept.

Exact equality (not a tolerance) is asserted: the saved arrays round-trip bit for bit through ``.npz``
(float64 parameters and Adam moments, int32 step count) and each iteration depends on them only, so the
resumed run repeats the uninterrupted run's floating-point operations."""

import contextlib
import json

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from experiments import _checkpoint, _common, trajopt, trajopt_tether

# optax's Adam mixes its int32 step count with Python floats, which the suite's strict promotion rejects
STANDARD = jax.numpy_dtype_promotion("standard")
A = jnp.asarray(np.random.default_rng(0).normal(size=(5, 3)))
B = jnp.arange(5.0)


def _loss_and_grad(calls):
    value_and_grad = jax.jit(jax.value_and_grad(lambda x: jnp.sum((A @ x - B) ** 2)))

    def counted(x):
        calls.append(1)
        return value_and_grad(x)
    return counted


@contextlib.contextmanager
def _interrupted_at(call, error=KeyboardInterrupt):
    """optax.apply_updates raises `error` on its `call`-th use (0: never) within the block: inside an
    iteration or training step, after the gradient and Adam's new state, before the parameters change (the
    worst place for Ctrl-C). Yields the list of its calls."""
    real, count = optax.apply_updates, []

    def apply_updates(*args):
        count.append(1)
        if len(count) == call:
            raise error()
        return real(*args)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(optax, "apply_updates", apply_updates)
        yield count


def _descend(path, calls, iters=7, every=3, settings=None):
    checkpoint = _checkpoint.Checkpoint(path, settings or {"lr": 0.1})
    with STANDARD:
        return _checkpoint.descend(_loss_and_grad(calls), jnp.zeros(3), optax.adam(0.1), iters, checkpoint, every,
                                   desc="toy", show_progress=False)


@pytest.mark.parametrize("error, saved_at", [(KeyboardInterrupt, 4), (RuntimeError, 3)], ids=["ctrl-c", "crash"])
def test_interrupted_descent_resumes_to_the_same_result(tmp_path, capsys, error, saved_at):
    """Ctrl-C in the 5th iteration saves the 4 finished ones; a crash there keeps the periodic checkpoint
    of iteration 3 (every=3). Either way the rerun computes only the remaining iterations."""
    params, losses, _ = _descend(tmp_path / "full.npz", [])
    assert len(losses) == 8 and np.all(np.diff(losses) < 0)                 # it descends
    with _interrupted_at(5, error), pytest.raises(error):
        _descend(tmp_path / "cut.npz", [])
    with np.load(tmp_path / "cut.npz") as saved:
        assert int(saved["iteration"]) == saved_at and len(saved["losses"]) == saved_at
    calls = []
    resumed, resumed_losses, _ = _descend(tmp_path / "cut.npz", calls)
    assert f"toy: resuming from iteration {saved_at} of 7" in capsys.readouterr().out
    assert len(calls) == 7 - saved_at + 1                        # the remaining steps and the final loss only
    np.testing.assert_array_equal(resumed, params)
    np.testing.assert_array_equal(resumed_losses, losses)


def test_checkpoint_of_other_settings_is_refused_unless_overwrite(tmp_path, capsys):
    path = tmp_path / "c.npz"
    _descend(path, [], iters=3, every=1)
    with pytest.raises(_common.SettingsMismatchError, match=r"lr 0\.1 → 0\.2.*--overwrite"):
        _checkpoint.Checkpoint(path, {"lr": 0.2})
    fresh = _checkpoint.Checkpoint(path, {"lr": 0.2}, overwrite=True)        # discarded: starts afresh
    assert fresh.restore("p", "s") == (0, "p", "s", [], 0.0)
    same = _checkpoint.Checkpoint(path, {"lr": 0.1}, overwrite=True)          # same settings: still resumed
    assert same.restore(jnp.zeros(3), optax.adam(0.1).init(jnp.zeros(3)))[0] == 3
    path.write_bytes(b"not a zip")
    with pytest.raises(_common.SettingsMismatchError, match="unreadable"):
        _checkpoint.Checkpoint(path, {"lr": 0.1})


def _other_settings_checkpoint(path, settings):
    _checkpoint.Checkpoint(path, {**settings, "code": _common.code_fingerprint()}).save(
        2, jnp.zeros(1), (), [1.0, 0.5], 1.0)


@pytest.mark.parametrize("module, argv", [(trajopt, ["--iters", "5"]), (trajopt_tether, ["--iters", "5"])],
                         ids=["arm", "tether"])
def test_cli_refuses_a_checkpoint_of_other_settings_in_one_line(tmp_path, capsys, module, argv):
    _other_settings_checkpoint(tmp_path / module.CHECKPOINT, module.settings(iters=4))
    with pytest.raises(SystemExit) as info:
        module.main(["--out", str(tmp_path), *argv])
    err = capsys.readouterr().err.strip()
    assert info.value.code == 2 and "\n" not in err and "argument --out" in err and "iters 4 → 5" in err, err
    assert (tmp_path / module.CHECKPOINT).is_file() and not (tmp_path / module.RECORD).exists()


def test_trajopt_ctrl_c_exits_130_naming_the_checkpoint(tmp_path, monkeypatch, capsys):
    def interrupted(**_):
        raise KeyboardInterrupt
    monkeypatch.setattr(trajopt.arm, "build", interrupted)
    assert trajopt.main(["--out", str(tmp_path), "--iters", "3"]) == 130
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "interrupted" in err and trajopt.CHECKPOINT in err and "resume" in err


# end to end: the commands' smallest problems (tether: a tenth of an orbit, ~70 RK4 steps; arm: 10 steps)
RUNS = [(trajopt_tether, dict(orbits=0.1, l_end=900.0, harmonics=2)), (trajopt, dict(harmonics=1, steps=10))]


@pytest.mark.slow
@pytest.mark.parametrize("module, problem", RUNS, ids=["tether", "arm"])
def test_interrupted_run_resumes_to_the_uninterrupted_result(tmp_path, capsys, module, problem):
    kwargs = dict(iters=5, progress=False, checkpoint_every=2, **problem)
    with STANDARD:
        full = module.run(tmp_path / "full", **kwargs)
        with _interrupted_at(4), pytest.raises(KeyboardInterrupt):     # Ctrl-C in the 4th Adam step
            module.run(tmp_path / "cut", **kwargs)
        assert [p.name for p in (tmp_path / "cut").iterdir()] == [module.CHECKPOINT]
        capsys.readouterr()
        resumed = module.run(tmp_path / "cut", **kwargs)
    assert "resuming from iteration 3 of 5" in capsys.readouterr().out
    assert resumed == full
    one, other = (json.loads((tmp_path / name / module.RECORD).read_text()) for name in ("full", "cut"))
    assert one["loss_curve"] == other["loss_curve"] and len(one["loss_curve"]) == 6
    assert one.get("coeffs") == other.get("coeffs")
    assert not (tmp_path / "cut" / module.CHECKPOINT).exists()          # removed once the results are written
    settings = {k: v for k, v in kwargs.items() if k in module.settings()}
    _common.Record(tmp_path / "cut" / module.RECORD, module.settings(**settings))   # a rerun's settings match
