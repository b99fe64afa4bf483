"""The CLI's contract for a bad flag: exit status 2 and one stderr line naming the flag, no traceback."""

import pytest


def assert_bad_flag_exits_2(parse_args, argv, flag, capsys):
    """parse_args(argv) raises SystemExit(2) with exactly one stderr line that names `flag`."""
    with pytest.raises(SystemExit) as exit_info:
        parse_args(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_info.value.code == 2 and len(err) == 1 and flag in err[0] and "Traceback" not in err[0]
