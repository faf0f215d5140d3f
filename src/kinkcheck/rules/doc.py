"""The rules file's name, schema and reader (``rules.json.gz``, :mod:`kinkcheck.rules.store` writes it): standard
library only, so the pages and the site read it without the rules' machinery."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

__all__ = ["FILE", "SCHEMA", "RulesUnreadable", "load"]

FILE = "rules.json.gz"
SCHEMA = "kinkcheck/rules/v1"


class RulesUnreadable(ValueError):
    """``rules.json.gz`` is missing, damaged or of another schema; ``str(err)`` is one line."""


def load(path: str | Path) -> dict[str, Any]:
    """The rules file as a dict (raises :class:`RulesUnreadable`)."""
    p = Path(path)
    try:
        doc = json.loads(gzip.decompress(p.read_bytes()))
    except FileNotFoundError:
        raise RulesUnreadable(f"{p}: no rules file (render the report with this kinkcheck: kinkcheck report)") from None
    except (OSError, EOFError, ValueError) as err:
        raise RulesUnreadable(f"{p}: not a readable rules file ({type(err).__name__}: {err})") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise RulesUnreadable(f"{p}: not a {SCHEMA} file")
    return doc
