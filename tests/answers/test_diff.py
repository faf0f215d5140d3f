"""kinkcheck diff: two shards, or two environments of a report (the report's *Changed in* section is built in
kinkcheck.judge.build and tested in tests/report/test_report.py)."""

from __future__ import annotations

import json

import msgspec
import pytest

from kinkcheck import cli
from kinkcheck.answers.diff import (DiffError, compare, describe_observation, group_changes, load_side, side_from_report,
                            side_from_shard)
from kinkcheck.report.model import report_json
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


def test_a_shard_side_is_typed_without_labels():
    side = side_from_shard(OLD, "old")
    assert side.environment.id == "torch-2.0.1-cpu" and side.environment.framework_version == "2.0.1", side.environment
    ob = side.observations[("relu@0", "torch.clamp(x, min=0)", "reverse", "float64")]
    assert (ob.framework, ob.environment, ob.value, ob.labels) == ("torch", "torch-2.0.1-cpu", {"x": 1.0}, []), ob
    assert describe_observation(ob) == "1", "no label to show for a shard observation"


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


def test_diff_inside_a_report(shards_report, shards_report_path, capsys):
    report = shards_report_path
    envs = [e.id for e in shards_report.environments]
    assert {"torch-1.13.1-cpu", "torch-2.15.0-cpu"} <= set(envs), f"matrix ends in the committed shards: {envs}"
    code = cli.main(["diff", f"{report}#torch-1.13.1-cpu", f"{report}#torch-2.15.0-cpu", "--each"])
    out, err = capsys.readouterr()
    assert code == 1 and "relu@0  torch.clamp(x, min=0)  [reverse, float64]: 1 (right) -> 0 (left)" in out, (
        f"torch 1.13.1 -> 2.15.0 changed clamp at its bound (measured shards): exit {code}, {out[:300]}"
    )
    old = side_from_report(shards_report, "torch-1.13.1-cpu", "old")
    new = side_from_report(shards_report, "torch-2.15.0-cpu", "new")
    changes = compare(old, new)
    common = sum(1 for k in old.observations if k in new.observations)
    assert err.strip() == f"{len(changes)} of {common} conventions changed from torch-1.13.1-cpu to torch-2.15.0-cpu", err
    assert len(out.splitlines()) == len(changes) > 0, "one line per change"


def test_a_report_side_and_its_shard_side_agree(shards_report):
    """The same environment read from its shard and from the report: the same keys, and no change between them."""
    from conftest import ROOT

    from kinkcheck.shards import read_shard

    shard = side_from_shard(read_shard(ROOT / "references" / "observations" / "jax-0.10.2-cpu.json"), "shard")
    report = side_from_report(shards_report, "jax-0.10.2-cpu", "report")
    assert set(report.observations) <= set(shard.observations) and len(report.observations) > 1000, \
        "every report observation of the environment is one of its shard's"
    assert compare(shard, report) == [], "the report holds the shard's values"


def _small_report(report):
    return json.loads(report_json(msgspec.structs.replace(report, observations=report.observations[:50])))


