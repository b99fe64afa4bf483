"""Test configuration: float64, strict JAX promotion rules, and shared (session) fixtures.

Every accuracy test runs in float64; tolerances are stated where they are asserted.
"""

import os

# XLA's new CPU fusion emitters (JAX >= 0.10) compile our scans about twice as slowly and run
# them slower (docs/benchmarks.md); results are identical. Set before JAX starts.
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_use_fusion_emitters=false")
# XLA's backend optimisation (LLVM -O2 and its expensive passes) is most of a test's compile time and
# little of its run time: tests, and the experiments and notebooks they start as subprocesses (which
# inherit the environment), compile without it (docs/architecture.md, "Tests"); JAXSOA_TEST_OPTIMIZE=1
# compiles as users do.
if os.environ.get("JAXSOA_TEST_OPTIMIZE", "") != "1":
    os.environ["JAX_DISABLE_MOST_OPTIMIZATIONS"] = "1"

import jax

# Compiled programs persist on disk across test modules, xdist workers and runs (the per-module
# `jax.clear_caches()` below drops them from memory): a cold run reuses what earlier modules compiled.
# JAXSOA_TEST_COMPILATION_CACHE="" turns it off.
_CACHE = os.environ.get("JAXSOA_TEST_COMPILATION_CACHE",
                        os.path.join(os.path.dirname(os.path.dirname(__file__)), ".pytest_cache", "jax"))
os.environ["JAXSOA_COMPILATION_CACHE"] = _CACHE          # the experiments the tests start use the same folder
if _CACHE:
    jax.config.update("jax_compilation_cache_dir", _CACHE)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.1)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_rank_promotion", "raise")
jax.config.update("jax_numpy_dtype_promotion", "strict")

import jax.numpy as jnp  # noqa: E402
import pytest  # noqa: E402

import jaxsoa  # noqa: E402
from tests.helpers.slow_by_duration import listed  # noqa: E402

TEST_ROBOTS = ("panda", "ur5", "solo12")        # the reference robots: keys of jaxsoa.io.ROBOTS


@pytest.fixture(scope="session")
def robot_models():
    """{name: (jaxsoa float64 model, pinocchio model)} for the reference robots, loaded once."""
    import pinocchio as pin

    out = {}
    for name in TEST_ROBOTS:
        path, floating = str(jaxsoa.io.example_robot_urdf(name)), jaxsoa.io.ROBOTS[name][1]
        model = jaxsoa.load_urdf(path, floating_base=floating, dtype=jnp.float64)
        pin_model = pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer()) if floating \
            else pin.buildModelFromUrdf(path)
        out[name] = (model, pin_model)
    return out


@pytest.fixture(scope="session")
def panda(robot_models):
    return robot_models["panda"][0]


_SUITE_CONFIG = ("jax_enable_x64", "jax_numpy_rank_promotion", "jax_numpy_dtype_promotion")


@pytest.fixture(autouse=True)
def _restore_suite_config():
    """A command run in-process (a benchmark's `main` sets `jax_enable_x64` from its --dtype) must not change
    the configuration of the tests that run after it in the same worker."""
    before = {name: getattr(jax.config, name) for name in _SUITE_CONFIG}
    yield
    for name, value in before.items():
        if getattr(jax.config, name) != value:
            jax.config.update(name, value)


@pytest.fixture(autouse=True)
def _optimized_compilation(request):
    """Tests marked `optimized` (long rollouts, whose run time without XLA's backend optimisation is most of
    the test: the tethered robot's 200 coupled RK4 steps took 43 s unoptimised and 1.1 s optimised) compile
    with it, as users do."""
    if request.node.get_closest_marker("optimized") is None or not os.environ.get("JAX_DISABLE_MOST_OPTIMIZATIONS"):
        yield
        return
    jax.config.update("jax_disable_most_optimizations", False)
    try:
        yield
    finally:
        jax.config.update("jax_disable_most_optimizations", True)


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """After each test module, drop JAX's compiled programs and traces: a suite process otherwise
    keeps every executable it compiled (several GB over the whole suite per xdist worker)."""
    yield
    jax.clear_caches()


def pytest_collection_modifyitems(config, items):
    """Marks `slow` the tests of tests/slow_by_duration.txt (measured over 6 s cold on 2 cores)."""
    slow = listed()
    for item in items:
        if item.nodeid in slow:
            item.add_marker(pytest.mark.slow)
