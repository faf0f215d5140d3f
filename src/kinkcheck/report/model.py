"""The report's typed model: one set of types that the builder fills and every consumer reads.

:class:`Report` is the ``kinkcheck/conventions/v2`` document (``reports/conventions.json``): environments,
cases with their oracle, observations, network cross-checks and the derived sections (disagreements, mode
disagreements, *Changed in*, conformance, coverage, summary). Types are :class:`msgspec.Struct` classes, so
the JSON is decoded straight into them, type-checked on the way (:func:`load_report`), encoded without an
intermediate dict (:func:`report_json`), and the JSON Schema is generated from them (:func:`json_schema`,
committed as ``schemas/conventions.v2.json``). The measured records are written in :mod:`kinkcheck.report.records`
and the derived sections in :mod:`kinkcheck.report.derived`; this module is where every consumer reads them.

:class:`ReportIndex` is built once per report and answers every lookup a consumer needs (an environment or
case by id, the observation of one cell, the measured releases of a framework, a cell's flat value); no
module re-indexes the observation list for itself. :func:`release_ranges` and :func:`value_runs` say a run
of consecutive releases as a range (``1.13.1 – 2.13.0``), the way the report shows them.

Numbers
-------
A gradient component is a JSON number or, when not finite, the string ``"nan"``, ``"inf"`` or ``"-inf"``
(JSON has no non-finite numbers); :func:`kinkcheck.vocabulary.encode` writes them,
:func:`kinkcheck.vocabulary.flat_value` reads them back. A ``value`` maps each input name of the case
to a number (scalar input) or a nested list (vector, matrix), row-major, in the case's input order.
"""

from __future__ import annotations

import gzip
import hashlib
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cached_property
from itertools import groupby
from operator import attrgetter
from pathlib import Path
from typing import Any, Literal

import msgspec

from kinkcheck.oracles.classify import LABELS, same_value
from kinkcheck.report.derived import (Across, Brief, ChangedIn, Conformance, ConformanceRow, Coverage, Disagreements,
                                      Group, KinkHitCell, KinkHits, ModeDisagreements, ModeRow, NetworkSummary, Newest,
                                      OperationCoverage, Rule, Summary, TrainingRun, VersionSpan, Within)
from kinkcheck.report.query import DatasetError, decode_cell, read_table
from kinkcheck.report.records import (_S, P0, Case, Environment, Exact, Network, NotMeasuredPart, Observation, Oracle,
                                      P0Net, P0Oracle, P0Row, ProgramRef, Provenance, Value, parts_by_reason,
                                      release_title)
from kinkcheck.shards.validate import _no_gc, read_first_member, read_text, shape_of
from kinkcheck.vocabulary import COMPARISON_RECORDS, DTYPES, MODE_INFO, MODES, flat_value, flatten

__all__ = [
    "P0",
    "SCHEMA_ID",
    "Across",
    "Brief",
    "Case",
    "ChangedIn",
    "Conformance",
    "ConformanceRow",
    "Coverage",
    "Disagreements",
    "Environment",
    "Exact",
    "Group",
    "KinkHitCell",
    "KinkHits",
    "ModeDisagreements",
    "ModeRow",
    "NotMeasuredPart",
    "parts_by_reason",
    "Network",
    "NetworkSummary",
    "Newest",
    "Observation",
    "OperationCoverage",
    "Oracle",
    "P0Net",
    "P0Oracle",
    "P0Row",
    "ProgramRef",
    "Provenance",
    "Report",
    "ReportError",
    "ReportIndex",
    "Rule",
    "Summary",
    "TrainingRun",
    "VersionSpan",
    "Within",
    "COMPARISON_RECORDS",
    "DTYPES",
    "LABELS",
    "MODES",
    "MODE_INFO",
    "differs",
    "flat_value",
    "flatten",
    "json_schema",
    "load_report",
    "release_ranges",
    "release_title",
    "report_json",
    "value_runs",
]

SCHEMA_ID = "kinkcheck/conventions/v2"


class ReportError(ValueError):
    """A report file that cannot be used: missing, unreadable, not JSON, not a ``kinkcheck/conventions/v2``
    document, or one whose parts have the wrong types or refer to what it does not hold. ``str(err)`` is one
    line naming the file and the first problem."""


