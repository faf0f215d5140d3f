"""The chain rule as reverse-mode AD applies it, call by call, with a rule at each call that sits on its kink.

:func:`backward` walks a :class:`~kinkcheck.rules.graph.Graph` from its output to its inputs, exactly (sympy
numbers). Operators between calls are differentiated as written; a call contributes the gradient of its local
function ``φ = Σ w_k · form_k`` (``w`` the cotangent reaching its outputs): the derivative where ``φ`` is
differentiable, and where it is not, the value a **chooser** gives for that call's operation and kind of kink.
An elementwise call is taken element by element (each element its own kink or not); a call whose cotangent is
0 contributes nothing, kinked or not (AD multiplies its pick by 0).

A chooser is ``choose(site, kink) -> tuple of sympy numbers`` (the local gradient, one per ``kink.symbols``),
or raises :class:`NotPredicted`. :mod:`kinkcheck.rules.predict` chooses by the inferred rules;
:mod:`kinkcheck.rules.infer` by one candidate label at a time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import sympy

from kinkcheck.rules.graph import Graph, Site
from kinkcheck.rules.names import site_operation
from kinkcheck.rules.local import LocalKink, bounded, kink_kind, local_oracle
from kinkcheck.rules.local import nonsmooth_here as _nonsmooth_here

__all__ = ["Chooser", "NotPredicted", "Visit", "backward"]


class NotPredicted(Exception):
    """The chain rule cannot give this program's value here; ``str(err)`` says why in one line."""


Chooser = Callable[[Site, LocalKink], tuple[sympy.Expr, ...]]


@dataclass(frozen=True)
class Visit:
    """A call that sat on its kink with a nonzero cotangent, and the local gradient chosen there."""

    site: int
    name: str
    operation: str
    kind: str
    element: int | None
    point: tuple[sympy.Expr, ...]
    value: tuple[sympy.Expr, ...]


def _derivative(e: sympy.Expr, s: sympy.Symbol, values: dict[sympy.Symbol, sympy.Expr], where: str) -> sympy.Expr:
    """The derivative at the point as IEEE arithmetic has it: a finite real number, ±oo, or nan where the value is
    not real (``sqrt`` of a negative number: a framework's nan); an unsigned infinity (1/0) is not predicted."""
    out = sympy.diff(e, s).xreplace(values)
    if not (out.is_number and (out.is_finite or out in (sympy.oo, sympy.S.NegativeInfinity))):
        out = sympy.simplify(out)
    if out is sympy.nan:
        raise NotPredicted(f"the derivative of {where} is 0/0 or 0 × inf at the point: the framework's own formula "
                           "decides")
    if out.is_number and out.is_real is False and out.is_finite:  # sqrt(-1)'s 1/(2i): a framework's nan
        return sympy.nan
    if out in (sympy.oo, sympy.S.NegativeInfinity):
        return out
    if not (out.is_number and out.is_finite and out.is_real):
        raise NotPredicted(f"the derivative of {where} is not finite at the point ({out})")
    return out


#: Most elements one call's kink may span (the exact Clarke set's minimum-norm element is combinatorial in it).
MAX_LOCAL = 8


def _components(site: Site, live: list[int]) -> list[list[int]]:
    """The outputs ``live`` grouped by shared arguments: outputs that read no common element are independent
    kinks (``amax(m, dim=1)``: one per row)."""
    groups: list[tuple[set[sympy.Symbol], list[int]]] = []
    for k in live:
        syms = set(site.forms[k].free_symbols)
        joined = [g for g in groups if g[0] & syms]
        for g in joined:
            groups.remove(g)
            syms |= g[0]
        groups.append((syms, sorted([k, *[i for g in joined for i in g[1]]])))
    return sorted((g[1] for g in groups), key=lambda b: b[0])


