"""Every notebook in notebooks/ (jupytext percent-format .py files) runs top to bottom."""

import pathlib

import jupytext
import pytest
from nbclient import NotebookClient

pytestmark = pytest.mark.slow            # end to end: deselect with -m "not slow"
NOTEBOOKS = sorted((pathlib.Path(__file__).parents[2] / "notebooks").glob("*.py"))


def test_there_are_notebooks():
    assert NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path):
    notebook = jupytext.read(path)
    client = NotebookClient(notebook, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute()
