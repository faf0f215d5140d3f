"""Leave one case out: every measured program predicted from rules inferred without its case, and compared.

For each case C, the rules are inferred from every cell except C's (:meth:`kinkcheck.rules.infer.Rule.labels`
with ``without=C``), each of C's programs is predicted in every environment, mode and dtype where it was
measured (:func:`kinkcheck.rules.predict.predict`), and the prediction is compared with the measured value within
the dtype's tolerance. A program whose measured value is not what its operations' rules compose to is a
**finding** (a fused kernel, a compiler's decomposition, a custom VJP, a bug), listed with the first release
where it appears; a cell that cannot be predicted says why.
"""

from __future__ import annotations

import hashlib
import json
import pickle
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kinkcheck.cache import read_cached, write_cached
from kinkcheck.oracles import classify
from kinkcheck.rules import table
from kinkcheck.rules.infer import Cell, ProgramModel, RuleBook
from kinkcheck.rules.predict import Prediction, predict
from kinkcheck.vocabulary import encode, flat_value, release_key

__all__ = ["Miss", "Tally", "Validation", "case_programs", "program_kind", "validate"]


@dataclass
class Tally:
    """Cells measured, predicted, and predicted right."""

    cells: int = 0
    predicted: int = 0
    right: int = 0

    def add(self, predicted: bool, right: bool) -> None:
        self.cells += 1
        self.predicted += predicted
        self.right += right

    def as_dict(self) -> dict[str, int]:
        return {"cells": self.cells, "predicted": self.predicted, "right": self.right}


@dataclass(frozen=True)
class Miss:
    """A program whose measured value is not its prediction: how many cells, where, the first release, and one
    example (a float64 reverse-mode CPU cell where there is one)."""

    case: str
    framework: str
    program: str
    cells: int
    modes: tuple[str, ...]
    dtypes: tuple[str, ...]
    first_release: str
    example: str
    measured: tuple[Any, ...]
    predicted: tuple[Any, ...]
    rules: str


@dataclass
class Validation:
    """The leave-one-case-out figures, per framework and in the headline slice (float64, reverse, CPU)."""

    by_framework: dict[str, Tally] = field(default_factory=lambda: defaultdict(Tally))
    headline: dict[str, Tally] = field(default_factory=lambda: defaultdict(Tally))
    #: programs of two or more calls (headline slice): how many, and how many predicted in every environment
    multi_call: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))
    misses: list[Miss] = field(default_factory=list)
    #: why cells were not predicted (headline slice): reason → count
    not_predicted: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    #: the catalog's programs by what they give the rules: "evidence" (one operation at its kink), else why not
    programs: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def as_dict(self) -> dict[str, Any]:
        return {
            "by_framework": {k: v.as_dict() for k, v in sorted(self.by_framework.items())},
            "headline": {k: v.as_dict() for k, v in sorted(self.headline.items())},
            "multi_call": {k: {"programs": v[0], "predicted_everywhere": v[1]} for k, v in sorted(self.multi_call.items())},
            "misses": [{**m.__dict__, "measured": encode(list(m.measured)), "predicted": encode(list(m.predicted))}
                       for m in self.misses],
            "not_predicted": dict(sorted(self.not_predicted.items(), key=lambda kv: (-kv[1], kv[0]))),
            "programs": dict(sorted(self.programs.items(), key=lambda kv: (-kv[1], kv[0]))),
        }


