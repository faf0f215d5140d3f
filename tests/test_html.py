"""The HTML report: self-contained, deterministic, and working in a real headless Chromium (no console
errors, no network requests, filters, anchors, plots), plus a screenshot."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest

from kinkcheck.report.html import render_html

from conftest import ROOT

HTML = ROOT / "reports" / "conventions.html"
REPORT = ROOT / "reports" / "conventions.json"


def _chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.skip("no Chromium on this machine: apt-get install chromium (.ci/run does)")
    pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install -e .[test])")
    return path


@pytest.fixture(scope="module")
def doc():
    return json.loads(REPORT.read_text())


def test_render_is_deterministic_and_self_contained(doc, catalog):
    a, b = render_html(doc, catalog), render_html(doc, catalog)
    assert a == b, "the same document must render byte-identically"
    assert "<script src" not in a and "<link" not in a and 'href="http' not in a, "no external resources"
    assert len(re.findall(r"<svg[ >]", a)) >= len(doc["cases"]), "one inline SVG plot per case"
    assert 'id="case-relu-at-0--torch-torch-clamp-x-min-0--torch-2-13-0-cpu"' in a, "cell anchors as in Markdown"


def test_committed_html_belongs_to_the_committed_report(doc):
    html = HTML.read_text()
    digest = hashlib.sha256(REPORT.read_bytes()).hexdigest()
    assert f'<meta name="kinkcheck-json-sha256" content="{digest}">' in html, \
        "reports/conventions.html is stale: run `nox -s render` (or kinkcheck report) and commit it"
    assert doc["provenance"]["generated_at"] in html and doc["provenance"]["catalog_hash"] in html


def test_html_names_the_json_it_belongs_to(doc, catalog):
    html = render_html(doc, catalog, json_sha256="ab" * 32)
    assert html.count("ab" * 32) == 2, "in the meta element and beside the link to conventions.json"
    assert "kinkcheck-json-sha256" not in render_html(doc, catalog), "no digest given: none shown"


def test_html_in_headless_chromium(tmp_path):
    chromium = _chromium()
    from playwright.sync_api import sync_playwright

    requests, console, errors = [], [], []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--no-first-run"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.on("request", lambda r: requests.append(r.url))
            page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(HTML.as_uri() + "#case-relu-at-0")
            assert page.evaluate("document.body.dataset.ready") == "1", "the filter script ran"
            assert page.locator("#case-relu-at-0 svg").count() == 1, "the case has its plot"
            cell = page.locator("#case-relu-at-0--torch-torch-clamp-x-min-0--torch-2-13-0-cpu")
            assert cell.count() == 1 and "right" in cell.inner_text(), "the cited cell exists and shows its label"
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
