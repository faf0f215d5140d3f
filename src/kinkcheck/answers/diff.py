"""Compare conventions between two environments: two shards, or environments inside a report.

Used by ``kinkcheck diff OLD NEW`` (exit 0: nothing changed, 1: some convention changed, 2: bad input).
A side is a shard file (``kinkcheck/shard/v2``, or v1) or one environment of a report (``kinkcheck/conventions/v2``,
``REPORT.json#ENV``; ``#ENV`` or a bare ``ENV`` such as ``torch-2.13.0-cpu`` is an environment of the report ``grad``
reads, :func:`kinkcheck.report.query.default_report`, or of ``--report``: the installed package's own report outside a
checkout); both are read into the report's types (:class:`kinkcheck.report.model.Environment`,
:class:`kinkcheck.report.model.Observation`; a shard's observations carry no labels).

An observation is keyed by (case, program, mode, dtype); two observations differ when their status
differs (``ok``/``error``/``unavailable``) or their values differ beyond the dtype's tolerance
(:func:`kinkcheck.report.model.differs`; NaN equals NaN).
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from kinkcheck.registry import FRAMEWORKS
from kinkcheck.render.view import describe_observation  # the report's words for a value, not diff's own
from kinkcheck.report.model import (SCHEMA_ID, Environment, Observation, Report, ReportError, differs, load_report,
                                    report_path)
from kinkcheck.report.query import DATA_ENV, default_report
from kinkcheck.shards import ShardError, read_shard
from kinkcheck.shards.validate import read_text

__all__ = ["Change", "ChangeRow", "DiffError", "Side", "compare", "describe_observation", "differs", "group_changes",
           "load_side", "nearest_environments", "side_from_report", "side_from_shard"]

Key = tuple[str, str, str, str]  # case, program, mode, dtype


class DiffError(ValueError):
    """A side that cannot be read, or two sides that cannot be compared (one-line reason naming the file)."""


@dataclass(frozen=True)
class Side:
    """One environment's observations, ``(case, program, mode, dtype) → observation``."""

    label: str
    environment: Environment
    observations: Mapping[Key, Observation]


@dataclass(frozen=True)
class Change:
    """One convention that differs between two environments."""

    case: str
    program: str
    mode: str
    dtype: str
    old: Observation
    new: Observation

    def describe(self) -> str:
        return (f"{self.case}  {self.program}  [{self.mode}, {self.dtype}]: "
                f"{describe_observation(self.old)} -> {describe_observation(self.new)}")


@dataclass(frozen=True)
class ChangeRow:
    """Changes of one program at one case from the same old answer to the same new one (:func:`describe_observation`,
    long vectors elided), in exactly the cells ``modes`` × ``dtypes``, as the report's *Changed in* groups them."""

    case: str
    program: str
    old: str
    new: str
    modes: tuple[str, ...]
    dtypes: tuple[str, ...]


#: Elements of a vector a grouped row shows before eliding the middle.
ROW_LIMIT = 8


def group_changes(changes: Sequence[Change]) -> list[ChangeRow]:
    """``changes`` as rows: one per (case, program, old answer, new answer) when its cells are every pair of its
    modes and dtypes, else one per mode (with that mode's dtypes); in the order of the first change of each."""
    groups: dict[tuple[str, str, str, str], list[Change]] = {}
    for ch in changes:
        key = (ch.case, ch.program, describe_observation(ch.old, limit=ROW_LIMIT),
               describe_observation(ch.new, limit=ROW_LIMIT))
        groups.setdefault(key, []).append(ch)
    rows = []
    for (case, program, old, new), chs in groups.items():
        modes = tuple(dict.fromkeys(c.mode for c in chs))
        dtypes = tuple(dict.fromkeys(c.dtype for c in chs))
        if len({(c.mode, c.dtype) for c in chs}) == len(modes) * len(dtypes):
            rows.append(ChangeRow(case, program, old, new, modes, dtypes))
        else:  # not a full product of its modes and dtypes: a row per mode says exactly which cells
            rows.extend(ChangeRow(case, program, old, new, (m,), tuple(dict.fromkeys(c.dtype for c in chs
                                                                                      if c.mode == m)))
                        for m in modes)
    return rows


def compare(old: Side, new: Side) -> list[Change]:
    """Changes between two sides, over the keys both measured, in the old side's order.

    Raises
    ------
    DiffError
        When the sides are of different frameworks (their programs differ; ``kinkcheck migrate`` compares
        across frameworks), or have no observation in common (e.g. a not-measured side).
    """
    ofw, nfw = old.environment.framework, new.environment.framework
    if ofw != nfw:
        raise DiffError(f"cannot diff {ofw} against {nfw}: {old.label} and {new.label} measure different programs; "
                        f"use `kinkcheck migrate --from {ofw} --to {nfw}` for a framework move")
    common = [k for k in old.observations if k in new.observations]
    if not common:
        raise DiffError(f"{old.label} and {new.label} have no observation in common ({ofw} vs {nfw})")
    return [Change(*k, old=old.observations[k], new=new.observations[k])
            for k in common if differs(old.observations[k], new.observations[k], k[3])]


def side_from_shard(shard: Mapping[str, Any], label: str) -> Side:
    """A side from a shard as :func:`kinkcheck.shards.read_shard` returns it (validated): its environment
    record and observations in the report's types, without labels (a shard is not judged)."""
    env = msgspec.convert({k: v for k, v in shard["environment"].items() if k != "case_hashes"}, Environment)
    obs = {(o["case"], o["program"], o["mode"], o["dtype"]): Observation(
        case=o["case"], program=o["program"], framework=env.framework, environment=env.id, mode=o["mode"],
        dtype=o["dtype"], status=o["status"], value=o["value"], labels=[], error=o["error"], input=o.get("input"))
        for o in shard["observations"]}
    return Side(label, env, obs)


