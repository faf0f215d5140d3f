"""One call at its kink: where a local form is not differentiable, what kind of kink it is, and the value each
rule label names there.

A call's **local form** (:class:`kinkcheck.rules.graph.Site`) is a function of the call's own argument elements.
Reverse mode hands the call a cotangent ``w`` and asks for the gradient of ``φ = Σ w_k · form_k`` with respect
to those elements: an elementwise call element by element, any other call whole. Where ``φ`` is differentiable
the answer is its derivative; where it is not, the framework's backward rule picks a value, and a **rule
label** names the pick, judged by the project's own oracle on ``φ``
(:func:`kinkcheck.oracles.symbolic.analyze_expression`, tie routings by
:mod:`kinkcheck.oracles.routing`):

==============  ===========================================================================================
``left``        the left one-sided derivative (one element)
``right``       the right one-sided derivative (one element)
``left-piece``  at a jump, the slope of the piece left of the point (one element)
``right-piece`` at a jump, the slope of the piece right of the point
``piece-at-point`` at a jump or a piecewise boundary, the gradient of the piece the point itself belongs to
                (every ``floor``/``sign`` held at its value, every ``Piecewise`` at the branch whose condition
                holds there: what AD's mechanical rule gives, ``remainder(x, y)`` at ``(2, 1)``: ``(1, -2)``)
``first``       every tied max, min or order statistic credits its earliest tied argument
``last``        … its latest tied argument
``split-even``  the mean of the limiting gradients (a tie's credit shared evenly)
``every-tied``  the sum of the limiting gradients (every tied argument gets the whole credit: PyTensor's
                ``max``, whose gradient is ``eq(x, max(x)) * g``)
``min-norm``    the minimum-norm element of the Clarke generalized gradient
``mean``        the midpoint of the one-sided derivatives (one element)
``zero``        no gradient at all at the kink
``nan``         nan (a backward formula's 0/0: JAX's ``norm`` at the origin)
==============  ===========================================================================================

The **kind** of a kink (:func:`kink_kind`) is read from the form's own non-smooth nodes at the point: ``max at a
bound`` (a max whose tied arguments depend on one element: ``relu`` at 0, ``clamp``'s lower bound),
``max at a tie`` (tied arguments of several elements: ``maximum(a, b)`` at ``a == b``, a tied ``amax``), the same
for ``min``, ``abs at 0``, ``a jump`` (``sign``, ``floor``, ``Heaviside``), ``a piecewise boundary``,
``a root at 0`` (``sqrt``). A rule is kept per operation and kind, so ``clamp``'s lower and upper bounds
are two rules.
"""

from __future__ import annotations

import hashlib
import pickle
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from types import SimpleNamespace
from typing import Any

import sympy

from kinkcheck.cache import read_cached, write_cached
from kinkcheck.oracles.routing import routing
from kinkcheck.rules.cached import code_digest, unpickle
from kinkcheck.rules.doc import LABELS  # the rule labels (a leaf: the rules file's readers need them without sympy)
from kinkcheck.vocabulary import NOT_JUDGED

__all__ = ["LABELS", "LocalKink", "kink_kind", "label_values", "local_oracle", "nonsmooth_here"]


_JUMPS = (sympy.sign, sympy.Heaviside, sympy.floor, sympy.ceiling, sympy.frac)


def _eq(a: sympy.Expr, b: sympy.Expr) -> bool:
    d = a - b
    if d.is_number and d.is_Rational:
        return d == 0
    z = d.equals(0)
    return bool(z)


def _val(e: sympy.Expr, values: dict[sympy.Symbol, sympy.Expr]) -> sympy.Expr:
    return e.xreplace(values)


