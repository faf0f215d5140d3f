"""The report: valid against the committed JSON Schema, byte-identical for the same shards, written as a set
into a checked folder, every cell traced to a shard."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import jsonschema
import pytest

from kinkcheck import cli
from kinkcheck.report import FILES, OutputError, _replace_set, set_problems, validate_report, write_reports
from kinkcheck.report.build import build, disagreements, report_date
from kinkcheck.report.csvfile import read_observations, render_csv
from kinkcheck.report.markdown import render_markdown
from kinkcheck.shards import load_shards

from conftest import ROOT

OBS = ROOT / "references" / "observations"


@pytest.fixture(scope="module")
def doc(catalog):
    shards, errors = load_shards(OBS)
    assert not errors, errors
    return build(shards, catalog)


def test_report_matches_schema(doc):
    validate_report(doc)


def test_schema_rejects_a_broken_report(doc):
    bad = copy.deepcopy(doc)
    bad["observations"][0]["labels"] = ["sideways"]
    with pytest.raises(jsonschema.ValidationError):
        validate_report(bad)


def test_committed_reports_are_the_byte_identical_render_of_the_committed_shards(catalog, tmp_path):
    committed = json.loads((ROOT / "reports" / "conventions.json").read_text())
    validate_report(committed)
    shards, errors = load_shards(OBS, catalog)
    write_reports(shards, catalog, tmp_path, gaps=errors)
    for name in FILES:
        fresh, kept = (tmp_path / name).read_text(), (ROOT / "reports" / name).read_text()
        drawn = re.search(r'<meta name="generator" content="[^"]*; (matplotlib [^"]+)">', kept)
        here = f"matplotlib {metadata.version('matplotlib')}"
        if name == "conventions.html" and drawn and drawn.group(1) != here:  # the plots: compare all but them
            fresh, kept = (re.sub(r"<svg.*?</svg>|matplotlib [^\"]+", "", t, flags=re.S) for t in (fresh, kept))
        assert fresh == kept, f"reports/{name} is stale: run `nox -s render` and commit it"
    assert set_problems(ROOT / "reports") == [], "the committed report files are one set"


def test_csv_round_trips_into_the_json_observations(doc, tmp_path):
    path = tmp_path / "conventions.csv"
    path.write_text(render_csv(doc))
    back = read_observations(path)
    assert len(back) == len(doc["observations"]), "one CSV row per observation"
    assert back == json.loads(json.dumps(doc["observations"])), "CSV rows must read back as the JSON observations"
    header = path.read_text().splitlines()[0].split(",")
    assert header[:3] == ["case", "program", "framework"] and "conformance" in header, header


def test_csv_refuses_another_file(tmp_path):
    path = tmp_path / "other.csv"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="not a kinkcheck observations CSV"):
        read_observations(path)


def test_same_shards_render_identically(catalog, doc):
    shards, _ = load_shards(OBS)
    again = build(shards, catalog)
    assert again == doc, "report must be deterministic, timestamp included"
    assert render_markdown(doc) == render_markdown(again), "Markdown must be byte-identical for the same shards"
    newest = max(s["environment"]["measured_at"] for s in shards)  # the committed shards all write +00:00
    assert doc["provenance"]["generated_at"] == newest, "the report's date is the newest measurement, not the clock"


def test_report_date_is_the_newest_measurement():
    envs = [{"measured_at": "2026-03-01T12:00:00+00:00"}, {"measured_at": "2026-03-01T13:30:00+02:00"},
            {"measured_at": "2026-03-01T11:00:00"}, {"measured_at": "yesterday"}, {}]
    assert report_date(envs) == "2026-03-01T12:00:00+00:00", "13:30+02:00 is 11:30 UTC; a naive time is UTC"
    assert report_date([{"measured_at": "soon"}]) == "unknown", "nothing readable: said, not invented"


#: A small report (two cases of two shards) for the tests that render whole sets.
SMALL_CASES = ("relu@0", "where-sqrt@-1")
SMALL_SHARDS = ("torch-2.13.0-cpu.json", "jax-0.10.2-cpu.json")
_SMALL_RENDER = """
import dataclasses, json, sys
from pathlib import Path
from kinkcheck.catalog import load_catalog
from kinkcheck.report import write_reports
cases, shards = json.loads(sys.argv[1]), [json.loads(Path(p).read_text()) for p in json.loads(sys.argv[2])]
catalog = load_catalog()
catalog = dataclasses.replace(catalog, cases=tuple(c for c in catalog if c.id in cases))
for s in shards:
    s["observations"] = [o for o in s["observations"] if o["case"] in cases]
