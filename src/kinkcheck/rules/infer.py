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

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import sympy

from kinkcheck import classify
from kinkcheck.rules import graph as gr
from kinkcheck.rules.chain import NotPredicted, backward
from kinkcheck.rules.local import LABELS, LocalKink, label_values, local_oracle
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


def code_digest() -> str:
    """A digest of the code a program model depends on (the rules, the oracles, the framework rows)."""
    import hashlib
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    models = [root / "rules" / f"{name}.py" for name in ("graph", "local", "chain", "infer", "names")]
    for path in sorted([*models, *root.glob("oracles/*.py"), *root.glob("frameworks/*/mapping.py")]):
        h.update(path.relative_to(root).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


_DIGEST: list[str] = []


def case_models(case: Any) -> list[ProgramModel]:
    """Every program of a catalog case, modelled (:func:`model_program`); cached on disk per case
    (:mod:`kinkcheck.cache`, kind ``rules``), keyed on the case, its programs and :func:`code_digest`."""
    import hashlib
    import pickle

    from kinkcheck.cache import read_cached, write_cached

    if not _DIGEST:
        _DIGEST.append(code_digest())
    key = hashlib.sha256(repr((_DIGEST[0], case.id, case.sympy, repr(case.at), case.tie,
                               [(p.framework, p.id) for p in case.programs])).encode()).hexdigest()[:32]
    raw = read_cached("rules", key)
    if raw is not None:
        try:
            got = pickle.loads(raw)
            if isinstance(got, list):
                return got
        except Exception:  # noqa: BLE001 - a damaged cache entry is recomputed, never an error
            pass
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
        return ProgramModel(case.id, program.framework, program.id, graph.calls, graph, reason=why)
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
        if {(v.operation, v.kind) for v in visits} == {key}:
            by_label[label] = value
    return ProgramModel(case.id, program.framework, program.id, graph.calls, graph, key, by_label)


@dataclass(frozen=True)
class Cell:
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

    @property
    def key(self) -> tuple[str, str, str]:
        return self.framework, self.operation, self.kind

    def labels(self, cell: Cell, *, without: str | None = None) -> tuple[str, ...]:
        """The labels that fit the most evidence cells at ``cell`` (``without`` a case: leave it out); empty
        when nothing there is evidence or no label fits any of it."""
        items = [e for e in self.evidence.get(cell, ()) if e.case != without]
        counts = Counter(label for e in items for label in e.fits)
        if not counts:
            return ()
        best = max(counts.values())
        return tuple(label for label in LABELS if counts.get(label) == best)

    def counterexamples(self, cell: Cell) -> list[Evidence]:
        """The evidence cells at ``cell`` that do not fit its labels (every one of them where no label fits)."""
        labels = set(self.labels(cell))
        return [e for e in self.evidence.get(cell, ()) if not labels or not labels <= e.fits]


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
        value = tuple(flat_value(json.loads(row["value"])))
        rule = book.rules.get((model.framework, *model.key))
        if rule is None:
            rule = book.rules[(model.framework, *model.key)] = Rule(model.framework, *model.key)
        cell = Cell(row["environment"], row["mode"], row["dtype"])
        rule.evidence.setdefault(cell, []).append(
            Evidence(model.case, model.program, value, _fits(value, model.by_label, row["dtype"])))
    return book


def by_case(book: RuleBook) -> dict[str, list[ProgramModel]]:
    """The program models of each case."""
    out: dict[str, list[ProgramModel]] = defaultdict(list)
    for (case, _, _), model in book.programs.items():
        out[case].append(model)
    return out