def nonsmooth_here(e: sympy.Expr, values: dict[sympy.Symbol, sympy.Expr]) -> list[str]:
    """The kinds of the non-smooth nodes of ``e`` that sit at their kink at the point ``values`` (empty: every
    node of ``e`` is smooth there). Kinds as :func:`kink_kind` names them."""
    found: list[str] = []

    def walk(n: sympy.Basic) -> None:
        if not isinstance(n, sympy.Basic) or not n.free_symbols:
            return
        for a in n.args:
            walk(a)
        if isinstance(n, (sympy.Max, sympy.Min)):
            vals = [_val(a, values) for a in n.args]
            extreme = (sympy.Max if isinstance(n, sympy.Max) else sympy.Min)(*vals)
            tied = [a for a, v in zip(n.args, vals) if _eq(v, extreme)]
            if len(tied) >= 2:
                reach = set().union(*(a.free_symbols for a in tied))
                head = "max" if isinstance(n, sympy.Max) else "min"
                found.append(f"{head} at a {'tie' if len(reach) >= 2 else 'bound'}")
        elif isinstance(n, sympy.Abs):
            if _eq(_val(n.args[0], values), 0):
                found.append("abs at 0")
        elif isinstance(n, (sympy.sign, sympy.Heaviside)):
            if _eq(_val(n.args[0], values), 0):
                found.append("a jump")
        elif isinstance(n, (sympy.floor, sympy.ceiling, sympy.frac)):
            v = _val(n.args[0], values)
            if v.is_integer or (v.is_number and v.is_Rational and v.q == 1):
                found.append("a jump")
        elif isinstance(n, sympy.Piecewise):
            for _, cond in n.args:
                for rel in (cond.atoms(sympy.core.relational.Relational) if isinstance(cond, sympy.Basic) else ()):
                    if _eq(_val(rel.lhs - rel.rhs, values), 0):
                        found.append("a piecewise boundary")
        elif isinstance(n, sympy.Pow):
            base, e = n.args
            if e.is_number and not e.is_integer and _eq(_val(base, values), 0):
                found.append("a root at 0")
        elif isinstance(n, sympy.Function) and not isinstance(n, sympy.core.function.AppliedUndef):
            pass
    walk(e)
    return found


def kink_kind(found: Sequence[str]) -> str:
    """One name for the kinds of the nodes at their kink (sorted, distinct, joined by ``" and "``)."""
    return " and ".join(sorted(set(found)))


@dataclass(frozen=True)
class LocalKink:
    """A call's local function at its kink: ``phi`` over ``symbols`` at ``point`` (exact)."""

    phi: sympy.Expr
    symbols: tuple[sympy.Symbol, ...]
    point: tuple[sympy.Expr, ...]
    kind: str

    def canonical(self) -> tuple[str, tuple[str, ...]]:
        """A key that does not depend on the slot symbols' names (for caching the oracle): the form's text with
        the i-th symbol written ``b[i]``, and the point."""
        names = {s.name: f"b[{i}]" for i, s in enumerate(self.symbols)}
        text = _NAME.sub(lambda m: names.get(m.group(0), m.group(0)), str(self.phi))
        return text, tuple(str(p) for p in self.point)


_NAME = re.compile(r"\b[as]\d+\b")


def local_oracle(k: LocalKink) -> Any:
    """The project's oracle (:class:`kinkcheck.oracles.symbolic.OracleResult`) of ``k.phi`` at its point, with the
    tie routings ``first``/``last`` by argument position; cached by the form's text and point."""
    hit = _BY_KINK.get(k)
    if hit is not None:
        return hit
    key = k.canonical()
    hit = _CACHE.get(key)
    if hit is None:
        hit = _CACHE[key] = _cached_oracle(k, key)
    _BY_KINK[k] = hit
    return hit


def _cached_oracle(k: LocalKink, key: tuple[str, tuple[str, ...]]) -> Any:
    """:func:`_oracle`, kept on disk (:mod:`kinkcheck.cache`, kind ``rules-local``) keyed on the form's text, the
    point and the oracle's code, so a render does not judge the same few hundred local forms again."""
    digest = hashlib.sha256(repr((code_digest(), key)).encode()).hexdigest()[:32]
    raw = read_cached("rules-local", digest)
    if raw is not None:
        got = unpickle(raw)
        if got is not None:
            return got
    got = _oracle(k, key[0])
    try:
        write_cached("rules-local", digest, pickle.dumps(got, protocol=pickle.HIGHEST_PROTOCOL))
    except (pickle.PicklingError, RecursionError, TypeError, AttributeError):
        pass
    return got


_CACHE: dict[tuple[str, tuple[str, ...]], Any] = {}
#: the same, by the kink itself (its text is what costs: a program's walk meets the same kink in every cell)
_BY_KINK: dict[LocalKink, Any] = {}


def _oracle(k: LocalKink, text: str) -> Any:
    from kinkcheck.oracles import symbolic as sym  # slow: numpy

    result = sym.analyze_expression(k.phi, k.symbols, k.point, case_id="local", tie=True, sympy_diff=False)
    if result.kind == NOT_JUDGED:
        return result
    got = routing(SimpleNamespace(sympy=text, at={"b": [_plain(p) for p in k.point]}),  # type: ignore[arg-type]
                  nested=False)
    return replace(result, first=got.first, last=got.last)


