"""``reports/observations.parquet``: every observation of the report as one Apache Parquet table.

The file the analysis ecosystem reads as it is (``pandas.read_parquet``, ``polars.read_parquet``, DuckDB's
``SELECT * FROM 'reports/observations.parquet'``), and the one :func:`kinkcheck.lookup` reads a program's rows
from without loading the others.

Columns (:data:`SCHEMA`): the observation's fields (:class:`kinkcheck.report.model.Observation`), plus
``framework_version``, ``device`` and ``platform_tag`` of its environment and ``label`` (the first label, the one
the report shows). ``value`` and ``input`` are JSON text (``{"x": 0.0}``; non-finite numbers as the strings
``"nan"``, ``"inf"``, ``"-inf"``, as in the JSON report), ``labels`` a list of strings. Rows are sorted by
case, then program, then the report's order of environments (so of frameworks), modes and dtypes, and written in
row groups of :data:`ROW_GROUP` rows: a case's rows are neighbours, and a program's rows within a case, so a reader
of one case or one program reads the one or two row groups that hold it in each of its cases. Which ones the
table's own row-group index says (``kinkcheck.row_groups``: :func:`row_group_index`), and for cases the statistics
too (written for every column but :data:`NO_STATISTICS`, long text no reader filters on). Written with zstd and
dictionary encoding by the pinned pyarrow (``noxfile.PYARROW``): the same report gives the same bytes.

The key-value metadata holds :data:`SCHEMA_ID` under ``kinkcheck.schema``, the report's catalog hash,
generation time and kinkcheck version (``kinkcheck.catalog_hash``, ``kinkcheck.generated_at``,
``kinkcheck.kinkcheck_version``), ``kinkcheck.index`` (:func:`report_index`: the cases and the releases
measured per framework and place, what ``kinkcheck grad`` needs besides the rows) and ``kinkcheck.row_groups``
(:func:`row_group_index`: case and program → the row groups that hold their rows, what
:func:`kinkcheck.report.query.read_table` reads instead of the whole file). These two, the large ones, are written once, in
the file's key-value metadata only (:data:`FOOTER_ONLY`; read them with ``pyarrow.parquet.read_metadata(path)
.metadata`` or :func:`kinkcheck.report.query.file_metadata`); the Arrow schema the file stores for its readers
(``ARROW:schema``) carries the small ones, so a table read with pyarrow has those in ``table.schema.metadata``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from kinkcheck.report.model import DTYPES, MODES, Observation, Report, read_observations
from kinkcheck.report.query import COLUMNS, ROW_GROUPS, SCHEMA_ID, DatasetError, read_table, table_metadata

__all__ = ["ROW_GROUP", "ROW_GROUPS", "SCHEMA_ID", "DatasetError", "fragment",
           "read_observations", "read_table", "report_index",
           "row_group_index", "schema", "sorted_rows", "table_index", "write_parquet", "write_table"]
#: Rows per row group: small enough that one case's rows (a few thousand) span one or two groups and one program's
#: rows within a case (a few hundred) one, large enough that the file is not mostly group headers.
ROW_GROUP = 8192
#: The columns written without statistics: long JSON or free text, which no reader filters on.
NO_STATISTICS = ("value", "labels", "error", "input")


def schema() -> Any:
    """The Arrow schema of the table (a function: pyarrow is imported only where the dataset is used), built from
    :data:`kinkcheck.report.query.COLUMNS`, the list every reader checks a file against."""
    import pyarrow as pa

    types = {"string": pa.string(), "list<string>": pa.list_(pa.string())}
    return pa.schema([(name, types[kind]) for name, kind in COLUMNS])


def report_index(report: Report) -> dict[str, Any]:
    """The small part of the report a reader needs beside the rows (``kinkcheck.index`` in the file's metadata):
    ``{"cases": [{id, sympy, at, tie, programs: [[framework, program], ...]}], "releases": {framework: {place:
    [version, ...] oldest first}}, "modes": {environment: [mode, ...]}}``, a place being the device, then
    ``-<platform tag>`` off Linux x86-64 (:attr:`kinkcheck.report.model.Environment.place`); ``modes``: the modes
    each environment measured (a reader of one program's rows learns which release a case page tabulates)."""
    releases: dict[str, dict[str, list[str]]] = {}
    for e in report.index.measured:  # report order: oldest release first
        versions = releases.setdefault(e.framework, {}).setdefault(e.place, [])
        if e.framework_version not in versions:
            versions.append(e.framework_version)
    cases = [{"id": c.id, "sympy": c.sympy, "at": c.at, "tie": c.tie,
              "programs": [[q.framework, q.program] for q in c.programs]} for c in report.cases]
    modes = {e.id: report.index.env_modes.get(e.id, []) for e in report.index.measured}
    return {"cases": cases, "releases": releases, "modes": modes}


#: The columns an observation gives itself (the others come from its environment), in :data:`SCHEMA` order.
OWN_COLUMNS = ("case", "program", "framework", "mode", "dtype", "status", "value", "label", "labels", "conformance",
               "error", "input")
#: The columns of its environment, taken from one row per environment.
ENVIRONMENT_COLUMNS = ("framework_version", "device", "platform_tag", "environment")


def fragment(observations: Sequence[Observation]) -> Any:
    """The rows of ``observations`` (one shard's, judged: :class:`kinkcheck.judge.build.JudgedShard`) as an Arrow
    table of :data:`OWN_COLUMNS` and the ranks of their mode and dtype (``mode_rank``, ``dtype_rank``), in their
    order: what :func:`write_parquet` joins, so that a render after one new shard builds one shard's columns, not
    every shard's. The labels are built from one list per distinct labelling (an observation's labels are one of
    a few hundred)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    text = pa.string()
    obs = observations
    labelings: dict[tuple[str, ...], int] = {}
    labeling = pa.array([labelings.setdefault(tuple(o.labels), len(labelings)) for o in obs], pa.int32())
    enc = msgspec.json.encode
    mode_rank = {n: i for i, n in enumerate(MODES)}
    dtype_rank = {n: i for i, n in enumerate(DTYPES)}

    def column(name: str) -> Any:
        if name == "labels":
            return pc.take(pa.array([list(k) for k in labelings], pa.list_(text)), labeling)
        if name == "label":  # the first label, the one the report shows
            return pc.take(pa.array([k[0] for k in labelings], text), labeling)
        if name in ("value", "input"):
            return pa.array([None if (v := getattr(o, name)) is None else enc(v).decode() for o in obs], text)
        return pa.array([getattr(o, name) for o in obs], text)

    columns = {name: column(name) for name in OWN_COLUMNS}
    columns["mode_rank"] = pa.array([mode_rank.get(o.mode, len(mode_rank)) for o in obs], pa.int32())
    columns["dtype_rank"] = pa.array([dtype_rank.get(o.dtype, len(dtype_rank)) for o in obs], pa.int32())
    return pa.table(columns)


def write_parquet(report: Report, fragments: Mapping[str, Any] | None = None) -> bytes:
    """The Parquet file of ``report.observations`` (see the module docstring), as bytes: :func:`sorted_rows` with
    the report's metadata, written by :func:`write_table`. The same report gives the same bytes with ``fragments``
    and without.

    Raises
    ------
    ValueError
        ``fragments`` lacks an environment of the report, or its rows are not the report's count.
    """
    table = sorted_rows(report, fragments)
    prov = report.provenance
    table = table.replace_schema_metadata({
        "kinkcheck.schema": SCHEMA_ID, "kinkcheck.catalog_hash": prov.catalog_hash,
        "kinkcheck.generated_at": prov.generated_at, "kinkcheck.kinkcheck_version": prov.kinkcheck_version,
        "kinkcheck.index": msgspec.json.encode(report_index(report))})
    return write_table(table, in_order=True)


def sorted_rows(report: Report, fragments: Mapping[str, Any] | None = None, framework: str | None = None) -> Any:
    """The rows of the observations table (:func:`schema`'s columns, no metadata) in the file's order, or those of
    one ``framework``: the same rows, in the same order, as the file's filtered to it.

    Built from one :func:`fragment` per environment: ``fragments`` (environment id → its fragment, as the render
    keeps them with each shard's judgement) where given, else each environment's observations in
    ``report.observations`` made into one. The fragments are joined in the report's order of environments, the
    environment's columns taken from one row per environment, and the rows put in Arrow's sort of (case,
    program, then the ranks of environment, mode and dtype in the report): one row per cell, so no two rows tie.

    Raises
    ------
    ValueError
        ``fragments`` lacks an environment of the report, or its rows are not the report's count.
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    sch = schema()
    text = pa.string()
    envs = report.environments
    if fragments is None:
        by_env: dict[str, list[Observation]] = {}
        for o in report.observations:
            if framework is None or o.framework == framework:
                by_env.setdefault(o.environment, []).append(o)
        fragments = {eid: fragment(obs) for eid, obs in by_env.items()}
    missing = sorted(set(fragments) - {e.id for e in envs})
    if missing:
        raise ValueError(f"observations of environments the report does not list: {', '.join(missing[:3])}")
    parts, env_of = [], []
    for rank, e in enumerate(envs):
        f = fragments.get(e.id)
        if f is not None and f.num_rows and (framework is None or e.framework == framework):
            parts.append(f)
            env_of.append(np.full(f.num_rows, rank, dtype=np.int32))
    if framework is None and sum(f.num_rows for f in parts) != len(report.observations):
        raise ValueError(f"the fragments hold {sum(f.num_rows for f in parts):,} rows, the report "
                         f"{len(report.observations):,} observations")
    empty = fragment([])
    table = (pa.concat_tables(parts) if parts else empty).combine_chunks()  # one chunk: take is faster on it
    env_rank = pa.array(np.concatenate(env_of) if env_of else np.zeros(0, dtype=np.int32), pa.int32())
    order = _sort_order(table, env_rank)
    table = table.take(order)
    env_rank = env_rank.take(order)
    columns = {}
    for f in sch:
        if f.name in ENVIRONMENT_COLUMNS:
            columns[f.name] = pc.take(pa.array([e.id if f.name == "environment" else getattr(e, f.name)
                                                for e in envs], text), env_rank)
        else:
            columns[f.name] = table.column(f.name).combine_chunks()
    return pa.Table.from_arrays([columns[f.name] for f in sch], schema=sch)


def _sort_order(table: Any, env_rank: Any) -> Any:
    """The indices that sort a joined table's rows by (case, program, environment rank, mode rank, dtype rank),
    case and program in byte order (Arrow's and Python's order of text): one integer key per row, the case's and
    the program's ranks among the distinct ones, sorted by NumPy; Arrow's multi-column sort where the key would not
    fit 62 bits. No two rows tie (one row per cell), so both give the same order."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    def ranks(name: str) -> tuple[Any, int]:  # each row's rank of its text among the column's distinct texts
        enc = pc.dictionary_encode(table.column(name).combine_chunks())
        rank = pc.rank(enc.dictionary, sort_keys="ascending", tiebreaker="first").to_numpy().astype(np.int64) - 1
        return rank[enc.indices.to_numpy(zero_copy_only=False)], max(len(enc.dictionary), 1)

    if table.num_rows:
        case, n_case = ranks("case")
        program, n_program = ranks("program")
        mode = table.column("mode_rank").to_numpy().astype(np.int64)
        dtype = table.column("dtype_rank").to_numpy().astype(np.int64)
        env = env_rank.to_numpy().astype(np.int64)
        sizes = (n_case, n_program, int(env.max()) + 1, int(mode.max()) + 1, int(dtype.max()) + 1)
        if int(np.prod([float(n) for n in sizes])) < 2 ** 62:
            key = (((case * sizes[1] + program) * sizes[2] + env) * sizes[3] + mode) * sizes[4] + dtype
            return pa.array(np.argsort(key, kind="stable"))
    keys = pa.table({"case": table.column("case"), "program": table.column("program"), "environment": env_rank,
                     "mode": table.column("mode_rank"), "dtype": table.column("dtype_rank")})
    return pc.sort_indices(keys, sort_keys=[(k, "ascending") for k in keys.column_names])


def write_table(table: Any, in_order: bool = False) -> bytes:
    """The Parquet file of ``table`` (a ``pyarrow.Table`` of :func:`schema`'s columns, its metadata kept) laid out
    for readers of one case or program: rows stably sorted by case and program (a table already in that order
    keeps its own order within a program: :func:`write_parquet`'s environments, modes and dtypes), row
    groups of :data:`ROW_GROUP` rows, statistics but for :data:`NO_STATISTICS`, and the row groups of each case and
    program (:func:`row_group_index`) under ``kinkcheck.row_groups`` in the metadata. The same table gives the
    same bytes. The benchmark writes its grown tables through here, so that they are laid out as a render's.
    ``in_order``: the rows are in that order already (:func:`sorted_rows`' table), not sorted again."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    if not in_order:
        order = pc.sort_indices(table, sort_keys=[("case", "ascending"), ("program", "ascending")])  # stable
        if not np.array_equal(order.to_numpy(), np.arange(table.num_rows)):
            table = table.take(order)
    meta = {**(table.schema.metadata or {}), ROW_GROUPS: msgspec.json.encode(row_group_index(table))}
    footer = {k: v for k, v in meta.items() if k in FOOTER_ONLY}
    table = table.replace_schema_metadata({k: v for k, v in meta.items() if k not in FOOTER_ONLY})
    # Arrow's own buffer: a Python file object would take the GIL at every page written, and a render writes this
    # file in a thread beside Python work (1.5 s alone took 25 s beside a busy Python thread)
    buf = pa.BufferOutputStream()
    with pq.ParquetWriter(buf, table.schema, compression="zstd", compression_level=9, use_dictionary=True,
                          store_schema=True,
                          write_statistics=[n for n in table.column_names if n not in NO_STATISTICS]) as writer:
        writer.write_table(table, row_group_size=ROW_GROUP)
        writer.add_key_value_metadata(footer)
    return buf.getvalue().to_pybytes()


#: The metadata written once, in the file's key-value metadata only (:func:`kinkcheck.report.query.file_metadata`), not
#: also in the Arrow schema the file stores (``ARROW:schema``, base64: it held them a second time, half the file).
FOOTER_ONLY = (b"kinkcheck.index", ROW_GROUPS)


def row_group_index(table: Any) -> dict[str, dict[str, list[int]]]:
    """``{"case": {case: [row group, ...]}, "program": {program: [row group, ...]}}`` of ``table`` written in row
    groups of :data:`ROW_GROUP` rows in its order (row ``i`` in group ``i // ROW_GROUP``): every group that holds a
    row of the case or program, ascending; names in sorted order, so the same table gives the same index.
    :func:`kinkcheck.report.query.read_table` reads these groups alone for a filter on ``case`` or ``program``."""
    import numpy as np
    import pyarrow as pa

    group = pa.array(np.arange(table.num_rows, dtype=np.int64) // ROW_GROUP)
    out: dict[str, dict[str, list[int]]] = {}
    for column in ("case", "program"):
        pairs = (pa.table({"name": table.column(column), "group": group}).group_by(["name", "group"]).aggregate([])
                 .sort_by([("name", "ascending"), ("group", "ascending")]))
        groups: dict[str, list[int]] = {}
        for name, g in zip(pairs.column("name").to_pylist(), pairs.column("group").to_pylist()):
            groups.setdefault(name, []).append(g)
        out[column] = groups
    return out


def table_index(path: str | Path) -> dict[str, Any]:
    """The ``kinkcheck.index`` of the file's metadata (:func:`report_index`), read without any row.

    Raises
    ------
    DatasetError
        The file is missing, not Parquet, not kinkcheck's observations, or has no index (re-render it).
    """
    raw = table_metadata(path).get(b"kinkcheck.index")
    if raw is None:
        raise DatasetError(f"{path}: no kinkcheck.index in its metadata (re-render it with `kinkcheck report`)")
    return msgspec.json.decode(raw)  # type: ignore[no-any-return]