# --------------------------------------------------------------------------- provenance and environments


# --------------------------------------------------------------------------- cases and their oracle


# --------------------------------------------------------------------------- observations and networks


# --------------------------------------------------------------------------- derived sections


class Report(_S, kw_only=True, omit_defaults=False, dict=True):
    """The whole ``kinkcheck/conventions/v2`` document."""

    schema: Literal["kinkcheck/conventions/v2"] = SCHEMA_ID
    provenance: Provenance
    environments: list[Environment]
    cases: list[Case]
    observations: list[Observation]
    #: Where the observations are when ``observations`` is empty: a file name beside the JSON (the committed
    #: report keeps them only in ``observations.parquet``: :mod:`kinkcheck.report.dataset`); ``None``: inline.
    observations_file: str | None = None
    #: The counts: last of the head (the fields above: what a reader of some observations decodes, :class:`_Head`;
    #: the gzipped report holds them in its first member, :func:`head_end`); the derived sections follow.
    summary: Summary
    networks: list[Network]
    p0: P0
    disagreements: Disagreements
    mode_disagreements: ModeDisagreements
    changed_in: list[ChangedIn]
    conformance: Conformance
    version_span: list[VersionSpan]
    coverage: Coverage
    network_summary: list[NetworkSummary]
    kink_hits: list[KinkHits] = []

    @cached_property
    def index(self) -> ReportIndex:
        """The lookups over this report (:class:`ReportIndex`), built on first use."""
        return ReportIndex(self)


# --------------------------------------------------------------------------- releases as ranges


def release_ranges(ids: Iterable[str], among: Sequence[Environment]) -> str:
    """The environments ``ids`` as ranges of consecutive releases of ``among`` (an ordered list, e.g. the
    measured releases of one framework): ``"1.13.1 – 2.13.0, 2.15.0"``. A run of two reads ``"a, b"``; a run never
    spans two places (``"2.14.1, 2.15.0, 2.11.0 cuda"``, not ``"2.14.1 – 2.11.0 cuda"``); ids not in ``among`` are
    named alone at the end, in their given order."""
    pos = {e.id: i for i, e in enumerate(among)}
    wanted = list(dict.fromkeys(ids))
    inside = sorted(pos[i] for i in wanted if i in pos)
    parts: list[str] = []
    start = prev = None
    for p in [*inside, None]:
        if start is not None and (p is None or p != prev + 1 or among[p].place != among[prev].place):
            a, b = among[start], among[prev]
            if start == prev:
                parts.append(a.title)
            elif prev == start + 1:
                parts.extend((a.title, b.title))
            else:
                parts.append(f"{a.title} – {b.title}")
            start = None
        if p is not None and start is None:
            start = p
        prev = p
    parts.extend(i for i in wanted if i not in pos)
    return ", ".join(parts)


def value_runs(items: Sequence[tuple[Environment, Any]]) -> list[tuple[Environment, Environment, Any]]:
    """Consecutive items with equal keys merged: ``[(env, key), …]`` (release order) → ``[(first, last,
    key), …]``; what the "1.13.1 – 2.13.0: 1 right" / "2.14.1, 2.15.0: 0 left" view is made of."""
    runs: list[tuple[Environment, Environment, Any]] = []
    for env, key in items:
        if runs and runs[-1][2] == key:
            runs[-1] = (runs[-1][0], env, key)
        else:
            runs.append((env, env, key))
    return runs


# --------------------------------------------------------------------------- the index


CellKey = tuple[str, str, str, str, str, str]  # case, framework, program, mode, environment, dtype
_CELL_KEY = attrgetter("case", "framework", "program", "mode", "environment", "dtype")
_ENVIRONMENT, _MODE, _DTYPE = attrgetter("environment"), attrgetter("mode"), attrgetter("dtype")


