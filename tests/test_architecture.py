"""The package's import rule and module sizes, checked on the source (docs/architecture.md).

Rules checked on every `.py` under `jaxsoa/` (parsed with `ast`, imports anywhere in a module,
absolute and relative, resolved to a dotted name):

- layers, in this order: spatial → multibody → algorithms → constraints → topology →
  integrators → systems → workflows → io. A module may import from its own layer folder and from
  earlier layers, never from a later one; a layer module may not import the top-level `jaxsoa`
  namespace (only `jaxsoa/__init__.py`, the facade, gathers everything);
- inside `systems/`, each subpackage (`orbit`, `tether`, `stewart`, `flexible`) imports only itself
  and `systems.orbit` (the shared orbital environment), which imports no other subpackage: the
  subpackages form no cycle and can be read one at a time;
- no import of `sims`, `experiments`, `matplotlib` or `tests`;
- no flat module in `jaxsoa/` except `__init__.py`, and every folder is one of the layers;
- no module longer than `MAX_LINES`.

The checker is itself tested on synthetic sources, so a rule that stopped firing would fail here.
"""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "jaxsoa"
LAYERS = ("spatial", "multibody", "algorithms", "constraints", "topology", "integrators", "systems",
          "workflows", "io")
SHARED_SYSTEMS = ("orbit",)                  # systems/ subpackages that every other one may import
FORBIDDEN = ("sims", "experiments", "matplotlib", "tests")
FLAT_MODULES = ("__init__.py",)
MAX_LINES = 350                              # modules aim at 100–300 lines; 350 is the hard limit


def module_name(path: pathlib.Path) -> str:
    """Dotted name of a file under the repository root: jaxsoa/a/b.py -> jaxsoa.a.b, a/__init__.py -> a."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(module: str, source: str, is_package: bool = False) -> list[tuple[int, str]]:
    """(line, absolute dotted name) of every import in `source`, the code of `module`.

    `from a.b import c` yields `a.b.c` (c may be a submodule or a name; the layer is the same);
    relative imports are resolved against `module` (its own name when `is_package`); calls of
    `importlib.import_module` / `__import__` with a literal name count as imports.
    """
    package = module.split(".") if is_package else module.split(".")[:-1]
    names = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            base = ".".join(base + ([node.module] if node.module else []))
            names += [(node.lineno, f"{base}.{alias.name}" if alias.name != "*" else base) for alias in node.names]
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)
              and getattr(node.func, "attr", getattr(node.func, "id", None)) in ("import_module", "__import__")):
            names.append((node.lineno, node.args[0].value))
    return names


def _place(name: str):
    """(layer, systems subpackage) of a dotted jaxsoa name; layer None for the top-level namespace."""
    parts = name.split(".")
    layer = parts[1] if len(parts) > 1 and parts[1] in LAYERS else None
    subpackage = parts[2] if layer == "systems" and len(parts) > 2 else None
    return layer, subpackage


def import_violations(module: str, source: str, is_package: bool = False) -> list[str]:
    """Every import of `source` (the code of `module`) that breaks the rules of this file's docstring."""
    layer, subpackage = _place(module)
    problems = []
    for line, name in imported_names(module, source, is_package):
        where = f"{module}:{line} imports {name}"
        top = name.split(".")[0]
        if top in FORBIDDEN:
            problems.append(f"{where}: jaxsoa never imports {top}")
        if top != "jaxsoa" or module == "jaxsoa":         # third-party, or the facade
            continue
        target_layer, target_subpackage = _place(name)
        if layer is None:
            problems.append(f"{where}: {module} is in no layer folder")
        elif target_layer is None:
            problems.append(f"{where}: a layer imports from the module that defines a name, "
                            "not from the top-level jaxsoa namespace")
        elif LAYERS.index(target_layer) > LAYERS.index(layer):
            problems.append(f"{where}: upward import ({layer} comes before {target_layer})")
        elif layer == target_layer == "systems" and subpackage is not None and target_subpackage != subpackage:
            if target_subpackage is None or target_subpackage not in SHARED_SYSTEMS or subpackage in SHARED_SYSTEMS:
                problems.append(f"{where}: systems.{subpackage} may import only itself and "
                                f"systems.{', systems.'.join(SHARED_SYSTEMS)}")
    return problems


