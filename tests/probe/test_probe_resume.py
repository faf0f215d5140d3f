"""The probe narrowed, resumed, interrupted, run twice at once or cut to a small catalog:
it loses nothing (issue 10)."""

from __future__ import annotations

import pytest
from probing import SMALL, by_program, current, run_cli

from kinkcheck.catalog import load_catalog
from kinkcheck.oracles.classify import same_value
from kinkcheck.probe import probe
from kinkcheck.shards import read_shard, unpack
from kinkcheck.vocabulary import flat_value


# --- Narrowed probes merge, names match environments, killed probes resume (issue 10) ------------------




def test_probe_only_the_cases_asked(torch_adapter, small):
    from kinkcheck.catalog import CatalogError

    shard = probe("torch", catalog=small, cases=["maximum@tie"], modes=("reverse",), dtypes=("float64",))
    assert {o["case"] for o in shard["observations"]} == {"maximum@tie"}, "only the case asked"
    assert shard["environment"]["case_hashes"] == {"maximum@tie": small.case("maximum@tie").measurement_hash("torch")}
    assert shard["environment"]["catalog_hash"] == small.hash, "the whole catalog's hash, for provenance"
    with pytest.raises(CatalogError, match="no case 'nope'"):
        probe("torch", catalog=small, cases=["nope"])


@pytest.mark.parametrize("argv, message", [
    (["--out", "{tmp}/torch-2.12.0-cpu.json"], "its shard file must be named torch-"),
    (["--out", "{tmp}/shard.json"], "its shard file must be named torch-"),
    (["--out-dir", "{tmp}", "--replace", "--mode", "reverse"], "--replace re-measures the full matrix"),
    (["--out-dir", "{tmp}", "--case", "nope"], "no case 'nope' in the catalog"),
])
def test_probe_refusals_are_one_line(torch_adapter, small, tmp_path, capsys, argv, message):
    """Issue 10 item 4: `probe --out FILE` with another environment's name overwrote that release's shard."""
    out = tmp_path / "out"
    out.mkdir()
    rc = run_cli("probe", "--framework", "torch", "--catalog", small.path, "--quiet", "--no-isolate",
               *[a.format(tmp=out) for a in argv])
    err = capsys.readouterr().err
    assert rc == 2 and message in err and len(err.strip().splitlines()) == 1, f"one line, exit 2: {rc} {err!r}"
    assert list(out.iterdir()) == [], "refused before probing: nothing written"


#: Cases whose torch value depends on the CPU LAPACK runs on (the catalog note says so), not on the release.
CPU_DEPENDENT = {"qr@rank-deficient"}


def test_narrowed_probe_merges_into_the_full_shard(torch_adapter, tmp_path, catalog):
    """Issue 10 item 2: `probe --framework torch --mode reverse --dtype float64 --out-dir references/observations`
    replaced the full torch-2.13.0 shard (8 modes, 4 dtypes) with 121 observations."""
    import shutil

    from conftest import ROOT, require_pinned

    from kinkcheck.probe.plan import missing_work

    require_pinned(torch_adapter)
    committed = ROOT / "references" / "observations" / "torch-2.13.0-cpu.json"
    shutil.copy(committed, tmp_path)
    assert run_cli("probe", "--framework", "torch", "--mode", "reverse", "--dtype", "float64", "--out-dir",
                 str(tmp_path), "--quiet", "--no-isolate") == 0
    old, new = read_shard(committed), read_shard(tmp_path / committed.name)
    cells = sum(1 for _ in catalog.programs("torch")) * 8 * 4
    ids = {c.id for c in catalog}  # the shard holds the staged cases too (measured ahead), kept as they are
    assert len(new["observations"]) == len(old["observations"]), "every row kept"
    assert sum(o["case"] in ids for o in new["observations"]) == cells, "8 modes × 4 dtypes of every catalog case"
    assert [(o["case"], o["program"], o["mode"], o["dtype"]) for o in new["observations"]] == \
        [(o["case"], o["program"], o["mode"], o["dtype"]) for o in old["observations"]], "each cell in its place"
    # LAPACK's rounding follows the CPU: MKL's SSE4.2/AVX path leaves R[1, 1] of QR([[1, 1], [1, 1]]) exactly 0,
    # its AVX2/AVX-512 path -4.7e-17 (MKL_ENABLE_INSTRUCTIONS shows it); torch's QR backward solves with R, so the
    # committed nan (measured on such a CPU) is 0.707 elsewhere. Rounding-level differences are within tolerance.
    differ = {(a["case"], a["program"], a["mode"], a["dtype"]) for a, b in zip(old["observations"], new["observations"])
              if (a["status"], a["error"]) != (b["status"], b["error"]) or (a["status"] == "ok" and not same_value(
                  flat_value(a["value"]), flat_value(b["value"]), a["dtype"]))}
    assert {c for c, *_ in differ} <= CPU_DEPENDENT, f"torch 2.13.0 measured again gives other values: {sorted(differ)}"
    assert missing_work(new, catalog).fresh, "still fresh: every case × mode × dtype present"
    assert new["environment"]["history"][-1]["modes"] == ["reverse"], "the part is recorded"
    assert not list(tmp_path.glob(".*.journal.jsonl")), "the journal is deleted once the shard is written"


