"""The report: shards + oracles → ``reports/conventions.md``, ``.json``, ``.csv`` and ``.html``.

:func:`write_reports` builds the document (:mod:`kinkcheck.report.build`) and replaces the four files as a
set: each is rendered into a temporary file ``.conventions.<ext>.<random>.tmp`` in the output folder, and
only when all four are written are they renamed into place, so a run killed before the renames leaves the
previous set whole. The next run removes temporary files left by a killed one (``.gitignore`` covers them),
so two renders into one folder at the same time are not supported: each may remove the other's.
A kill *between* the four renames (a few milliseconds) can still leave a mixed set; :func:`set_problems`
detects one, because the files are chained by digests: the JSON records the CSV's SHA-256 and the Markdown
and HTML name the JSON's SHA-256. The files are a function of the shards and catalog alone (no clock), so
the same shards render byte-identical files on any machine with the same matplotlib release.
:func:`validate_report` checks a document against ``schemas/conventions.v1.json`` (the tests run it on the
committed report).
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kinkcheck.catalog import Catalog

__all__ = ["FILES", "OutputError", "check_output", "set_problems", "validate_report", "write_reports"]

#: The report files, in the order they are renamed into place.
FILES: tuple[str, ...] = ("conventions.csv", "conventions.json", "conventions.md", "conventions.html")


class OutputError(ValueError):
    """The output folder cannot take the report (not a folder, not writable, a target that is not a regular
    file) or writing failed; ``str(err)`` is one line naming the path. Nothing of the old set was replaced."""


def validate_report(doc: dict[str, Any]) -> None:
    """Validate a report document against the committed JSON Schema.

    Raises
    ------
    jsonschema.ValidationError
        When the document breaks the contract.
    """
    import json
    from importlib import resources

    import jsonschema

    schema = json.loads(resources.files("kinkcheck").joinpath("schemas/conventions.v1.json").read_text())
    jsonschema.validate(doc, schema)


def check_output(out: str | Path) -> None:
    """Refuse an output folder the report cannot be written into, before anything is rendered or written.

    ``out`` must be a folder or creatable as one (its nearest existing ancestor a writable folder), and each
    of :data:`FILES` in it absent or a regular file. Writability is tried, not inferred from permission
    bits (root passes ``os.access`` on ``/proc``): a temporary file (or folder, when ``out`` does not exist
    yet) is created and removed at once.

    Raises
    ------
    OutputError
        ``/dev/null``, a path under a regular file, ``/proc/...``, a read-only folder, or a target that is a
        folder, a device or a dangling link.
    """
    if not str(out).strip():  # Path("") is the current folder: an empty --out is a slip, not a choice
        raise OutputError("--out is empty: name the report folder, e.g. reports/")
    out = Path(out)
    base = out
    try:
        while not os.path.lexists(base) and base != base.parent:
            base = base.parent
        if not base.is_dir():
            raise OutputError(f"--out {out}: {base} is not a folder" if base != out else f"--out {out}: not a folder")
        for name in FILES:
            target = out / name
            if os.path.lexists(target) and not target.is_file():
                raise OutputError(f"--out {out}: {target} exists and is not a regular file")
        if base == out:
            fd, probe = tempfile.mkstemp(prefix=".conventions.", suffix=".tmp", dir=out)
            os.close(fd)
            os.unlink(probe)
        else:
            os.rmdir(tempfile.mkdtemp(prefix=".conventions.", suffix=".tmp", dir=base))
    except OSError as err:
        raise OutputError(f"--out {out}: cannot write in {base} ({err.strerror or err})") from None


def write_reports(shards: Sequence[dict[str, Any]], catalog: Catalog, out: Path, gaps: Sequence[str] = ()) -> list[Path]:
    """Render ``conventions.json``, ``.md``, ``.csv`` and ``.html`` into ``out`` as a set; return their paths.

    The output folder is checked first (:func:`check_output`), then everything is rendered in memory,
    written to temporary files beside the targets and renamed into place (see the module docstring).
    ``doc["provenance"]["csv_sha256"]`` is set to the CSV's digest before the JSON is written.

    Raises
    ------
    OutputError
        The folder is refused, or writing fails (disk full, the folder changed meanwhile); the temporary
        files are removed, and unless a rename had already happened the old set is untouched.
    """
    from kinkcheck.report.build import build
    from kinkcheck.report.csvfile import render_csv
    from kinkcheck.report.html import render_html
    from kinkcheck.report.markdown import render_markdown
    from kinkcheck.shards import json_text

    out = Path(out)
    check_output(out)
    doc = build(shards, catalog, gaps)  # conformance to the schema is checked by the tests, not per render (9 s)
    texts = {"conventions.csv": render_csv(doc)}
    doc["provenance"]["csv_sha256"] = _sha256(texts["conventions.csv"])
    texts["conventions.json"] = json_text(doc, compact=True)  # about 100 000 observations: one a line
    digest = _sha256(texts["conventions.json"])
    texts["conventions.md"] = render_markdown(doc, json_sha256=digest)
    texts["conventions.html"] = render_html(doc, catalog, json_sha256=digest)
    _replace_set(out, texts)
    return [out / name for name in ("conventions.json", "conventions.md", "conventions.csv", "conventions.html")]


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _replace_set(out: Path, texts: dict[str, str]) -> None:
    """Write every text to a temporary file in ``out``, then rename them all over the targets."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        for stale in out.glob(".conventions.*.tmp"):  # left by a run killed before its renames
            if stale.is_file() and not stale.is_symlink():
                stale.unlink(missing_ok=True)
    except OSError as err:
        raise OutputError(f"--out {out}: {err.strerror or err}") from None
    temps: dict[str, str] = {}
    done = 0
    try:
        for name in FILES:
            fd, temps[name] = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=out)
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
                fh.write(texts[name])
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(temps[name], 0o644)  # mkstemp makes 0600; reports are public records
        for name in FILES:
            os.replace(temps[name], out / name)
            del temps[name]
            done += 1
    except OSError as err:
        kept = "the previous report files are untouched" if done == 0 else \
            f"{done} of {len(FILES)} files were replaced: run it again"
        raise OutputError(f"--out {out}: writing the report failed ({err.strerror or err}); {kept}") from None
    finally:
        for tmp in temps.values():
            Path(tmp).unlink(missing_ok=True)
    try:  # make the renames durable; not every file system lets a folder be opened or synced
        fd = os.open(out, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass


def set_problems(out: str | Path) -> list[str]:
    """What makes the report files in ``out`` not one set (empty when they are): a missing file, a CSV
    whose SHA-256 is not the JSON's ``provenance.csv_sha256``, a Markdown or HTML that does not name the
    JSON's SHA-256."""
    import json

    out = Path(out)
    try:
        raw = {name: (out / name).read_bytes() for name in FILES}
    except OSError as err:
        return [f"{err.filename}: {err.strerror}"]
    problems = []
    try:
        recorded = json.loads(raw["conventions.json"])["provenance"].get("csv_sha256")
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return [f"{out / 'conventions.json'}: not a kinkcheck report"]
    if recorded != hashlib.sha256(raw["conventions.csv"]).hexdigest():
        problems.append(f"{out / 'conventions.csv'} is not the CSV of {out / 'conventions.json'}")
    digest = hashlib.sha256(raw["conventions.json"]).hexdigest()
    for name in ("conventions.md", "conventions.html"):
        named = re.findall(rb"\b[0-9a-f]{64}\b", raw[name])
        if digest.encode() not in named:
            problems.append(f"{out / name} does not belong to {out / 'conventions.json'} (it names no sha256 "
                            f"{digest[:12]}…)")
    return problems
