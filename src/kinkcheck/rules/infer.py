"""Rules inferred from measurements: what each operation returns at each kind of its kinks, per framework,
environment, mode and dtype, with the cells it rests on and every cell that does not follow it.

A measured cell is **evidence** for an operation's rule when, in its program, every call that sits on its kink
(with a cotangent that is not 0) is that operation at that kind of kink: ``torch.clamp(x, 0, 1)`` at 1 is
evidence for ``torch.clamp`` at ``min at a bound``; ``torch.relu(x) + torch.abs(x)`` at 0 is evidence for
neither (two operations at their kinks: :mod:`kinkcheck.rules.validate` predicts it instead). For each rule label
(:data:`kinkcheck.rules.local.LABELS`) the program's value is computed by the chain rule with that label at the
kink (:func:`kinkcheck.rules.chain.backward`), and the cell **fits** every label whose value it equals within the
dtype's tolerance (:func:`kinkcheck.classify.tolerance`).

The **rule** of an operation and kind in one environment, mode and dtype is the set of labels that fit the most
of its evidence cells, in :data:`LABELS` order (labels its evidence does not tell apart stay together:
``relu`` at 0 gives 0, which is ``left``, ``min-norm`` and ``zero``); a cell that fits none of them is a
**counter-example**, kept with its value. Rules are inferred from the observations table the report writes
(``observations.parquet``), never from a framework.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import sympy

from kinkcheck import classify
from kinkcheck.rules import graph as gr
from kinkcheck.rules.chain import NotPredicted, backward
from kinkcheck.rules.local import LABELS, LocalKink, label_values, local_oracle
from kinkcheck.rules.cached import code_digest, unpickle
from kinkcheck.rules.names import operation, site_operation

__all__ = ["Cell", "Evidence", "ProgramModel", "Rule", "RuleBook", "infer", "model_program", "operation"]


@dataclass(frozen=True)
class ProgramModel:
    """A catalog program cut at its calls, at its case's point, with its value under each rule label.

    Attributes
    ----------
    case, framework, program : str
    calls : int
        Calls the program makes (0 when it is not mapped).
    graph : Graph or None
        None when the program has no symbolic form (``reason`` says why).
    key : tuple (operation, kind) or None
        The one operation and kind at a kink in the program, when there is exactly one (evidence for its rule).
    by_label : dict
        Rule label → the program's value (exact, flat) with that label at the kink; only when ``key`` is set.
    reason : str or None
    """

    case: str
    framework: str
    program: str
    calls: int
    graph: gr.Graph | None
    key: tuple[str, str] | None = None
    by_label: Mapping[str, tuple[sympy.Expr, ...]] = field(default_factory=dict)
    reason: str | None = None
    #: every (operation, kind) a walk of the program met at a kink (a prediction depends on their rules only)
    seen: frozenset[tuple[str, str]] = frozenset()


def case_models(case: Any) -> list[ProgramModel]:
    """Every program of a catalog case, modelled (:func:`model_program`); cached on disk per case
    (:mod:`kinkcheck.cache`, kind ``rules``), keyed on the case, its programs and :func:`code_digest`."""
    import hashlib
    import pickle

    from kinkcheck.cache import read_cached, write_cached

    key = hashlib.sha256(repr((code_digest(), case.id, case.sympy, repr(case.at), case.tie,
                               [(p.framework, p.id) for p in case.programs])).encode()).hexdigest()[:32]
    raw = read_cached("rules", key)
    if raw is not None:
        got = unpickle(raw)
        if isinstance(got, list):
            return got
    models = [model_program(case, p) for p in case.programs]
    try:
        write_cached("rules", key, pickle.dumps(models, protocol=pickle.HIGHEST_PROTOCOL))
    except (pickle.PicklingError, RecursionError, TypeError):
        pass
    return models


def model_program(case: Any, program: Any) -> ProgramModel:
    """Cut a catalog program (``case.program(...)``) at its calls and evaluate it under each rule label."""
    from kinkcheck.oracles.mapping import Unmapped

    try:
        graph = gr.build(program.tree, case.at, program.framework)
    except (Unmapped, ArithmeticError, TypeError, ValueError, IndexError, RecursionError) as err:
        return ProgramModel(case.id, program.framework, program.id, 0, None, reason=f"not mapped: {err}")
    keys: set[tuple[str, str]] = set()

    def discover(site: gr.Site, kink: LocalKink) -> tuple[sympy.Expr, ...]:
        keys.add((site_operation(program.framework, site), kink.kind))
        vals = label_values(local_oracle(kink), kink.kind, kink)
        return vals.get("zero", (sympy.S.Zero,) * len(kink.symbols))

    try:
        backward(graph, discover)
    except NotPredicted as err:
        return ProgramModel(case.id, program.framework, program.id, graph.calls, graph, reason=str(err))
    if len(keys) != 1:
        why = "no call sits at its kink" if not keys else "calls of more than one operation sit at their kinks"
        return ProgramModel(case.id, program.framework, program.id, graph.calls, graph, reason=why,
                            seen=frozenset(keys))
    key = next(iter(keys))
    by_label: dict[str, tuple[sympy.Expr, ...]] = {}
    for label in LABELS:
        def choose(site: gr.Site, kink: LocalKink, label: str = label) -> tuple[sympy.Expr, ...]:
            vals = label_values(local_oracle(kink), kink.kind, kink)
            if label not in vals:
                raise NotPredicted(f"{label} is not defined for {site.name} at {kink.kind}")
            return vals[label]
        try:
            value, visits = backward(graph, choose)
        except NotPredicted:
            continue
        walked = {(v.operation, v.kind) for v in visits}
        keys |= walked
        if walked == {key}:
            by_label[label] = value
    return ProgramModel(case.id, program.framework, program.id, graph.calls, graph, key, by_label,
                        seen=frozenset(keys))


class Cell(NamedTuple):
    """Where a value was measured: environment, mode, dtype."""

    environment: str
    mode: str
    dtype: str


@dataclass(frozen=True)
class Evidence:
    """One measured cell of a program whose only kink is one operation's: its value and the labels it fits."""

    case: str
    program: str
    value: tuple[float, ...]
    fits: frozenset[str]


