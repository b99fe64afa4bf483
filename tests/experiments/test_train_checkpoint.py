"""`python -m experiments train` checkpoints each task's training (experiments/train_controller.py on
experiments/_checkpoint.py): a task interrupted by Ctrl-C or a crash resumes on a rerun from its last
saved step, says so, and ends with exactly the uninterrupted run's weights, losses and held-out
results; the checkpoint is removed once the task is recorded; a checkpoint of other settings is refused
in one line (exit 2) unless --overwrite; Ctrl-C exits 130 in one line.

Exact equality (not a tolerance) is asserted: the weights and Adam's moments (float32) and step count
(int32) round-trip bit for bit through ``.npz``, and step i depends on them and on the batch drawn from
the seed and i alone, so the resumed run repeats the uninterrupted run's floating-point operations.
Only the timings differ. The fast tests replace the rollouts' cost by a cheap regression of the same
policy (`_toy_batch_cost`), so the real training loop, checkpoint, evaluation and files run in seconds;
the slow one trains the real `reconfigurable` task."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments import _checkpoint, _common, train_controller
from tests.experiments.test_checkpoint import _interrupted_at

STANDARD = jax.numpy_dtype_promotion("standard")      # optax's Adam mixes int32 and Python floats
F32 = jnp.float32
TIMINGS = ("train s", "first step s", "step s", "rollouts/s")
TOY = dict(batch=4, iters=5, horizon=3, n_eval=4, progress=False)


def _toy_task(name):
    return lambda: train_controller.Task(name, 3, np.arange(2), 2.0, None, None, lambda q, v, t, c: q, None,
                                         lambda q, v, t, c, kp, kd: jnp.zeros(2, F32))


def _toy_batch_cost(task, controller, keys, horizon, dynamics=None):
    """The policy regressed on a random target per sample: (mean cost, "errors" (batch, horizon))."""
    def one(key):
        obs = jax.random.normal(key, (3,), F32)
        return jnp.sum((controller(obs, None, None, None) - obs[:2]) ** 2), jnp.full(horizon, jnp.abs(obs[0]))
    costs, errors = jax.vmap(one)(keys)
    return jnp.mean(costs), errors


@pytest.fixture
def toy(monkeypatch):
    for name in train_controller.TASKS:
        monkeypatch.setitem(train_controller.TASKS, name, _toy_task(name))
    monkeypatch.setattr(train_controller, "batch_cost", _toy_batch_cost)


def _results(folder):
    """(rows without timings, {task: losses}, {task: step count}, {file: weights}) of a finished --out."""
    saved = json.loads((folder / train_controller.RECORD).read_text())
    rows = [{k: v for k, v in r.items() if k not in TIMINGS} for r in saved["rows"]]
    losses = {n: t["losses"] for n, t in saved["training"].items()}
    steps = {n: len(t["step_seconds"]) for n, t in saved["training"].items()}
    weights = {}
    for path in sorted(folder.glob("policy_*.npz")):
        with np.load(path) as data:
            weights[path.name] = {k: data[k] for k in data.files}
    return rows, losses, steps, weights


def _assert_same(one, other):
    assert one[:3] == other[:3]
    assert one[3].keys() == other[3].keys() and one[3]
    for name in one[3]:
        assert one[3][name].keys() == other[3][name].keys()
        for key, value in one[3][name].items():
            np.testing.assert_array_equal(other[3][name][key], value, strict=True)


@pytest.mark.parametrize("error, saved_at", [(KeyboardInterrupt, 3), (RuntimeError, 2)], ids=["ctrl-c", "crash"])
def test_interrupted_training_resumes_to_the_uninterrupted_result(tmp_path, capsys, toy, error,
                                                                  saved_at):
    """Ctrl-C in the first task's 4th step saves its 3 finished steps; a crash there keeps the periodic
    checkpoint of step 2 (every 2). The rerun trains only the remaining steps of it, then the second task."""
    with STANDARD:
        train_controller.run(tmp_path / "full", checkpoint_every=2, **TOY)
        cut = tmp_path / "cut"
        with _interrupted_at(4, error), pytest.raises(error):
            train_controller.run(cut, checkpoint_every=2, **TOY)
        checkpoint = train_controller.checkpoint_file(cut, "space_arm")
        assert [p.name for p in cut.iterdir()] == [checkpoint.name]
        with np.load(checkpoint) as saved:
            assert int(saved["iteration"]) == saved_at and len(saved["losses"]) == saved_at
            assert len(saved["history_step_seconds"]) == saved_at and int(saved["params_leaves"]) == 6
        capsys.readouterr()
        with _interrupted_at(0) as steps:                              # counts the steps, interrupts none
            train_controller.run(cut, checkpoint_every=2, **TOY)
    assert f"train space_arm: resuming from step {saved_at} of 5" in capsys.readouterr().out
    assert len(steps) == 5 - saved_at + 5                          # the rest of the first task, all of the second
    full, resumed = _results(tmp_path / "full"), _results(cut)
    _assert_same(full, resumed)
    assert full[2] == {"space_arm": 5, "reconfigurable": 5} and len(full[1]["space_arm"]) == 5
    start = train_controller.init_policy(jax.random.PRNGKey(0), 3, 2)   # it trains: every weight moved
    assert all(np.all(full[3]["policy_space_arm.npz"][f"{kind}{i}"] != np.asarray(x))
               for i, layer in enumerate(start) for kind, x in zip("Wb", layer, strict=True))
    assert not list(cut.glob("*.checkpoint.npz"))                   # removed once the tasks are recorded


def _other_settings_checkpoint(folder, name, **changed):
    params = train_controller.init_policy(jax.random.PRNGKey(0), 3, 2)
    checkpoint = _checkpoint.Checkpoint(train_controller.checkpoint_file(folder, name),
                                        {**train_controller.settings(**changed), "code": _common.code_fingerprint(),
                                         "task": name})
    checkpoint.save(1, params, (), [1.0], 1.0, step_seconds=[1.0])
    return checkpoint.path


def test_cli_refuses_a_checkpoint_of_other_settings_unless_overwrite(tmp_path, capsys, toy):
    path = _other_settings_checkpoint(tmp_path, "reconfigurable", batch=4, iters=3, horizon=2, n_eval=2)
    argv = ["--out", str(tmp_path), "--task", "reconfigurable", "--batch", "2", "--iters", "3", "--horizon", "2",
            "--eval", "2"]
    with pytest.raises(SystemExit) as info:
        train_controller.main(argv)
    err = capsys.readouterr().err.strip()
    assert info.value.code == 2 and "\n" not in err and "argument --out" in err and "batch 4 → 2" in err, err
    assert path.is_file() and not (tmp_path / train_controller.RECORD).exists()
    with STANDARD:                                                    # --overwrite discards it: trains from step 0
        assert train_controller.main([*argv, "--overwrite"]) == 0
    out = capsys.readouterr().out
    assert "resuming from" not in out and not path.exists()
    saved = json.loads((tmp_path / train_controller.RECORD).read_text())
    assert len(saved["training"]["reconfigurable"]["losses"]) == 3


def test_ctrl_c_exits_130_in_one_line_and_the_rerun_resumes(tmp_path, capsys, toy):
    argv = ["--out", str(tmp_path), "--task", "space_arm", "--batch", "2", "--iters", "3", "--horizon", "2",
            "--eval", "2"]
    with STANDARD:
        with _interrupted_at(2):                                       # Ctrl-C in the 2nd step
            assert train_controller.main(argv) == 130
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and "interrupted" in err and "checkpoint" in err and "resume" in err, err
        assert train_controller.checkpoint_file(tmp_path, "space_arm").is_file()
        assert train_controller.main(argv) == 0
    assert "train space_arm: resuming from step 1 of 3" in capsys.readouterr().out
    assert not train_controller.checkpoint_file(tmp_path, "space_arm").exists()


def test_a_finished_task_leaves_no_checkpoint_and_is_not_resumed_again(tmp_path, capsys, toy):
    """A checkpoint left beside a recorded task (a crash between the two writes) is removed by the rerun."""
    with STANDARD:
        train_controller.run(tmp_path, tasks=("space_arm",), **TOY)
        stale = train_controller.checkpoint_file(tmp_path, "space_arm")
        same = {**train_controller.settings(batch=4, iters=5, horizon=3, n_eval=4), "code": _common.code_fingerprint(),
                "task": "space_arm"}
        _checkpoint.Checkpoint(stale, same).save(1, [], (), [1.0], 1.0)
        capsys.readouterr()
        train_controller.run(tmp_path, tasks=("space_arm",), **TOY)
    assert "1 of 1 already done" in capsys.readouterr().out and not stale.exists()


@pytest.mark.slow
def test_real_task_resumes_bitwise(tmp_path, capsys):
    """The `reconfigurable` task itself (float32 rollouts through jaxsoa.aba's adjoint), smallest settings:
    Ctrl-C in step 3 of 4, then the rerun, equals the uninterrupted run bit for bit."""
    kwargs = dict(tasks=("reconfigurable",), batch=2, iters=4, horizon=2, n_eval=2, progress=False,
                  checkpoint_every=3)
    with STANDARD:
        train_controller.run(tmp_path / "full", **kwargs)
        with _interrupted_at(3), pytest.raises(KeyboardInterrupt):
            train_controller.run(tmp_path / "cut", **kwargs)
        capsys.readouterr()
        train_controller.run(tmp_path / "cut", **kwargs)
    assert "train reconfigurable: resuming from step 2 of 4" in capsys.readouterr().out
    full, resumed = _results(tmp_path / "full"), _results(tmp_path / "cut")
    _assert_same(full, resumed)
    assert full[2] == {"reconfigurable": 4} and not list((tmp_path / "cut").glob("*.checkpoint.npz"))
