"""Every bad flag of `python -m experiments` is a user error: exit status 2 and one line on stderr
naming the flag, before any work starts (argparse types in experiments/_common.py); and a command
whose results are non-finite exits 1, never 0. In process and fast: parsing fails before imports
of the heavy parts run anything."""

import argparse
import math

import numpy as np
import pytest

from experiments import _common, cli

BAD_FLAGS = [
    (["identify", "--duration", "-1"], "--duration"),
    (["identify", "--stride", "0"], "--stride"),
    (["identify", "--duration", "nan"], "--duration"),
    (["identify", "--noise", "-0.1"], "--noise"),
    (["identify", "--seed", "-1"], "--seed"),
    (["identify", "--adam-steps", "2.5"], "--adam-steps"),
    (["trajopt", "--steps", "0"], "--steps"),
    (["trajopt", "--duration", "0"], "--duration"),
    (["trajopt", "--iters", "-1"], "--iters"),
    (["trajopt", "--lr", "inf"], "--lr"),
    (["trajopt", "--problem", "tether", "--iters", "-2"], "--iters"),
    (["train", "--eval", "0"], "--eval"),
    (["train", "--batch", "abc"], "--batch"),
    (["train", "--seed", "-1"], "--seed"),
    (["train", "--dynamics", "finite-differences"], "--dynamics"),
    (["reproduce", "--only"], "--only"),
]


@pytest.mark.parametrize("argv, flag", BAD_FLAGS, ids=[" ".join(argv) for argv, _ in BAD_FLAGS])
def test_bad_flag_exits_2_with_one_line(argv, flag, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err, err
    assert f"argument {flag}" in err, err


def test_reproduction_flags_are_checked_too(capsys):
    from experiments import reproduce_seed001

    with pytest.raises(SystemExit) as info:
        reproduce_seed001.main(["--deploy", "-5"])
    assert info.value.code == 2 and "argument --deploy" in capsys.readouterr().err


def test_number_types():
    assert _common.positive_int("3") == 3 and _common.nonnegative_int("0") == 0
    assert _common.positive_float("1e-3") == 1e-3
    cases = ((_common.positive_int, "0"), (_common.positive_float, "-inf"), (_common.nonnegative_float, "nan"),
             (_common.positive_int, "1.5"))
    for parse, text in cases:
        with pytest.raises(argparse.ArgumentTypeError, match=r"must be|expected"):
            parse(text)


def test_non_finite_results_exit_1(capsys):
    assert _common.exit_status([{"loss": 1.0, "error": np.float64(2.0)}], "prog") == 0
    assert _common.exit_status([{"loss": math.nan}, {"x": np.array([1.0, np.inf])}], "prog") == 1
    assert "2 non-finite" in capsys.readouterr().err