@dataclass
class Rule:
    """One operation at one kind of kink, in one framework: per cell, the labels and their evidence."""

    framework: str
    operation: str
    kind: str
    evidence: dict[Cell, list[Evidence]] = field(default_factory=dict)
    #: answers of :meth:`labels`, kept once the evidence is complete (inference appends it first, then asks)
    _memo: dict[tuple[Cell, str | None], tuple[str, ...]] = field(default_factory=dict, repr=False, compare=False)
    #: per cell, how many evidence cells fit each label (LABELS order), in all and per case
    _tally: dict[Cell, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def key(self) -> tuple[str, str, str]:
        return self.framework, self.operation, self.kind

    def labels(self, cell: Cell, *, without: str | None = None) -> tuple[str, ...]:
        """The rule at ``cell`` (``without`` a case: its cells left out): the largest set of labels that the most
        evidence cells all fit, in :data:`LABELS` order. Empty when nothing there is evidence, no label fits any of
        it, or two different label sets are supported by equally many cells (the evidence contradicts itself:
        ``hardshrink`` at 0.5 and -0.5 fitting ``right-piece`` and ``left-piece``, no label both)."""
        hit = self._memo.get((cell, without))
        if hit is not None:
            return hit
        tally = self._tally.get(cell)
        if tally is None:
            tally = self._tally[cell] = _tally(self.evidence.get(cell, ()))
        total, by_case = tally
        if without is not None and without in by_case:
            mine = by_case[without]
            total = {f: n - mine.get(f, 0) for f, n in total.items() if n - mine.get(f, 0) > 0}
        out = _best(total)
        self._memo[(cell, without)] = out
        return out

    def counterexamples(self, cell: Cell) -> list[Evidence]:
        """The evidence cells at ``cell`` that do not fit its labels (every one of them where no label fits)."""
        labels = set(self.labels(cell))
        return [e for e in self.evidence.get(cell, ()) if not labels or not labels <= e.fits]


def _tally(items: Sequence[Evidence]) -> tuple[dict[frozenset[str], int], dict[str, dict[frozenset[str], int]]]:
    """How many evidence cells have each set of fitting labels, in all and per case."""
    total: dict[frozenset[str], int] = defaultdict(int)
    by_case: dict[str, dict[frozenset[str], int]] = {}
    for e in items:
        total[e.fits] += 1
        mine = by_case.setdefault(e.case, defaultdict(int))
        mine[e.fits] += 1
    return dict(total), by_case


def _best(counts: Mapping[frozenset[str], int]) -> tuple[str, ...]:
    """The label set the most cells fit whole (the largest such set), or () when none or when two sets tie."""
    candidates = {f for f in counts if f}
    if not candidates:
        return ()
    grown = True
    while grown:  # every label set that several cells share: the intersections too (hardshrink's piece-at-point)
        more = {a & b for a in candidates for b in candidates if a & b} - candidates
        candidates |= more
        grown = bool(more)
    support = {s: sum(n for f, n in counts.items() if s <= f) for s in candidates}
    top = max(support.values())
    best = [s for s in candidates if support[s] == top]
    widest = max(len(s) for s in best)
    best = [s for s in best if len(s) == widest]
    if len(best) != 1:
        return ()
    return tuple(label for label in LABELS if label in best[0])


@dataclass
class RuleBook:
    """Every inferred rule, and the program models they came from."""

    rules: dict[tuple[str, str, str], Rule] = field(default_factory=dict)
    programs: dict[tuple[str, str, str], ProgramModel] = field(default_factory=dict)

    def rule(self, framework: str, operation: str, kind: str) -> Rule | None:
        return self.rules.get((framework, operation, kind))


def _fits(value: Sequence[float], by_label: Mapping[str, tuple[sympy.Expr, ...]], dtype: str) -> frozenset[str]:
    """The labels whose value equals the measured one within the dtype's tolerance (a nan equals a nan: IEEE
    arithmetic makes ``0 × inf`` one)."""
    return frozenset(label for label, target in by_label.items()
                     if classify.same_value(value, [float(c) for c in target], dtype))


def infer(rows: Iterable[Mapping[str, Any]], catalog: Any) -> RuleBook:
    """Infer every rule from observation rows (``observations.parquet`` as dicts: ``case``, ``program``,
    ``framework``, ``environment``, ``mode``, ``dtype``, ``status``, ``value``).

    Only first-order cells (:data:`kinkcheck.vocabulary.GRADIENT_MODES`) that were measured (``status == "ok"``)
    count; a program without a symbolic form, or with no kink or kinks of several operations, is no evidence.
    """
    import json

    from kinkcheck.vocabulary import GRADIENT_MODES, flat_value

    book = RuleBook()
    gradient_modes = frozenset(GRADIENT_MODES)
    modelled: set[str] = set()
    parsed: dict[str, tuple[float, ...]] = {}  # a value's text → its flat floats (most values repeat)
    for row in rows:
        if row["status"] != "ok" or row["mode"] not in gradient_modes or row["value"] is None:
            continue
        pkey = (row["case"], row["framework"], row["program"])
        model = book.programs.get(pkey)
        if model is None and row["case"] not in modelled:
            modelled.add(row["case"])
            try:
                case = catalog.case(row["case"])
            except KeyError:
                continue
            for m in case_models(case):
                book.programs[(m.case, m.framework, m.program)] = m
            model = book.programs.get(pkey)
        if model is None or model.key is None:
            continue
        value = parsed.get(row["value"])
        if value is None:
            value = parsed[row["value"]] = tuple(flat_value(json.loads(row["value"])))
        rule = book.rules.get((model.framework, *model.key))
        if rule is None:
            rule = book.rules[(model.framework, *model.key)] = Rule(model.framework, *model.key)
        cell = Cell(row["environment"], row["mode"], row["dtype"])
        rule._memo.clear()
        rule._tally.pop(cell, None)
        rule.evidence.setdefault(cell, []).append(
            Evidence(model.case, model.program, value, _fits(value, model.by_label, row["dtype"])))
    return book


def by_case(book: RuleBook) -> dict[str, list[ProgramModel]]:
    """The program models of each case."""
    out: dict[str, list[ProgramModel]] = defaultdict(list)
    for (case, _, _), model in book.programs.items():
        out[case].append(model)
    return out
