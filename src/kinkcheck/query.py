"""The report's measured values, from any folder: :func:`lookup` a program's rows, :func:`search` an operation
(both also ``kinkcheck.lookup`` and ``kinkcheck.search``).

One read path for every face: it reads ``observations.parquet`` (:mod:`kinkcheck.report.dataset`), only the row
groups that hold the program asked for, never the whole report. :func:`data_path` finds the data:

1. ``$KINKCHECK_REPORTS`` (a folder holding ``observations.parquet`` and ``conventions.json.gz``), if set;
2. the ``reports/`` folder of the source tree the package runs from (a clone, an editable install:
   :func:`source_tree`);
3. the copy installed with the package (``kinkcheck/data/reports/``): the wheel ships the report's data, so an
   installed kinkcheck answers offline, and its data is always the data of its own catalog and version (1 MB of
   Parquet and 4 MB of gzipped JSON, against a probe of hours).

>>> import kinkcheck
>>> rows = kinkcheck.lookup("torch.clamp(x, min=0)", case="relu@0", release="2.14.1")
>>> rows[0].value, rows[0].label
({'x': 0.0}, 'left')
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

__all__ = ["DATA_ENV", "SCHEMA_ID", "DatasetError", "LookupFailed", "Operation", "Row", "Rows", "calls_of", "data_path",
           "default_report", "lookup", "nearest_programs", "operations", "read_table", "search", "source_tree",
           "table_metadata"]

#: The environment variable naming a folder of report data to read instead of the package's.
DATA_ENV = "KINKCHECK_REPORTS"
#: Devices a lookup may ask for (the probe's vocabulary).
_DEVICES = ("cpu", "cuda", "metal")
#: What ``kinkcheck.schema`` in ``observations.parquet``'s metadata says (:mod:`kinkcheck.report.dataset`).
SCHEMA_ID = "kinkcheck/observations/v1"


class DatasetError(ValueError):
    """The Parquet file is missing, unreadable or not kinkcheck's; ``str(err)`` is one line naming it."""


def read_table(path: str | Path, filters: list[tuple[str, str, Any]] | None = None,
               columns: list[str] | None = None) -> Any:
    """The rows of ``observations.parquet`` at ``path`` that pass ``filters`` (pyarrow's ``[(column, op,
    value)]``, all of them), as a ``pyarrow.Table``; only the row groups whose statistics admit a match are read.

    Raises
    ------
    DatasetError
        The file is missing, not Parquet, or not kinkcheck's observations (another ``kinkcheck.schema``).
    """
    import pyarrow.parquet as pq

    p = Path(path)
    table_metadata(p)  # kinkcheck's observations, or DatasetError
    try:
        return pq.read_table(p, filters=filters or None, columns=columns)
    except (OSError, ValueError) as err:
        raise DatasetError(f"{p}: cannot read ({_first_line(err)})") from None


def table_metadata(path: str | Path) -> dict[bytes, bytes]:
    """The key-value metadata of ``observations.parquet`` at ``path`` (no row is read), after checking it is
    kinkcheck's (``kinkcheck.schema`` is :data:`SCHEMA_ID`).

    Raises
    ------
    DatasetError
        The file is missing, not Parquet, or not kinkcheck's observations.
    """
    import pyarrow.parquet as pq

    p = Path(path)
    try:
        meta = pq.read_schema(p).metadata or {}
    except FileNotFoundError:
        raise DatasetError(f"no observations at {p}") from None
    except (OSError, ValueError) as err:  # pyarrow.ArrowInvalid is a ValueError
        raise DatasetError(f"{p}: not a Parquet file ({_first_line(err)})") from None
    found = meta.get(b"kinkcheck.schema", b"").decode()
    if found != SCHEMA_ID:
        raise DatasetError(f"{p}: not kinkcheck observations (schema {found or 'none'}, expected {SCHEMA_ID})")
    return dict(meta)


def _first_line(err: BaseException) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0]


class LookupFailed(ValueError):
    """Nothing to answer with: no data, bad arguments, or no such program (with the nearest ones); ``str(err)``
    is one line."""


class Row(msgspec.Struct, frozen=True, kw_only=True):
    """One measured cell: a program of a case in one environment (framework release on a device and platform),
    mode and dtype; its value (input name → gradient, ``None`` for an error), the labels the classifier gave it
    (``label`` the first, the one the report shows) and its conformance to the oracle."""

    case: str
    program: str
    framework: str
    release: str
    device: str
    platform_tag: str
    environment: str
    mode: str
    dtype: str
    status: str
    value: dict[str, Any] | None
    label: str
    labels: tuple[str, ...]
    conformance: str | None
    error: str | None

    def __str__(self) -> str:
        what = _fmt(self.value) if self.status == "ok" else f"{self.status}: {self.error or 'no value'}"
        return (f"{self.framework} {self.release} {self.device} {self.mode} {self.dtype}  {self.case}  "
                f"{self.program}: {what} ({self.label})")