def test_a_killed_probe_resumes_from_its_journal(torch_adapter, small, tmp_path):
    """A probe killed after relu@0 (here: the worker aborts at the next case) keeps relu@0 in its journal
    beside the shard; the next probe reuses it and measures only what is left."""
    import json
    import os
    import subprocess
    import sys

    from kinkcheck.probe import environment_id, journal_path

    out = tmp_path / f"{environment_id('torch')}.json"
    journal = journal_path(out, ["reverse"], ["float64"])
    assert journal.name.startswith(f".{out.stem}.") and journal.name.endswith(".journal.jsonl"), journal.name
    cmd = [sys.executable, "-m", "kinkcheck", "probe", "--framework", "torch", "--catalog", small.path, "--quiet",
           "--mode", "reverse", "--dtype", "float64"]
    res = subprocess.run(cmd + ["--worker", str(journal)], env={**os.environ, "KINKCHECK_CRASH_CASE": "maximum@tie"},
                         capture_output=True, text=True, timeout=600, check=False)
    assert res.returncode != 0 and not out.exists(), "killed: no shard written"
    records = [json.loads(line) for line in journal.read_text().splitlines()]
    done = [r for r in records if r.get("case") == "relu@0"]
    assert len(done) == 1 and records[-1] == {"start": "maximum@tie"}, records[-1]
    for ob in done[0]["observations"]:  # mark the journaled result: the resumed shard must carry it
        if ob["program"] == "torch.relu(x)":
            ob["value"] = {"x": 42.0}
    journal.write_text("".join(json.dumps(r) + "\n" for r in records))
    res = subprocess.run(cmd + ["--out", str(out)], capture_output=True, text=True, timeout=600, check=False)
    assert res.returncode == 0, res.stderr
    obs = by_program(read_shard(out))
    assert obs["torch.relu(x)"]["value"] == {"x": 42.0}, "relu@0 came from the journal, not probed again"
    assert obs["torch.maximum(x, y)"]["value"] == {"x": 0.5, "y": 0.5}, "the case left is measured"
    assert not journal.exists(), "the journal is deleted once the shard is written"


def test_a_journal_is_reused_only_where_it_still_applies(small, tmp_path):
    import json

    from kinkcheck.probe.journal import _prepare_journal

    hashes = {c.id: c.measurement_hash("torch") for c in small}
    env = {"id": "torch-2.13.0-cpu", "framework_build": "2.13.0+cpu", "device": "cpu", "modes": ["reverse"],
           "dtypes": ["float64"], "kinkcheck_version": "0.1.0", "case_hashes": hashes}
    records = [{"environment": {**env, "case_hashes": {**hashes, "maximum@tie": "0" * 16}}},
               {"start": "relu@0"}, {"case": "relu@0", "observations": [], "networks": []},
               {"start": "maximum@tie"}, {"case": "maximum@tie", "observations": [], "networks": []},
               {"case": "batch:inductor/float64", "results": {}}, {"fatal": "old"}]
    journal = tmp_path / ".j.journal.jsonl"
    journal.write_text("".join(json.dumps(r) + "\n" for r in records) + '{"case": "torn')
    _prepare_journal(journal, env)
    kept = [json.loads(line) for line in journal.read_text().splitlines()]
    assert [r.get("case") for r in kept] == [None, "relu@0"], \
        f"the changed case and the batch compiled with it are probed again; starts and fatal lines go: {kept}"
    assert kept[0]["environment"]["case_hashes"] == hashes
    _prepare_journal(journal, {**env, "modes": ["reverse", "forward"]})
    assert not journal.exists(), "a journal of another mode list is discarded"


