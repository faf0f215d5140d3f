"""Compiled batches: one compiled call per mode and dtype for the catalog (``torch.compile`` with inductor or
aot_eager), split into chunks of whole programs (:func:`compiled_chunks`) that compile at once, each in a process
of its own, on as many cores as the probe may use (:func:`compile_jobs`).
"""

from __future__ import annotations

import json
import math
import os
import pickle
import shutil
import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kinkcheck.catalog import Catalog
from kinkcheck.frameworks import Adapter, Unavailable, get_adapter
from kinkcheck.probe.cells import (CRASH_ENV, CRASH_SIGNAL_ENV, HANG_ENV, NETWORK_DTYPES, WHOLE, Part, _batch_key,
                                   _batch_name, _crash, _error_text, _fault_at, _hang_if, _has_network, batch_programs,
                                   network_point, network_tree)
from kinkcheck.probe.journal import _append
from kinkcheck.probe.worker import PARENT_ENV, die_with_parent
from kinkcheck.vocabulary import COMPILED_MODES, encode

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
    jobs = _count_from(ENV_COMPILE_JOBS, environ)
    if jobs is not None:
        return jobs
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS and Windows have no affinity mask
        return max(1, os.cpu_count() or 1)


def _count_from(variable: str, environ: Mapping[str, str] | None) -> int | None:
    """The positive integer the environment ``variable`` holds, None when it is unset or blank.

    Raises
    ------
    ValueError
        Set to anything else (one line naming the variable).
    """
    raw = (os.environ if environ is None else environ).get(variable, "").strip()
    if not raw:
        return None
    if not (raw.isascii() and raw.isdigit()) or int(raw) < 1:
        raise ValueError(f"{variable} must be a positive integer, got {raw!r}")
    return int(raw)


#: Environment variable: how many chunks each compiled batch is split into (default: :func:`chunk_count`).
ENV_COMPILE_CHUNKS = "KINKCHECK_COMPILE_CHUNKS"
#: Chunks per compile job when the batches are split (:func:`chunk_count`): one, just enough for every core. Each
#: process pays the framework's import and first compile: on 2 cores (torch 2.13.0, 440 programs, cold inductor)
#: the four dtype batches in two processes took 255 s and 487 CPU-s, the same split in eight chunks 296 s and 549.
CHUNKS_PER_JOB = 1


def chunk_count(batches: int, jobs: int, environ: Mapping[str, str] | None = None) -> int:
    """How many chunks each of ``batches`` compiled batches is split into for ``jobs`` processes:
    ``KINKCHECK_COMPILE_CHUNKS``, else 1 with one job, else enough that every process gets about
    :data:`CHUNKS_PER_JOB` of them (``ceil(CHUNKS_PER_JOB * jobs / batches)``): the batches stay whole while
    there are at least as many as jobs.

    Raises
    ------
    ValueError
        The variable is set and not a positive integer (one line naming it).
    """
    chunks = _count_from(ENV_COMPILE_CHUNKS, environ)
    if chunks is not None:
        return chunks
    if jobs <= 1 or batches < 1:
        return 1
    return max(1, math.ceil(CHUNKS_PER_JOB * jobs / batches))


def compiled_chunks(modes: Sequence[str], dtypes: Sequence[str], jobs: int,
                    programs: int | None = None) -> list[tuple[str, str, Part]]:
    """The compiled work of a probe in ``modes`` and ``dtypes``: (mode, dtype, part) for every chunk of every
    compiled batch, aot_eager before inductor (in one process, loading inductor's kernels can change the
    floating-point state), each batch split into :func:`chunk_count` chunks of whole programs
    (:func:`kinkcheck.probe.cells.batch_programs`), at most one chunk a program when ``programs`` (how many the
    catalog has for the framework) is given. Each chunk compiles its programs as one batch does: a program's
    graph is its own, and the values are those of the whole batch (tested)."""
    compiled = sorted((m for m in modes if m in COMPILED_MODES), key=lambda m: m == "inductor")
    batches = [(mode, dtype) for mode in compiled for dtype in dtypes]
    count = chunk_count(len(batches), jobs)
    if programs is not None:
        count = max(1, min(count, programs))
    return [(mode, dtype, (i, count)) for mode, dtype in batches for i in range(count)]


