"""The report as a static site: MkDocs with the Material theme, fed the report's Markdown.

``nox -s site`` (or ``python -m kinkcheck.render.site``) writes a MkDocs project under ``build/site-src/`` and builds
it into ``build/site/``, which the Pages job of the CI workflow publishes:

- ``index.md`` — the counts, how to search, and every kinked operation the catalog's programs call (from the
  census, :func:`kinkcheck.report.query.operations`) with its kink and the releases where a program calling it changed
  convention: the first screen answers "what does X return at its kink, and when did that change";
- ``operations/<framework>/<operation>.md`` — one page per operation: every case and program that calls it, the
  values over releases (runs of equal releases, as the case pages show them), the rule's verdict, and the
  *Changed in* rows of those programs;
- ``report/`` — the committed report as it is (``conventions.md``, the section pages, one page per case with
  its plot, the data files), so the anchors ``kinkcheck cite`` prints land on the site too;
- ``guide/`` — the project's ``docs/``.

Search is Material's built-in (lunr, in a web worker, no request leaves the site). Its index holds each page's head
(an operation's kink and spellings, a case's title and oracle, the guide) and stays a few hundred kB, so the first
result comes within a second; the few lines of JavaScript the site adds (:data:`LAZY_INDEX`, in Material's
``custom_dir``) holds the index's request until the search box is first used. Every page, with what it loads before
interaction, stays under :data:`PAGE_BUDGET` bytes (tested, with the time to interactive in headless Chromium). An
operation's own page comes first when its exact name is searched (:func:`search_boost`). The release strips are
letters in boxes coloured from the Okabe–Ito palette (:data:`LABEL_LETTER`, :func:`site_css`), readable without an
emoji font or colour.
The Markdown is a function of the report alone; the HTML, of it and the pinned MkDocs and Material
(``pyproject.toml``'s ``site`` extra).
"""

from __future__ import annotations

import argparse
import math
import os
import re
import shutil
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import msgspec

from kinkcheck.language.anchors import slug
from kinkcheck.render.markdown import render_operation_pages, render_site_index
from kinkcheck.render.plots import case_svgs
from kinkcheck.render.view import ProgramRow, fmt_value, report_view
from kinkcheck.report.model import Case, ChangedIn, Report, ReportError, load_report
from kinkcheck.report.query import operations as all_operations
from kinkcheck.report.text import LABEL_LETTER, LABEL_MARK, NO_OBSERVATION, NO_OBSERVATION_LETTER
from kinkcheck.rules import doc

__all__ = ["LABEL_LETTER", "LAZY_INDEX", "PAGE_BUDGET", "OperationPage", "SiteError", "build_site", "main",
           "loaded_sizes", "operation_pages", "page_sizes", "search_boost", "site_css", "strip_marks", "write_source"]

#: The most bytes one page of the site may load before interaction: its HTML, the stylesheets, scripts and images it
#: references (the issue's budget, with every page interactive in ≤ 2 s). The search index is not among them: it is
#: fetched on the first use of search (:data:`LAZY_INDEX`).
PAGE_BUDGET = 1_000_000
#: The report files the site copies as they are (beside the Markdown pages): the data, the census plot.
DATA_FILES = ("observations.parquet", "conventions.json.gz", "rules.json.gz", "kinkhits.svg")


class SiteError(ValueError):
    """The site cannot be built (no report, MkDocs missing, a page over budget); ``str(err)`` is one line."""


@dataclass(slots=True)
class ProgramLine:
    """A program that calls the operation, in one case: its row of the case page (runs, verdicts, anchor)."""

    case: Case
    at: str
    row: ProgramRow


@dataclass(slots=True)
class OperationPage:
    """One operation's page: ``name`` (the census's name, or the dotted name where the framework has no
    census), its ``spellings`` the programs use, the census's ``kink``, and per calling program its row."""

    framework: str
    name: str
    spellings: list[str]
    kink: str
    cases: list[str]
    programs: list[str]
    file: str
    rows: list[ProgramLine] = field(default_factory=list)
    unmeasured: list[tuple[str, str]] = field(default_factory=list)  # (case, program) with no row
    changed_in: list[tuple[ChangedIn, str]] = field(default_factory=list)  # (change, case)
    #: "2.13.0 → 2.14.1": the releases between which a program's reverse-mode float64 value changed, newest first
    changes: list[str] = field(default_factory=list)
    #: Material's per-page search boost (front matter ``search: boost``): :func:`search_boost`
    boost: float = 1.0
    #: What its programs return in their newest CPU release (reverse mode, float64): ``"0 left"``, ``"error"``, the
    #: most common first, at most :data:`RETURNS_SHOWN`; ``returns_more``: how many other values there are
    returns: list[str] = field(default_factory=list)
    returns_more: int = 0


