"""Every command from the installed package (issue 46, items 3 and 4): a wheel built once by hatchling (the build
backend), unpacked as an installer would and put first on PYTHONPATH, each command run from a folder outside the
checkout: ``diff`` of the shipped report's environments (bare, ``#ENV``, ``--report``), ``report`` (the checkout's
catalog inside one; outside, one line saying what is left out), ``cite`` (a link to the published site),
``grad --device cuda`` and ``ask --device cuda`` (the report's CUDA cells, not measured here).

tests/report/test_query.py builds its own wheel for lookup, grad, cite and migrate from the package's data (issue 31).
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import ROOT

CLAMP = "torch.clamp(x, min=0)"
#: pyproject.toml's [project.urls] Documentation: the published site.
SITE = "https://kinkcheck.github.io/kinkcheck/"


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """``(site, outside)``: the unpacked wheel's folder and an empty folder outside the checkout to run in."""
    tmp = tmp_path_factory.mktemp("installed")
    build = subprocess.run([sys.executable, "-m", "hatchling", "build", "-t", "wheel", "-d", str(tmp / "dist")],
                           cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert build.returncode == 0, build.stderr[-2000:]
    (wheel,) = (tmp / "dist").glob("kinkcheck-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(tmp / "site")
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        assert f"Project-URL: Documentation, {SITE}" in zf.read(meta).decode(), "the site's URL is in the metadata"
    outside = tmp / "elsewhere"
    outside.mkdir()
    return tmp / "site", outside


def _run(installed, *args: str, cwd: Path | None = None, own_cache: bool = True) -> subprocess.CompletedProcess[str]:
    """``python -m kinkcheck ARGS`` of the unpacked wheel in ``cwd`` (default: the folder outside the checkout), with
    a cache of its own unless ``own_cache`` is false (a render judges every catalog case: minutes with a cold
    cache, seconds with the one the suite's renders fill)."""
    site, outside = installed
    env = {k: v for k, v in os.environ.items() if k != "KINKCHECK_REPORTS"}
    env.update(PYTHONPATH=str(site), KINKCHECK_ASK_HOME=str(outside.parent / "ask"))
    if own_cache:
        env["KINKCHECK_CACHE_DIR"] = str(outside.parent / "cache")
    return subprocess.run([sys.executable, "-m", "kinkcheck", *args], cwd=cwd or outside, env=env,
                          capture_output=True, text=True, timeout=600, check=False)


def _said(res: subprocess.CompletedProcess[str]) -> str:
    return f"exit {res.returncode}\n{res.stdout[-1500:]}\n{res.stderr[-1500:]}"


def test_diff_reaches_the_shipped_report(installed):
    cut = ["--case", "relu@0", "--program", CLAMP, "--mode", "reverse", "--dtype", "float64"]
    res = _run(installed, "diff", "torch-2.13.0-cpu", "torch-2.14.1-cpu", *cut)
    assert res.returncode == 1 and res.stdout.startswith(
        "1 of 1 conventions changed from torch-2.13.0-cpu to torch-2.14.1-cpu"), _said(res)
    assert "1 (right) → 0 (left)" in res.stdout, _said(res)
    data = str(installed[0] / "kinkcheck" / "data" / "reports")
    res = _run(installed, "diff", "#torch-2.13.0-cpu", "torch-2.14.1-cpu", "--report", data, *cut)
    assert res.returncode == 1 and "1 of 1 conventions changed" in res.stdout, _said(res)
    res = _run(installed, "diff", "reports/conventions.json#torch-2.13.0-cpu", "torch-2.14.1-cpu")
    assert res.returncode == 2 and "reports/conventions.json" in res.stderr, \
        f"no reports/ here: the path names a file, which is not there: {_said(res)}"
    res = _run(installed, "diff", "torch-2.13.0-cpu", "torch-2.14.0-cpu")
    assert res.returncode == 2 and "no environment 'torch-2.14.0-cpu' in the report (nearest: " in res.stderr \
        and "torch-2.14.1-cpu" in res.stderr and len(res.stderr.strip().splitlines()) == 1, _said(res)


def test_report_says_what_it_leaves_out_outside_a_checkout_and_reads_the_checkout_inside(installed, tmp_path):
    shard = ROOT / "references" / "observations" / "tinygrad-0.14.0-cpu.json"  # a small one: a render of seconds
    (tmp_path / "shards").mkdir()
    shutil.copy(shard, tmp_path / "shards")
    res = _run(installed, "report", "--shards", str(tmp_path / "shards"), "--out", str(tmp_path / "out"),
               own_cache=False)
    assert res.returncode == 0, _said(res)
    left = [ln for ln in res.stderr.splitlines() if "left out" in ln]
    assert len(left) == 1 and "no references/kinkhits/ beside the catalog" in left[0] and \
        str(installed[0]) in left[0] and "kink-hit census is left out" in left[0], _said(res)
    clone = tmp_path / "clone" / "references"
    for part in ("programs", "census", "kinkhits"):
        shutil.copytree(ROOT / "references" / part, clone / part)
    shutil.copy(ROOT / "references" / "catalog.toml", clone / "catalog.toml")
    (clone / "observations").mkdir()
    shutil.copy(shard, clone / "observations")
    res = _run(installed, "report", "--shards", "references/observations", "--out", str(tmp_path / "mine"),
               cwd=clone.parent, own_cache=False)
    assert res.returncode == 0 and "left out" not in res.stderr, _said(res)
    doc = json.loads(gzip.decompress((tmp_path / "mine" / "conventions.json.gz").read_bytes()))
    hits = len(list((ROOT / "references" / "kinkhits").glob("*.json")))
    assert len(doc["kink_hits"]) == hits > 0, f"the checkout's kinkhits/ is read: {len(doc['kink_hits'])} of {hits}"


def test_cite_links_the_published_site(installed):
    res = _run(installed, "cite", CLAMP)
    lines = res.stdout.splitlines()
    assert res.returncode == 0 and lines[1] == (
        f"Report cell: {SITE}report/cases/relu-at-0.html#case-relu-at-0--torch-torch-clamp-x-min-0--torch-2-15-0-"
        "cpu"), \
        _said(res)
    assert not any(ln.startswith("Local page:") for ln in lines), "the installed package has no case pages"
    res = _run(installed, "cite", CLAMP, "--link-base", "https://example.org/r/report/conventions.html")
    assert res.stdout.splitlines()[1].startswith("Report cell: https://example.org/r/report/cases/relu-at-0.html#"), \
        _said(res)


def test_grad_and_ask_on_cuda_answer_from_the_report(installed):
    pytest.importorskip("torch", reason="grad evaluates with torch before it finds no CUDA device")
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device exists here: grad measures on it")
    res = _run(installed, "grad", CLAMP, "--at", "x=0", "--device", "cuda", "--no-isolate")
    lines = res.stdout.splitlines()
    assert res.returncode == 0 and lines[0].startswith(
        "from the report; not measured here (this machine has no CUDA device): torch 2.11.0 on cuda"), _said(res)
    assert lines[1] == '{"x": 1.0}' and str(installed[0]) in res.stdout, _said(res)
    res = _run(installed, "ask", CLAMP, "--at", "x=0", "--device", "cuda")
    assert res.returncode == 0 and "the report's cells on cuda: torch 2.11.0 cuda (" in res.stdout and \
        "from the report; not measured here" in res.stdout and "\n  2.11.0 cuda: 1 right\n" in res.stdout, _said(res)


def test_the_rules_child_starts_from_the_installed_package(installed, tmp_path):
    """A render infers a framework's rules in a child process (kinkcheck.rules.ahead): from an installed package,
    outside the checkout, the child starts (the package's folder first on its path), reads its rows' file and the
    catalog; here the catalog is not the render's, so it stops there with exit 2 and says so, and the render
    is left to infer the part itself (tests/rules/test_rules_ahead.py runs the whole child from the source tree)."""
    script = """
import dataclasses, pyarrow as pa, kinkcheck
from kinkcheck.catalog import load_catalog
from kinkcheck.rules import ahead
cat = load_catalog()
edited = dataclasses.replace(cat, cases=cat.cases[:-1])  # the file's path and hash, not its cases
rows = pa.table({c: pa.array([], pa.string()) for c in ("case", "program", "framework", "framework_version",
                 "device", "environment", "mode", "dtype", "status", "value")})
started = ahead.start(lambda fw: rows, edited, {"torch": "rows of torch"}, {"torch": 0})
(key, child, path), = started.children.values()
print("rows file", path.exists())
print("waited", started.wait("torch", key), child.returncode, path.exists())
print("package", kinkcheck.__file__)
"""
    site, outside = installed
    env = {k: v for k, v in os.environ.items() if k != "KINKCHECK_REPORTS"}
    env.update(PYTHONPATH=str(site), KINKCHECK_CACHE_DIR=str(tmp_path / "cache"))
    res = subprocess.run([sys.executable, "-c", script], cwd=outside, env=env, capture_output=True, text=True,
                         timeout=300, check=False)
    out = res.stdout.splitlines()
    assert res.returncode == 0 and out[0] == "rows file True" and out[1] == "waited False 2 False", _said(res)
    assert out[2].startswith(f"package {site}"), f"the installed package, not the checkout's: {out[2]}"
    assert "inferring torch's rules ahead failed (exit 2); inferred here instead" in res.stderr and \
        "not the catalog the render read" in res.stderr and str(site) in res.stderr, _said(res)
