"""The report's derived sections, computed once from the judged observations
(:class:`kinkcheck.report.model.ReportIndex`): disagreements between programs, frameworks and releases, mode
disagreements, *Changed in*, conformance to the documented rules, the network cross-check's summary, version
spans, coverage and the summary (:func:`kinkcheck.judge.build.build` fills them in)."""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import msgspec

from kinkcheck import registry
from kinkcheck.cache import read_pickled, write_pickled
from kinkcheck.catalog import FRAMEWORKS, Catalog
from kinkcheck.census import CensusError, census_path, coverage, load_census
from kinkcheck.judge import conformance as conf
from kinkcheck.oracles.classify import same_value
from kinkcheck.platforms import DEFAULT as DEFAULT_PLATFORM
from kinkcheck.platforms import DEVICES, PLATFORMS, device_title
from kinkcheck.platforms import title as platform_title
from kinkcheck.platforms.isa import split_tag
from kinkcheck.report import model as m
from kinkcheck.report.model import differs
from kinkcheck.report.text import describe_observation
from kinkcheck.vocabulary import COMPARISON_RECORDS, COMPARISONS, DTYPES, MODES, NOT_JUDGED, encode

#: Shown as the program of a *Changed in* row when a mode appeared or went for every program.
EVERY_PROGRAM = "(every program in this mode)"

def _fw_rank(fw: str) -> int:
    return FRAMEWORKS.index(fw) if fw in FRAMEWORKS else len(FRAMEWORKS)

_num = encode  # a float as the report writes it: non-finite values as "nan", "inf", "-inf"


def _minus(a: Any, b: Any) -> Any:
    """Elementwise a - b of two nested lists (shard numbers, possibly "nan"); None when ``a`` is None."""
    if a is None:
        return None
    if isinstance(a, list):
        return [_minus(x, y) for x, y in zip(a, b)]
    return _num(float(a) - float(b))


def _frac_num(v: Any) -> Any:
    f = Fraction(v)
    return int(f) if f.denominator == 1 else float(f)


# --------------------------------------------------------------------------- disagreements


def _groups(obs: Sequence[m.Observation], ix: m.ReportIndex, dtype: str) -> list[m.Group]:
    """Programs grouped by value within ``dtype``'s tolerance, first-seen order (no value: left out)."""
    groups: list[tuple[tuple[float, ...], m.Group]] = []
    for o in obs:
        flat = ix.flat(o)
        if flat is None:
            continue
        ref = m.ProgramRef(framework=o.framework, program=o.program)
        for f, g in groups:
            if same_value(f, flat, dtype):
                g.programs.append(ref)
                break
        else:
            groups.append((flat, m.Group(value=[_num(v) for v in flat], label=o.labels[0], programs=[ref])))
    return [g for _, g in groups]


def _shape(groups: Sequence[m.Group]) -> tuple[Any, ...]:
    return tuple((g.label, tuple((p.framework, p.program) for p in g.programs)) for g in groups)


# --------------------------------------------------------------------------- kept per shard or pair of shards

#: The code the parts kept per shard (:func:`_kept`) are computed by, besides the judging code
#: (:data:`kinkcheck.judge.build.JUDGE_MODULES`, in each shard's judged key): a change to any of them computes
#: every part again.
DERIVED_MODULES: tuple[str, ...] = ("judge/sections.py", "report/model.py", "report/text.py", "platforms/isa.py",
                                    "platforms/__init__.py", "platforms.toml")
_DERIVED_DIGEST: list[str] = []


def derived_digest() -> str:
    """16 hex digits of :data:`DERIVED_MODULES`' sources: part of every key :func:`_kept` writes."""
    if not _DERIVED_DIGEST:

        root = Path(__file__).resolve().parents[1]
        h = hashlib.sha256()
        for name in DERIVED_MODULES:
            h.update(name.encode() + b"\0" + (root / name).read_bytes())
        _DERIVED_DIGEST.append(h.hexdigest()[:16])
    return _DERIVED_DIGEST[0]


