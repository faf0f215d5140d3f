"""``kinkcheck cite``: one sentence, ready to paste, stating a measured convention, and a citation entry.

The sentence names the value, its label, the framework release, device, dtype and mode, whether the value
follows the framework's documented rule, and where the report shows it: the program's row on the case's own
page, ``reports/cases/<case>.md#case-<case>--<framework>-<program>`` (the same anchor names the row on the
site's page of the case, ``report/cases/<case>.html``: :mod:`kinkcheck.render.site`). The entry cites the report as a dataset (BibTeX ``@misc`` or a
CITATION.cff ``references`` item), with its generation date and catalog hash. Everything comes from the
typed report (:class:`kinkcheck.report.model.Report`); nothing is measured here.

``kinkcheck cite --rule OPERATION[@KIND]`` cites a rule instead (:func:`cite_rule`): what one operation returns at
one kind of kink, read from ``rules.json.gz`` beside the report, stated for the run of releases where it holds,
with its stable id (``torch.clamp@max-at-a-bound``), its anchor on ``rules.md``, its evidence cells (their values
from ``observations.parquet``) and every counter-example; a summary of measured cells, said to be one.
"""

from __future__ import annotations

import difflib
import json
import shlex
import tomllib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from kinkcheck.catalog import FRAMEWORKS
from kinkcheck.language.anchors import slug
from kinkcheck.language.decimals import decimal, decimal_value, decimal_vector
from kinkcheck.platforms import DEFAULT as DEFAULT_PLATFORM
from kinkcheck.platforms import place_title
from kinkcheck.registry import view
from kinkcheck.report.cells import CellError, cells_of, check_cell, stated_case
from kinkcheck.report.model import DTYPES, MODES, Case, Environment, Observation, Report
from kinkcheck.report.query import DatasetError, nearest_programs, read_table, source_tree
from kinkcheck.report.text import CASES_DIR, LABEL_HELP, case_page, mode_anchor, release_anchor, row_anchor
from kinkcheck.rules import PAGE
from kinkcheck.rules.page import LABEL_WORDS, rule_anchor, rule_id
from kinkcheck.vocabulary import release_key

__all__ = ["Citation", "CiteError", "RuleCitation", "bibtex", "cff", "cite", "cite_rule", "find_rule", "site_base",
           "site_url"]

#: cite's errors are the report cells' (:class:`kinkcheck.report.cells.CellError`): one class for a face to catch.
CiteError = CellError

FRAMEWORK_NAMES = view(lambda f: f.display)
REPORT_MD = "reports/conventions.md"


#: The site's page of the report's index, relative to the site's root (:mod:`kinkcheck.render.site` writes the
#: report under ``report/``): a link base of the site is ``SITE/report/conventions.html``.
SITE_REPORT_PAGE = "report/conventions.html"


def site_url() -> str | None:
    """The published site's root URL, ending in ``/``: the ``Documentation`` URL of ``[project.urls]``, read from
    ``pyproject.toml`` in a source tree (a clone, an editable install) and from the installed distribution's
    metadata (``Project-URL: Documentation, …``) otherwise; None when neither names one."""
    url = None
    if source_tree():

        try:
            with open(Path(__file__).resolve().parents[3] / "pyproject.toml", "rb") as fh:
                url = tomllib.load(fh).get("project", {}).get("urls", {}).get("Documentation")
        except (OSError, tomllib.TOMLDecodeError):
            url = None
    if url is None:

        try:
            entries = metadata.metadata("kinkcheck").get_all("Project-URL") or []
        except metadata.PackageNotFoundError:
            entries = []
        url = next((u.strip() for label, _, u in (e.partition(",") for e in entries)
                    if label.strip().lower() == "documentation"), None)
    return url.rstrip("/") + "/" if isinstance(url, str) and url.strip() else None


def site_base(link_base: str | None) -> str:
    """The base :meth:`Citation.link` and :meth:`RuleCitation.link` start from: ``link_base`` when given
    (``--link-base``), else the site's report page (:func:`site_url` + :data:`SITE_REPORT_PAGE`), else the
    ``reports`` folder (no site URL known)."""
    site = site_url()
    if link_base is not None:
        if site and link_base.strip().rstrip("/") + "/" == site:  # the site's root itself: its report page
            return site + SITE_REPORT_PAGE
        return link_base
    return site + SITE_REPORT_PAGE if site else "reports"


