"""`python -m experiments.benchmarks.bench_adjoint`'s command line: bad flags exit 2 in one line naming the flag,
and `--skip-cases` leaves the named gradient cases out of a timed group (checked on a toy group, so no
multibody compile: the group's records are its other cases, each timed against the group's value)."""

import jax
import jax.numpy as jnp
import pytest

from experiments.benchmarks import bench_adjoint
from tests.helpers.cli import assert_bad_flag_exits_2


@pytest.mark.parametrize("argv, message", [(["--skip-cases", "value"], "--skip-cases"),
                                           (["--skip-cases", "adjoint,foo"], "--skip-cases"),
                                           (["--dtype", "float16"], "--dtype")])
def test_bad_flags_exit_2_naming_the_flag(argv, message, capsys):
    assert_bad_flag_exits_2(bench_adjoint.parse_args, argv, message, capsys)


def test_skip_cases_leave_the_named_cases_out_of_a_group():
    opts = bench_adjoint.parse_args(["--skip-cases", "autodiff,custom_vjp", "--repeats", "1", "--target-s", "0.001"])
    assert opts.skip_cases == ("autodiff", "custom_vjp")
    x = (jnp.arange(3.0),)

    def loss(x):
        return jnp.sum(jnp.sin(x))
    cases = {"value": (loss, x), "adjoint": (jax.value_and_grad(loss), x),
             "autodiff": (jax.value_and_grad(loss), x), "custom_vjp": (jax.value_and_grad(loss), x)}
    records = bench_adjoint.time_group("toy", "call", 3, cases, opts)
    assert [r["case"] for r in records] == ["value", "adjoint"]
    assert records[0]["x_value"] == 1.0 and records[1]["per_sample_us"] > 0


def test_a_group_with_non_finite_outputs_is_flagged():
    """A case whose value or gradient is not finite (a rollout that diverged for the benchmark's random draw) is
    recorded `finite: False`, so its time and its NaN gradient difference are not read as a measurement."""
    opts = bench_adjoint.parse_args(["--repeats", "1", "--target-s", "0.001"])
    x = (jnp.asarray([1.0, 0.0]),)

    def loss(x):
        return jnp.sum(jnp.log(x))                      # log 0 = −inf; its gradient 1 / 0 = inf
    cases = {"value": (loss, x), "adjoint": (jax.value_and_grad(loss), x),
             "autodiff": (jax.value_and_grad(lambda x: jnp.sum(x)), x)}
    records = {r["case"]: r for r in bench_adjoint.time_group("toy", "call", 2, cases, opts)}
    assert records["value"]["finite"] is False and records["adjoint"]["finite"] is False
    assert records["autodiff"]["finite"] is True