def _kept(report: m.Report, kind: str, environments: Sequence[str], compute: Any, item: type = tuple) -> Any:
    """``compute()``, a part of a section that reads the observations of ``environments`` alone (a boundary of
    *Changed in*, one environment's mode comparisons), kept in the cache folder (``derived/``) under ``kind``,
    :func:`derived_digest` and each environment's judged key (``report.judged_keys``: its shard's content, the
    judging code, the catalog and its oracles; :func:`kinkcheck.judge.build.judged_shard`). A render after one
    new shard computes the parts that read it, and reads the others. A report built without judged keys (by hand,
    in a test) computes every part; an entry that cannot be read, or is not a list of ``item``, is computed again,
    never an error."""
    keys = getattr(report, "judged_keys", None) or {}
    parts = [keys.get(e) for e in environments]
    if any(k is None for k in parts):
        return compute()
    key = hashlib.sha256(" ".join([kind, derived_digest(), *parts]).encode()).hexdigest()[:40]
    kept = read_pickled("derived", key, touch=True)
    if isinstance(kept, list) and all(isinstance(x, item) for x in kept):
        return kept
    value = compute()
    write_pickled("derived", key, value)
    return value


def disagreements(report: m.Report) -> m.Disagreements:
    """Programs for the same case that return different values (reverse mode), within and across frameworks.

    ``within``: per environment, case and dtype, the groups of programs with equal values, when there are
    two or more groups; releases (and dtypes) that split the programs the same way share an entry.
    ``across``: per case and dtype, comparing the newest CPU environment of each framework, the values some
    framework returns that no program of another framework returns.
    """
    ix = report.index

    def reverse(eid: str) -> dict[tuple[str, str], list[m.Observation]]:
        """(case, dtype) → one environment's reverse-mode observations."""
        by_key: dict[tuple[str, str], list[m.Observation]] = {}
        for o in ix.by_environment.get(eid, []):
            if o.mode == "reverse":
                by_key.setdefault((o.case, o.dtype), []).append(o)
        return by_key

    def of_environment(env: m.Environment) -> list[m.Within]:
        """One environment's splits, case by case (dtypes that split alike share one)."""
        by_key = reverse(env.id)
        found: list[m.Within] = []
        for case in report.cases:
            per_case: list[m.Within] = []
            for dtype in ix.dtypes:
                groups = _groups(by_key.get((case.id, dtype), []), ix, dtype)
                if len(groups) < 2:
                    continue
                prev = next((w for w in per_case if _shape(w.groups) == _shape(groups)), None)
                if prev is not None:
                    prev.dtypes.append(dtype)
                else:
                    per_case.append(m.Within(framework=env.framework, case=case.id, dtypes=[dtype], groups=groups,
                                             environments=[env.id], releases=""))
            found += per_case
        return found

    within: dict[tuple[Any, ...], m.Within] = {}
    for env in report.environments:
        # the dtypes a report shows come with the catalog and every shard: part of what is kept is their list
        kept = _kept(report, f"within {' '.join(ix.dtypes)}", [env.id], lambda env=env: of_environment(env),
                     m.Within) if env.id in ix.by_environment else []
        for w in kept:
            key = (w.framework, w.case, tuple(w.dtypes), _shape(w.groups))
            if key in within:
                within[key].environments.append(env.id)
            else:
                within[key] = w
    rows = list(within.values())
    for w in rows:
        w.releases = ix.releases(w.environments)
    rows.sort(key=lambda w: (ix.case_rank[w.case], _fw_rank(w.framework), ix.env_rank[w.environments[0]]))
    newest = [e.id for fw in ix.frameworks() if (e := ix.newest(fw)) is not None]
    newest_reverse = {eid: reverse(eid) for eid in newest}
    across: list[m.Across] = []
    for case in report.cases:
        for dtype in ix.dtypes:
            obs = [o for eid in newest for o in newest_reverse[eid].get((case.id, dtype), [])]
            groups = _groups(obs, ix, dtype)
            frameworks = {p.framework for g in groups for p in g.programs}
            one_sided = False
            for g in groups:
                fws = {p.framework for p in g.programs}
                if len(fws) == 1:
                    g.only, one_sided = fws.pop(), True
            if len(frameworks) < 2 or not one_sided:
                continue
            prev = next((a for a in across if a.case == case.id and _shape(a.groups) == _shape(groups)), None)
            if prev is not None:
                prev.dtypes.append(dtype)
            else:
                across.append(m.Across(case=case.id, dtypes=[dtype], environments=sorted(newest), groups=groups))
    return m.Disagreements(within=rows, across=across)


