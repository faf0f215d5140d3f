"""Run the catalog in the installed framework and build a shard.

Each program is evaluated at its case's point for every requested dtype and mode, each in its own
``try``: a program that raises becomes an ``error`` cell with the message, a name missing in this
version an ``unavailable`` cell; neither loses the rest of the shard. A case that crashes the interpreter,
hangs or allocates past a memory limit is isolated by :func:`probe_isolated` (a bounded worker process,
restarted after the case: see :class:`ProbeLimits`). Activation programs (cases with an
``activation``) are also run end to end on P0's two-layer network (``networks``), for the NumPy
backprop cross-check in the report.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import os
import platform
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from kinkcheck import __version__
from kinkcheck import expr as ex
from kinkcheck.catalog import Catalog, load_catalog
from kinkcheck.frameworks import Adapter, FrameworkUnavailable, Unavailable, data_limit, get_adapter
from kinkcheck.frameworks.base import check_mode, short_error
from kinkcheck.vocabulary import COMPILED_MODES, DTYPES, encode
from kinkcheck.platforms import device_title
from kinkcheck.registry import view
from kinkcheck.shards import ShardBusy, shard_lock

__all__ = ["DEFAULT_DTYPES", "ENV_COMPILE_JOBS", "ForkedWorker", "ProbeBusy", "ProbeInterrupted", "ProbeLimits",
           "compile_jobs", "die_with_parent", "environment", "environment_id", "fork_safe", "journal_path", "probe",
           "probe_isolated", "probe_lock", "select_cases"]

#: dtypes of a probe: all four.
DEFAULT_DTYPES: tuple[str, ...] = DTYPES

#: Seconds an isolated probe waits for a case's eager cells before killing its worker (a case took at most
#: 22 s in every mode and dtype, jax 0.10.2 on 2 busy cores).
DEFAULT_CASE_TIMEOUT_S = 600.0
#: Seconds for one compiled batch (the whole catalog in one mode and dtype; inductor took ~290 s cold on 2 cores).
DEFAULT_BATCH_TIMEOUT_S = 3600.0
#: Memory of the probe worker, GiB (``RLIMIT_DATA``, see :mod:`kinkcheck.bounded`; a whole probe peaked at
#: 3.7 GiB with jax 0.10.2, 0.5 GiB with torch 2.13.0).
DEFAULT_PROBE_MEMORY_GIB = 16.0
#: Least seconds a probe worker gets to import its framework (seconds; much more on a loaded machine).
STARTUP_TIMEOUT_S = 300.0
ENV_CASE_TIMEOUT = "KINKCHECK_CASE_TIMEOUT"
ENV_BATCH_TIMEOUT = "KINKCHECK_BATCH_TIMEOUT"
ENV_PROBE_MEMORY = "KINKCHECK_PROBE_MEMORY_GIB"


@dataclasses.dataclass(frozen=True)
class ProbeLimits:
    """Bounds of an isolated probe: seconds without progress per case and per compiled batch, worker memory (GiB).

    The time limits count from the worker's last journal line, so they bound one case (or batch), not the
    probe; the worker's start-up (the framework import) gets the largest of them and :data:`STARTUP_TIMEOUT_S`.
    """

    case_timeout_s: float = DEFAULT_CASE_TIMEOUT_S
    batch_timeout_s: float = DEFAULT_BATCH_TIMEOUT_S
    memory_gib: float = DEFAULT_PROBE_MEMORY_GIB

    @classmethod
    def resolve(cls, case_timeout: str | float | None = None, batch_timeout: str | float | None = None,
                memory: str | float | None = None, environ: Any = None) -> ProbeLimits:
        """Option values, else ``KINKCHECK_CASE_TIMEOUT``/``KINKCHECK_BATCH_TIMEOUT``/``KINKCHECK_PROBE_MEMORY_GIB``,
        else the defaults.

        Raises
        ------
        ValueError
            A value that is not a positive finite number (one line naming the option or variable).
        """
        from kinkcheck.bounded import _positive

        env = os.environ if environ is None else environ
        return cls(_positive(case_timeout, ENV_CASE_TIMEOUT, "--case-timeout", env, DEFAULT_CASE_TIMEOUT_S),
                   _positive(batch_timeout, ENV_BATCH_TIMEOUT, "--batch-timeout", env, DEFAULT_BATCH_TIMEOUT_S),
                   _positive(memory, ENV_PROBE_MEMORY, "--memory", env, DEFAULT_PROBE_MEMORY_GIB, "GiB"))

    def limit_for(self, key: str) -> float:
        """Seconds the case or compiled batch (``batch:…``) ``key`` may run."""
        return self.batch_timeout_s if key.startswith("batch:") else self.case_timeout_s

    def time_message(self, key: str) -> str:
        if key.startswith("batch:"):
            return (f"exceeded the compiled-batch time limit of {self.batch_timeout_s:g} s "
                    f"(change it with --batch-timeout or {ENV_BATCH_TIMEOUT})")
        return (f"exceeded the per-case time limit of {self.case_timeout_s:g} s "
                f"(change it with --case-timeout or {ENV_CASE_TIMEOUT})")


def _public_version(version: str) -> str:
    from packaging.version import InvalidVersion, Version

    try:
        return Version(version).public
    except InvalidVersion:
        return version


def environment(adapter: Adapter, device: str, catalog: Catalog, dtypes: Sequence[str] = (),
                modes: Sequence[str] = ()) -> dict[str, Any]:
    """Provenance of a shard: ``id`` is ``"<framework>-<public version>-<device>"``, followed by this machine's
    platform tag off Linux x86-64 (:func:`kinkcheck.platforms.environment_id`; ``platform_tag`` records it).

    ``catalog`` is the catalog probed (a part of it when the probe is narrowed to some cases: ``catalog_hash``
    is the whole catalog's, ``case_hashes`` names the cases probed, each with its measurement hash).
    """
    from kinkcheck.platforms import environment_id as _env_id
    from kinkcheck.platforms import host_tag

    version = _public_version(adapter.version)
    tag = host_tag()
    env = {
        "id": _env_id(adapter.name, version, device, tag),
        "framework": adapter.name,
        "framework_version": version,
        "framework_build": adapter.version,
        "device": device,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "platform_tag": tag,
        "runner": runner(adapter, device),
        "measured_at": dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat(),
        "kinkcheck_version": __version__,
        "catalog_hash": catalog.hash,
        "case_hashes": {c.id: c.measurement_hash(adapter.name) for c in catalog if c.programs_for(adapter.name)},
        "settings": adapter.settings(),
        "dtypes": list(dtypes),
        "modes": list(modes),
    }
    if device != "cpu":  # the accelerator's name: "NVIDIA H200", "Apple M2"
        env["device_name"] = adapter.device_name(device)
    return env


#: GitHub Actions variables a shard measured on a CI runner records (``runner.ci_*``), e.g. ``RUNNER_NAME``.
CI_VARIABLES: Mapping[str, str] = {"ci_runner": "RUNNER_NAME", "ci_os": "RUNNER_OS", "ci_arch": "RUNNER_ARCH",
                                   "ci_run": "GITHUB_RUN_ID", "ci_repository": "GITHUB_REPOSITORY"}


def runner(adapter: Adapter | None, device: str) -> dict[str, str]:
    """Where a shard was measured (its ``environment.runner``): the operating system (``os``, ``os_release``:
    ``platform.system()``, ``platform.release()``), the architecture (``arch``: ``platform.machine()``), the
    processor and its vector instruction sets (``vector_isa``, :func:`kinkcheck.frameworks.base.vector_isa`:
    LAPACK's rounding, and with it a value, can follow them); on an accelerator what the adapter tells of it (``accelerator``, ``driver``, ``cuda``, ``hip``,
    ``metal``: :meth:`accelerator` where the adapter has one); on a GitHub Actions runner the ``ci_*`` fields
    (:data:`CI_VARIABLES`). Every value is a string; a field nothing tells of is left out. ``adapter`` None:
    the machine alone (the record of an attempt that imported no framework)."""
    from kinkcheck.frameworks.base import processor_name, vector_isa

    info = {"os": platform.system(), "os_release": platform.release(), "arch": platform.machine(),
            "processor": processor_name(), "vector_isa": vector_isa()}
    describe = getattr(adapter, "accelerator", None)
    if device != "cpu" and callable(describe):
        try:
            info.update({k: str(v) for k, v in describe(device).items() if v})
        except Exception as err:  # noqa: BLE001 - provenance must not stop a probe; say what failed instead
            info["accelerator_error"] = short_error(err)
    info.update({k: os.environ[v] for k, v in CI_VARIABLES.items() if os.environ.get(v)})
    return {k: v for k, v in info.items() if v}


#: Distribution whose installed version names a framework's environment (read without importing it).
DISTRIBUTIONS: Mapping[str, str] = view(lambda f: f.distribution)


def environment_id(framework: str, device: str = "cpu") -> str | None:
    """The id a probe of the installed ``framework`` on this machine will give its shard, without importing the
    framework (:func:`kinkcheck.platforms.environment_id`: the platform tag follows off Linux x86-64).

    Read from the installed distribution's metadata (``torch.__version__`` is the distribution version);
    None when it is not installed (the probe then says why).
    """
    from importlib import metadata

    try:
        version = metadata.version(DISTRIBUTIONS.get(framework, framework))
    except metadata.PackageNotFoundError:
        return None
    from kinkcheck.platforms import environment_id as _env_id
    from kinkcheck.platforms import host_tag

    return _env_id(framework, _public_version(version), device, host_tag())


def journal_path(shard_path: str | Path, modes: Sequence[str] | None = None, dtypes: Sequence[str] | None = None,
                 cases: Sequence[str] | None = None) -> Path:
    """Where a probe of one selection into ``shard_path`` journals its finished cases, beside the shard:
    ``.<file stem>.<selection>.journal.jsonl``.

    ``<selection>`` is a short hash of the modes, dtypes and cases asked for (None or empty: every mode,
    the four dtypes, every case), so each selection has its own journal: a narrowed probe never touches
    the journal of a killed full probe. Kept when the probe is interrupted (the same command resumes from
    it), deleted once the shard is written; ``.gitignore`` covers it (``.*.journal.jsonl``).
    """
    import hashlib

    selection = json.dumps([sorted(set(modes or ())), sorted(set(dtypes or DEFAULT_DTYPES)), sorted(set(cases or ()))])
    p = Path(shard_path)
    return p.with_name(f".{p.stem}.{hashlib.sha256(selection.encode()).hexdigest()[:8]}.journal.jsonl")


class ProbeInterrupted(RuntimeError):
    """The probe worker was killed by a signal the probe did not send (a person, the OOM killer): the probe
    stops, its journal kept for the next run to resume; ``str(err)`` is one line."""


#: Signals that end a worker from outside: an interruption of the probe, not a crash of the case it probes.
INTERRUPTING_SIGNALS = ("SIGKILL", "SIGTERM", "SIGINT", "SIGHUP")


#: Another probe (or nox) holds the lock of the environment: ``kinkcheck.shards.ShardBusy``.
ProbeBusy = ShardBusy
#: The exclusive lock of one environment for a whole probe: ``kinkcheck.shards.shard_lock``.
probe_lock = shard_lock


def select_cases(catalog: Catalog, cases: Sequence[str] | None) -> Catalog:
    """``catalog`` narrowed to ``cases`` (ids, kept in catalog order; hash and path unchanged).

    Raises
    ------
    CatalogError
        An id the catalog does not hold.
    """
    if not cases:
        return catalog
    from kinkcheck.catalog import CatalogError

    ids = {c.id for c in catalog}
    unknown = [c for c in cases if c not in ids]
    if unknown:
        raise CatalogError(f"no case {unknown[0]!r} in the catalog {catalog.path}")
    wanted = set(cases)
    return dataclasses.replace(catalog, cases=tuple(c for c in catalog if c.id in wanted))


def network_tree(tree: ex.Node, input_name: str) -> ex.Node:
    """P0's squared-error loss with the program as the activation: ``((act(X @ W1)) @ W2 - T) ** 2``.

    The input ``input_name`` is replaced by ``X @ W1``; ``X``, ``W1``, ``W2`` and ``T`` become the inputs,
    so the network runs through :meth:`Adapter.gradient` in every mode (every mode sums the output).
    """

    def sub(n: ex.Node) -> ex.Node:
        if isinstance(n, ex.Input):
            return ex.BinOp("@", ex.Input("X"), ex.Input("W1")) if n.name == input_name else n
        if not dataclasses.is_dataclass(n):
            return n
        changes = {}
        for f in dataclasses.fields(n):
            v = getattr(n, f.name)
            if isinstance(v, ex.Node):
                changes[f.name] = sub(v)
            elif isinstance(v, tuple):
                changes[f.name] = tuple(
                    sub(i) if isinstance(i, ex.Node)
                    else (i[0], sub(i[1])) if isinstance(i, tuple) and len(i) == 2 and isinstance(i[1], ex.Node)
                    else i
                    for i in v
                )
        return dataclasses.replace(n, **changes)

    residual = ex.BinOp("-", ex.BinOp("@", sub(tree), ex.Input("W2")), ex.Input("T"))
    return ex.BinOp("**", residual, ex.Const(2))


def network_point() -> dict[str, Any]:
    from kinkcheck.oracles import p0

    return p0.point()


def probe(
    framework: str,
    device: str = "cpu",
    dtypes: Sequence[str] = DEFAULT_DTYPES,
    modes: Sequence[str] | None = None,
    catalog: Catalog | None = None,
    on_step: Callable[[str], None] | None = None,
    journal: str | Path | None = None,
    cases: Sequence[str] | None = None,
    on_resume: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Probe the catalog (or its ``cases``) for ``framework`` on ``device`` in this process; return a shard.

    Every program is evaluated at its case's point in every mode and dtype. Compiled modes
    (:data:`kinkcheck.frameworks.base.COMPILED_MODES`) run last, one compiled call per mode and dtype for
    the whole catalog (see ``TorchAdapter.compiled_gradients``), after every eager cell: loading compiled
    kernels can change the process's floating-point state; eager modes run program by program. With more than
    one batch and more than one job (:func:`compile_jobs`, ``KINKCHECK_COMPILE_JOBS``), the batches compile
    at once, each in a new process (:func:`_batch_processes`); the cells are the same.
    Activation programs also run end to end on P0's network (:func:`network_tree`) in the
    :data:`NETWORK_MODES` the adapter has, in float64 and float32.

    Parameters
    ----------
    framework : {"torch", "jax"}
    device : {"cpu", "cuda", "metal"}
        :data:`kinkcheck.platforms.DEVICES`; the framework's adapter must find it here.
    dtypes : sequence of str
        See :data:`kinkcheck.frameworks.DTYPES`; default all four.
    modes : sequence of str, optional
        Default: every mode the adapter knows (``adapter.modes``). A mode the adapter does not know raises
        :class:`kinkcheck.expr.ExprError`.
    on_step : callable, optional
        Called with a short description before each program and each compiled batch (progress display).
    journal : path, optional
        JSON-lines file: a ``{"start": key}`` line before each case or compiled batch (when its process is
        started, for a batch in its own process; ``{"retry": key}`` when that process died) and a record with its
        results after it, handed to the kernel at once (it outlives the worker); keys already in the journal
        are skipped. This is how :func:`probe_isolated` survives a case that crashes the interpreter, and how a
        killed probe resumes:
        an earlier journal is first cut to what still applies (:func:`_prepare_journal`).
    cases : sequence of str, optional
        Probe only these case ids (compiled batches compile only them); the shard's ``case_hashes`` names
        them, so :func:`kinkcheck.shards.write_merged` merges it into the full shard.
    on_resume : callable, optional
        Called with one line ("resuming: N of M cases already probed (journal …)") when the journal already
        holds finished cases.

    Raises
    ------
    FrameworkUnavailable
        The framework is not installed, or ``device`` is not present (``"not measured: no CUDA device"``).
    CatalogError
        A case id of ``cases`` the catalog does not hold.
    """
    catalog = select_cases(catalog if catalog is not None else load_catalog(), cases)  # an empty Catalog is falsy
    jobs = compile_jobs()  # a bad KINKCHECK_COMPILE_JOBS fails here, before any cell is measured
    adapter = get_adapter(framework)
    modes = tuple(modes or adapter.modes)
    for m in modes:
        check_mode(m, adapter.modes)
    if device not in adapter.devices():
        raise FrameworkUnavailable(f"not measured: no {device_title(device)} device for {framework}")
    env = environment(adapter, device, catalog, dtypes, modes)
    if journal:
        _prepare_journal(journal, env)  # resume: keep the cases an earlier, interrupted probe finished
    journaled_env, done, _ = _read_journal(journal) if journal else (None, {}, [])
    if journal and not journaled_env:
        _append(journal, {"environment": env})
    measured = [c.id for c in catalog if c.programs_for(framework)]
    if on_resume and any(c in done for c in measured):
        on_resume(f"resuming: {sum(c in done for c in measured)} of {len(measured)} cases already probed "
                  f"(journal {journal})")
    crash, hang = os.environ.get(CRASH_ENV), os.environ.get(HANG_ENV)
    for case in catalog:  # eager modes first, each case journaled
        if case.id in done or not case.programs_for(framework):
            if on_step:
                for program in case.programs_for(framework):
                    on_step(f"{case.id}  {program.id}")
            continue
        if journal:
            _append(journal, {"start": case.id})
        if crash == case.id:  # fault injection for the crash-isolation tests (KINKCHECK_CRASH_CASE)
            _crash(os.environ.get(CRASH_SIGNAL_ENV))
        _hang_if(hang == case.id)
        done[case.id] = _probe_case(adapter, case, framework, device, dtypes, modes, on_step)
        if journal:
            _append(journal, {"case": case.id, **done[case.id]})
    # Compiled batches after every eager cell, inductor last: loading inductor's C++ kernels can change the
    # process's floating-point state (torch 2.4.1/2.5.1 on CPU flushed subnormals afterwards), which must
    # not reach the eager cells.
    batches = [(mode, dtype) for mode in sorted((m for m in modes if m in COMPILED_MODES),
                                                key=lambda m: m == "inductor")
               for dtype in dtypes if _batch_name(mode, dtype) not in done]
    if jobs > 1 and len(batches) > 1:
        _batch_processes(catalog, framework, device, dtypes, batches, jobs, done, journal, on_step)
    for mode, dtype in batches:  # here: every batch with one job, and what a batch process did not return
        key = _batch_name(mode, dtype)
        if key in done:
            continue
        if on_step:
            on_step(f"compiling the catalog: {mode} {dtype}")
        if journal:
            _append(journal, {"start": key})
        if crash == key:
            _crash(os.environ.get(CRASH_SIGNAL_ENV))
        _hang_if(hang == key)
        done[key] = {"results": _compiled_batch(adapter, catalog, framework, device, mode, dtype, dtypes)}
        if journal:
            _append(journal, {"case": key, **done[key]})
    return _assemble(env, catalog, done)


def _batch_name(mode: str, dtype: str) -> str:
    """A compiled batch's key in the journal (``batch:inductor/float32``), beside the case ids."""
    return f"batch:{mode}/{dtype}"


#: Environment variable: how many compiled batches (one mode and dtype of the whole catalog each) compile at
#: once, each in its own process; ``1`` compiles them one after another in the probe's process.
ENV_COMPILE_JOBS = "KINKCHECK_COMPILE_JOBS"


def compile_jobs(environ: Mapping[str, str] | None = None) -> int:
    """Compiled batches run at once: ``KINKCHECK_COMPILE_JOBS``, else the CPUs this process may use.

    A cold inductor batch is mostly single-threaded Python (dynamo, AOT autograd, inductor's lowering) and
    C++ compiles of small kernel modules, so batches in separate processes use the other cores: on 2 cores
    a cold ``--mode inductor`` probe of 169 cases (torch 2.13.0) took 726 s one batch after another.

    Raises
    ------
    ValueError
        The variable is set and not a positive integer (one line naming it).
    """
    env = os.environ if environ is None else environ
    raw = env.get(ENV_COMPILE_JOBS, "").strip()
    if not raw:
        try:
            return max(1, len(os.sched_getaffinity(0)))
        except AttributeError:  # macOS and Windows have no affinity mask
            return max(1, os.cpu_count() or 1)
    if not (raw.isascii() and raw.isdigit()) or int(raw) < 1:
        raise ValueError(f"{ENV_COMPILE_JOBS} must be a positive integer, got {raw!r}")
    return int(raw)


#: A batch process's program: this process's ``sys.path`` first (the same kinkcheck and framework), then the batch.
_BATCH_MAIN = ("import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
               "from kinkcheck.probe import _batch_process; _batch_process(*sys.argv[2:])")


def _batch_processes(catalog: Catalog, framework: str, device: str, dtypes: Sequence[str],
                     batches: Sequence[tuple[str, str]], jobs: int, done: dict[str, dict[str, Any]],
                     journal: str | Path | None, on_step: Callable[[str], None] | None) -> None:
    """Run compiled batches in up to ``jobs`` processes at once (:func:`_batch_process`), filling ``done``.

    A batch process imports the framework afresh, as the probe's own worker did, and nothing an eager cell or
    another batch left in a process (inductor's kernels can change the floating-point state) reaches it. Its
    ``start`` line goes to the journal when it is started, so its time limit counts its import too. A batch
    process that dies or fails gets a ``retry`` line (its time limit stops) and no record: the caller runs
    that batch again in its own process, where a crash is isolated and reported as for any case. When the
    processes cannot be set up (the catalog does not pickle, no temporary folder), nothing runs here.
    """
    import pickle
    import shutil
    import subprocess
    import tempfile
    import time

    _remove_orphaned_batch_folders()
    tmp = None
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f"{_BATCH_FOLDER}{os.getpid()}-"))
        spec = tmp / "catalog.pickle"
        spec.write_bytes(pickle.dumps(catalog))
    except Exception:  # noqa: BLE001 - the caller runs every batch in its own process instead
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        return
    env = {**os.environ, PARENT_ENV: str(os.getpid())}
    todo: list[tuple[str, str]] = list(batches)
    running: dict[Any, tuple[str, Path]] = {}
    try:
        while todo or running:
            while todo and len(running) < jobs:
                mode, dtype = todo.pop(0)
                key, out = _batch_name(mode, dtype), tmp / f"{mode}-{dtype}.json"
                if on_step:
                    on_step(f"compiling the catalog: {mode} {dtype}")
                if journal:
                    _append(journal, {"start": key})
                cmd = [sys.executable, "-c", _BATCH_MAIN, json.dumps(sys.path), str(spec), framework, device,
                       mode, dtype, ",".join(dtypes), str(out)]
                running[subprocess.Popen(cmd, env=env)] = (key, out)
            time.sleep(0.1)
            for proc, (key, out) in list(running.items()):
                if proc.poll() is None:
                    continue
                del running[proc]
                if proc.returncode == 0 and out.is_file():
                    done[key] = {"results": json.loads(out.read_text(encoding="utf-8"))}
                    if journal:
                        _append(journal, {"case": key, **done[key]})
                elif journal:
                    _append(journal, {"retry": key})
    finally:
        for proc in running:
            proc.kill()
            proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)


