"""kinkcheck diff and the report's "Changed in" section, on hand-made shards."""

from __future__ import annotations

import json

import pytest

from kinkcheck import cli
from kinkcheck.diff import DiffError, changed_in, compare, load_side, side_from_shard
from kinkcheck.report.build import _env_sort_key
from kinkcheck.shards import write_shard


def shard(version, values, framework="torch"):
    """values: {(case, program): value or status string}."""
    obs = []
    for (case, program), v in values.items():
        for dtype in ("float64", "float32"):
            ok = not isinstance(v, str)
            obs.append({"case": case, "program": program, "mode": "reverse", "dtype": dtype,
                        "status": "ok" if ok else v, "value": {"x": v} if ok else None,
                        "error": None if ok else "AttributeError: absent"})
    return {
        "schema": "kinkcheck/shard/v1",
        "environment": {"id": f"{framework}-{version}-cpu", "framework": framework, "framework_version": version,
                        "device": "cpu", "python": "3.11", "platform": "test", "measured_at": "2026-01-01",
                        "kinkcheck_version": "0.1.0", "catalog_hash": "x"},
        "observations": obs, "networks": [],
    }


CLAMP = ("relu@0", "torch.clamp(x, min=0)")
RELU = ("relu@0", "torch.relu(x)")
CLAMP1 = ("clamp@1", "torch.clamp(x, -1, 1)")
OLD = shard("2.0.1", {CLAMP: 1.0, RELU: 0.0, CLAMP1: 1.0})
MID = shard("2.10.0", {CLAMP: 1.0, RELU: 0.0, CLAMP1: 1.0})
NEW = shard("2.15.0", {CLAMP: 0.0, RELU: 0.0, CLAMP1: 0.0})


def test_compare_lists_changed_conventions():
    changes = compare(side_from_shard(OLD, "old"), side_from_shard(NEW, "new"))
    got = {(c.case, c.program, c.dtype) for c in changes}
    assert got == {(*CLAMP, "float64"), (*CLAMP, "float32"), (*CLAMP1, "float64"), (*CLAMP1, "float32")}, got
    assert changes[0].describe() == "relu@0  torch.clamp(x, min=0)  [reverse, float64]: 1 -> 0"


def test_changed_in_names_the_boundary_newest_first():
    obs = [{**o, "environment": s["environment"]["id"]} for s in (NEW, OLD, MID) for o in s["observations"]]
    envs = [s["environment"] for s in (NEW, OLD, MID)]
    lines = changed_in(envs, obs, _env_sort_key)
    assert len(lines) == 2, f"one line per program and boundary: {lines}"
    first = lines[0]
    assert (first["from"], first["to"], first["change"]) == ("2.10.0", "2.15.0", "1 → 0"), first
    assert {tuple(e["cases"]) for e in lines} == {("relu@0",), ("clamp@1",)}, "cases listed per program"
    assert _env_sort_key(MID["environment"]) > _env_sort_key(OLD["environment"]), "2.10 sorts after 2.0 (not as text)"


def test_status_change_counts():
    old = shard("1.13.1", {RELU: "unavailable"})
    new = shard("2.0.1", {RELU: 0.0})
    changes = compare(side_from_shard(old, "a"), side_from_shard(new, "b"))
    assert [c.describe().split(": ", 1)[1] for c in changes] == ["unavailable -> 0"] * 2


@pytest.mark.parametrize("pair, code", [((OLD, NEW), 1), ((OLD, MID), 0)])
def test_diff_exit_codes(tmp_path, capsys, pair, code):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    write_shard(a, pair[0])
    write_shard(b, pair[1])
    assert cli.main(["diff", str(a), str(b)]) == code, capsys.readouterr()
    out = capsys.readouterr().out
    assert ("torch.clamp(x, min=0)" in out) == (code == 1), out


def test_diff_inside_a_report(tmp_path, capsys):
    from conftest import ROOT

    report = ROOT / "reports" / "conventions.json"
    envs = [e["id"] for e in json.loads(report.read_text())["environments"]]
    assert {"torch-1.13.1-cpu", "torch-2.15.0-cpu"} <= set(envs), f"matrix ends in the committed report: {envs}"
    code = cli.main(["diff", f"{report}#torch-1.13.1-cpu", f"{report}#torch-2.15.0-cpu"])
    out = capsys.readouterr().out
    assert code == 1 and "relu@0  torch.clamp(x, min=0)  [reverse, float64]: 1 (right) -> 0 (left)" in out, (
        f"torch 1.13.1 -> 2.15.0 changed clamp at its bound (measured shards): exit {code}, {out[:300]}"
    )


