"""The report's cells of a program, as the faces ask for them: the report read for a program in any spelling of the
catalog's (or for some frameworks), the case's program a spelling names, the case a program is stated at when none
is named (:func:`principal_case`), a mode or dtype no framework has. ``cite``, ``migrate`` and ``ask`` read the
report through here, not through one another.
"""

from __future__ import annotations

import math
import os
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

from kinkcheck.language import expr as ex
from kinkcheck.report.dataset import DatasetError, table_index
from kinkcheck.report.model import Case, Report, ReportError, report_path
from kinkcheck.report.model import load_report as load
from kinkcheck.report.query import DATA_ENV
from kinkcheck.shards.validate import _no_gc
from kinkcheck.vocabulary import DIFFERENTIABLE, DTYPES, FRAMEWORK_MODES, MODES, flatten

__all__ = ["CellError", "cells_of", "check_cell", "load_report_for", "principal_case", "program_in_case",
           "stated_case"]


class CellError(ValueError):
    """The report cannot be read, or the program, case or environment is not in it (one-line reason)."""


def load_report_for(path: str | Path, program: str | None = None, frameworks: Collection[str] | None = None, *,
                    one_cell: bool = False, case: str | None = None, framework: str | None = None,
                    mode: str = "reverse", dtype: str = "float64") -> Report:
    """The report at ``path``, decoded and checked (:func:`kinkcheck.report.model.load_report`); with
    ``program``, only the observations of the catalog programs it spells (the report's index then takes the
    modes each environment measured from the Parquet file's index, so the anchors are those of the full report),
    and with ``one_cell`` only those of the case :func:`kinkcheck.answers.cite.cite` states for ``program``, ``case`` and
    ``framework``, in ``mode`` and ``dtype`` (that case's row groups alone, a run of rows per release:
    ``kinkcheck cite``; a report without a table index of modes is read for the program whole); with ``frameworks``, only those frameworks'
    programs (what ``kinkcheck migrate`` compares). Either way the derived sections are left out.

    Raises
    ------
    CellError
        The file is missing, not a regular file, unreadable, not JSON or too deeply nested, not a
        ``kinkcheck/conventions/v2`` report (a v1 report is refused: re-render it), or a report with missing,
        mistyped or dangling parts (the first one named, e.g. a hand-made or truncated report).
    """
    def spelled(report: Report) -> list[str]:
        return sorted({pid for c in report.cases if (pid := program_in_case(program or "", c)) is not None})

    def cell_programs(report: Report) -> list[str]:  # the programs cite may state: the framework's spelling
        return sorted({pid for _, pid, _ in cells_of(report, program or "", framework)})

    index: dict[str, Any] = {}  # the table's modes per environment, read once

    def table_modes(report: Report) -> Any:
        if "modes" not in index:

            try:
                with _no_gc():  # the index of every environment's modes: many objects, no cycle
                    index["modes"] = table_index(report_path(path).parent / str(report.observations_file)).get("modes")
            except DatasetError as err:
                raise CellError(str(err)) from None
        return index["modes"]

    def stated(report: Report) -> dict[str, list[str]] | None:  # the cell cite states; no row when it will refuse
        if report.observations_file is None or table_modes(report) is None:
            return None  # the releases and anchors then come from the rows: read the program's, every cell
        chosen = stated_case(cells_of(report, program or "", framework), case)
        index["cell"] = (chosen, mode, dtype)
        return {"case": [] if chosen is None else [chosen], "mode": [mode], "dtype": [dtype]}

    def of_frameworks(report: Report) -> list[str]:
        return sorted({q.program for c in report.cases for q in c.programs if q.framework in (frameworks or ())})

    folder = os.environ.get(DATA_ENV)
    if folder and Path(path).parent == Path(folder):
        missing = f"no report in {folder} (${DATA_ENV}: a folder holding conventions.json.gz and observations.parquet)"
    else:
        missing = (f"no report at {report_path(path)} (--report takes a report folder or its conventions.json.gz; "
                   "a clone renders one with `nox -s render`)")
    try:
        report = load(path, missing=missing,
                      select=(cell_programs if one_cell else spelled) if program is not None
                      else of_frameworks if frameworks is not None else None,
                      where=stated if program is not None and one_cell else None)
    except ReportError as err:
        raise CellError(str(err)) from None
    if frameworks is not None and program is None:  # another framework's program of the same text: not asked for
        report.observations = [o for o in report.observations if o.framework in frameworks]
    if program is not None and report.observations_file is not None:
        modes = table_modes(report)
        if modes is not None:
            report.index.env_modes = modes
    if "cell" in index:  # not a field: cite() refuses a cell this report was not read for
        report.read_for_cell = index["cell"]
    return report


