"""Shards: schema validation, atomic writes, corrupt files named in a one-line error."""

from __future__ import annotations

import json
import os

import pytest

from kinkcheck.shards import ShardError, load_shards, read_shard, write_json_atomic, write_shard

from conftest import ROOT

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


def test_freshness(tmp_path):
    from kinkcheck.shards import is_fresh

    p = tmp_path / "s.json"
    assert not is_fresh(p, "0"), "a missing shard is not fresh"
    write_shard(p, _minimal())
    assert is_fresh(p, "0"), "same catalog hash: fresh"
    assert not is_fresh(p, "1"), "another catalog hash: stale"
    p.write_text(p.read_text()[:40])
    assert not is_fresh(p, "0"), "a truncated shard is not fresh"