#: Prefix of a batch folder in the temporary directory: ``kinkcheck-batches-<pid of the probe>-…``.
_BATCH_FOLDER = "kinkcheck-batches-"


def _remove_orphaned_batch_folders() -> None:
    """Remove the batch folders of probes that no longer run (a worker killed at a time limit leaves one)."""
    import shutil
    import tempfile

    for folder in Path(tempfile.gettempdir()).glob(f"{_BATCH_FOLDER}*"):
        pid = folder.name[len(_BATCH_FOLDER):].split("-", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
        except (PermissionError, OSError):  # another user's probe, or no way to tell: left alone
            continue


def _batch_process(spec: str, framework: str, device: str, mode: str, dtype: str, dtypes: str, out: str) -> None:
    """A batch process of :func:`_batch_processes`: one compiled batch, its results as JSON in ``out``."""
    import pickle
    import signal

    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the probe, which ends its batch processes
    catalog = pickle.loads(Path(spec).read_bytes())
    adapter = get_adapter(framework)
    key = _batch_name(mode, dtype)
    if os.environ.get(CRASH_ENV) == key:
        _crash(os.environ.get(CRASH_SIGNAL_ENV))
    _hang_if(os.environ.get(HANG_ENV) == key)
    results = _compiled_batch(adapter, catalog, framework, device, mode, dtype, dtypes.split(","))
    part = Path(out).with_suffix(".part")
    part.write_text(json.dumps(results), encoding="utf-8")
    part.replace(out)


#: Environment variable naming a case at which a probe worker aborts (tests the crash isolation).
CRASH_ENV = "KINKCHECK_CRASH_CASE"
#: Environment variable naming the signal the worker sends itself at :data:`CRASH_ENV` (default: abort, SIGABRT).
CRASH_SIGNAL_ENV = "KINKCHECK_CRASH_SIGNAL"


def _crash(signame: str | None) -> None:
    import signal

    if signame:
        os.kill(os.getpid(), getattr(signal, signame))
    os.abort()


#: Environment variable naming a case or compiled batch (``batch:<mode>/<dtype>``) at which a probe worker
#: hangs (tests the time limits).
HANG_ENV = "KINKCHECK_HANG_CASE"


def _hang_if(hang: bool) -> None:
    import time

    while hang:  # fault injection (KINKCHECK_HANG_CASE): never returns
        time.sleep(60)

#: Modes in which activation programs also run on P0's network (where the adapter has them): the
#: end-to-end cross-check of reverse, forward and compiled gradients against the NumPy oracle.
NETWORK_MODES: tuple[str, ...] = ("reverse", "forward", "jit", "inductor", "aot_eager")
#: dtypes of the network runs: P0's exact gradients (e.g. 932) are not representable in float16/bfloat16.
NETWORK_DTYPES: tuple[str, ...] = ("float64", "float32")


def _batch_key(kind: str, case_id: str, program_id: str, mode: str, dtype: str) -> str:
    return json.dumps([kind, case_id, program_id, mode, dtype])


def _compiled_batch(adapter: Adapter, catalog: Catalog, framework: str, device: str, mode: str, dtype: str,
                    dtypes: Sequence[str]) -> dict[str, Any]:
    """One compiled call for every program (and network) of the catalog in ``mode`` and ``dtype``."""
    keys, items = [], []
    for case, program in catalog.programs(framework):
        keys.append(_batch_key("obs", case.id, program.id, mode, dtype))
        items.append((program.tree, case.at))
        if _has_network(case) and dtype in NETWORK_DTYPES:
            keys.append(_batch_key("net", case.id, program.id, mode, dtype))
            items.append((network_tree(program.tree, case.inputs[0]), network_point()))
    try:
        results = adapter.compiled_gradients(items, dtype, device, mode)
    except Unavailable as err:
        return {k: {"status": "unavailable", "value": None, "error": str(err)} for k in keys}
    except Exception as err:  # noqa: BLE001
        return {k: {"status": "error", "value": None, "error": _error_text(err)} for k in keys}
    out = {}
    for k, r in zip(keys, results):
        if isinstance(r, Unavailable):
            out[k] = {"status": "unavailable", "value": None, "error": str(r)}
        elif isinstance(r, BaseException):
            out[k] = {"status": "error", "value": None, "error": _error_text(r)}
        else:
            out[k] = {"status": "ok", "value": {n: encode(v) for n, v in r.items()}, "error": None}
    return out


def _has_network(case: Any) -> bool:
    return bool(case.activation) and len(case.at) == 1


def _run(adapter: Adapter, tree: Any, at: Any, dtype: str, device: str, mode: str) -> dict[str, Any]:
    try:
        value = {k: encode(v) for k, v in adapter.gradient(tree, at, dtype, device, mode).items()}
        return {"status": "ok", "value": value, "error": None}
    except Unavailable as err:
        return {"status": "unavailable", "value": None, "error": str(err)}
    except Exception as err:  # noqa: BLE001 - any framework failure is an observation
        return {"status": "error", "value": None, "error": _error_text(err)}


def _error_text(err: BaseException) -> str:
    """An error cell's message; an allocation that failed under the worker's memory limit says so."""
    from kinkcheck.bounded import _is_oom

    text = short_error(err)
    limit = data_limit()
    if limit is None or not _is_oom(err):
        return text
    return (f"exceeded the memory limit of {limit / 2 ** 30:g} GiB (change it with --memory or {ENV_PROBE_MEMORY}): "
            f"{short_error(err, 160)}")


def _probe_case(adapter: Adapter, case: Any, framework: str, device: str, dtypes: Sequence[str],
                modes: Sequence[str], on_step: Callable[[str], None] | None) -> dict[str, Any]:
    """Eager-mode cells of one case (compiled modes come from the batches, see :func:`_assemble`)."""
    observations: list[dict[str, Any]] = []
    networks: list[dict[str, Any]] = []
    rounded = {d: adapter.rounded(case.at, d) for d in dtypes}
    for program in case.programs_for(framework):
        if on_step:
            on_step(f"{case.id}  {program.id}")
        for mode in dict.fromkeys([*modes, *(m for m in case.modes if m in adapter.modes)]):
            if mode in COMPILED_MODES:
                continue
            for dtype in dtypes:
                r = _run(adapter, program.tree, case.at, dtype, device, mode)
                ob = {"case": case.id, "program": program.id, "mode": mode, "dtype": dtype, **r}
                if rounded[dtype] is not None:
                    ob["input"] = rounded[dtype]
                observations.append(ob)
        if not _has_network(case):
            continue
        net = network_tree(program.tree, case.inputs[0])
        for mode in (m for m in NETWORK_MODES if m in modes and m not in COMPILED_MODES):
            for dtype in (d for d in dtypes if d in NETWORK_DTYPES):
                r = _run(adapter, net, network_point(), dtype, device, mode)
                v = r["value"]
                networks.append({"case": case.id, "program": program.id, "mode": mode, "dtype": dtype,
                                 "status": r["status"], "W1": v["W1"] if v else None, "W2": v["W2"] if v else None,
                                 "error": r["error"]})
    return {"observations": observations, "networks": networks,
            "rounded": {d: r for d, r in rounded.items() if r is not None}}


def _crashed(catalog: Catalog, key: str, framework: str, dtypes: Sequence[str], modes: Sequence[str],
             reason: str, done: dict[str, Any] | None = None) -> dict[str, Any]:
    """Error cells for every observation of a case (or compiled batch) whose worker process died.

    A case's compiled-mode cells come from the compiled batches (they run after the eager cases, in a new worker or
    their own processes), so they are not lost with it. A crash inside a compiled batch loses that mode and dtype
    for the whole catalog (the batch is one call); the cells say so.
    """
    from kinkcheck.vocabulary import FRAMEWORK_MODES

    done = done or {}
    if key.startswith("batch:"):
        mode, dtype = key[len("batch:"):].split("/")
        results = {}
        for case, program in catalog.programs(framework):
            results[_batch_key("obs", case.id, program.id, mode, dtype)] = {"status": "error", "value": None,
                                                                             "error": reason}
            if _has_network(case) and dtype in NETWORK_DTYPES:
                results[_batch_key("net", case.id, program.id, mode, dtype)] = {"status": "error", "value": None,
                                                                                 "error": reason}
        return {"results": results}
    case = catalog.case(key)
    known = FRAMEWORK_MODES.get(framework, ())
    obs = []
    for p in case.programs_for(framework):
        for m in dict.fromkeys([*modes, *(m for m in case.modes if m in known)]):
            if m in COMPILED_MODES:
                continue
            for d in dtypes:
                obs.append({"case": case.id, "program": p.id, "mode": m, "dtype": d, "status": "error",
                            "value": None, "error": reason})
    nets = [{"case": case.id, "program": p.id, "mode": m, "dtype": d, "status": "error", "W1": None, "W2": None,
             "error": reason}
            for p in case.programs_for(framework) if _has_network(case)
            for m in NETWORK_MODES if m in modes and m not in COMPILED_MODES for d in dtypes if d in NETWORK_DTYPES]
    return {"observations": obs, "networks": nets}


def _assemble(env: dict[str, Any], catalog: Catalog, done: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The shard: each case's eager cells, then its cells from the compiled batches, in catalog order.

    Raises
    ------
    FrameworkUnavailable
        ``env`` is not an environment (a journal without its environment line: another process rewrote it).
    """
    if not isinstance(env, dict) or not isinstance(env.get("framework"), str):
        raise FrameworkUnavailable("the probe journal has no environment line (was it rewritten by another "
                                   "process?); run the same command again")
    framework = env["framework"]
    batches = {k[len("batch:"):]: v["results"] for k, v in done.items() if k.startswith("batch:")}
    modes = [m for m in env.get("modes", ()) if m in COMPILED_MODES]
    dtypes = list(env.get("dtypes", ()))
    observations, networks = [], []
    for case in catalog:  # catalog order, whatever order the journal has
        if case.id not in done:
            continue
        observations += done[case.id]["observations"]
        networks += done[case.id]["networks"]
        rounded = done[case.id].get("rounded", {})
        for program in case.programs_for(framework):
            for mode in modes:
                for dtype in dtypes:
                    r = batches.get(f"{mode}/{dtype}", {}).get(_batch_key("obs", case.id, program.id, mode, dtype))
                    if r is None:
                        continue
                    ob = {"case": case.id, "program": program.id, "mode": mode, "dtype": dtype, **r}
                    if rounded.get(dtype) is not None:
                        ob["input"] = rounded[dtype]
                    observations.append(ob)
            if not _has_network(case):
                continue
            for mode in (m for m in NETWORK_MODES if m in modes):
                for dtype in (d for d in dtypes if d in NETWORK_DTYPES):
                    r = batches.get(f"{mode}/{dtype}", {}).get(_batch_key("net", case.id, program.id, mode, dtype))
                    if r is None:
                        continue
                    v = r["value"]
                    networks.append({"case": case.id, "program": program.id, "mode": mode, "dtype": dtype,
                                     "status": r["status"], "W1": v["W1"] if v else None,
                                     "W2": v["W2"] if v else None, "error": r["error"]})
    return {"schema": "kinkcheck/shard/v1", "environment": env, "observations": observations, "networks": networks}


def _append(journal: str | Path, record: dict[str, Any]) -> None:
    with open(journal, "a+b") as fh:
        end = fh.seek(0, os.SEEK_END)
        if end:
            fh.seek(end - 1)  # a line cut short by a killed worker must not swallow this record
            if fh.read(1) != b"\n":
                fh.write(b"\n")
        fh.write(json.dumps(record).encode() + b"\n")
    # No fsync: the journal outlives a killed or crashed worker (the kernel holds what was written); after a
    # machine crash a torn line is skipped and its case probed again. fsync per case cost a light framework's
    # probe a tenth of its time.


def _read_journal(journal: str | Path | None) -> tuple[dict[str, Any] | None, dict[str, dict[str, Any]], list[str]]:
    """(environment, case id → results, case ids started) from a journal; a torn last line is ignored."""
    env, done, started = None, {}, []
    if journal is None or not Path(journal).exists():
        return env, done, started
    for line in Path(journal).read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue  # the line a crash cut short
        if "environment" in rec:
            env = rec["environment"]
        elif "start" in rec:
            started.append(rec["start"])
        elif "case" in rec:
            done[rec["case"]] = {k: v for k, v in rec.items() if k != "case"}
        elif "fatal" in rec:
            raise FrameworkUnavailable(rec["fatal"])
    return env, done, started


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
    """Like :func:`probe`, in a bounded worker process that is restarted after the case that crashed it.

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
        Probe only these case ids (see :func:`probe`).
    journal : path, optional
        The journal (:func:`journal_path` of the shard). Given, it outlives the call: a probe that is killed
        keeps there every case it finished, and the next call with the same journal resumes after them
        (a case whose measurement hash changed is probed again; a journal of another build, device, mode
        list or dtype list is discarded). The caller deletes it once the shard is written. Default: a
        temporary file, gone with the call.
    limits : ProbeLimits, optional
        Default :meth:`ProbeLimits.resolve` (the environment variables, else the defaults).
    worker : callable, optional
        ``worker(journal)`` does in a forked worker what ``kinkcheck probe --worker JOURNAL`` does in a new
        interpreter (:func:`kinkcheck.cli._probe_worker`) and returns its exit status. Given, and where
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
    import tempfile

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
    import signal
    import subprocess

    cmd = [sys.executable, "-m", "kinkcheck", "probe", "--framework", framework, "--device", device,
           "--worker", str(journal), "--catalog", catalog.path, "--memory", repr(limits.memory_gib)]
    cmd += [a for d in dtypes for a in ("--dtype", d)] + [a for m in modes or () for a in ("--mode", m)]
    cmd += [a for c in cases or () for a in ("--case", c)]
    if catalog.staged:
        cmd.append("--staged")
    if quiet:
        cmd.append("--quiet")
    for attempt in range(len(catalog) + len(COMPILED_MODES) * len(dtypes) + 1):  # cases and compiled batches
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
                from kinkcheck.bounded import kill_group

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


#: Environment variable: ``spawn`` starts every probe worker as a new interpreter, even where one could be forked.
START_ENV = "KINKCHECK_PROBE_START"


def fork_safe() -> bool:
    """Whether a probe worker may be forked from this process instead of started as a new interpreter.

    Only on Linux (macOS's system libraries do not survive a fork without exec), only while this process runs
    one thread, and only while no framework of the registry is imported here: a framework's thread pools, XLA
    client or device context are not usable in a forked child (JAX warns that fork deadlocks it), and a
    worker must import its framework fresh, as a new interpreter would. ``KINKCHECK_PROBE_START=spawn``
    turns forking off.
    """
    import threading

    from kinkcheck.registry import FRAMEWORKS

    if not sys.platform.startswith("linux") or not hasattr(os, "fork") or os.environ.get(START_ENV) == "spawn":
        return False
    if threading.active_count() != 1:
        return False
    return not any(f in sys.modules for f in FRAMEWORKS)  # a framework's name is its import root


class ForkedWorker:
    """A probe worker forked from this process: the part of :class:`subprocess.Popen` that :func:`_watch`,
    :func:`kinkcheck.bounded.kill_group` and the restart loop use (``pid``, ``poll``, ``wait``, ``kill``,
    ``returncode``: negative for a signal, as ``Popen`` says it).

    The child leads its own session (``start_new_session``), sets ``env`` in its environment, restores the
    default handlers of SIGTERM, SIGHUP and SIGINT, runs ``work()`` and leaves with ``os._exit`` and its
    status: it never returns into the caller's code, and runs none of the caller's ``atexit`` handlers.
    An exception ``work`` does not handle prints its traceback and exits 1, as an interpreter would.
    """

    def __init__(self, work: Callable[[], int], env: Mapping[str, str]) -> None:
        import gc
        import signal

        for stream in (sys.stdout, sys.stderr):  # what is buffered here must not be written twice
            with contextlib.suppress(Exception):
                stream.flush()
        # The objects this process holds stay out of the child's collections: a collection that walked them
        # would copy every page they lie on (copy-on-write), which made importing autograd in the child
        # twice as slow as in a new interpreter.
        gc.freeze()
        pid = os.fork()
        if pid:
            gc.unfreeze()
        else:  # the worker
            code = 1
            try:
                os.setsid()
                os.environ.update(env)
                for name in ("SIGTERM", "SIGHUP"):
                    signal.signal(getattr(signal, name), signal.SIG_DFL)
                signal.signal(signal.SIGINT, signal.default_int_handler)
                code = int(work())
            except SystemExit as err:
                code = err.code if isinstance(err.code, int) else 0 if err.code is None else 1
            except KeyboardInterrupt:
                code = 130
            except BaseException:  # noqa: BLE001 - as an interpreter would: the traceback, then status 1
                import traceback

                traceback.print_exc()
            finally:
                for stream in (sys.stdout, sys.stderr):
                    with contextlib.suppress(Exception):
                        stream.flush()
                os._exit(code)
        self.pid = pid
        self.returncode: int | None = None
        try:  # readable once the child has exited (Linux 5.3): wait() wakes at once, not at its next poll
            self._pidfd: int | None = os.pidfd_open(pid)
        except (AttributeError, OSError):
            self._pidfd = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere: nothing more to learn
                pid, status = self.pid, 0
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
                if self._pidfd is not None:
                    os.close(self._pidfd)
                    self._pidfd = None
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """The exit status; raises :class:`subprocess.TimeoutExpired` after ``timeout`` seconds."""
        import select
        import subprocess
        import time

        end = None if timeout is None else time.monotonic() + timeout
        delay = 0.0005
        while self.poll() is None:
            left = None if end is None else end - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout or 0)
            if self._pidfd is not None:
                select.select([self._pidfd], [], [], left)
            else:
                delay = min(delay * 2, 0.05, left if left is not None else 0.05)
                time.sleep(delay)
        return self.returncode  # type: ignore[return-value]

    def kill(self) -> None:
        import signal

        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)