def _dead(site: Site, k: int, values: dict[sympy.Symbol, sympy.Expr], choose: Chooser,
          cot: dict[sympy.Symbol, sympy.Expr], derivative: Callable[..., sympy.Expr] = _derivative,
          nonsmooth: Callable[..., list[str]] = _nonsmooth_here) -> None:
    """An output whose cotangent is 0 adds 0 × its local derivative: 0 where that is finite, nan (IEEE's 0 × inf,
    0 × nan) where it is not (``where(x > 0, sqrt(x), x)`` at -1: the unselected ``sqrt``'s nan reaches ``x``). At
    a kink the rule decides; where there is none and every value the oracle allows there is finite, 0."""
    form = site.forms[k]
    syms = tuple(s for s in site.slots if s in form.free_symbols)
    found = nonsmooth(form, values)
    if found:
        kink = LocalKink(form, syms, tuple(values[s] for s in syms), kink_kind(found))
        if len(syms) > MAX_LOCAL:
            return
        try:
            grads = choose(site, kink)
        except NotPredicted:
            if bounded(local_oracle(kink), kink.kind):
                return
            raise
    else:
        grads = tuple(derivative(form, a, values, site.name) for a in syms)
    for a, g in zip(syms, grads):
        if not (g.is_number and g.is_finite):
            cot[a] = sympy.nan


#: Functions whose derivative selects (a mask in the backward formula, not a product): a cotangent of inf or nan
#: that reaches them where their derivative is 0 is dropped (torch's ``threshold_backward``: ``sqrt(relu(x))``
#: at -10 gives 0, not 0 × inf).
_SELECTING = (sympy.Max, sympy.Min, sympy.Piecewise, sympy.Abs, sympy.Heaviside, sympy.sign, sympy.floor,
              sympy.ceiling)


def _finite(v: sympy.Expr) -> bool:
    return bool(v.is_number and v.is_finite)


#: At its kink, a form whose backward multiplies the cotangent (``abs``: ``g · sgn(x)``; ``sqrt``): an infinite
#: cotangent times its 0 is nan. Any other kinked form selects (``relu``, ``clamp``, ``maximum``: a mask), and its 0
#: stays 0.
_MULTIPLYING = (sympy.Abs, sympy.Pow)


def _infinite(site: Site, k: int, w: sympy.Expr, found: list[str], values: dict[sympy.Symbol, sympy.Expr],
              choose: Chooser, cot: dict[sympy.Symbol, sympy.Expr], visits: list[Visit], graph: Graph) -> None:
    """An infinite cotangent at a call on its kink: the rule's choice for a unit cotangent of the same sign, scaled
    by inf (IEEE: 0 × inf is nan where the backward multiplies, 0 where it selects)."""
    form = site.forms[k]
    sign = sympy.S.One if w == sympy.oo else sympy.S.NegativeOne
    syms = tuple(s for s in site.slots if s in form.free_symbols)
    kink = LocalKink(sign * form, syms, tuple(values[s] for s in syms), kink_kind(found))
    grad = choose(site, kink)
    visits.append(Visit(site.index, site.name, _op(graph, site), kink.kind, k if site.elementwise else None,
                        kink.point, grad))
    multiplies = isinstance(form, _MULTIPLYING)
    for a, g in zip(syms, grad):
        if g == 0 and not multiplies:
            continue
        cot[a] = cot.get(a, sympy.S.Zero) + g * sympy.oo


def _op(graph: Graph, site: Site) -> str:
    return site_operation(graph.framework, site)


