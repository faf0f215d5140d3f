"""Render the report as Markdown: an index page (``reports/conventions.md``) and one page per case
(``reports/cases/<slug of case id>.md``), small enough for a code host to render and cite.

Templates: ``templates/conventions.md.j2`` (the index: summary, headline findings, environments, the census of
what is covered, the legend, the list of cases) and ``templates/case.md.j2`` (a case: its function, point,
sources and oracle, per framework one row per program with its values over the releases as ranges and a strip
of squares coloured by label, the modes of the newest release, its network runs, *Changed in* rows, errors).
Both read the typed report through :mod:`kinkcheck.render.view`; anchors are those listed there. Each page
names the SHA-256 of the ``conventions.json`` it belongs to in its footer, and is a function of the report
alone (byte-identical for the same report). What a page shows of one framework (its table, its modes table, its
cell of the index's list of cases: ``case-table.md.j2``, ``case-modes.md.j2``, ``case-newest.md.j2``) is rendered
per framework and kept in the cache under its shards' judged keys (:func:`framework_parts`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

from kinkcheck.cache import read_signed, write_signed
from kinkcheck.render.census import render_run
from kinkcheck.render.view import (CASES_DIR, DTYPE_SHORT, LABEL_HELP, LABEL_MARK, NO_OBSERVATION, SECTION_PAGES, Cell,
                                   Face, ProgramRow, Verdict, case_anchor, case_file, fmt_value, fmt_vector,
                                   jinja_environment, mark, md_cell, report_view)
from kinkcheck.report.model import Brief, Report
from kinkcheck.report.text import MODE_PAGES, md_prose, md_text
from kinkcheck.rules.page import front_table

__all__ = ["SECTION_PAGES", "render_case_pages", "render_markdown", "render_operation_pages", "render_section_pages",
           "render_site_index"]


def _face(face: Face | None, why: str | None = None) -> str:
    if face is None:
        return "not measured" if why else "—"
    if face.status != "ok":
        return face.status
    return f"{face.value} <sub>{face.label}</sub>"


def _cell(cell: Cell) -> str:
    """A cell: the first dtype's value and label, then ``f16: …`` for each other dtype that differs."""
    text = _face(cell.face, cell.why)
    if cell.others:
        text += " (" + "; ".join(f"{DTYPE_SHORT.get(d, d)}: {_face(f)}" for d, f in cell.others) + ")"
    return md_cell(text)


def _runs(row: ProgramRow) -> str:
    """One line per run of equal releases, ``1.13.1 – 2.13.0: 1 <sub>right</sub><br>2.14.1 – 2.15.0: 0
    <sub>right</sub>``; a release off the CPU is named with its device (``2.15.0 cuda``) and never shares a run
    with a CPU release."""
    return "<br>".join(f"{r.releases}: {_cell(r.cell)}" for _, runs in row.runs for r in runs)


def _strip(row: ProgramRow) -> str:
    """One square per release (:data:`LABEL_MARK`), each an anchor ``<row>--<environment>`` with a hover title;
    ``┊`` before a release whose value differs from the one before (a new range)."""
    return "".join(("┊" if sq.boundary else "") + f'<a id="{sq.anchor}" title="{sq.title.replace(chr(34), chr(39)).replace("|", "/")}">{mark(sq.cell.label).emoji}</a>' for sq in row.strip)


def _verdicts(verdicts: list[Verdict]) -> str:
    """The rule column: the verdict (``**departs**: admits …``), with releases when it is not one for all."""
    if not verdicts:
        return "—"
    parts = []
    for v in verdicts:
        text = f"**departs**: admits {' or '.join(fmt_vector(p) for p in v.predicted)}" if v.verdict == "departs" \
            else v.verdict
        parts.append(f"{text} ({v.releases})" if v.releases else text)
    return " · ".join(parts)


def _brief(b: Brief, limit: int = 48) -> str:
    """A mode-disagreement side: ``value label`` or the status and the message's first ``limit`` characters, and
    the rounded input."""
    text = f"{fmt_value(b.value)} {b.label}" if b.status == "ok" else f"{b.status}: {(b.error or '')[:limit]}"
    if b.input:
        text += f" (*input* {fmt_value(b.input)})"
    return md_text(text)


@cache
def _template(name: str) -> Any:
    env = jinja_environment(autoescape=False)
    env.filters.update(md_cell=md_cell, md_text=md_text, md_prose=md_prose, cell=_cell, runs=_runs, strip=_strip,
                       verdicts=_verdicts, brief=_brief, emoji=lambda label: mark(label).emoji)
    return env.get_template(name)


