"""The observations the rules read, as integer codes (one pass of pyarrow, no Python object per row).

Inference (:mod:`kinkcheck.rules.infer`) and validation (:mod:`kinkcheck.rules.validate`) touch every first-order
measured cell of the report (about half a million); building a dict per row cost more than everything they
compute. :func:`encode` filters the table once and dictionary-encodes each column: a row is then a program
code, a cell code, a value code, a release code and whether it is in the headline slice (float64, reverse
mode, CPU), as NumPy arrays in the table's row order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kinkcheck.vocabulary import GRADIENT_MODES

__all__ = ["Encoded", "encode"]

#: The observation columns the rules read.
COLUMNS = ("case", "program", "framework", "framework_version", "device", "environment", "mode", "dtype", "status",
           "value")

_SEP = "\x1f"


@dataclass(frozen=True)
class Encoded:
    """The first-order measured rows, coded. ``programs[pk[i]]`` is row i's (case, framework, program),
    ``cells[cell[i]]`` its (environment, mode, dtype), ``values[value[i]]`` its value's JSON text,
    ``versions[version[i]]`` its release; ``headline[i]`` whether it is float64, reverse mode, on the CPU."""

    programs: list[tuple[str, str, str]]
    cells: list[tuple[str, str, str]]
    values: list[str]
    versions: list[str]
    pk: Any
    cell: Any
    value: Any
    version: Any
    headline: Any

    def __len__(self) -> int:
        return int(self.pk.shape[0])


def _codes(array: Any) -> tuple[Any, list[Any]]:
    """Codes in first-appearance order (one dictionary for the whole column, whatever its chunks)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    enc = pc.dictionary_encode(array)
    return enc.indices.to_numpy(zero_copy_only=False).astype(np.int64), enc.dictionary.to_pylist()


def encode(table: Any) -> Encoded:
    """The first-order rows measured ``ok`` with a value (:data:`kinkcheck.vocabulary.GRADIENT_MODES`) of an
    observations table (a ``pyarrow.Table`` with :data:`COLUMNS`, or rows as dicts), coded."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not isinstance(table, pa.Table):
        table = _from_rows(table)
    modes = pa.array(list(GRADIENT_MODES), pa.string())
    keep = pc.and_(pc.and_(pc.equal(table["status"], "ok"), pc.is_in(table["mode"], value_set=modes)),
                   pc.is_valid(table["value"]))
    t = table.select(list(COLUMNS)).filter(pc.fill_null(keep, False))
    pk, programs = _codes(pc.binary_join_element_wise(t["case"], t["framework"], t["program"], _SEP))
    cell, cells = _codes(pc.binary_join_element_wise(t["environment"], t["mode"], t["dtype"], _SEP))
    value, values = _codes(t["value"])
    version, versions = _codes(t["framework_version"])
    headline = pc.and_(pc.and_(pc.equal(t["mode"], "reverse"), pc.equal(t["dtype"], "float64")),
                       pc.equal(t["device"], "cpu"))
    return Encoded([tuple(p.split(_SEP)) for p in programs], [tuple(c.split(_SEP)) for c in cells], values,
                   versions, pk, cell, value, version,
                   pc.fill_null(headline, False).to_numpy(zero_copy_only=False).astype(bool))


def _from_rows(rows: Iterable[Mapping[str, Any]]) -> Any:
    """Rows as dicts (the table's columns; other keys ignored) as a table of strings."""
    import pyarrow as pa

    return pa.Table.from_pylist(list(rows), schema=pa.schema([(c, pa.string()) for c in COLUMNS]))