write_reports(shards, catalog, Path(sys.argv[3]))
"""


def _render_small(out: Path, cache: Path, tz: str = "UTC") -> None:
    """Render the small report in a fresh process with its own plot cache and time zone."""
    env = {**os.environ, "KINKCHECK_CACHE_DIR": str(cache), "TZ": tz}
    args = [json.dumps(SMALL_CASES), json.dumps([str(OBS / n) for n in SMALL_SHARDS]), str(out)]
    proc = subprocess.run([sys.executable, "-c", _SMALL_RENDER, *args], env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Warning" not in proc.stderr, f"the render warned: {proc.stderr[-2000:]}"


def test_two_processes_render_byte_identical_sets(tmp_path):
    """Another process, another time zone, every plot drawn anew: the same bytes (what a fresh clone gets)."""
    _render_small(tmp_path / "a", tmp_path / "cache-a", "UTC")
    _render_small(tmp_path / "b", tmp_path / "cache-b", "Pacific/Kiritimati")
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == sorted(FILES), \
        "the render writes the four files and nothing else (no cache, no temporary file) into its folder"
    for name in FILES:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), f"{name} differs"
    assert set_problems(tmp_path / "a") == []
    digest = hashlib.sha256((tmp_path / "a" / "conventions.json").read_bytes()).hexdigest()
    assert digest in (tmp_path / "a" / "conventions.md").read_text(), "the Markdown names its JSON's digest"


def test_a_mixed_set_is_detected(tmp_path):
    _render_small(tmp_path / "a", tmp_path / "cache")
    older = json.loads((tmp_path / "a" / "conventions.json").read_text())
    older["provenance"]["gaps"] = ["an older render"]
    (tmp_path / "a" / "conventions.json").write_text(json.dumps(older))
    problems = set_problems(tmp_path / "a")
    assert len(problems) == 2 and all("does not belong to" in p for p in problems), problems


def _old_set(folder: Path) -> dict[str, bytes]:
    folder.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        (folder / name).write_text(f"old {name}\n")
    return {name: (folder / name).read_bytes() for name in FILES}


def test_a_failed_write_keeps_the_old_set_whole_and_cleans_up(tmp_path, monkeypatch):
    old = _old_set(tmp_path)
    (tmp_path / ".conventions.md.k1ll3d.tmp").write_text("left by a killed run")
    real_replace = os.replace

    def refuse(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OutputError, match="previous report files are untouched"):
        _replace_set(tmp_path, {name: f"new {name}\n" for name in FILES})
    assert {n: (tmp_path / n).read_bytes() for n in FILES} == old, "the old set must survive a failed render"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(FILES), "temporary files are removed"
    monkeypatch.setattr(os, "replace", real_replace)
    (tmp_path / ".conventions.json.k1ll3d.tmp").write_text("left by a killed run")
    _replace_set(tmp_path, {name: f"new {name}\n" for name in FILES})
    assert all((tmp_path / n).read_text() == f"new {n}\n" for n in FILES), "all four replaced"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(FILES), "stale temporary files are removed"


def _bad_outputs(tmp: Path) -> dict[str, Path]:
    (tmp / "file").write_text("a regular file\n")
    _old_set(tmp / "html-is-a-folder")
    (tmp / "html-is-a-folder" / "conventions.html").unlink()
    (tmp / "html-is-a-folder" / "conventions.html").mkdir()
    return {"/dev/null": Path("/dev/null"), "under a file": tmp / "file" / "reports",
            "/proc": Path("/proc/kinkcheck-reports"), "html is a folder": tmp / "html-is-a-folder", "empty": ""}


@pytest.mark.parametrize("kind", ["/dev/null", "under a file", "/proc", "html is a folder", "empty"])
def test_report_refuses_an_unusable_output_folder(tmp_path, capsys, kind):
    out = _bad_outputs(tmp_path)[kind]
    if kind == "/proc" and not Path("/proc").is_dir():
        pytest.skip("no /proc on this system")
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    old = {n: (Path(out) / n).read_bytes() for n in FILES if (Path(out) / n).is_file()}  # "" is the cwd
    code = cli.main(["report", "--shards", str(OBS), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2, f"{kind}: exit {code}, {err}"
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err and ("--out" in err if kind == "empty"
                                                                             else str(out) in err), err
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before, f"{kind}: something was written"
    assert {n: (Path(out) / n).read_bytes() for n in FILES if (Path(out) / n).is_file()} == old, \
        f"{kind}: old files changed"
    assert not Path("/proc/kinkcheck-reports").exists()


def test_temporary_files_are_ignored_by_git():
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    for path in ("reports/.conventions.json.abc123.tmp", "references/observations/.torch-2.13.0-cpu.json.x.tmp"):
        proc = subprocess.run(["git", "check-ignore", "-q", path], cwd=ROOT, check=False)
        assert proc.returncode == 0, f"{path} is not ignored by .gitignore"


def test_every_observation_comes_from_a_shard(doc):
    shards, _ = load_shards(OBS)
    recorded = {(s["environment"]["id"], o["case"], o["program"], o["dtype"], o["mode"]): o["value"]
                for s in shards for o in s["observations"]}
    for o in doc["observations"]:
        key = (o["environment"], o["case"], o["program"], o["dtype"], o["mode"])
        assert key in recorded and recorded[key] == o["value"], f"report cell {key} not traced to a shard"


def _obs(doc, env_prefix, case, program, dtype="float64"):
    for o in doc["observations"]:
        if o["environment"].startswith(env_prefix) and o["case"] == case and o["program"] == program \
                and o["dtype"] == dtype:
            return o
    raise AssertionError(f"no observation {env_prefix} {case} {program} {dtype}")


def test_labels_in_report(doc):
    o = _obs(doc, "jax-", "relu@0", "jax.numpy.maximum(x, 0.0)")
    assert o["value"] == {"x": 0.5} and o["labels"][0] == "mean", f"jnp.maximum at 0: {o}"
    o = _obs(doc, "jax-", "relu@0", "jax.nn.relu(x)")
    assert o["labels"][:2] == ["left", "min-norm"], f"jax.nn.relu at 0: {o}"
    o = _obs(doc, "torch-2.13.0", "relu@0", "torch.clamp(x, min=0)")
    assert o["value"] == {"x": 1.0} and o["labels"][0] == "right", f"torch 2.13 clamp at 0: {o}"


def test_disagreements_found(doc, catalog):
    within = {(env, d["case"]) for d in doc["disagreements"]["within"] for env in d["environments"]}
    assert any(env.startswith("jax") and case == "relu@0" for env, case in within), "jax relu@0 programs differ"
    across = {d["case"] for d in doc["disagreements"]["across"]}
    assert "abs@0" in across, "torch.abs (0) vs jnp.abs (1) at 0 is an across-framework disagreement"
    assert disagreements(doc, catalog) == doc["disagreements"], "disagreements are derived, not stored by hand"


def test_p0_worked_example(doc):
    oracle = {r["kink_derivative"]: r for r in doc["p0"]["oracle"]}
    diff = [[a - b for a, b in zip(r0, r1)] for r0, r1 in zip(oracle["0"]["W1"], oracle["1"]["W1"])]
    assert diff == [[0, 0], [0, 0], [0, -38]], f"NumPy oracle relu'(0)=0 minus =1: {diff}"
    assert oracle["0"]["W2"] == oracle["1"]["W2"], "W2 does not depend on relu'(0)"
    assert oracle["1/2"]["W1"][2][1] == 1279, "relu'(0)=1/2 lands halfway"
    rows = {(env, m["program"]): m for m in doc["p0"]["measured"] for env in m["environments"]}
    relu = rows[("torch-2.13.0-cpu", "torch.nn.functional.relu(x)")]
    clamp = rows[("torch-2.13.0-cpu", "x.clamp(min=0)")]
    measured = [[a - b for a, b in zip(r0, r1)] for r0, r1 in zip(relu["W1"], clamp["W1"])]
    assert measured == [[0, 0], [0, 0], [0, -38]], f"PyTorch 2.13.0 reproduces the seed: {measured}"
    assert all(m["ok"] for m in doc["p0"]["measured"]), "every measured P0 row agrees with the NumPy oracle"


def test_markdown_sections(doc):
    md = render_markdown(doc)
    for heading in ("Disagreements", "### Within one framework", "### Across frameworks",
                    "## Worked example: P0", "## Cases", '<a id="case-relu-at-0"></a>',
                    '<a id="case-clamp-at-minus-1"></a>', '<a id="case-clamp-at-1"></a>'):
        assert heading in md, f"Markdown report lacks {heading!r}"


def test_anchors_are_unique(doc):
    import re
    from collections import Counter

    anchors = Counter(re.findall(r'<a id="([^"]+)"></a>', render_markdown(doc)))
    dupes = [a for a, n in anchors.items() if n > 1]
    assert not dupes, f"anchors must be unique to be citable: {dupes[:5]}"
    links = set(re.findall(r"\]\(#([^)]+)\)", render_markdown(doc)))
    assert links <= set(anchors), f"links to missing anchors: {sorted(links - set(anchors))[:5]}"


def _mode_rows(doc, **match):
    return [r for r in doc["mode_disagreements"]["rows"] if all(r[k] == v for k, v in match.items())]


def test_mode_dtype_device_section_is_computed_from_the_shards(doc):
    """Rows come from the shards' own cells: each names environments whose cells hold exactly those values."""
    index = {(o["environment"], o["case"], o["program"], o["mode"], o["dtype"]): o for o in doc["observations"]}
    rows = doc["mode_disagreements"]["rows"]
    assert rows, "the measured shards differ by mode or dtype somewhere"
    for r in rows:
        for eid in r["environments"]:
            for d in r["dtypes"]:
                ob = index[(eid, r["case"], r["program"], r["mode"], d)]
                ref_dtype = r["reference_dtype"] if r["comparison"].startswith("float64") else d
                ref = index[(eid, r["case"], r["program"], r["reference_mode"], ref_dtype)]
                assert ob["value"] == r["observed"]["value"] and ref["value"] == r["reference"]["value"], r
                assert ob["labels"][0] == r["observed"]["label"], r


