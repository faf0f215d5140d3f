"""The rules file's name, schema and reader (``rules.json.gz``, :mod:`kinkcheck.rules.store` writes it): standard
library only, so the pages and the site read it without the rules' machinery."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

__all__ = ["FILE", "LABELS", "SCHEMA", "RulesUnreadable", "load"]

FILE = "rules.json.gz"
SCHEMA = "kinkcheck/rules/v1"
#: Rule labels, in the order a rule lists the labels its evidence does not tell apart.
LABELS: tuple[str, ...] = ("left", "right", "left-piece", "right-piece", "piece-at-point", "first", "last",
                           "split-even", "every-tied", "min-norm", "mean", "zero", "nan")


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
    problem = _problem(doc)
    if problem:
        raise RulesUnreadable(f"{p}: a malformed {SCHEMA} file ({problem})")
    return doc


_RULE_KEYS = ("framework", "operation", "kind", "family", "programs", "labels", "counterexamples")


def _problem(doc: dict[str, Any]) -> str | None:
    """What is wrong with the document's structure (None: what the readers index is there)."""
    for key, kind in (("cells", list), ("environments", dict), ("rules", list), ("validation", dict)):
        if not isinstance(doc.get(key), kind):
            return f"no {key} {kind.__name__}"
    n = len(doc["cells"])
    if any(not (isinstance(c, list) and len(c) == 3 and all(isinstance(x, str) for x in c)) for c in doc["cells"]):
        return "a cell is not [environment, mode, dtype]"
    labels = doc.get("labels")
    if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
        return "no labels list"
    known = set(labels) | {"-"}
    for i, r in enumerate(doc["rules"]):
        if not isinstance(r, dict) or any(k not in r for k in _RULE_KEYS):
            return f"rule {i} lacks one of {', '.join(_RULE_KEYS)}"
        if not all(isinstance(r[k], str) and r[k] for k in ("framework", "operation", "kind")) or \
                not isinstance(r["family"], str):
            return f"rule {i}'s framework, operation, kind or family is not a name"
        if not isinstance(r["programs"], list) or any(
                not (isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p)) for p in r["programs"]):
            return f"rule {i}'s programs are not [case, program] pairs"
        if isinstance(r["labels"], dict) and any(not isinstance(k, str) or not set(k.split()) <= known
                                                 for k in r["labels"]):
            return f"rule {i} names a label that is none of the file's labels"
        if not isinstance(r["labels"], dict) or any(
                not isinstance(v, list) or any(not isinstance(j, int) or not 0 <= j < n for j in v)
                for v in r["labels"].values()):
            return f"rule {i} names a cell that is not there"
        if not isinstance(r["counterexamples"], list) or any(
                not isinstance(c, list) or len(c) != 4 or not isinstance(c[0], int) or not 0 <= c[0] < n
                for c in r["counterexamples"]):
            return f"rule {i} has a malformed counter-example"
    for env, e in doc["environments"].items():
        if not isinstance(e, dict) or not all(isinstance(e.get(k), str) for k in ("framework", "version", "device")):
            return f"environment {env} lacks framework, version or device"
    return None