def _globals(report: Report, json_sha256: str | None) -> dict[str, Any]:
    view = report_view(report)
    return {"doc": report, "view": view, "idx": report.index, "json_sha256": json_sha256, "label_mark": LABEL_MARK,
                "label_help": LABEL_HELP,
                "no_observation": NO_OBSERVATION, "mode_pages": MODE_PAGES, "labels": view.labels, "mode_help": view.mode_help,
                "case_anchor": case_anchor, "case_file": case_file, "kink_hits_md": _kink_hits_md,
                "kink_hits_summary": _kink_hits_summary}


def _kink_hits_summary(measurements: Any) -> str:
    """The index's paragraph on the kink-hit census: per measurement (framework), the range over depths of the
    % of initialisations that differ, per dtype."""
    parts = []
    for k in measurements:
        ranges = []
        for dtype in ("float64", "float32", "float16", "bfloat16"):
            ps = [100 * c.differ / c.inits for c in k.cells if c.dtype == dtype and c.inits]
            if ps:
                lo, hi = f"{min(ps):.0f}", f"{max(ps):.0f}"
                ranges.append(f"{dtype} {lo} %" if lo == hi else f"{dtype} {lo}–{hi} %")
        depths = sorted({c.depth for c in k.cells})
        parts.append(f"{k.environment.get('framework', '?')} {k.environment.get('framework_version', '')} "
                     f"(depths {depths[0]}–{depths[-1]}, {k.scale.get('inits', '?')} initialisations each): "
                     + ", ".join(ranges))
    return ("**Kink hits in training** ([`census.md`](census.md#census-kink-hits), `kinkcheck census`, Bertoin "
            "et al.'s test): the initialisations whose first-layer gradient differs between ReLU'(0) = 0 and 1 on "
            "some minibatch — " + "; ".join(parts) + ".")


def _kink_hits_md(k: Any) -> str:
    """A kink-hit census measurement's tables (:func:`kinkcheck.render.census.render_run`)."""
    import msgspec

    return render_run(msgspec.to_builtins(k)).rstrip("\n")


def render_markdown(report: Report, json_sha256: str | None = None) -> str:
    """The index page ``conventions.md`` as one string, a function of ``report`` alone.

    It links each case to ``cases/<slug>.md#case-<slug>`` (:func:`render_case_pages`) and keeps an anchor
    ``case-<slug>`` per case in its list of cases, so older links to ``conventions.md#case-…`` still land.
    ``json_sha256``: the SHA-256 (hex) of the ``conventions.json`` written beside it, named in the footer so a
    reader can tell the Markdown belongs to that JSON; left out when None.
    """
    parts = [framework_parts(report, fw) for fw in report.index.columns]
    newest = {c.id: "<br>".join(n for p in parts if (n := p[c.id][2]) is not None) for c in report.cases}
    return _ended(_template("conventions.md.j2").render(**_globals(report, json_sha256), case_dir=f"{CASES_DIR}/",
                                                        newest_md=newest))


def render_section_pages(report: Report, json_sha256: str | None = None) -> dict[str, str]:
    """The index's long sections (:data:`SECTION_PAGES`): file name (beside ``conventions.md``) → text.
    ``json_sha256`` as in :func:`render_markdown`."""
    g = _globals(report, json_sha256)
    template = _template("section.md.j2")
    return {name: _ended(template.render(**g, part=name[:-3], case_dir=f"{CASES_DIR}/")) for name in SECTION_PAGES}


def render_case_pages(report: Report, json_sha256: str | None = None) -> dict[str, str]:
    """Every case's page: file name (``<slug of case id>.md``, for ``cases/`` beside ``conventions.md``) → text,
    report order. Links to the index are ``../conventions.md#…``, to another case ``<slug>.md#case-<slug>``.
    ``json_sha256`` as in :func:`render_markdown` (in each page's footer). Each framework's tables come from
    :func:`framework_parts` (kept per framework)."""
    g = _globals(report, json_sha256)
    view = g["view"]
    template = _template("case.md.j2")
    cases = report.cases
    parts = [framework_parts(report, fw) for fw in report.index.columns]
    out = {}
    for i, case in enumerate(cases):
        cv = view.case_page_view(case.id)
        mine = [p[case.id] for p in parts]
        out[cv.file] = _ended(template.render(
            **g, cv=cv, case_dir="", prev=cases[i - 1] if i else None, next=cases[i + 1] if i + 1 < len(cases) else None,
            tables_md=[t for t, _, _ in mine if t is not None], modes_md=[m for _, m, _ in mine if m is not None]))
    return out