class ReportIndex:
    """Lookups over one :class:`Report`, built once (about 0.1 s for 100 000 observations).

    Attributes
    ----------
    env, case : dict
        Environment / case by id.
    env_rank, case_rank : dict[str, int]
        Report order (environments: framework, then version, then device).
    cell : dict[CellKey, Observation]
        ``(case, framework, program, mode, environment, dtype)`` → observation.
    by_environment : dict[str, list[Observation]]
        Observations per environment id, report order.
    measured : list[Environment]
        Environments with at least one observation, report order.
    columns : dict[str, list[Environment]]
        Framework → its measured environments (all devices), report order: a case table's columns.
    env_modes : dict[str, list[str]]
        Environment id → modes it has observations in, first-seen order.
    dtypes, modes : list[str]
        Dtypes and modes with at least one observation, in :data:`DTYPES` / :data:`MODES` order.
    """

    def __init__(self, report: Report) -> None:
        self.report = report
        self.env = {e.id: e for e in report.environments}
        self.env_rank = {e.id: i for i, e in enumerate(report.environments)}
        self.case = {c.id: c for c in report.cases}
        self.case_rank = {c.id: i for i, c in enumerate(report.cases)}
        obs = report.observations  # loops in C (map, zip, groupby): a render builds this over every observation
        self.cell: dict[CellKey, Observation] = dict(zip(map(_CELL_KEY, obs), obs))
        self.by_environment: dict[str, list[Observation]] = {}
        for env, run in groupby(obs, key=_ENVIRONMENT):  # a shard's observations come together
            self.by_environment.setdefault(env, []).extend(run)
        self.env_modes: dict[str, list[str]] = {
            env: list(dict.fromkeys(map(_MODE, items))) for env, items in self.by_environment.items()}
        dtypes: set[str] = set(map(_DTYPE, obs))
        modes: set[str] = {mode for ms in self.env_modes.values() for mode in ms}
        self.dtypes = [d for d in DTYPES if d in dtypes] + sorted(dtypes - set(DTYPES))
        self.modes = [m for m in MODES if m in modes] + sorted(modes - set(MODES))
        self.measured = [e for e in report.environments if e.id in self.by_environment]
        self.columns: dict[str, list[Environment]] = {}
        for e in self.measured:
            self.columns.setdefault(e.framework, []).append(e)
        #: id of a value → (the value, its flat): the value held, so that its id is never another's
        self._flat: dict[int, tuple[Any, tuple[float, ...]]] = {}

    def flat(self, ob: Observation | Brief) -> tuple[float, ...] | None:
        """``ob.value`` as flat floats in the case's component order (non-finite strings decoded); None
        when there is no value. Cached per value object (equal values of a shard are one object: the builder
        seeds the cache with each once, :meth:`seed_flats`)."""
        value = ob.value
        if value is None:
            return None
        hit = self._flat.get(id(value))
        if hit is not None and hit[0] is value:
            return hit[1]
        out = tuple(flat_value(value))
        self._flat[id(value)] = (value, out)
        return out

    def seed_flats(self, pairs: Iterable[tuple[Any, tuple[float, ...]]]) -> None:
        """Take each value's flat as known (``(value, flat)`` pairs: what judging computed)."""
        self._flat.update((id(v), (v, f)) for v, f in pairs)

    def releases(self, ids: Iterable[str], framework: str | None = None, device: str | None = None) -> str:
        """:func:`release_ranges` of ``ids`` among the measured releases of their framework (that of the first
        id unless given; and at ``device`` when given: an :attr:`Environment.place`). Raises KeyError for a first id the report lacks."""
        ids = list(ids)
        if not ids:
            return ""
        first = self.env[ids[0]]
        fw = framework or first.framework
        among = [e for e in self.columns.get(fw, []) if device is None or e.place == device]
        return release_ranges(ids, among)

    def newest(self, framework: str, device: str = "cpu") -> Environment | None:
        """The newest measured environment of ``framework`` at ``device`` (a :attr:`Environment.place`: the
        device, then ``-<platform tag>`` off Linux x86-64); None when there is none."""
        envs = [e for e in self.columns.get(framework, []) if e.place == device]
        return envs[-1] if envs else None

    def modes_release(self, framework: str, among: Sequence[Environment] | None = None) -> Environment | None:
        """The release whose modes a case page tabulates: the newest CPU release of ``framework`` measured in
        more than one mode (another device when no CPU release is); None when there is none. ``among``: the
        framework's measured environments, report order (default: those with observations here)."""
        columns = self.columns.get(framework, []) if among is None else among
        several = [e for e in columns if len(self.env_modes.get(e.id, ())) > 1]
        cpu = [e for e in several if e.place == "cpu"]
        return (cpu or several or [None])[-1]

    def frameworks(self) -> list[str]:
        """Frameworks with at least one environment record (measured or not), report order."""
        return list(dict.fromkeys(e.framework for e in self.report.environments))

    def observations(self, *, case: str | None = None, framework: str | None = None, program: str | None = None,
                     mode: str | None = None, dtype: str | None = None, environment: str | None = None
                     ) -> list[Observation]:
        """The observations matching every given field, report order."""
        pool: Iterable[Observation] = (self.by_environment.get(environment, []) if environment is not None
                                       else self.report.observations)
        return [o for o in pool if (case is None or o.case == case) and (framework is None or o.framework == framework)
                and (program is None or o.program == program) and (mode is None or o.mode == mode)
                and (dtype is None or o.dtype == dtype)]


