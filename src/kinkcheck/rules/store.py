"""The rules as a file beside the report (``rules.json.gz``): what every face reads to predict a program.

Layout (``kinkcheck/rules/v1``, plain JSON, gzipped, keys sorted, so the same shards give the same bytes)::

    {"schema": "kinkcheck/rules/v1",
     "cells": [[environment, mode, dtype], ...],               # the cells rules are stated for
     "environments": {environment: {"framework", "version", "device"}},
     "rules": [{"framework", "operation", "kind", "family",     # family: the catalog cases it rests on
                "programs": [[case, program], ...],            # its evidence: every cell of these programs
                "labels": {"left min-norm zero": [cell, ...]},  # labels (space-separated) → cells (indices)
                "counterexamples": [[cell, case, program, value], ...]}],
     "validation": {...}}                                      # :meth:`Validation.as_dict`

:func:`read` gives a :class:`~kinkcheck.rules.infer.RuleBook` whose rules answer ``labels(cell)`` as the
inference did (not per case: leaving a case out needs the evidence, which only a render has).
"""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kinkcheck.rules.doc import FILE, LABELS, SCHEMA, RulesUnreadable, load
from kinkcheck.vocabulary import encode

if TYPE_CHECKING:  # the inference imports sympy: a render that reads its kept rules does not need it
    from kinkcheck.rules.infer import Cell, RuleBook

__all__ = ["FILE", "SCHEMA", "RulesUnreadable", "StoredRule", "dumps", "load", "merge", "read", "to_doc", "to_json"]



@dataclass
class StoredRule:
    """A rule read back from ``rules.json.gz``: the same ``labels(cell)`` answers as the inferred rule."""

    framework: str
    operation: str
    kind: str
    family: str
    programs: tuple[tuple[str, str], ...]
    by_cell: dict[Cell, tuple[str, ...]] = field(default_factory=dict)
    counterexamples: list[tuple[Cell, str, str, Any]] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, str, str]:
        return self.framework, self.operation, self.kind

    def labels(self, cell: Cell, *, without: str | None = None) -> tuple[str, ...]:
        if without is not None:
            raise ValueError("a stored rule has no per-case evidence: leave a case out at render time")
        return self.by_cell.get(cell, ())


def family(case_ids: list[str]) -> str:
    """The operation family of a rule: the commonest stem (before ``@``) of the cases its evidence comes from."""
    stems: dict[str, int] = defaultdict(int)
    for c in case_ids:
        stems[c.split("@", 1)[0]] += 1
    return min(stems, key=lambda s: (-stems[s], s)) if stems else ""


def to_json(book: RuleBook, validation: Mapping[str, Any], environments: Mapping[str, Mapping[str, str]]) -> bytes:
    """The rules file's bytes (gzipped JSON, deterministic)."""
    return dumps(to_doc(book, validation, environments))


def dumps(doc: Mapping[str, Any]) -> bytes:
    """A rules document (:func:`to_doc`, :func:`merge`) as the file's bytes: gzipped JSON, keys sorted, no mtime."""
    return gzip.compress(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode("utf-8"), mtime=0)


def to_doc(book: RuleBook, validation: Mapping[str, Any], environments: Mapping[str, Mapping[str, str]]
           ) -> dict[str, Any]:
    """The rules file's document (see the module docstring) of a rule book, its validation
    (:meth:`~kinkcheck.rules.validate.Validation.as_dict`) and the environments of the rows it came from."""
    cells = sorted({c for r in book.rules.values() for c in r.evidence}, key=lambda c: (c.environment, c.mode, c.dtype))
    index = {c: i for i, c in enumerate(cells)}
    rules = []
    for key in sorted(book.rules):
        r = book.rules[key]
        programs = sorted({(e.case, e.program) for items in r.evidence.values() for e in items})
        by_labels: dict[str, list[int]] = defaultdict(list)
        counter = []
        for c in sorted(r.evidence, key=index.__getitem__):
            labels = r.labels(c)
            by_labels[" ".join(labels) or "-"].append(index[c])
            for e in r.counterexamples(c):
                counter.append([index[c], e.case, e.program, encode(list(e.value))])
        rules.append({"framework": r.framework, "operation": r.operation, "kind": r.kind,
                      "family": family([p[0] for p in programs]), "programs": [list(p) for p in programs],
                      "labels": dict(sorted(by_labels.items())), "counterexamples": counter})
    return {"schema": SCHEMA, "labels": list(LABELS),
            "cells": [[c.environment, c.mode, c.dtype] for c in cells],
            "environments": {k: dict(v) for k, v in sorted(environments.items())},
            "rules": rules, "validation": dict(validation)}