def operation_pages(report: Report, operations: Sequence[Any] | None = None) -> list[OperationPage]:
    """The operation pages of ``report``: one per census operation a program calls (its spellings merged:
    ``torch.clamp``, ``.clamp``, ``torch.clip``), and for a framework without a census one per name that another
    framework's census lists as kinked, every spelling of it together (``clamp``: ``x.clamp``,
    ``mindspore.ops.clamp``, ``mindspore.mint.clamp``).

    ``operations``: :func:`kinkcheck.report.query.operations` (the default), for a test to pass its own."""
    ops = list(all_operations() if operations is None else operations)
    kinked = {s.rsplit(".", 1)[-1].lower() for o in ops if o.census for s in (o.name, o.census)}
    census_frameworks = {o.framework for o in ops if o.census}
    groups: dict[tuple[str, str], list[Any]] = {}
    for o in ops:
        if o.census:
            groups.setdefault((o.framework, o.census), []).append(o)
        elif o.framework not in census_frameworks and o.name.rsplit(".", 1)[-1].lower() in kinked:
            groups.setdefault((o.framework, o.name.rsplit(".", 1)[-1].lower()), []).append(o)  # x.clip, paddle.clip
    view = report_view(report)
    case_order = {c.id: i for i, c in enumerate(report.cases)}
    cases_by_id = {c.id: c for c in report.cases}
    frameworks = {fw: i for i, fw in enumerate(report.index.frameworks())}
    pages = []
    for (fw, name), members in sorted(groups.items(), key=lambda kv: (frameworks.get(kv[0][0], len(frameworks)),
                                                                       kv[0][1].lstrip(".").lower(), kv[0][1])):
        cases = sorted({c for o in members for c in o.cases if c in case_order}, key=case_order.__getitem__)
        programs = list(dict.fromkeys(p for o in members for p in o.programs))
        page = OperationPage(framework=fw, name=name, spellings=sorted({o.name for o in members}),
                             kink=next((o.kink for o in members if o.kink), ""), cases=cases, programs=programs,
                             file=f"operations/{slug(fw)}/{slug(name.lstrip('.')) or 'op'}.md")
        wanted = set(programs)
        for cid in cases:
            cv = view.case_view(cid)
            rows = {r.program: r for t in cv.tables if t.framework == fw for r in t.rows}
            for q in cases_by_id[cid].programs:
                if q.framework != fw or q.program not in wanted:
                    continue
                if q.program in rows:
                    page.rows.append(ProgramLine(case=cases_by_id[cid], at=_at(cases_by_id[cid]),
                                                 row=rows[q.program]))
                else:
                    page.unmeasured.append((cid, q.program))
            for c in cv.changed_in:
                if c.framework != fw:
                    continue
                if c.program in wanted:
                    page.changed_in.append((c, cid))
                elif wanted.intersection(c.programs):  # "N programs" of the case: name the operation's own
                    own = [p for p in c.programs if p in wanted]
                    page.changed_in.append((msgspec.structs.replace(c, program=", ".join(own), programs=own), cid))
        page.returns, page.returns_more = _returns(page.rows)
        page.changed_in = _newest_first(page.changed_in, report)
        for c, _ in page.changed_in:  # the headline: what the table above shows (reverse mode, float64)
            step = f"{c.from_version} → {c.to_version}" + (f" {c.device}" if c.device != "cpu" else "")
            if c.kind == "convention" and "reverse" in c.modes and "float64" in c.dtypes and step not in page.changes:
                page.changes.append(step)
        pages.append(page)
    bare = {_bare(p.name) for p in pages}
    for page in pages:  # among pages of one name, the report's order of frameworks (torch first) breaks the tie
        rank = frameworks.get(page.framework, len(frameworks))
        page.boost = round(search_boost(page.name, bare) + (len(frameworks) - rank) / 10, 2)
    return pages