def framework_parts(report: Report, framework: str) -> dict[str, list[str | None]]:
    """Case → what its pages show of ``framework``: its table on the case page (``case-table.md.j2``), its modes
    table there (``case-modes.md.j2``) and its cell of the index's list of cases (``case-newest.md.j2``), each
    None where the framework has none; for every case of the report.

    Each is read from that framework's observations alone (:meth:`kinkcheck.render.view.ReportView.framework_tables`),
    so they are kept in the cache (kind ``case-parts``) under the judged keys of its shards (the shard's content,
    the judging code, the catalog and oracles, its environment record: ``report.judged_keys``), the report's dtypes
    and modes, its cases and the rendering code (:func:`_parts_key`): a render after one new shard renders its
    framework's parts alone. An entry that does not read back as written is rendered again, never an error."""
    view = report_view(report)
    got = view.parts.get(framework)
    if got is not None:
        return got
    key = _parts_key(report, framework)
    got = _kept_parts(key, [c.id for c in report.cases]) if key is not None else None
    if got is None:
        g = _globals(report, None)
        table, modes, newest = _template("case-table.md.j2"), _template("case-modes.md.j2"), _template("case-newest.md.j2")
        got = {}
        for case in report.cases:
            t, mt = view.framework_tables(case, framework)
            got[case.id] = [None if t is None else table.render(**g, t=t), None if mt is None else modes.render(**g, t=mt),
                            None if t is None else newest.render(**g, t=t)]
        if key is not None:
            _keep_parts(key, got)
    view.parts[framework] = got
    return got


def _parts_key(report: Report, framework: str) -> str | None:
    """The key :func:`framework_parts` keeps a framework's parts under; None when a shard of it has no judged key
    (a report decoded from its JSON, or a shard judged without one)."""
    keys = getattr(report, "judged_keys", None) or {}
    idx = report.index
    envs = idx.columns.get(framework, [])
    if not envs or any(e.id not in keys for e in envs):
        return None
    text = json.dumps([framework, [[e.id, keys[e.id]] for e in envs], idx.dtypes, idx.modes,
                       [c.id for c in report.cases], _parts_code()])
    return hashlib.sha256(text.encode()).hexdigest()[:40]


@cache
def _parts_code() -> str:
    """A digest of the code that renders a framework's parts (:func:`_parts_sources`; the parts show no version)."""
    h = hashlib.sha256()
    root = Path(__file__).resolve().parents[1]
    for path in _parts_sources():
        h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def _parts_sources() -> list[Path]:
    """Every module, template and table of the package, sorted: a page part reads the view, the templates and what
    they format with (anchors, numbers, labels, places, instruction-set levels, …); an edit anywhere renders the
    parts again once (a second), which no narrower list could promise not to need."""
    root = Path(__file__).resolve().parents[1]
    return sorted(p for pattern in ("**/*.py", "**/*.j2", "**/*.toml") for p in root.glob(pattern)
                  if "__pycache__" not in p.parts)


def _kept_parts(key: str, cases: Sequence[str]) -> dict[str, list[str | None]] | None:
    """A framework's parts kept under ``key``, None when absent or not the entry written under it (its first line,
    the digest of the key and the rest, does not match: damaged, edited or copied) or not one part per case."""
    got = read_signed("case-parts", key, touch=True)
    if not isinstance(got, dict) or list(got) != list(cases) or any(
            not isinstance(v, list) or len(v) != 3 or any(x is not None and not isinstance(x, str) for x in v)
            for v in got.values()):
        return None
    return got


def _keep_parts(key: str, parts: dict[str, list[str | None]]) -> None:
    write_signed("case-parts", key, json.dumps(parts, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def _ended(text: str) -> str:
    """``text`` ending in exactly one newline (a text file's last line ends like the others: clean diffs)."""
    return text.rstrip("\n") + "\n"


def render_operation_pages(report: Report, pages: Sequence[Any]) -> dict[str, str]:
    """Each operation's page of the site (:class:`kinkcheck.render.site.OperationPage`): its ``file`` (under the
    site's root) → text. Links to cases are ``../../report/cases/<slug>.md#<row anchor>``."""
    g = _globals(report, None)
    template = _template("operation.md.j2")
    return {p.file: _ended(template.render(**g, page=p)) for p in pages}


def render_site_index(report: Report, pages: Sequence[Any], rules: Any = None) -> str:
    """The site's first page: the counts, how to search, the rules table (``rules``: the rules file's document,
    :mod:`kinkcheck.rules.page`; none when the report has no rules file), and every operation's page, folded, with
    its kink and the releases where a program calling it changed convention (:func:`render_operation_pages`)."""
    g = _globals(report, None)
    groups: dict[str, list[Any]] = {}
    for p in pages:
        groups.setdefault(p.framework, []).append(p)
    table = "\n".join(front_table(rules, report.index.frameworks())) if rules is not None else None
    return _ended(_template("site-index.md.j2").render(**g, frameworks=report.index.frameworks(),
                                                       operations=list(groups.items()), rules_table=table))
