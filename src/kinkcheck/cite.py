"""``kinkcheck cite``: one sentence, ready to paste, stating a measured convention, and a citation entry.

The sentence names the value, its label, the framework release, device, dtype and mode, whether the value
follows the framework's documented rule, and where the report shows it: the program's row on the case's own
page, ``reports/cases/<case>.md#case-<case>--<framework>-<program>`` (the same anchor names the row on the
site's page of the case, ``report/cases/<case>.html``: :mod:`kinkcheck.report.site`). The entry cites the report as a dataset (BibTeX ``@misc`` or a
CITATION.cff ``references`` item), with its generation date and catalog hash. Everything comes from the
typed report (:class:`kinkcheck.report.model.Report`); nothing is measured here.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

from kinkcheck import expr as ex
from kinkcheck.catalog import FRAMEWORKS
from kinkcheck.decimals import decimal_value
from kinkcheck.vocabulary import flatten
from kinkcheck.platforms import place_title
from kinkcheck.query import DATA_ENV
from kinkcheck.registry import view
from kinkcheck.report.model import Case, Environment, Observation, Report, ReportError, report_path
from kinkcheck.report.view import CASES_DIR, LABEL_HELP, case_file, mode_anchor, release_anchor, row_anchor

__all__ = ["Citation", "CiteError", "bibtex", "case_page", "cff", "cite", "load_report", "principal_case"]

FRAMEWORK_NAMES = view(lambda f: f.display)
REPORT_MD = "reports/conventions.md"


class CiteError(ValueError):
    """The report cannot be read, or the program, case or environment is not in it (one-line reason)."""


def case_page(case_id: str) -> str:
    """The case's own page, relative to the reports folder: ``"cases/relu-at-0.md"`` for ``relu@0``
    (:func:`kinkcheck.report.view.case_file`)."""
    return f"{CASES_DIR}/{case_file(case_id)}"


@dataclass(frozen=True)
class Citation:
    """One cited cell: the sentence, the anchor of the program's row (on the case's page, :attr:`page`, and on
    the site's), the observation and environment it states, the case cited and the program's other
    cases (those not cited: the command line lists them after the sentence)."""

    sentence: str
    anchor: str
    observation: Observation
    environment: Environment
    case: str
    others: tuple[str, ...] = ()

    @property
    def page(self) -> str:
        """The case's page relative to the reports folder (:func:`case_page`)."""
        return case_page(self.case)

    def link(self, base: str = "reports") -> str:
        """The cell's link: ``base`` is the reports folder (a path or URL) → ``base/cases/<case>.md#anchor``;
        a ``.md`` file (the index page) → the case page beside it; a ``.html`` page of the site (its report index,
        ``…/report/conventions.html``) → the site's case page beside it, ``…/report/cases/<case>.html#anchor``."""
        base = base.rstrip("/") or "."
        page = self.page
        if base.endswith((".md", ".html")):
            if base.endswith(".html"):
                page = page[:-3] + ".html"
            base = base.rpartition("/")[0] or "."
        return f"{base}/{page}#{self.anchor}"


def load_report(path: str | Path, program: str | None = None, frameworks: Collection[str] | None = None) -> Report:
    """The report at ``path``, decoded and checked (:func:`kinkcheck.report.model.load_report`); with
    ``program``, only the observations of the catalog programs it spells (the report's index then takes the
    modes each environment measured from the Parquet file's index, so the anchors are those of the full report);
    with ``frameworks``, only those frameworks' programs (what ``kinkcheck migrate`` compares). Either way the
    derived sections are left out.

    Raises
    ------
    CiteError
        The file is missing, not a regular file, unreadable, not JSON or too deeply nested, not a
        ``kinkcheck/conventions/v2`` report (a v1 report is refused: re-render it), or a report with missing,
        mistyped or dangling parts (the first one named, e.g. a hand-made or truncated report).
    """
    from kinkcheck.report.model import load_report as load

    def spelled(report: Report) -> list[str]:
        return sorted({pid for c in report.cases if (pid := _matches(program or "", c)) is not None})

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
                      select=spelled if program is not None else of_frameworks if frameworks is not None else None)
    except ReportError as err:
        raise CiteError(str(err)) from None
    if frameworks is not None and program is None:  # another framework's program of the same text: not asked for
        report.observations = [o for o in report.observations if o.framework in frameworks]
    if program is not None and report.observations_file is not None:
        from kinkcheck.report.dataset import DatasetError, table_index

        try:
            modes = table_index(report_path(path).parent / report.observations_file).get("modes")
        except DatasetError as err:
            raise CiteError(str(err)) from None
        if modes is not None:
            report.index.env_modes = modes
    return report


def check_cell(framework: str | None, mode: str, dtype: str) -> None:
    """Raises CiteError for a dtype or mode no framework (or not ``framework``) has."""
    from kinkcheck.vocabulary import FRAMEWORK_MODES
    from kinkcheck.frameworks.base import check_dtype, check_mode

    try:
        check_dtype(dtype)
        check_mode(mode)
    except ex.ExprError as err:
        raise CiteError(str(err)) from None
    if framework is not None and mode not in FRAMEWORK_MODES.get(framework, (mode,)):
        raise CiteError(f"{framework} has no {mode} mode (its modes: {', '.join(FRAMEWORK_MODES[framework])})")