#: Search boosts (front matter ``search: boost``) of an operation's page, and of one whose name extends another
#: page's name (``clamp_max`` beside ``clamp``, ``relu6`` beside ``relu``). Lunr gives a rarer term a higher weight,
#: and Material searches ``clamp*``, so without the lower boost ``torch.clamp_max`` outranks ``torch.clamp`` for
#: "clamp". Case pages keep Material's 1.
OPERATION_BOOST, EXTENDED_BOOST = 12.0, 3.0


def _bare(name: str) -> str:
    """An operation's name without its module, lower case: ``torch.nn.functional.relu6`` → ``relu6``."""
    return name.rsplit(".", 1)[-1].lower()


def search_boost(name: str, names: set[str]) -> float:
    """The search boost of the page of operation ``name`` among the bare ``names`` of every operation page:
    :data:`EXTENDED_BOOST` where its bare name starts with another one (``clamp_max``: ``clamp``; ``maximum``:
    ``max``), else :data:`OPERATION_BOOST`, so that the page named exactly what was searched comes first."""
    own = _bare(name)
    return EXTENDED_BOOST if any(own != n and own.startswith(n) for n in names if n) else OPERATION_BOOST


#: The most values an operation's row on the site's first page names (:attr:`OperationPage.returns`).
RETURNS_SHOWN = 3


def _returns(rows: Sequence[ProgramLine]) -> tuple[list[str], int]:
    """The values ``rows`` return in their newest CPU release, most common first (ties in first-seen order), the
    first :data:`RETURNS_SHOWN` of them, and how many others."""
    seen: Counter[str] = Counter()
    for line in rows:
        runs = next((runs for device, runs in line.row.runs if device == "cpu"), None)
        face = runs[-1].cell.face if runs else None
        if face is not None:
            seen[f"{face.value} {face.label}" if face.status == "ok" else face.status] += 1
    ranked = [v for v, _ in seen.most_common()]
    return ranked[:RETURNS_SHOWN], max(0, len(ranked) - RETURNS_SHOWN)


def _at(case: Case) -> str:
    """Where the case's kink is: ``x = 0``, ``x = [1, 1], y = 0``."""
    return ", ".join(f"{name} = {fmt_value({name: v})}" for name, v in case.at.items())


def _newest_first(changes: list[tuple[ChangedIn, str]], report: Report) -> list[tuple[ChangedIn, str]]:
    """``changes`` newest release first (the report's order of environments), then by case and program."""
    order = {e.id: i for i, e in enumerate(report.environments)}
    case_order = {c.id: i for i, c in enumerate(report.cases)}
    return sorted(changes, key=lambda pair: (-order.get(pair[0].to_environment, -1), case_order.get(pair[1], 0),
                                             pair[0].program, pair[0].kind))


def _case_plots(report: Report) -> dict[str, str]:
    """Case id → SVG plot (:func:`kinkcheck.render.plots.case_svgs`): the newest CPU release's first components
    per framework (reverse mode, float64; non-finite ones left out, the tables have them) and the oracle's
    one-sided derivatives."""
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
    for case in report.cases:
        marks = sorted((fw, v, n) for (fw, v), n in values.get(case.id, {}).items())
        side = [e.float_ if e is not None and isinstance(e.float_, float | int) and math.isfinite(e.float_) else None
                for e in (case.oracle.left, case.oracle.right)]
        requests.append((case, marks, side[0], side[1]))
    return {r[0].id: svg for r, svg in zip(requests, case_svgs(requests), strict=True)}


#: The site's stylesheet, before the marks (:func:`site_css`): the tables of values take the page's width (Material
#: keeps text to a column).
_CSS = """.md-grid { max-width: 100rem; }
.md-typeset table:not([class]) { font-size: .7rem; }
.md-typeset table:not([class]) td, .md-typeset table:not([class]) th { padding: .4em .8em; }
.md-typeset .kc { display: inline-block; min-width: 1.25em; margin: 0 1px; border: 2px solid; border-radius: 3px;
  font: bold .7rem/1.2 monospace; text-align: center; text-decoration: none; vertical-align: middle; }
"""