# --------------------------------------------------------------------------- JSON in and out

_ENCODER = msgspec.json.Encoder()


def report_json(report: Report, observations_file: str | None = None) -> bytes:
    """The report as JSON bytes ending in a newline: one line per top-level key and one line per element of
    a top-level list (an observation), so a re-render that changes one observation changes one line in
    version control. Field order is the types' order; the same report gives the same bytes.

    ``observations_file``: write no observations, and name the file beside the JSON that holds them (the
    render writes ``observations.parquet``; :func:`load_report` reads them back from it)."""
    enc = _ENCODER.encode
    parts = []
    for name in report.__struct_fields__:
        v = getattr(report, name)
        if observations_file is not None and name in ("observations", "observations_file"):
            v = [] if name == "observations" else observations_file
        key = enc(name)
        if isinstance(v, list) and v:
            parts.append(key + b":[\n" + b",\n".join(enc(x) for x in v) + b"\n]")
        else:
            parts.append(key + b":" + enc(v))
    return b"{\n" + b",\n".join(parts) + b"\n}\n"


_DECODER = msgspec.json.Decoder(Report)


class _HeadEnvironment(Environment, kw_only=True):
    """An environment as a reader of some observations decodes it: its ``history`` (how each part of a merged
    shard was measured: three quarters of the environments' JSON, read by no face) kept as its JSON text: it encodes
    back as written (``msgspec.json.encode``), ``msgspec.to_builtins`` refuses it."""

    history: msgspec.Raw = msgspec.Raw(b"null")  # type: ignore[assignment]


class _Head(_S, kw_only=True):
    """What a reader of some observations needs of the report: its identity, environments, cases and summary
    (the derived sections are skipped unparsed into types: a sixth of the decoding)."""

    schema: Literal["kinkcheck/conventions/v2"]
    provenance: Provenance
    environments: list[_HeadEnvironment]
    cases: list[Case]
    observations: list[Observation]
    observations_file: str | None = None
    summary: Summary


_HEAD_DECODER = msgspec.json.Decoder(_Head)
#: What closes a head cut from a report's JSON (:func:`head_end`) into a JSON document of its own.
HEAD_CLOSE = b"\n}\n"


def head_end(data: bytes) -> int | None:
    """Where the head ends in ``data``, a report's JSON as :func:`report_json` writes it: the offset of the comma
    after the last head field (``summary``; :class:`_Head` lists them, first in :class:`Report`), so that
    ``data[:end] + HEAD_CLOSE`` is the head alone as JSON; None for JSON of another layout. The render gzips the
    head and the rest as two members (:func:`kinkcheck.report.model.gzip_bytes`): ``cite``, ``ask`` and ``diff`` inflate
    only the first; any gunzip reads the file as one."""
    head = _Head.__struct_fields__
    fields = Report.__struct_fields__
    if fields[:len(head)] != head or len(fields) == len(head):
        return None
    at = data.find(b",\n" + _ENCODER.encode(fields[len(head)]) + b":")  # the first field after the head, at a
    return None if at < 0 else at  # line's start: a string value never holds a bare newline


def gzip_bytes(data: bytes, split: int | None = None) -> bytes:
    """``data`` gzipped deterministically (level 9, no file name, mtime 0), for ``conventions.json.gz``; with
    ``split``, as two gzip members, ``data[:split]`` then the rest (the report's head, then its derived sections:
    :func:`kinkcheck.report.model.head_end`), which any gunzip reads as one file."""
    if split is None:
        return gzip.compress(data, compresslevel=9, mtime=0)
    return gzip.compress(data[:split], compresslevel=9, mtime=0) + gzip.compress(data[split:], compresslevel=9, mtime=0)