def check_cell(framework: str | None, mode: str, dtype: str) -> None:
    """Raises CellError for a dtype or mode no framework (or not ``framework``) has (the vocabulary's names, as the
    adapters check them: :func:`kinkcheck.frameworks.base.check_dtype`)."""
    if dtype not in DTYPES:
        raise CellError(f"unknown dtype {dtype!r} (known: {', '.join(DTYPES)})")
    if mode not in MODES:
        raise CellError(f"unknown mode {mode!r} (known: {', '.join(MODES)})")
    if framework is not None and mode not in FRAMEWORK_MODES.get(framework, (mode,)):
        raise CellError(f"{framework} has no {mode} mode (its modes: {', '.join(FRAMEWORK_MODES[framework])})")


def program_in_case(program: str, case: Case, framework: str | None = None) -> str | None:
    """The case's program id that ``program`` spells (:func:`kinkcheck.language.expr.same_program`: aliases, spacing, the
    spelling of numbers, positional or keyword arguments), the closest spelling first, or None; among
    ``framework``'s programs when given (``x.clamp(min=0.0)`` is MindSpore's own text and torch's ``x.clamp(min=0)``).
    Kept per case object: :func:`load_report_for` and :func:`kinkcheck.answers.cite.cite` ask the same questions of one
    report."""
    key = (program, framework, id(case))
    hit = _MATCHED.get(key)
    if hit is not None and hit[0] is case:
        return hit[1]
    spelled = ex.same_program(program, [p.program for p in case.programs
                                        if framework is None or p.framework == framework], case.at.keys())
    if len(_MATCHED) >= 4096:
        _MATCHED.clear()
    _MATCHED[key] = (case, spelled[0] if spelled else None)
    return _MATCHED[key][1]


#: (program, framework, id of a case) → (the case, :func:`program_in_case`' answer): the case kept, so its id is
#: its own.
_MATCHED: dict[tuple[str, str | None, int], tuple[Case, str | None]] = {}


def cells_of(report: Report, program: str, framework: str | None) -> list[tuple[Case, str, str]]:
    """(case, program id, framework) of every case holding a program ``program`` spells: the closest spelling in
    the whole case (torch's exact ``x.clamp(min=0)`` over MindSpore's), or the closest one ``framework`` holds."""
    if framework is None:
        return [(c, pid, p.framework) for c in report.cases if (pid := program_in_case(program, c)) is not None
                for p in c.programs if p.program == pid]
    return [(c, pid, framework) for c in report.cases if (pid := program_in_case(program, c, framework)) is not None]


def stated_case(cells: Sequence[tuple[Case, str, str]], case: str | None) -> str | None:
    """The id of the case :func:`kinkcheck.answers.cite.cite` states among ``cells``: ``case`` when given and held, else the
    principal case (:func:`principal_case`); None when there is none."""
    if case is not None:
        return case if any(c.id == case for c, _, _ in cells) else None
    return principal_case(list({c.id: c for c, _, _ in cells}.values())).id if cells else None


#: The smallest positive normal float32; a nonzero coordinate below it makes a case a floating-point edge.
_TINY = 2.0 ** -126


def _ordinary_kink(case: Case) -> bool:
    """Whether a case is the function's kink at ordinary numbers: the sympy oracle finds it non-differentiable
    (kind kink, jump, undefined, ...) and no coordinate is a negative zero or a float32 subnormal."""
    xs = [float(x) for v in case.at.values() for x in flatten(v)]
    edge = any((x == 0 and math.copysign(1.0, x) < 0) or 0 < abs(x) < _TINY for x in xs)
    return case.oracle.kind != DIFFERENTIABLE and not edge


def principal_case(cases: Sequence[Case]) -> Case:
    """The case ``kinkcheck cite`` states when none is named, among the cases that measure one program.

    The rule: the first case, in catalog order, whose point is the function's kink at ordinary numbers —
    one where the sympy oracle (``case.oracle.kind``) finds the function not differentiable, held without a
    negative zero or a float32 subnormal (cases such as ``relu@-0.0``, ``relu@1e-45`` or ``maximum@-0.0``
    probe a floating-point edge of a kink that another case states plainly). When no case qualifies, the
    first case in catalog order. So ``torch.relu(x)`` → ``relu@0``, ``torch.maximum(x, y)`` →
    ``maximum@tie``, ``torch.abs(x)`` → ``abs@0``, ``torch.clamp(x, -1, 1)`` → ``clamp@-1``.

    Raises
    ------
    ValueError
        ``cases`` is empty.
    """
    if not cases:
        raise ValueError("no case to choose from")
    return next((c for c in cases if _ordinary_kink(c)), cases[0])
