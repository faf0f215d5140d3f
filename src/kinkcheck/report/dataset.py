"""``reports/observations.parquet``: every observation of the report as one Apache Parquet table.

The file the analysis ecosystem reads as it is (``pandas.read_parquet``, ``polars.read_parquet``, DuckDB's
``SELECT * FROM 'reports/observations.parquet'``), and the one :func:`kinkcheck.lookup` reads a program's rows
from without loading the others.

Columns (:data:`SCHEMA`): the observation's fields (:class:`kinkcheck.report.model.Observation`), plus
``framework_version``, ``device`` and ``platform_tag`` of its environment and ``label`` (the first label, the one
the report shows). ``value`` and ``input`` are JSON text (``{"x": 0.0}``; non-finite numbers as the strings
``"nan"``, ``"inf"``, ``"-inf"``, as in the JSON report), ``labels`` a list of strings. Rows are sorted by
program, then case, then the report's order of environments, modes and dtypes, and written in row groups of
:data:`ROW_GROUP` rows with statistics, so a reader filtering on ``program`` reads the one or two row groups that
hold it (the program column's minimum and maximum per row group tell which). Written with zstd and dictionary
encoding by the pinned pyarrow (``noxfile.PYARROW``): the same report gives the same bytes.

The key-value metadata holds :data:`SCHEMA_ID` under ``kinkcheck.schema``, the report's catalog hash,
generation time and kinkcheck version (``kinkcheck.catalog_hash``, ``kinkcheck.generated_at``,
``kinkcheck.kinkcheck_version``), and ``kinkcheck.index`` (:func:`report_index`: the cases and the releases
measured per framework and place, what ``kinkcheck grad`` needs besides the rows).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import msgspec

from kinkcheck.query import SCHEMA_ID, DatasetError, read_table, table_metadata
from kinkcheck.report.model import DTYPES, MODES, Report, read_observations

__all__ = ["ROW_GROUP", "SCHEMA_ID", "DatasetError", "read_observations", "read_table", "report_index", "schema", "table_index",
           "write_parquet"]
#: Rows per row group: small enough that one program's rows (a few hundred to a few thousand) span one or two
#: groups, large enough that the file is not mostly group headers.
ROW_GROUP = 8192


def schema() -> Any:
    """The Arrow schema of the table (a function: pyarrow is imported only where the dataset is used), built from
    :data:`kinkcheck.query.COLUMNS`, the list every reader checks a file against."""
    import pyarrow as pa

    from kinkcheck.query import COLUMNS

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


def write_parquet(report: Report) -> bytes:
    """The Parquet file of ``report.observations`` (see the module docstring), as bytes.

    Built column by column: the order is Arrow's sort of (program, then the ranks of case, environment, mode and
    dtype in the report); the environment's columns are taken from one row per environment and the labels from
    one list per distinct labelling (an observation's labels are one of a few hundred).
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    sch = schema()
    text = pa.string()
    obs = report.observations
    envs = report.environments
    env_rank = {e.id: i for i, e in enumerate(envs)}

    def ranks(names: Any, attr: str) -> Any:
        rank = {n: i for i, n in enumerate(names)}
        return pa.array([rank.get(getattr(o, attr), len(rank)) for o in obs], pa.int32())

    keys = {"program": pa.array([o.program for o in obs], text), "case": ranks([c.id for c in report.cases], "case"),
            "environment": ranks(env_rank, "environment"), "mode": ranks(MODES, "mode"), "dtype": ranks(DTYPES, "dtype")}
    order = pc.sort_indices(pa.table(keys), sort_keys=[(k, "ascending") for k in keys])
    obs = [obs[i] for i in order.to_pylist()]
    env_of = pa.array([env_rank[o.environment] for o in obs], pa.int32())
    labelings: dict[tuple[str, ...], int] = {}
    labeling = pa.array([labelings.setdefault(tuple(o.labels), len(labelings)) for o in obs], pa.int32())
    enc = msgspec.json.encode

    def column(name: str) -> Any:
        if name in ("framework_version", "device", "platform_tag", "environment"):
            return pc.take(pa.array([e.id if name == "environment" else getattr(e, name) for e in envs], text),
                           env_of)
        if name == "labels":
            return pc.take(pa.array([list(k) for k in labelings], pa.list_(text)), labeling)
        if name == "label":  # the first label, the one the report shows
            return pc.take(pa.array([k[0] for k in labelings], text), labeling)
        if name in ("value", "input"):
            return pa.array([None if (v := getattr(o, name)) is None else enc(v).decode() for o in obs], text)
        return pa.array([getattr(o, name) for o in obs], text)

    table = pa.Table.from_arrays([column(f.name) for f in sch], schema=sch)
    prov = report.provenance
    table = table.replace_schema_metadata({
        "kinkcheck.schema": SCHEMA_ID, "kinkcheck.catalog_hash": prov.catalog_hash,
        "kinkcheck.generated_at": prov.generated_at, "kinkcheck.kinkcheck_version": prov.kinkcheck_version,
        "kinkcheck.index": msgspec.json.encode(report_index(report))})
    buf = io.BytesIO()
    pq.write_table(table, buf, row_group_size=ROW_GROUP, compression="zstd", compression_level=9,
                   use_dictionary=True, write_statistics=True, store_schema=True)
    return buf.getvalue()


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
