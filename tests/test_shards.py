"""Shards: schema validation, atomic writes, corrupt files named in a one-line error."""

from __future__ import annotations

import json
import os
import re

import pytest
from catalogs import MAXIMUM_AT_TIE
from conftest import ROOT

from kinkcheck.shards import ShardError, load_shards, read_shard, write_json_atomic, write_shard

OBS = ROOT / "references" / "observations"


def _minimal(env_id="torch-2.13.0-cpu"):
    fw, version, device = env_id.split("-")
    return {
        "schema": "kinkcheck/shard/v1",
        "environment": {"id": env_id, "framework": fw, "framework_version": version, "device": device,
                        "python": "3.11.7", "platform": "test", "measured_at": "2026-01-01T00:00:00+00:00",
                        "kinkcheck_version": "0.1.0", "catalog_hash": "0"},
        "observations": [{"case": "relu@0", "program": "torch.relu(x)", "mode": "reverse", "dtype": "float64",
                          "status": "ok", "value": {"x": "nan"}, "error": None}],
        "networks": [],
    }


def test_committed_shards_are_valid():
    shards, errors = load_shards(OBS)
    assert not errors, f"committed shards must all be valid: {errors}"
    assert {s["environment"]["framework"] for s in shards} >= {"torch", "jax"}, "both frameworks recorded"


def test_round_trip(tmp_path):
    p = tmp_path / "s.json"
    write_shard(p, _minimal())
    assert read_shard(p) == _minimal(), "a shard reads back as written"
    assert oct(os.stat(p).st_mode & 0o777) == "0o644", "shards are world-readable records"


@pytest.mark.parametrize(
    "content, reason",
    [
        ('{"schema": "kinkcheck/shard/v1", "environment": {', "invalid JSON at line 1"),
        ("", "invalid JSON"),
        ('{"schema": "other"}', "not a kinkcheck shard"),
        ("[1, 2]", "not a kinkcheck shard"),
    ],
)
def test_corrupt_shard_names_the_file(tmp_path, content, reason):
    p = tmp_path / "bad.json"
    p.write_text(content)
    with pytest.raises(ShardError) as info:
        read_shard(p)
    msg = str(info.value)
    assert str(p) in msg and reason in msg, f"one-line error naming the file and the fault, got {msg!r}"
    assert "\n" not in msg


def test_bad_value_type_is_refused(tmp_path):
    bad = _minimal()
    bad["observations"][0]["value"] = {"x": "NaN!"}
    with pytest.raises(ShardError, match="not a kinkcheck shard"):
        write_shard(tmp_path / "s.json", bad)
    assert not (tmp_path / "s.json").exists(), "nothing is written for an invalid shard"