def test_known_mode_and_dtype_disagreements_are_listed(doc):
    envs = {e["id"] for e in doc["environments"] if e.get("modes")}
    if "torch-2.13.0-cpu" not in envs or "jax-0.10.2-cpu" not in envs:
        pytest.skip("the pinned releases' shards predate the mode matrix")
    fmax = _mode_rows(doc, case="maximum@tie", program="torch.fmax(x, y)", mode="forward")
    assert fmax and "torch-2.13.0-cpu" in fmax[0]["environments"], "torch.fmax: reverse [1, 0], forward [0, 1]"
    assert fmax[0]["reference"]["value"] == {"x": 1.0, "y": 0.0} and fmax[0]["observed"]["value"] == {"x": 0.0, "y": 1.0}
    where = _mode_rows(doc, case="where-sqrt@-1", framework="jax", mode="forward")
    assert where and where[0]["reference"]["label"] == "nan" and where[0]["observed"]["value"] == {"x": 1.0}
    bf16 = _mode_rows(doc, case="hardtanh0.7@0.69921875", program="torch.minimum(x, torch.full_like(x, 0.7))",
                      comparison="float64 vs bfloat16")
    assert bf16 and bf16[0]["observed"]["value"] == {"x": 0.5}, "0.7 rounds to x in bfloat16: a tie"
    rounded = _mode_rows(doc, case="relu@1e-45", program="torch.relu(x)", comparison="float64 vs float16")
    assert rounded and rounded[0]["observed"]["input"] == {"x": 0.0}, "the cell says the input rounded to 0"
    assert any("CPU vs CUDA not measured" in m for m in doc["mode_disagreements"]["not_measured"]) or \
        any(e["device"] == "cuda" for e in doc["environments"])