def _matches(program: str, case: Case, framework: str | None = None) -> str | None:
    """The case's program id that ``program`` spells (:func:`kinkcheck.expr.same_program`: aliases, spacing, the
    spelling of numbers, positional or keyword arguments), the closest spelling first, or None; among
    ``framework``'s programs when given (``x.clamp(min=0.0)`` is MindSpore's own text and torch's ``x.clamp(min=0)``)."""
    spelled = ex.same_program(program, [p.program for p in case.programs
                                        if framework is None or p.framework == framework], case.at.keys())
    return spelled[0] if spelled else None


#: The smallest positive normal float32; a nonzero coordinate below it makes a case a floating-point edge.
_TINY = 2.0 ** -126


def _ordinary_kink(case: Case) -> bool:
    """Whether a case is the function's kink at ordinary numbers: the sympy oracle finds it non-differentiable
    (kind kink, jump, undefined, ...) and no coordinate is a negative zero or a float32 subnormal."""
    xs = [float(x) for v in case.at.values() for x in flatten(v)]
    edge = any((x == 0 and math.copysign(1.0, x) < 0) or 0 < abs(x) < _TINY for x in xs)
    return case.oracle.kind != "differentiable" and not edge


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


def cite(report: Report, program: str, case: str | None = None, framework_version: str | None = None,
         mode: str = "reverse", dtype: str = "float64", device: str = "cpu",
         framework: str | None = None) -> Citation:
    """The citation sentence for one cell of the report.

    Parameters
    ----------
    report : Report
        The report (:func:`load_report` of ``reports/conventions.json``).
    program : str
        A program of the catalog, e.g. ``"torch.clamp(x, min=0)"`` (``jnp``/``F``/``lax`` aliases accepted).
    case : str, optional
        Case id. Default: the program's principal case (:func:`principal_case`); the others are in
        :attr:`Citation.others`.
    framework_version : str, optional
        Release; default the newest release measured on ``device`` (an ``Environment.place``: the device, then
        ``-<platform tag>`` off Linux x86-64, e.g. ``cpu-macos_arm64``).
    framework : str, optional
        ``torch`` or ``jax``: needed only for a program text that both frameworks measure in the case
        (``x ** 0.5``, ``v.max()``).

    Raises
    ------
    CiteError
        Unknown program or case, program measured by both frameworks and no ``framework`` given, release not
        measured, no such cell.
    """
    if not program.strip():
        raise CiteError("cite which program? give one, e.g. \"torch.clamp(x, min=0)\"")
    ix = report.index
    if framework is None:  # the closest spelling in the whole case (torch's exact x.clamp(min=0) over MindSpore's)
        cells = [(c, pid, p.framework) for c in report.cases if (pid := _matches(program, c)) is not None
                 for p in c.programs if p.program == pid]
    else:  # the closest spelling the framework holds
        cells = [(c, pid, framework) for c in report.cases if (pid := _matches(program, c, framework)) is not None]
    if framework is not None:
        if framework not in FRAMEWORKS:
            raise CiteError(f"unknown framework {framework!r} (known: {', '.join(FRAMEWORKS)})")
        cells = [cell for cell in cells if cell[2] == framework]
    if case is not None:
        if case not in ix.case:
            import difflib

            near = difflib.get_close_matches(case, list(ix.case), n=5, cutoff=0.3)
            raise CiteError(f"unknown case {case!r}" + (f" (nearest: {', '.join(near)})" if near else ""))
        chosen = [cell for cell in cells if cell[0].id == case]
        if not chosen:
            raise CiteError(f"case {case!r} has no program {program!r}"
                            + (f" in {framework}" if framework is not None else ""))
    elif not cells:
        from kinkcheck.query import nearest_programs

        near = nearest_programs(program, sorted({p.program for c in report.cases for p in c.programs
                                                 if framework is None or p.framework == framework}))
        raise CiteError(f"program {program!r} is not in the report's catalog"
                        + (f" for {framework}" if framework is not None else "")
                        + (f"; nearest: {'; '.join(near)}" if near else ""))
    else:
        first = principal_case(list({c.id: c for c, _, _ in cells}.values()))
        chosen = [cell for cell in cells if cell[0] is first]
    if len({fw for _, _, fw in chosen}) > 1:
        fws = list(dict.fromkeys(fw for _, _, fw in chosen))
        raise CiteError(f"{chosen[0][1]} is a program of {', '.join(fws[:-1])} and {fws[-1]} at "
                        f"{chosen[0][0].id}; pick one with --framework")
    c, pid, framework = chosen[0]
    others = tuple(dict.fromkeys(cc.id for cc, _, fw in cells if cc.id != c.id and fw == framework))
    check_cell(framework, mode, dtype)
    envs = [e for e in ix.columns.get(framework, []) if e.place == device]  # measured, oldest first
    if not envs:
        places = sorted({e.place for e in ix.columns.get(framework, [])})
        raise CiteError(f"no {framework} release measured on {device} (measured on: {', '.join(places) or 'none'}; "
                        "off Linux x86-64 a place is <device>-<platform>, e.g. cpu-macos_arm64)")
    if framework_version is not None:
        measured = list(dict.fromkeys(e.framework_version for e in envs))
        envs = [e for e in envs if e.framework_version == framework_version]
        if not envs:
            raise CiteError(f"{framework} {framework_version} on {device} is not in the report "
                            f"(measured: {', '.join(measured) or 'none'})")
    found = [(e, ob) for e in envs if (ob := ix.cell.get((c.id, framework, pid, mode, e.id, dtype))) is not None]
    if not found:
        why = next((w for e in reversed(envs) if (w := e.why_not_measured(c.id, pid, mode, dtype))), None)
        raise CiteError(f"no observation of {pid} at {c.id} in {mode} mode, {dtype}, on {device}"
                        + (f" ({why})" if why else ""))
    env, ob = found[-1]
    # The same ids in the case page and the HTML: reverse mode, the release's square in the program's strip;
    # another mode of the release the modes table shows (the newest with several modes), its cell there;
    # otherwise the program's row (older releases' other modes are in the JSON and CSV).
    tabled = ix.modes_release(framework)
    if mode == "reverse":
        anchor = release_anchor(c.id, framework, pid, env.id)
    elif tabled is not None and tabled.id == env.id:
        anchor = mode_anchor(c.id, framework, pid, mode)
    else:
        anchor = row_anchor(c.id, framework, pid)
    return Citation(_sentence(c, pid, env, ob, mode, dtype), anchor, ob, env, c.id, others)


