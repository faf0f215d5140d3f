"""Run the catalog in the installed framework and build a shard (:func:`probe`), and the shard's provenance
(:func:`environment`).

Each program is evaluated at its case's point for every requested dtype and mode, each in its own
``try``: a program that raises becomes an ``error`` cell with the message, a name missing in this
version an ``unavailable`` cell; neither loses the rest of the shard. A case that crashes the interpreter,
hangs or allocates past a memory limit is isolated by :func:`kinkcheck.probe.isolated.probe_isolated` (a
bounded worker process, restarted after the case: see :class:`kinkcheck.probe.worker.ProbeLimits`). Activation
programs (cases with an ``activation``) are also run end to end on P0's two-layer network (``networks``), for
the NumPy backprop cross-check in the report.
"""

from __future__ import annotations

import datetime as dt
import os
import platform
from collections.abc import Callable, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from kinkcheck import __version__
from kinkcheck.catalog import Catalog, load_catalog
from kinkcheck.frameworks import Adapter, DeviceAbsent, get_adapter
from kinkcheck.frameworks.base import check_mode, processor_name, short_error, vector_isa
from kinkcheck.platforms import device_title, host_tag
from kinkcheck.platforms import environment_id as _env_id
from kinkcheck.platforms.isa import cpu_record
from kinkcheck.probe.cells import (CRASH_ENV, CRASH_SIGNAL_ENV, DEFAULT_DTYPES, HANG_ENV, NETWORK_DTYPES, NETWORK_MODES,
                                   _assemble, _batch_name, _crash, _fault_at, _hang_if, _has_network, _run,
                                   network_point, network_tree, select_cases)
from kinkcheck.probe.compiled import _batch_processes, _compiled_batch, chunk_step, compile_jobs, compiled_chunks
from kinkcheck.probe.journal import _append, _prepare_journal, _read_journal
from kinkcheck.registry import view
from kinkcheck.shards import ShardBusy, shard_lock
from kinkcheck.vocabulary import COMPILED_MODES


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
    LAPACK's rounding, and with it a value, can follow them), its x86-64 level, the features kernels dispatch
    on, the probe's cap and the cap variables in force (``isa_level``, ``cpu_features``, ``isa_cap``,
    ``isa_settings``: :func:`kinkcheck.platforms.isa.cpu_record`); on an accelerator what the adapter tells of it
    (``accelerator``, ``driver``, ``cuda``, ``hip``,
    ``metal``: :meth:`accelerator` where the adapter has one); on a GitHub Actions runner the ``ci_*`` fields
    (:data:`CI_VARIABLES`). Every value is a string; a field nothing tells of is left out. ``adapter`` None:
    the machine alone (the record of an attempt that imported no framework)."""
    info = {"os": platform.system(), "os_release": platform.release(), "arch": platform.machine(),
            "processor": processor_name(), "vector_isa": vector_isa(), **cpu_record()}
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
    try:
        version = metadata.version(DISTRIBUTIONS.get(framework, framework))
    except metadata.PackageNotFoundError:
        return None

    return _env_id(framework, _public_version(version), device, host_tag())


#: Another probe (or nox) holds the lock of the environment: ``kinkcheck.shards.ShardBusy``.
ProbeBusy = ShardBusy


#: The exclusive lock of one environment for a whole probe: ``kinkcheck.shards.shard_lock``.
probe_lock = shard_lock


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
    (:data:`kinkcheck.vocabulary.COMPILED_MODES`) run last, one compiled call per mode and dtype for the
    catalog (see ``TorchAdapter.compiled_gradients``), after every eager cell: loading compiled kernels can
    change the process's floating-point state; eager modes run program by program. With more than one job
    (:func:`kinkcheck.probe.compiled.compile_jobs`, ``KINKCHECK_COMPILE_JOBS``), each batch is split into chunks
    of whole programs (:func:`kinkcheck.probe.compiled.compiled_chunks`) that compile at once, each in a new
    process (:func:`kinkcheck.probe.compiled._batch_processes`); the cells are the same.
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
        :class:`kinkcheck.language.expr.ExprError`.
    on_step : callable, optional
        Called with a short description before each program and each compiled batch (progress display).
    journal : path, optional
        JSON-lines file: a ``{"start": key}`` line before each case or compiled batch (when its process is
        started, for a batch in its own process; ``{"retry": key}`` when that process died) and a record with its
        results after it, handed to the kernel at once (it outlives the worker); keys already in the journal
        are skipped. This is how :func:`kinkcheck.probe.isolated.probe_isolated` survives a case that crashes
        the interpreter, and how a killed probe resumes: an earlier journal is first cut to what still applies
        (:func:`kinkcheck.probe.journal._prepare_journal`).
    cases : sequence of str, optional
        Probe only these case ids (compiled batches compile only them); the shard's ``case_hashes`` names
        them, so :func:`kinkcheck.probe.plan.write_merged` merges it into the full shard.
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
    compiled = compiled_chunks(modes, dtypes, jobs, sum(1 for _ in catalog.programs(framework)))  # a bad
    # KINKCHECK_COMPILE_CHUNKS fails here too, before any cell
    if device not in adapter.devices():
        raise DeviceAbsent(f"not measured: no {device_title(device)} device for {framework}")
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
    for case in catalog:  # eager modes first, each case journaled
        if case.id in done or not case.programs_for(framework):
            if on_step:
                for program in case.programs_for(framework):
                    on_step(f"{case.id}  {program.id}")
            continue
        if journal:
            _append(journal, {"start": case.id})
        if _fault_at(CRASH_ENV, case.id):  # fault injection for the crash-isolation tests (KINKCHECK_CRASH_CASE)
            _crash(os.environ.get(CRASH_SIGNAL_ENV))
        _hang_if(_fault_at(HANG_ENV, case.id))
        done[case.id] = _probe_case(adapter, case, framework, device, dtypes, modes, on_step)
        if journal:
            _append(journal, {"case": case.id, **done[case.id]})
    # Compiled batches after every eager cell, inductor last: loading inductor's C++ kernels can change the
    # process's floating-point state (torch 2.4.1/2.5.1 on CPU flushed subnormals afterwards), which must
    # not reach the eager cells.
    chunks = [(mode, dtype, part) for mode, dtype, part in compiled
              if _batch_name(mode, dtype, part) not in done and _batch_name(mode, dtype) not in done]
    if jobs > 1 and len(chunks) > 1:
        _batch_processes(catalog, framework, device, dtypes, chunks, jobs, done, journal, on_step)
    for mode, dtype, part in chunks:  # here: every chunk with one job, and what a batch process did not return
        key = _batch_name(mode, dtype, part)
        if key in done:
            continue
        if on_step:
            on_step(chunk_step(mode, dtype, part))
        if journal:
            _append(journal, {"start": key})
        if _fault_at(CRASH_ENV, key):
            _crash(os.environ.get(CRASH_SIGNAL_ENV))
        _hang_if(_fault_at(HANG_ENV, key))
        done[key] = {"results": _compiled_batch(adapter, catalog, framework, device, mode, dtype, dtypes, part)}
        if journal:
            _append(journal, {"case": key, **done[key]})
    return _assemble(env, catalog, done)


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
