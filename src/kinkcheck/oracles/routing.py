"""The tie routings by input position: which value is ``first`` and which is ``last`` at a tie.

At a tie a max, min or order statistic has several arguments that attain it, and a program's gradient
gives the credit to some of them. The tie labels name that choice by **input position**, in the
flattened order of the case's inputs (``x, y``; ``v[0], v[1], …``; ``m[0][0], m[0][1], …``):

* ``first``: every tied selection gives its credit to its **earliest** tied input;
* ``last``: every tied selection gives its credit to its **latest** tied input.

The value is worked out from the case's own expression (its ``sympy`` field as written: ``Max(v[0], v[1])``,
``kth_smallest(v, 3)``), by the chain rule, with exact numbers at the point, never from the order of a list
another library returns (sympy sorts ``Max``'s arguments by its own key; the oracle's limiting gradients
are sorted by value). A selection is

* ``Max(a, b, …)`` / ``Min(a, b, …)`` (lists flattened): among the arguments that attain it, ``first``
  credits the one whose own routed gradient reaches the earliest input (``last``: the latest);
* ``kth_smallest(v, k)``: the elements of ``v`` equal to the k-th smallest form a tied group; the ranks
  the case selects from that group (one per ``kth_smallest`` node on ``v``) go to the group's earliest
  inputs (``first``) or its latest (``last``). Top-k sums (``kth_smallest(v, 3) + kth_smallest(v, 4)``)
  credit the k earliest; a rank alone credits the earliest.

Where the position does not decide the value the routing is None and no value is ``first`` or ``last``
(a limiting gradient there is ``one-index``); the reason is returned beside it:

* the selected ranks of one tied group carry different coefficients (``msort``:
  ``kth_smallest(v, 3) - kth_smallest(v, 2)`` at ``[1, 1, 0]`` gives ``[-1, 1, 0]`` when rank 2 takes
  ``v[0]`` and ``[1, -1, 0]`` when it takes ``v[1]``: both credit the same two inputs);
* two tied arguments reach the same inputs with different gradients, or one reaches none (a constant);
* the tie sits under a function that is not differentiable there (``Abs`` at 0, ``sqrt`` at 0, a
  ``Piecewise`` or ``floor``): eigenvalue and singular-value ties (``eigvalsh`` at a repeated eigenvalue)
  are ties between smooth pieces, not between inputs, so position does not name them.

Why the case's expression and not its field alone: ``3*v0 - Max(v0, v1)`` and ``2*v0 - v1 + Min(v0, v1)``
are the same function with the same limiting gradients ``(2, 0)`` and ``(3, -1)``, yet their ``first``
routings differ (the max credits ``v0``: ``(2, 0)``; the min credits ``v0``: ``(3, -1)``). The catalog's
expression is the spelling a case is judged in.

Only the standard library and sympy; the catalog expression is parsed by :mod:`kinkcheck.language.expr`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sympy

from kinkcheck.language import expr as ex
from kinkcheck.catalog import Case
from kinkcheck.oracles import translate as tr

__all__ = ["NotRoutable", "Routing", "routing", "routing_of"]

#: Most assignments of tied ranks to inputs tried per rule (every one must give the same value).
_MAX_ASSIGNMENTS = 720


class NotRoutable(Exception):
    """The input position does not decide the value (the message says why)."""


@dataclass(frozen=True)
class Routing:
    """The ``first`` and ``last`` values of a tie case, exact, in the case's component order.

    Attributes
    ----------
    first, last : tuple of sympy.Rational or None
        The gradient under each rule (shape ``(n,)``); None when the position does not decide it.
    reason : str or None
        Why a rule is None (the same for both: a tie under a non-differentiable function decides neither).
    """

    first: tuple[sympy.Expr, ...] | None
    last: tuple[sympy.Expr, ...] | None
    reason: str | None = None


@dataclass(frozen=True)
class _Dual:
    """A value and its exact gradient over the case's flat components."""

    value: sympy.Expr
    grad: tuple[sympy.Expr, ...]
    #: came straight from a tied selection (checked where nested ties are refused)
    tied: bool = False

    def _lift(self, other: Any) -> _Dual:
        if isinstance(other, _Dual):
            return other
        if isinstance(other, (list, tuple)):
            raise NotRoutable("a list in arithmetic")
        v = sympy.sympify(other)
        return _Dual(v, (sympy.S.Zero,) * len(self.grad))

    def __add__(self, o: Any) -> _Dual:
        o = self._lift(o)
        return _Dual(self.value + o.value, tuple(a + b for a, b in zip(self.grad, o.grad)))

    __radd__ = __add__

    def __neg__(self) -> _Dual:
        return _Dual(-self.value, tuple(-a for a in self.grad))

    def __pos__(self) -> _Dual:
        return self

    def __sub__(self, o: Any) -> _Dual:
        return self + (-self._lift(o))

    def __rsub__(self, o: Any) -> _Dual:
        return self._lift(o) + (-self)

    def __mul__(self, o: Any) -> _Dual:
        o = self._lift(o)
        return _Dual(self.value * o.value, tuple(self.value * b + o.value * a for a, b in zip(self.grad, o.grad)))

    __rmul__ = __mul__

    def __truediv__(self, o: Any) -> _Dual:
        o = self._lift(o)
        if o.value == 0:
            raise NotRoutable("a division by zero at the point")
        return _Dual(self.value / o.value,
                     tuple((a * o.value - self.value * b) / o.value**2 for a, b in zip(self.grad, o.grad)))

    def __rtruediv__(self, o: Any) -> _Dual:
        return self._lift(o) / self

    def __pow__(self, o: Any) -> _Dual:
        o = self._lift(o)
        if any(g != 0 for g in o.grad):
            if self.value <= 0:
                raise NotRoutable("a power with a variable exponent of a base that is not positive")
            return _smooth(lambda a, b: a**b, self, o, name="a power")
        return _smooth(lambda a: a**o.value, self, name=f"a power {o.value}")

    def __rpow__(self, o: Any) -> _Dual:
        return self._lift(o) ** self

    def _refuse(self, *_: Any) -> Any:
        raise NotRoutable("a comparison inside the expression (a piecewise function)")

    __lt__ = __le__ = __gt__ = __ge__ = _refuse  # type: ignore[assignment]


