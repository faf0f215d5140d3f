"""The probe: a whole catalog → a valid shard; one failing program does not lose the others."""

from __future__ import annotations

import json
import sys

import pytest
from catalogs import MAXIMUM_AT_TIE, STAGED_RELU
from probing import by_program, run_cli

from kinkcheck.catalog import load_catalog
from kinkcheck.frameworks.base import VECTOR_ISA
from kinkcheck.probe import probe
from kinkcheck.shards import read_shard, write_shard


def test_torch_probe_isolates_failures(torch_adapter, small, tmp_path):
    steps = []
    shard = probe("torch", catalog=small, on_step=steps.append, modes=("reverse", "forward"))
    write_shard(tmp_path / "s.json", shard)
    assert read_shard(tmp_path / "s.json") == shard, "the probe writes a valid shard"
    obs = by_program(shard)
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
    obs = by_program(shard, "float32")
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
    after = by_program(shard)["torch.maximum(x, y)"]
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
    assert run_cli("probe", "--framework", "torch", "--case", "relu@0", "--mode", "reverse",
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
