"""The report's measured values, from any folder: :func:`lookup` a program's rows, :func:`search` an operation
(both also ``kinkcheck.lookup`` and ``kinkcheck.search``).

One read path for every face: it reads ``observations.parquet`` (:mod:`kinkcheck.report.dataset`), only the row
groups that hold the program or case asked for (the table's row-group index: :func:`read_table`), never the whole
report. :func:`data_path` finds the data:

1. ``$KINKCHECK_REPORTS`` (a folder holding ``observations.parquet`` and ``conventions.json.gz``), if set;
2. the ``reports/`` folder of the source tree the package runs from (a clone, an editable install:
   :func:`source_tree`);
3. the copy installed with the package (``kinkcheck/data/reports/``): the wheel ships the report's data, so an
   installed kinkcheck answers offline, and its data is always the data of its own catalog and version (2 MB of
   Parquet and 0.5 MB of gzipped JSON, against a probe of hours).

>>> import kinkcheck
>>> rows = kinkcheck.lookup("torch.clamp(x, min=0)", case="relu@0", release="2.14.1")
>>> rows[0].value, rows[0].label
({'x': 0.0}, 'left')
"""

from __future__ import annotations

import ast
import difflib
import gzip
import hashlib
import json
import os
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from kinkcheck.errors import UsageError

__all__ = ["COLUMNS", "DATA_ENV", "SCHEMA_ID", "DatasetError", "LookupFailed", "Operation", "ReportUnreadable", "Row",
           "Rows", "calls_of", "check_one_render", "data_path", "decode_cell", "default_report", "file_metadata",
           "load_rules", "lookup", "nearest_programs", "operations", "read_table", "row_groups", "rules_path", "search",
           "source_tree", "table_metadata"]

#: The environment variable naming a folder of report data to read instead of the package's.
DATA_ENV = "KINKCHECK_REPORTS"
#: The platform a lookup reads by default: the reference machine's (:data:`kinkcheck.platforms.DEFAULT`).
_PLATFORM = "linux_x86_64"
#: What ``kinkcheck.schema`` in ``observations.parquet``'s metadata says (:mod:`kinkcheck.report.dataset`).
SCHEMA_ID = "kinkcheck/observations/v1"
#: The key of the table's row-group index in its metadata: ``{"case": {case: [row group, ...]}, "program":
#: {program: [row group, ...]}}`` (:func:`kinkcheck.report.dataset.row_group_index`).
ROW_GROUPS = b"kinkcheck.row_groups"
#: The columns the row-group index covers.
_INDEXED = ("case", "program")
#: The columns of ``observations.parquet`` and their Arrow types, in order: what
#: :func:`kinkcheck.report.dataset.schema` writes and what :func:`table_metadata` checks a file holds (a column
#: missing or of another type is a damaged file, refused in one line before any row is read).
COLUMNS: tuple[tuple[str, str], ...] = (
    ("case", "string"), ("program", "string"), ("framework", "string"), ("framework_version", "string"),
    ("device", "string"), ("platform_tag", "string"), ("environment", "string"), ("mode", "string"),
    ("dtype", "string"), ("status", "string"), ("value", "string"), ("label", "string"), ("labels", "list<string>"),
    ("conformance", "string"), ("error", "string"), ("input", "string"))


class DatasetError(ValueError):
    """The Parquet file is missing, unreadable or not kinkcheck's; ``str(err)`` is one line naming it."""


