"""Run directories of chunked sweeps (jaxsoa.workflows.store) and atomic result files
(jaxsoa.workflows.results): layout and round trip, partial reads with the done mask, the commit
protocol under a failing write, refusal of an existing run and of a resume with other parameters,
and the write probe. Host-side only (numpy and zarr): no compilation."""

import errno
import json
import os
import sys

import numpy as np
import pytest
import zarr

from jaxsoa.workflows import results, store


def toy_record(count=10, chunk=4, parameters=None, x=None):
    x = np.arange(count * 3.0).reshape(count, 3) if x is None else x
    inputs = {"x": x, "k": np.arange(count)}
    outputs = {"y": np.zeros(()), "v/w": np.zeros(2, np.float32), "ok": np.zeros((), bool)}
    return inputs, store.sweep_record(count, chunk, inputs, outputs, parameters or {"seed": 0}, notes={"cmd": "t"})


def chunk_outputs(inputs, rows):
    return {"y": inputs["x"][rows].sum(1), "v/w": np.ones((rows.stop - rows.start, 2), np.float32),
            "ok": inputs["k"][rows] % 2 == 0}


def commit(s, inputs, k):
    rows = s.rows(k)
    s.write_chunk(k, {n: v[rows] for n, v in inputs.items()}, chunk_outputs(inputs, rows))


def test_layout_round_trip_and_partial_reads(tmp_path):
    """A new store is an empty zarr group with one array per name (chunks of C along axis 0) and a
    (K,) done array; committed chunks read back exactly, the others as fill values with done False;
    zarr alone (no jaxsoa) reads the same arrays."""
    inputs, record = toy_record()
    s = store.open_or_create(tmp_path / "run", record)
    assert (s.count, s.chunk, s.n_chunks) == (10, 4, 3) and not s.done().any()
    commit(s, inputs, 0)
    commit(s, inputs, 2)                                       # the last, short chunk (2 samples)
    data = store.read_sweep(tmp_path / "run")
    np.testing.assert_array_equal(data.done, [True] * 4 + [False] * 4 + [True] * 2)
    np.testing.assert_array_equal(data.inputs["x"][data.done], inputs["x"][data.done])
    assert np.isnan(data.outputs["y"][~data.done]).all() and not data.outputs["ok"][~data.done].any()
    np.testing.assert_array_equal(data.outputs["y"][data.done], inputs["x"][data.done].sum(1))
    assert data.outputs["v/w"].dtype == np.float32 and data.outputs["v/w"].shape == (10, 2)
    assert data.record["notes"] == {"cmd": "t"} and data.record["parameters"] == {"seed": 0}
    group = zarr.open_group(str(tmp_path / "run"), mode="r")
    assert group["outputs/v/w"].chunks == (4, 2) and group["done"].shape == (3,)
    np.testing.assert_array_equal(group["outputs/y"][:4], data.outputs["y"][:4])
    assert not list(tmp_path.glob(".run*"))                    # the creation directory was renamed away


def test_failed_write_leaves_committed_chunks_and_no_partial_chunk(tmp_path, monkeypatch):
    """A write that fails with ENOSPC half-way through chunk 1 (after its inputs): OSError naming the
    run directory and chunk, chunk 0 untouched, chunk 1 not done and its files removed (reads as
    fill), and the run resumes to the full result."""
    inputs, record = toy_record()
    s = store.open_or_create(tmp_path / "run", record)
    commit(s, inputs, 0)
    before = store.read_sweep(tmp_path / "run")
    real = type(s._arrays["outputs", "v/w"]).__setitem__

    def full_disk(array, key, value):
        if array.path == "outputs/v/w":
            raise OSError(errno.ENOSPC, "No space left on device")
        real(array, key, value)

    monkeypatch.setattr(type(s._arrays["outputs", "v/w"]), "__setitem__", full_disk)
    with pytest.raises(OSError, match=rf"writing chunk 1 of the sweep in {tmp_path / 'run'}: No space left") as info:
        commit(s, inputs, 1)
    assert info.value.errno == errno.ENOSPC and info.value.filename == str(tmp_path / "run")
    monkeypatch.undo()
    after = store.read_sweep(tmp_path / "run")
    np.testing.assert_array_equal(after.done, before.done)
    for kind in ("inputs", "outputs"):
        for name, values in getattr(before, kind).items():
            np.testing.assert_array_equal(getattr(after, kind)[name], values)       # chunk 1 reads as fill
    resumed = store.open_or_create(tmp_path / "run", record, resume=True)
    for k in (1, 2):
        commit(resumed, inputs, k)
    final = store.read_sweep(tmp_path / "run")
    assert final.done.all()
    np.testing.assert_array_equal(final.inputs["x"], inputs["x"])


