"""The URDFs of example-robot-data (PyPI `example-robot-data`), found where the package installs them.

example-robot-data 6.x ships no Python module (``import example_robot_data`` fails): it is a cmeel
package whose files land under ``<site-packages>/cmeel.prefix/share/example-robot-data/robots`` (a
conda or system install puts them under ``<prefix>/share/example-robot-data/robots``). This module
finds that folder and the robots used by the tests and benchmarks::

    from jaxsoa.io import example_robot_urdf, load_urdf

    model = load_urdf(example_robot_urdf("panda"))             # fixed base, nq = nv = 9
    solo = load_urdf(example_robot_urdf("solo12"), floating_base=True)

`ROBOTS[name] = (path below the robots folder, floating base)`; the flag is how the robot is meant to
be loaded (`load_urdf(..., floating_base=...)`, Pinocchio's `JointModelFreeFlyer` root).
"""

import pathlib
import sys
import sysconfig

INSTALL_HINT = "pip install example-robot-data"
_ROBOTS_FOLDER = ("share", "example-robot-data", "robots")

ROBOTS = {
    "panda": ("panda_description/urdf/panda.urdf", False),
    "ur5": ("ur_description/urdf/ur5_robot.urdf", False),
    "solo12": ("solo_description/robots/solo12.urdf", True),
    "talos": ("talos_data/robots/talos_reduced.urdf", True),
}


def _search_paths() -> list[pathlib.Path]:
    """Candidate robots folders, in search order: the cmeel prefix under each site-packages
    folder (sysconfig's, then `sys.path`'s), then ``<sys.prefix>/share/...`` (conda, system)."""
    site = [sysconfig.get_paths()[key] for key in ("purelib", "platlib")] + [p for p in sys.path if p]
    candidates = [pathlib.Path(p, "cmeel.prefix", *_ROBOTS_FOLDER) for p in site]
    candidates.append(pathlib.Path(sys.prefix, *_ROBOTS_FOLDER))
    return list(dict.fromkeys(candidates))                      # unique, order kept


def example_robot_data_dir() -> pathlib.Path:
    """The folder holding example-robot-data's robot descriptions (``.../example-robot-data/robots``).

    Raises `FileNotFoundError` (with the folders searched and the install command) when the
    package is not installed in this environment."""
    searched = _search_paths()
    for path in searched:
        if path.is_dir():
            return path
    raise FileNotFoundError(f"example-robot-data is not installed in this environment ({sys.prefix}): "
                            f"{INSTALL_HINT} (searched {', '.join(map(str, searched))})")


def example_robot_urdf(name: str) -> pathlib.Path:
    """Path of the URDF of robot `name` (a key of `ROBOTS`: 'panda', 'ur5', 'solo12', 'talos').

    Raises `ValueError` listing the known names for any other name, and `FileNotFoundError` naming
    the robot and the fix when example-robot-data (or this robot's file) is not installed."""
    if name not in ROBOTS:
        raise ValueError(f"unknown robot {name!r}; known robots: {', '.join(sorted(ROBOTS))}")
    try:
        path = example_robot_data_dir() / ROBOTS[name][0]
    except FileNotFoundError as error:
        raise FileNotFoundError(f"the URDF of robot {name!r} needs example-robot-data: {error}") from None
    if not path.is_file():
        raise FileNotFoundError(f"the URDF of robot {name!r} is missing from example-robot-data ({path}); "
                                f"install a release that has it: {INSTALL_HINT}")
    return path
