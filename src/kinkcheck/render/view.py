"""The report as the Markdown and HTML renderers show it: formatting, anchors, the label legend and colours,
and one :class:`CaseView` per case, built from a :class:`~kinkcheck.report.model.Report` and its index.

Formatting helpers (:func:`slug`, :func:`fmt_number`, :func:`fmt_value`, :func:`fmt_matrix`,
:func:`fmt_vector`, :data:`LABEL_HELP`, :data:`DTYPE_SHORT`) are shared with ``cite``, ``migrate``,
``check``, ``explain`` and the plots.

Read at a glance
----------------
A program's row in a case table says its value over the releases of a framework as runs of equal releases
(:func:`kinkcheck.report.model.value_runs`), one a line: ``1.13.1 – 2.13.0: 1 right``, ``2.14.1, 2.15.0: 0 left``. A
release's value is the float64 value (or the first dtype measured), followed by each other dtype whose status or
label differs, or whose value differs beyond that dtype's tolerance (``f16: error``); dtypes that agree with float64
are not repeated. Beside it a *strip*: one
square per release, coloured by the float64 value's first label (:data:`LABEL_MARK`: an emoji in Markdown,
which has no colour, a CSS colour in HTML; one hue per family of labels, one shape or shade per label), the
way caniuse and compat tables show support across versions.

Anchors (stable; ``kinkcheck cite`` links to them)
--------------------------------------------------
``case-<slug>`` a case, ``case-<slug>--<framework>-<slug of program>`` a program row,
``<row>--<slug of environment id>`` the program in one release (its square of the strip),
``<row>--modes`` and ``<row>--modes--<slug of mode>`` the program in the modes table of the newest release,
``env-<slug of environment id>`` an environment, ``section-…`` a section of the index. Each case has its
own Markdown page, :func:`case_file` (``<slug of case id>.md``) beside ``cases/`` of the index.

Everything is built in one pass over the observations plus constant-time lookups in the report index;
:func:`report_view` caches the view per report, so the Markdown pages and the HTML share it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, NamedTuple

import msgspec

from kinkcheck.cache import cache_dir
from kinkcheck.language.anchors import slug
from kinkcheck.language.decimals import decimal_text
from kinkcheck.report.model import (DTYPES, LABELS, MODE_INFO, MODES, Case, ChangedIn, ConformanceRow, Environment,
                                    ModeRow, NetworkSummary, Observation, Oracle, P0Row, Report, differs,
                                    parts_by_reason, release_ranges, value_runs)
from kinkcheck.report.text import (CASES_DIR, DTYPE_SHORT, LABEL_HELP, LABEL_MARK, NO_OBSERVATION, ORACLE_KINDS,
                                   SECTION_PAGES, case_anchor, case_file, clarke_text, describe_observation,
                                   fmt_distinct, fmt_exact, fmt_matrix, fmt_number, fmt_value, fmt_vector,
                                   is_isa_comparison, mark, md_cell, mode_anchor, mode_page, oracle_finding,
                                   oracle_reason, release_anchor, row_anchor)
from kinkcheck.vocabulary import ORACLE_KIND_RECORDS

__all__ = [
    "CASES_DIR", "DTYPE_SHORT", "LABEL_HELP", "LABEL_MARK", "NO_OBSERVATION", "SECTION_PAGES", "CaseView", "Face", "ProgramRow", "ReportView",
    "ORACLE_KINDS", "case_anchor", "case_file", "clarke_text", "describe_observation", "fmt_exact", "fmt_matrix", "fmt_number", "fmt_value", "fmt_vector",
    "jinja_environment", "mark", "md_cell", "mode_anchor", "oracle_reason", "release_anchor", "report_view",
    "row_anchor", "slug",
]

# --------------------------------------------------------------------------- labels: help, marks, colours


# --------------------------------------------------------------------------- formatting


# --------------------------------------------------------------------------- one cell as shown


class Face(NamedTuple):
    """What a cell shows of one observation: ``status`` (ok, error, unavailable), ``value`` (:func:`fmt_value`
    text, ``""`` without a value) and ``label`` (first label; the status when not ok). Two dtypes whose faces
    are equal show as one."""

    status: str
    value: str
    label: str


@dataclass(slots=True)
class Cell:
    """One release (or mode) of a program: ``face`` of the first dtype measured (float64 when it is),
    ``others`` the (dtype, face) of each other dtype that differs (another status or first label, or a value
    beyond that dtype's tolerance, :func:`kinkcheck.oracles.classify.same_value`), and the observations behind it
    (first dtype first) for hover titles; ``face`` None when nothing was observed."""

    face: Face | None
    others: tuple[tuple[str, Face], ...] = ()
    obs: tuple[Observation, ...] = ()
    why: str | None = None  # face None: the reason the environment records for not measuring it, if any

    @property
    def key(self) -> tuple[Face | None, tuple[tuple[str, Face], ...]]:
        return self.face, self.others

    @property
    def label(self) -> str | None:
        return None if self.face is None else self.face.label


@dataclass(slots=True)
class Run:
    """Consecutive releases (of one device) where the program shows the same :class:`Cell`."""

    releases: str
    cell: Cell
    environments: list[Environment]


@dataclass(slots=True)
class Square:
    """One release in a strip: its environment, cell (for the label and hover text) and anchor; ``boundary``
    when its value differs from the release before it on the same device (a new range of the values column:
    the strip shows it even where the label, and so the colour, stays the same)."""

    env: Environment
    cell: Cell
    anchor: str
    boundary: bool = False

    @property
    def title(self) -> str:
        """Its hover text, unescaped: ``"2.13.0: 1 right"``, ``"2.0.1: error"``, ``"1.13.1: no observation"``."""
        face = self.cell.face
        none = self.cell.why or "no observation"
        what = none if face is None else (f"{face.value} {face.label}" if face.status == "ok" else face.status)
        return f"{self.env.title}: {what}"


@dataclass(slots=True)
class Verdict:
    """The program's conformance with its framework's rule over some releases (``releases`` empty: all)."""

    verdict: str
    releases: str
    predicted: list[list[Any]]


@dataclass(slots=True)
class ProgramRow:
    """A program of a case in one framework, reverse mode: runs per device, the strip, the rule's verdicts."""

    framework: str
    program: str
    anchor: str
    runs: list[tuple[str, list[Run]]]  # (device, runs over that device's releases)
    strip: list[Square]
    verdicts: list[Verdict]


@dataclass(slots=True)
class FrameworkTable:
    """A case's programs of one framework over its measured releases (``columns``, report order)."""

    framework: str
    columns: list[Environment]
    span: str  # "1.13.1 – 2.15.0"
    rows: list[ProgramRow]

    @property
    def newest(self) -> int:
        """The column of the newest release on CPU (Linux x86-64), the last column where there is none."""
        return max((i for i, e in enumerate(self.columns) if e.place == "cpu"), default=len(self.columns) - 1)


@dataclass(slots=True)
class ModeProgram:
    """A program's row in a :class:`ModeTable`: one cell per mode."""

    program: str
    anchor: str  # <row>--modes
    cells: list[Cell]


@dataclass(slots=True)
class ModeTable:
    """The modes of the newest release (of one framework) that measured more than one mode."""

    framework: str
    env: Environment
    modes: list[str]
    rows: list[ModeProgram]


@dataclass(slots=True)
class Problem:
    """Error or unavailable observations of one program, status and message, over dtypes and releases; ``mode``
    names every mode that failed alike (``"reverse, jit"``)."""

    framework: str
    program: str
    mode: str
    status: str
    error: str
    dtypes: list[str]
    environments: list[str]
    releases: str = ""
    #: Every program of the row (``program`` first): those that failed alike share it.
    programs: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.programs = self.programs or [self.program]


@dataclass(slots=True)
class CaseView:
    """Everything a case's page (or HTML article) shows."""

    case: Case
    slug: str
    anchor: str
    file: str
    tables: list[FrameworkTable]
    mode_tables: list[ModeTable]
    changed_in: list[ChangedIn]
    #: Frameworks with programs for this case but no measured release here: (framework, [(program, anchor)]).
    unmeasured: list[tuple[str, list[tuple[str, str]]]]
    networks: list[NetworkSummary]
    p0: list[P0Row]
    problems: list[Problem]
    mode_rows: list[ModeRow]
    not_measured: list[tuple[Environment, Any]] = field(default_factory=list)  # (environment, NotMeasuredPart)
    #: Its rows of an x86-64 level against the reference one (shown on isa-levels.md; the page counts them).
    isa_rows: list[ModeRow] = field(default_factory=list)

    @property
    def oracle(self) -> Oracle:
        return self.case.oracle


# --------------------------------------------------------------------------- the view of a report


@dataclass(slots=True)
class ReportView:
    """The report as rendered: per-case views (built on first use, then kept), the sections of the index."""

    report: Report
    problems: dict[str, list[Problem]]
    available: dict[str, set[str]]  # environment id → modes and dtypes with an observation not "unavailable"
    verdicts: dict[tuple[str, str, str], list[ConformanceRow]]
    _case_views: dict[str, CaseView] = field(default_factory=dict)
    _faces: dict[int, Face] = field(default_factory=dict)
    _values: dict[bytes, str] = field(default_factory=dict)
    #: Framework → case → its parts of the pages, rendered or kept (:func:`kinkcheck.render.markdown.framework_parts`).
    parts: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: The report's rows a case page lists, by case (:meth:`_by_case`).
    _rows_by_case: dict[str, dict[str, list[Any]]] = field(default_factory=dict)

    # ---- faces and cells

    def face(self, ob: Observation) -> Face:
        """The :class:`Face` of an observation (cached per observation)."""
        key = id(ob)
        f = self._faces.get(key)
        if f is None:
            if ob.status == "ok":
                raw = _encode(ob.value)  # few distinct values: format each once
                text = self._values.get(raw)
                if text is None:
                    text = self._values[raw] = fmt_value(ob.value)
                f = Face("ok", text, ob.labels[0] if ob.labels else "")
            else:
                f = Face(ob.status, "", ob.status)
            self._faces[key] = f
        return f

    def cell(self, obs: Iterable[Observation | None], why: str | None = None) -> Cell:
        """A :class:`Cell` from one observation per dtype (first dtype first; None where not measured); ``why``:
        the environment's reason for not measuring it, shown where nothing was observed."""
        present = tuple(o for o in obs if o is not None)
        if not present:
            return Cell(None, why=why)
        first = self.face(present[0])
        others = tuple((o.dtype, f) for o in present[1:] if self._differs(present[0], first, o, f := self.face(o)))
        return Cell(first, others, present)

    def _differs(self, a: Observation, fa: Face, b: Observation, fb: Face) -> bool:
        """Whether ``b`` (a lower dtype) shows something else than ``a``: another status or first label, or a
        value beyond ``b``'s dtype tolerance (float16's 1/3 is 0.333252: the same value, not repeated)."""
        if fa == fb:
            return False
        if fa.status != fb.status or fa.label != fb.label or fa.status != "ok":
            return True
        return differs(a, b, b.dtype, flat=self.report.index.flat)

    # ---- the index page

    @property
    def labels(self) -> list[str]:
        return [lb for lb in LABELS if lb in LABEL_HELP]

    @property
    def mode_help(self) -> dict[str, str]:
        return {m: MODE_INFO[m] for m in MODES}

    def mode_groups(self, page: str | None = None) -> list[tuple[str, list[ModeRow]]]:
        """Mode, dtype and device disagreements grouped by comparison, first-seen order; ``page`` keeps the
        comparisons shown on that page (:data:`MODE_PAGES`, :func:`mode_page`)."""
        groups: dict[str, list[ModeRow]] = {}
        for r in self.report.mode_disagreements.rows:
            if page is None or mode_page(r.comparison) == page:
                groups.setdefault(r.comparison, []).append(r)
        return list(groups.items())

    def changed_in_counts(self) -> list[tuple[str, dict[str, int]]]:
        """Per framework (report order) with a *Changed in* row: rows by kind (convention, raises, availability)."""
        counts: dict[str, dict[str, int]] = {}
        for c in self.report.changed_in:
            counts.setdefault(c.framework, {"convention": 0, "raises": 0, "availability": 0})[c.kind] += 1
        return [(fw, counts[fw]) for fw in self.report.index.frameworks() if fw in counts]

    def within_counts(self) -> list[tuple[str, int]]:
        """Per framework (report order): its rows of disagreements within one framework."""
        counts: dict[str, int] = {}
        for d in self.report.disagreements.within:
            counts[d.framework] = counts.get(d.framework, 0) + 1
        return [(fw, counts[fw]) for fw in self.report.index.frameworks() if fw in counts]

    def across_frameworks(self) -> list[str]:
        """The frameworks that appear in some cross-framework disagreement, report order (the N-way columns)."""
        seen = {p.framework for d in self.report.disagreements.across for g in d.groups for p in g.programs}
        return [fw for fw in self.report.index.frameworks() if fw in seen]

    def across_cells(self, d: Any) -> list[list[tuple[Any, int, bool, str]]]:
        """One cell per :meth:`across_frameworks` column for the disagreement ``d``: that framework's value groups
        as ``(group, programs of this framework in it, only this framework returns it, the value as text)``;
        empty when the framework has no program for the case. Values that differ print differently
        (:func:`fmt_distinct`)."""
        texts = dict(zip(map(id, d.groups), fmt_distinct([g.value for g in d.groups])))
        return [[(g, sum(p.framework == fw for p in g.programs), g.only == fw, texts[id(g)]) for g in d.groups
                 if any(p.framework == fw for p in g.programs)] for fw in self.across_frameworks()]

    def conformance_rows(self) -> list[ConformanceRow]:
        """Conformance rows of every program that departs from its framework's rule in some release."""
        departing = {(r.case, r.framework, r.program) for r in self.report.conformance.rows if r.verdict == "departs"}
        return [r for r in self.report.conformance.rows if (r.case, r.framework, r.program) in departing]

    def changed_in(self, kind: str) -> list[ChangedIn]:
        """*Changed in* rows of ``kind`` (``"convention"``, ``"raises"`` or ``"availability"``), report order."""
        return [c for c in self.report.changed_in if c.kind == kind]

    def device_comparisons(self, page: str = "devices") -> list[dict[str, Any]]:
        """The device comparison (``devices.md``): per comparison of an accelerator with the CPU (``"CPU vs
        CUDA"``), or with ``page="isa-levels"`` of a lower x86-64 level with the reference machine's
        (``"x86-64-v4 vs x86-64-v2"``, ``isa-levels.md``), and per environment measured on both, one row per
        program whose value differs, with the modes and dtypes it differs in and each distinct pair of values
        (``reference``, ``observed``: Briefs, with the modes they differ in); and what that environment does not
        hold, with the reason (``Environment.not_measured_parts``). Report order of frameworks, releases and cases."""
        ix = self.report.index
        out: dict[tuple[str, str], dict[str, Any]] = {}
        for r in self.report.mode_disagreements.rows:
            if mode_page(r.comparison) != page:
                continue
            for eid in r.environments:
                group = out.setdefault((r.comparison, eid), {"comparison": r.comparison, "environment": ix.env[eid],
                                                             "rows": {}})
                row = group["rows"].setdefault((r.case, r.program), {
                    "case": r.case, "program": r.program, "framework": r.framework, "modes": [], "dtypes": [],
                    "pairs": {}})
                if r.mode not in row["modes"]:
                    row["modes"].append(r.mode)
                row["dtypes"] = [d for d in DTYPES if d in row["dtypes"] or d in r.dtypes]
                pair = row["pairs"].setdefault(msgspec.json.encode((r.reference, r.observed)),
                                               {"reference": r.reference, "observed": r.observed, "modes": []})
                if r.mode not in pair["modes"]:
                    pair["modes"].append(r.mode)
        groups = []
        for key in sorted(out, key=lambda k: (k[0], ix.env_rank[k[1]])):
            g = out[key]
            rows = sorted(g["rows"].values(), key=lambda r: (ix.case_rank[r["case"]], r["program"]))
            for row in rows:
                row["modes"].sort(key=MODES.index)
                row["pairs"] = list(row["pairs"].values())
            groups.append({**g, "rows": rows})
        return groups

    @staticmethod
    def parts_by_reason(env: Environment) -> list[tuple[str, list[Any]]]:
        """``env.not_measured_parts`` grouped by their reason (:func:`kinkcheck.report.model.parts_by_reason`)."""
        return parts_by_reason(env.not_measured_parts)

    def device_environments(self) -> list[Environment]:
        """The environments measured on an accelerator (not the CPU), report order."""
        return [e for e in self.report.environments if e.device != "cpu"]

    def isa_environments(self) -> list[Environment]:
        """The environments measured under an x86-64 instruction-set cap (platform tag ``linux_x86_64_v2``), each
        after the reference environment of its release it is compared with, report order."""
        capped = [e for e in self.report.environments if e.isa_cap]
        releases = {(e.framework, e.framework_version, e.device) for e in capped}
        return [e for e in self.report.environments
                if (e.framework, e.framework_version, e.device) in releases and (e in capped or e.place == "cpu")]

    def isa_unchanged(self) -> list[Environment]:
        """The environments measured under an x86-64 cap where no program differs from the reference level."""
        seen = {g["environment"].id for g in self.device_comparisons("isa-levels")}
        return [e for e in self.isa_environments() if e.isa_cap and e.id not in seen]

    @staticmethod
    def alike(rows: list[dict[str, Any]], shown: int = 125) -> list[tuple[dict[str, Any], list[str]]]:
        """:meth:`device_comparisons` rows of one case that read alike, as one row each: ``(row, programs)``,
        first-seen order. An error message is shown without what it lists in braces (XLA's "Failed to materialize
        symbols: {...}" names each program's own fused kernel) and cut to ``shown`` characters; pairs that then read
        the same are one pair with their modes together, and rows with the same modes, dtypes and pairs share one."""
        def cut(b: Any) -> Any:
            if not b.error:
                return b
            text = b.error
            while re.search(r"\{[^{}]*\}", text):  # each pass removes the innermost pair of braces
                text = re.sub(r"\{[^{}]*\}", "…", text)
            return msgspec.structs.replace(b, error=text[:shown])

        groups: dict[bytes, tuple[dict[str, Any], list[str]]] = {}
        for r in rows:
            pairs: dict[bytes, dict[str, Any]] = {}
            for p in r["pairs"]:
                ref, obs = cut(p["reference"]), cut(p["observed"])
                pair = pairs.setdefault(msgspec.json.encode((ref, obs)), {"reference": ref, "observed": obs,
                                                                          "modes": []})
                pair["modes"] += [m for m in p["modes"] if m not in pair["modes"]]
            for pair in pairs.values():
                pair["modes"].sort(key=MODES.index)
            row = {**r, "pairs": list(pairs.values())}
            key = msgspec.json.encode((r["case"], r["modes"], r["dtypes"],
                                       [(p["reference"], p["observed"], p["modes"]) for p in row["pairs"]]))
            groups.setdefault(key, (row, []))[1].append(r["program"])
        return list(groups.values())

    @staticmethod
    def mode_row_groups(rows: list[ModeRow]) -> list[tuple[ModeRow, list[str]]]:
        """Mode rows that differ only by program (several spellings of one function failing alike), as one row
        each: ``(first row, programs)``, first-seen order."""
        groups: dict[str, tuple[ModeRow, list[str]]] = {}
        for r in rows:
            key = msgspec.json.encode(msgspec.structs.replace(r, program="")).decode()
            groups.setdefault(key, (r, []))[1].append(r.program)
        return list(groups.values())

    def program_groups(self, kind: str) -> list[tuple[ChangedIn, list[str]]]:
        """*Changed in* rows of ``kind`` that differ only by program, as one row each: ``(first row, programs)``,
        report order (a release that made a dtype raise in many programs of one case is one row)."""
        groups: dict[tuple[Any, ...], tuple[ChangedIn, list[str]]] = {}
        for c in self.changed_in(kind):
            key = (c.framework, c.device, c.from_environment, c.to_environment, c.change, tuple(c.cases),
                   tuple(c.modes), tuple(c.dtypes))  # environments, not versions: a platform's rows stay its own
            groups.setdefault(key, (c, []))[1].append(c.program)
        return list(groups.values())

    def availability_groups(self) -> list[dict[str, Any]]:
        """Availability changes (*Changed in* rows of kind ``"availability"``) that share framework, device,
        environments (releases on one platform), change, modes and dtypes, as one row each: ``rows`` (the changes), ``programs`` and
        ``cases`` (counts). Each program's own row is on its case's page."""
        groups: dict[tuple[Any, ...], dict[str, Any]] = {}
        for c in self.report.changed_in:
            if c.kind != "availability":
                continue
            key = (c.framework, c.device, c.from_environment, c.to_environment, c.change, tuple(c.modes),
                   tuple(c.dtypes))
            g = groups.setdefault(key, {"first": c, "rows": [], "cases": []})
            g["rows"].append(c)
            g["cases"].extend(k for k in c.cases if k not in g["cases"])
        return list(groups.values())

    def census(self) -> dict[str, Any]:
        """What is covered: cases per oracle kind and per public source, and per framework the measured
        releases, with the releases where each mode and dtype exists (an observation not ``unavailable``)."""
        rep, idx = self.report, self.report.index
        kinds: dict[str, list[str]] = {}
        sources: dict[str, list[str]] = {}
        for c in rep.cases:
            kinds.setdefault(c.oracle.kind, []).append(c.id)
            for s in c.sources:
                sources.setdefault(s, []).append(c.id)
        frameworks = []
        for fw in idx.frameworks():
            envs = idx.columns.get(fw, [])
            programs = sum(1 for c in rep.cases for p in c.programs if p.framework == fw)
            modes = [(m, idx.releases([e.id for e in envs if m in self.available.get(e.id, ())], fw))
                     for m in idx.modes]
            dtypes = [(d, idx.releases([e.id for e in envs if d in self.available.get(e.id, ())], fw))
                      for d in idx.dtypes]
            frameworks.append({
                "framework": fw, "releases": idx.releases([e.id for e in envs], fw), "count": len(envs),
                "programs": programs, "observations": sum(len(idx.by_environment[e.id]) for e in envs),
                "modes": [(m, r) for m, r in modes if r], "dtypes": [(d, r) for d, r in dtypes if r],
            })
        return {"kinds": sorted(kinds.items(), key=lambda kv: _KIND_ORDER.get(kv[0], 9)),
                "sources": sorted(sources.items(), key=lambda kv: _natural(kv[0])), "frameworks": frameworks}

    def network_cases(self) -> list[dict[str, Any]]:
        """The P0 network cross-check per case: programs, runs, agreeing, differing, not checked."""
        out: dict[str, dict[str, Any]] = {}
        for n in self.report.network_summary:
            row = out.setdefault(n.case, {"case": n.case, "programs": 0, "runs": 0, "agree": 0, "differ": 0,
                                          "not_checked": 0, "modes": []})
            row["programs"] += 1
            row["runs"] += n.runs
            row["agree"] += n.agree
            row["differ"] += len(n.differ)
            row["not_checked"] += n.not_checked
            row["modes"].extend(m for m in n.modes if m not in row["modes"])
        return list(out.values())

    # ---- cases

    def case_view(self, case_id: str) -> CaseView:
        """The :class:`CaseView` of a case (built once)."""
        cv = self._case_views.get(case_id)
        if cv is None:
            cv = self._case_views[case_id] = self._build_case(self.report.index.case[case_id])
        return cv

    def case_page_view(self, case_id: str) -> CaseView:
        """The :class:`CaseView` of a case without its framework and modes tables (not kept): the rest of its page."""
        cv = self._case_views.get(case_id)
        return cv if cv is not None else self._build_case(self.report.index.case[case_id], tables_too=False)

    def case_views(self) -> list[CaseView]:
        return [self.case_view(c.id) for c in self.report.cases]

    def _build_case(self, case: Case, tables_too: bool = True) -> CaseView:
        """The case's view; without ``tables_too`` its framework tables and modes tables left empty (a case page
        renders those per framework: :func:`kinkcheck.render.markdown.framework_parts`)."""
        rep, idx = self.report, self.report.index
        tables: list[FrameworkTable] = []
        mode_tables: list[ModeTable] = []
        for fw in idx.columns if tables_too else ():
            table, modes = self.framework_tables(case, fw)
            if table is not None:
                tables.append(table)
            if modes is not None:
                mode_tables.append(modes)
        by_case = self._by_case()
        unmeasured = [(fw, [(p, row_anchor(case.id, fw, p)) for p in case.programs_of(fw)])
                      for fw in dict.fromkeys(p.framework for p in case.programs) if fw not in idx.columns]
        p0 = list(rep.p0.measured) if "P0" in case.sources else []  # the worked example is P0's case
        rows = by_case["mode_rows"].get(case.id, [])
        return CaseView(
            case=case, slug=slug(case.id), anchor=case_anchor(case.id), file=case_file(case.id), tables=tables,
            mode_tables=mode_tables, changed_in=list(by_case["changed_in"].get(case.id, [])), unmeasured=unmeasured,
            networks=list(by_case["networks"].get(case.id, [])), p0=p0,
            problems=self.problems.get(case.id, []),
            mode_rows=[r for r in rows if not is_isa_comparison(r.comparison)],
            not_measured=list(by_case["withheld"].get(case.id, [])),
            isa_rows=[r for r in rows if is_isa_comparison(r.comparison)],
        )

    def _by_case(self) -> dict[str, dict[str, list[Any]]]:
        """The report's rows a case page lists, by case, in the report's order (built once, not once per case):
        *Changed in* rows, network summaries, mode-disagreement rows and a program's cells withdrawn (whole modes
        not reached are on devices.md: they concern every case)."""
        if self._rows_by_case:
            return self._rows_by_case
        rep = self.report
        out: dict[str, dict[str, list[Any]]] = {k: {} for k in ("changed_in", "networks", "mode_rows", "withheld")}
        for c in rep.changed_in:
            for cid in dict.fromkeys(c.cases):
                out["changed_in"].setdefault(cid, []).append(c)
        for n in rep.network_summary:
            out["networks"].setdefault(n.case, []).append(n)
        for r in rep.mode_disagreements.rows:
            out["mode_rows"].setdefault(r.case, []).append(r)
        for e in rep.environments:
            for part in e.not_measured_parts:
                out["withheld"].setdefault(part.case, []).append((e, part))
        self._rows_by_case.update(out)
        return self._rows_by_case

    def framework_tables(self, case: Case, fw: str) -> tuple[FrameworkTable | None, ModeTable | None]:
        """A case's table of one framework's programs over its releases, and of the modes of its newest release
        measured in more than one mode (None where the framework has no program or release for it): what a case
        page shows of one framework, from that framework's observations alone (and the report's dtypes and modes)."""
        idx = self.report.index
        dtypes = idx.dtypes
        cell_of = idx.cell
        progs = case.programs_of(fw)
        # a release measured at a lower x86-64 level is no column of its own: its differences are the case's
        # instruction-set rows (and isa-levels.md), so a table keeps one square per release and device
        columns = [e for e in idx.columns[fw] if not e.isa_cap]
        if not progs or not columns:
            return None, None
        devices = list(dict.fromkeys(e.place for e in columns))
        rows = []
        for p in progs:
            anchor = row_anchor(case.id, fw, p)
            cells = {e.id: self.cell((cell_of.get((case.id, fw, p, "reverse", e.id, d)) for d in dtypes),
                                     why=e.why_not_measured(case.id, p, "reverse", dtypes[0]) if dtypes else None)
                     for e in columns}
            runs = []
            for dev in devices:
                envs = [e for e in columns if e.place == dev]
                merged = _runs([(e, cells[e.id]) for e in envs], envs)
                runs.append((dev, merged))
            strip = [Square(e, cells[e.id], release_anchor(case.id, fw, p, e.id),
                            boundary=i > 0 and e.place == columns[i - 1].place
                            and cells[e.id].key != cells[columns[i - 1].id].key)
                     for i, e in enumerate(columns)]
            rows.append(ProgramRow(fw, p, anchor, runs, strip, self._verdicts(case.id, fw, p, columns)))
        spans = []  # per place, its first and last release: "1.8.0 – 1.9.1; 1.9.1 macOS arm64"
        for dev in devices:
            at = [e for e in columns if e.place == dev]
            spans.append(at[0].title if len(at) == 1 else f"{at[0].title} – {at[-1].title}")
        table = FrameworkTable(fw, columns, "; ".join(spans), rows)
        newest = idx.modes_release(fw)
        if newest is None:
            return table, None
        modes = [m for m in idx.modes if m in idx.env_modes[newest.id]]
        return table, ModeTable(fw, newest, modes, [
            ModeProgram(p, f"{row_anchor(case.id, fw, p)}--modes",
                        [self.cell(cell_of.get((case.id, fw, p, m, newest.id, d)) for d in dtypes) for m in modes])
            for p in progs])

    def _verdicts(self, case: str, fw: str, program: str, columns: Sequence[Environment]) -> list[Verdict]:
        """The conformance rows of a program merged by verdict and admitted values (rows differ by value too;
        the rule column shows only the verdict), each with its releases unless it holds for every release."""
        merged: dict[tuple[str, str], tuple[ConformanceRow, list[str]]] = {}
        every = {e.id for e in columns}
        for r in self.verdicts.get((case, fw, program), []):
            shown = [e for e in r.environments if e in every]  # the table's columns (no lower x86-64 level)
            if shown:
                merged.setdefault((r.verdict, repr(r.predicted)), (r, []))[1].extend(shown)
        return [Verdict(r.verdict, "" if len(merged) == 1 and set(envs) >= every else
                        self.report.index.releases(envs, fw), r.predicted) for r, envs in merged.values()]


_encode = msgspec.json.Encoder().encode

_KIND_ORDER = {k.name: i for i, k in enumerate(ORACLE_KIND_RECORDS)}


def _natural(text: str) -> tuple[Any, ...]:
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text))