def _differs(a: m.Observation, b: m.Observation, ix: m.ReportIndex, dtype: str) -> bool:
    """Whether two observations of one program disagree: status, value beyond ``dtype``'s tolerance, or label.

    A mode or dtype ``unavailable`` in a version is coverage, not a disagreement.
    """
    if a.status == "unavailable" or b.status == "unavailable":
        return False
    if a.status != b.status:
        return True
    if a.status != "ok":
        return False
    fa, fb = ix.flat(a), ix.flat(b)
    return a.labels[0] != b.labels[0] or (fa != fb and not same_value(fa, fb, dtype))  # type: ignore[arg-type]


def _brief_key(b: m.Brief) -> bytes:
    """What makes two sides of a mode disagreement the same: value, label, status, input (not the message)."""
    return msgspec.json.encode((b.value, b.label, b.status, b.input))


def _brief(ob: m.Observation) -> m.Brief:
    return m.Brief(status=ob.status, value=ob.value, label=ob.labels[0], error=ob.error, input=ob.input)


def place_comparison(reference: m.Environment, env: m.Environment) -> str:
    """How a comparison of ``env`` with the ``reference`` environment (CPU, Linux x86-64) reads: ``"CPU vs
    CUDA"`` across devices, ``"Linux x86-64 vs macOS arm64"`` across platforms, both when both differ
    (``"CPU Linux x86-64 vs Metal macOS arm64"``); one platform at two x86-64 instruction-set levels by the levels
    (``"x86-64-v4 vs x86-64-v2"``: the reference's recorded level, the other's cap or own level)."""
    dev = reference.device != env.device
    plat = reference.platform_tag != env.platform_tag
    if not dev and plat and split_tag(reference.platform_tag)[0] == split_tag(env.platform_tag)[0]:
        # one platform at two x86-64 levels (a probe capped below the reference machine's): isa-levels.md
        return f"{reference.isa_level or 'x86-64 (level not recorded)'} vs {env.isa_level}"
    ref_side = [device_title(reference.device)] if dev else []
    side = [device_title(env.device)] if dev else []
    if plat:
        ref_side.append(platform_title(reference.platform_tag))
        side.append(platform_title(env.platform_tag))
    return f"{' '.join(ref_side)} vs {' '.join(side)}"


def _devices_unmeasured(framework: str, envs: Sequence[m.Environment]) -> list[tuple[str, str]]:
    """The accelerator devices (:data:`kinkcheck.platforms.DEVICES`) with no environment of ``framework`` among
    ``envs``, each with why: no shard yet, or none in its matrix (``Framework.devices``)."""
    rec = registry.framework(framework)
    out = []
    for dev in DEVICES:
        if dev == "cpu" or any(e.framework == framework and e.device == dev for e in envs):
            continue
        title = device_title(dev)
        out.append((dev, f"no shard from a {title} device" if dev in rec.devices
                    else f"its matrix has {', '.join(device_title(d) for d in rec.devices)} environments only "
                         "(kinkcheck.registry)"))
    return out


