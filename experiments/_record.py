"""A command's --out folder: checked writable before any work, holding one set of settings (a `Record`
of the settings, a fingerprint of the sources and the finished items), so a rerun resumes and other
settings are refused."""

import functools
import json
import pathlib

from experiments._outputs import jsonable, write_json

OVERWRITE_HELP = ("replace results in --out computed with other settings (without it such a folder is refused, "
                  "exit 2, naming the settings that differ; with the same settings finished parts are kept "
                  "and skipped)")


def add_overwrite(parser):
    """Add ``--overwrite`` (`OVERWRITE_HELP`) to `parser`."""
    parser.add_argument("--overwrite", action="store_true", help=OVERWRITE_HELP)


def check_out(parser, out, flag="--out") -> pathlib.Path:
    """Create the folder `out` and write a probe file in it before any work; if that fails, exit 2 with
    one line naming `flag` (``parser.error``)."""
    from experiments.sweep_cli import error_text
    from jaxsoa.workflows.store import probe_writable

    try:
        return probe_writable(out)
    except OSError as error:
        parser.error(f"argument {flag}: {error_text(error)}")


class SettingsMismatchError(ValueError):
    """--out already holds results computed with other settings."""


def differences(old: dict, new: dict) -> list[str]:
    """``"name old → new"`` for each setting that differs between two settings dicts."""
    return [f"{k} {old.get(k, '(unset)')!r} → {new.get(k, '(unset)')!r}"
            for k in sorted(set(old) | set(new), key=str) if old.get(k) != new.get(k)]


SOURCE_FOLDERS = ("jaxsoa", "experiments", "sims")
"""The folders whose Python sources make a result: a change in them makes earlier results stale."""


@functools.cache
def code_fingerprint() -> str:
    """A short hash of the package's, the experiments' and the simulations' Python sources (path and
    bytes of every ``*.py`` under `SOURCE_FOLDERS`): recorded with results, so a rerun after a code
    change does not take old results for finished ones."""
    import hashlib

    root, digest = pathlib.Path(__file__).resolve().parent.parent, hashlib.sha256()
    for folder in SOURCE_FOLDERS:
        for path in sorted((root / folder).rglob("*.py")):
            digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


class Record:
    """The JSON results file of a command in its --out folder: ``{"settings": {...}, ...payload,
    "items": {name: result}}``, rewritten atomically each time an item (a task, a system, a case)
    finishes, so an interrupted run keeps what it finished.

    Opening it with the same `settings` as the file's resumes: `done` says which items to skip.
    Other settings (or a file without settings, from an older version) raise `SettingsMismatchError`
    naming them, unless `overwrite`, which starts afresh. With `code` the settings include
    `code_fingerprint()`, so results of other sources count as other settings. ``summary(items) -> dict``: the command's
    own keys (its tables over the finished items), written beside the settings."""

    def __init__(self, path, settings: dict, overwrite=False, summary=None, code=True):
        settings = {**settings, "code": code_fingerprint()} if code else settings
        self.path, self.settings = pathlib.Path(path), json.loads(json.dumps(settings, default=jsonable))
        self.items, self.summary = {}, summary or (lambda items: {})
        if not self.path.is_file():
            return
        try:
            old = json.loads(self.path.read_text())
        except (OSError, ValueError):
            old = None
        old_settings = old.get("settings") if isinstance(old, dict) else None
        if old_settings == self.settings:
            self.items = dict(old.get("items", {}))
        elif not overwrite:
            what = "; ".join(differences(old_settings, self.settings)) if isinstance(old_settings, dict) \
                else "no recorded settings (an older or foreign file)"
            raise SettingsMismatchError(f"{self.path} holds results of other settings ({what}): pass --overwrite to "
                                   "replace them, or choose another --out")

    def done(self, name, files=()) -> bool:
        """`name` finished with these settings and its `files` (paths) are all present."""
        return name in self.items and all(pathlib.Path(f).is_file() for f in files)

    def add(self, name, result):
        """Record item `name` finished with `result` (stored as its JSON round trip, so a resumed run
        reads back exactly what an uninterrupted one uses) and rewrite the file (`save`)."""
        self.items[name] = json.loads(json.dumps(result, default=jsonable))
        self.save()

    def save(self):
        """Rewrite the file atomically: the settings, the summary keys, the items."""
        write_json(self.path, {"settings": self.settings, **self.summary(self.items), "items": self.items})


def open_record(parser, path, settings: dict, overwrite: bool, code=True) -> Record:
    """`Record` for a command's main: a mismatch exits 2 with one line naming ``--out`` and the settings."""
    try:
        return Record(path, settings, overwrite, code=code)
    except SettingsMismatchError as error:
        parser.error(f"argument --out: {error}")


def report_resume(desc, skipped, total):
    """Print ``desc: resuming, N of M already done (…)`` when a rerun skips finished items."""
    if skipped:
        print(f"{desc}: resuming: {len(skipped)} of {total} already done with the same settings, skipped "
              f"({', '.join(map(str, skipped))}); --overwrite recomputes them", flush=True)
