"""Run the catalog in the installed framework and build a shard.

Each program is evaluated at its case's point for every requested dtype and mode, each in its own
``try``: a program that raises becomes an ``error`` cell with the message, a name missing in this
version an ``unavailable`` cell; neither loses the rest of the shard. A case that crashes the interpreter
itself is isolated by :func:`probe_isolated` (a worker process, restarted after the crashing case). Activation programs (cases with an
``activation``) are also run end to end on P0's two-layer network (``networks``), for the NumPy
backprop cross-check in the report.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import platform
from pathlib import Path
from collections.abc import Callable, Sequence
from typing import Any

from kinkcheck import __version__
from kinkcheck.catalog import Catalog, load_catalog
from kinkcheck import expr as ex
from kinkcheck.frameworks import DTYPES, Adapter, FrameworkUnavailable, Unavailable, encode, get_adapter
from kinkcheck.frameworks.base import COMPILED_MODES, check_mode, short_error

__all__ = ["DEFAULT_DTYPES", "environment", "probe", "probe_isolated"]

#: dtypes of a probe: all four.
DEFAULT_DTYPES: tuple[str, ...] = DTYPES


def _public_version(version: str) -> str:
    from packaging.version import InvalidVersion, Version

    try:
        return Version(version).public
    except InvalidVersion:
        return version


def environment(adapter: Adapter, device: str, catalog: Catalog, dtypes: Sequence[str] = (),
                modes: Sequence[str] = ()) -> dict[str, Any]:
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
        "dtypes": list(dtypes),
        "modes": list(modes),
    }
    if device == "cuda":
        env["device_name"] = adapter.device_name(device)
    return env


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
    from kinkcheck.oracles.backprop import P0  # numpy: imported only where a network runs

    return {"X": P0.X.tolist(), "W1": P0.W1.tolist(), "W2": P0.W2.tolist(), "T": P0.target.tolist()}


def probe(
    framework: str,
    device: str = "cpu",
    dtypes: Sequence[str] = DEFAULT_DTYPES,
    modes: Sequence[str] | None = None,
    catalog: Catalog | None = None,
    on_step: Callable[[str], None] | None = None,
    journal: str | Path | None = None,
) -> dict[str, Any]:
    """Probe the whole catalog for ``framework`` on ``device`` in this process; return a shard.

    Every program is evaluated at its case's point in every mode and dtype. Compiled modes
    (:data:`kinkcheck.frameworks.base.COMPILED_MODES`) run last, one compiled call per mode and dtype for
    the whole catalog (see ``TorchAdapter.compiled_gradients``), after every eager cell: loading compiled
    kernels can change the process's floating-point state; eager modes run program by program.
    Activation programs also run end to end on P0's network (:func:`network_tree`) in the
    :data:`NETWORK_MODES` the adapter has, in float64 and float32.

    Parameters
    ----------
    framework : {"torch", "jax"}
    device : {"cpu", "cuda"}
    dtypes : sequence of str
        See :data:`kinkcheck.frameworks.DTYPES`; default all four.
    modes : sequence of str, optional
        Default: every mode the adapter knows (``adapter.modes``). A mode the adapter does not know raises
        :class:`kinkcheck.expr.ExprError`.
    on_step : callable, optional
        Called with a short description before each program and each compiled batch (progress display).
    journal : path, optional
        JSON-lines file: a ``{"start": key}`` line before each case or compiled batch and a record with its
        results after it, flushed to disk; keys already in the journal are skipped. This is how
        :func:`probe_isolated` survives a case that crashes the interpreter.

    Raises
    ------
    FrameworkUnavailable
        The framework is not installed, or ``device`` is not present (``"not measured: no CUDA device"``).
    """
    catalog = catalog or load_catalog()
    adapter = get_adapter(framework)
    modes = tuple(modes or adapter.modes)
    for m in modes:
        check_mode(m, adapter.modes)
    if device not in adapter.devices():
        raise FrameworkUnavailable(f"not measured: no {device} device for {framework}")
    env = environment(adapter, device, catalog, dtypes, modes)
    journaled_env, done, _ = _read_journal(journal) if journal else (None, {}, [])
    if journal and not journaled_env:
        _append(journal, {"environment": env})
    crash = os.environ.get(CRASH_ENV)
    for case in catalog:  # eager modes first, each case journaled
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
    # Compiled batches after every eager cell, inductor last: loading inductor's C++ kernels can change the
    # process's floating-point state (torch 2.4.1/2.5.1 on CPU flushed subnormals afterwards), which must
    # not reach the eager cells.
    for mode in sorted((m for m in modes if m in COMPILED_MODES), key=lambda m: m == "inductor"):
        for dtype in dtypes:
            key = f"batch:{mode}/{dtype}"
            if key in done:
                continue
            if on_step:
                on_step(f"compiling the catalog: {mode} {dtype}")
            if journal:
                _append(journal, {"start": key})
            done[key] = {"results": _compiled_batch(adapter, catalog, framework, device, mode, dtype, dtypes)}
            if journal:
                _append(journal, {"case": key, **done[key]})
    return _assemble(env, catalog, done)


#: Environment variable naming a case at which a probe worker aborts (tests the crash isolation).
CRASH_ENV = "KINKCHECK_CRASH_CASE"

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
        return {k: {"status": "error", "value": None, "error": short_error(err)} for k in keys}
    out = {}
    for k, r in zip(keys, results):
        if isinstance(r, Unavailable):
            out[k] = {"status": "unavailable", "value": None, "error": str(r)}
        elif isinstance(r, BaseException):
            out[k] = {"status": "error", "value": None, "error": short_error(r)}
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
        return {"status": "error", "value": None, "error": short_error(err)}


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

    A case's compiled-mode cells come from the compiled batches (they run after the eager cases, in a new
    worker), so they are not lost with it. A crash inside a compiled batch loses that mode and dtype for the
    whole catalog (the batch is one call); the cells say so.
    """
    from kinkcheck.frameworks.base import FRAMEWORK_MODES

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
    """The shard: each case's eager cells, then its cells from the compiled batches, in catalog order."""
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
        cmd += [a for d in dtypes for a in ("--dtype", d)] + [a for m in modes or () for a in ("--mode", m)]
        if quiet:
            cmd.append("--quiet")
        for _ in range(len(catalog) + len(COMPILED_MODES) * len(dtypes) + 1):  # cases and compiled batches
            rc = subprocess.run(cmd).returncode
            env, done, started = _read_journal(journal)
            if rc == 0:
                return _assemble(env, catalog, done)
            crashed = next((c for c in reversed(started) if c not in done), None)
            if env is None or crashed is None:
                raise FrameworkUnavailable(f"probe worker for {framework} exited with status {rc} before any case")
            why = f"signal {-rc} ({signal.Signals(-rc).name})" if rc < 0 else f"exit status {rc}"
            reason = f"interpreter crashed: {why} while probing this case"
            modes_run = env.get("modes") or modes or ()
            _append(journal, {"case": crashed, **_crashed(catalog, crashed, framework, dtypes, modes_run, reason,
                                                           done)})
        raise FrameworkUnavailable(f"probe worker for {framework} kept crashing")