def mode_disagreements(report: m.Report) -> m.ModeDisagreements:
    """Where the same program gives different values or labels by mode, dtype or device.

    Comparisons, each within one environment unless said otherwise:

    * a mode against reverse mode in the same dtype (:data:`COMPARISONS`: reverse vs forward, eager vs
      compiled, grad vs jit, unbatched vs vmap, reverse vs functional);
    * a lower precision against float64, in reverse and in second-order mode ("float64 vs bfloat16");
    * a CUDA or Metal environment against the CPU environment of the same framework version and platform
      ("CPU vs CUDA", "CPU vs Metal"; Linux x86-64's where its own platform's is not measured), and an
      environment measured on another platform against the Linux x86-64 one ("Linux x86-64 vs macOS arm64",
      :func:`place_comparison`).

    Rows that differ the same way in several environments (and dtypes) are merged; ``releases`` names them
    as ranges.
    """
    ix = report.index
    memo: dict[str, dict[tuple[str, str], dict[tuple[str, str], m.Observation]]] = {}

    def cells(eid: str) -> dict[tuple[str, str], dict[tuple[str, str], m.Observation]]:
        """(case, program) → (mode, dtype) → the observation, of one environment."""
        if eid not in memo:
            by_cell: dict[tuple[str, str], dict[tuple[str, str], m.Observation]] = {}
            for o in ix.by_environment.get(eid, []):
                by_cell.setdefault((o.case, o.program), {})[(o.mode, o.dtype)] = o
            memo[eid] = by_cell
        return memo[eid]

    def within(eid: str) -> list[tuple[m.Observation, m.Observation, str, str]]:
        """One environment's modes against reverse mode, and its lower precisions against float64."""
        found = []
        for by_mode in cells(eid).values():
            for (mode, dtype), ob in by_mode.items():
                if mode in COMPARISONS:
                    ref = by_mode.get(("reverse", dtype))
                    if ref is not None and _differs(ref, ob, ix, dtype):
                        found.append((ref, ob, COMPARISONS[mode], eid))
                if mode in ("reverse", "second-order") and dtype != "float64":
                    ref = by_mode.get((mode, "float64"))
                    if ref is not None and _differs(ref, ob, ix, dtype):
                        found.append((ref, ob, f"float64 vs {dtype}", eid))
        return found

    def across(cpu: str, eid: str, comparison: str) -> list[tuple[m.Observation, m.Observation, str, str]]:
        """An environment against the CPU environment ``cpu`` of its release, cell by cell."""
        found = []
        reference = cells(cpu)
        for cell, by_mode in cells(eid).items():
            cpu_cells = reference.get(cell, {})
            for key, ob in by_mode.items():
                ref = cpu_cells.get(key)
                if ref is not None and _differs(ref, ob, ix, key[1]):
                    found.append((ref, ob, comparison, eid))
        return found

    raw: list[tuple[m.Observation, m.Observation, str, str]] = []
    for env in ix.measured:
        if env.isa_cap:  # a lower x86-64 level: what it changes is against the reference level (isa-levels.md)
            continue
        raw += _kept(report, "modes", [env.id], lambda eid=env.id: within(eid))
    not_measured = []
    for env in report.environments:
        if env.place == "cpu":
            continue
        same = [e for e in report.environments if e.framework == env.framework
                and e.framework_version == env.framework_version and e.device == "cpu"]
        # an accelerator against the CPU of its own platform where measured (Metal against macOS's CPU), so
        # that one comparison changes one thing; else, and for a CPU off Linux x86-64, against Linux x86-64
        cpu = next((e for e in same if env.device != "cpu" and e.platform_tag == env.platform_tag),
                   next((e for e in same if e.place == "cpu"), None))
        if cpu is None:
            not_measured.append(f"{env.id}: no CPU shard (Linux x86-64) of {env.framework} {env.framework_version} "
                                "to compare with")
            continue
        comparison = place_comparison(cpu, env)
        raw += _kept(report, f"places {comparison}", [cpu.id, env.id],
                     lambda cpu=cpu.id, eid=env.id, c=comparison: across(cpu, eid, c))
    for fw in FRAMEWORKS:
        for dev, why in _devices_unmeasured(fw, report.environments):
            not_measured.append(f"{fw}: CPU vs {device_title(dev)} not measured: {why}")
    for fw in FRAMEWORKS:
        if not any(e.framework == fw and e.isa_cap for e in report.environments):
            not_measured.append(f"{fw}: x86-64 instruction-set levels other than the reference machine's not "
                                "measured: no shard probed under a cap (kinkcheck probe --isa)")
    if not any(split_tag(e.platform_tag)[0] != DEFAULT_PLATFORM for e in report.environments):
        others = ", ".join(p.title for t, p in PLATFORMS.items() if t != DEFAULT_PLATFORM)  # the runners' own list
        not_measured.append(f"{platform_title(DEFAULT_PLATFORM)} vs other platforms ({others}) not measured: no shard "
                            "from another platform (the CI workflow's runners measure them)")
    # First the dtypes per environment, then one row per set of environments with the same dtypes, so that
    # every (release, dtype) a row names really shows the difference.
    per_env: dict[tuple[Any, ...], m.ModeRow] = {}
    for ref, ob, comparison, eid in raw:
        r, o = _brief(ref), _brief(ob)
        key = (ob.framework, ob.case, ob.program, comparison, ref.mode, ob.mode,
               _brief_key(r), _brief_key(o), eid)
        row = per_env.get(key)
        if row is None:
            row = per_env[key] = m.ModeRow(
                framework=ob.framework, case=ob.case, program=ob.program, comparison=comparison,
                reference_mode=ref.mode, mode=ob.mode, reference_dtype=ref.dtype, dtypes=[], reference=r,
                observed=o, environments=[eid], releases="")
        if ob.dtype not in row.dtypes:
            row.dtypes.append(ob.dtype)
    merged: dict[tuple[Any, ...], m.ModeRow] = {}
    for key, row in per_env.items():
        row.dtypes.sort(key=DTYPES.index)
        mkey = (*key[:-1], tuple(row.dtypes))
        if mkey in merged:
            merged[mkey].environments.append(key[-1])
        else:
            merged[mkey] = row
    rows = list(merged.values())
    fams = [*(c.name for c in COMPARISON_RECORDS), *(f"float64 vs {d}" for d in DTYPES[1:])]
    for row in rows:
        row.environments.sort(key=ix.env_rank.__getitem__)
        row.releases = ix.releases(row.environments)
    rows.sort(key=lambda r: (fams.index(r.comparison) if r.comparison in fams else len(fams), r.comparison,
                             _fw_rank(r.framework), ix.case_rank[r.case], r.program, r.mode,
                             ix.env_rank[r.environments[0]]))
    return m.ModeDisagreements(rows=rows, not_measured=not_measured)