def _finite(v: sympy.Expr) -> bool:
    return bool(v.is_real) and bool(v.is_finite)


def _smooth(fn: Callable[..., sympy.Expr], *args: Any, name: str = "a function") -> Any:
    """``fn`` of duals (or numbers) by the chain rule, where every partial derivative is finite at the point."""
    duals = [a for a in args if isinstance(a, _Dual)]
    if not duals:
        return fn(*args)
    n = len(duals[0].grad)
    dummies = [sympy.Dummy(real=True) for _ in args]
    values = [a.value if isinstance(a, _Dual) else sympy.sympify(a) for a in args]
    at = dict(zip(dummies, values))
    expr = fn(*dummies)
    value = sympy.sympify(expr).xreplace(at)
    if not _finite(value):
        raise NotRoutable("a value that is not a finite real number at the point")
    grad = [sympy.S.Zero] * n
    for d, a in zip(dummies, args):
        if not isinstance(a, _Dual):
            continue
        # checked even where the argument's gradient is 0: sqrt(u) at u = 0 is not differentiable whatever u is
        partial = sympy.diff(expr, d).xreplace(at).doit()
        if not _finite(partial) or partial.has(sympy.Heaviside, sympy.DiracDelta, sympy.sign, sympy.Abs,
                                               sympy.Piecewise, sympy.Derivative, sympy.Subs):
            raise NotRoutable(f"{name} is not differentiable at the point")
        grad = [g + partial * ga for g, ga in zip(grad, a.grad)]
    return _Dual(value, tuple(grad))


def _positions(d: _Dual) -> tuple[int, ...]:
    return tuple(i for i, g in enumerate(d.grad) if g != 0)


def _pick(tied: Sequence[_Dual], rule: str, what: str) -> _Dual:
    """The tied argument ``rule`` credits: the earliest (``first``) or latest (``last``) reached input."""
    if len({d.grad for d in tied}) == 1:
        return tied[0]
    keyed = []
    for d in tied:
        pos = _positions(d)
        if not pos:
            raise NotRoutable(f"a tied argument of {what} reaches no input (a constant)")
        keyed.append((pos if rule == "first" else tuple(-p for p in reversed(pos)), d))
    keyed.sort(key=lambda kd: kd[0])
    if keyed[0][0] == keyed[1][0] and keyed[0][1].grad != keyed[1][1].grad:
        raise NotRoutable(f"two tied arguments of {what} reach the same inputs with different gradients")
    return keyed[0][1]


def _flat(items: Any) -> list[Any]:
    if isinstance(items, (list, tuple)):
        return [e for it in items for e in _flat(it)]
    return [items]