def _runs(items: list[tuple[Environment, Cell]], among: list[Environment]) -> list[Run]:
    """Consecutive releases with the same cell merged (:func:`kinkcheck.report.model.value_runs`), each named
    as a range of ``among``."""
    cells = {e.id: c for e, c in items}
    pos = {e.id: i for i, e in enumerate(among)}
    out = []
    for first, last, _ in value_runs([(e, c.key) for e, c in items]):
        envs = among[pos[first.id]:pos[last.id] + 1]
        out.append(Run(release_ranges([e.id for e in envs], among), cells[first.id], envs))
    return out


@functools.lru_cache(maxsize=65536)  # one message recurs in many cells: rewritten once per release and dtype
def _generic(error: str, version: str, dtype: str) -> str:
    """A message with its own release and dtype written ``<release>`` and ``<dtype>`` (``paddle 2.6.2 has no
    float16 CPU kernel`` → ``paddle <release> has no <dtype> CPU kernel``), so the releases and dtypes that
    failed alike share a row, which names them."""
    error = re.sub(rf"(?<![\w.]){re.escape(version)}(?![\w.])", "<release>", error)
    return re.sub(rf"\b{re.escape(dtype)}\b", "<dtype>", error)


def _build(report: Report) -> ReportView:
    """One pass over the observations for what the pages need beyond the index: the error and unavailable
    cells per case, and per environment the modes and dtypes that exist there."""
    idx = report.index
    available = {env: {o.mode for o in obs if o.status != "unavailable"}
                 | {o.dtype for o in obs if o.status != "unavailable"} for env, obs in idx.by_environment.items()}
    problems: dict[tuple[str, ...], Problem] = {}
    capped = {e.id for e in report.environments if e.isa_cap}  # a lower x86-64 level's errors: isa-levels.md
    for o in [o for o in report.observations if o.status != "ok" and o.environment not in capped]:
        error = _generic(o.error or "", idx.env[o.environment].framework_version, o.dtype)
        key = (o.case, o.framework, o.program, o.mode, o.status, error)
        p = problems.get(key)
        if p is None:
            p = problems[key] = Problem(o.framework, o.program, o.mode, o.status, error, [], [])
        if o.dtype not in p.dtypes:
            p.dtypes.append(o.dtype)
        if o.environment not in p.environments:
            p.environments.append(o.environment)
    order = {d: i for i, d in enumerate(idx.dtypes)}
    per_case: dict[str, list[Problem]] = {}
    merged: dict[tuple[Any, ...], Problem] = {}
    for key, p in problems.items():
        p.dtypes.sort(key=lambda d: order.get(d, 99))
        # the modes that failed alike (same message, dtypes and releases) share a row: "reverse, jit, forward"
        same = (key[0], p.framework, p.program, p.status, p.error, tuple(p.dtypes), tuple(p.environments))
        if same in merged:
            merged[same].mode += f", {p.mode}"
            continue
        merged[same] = p
    # then the programs that failed alike in the same modes share a row: "`a`, `b`"
    rows: dict[tuple[Any, ...], Problem] = {}
    for (case, *_), p in merged.items():
        same = (case, p.framework, p.mode, p.status, p.error, tuple(p.dtypes), tuple(p.environments))
        if same in rows:
            rows[same].programs.append(p.program)
            continue
        rows[same] = p
        p.releases = idx.releases(p.environments, p.framework)
        per_case.setdefault(case, []).append(p)
    verdicts: dict[tuple[str, str, str], list[ConformanceRow]] = {}
    for r in report.conformance.rows:
        verdicts.setdefault((r.case, r.framework, r.program), []).append(r)
    return ReportView(report, per_case, available, verdicts)


