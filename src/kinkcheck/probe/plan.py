"""Planning a probe: what a shard lacks for the catalog, and merging what a probe measured into it.

A shard records ``environment.case_hashes`` ({case id: Case.measurement_hash(framework)}) for the cases it
measured. A cell is a (case, mode, dtype); it is present when every program of the case has an observation
there, whatever its status (a mode a release lacks is present as ``unavailable`` cells). A shard is *fresh*
when every case × mode × dtype of its matrix is present and measured against the case's current definition
(:func:`missing_work`); a probe of part of the matrix merges into the shard there is (:func:`write_merged`),
never replaces a measured value by an error within one build, and never lowers its count of measured
observations of current cases; a failed attempt never replaces a measured shard (:func:`record_failed_attempt`).

Reads shards with :mod:`kinkcheck.shards` (which only stores) and imports no framework: ``nox`` plans in its own
Python, and the report asks what each shard lacks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kinkcheck.shards import (SCHEMA_ID, ShardBusy, ShardError, _read_loose, _write_shard_file, read_shard, shard_lock,
                              write_shard)
from kinkcheck.vocabulary import DTYPES, FRAMEWORK_MODES, MODES

if TYPE_CHECKING:
    from kinkcheck.catalog import Catalog


__all__ = ["Work", "current_count", "drop_removed", "is_fresh", "merge_shard", "missing_work", "not_measured_cases",
           "not_measured_modes", "open_parts", "read_old_shard", "record_failed_attempt", "recorded_case_hashes",
           "unaccounted", "withdraw", "write_merged"]


def is_fresh(path: str | Path, catalog: Catalog, modes: Sequence[str] | None = None,
             dtypes: Sequence[str] | None = None) -> bool:
    """Whether the shard at ``path`` holds every case × mode × dtype of its matrix, each case measured
    against its current definition (:func:`missing_work` finds nothing to probe).

    A missing or unreadable file and a not-measured record are never fresh. Reads JSON only, no schema
    validation, so nox can call it without kinkcheck's dependencies.
    """
    shard = _read_loose(path)
    return shard is not None and missing_work(shard, catalog, modes=modes, dtypes=dtypes).fresh


def _cell_key(row: dict[str, Any]) -> tuple[str, str, str]:
    return row["case"], row.get("mode", "reverse"), row["dtype"]  # shard networks before modes were reverse


def _row_key(row: dict[str, Any]) -> tuple[str, str, str, str]:
    return row["case"], row["program"], row.get("mode", "reverse"), row["dtype"]


def _measured(catalog: Catalog, framework: str) -> dict[str, Any]:
    """Case id → case, for the cases that have programs for ``framework`` (the only ones a shard measures)."""
    return {c.id: c for c in catalog if c.programs_for(framework)}


def recorded_case_hashes(shard: dict[str, Any], catalog: Catalog) -> dict[str, str | None]:
    """Case id → the measurement hash each case of ``shard`` was measured against (None: unknown).

    A shard written before per-case hashes has none: every case counts as measured against the shard's
    catalog, so when that catalog is the current one each case gets its current hash, otherwise None.
    """
    env = shard["environment"]
    measured = dict.fromkeys(o["case"] for o in shard["observations"])
    hashes = env.get("case_hashes")
    if isinstance(hashes, dict):
        return {c: hashes.get(c) if isinstance(hashes.get(c), str) else None for c in measured}
    cases = _measured(catalog, env["framework"])
    current = env.get("catalog_hash") == catalog.hash
    return {c: cases[c].measurement_hash(env["framework"]) if current and c in cases else None for c in measured}


@dataclass(frozen=True)
class Work:
    """What a shard lacks for its matrix (:func:`missing_work`); ids in catalog order.

    Attributes
    ----------
    environment : str
        The shard's environment id ("" when there is no shard).
    absent : tuple of str
        Cases with programs for the framework and no observation in the shard.
    changed : tuple of str
        Cases measured against another definition (their measurement hash differs, or is unknown).
    cells : tuple of (case, mode, dtype)
        Every cell to (re-)probe: all cells of absent and changed cases, and the missing cells of the others.
    removed : tuple of str
        Cases the shard holds that the catalog no longer measures for its framework (dropped on the next write).
    not_measured : str or None
        The shard is the record of an attempt that measured nothing (never fresh).
    """

    environment: str = ""
    absent: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    cells: tuple[tuple[str, str, str], ...] = ()
    removed: tuple[str, ...] = ()
    not_measured: str | None = None

    @property
    def fresh(self) -> bool:
        """Nothing to probe, and the shard is a measurement."""
        return not self.cells and self.not_measured is None

    @property
    def cases(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(c for c, _, _ in self.cells))

    @property
    def modes(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(m for _, m, _ in self.cells))

    @property
    def dtypes(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(d for _, _, d in self.cells))

    def summary(self) -> str:
        """One line: what will be probed (cases × modes × dtypes, the case ids) and why."""
        if self.fresh:
            return "fresh: every case × mode × dtype measured" + (
                f"; {len(self.removed)} removed case(s) to drop: {', '.join(self.removed)}" if self.removed else "")
        why = [f"{len(self.absent)} new" if self.absent else "", f"{len(self.changed)} changed" if self.changed else "",
               f"not measured before ({self.not_measured})" if self.not_measured else ""]
        partial = len(self.cases) - len(self.absent) - len(self.changed)
        why.append(f"{partial} with missing cells" if partial > 0 else "")
        text = (f"{len(self.cells)} cells to probe: {len(self.cases)} case(s) × {len(self.modes)} mode(s) × "
                f"{len(self.dtypes)} dtype(s) ({', '.join(w for w in why if w)}): {', '.join(self.cases)}")
        return text + (f"; {len(self.removed)} removed case(s) to drop: {', '.join(self.removed)}" if self.removed
                       else "")


def missing_work(shard: dict[str, Any] | None, catalog: Catalog, framework: str | None = None,
                 modes: Sequence[str] | None = None, dtypes: Sequence[str] | None = None) -> Work:
    """What must be (re-)probed so that ``shard`` holds the full matrix of the current catalog.

    Parameters
    ----------
    shard : dict or None
        A shard (None: there is none yet; then ``framework`` is required).
    framework : str, optional
        Default: the shard's.
    modes, dtypes : sequence of str, optional
        The matrix; default every mode of the framework (``FRAMEWORK_MODES``: a release that lacks one
        holds ``unavailable`` cells for it) and the four dtypes.

    Returns
    -------
    Work
        ``Work.fresh`` is True when nothing is missing and the shard is not a not-measured record.
    """
    framework = framework or (shard["environment"]["framework"] if shard else None)
    if framework is None:
        raise ValueError("missing_work: no shard, so name the framework")
    known = FRAMEWORK_MODES.get(framework, ())
    modes = tuple(modes or known)
    dtypes = tuple(dtypes or DTYPES)
    cases = _measured(catalog, framework)
    env = shard["environment"] if shard else {}
    not_measured = env.get("not_measured") if shard else None
    if shard is None or not_measured is not None:
        recorded: dict[str, str | None] = {}
        present: set[tuple[str, str, str, str]] = set()
    else:
        recorded = recorded_case_hashes(shard, catalog)
        present = {(o["case"], o["program"], o.get("mode", "reverse"), o["dtype"])  # _row_key, inlined: 100,000 rows
                   for o in shard["observations"]}
    absent, changed, cells = [], [], []
    for cid, case in cases.items():
        case_modes = tuple(dict.fromkeys([*modes, *(m for m in case.modes if m in known)]))
        grid = [(cid, m, d) for m in case_modes for d in dtypes]
        if cid not in recorded:
            absent.append(cid)
            cells += grid
        elif recorded[cid] != case.measurement_hash(framework):
            changed.append(cid)
            cells += grid
        else:
            programs = [p.id for p in case.programs_for(framework)]
            cells += [(c, m, d) for c, m, d in grid if any((c, p, m, d) not in present for p in programs)]
    removed = tuple(c for c in recorded if c not in cases)
    return Work(str(env.get("id", "")), tuple(absent), tuple(changed), tuple(cells), removed,
                str(not_measured) if not_measured is not None else None)


def current_count(shard: dict[str, Any] | None, catalog: Catalog) -> int:
    """Measured (``ok``) observations of ``shard`` of a case and program of ``catalog`` as defined now.

    The count a write must not lower (:func:`merge_shard`): observations of removed cases or programs, or of
    a case measured against another definition, measure something the catalog no longer holds; an ``error``
    or ``unavailable`` cell is not a measured value (a re-probe that turns values into ``unavailable`` keeps
    the row count, not the measurements).
    """
    if shard is None or shard["environment"].get("not_measured") is not None:
        return 0
    fw = shard["environment"]["framework"]
    cases = _measured(catalog, fw)
    recorded = recorded_case_hashes(shard, catalog)
    current = {c for c, h in recorded.items() if c in cases and h == cases[c].measurement_hash(fw)}
    programs = {(c, p.id) for c in current for p in cases[c].programs_for(fw)}
    return sum((o["case"], o["program"]) in programs and o.get("status") == "ok" for o in shard["observations"])


def _part(env: dict[str, Any], cases: Sequence[str] | None) -> dict[str, Any]:
    """One entry of ``environment.history``: when and how one part of a merged shard was measured."""
    part = {k: env[k] for k in ("measured_at", "python", "framework_build", "kinkcheck_version", "modes", "dtypes")
            if k in env}
    if cases is not None:
        part["cases"] = list(cases)
    return part


def _with_case_hashes(env: dict[str, Any], hashes: dict[str, str]) -> dict[str, Any]:
    """``env`` with ``case_hashes`` right after ``catalog_hash`` (where a probe writes it)."""
    out: dict[str, Any] = {}
    for k, v in env.items():
        if k != "case_hashes":
            out[k] = v
        if k == "catalog_hash":
            out["case_hashes"] = hashes
    if "case_hashes" not in out:
        out["case_hashes"] = hashes
    return out


def withdraw(shard: dict[str, Any], select: Callable[[dict[str, Any]], bool], reason: str) -> dict[str, Any]:
    """``shard`` without the observations ``select`` picks, each recorded as not measured with ``reason``.

    For a cell that holds no measurement of the framework although the probe wrote one: an error the probe
    itself caused (issue 30: a program's constants on the CPU beside CUDA inputs). The cells leave
    ``observations``, so :func:`missing_work` lists them and the next probe of the environment measures them;
    ``environment.not_measured_parts`` says, per (case, program), which modes and dtypes and why, until then
    (:func:`merge_shard` drops a part once its cells are measured); modes of a program with the same dtypes share a
    part. Everything else is kept as it is.

    Raises
    ------
    ShardError
        ``reason`` is empty, or ``select`` picks nothing (a withdrawal that finds nothing is a mistake).
    """
    if not reason.strip():
        raise ShardError("a withdrawal must say why the cells are not measured")
    gone = [o for o in shard["observations"] if select(o)]
    if not gone:
        raise ShardError(f"{shard['environment']['id']}: no observation to withdraw ({reason})")
    cells: dict[tuple[str, str], dict[str, set[str]]] = {}
    for o in gone:
        cells.setdefault((o["case"], o["program"]), {}).setdefault(o["mode"], set()).add(o["dtype"])
    parts: dict[tuple[str, str, frozenset[str]], dict[str, Any]] = {}
    for (case, program), by_mode in cells.items():  # modes with the same dtypes share a part
        for mode in sorted(by_mode, key=MODES.index):
            dts = frozenset(by_mode[mode])
            part = parts.setdefault((case, program, dts), {"case": case, "program": program, "modes": [],
                                                           "dtypes": sorted(dts, key=DTYPES.index), "reason": reason})
            part["modes"].append(mode)
    env = dict(shard["environment"])
    env["not_measured_parts"] = _unique([*(env.get("not_measured_parts") or []), *parts.values()])
    return {**shard, "environment": env, "observations": [o for o in shard["observations"] if not select(o)]}


def _combined(old: Sequence[dict[str, Any]], new: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The parts of two shards of one environment: every program's part once, and a mode recorded once (the
    reason it was first recorded with)."""
    recorded = {m for p in old if "case" not in p for m in p["modes"]}
    out = list(old)
    for p in new:
        if "case" not in p:
            left = [m for m in p["modes"] if m not in recorded]
            recorded.update(left)
            p = {**p, "modes": left} if left else None
        if p is not None:
            out.append(p)
    return _unique(out)


def _unique(parts: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """``parts`` without repeats, first-seen order."""
    out: list[dict[str, Any]] = []
    for p in parts:
        if p not in out:
            out.append(p)
    return out


def not_measured_cases(shard: dict[str, Any], catalog: Catalog, cases: Sequence[str], reason: str) -> dict[str, Any]:
    """``shard`` with ``environment.not_measured_parts`` saying that ``cases`` of ``catalog``, which it does not
    hold, were not measured, and why: one part per program of the shard's framework, over every mode the case
    asks of that framework and the four dtypes (:func:`missing_work`'s grid).

    For an environment that cannot be probed where the cases were added (a CUDA shard measured on a lent
    machine): the cells stay in :func:`missing_work`, so the next probe there measures them and
    :func:`merge_shard` drops the parts; until then the report says "not measured" and why.

    Raises
    ------
    ShardError
        ``reason`` is empty, the shard is a not-measured record, or a case is unknown, has no program for the
        framework or is already held by the shard.
    """
    env = shard["environment"]
    if not reason.strip() or env.get("not_measured") is not None:
        raise ShardError(f"{env.get('id', '?')}: cases not measured need a measured shard and a reason")
    fw = env["framework"]
    known = FRAMEWORK_MODES.get(fw, ())
    held = {o["case"] for o in shard["observations"]}
    measured = _measured(catalog, fw)
    parts = []
    for cid in cases:
        case = measured.get(cid)
        if case is None or cid in held:
            raise ShardError(f"{env['id']}: {cid!r} is " + ("already measured there" if cid in held else
                                                            f"no case of the catalog with a {fw} program"))
        modes = sorted({*known, *(m for m in case.modes if m in known)}, key=MODES.index)
        parts += [{"case": cid, "program": p.id, "modes": modes, "dtypes": list(DTYPES), "reason": reason}
                  for p in case.programs_for(fw)]
    return {**shard, "environment": {**env, "not_measured_parts": _unique([*(env.get("not_measured_parts") or []),
                                                                           *parts])}}


def unaccounted(shard: dict[str, Any], catalog: Catalog, cases: Sequence[str]) -> tuple[str, ...]:
    """The cases among ``cases`` with a cell that ``shard`` neither holds nor records as not measured (a part of
    ``environment.not_measured_parts`` with a reason covers it): what promotion still waits for. A part of whole
    modes (:func:`not_measured_modes`: a probe cut short before a mode) covers those modes' cells of every case,
    the staged ones too, as the report shows them: not measured, with the reason."""
    work = missing_work(shard, catalog)
    wanted = set(cases) & {*work.absent, *work.changed, *(c for c, _, _ in work.cells)}
    if not wanted:
        return ()
    parts = shard["environment"].get("not_measured_parts") or []
    fw = shard["environment"]["framework"]
    measured = _measured(catalog, fw)

    def covered(case: str, program: str, mode: str, dtype: str) -> bool:
        return any(mode in p["modes"] and ("case" not in p or (p["case"] == case and p["program"] == program
                                                                and dtype in (p.get("dtypes") or ())))
                   for p in parts)

    open_ = {c for c, m, d in work.cells if c in wanted
             and not all(covered(c, p.id, m, d) for p in measured[c].programs_for(fw))}
    return tuple(c for c in cases if c in open_)


def not_measured_modes(shard: dict[str, Any], modes: Sequence[str], reason: str) -> dict[str, Any]:
    """``shard`` with ``environment.not_measured_parts`` saying that ``modes`` were not probed (none of them in
    ``environment.modes``; a case that asks for one of them may hold its cells), and why: a probe cut short."""
    probed = set(shard["environment"].get("modes") or ())
    if not reason.strip() or not modes or probed & set(modes):
        raise ShardError(f"{shard['environment']['id']}: modes not measured must be modes not probed, and say why "
                         f"(probed: {', '.join(sorted(probed & set(modes))) or 'none'})")
    env = dict(shard["environment"])
    recorded = {m for p in env.get("not_measured_parts") or () if "case" not in p for m in p["modes"]}
    left = [m for m in modes if m not in recorded]  # a mode recorded already keeps its first reason
    if left:
        env["not_measured_parts"] = [*(env.get("not_measured_parts") or []), {"modes": left, "reason": reason}]
    return {**shard, "environment": env}


def open_parts(parts: Sequence[dict[str, Any]], observations: Sequence[dict[str, Any]],
               probed: Sequence[str]) -> list[dict[str, Any]]:
    """The parts of ``environment.not_measured_parts`` still not measured: a program's part narrowed to its
    cells absent from ``observations`` (a probe of some of its modes leaves the others, and a part never names a
    cell the shard holds), a part of whole modes with the modes not yet ``probed`` (``environment.modes``)."""
    present = {_row_key(o) for o in observations}
    out = []
    for part in parts:
        if "case" in part:  # narrowed to the cells still absent; modes with the same dtypes share a part
            absent: dict[frozenset[str], list[str]] = {}
            for m in sorted(part["modes"], key=MODES.index):
                dts = frozenset(d for d in part["dtypes"] if (part["case"], part["program"], m, d) not in present)
                if dts:
                    absent.setdefault(dts, []).append(m)
            out.extend({**part, "modes": ms, "dtypes": sorted(dts, key=DTYPES.index)} for dts, ms in absent.items())
        elif left := [m for m in part["modes"] if m not in probed]:
            out.append({**part, "modes": left})
    return _unique(out)  # two parts narrowed to the same cells are one


def merge_shard(old: dict[str, Any] | None, new: dict[str, Any], catalog: Catalog,
                replace: bool = False, drop_removed: bool = False) -> dict[str, Any]:
    """The shard to write where ``old`` is when a probe of some cases × modes × dtypes returned ``new``.

    The observations and network runs of exactly the cells ``new`` measured are replaced (in place, so a
    re-probe that finds the same values changes no row), everything else of ``old`` is kept; the old rows of a
    case whose definition changed drop out (its measurement hash differs: they measure a function the catalog
    no longer holds), and so do cases ``catalog`` does not measure, but only with ``drop_removed`` (a catalog
    cut to a few cases must not drop the others). Within one build (same ``framework_build``) an ``ok`` row is
    never replaced by an ``error`` or ``unavailable`` one: a value that cannot be re-measured now (no C++
    compiler, a crash) says something about this machine, not about the framework; the old row stays and the
    new ``history`` entry records ``not_remeasured`` = ``{"observations", "networks", "reasons"}``. ``case_hashes`` and
    the provenance take ``new``'s values; ``history`` lists when each part was measured (``cases`` only
    where a part did not cover every case). ``last_attempt`` (a failed attempt) is cleared.

    Parameters
    ----------
    old : dict or None
        The shard there is (None, or a not-measured record: ``new`` is written as it is).
    new : dict
        A probe's shard (``kinkcheck.probe.probe``), with ``environment.case_hashes`` of the cases it probed.
    replace : bool
        An explicit full re-measure: ``new`` replaces ``old`` whole, with no check on the count.
    drop_removed : bool
        Drop the rows of cases ``catalog`` does not measure (the full catalog given); default: keep them.

    Raises
    ------
    ShardError
        ``new`` is a not-measured record, ``old`` is another environment, or the result would hold fewer
        measured observations of current cases (:func:`current_count`) than ``old`` (unless ``replace``).
    """
    env_new = new["environment"]
    if env_new.get("not_measured") is not None:
        raise ShardError(f"{env_new['id']}: a not-measured record is not merged (record_failed_attempt keeps it apart)")
    if old is None or old["environment"].get("not_measured") is not None or replace:
        return new
    env_old = old["environment"]
    if env_old["id"] != env_new["id"]:
        raise ShardError(f"the shard there is holds {env_old['id']}, not {env_new['id']}: nothing merged")
    fw = env_new["framework"]
    cases = _measured(catalog, fw)
    recorded = recorded_case_hashes(old, catalog)
    probed = {c: h for c, h in (env_new.get("case_hashes") or {}).items()}
    probed.update({o["case"]: cases[o["case"]].measurement_hash(fw) for o in new["observations"]
                   if o["case"] not in probed and o["case"] in cases})
    redefined = {c for c in probed if recorded.get(c) != probed[c]}
    cells = {_cell_key(o) for o in new["observations"]}
    same_build = env_old.get("framework_build") in (None, env_new.get("framework_build"))
    order = [*cases, *(c for c in dict.fromkeys(o["case"] for o in old["observations"]) if c not in cases)]
    reasons: dict[str, int] = {}
    withdrawn = {(p["case"], p["program"], m, d) for p in env_new.get("not_measured_parts") or () if "case" in p
                 for m in p["modes"] for d in p["dtypes"]}  # not measured by this probe: an old value stays

    def merged_rows(old_rows: list[dict[str, Any]], new_rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
        fresh = {_row_key(r): r for r in new_rows}
        placed: set[tuple[str, str, str, str]] = set()
        by_case: dict[str, list[dict[str, Any]]] = {}
        kept_ok = 0
        for r in old_rows:
            if r["case"] not in cases and drop_removed:
                continue
            if r["case"] in redefined or _cell_key(r) in cells:
                k = _row_key(r)
                if k in fresh and k not in placed:  # the new row takes the old one's place
                    row = fresh[k]
                    if (same_build and r["case"] not in redefined and r.get("status") == "ok"
                            and row.get("status") != "ok"):  # not re-measurable here: the measured value stays
                        why = f"{row.get('status')}: {row.get('error') or 'no value'}"
                        reasons[why[:200]] = reasons.get(why[:200], 0) + 1
                        kept_ok += 1
                        row = r
                    by_case.setdefault(r["case"], []).append(row)
                    placed.add(k)
                elif k in withdrawn and r["case"] not in redefined:
                    by_case.setdefault(r["case"], []).append(r)
                continue
            by_case.setdefault(r["case"], []).append(r)
        for r in new_rows:
            if _row_key(r) not in placed:
                by_case.setdefault(r["case"], []).append(r)
        return [r for c in order for r in by_case.get(c, [])], kept_ok

    observations, kept_obs = merged_rows(old["observations"], new["observations"])
    networks, kept_nets = merged_rows(old["networks"], new["networks"])

    env = {k: v for k, v in env_old.items() if k not in ("last_attempt", "not_measured")}
    for k in ("framework_build", "python", "platform", "runner", "measured_at", "kinkcheck_version", "catalog_hash",
              "settings", "device_name", "packages"):
        if k in env_new:
            env[k] = env_new[k]
    env["modes"] = [m for m in MODES if m in (*env_old.get("modes", ()), *env_new.get("modes", ()))]
    env["dtypes"] = [d for d in DTYPES if d in (*env_old.get("dtypes", ()), *env_new.get("dtypes", ()))]
    kept = dict.fromkeys(o["case"] for o in observations)
    hashes = {c: probed[c] if c in probed else recorded.get(c) for c in kept}
    env = _with_case_hashes(env, {c: h for c, h in hashes.items() if h is not None})
    every = set(probed) >= set(cases)
    part = _part(env_new, None if every else list(probed))
    if kept_obs or kept_nets:
        part["not_remeasured"] = {"observations": kept_obs, "networks": kept_nets,
                                  "reasons": sorted(reasons, key=lambda r: -reasons[r])[:5]}
    env["history"] = [*(env_old.get("history") or [_part(env_old, None)]), part]
    if env_old.get("not_measured_parts") or env_new.get("not_measured_parts"):  # measured now: no longer a gap
        parts = open_parts(_combined(env_old.get("not_measured_parts") or [], env_new.get("not_measured_parts") or []),
                           observations, env["modes"])
        if parts:
            env["not_measured_parts"] = parts
        else:
            env.pop("not_measured_parts", None)
    merged = {**new, "environment": env, "observations": observations, "networks": networks}
    before, after = current_count(old, catalog), current_count(merged, catalog)
    if after < before:
        raise ShardError(f"{env['id']}: refusing to write a shard with {after} measured (ok) observations of current "
                         f"cases over one with {before} (a full re-measure replaces it: kinkcheck probe --replace)")
    return merged


def write_merged(path: str | Path, new: dict[str, Any], catalog: Catalog, replace: bool = False,
                 drop_removed: bool = False,
                 old: Callable[[], dict[str, Any] | None] | None = None) -> dict[str, Any]:
    """Merge ``new`` into the shard at ``path`` (:func:`merge_shard`) and write the result atomically.

    ``old``: returns the shard at ``path`` as :func:`read_old_shard` read it earlier (a probe reads it while its
    worker measures, under the environment's lock: nothing else writes it meanwhile); default: read it now.
    Returns the shard written.

    Raises
    ------
    ShardError
        The shard at ``path`` cannot be read (unless ``replace``), or :func:`merge_shard` refuses; nothing is
        written then.
    OSError
        The write itself failed (the old file is whole: :func:`kinkcheck.shards.write_text_atomic`).
    """
    p = Path(path)
    prior = None if replace else old() if old is not None else read_old_shard(p)
    merged = merge_shard(prior, new, catalog, replace=replace, drop_removed=drop_removed)
    write_shard(p, merged)
    return merged


def read_old_shard(path: str | Path) -> dict[str, Any] | None:
    """The shard a probe merges into (:func:`read_shard`), None when there is none.

    Raises
    ------
    ShardError
        The file exists but is not a shard (it is left as it is).
    """
    p = Path(path)
    if not p.exists():
        return None
    try:
        return read_shard(p)
    except ShardError as err:
        raise ShardError(f"{err}; it is left as it is (kinkcheck probe --replace overwrites it)") from None


def drop_removed(path: str | Path, catalog: Catalog) -> tuple[str, ...]:
    """Drop from the shard at ``path`` the rows of cases the catalog no longer measures; the cases dropped.

    Needs no framework (nox calls it for a shard that is otherwise fresh). Writes only when something is
    dropped, under the environment's lock (:func:`shard_lock`; nothing is dropped while a probe holds it); a
    missing, unreadable or not-measured file is left as it is.
    """
    try:
        with shard_lock(path):
            return _drop_removed(path, catalog)
    except ShardBusy:
        return ()


def _drop_removed(path: str | Path, catalog: Catalog) -> tuple[str, ...]:
    shard = _read_loose(path)
    if shard is None or shard["environment"].get("not_measured") is not None:
        return ()
    removed = missing_work(shard, catalog).removed
    if not removed:
        return ()
    keep = _measured(catalog, shard["environment"]["framework"])
    env = dict(shard["environment"])
    if isinstance(env.get("case_hashes"), dict):
        env["case_hashes"] = {c: h for c, h in env["case_hashes"].items() if c in keep}
    _write_shard_file(path, {**shard, "environment": env,
                             "observations": [o for o in shard["observations"] if o["case"] in keep],
                             "networks": [n for n in shard["networks"] if n["case"] in keep]})
    return removed


def record_failed_attempt(path: str | Path, environment: dict[str, Any]) -> str:
    """Record an attempt that measured nothing (install or probe failed) without losing a measurement.

    Where ``path`` holds a shard with observations, the shard stays and its environment gets
    ``last_attempt`` = ``{"attempted_at", "not_measured"}`` (observations untouched, written atomically; the
    report names the failed attempt beside the measured shard). Where there is no shard, or only an earlier
    not-measured record, ``path`` becomes a not-measured record (no observations). A not-measured record is
    never fresh (:func:`missing_work`), so the next run retries. An unreadable file is left as it is, and so
    is the shard while a probe holds its lock (:func:`shard_lock`: that probe's merge must not be overwritten).

    Parameters
    ----------
    environment : dict
        The record's environment: ``id``, ``framework``, ``framework_version``, ``device``, ``python``,
        ``platform``, ``measured_at``, ``kinkcheck_version``, ``catalog_hash`` and ``not_measured`` (the reason).

    Returns
    -------
    str
        One line saying what was written.
    """
    try:
        with shard_lock(path):
            return _record_failed_attempt(Path(path), environment)
    except ShardBusy as err:
        return f"{path}: {err}; the failed attempt is not recorded"


def _record_failed_attempt(p: Path, environment: dict[str, Any]) -> str:
    reason = environment["not_measured"]
    old = _read_loose(p) if p.exists() else None
    if p.exists() and old is None:
        return f"{p} is not a readable shard: left as it is; not measured: {reason}"
    if old is not None and old["observations"] and old["environment"].get("not_measured") is None:
        env = {**old["environment"], "last_attempt": {"attempted_at": environment["measured_at"],
                                                      "not_measured": reason}}
        _write_shard_file(p, {**old, "environment": env})
        return (f"{p}: kept its {len(old['observations'])} observations; the failed attempt is recorded in it "
                f"(environment.last_attempt): {reason}")
    _write_shard_file(p, {"schema": SCHEMA_ID, "environment": environment, "observations": [], "networks": []})
    return f"{p}: not measured: {reason}"
