"""The static site (:mod:`kinkcheck.report.site`): built by MkDocs (Material) from the committed report, one page per
operation with the values over releases and *Changed in*, the case pages with their cited anchors, every page under
the budget, the search index small, and in headless Chromium: the index and relu@0's page interactive within 2 s,
search answering offline, no request leaving the site."""

from __future__ import annotations

import functools
import http.server
import json
import re
import shutil
import threading
from pathlib import Path

import pytest
from conftest import ROOT

from kinkcheck.report.site import PAGE_BUDGET, SiteError, build_site, main, operation_pages, page_sizes, write_source

REPORTS = ROOT / "reports"
#: Interactive within this many milliseconds in headless Chromium (the issue's budget).
INTERACTIVE_MS = 2000


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    pytest.importorskip("mkdocs", reason="MkDocs is not installed (pip install -e .[site]; nox -s tests does)")
    pytest.importorskip("material", reason="mkdocs-material is not installed (pip install -e .[site])")
    out = tmp_path_factory.mktemp("site") / "src"
    return build_site(REPORTS, out, ROOT / "docs")


def test_every_page_is_under_the_budget_and_the_search_index_is_small(site):
    sizes = page_sizes(site)
    assert len(sizes) > 900, f"the index, {len(sizes)} pages: operations, cases, report sections, guide"
    over = {p: n for p, n in sizes.items() if n > PAGE_BUDGET}
    assert not over, f"pages over {PAGE_BUDGET:,} bytes: {over}"
    index = site / "search" / "search_index.json"
    assert index.stat().st_size < 5_000_000, f"the search index is {index.stat().st_size:,} bytes: the case " \
                                             "pages' tables should stay out of it"
    docs = json.loads(index.read_text())["docs"]
    assert any(d["location"] == "operations/torch/torch-clamp.html" for d in docs), "torch.clamp's page is searched"
    assert any(d["location"].startswith("report/cases/relu-at-0.html") for d in docs), "relu@0's head is searched"


def test_operation_page_answers_what_it_returns_and_when_that_changed(site):
    page = (site / "operations" / "torch" / "torch-clamp.html").read_text()
    text = re.sub(r"<[^>]+>", "", page)
    assert "x = min, x = max" in text, "the census's kink"
    assert "torch.clamp(x, min=0)" in text and "x.clamp(min=0)" in text, "every program that calls it"
    assert "2.1.2 – 2.13.0: 1 right" in text and "2.14.1, 2.15.0: 0 left" in text, \
        "relu@0's torch.clamp(x, min=0): 1 up to 2.13.0, 0 from 2.14.1 (P1 of shared/cases)"
    assert "2.13.0 → 2.14.1" in text, "the change in its Changed in"
    link = 'href="../../report/cases/relu-at-0.html#case-relu-at-0--torch-torch-clamp-x-min-0"'
    assert link in page, "each row links its row on the case page"
    index = re.sub(r"<[^>]+>", "", (site / "index.html").read_text())
    row = re.search(r"torch\.clamp\s*\n?\s*x = min, x = max\s*\n?\s*(\d+)\s*\n?\s*([^\n]+)", index)
    assert row and "2.13.0 → 2.14.1" in row.group(2), f"the index names when torch.clamp changed: {row}"


def test_case_pages_keep_the_anchors_cite_prints_and_their_plot(site):
    page = (site / "report" / "cases" / "relu-at-0.html").read_text()
    for anchor in ("case-relu-at-0", "case-relu-at-0--torch-torch-clamp-x-min-0",
                   "case-relu-at-0--torch-torch-clamp-x-min-0--torch-2-13-0-cpu"):
        assert f'id="{anchor}"' in page, f"anchor {anchor} on the site's relu@0 page"
    assert '<img alt="relu@0: the measured derivatives' in page and (site / "report/cases/relu-at-0.svg").is_file()
    assert (site / "report" / "observations.parquet").read_bytes() == (REPORTS / "observations.parquet").read_bytes()


def test_pages_are_a_function_of_the_report(tmp_path, shards_report):
    a = write_source(REPORTS, tmp_path / "a", None, shards_report)
    b = write_source(REPORTS, tmp_path / "b", None, shards_report)
    files = sorted(p.relative_to(a.parent) for p in (a.parent / "docs").rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(b.parent) for p in (b.parent / "docs").rglob("*") if p.is_file())
    for f in files:
        assert (a.parent / f).read_bytes() == (b.parent / f).read_bytes(), f"{f} differs between two writes"


