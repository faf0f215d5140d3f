"""What the report holds at the point of a ``kinkcheck grad`` call: the program's own row, the case's other
programs per framework over the ranges of releases that return each value, and the rule of a parameter read
from the cases measured with other arguments."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kinkcheck.answers.explain.judgement import _key, _same_point
from kinkcheck.platforms import DEFAULT
from kinkcheck.report.query import DATA_ENV, DatasetError, calls_of, decode_cell, read_table


class ReportUnavailable(Exception):
    """No report to read (missing or invalid file): ``str(err)`` says why, in one line."""


class ReportDamaged(ReportUnavailable):
    """The report's table is there but cannot be used (damaged, not kinkcheck's, or not one render with the report
    beside it: :func:`kinkcheck.report.query.table_metadata`): ``grad`` stops with this line (exit 2) even when the report
    was not named, where a missing report is only said beside the value."""


def _report_key(path: Path) -> str:
    from kinkcheck.report.model import SCHEMA_ID  # slow: numpy

    st = path.stat()  # the schema id too: a cache of a file read under an older model is not reused
    return _key(SCHEMA_ID, str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ino)


def report_index(path: str | Path) -> dict[str, Any]:
    """The report's cases and measured releases, small: ``{"key", "path", "table", "cases": [{id, sympy, at, tie,
    programs: [[framework, program], …]}], "releases": {framework: {place: [version, …] oldest first}}}``, read
    from the metadata of ``observations.parquet`` beside the report (the model's dataset; nothing of the JSON is
    read): :func:`report_rows` then reads the rows of the cases it shows, and nothing else.

    Raises
    ------
    ReportUnavailable
        The file is missing, unreadable or not a kinkcheck report (:func:`kinkcheck.report.model.load_report`),
        or has no ``observations.parquet`` beside it (every ``kinkcheck report`` writes one).
    """
    from kinkcheck.report.model import ReportError, load_report, report_path  # slow: numpy

    p = report_path(path)  # reports/conventions.json, or the .gz a clone has
    if not p.is_file():
        env = os.environ.get(DATA_ENV)
        named = f" (${DATA_ENV})" if env and Path(path).parent == Path(env) else ""
        raise ReportUnavailable(f"no report at {path}{named}" if not p.exists() else f"{p}: not a regular file")
    table = p.with_name("observations.parquet")
    if table.is_file():  # written with the report: its cases and releases, then only the rows asked for
        return _table_index(p, table)
    try:  # why it cannot be read, when it cannot: another schema, an older model
        load_report(p, select=lambda report: ())
    except ReportError as err:
        raise ReportUnavailable(str(err)) from None
    raise ReportUnavailable(f"{p}: no observations.parquet beside it (`kinkcheck report` writes the two together; "
                            "re-render it)")


def _table_index(report: Path, table: Path) -> dict[str, Any]:
    """:func:`report_index` from the ``observations.parquet`` written beside the report (its ``kinkcheck.index``
    metadata).

    Raises
    ------
    ReportUnavailable
        The table is not kinkcheck's, or has no index (written before it had one: re-render).
    """
    from kinkcheck.report.dataset import DatasetError, table_index  # slow: numpy; the model's one reader of the table

    try:
        index = table_index(table)
    except DatasetError as err:  # the message names the table
        raise ReportDamaged(f"{err} (the table written beside {report.name})") from None
    return {"key": _report_key(table), "path": str(report), "table": str(table), "cases": index["cases"],
            "releases": index["releases"]}


def _table_cells(index: Mapping[str, Any], case_ids: Sequence[str], mode: str, dtype: str,
                 device: str) -> dict[str, dict[str, dict[str, Any]]]:
    """The cells of ``case_ids`` in one mode, dtype and place from the table, as :func:`report_index`'s cache
    holds them: ``"case\tframework\tprogram"`` → release → ``{status, value, label, labels, error}``."""
    if not case_ids:  # no report case at this point: nothing to read
        return {}
    dev, _, tag = device.partition("-")
    cells: dict[str, dict[str, dict[str, Any]]] = {}
    try:
        table = read_table(index["table"], filters=[("case", "in", list(case_ids)), ("mode", "==", mode),
                                                   ("dtype", "==", dtype), ("device", "==", dev),
                                                   ("platform_tag", "==", tag or DEFAULT)],
                           columns=["case", "framework", "program", "framework_version", "status", "value", "label",
                                    "labels", "error"])
        for r in table.to_pylist():
            cells.setdefault(f"{r['case']}\t{r['framework']}\t{r['program']}", {})[r["framework_version"]] = {
                "status": r["status"], "value": decode_cell(r["value"], index["table"]),
                "label": r["label"], "labels": list(r["labels"] or []), "error": r["error"]}
    except DatasetError as err:  # a bad data page, a cell that is not JSON: the message names the table
        raise ReportDamaged(str(err)) from None
    return cells


@dataclass(frozen=True)
class ReportView:
    """What the report says at the point.

    Attributes
    ----------
    path : str
    problem : str or None
        Why there is nothing to show (``"no report at reports/conventions.json"``), else None.
    cases : tuple of str
        The report cases shown (same function and point as the program).
    rows : list of dict
        One per (case, framework, program): ``{"case", "framework", "program", "this": bool, "ranges":
        [{"from", "to", "releases", "status", "value", "label"}]}`` — consecutive measured releases with the
        same answer in one range, oldest first; the program's own rows first.
    elsewhere : tuple of str
        Other report cases that measure this program (at other points).
    mode, dtype, device : str
    same_operation : tuple of str
        When the program is measured at no case of this point but a program calling the same operations with
        other arguments is (ELU with ``alpha=14.5``; the catalog has 1 and 2): those operations, and ``rows``
        and ``cases`` are those programs' (the closest measured cases); else empty.
    other_points : bool
        Those cases are at other points (the point asked is a kink and no case at it calls the operations).
    """

    path: str
    problem: str | None = None
    cases: tuple[str, ...] = ()
    rows: list[dict[str, Any]] = field(default_factory=list)
    elsewhere: tuple[str, ...] = ()
    mode: str = "reverse"
    dtype: str = "float64"
    device: str = "cpu"
    same_operation: tuple[str, ...] = ()
    other_points: bool = False

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["cases"], d["elsewhere"] = list(self.cases), list(self.elsewhere)
        d["same_operation"] = list(self.same_operation)
        return d


def report_rows(index: Mapping[str, Any], program: str, framework: str, case_ids: Sequence[str], *,
                mode: str = "reverse", dtype: str = "float64", device: str = "cpu",
                at: Mapping[str, Any] | None = None, kink: bool = False) -> ReportView:
    """The report's cells of ``case_ids`` in one mode, dtype and device, per program over release ranges.

    When ``case_ids`` holds nothing of the report (the function with these arguments is not in the catalog:
    ``torch.nn.functional.elu(x, alpha=14.5)``) and ``at`` is given, the closest measured cases instead: the
    cases at that point with a program of ``framework`` calling the same operations (ELU with ``alpha=1`` and
    ``alpha=2``), those programs' rows only (:attr:`ReportView.same_operation`).

    Parameters
    ----------
    index : dict
        :func:`report_index`.
    program, framework : str
        The program asked about (canonical text): its rows come first and carry ``"this": True``.
    case_ids : sequence of str
        Cases with the same function and point (:attr:`Judgement.cases`).
    at : mapping, optional
        The point asked about.
    kink : bool
        The oracle finds a kink or a jump at ``at``: where no case at this point calls the same operations, the
        cases that do at another point are the closest (hardtanh with bounds -2 and 2 at 2: the bound is where
        the catalog measured hardtanh, at 1 and at 0.7); away from a kink only the same point is close.
    """
    view = _rows_of(index, program, framework, case_ids, mode, dtype, device)
    if view.rows or at is None:
        return view

    ops = calls_of(program)
    if not ops:
        return view
    near = {c["id"]: {prog for fw, prog in c["programs"] if fw == framework and calls_of(prog) == ops}
            for c in index["cases"] if _same_point(c["at"], at)}
    near = {cid: progs for cid, progs in near.items() if progs}
    other_points = not near and kink
    if other_points:
        near = {c["id"]: {prog for fw, prog in c["programs"] if fw == framework and calls_of(prog) == ops}
                for c in index["cases"]}
        near = {cid: progs for cid, progs in near.items() if progs}
    if not near:
        return view
    other = _rows_of(index, program, framework, list(near), mode, dtype, device)
    rows = [r for r in other.rows if r["framework"] == framework and r["program"] in near[r["case"]]]
    return ReportView(view.path, None, tuple(near), rows, view.elsewhere, mode, dtype, device, tuple(sorted(ops)),
                      other_points)


#: Labels a convention that is a rule of a parameter can name (most specific first), with the words ``grad``
#: prints for them.
RULE_LABELS: dict[str, str] = {
    "left": "the left one-sided derivative", "right": "the right one-sided derivative",
    "left-piece": "the left piece's slope", "right-piece": "the right piece's slope",
    "first": "the whole tie to the first tied input", "last": "the whole tie to the last tied input",
    "split-even": "the tie split evenly", "min-norm": "the minimum-norm element of the Clarke set",
    "mean": "the midpoint of the Clarke set",
}


def parameter_rule(view: ReportView) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """The rule the closest measured cases follow (:attr:`ReportView.same_operation`): the labels of
    :data:`RULE_LABELS` that every measured release of every such case carries where it is a kink (PyTorch's ELU:
    ``left``, which is ``alpha``; leaky_relu at slopes 0.01 and 0.2: ``left`` and ``min-norm``, which the cases
    cannot tell apart), most specific first, and those cases; None with fewer than two such cases, an error
    range, or no label in common.

    A case where the function is differentiable (``derivative``) agrees with any rule and is left out."""
    if not view.same_operation:
        return None
    kinks: dict[str, list[set[str]]] = {}
    for r in view.rows:
        for g in r["ranges"]:
            if g["status"] != "ok":
                return None
            labels = set(g.get("labels") or [g["label"]])
            if "derivative" not in labels:
                kinks.setdefault(r["case"], []).append(labels)
    if len(kinks) < 2:
        return None
    common = set.intersection(*(s for sets in kinks.values() for s in sets))
    rule = tuple(lab for lab in RULE_LABELS if lab in common)
    return (rule, tuple(kinks)) if rule else None


def _rows_of(index: Mapping[str, Any], program: str, framework: str, case_ids: Sequence[str], mode: str,
             dtype: str, device: str) -> ReportView:
    cells = _table_cells(index, case_ids, mode, dtype, device)
    rows: list[dict[str, Any]] = []
    shown: set[str] = set()
    for case in index["cases"]:
        if case["id"] not in case_ids:
            continue
        for fw, prog in case["programs"]:
            measured = cells.get(f"{case['id']}\t{fw}\t{prog}", {})
            versions = index["releases"].get(fw, {}).get(device, [])
            ranges = _ranges(versions, measured)
            key = json.dumps([fw, prog, ranges], sort_keys=True)
            if key in shown:  # one program in two cases of the same function: one row when it measured alike
                continue
            shown.add(key)
            rows.append({"case": case["id"], "framework": fw, "program": prog,
                         "this": fw == framework and prog == program, "ranges": ranges})
    order = {fw: i for i, fw in enumerate([framework, *sorted({r["framework"] for r in rows} - {framework})])}
    rows.sort(key=lambda r: (not r["this"], order[r["framework"]]))  # stable: the case's program order within
    elsewhere = tuple(c["id"] for c in index["cases"] if c["id"] not in case_ids
                      and [framework, program] in c["programs"])
    return ReportView(index["path"], None, tuple(case_ids), rows, elsewhere, mode, dtype, device)


def _ranges(versions: Sequence[str], measured: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    prev: tuple[Any, ...] | None = None
    for v in versions:
        cell = measured.get(v)
        if cell is None:  # not measured in this mode/dtype there: a gap between ranges
            prev = None
            continue
        sig = (cell["status"], json.dumps(cell["value"], sort_keys=True), cell["label"])
        if sig == prev:
            out[-1]["to"] = v
            out[-1]["releases"] += 1
        else:
            out.append({"from": v, "to": v, "releases": 1, "status": cell["status"], "value": cell["value"],
                        "label": cell["label"], "labels": cell.get("labels") or [cell["label"]],
                        "error": cell.get("error")})
        prev = sig
    return out
