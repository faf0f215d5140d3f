"""Run the catalog in the installed framework and build a shard.

Each program is evaluated at its case's point for every requested dtype and mode, each in its own
``try``: a program that raises becomes an ``error`` cell with the message, a name missing in this
version an ``unavailable`` cell; neither loses the rest of the shard. A case that crashes the interpreter
itself is isolated by :func:`probe_isolated` (a worker process, restarted after the crashing case). Activation programs (cases with an
``activation``) are also run end to end on P0's two-layer network (``networks``), for the NumPy
backprop cross-check in the report.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
from pathlib import Path
from collections.abc import Callable, Sequence
from typing import Any

from kinkcheck import __version__
from kinkcheck.catalog import Catalog, load_catalog
from kinkcheck.frameworks import Adapter, FrameworkUnavailable, Unavailable, encode, get_adapter
from kinkcheck.frameworks.base import short_error

__all__ = ["DEFAULT_DTYPES", "environment", "probe", "probe_isolated"]

#: dtypes of the core probe (issue 4 adds float16 and bfloat16).
DEFAULT_DTYPES: tuple[str, ...] = ("float64", "float32")


def _public_version(version: str) -> str:
    from packaging.version import InvalidVersion, Version

    try:
        return Version(version).public
    except InvalidVersion:
        return version


def environment(adapter: Adapter, device: str, catalog: Catalog) -> dict[str, Any]:
    """Provenance of a shard: ``id`` is ``"<framework>-<public version>-<device>"``."""
    version = _public_version(adapter.version)
    env = {
        "id": f"{adapter.name}-{version}-{device}",
        "framework": adapter.name,
        "framework_version": version,
        "framework_build": adapter.version,
        "device": device,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "measured_at": dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat(),
        "kinkcheck_version": __version__,
        "catalog_hash": catalog.hash,
        "settings": adapter.settings(),
    }
    return env


def probe(
    framework: str,
    device: str = "cpu",
    dtypes: Sequence[str] = DEFAULT_DTYPES,
    modes: Sequence[str] = ("reverse",),
    catalog: Catalog | None = None,
    on_step: Callable[[str], None] | None = None,
    journal: str | Path | None = None,
) -> dict[str, Any]:
    """Probe the whole catalog for ``framework`` on ``device`` in this process; return a shard.

    Parameters
    ----------
    framework : {"torch", "jax"}
    device : {"cpu", "cuda"}
    dtypes, modes : sequences of str
        See :data:`kinkcheck.frameworks.DTYPES` and :data:`kinkcheck.frameworks.MODES`.
    on_step : callable, optional
        Called with a short description before each program (progress display).
    journal : path, optional
        JSON-lines file: a ``{"start": case}`` line before each case and a ``{"case": ...}`` line with its
        results after it, flushed to disk; cases already in the journal are skipped. This is how
        :func:`probe_isolated` survives a case that crashes the interpreter.

    Raises
    ------
    FrameworkUnavailable
        The framework is not installed, or ``device`` is not present (``"not measured: no CUDA device"``).
    """
    catalog = catalog or load_catalog()
    adapter = get_adapter(framework)
    if device not in adapter.devices():
        raise FrameworkUnavailable(f"not measured: no {device} device for {framework}")
    env = environment(adapter, device, catalog)
    done = _read_journal(journal)[1] if journal else {}
    if journal and not _read_journal(journal)[0]:
        _append(journal, {"environment": env})
    crash = os.environ.get(CRASH_ENV)
    for case in catalog:
        if case.id in done or not case.programs_for(framework):
            if on_step:
                for program in case.programs_for(framework):
                    on_step(f"{case.id}  {program.id}")
            continue
        if journal:
            _append(journal, {"start": case.id})
        if crash == case.id:
            os.abort()  # fault injection for the crash-isolation test (KINKCHECK_CRASH_CASE)
        done[case.id] = _probe_case(adapter, case, framework, device, dtypes, modes, on_step)
        if journal:
            _append(journal, {"case": case.id, **done[case.id]})
    return _assemble(env, catalog, done)


#: Environment variable naming a case at which a probe worker aborts (tests the crash isolation).
CRASH_ENV = "KINKCHECK_CRASH_CASE"


def _probe_case(adapter: Adapter, case: Any, framework: str, device: str, dtypes: Sequence[str],
                modes: Sequence[str], on_step: Callable[[str], None] | None) -> dict[str, list[dict[str, Any]]]:
    observations: list[dict[str, Any]] = []
    networks: list[dict[str, Any]] = []
    for program in case.programs_for(framework):
        if on_step:
            on_step(f"{case.id}  {program.id}")
        for mode in dict.fromkeys([*modes, *case.modes]):
            for dtype in dtypes:
                status, value, error = "ok", None, None
                try:
                    value = {k: encode(v) for k, v in adapter.gradient(program.tree, case.at, dtype, device, mode).items()}
                except Unavailable as err:
                    status, error = "unavailable", str(err)
                except Exception as err:  # noqa: BLE001 - any framework failure is an observation
                    status, error = "error", short_error(err)
                observations.append(
                    {"case": case.id, "program": program.id, "mode": mode, "dtype": dtype,
                     "status": status, "value": value, "error": error}
                )
        if case.activation and len(case.at) == 1:
            from kinkcheck.oracles.backprop import P0  # numpy: imported only where a network runs

            (name,) = case.at
            for dtype in dtypes:
                status, w1, w2, error = "ok", None, None, None
                try:
                    g1, g2 = adapter.network_grads(program.tree, name, P0, dtype, device)
                    w1, w2 = encode(g1), encode(g2)
                except Unavailable as err:
                    status, error = "unavailable", str(err)
                except Exception as err:  # noqa: BLE001
                    status, error = "error", short_error(err)
                networks.append({"case": case.id, "program": program.id, "dtype": dtype, "status": status,
                                 "W1": w1, "W2": w2, "error": error})
    return {"observations": observations, "networks": networks}


def _crashed_case(case: Any, framework: str, dtypes: Sequence[str], modes: Sequence[str],
                  reason: str) -> dict[str, list[dict[str, Any]]]:
    """Error cells for every observation of a case whose worker process died."""
    obs = [{"case": case.id, "program": p.id, "mode": m, "dtype": d, "status": "error", "value": None, "error": reason}
           for p in case.programs_for(framework) for m in dict.fromkeys([*modes, *case.modes]) for d in dtypes]
    nets = [{"case": case.id, "program": p.id, "dtype": d, "status": "error", "W1": None, "W2": None, "error": reason}
            for p in case.programs_for(framework) if case.activation and len(case.at) == 1 for d in dtypes]
    return {"observations": obs, "networks": nets}


def _assemble(env: dict[str, Any], catalog: Catalog, done: dict[str, dict[str, Any]]) -> dict[str, Any]:
    observations, networks = [], []
    for case in catalog:  # catalog order, whatever order the journal has
        if case.id in done:
            observations += done[case.id]["observations"]
            networks += done[case.id]["networks"]
    return {"schema": "kinkcheck/shard/v1", "environment": env, "observations": observations, "networks": networks}


def _append(journal: str | Path, record: dict[str, Any]) -> None:
    with open(journal, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(record) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


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
            done[rec["case"]] = {"observations": rec["observations"], "networks": rec["networks"]}
        elif "fatal" in rec:
            raise FrameworkUnavailable(rec["fatal"])
    return env, done, started


def probe_isolated(
    framework: str,
    device: str = "cpu",
    dtypes: Sequence[str] = DEFAULT_DTYPES,
    modes: Sequence[str] = ("reverse",),
    catalog: Catalog | None = None,
    quiet: bool = False,
) -> dict[str, Any]:
    """Like :func:`probe`, in a worker process that is restarted after the case that crashed it.

    The worker journals each case as it finishes; when it dies (a segfault or abort inside the framework),
    the case it had started becomes ``error`` cells ("interpreter crashed: …") and a new worker resumes
    with the next case, so one crashing case does not lose the rest of the shard.

    Raises
    ------
    FrameworkUnavailable
        The framework or device is missing (reported by the worker), or the worker died before any case.
    """
    import signal
    import subprocess
    import sys
    import tempfile

    catalog = catalog or load_catalog()
    with tempfile.TemporaryDirectory(prefix="kinkcheck-probe-") as tmp:
        journal = Path(tmp) / "journal.jsonl"
        cmd = [sys.executable, "-m", "kinkcheck", "probe", "--framework", framework, "--device", device,
               "--worker", str(journal), "--catalog", catalog.path]
        cmd += [a for d in dtypes for a in ("--dtype", d)] + [a for m in modes for a in ("--mode", m)]
        if quiet:
            cmd.append("--quiet")
        for _ in range(len(catalog) + 1):
            rc = subprocess.run(cmd).returncode
            env, done, started = _read_journal(journal)
            if rc == 0:
                return _assemble(env, catalog, done)
            crashed = next((c for c in reversed(started) if c not in done), None)
            if env is None or crashed is None:
                raise FrameworkUnavailable(f"probe worker for {framework} exited with status {rc} before any case")
            why = f"signal {-rc} ({signal.Signals(-rc).name})" if rc < 0 else f"exit status {rc}"
            reason = f"interpreter crashed: {why} while probing this case"
            _append(journal, {"case": crashed, **_crashed_case(catalog.case(crashed), framework, dtypes, modes, reason)})
        raise FrameworkUnavailable(f"probe worker for {framework} kept crashing")
