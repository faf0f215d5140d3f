"""``reports/conventions.csv``: one row per observation of the report, for spreadsheets and pandas.

Columns (:data:`COLUMNS`): the observation's fields, plus ``framework_version`` and ``device`` of its
environment and ``label`` (the first label, the one the report shows). ``value`` and ``input`` are JSON
(``{"x": 0.0}``, non-finite numbers as the strings ``"nan"``, ``"inf"``, ``"-inf"`` as in the JSON report);
``labels`` are separated by ``;``; an empty field is null. :func:`read_observations` turns the file back
into the report's :class:`~kinkcheck.report.model.Observation` objects, exactly (``pandas.read_csv`` reads
it as is).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import msgspec

from kinkcheck.report.model import Observation, Report

__all__ = ["COLUMNS", "read_observations", "render_csv"]

COLUMNS: tuple[str, ...] = (
    "case", "program", "framework", "framework_version", "device", "environment", "mode", "dtype", "status",
    "value", "label", "labels", "conformance", "error", "input",
)


def render_csv(report: Report) -> str:
    """The CSV text of ``report.observations`` (report order, ``\\n`` line ends, deterministic)."""
    env = report.index.env
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    enc = msgspec.json.encode
    for o in report.observations:
        e = env[o.environment]
        w.writerow((o.case, o.program, o.framework, e.framework_version, e.device, o.environment, o.mode, o.dtype,
                    o.status, "" if o.value is None else enc(o.value).decode(), o.labels[0], ";".join(o.labels),
                    o.conformance or "", o.error or "", "" if o.input is None else enc(o.input).decode()))
    return buf.getvalue()


def read_observations(path: str | Path) -> list[Observation]:
    """The observations of a CSV written by :func:`render_csv`, as in the report.

    Raises
    ------
    ValueError
        The header is not :data:`COLUMNS`, a JSON field does not parse, or a field has the wrong type
        (``msgspec.ValidationError`` is a ValueError).
    """
    dec = msgspec.json.decode
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        if tuple(reader.fieldnames or ()) != COLUMNS:
            raise ValueError(f"{path}: not a kinkcheck observations CSV (columns {reader.fieldnames})")
        out = []
        for row in reader:
            out.append(msgspec.convert({
                "case": row["case"], "program": row["program"], "framework": row["framework"],
                "environment": row["environment"], "mode": row["mode"], "dtype": row["dtype"],
                "status": row["status"], "value": dec(row["value"]) if row["value"] else None,
                "labels": row["labels"].split(";"), "error": row["error"] or None,
                "conformance": row["conformance"] or None, "input": dec(row["input"]) if row["input"] else None,
            }, Observation))
    return out