def read_table(path: str | Path, filters: list[tuple[str, str, Any]] | None = None,
               columns: list[str] | None = None) -> Any:
    """The rows of ``observations.parquet`` at ``path`` that pass ``filters`` (pyarrow's ``[(column, op,
    value)]``, all of them), as a ``pyarrow.Table`` of ``columns`` (default: all), in the file's order.

    A filter ``==`` or ``in`` on ``case`` or ``program`` reads only the row groups the table's index names for them
    (:func:`row_groups`; several such filters: the groups in all), one at a time, and only ``columns`` and the
    filtered columns of those, keeping the rows that pass: the memory is one row group's, however many the file
    holds. Without such a filter, or in a table written before it had an index, the row groups whose statistics
    admit a match are read.

    Raises
    ------
    DatasetError
        The file is missing, not Parquet, or not kinkcheck's observations (another ``kinkcheck.schema``), or its
        row-group index names a row group it does not have.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    p = Path(path)
    meta = table_metadata(p)  # kinkcheck's observations, one render with the report beside it, or DatasetError
    try:
        groups = row_groups(meta, filters or [], p)
        if groups is None:
            return pq.read_table(p, filters=filters or None, columns=columns)
        with pq.ParquetFile(p, metadata=_footer(p)) as file:
            if groups and groups[-1] >= file.metadata.num_row_groups:
                raise DatasetError(f"{p}: its row-group index names row group {groups[-1]}, the file has "
                                   f"{file.metadata.num_row_groups}: damaged; render it again with `kinkcheck report`")
            read = None if columns is None else list(dict.fromkeys([*columns, *(f[0] for f in filters or [])]))
            # one group at a time, filtered as read: the peak is one group's columns, whatever the groups' number
            parts = [_kept(file.read_row_group(g, columns=read, use_threads=False), filters or []) for g in groups]
            table = pa.concat_tables(parts) if parts else file.schema_arrow.empty_table().select(
                read or file.schema_arrow.names)
        return table if columns is None else table.select(columns)
    except (OSError, ValueError, pa.ArrowException) as err:  # a bad data page: zstd, thrift, a short read
        if isinstance(err, DatasetError):
            raise
        raise DatasetError(f"{p}: cannot read ({_first_line(err)}): damaged; render it again with "
                           "`kinkcheck report`") from None


def _kept(table: Any, filters: list[tuple[str, str, Any]]) -> Any:
    """The rows of ``table`` that pass every filter (pyarrow's operators; a null passes none), by a mask computed
    column by column: a table filtered by an expression starts Acero's thread pool, 15 MB more for rows it would
    filter as fast. Filters ``==`` and ``in`` on text columns keep their rows as slices of ``table``
    (:func:`_runs`) where those are a few runs, as a row group's rows of one case or program are (the file is
    sorted by case, then program): no ``pyarrow.compute`` to import, a tenth of a second of a cold ``cite``."""
    import pyarrow as pa

    def sliced(of: Any, runs: list[tuple[int, int]]) -> Any:
        return pa.concat_tables([of.slice(a, b - a) for a, b in runs]) if runs else of.slice(0, 0)

    keys = [f for f in filters if f[0] in _INDEXED]  # the file's sort keys: a case's, a program's rows are runs
    rest = [f for f in filters if f[0] not in _INDEXED]
    # a program's rows (of a case): a release's, a mode's, a dtype's are a run per release; a case's rows of many
    # programs are thousands of runs of a mode: a computed mask over the row group is faster there
    if keys and (not rest or any(f[0] == "program" for f in keys)):
        runs = _runs(table, keys)
        if runs is not None:
            kept = sliced(table, runs)
            if not rest:
                return kept
            inner = _runs(kept, rest) if kept.num_rows <= _FEW_ROWS else None
            if inner is not None:
                return sliced(kept, inner)
    import pyarrow.compute as pc

    tests = {"==": pc.equal, "=": pc.equal, "!=": pc.not_equal, "<": pc.less, "<=": pc.less_equal, ">": pc.greater,
             ">=": pc.greater_equal}
    mask = None
    for column, op, value in filters:
        col = table.column(column)
        if op in ("in", "not in"):
            test = pc.is_in(col, value_set=pa.array(list(value), col.type))
            test = pc.and_(pc.invert(test), pc.is_valid(col)) if op == "not in" else test
        elif op in tests:
            test = tests[op](col, pa.scalar(value, col.type))
        else:
            raise DatasetError(f"filter operator {op!r} on {column!r} is not one pyarrow takes (==, !=, <, <=, >, >=, "
                               "in, not in)")
        mask = test if mask is None else pc.and_(mask, test)
    return table if mask is None else table.filter(mask)


#: The most runs :func:`_runs` keeps as slices; more (an environment's rows across cases): a computed mask.
_MAX_RUNS = 256
#: The most rows of a program :func:`_kept` tests in Python on a column other than the sort keys.
_FEW_ROWS = 16_384


def _runs(table: Any, filters: list[tuple[str, str, Any]]) -> list[tuple[int, int]] | None:
    """The rows of ``table`` passing ``filters`` as ``[start, stop)`` runs, ascending, when every filter is ``==`` or
    ``in`` of text on a text column and the rows form at most :data:`_MAX_RUNS` runs; None otherwise (the caller
    computes a mask). A null passes none, as in pyarrow."""
    import pyarrow as pa

    if not filters:
        return None
    keep: list[bool] | None = None
    for column, op, value in filters:
        values = [value] if op in ("==", "=") else list(value) if op == "in" else None
        col = table.column(column)
        kind = col.type.value_type if pa.types.is_dictionary(col.type) else col.type
        if values is None or not all(isinstance(v, str) for v in values) or not (
                pa.types.is_string(kind) or pa.types.is_large_string(kind)):
            return None
        wanted = frozenset(values)
        hit = [v in wanted for v in col.to_pylist()]  # None is never a str in wanted: a null passes none
        keep = hit if keep is None else [a and b for a, b in zip(keep, hit)]
    runs: list[tuple[int, int]] = []
    start = None
    for i, k in enumerate([*(keep or ()), False]):
        if k and start is None:
            start = i
        elif not k and start is not None:
            runs.append((start, i))
            if len(runs) > _MAX_RUNS:
                return None
            start = None
    return runs


_GROUPS = msgspec.json.Decoder(dict[str, dict[str, list[int]]])


def row_groups(meta: dict[bytes, bytes], filters: list[tuple[str, str, Any]],
               path: str | Path = "") -> list[int] | None:
    """The row groups that hold every row passing ``filters``, ascending, from the row-group index in the table's
    metadata ``meta`` (:data:`ROW_GROUPS`): the groups of the names of each ``==`` or ``in`` filter on ``case``
    or ``program``, intersected over such filters; None (read every group) without such a filter or without an
    index.

    Raises
    ------
    DatasetError
        The index is not the mapping :func:`kinkcheck.report.dataset.row_group_index` writes (naming ``path``).
    """
    asked = [(column, [value] if op == "==" else list(value)) for column, op, value in filters
             if column in _INDEXED and op in ("==", "in")]
    raw = meta.get(ROW_GROUPS)
    if not asked or raw is None:
        return None
    try:
        index = _GROUPS.decode(raw)
    except msgspec.DecodeError as err:
        raise DatasetError(f"{path}: its row-group index ({ROW_GROUPS.decode()}) is not a mapping of names to row "
                           f"groups ({_first_line(err)}): damaged; render it again with `kinkcheck report`") from None
    chosen: set[int] | None = None
    for column, names in asked:
        held = index.get(column, {})
        ids = {g for name in names for g in held.get(name, ())}
        chosen = ids if chosen is None else chosen & ids
    return sorted(chosen or ())


def table_metadata(path: str | Path) -> dict[bytes, bytes]:
    """The key-value metadata of ``observations.parquet`` at ``path`` (no row is read), after checking it is
    kinkcheck's (``kinkcheck.schema`` is :data:`SCHEMA_ID`), has every column of :data:`COLUMNS` with its type, and
    is the table of the report beside it (:func:`check_one_render`). Every reader of the table comes through here
    (:func:`read_table`, :func:`kinkcheck.report.dataset.table_index`).

    Raises
    ------
    DatasetError
        The file is missing, not Parquet (a truncated file: no footer), not kinkcheck's observations, lacks a
        column or holds one of another type, or is not the table of the report beside it.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    p = Path(path)
    seen = _file_key(p)  # kept for the process while the file is unchanged: `cite` reads the index, then the rows
    if seen is not None and _METADATA[0] == seen:
        check_one_render(p)
        return dict(_METADATA[1])
    try:
        with pq.ParquetFile(p) as file:  # one read of the footer: the columns' types and the key-value metadata
            schema = file.schema_arrow
            footer = file.metadata
            meta = _own(footer.metadata)
    except FileNotFoundError:
        raise DatasetError(f"no observations at {p}") from None
    except (OSError, ValueError, pa.ArrowException) as err:  # pyarrow.ArrowInvalid is a ValueError
        raise DatasetError(f"{p}: not a Parquet file ({_first_line(err)})") from None
    found = meta.get(b"kinkcheck.schema", b"").decode("utf-8", "replace")
    if found != SCHEMA_ID:
        raise DatasetError(f"{p}: not kinkcheck observations (schema {found or 'none'}, expected {SCHEMA_ID})")
    for name, kind in COLUMNS:
        if name not in schema.names:
            raise DatasetError(f"{p}: no column {name!r}: damaged; render it again with `kinkcheck report`")
        field = schema.field(name)
        got = f"list<{field.type.value_type}>" if pa.types.is_list(field.type) else str(field.type)
        if got != kind:
            raise DatasetError(f"{p}: column {name!r} holds {got}, not {kind}: damaged; render it again with "
                               "`kinkcheck report`")
    check_one_render(p)
    _METADATA[:] = [seen, meta, footer]
    return dict(meta)


