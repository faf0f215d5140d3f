"""kinkcheck.dev.figures: every figure README.md and docs/ quote is generated (from the report, or recorded by the
benchmark that measures it on the report's data), and a stale one fails here (issue 46, item 6)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import ROOT

from kinkcheck.dev import figures

from kinkcheck.dev import readme

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_every_figure_of_readme_and_docs_is_current():
    """python -m kinkcheck.dev.readme --check: each marker's text is its source's, and each measured figure was
    measured on the report's data (one more shard, and the benchmark has to run again)."""
    late = figures.stale(PAGES)
    assert not late, "stale figures (python -m kinkcheck.dev.readme; a measured one: its bench with --record):\n" + \
        "\n".join(late)
    assert readme.main(["--check"]) == 0, "python -m kinkcheck.dev.readme --check finds README.md or docs/ stale"


def test_readme_quotes_no_figure_that_nothing_generates():
    """README quotes current figures only, each in a marker; docs/ may keep dated history (at stop N, a date)
    and settings or targets, but not an undated measurement."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert not figures.unsourced(text, dated=False), f"README figures outside a marker: {figures.unsourced(text, False)}"
    names = {m["name"] for m in figures.FIG.finditer(text)} | {m["name"] for m in figures.OUT.finditer(text)}
    assert {"render.full", "report.size", "tests.cost", "rules.headline", "api.lookup"} <= names, sorted(names)
    loose = {p.name: figures.unsourced(p.read_text(encoding="utf-8")) for p in PAGES[1:]}
    loose = {k: v for k, v in loose.items() if v}
    assert not loose, f"undated measured figures in docs/ (a marker, or say when they were measured): {loose}"


def test_the_linter_sees_a_loose_figure_and_lets_dated_history_and_settings_pass():
    assert figures.unsourced("A render takes 21.6 s here.") == ["A render takes 21.6 s here."]
    assert figures.unsourced("At stop 38 a render took 12.6 s.") == []
    assert figures.unsourced("A render took 12.6 s at stop 38.", dated=False) != [], "README allows no history"
    assert figures.unsourced("The timeout is 600 s by default.") == []
    assert figures.unsourced("It takes <!-- fig render.full -->21.6 s<!-- /fig -->.", dated=False) == []
    assert figures.unsourced("```\n$ kinkcheck x\ntook 4.0 s\n```\n", dated=False) == [], "an example's output"


def test_report_figures_are_computed_from_the_report():
    reports = ROOT / "reports"
    size = figures.REPORT_FIGURES["report.size"](reports)
    total = sum(p.stat().st_size for p in reports.rglob("*") if p.is_file() and not p.name.startswith("."))
    assert size.startswith(f"{total / 1e6:.1f} MB in "), size
    import pyarrow.parquet as pq

    rows = pq.ParquetFile(reports / "observations.parquet").metadata.num_rows
    assert figures.REPORT_FIGURES["report.observations"](reports) == f"{rows:,}"
    assert figures.data_key(reports).startswith(f"{rows:,} observations, "), figures.data_key(reports)
    import gzip

    doc = json.loads(gzip.decompress((reports / "conventions.json.gz").read_bytes()))
    assert figures.REPORT_FIGURES["report.environments"](reports) == str(len(doc["environments"])), \
        "the Parquet file's index counts the report's environments"
    assert figures.REPORT_FIGURES["report.cases"](reports) == str(len(doc["cases"])), "and its cases"
    headline = figures.REPORT_FIGURES["rules.headline"](reports)
    assert " of the " in headline and "predicted cells are right" in headline, headline
    example = figures.REPORT_FIGURES["api.lookup"](reports)
    assert "torch.clamp(x, min=0): 0 (left)" in example and example.startswith("```python"), example


def test_a_stale_or_unmeasured_figure_is_named_and_refresh_rewrites_it(tmp_path):
    record = tmp_path / "figures.json"
    page = tmp_path / "README.md"
    page.write_text("It has <!-- fig report.observations -->12<!-- /fig --> observations and took "
                    "<!-- fig render.full -->9.9 s<!-- /fig -->.\n", encoding="utf-8")
    late = figures.stale([page], record_path=record)
    assert any("report.observations says '12'" in x for x in late), late
    assert any("'render.full' was never measured" in x for x in late), late
    figures.record({"render.full": {"text": "21.6 s", "command": "nox -s bench -- --rules", "data": True}}, record)
    entry = json.loads(record.read_text())["render.full"]
    assert entry["data"] == figures.data_key() and entry["cpus"] == os.cpu_count(), entry
    new = figures.refresh(page.read_text(), record_path=record)
    assert "<!-- fig render.full -->21.6 s<!-- /fig -->" in new and "-->12<!--" not in new, new
    page.write_text(new, encoding="utf-8")
    assert figures.stale([page], record_path=record) == [], "current once refreshed"
    doc = json.loads(record.read_text())
    doc["render.full"]["data"] = "1 observations, 1 environments, 1 cases"
    record.write_text(json.dumps(doc))
    late = figures.stale([page], record_path=record)
    assert late == [f"README.md: figure render.full was measured on 1 observations, 1 environments, 1 cases, the "
                    f"report has {figures.data_key()}: measure it again (nox -s bench -- --rules --record)"], late


def test_a_damaged_record_is_one_line(tmp_path):
    record = tmp_path / "figures.json"
    record.write_text("{not json")
    with pytest.raises(figures.FigureError, match="not a figures record"):
        figures.recorded(record)


def test_the_suite_records_what_it_cost_with_record_figures(tmp_path):
    """--record-figures (tests/conftest.py) notes the run's minutes, its passed and skipped tests and the test
    virtualenv's size, on the controlling process only, and only for a run without failures."""
    record = tmp_path / "figures.json"
    env = {**os.environ, "KINKCHECK_FIGURES": str(record)}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0", "--record-figures",
                          f"{ROOT / 'tests' / 'dev' / 'test_figures.py'}::test_the_linter_sees_a_loose_figure_and_lets_dated_"
                          "history_and_settings_pass"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    doc = json.loads(record.read_text())
    assert doc["tests.cost"]["text"].endswith(f"for 1 tests passed and 0 skipped (1 workers, {os.cpu_count()} CPUs)"), doc
    assert doc["tests.cost"]["data"] is None and doc["tests.venv"]["text"].endswith(" GB"), doc