def _interrupting_signal(rc: int | None) -> str | None:
    """The name of the signal in :data:`INTERRUPTING_SIGNALS` that ended a worker with status ``rc``, else None.

    A worker that gets SIGINT as a Python exception exits with 130 (``kinkcheck.cli.main``).
    """
    import signal

    if rc == 130:
        return "SIGINT"
    if rc is None or rc >= 0:
        return None
    try:
        name = signal.Signals(-rc).name
    except ValueError:
        return None
    return name if name in INTERRUPTING_SIGNALS else None


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
    import subprocess
    import time

    from kinkcheck.bounded import kill_group

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
        late = [(begun + limits.limit_for(key), begun, key) for key, begun in progress.running.items()
                if now - begun > limits.limit_for(key)]
        if late or (not progress.running and now - since > idle_limit):
            kill_group(proc)
            proc.wait()
            if late:
                key = min(late)[2]  # the first to run out
                return limits.limit_for(key), key
            return idle_limit, None


class _Progress:
    """The cases and compiled batches in progress in a probe journal, read as the journal grows: key → the
    monotonic time its ``start`` line was read. Lines written before the watch began are not read (a restarted
    worker writes a new ``start`` line for whatever it runs again); a journal the worker rewrote
    (:func:`_prepare_journal` keeps no ``start`` line) is read from its beginning."""

    def __init__(self, journal: Path) -> None:
        self.journal = journal
        self.file, self.offset = self._identity()
        self.rest = b""
        self.running: dict[str, float] = {}

    def _identity(self) -> tuple[int | None, int]:
        try:
            st = self.journal.stat()
        except OSError:
            return None, 0
        return st.st_ino, st.st_size

    def update(self, now: float) -> bool:
        """Read what was appended since the last call; True when the journal changed."""
        ino, size = self._identity()
        if ino != self.file or size < self.offset:  # replaced, deleted or cut: what it holds now is new
            self.file, self.offset, self.rest = ino, 0, b""
            if ino is None:
                return True
        try:
            with open(self.journal, "rb") as fh:
                fh.seek(self.offset)
                new = fh.read()
        except OSError:
            return False
        if not new:
            return False
        self.offset += len(new)
        *lines, self.rest = (self.rest + new).split(b"\n")
        for line in lines:
            try:
                rec = json.loads(line)
            except ValueError:  # a line a killed worker cut short
                continue
            if not isinstance(rec, dict):
                continue
            if isinstance(rec.get("start"), str):
                self.running[rec["start"]] = now
            elif isinstance(rec.get("case"), str):
                self.running.pop(rec["case"], None)
            elif isinstance(rec.get("retry"), str):  # its process died; the worker runs it again later
                self.running.pop(rec["retry"], None)
        return True


