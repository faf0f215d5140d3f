"""A program's predicted value in the report's releases, as ``ask`` and ``grad`` show it: always marked predicted,
never a measurement.

:func:`predictions` cuts the program once (:func:`kinkcheck.rules.graph.build`) and predicts it in every
environment of its framework the rules file knows, for the releases, modes, dtypes and device asked
(:func:`kinkcheck.rules.predict.predict`); :func:`render` prints them grouped by runs of releases that predict
the same value by the same rules.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kinkcheck.catalog import FRAMEWORKS
from kinkcheck.language import expr as ex
from kinkcheck.language.decimals import decimal_value
from kinkcheck.rules import store
from kinkcheck.rules.page import plain
from kinkcheck.vocabulary import encode, release_key

__all__ = ["predictions", "render"]


def _shape(at: Mapping[str, Any], flat: Sequence[Any]) -> dict[str, Any]:
    """Flat values (input component order) → input name → number or nested list, as a shard's ``value``."""
    it = iter(flat)

    def rec(v: Any) -> Any:
        if isinstance(v, list):
            return [rec(e) for e in v]
        return next(it)

    return {k: encode(rec(v)) for k, v in at.items()}


def predictions(expr: str, at: Mapping[str, Any], framework: str, *, releases: Sequence[str] | None = None,
                modes: Sequence[str] = ("reverse",), dtypes: Sequence[str] = ("float64",), device: str = "cpu",
                report: str | Path | None = None, wrt: Sequence[str] | None = None) -> dict[str, Any]:
    """Predict ``expr`` at ``at`` in each release of ``framework`` the rules file holds (``releases``: only those).

    Returns
    -------
    dict
        ``{"program", "framework", "rules_file", "reason", "calls", "predicted": [{"release", "environment",
        "mode", "dtype", "device", "value" (input → value, or None), "reason" (None, or "not predicted: …"),
        "rules": [{"operation", "kind", "labels"}]}]}``; ``reason`` is set (and ``predicted`` empty) when nothing
        can be predicted at all (no rules file, no symbolic form).
    """
    from kinkcheck.oracles.mapping import Unmapped  # slow: numpy, sympy
    from kinkcheck.report.query import rules_path  # slow: msgspec
    from kinkcheck.rules import graph as gr  # slow: numpy, sympy
    from kinkcheck.rules.infer import Cell  # slow: numpy, sympy
    from kinkcheck.rules.predict import predict  # slow: numpy, sympy

    path = rules_path(report)
    out: dict[str, Any] = {"program": expr, "framework": framework, "rules_file": str(path), "reason": None,
                           "calls": None, "predicted": []}
    try:
        book, doc = store.read(path)
    except store.RulesUnreadable as err:
        out["reason"] = f"not predicted: {err}"
        return out
    try:
        tree = ex.parse(expr, dict(at), FRAMEWORKS)
        graph = gr.build(tree, at, framework, wrt=wrt)
    except (Unmapped, ex.ExprError, ArithmeticError, TypeError, ValueError, IndexError, RecursionError) as err:

        why = re.sub(r"\s*\(pass one with --sympy [^)]*\)", "", str(err))  # a --sympy form does not cut a program
        out["reason"] = f"not predicted: {why} (the rules need each call's own form)"
        return out
    out["calls"] = [s.name for s in graph.sites]

    envs = sorted(((env, e) for env, e in doc["environments"].items()
                   if e.get("framework") == framework and e.get("device") == device and plain(env, e)
                   and (releases is None or e.get("version") in releases)),
                  key=lambda kv: release_key(kv[1].get("version", "")))
    wanted = list(wrt) if wrt is not None else list(at)
    for env, e in envs:
        for mode in modes:
            for dtype in dtypes:
                p = predict(graph, book, framework, Cell(env, mode, dtype))
                value = None if p.value is None else _shape({k: at[k] for k in wanted}, list(p.floats or ()))
                out["predicted"].append({
                    "release": e.get("version"), "environment": env, "mode": mode, "dtype": dtype, "device": device,
                    "value": value, "reason": p.reason,
                    "rules": [{"operation": u.operation, "kind": u.kind, "labels": list(u.labels)} for u in p.used]})
    if not envs:
        out["reason"] = (f"not predicted: the rules file holds no {framework} release on {device}"
                         + (f" among {', '.join(releases)}" if releases else ""))
    return out


def render(answer: Mapping[str, Any]) -> str:
    """The predictions as text: runs of releases with the same predicted value and rules, one line each."""
    lines = [f"predicted from the rules (not measured: each operation's rule at its kink, composed by the chain "
             f"rule; docs/rules.md) — {answer['framework']}:"]
    if answer["reason"]:
        return "\n".join([*lines, f"  {answer['reason']}"]) + "\n"
    runs: list[tuple[list[str], Mapping[str, Any]]] = []
    for p in answer["predicted"]:
        key = (p["mode"], p["dtype"], repr(p["value"]), p["reason"], repr(p["rules"]))
        if runs and runs[-1][1]["_key"] == key:
            runs[-1][0].append(p["release"])
        else:
            runs.append(([p["release"]], {**p, "_key": key}))
    for releases, p in runs:
        span = releases[0] if len(releases) == 1 else f"{releases[0]} … {releases[-1]}"
        where = f"{span} ({p['mode']}, {p['dtype']})"
        if p["value"] is None:
            lines.append(f"  {where}: {p['reason']}")
            continue
        used = "; ".join(f"{u['operation']} at {u['kind']}: {'/'.join(u['labels'])}" for u in p["rules"])
        smooth = "every call smooth here, or its cotangent 0" if not used else used
        lines.append(f"  {where}: {decimal_value(p['value'])}  ({smooth})")
    return "\n".join(lines) + "\n"