def test_existing_runs_are_never_overwritten(tmp_path):
    inputs, record = toy_record()
    s = store.open_or_create(tmp_path / "run", record)
    commit(s, inputs, 0)
    with pytest.raises(store.SweepExistsError, match=r"already holds a sweep \(4 of 10 samples done\)"):
        store.open_or_create(tmp_path / "run", record)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(store.SweepExistsError, match="not an empty folder"):
        store.open_or_create(tmp_path / "other", record)
    assert (tmp_path / "other" / "notes.txt").read_text() == "mine"
    (tmp_path / "empty").mkdir()
    assert store.open_or_create(tmp_path / "empty", record).n_chunks == 3        # an empty folder is used
    assert store.read_sweep(tmp_path / "run").done.sum() == 4


def test_resume_with_other_parameters_is_refused_naming_them(tmp_path):
    _, record = toy_record(parameters={"seed": 0, "steps": 3})
    store.open_or_create(tmp_path / "run", record)
    _, other = toy_record(parameters={"seed": 0, "steps": 5})
    with pytest.raises(store.SweepMismatchError, match=r"steps: stored 3, requested 5"):
        store.open_or_create(tmp_path / "run", other, resume=True)
    _, other = toy_record(chunk=5, parameters={"seed": 0, "steps": 3})
    with pytest.raises(store.SweepMismatchError, match=r"chunk: stored 4, requested 5"):
        store.open_or_create(tmp_path / "run", other, resume=True)
    _, other = toy_record(parameters={"seed": 0, "steps": 3}, x=np.ones((10, 3)))
    with pytest.raises(store.SweepMismatchError, match="the input arrays"):
        store.open_or_create(tmp_path / "run", other, resume=True)
    assert store.open_or_create(tmp_path / "run", record, resume=True).count == 10   # the same record resumes


def test_resume_removes_leftover_partial_files(tmp_path):
    """A writer killed inside a file write leaves zarr's temporary ``*.partial`` file: not part of
    the store, deleted when the run is resumed."""
    _, record = toy_record()
    store.open_or_create(tmp_path / "run", record)
    leftover = tmp_path / "run" / "outputs" / "y" / "c" / "0.0123abcd.partial"
    leftover.parent.mkdir(parents=True)
    leftover.write_bytes(b"half a chunk")
    store.open_or_create(tmp_path / "run", record, resume=True)
    assert not leftover.exists()


def test_probe_and_reading_errors(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(OSError, match=f"cannot write to {tmp_path / 'file' / 'out'}"):
        store.probe_writable(tmp_path / "file" / "out")
    if os.geteuid() != 0:                                          # root writes anywhere
        (tmp_path / "ro").mkdir(mode=0o500)
        with pytest.raises(OSError, match="cannot write to"):
            store.probe_writable(tmp_path / "ro")
    assert store.probe_writable(tmp_path / "a" / "b").is_dir() and not list((tmp_path / "a" / "b").iterdir())
    with pytest.raises(FileNotFoundError, match="not a sweep run directory"):
        store.read_sweep(tmp_path)
    zarr.open_group(str(tmp_path / "plain"), mode="w")
    with pytest.raises(ValueError, match="not a sweep run directory"):
        store.read_sweep(tmp_path / "plain")


def test_atomic_result_files(tmp_path):
    """A failed rewrite leaves the previous file as it was and no temporary file; `write_results`
    round-trips through `write_atomic`."""
    target = tmp_path / "summary.json"
    results.write_atomic(target, json.dumps({"v": 1}))

    class Unwritable(str):                     # fails inside the write, as a full disk would
        def encode(self, *args):
            raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        results.write_atomic(target, Unwritable())
    assert json.loads(target.read_text()) == {"v": 1} and [p.name for p in tmp_path.iterdir()] == ["summary.json"]
    path = results.write_results(tmp_path / "r", {"a": np.arange(3.0)}, {"seed": 1})
    arrays, meta = results.read_results(path)
    np.testing.assert_array_equal(arrays["a"], np.arange(3.0))
    assert meta == {"seed": 1}


def test_statistics_exclude_nonfinite_samples_and_count_them():
    """One NaN and one inf among 0..100: the statistics are those of 0..100, with 2 excluded; a name
    with no finite sample gets NaN statistics; integer arrays have no non-finite entries."""
    x = np.arange(101.0)
    stats = results.summarize({"x": np.r_[x, np.nan, np.inf]})["x"]
    assert (stats["count"], stats["finite"], stats["nonfinite"]) == (103, 101, 2)
    assert (stats["mean"], stats["q5"], stats["q50"], stats["q95"], stats["max"]) == (50.0, 5.0, 50.0, 95.0, 100.0)
    empty = results.summarize({"z": np.full(3, np.nan)})["z"]
    assert empty["finite"] == 0 and np.isnan(empty["mean"]) and np.isnan(empty["q50"])
    assert results.nonfinite_counts({"x": np.r_[x, np.nan], "k": np.arange(3)}) == {"x": 1, "k": 0}


def test_missing_zarr_says_how_to_install(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "zarr", None)
    with pytest.raises(ImportError, match=r"pip install 'jaxsoa\[sweeps\]'"):
        store.read_sweep(tmp_path)