#: Each family's colour, the hue the report's legend names (Okabe & Ito's colour-blind-safe palette; a brown and
#: greys beside it): its first label is drawn filled, its second outlined, its third dashed, each with its letter, so
#: no two labels differ by hue alone.
FAMILY_COLOUR: dict[str, tuple[str, str]] = {  # family → (colour, text on it)
    "derivative or minimum norm": ("#009E73", "#fff"),
    "one-sided": ("#0072B2", "#fff"),
    "a piece's slope at a jump": ("#56B4E9", "#000"),
    "midpoint": ("#F0E442", "#000"),
    "tie to one piece": ("#E69F00", "#000"),
    "elsewhere in the Clarke set": ("#8C6D31", "#fff"),
    "not a generalized gradient": ("#D55E00", "#fff"),
    "not finite": ("#CC79A7", "#000"),
    "raised": ("#000000", "#fff"),
    "nothing to judge": ("#999999", "#000"),
    "judged by the program's own constants (never first)": ("#999999", "#000"),
    "no observation": ("#cccccc", "#000"),
}


def _mark_styles() -> dict[str, tuple[str, str, str]]:
    """Label (``""`` for no observation) → (CSS class, letter, CSS declarations): the family's colour, filled for its
    first label, outlined for the second, dashed for the third."""
    seen: dict[str, int] = {}
    out = {}
    for label, m in [*LABEL_MARK.items(), ("", NO_OBSERVATION)]:
        colour, ink = FAMILY_COLOUR[m.family]
        n = seen[m.family] = seen.get(m.family, -1) + 1
        style = f"background: {colour}; color: {ink}; border-color: {colour};" if n == 0 and label else \
            f"background: #fff; color: #000; border-color: {colour};" + (" border-style: dashed;" if n >= 2 or not label
                                                                         else "")
        out[label] = ("kc-" + (slug(label.replace("+", "plus-").replace("-inf", "minus-inf")) if label else "none"),
                      LABEL_LETTER.get(label, NO_OBSERVATION_LETTER), style)
    return out


def site_css() -> str:
    """The site's stylesheet: :data:`_CSS` and one rule per strip mark (:func:`_mark_styles`)."""
    return _CSS + "".join(f".md-typeset .kc.{cls} {{ {style} }}\n" for cls, _, style in _mark_styles().values())


def strip_marks(text: str) -> str:
    """``text`` (a report page's Markdown) with every strip emoji drawn as its letter in a box: a strip's anchor
    (``<a id="…" title="2.13.0: 1 right">🔵</a>``) keeps its id and title and becomes the box (one element, as
    before); elsewhere (the legend, the index's newest releases) a ``<span>`` box carries the label as its title."""
    styles = _mark_styles()
    by_emoji = {m.emoji: label for label, m in LABEL_MARK.items()} | {NO_OBSERVATION.emoji: ""}
    alternatives = "|".join(re.escape(e) for e in sorted(by_emoji, key=len, reverse=True))

    def box(m: re.Match[str]) -> str:
        label = by_emoji[m.group(0)]
        cls, letter, _ = styles[label]
        return f'<span class="kc {cls}" title="{label or "no observation"}">{letter}</span>'

    def square(m: re.Match[str]) -> str:
        cls, letter, _ = styles[by_emoji[m.group(2)]]
        return f'{m.group(1)} class="kc {cls}">{letter}</a>'

    text = re.sub(rf'(<a id="[^"]*" title="[^"]*")>({alternatives})</a>', square, text)
    return re.sub(alternatives, box, text)
#: Front matter that keeps a page out of Material's search index.
_NOT_SEARCHED = "---\nsearch:\n  exclude: true\n---\n"


def _searched_head(text: str) -> str:
    """A case page whose sections after the title and the oracle (one per framework, the modes, *Changed in*, at
    every heading level) are kept out of the search index (Material's ``data-search-exclude``): the search finds
    the case by its title, function and oracle, and the index stays a few hundred kB instead of ten MB."""
    out = []
    for line in text.split("\n"):
        if line.startswith("##") and "Oracle" not in line and "data-search-exclude" not in line:
            line += " { data-search-exclude }"
        out.append(line)
    return "\n".join(out)


def _title_first(text: str) -> str:
    """A report page whose first line, the *generated* comment, is moved after its title: Material's search
    otherwise indexes an empty entry for the whitespace before the title, beside the title's own."""
    comment, _, rest = text.partition("\n")
    title, _, rest = rest.partition("\n")
    if not (comment.startswith("<!--") and comment.endswith("-->") and title.startswith("# ")):
        return text
    return f"{title}\n{comment}\n{rest}"


