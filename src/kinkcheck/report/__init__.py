"""The report: shards + oracles → ``reports/conventions.md``, ``.json``, ``.csv`` and ``.html``.

:func:`write_reports` builds the document (:mod:`kinkcheck.report.build`) and writes every file
atomically, so an interrupted run leaves the previous reports whole. :func:`validate_report` checks a
document against ``schemas/conventions.v1.json`` (the tests run it on the committed report).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kinkcheck.catalog import Catalog

__all__ = ["write_reports", "validate_report"]


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


def write_reports(shards: Sequence[dict[str, Any]], catalog: Catalog, out: Path, gaps: Sequence[str] = ()) -> list[Path]:
    """Render ``conventions.json``, ``.md``, ``.csv`` and ``.html`` into ``out``; return the paths written."""
    from kinkcheck.report.build import build
    from kinkcheck.report.csvfile import render_csv
    from kinkcheck.report.html import render_html
    from kinkcheck.report.markdown import render_markdown
    from kinkcheck.shards import write_json_atomic, write_text_atomic

    doc = build(shards, catalog, gaps)  # conformance to the schema is checked by the tests, not per render (9 s)
    out.mkdir(parents=True, exist_ok=True)
    md = render_markdown(doc)
    json_path, md_path, csv_path = out / "conventions.json", out / "conventions.md", out / "conventions.csv"
    write_json_atomic(json_path, doc, compact=True)  # about 100 000 observations: no indentation
    write_text_atomic(md_path, md)
    write_text_atomic(csv_path, render_csv(doc))
    html_path = out / "conventions.html"
    write_text_atomic(html_path, render_html(doc, catalog))
    return [json_path, md_path, csv_path, html_path]

