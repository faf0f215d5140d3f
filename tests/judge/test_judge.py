"""Judging shards: a case the oracle cannot judge is marked, each shard judged once per content and judging
code, kept judgements equal fresh ones."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import ROOT, SMALL_CASES, SMALL_SHARDS

from kinkcheck import cli
from kinkcheck.render import CASES, FILES, validate_report
from kinkcheck.judge.build import build
from kinkcheck.report.dataset import read_observations, write_parquet
from kinkcheck.report.model import report_json
from kinkcheck.shards import load_shards, unpack


OBS = ROOT / "references" / "observations"


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
    shard = unpack(json.loads((OBS / "torch-2.13.0-cpu.json").read_text()))
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
    validate_report(json.loads(report_json(doc)))
    cases = {c.id: c.oracle for c in doc.cases}
    wiggle, shifted = cases["wiggle@0"], cases["sqrt-abs-shift@1"]
    assert wiggle.kind == "not-judged" and wiggle.reason.startswith("not judged:") and \
        wiggle.lipschitz is None, f"x² sin(1/x) at 0: the oracle must say it cannot judge, and why: {wiggle}"
    assert shifted.kind == "kink" and shifted.lipschitz is False and shifted.clarke is None, shifted
    assert cases["kth@too-far"].kind == "not-judged" and "does not evaluate" in cases["kth@too-far"].reason, \
        cases["kth@too-far"]
    cells = {(o.case, o.dtype): o for o in doc.observations}
    assert cells[("kth@too-far", "float64")].labels == ["not-judged"], cells[("kth@too-far", "float64")]
    assert cells[("wiggle@0", "float64")].labels == ["not-judged"], cells[("wiggle@0", "float64")]
    assert cells[("wiggle@0", "float32")].labels == ["nan"], "nan is said without an oracle"
    assert cells[("sqrt-abs-shift@1", "float64")].labels == ["not-lipschitz"], \
        "0 where f is not locally Lipschitz: no Clarke set to be outside of (Q5)"
    assert cells[("wiggle@0", "float64")].conformance in (None, "open"), "no rule is checked unjudged"
    assert doc.summary.cases_not_judged == 2 and doc.summary.not_lipschitz == 1, doc.summary
    assert doc.summary.outside_clarke == 0, "nothing is called outside a Clarke set that does not exist"

    out = tmp_path / "out"
    code = cli.main(["report", "--shards", str(root / "shards"), "--out", str(out), "--catalog",
                     str(root / "catalog.toml")])
    err = capsys.readouterr().err
    assert code == 0 and "Traceback" not in err, f"exit {code}: {err}"
    page = (out / CASES / "wiggle-at-0.md").read_text()
    assert wiggle.reason.replace("|", "\\|") in page, "the case page says why the oracle did not judge it"
    assert "not-judged" in page, "and labels its cells so"
    assert "none: f is not locally Lipschitz" in (out / CASES / "sqrt-abs-shift-at-1.md").read_text(), \
        "no Clarke set, said as such"
    back = read_observations(out / "observations.parquet")
    assert sorted(tuple(o.labels) for o in back if o.dtype == "float64") == \
        [("not-judged",), ("not-judged",), ("not-lipschitz",)]
    again = tmp_path / "again"
    assert cli.main(["report", "--shards", str(root / "shards"), "--out", str(again), "--catalog",
                     str(root / "catalog.toml")]) == 0
    for name in [*FILES, *(f"{CASES}/{p.name}" for p in (out / CASES).iterdir())]:
        assert (out / name).read_bytes() == (again / name).read_bytes(), f"{name}: the render is not deterministic"


def test_an_old_oracle_table_without_lipschitz_still_builds(unjudged, monkeypatch):
    """A cached oracle entry written before ``lipschitz``/``reason`` existed: labels come out the same."""
    from kinkcheck.judge import build as build_module

    root, cat = unjudged
    real = build_module.oracle_table

    def old_table(catalog):
        table = real(catalog)
        return {cid: {k: v for k, v in d.items() if k not in ("lipschitz", "reason")} for cid, d in table.items()}

    monkeypatch.setattr(build_module, "oracle_table", old_table)
    shards, _ = load_shards(root / "shards", cat)
    doc = build(shards, cat)
    labels = {o.case: o.labels for o in doc.observations if o.dtype == "float64"}
    assert labels == {"wiggle@0": ["not-judged"], "sqrt-abs-shift@1": ["not-lipschitz"],
                      "kth@too-far": ["not-judged"]}, labels




def test_a_program_s_own_constants_read_the_same_in_every_dtype():
    """tinygrad's x.selu() rounds λ to 1.0507 (issue 44): judged against its own function, its right slope is
    ``right`` in float32 and float64 alike, and the cell says so with ``own-constants``; the program that
    passes the exact constants is judged by the case's function, without the mark."""
    import pyarrow.parquet as pq

    rows = pq.read_table(ROOT / "reports" / "observations.parquet",
                         columns=["program", "framework", "mode", "dtype", "status", "value", "labels"],
                         filters=[("case", "=", "selu@0"), ("framework", "=", "tinygrad"),
                                  ("mode", "=", "reverse")]).to_pylist()
    own = [r for r in rows if r["program"] == "x.selu()" and r["status"] == "ok"
           and r["dtype"] in ("float32", "float64")]
    assert {r["dtype"] for r in own} == {"float32", "float64"}, f"both dtypes measured: {own}"
    for r in own:
        assert r["labels"][0] == "right" and r["labels"][-1] == "own-constants", \
            f"x.selu() {r['dtype']} {r['value']}: {r['labels']} (its own λ = 1.0507 makes 1.0507 its right slope)"
    exact = [r for r in rows if r["program"] != "x.selu()" and r["status"] == "ok"]
    assert exact and all("own-constants" not in r["labels"] for r in exact), exact


