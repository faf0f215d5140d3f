"""What one probe measures and how its records become a shard: the cells of one case, P0's network around an
activation program, the keys of compiled batches, the error cells of a case whose worker died, and the shard
assembled from a journal's records.

Shared by the probe loop (:mod:`kinkcheck.probe.run`) and the compiled batches (:mod:`kinkcheck.probe.compiled`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import time
from collections.abc import Mapping, Sequence
from typing import Any

from kinkcheck.catalog import FRAMEWORKS, Catalog, CatalogError
from kinkcheck.frameworks import Adapter, DeviceAbsent, FrameworkUnavailable, Unavailable, data_limit, get_adapter
from kinkcheck.frameworks.base import short_error
from kinkcheck.language import expr as ex
from kinkcheck.oracles import p0
from kinkcheck.probe.worker import ENV_PROBE_MEMORY, BoundExceeded, Limits, NoDevice, TaskError, _is_oom
from kinkcheck.vocabulary import COMPILED_MODES, DTYPES, FRAMEWORK_MODES, NETWORK_MODES, encode

#: dtypes of a probe: all four.
DEFAULT_DTYPES: tuple[str, ...] = DTYPES


def select_cases(catalog: Catalog, cases: Sequence[str] | None) -> Catalog:
    """``catalog`` narrowed to ``cases`` (ids, kept in catalog order; hash and path unchanged).

    Raises
    ------
    CatalogError
        An id the catalog does not hold.
    """
    if not cases:
        return catalog

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
    return p0.point()


#: dtypes of the network runs: P0's exact gradients (e.g. 932) are not representable in float16/bfloat16.
NETWORK_DTYPES: tuple[str, ...] = ("float64", "float32")


def _batch_key(kind: str, case_id: str, program_id: str, mode: str, dtype: str) -> str:
    return json.dumps([kind, case_id, program_id, mode, dtype])


#: A chunk of a compiled batch: (its index, how many chunks the batch is split into); ``(0, 1)`` is the whole batch.
Part = tuple[int, int]
WHOLE: Part = (0, 1)


def _batch_name(mode: str, dtype: str, part: Part = WHOLE) -> str:
    """A compiled batch's key in the journal (``batch:inductor/float32``), beside the case ids; a chunk of it
    ``batch:inductor/float32#3of8`` (the third of eight, :func:`batch_programs`)."""
    return f"batch:{mode}/{dtype}" + (f"#{part[0] + 1}of{part[1]}" if part[1] > 1 else "")


def _parse_batch_name(key: str) -> tuple[str, str, Part]:
    """(mode, dtype, part) of a key :func:`_batch_name` wrote."""
    spec, _, chunk = key[len("batch:"):].partition("#")
    mode, dtype = spec.split("/")
    if not chunk:
        return mode, dtype, WHOLE
    index, count = chunk.split("of")
    return mode, dtype, (int(index) - 1, int(count))


def batch_programs(catalog: Catalog, framework: str, part: Part = WHOLE) -> list[tuple[Any, Any]]:
    """The (case, program) pairs chunk ``part`` of a compiled batch compiles: every n-th program of the catalog from
    the i-th, so that each chunk gets a like share of every kind of program (whole programs: a program's graph,
    and its P0 network's, is never split between chunks)."""
    index, count = part
    return [cp for k, cp in enumerate(catalog.programs(framework)) if k % count == index]


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