def test_operation_pages_merge_spellings_and_match_other_frameworks_by_name(shards_report):
    pages = {(p.framework, p.name): p for p in operation_pages(shards_report)}
    clamp = pages[("torch", "torch.clamp")]
    assert clamp.spellings == [".clamp", "torch.clamp", "torch.clip"], \
        "x.clamp, torch.clamp and its alias torch.clip are one census operation"
    assert "relu@0" in clamp.cases and clamp.changes[0] == "2.13.0 → 2.14.1", clamp.changes
    clamp_ms = pages.get(("mindspore", "clamp"))
    assert clamp_ms and {".clamp", "mindspore.ops.clamp", "mindspore.mint.clamp"} <= set(clamp_ms.spellings), \
        "no census: one page per name that other censuses list as kinked, every spelling of it"
    assert not [k for k in pages if k[0] == "torch" and k[1] in ("torch.tensor", "torch.ones_like")], \
        "operations without a kink have no page"


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    assert main(["--reports", str(tmp_path / "none"), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("site: ") and err.count("\n") == 1, err
    with pytest.raises(SiteError):
        write_source(tmp_path, tmp_path / "o")
    for args in (["--out", ""], ["--reports", " "], ["--bogus"]):  # argparse's own errors: one line too
        with pytest.raises(SystemExit) as exit_:
            main(args)
        err = capsys.readouterr().err
        assert exit_.value.code == 2 and err.startswith("site: ") and err.count("\n") == 1, (args, err)
    with pytest.raises(SystemExit):
        main(["--out", ""])
    assert "argument --out: is empty: name a folder" in capsys.readouterr().err, "never the current folder"


def _chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.skip("no Chromium on this machine: apt-get install chromium (.ci/run does)")
    pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install -e .[test])")
    return path


def test_index_and_relu_page_are_interactive_within_two_seconds_and_search_works(site, tmp_path):
    chromium = _chromium()
    from playwright.sync_api import sync_playwright

    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    requests, errors, timings = [], [], {}
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, args=[
                "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--no-first-run"])
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                page.on("request", lambda r: requests.append(r.url))
                page.on("pageerror", lambda e: errors.append(str(e)))
                for path in ("index.html", "report/cases/relu-at-0.html"):
                    page.goto(f"{base}/{path}", wait_until="load")
                    timings[path] = page.evaluate(
                        "() => { const n = performance.getEntriesByType('navigation')[0];"
                        " return n.domInteractive - n.startTime; }")
                cell = page.locator("#case-relu-at-0--torch-torch-clamp-x-min-0--torch-2-13-0-cpu")
                assert cell.count() == 1 and "right" in cell.get_attribute("title"), "the cited square, its label"
                page.goto(f"{base}/index.html")
                page.keyboard.press("/")  # Material's shortcut to the search box
                page.fill("input.md-search__input", "clamp")
                results = page.locator(".md-search-result__item")
                results.first.wait_for(timeout=30_000)
                found = page.locator(".md-search-result").inner_text()
                shot = tmp_path / "search.png"
                page.screenshot(path=str(shot))
            finally:
                browser.close()
    finally:
        server.shutdown()
    print("interactive after (ms):", timings)
    assert all(ms <= INTERACTIVE_MS for ms in timings.values()), f"interactive after (ms): {timings}"
    assert "torch.clamp" in found, f"searching clamp finds torch.clamp's page: {found[:300]}"
    assert not errors, f"page errors: {errors}"
    assert all(u.startswith((base, "data:", "blob:")) for u in requests), \
        f"requests leaving the site: {[u for u in requests if not u.startswith(base)][:5]}"
    assert Path(shot).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", "a real screenshot"


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:  # the test's output stays the test's
        pass


def test_an_out_folder_with_other_files_is_refused_never_removed(tmp_path, shards_report, capsys):
    """--out reports (or .) must not delete the user's files: only a folder this command wrote is replaced."""
    keep = tmp_path / "mine"
    keep.mkdir()
    (keep / "notes.md").write_text("precious\n")
    assert main(["--reports", str(REPORTS), "--out", str(keep)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not a site this command wrote" in err, err
    assert (keep / "notes.md").read_text() == "precious\n", "nothing removed"
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(SiteError, match="is not a site this command wrote"):
        write_source(REPORTS, tmp_path / "a-file", None, shards_report)
    out = tmp_path / "site"
    write_source(REPORTS, out, None, shards_report)
    (out / "docs" / "stale.md").write_text("from an earlier build\n")
    write_source(REPORTS, out, None, shards_report)  # its own earlier build: replaced whole
    assert not (out / "docs" / "stale.md").exists() and (out / "docs" / "index.md").is_file()