def test_a_shard_msgpack_cannot_encode_is_judged_without_the_cache(tmp_path, monkeypatch, catalog):
    """A value past 64 bits has no msgpack form, so no cache key: the shard is judged (its observation kept,
    labelled) and nothing is written to the cache."""
    import dataclasses

    monkeypatch.setenv("KINKCHECK_CACHE_DIR", str(tmp_path))
    small = dataclasses.replace(catalog, cases=tuple(c for c in catalog if c.id == "relu@0"))
    s = unpack(json.loads((OBS / "torch-2.13.0-cpu.json").read_text()))
    s["observations"] = [o for o in s["observations"] if o["case"] == "relu@0"]
    s["environment"]["huge"] = 2 ** 70  # a field the report does not read; the encoder still meets it
    report = build([s], small)
    assert report.observations and all(o.labels for o in report.observations), "judged, every observation labelled"
    assert not list((tmp_path / "judged").glob("[!.]*")), "nothing kept (the folder holds at most the pruning stamp)"


def test_a_render_from_shard_files_reads_kept_parts_and_equals_one_from_whole_shards(tmp_path, monkeypatch, catalog):
    """Issue 46, item 5: a render reads its shards lazily (:class:`kinkcheck.shards.ShardFile`), the Parquet file
    from the judged shards' columns (:func:`kinkcheck.report.dataset.fragment`) and the parts of *Changed in*,
    the mode and the within-framework disagreements kept per shard or pair of shards
    (:func:`kinkcheck.judge.sections._kept`). Each way gives the same report and file as whole shards and every
    part computed; a second build computes no part; a damaged part is computed again, the same."""
    import dataclasses

    import kinkcheck.judge.sections as sec

    monkeypatch.setenv("KINKCHECK_CACHE_DIR", str(tmp_path / "cache"))
    small = dataclasses.replace(catalog, cases=tuple(c for c in catalog if c.id in SMALL_CASES))
    folder = tmp_path / "shards"
    folder.mkdir()
    whole = []
    for name in (*SMALL_SHARDS, "torch-2.14.1-cpu.json"):  # two torch releases: one boundary of *Changed in*
        s = unpack(json.loads((OBS / name).read_text()))
        s["observations"] = [o for o in s["observations"] if o["case"] in SMALL_CASES]
        (folder / name).write_text(json.dumps(s))
        whole.append(s)
    computed: list[str] = []
    real = sec._kept

    def spy(report, kind, environments, compute, *item):
        return real(report, kind, environments, lambda: computed.append(kind.split()[0]) or compute(), *item)

    monkeypatch.setattr(sec, "_kept", spy)
    files, errors = load_shards(folder, small, lazy=True)
    assert not errors, errors
    lazy = build(files, small)
    assert sorted(set(computed)) == ["changed-in", "modes", "within"], f"an empty cache computes each part: {computed}"
    assert lazy.changed_in, "torch 2.13.0 → 2.14.1 changed a convention of relu@0 or where-sqrt@-1"
    computed.clear()
    monkeypatch.setattr(sec, "_kept", lambda report, kind, envs, compute, *item: compute())  # every part computed
    plain = build(whole, small)
    assert report_json(lazy) == report_json(plain), "lazy shard files and kept parts: the same report"
    assert write_parquet(lazy, lazy.fragments) == write_parquet(plain), \
        "the Parquet file joined from the judged columns is the one built from the observations"
    import io

    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from kinkcheck.report.dataset import sorted_rows

    file_rows = pq.read_table(io.BytesIO(write_parquet(plain))).replace_schema_metadata(None)
    for fw in ("torch", "jax"):  # what the rules inferred ahead read (kinkcheck.rules.ahead): the file's rows
        mine = file_rows.filter(pc.equal(file_rows["framework"], fw)).combine_chunks()
        assert mine.num_rows and sorted_rows(lazy, lazy.fragments, framework=fw).equals(mine), \
            f"{fw}'s rows from the judged columns are the file's rows of {fw}, in its order"
        assert sorted_rows(plain, framework=fw).equals(mine), f"and from the observations: {fw}"
    monkeypatch.setattr(sec, "_kept", spy)
    files, _ = load_shards(folder, small, lazy=True)
    assert report_json(build(files, small)) == report_json(plain) and computed == [], \
        f"a second build reads every kept part: {computed}"
    import pickle

    for i, entry in enumerate(sorted((tmp_path / "cache" / "derived").glob("[!.]*"))):
        entry.write_bytes(pickle.dumps(0.5) if i % 2 else b"not a pickle")  # a pickle of another thing, or none
    assert report_json(build(files, small)) == report_json(plain) and computed, \
        "damaged parts are computed again, the same"
    with pytest.raises(ValueError, match="rows"):
        write_parquet(lazy, {**lazy.fragments, "torch-2.13.0-cpu": lazy.fragments["jax-0.10.2-cpu"]})

    # an environment entry edited in the cache (its digest kept): not taken, the file is read whole
    entry = tmp_path / "cache" / "shard-environments" / files[-1].digest
    good = entry.read_bytes()
    entry.write_bytes(good.replace(b'"framework_version": "2.14.1"', b'"framework_version": "2.14.9"'))
    assert entry.read_bytes() != good, "the entry was edited"
    shutil.rmtree(tmp_path / "cache" / "derived")  # no part to fall back on: each computed from what is taken
    assert report_json(build(load_shards(folder, small, lazy=True)[0], small)) == report_json(plain), \
        "an edited environment entry is not taken: the report is the one of whole shards"


