"""Per-sample code over two XLA host devices: a free-floating robot's ABA, hub response, free-floating
RNEA and innovations-form forward dynamics under `shard_map(jax.vmap(...))`.

Their inverses are `jaxsoa.spatial.algebra.inverse_spd` (elementwise ops) and, for the innovations
form's ψ, a product series (`operators._nilpotent_inverse`), not LAPACK:
with two host devices, LAPACK's custom calls hung intermittently (a lone batched 6x6 `jnp.linalg.inv`
in 5 of 20 runs), and `shard_map(jax.vmap(aba))` of Solo-12 every time from 1024 samples per device
(docs/performance.md, "Batch-last core")."""

import os
import subprocess
import sys
import textwrap

import pytest

PRELUDE = """
import jax, jax.numpy as jnp, numpy as np
jax.config.update("jax_enable_x64", True)
P = jax.sharding.PartitionSpec
mesh = jax.sharding.Mesh(np.asarray(jax.devices()), ("batch",))


def compare(per_sample, *args):
    # print "devices relative-error" of per_sample (a vmapped function) sharded over the devices against one call
    sharded = jax.jit(jax.shard_map(per_sample, mesh=mesh, in_specs=P("batch"), out_specs=P("batch"),
                                    check_vma=False))
    two, one = sharded(*args), jax.jit(per_sample)(*args)
    error = max(float(np.abs(np.asarray(a) - np.asarray(b)).max() / np.abs(np.asarray(b)).max())
                for a, b in zip(jax.tree.leaves(two), jax.tree.leaves(one), strict=True))
    print(jax.device_count(), error, flush=True)
"""

SUBPROCESS = PRELUDE + """
import jaxsoa
from jaxsoa.algorithms.free_floating import hub_response, rnea_free_floating
from jaxsoa.algorithms.operators import forward_dynamics_innovations
from jaxsoa.io import example_robot_urdf
model = jaxsoa.load_urdf(str(example_robot_urdf("solo12")), floating_base=True, dtype=jnp.float64)
keys = jax.random.split(jax.random.PRNGKey(0), 4096)
q = jax.vmap(lambda k: jaxsoa.random_configuration(model, k))(keys)
rng = np.random.default_rng(0)
v, tau = (jnp.asarray(rng.normal(size=(4096, model.nv))) for _ in range(2))
for fn in (jaxsoa.aba, forward_dynamics_innovations, lambda m, q, v, tau: hub_response(m, q),
           lambda m, q, v, tau: rnea_free_floating(m, q, v, tau[6:]).base_acceleration):
    compare(jax.vmap(lambda q, v, tau, fn=fn: fn(model, q, v, tau)), q, v, tau)
"""


@pytest.mark.slow            # a subprocess with two host devices
def test_per_sample_calls_over_two_devices():
    # Each finishes (each hung before) and equals the one-device call: the same per-sample program on
    # each half of the batch, so only round-off from a different vector loop may differ: float64 ulps
    # (1e-16) amplified by the conditioning of D / M_bb / M (1e3-1e4 for Solo-12), 1e-11 relative with margin
    # (measured: 1e-16 for ABA, 2.7e-14 and 1.1e-13 for the hub response in two runs).
    _assert_two_devices_equal_one(SUBPROCESS, 4)


def _assert_two_devices_equal_one(script, count, bound=1e-11):
    """Run `script` in a subprocess with two host devices; each of its `count` output lines ("devices error")
    must name 2 devices and a relative error ≤ bound."""
    env = {**os.environ, "XLA_FLAGS": f"--xla_force_host_platform_device_count=2 {os.environ.get('XLA_FLAGS', '')}"}
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], env=env, capture_output=True,
                          text=True, timeout=400)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.split("\n")[:-1]
    assert len(lines) == count, proc.stdout
    for line in lines:
        devices, error = line.split()
        assert int(devices) == 2
        assert float(error) <= bound


SWEEPS = PRELUDE + """
from experiments.sweep_systems import SYSTEMS
for name in ("stewart", "tether"):
    system = SYSTEMS[name]
    sample = {k: jnp.asarray(v) for k, v in system.sample(np.random.default_rng(0), 2048).items()}
    compare(jax.vmap(system.simulator(20)), sample)
"""


@pytest.mark.slow            # a subprocess with two host devices
def test_stewart_and_tether_sweeps_over_two_devices():
    # The Stewart sweep hung over two host devices (its leg-Jacobian solve and SVD were LAPACK custom calls)
    # and the tether's tridiagonal solve was LAPACK's gtsv; now `jaxsoa.spatial.small_linalg`. Each sweep
    # (2048 samples, 20 steps) must finish and equal the one-device run: the same per-sample program, so
    # round-off only, 1e-11 relative with margin (measured below 1e-15).
    _assert_two_devices_equal_one(SWEEPS, 2)


GRASP = PRELUDE + """
import jaxsoa
from jaxsoa.constraints.dynamics import forward_dynamics_constrained
from sims import dual_arm_grasp
model, closure = dual_arm_grasp.model_and_closure()
rng = np.random.default_rng(0)
q0 = jaxsoa.neutral(model, jnp.float64)
q = q0 + jnp.asarray(rng.normal(0.0, 0.05, (2048, model.nq)))
v, tau = (jnp.asarray(rng.normal(size=(2048, model.nv))) for _ in range(2))
for method in ("recursive", "dense"):
    compare(jax.vmap(lambda q, v, tau, method=method: forward_dynamics_constrained(
        model, q, v, tau, closure, method=method).qdd), q, v, tau)
"""


@pytest.mark.slow            # a subprocess with two host devices
def test_closed_loop_dynamics_over_two_devices():
    # The closed-loop solves' pseudo-inverses were LAPACK SVDs; now `jaxsoa.spatial.svd.pinv`. The grasp
    # closure's constrained forward dynamics (2048 states, recursive and dense) must finish over two devices
    # and equal one device. Round-off only, but amplified by the kept spectrum of the planar grasp's Delassus
    # matrix (rank 3 of 6, σ_max / σ_min of the kept part up to 1.5e9 at these states): float64 ulps × 1.5e9
    # ≈ 3e-7; bound 1e-6 (measured 0 and 2.3e-10 in two runs).
    _assert_two_devices_equal_one(GRASP, 2, bound=1e-6)