NEW_CASE = '\n[[case]]\nid = "abs@0-again"\ntitle = "abs at 0, added by a test"\nsympy = "Abs(x)"\nat = { x = 0 }\n'
#: The new case's programs, added to each framework's program file.
NEW_PROGRAMS = {"torch": '\n["abs@0-again"]\nprograms = ["torch.abs(x)"]\n',
                "jax": '\n["abs@0-again"]\nprograms = ["jax.numpy.abs(x)"]\n'}


def test_no_command_sequence_lowers_the_measured_count(torch_adapter, tmp_path):
    """Narrowed probe, killed probe + resume, catalog edit + incremental probe, failed install, full render: on
    a copy of committed shards, the count of current observations never goes down."""
    import itertools
    import os
    import shutil
    import subprocess
    import sys

    from conftest import ROOT

    from kinkcheck.catalog import load_catalog
    from kinkcheck.probe import environment_id, journal_path
    from kinkcheck.probe.plan import missing_work, record_failed_attempt

    obs_dir = tmp_path / "observations"
    obs_dir.mkdir()
    eid = environment_id("torch")
    for name in (f"{eid}.json", "jax-0.10.2-cpu.json"):
        if not (ROOT / "references" / "observations" / name).exists():
            pytest.skip(f"no committed shard {name} to copy")
        shutil.copy(ROOT / "references" / "observations" / name, obs_dir)
    cat_path = tmp_path / "catalog.toml"
    shutil.copy(ROOT / "references" / "catalog.toml", cat_path)
    (tmp_path / "programs").mkdir()
    for fw in ("torch", "jax"):  # the frameworks this test's catalog measures, and the one its new case adds to
        shutil.copy(ROOT / "references" / "programs" / f"{fw}.toml", tmp_path / "programs")
    catalog = load_catalog(cat_path)
    counts = [current(obs_dir, catalog)]
    shard = obs_dir / f"{eid}.json"
    narrow = ["--mode", "reverse", "--dtype", "float64"]

    # 1. a narrowed probe of one case
    assert run_cli("probe", "--framework", "torch", "--catalog", str(cat_path), "--out-dir", str(obs_dir), "--quiet",
                 "--no-isolate", "--case", "relu@0", *narrow) == 0
    counts.append(current(obs_dir, catalog))
    # 2. a probe killed at its second case, then resumed
    cmd = [sys.executable, "-m", "kinkcheck", "probe", "--framework", "torch", "--catalog", str(cat_path), "--quiet",
           "--case", "relu@0", "--case", "clamp@-1", *narrow]
    journal = journal_path(shard, ["reverse"], ["float64"], ["relu@0", "clamp@-1"])
    subprocess.run(cmd + ["--worker", str(journal)], capture_output=True, timeout=600, check=False,
                   env={**os.environ, "KINKCHECK_CRASH_CASE": "clamp@-1"})
    assert journal.exists(), "the killed probe left its journal"
    counts.append(current(obs_dir, catalog))
    res = subprocess.run(cmd + ["--out", str(shard)], capture_output=True, text=True, timeout=600, check=False)
    assert res.returncode == 0, res.stderr
    assert "resuming: 1 of 2 cases already probed" in res.stderr, res.stderr
    assert not journal.exists()
    counts.append(current(obs_dir, catalog))
    # 3. a catalog edit (a new case), then an incremental probe of what is missing
    edited = tmp_path / "edited" / "catalog.toml"  # a new path: load_catalog caches by path
    shutil.copytree(tmp_path / "programs", edited.parent / "programs")
    edited.write_text(cat_path.read_text() + NEW_CASE)
    for fw, entry in NEW_PROGRAMS.items():
        with open(edited.parent / "programs" / f"{fw}.toml", "a") as fh:
            fh.write(entry)
    catalog = load_catalog(edited)
    work = missing_work(read_shard(shard), catalog)
    assert work.absent == ("abs@0-again",) and work.cases == ("abs@0-again",), work.summary()
    counts.append(current(obs_dir, catalog))
    assert run_cli("probe", "--framework", "torch", "--catalog", str(edited), "--out-dir", str(obs_dir), "--quiet",
                 "--no-isolate", "--case", "abs@0-again", *narrow) == 0
    counts.append(current(obs_dir, catalog))
    assert len(missing_work(read_shard(shard), catalog).cells) == 8 * 4 - 1, "the new case's other cells remain"
    # 4. a failed install (as nox records it) when re-probing what is missing
    env = {**read_shard(shard)["environment"], "measured_at": "2026-11-30T00:00:00+00:00",
           "not_measured": "install failed: torch==2.13.0: the package index is unreachable"}
    record_failed_attempt(shard, env)
    counts.append(current(obs_dir, catalog))
    # 5. a full render
    assert run_cli("report", "--shards", str(obs_dir), "--out", str(tmp_path / "reports"), "--catalog",
                 str(edited)) == 0
    counts.append(current(obs_dir, catalog))
    md = (tmp_path / "reports" / "conventions.md").read_text()
    assert "the package index is unreachable" in md, "the report names the failed attempt beside the measured shard"
    assert all(b >= a for a, b in itertools.pairwise(counts)), f"the measured count went down: {counts}"
    assert counts[-1] == counts[0] + 1, f"one observation more (the new case's one cell): {counts}"



