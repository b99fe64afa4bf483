"""The experiments' output policy (experiments/_common.py): atomic writes (a failing write leaves the
previous file intact and no temporary file), the settings record that refuses a rerun with other
settings and lets one with the same settings resume, resumed commands (train, reproduce) that skip
finished work and end with the same results, one-line errors, progress lines off a terminal
(experiments/_progress.py), Ctrl-C."""

import io
import json

import numpy as np
import pytest

from experiments import _common, _progress, _record, cli, reproduce, train_controller


def _fail_midway(*_, **__):
    raise OSError(28, "No space left on device")


def _no_temporaries(folder):
    return [p.name for p in folder.iterdir() if ".partial" in p.name] == []


def test_failing_text_write_keeps_previous_file(tmp_path, monkeypatch):
    path = _common.write_json(tmp_path / "r.json", {"ok": 1})

    def dumps_then_fail(obj, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(json, "dumps", dumps_then_fail)
    with pytest.raises(OSError):
        _common.write_json(path, {"ok": 2})
    monkeypatch.undo()
    assert json.loads(path.read_text()) == {"ok": 1} and _no_temporaries(tmp_path)


def test_failing_serializers_keep_previous_files(tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure()
    png = _common.save_figure(fig, tmp_path / "a.png")
    npz = _common.save_npz(tmp_path / "a.npz", x=np.arange(3))
    before = png.read_bytes(), npz.read_bytes()
    assert before[0].startswith(b"\x89PNG")

    def half_then_fail(target, *args, **kwargs):          # writes part of the file, then the disk is full
        with open(target, "wb") as f:
            f.write(b"partial")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(fig, "savefig", half_then_fail)
    monkeypatch.setattr(np, "savez", half_then_fail)
    with pytest.raises(OSError):
        _common.save_figure(fig, png)
    with pytest.raises(OSError):
        _common.save_npz(npz, x=np.arange(5))
    with pytest.raises(KeyboardInterrupt), _common.open_atomic(tmp_path / "t.csv") as f:
        f.write("half")
        raise KeyboardInterrupt
    plt.close(fig)
    assert (png.read_bytes(), npz.read_bytes()) == before
    assert not (tmp_path / "t.csv").exists() and _no_temporaries(tmp_path)
    assert np.load(npz)["x"].tolist() == [0, 1, 2]


def test_record_resumes_same_settings_and_refuses_others(tmp_path):
    path = tmp_path / "r.json"
    record = _common.Record(path, {"seed": 0, "lr": 1e-3}, summary=lambda items: {"n": len(items)})
    record.add("a", {"x": np.float64(1.5), "y": np.arange(2)})
    again = _common.Record(path, {"lr": 1e-3, "seed": 0})
    assert again.done("a") and not again.done("b") and again.items["a"] == {"x": 1.5, "y": [0, 1]}
    assert not again.done("a", files=[tmp_path / "missing.png"])
    assert json.loads(path.read_text())["n"] == 1
    with pytest.raises(_common.SettingsMismatchError, match=r"seed 0 → 1.*--overwrite"):
        _common.Record(path, {"seed": 1, "lr": 1e-3})
    assert _common.Record(path, {"seed": 1, "lr": 1e-3}, overwrite=True).items == {}
    path.write_text("[1, 2]")                                 # an older file without settings
    with pytest.raises(_common.SettingsMismatchError, match="no recorded settings"):
        _common.Record(path, {"seed": 0})


def _fake_task(calls):
    def run_task(out_dir, name, batch, *rest):
        calls.append(name)
        for path in train_controller.task_files(out_dir, name):
            path.write_bytes(b"x")
        return {"rows": [{"task": name, "controller": "c", "held-out cost": float(batch),
                          "final joint error [rad]": 0.1, "dynamics": "adjoint", "train s": 1.0,
                          "first step s": 1.0, "step s": 0.5, "rollouts/s": 2.0}], "training": {"losses": [1.0]}}
    return run_task


def test_train_resumes_after_interruption(tmp_path, monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(train_controller, "run_task", _fake_task(calls))
    full = train_controller.run(tmp_path / "full", batch=4)
    train_controller.run(tmp_path / "cut", tasks=("space_arm",), batch=4)       # stopped after the first task
    resumed = train_controller.run(tmp_path / "cut", batch=4)
    assert calls == ["space_arm", "reconfigurable", "space_arm", "reconfigurable"]   # nothing computed twice
    assert resumed == full
    assert "resuming: 1 of 2 already done" in capsys.readouterr().out
    saved = json.loads((tmp_path / "cut" / "train_controller.json").read_text())
    assert saved["settings"]["batch"] == 4 and saved["settings"]["lr"] == 1e-3 and len(saved["rows"]) == 2
    with pytest.raises(_common.SettingsMismatchError, match="batch 4 → 8"):
        train_controller.run(tmp_path / "cut", batch=8)


def test_train_cli_refuses_other_settings_in_one_line(tmp_path, capsys):
    _common.write_json(tmp_path / "train_controller.json",
                       {"settings": train_controller.settings(batch=4), "items": {}})
    with pytest.raises(SystemExit) as info:
        cli.main(["train", "--out", str(tmp_path), "--batch", "8"])
    err = capsys.readouterr().err.strip()
    assert info.value.code == 2 and "\n" not in err and "argument --out" in err and "batch 4 → 8" in err


def test_reproduce_skips_finished_reproductions(tmp_path, monkeypatch, capsys):
    calls = []

    def fake(out):
        calls.append(out.name)
        _common.write_text(out / "table.md", "t\n")

    monkeypatch.setattr(reproduce, "REPRODUCTIONS", {"core": fake, "seed000": fake})
    monkeypatch.setattr(reproduce, "use_compilation_cache", lambda: None)
    assert reproduce.main(["--out", str(tmp_path), "--only", "core"]) == 0
    assert reproduce.main(["--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert calls == ["core", "seed000"] and "== core == skipped" in out and "resuming: 1 of 2" in out
    (tmp_path / "core" / "table.md").unlink()                # an incomplete reproduction runs again
    assert reproduce.main(["--out", str(tmp_path)]) == 0 and calls[-1] == "core" and len(calls) == 3
    monkeypatch.setattr(reproduce, "code_fingerprint", lambda: "other-sources")   # a code change: both run again
    assert reproduce.main(["--out", str(tmp_path)]) == 0 and calls[-2:] == ["core", "seed000"]


def test_record_of_other_sources_counts_as_other_settings(tmp_path, monkeypatch):
    """Results computed by other sources are not taken for finished ones (the fingerprint is a setting)."""
    path = tmp_path / "r.json"
    _common.Record(path, {"seed": 0}).add("a", 1)
    assert _common.Record(path, {"seed": 0}).done("a")
    monkeypatch.setattr(_record, "code_fingerprint", lambda: "other-sources")
    with pytest.raises(_common.SettingsMismatchError, match="code"):
        _common.Record(path, {"seed": 0})
    assert not _common.Record(path, {"seed": 0}, overwrite=True).done("a")


BAD = [
    (["identify", "--systems"], "--systems"),
    (["trajopt", "--problem", "foo"], "--problem"),
    (["nosuch"], "COMMAND"),
    (["trajopt", "--out", "/etc/hostname/x"], "--out"),
    (["train", "--out", "/etc/hostname/x"], "--out"),
    (["identify", "--out", "/etc/hostname/x"], "--out"),
    (["reproduce", "core", "--out", "/etc/hostname/x"], "--out"),
]


@pytest.mark.parametrize("argv, flag", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_usage_errors_are_one_line(argv, flag, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    err = capsys.readouterr().err.strip()
    assert info.value.code == 2 and "\n" not in err and "Traceback" not in err and flag in err, err


def test_tether_elements_checked_before_out_is_created(tmp_path, capsys):
    from experiments import tether_convergence

    with pytest.raises(SystemExit) as info:
        tether_convergence.main(["--out", str(tmp_path / "new"), "--elements", "1,x"])
    assert info.value.code == 2 and "argument --elements" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()


def test_ctrl_c_exits_130_with_one_line(capsys):
    @_common.interruptible(_common.RESUME_NOTE)
    def main():
        raise KeyboardInterrupt

    assert main() == 130
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "interrupted" in err and "resume" in err


def test_a_failed_write_exits_1_with_one_line_naming_the_file(tmp_path, capsys):
    """A full disk while writing an output: one line naming the file meant (not the temporary one), exit 1,
    the previous file intact and no temporary file left."""
    target = tmp_path / "table.md"
    _common.write_text(target, "old\n")

    @_common.interruptible(_common.NO_RESUME_NOTE)
    def main():
        with _common.atomic_path(target) as tmp:
            tmp.write_text("partial")
            raise OSError(27, "File too large", str(tmp))

    assert main() == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and f"writing {target} failed (File too large)" in err
    assert target.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["table.md"]


def test_line_progress_when_not_a_terminal():
    stream = io.StringIO()
    items = list(_progress.LineProgress(range(3), desc="train x", every=0.0, stream=stream))
    lines = stream.getvalue().splitlines()
    assert items == [0, 1, 2] and lines[0].startswith("train x: 1/3") and lines[-1].startswith("train x: 3/3")
    quiet = io.StringIO()
    list(_progress.LineProgress(range(3), desc="x", every=1e9, stream=quiet))
    assert quiet.getvalue() == ""


def test_sweep_summary_keeps_other_systems(tmp_path):
    from experiments import sweep

    path = _common.write_json(tmp_path / "sweep_summary.json", {
        "rows": [{"system": "space_arm", "output": "a"}, {"system": "tether", "output": "b"}],
        "throughput": [{"system": "space_arm"}, {"system": "tether"}], "nonfinite": {"space_arm": {"a": 1}}})
    rows, throughput, nonfinite = sweep.merge_previous(path, ["tether"], [{"system": "tether", "output": "new"}],
                                                       [{"system": "tether", "new": True}], {})
    assert [r["output"] for r in rows] == ["a", "new"] and [t["system"] for t in throughput] == ["space_arm", "tether"]
    assert nonfinite == {"space_arm": {"a": 1}}