def _base_folder(base: str) -> tuple[str, str]:
    """The reports folder a link base names and the suffix of its pages: a folder (a path or URL) → itself,
    ``.md``; a ``.md`` or ``.html`` page → its folder and its suffix, the report's folder when the page is a case
    page (``…/report/cases/relu-at-0.html``: its ``cases/`` is the report's, not another level)."""
    base = base.rstrip("/") or "."
    if not base.endswith((".md", ".html")):
        return base, ".md"
    suffix = ".html" if base.endswith(".html") else ".md"
    folder = base.rpartition("/")[0] or "."
    if folder == CASES_DIR or folder.endswith("/" + CASES_DIR):
        folder = folder[: -len(CASES_DIR)].rstrip("/") or "."
    return folder, suffix


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
        ``…/report/conventions.html``, or a case page, ``…/report/cases/relu-at-0.html``) → the site's case page,
        ``…/report/cases/<case>.html#anchor`` (:func:`_base_folder`)."""
        base, suffix = _base_folder(base)
        return f"{base}/{self.page[:-3]}{suffix}#{self.anchor}"


def cite(report: Report, program: str, case: str | None = None, framework_version: str | None = None,
         mode: str = "reverse", dtype: str = "float64", device: str = "cpu",
         framework: str | None = None) -> Citation:
    """The citation sentence for one cell of the report.

    Parameters
    ----------
    report : Report
        The report (:func:`kinkcheck.report.cells.load_report_for` of ``reports/conventions.json``).
    program : str
        A program of the catalog, e.g. ``"torch.clamp(x, min=0)"`` (``jnp``/``F``/``lax`` aliases accepted).
    case : str, optional
        Case id. Default: the program's principal case (:func:`kinkcheck.report.cells.principal_case`); the others
        are in :attr:`Citation.others`.
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
    cells = cells_of(report, program, framework)
    if framework is not None and framework not in FRAMEWORKS:
        raise CiteError(f"unknown framework {framework!r} (known: {', '.join(FRAMEWORKS)})")
    if case is not None:
        if case not in ix.case:

            near = difflib.get_close_matches(case, list(ix.case), n=5, cutoff=0.3)
            raise CiteError(f"unknown case {case!r}" + (f" (nearest: {', '.join(near)})" if near else ""))
        chosen = [cell for cell in cells if cell[0].id == case]
        if not chosen:
            raise CiteError(f"case {case!r} has no program {program!r}"
                            + (f" in {framework}" if framework is not None else ""))
    elif not cells:

        near = nearest_programs(program, sorted({p.program for c in report.cases for p in c.programs
                                                 if framework is None or p.framework == framework}))
        raise CiteError(f"program {program!r} is not in the report's catalog"
                        + (f" for {framework}" if framework is not None else "")
                        + (f"; nearest: {'; '.join(near)}" if near else ""))
    else:
        first = stated_case(cells, None)
        chosen = [cell for cell in cells if cell[0].id == first]
    if len({fw for _, _, fw in chosen}) > 1:
        fws = list(dict.fromkeys(fw for _, _, fw in chosen))
        raise CiteError(f"{chosen[0][1]} is a program of {', '.join(fws[:-1])} and {fws[-1]} at "
                        f"{chosen[0][0].id}; pick one with --framework")
    c, pid, framework = chosen[0]
    others = tuple(dict.fromkeys(cc.id for cc, _, fw in cells if cc.id != c.id and fw == framework))
    check_cell(framework, mode, dtype)
    read_for = getattr(report, "read_for_cell", None)  # load_report(..., one_cell=True): that cell's rows only
    if read_for is not None and read_for != (c.id, mode, dtype):
        raise CiteError(f"this report was read for the cell {read_for[0]}, {read_for[1]} mode, {read_for[2]} "
                        f"(load_report(..., one_cell=True)): read it for {c.id}, {mode} mode, {dtype}, or whole")
    # the framework's releases measured at all, oldest first: the environments the table's index names (the
    # report holds only the stated cell's rows), so the answer and the anchor are the full report's
    held = [e for e in report.environments if e.framework == framework and e.id in ix.env_modes]
    envs = [e for e in held if e.place == device]
    if not envs:
        places = sorted({e.place for e in held})
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
    tabled = ix.modes_release(framework, held)
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


# --- citing a rule -----------------------------------------------------------------------------------------------

#: What a kind of kink is, in a user's words: the local form's node at its kink (``torch.clamp(x, lo, hi)`` is
#: ``Min(Max(x, lo), hi)``: its lower bound is the ``Max``, its upper bound the ``Min``).
KIND_WORDS = {
    "max at a bound": "a lower bound, max(x, bound), as clamp's min= or relu's 0",
    "min at a bound": "an upper bound, min(x, bound), as clamp's max=",
    "max at a tie": "a tie between the largest inputs of a max",
    "min at a tie": "a tie between the smallest inputs of a min",
    "a jump": "a discontinuity of the function",
}

#: Most programs whose evidence cells ``cite --rule`` lists (the rest: ``kinkcheck rules OPERATION --json``);
#: counter-examples are never capped.
MAX_EVIDENCE = 8


@dataclass(frozen=True)
class RuleCitation:
    """One cited rule (:func:`cite_rule`): the sentence, the rule's stable id (:func:`kinkcheck.rules.page.rule_id`)
    and its anchor on the rules page, the releases and the slice it is stated for (``CPU, float64, reverse mode``),
    its labels over the releases of that slice (:attr:`history`), the evidence cells it rests
    on (one line per program, runs of releases grouped; at most :data:`MAX_EVIDENCE`, :attr:`more` not shown) and
    every counter-example cell, in any mode, dtype and device (one line per run of releases)."""

    sentence: str
    rule: str
    anchor: str
    framework: str
    operation: str
    kind: str
    labels: tuple[str, ...]
    releases: tuple[str, str]
    slice: str
    history: str
    evidence: tuple[str, ...]
    more: int
    counterexamples: tuple[str, ...]
    counter_cells: int = 0

    def link(self, base: str = "reports") -> str:
        """The rule's place on the rules page: ``base`` as :meth:`Citation.link` reads it → ``base/rules.md#anchor``
        (a ``.md`` page → ``rules.md`` beside it; a ``.html`` page of the site → ``rules.html`` beside it)."""
        base, suffix = _base_folder(base)
        return f"{base}/{PAGE.removesuffix('.md')}{suffix}#{self.anchor}"


def _squeezed(text: str) -> str:
    return "".join(text.split())


def find_rule(doc: Mapping[str, Any], spec: str, framework: str | None = None) -> Mapping[str, Any]:
    """The rule ``spec`` names in the rules document (:func:`kinkcheck.rules.doc.load`).

    ``spec`` is ``OPERATION[@KIND]``. OPERATION: the census's name (``torch.clamp``,
    ``torch.cdist(x2=tensor, p=2.0)``), a user alias (``jnp.maximum``), a spelling the census maps to it
    (``torch.relu`` → ``torch.nn.functional.relu``, ``torch.Tensor.clamp`` → ``torch.clamp``), the name without its
    overload when only one overload has rules (``torch.topk`` → ``torch.topk(dim)``), or its last name(s)
    (``clamp``) when only one operation (of ``framework``) ends so; among an operation's overloads such a short
    name is the one without an overload (``clamp`` with ``--framework torch`` → ``torch.clamp``, not
    ``torch.clamp(min=tensor, max=tensor)``). KIND: the kind of kink, spelt out or as its slug
    (``max at a bound``, ``max-at-a-bound``), or abbreviated: the one kind that starts with it (``max``), else the
    one kind whose words contain it (``tie``); optional when the operation has one kind.

    Raises
    ------
    CiteError
        No such operation (with the closest names), several operations or kinds fit (each named by its rule id),
        or the operation is not ``framework``'s.
    """
    op_text, at, kind_text = spec.strip().rpartition("@") if "@" in spec else (spec.strip(), "", "")
    op_text = _squeezed(op_text)
    if not op_text:
        raise CiteError(f"cite which rule? --rule OPERATION[@KIND], e.g. torch.clamp@max (not {spec!r})")
    from kinkcheck.rules.names import resolve_operation  # slow: sympy

    rules = [r for r in doc["rules"] if framework is None or r["framework"] == framework]
    op_text, found = resolve_operation(rules, op_text)
    ops = {_squeezed(r["operation"]): r["operation"] for r in rules}
    if not found:

        where = f" in {framework}" if framework is not None else ""
        elsewhere = sorted({r["framework"] for r in doc["rules"]
                            if _squeezed(r["operation"]) == op_text}) if framework is not None else []
        if elsewhere:
            raise CiteError(f"no rule for {op_text!r}{where} (it has rules in {', '.join(elsewhere)})")
        names = sorted(set(ops.values()))
        close = difflib.get_close_matches(op_text, names, n=5, cutoff=0.6) or \
            difflib.get_close_matches(op_text, sorted({n.partition("(")[0].rsplit(".", 1)[-1] for n in names}),
                                      n=5, cutoff=0.6)
        hint = f"; close: {', '.join(close)}" if close else "; `kinkcheck rules` lists every operation"
        raise CiteError(f"no rule for operation {op_text!r}{where}{hint}")
    if len(found) > 1:
        shown = sorted(found)
        raise CiteError(f"{op_text!r} names {len(shown)} operations: {', '.join(shown[:8])}"
                        + (f" and {len(shown) - 8} more" if len(shown) > 8 else "")
                        + " (give the full name, or --framework)")
    name = found.pop()
    kinds = {r["kind"]: r for r in rules if r["operation"] == name}
    at = at if kind_text.strip() else ""  # torch.clamp@ reads as torch.clamp
    want = slug(kind_text) if at else ""
    if not at and len(kinds) == 1:
        return next(iter(kinds.values()))
    ids = ", ".join(rule_id(name, k) for k in sorted(kinds))
    if not at:
        raise CiteError(f"{name} has rules at {len(kinds)} kinds of kink: say which, e.g. {ids}")
    by_slug = {slug(k): k for k in kinds}
    if want in by_slug:
        return kinds[by_slug[want]]
    fits = [k for s, k in by_slug.items() if s.startswith(want)] or \
           [k for s, k in by_slug.items() if f"-{want}-" in f"-{s}-"]
    if len(fits) == 1:
        return kinds[fits[0]]
    if fits:
        raise CiteError(f"{name}@{kind_text.strip()} fits {len(fits)} kinds of kink (its rules differ): "
                        + ", ".join(rule_id(name, k) for k in sorted(fits)))
    raise CiteError(f"{name} has no rule at {kind_text.strip()!r} (its rules: {ids})")


def _place(env: str, e: dict) -> str:
    """Where an environment of the rules file measured: ``cpu``, ``cuda``, ``cpu-linux_x86_64_v2``,
    ``cpu-macos_arm64`` (its id after the framework and release), as ``--device`` names it."""
    prefix = f"{e.get('framework')}-{e.get('version')}-"
    return env[len(prefix):] if env.startswith(prefix) else str(e.get("device"))


def _runs(versions: Sequence[str], order: Sequence[str]) -> str:
    """``2.14.1–2.15.0`` (consecutive in ``order``), ``2.0.1, 2.3.1``: the releases, runs grouped."""
    at = {v: i for i, v in enumerate(order)}
    vs = sorted(set(versions), key=lambda v: at.get(v, len(order)))
    parts: list[list[str]] = []
    for v in vs:
        if parts and at.get(v, -9) == at.get(parts[-1][-1], -9) + 1:
            parts[-1].append(v)
        else:
            parts.append([v])
    return ", ".join(p[0] if len(p) == 1 else f"{p[0]}–{p[-1]}" for p in parts)


def _by_value(rows: Sequence[tuple[str, str]], order: Sequence[str]) -> str:
    """``0 in 2.14.1–2.15.0`` (or ``1 in 2.0.1; 0 in 2.1.2–2.15.0``): (release, value) pairs, runs grouped."""
    values: dict[str, list[str]] = {}
    for v, val in rows:
        values.setdefault(val, []).append(v)
    at = {v: i for i, v in enumerate(order)}
    ordered = sorted(values.items(), key=lambda kv: min(at.get(v, len(order)) for v in kv[1]))
    return "; ".join(f"{val} in {_runs(vs, order)}" for val, vs in ordered)


def _modes_dtypes(pairs: Collection[tuple[str, str]]) -> str:
    """``forward, forward-ad mode × float64, float32`` (every mode in every dtype), else ``forward mode: float64;
    jit mode: float32, float16``: a set of (mode, dtype) pairs, in the report's order of modes and dtypes."""
    def order(seq: Sequence[str]) -> Any:
        return lambda x: (seq.index(x) if x in seq else len(seq), x)

    modes = sorted({m for m, _ in pairs}, key=order(MODES))
    dtypes = sorted({d for _, d in pairs}, key=order(DTYPES))
    if len(pairs) == len(modes) * len(dtypes):
        return f"{', '.join(modes)} mode × {', '.join(dtypes)}"
    return "; ".join(f"{m} mode: " + ", ".join(sorted({d for mm, d in pairs if mm == m}, key=order(DTYPES)))
                     for m in modes)


