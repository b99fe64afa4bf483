"""Durable sweeps (jaxsoa.workflows.runner, jaxsoa.workflows.executors): stop and resume equal an
uninterrupted run bit for bit and compute only the missing chunks; signals become stop requests;
two `jax.distributed` processes equal one process; a Dask cluster that loses a worker mid-run still
equals one process.

The per-sample function is the toy of tests/helpers/sweep_toy.py (a few sin iterations, a ratio
that is non-finite for some samples, a 64-vector): its compile takes well under a second, so the
tests measure the machinery, not the physics (experiments/sweep.py runs the real systems).
"""

import json
import os
import pathlib
import signal
import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest

from jaxsoa.workflows import executors, runner, sharding
from jaxsoa.workflows.store import SweepMismatchError, read_sweep
from tests.helpers import sweep_toy
from tests.helpers.trees import counting

ROOT = pathlib.Path(__file__).resolve().parents[2]


def assert_equal_runs(path, reference):
    """Bitwise equality of two run directories' inputs and outputs (NaN equal to NaN), all done."""
    a, b = read_sweep(path), read_sweep(reference)
    assert a.done.all() and b.done.all()
    for kind in ("inputs", "outputs"):
        assert set(getattr(a, kind)) == set(getattr(b, kind))
        for name, values in getattr(a, kind).items():
            np.testing.assert_array_equal(values, getattr(b, kind)[name], strict=True, err_msg=name)


@pytest.fixture(scope="module")
def toy():
    batch = sweep_toy.sample(np.random.default_rng(3), 10)
    return sweep_toy.simulator(3), batch


def test_stop_and_resume_equal_an_uninterrupted_run(toy, tmp_path):
    """10 samples in chunks of 4: stopped after the first commit, then resumed: the resume
    computes only the 6 missing samples (one compilation per call), and the run equals an
    uninterrupted one and `sharded_map` bit for bit; the partial run reads back with its mask."""
    fn, batch = toy
    stopped = runner.run_sweep(fn, batch, tmp_path / "run", chunk_size=4, parameters={"seed": 3},
                               stop=lambda: True)
    assert (stopped.done, stopped.computed, stopped.complete, stopped.stopped) == (4, 4, False, True)
    partial = read_sweep(tmp_path / "run")
    assert partial.done.tolist() == [True] * 4 + [False] * 6 and np.isnan(partial.outputs["y"][4:]).all()
    counted, traces = counting(fn)
    progress = []
    resumed = runner.run_sweep(counted, batch, tmp_path / "run", parameters={"seed": 3}, resume=True,
                               on_chunk=lambda done, count: progress.append((done, count)))
    assert (resumed.done, resumed.computed, resumed.complete, resumed.chunk) == (10, 6, True, 4)
    assert progress == [(8, 10), (10, 10)] and traces[0] == 2          # eval_shape + the one chunk program
    whole = runner.run_sweep(fn, batch, tmp_path / "whole", chunk_size=4, parameters={"seed": 3})
    assert whole.computed == 10 and whole.environment_changes == ()
    assert_equal_runs(tmp_path / "run", tmp_path / "whole")
    in_memory = sharding.sharded_map(fn, batch, chunk_size=4)
    data = read_sweep(tmp_path / "run")
    for name, values in in_memory.items():
        np.testing.assert_array_equal(data.outputs[name], values, strict=True)
    assert not np.isfinite(data.outputs["ratio"][batch["k"] == 0]).any()      # x0 / 0 is stored as it is
    with pytest.raises(SweepMismatchError, match="seed: stored 3, requested 4"):
        runner.run_sweep(fn, batch, tmp_path / "run", parameters={"seed": 4}, resume=True)
    complete = runner.run_sweep(fn, batch, tmp_path / "run", parameters={"seed": 3}, resume=True)
    assert (complete.computed, complete.complete) == (0, True)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_signals_become_stop_requests(signum):
    """The first signal is recorded (exit code 128 + n), the second runs the previous handler, and
    the previous handlers are back afterwards."""
    previous = signal.getsignal(signum)
    seen = []
    signal.signal(signum, lambda n, frame: seen.append(n))
    try:
        with runner.StopOnSignals() as stop:
            assert not stop() and stop.exit_code == 0
            signal.raise_signal(signum)
            assert stop() and stop.received == signum and stop.exit_code == 128 + signum
            signal.raise_signal(signum)                 # the second: the handler installed before
            assert seen == [signum]
        signal.raise_signal(signum)
        assert seen == [signum, signum]
    finally:
        signal.signal(signum, previous)


def test_executor_options_and_missing_dask(monkeypatch):
    with pytest.raises(ValueError, match="exactly one of 'scheduler' and 'client'"):
        executors.DaskExecutor()
    with pytest.raises(ValueError, match="'retries'"):
        executors.DaskExecutor(scheduler="tcp://localhost:1", retries=-1)
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(ImportError, match=r"pip install 'jaxsoa\[sweeps\]'"):
        executors.require_dask()


