"""Rules inferred from measurements: what each operation returns at each kind of its kinks, per framework,
environment, mode and dtype, with the cells it rests on and every cell that does not follow it.

A measured cell is **evidence** for an operation's rule when, in its program, every call that sits on its kink
(with a cotangent that is not 0) is that operation at that kind of kink: ``torch.clamp(x, 0, 1)`` at 1 is
evidence for ``torch.clamp`` at ``min at a bound``; ``torch.relu(x) + torch.abs(x)`` at 0 is evidence for
neither (two operations at their kinks: :mod:`kinkcheck.rules.validate` predicts it instead). For each rule label
(:data:`kinkcheck.rules.local.LABELS`) the program's value is computed by the chain rule with that label at the
kink (:func:`kinkcheck.rules.chain.backward`), and the cell **fits** every label whose value it equals within the
dtype's tolerance (:func:`kinkcheck.oracles.classify.tolerance`).

The **rule** of an operation and kind in one environment, mode and dtype is the set of labels that fit the most
of its evidence cells, in :data:`LABELS` order (labels its evidence does not tell apart stay together:
``relu`` at 0 gives 0, which is ``left``, ``min-norm`` and ``zero``); a cell that fits none of them is a
**counter-example**, kept with its value. Rules are inferred from the observations table the report writes
(``observations.parquet``), never from a framework.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from kinkcheck.oracles import classify
from kinkcheck.rules.local import LABELS
from kinkcheck.rules.model import ProgramModel, case_models
from kinkcheck.rules.names import operation
from kinkcheck.rules.table import Encoded, encode
from kinkcheck.vocabulary import flat_value

__all__ = ["Cell", "Evidence", "ProgramModel", "Rule", "RuleBook", "infer", "operation"]


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
        if cell not in self.evidence:  # nothing measured this operation's kink here
            return ()
        hit = self._memo.get((cell, without))
        if hit is not None:
            return hit
        tally = self._tally.get(cell)
        if tally is None:
            tally = self._tally[cell] = _tally(self.evidence.get(cell, ()))
        total, by_case = tally
        if without is not None and without not in by_case:  # the case left out is no evidence here
            out = self.labels(cell)
        elif without is not None and len(fitting := [f for f in total if f]) == 1:  # one label set fits here
            out = self.labels(cell) if total[fitting[0]] > by_case[without].get(fitting[0], 0) else ()
        else:
            if without is not None:
                mine = by_case[without]
                total = {f: n - mine.get(f, 0) for f, n in total.items() if n - mine.get(f, 0) > 0}
            out = _best(total)
        self._memo[(cell, without)] = out
        return out

    def counterexamples(self, cell: Cell) -> list[Evidence]:
        """The evidence cells at ``cell`` that do not fit its labels (every one of them where no label fits)."""
        labels = set(self.labels(cell))
        tally = self._tally.get(cell)
        if labels and tally is not None and all(labels <= f for f in tally[0]):  # every cell here fits
            return []
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
    if len(candidates) == 1:  # every cell that fits a label fits the same ones (most rules)
        return _ordered(next(iter(candidates)))
    key = frozenset(counts.items())
    hit = _BEST.get(key)
    if hit is None:
        hit = _BEST[key] = _best_of(candidates, counts)
    return hit


#: :func:`_best` of tallies already seen (the same few tallies recur over environments and left-out cases)
_BEST: dict[frozenset[tuple[frozenset[str], int]], tuple[str, ...]] = {}


def _best_of(candidates: set[frozenset[str]], counts: Mapping[frozenset[str], int]) -> tuple[str, ...]:
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
    return _ordered(best[0])


def _ordered(labels: frozenset[str]) -> tuple[str, ...]:
    """A label set in :data:`LABELS` order (kept: a few dozen sets recur in every cell)."""
    hit = _ORDERED.get(labels)
    if hit is None:
        hit = _ORDERED[labels] = tuple(label for label in LABELS if label in labels)
    return hit


_ORDERED: dict[frozenset[str], tuple[str, ...]] = {}


@dataclass
class Coded:
    """Every rule's labels in every cell of the observations table, as codes, and where leaving one case out
    changes them: what leave-one-case-out validation asks half a million times, computed with NumPy.

    ``full[i, c]`` is the code (in ``sets``) of rule ``rules[i]``'s labels at cell code ``c`` (0: none);
    ``without[(i, case)]`` lists the (cell code, label code) where leaving ``case`` out gives other labels."""

    rules: list[tuple[str, str, str]]
    cells: list[Cell]
    sets: list[tuple[str, ...]]
    full: Any
    without: dict[tuple[int, str], list[tuple[int, int]]]

    def column(self, rule: tuple[str, str, str], case: str) -> Any:
        """Rule ``rule``'s label codes over every cell, with ``case`` left out."""
        i = self.index[rule]
        changed = self.without.get((i, case))
        if not changed:
            return self.full[i]
        out = self.full[i].copy()
        for c, code in changed:
            out[c] = code
        return out

    #: rule key → its row in ``full``
    index: dict[tuple[str, str, str], int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.index = {k: i for i, k in enumerate(self.rules)}


@dataclass
class RuleBook:
    """Every inferred rule, and the program models they came from."""

    rules: dict[tuple[str, str, str], Rule] = field(default_factory=dict)
    programs: dict[tuple[str, str, str], ProgramModel] = field(default_factory=dict)
    #: the rules' labels in every cell of the table they were inferred from, as codes (validation reads them)
    coded: Coded | None = None

    def rule(self, framework: str, operation: str, kind: str) -> Rule | None:
        return self.rules.get((framework, operation, kind))


def _fits(value: Sequence[float], targets: Mapping[str, Sequence[float]], dtype: str) -> frozenset[str]:
    """The labels whose value (as floats) equals the measured one within the dtype's tolerance (a nan equals a nan:
    IEEE arithmetic makes ``0 × inf`` one)."""
    return frozenset(label for label, target in targets.items() if classify.same_value(value, target, dtype))


def infer(rows: Any, catalog: Any) -> RuleBook:
    """Infer every rule from the observations: a ``pyarrow.Table`` with :data:`kinkcheck.rules.table.COLUMNS`, rows
    as dicts, or a table already coded (:func:`kinkcheck.rules.table.encode`).

    Only first-order cells (:data:`kinkcheck.vocabulary.GRADIENT_MODES`) that were measured (``status == "ok"``)
    count; a program without a symbolic form, or with no kink or kinks of several operations, is no evidence.
    """
    import numpy as np

    enc = rows if isinstance(rows, Encoded) else encode(rows)
    book = RuleBook()
    models: list[ProgramModel | None] = []  # per program code
    loaded: set[str] = set()
    for case_id, fw, program in enc.programs:  # first-appearance order: the order the rows met them
        if case_id not in loaded:
            loaded.add(case_id)
            try:
                case = catalog.case(case_id)
            except KeyError:
                case = None
            for m in case_models(case) if case is not None else ():
                book.programs[(m.case, m.framework, m.program)] = m
        models.append(book.programs.get((case_id, fw, program)))
    evident = np.array([m is not None and m.key is not None for m in models] or [False], dtype=bool)
    rows_ev = np.flatnonzero(evident[enc.pk]) if len(enc) else np.array([], dtype=np.int64)
    cells = [Cell(*c) for c in enc.cells]
    if not len(rows_ev):  # no program sits alone at one operation's kink: no rule
        book.coded = Coded([], cells, [()], np.zeros((0, len(cells)), dtype=np.int32), {})
        return book
    dtypes = sorted({c.dtype for c in cells})
    cell_dtype = np.array([dtypes.index(c.dtype) for c in cells], dtype=np.int64)
    pk, cell, val = enc.pk[rows_ev], enc.cell[rows_ev], enc.value[rows_ev]
    # one Evidence per (program, value, dtype): the same program gives the same value in many environments
    key = (pk * (len(enc.values) + 1) + val) * len(dtypes) + cell_dtype[cell]
    _, first, which = np.unique(key, return_index=True, return_inverse=True)
    evidence: list[Evidence] = []
    targets: dict[int, dict[str, list[float]]] = {}  # a program's value under each label, as floats
    for r in rows_ev[first].tolist():
        p = int(enc.pk[r])
        model = models[p]
        if p not in targets:
            targets[p] = {label: [float(c) for c in v] for label, v in model.by_label.items()}
        value = tuple(flat_value(json.loads(enc.values[enc.value[r]])))
        evidence.append(Evidence(model.case, model.program, value,
                                 _fits(value, targets[p], cells[enc.cell[r]].dtype)))
    which = which.reshape(-1)
    # each program's rule; each (rule, cell)'s evidence in the table's row order, and its tallies
    found: list[Rule] = []
    index: dict[tuple[str, str, str], int] = {}
    rule_of = np.zeros(len(models), dtype=np.int64)
    for p in np.unique(pk).tolist():
        model = models[p]
        rk = (model.framework, *model.key)
        if rk not in index:
            index[rk] = len(found)
            found.append(book.rules.setdefault(rk, Rule(model.framework, *model.key)))
        rule_of[p] = index[rk]
    group = rule_of[pk] * len(cells) + cell
    order = np.argsort(group, kind="stable")
    group_sorted, ev_sorted = group[order], which[order]
    starts = np.flatnonzero(np.r_[True, group_sorted[1:] != group_sorted[:-1]])
    ends = np.r_[starts[1:], len(order)]
    fit_sets = sorted({e.fits for e in evidence}, key=sorted)
    case_ids = sorted({e.case for e in evidence})
    fit_index = {f: i for i, f in enumerate(fit_sets)}
    case_index = {c: i for i, c in enumerate(case_ids)}
    fit_of = np.array([fit_index[e.fits] for e in evidence], dtype=np.int64)[which]
    case_of = np.array([case_index[e.case] for e in evidence], dtype=np.int64)[which]
    for s, e in zip(starts.tolist(), ends.tolist()):
        g = int(group_sorted[s])
        found[g // len(cells)].evidence[cells[g % len(cells)]] = [evidence[i] for i in ev_sorted[s:e].tolist()]
    book.coded = coded = _coded(found, cells, fit_sets, case_ids, group, fit_of, case_of)
    full = coded.full.reshape(-1).tolist()
    for g in group_sorted[starts].tolist():  # the rules' labels, as labels() would compute them
        found[g // len(cells)]._memo[(cells[g % len(cells)], None)] = coded.sets[full[g]]
    return book


def _coded(found: list[Rule], cells: list[Cell], fit_sets: list[frozenset[str]], case_ids: list[str], group: Any,
           fit_of: Any, case_of: Any) -> Coded:
    """:class:`Coded` from each evidence row's group (rule × cell), fit set and case. Where one label set fits the
    cells of a group (most groups), the rule there is that set, and leaving a case out empties it only when every
    cell fitting it is that case's: NumPy. Where several fit, the tallies go to :meth:`Rule.labels` (one
    computation per distinct tally)."""
    import numpy as np

    n_cells, n_fits, n_cases = len(cells), len(fit_sets), len(case_ids)
    sets: list[tuple[str, ...]] = [()]
    ids: dict[tuple[str, ...], int] = {(): 0}

    def code(labels: tuple[str, ...]) -> int:
        if labels not in ids:
            ids[labels] = len(sets)
            sets.append(labels)
        return ids[labels]

    fit_code = np.array([code(_ordered(f)) for f in fit_sets], dtype=np.int32)
    totals, total_counts = np.unique(group * n_fits + fit_of, return_counts=True)
    g_tot, f_tot = np.divmod(totals, n_fits)
    fitting = np.array([bool(f) for f in fit_sets], dtype=bool)[f_tot]
    size = len(found) * n_cells
    n_cand = np.bincount(g_tot[fitting], minlength=size)  # label sets that fit some cell of the group
    the_set = np.full(size, -1, dtype=np.int64)
    the_set[g_tot[fitting]] = f_tot[fitting]
    support = np.zeros(size, dtype=np.int64)
    support[g_tot[fitting]] = total_counts[fitting]
    mine, mine_counts = np.unique((group * n_cases + case_of) * n_fits + fit_of, return_counts=True)
    gc_m, f_m = np.divmod(mine, n_fits)
    g_m, c_m = np.divmod(gc_m, n_cases)
    full = np.zeros(size, dtype=np.int32)
    groups = np.unique(g_tot)
    one = groups[n_cand[groups] == 1]
    full[one] = fit_code[the_set[one]]
    without: dict[tuple[int, str], list[tuple[int, int]]] = {}
    drop = (n_cand[g_m] == 1) & (f_m == the_set[g_m]) & (support[g_m] == mine_counts)
    for g, c in zip(g_m[drop].tolist(), c_m[drop].tolist()):  # that case was all the support
        without.setdefault((g // n_cells, case_ids[c]), []).append((g % n_cells, 0))
    # several label sets fit: each group's tallies, in all and per case, then the general rule once per tally
    several = n_cand[g_tot] > 1
    tallies: dict[int, tuple[dict[frozenset[str], int], dict[str, dict[frozenset[str], int]]]] = {}
    for g, f, n in zip(g_tot[several].tolist(), f_tot[several].tolist(), total_counts[several].tolist()):
        tallies.setdefault(g, ({}, {}))[0][fit_sets[f]] = n
    several = n_cand[g_m] > 1
    for g, c, f, n in zip(g_m[several].tolist(), c_m[several].tolist(), f_m[several].tolist(),
                          mine_counts[several].tolist()):
        tallies[g][1].setdefault(case_ids[c], {})[fit_sets[f]] = n
    best: dict[tuple[Any, ...], int] = {}
    fit_index = {f: i for i, f in enumerate(fit_sets)}
    for g, (total, per_case) in tallies.items():
        rule, cell = found[g // n_cells], cells[g % n_cells]
        rule._tally[cell] = (total, per_case)
        key = tuple(sorted((fit_index[f], n) for f, n in total.items()))
        if key not in best:
            best[key] = code(rule.labels(cell))
        else:
            rule._memo[(cell, None)] = sets[best[key]]
        full[g] = best[key]
        for case, mine_here in per_case.items():
            rest = {f: n - mine_here.get(f, 0) for f, n in total.items() if n > mine_here.get(f, 0)}
            loo = tuple(sorted((fit_index[f], n) for f, n in rest.items()))
            if loo not in best:
                best[loo] = code(_best(rest))
            if best[loo] != full[g]:
                without.setdefault((g // n_cells, case), []).append((g % n_cells, best[loo]))
    return Coded([r.key for r in found], cells, sets, full.reshape(len(found), n_cells), without)


def by_case(book: RuleBook) -> dict[str, list[ProgramModel]]:
    """The program models of each case."""
    out: dict[str, list[ProgramModel]] = defaultdict(list)
    for (case, _, _), model in book.programs.items():
        out[case].append(model)
    return out
