"""The bounded probe: a case that hangs or allocates without limit becomes error cells;
the journal and the time limit (issue 10)."""

from __future__ import annotations

import pytest
from catalogs import MAXIMUM_AT_TIE
from probing import linux_only, run_cli

from kinkcheck.shards import read_shard


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
    rc = run_cli("probe", "--framework", "torch", "--catalog", small.path, "--out-dir", str(tmp_path), "--quiet",
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