# --------------------------------------------------------------------------- changed in


def _describe(ob: m.Observation) -> str:
    """``0.5``, ``[0, 1]`` or the status: one side of a *Changed in* change (value only: the same step 1 → 0
    is "right → left" at one bound and "left → right" at the other)."""
    return describe_observation(ob, labels=False)


def _obs_differ(a: m.Observation, b: m.Observation, ix: m.ReportIndex) -> bool:
    return differs(a, b, a.dtype, ix.flat)


def _unavailable_modes(obs: Sequence[m.Observation]) -> set[str]:
    """Modes in which every observation is ``unavailable`` (the release has no such mode)."""
    seen: dict[str, bool] = {}
    for o in obs:
        seen[o.mode] = seen.get(o.mode, True) and o.status == "unavailable"
    return {mode for mode, all_unavailable in seen.items() if all_unavailable}


def changed_in(report: m.Report) -> list[m.ChangedIn]:
    """Every boundary between consecutive measured releases of one framework (per device) where a program's
    value or status changed; newest boundary first. One row per (program, boundary, change) and set of
    cells: its ``cases`` × ``modes`` × ``dtypes`` are exactly the cells that changed so (cases and modes that
    changed in the same dtypes share a row; others get their own).

    Three kinds: *convention* (a value changed: both releases returned one), *raises* (the program raised
    in one release and returned a value in the other: a dtype an operation did not support, a bug fixed or
    made) and *availability* (to or from ``unavailable``: a mode, dtype or name appeared or went). A mode
    that was unavailable for every program in one of the two releases is one row ``(every program in this
    mode)``, other availability changes one row per set of programs that changed the same way.
    """
    ix = report.index
    groups: dict[tuple[str, str], list[m.Environment]] = {}
    for env in ix.measured:
        groups.setdefault((env.framework, env.place), []).append(env)  # releases compared within one place
    out: list[m.ChangedIn] = []
    boundary_rank: dict[str, int] = {}
    for envs in groups.values():
        for i, e in enumerate(envs):
            boundary_rank[e.id] = i
        for a, b in itertools.pairwise(envs):
            out.extend(_kept(report, "changed-in", [a.id, b.id], lambda a=a, b=b: _boundary(ix, a, b), m.ChangedIn))
    return sorted(out, key=lambda r: (_fw_rank(r.framework), r.framework, r.device, -boundary_rank[r.to_environment],
                                      _KINDS.index(r.kind), r.program, r.change, ix.case_rank.get(
                                          r.cases[0], -1) if r.cases else -1, _mode_rank(r.modes[0])))


#: The kinds of a *Changed in* row, in report order.
_KINDS = ("convention", "raises", "availability")


def _mode_rank(mode: str) -> int:
    return MODES.index(mode) if mode in MODES else len(MODES)


