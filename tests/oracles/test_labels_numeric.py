"""Every label of the newest release of each framework (float64, reverse mode), derived a second time.

The committed report's labels come from one classifier (:mod:`kinkcheck.oracles.classify`) reading the sympy oracle's
exact limits. Here each cell's labels are derived again from numbers alone (:mod:`numeric_labels`: one-sided
difference quotients and limiting gradients of the case's field in mpmath, the label rules written again from
the classifier's docstring) and compared, cell by cell (issue 44, item 5). Two implementations that agree are
the standard a reference table is held to.

What is not compared, and why (the coverage summary prints the counts):

* ``first`` / ``last``: which tied input is earlier is structure, not a number of the field. Numbers do say
  this much, and it is checked: a value labelled ``one-index`` is a limiting gradient, and at a tie a value
  that is a limiting gradient carries one of ``first``/``last``/``one-index``.
* ``split-even`` where the limiting gradients form a continuum (:data:`PARTIAL`): the mean of a continuum
  depends on how it is sampled.
* Cases the numeric derivation cannot judge at all, or cells it cannot decide (:data:`UNCOVERED`): the set is
  asserted, so a new one fails until someone writes here why.

Cells: the newest release of each framework (:class:`packaging.version.Version`) among environments without
an ISA cap (platform tags ending in ``_v2``, ``_v3`` … are capped), every device of that release, mode
``reverse``, dtype ``float64``. An ``error`` or ``unavailable`` cell must carry that label alone.
"""

from __future__ import annotations

import collections
import json
import math
import re
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from packaging.version import Version

from numeric_labels import TIE_LABELS, Field, Uncovered, derive, flat_value, numeric_labels

from kinkcheck.oracles.classify import tolerance
from kinkcheck.report.query import file_metadata

ROOT = Path(__file__).resolve().parents[2]
REPORT = ROOT / "reports" / "observations.parquet"
DTYPE = "float64"
MODE = "reverse"
#: A platform tag that caps the instruction set (``linux_x86_64_v3``): not the plain build of a release.
ISA_CAP = re.compile(r"_v\d+$")

#: Case id -> (category, why) for every case with cells the numeric derivation does not judge. Categories are
#: those :func:`numeric_labels.derive` and :func:`numeric_labels.numeric_labels` give (``"not evaluable"``,
#: ``"point not finite"``, ``"no limit"``, ``"continuum boundary"``) and ``"not-judged"`` (the oracle did not
#: judge the case: the report has nothing to compare with). Empty today: every case of the report is covered.
UNCOVERED: dict[str, tuple[str, str]] = {}

#: Case id -> why ``split-even`` is not compared there: ties whose limiting gradients form a continuum (a
#: repeated singular value or eigenvalue, where one term of the field is a norm at its origin). The classifier
#: averages the oracle's finite probe sample of that continuum; the numbers have no one mean to give.
_CONTINUUM_TIE = "tie whose limiting gradients form a continuum: their mean depends on the sample"
PARTIAL: dict[str, str] = {
    "matrix_norm2@identity": _CONTINUUM_TIE,
    "svdvals@identity": _CONTINUUM_TIE,
    "eigvalsh@repeated": _CONTINUUM_TIE,
    "eigvals@repeated": _CONTINUUM_TIE,
    "cond@identity": _CONTINUUM_TIE,
}


def _newest_cells() -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]], dict[str, Version]]:
    assert REPORT.is_file(), f"no committed report at {REPORT}: nothing to check"
    releases = pq.read_table(REPORT, columns=["framework", "framework_version", "platform_tag"]).group_by(
        ["framework", "framework_version", "platform_tag"]).aggregate([]).to_pylist()
    newest: dict[str, Version] = {}
    for r in releases:
        v = Version(r["framework_version"])
        if not ISA_CAP.search(r["platform_tag"] or "") and (r["framework"] not in newest or v > newest[r["framework"]]):
            newest[r["framework"]] = v
    table = pq.read_table(REPORT, columns=["case", "program", "framework", "framework_version", "device",
                                           "platform_tag", "environment", "mode", "dtype", "status", "value",
                                           "labels"], filters=[("mode", "=", MODE), ("dtype", "=", DTYPE)])
    cases = {c["id"]: c for c in json.loads(file_metadata(REPORT)[b"kinkcheck.index"])["cases"]}
    cells = [r for r in table.to_pylist() if not ISA_CAP.search(r["platform_tag"] or "")
             and Version(r["framework_version"]) == newest[r["framework"]]]
    return cells, cases, newest