def test_load_shards_keeps_good_ones_and_reports_bad(tmp_path):
    write_shard(tmp_path / "a.json", _minimal("torch-2.13.0-cpu"))
    write_shard(tmp_path / "b.json", _minimal("jax-0.10.2-cpu"))
    full = (tmp_path / "a.json").read_text()
    (tmp_path / "c.json").write_text(full[: len(full) // 2])  # truncated
    shards, errors = load_shards(tmp_path)
    assert [s["environment"]["id"] for s in shards] == ["jax-0.10.2-cpu", "torch-2.13.0-cpu"], "good shards load"
    assert len(errors) == 1 and "c.json" in errors[0], f"the truncated shard is named: {errors}"


def test_the_shard_named_for_its_environment_wins_over_a_stray_copy(tmp_path):
    shard = _minimal("torch-2.13.0-cpu")
    write_shard(tmp_path / "torch-2.13.0-cpu.json", shard)
    copy = json.loads(json.dumps(shard))
    copy["environment"]["platform"] = "the copy"
    write_shard(tmp_path / "torch-2.13.0-cpu (copy).json", copy)  # sorts before the real one
    shards, errors = load_shards(tmp_path)
    assert [s["environment"].get("platform") for s in shards] == [shard["environment"].get("platform")], \
        "the file named <environment id>.json is the one loaded"
    assert len(errors) == 1 and "(copy).json" in errors[0] and "kept: torch-2.13.0-cpu.json" in errors[0], errors


def test_atomic_write_interrupted_leaves_old_file(tmp_path, monkeypatch):
    p = tmp_path / "s.json"
    write_json_atomic(p, {"old": True})

    def boom(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(KeyboardInterrupt):
        write_json_atomic(p, {"new": True})
    assert json.loads(p.read_text()) == {"old": True}, "an interrupted write leaves the old file whole"
    assert [f.name for f in tmp_path.iterdir()] == ["s.json"], "no temporary file is left behind"


def test_missing_folder():
    with pytest.raises(ShardError, match="no such shard folder"):
        load_shards(ROOT / "does-not-exist")


# --- Per-case freshness, merging, failed attempts (issue 10: never lose a measurement) -------------------

TINY = """
[[case]]
id = "relu@0"
title = "relu at 0"
sympy = "Max(x, 0)"
at = { x = 0 }
activation = "relu"
sources = ["P0"]
[case.programs]
torch = ["torch.relu(x)", "torch.clamp(x, min=0)"]
jax = ["jax.nn.relu(x)"]
""" + MAXIMUM_AT_TIE

MODES = ("reverse", "functional", "forward", "forward-ad", "inductor", "aot_eager", "vmap", "second-order")
DTYPES = ("float64", "float32", "float16", "bfloat16")


def _catalog(tmp_path, text=TINY, name="catalog.toml"):
    from kinkcheck.catalog import load_catalog

    p = tmp_path / name
    p.write_text(text)
    return load_catalog(p)


def _value(case_id, v=0.0):
    return {"x": v} if case_id == "relu@0" else {"x": v, "y": v}


def _shard(catalog, cases=None, modes=MODES, dtypes=DTYPES, v=0.0, status="ok", hashes=True, measured_at="t0"):
    """A torch-2.13.0-cpu shard of ``cases`` × every program × ``modes`` × ``dtypes`` (value ``v``)."""
    cases = [c for c in catalog if cases is None or c.id in cases]
    env = {"id": "torch-2.13.0-cpu", "framework": "torch", "framework_version": "2.13.0", "device": "cpu",
           "python": "3.11.7", "platform": "test", "measured_at": measured_at, "kinkcheck_version": "0.1.0",
           "catalog_hash": catalog.hash, "dtypes": list(dtypes), "modes": list(modes)}
    if hashes:
        env["case_hashes"] = {c.id: c.measurement_hash("torch") for c in cases}
    obs = [{"case": c.id, "program": p.id, "mode": m, "dtype": d, "status": status,
            "value": _value(c.id, v) if status == "ok" else None, "error": None if status == "ok" else "why"}
           for c in cases for p in c.programs_for("torch") for m in modes for d in dtypes]
    nets = [{"case": c.id, "program": p.id, "mode": m, "dtype": d, "status": "ok", "W1": [[v, v]] * 3,
             "W2": [[v, v]] * 2, "error": None}
            for c in cases if c.activation for p in c.programs_for("torch") for m in ("reverse", "forward")
            if m in modes for d in ("float64", "float32") if d in dtypes]
    return {"schema": "kinkcheck/shard/v1", "environment": env, "observations": obs, "networks": nets}


def test_case_hash_covers_what_determines_a_measurement(tmp_path):
    base = _catalog(tmp_path).case("relu@0")
    h = base.measurement_hash("torch")
    assert len(h) == 16 and int(h, 16) >= 0, f"16 hex digits, got {h!r}"

    def variant(old, new):
        assert old in TINY, old
        name = f"v{len(list(tmp_path.iterdir()))}.toml"  # load_catalog caches by path: a new file each time
        return _catalog(tmp_path, TINY.replace(old, new, 1), name).case("relu@0").measurement_hash("torch")

    assert variant('"torch.clamp(x, min=0)"]', '"torch.clamp(x, min=0)", "torch.nn.functional.relu(x)"]') != h, \
        "a new program changes the case's hash"
    assert variant("at = { x = 0 }", "at = { x = 1e-45 }") != h, "another point changes it"
    assert variant('activation = "relu"', 'activation = "relu6"') != h, "another activation (P0 network) changes it"
    assert variant('sources = ["P0"]', 'sources = ["P0"]\nmodes = ["forward"]') != h, "extra modes change it"
    for old, new, what in [('title = "relu at 0"', 'title = "ReLU"', "the title"),
                           ('sources = ["P0"]', 'sources = ["P1", "P2"]', "the sources"),
                           ('sympy = "Max(x, 0)"', 'sympy = "Max(0, x)"', "the oracle expression (judged at render)"),
                           ('jax = ["jax.nn.relu(x)"]', 'jax = ["jax.nn.relu(x)", "jax.numpy.maximum(x, 0.0)"]',
                            "another framework's programs")]:
        assert variant(old, new) == h, f"{what} does not determine what torch returns: same hash"


def test_committed_shards_are_fresh_per_case(catalog):
    from kinkcheck.shards import missing_work, unaccounted

    shards, errors = load_shards(OBS)
    assert not errors, errors
    for s in shards:
        env = s["environment"]
        if env.get("not_measured"):
            continue
        assert isinstance(env.get("case_hashes"), dict) and env["case_hashes"], f"{env['id']}: records case_hashes"
        work = missing_work(s, catalog)
        # what a shard records as not measured, with the reason, per program (shards.not_measured_cases: the CUDA
        # shards and the cases added after them) or per mode (a probe cut short)
        uncovered = unaccounted(s, catalog, [c.id for c in catalog])
        assert not uncovered and not work.changed, (
            f"{env['id']}: every case × mode × dtype present and current, or recorded as not measured with the "
            f"reason; got {work.summary()} ({len(uncovered)} case(s) unaccounted: {', '.join(uncovered[:5])})")
        if work.absent:
            assert env["device"] != "cpu", f"{env['id']}: a CPU shard measures every case here ({work.absent[:3]})"


def test_missing_work_cell_by_cell(tmp_path):
    from kinkcheck.shards import missing_work

    cat = _catalog(tmp_path)
    full = _shard(cat)
    assert missing_work(full, cat).fresh, "the full matrix, current hashes: fresh"
    assert missing_work(_shard(cat, status="unavailable"), cat).fresh, \
        "an unavailable cell (a mode the release lacks) is present"
    one_gone = {**full, "observations": [o for o in full["observations"] if not (
        o["case"] == "relu@0" and o["program"] == "torch.clamp(x, min=0)" and o["mode"] == "vmap"
        and o["dtype"] == "bfloat16")]}
    work = missing_work(one_gone, cat)
    assert not work.fresh and work.cells == (("relu@0", "vmap", "bfloat16"),), \
        f"one program's observation missing: that one cell, got {work.cells}"
    assert work.cases == ("relu@0",) and work.modes == ("vmap",) and work.dtypes == ("bfloat16",)
    narrowed = _shard(cat, modes=("reverse",), dtypes=("float64",))  # the narrowed probe
    work = missing_work(narrowed, cat)
    assert not work.fresh and len(work.cells) == 2 * (8 * 4 - 1), f"every other mode × dtype missing: {work.summary()}"
    absent = missing_work(_shard(cat, cases=["relu@0"]), cat)
    assert absent.absent == ("maximum@tie",) and len(absent.cells) == 32, absent.summary()
    assert missing_work(None, cat, "torch").absent == ("relu@0", "maximum@tie"), "no shard: every case"


def test_changed_removed_and_legacy_cases(tmp_path):
    from kinkcheck.shards import missing_work

    cat = _catalog(tmp_path)
    edited = _catalog(tmp_path, TINY.replace("at = { x = 1, y = 1 }", "at = { x = 2, y = 2 }"), "edited.toml")
    work = missing_work(_shard(cat), edited)
    assert work.changed == ("maximum@tie",) and work.cases == ("maximum@tie",) and len(work.cells) == 32, \
        f"a case whose point changed is re-probed in full, the other is kept: {work.summary()}"
    fewer = _catalog(tmp_path, TINY[: TINY.index("[[case]]", 10)], "fewer.toml")
    work = missing_work(_shard(cat), fewer)
    assert work.fresh and work.removed == ("maximum@tie",), f"a removed case is listed, not probed: {work}"
    legacy = _shard(cat, hashes=False)
    assert missing_work(legacy, cat).fresh, "no case_hashes, same catalog hash: every case current"
    legacy["environment"]["catalog_hash"] = "0" * 16
    assert missing_work(legacy, cat).changed == ("relu@0", "maximum@tie"), \
        "no case_hashes and another catalog: every case is stale"


def test_not_measured_record_is_never_fresh(tmp_path):
    from kinkcheck.shards import is_fresh, missing_work, record_failed_attempt

    cat = _catalog(tmp_path)
    p = tmp_path / "torch-2.13.0-cpu.json"
    env = {**_shard(cat)["environment"], "not_measured": "install failed: index unreachable"}
    msg = record_failed_attempt(p, env)
    assert "not measured" in msg and read_shard(p)["environment"]["not_measured"].startswith("install failed")
    assert not is_fresh(p, cat), "a not-measured record carries the current hashes but is never fresh"
    assert missing_work(read_shard(p), cat).not_measured, "and says why"
    assert not is_fresh(tmp_path / "missing.json", cat), "a missing shard is not fresh"
    p.write_text(p.read_text()[:40])
    assert not is_fresh(p, cat), "a truncated shard is not fresh"


def test_failed_attempt_never_replaces_a_measured_shard(tmp_path):
    """Issue 10 item 1: a failed install during --remeasure replaced all 28 shards with not-measured records."""
    from kinkcheck.shards import is_fresh, record_failed_attempt

    cat = _catalog(tmp_path)
    p = tmp_path / "torch-2.13.0-cpu.json"
    write_shard(p, _shard(cat))
    before = read_shard(p)
    env = {**before["environment"], "measured_at": "t1", "not_measured": "install failed: torch==2.13.0: no index"}
    env.pop("case_hashes")
    msg = record_failed_attempt(p, env)
    after = read_shard(p)
    assert after["observations"] == before["observations"] and after["networks"] == before["networks"], \
        "every observation kept"
    assert after["environment"]["last_attempt"] == {"attempted_at": "t1",
                                                    "not_measured": "install failed: torch==2.13.0: no index"}, msg
    assert "not_measured" not in after["environment"], "the shard stays a measurement"
    assert is_fresh(p, cat), "a complete shard stays fresh after a failed re-measure (nothing is missing)"
    shards, errors = load_shards(tmp_path)
    assert len(shards) == 1 and not errors, f"one environment, no duplicate: {errors}"
    (tmp_path / "junk.json").write_text("{")
    assert "left as it is" in record_failed_attempt(tmp_path / "junk.json", env), "an unreadable file is not replaced"
    assert (tmp_path / "junk.json").read_text() == "{"


def test_narrowed_merge_keeps_every_other_cell(tmp_path):
    """Issue 10 item 2: `probe --mode reverse --dtype float64` replaced the full shard with 121 observations."""
    from kinkcheck.shards import merge_shard, missing_work

    cat = _catalog(tmp_path)
    old = _shard(cat)
    new = _shard(cat, modes=("reverse",), dtypes=("float64",), v=1.0, measured_at="t1")
    merged = merge_shard(old, new, cat)
    assert len(merged["observations"]) == len(old["observations"]) == 96, "nothing lost, nothing doubled"
    changed = [i for i, (a, b) in enumerate(zip(old["observations"], merged["observations"])) if a != b]
    assert len(changed) == 3 and all(merged["observations"][i]["mode"] == "reverse" and
                                     merged["observations"][i]["dtype"] == "float64" and
                                     merged["observations"][i]["value"]["x"] == 1.0 for i in changed), \
        "exactly the 3 re-probed cells change, each in its old place"
    assert len(merged["networks"]) == len(old["networks"]) and sum(
        n["W1"][0][0] == 1.0 for n in merged["networks"]) == 2, "the re-probed network runs replaced, others kept"
    env = merged["environment"]
    assert env["modes"] == list(MODES) and env["dtypes"] == list(DTYPES), "the matrix is the union"
    assert [h["measured_at"] for h in env["history"]] == ["t0", "t1"], env["history"]
    assert env["measured_at"] == "t1" and missing_work(merged, cat).fresh
    write_shard(tmp_path / "m.json", merged)  # valid against the schema


def test_merge_drops_removed_and_redefined_cases(tmp_path):
    from kinkcheck.shards import merge_shard

    cat = _catalog(tmp_path)
    old = _shard(cat)
    fewer = _catalog(tmp_path, TINY[: TINY.index("[[case]]", 10)], "fewer.toml")
    new = _shard(fewer, modes=("reverse",), dtypes=("float64",))
    merged = merge_shard(old, new, fewer, drop_removed=True)
    assert {o["case"] for o in merged["observations"]} == {"relu@0"}, "asked: a case no longer in the catalog drops out"
    assert set(merged["environment"]["case_hashes"]) == {"relu@0"}
    edited = _catalog(tmp_path, TINY.replace("at = { x = 1, y = 1 }", "at = { x = 2, y = 2 }"), "edited.toml")
    new = _shard(edited, cases=["maximum@tie"], modes=("reverse",), dtypes=("float64",), v=2.0)
    merged = merge_shard(old, new, edited)
    tie = [o for o in merged["observations"] if o["case"] == "maximum@tie"]
    assert len(tie) == 1 and tie[0]["value"] == {"x": 2.0, "y": 2.0}, \
        "the old cells of a redefined case measure another point: only the new one stays"
    assert merged["environment"]["case_hashes"]["maximum@tie"] == edited.case("maximum@tie").measurement_hash("torch")


def test_merge_refuses_to_shrink_and_other_environments(tmp_path):
    from kinkcheck.shards import merge_shard

    cat = _catalog(tmp_path)
    old = _shard(cat)
    new = _shard(cat, cases=["relu@0"], modes=("reverse",), dtypes=("float64",))
    new["observations"] = new["observations"][:1]  # one program of a two-program cell
    with pytest.raises(ShardError, match="refusing to write a shard with 95 measured .ok. observations of current "
                                         "cases over one with 96"):
        merge_shard(old, new, cat)
    assert merge_shard(old, new, cat, replace=True) is new, "an explicit full re-measure replaces"
    other = _shard(cat)
    other["environment"]["id"] = "torch-2.12.0-cpu"
    with pytest.raises(ShardError, match="holds torch-2.13.0-cpu, not torch-2.12.0-cpu"):
        merge_shard(old, other, cat)


def test_write_merged_over_an_unreadable_shard_writes_nothing(tmp_path):
    from kinkcheck.shards import write_merged

    cat = _catalog(tmp_path)
    p = tmp_path / "torch-2.13.0-cpu.json"
    p.write_text('{"schema": "kinkcheck/shard/v1", "environment": {')
    with pytest.raises(ShardError, match="left as it is"):
        write_merged(p, _shard(cat), cat)
    assert p.read_text().endswith("{"), "the unreadable file is untouched"
    write_merged(p, _shard(cat), cat, replace=True)
    assert len(read_shard(p)["observations"]) == 96, "--replace overwrites it"


def test_drop_removed(tmp_path):
    from kinkcheck.shards import drop_removed

    cat = _catalog(tmp_path)
    p = tmp_path / "torch-2.13.0-cpu.json"
    write_shard(p, _shard(cat))
    assert drop_removed(p, cat) == (), "nothing removed: nothing written"
    fewer = _catalog(tmp_path, TINY[: TINY.index("[[case]]", 10)], "fewer.toml")
    assert drop_removed(p, fewer) == ("maximum@tie",)
    s = read_shard(p)
    assert {o["case"] for o in s["observations"]} == {"relu@0"} and list(s["environment"]["case_hashes"]) == ["relu@0"]


def test_a_catalog_cut_to_one_case_drops_nothing_unless_asked(tmp_path):
    """Issue 10: `probe --catalog small.toml --out-dir obs` (a catalog of one case) dropped 49 cases from the
    shard (2856 -> 196 observations). The others are kept as they are; --drop-removed drops them."""
    from kinkcheck.shards import merge_shard, missing_work

    cat = _catalog(tmp_path)
    old = _shard(cat)
    one = _catalog(tmp_path, TINY[: TINY.index("[[case]]", 10)], "one.toml")
    new = _shard(one, modes=("reverse",), dtypes=("float64",), v=1.0, measured_at="t1")
    merged = merge_shard(old, new, one)
    assert len(merged["observations"]) == len(old["observations"]) == 96, "no case dropped, none doubled"
    assert [(o["case"], o["program"], o["mode"], o["dtype"]) for o in merged["observations"]] == \
        [(o["case"], o["program"], o["mode"], o["dtype"]) for o in old["observations"]], "each row in its place"
    tie = [o for o in merged["observations"] if o["case"] == "maximum@tie"]
    assert tie == [o for o in old["observations"] if o["case"] == "maximum@tie"], "the case outside kept as it was"
    assert merged["environment"]["case_hashes"]["maximum@tie"] == cat.case("maximum@tie").measurement_hash("torch")
    assert missing_work(merged, cat).fresh, "against the full catalog the shard is still complete"
    assert len(merged["networks"]) == len(old["networks"])
    dropped = merge_shard(old, new, one, drop_removed=True)
    assert {o["case"] for o in dropped["observations"]} == {"relu@0"}, "--drop-removed drops it"


@pytest.mark.parametrize("status, error", [
    ("error", "interpreter crashed: signal 9 (SIGKILL) while probing this case"),
    ("unavailable", "inductor: InvalidCxxCompiler: No working C++ compiler found"),
])
def test_an_ok_value_is_never_replaced_by_one_that_could_not_be_measured(tmp_path, status, error):
    """Issue 10: a killed worker wrote error cells over good ok cells, and a re-probe where inductor cannot
    compile (CXX=/bin/false) wrote `unavailable` over measured values; the row count stayed, so no guard fired.
    Within one build the measured value stays and the history says how many could not be re-measured."""
    from kinkcheck.shards import current_count, merge_shard

    cat = _catalog(tmp_path)
    old = _shard(cat)
    new = _shard(cat, modes=("inductor", "forward", "reverse"), dtypes=("float64",), v=1.0, measured_at="t1")
    for o in new["observations"] + new["networks"]:
        if o["mode"] in ("inductor", "forward"):
            o.update(status=status, error=error, **({"value": None} if "value" in o else {"W1": None, "W2": None}))
    merged = merge_shard(old, new, cat)
    cell = {(o["case"], o["program"], o["mode"], o["dtype"]): o for o in merged["observations"]}
    assert cell[("relu@0", "torch.relu(x)", "inductor", "float64")] == \
        next(o for o in old["observations"] if o["mode"] == "inductor" and o["dtype"] == "float64"), \
        "the old ok cell is kept whole"
    assert cell[("relu@0", "torch.relu(x)", "reverse", "float64")]["value"] == {"x": 1.0}, "ok cells are replaced"
    assert current_count(merged, cat) == current_count(old, cat) == 96
    part = merged["environment"]["history"][-1]
    assert part["not_remeasured"] == {"observations": 6, "networks": 2, "reasons": [f"{status}: {error}"]}, part
    assert [n["W1"][0][0] for n in merged["networks"] if n["dtype"] == "float64"] == [1.0, 0.0, 1.0, 0.0], \
        "reverse network runs re-measured, forward ones kept"
    write_shard(tmp_path / "m.json", merged)  # the history entry is valid against the schema


def test_the_guard_counts_measured_cells_not_rows(tmp_path):
    """Issue 10: the guard counted rows, so `unavailable` over measured values passed it. It counts ok cells:
    with another build (no ok cell is kept then), turning measured values into errors is refused."""
    from kinkcheck.shards import current_count, merge_shard

    cat = _catalog(tmp_path)
    old = _shard(cat)
    old["environment"]["framework_build"] = "2.13.0+cpu"
    new = _shard(cat, modes=("inductor",), dtypes=("float64",), status="unavailable", measured_at="t1")
    new["environment"]["framework_build"] = "2.13.0+cu128"
    assert current_count(new, cat) == 0, "unavailable cells are not measurements"
    with pytest.raises(ShardError, match="refusing to write a shard with 93 measured .ok. observations"):
        merge_shard(old, new, cat)
    assert merge_shard(old, new, cat, replace=True) is new, "--replace is the explicit way"


def test_nox_writes_wait_for_no_probe_but_never_overwrite_one(tmp_path):
    """A failed attempt or a drop of removed cases (nox) while a probe holds the environment's lock would
    overwrite that probe's merge: nothing is written then, and the line says why."""
    from kinkcheck.shards import drop_removed, record_failed_attempt, shard_lock

    cat = _catalog(tmp_path)
    p = tmp_path / "torch-2.13.0-cpu.json"
    write_shard(p, _shard(cat))
    before = p.read_bytes()
    fewer = _catalog(tmp_path, TINY[: TINY.index("[[case]]", 10)], "fewer.toml")
    env = {**_shard(cat)["environment"], "measured_at": "t1", "not_measured": "install failed"}
    with shard_lock(p):
        assert drop_removed(p, fewer) == (), "busy: nothing dropped"
        line = record_failed_attempt(p, env)
        assert "another probe is writing torch-2.13.0-cpu" in line and "not recorded" in line, line
    assert p.read_bytes() == before, "the shard untouched while locked"
    assert drop_removed(p, fewer) == ("maximum@tie",), "unlocked: dropped"
    assert not list(tmp_path.glob(".*.lock")), "no lock file left behind"


def _paths(node, prefix=()):
    """Every path into a JSON document (keys and list indexes), the document's own excluded."""
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for k, v in items:
        yield prefix + (k,)
        yield from _paths(v, prefix + (k,))


def test_fastjsonschema_accepts_and_refuses_what_jsonschema_does():
    """The shard schema is checked by fastjsonschema (compiled once); each mutation of a valid shard (every value
    replaced by each kind of junk, every key deleted) gets the verdict of the reference validator, jsonschema."""
    import copy

    import jsonschema

    from kinkcheck.shards import _validate, shard_schema

    reference = jsonschema.validators.validator_for(shard_schema())(shard_schema())
    base = _minimal()
    base["environment"].update(case_hashes={"relu@0": "0123456789abcdef"}, modes=["reverse"],
                               history=[{"measured_at": "2026", "cases": ["relu@0"]}])
    base["observations"].append({**base["observations"][0], "dtype": "float32", "value": {"v": [[1.0, "inf"]]},
                                 "input": {"x": 0.5}})
    base["networks"] = [{"case": "relu@0", "program": "p", "dtype": "float64", "status": "ok", "mode": "reverse",
                         "W1": [[0.0, 1.0]], "W2": [[2.0]], "error": None}]
    junk = [None, True, 0, 1.5, "nan", "x", "reverse", [], {}, [1.0], [[1.0]], {"a": 1.0}, {"x": "nan"}]
    verdicts = []
    for path in list(_paths(base)):
        for change in [("delete",)] + [("set", j) for j in junk]:
            doc = copy.deepcopy(base)
            parent = doc
            for k in path[:-1]:
                parent = parent[k]
            if change[0] == "delete":
                del parent[path[-1]]
            else:
                parent[path[-1]] = change[1]
            want = reference.is_valid(doc)
            try:
                _validate(doc, "s.json")
                got = True
            except ShardError as err:
                got = False
                msg = str(err)
                assert msg.startswith("s.json: not a kinkcheck shard (") and "\n" not in msg, msg
            verdicts.append(want)
            assert got == want, f"{path} {change}: jsonschema says {'valid' if want else 'invalid'}, fastjsonschema not"
    assert True in verdicts and False in verdicts, "the mutations include valid and invalid shards"


def test_schema_error_names_the_file_and_the_path(tmp_path):
    bad = _minimal()
    bad["observations"][0]["dtype"] = "float8"
    p = tmp_path / "s.json"
    p.write_text(json.dumps(bad))
    with pytest.raises(ShardError) as info:
        read_shard(p)
    msg = str(info.value)
    assert msg.startswith(f"{p}: not a kinkcheck shard (observations/0/dtype: must be one of") and "float8" in msg, msg
    assert "\n" not in msg, msg


def test_a_checked_shard_reads_the_same_from_the_cache_marker(catalog, tmp_path, monkeypatch):
    """The first read checks the JSON strictly and against the schema and leaves a marker; the next reads parse
    with orjson: the same document, also where orjson refuses what json reads (a bare NaN, a 30-digit integer)."""
    import math

    monkeypatch.setenv("KINKCHECK_CACHE_DIR", str(tmp_path / "cache"))
    shard = _minimal()
    shard["observations"].append({**shard["observations"][0], "case": "gone@0", "value": {"q": float("nan")},
                                  "input": {"q": 10 ** 30}})
    p = tmp_path / "s.json"
    p.write_text(json.dumps(shard))  # a bare NaN: not JSON, but json reads it (gone@0 is not in the catalog)
    markers = tmp_path / "cache" / "validated-shards"
    for path in (p, OBS / "torch-2.13.0-cpu.json"):
        before = set(markers.iterdir()) if markers.exists() else set()
        first = read_shard(path, catalog)
        assert len(set(markers.iterdir()) - before) == 1, f"{path.name}: the checked shard leaves a marker"
        again = read_shard(path, catalog)
        assert json.dumps(again) == json.dumps(first), f"{path.name}: the second read gives the same document"
    from kinkcheck.validate import parse_checked_json

    assert parse_checked_json(p.read_bytes()) is None, "orjson refuses the bare NaN: json parses it again"
    nan = read_shard(p, catalog)["observations"][1]
    assert math.isnan(nan["value"]["q"]) and nan["input"]["q"] == 10 ** 30, "read from the marker as json reads it"


def test_a_key_twice_is_refused_in_a_shard(tmp_path):
    text = json.dumps(_minimal()).replace('"status": "ok"', '"status": "ok", "status": "error"', 1)
    p = tmp_path / "s.json"
    p.write_text(text)
    with pytest.raises(ShardError, match="key 'status' appears twice in one object"):
        read_shard(p)


def test_the_semantic_check_is_skipped_only_for_content_and_catalog_it_passed(catalog, tmp_path, monkeypatch):
    """A pass of the semantic checks is recorded per (content, catalog): the same shard read against another
    catalog is checked again, and a failing check records nothing, so it fails (and is named) every time."""
    monkeypatch.setenv("KINKCHECK_CACHE_DIR", str(tmp_path / "cache"))
    shard = _minimal()
    shard["environment"]["catalog_hash"] = catalog.hash  # measured against this catalog: its points apply
    shard["observations"][0]["value"] = {"x": [0.0, 1.0]}  # relu@0's point is a number
    p = tmp_path / "torch-2.13.0-cpu.json"
    p.write_text(json.dumps(shard))
    checked = tmp_path / "cache" / "checked-shards"
    assert read_shard(p)["observations"], "without a catalog the shard is consistent in itself"
    assert read_shard(p)["observations"], "and reads again past its marker"
    assert len(list(checked.iterdir())) == 1, "one pass recorded"
    for _ in range(2):
        with pytest.raises(ShardError, match=r"input 'x' is a list of 2, in the point of relu@0"):
            read_shard(p, catalog)
    assert len(list(checked.iterdir())) == 1, "a failed check records nothing"


def test_a_shard_written_validated_reads_back_without_a_second_check(tmp_path, monkeypatch):
    """write_shard validates before writing and leaves the marker of the bytes it wrote (json_text of a valid
    shard parses strictly and back to it); a file changed afterwards has another digest and is checked."""
    monkeypatch.setenv("KINKCHECK_CACHE_DIR", str(tmp_path / "cache"))
    markers = tmp_path / "cache" / "validated-shards"
    p = tmp_path / "torch-2.13.0-cpu.json"
    shard = _minimal()
    write_shard(p, shard)
    assert len(list(markers.iterdir())) == 1, "the written bytes are marked as checked"
    assert read_shard(p) == shard
    write_shard(tmp_path / "unchecked.json", shard, validate=False)
    assert len(list(markers.iterdir())) == 1, "an unvalidated write leaves no marker"
    p.write_text(p.read_text().replace('"reverse"', '"sideways"'))
    with pytest.raises(ShardError, match="must be one of"):
        read_shard(p)


def test_the_compiled_validator_is_cached_and_a_torn_entry_is_compiled_again(tmp_path, monkeypatch):
    """The schema's fastjsonschema code is cached as bytecode; a torn cache file is compiled again, and the
    validator refuses and accepts the same shards either way."""
    from kinkcheck import shards

    monkeypatch.setenv("KINKCHECK_CACHE_DIR", str(tmp_path / "cache"))
    folder = tmp_path / "cache" / "shard-validators"
    bad = {**_minimal(), "observations": [{**_minimal()["observations"][0], "mode": "sideways"}]}
    for attempt in ("cold", "cached", "torn"):
        shards._compiled.cache_clear()
        if attempt == "torn":
            next(folder.iterdir()).write_bytes(b"\xe3torn")
        validate = shards._validator()
        validate(_minimal())
        with pytest.raises(Exception, match="must be one of"):
            validate(bad)
        assert len(list(folder.iterdir())) == 1, f"{attempt}: one cached validator"
    shards._compiled.cache_clear()


# --- The packed file format, kinkcheck/shard/v2 (issue 14: a quarter of the bytes) -------------------------


def test_pack_round_trips_and_writes_one_line_per_program(tmp_path):
    from kinkcheck.shards import pack, unpack

    shard = _minimal()
    first = shard["observations"][0]
    shard["observations"] = [first, {**first, "dtype": "float32", "input": {"x": 1e-45}},
                             {**first, "program": "torch.nn.functional.relu(x)", "status": "error", "value": None,
                              "error": "boom"},
                             {**first, "mode": "forward"}]  # relu(x) again after another program: its own run
    packed = pack(shard)
    assert [(g["program"], len(g["cells"])) for g in packed["observations"]] == [
        ("torch.relu(x)", 2), ("torch.nn.functional.relu(x)", 1), ("torch.relu(x)", 1)], packed["observations"]
    assert packed["observations"][0]["cells"][1] == ["reverse", "float32", "ok", {"x": "nan"}, None, {"x": 1e-45}]
    assert unpack(json.loads(json.dumps(packed))) == shard, "unpack(pack(s)) == s, key order included"
    write_shard(tmp_path / "s.json", shard)
    lines = (tmp_path / "s.json").read_text().splitlines()
    assert lines[1] == '"schema":"kinkcheck/shard/v2",' and sum(ln.startswith('{"case"') for ln in lines) == 3, lines
    assert read_shard(tmp_path / "s.json") == shard


def test_a_v1_file_is_still_read(tmp_path):
    p = tmp_path / "torch-2.13.0-cpu.json"
    p.write_text(json.dumps(_minimal(), indent=1))
    assert read_shard(p) == _minimal(), "a shard written before issue 14 reads as it is"


@pytest.mark.parametrize("observations, where", [
    ({"case": "relu@0"}, "observations: must be a list of packed programs"),
    ([{"case": "relu@0", "program": "torch.relu(x)"}], "observations/0: must be {case, program, cells}"),
    ([{"case": "relu@0", "program": "torch.relu(x)", "cells": [["reverse", "float64", "ok"]]}],
     "observations/0/cells/0: must be [mode, dtype, status, value, error(, input)]"),
])
def test_a_malformed_packed_file_is_one_line(tmp_path, observations, where):
    p = tmp_path / "torch-2.13.0-cpu.json"
    p.write_text(json.dumps({**_minimal(), "schema": "kinkcheck/shard/v2", "observations": observations}))
    with pytest.raises(ShardError, match=re.escape(f"not a kinkcheck shard ({where}")) as err:
        read_shard(p)
    assert "\n" not in str(err.value)
    cells = [[{"x": 1}, "float64", "ok", None, None]]  # the v1 schema checks the unpacked fields
    p.write_text(json.dumps({**_minimal(), "schema": "kinkcheck/shard/v2",
                             "observations": [{"case": "relu@0", "program": "torch.relu(x)", "cells": cells}]}))
    with pytest.raises(ShardError, match=re.escape("observations/0/cells/0 (mode): must be one of")):
        read_shard(p)


def test_committed_shards_are_packed_files_that_match_the_file_schema():
    """Every committed shard is a v2 file, valid under schemas/shard.v2.json (jsonschema, independently of the
    reader), and the committed schema is what file_schema() derives from the v1 document's."""
    import jsonschema

    from kinkcheck.shards import file_schema

    committed = json.loads((ROOT / "src" / "kinkcheck" / "schemas" / "shard.v2.json").read_text())
    assert committed == file_schema(), "schemas/shard.v2.json is stale: python -m kinkcheck.shards"
    validator = jsonschema.Draft202012Validator(committed)
    for p in sorted(OBS.glob("*.json"))[:6]:
        doc = json.loads(p.read_text())
        assert doc["schema"] == "kinkcheck/shard/v2", p.name
        errors = [e.message for e in validator.iter_errors(doc)]
        assert not errors, f"{p.name}: {errors[:2]}"


def test_a_problem_in_a_packed_file_names_its_place_in_the_file(tmp_path):
    """The breaker changed the 4th cell of program 40 and was told "observations/483/status": a place in the
    unpacked list, not in the file. Now the file's own place is named."""
    from kinkcheck.shards import pack

    shard = _minimal()
    first = shard["observations"][0]
    shard["observations"] = [{**first, "program": f"p{i}", "dtype": d} for i in range(3)
                             for d in ("float64", "float32")]
    packed = pack(shard)
    packed["observations"][2]["cells"][1][2] = "sideways"  # the status of program 2's second cell
    p = tmp_path / "torch-2.13.0-cpu.json"
    p.write_text(json.dumps(packed))
    with pytest.raises(ShardError, match=re.escape("observations/2/cells/1 (status)")):
        read_shard(p)


def test_a_merge_records_where_the_new_part_was_measured(tmp_path):
    from kinkcheck.shards import merge_shard

    cat = _catalog(tmp_path)
    old, new = _shard(cat), _shard(cat, cases=["relu@0"], measured_at="t1")
    old["environment"]["runner"] = {"os": "Linux", "arch": "x86_64"}
    new["environment"]["runner"] = {"os": "Linux", "arch": "x86_64", "ci_runner": "r-2"}
    merged = merge_shard(old, new, cat)
    assert merged["environment"]["runner"] == {"os": "Linux", "arch": "x86_64", "ci_runner": "r-2"}, \
        "the runner of the latest part, like platform and python"
    del new["environment"]["runner"]
    assert merge_shard(old, new, cat)["environment"]["runner"] == {"os": "Linux", "arch": "x86_64"}, \
        "a probe by an older kinkcheck (no runner) keeps the one recorded"


def test_a_shard_from_another_platform_sits_beside_the_linux_one(tmp_path, catalog):
    """A macOS arm64 shard of autograd 1.9.1 (the committed Linux shard with the macOS provenance a macOS runner
    writes) is another environment beside the Linux one: both load, the report keeps both and compares them;
    a shard whose platform tag and id disagree is refused in one line naming the file."""
    import shutil

    from kinkcheck.report.build import build, mode_disagreements

    linux = read_shard(OBS / "autograd-1.9.1-cpu.json")
    mac = json.loads(json.dumps(linux))
    mac["environment"].update(id="autograd-1.9.1-cpu-macos_arm64", platform_tag="macos_arm64",
                              runner={"os": "Darwin", "arch": "arm64", "processor": "arm"})
    shutil.copy(OBS / "autograd-1.9.1-cpu.json", tmp_path / "autograd-1.9.1-cpu.json")
    write_shard(tmp_path / "autograd-1.9.1-cpu-macos_arm64.json", mac)
    shards, errors = load_shards(tmp_path, catalog)
    assert errors == [] and [s["environment"]["id"] for s in shards] == ["autograd-1.9.1-cpu",
                                                                         "autograd-1.9.1-cpu-macos_arm64"]
    report = build(shards, catalog)
    assert [(e.id, e.place, e.title) for e in report.environments] == [
        ("autograd-1.9.1-cpu", "cpu", "1.9.1"), ("autograd-1.9.1-cpu-macos_arm64", "cpu-macos_arm64", "1.9.1 macOS arm64")]
    found = mode_disagreements(report)
    assert not [r for r in found.rows if r.comparison == "Linux x86-64 vs macOS arm64"], "the same values: no row"
    assert not any("another platform" in line for line in found.not_measured), found.not_measured
    bad = json.loads(json.dumps(mac))
    bad["environment"]["id"] = "autograd-1.9.1-cpu"
    (tmp_path / "autograd-1.9.1-cpu-macos_arm64.json").unlink()
    write_shard(tmp_path / "bad.json", bad, validate=False)
    shards, errors = load_shards(tmp_path, catalog)
    assert len(shards) == 1 and len(errors) == 1 and "bad.json" in errors[0] and "macos_arm64" in errors[0], errors


# --------------------------------------------------------------------------- cells the probe caused (issue 30)

PROBE_FAULT = "not measured: the probe put the program's constants on the CPU; re-measure"


def _fault(o):
    return o["program"] == "torch.clamp(x, min=0)" and o["mode"] in ("reverse", "vmap")


def test_withdrawn_cells_leave_the_shard_and_say_why(tmp_path):
    from kinkcheck.shards import missing_work, withdraw
    from kinkcheck.validate import shard_problem

    cat = _catalog(tmp_path)
    shard = _shard(cat, status="error")
    out = withdraw(shard, _fault, PROBE_FAULT)
    assert len(out["observations"]) == 96 - 8, "2 modes × 4 dtypes of one program withdrawn, nothing else"
    assert [o for o in out["observations"] if _fault(o)] == [], "no withdrawn cell stays as an error"
    assert out["environment"]["not_measured_parts"] == [
        {"case": "relu@0", "program": "torch.clamp(x, min=0)", "modes": ["reverse", "vmap"],
         "dtypes": list(DTYPES), "reason": PROBE_FAULT}], out["environment"]["not_measured_parts"]
    assert shard["observations"] and len(shard["observations"]) == 96, "the shard given is left as it was"
    work = missing_work(out, cat)
    assert set(work.cells) == {("relu@0", m, d) for m in ("reverse", "vmap") for d in DTYPES}, (
        f"the next probe measures exactly the withdrawn cells' (case, mode, dtype): {work.cells}")
    assert shard_problem(out, cat) is None
    write_shard(tmp_path / "torch-2.13.0-cpu.json", out)
    assert read_shard(tmp_path / "torch-2.13.0-cpu.json")["environment"]["not_measured_parts"][0]["reason"] == \
        PROBE_FAULT, "the reason survives the file (schema and packing)"


def test_withdraw_refuses_nothing_to_withdraw_and_an_empty_reason_and_takes_ragged_cells(tmp_path):
    from kinkcheck.shards import withdraw

    cat = _catalog(tmp_path)
    shard = _shard(cat)
    with pytest.raises(ShardError, match="no observation to withdraw"):
        withdraw(shard, lambda o: False, PROBE_FAULT)
    with pytest.raises(ShardError, match="must say why"):
        withdraw(shard, _fault, " ")
    ragged = withdraw(shard, lambda o: o["program"] == "torch.clamp(x, min=0)" and (
        o["mode"] == "reverse" and o["dtype"] == "float64" or o["mode"] == "functional" and o["dtype"] == "float32"),
        PROBE_FAULT)
    assert [(p["modes"], p["dtypes"]) for p in ragged["environment"]["not_measured_parts"]] == [
        (["reverse"], ["float64"]), (["functional"], ["float32"])], "cells of other dtypes per mode: a part each"


def test_a_probe_that_measures_the_withdrawn_cells_closes_the_part(tmp_path):
    from kinkcheck.shards import merge_shard, withdraw
    from kinkcheck.validate import shard_problem

    cat = _catalog(tmp_path)
    old = withdraw(_shard(cat), _fault, PROBE_FAULT)
    half = _shard(cat, cases=["relu@0"], modes=("reverse",), v=1.0, measured_at="t1")
    merged = merge_shard(old, half, cat)
    assert merged["environment"]["not_measured_parts"] == [{**old["environment"]["not_measured_parts"][0],
                                                            "modes": ["vmap"]}], (
        "reverse is measured now: the part is narrowed to vmap, the cells still absent "
        f"(the H200 run of stop 30 found a whole part kept): {merged['environment']['not_measured_parts']}")
    assert shard_problem(merged, cat) is None, "a part never names a cell the shard holds"
    ragged = merge_shard(old, _shard(cat, cases=["relu@0"], modes=("vmap",), dtypes=("float64",), v=1.0,
                                     measured_at="t1"), cat)
    assert [(p["modes"], p["dtypes"]) for p in ragged["environment"]["not_measured_parts"]] == [
        (["reverse"], list(DTYPES)), (["vmap"], list(DTYPES[1:]))], "one dtype measured: the rest stays a part"
    assert shard_problem(ragged, cat) is None
    narrowed = merge_shard(old, {**half, "environment": {**half["environment"],
                                                        "not_measured_parts": merged["environment"]["not_measured_parts"]}},
                           cat)
    assert len(narrowed["environment"]["not_measured_parts"]) == 1, (
        "the old whole part and the new narrowed one name the same cells: one part "
        f"(the H200 import of stop 30 wrote 22 for 11): {narrowed['environment']['not_measured_parts']}")
    full = _shard(cat, cases=["relu@0"], modes=("reverse", "vmap"), v=1.0, measured_at="t2")
    merged = merge_shard(merged, full, cat)
    assert "not_measured_parts" not in merged["environment"], "every withdrawn cell measured: no part left"
    assert sum(_fault(o) and o["status"] == "ok" for o in merged["observations"]) == 8


def test_modes_not_reached_are_recorded_until_probed(tmp_path):
    from kinkcheck.shards import merge_shard, not_measured_modes
    from kinkcheck.validate import shard_problem

    cat = _catalog(tmp_path)
    shard = _shard(cat, modes=("reverse", "functional"))
    with pytest.raises(ShardError, match="probed: reverse"):
        not_measured_modes(shard, ["reverse", "vmap"], "the machine's time ran out")
    out = not_measured_modes(shard, ["vmap", "second-order"], "the machine's time ran out")
    assert shard_problem(out, cat) is None
    assert not_measured_modes(out, ["vmap", "second-order"], "again") == out, "recorded once: idempotent"
    merged = merge_shard(out, _shard(cat, modes=("vmap",), measured_at="t1"), cat)
    assert merged["environment"]["not_measured_parts"] == [
        {"modes": ["second-order"], "reason": "the machine's time ran out"}], "vmap is measured now; one mode left"


@pytest.mark.parametrize("part, problem", [
    ({"case": "relu@0", "program": "torch.relu(x)", "modes": ["reverse"], "dtypes": ["float64"], "reason": "why"},
     "says not measured, but the shard holds a cell of it"),
    ({"modes": ["reverse"], "reason": "why"}, "environment.modes says they were probed"),
    ({"case": "relu@0", "modes": ["reverse"], "dtypes": ["float64"], "reason": "why"}, "names a case with its program"),
    ({"case": "relu@0", "program": "torch.relu(x)", "modes": ["sideways"], "dtypes": ["float64"], "reason": "why"},
     "unknown mode or dtype"),
])
def test_a_part_that_contradicts_the_shard_is_refused(tmp_path, part, problem):
    from kinkcheck.validate import shard_problem

    cat = _catalog(tmp_path)
    shard = _shard(cat, modes=("reverse",))
    shard["environment"]["not_measured_parts"] = [part]
    assert problem in (shard_problem(shard, cat) or ""), shard_problem(shard, cat)


def test_the_committed_cuda_shards_hold_no_error_the_probe_caused():
    """Issue 30: the H200 shards of 2d3abce had 288 cells where the program's constants were on the CPU; they were
    withdrawn as not measured, then measured again on an H200 (stop 30) with the constants on the device, compiled
    programs too (``_made_on``). JAX's five modes the first run's deadline cut are measured too: no part is left."""
    torch_cuda = read_shard(OBS / "torch-2.11.0-cuda.json")
    mixed = [o for o in torch_cuda["observations"] if any(s in (o["error"] or "") for s in (
        "same device", "two different devices", "when making fake tensor call"))]
    assert not mixed, f"{len(mixed)} cells still read as PyTorch errors: {mixed[:2]}"
    parts = torch_cuda["environment"].get("not_measured_parts") or []
    added = {o["case"] for o in read_shard(OBS / "torch-2.11.0-cpu.json")["observations"]} - \
        {o["case"] for o in torch_cuda["observations"]}  # cases added to the catalog after the H200 measured
    assert {p.get("case") for p in parts} == added and all("added to the catalog after" in p["reason"] for p in parts), \
        "the only cells not measured on the H200 are those of cases added since, and they say so"
    assert len(torch_cuda["observations"]) == 12640, "every cell of the catalog the H200 measured is kept"
    cpu = {(o["case"], o["program"], o["mode"], o["dtype"]): o
           for o in read_shard(OBS / "torch-2.11.0-cpu.json")["observations"]}
    from conftest import OWN_CONSTANTS

    compiled = [o for o in torch_cuda["observations"] if o["case"] in OWN_CONSTANTS
                and o["mode"] in ("aot_eager", "inductor") and o["status"] == "ok"]
    both = [o for o in compiled if cpu[o["case"], o["program"], o["mode"], o["dtype"]]["status"] == "ok"]
    assert len(both) >= 100 and all(cpu[o["case"], o["program"], o["mode"], o["dtype"]]["value"] == o["value"]
                                    for o in both), "the re-measured compiled cells equal the CPU's where it has one"
    jax_cuda = read_shard(OBS / "jax-0.11.2-cuda.json")
    assert jax_cuda["environment"]["modes"] == ["reverse", "forward", "jacfwd", "jacrev", "jit", "vmap",
                                                "second-order"], jax_cuda["environment"]["modes"]
    assert all("case" in p and "added to the catalog after" in p["reason"]
               for p in jax_cuda["environment"].get("not_measured_parts") or []), "no mode left unmeasured"
    assert len(jax_cuda["observations"]) == 9576