def _boundary(ix: m.ReportIndex, a: m.Environment, b: m.Environment) -> list[m.ChangedIn]:
    """The *Changed in* rows between consecutive releases ``a`` and ``b`` (see :func:`changed_in`)."""
    old = {(o.case, o.program, o.mode, o.dtype): o for o in ix.by_environment[a.id]}
    wholly = (_unavailable_modes(ix.by_environment[a.id]), _unavailable_modes(ix.by_environment[b.id]))
    # (kind, program, change) → case → mode → dtypes that changed so
    cells: dict[tuple[str, str, str], dict[str, dict[str, set[str]]]] = {}
    every: dict[str, dict[str, set[str]]] = {}  # change → mode → dtypes, for modes that appeared or went
    avail: dict[tuple[str, str], set[str]] = {}  # (mode, change) → programs
    for o in ix.by_environment[b.id]:
        p = old.get((o.case, o.program, o.mode, o.dtype))
        if p is None or not _obs_differ(p, o, ix):
            continue
        if "unavailable" in (p.status, o.status):
            if o.mode in wholly[0] or o.mode in wholly[1]:  # the mode itself appeared or went
                went = "mode measured → unavailable" if o.mode in wholly[1] else "mode unavailable → measured"
                every.setdefault(went, {}).setdefault(o.mode, set()).add(o.dtype)
                continue
            key = ("availability", o.program, f"{p.status} → {o.status}")
            avail.setdefault((o.mode, key[2]), set()).add(o.program)
        else:
            # Value only: the same step (1 → 0) is "right → left" at one bound and "left → right" at the other.
            kind = "raises" if "error" in (p.status, o.status) else "convention"
            key = (kind, o.program, f"{_describe(p)} → {_describe(o)}")
        cells.setdefault(key, {}).setdefault(o.case, {}).setdefault(o.mode, set()).add(o.dtype)
    rows: dict[tuple[Any, ...], m.ChangedIn] = {}

    def row(kind: str, program: str, change: str, modes: tuple[str, ...], dtypes: tuple[str, ...]) -> m.ChangedIn:
        key = (kind, program, change, modes, dtypes)
        if key not in rows:
            rows[key] = m.ChangedIn(
                framework=a.framework, device=a.device, program=program, kind=kind,  # type: ignore[arg-type]
                from_version=a.framework_version, to_version=b.framework_version, from_environment=a.id,
                to_environment=b.id, change=change, cases=[], modes=list(modes), dtypes=list(dtypes))
        return rows[key]

    for change, by_mode in every.items():
        for modes, dtypes in _same_dtypes(by_mode):
            row("availability", EVERY_PROGRAM, change, modes, dtypes)
    for (kind, program, change), by_case in cells.items():
        for case, by_mode in by_case.items():
            for modes, dtypes in _same_dtypes(by_mode):
                if kind == "availability":  # programs that gained (lost) the same modes share a row
                    names = sorted(set().union(*(avail[(md, change)] for md in modes)))
                    r = row(kind, names[0] if len(names) == 1 else f"{len(names)} programs", change, modes, dtypes)
                    r.programs = names if len(names) > 1 else []
                else:
                    r = row(kind, program, change, modes, dtypes)
                if case not in r.cases:
                    r.cases.append(case)
    for r in rows.values():
        r.cases.sort(key=ix.case_rank.__getitem__)
    return list(rows.values())


def _same_dtypes(by_mode: dict[str, set[str]]) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    """Mode → dtypes regrouped as (modes, dtypes) pairs: modes that changed in the same dtypes together, each
    in :data:`MODES` / :data:`DTYPES` order."""
    out: dict[tuple[str, ...], list[str]] = {}
    for mode in sorted(by_mode, key=_mode_rank):
        dtypes = tuple(d for d in DTYPES if d in by_mode[mode]) + tuple(sorted(by_mode[mode] - set(DTYPES)))
        out.setdefault(dtypes, []).append(mode)
    return [(tuple(modes), dtypes) for dtypes, modes in out.items()]


# --------------------------------------------------------------------------- conformance, span, coverage


def _conformance(report: m.Report, predictions: dict[tuple[str, str, str], conf.Prediction]) -> m.Conformance:
    """The Conformance section: each framework's rule, counts, and per program (reverse mode, float64) its
    verdict in every release, consecutive releases with the same verdict and value merged into one row."""
    ix = report.index
    rows: list[m.ConformanceRow] = []
    last: dict[tuple[str, str, str], m.ConformanceRow] = {}
    obs = [o for e in ix.measured for o in ix.by_environment[e.id]
           if o.mode == "reverse" and o.dtype == "float64" and o.conformance]
    for o in obs:
        key = (o.case, o.framework, o.program)
        prev = last.get(key)
        if prev is not None and prev.verdict == o.conformance and prev.value == o.value:
            prev.environments.append(o.environment)
            continue
        p = predictions[key]
        row = m.ConformanceRow(case=o.case, framework=o.framework, program=o.program, verdict=o.conformance,
                               step=p.step, predicted=[[_num(v) for v in vec] for vec in p.values], value=o.value,
                               label=o.labels[0], environments=[o.environment], releases="")
        last[key] = row
        rows.append(row)
    rows.sort(key=lambda r: (ix.case_rank[r.case], _fw_rank(r.framework), r.program, ix.env_rank[r.environments[0]]))
    for r in rows:
        r.releases = ix.releases(r.environments)
    newest: dict[str, m.Newest] = {}
    judged = {o.environment for o in obs}
    for fw in FRAMEWORKS:
        envs = [e.id for e in ix.columns.get(fw, []) if e.place == "cpu" and e.id in judged]
        if envs:
            counts = {v: 0 for v in conf.VERDICTS}
            for o in obs:
                if o.environment == envs[-1]:
                    counts[o.conformance] += 1  # type: ignore[index]
            newest[fw] = m.Newest(environment=envs[-1], **counts)
    return m.Conformance(rules={fw: m.Rule(text=r.text, source=r.source) for fw, r in conf.RULES.items()
                                if fw in ix.columns},
                         newest=newest, rows=rows)