def _footer(path: Path) -> Any:
    """The parsed footer (``pyarrow.parquet.FileMetaData``) :func:`table_metadata` last read, when it was of the
    file at ``path`` as it is now, else None: a reader opens the file with it instead of parsing the footer again
    (1.8 MB at ×10 data, 847 row groups: 0.03 s)."""
    seen = _file_key(path)
    return _METADATA[2] if seen is not None and _METADATA[0] == seen else None


def _file_key(path: Path) -> tuple[Any, ...] | None:
    """The file at ``path`` as it is now: (resolved path, size, mtime, inode); None when it cannot be stat'ed."""
    try:
        st = path.stat()
        return (str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ino)
    except OSError:
        return None


#: The last table :func:`table_metadata` checked: ``[(path, size, mtime, inode), its metadata, its footer]``.
_METADATA: list[Any] = [None, None, None]


def file_metadata(path: str | Path) -> dict[bytes, bytes]:
    """The key-value metadata of the Parquet file at ``path`` as written, unchecked (no row is read): the footer's,
    where a render puts the large entries (``kinkcheck.index``, ``kinkcheck.row_groups``) once, outside the Arrow
    schema it stores (``ARROW:schema``, left out here), so that ``pyarrow.parquet.read_table(…).schema.metadata``
    holds only the small ones. For a table copied with its metadata: ``table.replace_schema_metadata(file_metadata(
    path))``."""
    import pyarrow.parquet as pq

    return _own(pq.read_metadata(path).metadata)