#: Environment variable with the pid of the probe that started a worker (see :func:`die_with_parent`).
PARENT_ENV = "KINKCHECK_PROBE_PARENT"
#: Environment variable set ("1") for a worker started after another one crashed (it does not announce resuming).
RESTARTED_ENV = "KINKCHECK_PROBE_RESTARTED"


def die_with_parent() -> None:
    """In a probe worker: be killed when the probe that started it dies, even by SIGKILL (Linux only).

    The worker has its own session, so neither a signal to the probe's group nor the probe's exit reaches it;
    an orphan would go on writing the journal beside the next probe's worker (or loop forever in a case
    that hangs). Exits at once when that probe is already gone.
    """
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    try:
        ctypes.CDLL(None).prctl(1, int(signal.SIGKILL))  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # no prctl in this libc: the time limits still hold
        return
    parent = os.environ.get(PARENT_ENV, "")
    if parent.isdigit() and os.getppid() != int(parent):  # it died before prctl took effect
        os._exit(1)


@contextlib.contextmanager
def _exit_on_termination() -> Iterator[None]:
    """SIGTERM and SIGHUP raise SystemExit while a worker runs, so that its group is killed on the way out
    (the worker has its own session: a signal to the probe no longer reaches it, and an orphan that hangs
    would run forever)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def leave(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)

    names = [n for n in ("SIGTERM", "SIGHUP") if hasattr(signal, n)]  # Windows has no SIGHUP
    old = {n: signal.signal(getattr(signal, n), leave) for n in names}
    try:
        yield
    finally:
        for n, handler in old.items():
            signal.signal(getattr(signal, n), handler)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return -1


def _prepare_journal(journal: str | Path, env: dict[str, Any]) -> None:
    """Keep of a journal what a probe with environment ``env`` can reuse, before it resumes from it.

    A journal of another environment, build, device, mode list, dtype list or kinkcheck version is deleted. Otherwise a case's
    record is kept when the case is still probed with the same measurement hash, and a compiled batch's
    when every case is (a batch compiles all of them in one call); ``start`` lines of unfinished cases and
    ``fatal`` lines of an earlier run are dropped.
    """
    from kinkcheck.shards import write_text_atomic

    p = Path(journal)
    if not p.exists():
        return
    records = []
    for line in p.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue  # the line a kill cut short
        if isinstance(rec, dict):
            records.append(rec)
    header = next((r["environment"] for r in records if isinstance(r.get("environment"), dict)), None)
    if header is None or any(header.get(k) != env.get(k) for k in ("id", "framework_build", "device", "modes",
                                                                      "dtypes", "kinkcheck_version")):
        p.unlink(missing_ok=True)
        return
    old, new = header.get("case_hashes") or {}, env["case_hashes"]
    keep: list[dict[str, Any]] = [{"environment": {**header, "case_hashes": new}}]
    for r in records:
        key = r.get("case")
        if not isinstance(key, str):
            continue
        batch = key.startswith("batch:")
        if (batch and old == new) or (not batch and key in new and old.get(key) == new[key]):
            keep.append(r)
    if keep != records:
        write_text_atomic(p, "".join(json.dumps(r) + "\n" for r in keep))
