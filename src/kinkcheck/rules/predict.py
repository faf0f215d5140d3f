"""Predict a program's value at a point from its operations' rules, by the chain rule AD applies.

A prediction is what the inferred rules compose to (:func:`kinkcheck.rules.chain.backward`): smooth calls give
their derivative, a call at its kink gives its rule's choice for that framework's environment, mode and dtype.
Where a rule's labels were not told apart by its evidence (``relu`` at 0: ``left``, ``min-norm`` and ``zero``
all gave 0), the prediction is made only when they give one value at this call; otherwise it is "not predicted"
and says which labels disagree. A prediction is never a measurement: every face shows it as predicted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import sympy

from kinkcheck.rules import graph as gr
from kinkcheck.rules.chain import NotPredicted, backward
from kinkcheck.rules.infer import Cell, RuleBook
from kinkcheck.rules.names import site_operation
from kinkcheck.rules.local import LocalKink, label_values, local_oracle

__all__ = ["Prediction", "Used", "predict"]


@dataclass(frozen=True)
class Used:
    """A call that sat on its kink in a prediction, and the rule it took."""

    operation: str
    kind: str
    labels: tuple[str, ...]
    value: tuple[sympy.Expr, ...]


@dataclass(frozen=True)
class Prediction:
    """The predicted value (exact, flat, in the program's input component order), or why there is none.

    Attributes
    ----------
    value : tuple of sympy numbers or None
    reason : str or None
        ``"not predicted: …"`` when ``value`` is None.
    used : tuple of Used
        The calls at their kinks and the rule each used (empty: no call sat on a kink with a nonzero cotangent;
        the value is the chain rule of derivatives alone).
    """

    value: tuple[sympy.Expr, ...] | None
    reason: str | None = None
    used: tuple[Used, ...] = ()
    #: ``value`` as floats (None with it)
    floats: tuple[float, ...] | None = None
    #: every (operation, kind) the walk asked a rule for, found or not (the prediction depends on these only)
    met: frozenset[tuple[str, str]] = frozenset()

    def __post_init__(self) -> None:
        if self.value is not None and self.floats is None:
            object.__setattr__(self, "floats", tuple(float(v) for v in self.value))


def chooser(book: RuleBook, framework: str, cell: Cell, *, without: str | None = None,
            record: list[Used] | None = None,
            met: set[tuple[str, str]] | None = None) -> Callable[[gr.Site, LocalKink], tuple[sympy.Expr, ...]]:
    """The chooser of :func:`kinkcheck.rules.chain.backward` for ``cell`` (``without`` a case: its rules
    inferred without that case's cells); ``met`` collects every (operation, kind) it is asked about."""

    def choose(site: gr.Site, kink: LocalKink) -> tuple[sympy.Expr, ...]:
        op = site_operation(framework, site)
        if met is not None:
            met.add((op, kink.kind))
        rule = book.rule(framework, op, kink.kind)
        if rule is None:
            raise NotPredicted(f"no rule for {op} at {kink.kind} in {framework}")
        labels = rule.labels(cell, without=without)
        if not labels:
            raise NotPredicted(f"no rule for {op} at {kink.kind} in this release, mode and dtype (nothing measured "
                               "there, its cells contradict each other, or no label fits them)")
        vals = _LABELS.get(kink)
        if vals is None:  # a walk meets the same kink in every cell of its program
            vals = _LABELS[kink] = label_values(local_oracle(kink), kink.kind, kink)
        got = {label: vals.get(label) for label in labels}
        distinct = {v for v in got.values() if v is not None}
        if len(distinct) != 1 or any(v is None for v in got.values()):
            shown = ", ".join(f"{k} {'undefined' if v is None else _text(v)}" for k, v in got.items())
            raise NotPredicted(f"the evidence for {op} at {kink.kind} does not decide this call ({shown})")
        value = distinct.pop()
        if record is not None:
            record.append(Used(op, kink.kind, labels, value))
        return value

    return choose


#: :func:`kinkcheck.rules.local.label_values` of each kink met (the oracle and the labels' values are the kink's own)
_LABELS: dict[LocalKink, dict[str, tuple[sympy.Expr, ...]]] = {}


def _text(v: tuple[sympy.Expr, ...]) -> str:
    return "[" + ", ".join(str(c) for c in v) + "]" if len(v) > 1 else str(v[0])


def predict(graph: gr.Graph, book: RuleBook, framework: str, cell: Cell, *, without: str | None = None) -> Prediction:
    """Predict a cut program (:func:`kinkcheck.rules.graph.build`) in one environment, mode and dtype."""
    used: list[Used] = []
    met: set[tuple[str, str]] = set()
    try:
        value, _ = backward(graph, chooser(book, framework, cell, without=without, record=used, met=met))
    except NotPredicted as err:
        return Prediction(None, f"not predicted: {err}", met=frozenset(met))
    except (ArithmeticError, TypeError, ValueError, RecursionError) as err:  # sympy failing on a form: no traceback
        return Prediction(None, f"not predicted: the chain rule did not evaluate here ({type(err).__name__}: {err})",
                          met=frozenset(met))
    return Prediction(value, None, tuple(used), met=frozenset(met))
