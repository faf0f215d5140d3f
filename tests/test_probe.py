"""The probe: a whole catalog → a valid shard; one failing program does not lose the others."""

from __future__ import annotations

import json
import sys

import pytest
from catalogs import MAXIMUM_AT_TIE, STAGED_RELU

from kinkcheck.catalog import load_catalog
from kinkcheck.oracles.classify import same_value
from kinkcheck.vocabulary import flat_value
from kinkcheck.frameworks.base import VECTOR_ISA
from kinkcheck.probe import probe
from kinkcheck.shards import read_shard, unpack, write_shard

SMALL = """
[[case]]
id = "relu@0"
title = "relu at 0"
sympy = "Max(x, 0)"
at = { x = 0 }
activation = "relu"
[case.programs]
torch = ["torch.relu(x)", "torch.relu(x, 1, 2)", "torch.nn.functional.no_such_function(x)", "torch.argmax(x)"]
jax = ["jax.nn.relu(x)", "jax.nn.no_such_function(x)"]
""" + MAXIMUM_AT_TIE


@pytest.fixture
def small(tmp_path):
    p = tmp_path / "catalog.toml"
    p.write_text(SMALL)
    return load_catalog(p)


def _by_program(shard, dtype="float64", mode="reverse"):
    return {o["program"]: o for o in shard["observations"] if o["dtype"] == dtype and o["mode"] == mode}


def test_torch_probe_isolates_failures(torch_adapter, small, tmp_path):
    steps = []
    shard = probe("torch", catalog=small, on_step=steps.append, modes=("reverse", "forward"))
    write_shard(tmp_path / "s.json", shard)
    assert read_shard(tmp_path / "s.json") == shard, "the probe writes a valid shard"
    obs = _by_program(shard)
    assert obs["torch.relu(x)"]["status"] == "ok" and obs["torch.relu(x)"]["value"] == {"x": 0.0}, obs
    assert obs["torch.relu(x, 1, 2)"]["status"] == "error" and "TypeError" in obs["torch.relu(x, 1, 2)"]["error"]
    missing = obs["torch.nn.functional.no_such_function(x)"]
    assert missing["status"] == "unavailable" and "does not exist" in missing["error"], missing
    assert obs["torch.argmax(x)"]["status"] == "error" and "no gradient" in obs["torch.argmax(x)"]["error"]
    assert obs["torch.maximum(x, y)"]["value"] == {"x": 0.5, "y": 0.5}, "programs after a failure still run"
    assert len(steps) == 5, f"progress is reported once per program: {steps}"
    env = shard["environment"]
    assert env["id"] == f"torch-{env['framework_version']}-cpu" and env["catalog_hash"] == small.hash
    nets = [n for n in shard["networks"] if n["program"] == "torch.relu(x)"]
    assert {(n["mode"], n["dtype"]) for n in nets} == {(m, d) for m in ("reverse", "forward")
                                                       for d in ("float64", "float32")}, nets
    assert all(n["status"] == "ok" for n in nets)
    assert nets[0]["W1"][2][1] == 1260.0, "P0 network with relu'(0)=0 gives W1[2][1] = 1260 (NumPy oracle)"


def test_jax_probe(jax_adapter, small):
    shard = probe("jax", catalog=small, dtypes=("float32",), modes=("reverse", "jit"))
    obs = _by_program(shard, "float32")
    assert obs["jax.nn.relu(x)"]["value"] == {"x": 0.0}, obs["jax.nn.relu(x)"]
    assert obs["jax.nn.no_such_function(x)"]["status"] == "unavailable"
    assert obs["jax.numpy.maximum(x, y)"]["value"] == {"x": 0.5, "y": 0.5}


def test_probe_without_device(torch_adapter, small):
    from kinkcheck.frameworks import FrameworkUnavailable

    if "cuda" in torch_adapter.devices():
        pytest.skip("a CUDA device exists here; the no-device path cannot be exercised")
    with pytest.raises(FrameworkUnavailable, match="not measured: no CUDA device for torch"):
        probe("torch", device="cuda", catalog=small)