def validate(book: RuleBook, rows: Any) -> Validation:
    """Leave-one-case-out validation of every measured first-order cell: ``rows`` as
    :func:`kinkcheck.rules.infer.infer` reads them (with ``framework_version`` and ``device``).

    Each program's cells are taken together: the labels its rules give in each of its cells (without its case)
    form a signature, the program is predicted once per distinct signature (a prediction depends on those labels
    only), and compared once per distinct measured value."""
    import numpy as np

    enc = rows if isinstance(rows, table.Encoded) else table.encode(rows)
    out = Validation()
    cells = [Cell(*c) for c in enc.cells]
    dtypes = sorted({c.dtype for c in cells})
    cell_dtype = np.array([dtypes.index(c.dtype) for c in cells] or [0], dtype=np.int64)
    columns = book.coded
    if columns is None or columns.cells != cells:
        raise ValueError("validate() takes the rule book inferred from these very rows (infer(rows, catalog))")
    order = np.argsort(enc.pk, kind="stable")  # each program's rows, in the table's order
    bounds = np.searchsorted(enc.pk[order], np.arange(len(enc.programs) + 1))
    everywhere: dict[tuple[str, str, str], bool] = {}
    kept: dict[str, _Kept] = {}  # the predictions kept on disk of the case at hand
    for code in sorted(range(len(enc.programs)), key=lambda c: enc.programs[c][0]):  # case by case
        pk = enc.programs[code]
        model: ProgramModel | None = book.programs.get(pk)
        mine = order[bounds[code]:bounds[code + 1]]
        if model is None or not len(mine):
            continue
        fw = pk[1]
        preds, which = _predictions(model, book, enc, cells, mine, columns, kept)
        ok = np.array([p.value is not None for p in preds], dtype=bool)[which]
        right = np.zeros(len(mine), dtype=bool)
        if ok.any():  # each (prediction, measured value, dtype) compared once: values repeat over environments
            key = (which * (len(enc.values) + 1) + enc.value[mine]) * len(dtypes) + cell_dtype[enc.cell[mine]]
            distinct, first, back = np.unique(np.where(ok, key, -1), return_index=True, return_inverse=True)
            same = np.array([k >= 0 and classify.same_value(
                _floats(enc, int(enc.value[mine[i]])), preds[which[i]].floats or (), cells[enc.cell[mine[i]]].dtype)
                for k, i in zip(distinct.tolist(), first.tolist())], dtype=bool)
            right = same[back.reshape(-1)]
        head = enc.headline[mine]
        out.by_framework[fw].cells += len(mine)
        out.by_framework[fw].predicted += int(ok.sum())
        out.by_framework[fw].right += int(right.sum())
        if head.any():
            t = out.headline[fw]
            t.cells += int(head.sum())
            t.predicted += int((ok & head).sum())
            t.right += int((right & head).sum())
            everywhere[pk] = bool(ok[head].all())
            for p, n in zip(*np.unique(which[head & ~ok], return_counts=True)):
                out.not_predicted[_reason_kind(preds[p].reason or "")] += int(n)
        miss = np.flatnonzero(ok & ~right)
        if len(miss):
            rows_missed = mine[miss]
            heads = np.flatnonzero(head[miss])
            first = int(miss[heads[0]] if len(heads) else miss[0])
            row = int(mine[first])
            pred = preds[which[first]]
            used = "; ".join(f"{u.operation} at {u.kind}: {'/'.join(u.labels)}" for u in pred.used)
            cell = cells[enc.cell[row]]
            out.misses.append(Miss(
                pk[0], fw, pk[2], len(miss), tuple(sorted({cells[c].mode for c in enc.cell[rows_missed].tolist()})),
                tuple(sorted({cells[c].dtype for c in enc.cell[rows_missed].tolist()})),
                min((enc.versions[v] for v in set(enc.version[rows_missed].tolist())), key=release_key),
                f"{cell.environment} {cell.mode} {cell.dtype}", _floats(enc, int(enc.value[row])),
                pred.floats or (), used or "derivatives only"))
    for case in kept.values():
        case.save()
    for model in book.programs.values():
        out.programs[program_kind(model)] += 1
    for pk, ok_all in everywhere.items():
        model = book.programs[pk]
        if model.calls >= 2:
            out.multi_call[pk[1]][0] += 1
            out.multi_call[pk[1]][1] += ok_all
    out.misses.sort(key=lambda m: (m.case, m.framework, m.program))
    return out


def program_kind(model: ProgramModel) -> str:
    """What a catalog program gives the rules (:attr:`Validation.programs`): ``"evidence"`` (one operation at its
    kink), else why not (its reason without particulars)."""
    return "evidence" if model.key is not None else _reason_kind(model.reason or "")


def case_programs(book: RuleBook) -> dict[str, dict[str, int]]:
    """:attr:`Validation.programs` per case of the book's program models (a case's models are its programs in every
    framework, whichever framework's rows loaded it: what :func:`kinkcheck.rules.store.merge` adds up once)."""
    out: dict[str, dict[str, int]] = {}
    for model in book.programs.values():
        kinds = out.setdefault(model.case, {})
        kind = program_kind(model)
        kinds[kind] = kinds.get(kind, 0) + 1
    return out


def _floats(enc: Any, value: int) -> tuple[float, ...]:
    """A measured value's flat floats (parsed once per distinct text)."""
    hit = _PARSED.get(enc.values[value])
    if hit is None:

        hit = _PARSED[enc.values[value]] = tuple(flat_value(json.loads(enc.values[value])))
    return hit


_PARSED: dict[str, tuple[float, ...]] = {}