def _sentence(case: Case, program: str, env: Environment, ob: Observation, mode: str, dtype: str) -> str:
    name = FRAMEWORK_NAMES.get(env.framework, env.framework)
    point = ", ".join(f"{k} = {json.dumps(v)}" for k, v in case.at.items())
    where = f"{name} {env.framework_version} ({place_title(env.device, env.platform_tag)}, {dtype}, {mode} mode)"
    if ob.status != "ok":
        what = f"`{program}` at {point} gives no derivative ({ob.status}: {ob.error})"
    else:
        label = ob.labels[0]
        what = (f"the derivative of `{program}` at {point} is {decimal_value(ob.value)} "
                f"({label}: {LABEL_HELP.get(label, label)})")
        if ob.input:
            what += f"; in {dtype} the input is {decimal_value(ob.input)}"
    rule = {"conforms": f"; this follows {name}'s documented rule",
            "departs": f"; this departs from {name}'s documented rule",
            "open": f"; {name}'s documented rules leave this value open"}.get(ob.conformance or "", "")
    return f"In {where}, {what}{rule} (kinkcheck, case {case.id})."


def _span(report: Report) -> str:
    """``PyTorch 1.13.1–2.15.0 (17 releases) and JAX 0.4.13–0.10.2 (11 releases)``: the measured releases
    (any device), in the report's order (oldest first)."""
    parts = []
    measured = [e for e in report.environments if e.not_measured is None]  # what the shards hold, not the rows read
    for fw in FRAMEWORKS:
        vs = list(dict.fromkeys(e.framework_version for e in measured if e.framework == fw))
        if vs:
            name = FRAMEWORK_NAMES.get(fw, fw)
            parts.append(f"{name} {vs[0]}" if len(vs) == 1 else f"{name} {vs[0]}–{vs[-1]} ({len(vs)} releases)")
    return " and ".join(parts)


def bibtex(report: Report) -> str:
    """A BibTeX ``@misc`` entry for the report (date and catalog hash from its provenance)."""
    prov = report.provenance
    date = prov.generated_at[:10]
    return (
        f"@misc{{kinkcheck-{date},\n"
        f"  title        = {{Gradient conventions at kinks: a kinkcheck report}},\n"
        f"  author       = {{{{kinkcheck contributors}}}},\n"
        f"  year         = {{{date[:4]}}},\n"
        f"  note         = {{kinkcheck {prov.kinkcheck_version}, catalog {prov.catalog_hash}, generated "
        f"{prov.generated_at}; {len(report.cases)} cases measured in {_span(report)}}},\n"
        f"  howpublished = {{{REPORT_MD}}}\n"
        f"}}"
    )


def cff(report: Report) -> str:
    """A CITATION.cff ``references`` item (YAML) for the report."""
    prov = report.provenance
    return (
        "- type: data\n"
        "  title: \"Gradient conventions at kinks: a kinkcheck report\"\n"
        "  authors:\n"
        "    - name: kinkcheck contributors\n"
        f"  date-released: \"{prov.generated_at[:10]}\"\n"
        f"  version: \"{prov.kinkcheck_version}+catalog.{prov.catalog_hash}\"\n"
        f"  notes: \"{REPORT_MD}; {len(report.cases)} cases, {report.summary.observations} observations\"\n"
    )