def _guide_links(text: str) -> str:
    """A ``docs/`` page's links as they resolve on the site: the repository's ``../reports/`` is the site's
    ``../report/``, its README the site's first page; other links outside ``docs/`` go to the repository's
    files, which the site does not hold, so they are left as text."""
    text = text.replace("](../reports/", "](../report/").replace("](../README.md", "](../index.md")

    def outside(m: re.Match[str]) -> str:
        return m.group(1)  # [text](../src/…): the text alone

    return re.sub(r"\[([^\]]*)\]\(\.\./(?!report/|index\.md)[^)]*\)", outside, text)


def _mkdocs_yml(docs: Sequence[str]) -> str:
    """The MkDocs configuration: Material, its search, no web fonts (nothing is fetched from elsewhere), the
    ``.md`` → ``.html`` mapping kept (``use_directory_urls: false``) so a report link keeps its anchor."""
    guide = "\n".join(f"    - guide/{name}" for name in docs)
    return f"""{_YML_HEAD}
site_name: kinkcheck — gradient conventions at kinks
site_description: What autodiff frameworks return where a function has no derivative, measured.
docs_dir: docs
site_dir: site
use_directory_urls: false
strict: false
theme:
  name: material
  custom_dir: overrides
  font: false
  features:
    - search.suggest
    - search.highlight
    - navigation.top
extra_css:
  - kinkcheck.css
plugins:
  - search:
      separator: '[\\s\\-,:!=\\[\\]()"/]+|\\.(?!\\d)'
      pipeline: []
markdown_extensions:
  - tables
  - attr_list
  - md_in_html
  - pymdownx.superfences
  - toc:
      permalink: false
nav:
  - Home: index.md
  - Report: report/conventions.md
  - Rules: report/rules.md
  - Guide:
{guide}
not_in_nav: |
  /operations/
  /report/
validation:
  nav:
    omitted_files: info
    not_found: info
    absolute_links: info
  links:
    not_found: info
    anchors: info
    absolute_links: info
    unrecognized_links: info
"""


def write_source(report_dir: Path, out: Path, docs: Path | None = None, report: Report | None = None) -> Path:
    """Write the MkDocs project of the report in ``report_dir`` (``reports/``) into ``out``, replacing it;
    return its ``mkdocs.yml``. ``docs``: the guide's folder (``docs/``), left out when None.

    Raises
    ------
    SiteError
        No report in ``report_dir`` (or it cannot be read).
    """
    if report_dir.is_file():  # the report's file given instead of its folder
        report_dir = report_dir.parent
    try:
        report = report or load_report(report_dir / "conventions.json.gz")
    except ReportError as err:
        raise SiteError(str(err)) from None
    _clear(out)
    src = out / "docs"
    (src / "report" / "cases").mkdir(parents=True)
    pages = operation_pages(report)
    rules = None
    if (report_dir / "rules.json.gz").is_file():

        try:
            rules = doc.load(report_dir / doc.FILE)
        except doc.RulesUnreadable as err:
            raise SiteError(str(err)) from None
    (src / "index.md").write_text(render_site_index(report, pages, rules), encoding="utf-8")
    for name, text in render_operation_pages(report, pages).items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_text(text, encoding="utf-8")
    for page in sorted(report_dir.glob("*.md")):  # the section pages' long lists stay out of the search index
        text = strip_marks(page.read_text(encoding="utf-8"))
        if page.name == "conventions.md":  # its head only: the counts, the sections' names
            text = _searched_head(text)
        (src / "report" / page.name).write_text(text if page.name == "conventions.md" else _NOT_SEARCHED + text,
                                                encoding="utf-8")
    for name in DATA_FILES:
        if (report_dir / name).is_file():
            shutil.copyfile(report_dir / name, src / "report" / name)
    plots = _case_plots(report)
    for case in report.cases:
        file = report_view(report).case_view(case.id).file
        page = report_dir / "cases" / file
        if not page.is_file():
            continue
        text = _title_first(strip_marks(page.read_text(encoding="utf-8")))
        if case.id in plots:  # the plot under the title, as an image beside the page
            svg = file[:-3] + ".svg"
            (src / "report" / "cases" / svg).write_text(plots[case.id], encoding="utf-8")
            head, _, rest = text.partition("\n\n")
            title_end = rest.find("\n\n")
            text = f"{head}\n\n{rest[:title_end]}\n\n![{case.id}: the measured derivatives and the oracle's " \
                   f"one-sided derivatives]({svg})\n\n{rest[title_end + 2:]}"
        title = f"{case.id} — {case.title}".replace('"', "'")
        head = f'---\ntitle: "{title}"\nhide:\n  - navigation\n---\n'  # the tables take the nav's width
        (src / "report" / "cases" / file).write_text(head + _searched_head(text),
                                                     encoding="utf-8")
    guide = []
    if docs is not None and docs.is_dir():
        (src / "guide").mkdir()
        for page in sorted(docs.glob("*.md")):
            (src / "guide" / page.name).write_text(_guide_links(page.read_text(encoding="utf-8")), encoding="utf-8")
            guide.append(page.name)
        guide.sort(key=lambda n: (n != "index.md", n))
    (src / "kinkcheck.css").write_text(site_css(), encoding="utf-8")
    (out / "overrides").mkdir()
    (out / "overrides" / "main.html").write_text(LAZY_INDEX, encoding="utf-8")
    yml = out / "mkdocs.yml"
    yml.write_text(_mkdocs_yml(guide), encoding="utf-8")
    return yml