def test_networks_cross_checked_per_mode(doc):
    modes = {(n["framework"], n["mode"]) for n in doc["networks"] if n["ok"] is True}
    if not any(e.get("modes") for e in doc["environments"]):
        pytest.skip("no shard with the mode matrix")
    for want in [("torch", "reverse"), ("torch", "forward"), ("torch", "inductor"), ("torch", "aot_eager"),
                 ("jax", "reverse"), ("jax", "forward"), ("jax", "jit")]:
        assert want in modes, f"P0 network cross-checked in {want}: {sorted(modes)}"


#: Three cases the sympy oracle cannot fully judge, each with one torch program. ``x**2 * sin(1/x)`` at 0 is a
#: real "not judged": the gradient ``2x sin(1/x) - cos(1/x)`` has no limit at 0 (sympy gives AccumBounds), so
#: the oracle says why instead of answering. ``kth_smallest(v, 3)`` of two elements does not evaluate at all
#: (not judged, and no curve to plot). ``sqrt(Abs(x - 1)) + 1`` at 1 (public case Q5) is judged: one-sided
#: derivatives -oo and oo, not locally Lipschitz, no Clarke set.
UNJUDGED = """
[[case]]
id = "wiggle@0"
title = "x² sin(1/x) at 0"
sympy = "x**2 * sin(1/x)"
at = { x = 0 }
no_equivalent = { jax = "torch only in this test" }
[case.programs]
torch = ["x ** 2 * torch.sin(1 / x)"]

[[case]]
id = "sqrt-abs-shift@1"
title = "sqrt(|x - 1|) + 1 at 1"
sympy = "sqrt(Abs(x - 1)) + 1"
at = { x = 1 }
no_equivalent = { jax = "torch only in this test" }
[case.programs]
torch = ["torch.sqrt(torch.abs(x - 1)) + 1"]

[[case]]
id = "kth@too-far"
title = "the third smallest of two"
sympy = "kth_smallest(v, 3)"
at = { v = [1, 2] }
no_equivalent = { jax = "torch only in this test" }
[case.programs]
torch = ["torch.amax(v)"]
"""


