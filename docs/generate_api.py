"""Generate docs/api.md, the API reference, from the docstrings of the `jaxsoa` package.

    python docs/generate_api.py            # rewrite docs/api.md
    python docs/generate_api.py --check    # exit 1 if docs/api.md is out of date

For every module of the package (sorted by name): the first paragraph of its docstring, then each
public function and class it defines (its `__all__` if it has one, else every name not starting
with "_" whose `__module__` is the module), with the signature and the first paragraph of the
docstring; classes also list their fields and public methods / properties. The top of the page
lists `jaxsoa.__all__`, the names importable from the package itself. Output is deterministic
(defaults are written by name, never with a memory address), so tests/end_to_end/test_docs.py can
compare it with the committed file.
"""

import argparse
import dataclasses
import importlib
import inspect
import pathlib
import pkgutil
import sys

import jaxsoa

API_PATH = pathlib.Path(__file__).with_name("api.md")
HEADER = """# API reference

Generated from the docstrings by `python docs/generate_api.py` (tests/end_to_end/test_docs.py fails
when this file is out of date). Concepts and conventions: [user_guide.md](user_guide.md); worked examples:
`notebooks/`. Each entry gives the signature and the first paragraph of the docstring; the module
sources carry the full text.
"""


def modules():
    """Every module of the package, sorted by dotted name."""
    names = [info.name for info in pkgutil.walk_packages(jaxsoa.__path__, "jaxsoa.") if not info.ispkg]
    return [importlib.import_module(name) for name in sorted(names)]


def first_paragraph(obj) -> str:
    """First paragraph of an object's own docstring, on one line ('' if it has none or only the
    signature that dataclasses / NamedTuple generate)."""
    doc = inspect.getdoc(obj) or ""
    if isinstance(obj, type) and (obj.__doc__ or "").startswith(f"{obj.__name__}("):
        return ""
    return " ".join(doc.strip().split("\n\n")[0].split())


def _short(value) -> str:
    """A deterministic short form of an annotation or default value."""
    if value is inspect.Parameter.empty:
        return ""
    if isinstance(value, str):
        return repr(value)
    if inspect.ismodule(value):
        return value.__name__
    if isinstance(value, type) or callable(value):
        return getattr(value, "__qualname__", getattr(value, "__name__", type(value).__name__))
    return " ".join(repr(value).split())


def signature(obj) -> str:
    """`name(param: annotation = default, ...) -> return` with short annotations and defaults."""
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return f"{obj.__name__}(...)"
    parts, seen_kw_only = [], False
    for p in sig.parameters.values():
        if p.kind is p.KEYWORD_ONLY and not seen_kw_only:
            parts.append("*")
            seen_kw_only = True
        text = {p.VAR_POSITIONAL: "*", p.VAR_KEYWORD: "**"}.get(p.kind, "") + p.name
        if p.kind is p.VAR_POSITIONAL:
            seen_kw_only = True
        if p.annotation is not p.empty:
            text += f": {_annotation(p.annotation)}"
        if p.default is not p.empty:
            text += f" = {_short(p.default)}"
        parts.append(text)
    out = f"{obj.__name__}({', '.join(parts)})"
    if sig.return_annotation is not sig.empty and not isinstance(obj, type):
        out += f" -> {_annotation(sig.return_annotation)}"
    return out


def _annotation(annotation) -> str:
    if not isinstance(annotation, str) and hasattr(annotation, "__qualname__"):
        return annotation.__qualname__.rsplit(".", 1)[-1]            # jax.Array -> Array, Model -> Model
    return str(annotation).replace("jax.Array", "Array").replace("typing.", "")


def fields(cls) -> list[str]:
    """Field names of a dataclass or NamedTuple (static dataclass fields marked)."""
    if dataclasses.is_dataclass(cls):
        return [f.name + (" (static)" if f.metadata.get("static") else "") for f in dataclasses.fields(cls)]
    return list(getattr(cls, "_fields", ()))


def members(cls) -> list[tuple[str, str]]:
    """(name, first docstring paragraph) of the public methods and properties a class defines."""
    out = []
    for name, value in vars(cls).items():
        if name.startswith("_"):
            continue
        target = value.fget if isinstance(value, property) else getattr(value, "func", value)
        if isinstance(value, property | staticmethod | classmethod) or inspect.isfunction(value) \
                or hasattr(value, "attrname"):                           # functools.cached_property
            target = getattr(value, "func", target)
            out.append((name, first_paragraph(target)))
    return out


def public_objects(module):
    """(name, object) of the functions and classes the module defines publicly."""
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n, v in vars(module).items() if not n.startswith("_")
                 and getattr(v, "__module__", None) == module.__name__]
    return [(n, getattr(module, n)) for n in names if inspect.isfunction(getattr(module, n))
            or inspect.isclass(getattr(module, n))]


def render() -> str:
    lines = [HEADER, "## `jaxsoa` (the package namespace)", ""]
    lines.append(first_paragraph(jaxsoa))
    lines.append("")
    for name in jaxsoa.__all__:
        obj = getattr(jaxsoa, name)
        doc = first_paragraph(obj)
        if inspect.ismodule(obj):                                        # a layer, as a namespace
            lines.append(f"- [`{name}`] (namespace `{obj.__name__}`): {doc}")
            continue
        anchor = obj.__module__.replace(".", "")
        lines.append(f"- [`{name}`](#{anchor}) ({obj.__module__})" + (f": {doc}" if doc else ""))
    lines.append("")
    for module in modules():
        objects = public_objects(module)
        lines += [f"## {module.__name__}", "", first_paragraph(module), ""]
        for name, obj in objects:
            kind = "class" if inspect.isclass(obj) else "function"
            lines += [f"### `{module.__name__}.{name}` ({kind})", "", "```python", signature(obj), "```", ""]
            doc = first_paragraph(obj)
            if doc:
                lines += [doc, ""]
            if inspect.isclass(obj):
                if fields(obj):
                    lines += ["Fields: " + ", ".join(f"`{f}`" for f in fields(obj)), ""]
                for member, member_doc in members(obj):
                    lines.append(f"- `{member}`" + (f": {member_doc}" if member_doc else ""))
                if members(obj):
                    lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/api.md differs from the output")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if API_PATH.read_text(encoding="utf-8") != text:
            print(f"{API_PATH} is out of date: run python docs/generate_api.py", file=sys.stderr)
            return 1
        return 0
    API_PATH.write_text(text, encoding="utf-8")
    print(f"wrote {API_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