def _own(meta: dict[bytes, bytes] | None) -> dict[bytes, bytes]:
    """Key-value metadata without Arrow's copy of its schema."""
    return {k: v for k, v in (meta or {}).items() if k != b"ARROW:schema"}


#: The table :func:`check_one_render` last found to be one render with its report: path → both files' (size,
#: mtime, inode).
_ONE_RENDER: dict[str, tuple[Any, ...]] = {}


def check_one_render(table: str | Path) -> None:
    """Check that ``observations.parquet`` at ``table`` is the table of the report beside it: its SHA-256 is the
    ``provenance.observations_sha256`` that ``conventions.json`` (else ``conventions.json.gz``) in the same folder
    records. The one check of a report set that every reader of the table makes (:func:`table_metadata`): a folder
    that holds files of two renders (copied by hand, or left by a render killed before renders were switched
    whole) is refused, naming the file that does not belong. Reads the report's first bytes (the provenance comes
    first) and hashes the table (2 MB); a table with no report beside it is a set of one. A result is kept for the
    process while neither file changes (size, mtime, inode).

    Raises
    ------
    DatasetError
        The report beside it cannot be read, is not kinkcheck's, records no table digest, or records another
        table's.
    """
    p = Path(table)
    folder = p.parent
    report = folder / "conventions.json"
    if not report.is_file():
        report = folder / "conventions.json.gz"
        if not report.is_file():
            return
    try:
        key = tuple((st.st_size, st.st_mtime_ns, st.st_ino) for st in (p.stat(), report.stat()))
    except OSError as err:
        raise DatasetError(f"{err.filename}: cannot read ({err.strerror or err})") from None
    if _ONE_RENDER.get(str(p)) == key:
        return
    recorded = _recorded_table_digest(report)
    try:
        digest = hashlib.sha256(p.read_bytes()).hexdigest()
    except OSError as err:
        raise DatasetError(f"{p}: cannot read ({err.strerror or err})") from None
    if digest != recorded:
        raise DatasetError(f"{p} does not belong to {report}: its SHA-256 is {digest[:12]}…, the report was rendered "
                           f"with {recorded[:12]}… (the folder mixes two renders, or the table is damaged): render the "
                           "folder again with `kinkcheck report`, or take both files from one render")
    _ONE_RENDER.clear()
    _ONE_RENDER[str(p)] = key


def _recorded_table_digest(report: Path) -> str:
    """``provenance.observations_sha256`` of the report JSON (plain or gzipped), read from its first bytes (the
    provenance follows the schema; at most 4 MiB are read)."""
    head = b""
    provenance: Any = None
    try:
        with (gzip.open(report, "rb") if report.suffix == ".gz" else report.open("rb")) as fh:
            while provenance is None and len(head) < 1 << 22:
                chunk = fh.read(1 << 16)
                head += chunk
                at = head.find(b'"provenance":')
                if at >= 0:
                    text = head[at + len(b'"provenance":'):].decode("utf-8", "replace")
                    try:
                        provenance, _ = json.JSONDecoder().raw_decode(text.lstrip())
                    except ValueError:  # not whole yet, or not JSON
                        provenance = None
                if not chunk:
                    break
    except (OSError, EOFError, zlib.error) as err:
        raise DatasetError(f"{report}: cannot read ({_first_line(err)}): damaged; render it again with "
                           "`kinkcheck report`") from None
    if b'"schema":"kinkcheck/conventions/' not in b"".join(head[:200].split()):
        raise DatasetError(f"{report}: not a kinkcheck report, so the table beside it cannot be checked against it")
    recorded = provenance.get("observations_sha256") if isinstance(provenance, dict) else None
    if not isinstance(recorded, str) or not recorded:
        raise DatasetError(f"{report} records no digest of its observations table (damaged, or written by an older "
                           "kinkcheck): render it again with `kinkcheck report`")
    return recorded


_CELL = msgspec.json.Decoder(dict[str, Any])