def _report_of_head(head: _Head) -> Report:
    """A :class:`Report` with ``head``'s parts and empty derived sections (they describe every observation)."""
    return Report(provenance=head.provenance, environments=head.environments, cases=head.cases,
                  observations=head.observations, observations_file=head.observations_file, networks=[],
                  p0=P0(net=P0Net(X=[], W1=[], W2=[], target=[], loss=""), oracle=[], measured=[]),
                  disagreements=Disagreements(), mode_disagreements=ModeDisagreements(), changed_in=[],
                  conformance=Conformance(), version_span=[], coverage=Coverage(), network_summary=[],
                  summary=head.summary)


def decode_report(data: bytes | str, name: str = "report", head: bool = False) -> Report:
    """Decode and check a report (types, then cross-references: :func:`report_problem`).

    Parameters
    ----------
    data : bytes or str
        The JSON text of ``reports/conventions.json`` (UTF-8).
    name : str
        What error messages call the document (its path).

    Raises
    ------
    ReportError
        Not JSON, not a v2 report, a mistyped part (``"$.observations[12].status: Expected `…`"``), an
        observation naming an environment, case or program the report does not hold.

    ``head``: decode the environments, cases, summary and observations only, the derived sections left empty.
    """
    try:
        report = _report_of_head(_HEAD_DECODER.decode(data)) if head else _DECODER.decode(data)
    except (msgspec.DecodeError, UnicodeDecodeError) as err:
        _refuse_not_utf8(data, name)  # a byte that is not UTF-8 reads as "not JSON" or a key missing: say which
        if not isinstance(err, msgspec.ValidationError):
            raise ReportError(f"{name}: not JSON ({_one_line(err)})") from None
        head = data[:4000] if isinstance(data, str) else data[:4000].decode("utf-8", "replace")
        if '"schema"' in head and SCHEMA_ID not in head:
            raise ReportError(f"{name}: not a {SCHEMA_ID} report (an older or foreign document: re-render it "
                              "with `kinkcheck report`)") from None
        raise ReportError(f"{name}: malformed kinkcheck report ({_one_line(err)})") from None
    except RecursionError:
        raise ReportError(f"{name}: cannot read (JSON nested too deeply)") from None
    problem = report_problem(report)
    if problem:
        raise ReportError(f"{name}: malformed kinkcheck report ({problem})")
    return report


def _refuse_not_utf8(data: bytes | str, name: str) -> None:
    """ReportError "not UTF-8 text" for bytes that are not: the decoder calls them "not JSON", or misses a key."""
    if isinstance(data, bytes):
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as bad:
            raise ReportError(f"{name}: cannot read (not UTF-8 text: byte {bad.start})") from None


def report_path(path: str | Path) -> Path:
    """``path``, or ``path.gz`` when only that exists: the repository commits the report gzipped
    (``reports/conventions.json.gz``, byte-identical for the same shards) and ignores the plain JSON that
    ``kinkcheck report`` writes beside it, so a fresh clone reads the compressed one. A folder stands for the
    report in it (``reports`` → ``reports/conventions.json.gz``)."""
    p = Path(path)
    if p.is_dir():
        p = p / "conventions.json"
    gz = p.with_name(p.name + ".gz")
    return gz if p.suffix != ".gz" and not os.path.lexists(p) and gz.is_file() else p