def _labels_said(labels: Sequence[str]) -> tuple[str, str]:
    """The value a rule's labels name, in words (:data:`kinkcheck.rules.page.LABEL_WORDS`, the first label's), and
    the labels in parentheses, saying what else the value is where its evidence does not tell the labels apart."""
    first = LABEL_WORDS.get(labels[0], labels[0])
    if len(labels) == 1:
        return first, f"(label {labels[0]})"
    rest = [LABEL_WORDS.get(lb, lb) for lb in labels[1:]]
    also = rest[0] if len(rest) == 1 else ", ".join(rest[:-1]) + " and " + rest[-1]
    return first, f"(labels {'/'.join(labels)}: there it is also {also}, which its evidence does not tell apart)"


def cite_rule(doc: Mapping[str, Any], spec: str, *, observations: str | Path, framework: str | None = None,
              framework_version: str | None = None, mode: str = "reverse", dtype: str = "float64",
              device: str = "cpu") -> RuleCitation:
    """The citation of one rule of the rules document (:func:`kinkcheck.rules.doc.load` of ``rules.json.gz``): the
    rule (:func:`find_rule`) in the newest release measured on ``device`` (a place: ``cpu``, ``cuda``,
    ``cpu-macos_arm64``) in ``mode`` and ``dtype`` (or in ``framework_version``), with the run of releases around it
    where its labels stay the same, its evidence cells there (their values read from ``observations``, the
    ``observations.parquet`` beside the rules file) and every counter-example cell.

    Raises
    ------
    CiteError
        No such rule (:func:`find_rule`), an unknown mode or dtype, no evidence in the slice or release asked for,
        evidence that contradicts itself there (no labels), an unreadable ``observations``.
    """
    rule = find_rule(doc, spec, framework)
    fw, op, kind = rule["framework"], rule["operation"], rule["kind"]
    check_cell(fw, mode, dtype)
    rid, name = rule_id(op, kind), FRAMEWORK_NAMES.get(fw, fw)
    cells, envs = doc["cells"], doc["environments"]
    in_slice: dict[int, str] = {}  # cell → release: the cells of the cited mode, dtype and place
    for i, (env, m, d) in enumerate(cells):
        e = envs.get(env, {})
        if m == mode and d == dtype and e.get("framework") == fw and _place(env, e) == device:
            in_slice[i] = e["version"]
    per_release = {in_slice[i]: tuple(labels.split()) if labels != "-" else ()
                   for labels, idx in rule["labels"].items() for i in idx if i in in_slice}
    releases = sorted(per_release, key=release_key)
    where = f"{device}, {dtype}, {mode} mode"
    see = f"kinkcheck rules {shlex.quote(op)} --framework {fw} --json"
    if not releases:
        raise CiteError(f"rule {rid} has no evidence on {where} (every mode, dtype and device: {see})")
    if framework_version is not None and framework_version not in per_release:
        raise CiteError(f"rule {rid} has no evidence in {name} {framework_version} on {where} "
                        f"(releases with evidence: {', '.join(releases)})")
    target = framework_version or releases[-1]
    labels = per_release[target]
    n_counter = len(rule["counterexamples"])
    if not labels:
        raise CiteError(f"no rule to cite: the evidence of {rid} contradicts itself in {name} {target} on {where} "
                        f"(no label fits most of its cells; {n_counter} counter-example cells: {see})")
    i = j = releases.index(target)
    while i > 0 and per_release[releases[i - 1]] == labels:
        i -= 1
    while j < len(releases) - 1 and per_release[releases[j + 1]] == labels:
        j += 1
    run = releases[i:j + 1]
    first, last = run[0], run[-1]
    history_runs: list[list[str]] = []
    for v in releases:
        if history_runs and per_release[history_runs[-1][0]] == per_release[v]:
            history_runs[-1].append(v)
        else:
            history_runs.append([v])
    history = "; ".join(f"{'/'.join(per_release[r[0]]) or '— (contradictory evidence)'} in "
                        f"{r[0] if len(r) == 1 else f'{r[0]}–{r[-1]}'}" for r in history_runs)
    run_envs = {cells[c][0]: v for c, v in in_slice.items() if v in run}
    lines, n_cells = _evidence(rule, doc, observations, mode, dtype, run_envs, run,
                               {c[0] for c in rule["counterexamples"]} & set(in_slice))
    every = len(run) == len(releases) and len(run) > 1
    span = f"every measured {name} release" if every else f"{name} {first}" if first == last else \
        f"{name} {first} to {last}"
    place, _, tag = device.partition("-")
    slice_text = f"{place_title(place, tag or DEFAULT_PLATFORM)}, {dtype}, {mode} mode"
    value, said = _labels_said(labels)
    gloss = f" ({KIND_WORDS[kind]})" if kind in KIND_WORDS else ""
    sentence = (f"In {span} ({f'{first} to {last}; ' if every else ''}{slice_text}), `{op}` returns {value} at its "
                f"kinks of kind \"{kind}\"{gloss} {said}; a rule inferred from {n_cells} measured cells of {len(lines)} "
                f"program{'s' if len(lines) != 1 else ''}"
                f"{f' ({n_counter} of its cells are counter-examples)' if n_counter else ''}, not itself a "
                f"measurement (kinkcheck rule {rid}).")
    return RuleCitation(sentence, rid, rule_anchor(op, kind), fw, op, kind, labels, (first, last), slice_text,
                        history, tuple(lines[:MAX_EVIDENCE]), max(0, len(lines) - MAX_EVIDENCE),
                        tuple(_counterexamples(rule, doc)), n_counter)