#: Material's template override (``overrides/main.html``, the theme's ``custom_dir``): Material requests the search
#: index (``search/search_index.json``, every page's head) as each page loads; this holds that one request until the
#: search box is first focused (or the search toggle opened), so a page costs what it shows. The rest of search
#: (the lunr worker, the results) is Material's own.
LAZY_INDEX = """{% extends "base.html" %}
{% block scripts %}
<script>
/* kinkcheck: fetch the search index on the first use of search, not as the page loads (kinkcheck.render.site). */
(function () {
  var open = XMLHttpRequest.prototype.open, send = XMLHttpRequest.prototype.send, used = false, held = [];
  function use() { if (!used) { used = true; held.forEach(function (h) { send.apply(h[0], h[1]); }); held = []; } }
  XMLHttpRequest.prototype.open = function (method, url) {
    this.kcIndex = /search_index\\.json$/.test(String(url)); return open.apply(this, arguments); };
  XMLHttpRequest.prototype.send = function () {
    if (this.kcIndex && !used) held.push([this, arguments]); else send.apply(this, arguments); };
  document.addEventListener("focusin", function (e) {
    if (e.target.matches && e.target.matches("[data-md-component=search-query]")) use(); });
  document.addEventListener("change", function (e) { if (e.target.id === "__search") use(); });
})();
</script>
{{ super() }}
{% endblock %}
"""

#: The first line of the ``mkdocs.yml`` this module writes: a folder holding it is one it may replace.
_YML_HEAD = "# Generated by `python -m kinkcheck.render.site`: do not edit by hand."


def _clear(out: Path) -> None:
    """Remove the MkDocs project an earlier build wrote at ``out``; anything else there is refused, never removed.

    Raises
    ------
    SiteError
        ``out`` is a file, or a folder with files that this command did not write (``--out reports`` or ``--out
        .`` would otherwise delete them).
    """
    if not os.path.lexists(out):
        return
    yml = out / "mkdocs.yml"
    ours = out.is_dir() and not out.is_symlink() and yml.is_file() and \
        yml.read_text(encoding="utf-8", errors="replace").startswith(_YML_HEAD)
    if not ours:
        if out.is_dir() and not out.is_symlink() and not any(out.iterdir()):
            return
        raise SiteError(f"--out {out}: exists and is not a site this command wrote (no generated mkdocs.yml); "
                        "name a new folder, e.g. build/site-src")
    try:
        shutil.rmtree(out)
    except OSError as err:
        raise SiteError(f"--out {out}: cannot remove the earlier build ({err.strerror or err})") from None


