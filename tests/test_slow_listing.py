"""tests/slow_by_duration.txt (the tests marked `slow` for their measured duration) names only tests
that exist, and its generator reads pytest's `--durations` lines."""

import pathlib

from tests.helpers.slow_by_duration import CAP, durations, listed

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_every_listed_test_exists():
    entries = listed()
    assert entries
    for name, seconds in entries.items():
        path, function = name.split("::")
        assert (ROOT / path).is_file(), name
        assert f"def {function.split('[')[0]}(" in (ROOT / path).read_text(encoding="utf-8"), name
        assert seconds > CAP, name


def test_durations_sum_the_phases_of_a_test():
    log = ("12.50s call     tests/a.py::test_x[1]\n0.75s setup    tests/a.py::test_x[1]\n"
           "3.00s call     tests/b.py::test_y\n(40 durations < 0.005s hidden.)\n")
    assert durations(log) == {"tests/a.py::test_x[1]": 13.25, "tests/b.py::test_y": 3.0}


def test_a_time_just_over_the_cap_stays_over_it_when_written(tmp_path, monkeypatch):
    """The listing keeps tenths of a second: 6.05 s is written rounded up (6.1), not to 6.0, which the listing's
    own check (`seconds > CAP`) would reject."""
    from tests.helpers import slow_by_duration

    listing, log = tmp_path / "slow.txt", tmp_path / "log.txt"
    monkeypatch.setattr(slow_by_duration, "LISTING", listing)
    log.write_text(f"{CAP + 0.05:.2f}s call     tests/a.py::test_x\n{CAP - 0.5:.2f}s call     tests/b.py::test_y\n")
    slow_by_duration.main(log)
    assert listed(listing) == {"tests/a.py::test_x": CAP + 0.1}
