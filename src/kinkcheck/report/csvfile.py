"""``reports/conventions.csv``: one row per observation of the report, for spreadsheets and pandas.

Columns (:data:`COLUMNS`): the observation's fields, plus ``framework_version`` and ``device`` of its
environment and ``label`` (the first label, the one the Markdown shows). ``value`` and ``input`` are JSON
(``{"x": 0.0}``, non-finite numbers as the strings ``"nan"``, ``"inf"``, ``"-inf"`` as in the JSON report);
``labels`` are separated by ``;``; an empty field is null. :func:`read_observations` turns the file back
into the report's observation dicts, exactly (``pandas.read_csv`` reads it as is).
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

__all__ = ["COLUMNS", "render_csv", "read_observations"]

COLUMNS: tuple[str, ...] = (
    "case", "program", "framework", "framework_version", "device", "environment", "mode", "dtype", "status",
    "value", "label", "labels", "conformance", "error", "input",
)


def render_csv(doc: dict[str, Any]) -> str:
    """The CSV text of ``doc["observations"]`` (report order, ``\\n`` line ends, deterministic)."""
    env = {e["id"]: e for e in doc["environments"]}
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    dumps = json.JSONEncoder(separators=(",", ":")).encode
    for o in doc["observations"]:
        e = env[o["environment"]]
        value, inp = o["value"], o.get("input")
        w.writerow((o["case"], o["program"], o["framework"], e["framework_version"], e["device"], o["environment"],
                    o["mode"], o["dtype"], o["status"], "" if value is None else dumps(value), o["labels"][0],
                    ";".join(o["labels"]), o.get("conformance") or "", o["error"] or "",
                    "" if inp is None else dumps(inp)))
    return buf.getvalue()


def read_observations(path: str | Path) -> list[dict[str, Any]]:
    """Observation dicts as in ``conventions.json`` from a CSV written by :func:`render_csv`.

    Raises
    ------
    ValueError
        The header is not :data:`COLUMNS` or a JSON field does not parse.
    """
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        if tuple(reader.fieldnames or ()) != COLUMNS:
            raise ValueError(f"{path}: not a kinkcheck observations CSV (columns {reader.fieldnames})")
        out = []
        for row in reader:
            o: dict[str, Any] = {}
            for k in ("case", "program", "framework", "environment", "mode", "dtype", "status"):
                o[k] = row[k]
            o["value"] = json.loads(row["value"]) if row["value"] else None
            o["labels"] = row["labels"].split(";")
            o["error"] = row["error"] or None
            if row["conformance"]:
                o["conformance"] = row["conformance"]
            if row["input"]:
                o["input"] = json.loads(row["input"])
            out.append(o)
    return out
