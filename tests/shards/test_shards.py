"""Shards: schema validation, atomic writes, corrupt files named in a one-line error."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from conftest import ROOT

from kinkcheck.shards import ShardError, load_shards, read_shard, write_json_atomic, write_shard
from probing import plan_catalog as _catalog
from probing import plan_shard as _shard

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


# --- The schema: fastjsonschema, errors that name the file, the check's cache ------------------------------


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
    from kinkcheck.shards.validate import parse_checked_json

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


def test_the_schema_command_writes_what_file_schema_derives(tmp_path):
    """``python -m kinkcheck.shards`` (the command the stale-schema message names; shards is a package since issue
    47) runs, and writes file_schema() into the package's schemas folder: run here on a copy of the package."""
    import os
    import shutil
    import subprocess
    import sys

    from kinkcheck.shards import file_schema

    copy = tmp_path / "kinkcheck"
    shutil.copytree(ROOT / "src" / "kinkcheck", copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "schemas" / "shard.v2.json").unlink()
    done = subprocess.run([sys.executable, "-m", "kinkcheck.shards"], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(tmp_path)}, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads((copy / "schemas" / "shard.v2.json").read_text()) == file_schema(), done.stdout


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


def test_a_shard_from_another_platform_sits_beside_the_linux_one(tmp_path, catalog):
    """A macOS arm64 shard of autograd 1.9.1 (the committed Linux shard with the macOS provenance a macOS runner
    writes) is another environment beside the Linux one: both load, the report keeps both and compares them;
    a shard whose platform tag and id disagree is refused in one line naming the file."""
    import shutil

    from kinkcheck.judge.build import build, mode_disagreements

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


# --- Parts of the matrix not measured, and why (issue 30) -------------------------------------------------


@pytest.mark.parametrize("part, problem", [
    ({"case": "relu@0", "program": "torch.relu(x)", "modes": ["reverse"], "dtypes": ["float64"], "reason": "why"},
     "says not measured, but the shard holds a cell of it"),
    ({"modes": ["reverse"], "reason": "why"}, "environment.modes says they were probed"),
    ({"case": "relu@0", "modes": ["reverse"], "dtypes": ["float64"], "reason": "why"}, "names a case with its program"),
    ({"case": "relu@0", "program": "torch.relu(x)", "modes": ["sideways"], "dtypes": ["float64"], "reason": "why"},
     "unknown mode or dtype"),
])
def test_a_part_that_contradicts_the_shard_is_refused(tmp_path, part, problem):
    from kinkcheck.shards.validate import shard_problem

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




def test_a_render_lists_checked_shards_by_digest_and_unpacks_only_what_it_asks_for(catalog, tmp_path, monkeypatch):
    """Issue 46, item 5: a render lists its shards lazily (``load_shards(lazy=True)``). A file not checked yet is
    read and checked whole; one checked before is hashed, its environment read from the cache, and unpacked only
    when :meth:`ShardFile.load` asks, to the same shard :func:`read_shard` gives. A damaged environment entry
    reads the file whole; a file changed after it was listed is refused at load, not judged."""
    import kinkcheck.shards as sh

    monkeypatch.setenv("KINKCHECK_CACHE_DIR", str(tmp_path / "cache"))
    folder = tmp_path / "shards"
    folder.mkdir()
    for name in ("torch-2.13.0-cpu.json", "jax-0.10.2-cpu.json"):
        (folder / name).write_bytes((OBS / name).read_bytes())
    whole: list[str] = []
    real = sh.read_shard
    monkeypatch.setattr(sh, "read_shard", lambda p, *a, **k: whole.append(Path(p).name) or real(p, *a, **k))
    first, errors = load_shards(folder, catalog, lazy=True)
    assert not errors and [type(s) for s in first] == [sh.ShardFile] * 2, (first, errors)
    assert sorted(whole) == ["jax-0.10.2-cpu.json", "torch-2.13.0-cpu.json"], f"unchecked: read whole ({whole})"
    whole.clear()
    listed, _ = load_shards(folder, catalog, lazy=True)
    assert whole == [], f"checked before: hashed, not read whole ({whole})"
    assert [s.environment["id"] for s in listed] == ["jax-0.10.2-cpu", "torch-2.13.0-cpu"], listed
    assert [s.digest for s in listed] == [s.digest for s in first], "the digest is the file's, either way"
    jax = listed[0]
    assert jax.load() == real(folder / "jax-0.10.2-cpu.json", catalog), "loaded: the shard read_shard gives"
    assert jax.load() is jax.load(), "unpacked once"

    entries = tmp_path / "cache" / "shard-environments"
    (entries / listed[1].digest).write_bytes(b"{not json")
    whole.clear()
    again, _ = load_shards(folder, catalog, lazy=True)
    assert whole == ["torch-2.13.0-cpu.json"], f"a damaged environment entry: that file read whole ({whole})"
    assert again[1].environment == listed[1].environment
    (entries / listed[1].digest).write_bytes((entries / listed[0].digest).read_bytes())  # jax's entry, torch's name
    whole.clear()
    again, _ = load_shards(folder, catalog, lazy=True)
    assert whole == ["torch-2.13.0-cpu.json"] and again[1].environment["id"] == "torch-2.13.0-cpu", \
        f"another file's entry is not taken: read whole ({whole}, {again[1].environment['id']})"
    for made in ({"digest": listed[1].digest, "environment": {}},
                 {"digest": listed[1].digest, "environment": {"id": "torch-2.13.0-cpu"}, "check": "0" * 32}):
        (entries / listed[1].digest).write_text(json.dumps(made))
        whole.clear()
        again, errors = load_shards(folder, catalog, lazy=True)
        assert not errors and whole == ["torch-2.13.0-cpu.json"] and again[1].environment == listed[1].environment, \
            f"an entry made by hand is not taken: read whole ({whole}, {errors})"

    doc = json.loads((folder / "torch-2.13.0-cpu.json").read_text())
    doc["environment"]["python"] = "3.0.0"
    (folder / "torch-2.13.0-cpu.json").write_text(json.dumps(doc))
    with pytest.raises(ShardError, match="changed while the report was rendered"):
        listed[1].load()