def _predictions(model: ProgramModel, book: RuleBook, enc: Any, cells: list[Cell], mine: Any,
                 columns: Any, kept_by_case: dict[str, _Kept]) -> tuple[list[Prediction], Any]:
    """A program's predictions over its rows (``mine``: row indices): the distinct predictions, and for each row
    which one is its. Rows whose rules give the same labels share one prediction; when a walk meets a kink the
    program's signature did not hold, the signature widens and the program is predicted again."""
    import numpy as np

    if not model.has_graph:  # its graph is read back only where a prediction is not kept
        return [Prediction(None, model.reason)], np.zeros(len(mine), dtype=np.int64)
    fw = model.framework
    relevant = set(model.seen)
    if model.source not in kept_by_case:
        for other in kept_by_case.values():  # one case's file at a time (the table is sorted by program, not case)
            other.save()
        kept_by_case.clear()
        kept_by_case[model.source] = _Kept(model.source)
    kept = kept_by_case[model.source]
    row_cells = enc.cell[mine]
    distinct_cells, at = np.unique(row_cells, return_inverse=True)
    while True:
        keys = sorted(relevant)
        found = [r for k in keys if (r := book.rules.get((fw, *k))) is not None]
        sig = np.zeros((len(mine), max(len(found), 1)), dtype=np.int64)
        for j, rule in enumerate(found):
            sig[:, j] = columns.column(rule.key, model.case)[distinct_cells][at.reshape(-1)]
        base = len(columns.sets)
        if sig.shape[1] == 1 or base ** sig.shape[1] < 2 ** 62:  # one integer per signature: a 1-D unique
            distinct, which = np.unique(sig @ (base ** np.arange(sig.shape[1], dtype=np.int64)),
                                        return_inverse=True)
        else:
            distinct, which = np.unique(sig, axis=0, return_inverse=True)
        which = which.reshape(-1)
        first = np.zeros(len(distinct), dtype=np.int64)
        first[which[::-1]] = np.arange(len(which))[::-1]  # each signature's first row
        have = {k: i for i, k in enumerate(r.key[1:] for r in found)}
        preds = []
        for i in first.tolist():  # the rules' labels it depends on decide it: kept on disk across renders
            labels = (model.framework, model.program, tuple((k, columns.sets[sig[i, have[k]]] if k in have else None)
                                                            for k in keys))
            pred = kept.get(labels)
            if pred is None:
                pred = kept[labels] = predict(model.graph, book, fw, cells[int(row_cells[i])], without=model.case)
                kept.changed = True
            preds.append(pred)
        met = set().union(*(p.met for p in preds))
        if met <= relevant:
            return preds, which
        relevant |= met


def _predict_digest() -> str:
    """The digest of :mod:`kinkcheck.rules.predict` (the models' key covers the rest of what a prediction runs)."""
    if not _DIGEST:

        _DIGEST.append(hashlib.sha256((Path(__file__).parent / "predict.py").read_bytes()).hexdigest()[:16])
    return _DIGEST[0]


_DIGEST: list[str] = []


class _Kept(dict):  # type: ignore[type-arg]
    """A case's predictions, by program and the labels of the rules they depend on, on disk (:mod:`kinkcheck.cache`,
    kind ``rules-predict``) keyed on its models (their code and inputs) and the predicting code: a render after a
    new shard predicts only what new labels ask. Plain numbers and labels: read without sympy's care."""

    def __init__(self, source: str) -> None:
        super().__init__()
        self.changed = False
        self.key = hashlib.sha256(repr((source, _predict_digest())).encode()).hexdigest()[:32] if source else ""
        if not self.key:
            return

        raw = read_cached("rules-predict", self.key)
        try:
            got = pickle.loads(raw) if raw is not None else None
        except Exception:  # noqa: BLE001 - a damaged entry is computed again, never an error
            got = None
        if isinstance(got, dict):
            self.update(got)

    def save(self) -> None:
        if self.changed and self.key:
            try:
                write_cached("rules-predict", self.key, pickle.dumps(dict(self), protocol=pickle.HIGHEST_PROTOCOL))
            except (pickle.PicklingError, RecursionError, TypeError):
                pass
            self.changed = False


def _reason_kind(reason: str) -> str:
    """A reason without its particulars (for counting): up to the first parenthesis or colon after the prefix."""
    text = reason.removeprefix("not predicted: ")
    if text.startswith("the derivative of ") and " is not finite" in text:
        return "the derivative of a call is not finite at the point"
    for stop in (" in ", " (", ": "):
        i = text.find(stop)
        if i > 0:
            text = text[:i]
    return text