def _name(r: dict[str, Any]) -> str:
    return f"{r['case']} | {r['framework']} {r['framework_version']} ({r['environment']}) | {r['program']}"


def _facts(fd: Field) -> str:
    parts = [f"kind={fd.kind}", f"lipschitz={fd.lipschitz}"]
    for name in ("left", "right", "left_piece", "right_piece", "derivative", "min_norm"):
        if getattr(fd, name) is not None:
            parts.append(f"{name}={getattr(fd, name)}")
    if fd.limiting is not None:
        parts.append(f"{len(fd.limiting)} limiting gradients" + (" (continuum)" if fd.continuum else
                                                                 f" {list(fd.limiting)}"))
    return ", ".join(parts + fd.notes)


def _own_function(case_id: str, framework: str, program: str) -> str | None:
    """The program's own function (``Case.own_functions``: tinygrad's SELU rounds λ), the sympy text, or None."""
    from kinkcheck.catalog import load_catalog

    own = load_catalog().case(case_id).own_functions.get((framework, program))
    return None if own is None else own.sympy


class Judgement:
    """The comparison of every selected cell, made once per module."""

    def __init__(self) -> None:
        self.cells, self.cases, self.newest = _newest_cells()
        self.disagreements: list[str] = []
        self.tie_faults: list[str] = []
        self.uncovered: dict[str, dict[str, Any]] = {}  # case -> {"category", "detail", "cells"}
        self.covered = 0
        self.status_only = 0
        self.structural = 0  # cells whose first/last label is not checked against numbers
        self.partial = 0
        for r in self.cells:
            labels = list(r["labels"])
            if r["status"] != "ok":
                self.status_only += 1
                if labels != [r["status"]]:
                    self.disagreements.append(f"{_name(r)}: status {r['status']} but labels {labels}")
                continue
            case = self.cases[r["case"]]
            if "not-judged" in labels:
                self._uncover(r, Uncovered("not-judged", "the oracle did not judge the case"))
                continue
            if "own-constants" in labels:  # judged against the program's own function (its documented constants)
                own = _own_function(case["id"], r["framework"], r["program"])
                if own is None:
                    self.disagreements.append(f"{_name(r)}: own-constants, but the catalog gives it no own function")
                    continue
                fd = derive(f"{case['id']}|{r['framework']}|{r['program']}", own, case["at"], bool(case["tie"]))
                labels.remove("own-constants")
            else:
                fd = derive(case["id"], case["sympy"], case["at"], bool(case["tie"]))
            if isinstance(fd, Uncovered):
                self._uncover(r, fd)
                continue
            try:
                value = flat_value(json.loads(r["value"]), case["at"])
            except (KeyError, TypeError, ValueError) as err:
                self.disagreements.append(f"{_name(r)}: value {r['value']!r} does not read against the case's "
                                          f"inputs {list(case['at'])}: {err!r}")
                continue
            if len(value) != len(fd.components):
                self.disagreements.append(f"{_name(r)}: value {value} has {len(value)} components, the case "
                                          f"{len(fd.components)} {fd.components}")
                continue
            tie_labelled = bool(TIE_LABELS & set(labels))
            got, undecided = numeric_labels(value, fd, DTYPE, tie=bool(case["tie"]), tie_labelled=tie_labelled)
            if undecided is not None:
                self._uncover(r, undecided)
                continue
            self.covered += 1
            expected = set(labels) - TIE_LABELS
            if case["id"] in PARTIAL:
                self.partial += 1
                expected.discard("split-even")
                got.discard("split-even")
            if got != expected:
                self.disagreements.append(f"{_name(r)}: report {labels}, numeric {sorted(got)} (tie labels aside); "
                                          f"value {value}; numbers: {_facts(fd)}")
            if tie_labelled and not case["tie"]:
                self.tie_faults.append(f"{_name(r)}: tie label in {labels} at a case that is not a tie")
            if {"first", "last"} & set(labels):
                self.structural += 1
            finite = all(math.isfinite(c) for c in value)
            if not (finite and case["tie"]):
                continue
            limiting = fd.is_limiting(value, tolerance(DTYPE))
            if limiting is None:
                self._uncover(r, Uncovered("no limit", "the limiting gradients could not be had for the tie labels"))
            elif "one-index" in labels and not limiting:
                self.tie_faults.append(f"{_name(r)}: labelled one-index, but {value} is none of the limiting "
                                       f"gradients; numbers: {_facts(fd)}")
            elif limiting and not tie_labelled:
                self.tie_faults.append(f"{_name(r)}: {value} is a limiting gradient at a tie but carries none of "
                                       f"first/last/one-index: {labels}; numbers: {_facts(fd)}")

    def _uncover(self, r: dict[str, Any], why: Uncovered) -> None:
        entry = self.uncovered.setdefault(r["case"], {"category": why.kind, "detail": why.detail, "cells": 0})
        entry["cells"] += 1

    def summary(self) -> str:
        by_fw = collections.Counter(f"{r['framework']} {r['framework_version']}" for r in self.cells)
        by_reason: dict[str, list[str]] = collections.defaultdict(list)
        for case_id, e in sorted(self.uncovered.items()):
            by_reason[e["category"]].append(f"{case_id} ({e['cells']} cells: {e['detail']})")
        lines = [
            f"numeric second derivation of labels: {len(self.cells)} cells ({MODE}, {DTYPE}) of "
            + ", ".join(f"{k} [{n}]" for k, n in sorted(by_fw.items())),
            f"  covered, labels compared: {self.covered} cells of {len({r['case'] for r in self.cells})} cases",
            f"  status only (error/unavailable, label checked): {self.status_only} cells",
            f"  uncovered: {sum(e['cells'] for e in self.uncovered.values())} cells"
            + ("" if by_reason else " (none)"),
        ]
        for reason, items in sorted(by_reason.items()):
            lines.append(f"    {reason}: " + "; ".join(items))
        lines.append(f"  not covered, structural: first vs last ({self.structural} cells carry one; a number "
                     "cannot say which tied input is earlier)")
        lines.append(f"  split-even not compared on {self.partial} cells of {len(PARTIAL)} continuum ties: "
                     + ", ".join(sorted(PARTIAL)))
        return "\n".join(lines)