# --- A probe interrupted, narrowed, run twice at once or cut to a small catalog loses nothing (issue 10) ------


def _full_small_shard(out_dir, small):
    """The small catalog probed in reverse/float64 into ``out_dir`` (in this process); the shard's path."""
    from kinkcheck.probe import environment_id

    assert run_cli("probe", "--framework", "torch", "--catalog", small.path, "--out-dir", str(out_dir), "--quiet",
                 "--no-isolate", "--mode", "reverse", "--dtype", "float64") == 0
    return out_dir / f"{environment_id('torch')}.json"


def test_a_worker_killed_from_outside_stops_the_probe_and_resumes(torch_adapter, small, tmp_path, capfd,
                                                                    monkeypatch):
    """Issue 10: `kill -9` of the probe worker (a person, the OOM killer) wrote "interpreter crashed: signal 9
    (SIGKILL)" error cells over good ok cells. Now the probe stops: one line, exit 2, the journal kept, nothing
    merged; the same command resumes from the journal and says so."""
    import json

    from kinkcheck.probe import journal_path

    shard = _full_small_shard(tmp_path, small)
    before = shard.read_bytes()
    capfd.readouterr()
    argv = ("probe", "--framework", "torch", "--catalog", small.path, "--out-dir", str(tmp_path), "--quiet",
            "--mode", "reverse", "--dtype", "float64")
    monkeypatch.setenv("KINKCHECK_CRASH_CASE", "maximum@tie")
    monkeypatch.setenv("KINKCHECK_CRASH_SIGNAL", "SIGKILL")
    rc = run_cli(*argv)
    err = capfd.readouterr().err
    assert rc == 2 and "the probe worker was killed by SIGKILL; run the same command again to resume" in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, f"one line: {err!r}"
    assert shard.read_bytes() == before, "nothing merged: the ok cells stay"
    journal = journal_path(shard, ["reverse"], ["float64"])
    assert journal.exists() and '"case": "relu@0"' in journal.read_text(), "the journal keeps relu@0"
    monkeypatch.delenv("KINKCHECK_CRASH_CASE")
    assert run_cli(*argv) == 0
    err = capfd.readouterr().err
    assert f"resuming: 1 of 2 cases already probed (journal {journal})" in err, err
    after = read_shard(shard)
    assert after["observations"] == unpack(json.loads(before))["observations"], "the same values, resumed"
    assert not any("interpreter crashed" in (o["error"] or "") for o in after["observations"]), "no crash cells"
    assert by_program(after)["torch.maximum(x, y)"]["value"] == {"x": 0.5, "y": 0.5}, "the case left is measured"
    assert not journal.exists()


def test_which_worker_deaths_are_interruptions():
    import signal

    from kinkcheck.probe.worker import _interrupting_signal

    for name in ("SIGKILL", "SIGTERM", "SIGINT", "SIGHUP"):
        assert _interrupting_signal(-getattr(signal, name)) == name, name
    assert _interrupting_signal(130) == "SIGINT", "a worker's KeyboardInterrupt exits 130"
    for rc in (0, 1, 2, -signal.SIGSEGV, -signal.SIGABRT, -signal.SIGBUS, None):
        assert _interrupting_signal(rc) is None, f"{rc}: a crash of the case, recorded as error cells"