def package_modules() -> list[pathlib.Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


# --------------------------------------------------------------------------------------------- #
# the rules hold in jaxsoa/
# --------------------------------------------------------------------------------------------- #

def test_imports_follow_the_layer_order():
    problems = []
    for path in package_modules():
        problems += import_violations(module_name(path), path.read_text(), path.name == "__init__.py")
    assert not problems, "\n".join(problems)


def test_only_init_is_flat_and_every_folder_is_a_layer():
    flat = sorted(p.name for p in PACKAGE.glob("*.py") if p.name not in FLAT_MODULES)
    folders = sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__")
    assert not flat, f"flat modules in jaxsoa/ (move them into a layer folder): {flat}"
    assert set(folders) <= set(LAYERS), f"folders of jaxsoa/ that are not layers: {sorted(set(folders) - set(LAYERS))}"
    assert not [p for p in package_modules() if not (p.parent / "__init__.py").exists()]


def test_modules_are_at_most_max_lines():
    too_long = {str(p.relative_to(ROOT)): n for p in package_modules()
                if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not too_long, f"modules over {MAX_LINES} lines (split by algorithm family): {too_long}"


# --------------------------------------------------------------------------------------------- #
# the checker fires on broken rules (synthetic sources)
# --------------------------------------------------------------------------------------------- #

BROKEN = {
    "absolute_upward": ("jaxsoa.multibody.build", "from jaxsoa.algorithms.dynamics import rnea\n", "upward"),
    "relative_upward": ("jaxsoa.multibody.build", "from ..algorithms import dynamics\n", "upward"),
    "plain_import_upward": ("jaxsoa.spatial.algebra", "import jaxsoa.io.urdf\n", "upward"),
    "lazy_upward": ("jaxsoa.constraints.closure", "def f():\n    from jaxsoa.integrators.steps import rk4_step\n",
                    "upward"),
    "package_init_upward": ("jaxsoa.topology", "from ..workflows import control\n", "upward"),
    "facade": ("jaxsoa.algorithms.kinematics", "from jaxsoa import Model\n", "top-level"),
    "sims": ("jaxsoa.systems.tether.fem", "import sims.tethered_robot\n", "never imports sims"),
    "experiments": ("jaxsoa.workflows.sharding", "from experiments import sweep\n", "never imports experiments"),
    "matplotlib": ("jaxsoa.systems.orbit", "def plot():\n    import matplotlib.pyplot as plt\n", "matplotlib"),
    "tests": ("jaxsoa.io.urdf", "from tests.helpers import trees\n", "never imports tests"),
    "import_module": ("jaxsoa.io.urdf", "import importlib\nimportlib.import_module('sims.stewart_gas')\n", "sims"),
    "systems_sideways": ("jaxsoa.systems.stewart.dynamics", "from jaxsoa.systems.tether.fem import TetherParams\n",
                         "may import only itself"),
    "orbit_imports_a_system": ("jaxsoa.systems.orbit", "from jaxsoa.systems.tether import fem\n",
                               "may import only itself"),
    "systems_package_init": ("jaxsoa.systems.tether.reels", "from .. import orbit, stewart\n",
                             "may import only itself"),
    "flat_module": ("jaxsoa.cli", "from jaxsoa.workflows import sharding\n", "no layer folder"),
}


@pytest.mark.parametrize("module, source, message", BROKEN.values(), ids=BROKEN.keys())
def test_checker_reports_a_broken_rule(module, source, message):
    problems = import_violations(module, source, is_package=module == "jaxsoa.topology")
    assert len(problems) == 1 and message in problems[0], problems


ALLOWED = {
    "same_layer": ("jaxsoa.algorithms.dynamics", "from jaxsoa.algorithms.kinematics import link_motion\n"),
    "relative_same_layer": ("jaxsoa.algorithms.dynamics", "from . import kinematics\nfrom .kinematics import x\n"),
    "downward": ("jaxsoa.io.urdf", "from ..multibody.build import build_model\nimport jaxsoa.spatial.algebra\n"),
    "system_imports_orbit": ("jaxsoa.systems.tether.reel_control", "from jaxsoa.systems import orbit as orb\n"),
    "within_a_system": ("jaxsoa.systems.tether.reels", "from .fem import TetherParams\n"),
    "systems_init": ("jaxsoa.systems", "from jaxsoa.systems import flexible, orbit, stewart, tether\n"),
    "facade": ("jaxsoa", "from jaxsoa.workflows.control import computed_torque\nfrom jaxsoa import io\n"),
    "third_party": ("jaxsoa.io.urdf", "import numpy as np\nimport yourdfpy\nfrom jax import lax\n"),
}


@pytest.mark.parametrize("module, source", ALLOWED.values(), ids=ALLOWED.keys())
def test_checker_accepts_allowed_imports(module, source):
    assert import_violations(module, source, is_package=module in ("jaxsoa", "jaxsoa.systems")) == []


def test_relative_imports_resolve_like_python():
    assert [n for _, n in imported_names("jaxsoa.systems.tether.reels", "from ..orbit import a\nfrom . import b\n")] \
        == ["jaxsoa.systems.orbit.a", "jaxsoa.systems.tether.b"]
    assert [n for _, n in imported_names("jaxsoa.systems", "from .tether import fem\n", is_package=True)] \
        == ["jaxsoa.systems.tether.fem"]


def test_engine_imports_without_plotting_or_experiment_packages():
    """`import jaxsoa` and every module under it in a process where matplotlib, chex, sims and
    experiments cannot be imported (a sys.modules entry of None makes `import` raise ImportError):
    the engine depends on none of them (pyproject: matplotlib is an extra, chex is not declared)."""
    import subprocess
    import sys

    code = ("import sys, pkgutil, importlib\n"
            "for name in ('matplotlib', 'chex', 'sims', 'experiments'): sys.modules[name] = None\n"
            "import jaxsoa\n"
            "names = [m.name for m in pkgutil.walk_packages(jaxsoa.__path__, 'jaxsoa.')]\n"
            "for name in names: importlib.import_module(name)\n"
            "print(len(names))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          cwd=pathlib.Path(__file__).parents[1])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert int(proc.stdout.split()[-1]) >= 40                    # every module was imported