class _Evaluation:
    """One evaluation of the case's expression under a rule and an assignment of tied ranks."""

    def __init__(self, rule: str, assignment: dict[tuple[Any, int], int] | None, nested: bool = True) -> None:
        self.rule = rule
        self.assignment = assignment
        self.nested = nested
        #: vector key -> (elements, set of selected ranks)
        self.order_stats: dict[Any, tuple[list[_Dual], set[int]]] = {}
        #: how many selections were tied at the point
        self.ties = 0

    def extreme(self, which: str, *args: Any) -> Any:
        items = _flat(args)
        if not any(isinstance(a, _Dual) for a in items):
            return (sympy.Max if which == "Max" else sympy.Min)(*items)
        duals = [a if isinstance(a, _Dual) else _Dual(sympy.sympify(a), (sympy.S.Zero,) * _width(items))
                 for a in items]
        if not all(_finite(d.value) for d in duals):
            raise NotRoutable(f"{which} of a value that is not a finite real number")
        best = max(d.value for d in duals) if which == "Max" else min(d.value for d in duals)
        tied = [d for d in duals if d.value == best]
        if len(tied) == 1:
            return tied[0]
        self.ties += 1
        if not self.nested and any(d.tied for d in tied):
            raise NotRoutable(f"a tied {which} of tied selections (an order statistic written as a max of mins: "
                              "its ranks, not the inputs' position, decide the value)")
        got = _pick(tied, self.rule, which)
        return _Dual(got.value, got.grad, tied=True)

    def kth(self, v: Any, k: Any) -> Any:
        items = _flat(v)
        if not any(isinstance(a, _Dual) for a in items):
            return tr.kth_smallest(v, k)
        width = _width(items)
        duals = [a if isinstance(a, _Dual) else _Dual(sympy.sympify(a), (sympy.S.Zero,) * width) for a in items]
        n = len(duals)
        if int(k) != k or not 1 <= int(k) <= n:
            raise NotRoutable(f"kth_smallest: k must be an integer in 1..{n}")
        k = int(k)
        if not all(_finite(d.value) for d in duals):
            raise NotRoutable("kth_smallest of a value that is not a finite real number")
        key = tuple((d.value, d.grad) for d in duals)
        self.order_stats.setdefault(key, (duals, set()))[1].add(k)
        ranked = sorted(range(n), key=lambda j: duals[j].value)
        value = duals[ranked[k - 1]].value
        group = [j for j in range(n) if duals[j].value == value]
        if len(group) == 1:
            return duals[group[0]]
        self.ties += 1
        if self.assignment is None:  # the first pass only records the selection
            return duals[group[0]]
        return duals[self.assignment[(key, k)]]


def _width(items: Sequence[Any]) -> int:
    return next(len(a.grad) for a in items if isinstance(a, _Dual))


def _namespace(ev: _Evaluation) -> dict[str, Any]:
    base = tr.sympy_namespace()
    names: dict[str, Any] = {}
    for name, obj in base.items():
        if name in ("pi", "E"):
            names[name] = obj
        elif name == "Max":
            names[name] = lambda *a: ev.extreme("Max", *a)
        elif name == "Min":
            names[name] = lambda *a: ev.extreme("Min", *a)
        elif name == "kth_smallest":
            names[name] = ev.kth
        elif name == "Abs":
            names[name] = _abs
        elif name in ("Piecewise", "Heaviside", "floor", "ceiling", "sign", "Eq", "Ne", "Mod", "trunc", "frac",
                      "atan2", "xlogy", "xlog1py"):
            names[name] = _not_smooth(name)
        else:
            names[name] = (lambda fn, nm: lambda *a: _smooth(fn, *a, name=nm))(obj, name)
    return names


def _abs(a: Any) -> Any:
    if not isinstance(a, _Dual):
        return sympy.Abs(a)
    if a.value == 0:
        raise NotRoutable("Abs at 0 (not differentiable there)")
    return a if a.value > 0 else -a


def _not_smooth(name: str) -> Callable[..., Any]:
    def refuse(*args: Any) -> Any:
        raise NotRoutable(f"{name} in the expression (position alone does not route through it)")

    return refuse