def test_each_selection_has_its_own_journal(torch_adapter, small, tmp_path, capfd):
    """Issue 10: a narrowed probe deleted the journal of a killed full probe (hours of resumable work)."""
    import fnmatch
    import json

    from kinkcheck.probe import environment_id, journal_path

    shard = tmp_path / f"{environment_id('torch')}.json"
    full = journal_path(shard)
    assert full == journal_path(shard, [], None, ()), "no selection is the full probe"
    assert journal_path(shard, ["reverse", "jit"], ["float64"]) == journal_path(shard, ["jit", "reverse"], ["float64"])
    assert len({full, journal_path(shard, ["reverse"]), journal_path(shard, None, ["float64"]),
                journal_path(shard, None, None, ["relu@0"])}) == 4, "each selection its own file"
    assert fnmatch.fnmatch(full.name, ".*.journal.jsonl"), "matched by the .gitignore pattern"
    env = {"id": environment_id("torch"), "framework": "torch", "modes": ["reverse"], "dtypes": ["float64"]}
    text = f'{{"environment": {json.dumps(env)}}}\n{{"start": "relu@0"}}\n'
    full.write_text(text)
    _full_small_shard(tmp_path, small)
    assert full.read_text() == text, "the killed full probe's journal is untouched by a narrowed probe"


def test_a_second_probe_of_the_same_environment_stops_at_once(torch_adapter, small, tmp_path, capsys):
    """Issue 10: two probes into one shard at once: the first ended in a TypeError traceback in _assemble,
    losing its results. The second now stops with one line and exit 2 while the first holds the lock."""
    import os

    from kinkcheck.probe import environment_id, probe_lock

    shard = tmp_path / f"{environment_id('torch')}.json"
    with probe_lock(shard):
        rc = run_cli("probe", "--framework", "torch", "--catalog", small.path, "--out-dir", str(tmp_path), "--quiet",
                   "--no-isolate", "--mode", "reverse", "--dtype", "float64")
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1, err
    assert f"another probe is writing {shard.stem} (pid {os.getpid()}); wait for it" in err, err
    assert not shard.exists(), "nothing probed"
    assert _full_small_shard(tmp_path, small).exists(), "the lock is released with its holder"
    assert not list(tmp_path.glob(".*.lock")), "and its file removed"


def test_a_journal_without_its_environment_line_is_one_line():
    from kinkcheck.frameworks import FrameworkUnavailable
    from kinkcheck.probe.cells import _assemble

    with pytest.raises(FrameworkUnavailable, match="the probe journal has no environment line"):
        _assemble(None, load_catalog(), {"relu@0": {"observations": [], "networks": []}})


def test_the_lock_holder_removes_stale_temporary_files_of_its_shard(tmp_path):
    """Issue 10: a killed probe left `.jax-0.10.2-cpu.json.XXXX.tmp` beside the shard, and no later probe
    removed it."""
    from kinkcheck.probe import probe_lock

    shard = tmp_path / "jax-0.10.2-cpu.json"
    stale = tmp_path / ".jax-0.10.2-cpu.json.k3j2h1.tmp"
    other = tmp_path / ".torch-2.13.0-cpu.json.a1b2c3.tmp"
    for p in (stale, other):
        p.write_text("{")
    with probe_lock(shard):
        assert not stale.exists(), "this shard's leftover is removed"
        assert other.exists(), "another environment's (maybe being written) is not"


def test_a_catalog_cut_to_one_case_keeps_the_other_cases(torch_adapter, small, tmp_path, capsys):
    """Issue 10: `kinkcheck probe --catalog small.toml --out-dir obs` (one case) dropped 49 cases from the
    shard. They are kept and the probe says so; --drop-removed (what nox passes) drops them."""
    shard = _full_small_shard(tmp_path, small)
    before = read_shard(shard)
    one = tmp_path / "one.toml"
    one.write_text(SMALL[: SMALL.index("[[case]]", 10)])
    capsys.readouterr()
    argv = ("probe", "--framework", "torch", "--catalog", str(one), "--out-dir", str(tmp_path), "--quiet",
            "--no-isolate", "--mode", "reverse", "--dtype", "float64")
    assert run_cli(*argv) == 0
    err = capsys.readouterr().err
    assert f"kept 1 case(s) the catalog {one} does not hold, as they were (--drop-removed drops them): maximum@tie" \
        in err, err
    after = read_shard(shard)
    assert after["observations"] == before["observations"], "every case kept, each value the same"
    assert run_cli(*argv, "--drop-removed") == 0
    assert {o["case"] for o in read_shard(shard)["observations"]} == {"relu@0"}, "asked: dropped"