class Rows(list):  # type: ignore[type-arg]
    """The rows of a lookup (a list of :class:`Row`), printed one per line."""

    def __str__(self) -> str:
        return "\n".join(str(r) for r in self) if self else "(no rows)"


@dataclass(frozen=True)
class Operation:
    """An operation the catalog's programs call (``torch.clamp``, ``.clamp``, ``jax.numpy.clip``): the cases and
    programs that call it, and what the framework's census says of its kink (``""`` where it has no census)."""

    name: str
    framework: str
    cases: tuple[str, ...]
    programs: tuple[str, ...]
    kink: str = ""
    census: str = ""


def _fmt(value: dict[str, Any] | None) -> str:
    if value is None:
        return "none"
    parts = [f"{k}={_num(v)}" for k, v in value.items()]
    return parts[0].split("=", 1)[1] if len(parts) == 1 else ", ".join(parts)


def _num(v: Any) -> str:
    if isinstance(v, list):
        return "[" + ", ".join(_num(x) for x in v) + "]"
    if isinstance(v, float) and v.is_integer():
        return str(int(v)) if abs(v) < 1e16 else repr(v)
    return str(v)


def source_tree() -> bool:
    """Whether the package runs from a source tree (``<root>/src/kinkcheck`` beside ``<root>/pyproject.toml``: a
    clone, an editable install), not from an installed copy, whose parent folders hold other people's files."""
    here = Path(__file__).resolve()
    return here.parents[1].name == "src" and (here.parents[2] / "pyproject.toml").is_file()


def data_path(name: str = "observations.parquet") -> Path:
    """The report data file ``name`` (``observations.parquet``, ``conventions.json.gz``), found as the module
    docstring says.

    Raises
    ------
    LookupFailed
        No folder holds it.
    """
    here = Path(__file__).resolve()
    tried = []
    folder = os.environ.get(DATA_ENV)
    if folder:
        cand = Path(folder) / name
        if cand.is_file():
            return cand
        raise LookupFailed(f"no {name} in {folder} (${DATA_ENV})")
    tree = [here.parents[2] / "reports" / name] if source_tree() else []  # an installed package: its own data
    for cand in (*tree, here.parent / "data" / "reports" / name):
        tried.append(str(cand.parent))
        if cand.is_file():
            return cand
    raise LookupFailed(f"no {name} in {' or '.join(tried)} (set ${DATA_ENV} to a folder that has it, or run "
                       "`nox -s render` in a clone)")


def default_report() -> Path:
    """The report the faces (``grad``, ``cite``, ``migrate``, ``census``) read when none is named: a folder named
    by ``$KINKCHECK_REPORTS``; else ``reports/conventions.json`` (or its ``.gz``) in the current folder, a render of
    one's own; else the package's (:func:`data_path`); ``reports/conventions.json`` when there is none at all
    (the faces then say "no report at reports/conventions.json")."""
    local = Path("reports") / "conventions.json"
    if not os.environ.get(DATA_ENV) and (local.is_file() or local.with_name("conventions.json.gz").is_file()):
        return local
    try:
        return data_path("conventions.json.gz")
    except LookupFailed:
        return local if not os.environ.get(DATA_ENV) else Path(os.environ[DATA_ENV]) / "conventions.json"


def _squeeze(text: str) -> str:
    return "".join(text.split())


def _programs(path: Path) -> list[str]:
    """Every program of the file, read as a dictionary column (its distinct values, not one string a row)."""
    import pyarrow.parquet as pq

    read_table(path, filters=[("program", "==", "")], columns=["program"])  # the file is kinkcheck's
    col = pq.read_table(path, columns=["program"], read_dictionary=["program"]).column("program")
    return sorted({str(v) for chunk in col.chunks for v in chunk.dictionary.to_pylist()})