@pytest.fixture(scope="module")
def judged() -> Judgement:
    return Judgement()


def test_every_framework_has_cells(judged):
    frameworks = set(judged.newest)
    seen = {r["framework"] for r in judged.cells}
    assert seen == frameworks and len(frameworks) >= 2, \
        f"no {MODE}/{DTYPE} cell of the newest release of {sorted(frameworks - seen)} (newest: {judged.newest})"


def test_labels_agree_with_numeric_derivation(judged):
    assert not judged.disagreements, (
        f"{len(judged.disagreements)} cells whose labels differ from the numeric derivation:\n"
        + "\n".join(judged.disagreements))


def test_tie_labels_agree_with_limiting_gradients(judged):
    assert not judged.tie_faults, (
        f"{len(judged.tie_faults)} tie cells at odds with the numeric limiting gradients:\n"
        + "\n".join(judged.tie_faults))


def test_uncovered_cases_are_the_listed_ones(judged):
    found = {case_id: e["category"] for case_id, e in judged.uncovered.items()}
    listed = {case_id: category for case_id, (category, _why) in UNCOVERED.items()}
    new = {k: f"{v}: {judged.uncovered[k]['detail']}" for k, v in found.items() if listed.get(k) != v}
    gone = {k: v for k, v in listed.items() if found.get(k) != v}
    assert not new and not gone, (
        f"cases the numeric derivation does not cover, not listed in UNCOVERED (write why): {new}; "
        f"listed but now covered or for another reason (remove them): {gone}")


def test_partial_cases_are_continuum_ties(judged):
    """PARTIAL holds exactly the ties whose limiting gradients form a continuum."""
    continuum_ties = set()
    for case_id, case in judged.cases.items():
        if case["tie"] and case_id in {r["case"] for r in judged.cells}:
            fd = derive(case_id, case["sympy"], case["at"], True)
            if isinstance(fd, Field) and fd.continuum:
                continuum_ties.add(case_id)
    assert continuum_ties == set(PARTIAL), \
        f"continuum ties {sorted(continuum_ties)}, PARTIAL lists {sorted(PARTIAL)}"


