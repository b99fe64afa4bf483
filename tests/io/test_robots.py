"""`jaxsoa.io.robots`: the example-robot-data URDFs are found, load, and agree with Pinocchio's own
URDF parser; unknown names and a missing install give errors that say what to do."""

import jax.numpy as jnp
import numpy as np
import pytest

from jaxsoa.io import ROBOTS, example_robot_data_dir, example_robot_urdf, load_urdf, robots


@pytest.mark.parametrize("name", sorted(ROBOTS))
def test_robot_urdf_loads_like_pinocchio(name):
    """Each `ROBOTS` entry is a file under `example_robot_data_dir()` that `load_urdf` reads (with
    its floating-base flag) into the same nq, nv and total mass as Pinocchio's urdfdom parser
    (mass to 1e-12 relative: both sum the same link masses, the root's included)."""
    import pinocchio as pin

    path = example_robot_urdf(name)
    assert path.is_file() and path.is_relative_to(example_robot_data_dir())
    floating = ROBOTS[name][1]
    model = load_urdf(path, floating_base=floating, dtype=jnp.float64)
    pin_model = (pin.buildModelFromUrdf(str(path), pin.JointModelFreeFlyer()) if floating
                 else pin.buildModelFromUrdf(str(path)))
    assert (model.nq, model.nv) == (pin_model.nq, pin_model.nv)
    mass = float(np.sum(np.asarray(model.mass)[:, 0]))
    pin_mass = sum(inertia.mass for inertia in pin_model.inertias)      # [0]: bodies welded to the world
    assert abs(mass - pin_mass) <= 1e-12 * mass


def test_unknown_robot_lists_the_known_names():
    with pytest.raises(ValueError, match="unknown robot 'pandas'") as info:
        example_robot_urdf("pandas")
    assert all(name in str(info.value) for name in ROBOTS)


def test_missing_install_names_the_robot_and_the_fix(monkeypatch, tmp_path):
    """With no robots folder on the search path, both functions raise FileNotFoundError with the
    install command (and the robot's name where one was asked for)."""
    monkeypatch.setattr(robots, "_search_paths", lambda: [tmp_path / "nowhere"])
    with pytest.raises(FileNotFoundError, match="pip install example-robot-data"):
        example_robot_data_dir()
    with pytest.raises(FileNotFoundError, match=r"robot 'ur5'.*pip install example-robot-data"):
        example_robot_urdf("ur5")


def test_missing_file_in_an_install_names_the_robot(monkeypatch, tmp_path):
    """A robots folder without this robot's file (an older release): FileNotFoundError naming the
    robot and the file."""
    monkeypatch.setattr(robots, "_search_paths", lambda: [tmp_path])
    with pytest.raises(FileNotFoundError, match=r"robot 'talos' is missing.*talos_reduced\.urdf"):
        example_robot_urdf("talos")