def _network_summary(networks: Sequence[m.Network]) -> list[m.NetworkSummary]:
    """Per case and program: how many end-to-end network runs agree with the NumPy oracle."""
    out: dict[tuple[str, str, str], m.NetworkSummary] = {}
    for n in networks:
        row = out.get((n.case, n.framework, n.program))
        if row is None:
            row = out[(n.case, n.framework, n.program)] = m.NetworkSummary(
                case=n.case, framework=n.framework, program=n.program, runs=0, agree=0, differ=[], not_checked=0,
                modes=[])
        row.runs += 1
        if n.mode not in row.modes:
            row.modes.append(n.mode)
        if n.ok is True:
            row.agree += 1
        elif n.ok is False:
            row.differ.append(f"{n.environment} {n.mode} {n.dtype}: {n.detail}")
        else:
            row.not_checked += 1
    return list(out.values())


def _version_span(report: m.Report) -> list[m.VersionSpan]:
    """Per framework (CPU): between the oldest and the newest measured release, the (case, program) pairs
    whose convention changed (a value differs in a mode and dtype both measured), apart from those that
    raised on one side and returned a value on the other, and those that gained or lost a mode or dtype
    (``unavailable`` on one side: coverage, not a changed convention). Each pair counts once, in that order."""
    ix = report.index
    out = []
    for fw in ix.frameworks():
        envs = [e for e in ix.columns.get(fw, []) if e.place == "cpu"]
        if len(envs) < 2:
            continue
        old = {(o.case, o.program, o.mode, o.dtype): o for o in ix.by_environment[envs[0].id]}
        changed, raises, gained, lost = set(), set(), set(), set()
        for o in ix.by_environment[envs[-1].id]:
            p = old.get((o.case, o.program, o.mode, o.dtype))
            if p is None or not _obs_differ(p, o, ix):
                continue
            if p.status == "unavailable":
                gained.add((o.case, o.program))
            elif o.status == "unavailable":
                lost.add((o.case, o.program))
            elif "error" in (p.status, o.status):
                raises.add((o.case, o.program))
            else:
                changed.add((o.case, o.program))
        raises -= changed
        out.append(m.VersionSpan(framework=fw, oldest=envs[0].framework_version, newest=envs[-1].framework_version,
                                 releases=len(envs), programs_changed=len(changed), programs_raises=len(raises),
                                 programs_gained=len(gained - changed - raises),
                                 programs_lost=len(lost - changed - raises)))
    return out


