"""Damaged copies of the committed report's data (issue 44, item 6): ``observations.parquet`` with a bad data page,
cut short, without a column, with a ``value`` cell that is not JSON, or with a column of another type, beside the
committed ``conventions.json.gz``; and a mixed set, the table of another render beside it. The faces that read the
table (``lookup``, ``grad``, ``lock --check``, the pytest plugin) must each say so in one line naming the table
(exit 2), never a traceback, and never answer from it."""

from __future__ import annotations

import gzip
import hashlib
import shutil
from pathlib import Path

from conftest import ROOT

#: The kinds of damage, each a way a copied, synced or hand-edited table breaks.
KINDS = ("bad-data-page", "truncated", "missing-column", "garbage-json", "wrong-type")
#: The damaged kinds and a mixed set: the committed table written again (the same rows in other row groups: another
#: render's bytes) beside the committed JSON, which records the committed table's SHA-256.
FAULTS = (*KINDS, "mixed")
#: What the one line says for each fault (besides the table's path).
SAYS = {"bad-data-page": "cannot read (", "truncated": "not a Parquet file", "missing-column": "no column 'value'",
        "garbage-json": "a value cell is not a JSON object", "wrong-type": "column 'value' holds int64, not string",
        "mixed": "does not belong to"}


def damaged_report(folder: Path, kind: str, restamp: bool = True) -> Path:
    """The committed report's ``observations.parquet`` and ``conventions.json.gz`` copied into ``folder``, the table
    damaged as ``kind`` says (one of :data:`FAULTS`); with ``restamp`` the JSON records the damaged table's SHA-256,
    so a reader meets the damage itself, not only a table that is not the report's (a mixed set is never
    restamped). Returns ``folder``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from kinkcheck.report.query import file_metadata

    folder.mkdir(parents=True, exist_ok=True)
    src = ROOT / "reports" / "observations.parquet"
    raw = src.read_bytes()
    table = folder / "observations.parquet"
    if kind == "truncated":
        table.write_bytes(raw[: len(raw) // 2])
    elif kind == "bad-data-page":  # the value column's pages of every row group overwritten: the footer is intact
        data = bytearray(raw)
        meta = pq.ParquetFile(src).metadata
        col = pq.read_schema(src).get_field_index("value")
        for g in range(meta.num_row_groups):
            chunk = meta.row_group(g).column(col)
            start, size = chunk.data_page_offset, chunk.total_compressed_size
            data[start + size // 3: start + size - 2] = b"\xa5" * (size - 2 - size // 3)
        table.write_bytes(bytes(data))
    else:
        t = pq.read_table(src)
        at = t.schema.get_field_index("value")
        if kind == "mixed":
            restamp = False
        elif kind == "missing-column":
            t = t.drop(["value"])
        elif kind == "garbage-json":
            t = t.set_column(at, "value", pa.array(["{garbage"] * t.num_rows, pa.string()))
        elif kind == "wrong-type":
            t = t.set_column(at, "value", pa.array(range(t.num_rows), pa.int64()))
        else:
            raise ValueError(f"unknown damage {kind!r} (one of {', '.join(FAULTS)})")
        pq.write_table(t.replace_schema_metadata(file_metadata(src)), table, row_group_size=8192,
                       compression="zstd")
    report = ROOT / "reports" / "conventions.json.gz"
    if restamp:
        old = hashlib.sha256(raw).hexdigest().encode()
        new = hashlib.sha256(table.read_bytes()).hexdigest().encode()
        text = gzip.decompress(report.read_bytes())
        assert text.count(old) == 1, "the committed JSON records the committed table's SHA-256 once"
        (folder / "conventions.json.gz").write_bytes(gzip.compress(text.replace(old, new), compresslevel=1, mtime=0))
    else:
        shutil.copy(report, folder / "conventions.json.gz")
    return folder