def test_a_judged_shard_holds_one_object_per_distinct_value_and_keeps_signed_zeros_apart(tmp_path, monkeypatch,
                                                                                       catalog):
    """Equal values of a shard's observations are one object (and their flats), so the kept entry pickles each once
    and a render reads it back fast; values that are equal as numbers but not as measurements (0.0 and -0.0) stay
    apart, and what each observation says is what its shard said."""
    import dataclasses
    import math
    import pickle

    from kinkcheck.judge.build import judged_shard, judging_context

    monkeypatch.setenv("KINKCHECK_CACHE_DIR", str(tmp_path))
    small = dataclasses.replace(catalog, cases=tuple(c for c in catalog if c.id == "relu@0"))
    s = unpack(json.loads((OBS / "torch-2.13.0-cpu.json").read_text()))
    s["observations"] = [o for o in s["observations"] if o["case"] == "relu@0" and o["status"] == "ok"]
    assert len(s["observations"]) >= 4, "relu@0 measured in several modes and dtypes"
    s["observations"][0]["value"] = {"x": -0.0}
    s["observations"][1]["value"] = {"x": 0.0}
    s["observations"][2]["value"] = {"x": float("nan")}
    said = {(o["program"], o["mode"], o["dtype"]): o["value"] for o in s["observations"]}
    j = judged_shard(s, judging_context(small))
    flats = {id(v): f for v, f in j.flats}
    assert len(flats) == len(j.flats) < len(j.observations), "one flat per distinct value, fewer than observations"
    for o in j.observations:
        flat = flats[id(o.value)]
        want = said[(o.program, o.mode, o.dtype)]
        assert repr(o.value) == repr(want), f"{o.program} {o.mode} {o.dtype}: {o.value!r}, the shard said {want!r}"
        x = o.value["x"]
        assert flat[0] == x or (math.isnan(x) and math.isnan(flat[0])), (o.value, flat)
        if x == 0:
            assert math.copysign(1, flat[0]) == math.copysign(1, x), f"a signed zero keeps its sign: {flat}"
    by_repr: dict[str, list[int]] = {}
    for o in j.observations:
        by_repr.setdefault(repr(o.value), []).append(id(o.value))
    assert max(len(ids) for ids in by_repr.values()) >= 2, f"some value repeats across modes and dtypes: {by_repr}"
    assert all(len(set(ids)) == 1 for ids in by_repr.values()), "one object per distinct value"
    back = pickle.loads(pickle.dumps(j))
    assert [repr(o.value) for o in back.observations] == [repr(o.value) for o in j.observations], "kept as judged"
