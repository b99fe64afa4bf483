"""Updates tests/slow_by_duration.txt from the `--durations=0` log of a fast-subset run: adds every test
whose setup, call and teardown together took more than CAP seconds (the listed ones, deselected in
that run, stay listed).

    python -m pytest -n 2 -m "not slow" --durations=0 > log.txt
    python -m tests.helpers.slow_by_duration log.txt

tests/conftest.py marks the listed tests `slow`, so the default developer run (`-m "not slow"`)
stays short while CI still runs everything.
"""

import argparse
import collections
import math
import pathlib
import re

CAP = 6.0                      # seconds on 2 cores, cold compilation cache
LISTING = pathlib.Path(__file__).parents[1] / "slow_by_duration.txt"
HEADER = f"""# Tests marked `slow` by tests/conftest.py because they took more than {CAP:g} s (setup + call + teardown,
# cold compilation cache, `-n 2` on 2 cores): seconds, then the test id. Regenerate with
# `python -m tests.helpers.slow_by_duration LOG` (tests/helpers/slow_by_duration.py).
"""


def listed(path=LISTING):
    """{test id: seconds} of the listing."""
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    rows = (line.split(maxsplit=1) for line in lines if line.strip() and not line.startswith("#"))
    return {name: float(seconds) for seconds, name in rows}


def durations(log: str):
    """{test id: seconds} summed over setup, call and teardown."""
    total = collections.Counter()
    for match in re.finditer(r"^([\d.]+)s (?:setup|call|teardown)\s+(\S+)$", log, flags=re.M):
        total[match.group(2)] += float(match.group(1))
    return total


def main(log_path):
    measured = durations(pathlib.Path(log_path).read_text(encoding="utf-8"))
    rows = listed(LISTING) | {name: t for name, t in measured.items() if t > CAP}
    slow = sorted(((t, name) for name, t in rows.items()), reverse=True)
    # tenths rounded up, so a listed time stays over CAP (6.05 s is written 6.1, not 6.0)
    LISTING.write_text(HEADER + "".join(f"{math.ceil(t * 10) / 10:6.1f} {name}\n" for t, name in slow),
                       encoding="utf-8")
    print(f"wrote {LISTING}: {len(slow)} tests over {CAP:g} s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", help="a pytest log written with --durations=0")
    log = parser.parse_args().log
    if not pathlib.Path(log).is_file():
        parser.error(f"argument log: no such file {log!r}")
    main(log)