def load_report(path: str | Path, missing: str | None = None,
                select: Callable[[Report], Iterable[str]] | None = None,
                environments: Sequence[str] | None = None,
                where: Callable[[Report], Mapping[str, Sequence[str]] | None] | None = None) -> Report:
    """Read ``path`` (``reports/conventions.json``, or its gzipped ``.json.gz``: :func:`report_path`) as a
    :class:`Report` (:func:`decode_report`).

    The last report read is kept (one entry, keyed by path, size, mtime and inode): reading the same
    unchanged file again returns the same object, so callers must not modify it.

    ``select``: given the report without its observations, the programs whose observations to read (the
    Parquet file's row groups of other programs are not read: ``kinkcheck cite`` answers in a fraction of a
    second); the report then holds only those, and none of the derived sections (disagreements, changed in,
    conformance …: they describe every observation). Not kept as the last report. ``environments`` (with
    ``select``): only their observations too (``kinkcheck diff REPORT#ENV`` reads one environment's); ``where``
    (with ``select``): given the same report, more columns' kept values (``{"case": [...], "mode": [...]}``:
    ``kinkcheck cite`` reads the rows of the one case, mode and dtype it states; None: no more).

    Raises
    ------
    ReportError
        Missing (``missing`` when given, else "no report at PATH"), not a regular file, unreadable, or
        anything :func:`decode_report` refuses.
    """
    with _no_gc():  # decoding makes 100,000s of objects and no cycle: the collector would walk them again and again
        return _load_report(path, missing, select, environments, where)


def _load_report(path: str | Path, missing: str | None, select: Callable[[Report], Iterable[str]] | None,
                 environments: Sequence[str] | None,
                 where: Callable[[Report], Mapping[str, Sequence[str]] | None] | None) -> Report:
    p = report_path(path)
    try:
        st = p.stat()
        key: Any = (str(p.resolve()), st.st_size, st.st_mtime_ns, st.st_ino) if p.is_file() else None
    except OSError:
        key = None
    if select is None and key is not None and _LAST[0] == key:  # `diff R#a R#b` reads one report twice
        return _LAST[1]  # type: ignore[no-any-return]
    if select is None:  # a folder, a FIFO, bytes that are not UTF-8: one line
        data = read_text(p, ReportError, missing or f"no report at {p}")
    else:  # the head: a render's gzip holds it in its first member, the derived sections in the next (head_end)
        data, more = read_first_member(p, ReportError, missing or f"no report at {p}")
        data = data + HEAD_CLOSE if more else data
    report = decode_report(data, str(p), head=select is not None)
    if report.observations_file is not None:
        attach_observations(report, p.parent, str(p), None if select is None else list(select(report)),
                            None if select is None else environments,
                            None if select is None or where is None else where(report))
    elif select is not None:
        wanted = set(select(report))
        kept = {column: set(values) for column, values in ((where and where(report)) or {}).items()}
        report.observations = [o for o in report.observations if o.program in wanted
                               and (environments is None or o.environment in environments)
                               and all(getattr(o, column) in values for column, values in kept.items())]
    if select is None:
        _LAST[:] = [key, report]
    return report


def observation_order(report: Report) -> Callable[[Observation], tuple[int, ...]]:
    """The sort key of the report's order of observations: environment (the report's order), case, program
    (the case's order), mode and dtype (:data:`MODES`, :data:`DTYPES`). The builder sorts by it and
    :func:`attach_observations` restores it from the Parquet file (sorted by case, then program)."""
    env = {e.id: i for i, e in enumerate(report.environments)}
    case = {c.id: i for i, c in enumerate(report.cases)}
    program = {(c.id, q.framework, q.program): i for c in report.cases for i, q in enumerate(c.programs)}
    mode = {x: i for i, x in enumerate(MODES)}
    dtype = {x: i for i, x in enumerate(DTYPES)}
    big = 1 << 30  # an unknown name sorts last (report_problem names it)

    def key(o: Observation) -> tuple[int, ...]:
        return (env.get(o.environment, big), case.get(o.case, big), program.get((o.case, o.framework, o.program), big),
                mode.get(o.mode, big), dtype.get(o.dtype, big))

    return key


def _flat(ob: Observation) -> Sequence[float]:
    return flat_value(ob.value or {})


def differs(old: Observation, new: Observation, dtype: str,
            flat: Callable[[Observation], Sequence[float] | None] = _flat) -> bool:
    """Whether two observations of the same key show different conventions: another status, or values that
    differ beyond ``dtype``'s tolerance (:func:`kinkcheck.oracles.classify.same_value`; NaN equals NaN): the one
    comparison the builder, the views and ``kinkcheck diff`` share. ``flat``
    gives an observation's flat value (the report's builder passes its cached :meth:`ReportIndex.flat`)."""
    if old.status != new.status:
        return True
    if old.status != "ok":
        return False
    a, b = flat(old), flat(new)
    if a is None or b is None:  # "ok" without a value: only another such one is the same
        return (a is None) != (b is None)
    return a != b and not same_value(a, b, dtype)