@pytest.fixture(scope="module")
def unjudged(tmp_path_factory):
    """A catalog of the two cases and one torch shard of them, in a temporary folder.

    The shard's cells are test inputs, not measurements: 0 (float64) and nan (float32) for each program, the
    values a report must render whatever the oracle can say (Q5 reports 0 at 1 for the second case).
    """
    from kinkcheck.catalog import load_catalog

    root = tmp_path_factory.mktemp("unjudged")
    (root / "catalog.toml").write_text(UNJUDGED)
    cat = load_catalog(root / "catalog.toml")
    shard = json.loads((OBS / "torch-2.13.0-cpu.json").read_text())
    shard["environment"]["catalog_hash"] = cat.hash
    for k in ("case_hashes", "history", "last_attempt"):
        shard["environment"].pop(k, None)
    shard["observations"] = [
        {"case": c.id, "program": p.id, "mode": "reverse", "dtype": dtype, "status": "ok",
         "value": {name: [v] * len(at) if isinstance(at, list) else v for name, at in c.at.items()}, "error": None}
        for c in cat for p in c.programs for dtype, v in (("float64", 0.0), ("float32", "nan"))
    ]
    shard["networks"] = []
    (root / "shards").mkdir()
    (root / "shards" / "torch-2.13.0-cpu.json").write_text(json.dumps(shard))
    return root, cat


