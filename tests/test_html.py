"""The HTML report: self-contained, deterministic, the model's ranges and strips (coloured by label), other
dtypes only where they differ, *Changed in* grouped, and working in a real headless Chromium (no console
errors, no network requests, filters, anchors, plots), plus a screenshot. Rendered from the report built from
the committed shards (``shards_report``, tests/conftest.py)."""

from __future__ import annotations

import gzip
import hashlib
import re
import shutil
from pathlib import Path

import pytest
from conftest import ROOT

from kinkcheck.report.html import label_class, render_html
from kinkcheck.report.view import LABEL_MARK, row_anchor, slug

HTML = ROOT / "reports" / "conventions.html"
REPORT = ROOT / "reports" / "conventions.json.gz"  # committed gzipped (the plain JSON is ignored by git)


def _chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.skip("no Chromium on this machine: apt-get install chromium (.ci/run does)")
    pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install -e .[test])")
    return path


@pytest.fixture(scope="module")
def html(shards_report, catalog):
    return render_html(shards_report, catalog)


def test_render_is_deterministic_and_self_contained(shards_report, catalog, html):
    assert render_html(shards_report, catalog) == html, "the same report must render byte-identically"
    assert "<script src" not in html and "<link" not in html and 'href="http' not in html, "no external resources"
    assert len(re.findall(r"<svg[ >]", html)) >= len(shards_report.cases), "one inline SVG plot per case"
    for a in ("case-relu-at-0", "case-relu-at-0--torch-torch-clamp-x-min-0",
              "case-relu-at-0--torch-torch-clamp-x-min-0--torch-2-13-0-cpu",
              "case-relu-at-0--torch-torch-clamp-x-min-0--modes--inductor", "env-torch-2-13-0-cpu"):
        assert html.count(f'id="{a}"') == 1, f"anchor {a} as in the Markdown pages, once"
    ids = re.findall(r'\bid="([^"]+)"', html)
    assert len(ids) == len(set(ids)), "every id once"
    links = set(re.findall(r'href="#([^"]+)"', html))
    assert links <= set(ids), f"links to no anchor: {sorted(links - set(ids))[:5]}"


def _row(html: str, anchor: str) -> str:
    m = re.search(rf'<tr id="{re.escape(anchor)}">(.*?)</tr>', html)
    assert m, f"no row {anchor}"
    return m.group(1)


def test_ranges_and_dtypes_only_where_they_differ(shards_report, html):
    """relu@0, torch.relu(x): 0 left everywhere (CUDA 2.11.0 too), float16 raised in 1.13.1 and 2.0.1 only. float16's
    observation carries no conformance verdict (float64 does), which once made every f16 line show."""
    idx = shards_report.index
    f64 = idx.cell[("relu@0", "torch", "torch.relu(x)", "reverse", "torch-2.15.0-cpu", "float64")]
    f16 = idx.cell[("relu@0", "torch", "torch.relu(x)", "reverse", "torch-2.15.0-cpu", "float16")]
    assert f64.conformance and not f16.conformance and f16.labels[0] == f64.labels[0], "the premise"
    row = _row(html, "case-relu-at-0--torch-torch-relu-x")
    runs = re.findall(r'<span class="run"><span class="rel">([^<]+)</span>: (.*?)</span>(?=<span class="run">|</td>)',
                      row)
    assert [r[0] for r in runs] == ["1.13.1, 2.0.1", "2.1.2 – 2.15.0", "2.11.0 cuda"], f"two ranges, and CUDA: {runs}"
    assert '<span class="dt">f16: ' in runs[0][1] and "error" in runs[0][1], "float16 raised in 1.13.1, 2.0.1: shown"
    for run in runs[1:]:
        assert "f16" not in run[1] and "bf16" not in run[1] and "f32" not in run[1], \
            f"float16 equals float64 from 2.1.2 on, and on CUDA: not repeated ({run})"


def test_strip_squares_are_coloured_by_label(shards_report, html):
    idx = shards_report.index
    css = dict(re.findall(r"\.sq\.(lb-[\w-]+) \{ background: (#[0-9a-f]{6}); \}", html))
    for lb, m in LABEL_MARK.items():
        assert css.get(label_class(lb)) == m.colour, f"CSS colour of {lb}"
    squares = {a: cls for cls, a in re.findall(r'<span class="sq ([\w-]+)(?: brk)?" id="([^"]+)"', html)}
    breaks = set(re.findall(r'<span class="sq [\w-]+ brk" id="([^"]+)"', html))
    norm = f"{row_anchor('norminf@origin', 'jax', 'jax.numpy.linalg.norm(v, jax.numpy.inf)')}--jax-0-5-3-cpu"
    assert norm in breaks and squares[norm] == label_class("in-clarke"), \
        "0.5 → 0.25 under one label (in-clarke) is marked in the strip where it happens"
    assert f"{row_anchor('norminf@origin', 'jax', 'jax.numpy.linalg.norm(v, jax.numpy.inf)')}--jax-0-4-38-cpu" \
        not in breaks, "and nowhere else on that row"
    checked = 0
    for case in shards_report.cases:
        for p in case.programs:
            for env in idx.columns.get(p.framework, []):
                ob = idx.cell.get((case.id, p.framework, p.program, "reverse", env.id, "float64"))
                want = label_class(ob.labels[0] if ob else None)
                anchor = f"{row_anchor(case.id, p.framework, p.program)}--{slug(env.id)}"
                assert squares.get(anchor) == want, f"{anchor}: square {squares.get(anchor)}, want {want}"
                checked += 1
    assert checked > 3000 and checked == len(squares), "one square per program and release"


