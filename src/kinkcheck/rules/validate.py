"""Leave one case out: every measured program predicted from rules inferred without its case, and compared.

For each case C, the rules are inferred from every cell except C's (:meth:`kinkcheck.rules.infer.Rule.labels`
with ``without=C``), each of C's programs is predicted in every environment, mode and dtype where it was
measured (:func:`kinkcheck.rules.predict.predict`), and the prediction is compared with the measured value within
the dtype's tolerance. A program whose measured value is not what its operations' rules compose to is a
**finding** (a fused kernel, a compiler's decomposition, a custom VJP, a bug), listed with the first release
where it appears; a cell that cannot be predicted says why.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kinkcheck import classify
from kinkcheck.vocabulary import encode, release_key
from kinkcheck.rules.infer import Cell, ProgramModel, RuleBook
from kinkcheck.rules.predict import Prediction, predict

__all__ = ["Miss", "Tally", "Validation", "validate"]


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


def validate(book: RuleBook, rows: Iterable[Mapping[str, Any]]) -> Validation:
    """Leave-one-case-out validation of every measured first-order cell (rows as :func:`kinkcheck.rules.infer.infer`
    reads them, with ``framework_version`` and ``device``)."""
    from kinkcheck.vocabulary import GRADIENT_MODES, flat_value

    modes = frozenset(GRADIENT_MODES)
    memo: dict[Any, Prediction] = {}
    out = Validation()
    missed: dict[tuple[Any, ...], dict[str, Any]] = {}
    everywhere: dict[tuple[str, str, str], bool] = {}
    parsed: dict[str, tuple[float, ...]] = {}  # a value's text → its flat floats (most values repeat)
    relevant: dict[tuple[str, str, str], tuple[tuple[str, ...], list[Any]]] = {}  # program → its ops, their rules
    for row in rows:
        if row["status"] != "ok" or row["mode"] not in modes or row["value"] is None:
            continue
        model: ProgramModel | None = book.programs.get((row["case"], row["framework"], row["program"]))
        if model is None:
            continue
        fw = row["framework"]
        cell = Cell(row["environment"], row["mode"], row["dtype"])
        headline = row["mode"] == "reverse" and row["dtype"] == "float64" and row["device"] == "cpu"
        if model.graph is None:
            pred = Prediction(None, model.reason)
        else:
            pk = (row["case"], fw, row["program"])
            got = relevant.get(pk)
            if got is None:  # the rules a prediction of this program can depend on: those its walks met
                got = relevant[pk] = (tuple(sorted(model.seen)),
                                      [r for k in sorted(model.seen) if (r := book.rules.get((fw, *k))) is not None])
            sig = tuple(r.labels(cell, without=model.case) for r in got[1])
            key = (pk, sig)
            pred = memo.get(key)
            if pred is None:
                pred = predict(model.graph, book, fw, cell, without=model.case)
                if pred.met <= set(got[0]):
                    memo[key] = pred
                else:  # this walk met another kink: the program depends on more rules from now on
                    wider = sorted(set(got[0]) | pred.met)
                    relevant[pk] = (tuple(wider), [r for k in wider if (r := book.rules.get((fw, *k))) is not None])
        value = parsed.get(row["value"])
        if value is None:
            value = parsed[row["value"]] = tuple(flat_value(json.loads(row["value"])))
        right = pred.value is not None and classify.same_value(value, pred.floats or (), row["dtype"])
        out.by_framework[fw].add(pred.value is not None, right)
        if headline:
            out.headline[fw].add(pred.value is not None, right)
            pk = (row["case"], fw, row["program"])
            everywhere[pk] = everywhere.get(pk, True) and pred.value is not None
            if pred.value is None:
                out.not_predicted[_reason_kind(pred.reason or "")] += 1
        if pred.value is not None and not right:
            entry = missed.setdefault((row["case"], fw, row["program"]), {
                "cells": 0, "modes": set(), "dtypes": set(), "versions": [], "example": None})
            entry["cells"] += 1
            entry["modes"].add(row["mode"])
            entry["dtypes"].add(row["dtype"])
            entry["versions"].append(row["framework_version"])
            if entry["example"] is None or (headline and not entry["example"][0]):
                used = "; ".join(f"{u.operation} at {u.kind}: {'/'.join(u.labels)}" for u in pred.used)
                entry["example"] = (headline, f"{row['environment']} {row['mode']} {row['dtype']}", value,
                                    pred.floats, used or "derivatives only")
    for model in book.programs.values():
        out.programs["evidence" if model.key is not None else _reason_kind(model.reason or "")] += 1
    for pk, ok in everywhere.items():
        model = book.programs[pk]
        if model.calls >= 2:
            out.multi_call[pk[1]][0] += 1
            out.multi_call[pk[1]][1] += ok
    for (case, fw, program), e in sorted(missed.items()):
        _, where, value, predicted, used = e["example"]
        out.misses.append(Miss(case, fw, program, e["cells"], tuple(sorted(e["modes"])), tuple(sorted(e["dtypes"])),
                               min(e["versions"], key=release_key), where, value, predicted or (), used))
    return out


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