def decode_cell(text: str | None, path: str | Path, column: str = "value") -> dict[str, Any] | None:
    """A JSON cell of the table (``value``, ``input``: input name → numbers, or null) decoded.

    Raises
    ------
    DatasetError
        The text is not JSON, or not an object (a damaged table), naming the file and column.
    """
    if text is None:
        return None
    try:
        return _CELL.decode(text)  # type: ignore[no-any-return]
    except msgspec.DecodeError as err:  # ValidationError (not an object) is a DecodeError
        raise DatasetError(f"{path}: a {column} cell is not a JSON object ({_first_line(err)}: {text[:40]!r}): "
                           "damaged; render it again with `kinkcheck report`") from None


def _first_line(err: BaseException) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0]


class LookupFailed(ValueError):
    """Nothing to answer with: no data, bad arguments, or no such program (with the nearest ones); ``str(err)``
    is one line."""


class ReportUnreadable(LookupFailed):
    """The report's data is there but cannot be used: damaged (a bad data page, a truncated file, a missing column
    or one of another type, a cell that is not JSON), not kinkcheck's, or not one render with the report beside it
    (:func:`check_one_render`); ``str(err)`` is one line naming the file. A :class:`LookupFailed`, so callers of
    :func:`lookup` need catch only that; a guard (``kinkcheck lock``) tells it from "no such cell" and stops."""


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
    package = Path(__file__).resolve().parents[1]  # this module is kinkcheck/report/query.py
    return package.parent.name == "src" and (package.parents[1] / "pyproject.toml").is_file()


def data_path(name: str = "observations.parquet") -> Path:
    """The report data file ``name`` (``observations.parquet``, ``conventions.json.gz``), found as the module
    docstring says.

    Raises
    ------
    LookupFailed
        ``name`` is not a file name (a string without a folder), or no folder holds it.
    """
    if not isinstance(name, str) or not name.strip() or name in (".", "..") or any(c in name for c in "/\\\0"):
        raise LookupFailed(f"name must be a file name of the report data (e.g. 'observations.parquet'), not "
                           f"{type(name).__name__} {_shown(name)}")
    package = Path(__file__).resolve().parents[1]  # kinkcheck/, this module being kinkcheck/report/query.py
    tried = []
    folder = os.environ.get(DATA_ENV)
    if folder:
        cand = Path(folder) / name
        if cand.is_file():
            return cand
        raise LookupFailed(f"no {name} in {folder} (${DATA_ENV})")
    tree = [package.parents[1] / "reports" / name] if source_tree() else []  # an installed package: its own data
    for cand in (*tree, package / "data" / "reports" / name):
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



def rules_path(report: str | Path | None = None) -> Path:
    """``rules.json.gz`` (:mod:`kinkcheck.rules.doc`) beside the report the faces read (``--report``,
    ``$KINKCHECK_REPORTS``, ``./reports``, the package's data); ``--report`` naming nothing: a UsageError."""
    # on first use: not loaded at start-up
    from kinkcheck.rules.doc import FILE  # here: the rules package is read by the faces that predict, not by lookup

    if report is not None:
        p = Path(report)
        if p.is_dir():
            return p / FILE
        if not p.is_file():
            raise UsageError(f"--report {report}: no such folder or file (a report folder, or its "
                             "conventions.json.gz)")
        return p.with_name(FILE)
    local = default_report()
    if local.parent.joinpath(FILE).is_file() or os.environ.get("KINKCHECK_REPORTS"):
        return local.parent / FILE
    try:
        return data_path(FILE)
    except LookupFailed:
        return local.parent / FILE


def load_rules(report: str | Path | None = None) -> dict[str, Any]:
    """The rules document beside the report (:func:`rules_path`), or a :class:`~kinkcheck.errors.UsageError` in one
    line."""
    from kinkcheck.rules.doc import RulesUnreadable, load  # on first use: not loaded at start-up; as in rules_path

    try:
        return load(rules_path(report))
    except RulesUnreadable as err:
        raise UsageError(str(err)) from None


def _squeeze(text: str) -> str:
    return "".join(text.split())


