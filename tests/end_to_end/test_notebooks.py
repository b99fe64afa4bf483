"""Every notebook in notebooks/ (jupytext percent-format .py files) runs top to bottom, in a kernel
started as a user of the checkout starts one: the repository root on PYTHONPATH, so `sims/` (not an
installed package) imports."""

import pathlib

import jupytext
import pytest
from nbclient import NotebookClient

pytestmark = pytest.mark.slow            # end to end: deselect with -m "not slow"
ROOT = pathlib.Path(__file__).parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.py"))


def test_there_are_notebooks():
    assert NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))                  # the kernel inherits the environment
    notebook = jupytext.read(path)
    client = NotebookClient(notebook, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute()