def jinja_environment(autoescape: bool) -> Any:
    """A new Jinja2 environment over the report templates (``templates/*.j2``, read from the package): strict
    (a missing field raises), blocks trimmed, ``autoescape`` for HTML, with the format-neutral filters both
    renderers use (``slug``, ``num``, ``value``, ``vec``, ``matrix``, ``exact``, ``clarke``, ``reason``); the
    caller adds its own (cells, strips, escaping). Compiled
    templates are cached under :func:`kinkcheck.cache.cache_dir` (``jinja/``, keyed on each template's text),
    which saves a third of a second per process; an unwritable cache is skipped."""
    import jinja2

    folder = resources.files("kinkcheck.render").joinpath("templates")
    sources = {t.name: t.read_text() for t in folder.iterdir() if t.name.endswith(".j2")}
    env = jinja2.Environment(loader=jinja2.DictLoader(sources), undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True, autoescape=autoescape,
                             bytecode_cache=_bytecode_cache())
    env.filters.update(slug=slug, num=fmt_number, value=fmt_value, vec=fmt_vector, matrix=fmt_matrix, exact=fmt_exact,
                       clarke=clarke_text, reason=oracle_reason, decimals=_decimal_text)
    env.globals.update(oracle_finding=oracle_finding)
    return env


def _decimal_text(text: str) -> str:
    """A sympy form as a person reads it (:func:`kinkcheck.language.decimals.decimal_text`: selu's 32-digit constants
    as their float64 decimals); the JSON and the Parquet keep the exact text."""
    return decimal_text(text)


def _bytecode_cache() -> Any:
    import jinja2.bccache

    class Cache(jinja2.bccache.FileSystemBytecodeCache):
        def load_bytecode(self, bucket: Any) -> None:
            try:
                super().load_bytecode(bucket)
            except (OSError, EOFError, ValueError):  # a damaged entry: compile again
                bucket.reset()

        def dump_bytecode(self, bucket: Any) -> None:
            try:
                super().dump_bytecode(bucket)
            except OSError:  # a read-only or vanished cache costs time, never the report
                pass

    folder = cache_dir() / "jinja"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return Cache(str(folder))


_CACHE: list[tuple[Report, ReportView]] = []


def report_view(report: Report) -> ReportView:
    """The :class:`ReportView` of ``report``, built once and kept for the last two reports rendered (so
    ``render_markdown``, ``render_case_pages`` and the site's pages of one report share it)."""
    for rep, view in _CACHE:
        if rep is report:
            return view
    view = _build(report)
    _CACHE.insert(0, (report, view))
    del _CACHE[2:]
    return view
