"""Render the report as one self-contained HTML file (Jinja2 ``templates/conventions.html.j2``).

The index and every case page of the Markdown report in one document to open offline: per program the values
over the releases as ranges and a strip of squares in the label's colour (:data:`kinkcheck.report.view.LABEL_MARK`),
other dtypes only where they differ from float64, *Changed in* one row per change; filters by framework,
release and mode (inline script, no request leaves the page); for every case a plot (inline SVG from
:mod:`kinkcheck.report.plots`). Anchors are those of the Markdown pages (see :mod:`kinkcheck.report.view`), so
``kinkcheck cite`` links work in both. Byte-identical for the same report and matplotlib release.
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any

from markupsafe import Markup, escape

from kinkcheck.catalog import Catalog
from kinkcheck.report.model import Brief, Observation, Report
from kinkcheck.report.view import (
    DTYPE_SHORT,
    LABEL_HELP,
    LABEL_MARK,
    NO_OBSERVATION,
    Cell,
    Face,
    ProgramRow,
    Verdict,
    case_anchor,
    fmt_value,
    fmt_vector,
    jinja_environment,
    report_view,
    slug,
)

__all__ = ["label_class", "render_html"]

_NONE = Markup('<span class="none">—</span>')


def label_class(label: str | None) -> str:
    """The CSS class of a label's colour: ``lb-<slug of label>`` (``lb-inf``, ``lb-minus-inf``); ``lb-none``
    for no observation."""
    return "lb-none" if label is None else f"lb-{slug(label)}"


def _hover(face: Face, ob: Observation | None) -> str:
    """Hover text of a value: every label, the conformance verdict, the rounded input, or the error."""
    if ob is None:
        return face.label
    if face.status != "ok":
        return ob.error or face.status
    text = ", ".join(ob.labels) + (f"; {ob.conformance}" if ob.conformance else "")
    if ob.input:
        text += f"; input {fmt_value(ob.input)}"
    return text


def _face(face: Face | None, ob: Observation | None = None) -> Markup:
    # plain f-strings with escape(): Markup.format costs a third of the page's render time
    if face is None:
        return _NONE
    text = escape(face.status) if face.status != "ok" else f"{escape(face.value)} <sub>{escape(face.label)}</sub>"
    return Markup(f'<span class="lb {label_class(face.label)}" title="{escape(_hover(face, ob))}">{text}</span>')


def _cell(cell: Cell, sep: str = "<br>") -> Markup:
    """A cell: the first dtype's value, then each other dtype whose value or label differs (``f16: error``),
    one per line (``sep``)."""
    if cell.face is None:
        return _NONE
    out = _face(cell.face, cell.obs[0])
    if cell.others:
        by_dtype = {o.dtype: o for o in cell.obs}
        for d, f in cell.others:
            out += Markup(f'{sep}<span class="dt">{DTYPE_SHORT.get(d, d)}: {_face(f, by_dtype.get(d))}</span>')
    return out


def _runs(row: ProgramRow) -> Markup:
    """One line per run of equal releases: ``1.13.1 – 2.13.0: 1 right``, other dtypes where they differ on the
    same line; a release off the CPU is named with its device (``2.15.0 cuda``)."""
    return Markup("".join(f'<span class="run"><span class="rel">{escape(r.releases)}</span>: '
                          f'{_cell(r.cell, " ")}</span>' for _, runs in row.runs for r in runs))


def _strip(row: ProgramRow) -> Markup:
    """One square per release, in the colour of its float64 label; each is the anchor ``<row>--<environment>``."""
    parts = []
    for sq in row.strip:
        parts.append(f'<span class="sq {label_class(sq.cell.label)}{" brk" if sq.boundary else ""}" id="{escape(sq.anchor)}" '
                     f'data-env="{escape(sq.env.id)}" title="{escape(sq.title)}"></span>')
    return Markup(f'<span class="strip">{"".join(parts)}</span>')


def _verdicts(verdicts: list[Verdict]) -> Markup:
    if not verdicts:
        return _NONE
    parts = []
    for v in verdicts:
        text = Markup('<span class="{0}">{0}</span>').format(v.verdict)
        if v.verdict == "departs":
            text += Markup(": admits {}").format(" or ".join(fmt_vector(p) for p in v.predicted))
        if v.releases:
            text += Markup(' <span class="muted">({})</span>').format(v.releases)
        parts.append(text)
    return Markup(" · ").join(parts)


def _brief(b: Brief) -> Markup:
    if b.status != "ok":
        return Markup('<span class="lb {0}" title="{1}">{2}</span>').format(label_class(b.status), b.error or "",
                                                                           b.status)
    text = Markup('<span class="lb {0}">{1} <sub>{2}</sub></span>').format(label_class(b.label), fmt_value(b.value),
                                                                         b.label)
    if b.input:
        text += Markup(" <em>input</em> {}").format(fmt_value(b.input))
    return text


def _plots(report: Report, catalog: Catalog) -> dict[str, Markup]:
    """Case id → inline SVG: measured first components in the newest CPU release of each framework (reverse
    mode, float64; non-finite ones left out, the tables have them), and the oracle's one-sided derivatives.
    Drawn (or read from the cache) by :func:`kinkcheck.report.plots.case_svgs`, in parallel when many are new."""
    from kinkcheck.report.plots import case_svgs

    idx = report.index
    values: dict[str, dict[tuple[str, float], int]] = {}
    for fw in idx.frameworks():
        newest = idx.newest(fw)
        if newest is None:
            continue
        for o in idx.by_environment[newest.id]:
            if o.mode == "reverse" and o.dtype == "float64" and o.status == "ok":
                flat = idx.flat(o)
                if flat and math.isfinite(flat[0]):
                    marks = values.setdefault(o.case, {})
                    marks[(fw, flat[0])] = marks.get((fw, flat[0]), 0) + 1
    requests = []
    for case in catalog:
        entry = idx.case.get(case.id)
        if entry is None:
            continue
        marks = sorted((fw, v, n) for (fw, v), n in values.get(case.id, {}).items())
        side = [e.float_ if e is not None and isinstance(e.float_, float | int) and math.isfinite(e.float_) else None
                for e in (entry.oracle.left, entry.oracle.right)]
        requests.append((case, marks, side[0], side[1]))
    return {r[0].id: Markup(svg) for r, svg in zip(requests, case_svgs(requests), strict=True)}


@cache
def _template() -> Any:
    env = jinja_environment(autoescape=True)
    env.filters.update(cell=_cell, brief=_brief, runs=_runs, strip=_strip, verdicts=_verdicts, lbclass=label_class)
    return env.get_template("conventions.html.j2")


def _kink_hits(report: Report) -> dict[str, str] | None:
    """The kink-hit census for the coverage section: its summary as text and its plot (inline SVG); None when
    none is measured."""
    import re

    from kinkcheck.report.markdown import _kink_hits_summary
    from kinkcheck.report.plots import kink_hits_svg

    measured = [k for k in report.kink_hits if k.error is None and k.cells]
    if not measured:
        return None
    text = _kink_hits_summary(measured)
    text = re.sub(r"\*\*(.+?)\*\*", r"\1", re.sub(r"\[`(.+?)`\]\((.+?)\)", r"\1", text)).replace("`", "")
    return {"summary": text, "svg": kink_hits_svg(measured)}


def render_html(report: Report, catalog: Catalog, json_sha256: str | None = None) -> str:
    """The whole HTML report as one string (one file: styles, script and plots inline).

    ``json_sha256``: the SHA-256 (hex) of the ``conventions.json`` written beside it, in a
    ``<meta name="kinkcheck-json-sha256">`` and the introduction; left out when None. The matplotlib release
    that drew the plots is named in ``<meta name="generator">`` (another release may lay them out differently).
    """
    from importlib import metadata

    view = report_view(report)
    idx = report.index
    return _template().render(
        doc=report, view=view, idx=idx, cases=view.case_views(), plots=_plots(report, catalog),
        filter_envs=idx.measured, filter_modes=idx.modes, label_mark=LABEL_MARK, no_observation=NO_OBSERVATION,
        labels=view.labels, label_help=LABEL_HELP, mode_help=view.mode_help, case_anchor=case_anchor,
        json_sha256=json_sha256, matplotlib_version=metadata.version("matplotlib"), kink_hits=_kink_hits(report))