def read_observations(path: str | Path, programs: Sequence[str] | None = None,
                      environments: Sequence[str] | None = None,
                      where: Mapping[str, Sequence[str]] | None = None) -> list[Observation]:
    """The rows of ``observations.parquet`` (:mod:`kinkcheck.report.dataset`) as :class:`Observation` objects,
    exactly, in the file's order (case, program, environments, modes, dtypes); ``programs``: only theirs (the
    other row groups are not read); ``environments``: only theirs; ``where``: only the
    rows whose column holds one of its values (``{"case": ["relu@0"]}``). Equal values are one shared object: treat
    the observations as read-only, as every reader of a report does.

    Raises
    ------
    DatasetError
        As :func:`kinkcheck.report.query.read_table`, or a ``value`` or ``input`` cell that is not a JSON object
        (:func:`kinkcheck.report.query.decode_cell`).
    """
    filters = [(column, "in", list(names) or [""])  # none: no row (pyarrow refuses an empty "in" list)
               for column, names in (*(where or {}).items(), ("program", programs), ("environment", environments))
               if names is not None]
    table = read_table(path, filters or None)
    col = {name: table.column(name).to_pylist() for name in (
        "case", "program", "framework", "environment", "mode", "dtype", "status", "value", "labels", "error",
        "conformance", "input")}
    decoded: dict[str, Any] = {}  # a few hundred distinct values among 500,000 rows: decode each once

    def values(texts: list[str | None], column: str) -> list[Any]:
        out = []
        for t in texts:
            if t is None:
                out.append(None)
                continue
            v = decoded.get(t)
            if v is None:
                v = decoded[t] = decode_cell(t, path, column)
            out.append(v)
        return out

    return [Observation(case=c, program=p, framework=f, environment=e, mode=m, dtype=d, status=s, value=v,
                        labels=lb, error=er, conformance=co, input=i)
            for c, p, f, e, m, d, s, v, lb, er, co, i in zip(
                col["case"], col["program"], col["framework"], col["environment"], col["mode"], col["dtype"],
                col["status"], values(col["value"], "value"), col["labels"], col["error"], col["conformance"],
                values(col["input"], "input"), strict=True)]


def attach_observations(report: Report, folder: Path, name: str, programs: Sequence[str] | None = None,
                        environments: Sequence[str] | None = None,
                        where: Mapping[str, Sequence[str]] | None = None) -> None:
    """Fill ``report.observations`` from ``folder / report.observations_file`` (the Parquet file the render
    wrote beside the JSON), in the report's order (:func:`observation_order`), after checking the file is the
    one the JSON was written with (``provenance.observations_sha256``); ``programs``, ``environments``,
    ``where``: only theirs (:func:`read_observations`).

    Raises
    ------
    ReportError
        The file is missing, unreadable, not kinkcheck's, another render's, or names what the report lacks.
    """
    file = Path(report.observations_file or "")
    if file.name != str(file) or file.name in ("", ".", ".."):
        raise ReportError(f"{name}: observations_file {report.observations_file!r} is not a file name beside it")
    path = folder / file
    try:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as err:
        raise ReportError(f"{name}: its observations {path} cannot be read ({err.strerror or err}); "
                          "re-render the report with `kinkcheck report`") from None
    if digest != report.provenance.observations_sha256:
        raise ReportError(f"{name}: {path} is not the observations it was rendered with (SHA-256 {digest[:12]}…, "
                          f"expected {(report.provenance.observations_sha256 or 'none')[:12]}…): take both files "
                          "from one render")
    try:
        obs = read_observations(path, programs, environments, where)
    except DatasetError as err:
        raise ReportError(f"{name}: {err}") from None
    obs.sort(key=observation_order(report))
    report.observations = obs
    problem = report_problem(report)
    if problem:
        raise ReportError(f"{name}: malformed kinkcheck report ({problem})")


#: The last report :func:`load_report` decoded, keyed by (path, size, mtime, inode): one entry, so a
#: long-lived process keeps at most one report alive.
_LAST: list[Any] = [None, None]


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split())[:240]


