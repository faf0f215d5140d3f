"""Planning a probe (:mod:`kinkcheck.probe.plan`): what a shard lacks per case × mode × dtype, merging a narrowed
probe into the shard there is, failed attempts, withdrawn cells and modes not reached."""

from __future__ import annotations

import pytest
from conftest import ROOT
from probing import DTYPES, MODES, TINY
from probing import plan_catalog as _catalog
from probing import plan_shard as _shard

from kinkcheck.shards import ShardError, load_shards, read_shard, write_shard

OBS = ROOT / "references" / "observations"


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
    from kinkcheck.probe.plan import missing_work, unaccounted

    shards, errors = load_shards(OBS)
    assert not errors, errors
    for s in shards:
        env = s["environment"]
        if env.get("not_measured"):
            continue
        assert isinstance(env.get("case_hashes"), dict) and env["case_hashes"], f"{env['id']}: records case_hashes"
        work = missing_work(s, catalog)
        # what a shard records as not measured, with the reason, per program (probe.plan.not_measured_cases: the CUDA
        # shards and the cases added after them) or per mode (a probe cut short)
        uncovered = unaccounted(s, catalog, [c.id for c in catalog])
        assert not uncovered and not work.changed, (
            f"{env['id']}: every case × mode × dtype present and current, or recorded as not measured with the "
            f"reason; got {work.summary()} ({len(uncovered)} case(s) unaccounted: {', '.join(uncovered[:5])})")
        if work.absent:
            assert env["device"] != "cpu", f"{env['id']}: a CPU shard measures every case here ({work.absent[:3]})"


def test_missing_work_cell_by_cell(tmp_path):
    from kinkcheck.probe.plan import missing_work

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
    from kinkcheck.probe.plan import missing_work

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
    from kinkcheck.probe.plan import is_fresh, missing_work, record_failed_attempt

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
    from kinkcheck.probe.plan import is_fresh, record_failed_attempt

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
    from kinkcheck.probe.plan import merge_shard, missing_work

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
    from kinkcheck.probe.plan import merge_shard

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
    from kinkcheck.probe.plan import merge_shard

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
    from kinkcheck.probe.plan import write_merged

    cat = _catalog(tmp_path)
    p = tmp_path / "torch-2.13.0-cpu.json"
    p.write_text('{"schema": "kinkcheck/shard/v1", "environment": {')
    with pytest.raises(ShardError, match="left as it is"):
        write_merged(p, _shard(cat), cat)
    assert p.read_text().endswith("{"), "the unreadable file is untouched"
    write_merged(p, _shard(cat), cat, replace=True)
    assert len(read_shard(p)["observations"]) == 96, "--replace overwrites it"


def test_drop_removed(tmp_path):
    from kinkcheck.probe.plan import drop_removed

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
    from kinkcheck.probe.plan import merge_shard, missing_work

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
    from kinkcheck.probe.plan import current_count, merge_shard

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
    from kinkcheck.probe.plan import current_count, merge_shard

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
    from kinkcheck.probe.plan import drop_removed, record_failed_attempt
    from kinkcheck.shards import shard_lock

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


def test_a_merge_records_where_the_new_part_was_measured(tmp_path):
    from kinkcheck.probe.plan import merge_shard

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


PROBE_FAULT = "not measured: the probe put the program's constants on the CPU; re-measure"


def _fault(o):
    return o["program"] == "torch.clamp(x, min=0)" and o["mode"] in ("reverse", "vmap")


def test_withdrawn_cells_leave_the_shard_and_say_why(tmp_path):
    from kinkcheck.probe.plan import missing_work, withdraw
    from kinkcheck.shards.validate import shard_problem

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
    from kinkcheck.probe.plan import withdraw

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
    from kinkcheck.probe.plan import merge_shard, withdraw
    from kinkcheck.shards.validate import shard_problem

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
    from kinkcheck.probe.plan import merge_shard, not_measured_modes
    from kinkcheck.shards.validate import shard_problem

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