def _programs(path: Path) -> list[str]:
    """Every program of the file: the names of its row-group index (:data:`ROW_GROUPS`), else read as a
    dictionary column (its distinct values, not one string a row)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    meta = table_metadata(path)  # the file is kinkcheck's
    if ROW_GROUPS in meta:
        try:
            return sorted(_GROUPS.decode(meta[ROW_GROUPS]).get("program", {}))
        except msgspec.DecodeError:
            pass  # the rows' own column says; read_table names the damage when it reads
    try:
        col = pq.read_table(path, columns=["program"], read_dictionary=["program"]).column("program")
    except (OSError, ValueError, pa.ArrowException) as err:  # a bad data page in the program column
        raise DatasetError(f"{path}: cannot read ({_first_line(err)}): damaged; render it again with "
                           "`kinkcheck report`") from None
    return sorted({str(v) for chunk in col.chunks for v in chunk.dictionary.to_pylist()})


def nearest_programs(program: str, programs: list[str], n: int = 3) -> list[str]:
    """The ``n`` programs of ``programs`` most like ``program``: those calling the same functions first, then by
    difflib's ratio on the text without spaces (``torch.clamp(x, 0)`` → ``torch.clamp(x, 0, 6)``,
    ``torch.clamp(x, min=0)``, ...).

    Raises
    ------
    LookupFailed
        ``program`` is not a string, ``programs`` not strings, or ``n`` not a count.
    """
    _text_argument("program", program, "torch.clamp(x, min=0)")
    programs = list(programs) if isinstance(programs, (list, tuple, set, frozenset)) else programs
    if not isinstance(programs, list) or not all(isinstance(p, str) for p in programs):
        raise LookupFailed(f"programs must be a list of strings, not {type(programs).__name__} {_shown(programs)}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise LookupFailed(f"n must be a count (an int >= 0), not {type(n).__name__} {_shown(n)}")
    calls = calls_of(program)
    squeezed = {_squeeze(p): p for p in programs}
    close = difflib.get_close_matches(_squeeze(program), list(squeezed), n=max(n, 12), cutoff=0.5)
    ranked = sorted(close, key=lambda m: (calls_of(squeezed[m]) != calls, -difflib.SequenceMatcher(
        None, _squeeze(program), m).ratio()))
    return [squeezed[m] for m in ranked[:n]]


def calls_of(program: str) -> frozenset[str]:
    """The dotted names ``program`` calls (``torch.clamp``, ``.clamp``), read off its text.

    Raises
    ------
    LookupFailed
        ``program`` is not a string.
    """
    if not isinstance(program, str):
        raise LookupFailed(f"program must be a string, not {type(program).__name__} {_shown(program)} (e.g. "
                           "'torch.clamp(x, min=0)')")

    return frozenset(re.findall(r"(?:\b[A-Za-z_][\w.]*|\.\w+)(?=\()", program))


def _shown(given: Any, limit: int = 60) -> str:
    """``repr`` of a bad argument, cut at ``limit`` characters so that the message stays one short line."""
    text = repr(given)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _text_argument(what: str, given: Any, example: str) -> None:
    """Raise LookupFailed unless ``given`` is None or a string that is not blank."""
    if given is None:
        return
    if not isinstance(given, str):
        raise LookupFailed(f"{what} must be a string, not {type(given).__name__} {_shown(given)} (e.g. {example!r})")
    if not given.strip():
        raise LookupFailed(f"{what} is empty: give one (e.g. {example!r}), or leave it out")


def _known_argument(what: str, given: Any, known: tuple[str, ...]) -> None:
    """Raise LookupFailed unless ``given`` is None or one of ``known`` (the registry's names), naming them."""
    _text_argument(what, given, known[0])
    if given is not None and given not in known:
        raise LookupFailed(f"unknown {what} {_shown(given)} (known: {', '.join(known)})")


def _path_argument(path: Any) -> None:
    """Raise LookupFailed unless ``path`` is None or a path (``str`` or ``os.PathLike``) that is not blank."""
    if path is None:
        return
    if not isinstance(path, (str, os.PathLike)):
        raise LookupFailed(f"path must be a path (str or os.PathLike) to observations.parquet or its folder, not "
                           f"{type(path).__name__} {_shown(path)}")
    if not str(os.fspath(path)).strip():
        raise LookupFailed("path is empty: name observations.parquet or the folder that holds it, or leave it out")
    if "\0" in str(os.fspath(path)):
        raise LookupFailed(f"path {_shown(os.fspath(path))} holds a NUL character: no file has such a name")


def _framework_argument(framework: Any) -> None:
    """Raise LookupFailed unless ``framework`` is None or a registered one (:data:`kinkcheck.registry.FRAMEWORKS`)."""
    from kinkcheck.registry import FRAMEWORKS  # on first use: not loaded at start-up

    _known_argument("framework", framework, tuple(FRAMEWORKS))


def _devices() -> tuple[str, ...]:
    """The devices of environment ids (:data:`kinkcheck.platforms.DEVICES`)."""
    from kinkcheck.platforms import DEVICES  # on first use: not loaded at start-up

    return tuple(DEVICES)


def lookup(program: str | None = None, *, case: str | None = None, framework: str | None = None,
           release: str | None = None, mode: str | None = "reverse", dtype: str | None = "float64",
           device: str | None = "cpu", path: str | Path | None = None,
           platform: str | None = _PLATFORM) -> Rows:
    """The report's rows for a program (in any spelling of the catalog's: :func:`kinkcheck.language.expr.same_program`, so
    ``torch.clamp(x, min=0.0)`` finds ``torch.clamp(x, min=0)``), narrowed by case,
    framework, release (``"2.14.1"``), mode, dtype, device and platform (``None``: any); in report order: program,
    case, then environments oldest release first. ``path``: an ``observations.parquet`` or the folder that holds it
    (default: :func:`data_path`). ``platform``: the platform tag (:mod:`kinkcheck.platforms`), by default the
    reference machine's, Linux x86-64, so that a release has one row per program, mode and dtype; a shard measured
    elsewhere or capped at a lower x86-64 level has its own (``"macos_arm64"``, ``"linux_x86_64_v3"``).

    Raises
    ------
    LookupFailed
        A bad argument (one line naming it: an argument that is not a string, or a blank one; a ``path`` that is
        no path; a framework, mode, dtype or device kinkcheck does not know, with the ones it knows), no data
        (:func:`data_path`), a program the report does not hold (the message names the nearest ones), or a
        release, case, framework or platform with no row for it (the message names the ones there are).
    """
    from kinkcheck.registry import FRAMEWORKS  # on first use: not loaded at start-up
    from kinkcheck.vocabulary import DTYPES, MODES  # on first use: not loaded at start-up

    for what, given, example in (("program", program, "torch.clamp(x, min=0)"), ("case", case, "relu@0"),
                                 ("release", release, "2.14.1"), ("platform", platform, "linux_x86_64")):
        _text_argument(what, given, example)
    for what, given, known in (("framework", framework, tuple(FRAMEWORKS)), ("mode", mode, MODES),
                               ("dtype", dtype, DTYPES), ("device", device, _devices())):
        _known_argument(what, given, known)
    _path_argument(path)
    p = Path(path) if path is not None else data_path()
    if p.is_dir():  # a report folder, as --report and $KINKCHECK_REPORTS take it
        p = p / "observations.parquet"
    filters: list[tuple[str, str, Any]] = []
    try:
        if program is not None:
            from kinkcheck.language.expr import same_program  # on first use: not loaded at start-up

            programs = _programs(p)
            # min=0.0 is min=0, as on every face; the closest spelling per framework (a method form such as
            # x.clamp(min=0.0) is MindSpore's own text and torch's x.clamp(min=0))
            spelled = same_program(program, programs) or [q for q in programs if _squeeze(q) == _squeeze(program)]
            if spelled == [program]:  # the text itself: other frameworks may hold the call in another spelling
                spelled += same_program(program, [q for q in programs if q != program])
            exact = _closest_per_framework(p, spelled)
            if not exact:
                near = nearest_programs(program, programs)
                hint = f"; nearest: {'; '.join(near)}" if near else ""
                raise LookupFailed(f"no program {_shown(program, 200)} in the report{hint} (kinkcheck.search(NAME) finds the "
                                   "programs that call an operation)")
            filters.append(("program", "in", exact) if len(exact) > 1 else ("program", "==", exact[0]))
        for column, given in (("case", case), ("framework", framework), ("framework_version", release),
                              ("mode", mode), ("dtype", dtype), ("device", device), ("platform_tag", platform)):
            if given is not None:
                filters.append((column, "==", given))
        table = read_table(p, filters=filters)
        rows = Rows(sorted((_row(r, p) for r in table.to_pylist()), key=_report_order(p)))
        if not rows and (release is not None or case is not None or framework is not None
                         or platform not in (None, _PLATFORM)):
            raise LookupFailed(_why_empty(p, filters, release, case, framework, platform))
    except DatasetError as err:
        raise ReportUnreadable(str(err)) from None
    return rows


def _report_order(p: Path) -> Any:
    """The sort key of the report's order of a lookup's rows (program, then the report's order of cases) for a
    stable sort of the file's order (by case, then environments oldest release first, modes, dtypes): the cases'
    order is ``kinkcheck.index``'s, else their names'."""
    raw = table_metadata(p).get(b"kinkcheck.index")
    try:
        cases = msgspec.json.decode(raw)["cases"] if raw else []
        rank = {c["id"]: i for i, c in enumerate(cases)}
    except (msgspec.DecodeError, KeyError, TypeError):
        rank = {}
    return lambda r: (r.program, rank.get(r.case, len(rank)), r.case)


def _closest_per_framework(p: Path, spelled: list[str]) -> list[str]:
    """Of ``spelled`` (closest spelling first), the closest each framework holds."""
    if len(spelled) <= 1:
        return spelled
    table = read_table(p, filters=[("program", "in", spelled)], columns=["program", "framework"])
    holds: dict[str, set[str]] = {}
    for prog, fw in zip(table.column("program").to_pylist(), table.column("framework").to_pylist()):
        holds.setdefault(fw, set()).add(prog)
    return sorted({next(q for q in spelled if q in progs) for progs in holds.values()}, key=spelled.index)


def _row(r: dict[str, Any], path: Path) -> Row:
    return Row(case=r["case"], program=r["program"], framework=r["framework"], release=r["framework_version"],
               device=r["device"], platform_tag=r["platform_tag"], environment=r["environment"], mode=r["mode"],
               dtype=r["dtype"], status=r["status"], value=decode_cell(r["value"], path),
               label=r["label"], labels=tuple(r["labels"] or ()), conformance=r["conformance"], error=r["error"])


def _why_empty(p: Path, filters: list[tuple[str, str, Any]], release: str | None, case: str | None,
               framework: str | None, platform: str | None = None) -> str:
    """Which of ``release``, ``case``, ``framework``, ``platform`` has no row among the others' (one line, the ones
    there are). A column with no row at all among the others' is not the one: another one is (a torch program asked
    of jax at relu@0 has no case there, because it has no jax row anywhere)."""
    programs = [f for f in filters if f[0] == "program"]
    if framework is not None and programs:  # another framework's program has no row of this one, whatever else
        measured = read_table(p, filters=programs, columns=["framework"]).column("framework").unique().to_pylist()
        if measured and framework not in measured:
            return _not_measured_in(programs[0][2], framework, sorted(map(str, measured)))
    asked = [("framework_version", release), ("case", case), ("framework", framework), ("platform_tag", platform)]
    if platform not in (None, _PLATFORM):  # another platform first: the other columns' rows are its rows
        asked.insert(0, asked.pop())
    for column, given in asked:
        if given is None:
            continue
        others = [f for f in filters if f[0] != column]
        seen = read_table(p, filters=others or None, columns=[column]).column(column).unique().to_pylist()
        if not seen:  # the other columns leave no row: one of them is why
            continue
        if given not in seen:
            name = {"framework_version": "release", "platform_tag": "platform"}.get(column, column)
            if column == "case" and len(seen) > 12:  # many: the nearest ones
                near = difflib.get_close_matches(given, [str(c) for c in seen], n=5, cutoff=0.3)
                return (f"no case {given!r} for this query ({len(seen)} cases; nearest: "
                        f"{', '.join(near) or 'none'})")
            from kinkcheck.vocabulary import release_key  # on first use: not loaded at start-up

            there = ", ".join(sorted(map(str, seen), key=release_key)) or "none"
            return f"no {name} {given!r} for this query (there are: {there})"
    return "no row for this query"


def _not_measured_in(program: str | Sequence[str], framework: str, measured: Sequence[str]) -> str:
    """Why a program has no row of ``framework``: the frameworks that measure it, and where ``framework``'s own
    programs calling the same operation are (:func:`search`), or that it has none."""
    texts = [program] if isinstance(program, str) else list(program)
    said = " and ".join(texts) if len(texts) <= 2 else ", ".join(texts)
    where = " and ".join(measured) if len(measured) <= 2 else ", ".join(measured)
    verb = "is" if len(texts) == 1 else "are"
    out = f"no framework {framework!r} for this query: {said} {verb} measured in {where} only"
    called = _first_operation(texts[0])
    if called is None:
        return f"{out}; kinkcheck.search(NAME, framework={framework!r}) finds {framework}'s programs that call NAME"
    if search(called, framework):
        return f"{out}; kinkcheck.search({called!r}, framework={framework!r}) lists {framework}'s programs that call it"
    return (f"{out}; no {framework} program of the catalog calls an operation named {called!r} "
            f"(kinkcheck.search({called!r}) lists every framework's)")


def _first_operation(text: str) -> str | None:
    """The bare name of the outermost operation ``text`` calls (``-torch.max(-v)``: ``max``), None for none."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    for node in ast.walk(tree):  # breadth first: the outermost call first
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Attribute):
                return node.func.attr
            if isinstance(node.func, ast.Name):
                return node.func.id
    return None


def search(name: str, framework: str | None = None) -> list[Operation]:
    """Every operation the catalog's programs call whose name is ``name`` (``"clamp"`` finds ``torch.clamp``,
    ``.clamp``, ``torch.clamp_`` is not ``clamp``), or whose dotted name or a census alias is ``name``; with the
    cases and programs that call it. Report order of frameworks; within one, by name.

    Raises
    ------
    LookupFailed
        ``name`` is not a string or is empty; ``framework`` is not one kinkcheck knows (the message names them).
    """
    if not isinstance(name, str):
        raise LookupFailed(f"search for a name (a string), not {type(name).__name__} {_shown(name)} (e.g. 'clamp')")
    _framework_argument(framework)
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
    Report order of frameworks; within one, by name.

    Raises
    ------
    LookupFailed
        ``framework`` is not one kinkcheck knows (the message names them).
    """
    from kinkcheck.catalog import FRAMEWORKS, load_catalog  # on first use: not loaded at start-up
    from kinkcheck.language import expr as ex  # on first use: not loaded at start-up

    _framework_argument(framework)
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
    from kinkcheck.census import CensusError, census_path, load_census  # on first use: not loaded at start-up

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