def test_coverage_summary(judged, capsys, record_property):
    text = judged.summary()
    record_property("numeric_label_coverage", text)
    with capsys.disabled():
        print("\n" + text)
    assert judged.covered > 0.9 * (len(judged.cells) - judged.status_only), \
        f"the numeric derivation covers under 90% of the ok cells:\n{text}"


# --------------------------------------------------------------------------- the numeric derivation itself


@pytest.mark.parametrize(("text", "at", "facts"), [
    ("Max(x, 0)", {"x": 0}, {"kind": "kink", "left": 0.0, "right": 1.0, "min_norm": (0.0,), "lipschitz": True}),
    ("Max(x, 1e-300)", {"x": 0}, {"kind": "differentiable", "derivative": (0.0,)}),
    ("floor(x)", {"x": 1}, {"kind": "jump", "left": math.inf, "right": 0.0, "left_piece": 0.0, "right_piece": 0.0}),
    ("sqrt(x)", {"x": 0}, {"kind": "kink", "left": None, "right": math.inf, "lipschitz": False}),
    ("Max(x, y)", {"x": 1, "y": 1}, {"kind": "kink", "limiting": {(1.0, 0.0), (0.0, 1.0)}, "min_norm": (0.5, 0.5)}),
    ("sqrt(v[0]**2 + v[1]**2)", {"v": [0, 0]}, {"kind": "kink", "continuum": True, "min_norm": (0.0, 0.0)}),
    ("Max(5*x + 2*y, -20*x + 50*y, 20*x - 50*y)", {"x": 0, "y": 0},
     {"kind": "kink", "limiting": {(5.0, 2.0), (-20.0, 50.0), (20.0, -50.0)}}),
    ("sqrt(Max(x*y, 0)) + x", {"x": 0, "y": 0}, {"lipschitz": False}),
])
def test_numeric_derivation_on_fields_known_by_hand(text, at, facts):
    fd = derive(f"hand:{text}", text, at, False)
    assert isinstance(fd, Field), f"{text} at {at}: not derived: {fd}"
    for name, want in facts.items():
        got = getattr(fd, name)
        if name == "limiting":
            got = {tuple(round(c, 9) for c in g) for g in got}
        elif isinstance(want, tuple):
            got = tuple(round(c, 9) + 0.0 for c in got)
        assert got == want, f"{text} at {at}: {name} = {got}, expected {want} ({_facts(fd)})"


@pytest.mark.parametrize(("text", "at", "kind"), [
    ("Piecewise((x * sin(1 / x), Ne(x, 0)), (0, True))", {"x": 0}, "no limit"),
    ("Max(x, 0)", {"x": math.inf}, "point not finite"),
])
def test_numeric_derivation_says_what_it_cannot_judge(text, at, kind):
    got = derive(f"hand:{text}", text, at, False)
    assert isinstance(got, Uncovered) and got.kind == kind, f"{text} at {at}: expected uncovered {kind!r}, got {got}"


def test_numeric_labels_follow_the_documented_rules():
    relu = derive("hand:relu", "Max(x, 0)", {"x": 0}, False)
    assert isinstance(relu, Field)
    cases = {0.0: {"left", "min-norm", "in-clarke"}, 1.0: {"right", "in-clarke"}, 0.5: {"mean", "in-clarke"},
             2.0: {"outside-clarke"}, math.inf: {"+inf"}, math.nan: {"nan"}}
    for value, want in cases.items():
        got, undecided = numeric_labels([value], relu, DTYPE, tie=False, tie_labelled=False)
        assert undecided is None and got == want, f"relu'(0) = {value}: {sorted(got)}, expected {sorted(want)}"
    tie = derive("hand:max", "Max(x, y)", {"x": 1, "y": 1}, True)
    assert isinstance(tie, Field)
    got, _ = numeric_labels([0.5, 0.5], tie, DTYPE, tie=True, tie_labelled=False)
    assert got == {"split-even", "min-norm", "in-clarke"}, f"Max'(1, 1) = (1/2, 1/2): {sorted(got)}"
    assert tie.is_limiting([1.0, 0.0], tolerance(DTYPE)) and not tie.is_limiting([0.5, 0.5], tolerance(DTYPE))
    got, _ = numeric_labels([1.0, 1.0], tie, DTYPE, tie=True, tie_labelled=True)
    assert got == set(), f"a tie-labelled value keeps outside-clarke away: {sorted(got)}"
