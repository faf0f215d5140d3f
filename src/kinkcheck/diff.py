"""Compare conventions between environments: two shards, or environments inside a report.

Used by ``kinkcheck diff OLD NEW`` (exit 0: nothing changed, 1: some convention changed, 2: bad input) and
by the report's *Changed in* section, which compares consecutive releases of each framework.

An observation is keyed by (case, program, mode, dtype); two observations differ when their status
differs (``ok``/``error``/``unavailable``) or their values differ beyond the dtype's tolerance
(:func:`kinkcheck.classify.same_value`; NaN equals NaN).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kinkcheck.classify import same_value
from kinkcheck.frameworks.base import flat_value, flatten

__all__ = ["Change", "DiffError", "Side", "compare", "load_side"]

Key = tuple[str, str, str, str]  # case, program, mode, dtype


class DiffError(ValueError):
    """A side that cannot be read (one-line reason naming the file)."""


@dataclass(frozen=True)
class Side:
    """One environment's observations: ``key → observation`` (``value``, ``status``, ``labels`` if known)."""

    label: str
    environment: dict[str, Any]
    observations: Mapping[Key, dict[str, Any]]


@dataclass(frozen=True)
class Change:
    """One convention that differs between two environments."""

    case: str
    program: str
    mode: str
    dtype: str
    old: dict[str, Any]
    new: dict[str, Any]

    def describe(self) -> str:
        return (f"{self.case}  {self.program}  [{self.mode}, {self.dtype}]: "
                f"{describe_observation(self.old)} -> {describe_observation(self.new)}")


def describe_observation(ob: Mapping[str, Any], labels: bool = True) -> str:
    """``0.5 (mean)``, ``[0, 1] (last)``, ``error``; values as in the shard; the label when known."""
    if ob["status"] != "ok":
        return ob["status"]
    values = [v for vals in ob["value"].values() for v in flatten(vals)]
    text = _fmt(values[0]) if len(values) == 1 else "[" + ", ".join(_fmt(v) for v in values) + "]"
    first = ob.get("labels")
    return f"{text} ({first[0]})" if labels and first else text


def _fmt(v: Any) -> str:
    if isinstance(v, str):
        return v
    f = float(v)
    return str(int(f)) if f.is_integer() and abs(f) < 1e15 else f"{f:.6g}"


def differs(old: Mapping[str, Any], new: Mapping[str, Any], dtype: str) -> bool:
    """Whether two observations of the same key show different conventions."""
    if old["status"] != new["status"]:
        return True
    if old["status"] != "ok":
        return False
    return not same_value(flat_value(old["value"]), flat_value(new["value"]), dtype)


def compare(old: Side, new: Side) -> list[Change]:
    """Changes between two sides, over the keys both measured, in the old side's order.

    Raises
    ------
    DiffError
        When the sides are of different frameworks (their programs differ; ``kinkcheck migrate`` compares
        across frameworks), or have no observation in common (e.g. a not-measured side).
    """
    ofw, nfw = old.environment.get("framework"), new.environment.get("framework")
    if ofw != nfw:
        raise DiffError(f"cannot diff {ofw} against {nfw}: {old.label} and {new.label} measure different programs; "
                        f"use `kinkcheck migrate --from {ofw} --to {nfw}` for a framework move")
    common = [k for k in old.observations if k in new.observations]
    if not common:
        raise DiffError(f"{old.label} and {new.label} have no observation in common "
                        f"({old.environment.get('framework')} vs {new.environment.get('framework')})")
    return [Change(*k, old=old.observations[k], new=new.observations[k])
            for k in common if differs(old.observations[k], new.observations[k], k[3])]


def side_from_shard(shard: Mapping[str, Any], label: str) -> Side:
    obs = {(o["case"], o["program"], o["mode"], o["dtype"]): o for o in shard["observations"]}
    return Side(label, dict(shard["environment"]), obs)


def side_from_report(doc: Mapping[str, Any], env_id: str, label: str) -> Side:
    envs = {e["id"]: e for e in doc["environments"]}
    if env_id not in envs:
        raise DiffError(f"{label}: no environment {env_id!r} in the report (has: {', '.join(sorted(envs))})")
    obs = {(o["case"], o["program"], o["mode"], o["dtype"]): o for o in doc["observations"] if o["environment"] == env_id}
    return Side(label, envs[env_id], obs)