def test_a_case_the_oracle_cannot_judge_renders_marked(unjudged, tmp_path, capsys):
    root, cat = unjudged
    shards, errors = load_shards(root / "shards", cat)
    assert not errors, errors
    doc = build(shards, cat)
    validate_report(doc)
    cases = {c["id"]: c for c in doc["cases"]}
    wiggle, shifted = cases["wiggle@0"], cases["sqrt-abs-shift@1"]
    assert wiggle["kind"] == "not-judged" and wiggle["reason"].startswith("not judged:") and \
        wiggle["lipschitz"] is None, f"x² sin(1/x) at 0: the oracle must say it cannot judge, and why: {wiggle}"
    assert shifted["kind"] == "kink" and shifted["lipschitz"] is False and shifted["clarke"] is None, shifted
    assert cases["kth@too-far"]["kind"] == "not-judged" and "does not evaluate" in cases["kth@too-far"]["reason"], \
        cases["kth@too-far"]
    cells = {(o["case"], o["dtype"]): o for o in doc["observations"]}
    assert cells[("kth@too-far", "float64")]["labels"] == ["not-judged"], cells[("kth@too-far", "float64")]
    assert cells[("wiggle@0", "float64")]["labels"] == ["not-judged"], cells[("wiggle@0", "float64")]
    assert cells[("wiggle@0", "float32")]["labels"] == ["nan"], "nan is said without an oracle"
    assert cells[("sqrt-abs-shift@1", "float64")]["labels"] == ["not-lipschitz"], \
        "0 where f is not locally Lipschitz: no Clarke set to be outside of (Q5)"
    assert cells[("wiggle@0", "float64")].get("conformance") in (None, "open"), "no rule is checked unjudged"
    assert doc["summary"]["cases_not_judged"] == 2 and doc["summary"]["not_lipschitz"] == 1, doc["summary"]
    assert doc["summary"]["outside_clarke"] == 0, "nothing is called outside a Clarke set that does not exist"

    out = tmp_path / "out"
    code = cli.main(["report", "--shards", str(root / "shards"), "--out", str(out), "--catalog",
                     str(root / "catalog.toml")])
    err = capsys.readouterr().err
    assert code == 0 and "Traceback" not in err, f"exit {code}: {err}"
    md = (out / "conventions.md").read_text()
    reason = wiggle["reason"].replace("|", "\\|")
    assert f"| sympy | {reason} |" in md, "the oracle row of the case says why it is not judged"
    assert "0 <sub>not-judged</sub>" in md and "0 <sub>not-lipschitz</sub>" in md, "cells show value and label"
    assert "none: f is not locally Lipschitz" in md, "no Clarke set, said as such"
    html = (out / "conventions.html").read_text()
    assert 'class="not-judged">not judged:' in html and 'class="lb lb-not-judged"' in html, \
        "the HTML marks the case and its cells"
    assert html.count("no curve: f does not evaluate here") == 1, "only kth@too-far has no curve to draw"
    back = read_observations(out / "conventions.csv")
    assert sorted(tuple(o["labels"]) for o in back if o["dtype"] == "float64") == \
        [("not-judged",), ("not-judged",), ("not-lipschitz",)]
    again = tmp_path / "again"
    assert cli.main(["report", "--shards", str(root / "shards"), "--out", str(again), "--catalog",
                     str(root / "catalog.toml")]) == 0
    for name in FILES:
        assert (out / name).read_bytes() == (again / name).read_bytes(), f"{name}: the render is not deterministic"


def test_an_old_oracle_table_without_lipschitz_still_builds(unjudged, monkeypatch):
    """A cached oracle entry written before ``lipschitz``/``reason`` existed: labels come out the same."""
    from kinkcheck.report import build as build_module

    root, cat = unjudged
    real = build_module.oracle_table

    def old_table(catalog):
        table = real(catalog)
        return {cid: {k: v for k, v in d.items() if k not in ("lipschitz", "reason")} for cid, d in table.items()}

    monkeypatch.setattr(build_module, "oracle_table", old_table)
    shards, _ = load_shards(root / "shards", cat)
    doc = build(shards, cat)
    labels = {o["case"]: o["labels"] for o in doc["observations"] if o["dtype"] == "float64"}
    assert labels == {"wiggle@0": ["not-judged"], "sqrt-abs-shift@1": ["not-lipschitz"],
                      "kth@too-far": ["not-judged"]}, labels