@pytest.mark.parametrize(("mutate", "spec", "message"), [
    (lambda d: d, "", "is a report: name an environment, {p}#ENV (one of: torch-1.13.1-cpu, "),
    (lambda d: d, "#torch-9.9.9-cpu", "no environment 'torch-9.9.9-cpu' in the report"),
    (lambda d: {**d, "schema": "kinkcheck/conventions/v1"},
     "#torch-1.13.1-cpu", ("a kinkcheck/conventions/v1 report; this kinkcheck reads kinkcheck/conventions/v2: "
                           "re-render it with `kinkcheck report`")),
    (lambda d: {k: v for k, v in d.items() if k != "cases"}, "#torch-1.13.1-cpu",
     "malformed kinkcheck report (Object missing required field `cases`)"),
    (lambda d: {**d, "observations": [{**d["observations"][0], "environment": "torch-0.0.0-cpu"}]},
     "#torch-1.13.1-cpu", "malformed kinkcheck report (observations[0]: environment 'torch-0.0.0-cpu' is not among"),
    (lambda d: {**d, "observations": [{**d["observations"][0], "status": "fine"}]},
     "#torch-1.13.1-cpu", "malformed kinkcheck report (Invalid enum value 'fine' - at `$.observations[0].status`)"),
])
def test_a_bad_report_side_is_one_line_exit_2(shards_report, tmp_path, capsys, mutate, spec, message):
    p = tmp_path / "r.json"
    p.write_text(json.dumps(mutate(_small_report(shards_report))))
    good = tmp_path / "good.json"
    write_shard(good, OLD)
    assert cli.main(["diff", f"{p}{spec}", str(good)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message.format(p=p) in err[0] and str(p) in err[0], err


@pytest.mark.parametrize(
    "setup, message",
    [
        (lambda p: None, "no such file"),
        (lambda p: p.write_text("{"), "cannot read"),
        (lambda p: p.write_text('{"schema": "kinkcheck/conventions/v2", "environments": [{"id": "e"}]}'),
         "malformed kinkcheck report (Object missing required field `framework` - at `$.environments[0]`)"),
        (lambda p: p.write_text('{"a": 1}'), "neither a kinkcheck shard nor a kinkcheck report"),
        (lambda p: p.write_text('[{"schema": "kinkcheck/shard/v1"}]'), "neither a kinkcheck shard nor a kinkcheck report"),
        (lambda p: p.write_text('{"schema": "kinkcheck/conventions/v2", "x": ' + "[" * 100_000 + "]" * 100_000 + "}"),
         "cannot read (JSON nested too deeply)"),
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


def test_cpu_against_cuda_shows_tie_routing_and_no_probe_error(capsys, not_measured_shards):
    """Issue 30: the committed H200 shard against the CPU shard of the same release: ties routed to another
    index on CUDA, none of the six programs whose constants the old probe put on the CPU reads as an error, and
    the cells it withdrew are named on stderr as not measured, with the reason."""
    from conftest import ROOT

    obs = ROOT / "references" / "observations"
    code = cli.main(["diff", str(obs / "torch-2.11.0-cpu.json"), str(obs / "torch-2.11.0-cuda.json"), "--each"])
    out, err = capsys.readouterr()
    assert code == 1, err
    lines = out.splitlines()
    assert "max@[1,0,1,0,1,0]  torch.topk(v, 1).values  [reverse, float64]: [0, 0, 1, 0, 0, 0] -> " \
           "[1, 0, 0, 0, 0, 0]" in lines, lines[:3]
    for op in ("scatter_reduce", "index_reduce", "segment_reduce", "cosine_embedding_loss",
               "fake_quantize_per_channel_affine", "multi_margin_loss"):
        assert not [ln for ln in lines if op in ln and ln.endswith("-> error")], f"{op} reads as a CUDA error"
    bf16 = [ln for ln in lines if "embedding_bag" in ln and ln.endswith("-> error")]
    assert bf16 and all("bfloat16]" in ln for ln in bf16), \
        f"embedding_bag max is an error on CUDA in bfloat16 only (PyTorch has no such kernel): {bf16}"
    assert "of 12640 conventions changed from torch-2.11.0-cpu to torch-2.11.0-cuda" in err, err
    gaps = [ln for ln in err.splitlines() if ln.startswith("not measured in")]
    assert all("added to the catalog after this shard was measured" in ln for ln in gaps), \
        f"every cell of the H200's catalog measured; only cases added since are not: {gaps[:2]}"
    code = cli.main(["diff", str(obs / "torch-2.11.0-cpu.json"), str(not_measured_shards / "torch-2.11.0-cuda.json")])
    out, err = capsys.readouterr()
    withdrawn = [ln for ln in err.splitlines() if ln.startswith("not measured in torch-2.11.0-cuda: ")
                 and "added to the catalog after" not in ln]  # the cases added since are not measured there either
    assert code == 1 and len(withdrawn) >= 7 and all("re-measure on a CUDA device" in ln for ln in withdrawn), \
        withdrawn


def test_diff_groups_one_change_over_its_modes_and_dtypes_and_filters(shards_report, shards_report_path, capsys):
    """The default output: the summary first, then one row per change over exactly its modes × dtypes (as the
    report's Changed in); --case/--program/--mode/--dtype narrow it, and a filter that matches nothing is exit 2."""
    report = shards_report_path
    sides = [f"{report}#torch-2.13.0-cpu", f"{report}#torch-2.14.1-cpu"]
    assert cli.main(["diff", *sides]) == 1
    out, err = capsys.readouterr()
    lines = out.splitlines()
    changes = compare(side_from_report(shards_report, "torch-2.13.0-cpu", "a"),
                      side_from_report(shards_report, "torch-2.14.1-cpu", "b"))
    rows = group_changes(changes)
    assert lines[0].startswith(f"{len(changes)} of ") and f"in {len(rows)} rows" in lines[0], lines[0]
    assert len(lines) == len(rows) + 2 < len(changes) / 5, "a header and one line a row, far fewer than the cells"
    assert all(ln == ln.rstrip() for ln in lines), "not a terminal: no cell padded to its column's width at the end"
    for r in rows:  # every cell of a row changed, and so did nothing else
        cells = {(c.mode, c.dtype) for c in changes if (c.case, c.program) == (r.case, r.program)
                 and describe_observation(c.old, limit=8) == r.old and describe_observation(c.new, limit=8) == r.new}
        assert {(m, d) for m in r.modes for d in r.dtypes} <= cells, r
    assert sum(len(r.modes) * len(r.dtypes) for r in rows) == len(changes), "each changed cell in one row"
    clamp = [ln for ln in lines if ln.startswith("relu@0") and "torch.clamp(x, min=0)" in ln]
    assert len(clamp) == 1 and "1 (right) → 0 (left)" in clamp[0] and "float64, float32, float16, bfloat16" in clamp[0], \
        clamp
    assert cli.main(["diff", *sides, "--case", "relu@0", "--program", "torch.clamp(x, min=0)", "--mode", "reverse",
                     "--dtype", "float64"]) == 1
    out, _ = capsys.readouterr()
    assert out.splitlines()[0].startswith("1 of 1 conventions changed") and len(out.splitlines()) == 3, out
    assert cli.main(["diff", *sides, "--case", "relu@0", "--program", "torch.relu(x)"]) == 0, "nothing changed there"
    capsys.readouterr()
    assert cli.main(["diff", *sides, "--case", "no-such-case"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no convention of both sides matches --case no-such-case" in err[0], err


@pytest.mark.parametrize("spelling", ["torch.clamp(x, min=0.0)", "torch.clamp(x, 0)", "torch.clamp(x,min=0e0)"])
def test_diff_finds_the_catalog_program_in_any_spelling(shards_report_path, capsys, spelling):
    """Issue 44, item 4: --program matches as every face does (kinkcheck.language.expr.same_program)."""
    sides = [f"{shards_report_path}#torch-2.13.0-cpu", f"{shards_report_path}#torch-2.14.1-cpu"]
    assert cli.main(["diff", *sides, "--case", "relu@0", "--program", spelling, "--mode", "reverse",
                     "--dtype", "float64"]) == 1, f"{spelling}: torch.clamp(x, min=0)'s change"
    out, err = capsys.readouterr()
    assert out.splitlines()[0].startswith("1 of 1 conventions changed") and "torch.clamp(x, min=0)" in out, out + err


def test_a_report_side_reads_its_environment_s_rows_only(shards_report, shards_report_files):
    """REPORT#ENV from a rendered report (JSON beside observations.parquet) reads that environment's rows and no
    other (3.5 s and 780 MB for a torch release when it read every torch release), the same side as in memory."""
    from kinkcheck.report.model import load_report

    side = load_side(f"{shards_report_files}#torch-2.13.0-cpu")
    whole = side_from_report(shards_report, "torch-2.13.0-cpu", "x")
    assert side.observations.keys() == whole.observations.keys() and len(side.observations) > 1000
    assert all(side.observations[k].labels == whole.observations[k].labels for k in whole.observations)
    part = load_report(shards_report_files, select=lambda head: ["torch.relu(x)"], environments=["torch-2.13.0-cpu"])
    assert {o.environment for o in part.observations} == {"torch-2.13.0-cpu"} and \
        {o.program for o in part.observations} == {"torch.relu(x)"}, "one program in one environment"


def test_long_vectors_are_elided_in_rows():
    from kinkcheck.report.model import Observation

    ob = Observation(case="c", program="p", framework="torch", environment="e", mode="reverse", dtype="float64",
                     status="ok", value={"v": [0.0] * 299 + [1.0]}, labels=["left"], error=None)
    assert describe_observation(ob, limit=8) == "[0, 0, 0, …, 0, 1] (300 elements) (left)"
    assert describe_observation(ob).count(",") == 299, "without a limit every element, as measured"


def test_a_bare_environment_is_one_of_the_report_grad_reads(shards_report_files, capsys, monkeypatch, tmp_path):
    """Issue 46, item 3: ``diff ENV ENV`` and ``#ENV`` read the report ``--report`` names (a folder), and without
    --report the one grad reads ($KINKCHECK_REPORTS here), so an installed package diffs its own report."""
    folder = shards_report_files.parent
    monkeypatch.chdir(tmp_path)  # no file named torch-2.13.0-cpu here, no reports/ either
    assert cli.main(["diff", "torch-2.13.0-cpu", "#torch-2.14.1-cpu", "--report", str(folder), "--case", "relu@0",
                     "--program", "torch.clamp(x, min=0)", "--mode", "reverse", "--dtype", "float64"]) == 1
    out, err = capsys.readouterr()
    assert out.splitlines()[0].startswith("1 of 1 conventions changed from torch-2.13.0-cpu to torch-2.14.1-cpu"), \
        out + err
    assert "1 (right) → 0 (left)" in out, out
    monkeypatch.setenv("KINKCHECK_REPORTS", str(folder))
    side = load_side("torch-2.13.0-cpu")
    assert side.environment.id == "torch-2.13.0-cpu" and len(side.observations) > 1000, side.label


def test_an_unknown_bare_environment_names_the_nearest(shards_report_files, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["diff", "torch-2.14.0-cpu", "torch-2.13.0-cpu", "--report", str(shards_report_files)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no environment 'torch-2.14.0-cpu' in the report (nearest: " in err[0], err
    assert "torch-2.14.1-cpu" in err[0].partition("nearest: ")[2], f"the closest release is named: {err}"
    assert cli.main(["diff", "#", "torch-2.13.0-cpu"]) == 2
    assert "an empty side" in capsys.readouterr().err, "a side with neither file nor environment"
    monkeypatch.setenv("KINKCHECK_REPORTS", str(tmp_path / "nowhere"))
    assert cli.main(["diff", "torch-2.13.0-cpu", "torch-2.14.1-cpu"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nowhere" in err[0] and "($KINKCHECK_REPORTS)" in err[0], \
        f"the variable that named the missing report is said, as grad and cite say it: {err}"


def test_a_file_named_like_an_environment_is_read_as_a_file(tmp_path, monkeypatch):
    """A shard saved as ``torch-2.0.1-cpu`` in the current folder stays a file: a bare id is read from the report
    only when no such file exists."""
    monkeypatch.chdir(tmp_path)
    write_shard(tmp_path / "torch-2.0.1-cpu", OLD)
    side = load_side("torch-2.0.1-cpu", report=tmp_path / "nowhere")
    assert side.environment.id == "torch-2.0.1-cpu" and side.label == "torch-2.0.1-cpu", side