_LABELS = frozenset(LABELS)


def report_problem(report: Report) -> str | None:
    """The first cross-reference problem of a report (the decoder checks types and enums; this checks them
    again for a :class:`Report` built in Python, where nothing did): an id
    listed twice, an observation of an unknown environment, case or program, a framework that is not its
    environment's, an unknown mode, dtype or label, a value naming other inputs than its case or not of the
    shape of its point (numbers or ``"nan"``/``"inf"``/``"-inf"``, :func:`kinkcheck.shards.validate.shape_of`);
    None when the report is usable."""
    envs: dict[str, str] = {}
    for i, e in enumerate(report.environments):
        if e.id in envs:
            return f"environments[{i}]: environment {e.id!r} listed twice"
        envs[e.id] = e.framework
    inputs: dict[str, tuple[str, ...]] = {}
    shapes: dict[str, dict[str, tuple[int, ...] | None]] = {}
    programs: set[tuple[str, str, str]] = set()
    for i, c in enumerate(report.cases):
        if c.id in inputs:
            return f"cases[{i}]: case {c.id!r} listed twice"
        if not c.at:
            return f"cases[{i}]: at names no input"
        shapes[c.id] = {k: shape_of(v) for k, v in c.at.items()}
        if None in shapes[c.id].values():
            return f"cases[{i}]: at must give each input a number or a rectangular list of numbers"
        inputs[c.id] = tuple(c.at)
        programs.update((c.id, p.framework, p.program) for p in c.programs)
    modes, dtypes = frozenset(MODES), frozenset(DTYPES)
    good: set[tuple[str, ...]] = set()
    for i, o in enumerate(report.observations):
        fw = envs.get(o.environment)
        if fw is None:
            return f"observations[{i}]: environment {o.environment!r} is not among the report's environments"
        if fw != o.framework:
            return f"observations[{i}]: framework {o.framework!r} but environment {o.environment} is {fw}"
        if (o.case, o.framework, o.program) not in programs:
            if o.case not in inputs:
                return f"observations[{i}]: case {o.case!r} is not among the report's cases"
            return f"observations[{i}]: program {o.program!r} is not a {o.framework} program of case {o.case}"
        if o.mode not in modes:  # the decoder refuses these; a Report built in Python is not checked by it
            return f"observations[{i}]: unknown mode {o.mode!r}"
        if o.dtype not in dtypes:
            return f"observations[{i}]: unknown dtype {o.dtype!r}"
        labels = tuple(o.labels)
        if labels not in good:
            if not labels or not _LABELS.issuperset(labels):
                return f"observations[{i}]: labels must be a non-empty list of known labels, not {list(labels)}"
            good.add(labels)
        if o.status == "ok" and o.value is None:
            return f"observations[{i}]: status ok without a value"
        if o.value is not None and tuple(o.value) != inputs[o.case]:
            return (f"observations[{i}]: value names {', '.join(o.value)}; case {o.case} has inputs "
                    f"{', '.join(inputs[o.case])}")
        for what, v in (("value", o.value), ("input", o.input)):
            if v is not None and not _fits(v, shapes[o.case], shape_of):
                return (f"observations[{i}]: {what} {_one_line(repr(v))[:60]} is not numbers of the shape of case "
                        f"{o.case}'s point")
    return None


def _fits(value: Value, shapes: dict[str, tuple[int, ...] | None], shape_of: Any) -> bool:
    """Whether each entry of ``value`` is an input of the point with its shape (a float scalar: at once)."""
    for k, v in value.items():
        want = shapes.get(k)
        if not (type(v) is float and want == ()) and (want is None or shape_of(v) != want):
            return False
    return True


def json_schema() -> dict[str, Any]:
    """The JSON Schema (2020-12) of :class:`Report`, generated from the types (committed as
    ``schemas/conventions.v2.json`` by ``python -m kinkcheck.report.schema``; a test checks it is current)."""
    schema = msgspec.json.schema(Report)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": "https://kinkcheck.invalid/schemas/conventions.v2.json",
            "title": "kinkcheck report (kinkcheck/conventions/v2)",
            "description": "Generated from kinkcheck.report.model by `python -m kinkcheck.report.schema`; do "
                           "not edit by hand.", **schema}

