"""The report: valid against the committed JSON Schema, deterministic, every cell traced to a shard."""

from __future__ import annotations

import copy
import json

import jsonschema
import pytest

from kinkcheck.report import validate_report
from kinkcheck.report.build import build, disagreements
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


def _without_timestamp(d):
    d = copy.deepcopy(d)
    d["provenance"].pop("generated_at")
    return d


def test_report_matches_schema(doc):
    validate_report(doc)


def test_schema_rejects_a_broken_report(doc):
    bad = copy.deepcopy(doc)
    bad["observations"][0]["labels"] = ["sideways"]
    with pytest.raises(jsonschema.ValidationError):
        validate_report(bad)


def test_committed_report_is_the_render_of_the_committed_shards(doc):
    committed = json.loads((ROOT / "reports" / "conventions.json").read_text())
    validate_report(committed)
    assert _without_timestamp(committed) == json.loads(json.dumps(_without_timestamp(doc))), (
        "reports/conventions.json is stale: run `nox -s report` and commit it"
    )
    md = (ROOT / "reports" / "conventions.md").read_text()
    fresh = render_markdown(doc)
    strip = lambda text: "\n".join(ln for ln in text.splitlines() if "Generated at" not in ln)  # noqa: E731
    assert strip(md) == strip(fresh), "reports/conventions.md is stale: run `nox -s report` and commit it"
    csv_text = (ROOT / "reports" / "conventions.csv").read_text()
    assert csv_text == render_csv(doc), "reports/conventions.csv is stale: run `nox -s report` and commit it"


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
    assert _without_timestamp(again) == _without_timestamp(doc), "report must be deterministic"
    a, b = render_markdown(doc), render_markdown({**again, "provenance": doc["provenance"]})
    assert a == b, "Markdown must be byte-identical for the same shards and timestamp"


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