def load_side(spec: str) -> Side:
    """``FILE`` (a shard) or ``FILE#ENV`` (an environment inside a report, e.g. ``reports/conventions.json#torch-2.13.0-cpu``).

    Raises
    ------
    DiffError
        Missing, corrupt or too deeply nested file, a shard or report that fails its schema or semantic checks
        (:mod:`kinkcheck.validate`), a report without ``#ENV``, an unknown environment.
    """
    from kinkcheck.validate import read_json, report_problem

    path, _, env_id = spec.partition("#")
    p = Path(path)
    data, _text = read_json(p, DiffError)
    schema = data.get("schema") if isinstance(data, dict) else None
    if schema == "kinkcheck/shard/v1":
        from kinkcheck.shards import ShardError, read_shard

        try:
            shard = read_shard(p)
        except ShardError as err:
            raise DiffError(str(err)) from None
        if env_id and env_id != shard["environment"]["id"]:
            raise DiffError(f"{p} holds {shard['environment']['id']}, not {env_id}")
        return side_from_shard(shard, spec)
    if schema == "kinkcheck/conventions/v1":
        if not env_id:
            envs = data.get("environments")
            ids = ", ".join(e["id"] for e in envs if isinstance(e, dict) and isinstance(e.get("id"), str)) \
                if isinstance(envs, list) else ""
            raise DiffError(f"{p} is a report: name an environment, {p}#ENV (one of: {ids or 'none'})")
        problem = report_problem(data, ("environments", "cases", "observations"))
        if problem:
            raise DiffError(f"{p}: malformed kinkcheck report ({problem})")
        return side_from_report(data, env_id, spec)
    raise DiffError(f"{p}: neither a kinkcheck shard nor a kinkcheck report")


def changed_in(environments: Iterable[Mapping[str, Any]], observations: Iterable[Mapping[str, Any]],
               version_key: Any) -> list[dict[str, Any]]:
    """Every boundary between consecutive measured releases of one framework (per device) where a
    convention changed, grouped by (framework, program, boundary, change) with the cases; newest first."""
    by_env: dict[str, dict[Key, Mapping[str, Any]]] = {}
    for o in observations:
        by_env.setdefault(o["environment"], {})[(o["case"], o["program"], o["mode"], o["dtype"])] = o
    lines: dict[tuple[Any, ...], dict[str, Any]] = {}
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for env in environments:
        if env["id"] in by_env:
            groups.setdefault((env["framework"], env["device"]), []).append(env)
    for (fw, device), envs in groups.items():
        envs = sorted(envs, key=version_key)
        for a, b in zip(envs, envs[1:]):
            old = Side(a["id"], dict(a), by_env[a["id"]])
            new = Side(b["id"], dict(b), by_env[b["id"]])
            for ch in compare(old, new):
                # Value only: the same step (1 → 0) is "right → left" at one bound and "left → right" at the other.
                change = f"{describe_observation(ch.old, False)} → {describe_observation(ch.new, False)}"
                program = ch.program
                if "unavailable" in (ch.old.get("status"), ch.new.get("status")):
                    program = "(every program in this mode)"  # a mode that appeared or went: one line, not one per program
                    change = f"mode {ch.old.get('status')} → {ch.new.get('status')}"
                key = (fw, device, program, a["framework_version"], b["framework_version"], change, ch.mode)
                entry = lines.setdefault(key, {
                    "framework": fw, "device": device, "program": program, "mode": ch.mode,
                    "from": a["framework_version"], "to": b["framework_version"], "from_environment": a["id"],
                    "to_environment": b["id"], "change": change, "cases": [], "dtypes": []})
                if ch.case not in entry["cases"]:
                    entry["cases"].append(ch.case)
                if ch.dtype not in entry["dtypes"]:
                    entry["dtypes"].append(ch.dtype)
    for entry in lines.values():
        if entry["program"].startswith("(every program"):
            entry["cases"] = []  # every case: the mode itself appeared or went
    order = {(e["framework"], e["device"], e["id"]): i
             for (fw, dev), envs in groups.items() for i, e in enumerate(sorted(envs, key=version_key))}
    return sorted(lines.values(),
                  key=lambda e: (e["framework"], e["device"], -order[(e["framework"], e["device"], e["to_environment"])],
                                 e["program"]))