def _ieee(c: Any) -> bool:
    c = sympy.sympify(c)
    return c in (sympy.oo, sympy.S.NegativeInfinity) or bool(c.is_finite and c.is_real)


def bounded(oracle: Any, kind: str) -> bool:
    """Whether every value a framework could pick at this kink is finite, so that a cotangent of 0 makes it 0: the
    pieces' slopes at a jump (its one-sided derivatives are infinite, but no backward formula returns them), the
    one-sided derivatives and limiting gradients elsewhere (``sqrt`` at 0 is not bounded: its right derivative is
    inf, and 0 × inf is nan)."""
    if oracle.kind == NOT_JUDGED:
        return False
    if "jump" in kind:
        vals = [oracle.left_piece, oracle.right_piece]
    else:
        vals = [oracle.left, oracle.right, *(c for g in oracle.limiting_gradients for c in g)]
    return all(v is None or bool(sympy.sympify(v).is_finite) for v in vals)


def _plain(p: sympy.Expr) -> Any:
    if p.is_Integer:
        return int(p)
    return float(p) if not p.is_Rational else (int(p) if p.q == 1 else float(p))


def label_values(oracle: Any, kind: str, kink: LocalKink | None = None) -> dict[str, tuple[sympy.Expr, ...]]:
    """Rule label → the local gradient it names (exact), for the labels the oracle defines at a kink of ``kind``
    (``split-even`` only at a tie; ``piece-at-point`` at a jump or piecewise boundary, when ``kink`` is given)."""
    n = len(oracle.components)
    out: dict[str, tuple[sympy.Expr, ...]] = {}
    if oracle.kind == NOT_JUDGED:
        return out
    # where the local form is differentiable, left = right = its derivative (and so on): every label is that one
    # value, evidence that fits whichever rule the other cells choose (answering {"derivative": …} here, no rule
    # label, would make such cells contradict every rule)

    def finite(v: Sequence[sympy.Expr] | None) -> bool:  # IEEE numbers: ±inf allowed (sqrt at 0), not nan
        return v is not None and all(_ieee(c) for c in v)

    if n == 1:
        for name, v in (("left", oracle.left), ("right", oracle.right), ("left-piece", oracle.left_piece),
                        ("right-piece", oracle.right_piece)):
            if v is not None and finite((v,)):
                out[name] = (v,)
        if oracle.midpoint is not None and finite(oracle.midpoint):
            out["mean"] = tuple(oracle.midpoint)
    for name, v in (("first", oracle.first), ("last", oracle.last)):
        if v is not None and finite(v):
            out[name] = tuple(v)
    lim = [g for g in oracle.limiting_gradients if finite(g)]
    if lim and len(lim) == len(oracle.limiting_gradients) and "tie" in kind:
        out["split-even"] = tuple(sympy.Add(*c) / len(lim) for c in zip(*lim))
        out["every-tied"] = tuple(sympy.Add(*c) for c in zip(*lim))
    if oracle.min_norm is not None and finite(oracle.min_norm):
        out["min-norm"] = tuple(oracle.min_norm)
    out["zero"] = (sympy.S.Zero,) * n
    out["nan"] = (sympy.nan,) * n
    if kink is not None and ("jump" in kind or "piecewise" in kind):
        piece = piece_at_point(kink)
        if piece is not None:
            out["piece-at-point"] = piece
    return out


def piece_at_point(k: LocalKink) -> tuple[sympy.Expr, ...] | None:
    """The gradient of the piece the point belongs to (jumps held at their values, each ``Piecewise`` at the branch
    that holds at the point); None where it is not a finite real number."""
    values = dict(zip(k.symbols, k.point))
    held = {a: a.xreplace(values) for a in k.phi.atoms(*_JUMPS)}

    def branch(pw: sympy.Piecewise) -> sympy.Expr:
        for expr, cond in pw.args:
            c = cond.xreplace(values) if isinstance(cond, sympy.Basic) else cond
            if c is sympy.true or c is True:
                return expr
        raise ValueError("no branch holds")

    try:
        f = k.phi.xreplace(held)
        f = f.replace(lambda e: isinstance(e, sympy.Piecewise), branch)
        out = tuple(sympy.diff(f, s).xreplace(values) for s in k.symbols)
    except (ValueError, TypeError):
        return None
    return out if all(_ieee(c) for c in out) else None