def _run(case: Case, rule: str, assignment: dict[tuple[Any, int], int] | None,
         nested: bool = True) -> tuple[_Dual, _Evaluation]:
    _, tree = tr._exact_tree(case)
    ev = _Evaluation(rule, assignment, nested)
    names = ex.resolve_names(tree, _namespace(ev), modules=(), origins=None)
    syms: list[sympy.Symbol] = []
    vals: list[sympy.Expr] = []
    shaped = {name: tr._symbols_for(name, value, syms, vals) for name, value in case.at.items()}
    width = len(syms)
    index = {s: i for i, s in enumerate(syms)}

    def dual(s: Any) -> Any:
        if isinstance(s, list):
            return [dual(e) for e in s]
        g = [sympy.S.Zero] * width
        g[index[s]] = sympy.S.One
        return _Dual(vals[index[s]], tuple(g))

    inputs = {name: dual(v) for name, v in shaped.items()}
    out = ex.evaluate(tree, names, inputs)
    if not isinstance(out, _Dual):
        out = _Dual(sympy.sympify(out), (sympy.S.Zero,) * width)
    return out, ev


def _assignments(ev: _Evaluation, rule: str) -> list[dict[tuple[Any, int], int]]:
    """Every way the selected ranks of each tied group go to its earliest (or latest) inputs."""
    per_group: list[list[dict[tuple[Any, int], int]]] = []
    for key, (duals, ks) in ev.order_stats.items():
        n = len(duals)
        ranked = sorted(range(n), key=lambda j: duals[j].value)
        blocks: dict[Any, list[int]] = {}
        for k in sorted(ks):
            blocks.setdefault(duals[ranked[k - 1]].value, []).append(k)
        for value, selected in blocks.items():
            group = [j for j in range(n) if duals[j].value == value]  # element order is input order
            if len(group) == 1:
                continue
            chosen = group[:len(selected)] if rule == "first" else group[::-1][:len(selected)]
            options = [{(key, k): j for k, j in zip(selected, perm)} for perm in itertools.permutations(chosen)]
            per_group.append(options)
    out: list[dict[tuple[Any, int], int]] = []
    for combo in itertools.product(*per_group) if per_group else [()]:
        merged: dict[tuple[Any, int], int] = {}
        for part in combo:
            merged.update(part)
        out.append(merged)
        if len(out) > _MAX_ASSIGNMENTS:
            raise NotRoutable("too many tied ranks to try every assignment")
    return out


def routing_of(case: Case, rule: str, *, nested: bool = True) -> tuple[sympy.Expr, ...]:
    """The gradient of ``case`` at its point under ``rule`` (``"first"`` or ``"last"``), exact.

    ``case`` needs only ``sympy`` and ``at`` (a :class:`~kinkcheck.catalog.Case`, or any object with them).
    ``nested=False`` refuses a tied selection among tied selections: for a form sympy wrote (``grad``'s
    mapping), where an order statistic is a max of mins and its ranks are no longer visible.

    Raises
    ------
    NotRoutable
        When the input position does not decide the value (the message says why).
    kinkcheck.language.expr.ExprError
        When the case's expression does not parse or evaluate.
    """
    if rule not in ("first", "last"):
        raise ValueError(f"rule must be 'first' or 'last', not {rule!r}")
    try:
        _, probe = _run(case, rule, None, nested)
        if not probe.ties:
            raise NotRoutable("no max, min or order statistic of the expression is tied at the point (a tie "
                              "between smooth pieces, such as repeated eigenvalues, is not named by input position)")
        values = {_run(case, rule, a, nested)[0].grad for a in _assignments(probe, rule)}
    except (ArithmeticError, TypeError, ValueError) as err:
        raise NotRoutable(f"the expression does not evaluate by the chain rule ({type(err).__name__}: {err})") from None
    if len(values) > 1:
        raise NotRoutable("the selected ranks of one tied group carry different coefficients, so the ranks' "
                          "order, not the inputs' position, decides the value")
    (grad,) = values
    if not all(_finite(g) for g in grad):
        raise NotRoutable("a gradient component that is not a finite real number")
    return grad


def routing(case: Case, *, nested: bool = True) -> Routing:
    """Both routings of a tie case; each None (with the reason) where position does not decide it
    (``nested`` as in :func:`routing_of`)."""
    out: dict[str, tuple[sympy.Expr, ...] | None] = {}
    reasons: list[str] = []
    for rule in ("first", "last"):
        try:
            out[rule] = routing_of(case, rule, nested=nested)
        except NotRoutable as err:
            out[rule] = None
            if str(err) not in reasons:
                reasons.append(str(err))
        except ex.ExprError as err:
            out[rule] = None
            reasons.append(f"the expression does not evaluate ({err})")
    return Routing(first=out["first"], last=out["last"], reason="; ".join(reasons) or None)
