"""Sharded Monte Carlo sweeps (jaxsoa.workflows.sharding), result files (jaxsoa.workflows.results) and the sweep
experiment (experiments/sweep.py) on the real systems (its durable run directories, resume and options:
test_store.py, test_sweep_runner.py, test_sweep_command.py).

The per-sample function of the sharding tests is the free-floating forward dynamics of the dual-arm
spacecraft in a per-sample topology (configuration 1-3, `apply_configuration` inside the compiled
call) at a random state: real engine work whose topology varies across the batch, yet cheap to
compile. The reference is the second code path `jit(vmap(fn))` on one device, the whole batch at once.
"""

import json
import os
import pathlib
import socket
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments import sweep
from jaxsoa import aba_free_floating
from jaxsoa.topology.reconfigure import apply_configuration, design_arrays
from jaxsoa.workflows import sharding
from jaxsoa.workflows.results import read_results, summarize, write_results
from jaxsoa.workflows.store import read_sweep
from sims import dual_arm_spacecraft as dual
from sims import stewart_gas
from tests.helpers.trees import counting

ROOT = pathlib.Path(__file__).resolve().parents[2]


def dual_arm_dynamics():
    """(fn(sample) -> {"qdd": (12,), "topology": (7,)}, sample(rng, count) -> host batch)."""
    template = dual.model(1, floating=True)
    arrays = design_arrays(dual.design(floating=True))
    table = jnp.asarray([dual.CONFIGURATIONS[k] for k in (1, 2, 3)], jnp.int32)

    def fn(s):
        model = apply_configuration(template, arrays, table[s["configuration"]], jnp.asarray(dual.IDS, jnp.int32))
        q = jnp.concatenate([s["hub_position"], s["hub_quat"] / jnp.linalg.norm(s["hub_quat"]), s["q_joints"]])
        return {"qdd": aba_free_floating(model, q, s["v"], s["tau"]), "parent": model.parent}

    def sample(rng, count):
        return {"configuration": rng.integers(0, 3, count), "hub_position": rng.normal(size=(count, 3)),
                "hub_quat": rng.normal(size=(count, 4)), "q_joints": rng.uniform(-1, 1, (count, 6)),
                "v": rng.normal(size=(count, 12)), "tau": rng.normal(size=(count, 6))}

    return fn, sample


def assert_close(actual, reference):
    """1e-12 relative to max(1, |reference|): float64 results of the same arithmetic, vectorised
    differently by XLA at another per-device batch size (measured: 0 at equal sizes, 3.6e-15 absolute
    on accelerations up to 105 with one sample per device; bitwise equality is not guaranteed)."""
    for a, r in zip(jax.tree_util.tree_leaves(actual), jax.tree_util.tree_leaves(reference), strict=True):
        assert a.shape == r.shape
        np.testing.assert_allclose(a, r, rtol=0, atol=1e-12 * max(1.0, float(np.abs(r).max())))


SUBPROCESS = """
import json, sys
import jax
import numpy as np
from jaxsoa.workflows.sharding import initialize_distributed, sharded_map
from experiments import sweep
from tests.workflows.test_sharding import dual_arm_dynamics
from tests.helpers.trees import counting

port, out = sys.argv[1], sys.argv[2]
# the experiment's multi-host options, one process: jax.distributed.initialize on 4 fake devices
sweep.main(["--coordinator", f"localhost:{port}", "--num-processes", "1", "--process-id", "0",
            "--system", "space_arm", "--count", "5", "--chunk", "4", "--steps", "2", "--out", out])
fn, sample = dual_arm_dynamics()
batch = sample(np.random.default_rng(1), 11)            # 11 = 2 chunks of 4 + 3: the last chunk padded
counted, count = counting(fn)
sharded = sharded_map(counted, batch, chunk_size=4)
one_device = sharded_map(fn, batch, chunk_size=4, devices=jax.devices()[:1])
reference = jax.jit(jax.vmap(fn))(batch)
print(json.dumps({"devices": jax.device_count(), "processes": jax.process_count(), "traces": count[0],
                  "sharded": {k: np.asarray(v).tolist() for k, v in sharded.items()},
                  "one_device": {k: np.asarray(v).tolist() for k, v in one_device.items()},
                  "reference": {k: np.asarray(v).tolist() for k, v in reference.items()}}))
"""


def free_port():
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