def grad_task(payload: Mapping[str, Any], limits: Limits) -> Any:
    """``kinkcheck grad``'s evaluation, a task of the worker (:data:`kinkcheck.probe.worker.TASKS`): one program
    in one framework, mode, dtype and device, as a cell is measured. The payload: ``expr``, ``at``, ``framework``,
    ``dtype``, ``device``, ``mode``, and optionally ``wrt`` (differentiated input names; absent or None: all but
    ``ints``) and ``ints`` (names of integer inputs), as in :class:`kinkcheck.language.points.Inputs`. ``at`` may hold
    inf/nan (JSON's Infinity/NaN).

    Returns input name → encoded gradient, for the differentiated inputs only.
    """
    framework = payload["framework"]
    try:
        tree = ex.parse(payload["expr"], payload["at"], FRAMEWORKS)
        adapter = get_adapter(framework)
        grad = adapter.gradient(tree, payload["at"], payload["dtype"], payload["device"], payload["mode"],
                                wrt=payload.get("wrt"), ints=tuple(payload.get("ints") or ()))
    except DeviceAbsent as err:  # the face may answer from the report's cells of that device
        raise NoDevice(str(err)) from None
    except (FrameworkUnavailable, Unavailable, ex.ExprError) as err:
        raise TaskError(str(err)) from None
    except Exception as err:  # noqa: BLE001 - the program itself failed: report it, one line
        if _is_oom(err):
            raise BoundExceeded(f"{limits.memory_message()}: {framework} raised {short_error(err, 120)}") from None
        raise TaskError(f"{framework} raised {short_error(err)}") from None
    return {k: encode(v) for k, v in grad.items()}


def _error_text(err: BaseException) -> str:
    """An error cell's message; an allocation that failed under the worker's memory limit says so."""
    text = short_error(err)
    limit = data_limit()
    if limit is None or not _is_oom(err):
        return text
    return (f"exceeded the memory limit of {limit / 2 ** 30:g} GiB (change it with --memory or {ENV_PROBE_MEMORY}): "
            f"{short_error(err, 160)}")


#: Environment variable naming a case at which a probe worker aborts (tests the crash isolation).
CRASH_ENV = "KINKCHECK_CRASH_CASE"


#: Environment variable naming the signal the worker sends itself at :data:`CRASH_ENV` (default: abort, SIGABRT).
CRASH_SIGNAL_ENV = "KINKCHECK_CRASH_SIGNAL"


def _crash(signame: str | None) -> None:
    if signame:
        os.kill(os.getpid(), getattr(signal, signame))
    os.abort()


#: Environment variable naming a case or compiled batch (``batch:<mode>/<dtype>``) at which a probe worker
#: hangs (tests the time limits).
HANG_ENV = "KINKCHECK_HANG_CASE"


def _fault_at(variable: str, key: str) -> bool:
    """Whether the fault-injection ``variable`` (:data:`CRASH_ENV`, :data:`HANG_ENV`) names ``key``: a case, a
    compiled batch, or any chunk of it (``batch:aot_eager/float32`` names ``batch:aot_eager/float32#2of4``)."""
    value = os.environ.get(variable)
    return bool(value) and value in (key, key.partition("#")[0])


def _hang_if(hang: bool) -> None:
    while hang:  # fault injection (KINKCHECK_HANG_CASE): never returns
        time.sleep(60)


def _crashed(catalog: Catalog, key: str, framework: str, dtypes: Sequence[str], modes: Sequence[str],
             reason: str, done: dict[str, Any] | None = None) -> dict[str, Any]:
    """Error cells for every observation of a case (or compiled batch) whose worker process died.

    A case's compiled-mode cells come from the compiled batches (they run after the eager cases, in a new worker or
    their own processes), so they are not lost with it. A crash inside a compiled batch loses that mode and dtype
    for the programs of its chunk (:func:`batch_programs`: the whole catalog when the batch is not split); the
    cells say so.
    """
    done = done or {}
    if key.startswith("batch:"):
        mode, dtype, part = _parse_batch_name(key)
        results = {}
        for case, program in batch_programs(catalog, framework, part):
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
    batches: dict[str, dict[str, Any]] = {}  # mode/dtype → results, the chunks of a batch together
    for k, v in done.items():
        if k.startswith("batch:"):
            mode, dtype, _ = _parse_batch_name(k)
            batches.setdefault(f"{mode}/{dtype}", {}).update(v["results"])
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