def build_site(report_dir: Path, out: Path, docs: Path | None = None, report: Report | None = None) -> Path:
    """:func:`write_source` into ``out``, then ``mkdocs build`` (in this process) into ``out/site``; return that.

    Raises
    ------
    SiteError
        As :func:`write_source`; MkDocs or Material is not installed (``pip install -e .[site]``); a page over
        :data:`PAGE_BUDGET`.
    """
    import logging  # slow to import

    try:
        from mkdocs.commands.build import build
        from mkdocs.config import load_config
    except ImportError:
        raise SiteError("MkDocs is not installed: pip install -e .[site] (or run `nox -s site`)") from None
    yml = write_source(report_dir, out, docs, report)
    logging.getLogger("mkdocs").setLevel(logging.WARNING)
    try:
        build(load_config(str(yml)))
    except Exception as err:  # mkdocs raises its own Abort/ConfigurationError, or the theme's: one line
        raise SiteError(f"mkdocs build failed: {' '.join(str(err).split())[:300]}") from None
    site = out / "site"
    over = {p: n for p, n in loaded_sizes(site).items() if n > PAGE_BUDGET}
    if over:
        worst = max(over, key=over.__getitem__)
        raise SiteError(f"{len(over)} page(s) over {PAGE_BUDGET:,} bytes with what they load, e.g. {worst} "
                        f"({over[worst]:,})")
    return site


def page_sizes(site: Path) -> dict[str, int]:
    """Every HTML page of a built site (path relative to it) → its size in bytes."""
    return {str(p.relative_to(site)): p.stat().st_size for p in sorted(site.rglob("*.html"))}


#: What a page fetches as it loads: its scripts, images, stylesheets and icon, and Material's search worker (named
#: in the page's ``__config``; the worker starts at load, the index it searches comes on first use).
_LOADS = (r'<(?:script|img)\b[^>]*\bsrc="([^"]+)"', r'<link\b[^>]*\brel="(?:stylesheet|icon)"[^>]*\bhref="([^"]+)"',
          r'"search":\s*"([^"]+)"')


def loaded_sizes(site: Path) -> dict[str, int]:
    """Every HTML page of a built site (path relative to it) → the bytes it loads before interaction: its HTML and
    each file of the site it references (:data:`_LOADS`), once each: at least what Chromium fetches for the page
    (tests/render/test_site.py compares them; the worker's own fetch is not the page's there)."""
    out = {}
    for page in sorted(site.rglob("*.html")):
        html = page.read_text(encoding="utf-8", errors="replace")
        files = set()
        for pattern in _LOADS:
            for ref in re.findall(pattern, html):
                if "://" in ref or ref.startswith(("data:", "//")):
                    continue  # nothing the site's pages reference lies elsewhere (tested in Chromium)
                path = (site / ref.split("#")[0].split("?")[0]) if ref.startswith("/") else \
                    (page.parent / ref.split("#")[0].split("?")[0])
                if path.is_file():
                    files.add(path.resolve())
        out[str(page.relative_to(site))] = page.stat().st_size + sum(f.stat().st_size for f in files)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m kinkcheck.render.site [--reports reports] [--docs docs] [--out build/site-src]``."""
    def folder(text: str) -> Path:  # an empty one would be the current folder, without a word
        if not text.strip():
            raise argparse.ArgumentTypeError("is empty: name a folder, or leave it out for the default")
        return Path(text)

    ap = argparse.ArgumentParser(prog="python -m kinkcheck.render.site",
                                 description="Build the report's static site (MkDocs, Material theme).")
    def error(message: str) -> NoReturn:  # one line and exit 2, as the other bad inputs here
        print(f"site: {message}", file=sys.stderr)
        raise SystemExit(2)

    ap.error = error  # type: ignore[method-assign]
    ap.add_argument("--reports", type=folder, default=Path("reports"), help="the rendered report (default: reports)")
    ap.add_argument("--docs", type=folder, default=Path("docs"), help="the guide's pages (default: docs)")
    ap.add_argument("--out", type=folder, default=Path("build/site-src"),
                    help="the MkDocs project to write; the site goes into OUT/site (default: build/site-src)")
    args = ap.parse_args(argv)
    try:
        site = build_site(args.reports, args.out, args.docs)
    except OSError as err:  # an unwritable --out, a full disk: one line, as every bad input
        print(f"site: {getattr(err, 'filename', None) or args.out}: {err.strerror or err}", file=sys.stderr)
        return 2
    except SiteError as err:
        print(f"site: {err}", file=sys.stderr)
        return 2
    sizes = page_sizes(site)
    biggest = max(sizes, key=sizes.__getitem__)
    print(f"wrote {site}/index.html: {len(sizes)} pages, the biggest {biggest} ({sizes[biggest] / 1e3:,.0f} kB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