@pytest.mark.slow            # runs the sweep's CLI in a subprocess (4 fake devices)
def test_four_devices_match_unsharded(tmp_path):
    """4 fake CPU devices (and `jax.distributed.initialize` with one process, through the experiment's
    CLI): the sharded sweep equals the one-device sweep and `jit(vmap)`, with 11 samples in chunks of 4
    (not a multiple of devices × chunk), and compiles once."""
    env = {**os.environ, "JAX_ENABLE_X64": "1", "PYTHONPATH": str(ROOT),
           "XLA_FLAGS": f"--xla_force_host_platform_device_count=4 {os.environ.get('XLA_FLAGS', '')}"}
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(SUBPROCESS), str(free_port()), str(tmp_path)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert (result["devices"], result["processes"], result["traces"]) == (4, 1, 1)
    reference = {k: np.asarray(v) for k, v in result["reference"].items()}
    assert reference["qdd"].shape == (11, 12)
    assert len({tuple(p) for p in reference["parent"]}) == 3                 # all three topologies present
    for run in ("sharded", "one_device"):
        assert_close({k: np.asarray(v) for k, v in result[run].items()}, reference)
    assert {p.name for p in tmp_path.iterdir()} >= {"space_arm", "sweep_space_arm.png", "sweep_summary.md"}
    run = read_sweep(tmp_path / "space_arm")
    assert run.done.all() and run.outputs["hub_angle_final_deg"].shape == (5,)
    assert len(run.record["environment"]["devices"]) == 4
    # the coasting arm conserves momentum up to RK4's O(dt⁵)-per-step error, ~1e-14 at joint rates
    # <= 0.05 rad/s; bound 1e-9 (arm momentum ~1-10 N s)
    assert 0 < run.outputs["momentum_drift"].max() < 1e-9


@pytest.fixture(scope="module")
def dynamics():
    fn, sample = dual_arm_dynamics()
    return fn, sample(np.random.default_rng(2), 10)


def test_chunks_compile_once_and_match_one_chunk(dynamics):
    """10 samples in chunks of 3 (4 calls, the last padded by 2): one trace, and the results of a
    single 10-sample chunk and of `jit(vmap)` (tolerance: `assert_close`)."""
    fn, batch = dynamics
    counted, count = counting(fn)
    chunked = sharding.sharded_map(counted, batch, chunk_size=3)
    assert count[0] == 1
    single = sharding.sharded_map(fn, batch, chunk_size=10)
    assert_close(chunked, single)
    assert_close(chunked, jax.jit(jax.vmap(fn))(batch))
    assert sharding.chunk_length(10, 4, 3) == 4 and sharding.chunk_length(10, 1) == 10


def test_bad_input_names_the_field(dynamics):
    fn, batch = dynamics
    for bad in (0, -2, 2.5, True):
        with pytest.raises(ValueError, match="'chunk_size'"):
            sharding.sharded_map(fn, batch, chunk_size=bad)
    with pytest.raises(ValueError, match=r"batch\['v'\] has leading dimension 9, expected 10"):
        sharding.sharded_map(fn, {**batch, "v": batch["v"][:9]})
    with pytest.raises(ValueError, match=r"batch\['tau'\] is a scalar"):
        sharding.batch_count({"q": np.zeros(3), "tau": 1.0})
    with pytest.raises(ValueError, match="zero samples"):
        sharding.batch_count({"q": np.zeros((0, 3))})
    with pytest.raises(ValueError, match="'devices' is empty"):
        sharding.device_mesh([])
    with pytest.raises(ValueError, match="'process_id'"):
        sharding.initialize_distributed("localhost:1", 2, None)
    with pytest.raises(ValueError, match="'process_id' must be in"):
        sharding.initialize_distributed("localhost:1", 2, 2)
    with pytest.raises(ValueError, match="'system'"):
        sweep.run("unused", systems=("no_such_system",))