def backward(graph: Graph, choose: Chooser) -> tuple[tuple[sympy.Expr, ...], list[Visit]]:
    """The program's gradient at the point (exact, one entry per input component) and the kinks visited.

    Raises
    ------
    NotPredicted
        A kink outside any call (in the operators between calls), a derivative that is not finite, or the
        chooser's refusal.
    """
    values = graph.values
    cot: dict[sympy.Symbol, sympy.Expr] = {}
    memo = graph.memo

    def _d(e: sympy.Expr, s: sympy.Symbol, values: dict[sympy.Symbol, sympy.Expr], where: str) -> sympy.Expr:
        key = ("d", e, s, where)
        hit = memo.get(key)
        if hit is None:
            try:
                hit = memo[key] = (_derivative(e, s, values, where), None)
            except NotPredicted as err:
                hit = memo[key] = (None, str(err))
        if hit[1] is not None:
            raise NotPredicted(hit[1])
        return hit[0]

    def nonsmooth_here(e: sympy.Expr, values: dict[sympy.Symbol, sympy.Expr]) -> list[str]:
        key = ("k", e)
        hit = memo.get(key)
        if hit is None:
            hit = memo[key] = _nonsmooth_here(e, values)
        return hit

    def _smooth(e: sympy.Expr, values: dict[sympy.Symbol, sympy.Expr], where: str) -> None:
        found = nonsmooth_here(e, values)
        if found:
            raise NotPredicted(f"a kink outside any call ({kink_kind(found)} in {where}): no operation's rule "
                               "covers it")

    def spread(expr: sympy.Expr, weight: sympy.Expr, where: str) -> None:
        if weight == 0:  # 0 × a derivative: nan where that derivative is not finite (IEEE), else nothing
            for u in sorted(expr.free_symbols, key=str):  # one order in every process: the same first failure
                try:
                    g = _d(expr, u, values, where)
                except NotPredicted:
                    g = sympy.nan
                if not _finite(g):
                    cot[u] = sympy.nan
            return
        _smooth(expr, values, where)
        for u in sorted(expr.free_symbols, key=str):
            g = _d(expr, u, values, where)
            if g != 0 or not _finite(weight):  # IEEE: inf × 0 is nan (operators multiply)
                cot[u] = cot.get(u, sympy.S.Zero) + weight * g

    spread(graph.total, sympy.S.One, "the program's output")
    visits: list[Visit] = []
    for site in reversed(graph.sites):
        w = [cot.get(s, sympy.S.Zero) for s in site.outputs]
        for k in range(len(site.outputs)):
            if w[k] == 0:
                _dead(site, k, values, choose, cot, _d, nonsmooth_here)
        live_all = [k for k in range(len(site.outputs)) if w[k] != 0]
        for live in ([[k] for k in live_all] if site.elementwise else _components(site, live_all)):
            phi = sympy.Add(*[w[k] * site.forms[k] for k in live])
            found = [f for k in live for f in nonsmooth_here(site.forms[k], values)]
            syms = tuple(s for s in site.slots if s in phi.free_symbols)
            if not found:
                for k in live:
                    form = site.forms[k]
                    selecting = form.has(*_SELECTING)
                    for a in site.slots:
                        if a not in form.free_symbols:
                            continue
                        g = _d(form, a, values, site.name)
                        if g == 0 and (selecting or _finite(w[k])):
                            continue
                        cot[a] = cot.get(a, sympy.S.Zero) + w[k] * g
                continue
            if not all(_finite(w[k]) for k in live):
                if len(live) != 1 or w[live[0]] not in (sympy.oo, sympy.S.NegativeInfinity):
                    raise NotPredicted(f"an infinite or nan cotangent reaches {site.name} at its kink "
                                       f"({kink_kind(found)})")
                _infinite(site, live[0], w[live[0]], found, values, choose, cot, visits, graph)
                continue
            if len(syms) > MAX_LOCAL:
                raise NotPredicted(f"{site.name} sits at its kink ({kink_kind(found)}) over {len(syms)} elements at "
                                   f"once (the local oracle takes at most {MAX_LOCAL})")
            kink = LocalKink(phi, syms, tuple(values[s] for s in syms), kink_kind(found))
            smooth = local_oracle(kink)
            if smooth.kind == "derivative" and smooth.derivative is not None:  # Max(x, 0) + Min(x, 0): no kink
                for a, g in zip(syms, smooth.derivative):
                    if g != 0:
                        cot[a] = cot.get(a, sympy.S.Zero) + g
                continue
            grad = choose(site, kink)
            visits.append(Visit(site.index, site.name, _op(graph, site), kink.kind, live[0] if site.elementwise else None,
                                kink.point, grad))
            for a, g in zip(syms, grad):
                if g != 0:
                    cot[a] = cot.get(a, sympy.S.Zero) + g
        for a in site.slots:
            g = cot.pop(a, sympy.S.Zero)
            spread(graph.defs[a], g, f"the arguments of {site.name}")
    return tuple(cot.get(s, sympy.S.Zero) for s in graph.inputs), visits

