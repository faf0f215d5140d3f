"""Shards + oracles → the typed report (:class:`kinkcheck.report.model.Report`, ``kinkcheck/conventions/v2``).

Every observation cell comes from a shard; labels come from :func:`kinkcheck.oracles.classify.classify` against
the sympy oracle; network cross-checks from :mod:`kinkcheck.oracles.backprop`. Nothing is typed in. The
report is a function of the shards and the catalog alone, with no wall clock: ``generated_at`` is the newest
``measured_at`` of its environments (:func:`report_date`), so the same shards give the same bytes on any machine.
The derived sections (disagreements, mode disagreements, *Changed in*, conformance, coverage, summary) are
computed once, from the observations through :class:`kinkcheck.report.model.ReportIndex`
(:mod:`kinkcheck.judge.sections`).

Each shard is judged once per content (:func:`judged_shard`): its judged observations, in the report's order, their
Parquet columns (:func:`kinkcheck.report.dataset.fragment`) and its cross-checked network runs are kept in the cache
folder, keyed on the shard's content, the judging code (:data:`JUDGE_MODULES`) and what the judging reads of the
catalog and the oracle table; a render after one new or changed shard judges that shard alone and reads the others'
judgements, without unpacking their files (:class:`kinkcheck.shards.ShardFile`). The parts of the derived sections
that read one shard or a pair of shards are kept under those keys too (:func:`kinkcheck.judge.sections._kept`).
The report is the same, byte for byte, as one judged afresh.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import msgspec

from kinkcheck import __version__
from kinkcheck.cache import prune_cached, read_pickled, write_pickled
from kinkcheck.catalog import FRAMEWORKS, Catalog, staged_case_ids
from kinkcheck.judge import conformance as conf
from kinkcheck.judge.sections import (COUNTED, COUNTED_LABELS, _conformance, _coverage, _frac_num, _minus,
                                      _network_summary, _num, _summary, _version_span, changed_in, disagreements,
                                      mode_disagreements)
from kinkcheck.oracles import backprop
from kinkcheck.oracles.classify import OracleNumbers, classify
from kinkcheck.oracles.table import oracle_table, own_function_table
from kinkcheck.platforms import DEFAULT as DEFAULT_PLATFORM
from kinkcheck.probe.plan import missing_work
from kinkcheck.report import model as m
from kinkcheck.report.dataset import fragment
from kinkcheck.shards import ShardFile
from kinkcheck.vocabulary import flat_value

__all__ = ["P0_PROGRAMS", "build", "derive", "judged_report", "report_date"]

#: Programs shown in the P0 worked example, in order (case relu@0); the first three programs of relu@0 of each
#: other framework (its catalog order: the activation, then the spellings users write most) follow them.
P0_PROGRAMS: tuple[tuple[str, str], ...] = (
    ("torch", "torch.nn.functional.relu(x)"),
    ("torch", "x.clamp(min=0)"),
    ("torch", "torch.clamp(x, min=0)"),
    ("jax", "jax.nn.relu(x)"),
    ("jax", "jax.numpy.maximum(x, 0.0)"),
    ("jax", "jax.numpy.clip(x, 0)"),
)
#: relu'(0) values the NumPy oracle is shown with in the worked example.
P0_KINK_DERIVATIVES: tuple[Fraction, ...] = (Fraction(0), Fraction(1, 2), Fraction(1))


def _env_sort_key(env: dict[str, Any]) -> tuple[Any, ...]:
    from packaging.version import InvalidVersion, Version

    try:
        v: Any = Version(env["framework_version"])
    except InvalidVersion:
        v = Version("0")
    fw = env["framework"]
    rank = FRAMEWORKS.index(fw) if fw in FRAMEWORKS else len(FRAMEWORKS)
    tag = env.get("platform_tag", DEFAULT_PLATFORM)
    # each place's releases together, oldest first; the reference place (CPU on Linux x86-64) first, so that a
    # strip, a range or a *Changed in* pair never steps from one place into another
    return (rank, fw, env["device"] != "cpu", env["device"], tag != DEFAULT_PLATFORM, tag, v)


def _environment(shard: dict[str, Any] | ShardFile) -> dict[str, Any]:
    return shard.environment if isinstance(shard, ShardFile) else shard["environment"]  # type: ignore[no-any-return]


def build(shards: Sequence[dict[str, Any] | ShardFile], catalog: Catalog, gaps: Sequence[str] = ()) -> m.Report:
    """Build the report.

    Parameters
    ----------
    shards : sequence of dict or ShardFile
        Shards as read by :func:`kinkcheck.shards.load_shards` (validated), whole or as files whose observations
        are unpacked only where their judgement is not in the cache (``lazy=True``, what a render reads).
    catalog : Catalog
    gaps : sequence of str
        One line per shard that could not be read; shown in the report.

    Returns
    -------
    Report
        The typed ``kinkcheck/conventions/v2`` report; ``report.index`` is ready for the renderers.

    Raises
    ------
    ValueError
        The oracle table lacks a second-order entry for a case a shard measured in ``second-order`` mode.
    """
    report, predictions = judged_report(shards, catalog, gaps)
    derive(report, catalog, predictions)
    return report


def judged_report(shards: Sequence[dict[str, Any] | ShardFile], catalog: Catalog, gaps: Sequence[str] = ()
                  ) -> tuple[m.Report, dict[tuple[str, str, str], conf.Prediction]]:
    """The first stage of :func:`build`: every shard judged (:func:`judged_shard`) and the report made of them, its
    environments, cases, observations, network runs, provenance, index (``report.index``) and the Parquet
    columns of each environment (``report.fragments``), its derived sections still empty; with the conformance
    predictions :func:`derive` reads. What the observations table is written from: a render starts writing it
    here, while :func:`derive` computes the sections."""
    shards = sorted(shards, key=lambda s: _env_sort_key(_environment(s)))
    # case_hashes (per-case freshness, 16 hex digits a case) stay in the shards: bookkeeping, not provenance
    environments = [msgspec.convert({k: v for k, v in _environment(s).items() if k != "case_hashes"},
                                    m.Environment) for s in shards]
    ctx = judging_context(catalog)
    table = ctx.table
    cases = [m.Case(id=c.id, title=c.title, sympy=c.sympy, at=c.at, tie=c.tie, sources=list(c.sources), note=c.note,
                    programs=[m.ProgramRef(framework=p.framework, program=p.id) for p in c.programs],
                    notes=dict(c.notes), no_equivalent=dict(c.no_equivalent), oracle=_oracle(table[c.id]),
                    second_order=_oracle(table[c.id]["second_order"]) if table[c.id].get("second_order") else None)
             for c in catalog]

    predictions: dict[tuple[str, str, str], conf.Prediction] = {}
    fragments: dict[str, Any] = {}  # environment -> its observations' Parquet columns (dataset.fragment)
    counts: list[dict[str, int]] = []  # each shard's observation counts (observation_counts), for the summary
    judged_keys: dict[str, str] = {}  # environment -> its judged key: the parts of sections kept per shard
    observations: list[m.Observation] = []
    flats: list[tuple[dict[str, Any], tuple[float, ...]]] = []  # each shard's distinct values and their flats
    networks: list[m.Network] = []
    stale: list[str] = []
    unknown: dict[str, set[str]] = {}
    staged: dict[str, set[str]] = {}  # environment -> staged cases it holds (measured ahead of their move)
    records = {e.id: msgspec.json.encode(e) for e in environments}
    for s in shards:  # each shard judged once per content and judging code (the cache), in the report's order
        j = judged_shard(s, ctx)
        if j.changed:
            stale.append(f"{j.environment}: {len(j.changed)} case(s) measured against another definition than the "
                         f"catalog's ({', '.join(j.changed[:3])}{', …' if len(j.changed) > 3 else ''}); not shown "
                         "until `nox -s report` re-probes them")
        if j.unknown:
            unknown[j.environment] = j.unknown
        if j.staged:
            staged[j.environment] = j.staged
        observations += j.observations
        flats += j.flats
        networks += j.networks
        predictions.update(j.predictions)
        fragments[j.environment] = j.fragment
        counts.append(j.counts)
        if j.key is not None:  # with the environment as the report shows it: the kept parts print its fields
            record = records.get(j.environment, b"")
            judged_keys[j.environment] = hashlib.sha256(j.key.encode() + record).hexdigest()[:40]

    provenance = m.Provenance(
        generated_at=report_date([e.measured_at for e in environments]), kinkcheck_version=__version__,
        catalog_hash=catalog.hash,
        gaps=list(gaps) + stale + [
            f"{eid}: {len(items)} observation(s) of cases or programs not in the catalog were ignored "
            f"(e.g. {min(items)})" for eid, items in sorted(unknown.items())] + ([
            f"{len(set().union(*staged.values()))} staged case(s) (staged/ beside the catalog) are measured in "
            f"{len(staged)} environment(s) ahead of their move into the catalog; not reported until they move"]
            if staged else []))
    empty_summary = m.Summary(**{f: 0 for f in m.Summary.__struct_fields__ if f != "conformance"}, conformance={})
    report = m.Report(
        provenance=provenance, environments=environments, cases=cases, observations=observations,
        networks=networks, p0=m.P0(net=m.P0Net(X=[], W1=[], W2=[], target=[], loss=""), oracle=[], measured=[]),
        disagreements=m.Disagreements(),
        mode_disagreements=m.ModeDisagreements(), changed_in=[], conformance=m.Conformance(), version_span=[],
        coverage=m.Coverage(), network_summary=[], summary=empty_summary)
    # each shard's observations come in the report's order (:func:`judged_shard`), the shards in theirs
    report.judged_keys = judged_keys  # not a field either: sections.py keeps per-shard parts under these keys
    ix = report.index
    ix.seed_flats(flats)  # the builder knows every value's flat
    report.fragments = fragments  # not a field of the document: what write_parquet joins (not in the JSON)
    report.counts = counts  # nor this: what the summary adds up
    return report, predictions


def derive(report: m.Report, catalog: Catalog, predictions: dict[tuple[str, str, str], conf.Prediction]) -> None:
    """The second stage of :func:`build`: the derived sections of a report :func:`judged_report` made (P0,
    disagreements, mode disagreements, *Changed in*, conformance, version spans, coverage, network summary, summary,
    kink hits), filled in; reads the report and writes none of what the observations table is made of."""
    report.p0 = _p0(report)
    report.disagreements = disagreements(report)
    report.mode_disagreements = mode_disagreements(report)
    report.changed_in = changed_in(report)
    report.conformance = _conformance(report, predictions)
    report.version_span = _version_span(report)
    report.coverage = _coverage(report, catalog)
    report.network_summary = _network_summary(report.networks)
    counts = dict.fromkeys(COUNTED, 0)
    for c in report.counts:  # each shard's, as it was judged (judged_report)
        for k in COUNTED:
            counts[k] += c[k]
    report.summary = _summary(report, counts)
    report.kink_hits = kink_hits(Path(catalog.path).parent / "kinkhits")
    for kind in ("judged", "derived", "shard-environments"):  # what no render has read for a week
        prune_cached(kind)


#: The judging code: a change to any of these files judges every shard again (:func:`judge_digest`).
JUDGE_MODULES: tuple[str, ...] = (
    "oracles/classify.py", "language/geometry.py", "judge/conformance.py", "language/expr.py", "registry.py",
    "dtypes.py", "vocabulary.py",
    "catalog.py", "probe/plan.py", "judge/build.py", "report/dataset.py",
    "report/records.py", "oracles/*.py", "frameworks/*/record.py")


@dataclasses.dataclass
class JudgedShard:
    """One shard judged against the catalog's oracles: what :func:`build` takes from it, kept in the cache
    (:func:`judged_shard`).

    Attributes
    ----------
    environment : str
        The shard's environment id.
    changed : tuple of str
        Cases measured against another definition than the catalog's (:func:`kinkcheck.probe.plan.missing_work`):
        their observations are left out.
    unknown, staged : set of str
        ``case / program`` pairs not in the catalog, and staged cases the shard measured (left out, said).
    observations : list of Observation
        The judged observations, in the report's order (case, program, mode, dtype in catalog order).
    flats : list of (dict, tuple of float)
        Each distinct value of its observations (one object, which every observation of that value holds) and its
        flat (:func:`kinkcheck.vocabulary.flat_value`).
    networks : list of Network
        The shard's network runs, cross-checked against the NumPy oracle.
    predictions : dict
        ``(case, framework, program)`` → the framework's documented rule at the case, for every program judged.
    fragment : pyarrow.Table
        The observations as the Parquet file's columns (:func:`kinkcheck.report.dataset.fragment`), so that the
        file of a render after one new shard is made of kept columns and that shard's.
    """

    environment: str
    changed: tuple[str, ...]
    unknown: set[str]
    staged: set[str]
    observations: list[m.Observation]
    flats: list[tuple[dict[str, Any], tuple[float, ...]]]
    networks: list[m.Network]
    predictions: dict[tuple[str, str, str], conf.Prediction]
    fragment: Any = None
    #: What the summary counts of its observations (:func:`observation_counts`).
    counts: dict[str, int] = dataclasses.field(default_factory=dict)
    #: The cache key this judgement is kept under (:func:`judged_shard`), None where it is not kept.
    key: str | None = None

    def __getstate__(self) -> dict[str, Any]:
        """Pickled with the observations as columns, one list per field (unpickled three times as fast as one
        object per observation: a render reads every shard's entry)."""
        fields = m.Observation.__struct_fields__
        return {**{f: getattr(self, f) for f in self.__dataclass_fields__ if f != "observations"},
                "columns": [[getattr(o, f) for o in self.observations] for f in fields], "fields": fields}

    def __setstate__(self, state: dict[str, Any]) -> None:
        if state.pop("fields") != m.Observation.__struct_fields__:
            raise ValueError("an entry of another Observation")  # the caller judges the shard again
        columns = state.pop("columns")
        self.__dict__.update(state, observations=list(map(m.Observation, *columns)))


def judging_context(catalog: Catalog) -> _Context:
    """What judging a shard against ``catalog`` reads besides the shard: the oracle table (cached on disk), each
    case's oracle numbers, first- and second-order, and those of programs with their own constants."""
    table = oracle_table(catalog)
    oracles = {cid: OracleNumbers.from_json(d) for cid, d in table.items()}
    second = {cid: OracleNumbers.from_json(d["second_order"]) for cid, d in table.items() if d.get("second_order")}
    # programs whose own function differs from the case's by documented constants: labelled by their own
    own_table = own_function_table(catalog)
    own = {k: OracleNumbers.from_json(d) for k, d in own_table.items()}
    return _Context(catalog, table, oracles, second, own, own_table)


class _Context:
    """What judging a shard reads besides the shard (the catalog, its oracles), with memos shared by the shards of
    one build and the digest that keys the cache (:func:`judging_context`)."""

    def __init__(self, catalog: Catalog, table: dict[str, Any], oracles: dict[str, OracleNumbers],
                 second: dict[str, OracleNumbers], own: dict[tuple[str, str, str], OracleNumbers],
                 own_table: dict[tuple[str, str, str], Any]) -> None:
        self.catalog, self.table, self.oracles, self.second, self.own = catalog, table, oracles, second, own
        self.inputs = {c.id: list(c.inputs) for c in catalog}
        self.programs = {(c.id, p.framework, p.id): (c, p) for c in catalog for p in c.programs}
        self.staged_ids = staged_case_ids(catalog.path)
        self.labels: dict[tuple[Any, ...], list[str]] = {}
        self.verdicts: dict[tuple[Any, ...], str | None] = {}
        self.predictions: dict[tuple[str, str, str], conf.Prediction] = {}
        self.checked: dict[bytes, Any] = {}  # network cross-checks: releases often measure the same weights
        self.words: dict[str, str] = {}  # one object per program, mode, dtype and status text, as case ids are
        # the report's order of observations (m.observation_order: case, program, mode, dtype within a shard) as
        # one integer per observation
        self.case_rank = {c.id: i for i, c in enumerate(catalog)}
        self.program_rank = {(c.id, p.framework, p.id): i for c in catalog for i, p in enumerate(c.programs)}
        self.mode_rank = {x: i for i, x in enumerate(m.MODES)}
        self.dtype_rank = {x: i for i, x in enumerate(m.DTYPES)}
        self.n_programs = max((len(c.programs) for c in catalog), default=0) + 1
        self.n_modes, self.n_dtypes = len(m.MODES) + 1, len(m.DTYPES) + 1

        h = hashlib.sha256(judge_digest().encode())
        h.update(json.dumps([catalog.hash, sorted(self.staged_ids), [
            (c.id, c.sympy, c.tie, c.activation, list(c.modes), [[k, v] for k, v in c.at.items()],
             [(p.framework, p.id) for p in c.programs], sorted(f"{k}" for k in c.own_functions)) for c in catalog],
            table, sorted(own_table.items()), COUNTED], default=str, sort_keys=True).encode())
        self.digest = h.hexdigest()[:32]


def judge_digest() -> str:
    """16 hex digits of the judging code (:data:`JUDGE_MODULES`' sources): part of every judged shard's key."""
    if not _JUDGE_DIGEST:

        root = Path(__file__).resolve().parents[1]
        h = hashlib.sha256()
        for path in sorted({p for pattern in JUDGE_MODULES for p in root.glob(pattern)}):
            h.update(path.relative_to(root).as_posix().encode() + b"\0")
            h.update(path.read_bytes())
        _JUDGE_DIGEST.append(h.hexdigest()[:16])
    return _JUDGE_DIGEST[0]


_JUDGE_DIGEST: list[str] = []


def judged_shard(shard: dict[str, Any] | ShardFile, ctx: _Context) -> JudgedShard:
    """``shard`` judged (:func:`_judge`), from the cache when this content was judged before by the same code
    against the same catalog and oracles.

    The cache (``judged/`` in :func:`kinkcheck.cache.cache_dir`) is keyed on the SHA-256 of the shard's content
    (a :class:`kinkcheck.shards.ShardFile`'s digest of its file's bytes, read without unpacking it; a shard given
    whole, its msgpack encoding: every float's bits, so ``-0.0``, ``nan`` and ``null`` stay apart) and
    :attr:`_Context.digest` (the judging code, :func:`judge_digest`, and what the judging reads of the catalog and
    its oracle table); a render after one new or changed shard judges that shard alone. Entries are plain pickles,
    written atomically (:func:`kinkcheck.cache.write_cached`: two renders at once each write a whole entry, the
    same bytes); one that cannot be read is judged again, never an error, and so is a shard msgpack cannot encode.
    """
    h = hashlib.sha256(ctx.digest.encode())
    if isinstance(shard, ShardFile):
        h.update(f"file {shard.digest}".encode())
    else:
        try:
            h.update(msgspec.msgpack.encode(shard))
        except (TypeError, OverflowError, ValueError):  # not msgpack's (an integer past 64 bits): judged, not kept
            return _judge(shard, ctx)
    key = h.hexdigest()[:40]
    cached = read_pickled("judged", key, touch=True)
    if isinstance(cached, JudgedShard) and cached.environment == _environment(shard)["id"]:  # not another's
        cached.key = key
        return cached
    judged = _judge(shard.load() if isinstance(shard, ShardFile) else shard, ctx)
    judged.key = key
    write_pickled("judged", key, judged)
    return judged


def _judge(s: dict[str, Any], ctx: _Context) -> JudgedShard:
    """Judge every observation of shard ``s``: labels (:func:`kinkcheck.oracles.classify.classify` against the case's
    oracle, or the program's own function's), the conformance verdict, the value flat; then its network runs."""
    env = s["environment"]
    catalog, oracles, second, own = ctx.catalog, ctx.oracles, ctx.second, ctx.own
    changed = () if env.get("not_measured") is not None else missing_work(s, catalog).changed  # per case
    fw = env["framework"]
    labels_memo, verdicts, predictions = ctx.labels, ctx.verdicts, ctx.predictions
    case_rank, program_rank, mode_rank, dtype_rank = ctx.case_rank, ctx.program_rank, ctx.mode_rank, ctx.dtype_rank
    n_programs, n_modes, n_dtypes = ctx.n_programs, ctx.n_modes, ctx.n_dtypes
    observations: list[m.Observation] = []
    order_keys: list[int] = []
    used: dict[tuple[str, str, str], conf.Prediction] = {}
    unknown: set[str] = set()
    staged: set[str] = set()
    scalar_derivative: dict[tuple[str, str, str, str, str], float] = {}
    shared: dict[str, tuple[dict[str, Any], tuple[float, ...]]] = {}  # repr of a value → the value, its flat
    words = ctx.words.setdefault
    for ob in s["observations"]:
        if ob["case"] in changed:  # judged against today's oracle, an old point's value could be mislabelled
            continue
        try:
            program = ctx.programs[(ob["case"], fw, ob["program"])]
        except KeyError:
            if ob["case"] in ctx.staged_ids:
                staged.add(ob["case"])
            else:
                unknown.add(f"{ob['case']} / {ob['program']}")
            continue
        case, program = program
        value = ob["value"]
        flat = None
        if value is not None:
            if list(value) != ctx.inputs[case.id]:
                value = {k: value[k] for k in ctx.inputs[case.id]}
            # one object per distinct value and its flat (repr keeps -0.0, 0.0 and nan apart): the kept entry
            # pickles each once
            rkey = repr(value)
            hit = shared.get(rkey)
            if hit is None:
                hit = shared[rkey] = (value, _fast_flat(value))
            value, flat = hit
        order = 2 if ob["mode"] == "second-order" else 1
        own_key = (case.id, fw, ob["program"]) if order == 1 and (case.id, fw, ob["program"]) in own else None
        memo_key = (case.id, order, ob["dtype"], ob["status"], flat, own_key)
        if memo_key not in labels_memo:  # many environments return the same value: classify it once
            if order == 2 and case.id not in second:
                raise ValueError(f"the oracle table has no second-order entry for {case.id}")
            judged = classify(
                flat, second[case.id] if order == 2 else own[own_key] if own_key else oracles[case.id],
                ob["dtype"], error=ob["error"] if ob["status"] == "error" else None,
                unavailable=ob["error"] if ob["status"] == "unavailable" else None,
            )
            labels_memo[memo_key] = judged + ["own-constants"] if own_key and ob["status"] == "ok" else judged
        verdict = None
        if ob["mode"] != "second-order" and ob["dtype"] in conf.JUDGED_DTYPES and ob.get("input") is None:
            pkey = (case.id, fw, ob["program"])
            if pkey not in predictions:
                predictions[pkey] = conf.predict(fw, program.tree, oracles[case.id])
            used[pkey] = predictions[pkey]
            vkey = (pkey, flat if ob["status"] == "ok" else None, ob["dtype"])
            if vkey not in verdicts:
                verdicts[vkey] = conf.verdict(predictions[pkey], vkey[1], ob["dtype"])
            verdict = verdicts[vkey]
        observations.append(m.Observation(  # labels, values and names: one object per distinct one (read-only)
            case=case.id, program=words(ob["program"], ob["program"]), framework=fw, environment=env["id"],
            mode=words(ob["mode"], ob["mode"]), dtype=words(ob["dtype"], ob["dtype"]),
            status=words(ob["status"], ob["status"]), value=value, labels=labels_memo[memo_key],
            error=ob["error"], conformance=verdict, input=ob.get("input")))
        order_keys.append(
            ((case_rank[case.id] * n_programs + program_rank[(case.id, fw, ob["program"])]) * n_modes
             + mode_rank.get(ob["mode"], n_modes - 1)) * n_dtypes + dtype_rank.get(ob["dtype"], n_dtypes - 1))
        if flat is not None and len(flat) == 1:
            scalar_derivative[(env["id"], case.id, ob["program"], ob["dtype"], ob["mode"])] = flat[0]
    # shards list their observations in probing order: the report's order (a stable sort: equal keys, which one
    # observation per cell rules out, would keep the shard's order); the shards themselves come in order
    ordered = sorted(range(len(observations)), key=order_keys.__getitem__)
    observations = [observations[i] for i in ordered]
    return JudgedShard(environment=env["id"], changed=tuple(changed), unknown=unknown, staged=staged,
                       observations=observations, flats=list(shared.values()),
                       networks=_networks(s, catalog, set(changed), scalar_derivative, ctx.checked),
                       predictions=used, fragment=fragment(observations), counts=observation_counts(observations))


def observation_counts(observations: Sequence[m.Observation]) -> dict[str, int]:
    """What the summary counts of ``observations`` (:data:`kinkcheck.judge.sections.COUNTED`): errors and
    unavailable ones, those with each counted label, each conformance verdict (``verdict:<name>``). Kept with a
    shard's judgement; counts of disjoint lists add up."""
    out = dict.fromkeys(COUNTED, 0)
    for o in observations:
        if o.status in ("error", "unavailable"):
            out[o.status] += 1
        for lb in COUNTED_LABELS:
            if lb in o.labels:
                out[lb] += 1
        if o.conformance is not None:
            out[f"verdict:{o.conformance}"] += 1
    return out


def kink_hits(folder: Path) -> list[m.KinkHits]:
    """The kink-hit census measurements in ``folder`` (``references/kinkhits/*.json``, ``kinkcheck census
    --out``), by file name; one that cannot be read is an entry with its one-line error, never a failed
    report. None there: an empty list (the report says it is not measured)."""
    out = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            raw = msgspec.json.decode(path.read_bytes())
            if not isinstance(raw, dict) or raw.get("schema") != "kinkcheck/kinkhits/v1":
                raise ValueError("not a kinkcheck/kinkhits/v1 record")
            fields = {k: raw[k] for k in ("environment", "scale", "data", "cells", "training", "paper", "seconds")
                      if k in raw}
            out.append(msgspec.convert({"file": path.name, **fields}, m.KinkHits))
        except (OSError, ValueError, msgspec.DecodeError, msgspec.ValidationError) as err:
            out.append(m.KinkHits(file=path.name, error=" ".join(str(err).split())[:300]))
    return out


def _fast_flat(value: dict[str, Any]) -> tuple[float, ...]:
    """:func:`flat_value` for the common shapes (finite scalars, vectors of finite floats) without recursion."""
    out: list[float] = []
    for v in value.values():
        if type(v) is float:
            out.append(v)
        elif type(v) is list and all(type(x) is float for x in v):
            out.extend(v)
        else:
            return tuple(flat_value(value))
    return tuple(out)


def _oracle(d: dict[str, Any]) -> m.Oracle:
    """The oracle table's JSON of one case (:meth:`OracleResult.to_json`) as the model's :class:`Oracle`."""
    return msgspec.convert({k: v for k, v in d.items() if k not in ("case", "second_order")}, m.Oracle)


def report_date(measured_at: Sequence[str | None]) -> str:
    """The report's date: the newest of ``measured_at`` (ISO 8601 texts), as written there.

    Derived from the data rather than read from the clock, so a re-render of the same shards is byte-identical.
    A time without an offset counts as UTC; a value that is not ISO 8601 is skipped. ``"unknown"`` when none
    is readable.
    """
    def key(text: str | None) -> dt.datetime | None:
        try:
            t = dt.datetime.fromisoformat(text)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return None
        return t if t.tzinfo else t.replace(tzinfo=dt.UTC)

    dated = [(when, text) for text in measured_at if (when := key(text)) is not None]
    return max(dated)[1] if dated else "unknown"  # type: ignore[return-value]


def _networks(s: dict[str, Any], catalog: Catalog, changed: set[str],
              scalar_derivative: dict[tuple[str, str, str, str, str], float],
              checked: dict[bytes, Any]) -> list[m.Network]:
    """Every network run of shard ``s``, cross-checked against the NumPy oracle under the kink derivative the
    same program returned in the same environment, dtype and mode (``checked``: the cross-checks done so far)."""
    out = []
    env = s["environment"]
    for nw in s["networks"]:
        if nw["case"] in changed:
            continue
        try:
            case = catalog.case(nw["case"])
        except KeyError:
            continue
        mode = nw.get("mode", "reverse")
        kd = scalar_derivative.get((env["id"], nw["case"], nw["program"], nw["dtype"], mode))
        row: dict[str, Any] = {"kink_derivative": None, "ok": None, "max_abs_diff": None, "detail": nw["error"]}
        if nw["status"] == "ok" and kd is not None and case.activation in backprop.ACTIVATIONS:
            ckey = msgspec.json.encode((nw["W1"], nw["W2"], case.activation, kd, nw["dtype"]))
            try:
                if ckey not in checked:  # releases often measure the same weights: check each once
                    checked[ckey] = backprop.crosscheck(nw["W1"], nw["W2"], case.activation, kd, nw["dtype"])
                cc = checked[ckey]
            except OverflowError:  # a finite but huge measured kink derivative: the exact oracle leaves float64
                row.update(kink_derivative=_num(kd), detail=f"not checked: with the kink derivative {kd:.6g} "
                           "the oracle's gradient overflows float64")
            else:
                row.update(kink_derivative=_num(kd), ok=bool(cc.ok), max_abs_diff=_num(cc.max_abs_diff),
                           detail=None if cc.ok else cc.detail)
        elif nw["status"] == "ok":
            row["detail"] = "no scalar observation of this program to take the kink derivative from"
        out.append(m.Network(case=nw["case"], program=nw["program"], framework=env["framework"],
                             environment=env["id"], mode=mode, dtype=nw["dtype"], status=nw["status"],
                             W1=nw["W1"], W2=nw["W2"], **row))
    return out


def _p0(report: m.Report) -> m.P0:
    """The worked example of P0: NumPy oracle rows for relu'(0) = 0, 1/2, 1 and the measured programs."""
    oracle_rows = []
    for kd in P0_KINK_DERIVATIVES:
        g = backprop.two_layer_grads(backprop.P0, "relu", kd, dtype=Fraction)
        oracle_rows.append(m.P0Oracle(kink_derivative=str(kd),
                                      W1=[[_frac_num(v) for v in row] for row in g.dW1.tolist()],
                                      W2=[[_frac_num(v) for v in row] for row in g.dW2.tolist()]))
    ix = report.index
    measured: list[m.P0Row] = []
    relu = ix.case.get("relu@0")
    others = [(fw, prog) for fw in FRAMEWORKS if fw not in {f for f, _ in P0_PROGRAMS} and relu is not None
              for prog in relu.programs_of(fw)[:3]]  # every other framework: its first three relu programs
    for fw, prog in (*P0_PROGRAMS, *others):
        runs = sorted((nw for nw in report.networks if nw.case == "relu@0" and nw.framework == fw
                       and nw.program == prog and nw.dtype == "float32" and nw.mode == "reverse"
                       and not ix.env[nw.environment].isa_cap),  # the worked example: the reference CPU level
                      key=lambda nw: ix.env_rank[nw.environment])
        for nw in runs:  # consecutive releases with the same result share one row
            last = measured[-1] if measured else None
            if last is not None and last.program == prog and last.framework == fw and \
                    (last.W1, last.W2, last.kink_derivative, last.ok, last.status) == \
                    (nw.W1, nw.W2, nw.kink_derivative, nw.ok, nw.status):
                last.environments.append(nw.environment)
                continue
            measured.append(m.P0Row(framework=fw, program=prog, dtype=nw.dtype, status=nw.status,
                                    kink_derivative=nw.kink_derivative, ok=nw.ok, W1=nw.W1, W2=nw.W2, detail=nw.detail,
                                    environments=[nw.environment], W1_minus_oracle0=_minus(nw.W1, oracle_rows[0].W1),
                                    releases=""))
    for row in measured:
        row.releases = ix.releases(row.environments, row.framework)
    net = backprop.P0
    return m.P0(net=m.P0Net(X=net.X.tolist(), W1=net.W1.tolist(), W2=net.W2.tolist(), target=net.target.tolist(),
                            loss="sum((relu(X @ W1) @ W2 - target) ** 2)"),
                oracle=oracle_rows, measured=measured)