def nearest_programs(program: str, programs: list[str], n: int = 3) -> list[str]:
    """The ``n`` programs of ``programs`` most like ``program``: those calling the same functions first, then by
    difflib's ratio on the text without spaces (``torch.clamp(x, 0)`` → ``torch.clamp(x, 0, 6)``,
    ``torch.clamp(x, min=0)``, ...)."""
    calls = calls_of(program)
    squeezed = {_squeeze(p): p for p in programs}
    close = difflib.get_close_matches(_squeeze(program), list(squeezed), n=max(n, 12), cutoff=0.5)
    ranked = sorted(close, key=lambda m: (calls_of(squeezed[m]) != calls, -difflib.SequenceMatcher(
        None, _squeeze(program), m).ratio()))
    return [squeezed[m] for m in ranked[:n]]


def calls_of(program: str) -> frozenset[str]:
    """The dotted names ``program`` calls (``torch.clamp``, ``.clamp``), read off its text."""
    import re

    return frozenset(re.findall(r"(?:\b[A-Za-z_][\w.]*|\.\w+)(?=\()", program))


def lookup(program: str | None = None, *, case: str | None = None, framework: str | None = None,
           release: str | None = None, mode: str | None = "reverse", dtype: str | None = "float64",
           device: str | None = "cpu", path: str | Path | None = None,
           platform: str | None = "linux_x86_64") -> Rows:
    """The report's rows for a program (as the catalog writes it; spaces do not matter), narrowed by case,
    framework, release (``"2.14.1"``), mode, dtype, device and platform (``None``: any); in report order: program,
    case, then environments oldest release first. ``path``: an ``observations.parquet`` or the folder that holds it
    (default: :func:`data_path`). ``platform``: the platform tag (:mod:`kinkcheck.platforms`), by default the
    reference machine's, Linux x86-64, so that a release has one row per program, mode and dtype; a shard measured
    elsewhere or capped at a lower x86-64 level has its own (``"macos_arm64"``, ``"linux_x86_64_v3"``).

    Raises
    ------
    LookupFailed
        No data (:func:`data_path`), an empty ``path``, an unknown mode, dtype or device, a program the report does not hold (the
        message names the nearest ones), or a release, case or framework with no row for it (the message names
        the ones there are).
    """
    from kinkcheck.vocabulary import DTYPES, MODES

    for what, given in (("program", program), ("case", case), ("framework", framework), ("release", release),
                        ("platform", platform)):
        if given is not None and not isinstance(given, str):
            raise LookupFailed(f"{what} must be a string, not {type(given).__name__} ({given!r})")
    for what, given, known in (("mode", mode, MODES), ("dtype", dtype, DTYPES), ("device", device, _DEVICES)):
        if given is not None and given not in known:
            raise LookupFailed(f"unknown {what} {given!r} (one of {', '.join(known)})")
    if path is not None and not str(path).strip():
        raise LookupFailed("path is empty: name observations.parquet or the folder that holds it, or leave it out")
    p = Path(path) if path is not None else data_path()
    if p.is_dir():  # a report folder, as --report and $KINKCHECK_REPORTS take it
        p = p / "observations.parquet"
    filters: list[tuple[str, str, Any]] = []
    try:
        if program is not None:
            programs: list[str] = []
            if read_table(p, filters=[("program", "==", program)], columns=["program"]).num_rows:
                exact = [program]  # as the catalog writes it: only its row groups are read
            else:  # another spacing, or not in the report: the distinct programs, for a match or the nearest
                programs = _programs(p)
                exact = [q for q in programs if _squeeze(q) == _squeeze(program)]
            if not exact:
                near = nearest_programs(program, programs)
                hint = f"; nearest: {'; '.join(near)}" if near else ""
                raise LookupFailed(f"no program {program!r} in the report{hint} (kinkcheck.search(NAME) finds the "
                                   "programs that call an operation)")
            filters.append(("program", "==", exact[0]))
        for column, given in (("case", case), ("framework", framework), ("framework_version", release),
                              ("mode", mode), ("dtype", dtype), ("device", device), ("platform_tag", platform)):
            if given is not None:
                filters.append((column, "==", given))
        table = read_table(p, filters=filters)
    except DatasetError as err:
        raise LookupFailed(str(err)) from None
    rows = Rows(_row(r) for r in table.to_pylist())
    if not rows and (release is not None or case is not None or framework is not None):
        raise LookupFailed(_why_empty(p, filters, release, case, framework))
    return rows


def _row(r: dict[str, Any]) -> Row:
    dec = msgspec.json.decode
    return Row(case=r["case"], program=r["program"], framework=r["framework"], release=r["framework_version"],
               device=r["device"], platform_tag=r["platform_tag"], environment=r["environment"], mode=r["mode"],
               dtype=r["dtype"], status=r["status"], value=None if r["value"] is None else dec(r["value"]),
               label=r["label"], labels=tuple(r["labels"]), conformance=r["conformance"], error=r["error"])