def _coverage(report: m.Report, catalog: Catalog) -> m.Coverage:
    """What the shards measured and, derived from their absence, what they did not (with the reason); the
    census of kinked operations against the catalog."""
    ix = report.index
    envs = report.environments
    missing = [f"{e.id}: {e.not_measured}" for e in envs if e.not_measured]
    missing += [f"{e.id}: the attempt to measure it again on {e.last_attempt.get('attempted_at')} failed "
                f"({e.last_attempt.get('not_measured')}); shown as measured on {e.measured_at}"
                for e in envs if e.last_attempt]
    for e in envs:
        for reason, parts in m.parts_by_reason(e.not_measured_parts):
            modes = [x for x in MODES if any(x in p.modes for p in parts)]
            programs = [f"{p.case} {p.program}" for p in parts if p.case is not None]
            cells = sum(len(p.modes) * len(p.dtypes or ()) for p in parts)
            what = (f"{len(programs)} program(s), {cells} cells ({'; '.join(programs)})" if programs
                    else f"the cells of {', '.join(modes)} mode it lacks")
            missing.append(f"{e.id}: {what}: {reason}")
    old = [e.id for e in envs if not e.not_measured and e.modes is None]
    if old:
        missing.append(f"{', '.join(old)}: measured before the mode and dtype matrix (reverse mode, float64 and "
                       "float32, forward mode for P9 cases only); their other modes and dtypes are not measured "
                       "(`nox -s report` re-probes these stale shards)")
    for fw in FRAMEWORKS:
        mine = [e for e in envs if e.framework == fw]
        rec = registry.framework(fw)
        if not mine:
            missing.append(f"{fw}: not measured: no shard" + ("" if rec.versions else ": no release in its "
                                                               "version matrix (kinkcheck.registry)"))
            continue
        unprobed = [v for v in rec.versions if v not in {e.framework_version for e in mine if e.place == "cpu"}]
        if unprobed:
            missing.append(f"{fw} {', '.join(unprobed)}: not measured: no shard yet (`nox -s report` probes them)")
        for dev, why in _devices_unmeasured(fw, mine):
            missing.append(f"{fw} on {device_title(dev)}: not measured: {why}")
    absent_dtypes = [d for d in DTYPES if d not in ix.dtypes]
    if absent_dtypes:
        missing.append(f"{', '.join(absent_dtypes)}: not measured: no shard probed these dtypes")
    absent_modes = [x for x in MODES if x not in ix.modes]
    if absent_modes:
        missing.append(f"{', '.join(absent_modes)} mode: not measured: no shard probed it")
    return m.Coverage(devices=sorted({e.device for e in envs}), dtypes=list(ix.dtypes),
                      modes=[x for x in MODES if x in ix.modes], not_measured=missing,
                      operations=_operations(catalog))


def _operations(catalog: Catalog) -> list[m.OperationCoverage]:
    """The census of each registered framework that has one (``census/`` beside the catalog file:
    ``references/census/``) against ``catalog``; an unreadable census is a row with its one-line error,
    never a failed report."""

    folder = Path(catalog.path).parent / "census"
    out = []
    for fw in FRAMEWORKS:
        if not census_path(fw, folder).exists():
            continue
        try:
            census = load_census(fw, folder)
        except CensusError as err:
            out.append(m.OperationCoverage(fw, "", "", {}, [], {}, error=str(err)))
            continue
        cov = coverage(census, catalog)
        out.append(m.OperationCoverage(fw, census.release, census.source,
                                       {k: list(v) for k, v in cov.covered.items()}, list(cov.uncovered),
                                       {k: list(v) for k, v in cov.excluded.items()}))
    return out


#: What the summary counts of the observations (:func:`kinkcheck.judge.build.observation_counts`, per shard as it is
#: judged): errors and unavailable ones, those with each of these labels, and each conformance verdict.
COUNTED_LABELS = ("outside-clarke", "not-lipschitz", "not-judged", "nan")
COUNTED = ("error", "unavailable", *COUNTED_LABELS, *(f"verdict:{v}" for v in conf.VERDICTS))


def _summary(report: m.Report, counts: dict[str, int]) -> m.Summary:
    """The summary; ``counts``: the observations' (:data:`COUNTED`), summed over the shards."""
    obs = report.observations
    status = {k: counts[k] for k in ("error", "unavailable")}
    labels = {k: counts[k] for k in COUNTED_LABELS}
    verdicts = {v: counts[f"verdict:{v}"] for v in conf.VERDICTS}
    return m.Summary(
        cases=len(report.cases), programs=sum(len(c.programs) for c in report.cases),
        environments=len(report.environments), observations=len(obs), errors=status["error"],
        unavailable=status["unavailable"], outside_clarke=labels["outside-clarke"],
        not_lipschitz=labels["not-lipschitz"], not_judged=labels["not-judged"],
        cases_not_judged=sum(c.oracle.kind == NOT_JUDGED for c in report.cases), nan=labels["nan"],
        disagreements_within=len(report.disagreements.within), disagreements_across=len(report.disagreements.across),
        network_mismatches=sum(n.ok is False for n in report.networks),
        network_agree=sum(n.ok is True for n in report.networks),
        mode_disagreements=len(report.mode_disagreements.rows), network_runs=len(report.networks),
        changed_in=len(report.changed_in),
        changed_in_conventions=sum(r.kind == "convention" for r in report.changed_in),
        changed_in_raises=sum(r.kind == "raises" for r in report.changed_in),
        changed_in_availability=sum(r.kind == "availability" for r in report.changed_in),
        conformance=verdicts, not_measured=sum(1 for e in report.environments if e.not_measured))