DISTRIBUTED = """
import json, sys
import numpy as np
import jax
from jaxsoa.workflows.sharding import initialize_distributed

port, rank, processes, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
if processes > 1:
    initialize_distributed(f"127.0.0.1:{port}", processes, rank)
jax.config.update("jax_enable_x64", True)
from jaxsoa.workflows import run_sweep
from tests.helpers import sweep_toy

batch = sweep_toy.sample(np.random.default_rng(5), 22)         # 22 = chunks of 8, 8, 6
commits = []
first = run_sweep(sweep_toy.simulator(3), batch, out, chunk_size=8, parameters={"n": 22},
                  stop=lambda: len(commits) >= 1, on_chunk=lambda done, count: commits.append(done))
second = run_sweep(sweep_toy.simulator(3), batch, out, chunk_size=8, parameters={"n": 22}, resume=True)
print(json.dumps({"processes": jax.process_count(), "devices": jax.device_count(),
                  "local": jax.local_device_count(), "first": first.done, "stopped": first.stopped,
                  "computed": second.computed, "complete": second.complete}))
"""


@pytest.mark.slow            # three JAX processes (~15 s on 2 busy cores)
def test_two_jax_distributed_processes_equal_one_process(tmp_path):
    """2 processes on the loopback address (gloo CPU collectives, JAX's default), 2 host devices
    each: the sweep (stopped after 2 chunks, then resumed: the done mask is broadcast from process
    0, the stop agreed by all) equals, bit for bit, one process with 4 devices (the same
    per-device batch), which matches the in-process 1-device run to 1e-12."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": f"--xla_force_host_platform_device_count=2 {os.environ.get('XLA_FLAGS', '')}"}
    code = textwrap.dedent(DISTRIBUTED)
    from tests.workflows.test_sharding import free_port

    port = str(free_port())
    procs = [subprocess.Popen([sys.executable, "-c", code, port, str(rank), "2", str(tmp_path / "two")], cwd=ROOT,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for rank in (0, 1)]
    env4 = {**env, "XLA_FLAGS": f"--xla_force_host_platform_device_count=4 {os.environ.get('XLA_FLAGS', '')}"}
    single = subprocess.run([sys.executable, "-c", code, "0", "0", "1", str(tmp_path / "one")], cwd=ROOT, env=env4,
                            capture_output=True, text=True, timeout=300)
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-3000:]
    assert single.returncode == 0, single.stderr[-3000:]
    reports = [json.loads(out.strip().splitlines()[-1]) for out, _ in outs]
    expected = {"processes": 2, "devices": 4, "local": 2, "first": 16, "stopped": True, "computed": 6,
                "complete": True}
    assert reports == [expected, expected]
    assert json.loads(single.stdout.strip().splitlines()[-1])["devices"] == 4
    assert_equal_runs(tmp_path / "two", tmp_path / "one")
    batch = sweep_toy.sample(np.random.default_rng(5), 22)
    reference = jax.jit(jax.vmap(sweep_toy.simulator(3)))(batch)
    outputs = read_sweep(tmp_path / "two").outputs
    for name, values in reference.items():
        np.testing.assert_allclose(outputs[name], values, rtol=1e-12, atol=1e-12)


@pytest.mark.slow            # a Dask LocalCluster of 2 worker processes (~20-30 s on 2 busy cores)
def test_dask_cluster_with_a_killed_worker_equals_one_process(tmp_path):
    """6 chunks as tasks on a LocalCluster of 2 single-threaded worker processes; after the first
    commit the worker busy with a chunk is killed (SIGKILL). Its nanny restarts it, the scheduler
    reruns the lost chunk (the chunk log has more than 6 runs), and the run
    equals the local single-process run bit for bit (one device per worker and here: the same
    per-device batch)."""
    import distributed

    log = tmp_path / "chunk_runs.log"                     # one line per chunk started, by any process
    fn = sweep_toy.simulator(3, delay=0.5, log=str(log))   # each chunk lasts 0.5 s: the kill lands mid-chunk
    batch = sweep_toy.sample(np.random.default_rng(7), 24)
    runner.run_sweep(fn, batch, tmp_path / "local", chunk_size=4)
    assert len(log.read_text().split()) == 6
    log.unlink()
    killed = []
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    with cluster, distributed.Client(cluster) as client:
        pids = client.run(os.getpid)

        def kill_a_busy_worker(done, count):
            busy = [worker for worker, keys in client.processing().items() if keys]
            if not killed and busy:
                os.kill(pids[busy[0]], signal.SIGKILL)
                killed.append(busy[0])

        outcome = runner.run_sweep(fn, batch, tmp_path / "dask", chunk_size=4,
                                   executor=executors.DaskExecutor(client=client), on_chunk=kill_a_busy_worker)
        assert killed and pids[killed[0]] not in client.run(os.getpid).values()     # restarted by its nanny
    assert (outcome.computed, outcome.complete) == (24, True)
    runs = log.read_text().split()
    assert len(runs) > 6 and str(pids[killed[0]]) in runs          # the killed worker's chunk ran again
    assert_equal_runs(tmp_path / "dask", tmp_path / "local")