def test_summary_and_result_file(tmp_path):
    """Statistics of 0, 1, ..., 100 against their closed forms; a NaN is counted and excluded from
    the statistics; the .npz round-trips arrays (exactly) and metadata."""
    x = np.arange(101.0)
    stats = summarize({"x": x})["x"]
    assert (stats["mean"], stats["q5"], stats["q50"], stats["q95"], stats["max"]) == (50.0, 5.0, 50.0, 95.0, 100.0)
    assert stats["std"] == pytest.approx(np.sqrt((101**2 - 1) / 12), rel=1e-15)   # discrete uniform variance
    bad = summarize({"x": np.r_[x, np.nan]})["x"]
    assert bad["nonfinite"] == 1 and bad["finite"] == 101 and bad["mean"] == 50.0
    path = write_results(tmp_path / "r", {"a/b": x, "k": np.arange(3)}, {"seed": 3})
    arrays, meta = read_results(path)
    assert path.suffix == ".npz" and meta == {"seed": 3}
    np.testing.assert_array_equal(arrays["a/b"], x)


@pytest.mark.slow            # runs experiments/sweep.py
def test_experiment_writes_its_files(tmp_path):
    """The dual arm on a tiny sweep (the space arm runs in `test_four_devices_match_unsharded`):
    files written, a row per output over all samples and per topology, computed-torque tracking within
    O(dt) of the reference motion (< 1e-3 rad after 3 steps of 0.01 s), statistics as in the .npz."""
    rows, throughput, _, _ = sweep.run(tmp_path, systems=("dual_arm",), count=7, chunk=4, steps=3, progress=False)
    assert {p.name for p in tmp_path.iterdir()} == {"dual_arm", "sweep_dual_arm.png", "sweep_summary.md",
                                                     "sweep_summary.json"}
    run = read_sweep(tmp_path / "dual_arm")
    assert run.record["count"] == 7 and run.inputs["configuration"].shape == (7,) and len(throughput) == 1
    by = {(r["group"], r["output"]): r for r in rows}
    groups = {f"configuration {k}" for k in run.inputs["configuration"]}
    assert {g for g, _ in by} == {"all"} | groups
    assert by[("all", "tracking_error_rad")]["max"] < 1e-3
    torque = run.outputs["peak_torque_Nm"]
    assert by[("all", "peak_torque_Nm")]["max"] == torque.max() > 0
    assert sum(by[(g, "peak_torque_Nm")]["n"] for g in groups) == 7
    assert json.loads((tmp_path / "sweep_summary.json").read_text())["rows"] == json.loads(json.dumps(rows))


@pytest.mark.slow            # runs experiments/sweep.py
def test_stewart_and_tether_entries(tmp_path):
    """The Stewart platform and tethered-dumbbell entries on a tiny sweep: files written, every output
    finite, and the closed forms each must meet. Stewart: every profile starts at the mid pose, where each
    gas spring pushes with exactly precharge × piston area (38.6 kN), so the peak gas force is at least
    that, and the electric legs carry a load. Tether: the rate-driven reel
    pays out at a constant rate, so the deployed length is exactly l₀ + rate · t (RK4 integrates a
    linear s exactly: 1e-9 m), and gravity gradient keeps the deployed tether taut (peak tension > 0)."""
    steps = 5
    rows, throughput, _, nonfinite = sweep.run(tmp_path, systems=("stewart", "tether"), count=3, chunk=3,
                                               steps=steps, progress=False)
    assert {p.name for p in tmp_path.iterdir()} == {"stewart", "sweep_stewart.png", "tether", "sweep_tether.png",
                                                     "sweep_summary.md", "sweep_summary.json"}
    assert len(throughput) == 2 and all(r["nonfinite"] == 0 for r in rows) and nonfinite == {"stewart": {},
                                                                                              "tether": {}}
    stewart, tether = read_sweep(tmp_path / "stewart"), read_sweep(tmp_path / "tether")
    for run in (stewart, tether):
        for name, value in {**run.inputs, **run.outputs}.items():
            assert value.shape[0] == 3 and np.all(np.isfinite(value)), name
    assert np.all(stewart.outputs["peak_force_kN"] >= stewart.outputs["rms_force_kN"])
    assert np.all(stewart.outputs["rms_force_kN"] > 0)
    mid = float(stewart_gas.PRECHARGE * np.pi * 0.16**2) / 1e3             # p₀ A_P, bore 0.32 m (kN)
    assert np.all(stewart.outputs["peak_gas_force_kN"] >= mid * (1 - 1e-12))
    expected = 50.0 + tether.inputs["reel_rate"] * steps * sweep.TETHER_DT
    np.testing.assert_allclose(tether.outputs["final_length_m"], expected, rtol=0, atol=1e-9)
    assert np.all(tether.outputs["peak_tension_mN"] > 0) and tether.record["count"] == 3
