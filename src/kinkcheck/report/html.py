"""Render the report document as one self-contained HTML file (Jinja2 ``templates/conventions.html.j2``).

The tables of the Markdown report with each cell coloured by its first label, filters by framework,
release and mode (inline script, no request leaves the page), and for every case a plot (inline SVG from
:mod:`kinkcheck.report.plots`). Anchors are those of the Markdown report (``case-…``, ``case-…--<fw>-…``,
the cell ``case-…--<fw>-…--<environment>``, ``env-…``, ``section-…``), so ``kinkcheck cite`` links work in
both. Byte-identical for the same document and matplotlib release (see :mod:`kinkcheck.report.plots`).
"""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from kinkcheck.catalog import Catalog
from kinkcheck.report.markdown import context, dtype_cell, fmt_matrix, fmt_number, fmt_value, fmt_vector, slug

__all__ = ["render_html"]

def _one(ob: dict[str, Any] | None) -> Markup:
    if ob is None:
        return Markup('<span class="none">—</span>')
    if ob["status"] != "ok":
        return Markup('<span class="lb lb-{0}" title="{1}">{0}</span>').format(ob["status"], ob["error"] or "")
    label = ob["labels"][0]
    title = ", ".join(ob["labels"]) + (f"; {ob['conformance']}" if ob.get("conformance") else "")
    if ob.get("input"):
        title += f"; input {fmt_value(ob['input'])}"
    return Markup('<span class="lb lb-{0}" title="{1}">{2} <sub>{0}</sub></span>').format(label, title,
                                                                                          fmt_value(ob["value"]))


def _cell(obs: list[dict[str, Any] | None]) -> Markup:
    """One cell: the first dtype's value, then each other dtype whose value or label differs."""
    cell = dtype_cell(obs, _one, lambda d, text: Markup("<br>{}: {}").format(d, text))
    return Markup('<span class="none">—</span>') if cell is None else cell


def _brief(cell: dict[str, Any]) -> Markup:
    if cell["status"] != "ok":
        return Markup('<span class="lb lb-{0}" title="{1}">{0}</span>').format(cell["status"], cell["error"] or "")
    text = Markup('<span class="lb lb-{0}">{1} <sub>{0}</sub></span>').format(cell["label"], fmt_value(cell["value"]))
    if cell.get("input"):
        text += Markup(" <em>input</em> {}").format(fmt_value(cell["input"]))
    return text


def _plots(doc: dict[str, Any], catalog: Catalog) -> dict[str, Markup]:
    """Case id → inline SVG: measured first components in the newest CPU release of each framework."""
    from kinkcheck.report.plots import case_svg

    newest: dict[str, str] = {}
    for e in doc["environments"]:
        if e["device"] == "cpu" and not e.get("not_measured") and "modes" in e:
            newest[e["framework"]] = e["id"]  # environments are sorted by release
    values: dict[tuple[str, str, float], int] = {}
    for o in doc["observations"]:
        if o["mode"] == "reverse" and o["dtype"] == "float64" and o["status"] == "ok" and \
                newest.get(o["framework"]) == o["environment"]:
            first = next(iter(o["value"].values()))
            while isinstance(first, list):
                first = first[0]
            key = (o["case"], o["framework"], float(first))
            values[key] = values.get(key, 0) + 1
    out = {}
    for case in catalog:
        marks = sorted((fw, v, n) for (cid, fw, v), n in values.items() if cid == case.id)
        entry = next(c for c in doc["cases"] if c["id"] == case.id)
        side = {k: (entry[k]["float"] if isinstance(entry.get(k), dict) and
                    isinstance(entry[k]["float"], (int, float)) else None) for k in ("left", "right")}
        out[case.id] = Markup(case_svg(case, marks, side["left"], side["right"]))
    return out


def render_html(doc: dict[str, Any], catalog: Catalog, json_sha256: str | None = None) -> str:
    """The whole HTML report as one string (one file: styles, script and plots inline).

    ``json_sha256``: the SHA-256 (hex) of the ``conventions.json`` written beside it, in a
    ``<meta name="kinkcheck-json-sha256">`` and the introduction; left out when None. The matplotlib release
    that drew the plots is named in ``<meta name="generator">`` (another release may lay them out differently).
    """
    from importlib import metadata

    from importlib import resources

    import jinja2

    text = resources.files("kinkcheck.report").joinpath("templates/conventions.html.j2").read_text()
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True, trim_blocks=True,
                             lstrip_blocks=True, autoescape=True)
    env.filters.update(slug=slug, num=fmt_number, value=fmt_value, vec=fmt_vector, matrix=fmt_matrix, cell=_cell,
                       brief=_brief)
    ctx = context(doc)
    envs = [e for e in doc["environments"] if any(c["env"] == e["id"] for t in ctx["tables"].values()
                                                  for tb in t for c in tb["cols"])]
    from kinkcheck.frameworks.base import MODES

    modes = [m for m in MODES if any(m in t["modes"] for ts in ctx["mode_tables"].values() for t in ts)]
    return env.from_string(text).render(**ctx, plots=_plots(doc, catalog), filter_envs=envs, filter_modes=modes,
                                        json_sha256=json_sha256, matplotlib_version=metadata.version("matplotlib"))
