"""The isolated probe: :func:`kinkcheck.probe.run.probe` in a bounded worker process, restarted after a case
that crashed it, hung or ran out of memory (that case's cells say so), from the journal
(:mod:`kinkcheck.probe.journal`)."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from kinkcheck.catalog import Catalog, load_catalog
from kinkcheck.frameworks import FrameworkUnavailable
from kinkcheck.probe.cells import DEFAULT_DTYPES, _assemble, _crashed, select_cases
from kinkcheck.probe.compiled import compile_jobs, compiled_chunks
from kinkcheck.probe.journal import _append, _Progress, _read_journal
from kinkcheck.probe.worker import (PARENT_ENV, RESTARTED_ENV, STARTUP_TIMEOUT_S, ForkedWorker, ProbeInterrupted,
                                    ProbeLimits, _exit_on_termination, _interrupting_signal, fork_safe, kill_group)
from kinkcheck.vocabulary import COMPILED_MODES


def probe_isolated(
    framework: str,
    device: str = "cpu",
    dtypes: Sequence[str] = DEFAULT_DTYPES,
    modes: Sequence[str] | None = None,
    catalog: Catalog | None = None,
    quiet: bool = False,
    cases: Sequence[str] | None = None,
    journal: str | Path | None = None,
    limits: ProbeLimits | None = None,
    worker: Callable[[Path], int] | None = None,
    on_started: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Like :func:`kinkcheck.probe.run.probe`, in a bounded worker process that is restarted after the case that
    crashed it.

    The worker journals each case as it finishes; when it dies (a segfault or abort inside the framework), the case
    it had started becomes ``error`` cells ("interpreter crashed: …") and a new worker resumes with the next case,
    so one crashing case does not lose the rest of the shard. The same holds for a case that hangs: when a case runs
    ``limits.case_timeout_s`` past its journal ``start`` line (a compiled batch ``batch_timeout_s``; batches may run
    several at once, each timed from its own line), the worker's process group is killed and that case's cells say
    "exceeded the per-case time limit of N s". The worker runs under ``RLIMIT_DATA`` of ``limits.memory_gib``: an
    allocation past it fails, and the cell says "exceeded the memory limit of N GiB".

    Parameters
    ----------
    cases : sequence of str, optional
        Probe only these case ids (see :func:`kinkcheck.probe.run.probe`).
    journal : path, optional
        The journal (:func:`kinkcheck.probe.journal.journal_path` of the shard). Given, it outlives the call: a
        probe that is killed keeps there every case it finished, and the next call with the same journal
        resumes after them (a case whose measurement hash changed is probed again; a journal of another build,
        device, mode list or dtype list is discarded). The caller deletes it once the shard is written. Default: a
        temporary file, gone with the call.
    limits : ProbeLimits, optional
        Default :meth:`ProbeLimits.resolve` (the environment variables, else the defaults).
    worker : callable, optional
        ``worker(journal)`` does in a forked worker what ``kinkcheck probe --worker JOURNAL`` does in a new
        interpreter (:func:`kinkcheck.probe.command.probe_worker`) and returns its exit status. Given, and where
        :func:`fork_safe` holds, each worker is forked from this process, which has kinkcheck imported and the
        catalog loaded but no framework: a whole light framework's probe is then a third faster (autograd:
        0.2 of its 0.6 s were the second interpreter's start). Otherwise, or with ``KINKCHECK_PROBE_START=spawn``,
        each worker is a new interpreter.
    on_started : callable, optional
        Called once, right after the first worker has started: work of this process that can overlap the
        worker's (the CLI reads the shard it will merge into).

    A worker killed by SIGKILL, SIGTERM, SIGINT or SIGHUP that the probe did not send (a person, the OOM
    killer) is not a crash of its case: the probe stops (:class:`ProbeInterrupted`), the journal kept.

    Raises
    ------
    FrameworkUnavailable
        The framework or device is missing (reported by the worker), or the worker died before any case.
    ProbeInterrupted
        The worker was killed from outside; the same call resumes from the journal.
    CatalogError
        A case id of ``cases`` the catalog does not hold.
    """
    import tempfile  # slow to import

    limits = limits or ProbeLimits.resolve()
    catalog = select_cases(catalog if catalog is not None else load_catalog(), cases)  # an empty Catalog is falsy
    if journal is not None:
        Path(journal).parent.mkdir(parents=True, exist_ok=True)
        return _isolated(framework, device, dtypes, modes, catalog, quiet, cases, Path(journal), limits, worker,
                         on_started)
    with tempfile.TemporaryDirectory(prefix="kinkcheck-probe-") as tmp:
        return _isolated(framework, device, dtypes, modes, catalog, quiet, cases, Path(tmp) / "journal.jsonl",
                         limits, worker, on_started)


