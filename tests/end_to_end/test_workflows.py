"""The trajectory-optimisation and controller-training workflows run end to end on tiny settings and
do what they claim: the optimiser lowers the hub disturbance below the naive plan's (checked through a
second code path, the forward dynamics), and training beats the untrained policy on held-out targets."""

import json

import jax
import pytest

from experiments import train_controller, trajopt

pytestmark = pytest.mark.slow            # end to end: deselect with -m "not slow"
# optax's Adam mixes its int32 step count with Python floats, which the suite's strict promotion
# rejects; the workflows run under JAX's standard promotion, as a user's program does.
STANDARD = jax.numpy_dtype_promotion("standard")


def test_trajopt_reduces_hub_disturbance(tmp_path):
    with STANDARD:
        rows = trajopt.run(tmp_path, iters=15, harmonics=2, steps=60, duration=4.0, lr=0.02, progress=False)
    naive, optimised = rows
    assert optimised["loss"] < 0.5 * naive["loss"]
    assert optimised["final_deg"] < naive["final_deg"]
    # The plan's hub attitude (zero-momentum kinematics, explicit midpoint, dt = 1/15 s) against the same
    # joint motion replayed through RNEA torques and RK4 forward dynamics: they differ by the midpoint
    # rule's O(dt²) error only, a small fraction of the naive plan's disturbance (~17 deg).
    for row in rows:
        assert row["replay_minus_plan_deg"] < 0.02 * naive["final_deg"]
    assert (tmp_path / "trajopt.png").stat().st_size > 0
    assert json.loads((tmp_path / "trajopt.json").read_text())["iters"] == 15


def test_trained_policy_beats_untrained(tmp_path):
    with STANDARD:
        rows = train_controller.run(tmp_path, tasks=("reconfigurable",), batch=32, iters=25, horizon=30, n_eval=64,
                                    progress=False)
    cost = {r["controller"]: r["held-out cost"] for r in rows}
    assert cost["trained policy"] < cost["untrained policy"]
    assert (tmp_path / "policy_reconfigurable.npz").stat().st_size > 0
    assert (tmp_path / "train_reconfigurable.png").stat().st_size > 0
    row = rows[0]
    assert row["dynamics"] == "adjoint" and row["first step s"] > 0 and row["step s"] > 0


@pytest.mark.parametrize("name", ["space_arm", "reconfigurable"])
def test_training_gradient_adjoint_equals_autodiff(name):
    # The training loss's gradient w.r.t. the policy weights through `jaxsoa.aba`'s adjoint (batch-last
    # core) against plain autodiff through ABA's scans (per sample), the two `--dynamics` paths: the same
    # loss, a second code path for its gradient. Float32, 10 steps of 8 rollouts; 2e-3 of max |grad|
    # bounds float32 round-off through 10 steps of the closed loop (measured ≤ 3e-4).
    task = train_controller.TASKS[name]()
    params = train_controller.init_policy(jax.random.PRNGKey(1), task.n_obs, task.act.size)
    keys = jax.random.split(jax.random.PRNGKey(2), 8)

    def loss(params, dynamics):
        controller = lambda q, v, t, c: train_controller.policy(params, task.observe(q, v, t, c),  # noqa: E731
                                                                 task.tau_max)
        return train_controller.batch_cost(task, controller, keys, 10, train_controller.DYNAMICS[dynamics])[0]

    with STANDARD:
        (value_a, grad_a), (value_b, grad_b) = (jax.jit(jax.value_and_grad(loss), static_argnums=1)(params, d)
                                                for d in ("adjoint", "autodiff"))
    assert abs(float(value_a) - float(value_b)) <= 1e-5 * abs(float(value_b))
    flat_a, flat_b = (jax.numpy.concatenate([x.ravel() for x in jax.tree.leaves(g)]) for g in (grad_a, grad_b))
    scale = float(jax.numpy.abs(flat_b).max())
    assert scale > 0
    assert float(jax.numpy.abs(flat_a - flat_b).max()) <= 2e-3 * scale
