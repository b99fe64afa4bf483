"""The loaders' own arguments: a path that is no path, a `floating_base` that is not a bool (a string was
taken for True and built a floating model) and a dtype that is not float32 / float64 (int truncated the
inertias). Each error names the argument."""

import jax.numpy as jnp
import pytest

import jaxsoa
from tests.io.test_mjcf import JOINTS


@pytest.fixture(scope="module")
def panda_path():
    return str(jaxsoa.io.example_robot_urdf("panda"))


def test_load_urdf_checks_its_arguments(panda_path):
    with pytest.raises(TypeError, match="argument 'path' must be a file path"):
        jaxsoa.load_urdf(3)
    with pytest.raises(TypeError, match="argument 'floating_base' must be True or False"):
        jaxsoa.load_urdf(panda_path, floating_base="no")
    with pytest.raises(TypeError, match="argument 'dtype' must be float32 or float64"):
        jaxsoa.load_urdf(panda_path, dtype=jnp.int32)
    assert jaxsoa.load_urdf(panda_path, floating_base=False, dtype=jnp.float64).nv == 9


def test_load_mjcf_checks_its_arguments():
    with pytest.raises(TypeError, match="argument 'floating_base' must be None, True or False"):
        jaxsoa.load_mjcf(JOINTS, floating_base="no")
    with pytest.raises(TypeError, match="argument 'dtype' must be float32 or float64"):
        jaxsoa.load_mjcf(JOINTS, dtype=jnp.float16)