def side_from_report(report: Report, env_id: str, label: str) -> Side:
    """The side of environment ``env_id`` of ``report``.

    Raises
    ------
    DiffError
        The report has no such environment.
    """
    ix = report.index
    if env_id not in ix.env:
        raise DiffError(f"{label}: no environment {env_id!r} in the report ({nearest_environments(env_id, ix.env)})")
    obs = {(o.case, o.program, o.mode, o.dtype): o for o in ix.by_environment.get(env_id, [])}
    return Side(label, ix.env[env_id], obs)


def nearest_environments(env_id: str, known: Sequence[str], n: int = 4) -> str:
    """The words a DiffError gives for an unknown environment: the ``n`` ids of ``known`` closest to ``env_id``
    (:func:`difflib.get_close_matches`, else those of its framework), e.g. ``nearest: torch-2.13.0-cpu, …``."""
    near = difflib.get_close_matches(env_id, list(known), n=n, cutoff=0.5)
    if not near:
        fw = env_id.partition("-")[0]
        near = [e for e in known if e.partition("-")[0] == fw][-n:]
    if not near:
        return f"it has {len(known)} environments, none of {env_id.partition('-')[0]!r}"
    return f"nearest: {', '.join(near)}"


def _is_environment_id(spec: str) -> bool:
    """``torch-2.13.0-cpu``: a bare environment id (a framework, a release, a device), not a file's name."""
    fw, _, rest = spec.partition("-")
    return (fw in FRAMEWORKS and bool(rest) and "/" not in spec and "\\" not in spec
            and not spec.endswith((".json", ".gz")))


class _Head(msgspec.Struct):
    """What a JSON file says it is; the rest of the document is only parsed."""

    schema: Any = None


def load_side(spec: str, report: str | Path | None = None) -> Side:
    """``FILE`` (a shard) or ``FILE#ENV`` (an environment inside a report, e.g. ``reports/conventions.json#torch-2.13.0-cpu``),
    or ``#ENV`` or a bare ``ENV`` (no such file here): that environment of ``report`` (a folder or its
    ``conventions.json(.gz)``), default the report ``grad`` reads (:func:`kinkcheck.report.query.default_report`: the
    installed package's outside a checkout).

    Raises
    ------
    DiffError
        Missing, corrupt or too deeply nested file; a shard that fails its schema or semantic checks
        (:func:`kinkcheck.shards.read_shard`); a report that is not a well-formed ``kinkcheck/conventions/v2``
        document (:func:`kinkcheck.report.model.decode_report`; a v1 report is refused: re-render it); a
        report without ``#ENV``; an unknown environment.
    """
    path, _, env_id = spec.partition("#")
    if not path and not env_id:
        raise DiffError("an empty side: name a shard file, REPORT#ENV, #ENV or ENV (e.g. torch-2.13.0-cpu)")
    if not path or (not env_id and not Path(path).exists() and _is_environment_id(path)):
        env_id = env_id or path  # "#ENV", or "ENV": an environment of the report, not a file


        path = str(report if report is not None else default_report())
        if report is None and os.environ.get(DATA_ENV) and not report_path(path).exists():  # say where it looked
            raise DiffError(f"no report at {report_path(path)} (${DATA_ENV}), for the environment {env_id}")
    p = report_path(path)
    if Path(path).is_dir() and not p.exists():
        raise DiffError(f"{path}: no report in this folder (conventions.json.gz or conventions.json)")
    raw = read_text(p, DiffError)
    try:
        schema = msgspec.json.decode(raw, type=_Head).schema
    except msgspec.ValidationError:  # valid JSON, but not an object
        schema = None
    except msgspec.DecodeError as err:
        raise DiffError(f"{p}: cannot read (invalid JSON: {str(err).splitlines()[0][:120]})") from None
    except RecursionError:
        raise DiffError(f"{p}: cannot read (JSON nested too deeply)") from None
    if schema in ("kinkcheck/shard/v1", "kinkcheck/shard/v2"):  # a shard file, packed (v2) or not

        try:
            shard = read_shard(p)
        except ShardError as err:
            raise DiffError(str(err)) from None
        if env_id and env_id != shard["environment"]["id"]:
            raise DiffError(f"{p} holds {shard['environment']['id']}, not {env_id}")
        return side_from_shard(shard, spec)
    if isinstance(schema, str) and schema.startswith("kinkcheck/conventions/") and schema != SCHEMA_ID:
        raise DiffError(f"{p}: a {schema} report; this kinkcheck reads {SCHEMA_ID}: re-render it with "
                        "`kinkcheck report`")
    if schema == SCHEMA_ID:
        def of_environment(head: Report) -> list[str]:  # the programs of the side's framework: its rows only
            fw = next((e.framework for e in head.environments if e.id == env_id), None)
            return sorted({q.program for c in head.cases for q in c.programs if q.framework == fw})

        try:
            report = load_report(p, select=of_environment if env_id else None, environments=[env_id] if env_id else None)
        except ReportError as err:
            raise DiffError(str(err)) from None
        if not env_id:
            raise DiffError(f"{p} is a report: name an environment, {p}#ENV (one of: "
                            f"{', '.join(report.index.env) or 'none'})")
        return side_from_report(report, env_id, spec)
    raise DiffError(f"{p}: neither a kinkcheck shard nor a kinkcheck report")