def _why_empty(p: Path, filters: list[tuple[str, str, Any]], release: str | None, case: str | None,
               framework: str | None) -> str:
    """Which of ``release``, ``case``, ``framework`` has no row among the others' (one line, the ones there are)."""
    for column, given in (("framework_version", release), ("case", case), ("framework", framework)):
        if given is None:
            continue
        others = [f for f in filters if f[0] != column]
        seen = read_table(p, filters=others or None, columns=[column]).column(column).unique().to_pylist()
        if given not in seen:
            name = "release" if column == "framework_version" else column
            if column == "case" and len(seen) > 12:  # many: the nearest ones
                near = difflib.get_close_matches(given, [str(c) for c in seen], n=5, cutoff=0.3)
                return (f"no case {given!r} for this query ({len(seen)} cases; nearest: "
                        f"{', '.join(near) or 'none'})")
            there = ", ".join(sorted(map(str, seen), key=_version_key)) or "none"
            return f"no {name} {given!r} for this query (there are: {there})"
    return "no row for this query"


def _version_key(text: str) -> Any:
    from packaging.version import InvalidVersion, Version

    try:
        return (0, Version(text), text)
    except InvalidVersion:
        return (1, text, text)


def search(name: str, framework: str | None = None) -> list[Operation]:
    """Every operation the catalog's programs call whose name is ``name`` (``"clamp"`` finds ``torch.clamp``,
    ``.clamp``, ``torch.clamp_`` is not ``clamp``), or whose dotted name or a census alias is ``name``; with the
    cases and programs that call it. Report order of frameworks; within one, by name.

    Raises
    ------
    LookupFailed
        ``name`` is empty.
    """
    if not isinstance(name, str):
        raise LookupFailed(f"search for a name (a string), not {type(name).__name__}")
    want = name.strip().lstrip(".").lower()
    if not want:
        raise LookupFailed("search for what? give an operation name, e.g. clamp")
    out = []
    names: dict[str, dict[str, tuple[str, ...]]] = {}  # each framework's census read once
    for op in operations(framework):
        if op.framework not in names:
            names[op.framework] = _census_names(op.framework)
        spellings = {s.lower() for s in (op.name, *names[op.framework].get(op.name, ()))}
        if want in spellings or want in {s.rsplit(".", 1)[-1] for s in spellings}:
            out.append(op)
    return out


def operations(framework: str | None = None) -> list[Operation]:
    """Every operation (a dotted name, or ``.method``) the catalog's programs call, with the cases and programs
    that call it and its census entry where the framework has a census (``references/census/<framework>.toml``).
    Report order of frameworks; within one, by name."""
    from kinkcheck import expr as ex
    from kinkcheck.catalog import FRAMEWORKS, load_catalog

    catalog = load_catalog()
    by: dict[tuple[str, str], tuple[dict[str, None], dict[str, None]]] = {}
    frameworks = [fw for fw in FRAMEWORKS if framework is None or fw == framework]
    for fw in frameworks:
        for case, program in catalog.programs(fw):
            for node in ex.walk(program.tree):
                if isinstance(node, ex.Name):
                    dotted = node.dotted
                elif isinstance(node, ex.Attr):
                    dotted = f".{node.name}"
                else:
                    continue
                cases, programs = by.setdefault((fw, dotted), ({}, {}))
                cases[case.id] = None
                programs[program.id] = None
    out = []
    for fw in frameworks:
        census = _census(fw)
        for (f, dotted), (cases, programs) in sorted(by.items()):
            if f != fw:
                continue
            op = _census_op(census, dotted)
            out.append(Operation(name=dotted, framework=fw, cases=tuple(cases), programs=tuple(programs),
                                 kink=op.kink if op else "", census=(op.name if op else "")))
    return out


def _census(framework: str) -> Any:
    from kinkcheck.census import CensusError, census_path, load_census

    if not census_path(framework).is_file():
        return None
    try:
        return load_census(framework)
    except CensusError:
        return None


def _census_op(census: Any, dotted: str) -> Any:
    if census is None:
        return None
    try:
        return census.op(dotted)
    except KeyError:
        return None


def _census_names(framework: str) -> dict[str, tuple[str, ...]]:
    """Each spelling of an operation in ``framework``'s census → all its spellings (empty without a census)."""
    census = _census(framework)
    out: dict[str, tuple[str, ...]] = {}
    for op in census.ops if census is not None else ():
        for s in op.spellings:
            out[s] = op.spellings
    return out
