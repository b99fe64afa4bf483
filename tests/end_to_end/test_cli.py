"""The `python -m experiments` command: top-level and per-subcommand help, the reproduce-name mapping, and clear
errors (exit status 2, no traceback) for user mistakes."""

import pytest

from experiments import cli

pytestmark = pytest.mark.slow            # end to end: deselect with -m "not slow"


def test_top_level_help_lists_every_command(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for name in cli.COMMANDS:
        assert name in out


@pytest.mark.parametrize("command", sorted(cli.COMMANDS))
def test_subcommand_help(command, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main([command, "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert f"{cli.PROG} {command}" in out and ("--out" in out or "--results" in out)


def test_unknown_command_and_reproduction_are_user_errors(capsys):
    for argv in (["bogus"], ["reproduce", "seed999"]):
        with pytest.raises(SystemExit) as exit_info:
            cli.main(argv)
        assert exit_info.value.code == 2
        err = capsys.readouterr().err
        assert "invalid choice" in err and "Traceback" not in err


def test_reproduce_names_map_to_only():
    assert cli._reproduce_argv(["seed001", "seed004", "--out", "x"]) == ["--only", "seed001", "seed004", "--out", "x"]
    assert cli._reproduce_argv(["all", "--out", "x"]) == ["--out", "x"]
    assert cli._reproduce_argv([]) == []