def test_changed_in_is_grouped(html):
    prog = "jax.numpy.linalg.norm(v, jax.numpy.inf)"
    rows = re.findall(rf"<tr data-fw=\"jax\"><td>jax</td><td>0.4.38 → 0.5.3</td><td><code>{re.escape(prog)}</code>.*?</tr>",
                      html)
    assert len(rows) == 2, f"one row in Changed in, one under the case (not one per mode): {len(rows)}"
    assert all("reverse" in r and "jit" in r and "forward" in r for r in rows), "the row lists its modes"


def test_committed_html_belongs_to_the_committed_report():
    from kinkcheck.report.model import load_report

    html = HTML.read_text()
    digest = hashlib.sha256(gzip.decompress(REPORT.read_bytes())).hexdigest()
    assert f'<meta name="kinkcheck-json-sha256" content="{digest}">' in html, \
        "reports/conventions.html is stale: run `nox -s render` (or kinkcheck report) and commit it"
    provenance = load_report(REPORT).provenance
    assert provenance.generated_at in html and provenance.catalog_hash in html


def test_html_names_the_json_it_belongs_to(shards_report, catalog, html):
    named = render_html(shards_report, catalog, json_sha256="ab" * 32)
    assert named.count("ab" * 32) == 2, "in the meta element and beside the link to conventions.json"
    assert "kinkcheck-json-sha256" not in html, "no digest given: none shown"


def test_html_in_headless_chromium(tmp_path, html):
    chromium = _chromium()
    page_file = tmp_path / "conventions.html"
    page_file.write_text(html)
    from playwright.sync_api import sync_playwright

    requests, console, errors = [], [], []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--no-first-run"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            # The page is the whole report (23 MB at 169 cases): on 2 cores shared with the rest of the suite its
            # load event and a filter pass over the DOM took over playwright's 30 s default once.
            page.set_default_timeout(180_000)
            page.on("request", lambda r: requests.append(r.url))
            page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(page_file.as_uri() + "#case-relu-at-0")
            assert page.evaluate("document.body.dataset.ready") == "1", "the filter script ran"
            assert page.locator("#case-relu-at-0 svg").count() == 1, "the case has its plot"
            cell = page.locator("#case-relu-at-0--torch-torch-clamp-x-min-0--torch-2-13-0-cpu")
            assert cell.count() == 1 and "right" in cell.get_attribute("title"), "the cited square names its label"
            colour = LABEL_MARK["right"].colour
            rgb = f"rgb({int(colour[1:3], 16)}, {int(colour[3:5], 16)}, {int(colour[5:7], 16)})"
            assert cell.evaluate("e => getComputedStyle(e).backgroundColor") == rgb, "drawn in right's colour"
            assert cell.bounding_box()["width"] > 5, "the square is visible"
            visible = "n => Array.from(document.querySelectorAll(n)).filter(e => !e.hidden).length"
            assert page.evaluate(visible, "main [data-fw=jax]") > 0
            page.uncheck("input[data-filter=fw][value=jax]")
            assert page.evaluate(visible, "main [data-fw=jax]") == 0, "unchecking jax hides its tables and rows"
            assert page.evaluate(visible, "main [data-fw=torch]") > 0, "torch stays"
            page.uncheck('input[data-filter=env][value="torch-2.13.0-cpu"]')
            assert not cell.is_visible(), "unchecking a release hides its column"
            page.uncheck("input[data-filter=mode][value=inductor]")
            assert page.evaluate(visible, "main [data-mode=inductor]") == 0, "unchecking a mode hides its columns"
            shot = tmp_path / "conventions.png"
            page.screenshot(path=str(shot))
        finally:
            browser.close()
    assert not errors, f"page errors: {errors}"
    assert not [m for m in console if m.startswith(("error", "warning"))], f"console: {console}"
    assert requests and all(u.startswith(("file:", "data:")) for u in requests), \
        f"network requests from an offline report: {[u for u in requests if not u.startswith(('file:', 'data:'))]}"
    assert shot.stat().st_size > 20_000 and Path(shot).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", "a real screenshot"
