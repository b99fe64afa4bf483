"""`python -m experiments.benchmarks.bench_batch_last`: flags checked in one line (exit 2), and a
quick run that writes its JSON with every case, ratios and errors against Pinocchio."""

import json

import pytest

from experiments.benchmarks import bench_batch_last
from tests.helpers.cli import assert_bad_flag_exits_2


@pytest.mark.parametrize("argv, message", [(["--batches", "0"], "--batches"), (["--dtypes", "float16"], "--dtypes"),
                                           (["--robots", "atlas"], "--robots"), (["--rounds", "-1"], "--rounds")])
def test_bad_flags_exit_2_naming_the_flag(argv, message, capsys):
    assert_bad_flag_exits_2(bench_batch_last.parse_args, argv, message, capsys)


@pytest.mark.slow            # compiles 9 programs (~1 min on 2 busy cores)
def test_quick_run_writes_every_case(tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert bench_batch_last.main(["--quick", "--out", str(out)]) == 0
    records = json.loads(out.read_text())["records"]
    cases = {r["case"] for r in records}
    assert cases == {f"jaxsoa {algo} {path}" for path in ("vmap", "vmap rule", "batch-last")
                     for algo in ("rnea", "aba", "crba")} | {"pinocchio rnea 2t", "pinocchio aba 2t",
                                                             "pinocchio crba loop"}
    for r in records:
        assert r["per_sample_us"] > 0 and r["ratio_to_pinocchio"] > 0
        if r["case"].startswith("jaxsoa"):
            assert r["rel_error_vs_pinocchio"] < 1e-5               # float32 against float64 Pinocchio
    assert f"wrote {out}" in capsys.readouterr().out


def test_ball_humanoid_is_the_same_tree_in_jaxsoa_and_pinocchio():
    """The benchmark's spherical-joint model (`robot_models`): jaxsoa's and Pinocchio's RNEA, ABA and CRBA
    agree at its benchmark inputs (float64, 1e-9 relative), whose quaternions are unit; it has spherical
    joints, and they take the batch-last path."""
    import jax.numpy as jnp
    import numpy as np

    import jaxsoa
    from experiments.benchmarks import bench_common as bc
    from experiments.benchmarks.robot_models import jaxsoa_model, pinocchio_model, robot_inputs
    from tests.helpers.trees import relative_error

    model, pm = jaxsoa_model("ball_humanoid", jnp.float64), pinocchio_model("ball_humanoid")
    assert (model.nq, model.nv) == (pm.nq, pm.nv) == (47, 37)
    assert len(model.links_of_type(jaxsoa.JointType.SPHERICAL)) == 9 and jaxsoa.algorithms.batch_last.supports(model)
    q, v, u = robot_inputs("ball_humanoid", model.nq, model.nv, 4)
    balls, free = model.q_columns(jaxsoa.JointType.SPHERICAL), model.q_columns(jaxsoa.JointType.FREE)
    for columns in [*balls, *(c[3:] for c in free)]:
        assert np.allclose(np.linalg.norm(q[:, columns], axis=1), 1.0)
    got = {"rnea": jaxsoa.rnea(model, q, v, u), "aba": jaxsoa.aba(model, q, v, u), "crba": jaxsoa.crba(model, q)}
    for i in range(4):
        ref = bc.pin_reference(pm, q[i], v[i], u[i])
        for name, value in got.items():
            assert relative_error(value[i], ref[name]) < 1e-9, name