def _isolated(framework: str, device: str, dtypes: Sequence[str], modes: Sequence[str] | None, catalog: Catalog,
              quiet: bool, cases: Sequence[str] | None, journal: Path, limits: ProbeLimits,
              worker: Callable[[Path], int] | None = None,
              on_started: Callable[[], None] | None = None) -> dict[str, Any]:
    import subprocess  # slow to import

    cmd = [sys.executable, "-m", "kinkcheck", "probe", "--framework", framework, "--device", device,
           "--worker", str(journal), "--catalog", catalog.path, "--memory", repr(limits.memory_gib)]
    cmd += [a for d in dtypes for a in ("--dtype", d)] + [a for m in modes or () for a in ("--mode", m)]
    cmd += [a for c in cases or () for a in ("--case", c)]
    if catalog.staged:
        cmd.append("--staged")
    if quiet:
        cmd.append("--quiet")
    chunks = compiled_chunks(tuple(modes or COMPILED_MODES), dtypes, compile_jobs(),
                             sum(1 for _ in catalog.programs(framework)))
    for attempt in range(len(catalog) + len(chunks) + 1):  # cases and compiled batches' chunks
        # its own group, so that a kill takes its compile workers too
        env = {PARENT_ENV: str(os.getpid()), RESTARTED_ENV: "1" if attempt else ""}
        if worker is not None and fork_safe():
            proc: Any = ForkedWorker(lambda: worker(journal), env)
        else:
            proc = subprocess.Popen(cmd, start_new_session=True, env={**os.environ, **env})
        try:
            with _exit_on_termination():
                if on_started is not None and not attempt:
                    on_started()
                late = _watch(proc, journal, limits)
        finally:
            if proc.poll() is None:  # interrupted (Ctrl-C no longer reaches the new session): end the worker too
                kill_group(proc)
                proc.wait()
        rc = proc.returncode
        env, done, started = _read_journal(journal)
        if rc == 0 and late is None:
            return _assemble(env, catalog, done)
        signame = _interrupting_signal(rc)
        if late is None and signame is not None:  # not our own time-limit kill: someone stopped the probe
            raise ProbeInterrupted(f"the probe worker was killed by {signame}; run the same command again to resume "
                                   f"(journal {journal})")
        if late is not None and late[1] in done:  # its record landed just before the kill: nothing to charge
            continue
        # a time limit names what ran past it (batches may run several at once); a crash, the last one started
        crashed = late[1] if late is not None else next((c for c in reversed(started) if c not in done), None)
        if env is None or crashed is None:
            if late is not None:
                raise FrameworkUnavailable(f"probe worker for {framework} made no progress for {late[0]:g} s "
                                           "outside any case (start-up or between cases)")
            raise FrameworkUnavailable(f"probe worker for {framework} exited with status {rc} before any case")
        if late is not None:
            reason = limits.time_message(crashed)
        else:
            why = f"signal {-rc} ({signal.Signals(-rc).name})" if rc < 0 else f"exit status {rc}"
            reason = f"interpreter crashed: {why} while probing this case"
            if -rc == signal.SIGABRT:  # an uncaught bad_alloc
                reason += f" (the worker's memory limit is {limits.memory_gib:g} GiB)"
        modes_run = env.get("modes") or modes or ()
        _append(journal, {"case": crashed, **_crashed(catalog, crashed, framework, dtypes, modes_run, reason, done)})
    raise FrameworkUnavailable(f"probe worker for {framework} kept crashing")


def _watch(proc: Any, journal: Path, limits: ProbeLimits) -> tuple[float, str | None] | None:
    """Wait for a probe worker; kill its process group once a case or batch runs past its limit.

    Each case and compiled batch in progress (a ``start`` line without its record, :class:`_Progress`) gets
    ``case_timeout_s`` or ``batch_timeout_s`` from its ``start`` line; compiled batches may run several at a
    time (:func:`compile_jobs`). With none in progress, the worker gets ``case_timeout_s`` from the journal's
    last change, and its start-up (the framework import) the largest of the limits and
    :data:`STARTUP_TIMEOUT_S`.
    Returns (the limit that ran out, the key of the case or batch that ran past it, or None outside any), or
    None when the worker exited by itself.
    """
    import subprocess  # slow to import

    progress = _Progress(journal)
    idle_limit = max(limits.case_timeout_s, limits.batch_timeout_s, STARTUP_TIMEOUT_S)  # importing the framework
    since = time.monotonic()
    poll = min(0.5, limits.case_timeout_s / 10)
    while True:
        try:
            proc.wait(timeout=poll)
            return None
        except subprocess.TimeoutExpired:
            pass
        now = time.monotonic()
        if progress.update(now):
            since, idle_limit = now, limits.case_timeout_s
        # (deadline, start, journal order, key): seen in one poll, two starts tie; the one the journal has first
        # ran out first
        late = [(begun + limits.limit_for(key), begun, i, key) for i, (key, begun) in enumerate(progress.running.items())
                if now - begun > limits.limit_for(key)]
        if late or (not progress.running and now - since > idle_limit):
            kill_group(proc)
            proc.wait()
            if late:
                key = min(late)[3]  # the first to run out
                return limits.limit_for(key), key
            return idle_limit, None