@pytest.mark.parametrize(
    "setup, message",
    [
        (lambda p: None, "no such file"),
        (lambda p: p.write_text("{"), "cannot read"),
        (lambda p: p.write_text('{"schema": "kinkcheck/conventions/v1", "environments": [{"id": "e"}]}'),
         "is a report: name an environment"),
        (lambda p: p.write_text('{"a": 1}'), "neither a kinkcheck shard nor a kinkcheck report"),
        (lambda p: p.write_text('{"schema": "kinkcheck/conventions/v1", "environments": [{"x": 1}]}'),
         "malformed kinkcheck report (a kinkcheck report without cases, observations"),
        (lambda p: p.write_text('{"schema": "kinkcheck/shard/v1", "x": ' + "[" * 100_000 + "]" * 100_000 + "}"),
         "cannot read (JSON nested too deeply)"),
        (lambda p: p.write_bytes(b'{"schema": "\xff"}'), "cannot read (not UTF-8 text"),
    ],
)
def test_diff_bad_input(tmp_path, capsys, setup, message):
    p = tmp_path / "x.json"
    setup(p)
    good = tmp_path / "good.json"
    write_shard(good, OLD)
    spec = f"{p}#e" if "malformed" in message else str(p)
    assert cli.main(["diff", spec, str(good)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err


def test_diff_across_frameworks_is_bad_input(tmp_path, capsys):
    jax = shard("0.10.2", {("relu@0", "jax.nn.relu(x)"): 0.0}, "jax")
    a, b = side_from_shard(OLD, "torch"), side_from_shard(jax, "jax")
    with pytest.raises(DiffError, match="cannot diff torch against jax: .* use `kinkcheck migrate --from torch --to jax`"):
        compare(a, b)
    write_shard(tmp_path / "t.json", OLD)
    write_shard(tmp_path / "j.json", jax)
    assert cli.main(["diff", str(tmp_path / "t.json"), str(tmp_path / "j.json")]) == 2, "refused, not 'N changed'"
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot diff torch against jax" in err[0], err


def test_no_observation_in_common_is_bad_input():
    a = side_from_shard(shard("2.0.1", {CLAMP: 1.0}), "a")
    b = side_from_shard(shard("2.1.0", {RELU: 1.0}), "b")
    with pytest.raises(DiffError, match="no observation in common"):
        compare(a, b)


def test_exit_status_survives_a_closed_pipe():
    """`kinkcheck diff A B | head -1`: the reader leaves after one line; the status is still 1 (changes)."""
    import subprocess
    import sys

    from conftest import ROOT

    obs = ROOT / "references" / "observations"
    old, new = obs / "torch-1.13.1-cpu.json", obs / "torch-2.15.0-cpu.json"
    proc = subprocess.Popen([sys.executable, "-m", "kinkcheck", "diff", str(old), str(new)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = proc.stdout.readline()
    proc.stdout.close()  # more than a pipe buffer (64 KiB) is still to come: the next write fails
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 1, f"diff found changes: exit 1 even through a closed pipe ({err!r})"
    assert first.strip() and "Traceback" not in err, err
    assert "conventions changed from torch-1.13.1-cpu to torch-2.15.0-cpu" in err, "the count reaches stderr"


def test_exit_status_survives_a_closed_pipe_in_process(tmp_path, monkeypatch):
    class Closed:
        def write(self, text):
            raise BrokenPipeError

        def flush(self):
            raise BrokenPipeError

    write_shard(tmp_path / "a.json", OLD)
    write_shard(tmp_path / "b.json", NEW)
    monkeypatch.setattr("sys.stdout", Closed())
    assert cli.main(["diff", str(tmp_path / "a.json"), str(tmp_path / "b.json")]) == 1
    assert cli.main(["diff", str(tmp_path / "a.json"), str(tmp_path / "a.json")]) == 0


def test_load_side_env_mismatch(tmp_path):
    p = tmp_path / "a.json"
    write_shard(p, OLD)
    with pytest.raises(DiffError, match="holds torch-2.0.1-cpu"):
        load_side(f"{p}#torch-9.9.9-cpu")


def test_a_mode_that_appears_is_one_changed_in_line():
    """torch.func arrives in 2.0: one line for the mode, not one per program."""
    old = shard("1.13.1", {RELU: "unavailable"})
    new = shard("2.0.1", {RELU: 0.0})
    obs = [{**o, "environment": s["environment"]["id"]} for s in (old, new) for o in s["observations"]]
    lines = changed_in([old["environment"], new["environment"]], obs, _env_sort_key)
    assert len(lines) == 1 and lines[0]["program"] == "(every program in this mode)", lines
    assert lines[0]["change"] == "mode unavailable → ok" and lines[0]["cases"] == [], lines[0]
