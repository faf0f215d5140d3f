"""Write the report's JSON Schema, generated from the typed model (:func:`kinkcheck.report.model.json_schema`):

    python -m kinkcheck.report.schema

rewrites ``src/kinkcheck/schemas/conventions.v2.json`` (``--check`` only says whether it is current: exit 1
when not). The tests check the committed file is current.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from kinkcheck.report.model import json_schema

__all__ = ["SCHEMA_FILE", "schema_text"]

#: The committed schema, inside the package.
SCHEMA_FILE = Path(__file__).resolve().parent.parent / "schemas" / "conventions.v2.json"


def schema_text() -> str:
    """The schema file's text: one-space indented JSON, UTF-8, ending in a newline."""
    return json.dumps(json_schema(), indent=1, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Rewrite :data:`SCHEMA_FILE` (or, with ``--check``, return 1 when it is not current)."""
    args = sys.argv[1:] if argv is None else argv
    current = SCHEMA_FILE.read_text(encoding="utf-8") == schema_text() if SCHEMA_FILE.exists() else False
    if "--check" in args:
        print(f"{SCHEMA_FILE}: {'current' if current else 'stale: run python -m kinkcheck.report.schema'}")
        return 0 if current else 1
    if not current:
        SCHEMA_FILE.write_text(schema_text(), encoding="utf-8")
    print(f"{SCHEMA_FILE}: {'unchanged' if current else 'written'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