def test_a_crashing_case_does_not_lose_the_shard(torch_adapter, small, tmp_path):
    """A worker that dies inside a case (here: abort() injected at relu@0) is restarted after it."""
    import os
    import subprocess
    import sys

    from kinkcheck.probe import environment_id

    out = tmp_path / f"{environment_id('torch')}.json"
    env = {**os.environ, "KINKCHECK_CRASH_CASE": "relu@0"}
    res = subprocess.run([sys.executable, "-m", "kinkcheck", "probe", "--framework", "torch", "--catalog",
                          small.path, "--out", str(out), "--quiet", "--mode", "reverse", "--mode", "forward"],
                         env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    shard = read_shard(out)
    crashed = [o for o in shard["observations"] if o["case"] == "relu@0"]
    assert crashed and all(o["status"] == "error" and "interpreter crashed: signal 6 (SIGABRT)" in o["error"]
                           for o in crashed), crashed[:2]
    after = _by_program(shard)["torch.maximum(x, y)"]
    assert after["status"] == "ok" and after["value"] == {"x": 0.5, "y": 0.5}, "the cases after the crash are measured"


def test_missing_device_in_worker_is_one_line(torch_adapter, small, tmp_path):
    import subprocess
    import sys

    if "cuda" in torch_adapter.devices():
        pytest.skip("a CUDA device exists here")
    out = tmp_path / f"torch-{torch_adapter.version.split('+')[0]}-cuda.json"
    res = subprocess.run([sys.executable, "-m", "kinkcheck", "probe", "--framework", "torch", "--device", "cuda",
                          "--catalog", small.path, "--out", str(out), "--quiet"],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 2 and "no CUDA device for torch" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["catalog.toml"], "nothing is written, and no journal is left"


def test_a_crashed_case_keeps_its_compiled_cells(small):
    """Compiled batches run after the eager cases (in a new worker after a crash); the shard takes a crashed
    case's compiled cells from them, its eager cells are errors."""
    from kinkcheck.probe.cells import _assemble, _batch_key, _crashed

    done = {"relu@0": _crashed(small, "relu@0", "torch", ["float32"], ["reverse", "inductor"],
                               "interpreter crashed: signal 11"),
            "batch:inductor/float32": {"results": {
                _batch_key("obs", "relu@0", "torch.relu(x)", "inductor", "float32"):
                    {"status": "ok", "value": {"x": 0.0}, "error": None}}}}
    assert all(o["mode"] == "reverse" for o in done["relu@0"]["observations"]), "crash cells are eager cells only"
    env = {"framework": "torch", "modes": ["reverse", "inductor"], "dtypes": ["float32"]}
    shard = _assemble(env, small, done)
    cells = {(o["program"], o["mode"]): o for o in shard["observations"]}
    assert cells[("torch.relu(x)", "inductor")]["value"] == {"x": 0.0}, "the compiled cell comes from the batch"
    assert cells[("torch.relu(x)", "reverse")]["status"] == "error", "the eager cell of the crashed case is an error"
    assert "signal 11" in cells[("torch.relu(x)", "reverse")]["error"]


def test_eager_cells_run_before_any_compiled_batch(torch_adapter, small, monkeypatch):
    """Loading inductor's kernels can change the process's floating-point state (torch 2.4.1/2.5.1 flushed
    subnormals afterwards), so every eager cell is measured before the first compiled batch."""
    from kinkcheck.probe import run as pr
    from kinkcheck.probe.compiled import ENV_COMPILE_JOBS

    order = []
    monkeypatch.setenv(ENV_COMPILE_JOBS, "1")  # batches in this process, where the patch below reaches them
    monkeypatch.setattr(pr, "_probe_case", lambda *a, **k: order.append("case") or
                        {"observations": [], "networks": [], "rounded": {}})
    monkeypatch.setattr(pr, "_compiled_batch", lambda *a, **k: order.append(f"batch:{a[4]}") or {})
    pr.probe("torch", dtypes=["float32"], modes=["reverse", "inductor", "aot_eager"], catalog=small)
    assert "batch:inductor" in order and order.index("batch:inductor") > max(
        i for i, x in enumerate(order) if x == "case"), order
    assert order.index("batch:aot_eager") < order.index("batch:inductor"), f"inductor last: {order}"

def test_compiled_batches_in_processes_give_what_one_process_gives(torch_adapter, small, monkeypatch):
    """With two jobs, each compiled batch (mode and dtype) is split into chunks of whole programs, each in its own
    process; the cells are those of the whole batches run one after another in the probe's process."""
    from kinkcheck.probe import run as pr
    from kinkcheck.probe.compiled import ENV_COMPILE_CHUNKS, ENV_COMPILE_JOBS

    def cells(shard):
        return sorted(json.dumps({k: o[k] for k in ("case", "program", "mode", "dtype", "status", "value", "error")},
                                 sort_keys=True) for o in shard["observations"])

    monkeypatch.setenv(ENV_COMPILE_JOBS, "1")
    steps: list[str] = []
    one = pr.probe("torch", catalog=small, dtypes=["float64", "float32"], modes=["reverse", "aot_eager"],
                   on_step=steps.append)
    monkeypatch.setenv(ENV_COMPILE_JOBS, "2")
    monkeypatch.setenv(ENV_COMPILE_CHUNKS, "2")  # each batch in two chunks of whole programs, each in a process
    real = pr._compiled_batch
    monkeypatch.setattr(pr, "_compiled_batch", lambda *a, **k: pytest.fail("a batch ran in the probe's process"))
    parallel = pr.probe("torch", catalog=small, dtypes=["float64", "float32"], modes=["reverse", "aot_eager"])
    monkeypatch.setattr(pr, "_compiled_batch", real)
    values = {(o["program"], o["dtype"]): o["value"] for o in parallel["observations"]
              if o["mode"] == "aot_eager" and o["status"] == "ok"}
    expected = (("torch.relu(x)", {"x": 0.0}), ("torch.maximum(x, y)", {"x": 0.5, "y": 0.5}))
    assert values == {(p, d): v for p, v in expected for d in ("float64", "float32")}, f"batch processes: {values}"
    assert cells(parallel) == cells(one), "the same cells either way"
    assert [s for s in steps if s.startswith("compiling")] == [
        "compiling the catalog: aot_eager float64", "compiling the catalog: aot_eager float32"], steps


def test_a_dead_batch_process_is_left_to_the_worker_and_its_clock_stops(torch_adapter, small, tmp_path, monkeypatch):
    """A batch process that dies returns nothing: its batch gets a ``retry`` line (the watchdog stops timing
    it) and no record, and the probe's worker runs it again; the other batch's results are journaled."""
    from kinkcheck.probe.cells import CRASH_ENV
    from kinkcheck.probe.compiled import _batch_processes
    from kinkcheck.probe.journal import _Progress

    monkeypatch.setenv(CRASH_ENV, "batch:aot_eager/float32")  # the batch process aborts
    journal = tmp_path / ".j.journal.jsonl"
    journal.write_text('{"environment": {}}\n')
    progress = _Progress(journal)
    done: dict = {}
    chunks = [("aot_eager", "float64", (0, 1)), ("aot_eager", "float32", (0, 1))]
    _batch_processes(small, "torch", "cpu", ["float64", "float32"], chunks, 2, done, journal, None)
    assert list(done) == ["batch:aot_eager/float64"], f"only the batch whose process lived: {list(done)}"
    lines = [json.loads(line) for line in journal.read_text().splitlines()[1:]]
    keyed = [(next(iter(r)), next(iter(r.values()))) for r in lines]
    assert ("start", "batch:aot_eager/float32") in keyed and ("retry", "batch:aot_eager/float32") in keyed, keyed
    assert ("case", "batch:aot_eager/float64") in keyed and ("case", "batch:aot_eager/float32") not in keyed, keyed
    progress.update(1.0)
    assert progress.running == {}, f"nothing left in progress: {progress.running}"


def test_compiled_batches_split_into_chunks_of_whole_programs_for_every_core(small):
    """Issue 33: one batch per (mode, dtype) cannot use more processes than it has batches; each batch is split
    into chunks of whole programs, interleaved, every program in exactly one chunk with its network."""
    from kinkcheck.probe.cells import _batch_name, _parse_batch_name, batch_programs
    from kinkcheck.probe.compiled import CHUNKS_PER_JOB, ENV_COMPILE_CHUNKS, chunk_count, chunk_step, compiled_chunks

    assert chunk_count(4, 1, {}) == 1, "one job: the batches whole, as before"
    assert chunk_count(4, 2, {}) == -(-CHUNKS_PER_JOB * 2 // 4) and chunk_count(4, 16, {}) == 4 * CHUNKS_PER_JOB, \
        f"about {CHUNKS_PER_JOB} chunks per process"
    assert chunk_count(1, 16, {}) == 16 * CHUNKS_PER_JOB, "one batch over every core"
    assert chunk_count(4, 16, {ENV_COMPILE_CHUNKS: "3"}) == 3, "the variable decides"
    with pytest.raises(ValueError, match=f"{ENV_COMPILE_CHUNKS} must be a positive integer, got '0'"):
        chunk_count(4, 2, {ENV_COMPILE_CHUNKS: "0"})
    chunks = compiled_chunks(["reverse", "inductor", "aot_eager"], ["float64", "float32"], 8, programs=2)
    assert [(m, d) for m, d, _ in chunks[:4]] == [("aot_eager", "float64")] * 2 + [("aot_eager", "float32")] * 2, \
        f"aot_eager before inductor, each batch in its chunks (at most one a program): {chunks}"
    assert len(chunks) == 8 and {part for *_, part in chunks} == {(0, 2), (1, 2)}, chunks
    assert len(compiled_chunks(["inductor"], ["float32"], 16)) == 16 * CHUNKS_PER_JOB, "no cap without a count"
    programs = list(small.programs("torch"))
    three = [batch_programs(small, "torch", (i, 3)) for i in range(3)]
    assert sorted((c.id, p.id) for part in three for c, p in part) == sorted((c.id, p.id) for c, p in programs), \
        "every program in exactly one chunk"
    assert [len(part) for part in three] == [2, 2, 1] and three[1][0] == programs[1], "interleaved"
    key = _batch_name("inductor", "float32", (2, 8))
    assert key == "batch:inductor/float32#3of8" and _parse_batch_name(key) == ("inductor", "float32", (2, 8)), key
    assert _batch_name("inductor", "float32") == "batch:inductor/float32", "a whole batch keeps its key"
    assert chunk_step("inductor", "float32", (2, 8)) == "compiling the catalog: inductor float32, part 3 of 8"


def test_a_crashed_chunk_loses_its_own_programs_only(small):
    """A chunk's process that crashes makes error cells for the programs of that chunk; the other chunk's cells
    are kept, and the shard takes both chunks' cells in catalog order."""
    from kinkcheck.probe.cells import _assemble, _batch_key, _crashed, batch_programs

    first, second = (batch_programs(small, "torch", (i, 2)) for i in range(2))
    crashed = _crashed(small, "batch:aot_eager/float32#2of2", "torch", ["float32"], ["aot_eager"], "signal 11")
    assert {json.loads(k)[2] for k in crashed["results"]} == {p.id for _, p in second}, crashed
    done = {"batch:aot_eager/float32#2of2": crashed,
            "batch:aot_eager/float32#1of2": {"results": {_batch_key("obs", c.id, p.id, "aot_eager", "float32"):
                                                         {"status": "ok", "value": {"x": 1.0}, "error": None}
                                                         for c, p in first}}}
    done.update({c.id: {"observations": [], "networks": []} for c in small})
    env = {"framework": "torch", "modes": ["aot_eager"], "dtypes": ["float32"]}
    shard = _assemble(env, small, done)
    got = [(o["program"], o["status"]) for o in shard["observations"]]
    expected = [(p.id, "ok" if (c, p) in first else "error") for c, p in small.programs("torch")]
    assert got == expected, f"both chunks, in catalog order: {got}"


@pytest.mark.parametrize("raw, message", [("0", "got '0'"), ("two", "got 'two'"), ("-1", "got '-1'"),
                                          ("²", "got '²'")])
def test_compile_jobs_must_be_a_positive_integer(raw, message):
    from kinkcheck.probe import ENV_COMPILE_JOBS, compile_jobs

    assert compile_jobs({ENV_COMPILE_JOBS: "3"}) == 3
    assert compile_jobs({}) >= 1, "unset: the CPUs this process may use"
    with pytest.raises(ValueError, match=f"{ENV_COMPILE_JOBS} must be a positive integer, {message}"):
        compile_jobs({ENV_COMPILE_JOBS: raw})


# --- Narrowed probes merge, names match environments, killed probes resume (issue 10) ------------------


def _main(*argv):
    from kinkcheck.cli import main

    return main(list(argv))


def _current(folder, catalog):
    """Observations of the current catalog's cases in the shards of ``folder`` (the count no command may lower)."""
    from kinkcheck.probe.plan import current_count
    from kinkcheck.shards import load_shards

    shards, errors = load_shards(folder)
    assert not errors, errors
    return sum(current_count(s, catalog) for s in shards)


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
    rc = _main("probe", "--framework", "torch", "--catalog", small.path, "--quiet", "--no-isolate",
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
    assert _main("probe", "--framework", "torch", "--mode", "reverse", "--dtype", "float64", "--out-dir",
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
    obs = _by_program(read_shard(out))
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


NEW_CASE = """
[[case]]
id = "abs@0-again"
title = "abs at 0, added by a test"
sympy = "Abs(x)"
at = { x = 0 }
[case.programs]
torch = ["torch.abs(x)"]
jax = ["jax.numpy.abs(x)"]
"""


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
    catalog = load_catalog(cat_path)
    counts = [_current(obs_dir, catalog)]
    shard = obs_dir / f"{eid}.json"
    narrow = ["--mode", "reverse", "--dtype", "float64"]

    # 1. a narrowed probe of one case
    assert _main("probe", "--framework", "torch", "--catalog", str(cat_path), "--out-dir", str(obs_dir), "--quiet",
                 "--no-isolate", "--case", "relu@0", *narrow) == 0
    counts.append(_current(obs_dir, catalog))
    # 2. a probe killed at its second case, then resumed
    cmd = [sys.executable, "-m", "kinkcheck", "probe", "--framework", "torch", "--catalog", str(cat_path), "--quiet",
           "--case", "relu@0", "--case", "clamp@-1", *narrow]
    journal = journal_path(shard, ["reverse"], ["float64"], ["relu@0", "clamp@-1"])
    subprocess.run(cmd + ["--worker", str(journal)], capture_output=True, timeout=600, check=False,
                   env={**os.environ, "KINKCHECK_CRASH_CASE": "clamp@-1"})
    assert journal.exists(), "the killed probe left its journal"
    counts.append(_current(obs_dir, catalog))
    res = subprocess.run(cmd + ["--out", str(shard)], capture_output=True, text=True, timeout=600, check=False)
    assert res.returncode == 0, res.stderr
    assert "resuming: 1 of 2 cases already probed" in res.stderr, res.stderr
    assert not journal.exists()
    counts.append(_current(obs_dir, catalog))
    # 3. a catalog edit (a new case), then an incremental probe of what is missing
    edited = tmp_path / "edited.toml"  # a new path: load_catalog caches by path
    edited.write_text(cat_path.read_text() + NEW_CASE)
    catalog = load_catalog(edited)
    work = missing_work(read_shard(shard), catalog)
    assert work.absent == ("abs@0-again",) and work.cases == ("abs@0-again",), work.summary()
    counts.append(_current(obs_dir, catalog))
    assert _main("probe", "--framework", "torch", "--catalog", str(edited), "--out-dir", str(obs_dir), "--quiet",
                 "--no-isolate", "--case", "abs@0-again", *narrow) == 0
    counts.append(_current(obs_dir, catalog))
    assert len(missing_work(read_shard(shard), catalog).cells) == 8 * 4 - 1, "the new case's other cells remain"
    # 4. a failed install (as nox records it) when re-probing what is missing
    env = {**read_shard(shard)["environment"], "measured_at": "2026-11-30T00:00:00+00:00",
           "not_measured": "install failed: torch==2.13.0: the package index is unreachable"}
    record_failed_attempt(shard, env)
    counts.append(_current(obs_dir, catalog))
    # 5. a full render
    assert _main("report", "--shards", str(obs_dir), "--out", str(tmp_path / "reports"), "--catalog",
                 str(edited)) == 0
    counts.append(_current(obs_dir, catalog))
    md = (tmp_path / "reports" / "conventions.md").read_text()
    assert "the package index is unreachable" in md, "the report names the failed attempt beside the measured shard"
    assert all(b >= a for a, b in itertools.pairwise(counts)), f"the measured count went down: {counts}"
    assert counts[-1] == counts[0] + 1, f"one observation more (the new case's one cell): {counts}"


# --- Bounded probe: a case that hangs or allocates without limit becomes error cells (issue 10) -------------

BOUNDS = """
[[case]]
id = "hang@0"
title = "a loop that never ends"
sympy = "Abs(x)"
at = { x = 0 }
[case.programs]
torch = ["torch.abs(x)"]
jax = ["jax.lax.while_loop(jax.numpy.isfinite, jax.numpy.abs, x)"]

[[case]]
id = "huge@0"
title = "an 80 GB allocation"
sympy = "x"
at = { x = 0 }
[case.programs]
torch = ["torch.ones(100000, 100000) * x"]
jax = ["jax.numpy.ones((100000, 100000)) * x"]
""" + MAXIMUM_AT_TIE


#: The memory bound is RLIMIT_DATA, which only Linux enforces on every private mapping (see kinkcheck.probe.worker).
linux_only = pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_DATA bounds allocations only on Linux")


def _bounded_probe(tmp_path, framework, *argv, env=None, by_dtype=False):
    import os
    import signal
    import subprocess
    import sys

    from kinkcheck.probe import environment_id

    cat = tmp_path / "bounds.toml"
    cat.write_text(BOUNDS)
    out = tmp_path / f"{environment_id(framework)}.json"
    proc = subprocess.Popen([sys.executable, "-m", "kinkcheck", "probe", "--framework", framework, "--catalog",
                             str(cat), "--out", str(out), "--quiet", "--dtype", "float64", *argv],
                            env={**os.environ, **(env or {})}, stderr=subprocess.PIPE, text=True)
    try:
        _, err = proc.communicate(timeout=600)
    finally:  # SIGTERM, not run()'s SIGKILL: the probe then kills its worker, which may be in an endless loop
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
    assert proc.returncode == 0, err
    assert "Traceback" not in err, err
    return {(o["case"], o["mode"], *([o["dtype"]] if by_dtype else [])): o for o in read_shard(out)["observations"]}


@linux_only
def test_a_hanging_case_and_a_huge_allocation_become_error_cells(jax_adapter, tmp_path):
    """Issue 10: `jax.lax.while_loop(jax.numpy.isfinite, jax.numpy.abs, x)` at 0 never returns and hung the
    probe; the worker is killed after the per-case limit and a new one measures the cases after it. An 80 GB
    array under a 4 GiB limit fails to allocate instead of taking the machine's memory."""
    cells = _bounded_probe(tmp_path, "jax", "--mode", "reverse", "--case-timeout", "5", "--memory", "4")
    hang = cells[("hang@0", "reverse")]
    assert hang["status"] == "error" and hang["value"] is None, hang
    assert hang["error"].startswith("exceeded the per-case time limit of 5 s"), hang["error"]
    huge = cells[("huge@0", "reverse")]
    assert huge["status"] == "error" and huge["error"].startswith("exceeded the memory limit of 4 GiB"), huge
    assert "RESOURCE_EXHAUSTED" in huge["error"], f"the framework's own message follows: {huge['error']}"
    after = cells[("maximum@tie", "reverse")]
    assert after["status"] == "ok" and after["value"] == {"x": 0.5, "y": 0.5}, "the case after them is measured"


@linux_only
def test_a_hanging_compiled_batch_becomes_error_cells(torch_adapter, tmp_path):
    """A compiled batch (the whole catalog in one mode and dtype) has its own limit; here the worker hangs at
    the aot_eager batch (KINKCHECK_HANG_CASE), which costs that batch's cells and no eager cell."""
    cells = _bounded_probe(tmp_path, "torch", "--mode", "reverse", "--mode", "aot_eager", "--batch-timeout", "3",
                           "--memory", "4", env={"KINKCHECK_HANG_CASE": "batch:aot_eager/float64"})
    compiled = [o for (_, mode), o in cells.items() if mode == "aot_eager"]
    assert len(compiled) == 3 and all(
        o["status"] == "error" and o["error"].startswith("exceeded the compiled-batch time limit of 3 s")
        for o in compiled), compiled
    assert cells[("hang@0", "reverse")]["value"] == {"x": 0.0}, "eager cells are kept"
    assert cells[("maximum@tie", "reverse")]["value"] == {"x": 0.5, "y": 0.5}
    huge = cells[("huge@0", "reverse")]
    assert huge["status"] == "error" and "exceeded the memory limit of 4 GiB" in huge["error"] and \
        "can't allocate memory" in huge["error"], f"torch's allocation failure under the limit: {huge}"


@linux_only
def test_a_batch_process_that_crashes_or_hangs_costs_only_its_batch(torch_adapter, tmp_path):
    """Batches in parallel processes: one whose process aborts is run again in the worker, where the crash is
    isolated as for any case (its cells are errors); one that hangs is killed at its own time limit, charged to
    it and not to the batch started after it. The other batches' cells are values."""
    runs = {}  # 45 s: the other batch's process imports torch and compiles within it on a loaded machine
    for name, env, argv in (("crash", {"KINKCHECK_CRASH_CASE": "batch:aot_eager/float32"}, ()),
                            ("hang", {"KINKCHECK_HANG_CASE": "batch:aot_eager/float64"}, ("--batch-timeout", "45"))):
        (tmp_path / name).mkdir()
        runs[name] = _bounded_probe(tmp_path / name, "torch", "--mode", "reverse", "--mode", "aot_eager", "--dtype",
                                    "float32", "--memory", "4", *argv, env={**env, "KINKCHECK_COMPILE_JOBS": "2"},
                                    by_dtype=True)
    for name, bad, why in (("crash", "float32", "interpreter crashed: signal 6 (SIGABRT)"),
                           ("hang", "float64", "exceeded the compiled-batch time limit of 45 s")):
        cells = runs[name]
        compiled = {(case, dtype): o for (case, mode, dtype), o in cells.items() if mode == "aot_eager"}
        assert {d for _, d in compiled} == {"float64", "float32"}, sorted(compiled)
        for (case, dtype), o in compiled.items():
            if dtype == bad:
                assert o["status"] == "error" and o["error"].startswith(why), (name, case, dtype, o)
        good = "float64" if bad == "float32" else "float32"
        assert compiled[("maximum@tie", good)]["value"] == {"x": 0.5, "y": 0.5}, (name, compiled[("maximum@tie", good)])
        assert cells[("maximum@tie", "reverse", good)]["value"] == {"x": 0.5, "y": 0.5}, "eager cells are kept"


@pytest.mark.parametrize("argv, env, message", [
    (["--case-timeout", "0"], {}, "--case-timeout must be a number of seconds above 0, at most 86400, got '0'"),
    (["--batch-timeout", "inf"], {}, "--batch-timeout must be a number of seconds above 0, at most 86400, got 'inf'"),
    (["--memory", "-1"], {},
     "--memory must be a number of GiB from 0.5 to 86400 (less and not even a framework imports), got '-1'"),
    ([], {"KINKCHECK_CASE_TIMEOUT": "soon"},
     "KINKCHECK_CASE_TIMEOUT must be a number of seconds above 0, at most 86400, got 'soon'"),
    ([], {"KINKCHECK_COMPILE_JOBS": "all"}, "KINKCHECK_COMPILE_JOBS must be a positive integer, got 'all'"),
])
def test_bad_probe_limits_are_one_line(small, tmp_path, capsys, monkeypatch, argv, env, message):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    rc = _main("probe", "--framework", "torch", "--catalog", small.path, "--out-dir", str(tmp_path), "--quiet",
               *argv)
    err = capsys.readouterr().err
    assert rc == 2 and message in err and len(err.strip().splitlines()) == 1, f"one line, exit 2: {rc} {err!r}"


def test_probe_limits_resolve_options_then_environment_then_defaults():
    from kinkcheck.probe import DEFAULT_BATCH_TIMEOUT_S, ProbeLimits

    limits = ProbeLimits.resolve("7", None, None, {"KINKCHECK_CASE_TIMEOUT": "9", "KINKCHECK_PROBE_MEMORY_GIB": "3"})
    assert limits == ProbeLimits(7.0, DEFAULT_BATCH_TIMEOUT_S, 3.0), limits
    assert limits.time_message("relu@0").startswith("exceeded the per-case time limit of 7 s"), limits
    assert limits.time_message("batch:inductor/float32").startswith(
        f"exceeded the compiled-batch time limit of {DEFAULT_BATCH_TIMEOUT_S:g} s")


def test_a_record_after_a_torn_journal_line_is_kept(tmp_path):
    """A worker killed mid-write leaves a line without its end; the parent's error record must not join it."""
    from kinkcheck.probe.journal import _append, _Progress, _read_journal

    journal = tmp_path / ".j.journal.jsonl"
    journal.write_text('{"environment": {}}\n')
    progress = _Progress(journal)
    _append(journal, {"start": "relu@0"})
    assert progress.update(1.0) and progress.running == {"relu@0": 1.0}, "a case in progress"
    with journal.open("a") as fh:
        fh.write('{"case": "relu@0", "observ')
    assert progress.update(2.0) and progress.running == {"relu@0": 1.0}, "a torn line finishes nothing"
    _append(journal, {"case": "relu@0", "observations": [], "networks": []})
    _, done, started = _read_journal(journal)
    assert started == ["relu@0"] and done == {"relu@0": {"observations": [], "networks": []}}, journal.read_text()
    assert progress.update(3.0) and progress.running == {}, "the case's record after the torn line finishes it"


def test_journal_progress_follows_batches_that_overlap(tmp_path):
    """Compiled batches run several at a time: each is in progress from its own ``start`` line to its record,
    whatever finishes in between, and a journal the worker rewrote is read anew."""
    from kinkcheck.probe.journal import _append, _Progress

    journal = tmp_path / ".j.journal.jsonl"
    journal.write_text('{"environment": {}}\n{"start": "old@0"}\n')
    progress = _Progress(journal)
    assert not progress.update(0.5) and progress.running == {}, "lines before the watch are not read"
    _append(journal, {"start": "batch:inductor/float64"})
    progress.update(1.0)
    _append(journal, {"start": "batch:inductor/float32"})
    progress.update(2.0)
    _append(journal, {"case": "batch:inductor/float32", "results": {}})
    _append(journal, {"start": "batch:inductor/float16"})
    progress.update(3.0)
    assert progress.running == {"batch:inductor/float64": 1.0, "batch:inductor/float16": 3.0}, progress.running
    journal.unlink()  # what _prepare_journal does with another environment's journal
    _append(journal, {"environment": {}})
    _append(journal, {"start": "relu@0"})
    assert progress.update(4.0) and progress.running["relu@0"] == 4.0, progress.running


def test_the_time_limit_names_the_batch_that_ran_past_it(tmp_path):
    """With batches in parallel, the kill is charged to the batch whose own limit ran out (float64, started
    first), not to the last one started (float16), and not before its limit."""
    import subprocess
    import sys
    import time

    from kinkcheck.probe import ProbeLimits
    from kinkcheck.probe.isolated import _watch

    journal = tmp_path / ".j.journal.jsonl"
    journal.write_text('{"environment": {}}\n')
    worker = f"""
import json, time
def line(rec):
    with open({str(journal)!r}, "a") as fh:
        fh.write(json.dumps(rec) + "\\n")
line({{"start": "batch:inductor/float64"}})
time.sleep(1.0)
line({{"start": "batch:inductor/float32"}})
line({{"case": "batch:inductor/float32", "results": {{}}}})
line({{"start": "batch:inductor/float16"}})
time.sleep(60)
"""
    begun = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-c", worker], start_new_session=True)
    late = _watch(proc, journal, ProbeLimits(case_timeout_s=1.0, batch_timeout_s=2.5))
    took = time.monotonic() - begun
    assert proc.returncode is not None, "the worker is killed"
    assert late == (2.5, "batch:inductor/float64"), f"the first batch to run out is named: {late}"
    assert 2.5 <= took < 10, f"killed after the batch's own limit, not the case limit: {took:.1f} s"


@pytest.mark.parametrize("start", ["fork", "spawn"])
@pytest.mark.parametrize("signame", ["SIGTERM", "SIGKILL"])
def test_a_terminated_probe_takes_its_hanging_worker_with_it(jax_adapter, tmp_path, signame, start):
    """The worker runs in its own session (so its whole group can be killed), where a signal to the probe no
    longer reaches it: SIGTERM (the probe kills the worker on its way out) or SIGKILL (no handler runs; the
    worker asked Linux for SIGKILL when its parent dies) must still end the worker, which would otherwise loop
    forever, or go on writing the journal beside the next probe's worker. Both for a worker forked from the
    probe and for one started as a new interpreter (``KINKCHECK_PROBE_START=spawn``)."""
    import contextlib
    import os
    import signal
    import subprocess
    import sys
    import time

    from kinkcheck.probe import environment_id, journal_path

    cat = tmp_path / "bounds.toml"
    cat.write_text(BOUNDS)
    out = tmp_path / f"{environment_id('jax')}.json"
    env = {**os.environ, "KINKCHECK_PROBE_START": start}
    proc = subprocess.Popen([sys.executable, "-m", "kinkcheck", "probe", "--framework", "jax", "--catalog", str(cat),
                             "--out", str(out), "--quiet", "--mode", "reverse", "--dtype", "float64"],
                            stderr=subprocess.PIPE, text=True, env=env)
    journal = journal_path(out, ["reverse"], ["float64"])
    workers: list[str] = []
    try:
        for _ in range(6000):  # until the worker is inside the endless loop (at most ~10 min)
            if journal.exists() and '{"start": "hang@0"}' in journal.read_text():
                break
            assert proc.poll() is None, proc.stderr.read()
            time.sleep(0.1)
        table = subprocess.run(["ps", "-ww", "-eo", "pid=,ppid=,args="], capture_output=True, text=True,
                               check=False).stdout.splitlines()
        workers = [line.split()[0] for line in table if line.split()[1] == str(proc.pid)]
        assert len(workers) == 1, f"one worker probing: {workers}"
        args = next(line for line in table if line.split()[0] == workers[0])
        assert (f"--worker {journal}" in args) == (start == "spawn"), f"a {start}ed worker: {args}"
        if signame == "SIGKILL" and not sys.platform.startswith("linux"):
            pytest.skip("the worker follows its parent's death only on Linux (PR_SET_PDEATHSIG)")
        proc.send_signal(getattr(signal, signame))
        rc = proc.wait(timeout=60)
        assert rc == (128 + signal.SIGTERM if signame == "SIGTERM" else -signal.SIGKILL), (rc, proc.stderr.read())
        proc.stderr.close()
        for _ in range(600):  # until the kernel has removed it (a zombie for a moment; at most ~1 min)
            status = subprocess.run(["ps", "-o", "stat=", "-p", workers[0]], capture_output=True, text=True,
                                    check=False).stdout
            if not status.strip() or status.strip().startswith("Z"):
                break
            time.sleep(0.1)
        assert not status.strip() or status.strip().startswith("Z"), f"the worker still runs: {status!r}"
        assert not out.exists() and journal.exists(), "no shard; the journal is kept for the next run to resume"
    finally:  # a failed assertion must not leave the probe (and its endless worker) running
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
        for pid in workers:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(int(pid), signal.SIGKILL)  # the worker leads its own group


# --- A probe interrupted, narrowed, run twice at once or cut to a small catalog loses nothing (issue 10) ------


def _full_small_shard(out_dir, small):
    """The small catalog probed in reverse/float64 into ``out_dir`` (in this process); the shard's path."""
    from kinkcheck.probe import environment_id

    assert _main("probe", "--framework", "torch", "--catalog", small.path, "--out-dir", str(out_dir), "--quiet",
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
    rc = _main(*argv)
    err = capfd.readouterr().err
    assert rc == 2 and "the probe worker was killed by SIGKILL; run the same command again to resume" in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, f"one line: {err!r}"
    assert shard.read_bytes() == before, "nothing merged: the ok cells stay"
    journal = journal_path(shard, ["reverse"], ["float64"])
    assert journal.exists() and '"case": "relu@0"' in journal.read_text(), "the journal keeps relu@0"
    monkeypatch.delenv("KINKCHECK_CRASH_CASE")
    assert _main(*argv) == 0
    err = capfd.readouterr().err
    assert f"resuming: 1 of 2 cases already probed (journal {journal})" in err, err
    after = read_shard(shard)
    assert after["observations"] == unpack(json.loads(before))["observations"], "the same values, resumed"
    assert not any("interpreter crashed" in (o["error"] or "") for o in after["observations"]), "no crash cells"
    assert _by_program(after)["torch.maximum(x, y)"]["value"] == {"x": 0.5, "y": 0.5}, "the case left is measured"
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
        rc = _main("probe", "--framework", "torch", "--catalog", small.path, "--out-dir", str(tmp_path), "--quiet",
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
    assert _main(*argv) == 0
    err = capsys.readouterr().err
    assert f"kept 1 case(s) the catalog {one} does not hold, as they were (--drop-removed drops them): maximum@tie" \
        in err, err
    after = read_shard(shard)
    assert after["observations"] == before["observations"], "every case kept, each value the same"
    assert _main(*argv, "--drop-removed") == 0
    assert {o["case"] for o in read_shard(shard)["observations"]} == {"relu@0"}, "asked: dropped"


# --- A worker forked from the probe instead of a new interpreter (issue 13: a light framework's fixed cost) ----


@linux_only
def test_a_forked_worker_reports_its_status_like_popen(tmp_path):
    """ForkedWorker is the part of Popen the probe uses: the status (negative for a signal), wait with a
    time limit, kill; the child leads its own session and never runs this process's atexit handlers."""
    import os
    import signal
    import subprocess

    from kinkcheck.probe import ForkedWorker

    marker = tmp_path / "sid"

    def work():
        marker.write_text(f"{os.getsid(0)} {os.getpid()} {os.environ['KINKCHECK_TEST_VALUE']}")
        return 3

    w = ForkedWorker(work, {"KINKCHECK_TEST_VALUE": "seen"})
    assert w.wait(timeout=60) == 3 and w.poll() == 3 and w.returncode == 3
    sid, pid, value = marker.read_text().split()
    assert sid == pid == str(w.pid) and value == "seen", "its own session, the environment given"
    assert "KINKCHECK_TEST_VALUE" not in os.environ, "the environment is the child's only"

    def boom():
        raise RuntimeError("inside the worker")

    assert ForkedWorker(boom, {}).wait(timeout=60) == 1, "an exception exits 1, as an interpreter would"
    assert ForkedWorker(lambda: (_ for _ in ()).throw(SystemExit(130)), {}).wait(timeout=60) == 130

    def sleep():
        import time

        time.sleep(600)
        return 0

    slow = ForkedWorker(sleep, {})
    with pytest.raises(subprocess.TimeoutExpired):
        slow.wait(timeout=0.2)
    assert slow.poll() is None
    slow.kill()
    assert slow.wait(timeout=60) == -signal.SIGKILL, "a signal is a negative status, as Popen says it"


def test_a_worker_is_forked_only_from_a_clean_process(monkeypatch):
    """Not where a framework is imported (its threads and device context do not survive fork), not where
    more threads run, not with KINKCHECK_PROBE_START=spawn, not off Linux."""
    import threading

    from kinkcheck import registry
    from kinkcheck.probe import worker as pr

    monkeypatch.setattr(registry, "FRAMEWORKS", ("kinkcheck_nofw",))  # none imported here (the tests import all)
    monkeypatch.delenv("KINKCHECK_PROBE_START", raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    assert pr.fork_safe() == (threading.active_count() == 1)
    monkeypatch.setitem(sys.modules, "kinkcheck_nofw", object())
    assert not pr.fork_safe(), "a framework imported here"
    monkeypatch.delitem(sys.modules, "kinkcheck_nofw")
    monkeypatch.setenv("KINKCHECK_PROBE_START", "spawn")
    assert not pr.fork_safe(), "spawn asked for"
    monkeypatch.delenv("KINKCHECK_PROBE_START")
    monkeypatch.setattr(sys, "platform", "darwin")
    assert not pr.fork_safe(), "macOS: no fork without exec"


@linux_only
def test_forked_and_spawned_workers_measure_the_same(torch_adapter, small, tmp_path):
    """The default probe forks its worker from the CLI process; KINKCHECK_PROBE_START=spawn starts a new
    interpreter. Both give the same cells, and both survive a crashing case."""
    import os
    import subprocess

    from kinkcheck.probe import environment_id

    shards = {}
    for start in ("fork", "spawn"):
        out = tmp_path / start / f"{environment_id('torch')}.json"
        out.parent.mkdir()
        env = {**os.environ, "KINKCHECK_PROBE_START": start, "KINKCHECK_CRASH_CASE": "maximum@tie"}
        res = subprocess.run([sys.executable, "-m", "kinkcheck", "probe", "--framework", "torch", "--catalog",
                              small.path, "--out", str(out), "--quiet", "--mode", "reverse", "--dtype", "float64"],
                             env=env, capture_output=True, text=True, timeout=600)
        assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
        shards[start] = read_shard(out)
    fork, spawn = (_by_program(shards[s]) for s in ("fork", "spawn"))
    assert fork == spawn, "the same cells from a forked and a spawned worker"
    assert fork["torch.relu(x)"]["value"] == {"x": 0.0}
    assert fork["torch.maximum(x, y)"]["error"].startswith("interpreter crashed: signal 6 (SIGABRT)"), fork


@pytest.mark.parametrize("start", ["fork", "spawn"])
def test_an_unreadable_shard_stops_the_probe_before_it_measures(torch_adapter, small, tmp_path, start):
    """The shard a probe merges into is read while the worker starts; unreadable, the probe stops then (one line,
    exit 2), not after measuring the whole catalog, and leaves the file and no journal behind."""
    import os
    import subprocess
    import time

    from kinkcheck.probe import environment_id

    out = tmp_path / f"{environment_id('torch')}.json"
    out.write_text('{"schema": "kinkcheck/shard/v2", "environment": {')
    env = {**os.environ, "KINKCHECK_PROBE_START": start}
    began = time.monotonic()
    res = subprocess.run([sys.executable, "-m", "kinkcheck", "probe", "--framework", "torch", "--catalog", small.path,
                          "--out", str(out), "--quiet"], env=env, capture_output=True, text=True, timeout=600,
                         check=False)
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1 and "cannot write shard" in lines[0] and \
        "left as it is" in lines[0], res.stderr
    assert out.read_text() == '{"schema": "kinkcheck/shard/v2", "environment": {', "the file is left as it is"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["catalog.toml", out.name], "no journal, nothing else"
    assert time.monotonic() - began < 120


def test_an_unknown_start_method_is_one_line(small, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("KINKCHECK_PROBE_START", "forkserver")
    rc = _main("probe", "--framework", "torch", "--catalog", small.path, "--out-dir", str(tmp_path), "--quiet")
    err = capsys.readouterr().err
    assert rc == 2 and "KINKCHECK_PROBE_START must be fork or spawn" in err and len(err.strip().splitlines()) == 1, err


def test_a_staged_case_is_measured_ahead_kept_and_not_reported(torch_adapter, tmp_path):
    """`kinkcheck probe --staged` measures the staged cases into the shard (nox -s report does, ahead of their move
    into the catalog): the shard stays fresh for the catalog, a probe with --staged --drop-removed keeps them, the
    report leaves them out with one line saying so, and once they move they are fresh without a re-probe."""
    import subprocess

    from kinkcheck.catalog import with_staged
    from kinkcheck.probe import environment_id
    from kinkcheck.judge.build import build
    from kinkcheck.probe.plan import missing_work

    (tmp_path / "staged").mkdir()
    (tmp_path / "catalog.toml").write_text(MAXIMUM_AT_TIE)
    (tmp_path / "staged" / "catalog.toml").write_text(STAGED_RELU)
    main = load_catalog(tmp_path / "catalog.toml")
    out = tmp_path / "obs" / f"{environment_id('torch')}.json"
    narrow = ["--mode", "reverse", "--dtype", "float64"]

    def probe_cli(*extra):
        res = subprocess.run([sys.executable, "-m", "kinkcheck", "probe", "--framework", "torch", "--catalog",
                              str(tmp_path / "catalog.toml"), "--out", str(out), "--quiet", *narrow, *extra],
                             capture_output=True, text=True, timeout=600, check=False)
        assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
        return read_shard(out)

    probe_cli()
    shard = probe_cli("--staged", "--case", "relu-written@0")
    by_case = {o["case"]: o for o in shard["observations"]}
    assert set(by_case) == {"maximum@tie", "relu-written@0"}, "the staged case merged beside the catalog's"
    assert by_case["relu-written@0"]["value"] == {"x": 0.5}, "torch.maximum splits a tie evenly, measured"
    assert shard["environment"]["catalog_hash"] == main.hash, "the catalog it was measured with, not the staged file"
    assert shard["environment"]["runner"]["arch"], "where it was measured (environment.runner)"
    work = missing_work(shard, main, modes=["reverse"], dtypes=["float64"])
    assert work.fresh and work.removed == ("relu-written@0",), work.summary()
    assert missing_work(shard, with_staged(main), modes=["reverse"], dtypes=["float64"]).fresh
    shard = probe_cli("--staged", "--drop-removed", "--case", "maximum@tie")
    assert "relu-written@0" in {o["case"] for o in shard["observations"]}, "--staged --drop-removed keeps them"
    shard = probe_cli("--drop-removed", "--case", "maximum@tie")
    assert "relu-written@0" in {o["case"] for o in shard["observations"]}, \
        "--drop-removed alone keeps them too: staged cases are not removed cases"
    report = build([shard], main)
    assert not any(o.case == "relu-written@0" for o in report.observations), "not reported before it moves"
    assert [g for g in report.provenance.gaps if "staged" in g or "not in the catalog" in g] == [
        "1 staged case(s) (staged/ beside the catalog) are measured in 1 environment(s) ahead of their move into "
        "the catalog; not reported until they move"], report.provenance.gaps
    moved = tmp_path / "moved"
    moved.mkdir()
    (moved / "catalog.toml").write_text(MAXIMUM_AT_TIE + STAGED_RELU)
    assert missing_work(shard, load_catalog(moved / "catalog.toml"), modes=["reverse"], dtypes=["float64"]).fresh, \
        "moved into the catalog unchanged: fresh, nothing to re-probe"


def test_runner_provenance_says_where_a_shard_was_measured(monkeypatch):
    """Issue 15: a shard from another machine carries its OS, architecture, accelerator and CI runner."""
    import platform

    from kinkcheck.probe import runner

    class Cpu:  # no accelerator method: a CPU-only adapter
        pass

    class Gpu:
        def accelerator(self, device):
            return {"accelerator": "NVIDIA H200", "driver": "570.86", "cuda": "12.8", "hip": ""}

    class Broken:
        def accelerator(self, device):
            raise RuntimeError("no NVML")

    monkeypatch.delenv("RUNNER_NAME", raising=False)
    cpu = runner(Cpu(), "cpu")
    assert cpu["os"] == platform.system() and cpu["arch"] == platform.machine() and "ci_runner" not in cpu, cpu
    assert all(isinstance(v, str) and v for v in cpu.values()), "strings only, nothing empty"
    gpu = runner(Gpu(), "cuda")
    assert (gpu["accelerator"], gpu["driver"], gpu["cuda"]) == ("NVIDIA H200", "570.86", "12.8") and "hip" not in gpu
    assert runner(Gpu(), "cpu").get("accelerator") is None, "a cpu shard names no accelerator"
    assert runner(Broken(), "cuda")["accelerator_error"] == "RuntimeError: no NVML", "recorded, not raised"
    if platform.system() == "Linux":  # what LAPACK's rounding follows (qr@rank-deficient)
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            first = f.read().split("\n\n")[0].splitlines()
        flags = next((ln.split(":", 1)[1].split() for ln in first if ln.split(":")[0].strip() in ("flags", "Features")),
                     [])
        assert cpu.get("vector_isa", "").split() == [i for i in VECTOR_ISA if i in flags], cpu
        named = any(ln.split(":")[0].strip() == "model name" for ln in first)
        assert cpu["processor"] != platform.machine() or not named, "the model name, not the arch"
    monkeypatch.setenv("RUNNER_NAME", "gpu-runner-1")
    monkeypatch.setenv("GITHUB_RUN_ID", "42")
    ci = runner(Cpu(), "cpu")
    assert (ci["ci_runner"], ci["ci_run"]) == ("gpu-runner-1", "42"), ci


def test_a_misnamed_shard_is_refused_before_its_folder_is_made(tmp_path, capsys):
    """A newcomer's review (stop 40): `--out new-folder/torch-2.14.1-cpu.json` with torch 2.13.0 installed was
    refused, and left the empty folder behind."""
    from kinkcheck.probe import environment_id

    if environment_id("torch") is None:
        pytest.skip("torch is not installed here")
    folder = tmp_path / "not-yet"
    assert _main("probe", "--framework", "torch", "--case", "relu@0", "--mode", "reverse",
                 "--out", str(folder / "torch-0.0.1-cpu.json")) == 2
    err = capsys.readouterr().err
    assert f"its shard file must be named {environment_id('torch')}.json" in err and len(err.strip().splitlines()) == 1, err
    assert not folder.exists(), "nothing made for a refused probe"


def test_batches_seen_starting_in_one_poll_are_charged_in_journal_order(tmp_path):
    """A loaded machine may see two ``start`` lines in one poll: they tie on time, and the batch the journal
    started first (float64) ran out first, whatever the keys' spelling order (float16 sorts first)."""
    import subprocess
    import sys

    from kinkcheck.probe import ProbeLimits
    from kinkcheck.probe.isolated import _watch

    journal = tmp_path / ".j.journal.jsonl"
    journal.write_text('{"environment": {}}\n')
    worker = (f"import time\nwith open({str(journal)!r}, 'a') as fh:\n"
              "    fh.write('{\"start\": \"batch:inductor/float64\"}\\n{\"start\": \"batch:inductor/float16\"}\\n')\n"
              "time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", worker], start_new_session=True)
    late = _watch(proc, journal, ProbeLimits(case_timeout_s=1.0, batch_timeout_s=1.5))
    assert late == (1.5, "batch:inductor/float64"), f"the batch started first is named: {late}"
