"""docs/api.md is the output of docs/generate_api.py on the current docstrings (it cannot go stale),
every name of `jaxsoa.__all__` has an entry, and the code examples of docs/user_guide.md run."""

import importlib.util
import inspect
import pathlib
import re

import pytest

import jaxsoa

pytestmark = pytest.mark.slow            # end to end: deselect with -m "not slow"
DOCS = pathlib.Path(__file__).parents[2] / "docs"


def load_generator():
    spec = importlib.util.spec_from_file_location("generate_api", DOCS / "generate_api.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_api_reference_is_up_to_date():
    expected = load_generator().render()
    actual = (DOCS / "api.md").read_text(encoding="utf-8")
    assert actual == expected, "docs/api.md is out of date: run `python docs/generate_api.py`"


def test_api_reference_covers_the_namespace():
    text = (DOCS / "api.md").read_text(encoding="utf-8")
    missing = [name for name in jaxsoa.__all__ if f"- [`{name}`]" not in text]
    assert not missing
    for name in jaxsoa.__all__:          # each also has its own entry in its module's section
        obj = getattr(jaxsoa, name)
        if inspect.ismodule(obj):        # a layer namespace: its modules have their own sections
            assert f"## {obj.__name__}." in text, name
            continue
        assert f"### `{obj.__module__}.{obj.__name__}`" in text, name


def test_user_guide_examples_run():
    """The ```python blocks of docs/user_guide.md, executed in order in one namespace (each ends in
    assertions against closed forms, conservation laws or a second code path)."""
    text = (DOCS / "user_guide.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)
    assert len(blocks) >= 10
    namespace = {}
    for i, block in enumerate(blocks):
        exec(compile(block, f"user_guide.md block {i}", "exec"), namespace)