def chunk_step(mode: str, dtype: str, part: Part) -> str:
    """The progress line of a chunk: ``compiling the catalog: inductor float32`` (``, part 3 of 8``)."""
    return f"compiling the catalog: {mode} {dtype}" + (f", part {part[0] + 1} of {part[1]}" if part[1] > 1 else "")


#: A batch process's program: this process's ``sys.path`` first (the same kinkcheck and framework), then the batch.
_BATCH_MAIN = ("import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
               "from kinkcheck.probe.compiled import _batch_process; _batch_process(*sys.argv[2:])")


def _batch_processes(catalog: Catalog, framework: str, device: str, dtypes: Sequence[str],
                     chunks: Sequence[tuple[str, str, Part]], jobs: int, done: dict[str, dict[str, Any]],
                     journal: str | Path | None, on_step: Callable[[str], None] | None) -> None:
    """Run compiled batches (their ``chunks``, :func:`compiled_chunks`) in up to ``jobs`` processes at once
    (:func:`_batch_process`), filling ``done``.

    A batch process imports the framework afresh, as the probe's own worker did, and nothing an eager cell or
    another batch left in a process (inductor's kernels can change the floating-point state) reaches it. Its
    ``start`` line goes to the journal when it is started, so its time limit counts its import too. A batch
    process that dies or fails gets a ``retry`` line (its time limit stops) and no record: the caller runs
    that batch again in its own process, where a crash is isolated and reported as for any case. When the
    processes cannot be set up (the catalog does not pickle, no temporary folder), nothing runs here.
    """
    import subprocess  # slow to import
    import tempfile  # slow to import

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
    # One compile thread a process: the processes already fill the cores, and inductor's pool of C++ compile
    # workers in each (as many as the cores, each importing torch) would oversubscribe them. The kernels are the
    # same either way; a value set by the user wins.
    env = {"TORCHINDUCTOR_COMPILE_THREADS": "1", **os.environ, PARENT_ENV: str(os.getpid())}
    todo: list[tuple[str, str, Part]] = list(chunks)
    running: dict[Any, tuple[str, Path]] = {}
    try:
        while todo or running:
            while todo and len(running) < jobs:
                mode, dtype, part = todo.pop(0)
                key, out = _batch_name(mode, dtype, part), tmp / f"{mode}-{dtype}-{part[0]}of{part[1]}.json"
                if on_step:
                    on_step(chunk_step(mode, dtype, part))
                if journal:
                    _append(journal, {"start": key})
                cmd = [sys.executable, "-c", _BATCH_MAIN, json.dumps(sys.path), str(spec), framework, device,
                       mode, dtype, ",".join(dtypes), str(out), f"{part[0]}/{part[1]}"]
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
    import tempfile  # slow to import

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


def _batch_process(spec: str, framework: str, device: str, mode: str, dtype: str, dtypes: str, out: str,
                   chunk: str = "0/1") -> None:
    """A batch process of :func:`_batch_processes`: one chunk (``index/count``) of a compiled batch, its results
    as JSON in ``out``."""
    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the probe, which ends its batch processes
    catalog = pickle.loads(Path(spec).read_bytes())
    adapter = get_adapter(framework)
    index, count = (int(n) for n in chunk.split("/"))
    key = _batch_name(mode, dtype, (index, count))
    if _fault_at(CRASH_ENV, key):
        _crash(os.environ.get(CRASH_SIGNAL_ENV))
    _hang_if(_fault_at(HANG_ENV, key))
    results = _compiled_batch(adapter, catalog, framework, device, mode, dtype, dtypes.split(","), (index, count))
    part = Path(out).with_suffix(".part")
    part.write_text(json.dumps(results), encoding="utf-8")
    part.replace(out)


def _compiled_batch(adapter: Adapter, catalog: Catalog, framework: str, device: str, mode: str, dtype: str,
                    dtypes: Sequence[str], part: Part = WHOLE) -> dict[str, Any]:
    """One compiled call for every program (and network) of chunk ``part`` of the catalog (the whole catalog by
    default) in ``mode`` and ``dtype``."""
    keys, items = [], []
    for case, program in batch_programs(catalog, framework, part):  # empty: a chunk past the last program
        keys.append(_batch_key("obs", case.id, program.id, mode, dtype))
        items.append((program.tree, case.at))
        if _has_network(case) and dtype in NETWORK_DTYPES:
            keys.append(_batch_key("net", case.id, program.id, mode, dtype))
            items.append((network_tree(program.tree, case.inputs[0]), network_point()))
    if not items:
        return {}
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