def merge(parts: Sequence[Mapping[str, Any]], programs: Mapping[str, Mapping[str, int]]) -> dict[str, Any]:
    """One rules document from documents of disjoint rows (:func:`to_doc` of each framework's rows: a rule, its
    evidence, its cells and its validation are one framework's), the same document :func:`to_doc` gives for all
    the rows at once. ``programs``: per case of the rows, its programs by what they give the rules (the
    validation's ``programs`` counts each case once, whichever framework's rows named it)."""
    cells = sorted({tuple(c) for p in parts for c in p["cells"]})
    index = {c: i for i, c in enumerate(cells)}
    rules: list[dict[str, Any]] = []
    environments: dict[str, Any] = {}
    by_framework: dict[str, Any] = {}
    headline: dict[str, Any] = {}
    multi_call: dict[str, Any] = {}
    misses: list[dict[str, Any]] = []
    not_predicted: dict[str, int] = defaultdict(int)
    for part in parts:
        at = [index[tuple(c)] for c in part["cells"]]
        for r in part["rules"]:
            rules.append({**r, "labels": {k: [at[i] for i in v] for k, v in r["labels"].items()},
                          "counterexamples": [[at[c[0]], *c[1:]] for c in r["counterexamples"]]})
        environments.update(part["environments"])
        v = part["validation"]
        by_framework.update(v["by_framework"])
        headline.update(v["headline"])
        multi_call.update(v["multi_call"])
        misses.extend(v["misses"])
        for reason, n in v["not_predicted"].items():
            not_predicted[reason] += n
    counts: dict[str, int] = defaultdict(int)
    for kinds in programs.values():
        for kind, n in kinds.items():
            counts[kind] += n
    rules.sort(key=lambda r: (r["framework"], r["operation"], r["kind"]))
    misses.sort(key=lambda m: (m["case"], m["framework"], m["program"]))
    validation = {"by_framework": dict(sorted(by_framework.items())), "headline": dict(sorted(headline.items())),
                  "multi_call": dict(sorted(multi_call.items())), "misses": misses,
                  "not_predicted": dict(sorted(not_predicted.items(), key=lambda kv: (-kv[1], kv[0]))),
                  "programs": dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))}
    return {"schema": SCHEMA, "labels": list(LABELS), "cells": [list(c) for c in cells],
            "environments": dict(sorted(environments.items())), "rules": rules, "validation": validation}


def read(path: str | Path) -> tuple[RuleBook, dict[str, Any]]:
    """The rule book a face predicts with, and the file's document (environments, validation)."""
    from kinkcheck.rules.infer import Cell, RuleBook  # slow: numpy, sympy

    doc = load(path)
    try:
        cells = [Cell(*c) for c in doc["cells"]]
        book = RuleBook()
        for r in doc["rules"]:
            rule = StoredRule(r["framework"], r["operation"], r["kind"], r["family"],
                              tuple(tuple(p) for p in r["programs"]))
            for labels, idx in r["labels"].items():
                for i in idx:
                    rule.by_cell[cells[i]] = tuple(labels.split()) if labels != "-" else ()
            rule.counterexamples = [(cells[c[0]], c[1], c[2], c[3]) for c in r["counterexamples"]]
            book.rules[rule.key] = rule  # type: ignore[assignment]
    except (KeyError, IndexError, TypeError, ValueError) as err:
        raise RulesUnreadable(f"{path}: a malformed rules file ({type(err).__name__}: {err})") from None
    return book, doc