def _evidence(rule: Mapping[str, Any], doc: Mapping[str, Any], observations: str | Path, mode: str, dtype: str,
              run_envs: Mapping[str, str], run: Sequence[str], counter_cells: Collection[int]) -> tuple[list[str], int]:
    """One line per program of the rule's evidence measured in ``run_envs`` (environment → release), its values
    over the releases of ``run`` (runs grouped), read from the Parquet file; and the number of cells. A program's
    cell that is a counter-example (one of ``counter_cells``) is not evidence: it is listed with the others."""
    cells = doc["cells"]
    counter_at = {(cells[c[0]][0], c[1], c[2]) for c in rule["counterexamples"] if c[0] in counter_cells}
    programs = [(c, p) for c, p in rule["programs"]]
    try:
        table = read_table(observations, filters=[
            ("framework", "==", rule["framework"]), ("mode", "==", mode), ("dtype", "==", dtype),
            ("environment", "in", sorted(run_envs)), ("program", "in", sorted({p for _, p in programs})),
            ("status", "==", "ok")], columns=["case", "program", "environment", "value"])
    except DatasetError as err:
        raise CiteError(str(err)) from None
    rows: dict[tuple[str, str], list[tuple[str, str]]] = {}
    wanted = set(programs)
    for r in table.to_pylist():
        key = (r["case"], r["program"])
        if key in wanted and (r["environment"], *key) not in counter_at:
            rows.setdefault(key, []).append((run_envs[r["environment"]], decimal_value(json.loads(r["value"]))))
    lines = [f"  {c}  {p}: {_by_value(rows[(c, p)], run)}" for c, p in programs if (c, p) in rows]
    return lines, sum(len(v) for v in rows.values())


def _counterexamples(rule: Mapping[str, Any], doc: Mapping[str, Any]) -> list[str]:
    """Every counter-example cell of the rule, in any mode, dtype and place: one line per case, program, value and
    run of releases, the places with the same modes and dtypes together (``… [0, 0] in 2.15.0 on
    cpu-linux_x86_64_v2, cpu-linux_x86_64_v3 (forward, forward-ad mode × float64, float32)``)."""
    cells, envs, fw = doc["cells"], doc["environments"], rule["framework"]
    versions: dict[tuple[str, str, str, str, str, str], list[str]] = {}
    for c in rule["counterexamples"]:
        env, m, d = cells[c[0]]
        e = envs.get(env, {})
        val = c[3] if isinstance(c[3], list) else [c[3]]
        text = decimal(val[0]) if len(val) == 1 else decimal_vector(val)
        versions.setdefault((c[1], c[2], text, _place(env, e), m, d), []).append(e.get("version", env))
    orders: dict[str, list[str]] = {}  # place → its releases, oldest first
    for env, e in envs.items():
        if e.get("framework") == fw:
            orders.setdefault(_place(env, e), []).append(e["version"])
    slots: dict[tuple[str, str, str, str], dict[str, set[tuple[str, str]]]] = {}
    for (c, p, text, place, m, d), vs in versions.items():
        order = sorted(set(orders.get(place, [])), key=release_key)
        slots.setdefault((c, p, text, _runs(vs, order)), {}).setdefault(place, set()).add((m, d))
    out = []
    for (c, p, text, runs), places in sorted(slots.items()):
        same: dict[frozenset[tuple[str, str]], list[str]] = {}
        for place, pairs in sorted(places.items()):
            same.setdefault(frozenset(pairs), []).append(place)
        for pairs, at in same.items():
            out.append(f"  {c}  {p}: {text} in {runs} on {', '.join(at)} ({_modes_dtypes(pairs)})")
    return out
