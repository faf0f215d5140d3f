"""The sympy oracle: one-sided derivatives, limiting gradients, the Clarke set and its minimum-norm element.

A case's ``sympy`` field is parsed with :mod:`kinkcheck.expr` and evaluated over real sympy symbols
(:func:`to_sympy`). :func:`analyze` then probes the function along rays ``p + t d`` (``t -> 0+``):

1. For each probe direction ``d`` it decides, exactly, which analytic piece of every ``Max``/``Min``/``Abs``/
   ``sign``/``Heaviside``/``floor``/``ceiling``/``Piecewise`` is active on the curve ``p + t d + t**2 w``.
   ``w`` is a fixed generic tie-breaker, so a tie among several elements resolves to one piece whose region
   contains the curve. Conditions are decided by the sign of exact expressions evaluated at ``t = s 10**-30``
   and ``t = s 10**-40`` with 400 significant digits, where ``s = min(1, smallest nonzero |p_i|)`` keeps
   the probes far closer to ``p`` than ``p`` is to 0; the two signs must agree.
2. The selected piece has no kinks left; its gradient is differentiated and its limit along the ray is
   taken with :func:`sympy.limit` (or by substitution when the gradient is finite at the point, which is
   its limit by continuity of elementary functions).

This order avoids two sympy 1.14 pitfalls (``shared/DESIGN.md``): ``limit`` across pieces returned the
wrong one-sided value for ``Piecewise((x, x > 0), (x/100, True))`` and raised on nested ``Max``/``Min``.

The Clarke generalized gradient of a locally Lipschitz ``f`` is the convex hull of the limits of gradients
taken at points of differentiability (Clarke 1983, *Optimization and Nonsmooth Analysis*, Theorem 2.5.1);
the probe directions sample those limits. PyTorch documents the minimum-norm element of that set as its
rule for convex/concave points (autograd notes, "Gradients for non-differentiable functions").

Probe directions: for one component ``-1`` then ``+1`` (left, right); for ``n <= 3`` components
``+-e_i`` and every sign vector in ``{-1, 1}**n``; for ``n > 3`` ``+-e_i`` and four fixed generic
directions. A function whose active piece is itself singular at the point (the Euclidean norm at the
origin) has a continuum of limiting gradients; the probes then give an inscribed polytope, and a note says so.
"""

from __future__ import annotations

import io
import itertools
import math
import tokenize
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sympy

from kinkcheck import catalog as cat
from kinkcheck import expr as ex
from kinkcheck.catalog import Case
from kinkcheck.geometry import hull_distance, min_norm_point

__all__ = [
    "OracleError",
    "OracleResult",
    "sympy_namespace",
    "to_sympy",
    "analyze",
    "probe_directions",
]

_DPS = 400  # working precision (significant digits) for sign decisions
_ZERO = sympy.Float("1e-300", _DPS)  # below this a decided value counts as exactly zero
_T_PROBES = (sympy.Rational(1, 10**30), sympy.Rational(1, 10**40))
_T = sympy.Symbol("t", positive=True)


class OracleError(RuntimeError):
    """The oracle cannot decide a case (a condition whose sign changes between probe scales, a limit
    sympy leaves unevaluated); ``str(err)`` names the case and the reason."""


class _OutsideDomain(Exception):
    """Raised internally when a piece or condition is not real-valued along a probe curve."""


@dataclass(frozen=True)
class OracleResult:
    """What the sympy oracle says about one case.

    Every number is an exact sympy expression (``Integer``, ``Rational``, ``sqrt(2)/2``, ``oo``, ``-oo``).

    Attributes
    ----------
    case_id : str
    components : tuple of str
        Flattened gradient components in input order: ``("x",)``, ``("x", "y")``, ``("v[0]", ...)``,
        ``("m[0][0]", "m[0][1]", ...)`` (row-major).
    kind : str
        ``"differentiable"``, ``"kink"`` (continuous, not differentiable, or at the edge of the domain),
        ``"jump"`` (discontinuous) or ``"undefined"`` (no probe direction is real-valued).
    derivative : tuple of sympy.Expr or None
        The gradient, shape ``(n,)``, when ``kind == "differentiable"``.
    left, right : sympy.Expr or None
        One-sided derivatives ``f'(p-)``, ``f'(p+)`` for one-component cases (may be ``oo``/``-oo``);
        None for several components or when that side is outside the real domain.
    limiting_gradients : tuple of tuple of sympy.Expr
        Distinct limits of the active pieces' gradients along the probe directions, each of shape ``(n,)``,
        sorted by the position of the first nonzero component (all-zero last), then by value.
    clarke : tuple of tuple of sympy.Expr or None
        Vertices of the convex hull of ``limiting_gradients`` (for one component ``((lo,), (hi,))`` or a single
        point); None when ``f`` is not locally Lipschitz at the point (jump, infinite one-sided derivative,
        edge of the domain, undefined).
    min_norm : tuple of sympy.Expr or None
        Minimum-norm element of the Clarke set, exact.
    midpoint : tuple of sympy.Expr or None
        Mean of the Clarke vertices (for an interval ``(lo + hi) / 2``).
    sympy_diff : tuple of (sympy.Expr or None)
        ``diff(f, s)`` at the point (substituted simultaneously, then ``doit()``) per component: sympy's
        own value, a convention (``Heaviside(0) = 1/2``, ``sign(0) = 0``); None when unevaluated
        (``floor``, ``DiracDelta(0)``), nan, infinite or complex. The notes record what sympy gave.
    notes : tuple of str
    tie : bool
        Copied from the case: the kink is a tie, so tie labels apply.
    shape : str or None
        First-order shape of the kink, for PyTorch's documented rule (see :mod:`kinkcheck.conformance`):
        ``"convex"`` when along every probe direction ``d`` the directional derivative ``f'(p; d)`` is the
        largest of ``g . d`` over the limiting gradients ``g`` (f is locally a max of its pieces, so the
        Clarke set is the subdifferential), ``"concave"`` when it is the smallest (a min of its pieces: the
        superdifferential), and every active piece curves upwards along the probe lines (``d^T H d >= 0``
        in the limit at the point); ``"concave"`` when it is the smallest and every piece curves downwards;
        ``"neither"`` otherwise (``selu`` at 0: left slope 1.758 > right slope 1.051, but the left piece
        ``λα(e^x - 1)`` is strictly convex). None unless ``kind == "kink"`` with a Clarke set.
    """

    case_id: str
    components: tuple[str, ...]
    kind: str
    derivative: tuple[sympy.Expr, ...] | None
    left: sympy.Expr | None
    right: sympy.Expr | None
    limiting_gradients: tuple[tuple[sympy.Expr, ...], ...]
    clarke: tuple[tuple[sympy.Expr, ...], ...] | None
    min_norm: tuple[sympy.Expr, ...] | None
    midpoint: tuple[sympy.Expr, ...] | None
    sympy_diff: tuple[sympy.Expr | None, ...]
    notes: tuple[str, ...] = ()
    tie: bool = False
    #: The oracle of the ``second-order`` mode (see :func:`_second_order`), a ``to_json``-shaped dict.
    second_order: dict[str, Any] | None = field(default=None, compare=False)
    shape: str | None = None

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict.

        Every exact value becomes ``{"exact": str(value), "float": float}`` with non-finite floats written
        ``"inf"``, ``"-inf"``, ``"nan"``; vectors are lists of those; None stays None.
        """

        def vec(v: Sequence[sympy.Expr] | None) -> list[Any] | None:
            return None if v is None else [_num_json(c) for c in v]

        return {
            "case": self.case_id,
            "components": list(self.components),
            "kind": self.kind,
            "tie": self.tie,
            "derivative": vec(self.derivative),
            "left": _num_json(self.left),
            "right": _num_json(self.right),
            "limiting_gradients": [vec(g) for g in self.limiting_gradients],
            "clarke": None if self.clarke is None else [vec(g) for g in self.clarke],
            "min_norm": vec(self.min_norm),
            "midpoint": vec(self.midpoint),
            "sympy_diff": vec(self.sympy_diff),
            "notes": list(self.notes),
            "second_order": self.second_order,
            "shape": self.shape,
        }


def _num_json(v: sympy.Expr | None) -> dict[str, Any] | None:
    if v is None:
        return None
    return {"exact": str(v), "float": _float_json(v)}


def _float_json(v: sympy.Expr) -> float | str:
    if v is sympy.oo:
        return "inf"
    if v is sympy.S.NegativeInfinity:
        return "-inf"
    try:
        f = float(v)
    except (TypeError, ValueError):
        return "nan"
    if math.isnan(f):
        return "nan"
    if math.isinf(f):
        return "inf" if f > 0 else "-inf"
    return f


# --------------------------------------------------------------------------- namespace and parsing


def _flatten(items: Iterable[Any]) -> list[Any]:
    out: list[Any] = []
    for it in items:
        if isinstance(it, (list, tuple)):
            out.extend(_flatten(it))
        else:
            out.append(it)
    return out


def _max(*args: Any) -> sympy.Expr:
    return sympy.Max(*_flatten(args))


def _min(*args: Any) -> sympy.Expr:
    return sympy.Min(*_flatten(args))


def kth_smallest(v: Any, k: Any) -> sympy.Expr:
    """k-th smallest element (1-based) of a (nested) list, built from ``Max``/``Min`` only.

    ``kth_smallest(v, k) = Max(Min(S) for S in (n-k+1)-subsets of v)``: the k-th smallest is the largest
    value that at least ``n-k+1`` elements reach.

    Raises
    ------
    ValueError
        When ``k`` is not an integer in ``1..n``.
    """
    items = _flatten(v if isinstance(v, (list, tuple)) else [v])
    n = len(items)
    if int(k) != k or not 1 <= int(k) <= n:
        raise ValueError(f"kth_smallest: k must be an integer in 1..{n}, got {k}")
    size = n - int(k) + 1
    return sympy.Max(*(sympy.Min(*s) for s in itertools.combinations(items, size)))


def sympy_namespace() -> dict[str, Any]:
    """Names a case's ``sympy`` field may use, for :func:`kinkcheck.expr.resolve_names`.

    ``Max``/``Min`` accept (nested) lists and flatten them (``Max(v)``, ``Max(m)``); ``kth_smallest(v, k)``
    is :func:`kth_smallest`. Covers :data:`kinkcheck.catalog.SYMPY_NAMES`.
    """
    return {
        "Max": _max,
        "Min": _min,
        "Abs": sympy.Abs,
        "sqrt": sympy.sqrt,
        "exp": sympy.exp,
        "log": sympy.log,
        "floor": sympy.floor,
        "ceiling": sympy.ceiling,
        "sign": sympy.sign,
        "Piecewise": sympy.Piecewise,
        "Heaviside": sympy.Heaviside,
        "kth_smallest": kth_smallest,
    }


def _exact(v: Any) -> sympy.Expr:
    """A point value as an exact number: ints as they are, floats from their shortest decimal repr."""
    if isinstance(v, bool):
        return sympy.Integer(int(v))
    if isinstance(v, int):
        return sympy.Integer(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise ex.ExprError(f"non-finite value {v!r} has no exact oracle")
        return sympy.Rational(repr(v))  # -0.0 -> 0; 0.5 -> 1/2
    raise ex.ExprError(f"not a number: {v!r}")


def _literal_texts(source: str) -> list[str]:
    """The numeric literals of ``source`` as written, in source order."""
    try:
        toks = tokenize.generate_tokens(io.StringIO(source.strip()).readline)
        return [t.string.replace("_", "") for t in toks if t.type == tokenize.NUMBER]
    except (tokenize.TokenError, SyntaxError):
        return []


def _exact_literal(v: int | float, text: str | None) -> sympy.Expr:
    """An expression literal as an exact number, from its source text when that text is the same number.

    A Python float keeps 17 significant digits; selu's ``1.0507009873554804934193349852946`` must stay
    that decimal, so the text is used, not ``repr(v)``.
    """
    if isinstance(v, float) and text is not None:
        try:
            exact = sympy.Rational(text)
        except (TypeError, ValueError):
            exact = None
        if exact is not None and float(exact) == abs(v):
            return -exact if math.copysign(1.0, v) < 0 else exact
    return _exact(v)


def _exact_consts(node: ex.Node, texts: Iterator[str | None]) -> ex.Node:
    """Rebuild the tree with every numeric ``Const`` replaced by an exact sympy number (bools kept).

    ``texts`` yields the literals' source text in :func:`kinkcheck.expr.walk` order, which is source order.
    """

    def rec(n: ex.Node) -> ex.Node:
        if isinstance(n, ex.Const):
            if isinstance(n.value, bool):
                return n
            return ex.Const(_exact_literal(n.value, next(texts, None)))  # type: ignore[arg-type]
        if isinstance(n, ex.Seq):
            return ex.Seq(tuple(rec(i) for i in n.items), n.kind)
        if isinstance(n, ex.Call):
            func = rec(n.func)
            args = tuple(rec(a) for a in n.args)
            return ex.Call(func, args, tuple((k, rec(v)) for k, v in n.kwargs))
        if isinstance(n, ex.Attr):
            return ex.Attr(rec(n.value), n.name)
        if isinstance(n, ex.Index):
            value = rec(n.value)
            return ex.Index(value, rec(n.index))
        if isinstance(n, ex.BinOp):
            left = rec(n.left)
            return ex.BinOp(n.op, left, rec(n.right))
        if isinstance(n, ex.Unary):
            return ex.Unary(n.op, rec(n.operand))
        if isinstance(n, ex.Compare):
            left = rec(n.left)
            return ex.Compare(left, n.ops, tuple(rec(r) for r in n.rights))
        return n

    return rec(node)


def _symbols_for(name: str, value: Any, syms: list[sympy.Symbol], vals: list[sympy.Expr]) -> Any:
    """Symbols shaped like ``value`` (nested lists for vectors), appended flat to ``syms``/``vals``."""

    def build(v: Any, label: str) -> Any:
        if isinstance(v, list):
            return [build(e, f"{label}[{i}]") for i, e in enumerate(v)]
        s = sympy.Symbol(label, real=True)
        syms.append(s)
        vals.append(_exact(v))
        return s

    return build(value, name)


def to_sympy(case: Case) -> tuple[sympy.Expr, tuple[sympy.Symbol, ...], tuple[sympy.Rational, ...]]:
    """The case's function as a sympy expression, its component symbols and the exact point.

    Parameters
    ----------
    case : kinkcheck.catalog.Case

    Returns
    -------
    expr : sympy.Expr
        Over real symbols; float literals become exact Rationals from their decimal text.
    symbols : tuple of sympy.Symbol, shape (n,)
        Flattened components in input order, named ``x``, ``v[0]``, ``m[0][1]`` (``real=True``).
    point : tuple of sympy.Rational, shape (n,)
        The point, converted exactly from each value's decimal repr (``-0.0`` becomes ``0``).

    Raises
    ------
    kinkcheck.expr.ExprError
        When the field does not parse, names something outside the namespace, or the point is not finite.
    """
    parsed = ex.parse(case.sympy, case.at, cat.SYMPY_NAMES)
    texts = _literal_texts(case.sympy)
    n_consts = sum(1 for n in ex.walk(parsed) if isinstance(n, ex.Const) and not isinstance(n.value, bool))
    # Pair literal texts with Const nodes only when the counts agree; otherwise use each float's repr.
    tree = _exact_consts(parsed, iter(texts if len(texts) == n_consts else []))
    names = ex.resolve_names(tree, sympy_namespace(), modules=(), origins=("sympy", "kinkcheck"))
    syms: list[sympy.Symbol] = []
    vals: list[sympy.Expr] = []
    inputs = {name: _symbols_for(name, value, syms, vals) for name, value in case.at.items()}
    try:
        out = ex.evaluate(tree, names, inputs)
    except (TypeError, ValueError, IndexError) as err:
        raise ex.ExprError(f"case {case.id!r}: sympy field {case.sympy!r} does not evaluate: {err}") from None
    out = sympy.sympify(out)
    if not isinstance(out, sympy.Expr):
        raise ex.ExprError(f"case {case.id!r}: sympy field {case.sympy!r} is not a scalar expression")
    return out, tuple(syms), tuple(vals)  # type: ignore[return-value]


# --------------------------------------------------------------------------- probing


def probe_directions(n: int) -> tuple[tuple[int, ...], ...]:
    """Deterministic probe directions in R^n.

    ``n == 1``: ``(-1,), (1,)``. ``n <= 3``: ``+-e_i`` (``+e_i`` first) then every vector of ``{-1, 1}**n``.
    ``n > 3``: ``+-e_i`` then all ones, all minus ones and the two alternating sign vectors.
    """
    if n == 1:
        return ((-1,), (1,))
    dirs: list[tuple[int, ...]] = []
    for i in range(n):
        for s in (1, -1):
            dirs.append(tuple(s if j == i else 0 for j in range(n)))
    if n <= 3:
        dirs.extend(itertools.product((1, -1), repeat=n))
    else:
        alt = tuple(1 if j % 2 == 0 else -1 for j in range(n))
        dirs.extend([(1,) * n, (-1,) * n, alt, tuple(-a for a in alt)])
    return tuple(dirs)


def _tie_breaker(n: int) -> tuple[sympy.Rational, ...]:
    # Distinct positive powers of two: every subset sum differs, so no second-order tie survives.
    return tuple(sympy.Rational(2**i, 2**n) for i in range(n))


class _Curve:
    """The exact curve ``p + t d + t**2 w`` at the two probe scales; decides signs along it."""

    def __init__(self, syms: Sequence[sympy.Symbol], point: Sequence[sympy.Expr], d: Sequence[int]) -> None:
        w = _tie_breaker(len(syms))
        # Probe far closer to p than p is to 0 (a point at 1e-45 must not see relu's kink at 0).
        nonzero = [abs(p) for p in point if p != 0]
        scale = min([sympy.Integer(1), *nonzero])
        self.subs = [
            {s: p + t * di + t * t * wi for s, p, di, wi in zip(syms, point, d, w)}
            for t in (scale * t0 for t0 in _T_PROBES)
        ]

    def values(self, e: sympy.Expr) -> list[sympy.Expr]:
        out = []
        for sub in self.subs:
            v = e.xreplace(sub)
            if v.is_zero is True:
                out.append(sympy.S.Zero)
                continue
            num = sympy.N(v, _DPS)
            if num.has(sympy.nan, sympy.zoo, sympy.oo, -sympy.oo):
                raise _OutsideDomain(str(e))
            re_, im_ = num.as_real_imag()
            if abs(im_) > _ZERO:
                raise _OutsideDomain(str(e))
            out.append(re_)
        return out

    def sign(self, e: sympy.Expr) -> int:
        signs = {0 if abs(v) <= _ZERO else (1 if v > 0 else -1) for v in self.values(e)}
        if len(signs) != 1:
            raise OracleError(f"the sign of {e} changes between probe scales")
        return signs.pop()

    def truth(self, cond: Any) -> bool:
        if cond is sympy.true or cond is True:
            return True
        if cond is sympy.false or cond is False:
            return False
        if isinstance(cond, sympy.And):
            return all(self.truth(a) for a in cond.args)
        if isinstance(cond, sympy.Or):
            return any(self.truth(a) for a in cond.args)
        if isinstance(cond, sympy.Not):
            return not self.truth(cond.args[0])
        if isinstance(cond, sympy.core.relational.Relational):
            s = self.sign(_select(cond.lhs, self) - _select(cond.rhs, self))
            return bool({"<": s < 0, "<=": s <= 0, ">": s > 0, ">=": s >= 0, "==": s == 0, "!=": s != 0}[cond.rel_op])
        raise OracleError(f"cannot decide condition {cond}")


_KINKED = (sympy.Max, sympy.Min, sympy.Abs, sympy.sign, sympy.Heaviside, sympy.floor, sympy.ceiling, sympy.Piecewise)


def _select(e: sympy.Expr, curve: _Curve) -> sympy.Expr:
    """The analytic piece of ``e`` active along the curve (every kinked function replaced by its branch)."""
    if not e.has(*_KINKED):
        return e
    if isinstance(e, sympy.Piecewise):
        for piece, cond in e.args:
            if curve.truth(cond):
                return _select(piece, curve)
        raise _OutsideDomain(f"no branch of {e} holds")
    if isinstance(e, (sympy.Max, sympy.Min)):
        args = [_select(a, curve) for a in e.args]
        best = args[0]
        want = 1 if isinstance(e, sympy.Max) else -1
        for a in args[1:]:
            if curve.sign(a - best) == want:  # equal pieces keep the first: same function, same gradient
                best = a
        return best
    if isinstance(e, (sympy.Abs, sympy.sign, sympy.Heaviside)):
        a = _select(e.args[0], curve)
        s = curve.sign(a)
        if isinstance(e, sympy.Abs):
            return a if s >= 0 else -a
        if isinstance(e, sympy.sign):
            return sympy.Integer(s)
        return sympy.Integer(1) if s > 0 else (sympy.Integer(0) if s < 0 else sympy.Heaviside(0))
    if isinstance(e, (sympy.floor, sympy.ceiling)):
        a = _select(e.args[0], curve)
        vals = {int(e.func(v)) for v in curve.values(a)}
        if len(vals) != 1:
            raise OracleError(f"{e} changes value between probe scales")
        return sympy.Integer(vals.pop())  # constant on the piece: derivative 0
    return e.func(*[_select(a, curve) for a in e.args])


def _finite_real(v: sympy.Expr) -> bool:
    return bool(v.is_number and v.is_finite is True and v.is_extended_real is True)


def _limit(
    g: sympy.Expr, at_point: dict[sympy.Symbol, sympy.Expr], ray: dict[sympy.Symbol, sympy.Expr]
) -> tuple[sympy.Expr, bool]:
    """``lim_{t->0+} g(p + t d)``; second item True when ``g`` itself is singular at ``p`` (needed a limit)."""
    direct = g.xreplace(at_point)
    if _finite_real(direct):
        return direct, False
    lim = sympy.limit(g.xreplace(ray), _T, 0, "+")
    if lim.has(sympy.Limit, sympy.AccumBounds, sympy.nan) or lim is sympy.zoo:
        raise OracleError(f"limit of {g} along the ray is {lim}")
    if lim.is_extended_real is not True:
        raise _OutsideDomain(str(g))
    return lim, True


@dataclass
class _Probe:
    direction: tuple[int, ...]
    value: sympy.Expr
    gradient: tuple[sympy.Expr, ...]
    singular: bool
    hessian_sum: tuple[sympy.Expr, ...] | None = None  # H @ 1 of the active piece; None: no finite real limit
    curvature: sympy.Expr | None = None  # lim d^T H d of the active piece along the ray; None: undecided


def _probe(
    f: sympy.Expr, syms: Sequence[sympy.Symbol], point: Sequence[sympy.Expr], d: tuple[int, ...]
) -> _Probe | None:
    """Active piece along ``d`` and the limits of its value and gradient; None when outside the domain."""
    curve = _Curve(syms, point, d)
    try:
        piece = _select(f, curve)
        curve.values(piece)  # raises when the piece is not real-valued next to the point on this side
        at_point = dict(zip(syms, point))
        ray = {s: p + _T * di for s, p, di in zip(syms, point, d)}
        value, _ = _limit(piece, at_point, ray)
        grad, singular = [], False
        for s in syms:
            g, sing = _limit(sympy.diff(piece, s), at_point, ray)
            grad.append(g)
            singular |= sing
    except _OutsideDomain:
        return None
    return _Probe(d, value, tuple(grad), singular, _hessian_sum(piece, syms, at_point, ray),
                  _curvature(piece, syms, d, at_point, ray))


def _curvature(piece: sympy.Expr, syms: Sequence[sympy.Symbol], d: tuple[int, ...],
               at_point: dict[sympy.Symbol, sympy.Expr], ray: dict[sympy.Symbol, sympy.Expr]) -> sympy.Expr | None:
    """``lim_{t->0+} d^T H(p + t d) d`` of the active piece (its second derivative along the probe line)."""
    along = sum((di * sympy.diff(piece, s) for s, di in zip(syms, d) if di), sympy.S.Zero)
    second = sum((di * sympy.diff(along, s) for s, di in zip(syms, d) if di), sympy.S.Zero)
    try:
        v, _ = _limit(second, at_point, ray)
    except (OracleError, _OutsideDomain, ValueError, TypeError, NotImplementedError):
        return None
    return v


def _hessian_sum(piece: sympy.Expr, syms: Sequence[sympy.Symbol], at_point: dict[sympy.Symbol, sympy.Expr],
                 ray: dict[sympy.Symbol, sympy.Expr]) -> tuple[sympy.Expr, ...] | None:
    """One-sided ``H @ 1`` of the active piece: component i is the limit of ``sum_j d2 piece / dx_i dx_j``."""
    total = sum((sympy.diff(piece, s) for s in syms), sympy.S.Zero)
    out = []
    try:
        for s in syms:
            v, _ = _limit(sympy.diff(total, s), at_point, ray)
            out.append(v)
    except (_OutsideDomain, OracleError):
        return None
    return tuple(out)


# --------------------------------------------------------------------------- sets


def _key(v: sympy.Expr) -> float:
    return float(sympy.N(v, 30)) if v.is_finite is not False else (math.inf if v == sympy.oo else -math.inf)


def _order(g: tuple[sympy.Expr, ...]) -> tuple[Any, ...]:
    floats = tuple(_key(c) for c in g)
    first = next((i for i, c in enumerate(floats) if c != 0), len(g))
    return (first, floats, tuple(str(c) for c in g))


def _distinct(grads: Iterable[tuple[sympy.Expr, ...]]) -> list[tuple[sympy.Expr, ...]]:
    out: list[tuple[sympy.Expr, ...]] = []
    seen: set[tuple[float, ...]] = set()
    for g in grads:
        k = tuple(round(_key(c), 12) + 0.0 for c in g)
        if k not in seen:
            seen.add(k)
            out.append(g)
    return sorted(out, key=_order)


def _hull_vertices(points: list[tuple[sympy.Expr, ...]]) -> list[tuple[sympy.Expr, ...]]:
    """Points that are not in the convex hull of the others (decided in float64; catalog points are far apart)."""
    if len(points) <= 1:
        return list(points)
    fl = np.array([[float(c) for c in p] for p in points])
    scale = max(1.0, float(np.abs(fl).max()))
    keep = []
    for i, p in enumerate(points):
        others = np.delete(fl, i, axis=0)
        if hull_distance(fl[i], others) > 1e-9 * scale:
            keep.append(p)
    return keep


def _exact_min_norm(vertices: list[tuple[sympy.Expr, ...]]) -> tuple[sympy.Expr, ...]:
    """Exact minimum-norm point of ``conv(vertices)``.

    The support is found in float64 (Wolfe's method), the affine least-norm problem on it is solved
    exactly, and optimality (``x . (v - x) >= 0`` for every vertex) is checked; if the check fails every
    subset of at most ``n + 1`` vertices is tried exactly.
    """
    if len(vertices) == 1:
        return vertices[0]
    n = len(vertices[0])
    fl = np.array([[float(c) for c in v] for v in vertices])
    _, weights = min_norm_point(fl)
    support = [i for i, w in enumerate(weights) if w > 1e-12]
    cand = _affine_min_norm([vertices[i] for i in support])
    if cand is not None and _optimal(cand, vertices):
        return cand
    best, best_norm = None, None
    for k in range(1, min(n + 1, len(vertices)) + 1):
        for sub in itertools.combinations(vertices, k):
            x = _affine_min_norm(list(sub))
            if x is None:
                continue
            nrm = float(sum(c * c for c in x))
            if best_norm is None or nrm < best_norm - 1e-15:
                best, best_norm = x, nrm
    if best is None:
        raise OracleError("no minimum-norm point found")
    return best


def _affine_min_norm(pts: list[tuple[sympy.Expr, ...]]) -> tuple[sympy.Expr, ...] | None:
    """Least-norm point of the affine hull of ``pts`` if it lies in their convex hull, else None."""
    k = len(pts)
    P = sympy.Matrix(pts)  # k x n
    G = P * P.T
    A = sympy.zeros(k + 1, k + 1)
    A[:k, :k] = G
    for i in range(k):
        A[i, k] = 1
        A[k, i] = 1
    rhs = sympy.zeros(k + 1, 1)
    rhs[k] = 1
    if sympy.simplify(A.det()) == 0:
        return None
    sol = A.LUsolve(rhs)
    lam = [sympy.simplify(sol[i]) for i in range(k)]
    if any(float(sympy.N(l, 30)) < -1e-25 for l in lam):
        return None
    x = (sympy.Matrix([lam]) * P)
    return tuple(sympy.simplify(c) for c in x)


def _optimal(x: tuple[sympy.Expr, ...], vertices: list[tuple[sympy.Expr, ...]]) -> bool:
    xx = sum(c * c for c in x)
    return all(float(sympy.N(sum(a * b for a, b in zip(x, v)) - xx, 30)) >= -1e-25 for v in vertices)


def _eq(a: sympy.Expr, b: sympy.Expr) -> bool:
    if a.is_finite is False or b.is_finite is False:
        return a == b
    return abs(float(sympy.N(a - b, 50))) < 1e-30


# --------------------------------------------------------------------------- sympy's own value


def _sympy_diff(
    f: sympy.Expr, syms: Sequence[sympy.Symbol], point: Sequence[sympy.Expr]
) -> tuple[tuple[sympy.Expr | None, ...], list[str]]:
    """sympy's own derivative at the point, per component, and notes naming the conventions it used.

    The point is substituted simultaneously (``xreplace``): sequential ``subs`` turns
    ``v0/sqrt(v0**2 + v1**2)`` into ``0/sqrt(v1**2) = 0`` before ``v1`` is replaced, an artifact of order.
    """
    sub = dict(zip(syms, point))
    out: list[sympy.Expr | None] = []
    conventions: set[str] = set()
    raw: list[str] = []
    for s in syms:
        try:
            d = sympy.diff(f, s)
            if d.has(sympy.Derivative, sympy.Subs):  # floor/ceiling: sympy leaves the derivative unevaluated
                out.append(None)
                raw.append(f"{s.name}: an unevaluated Derivative")
                continue
            for h in d.atoms(sympy.Heaviside):
                if h.args[0].xreplace(sub) == 0:
                    conventions.add("Heaviside(0) = 1/2")
            for h in d.atoms(sympy.sign):
                if h.args[0].xreplace(sub) == 0:
                    conventions.add("sign(0) = 0")
            v = d.xreplace(sub).doit()
        except (TypeError, ValueError, ArithmeticError, NotImplementedError) as err:
            out.append(None)
            raw.append(f"{s.name}: {type(err).__name__}")
            continue
        if v.has(sympy.DiracDelta, sympy.floor, sympy.ceiling) or not _finite_real(v):
            out.append(None)
            raw.append(f"{s.name}: {v}")
        else:
            out.append(v)
    notes = [f"sympy_diff uses sympy's convention {c}" for c in sorted(conventions)]
    if raw:
        notes.append("sympy's own derivative at the point is not a finite real number (" + "; ".join(raw) + ")")
    return tuple(out), notes


# --------------------------------------------------------------------------- analysis

_CACHE: dict[tuple[str, str, str], OracleResult] = {}


def analyze(case: Case) -> OracleResult:
    """Judge a case: its kind, one-sided derivatives, limiting gradients, Clarke set and minimum-norm element.

    Results are cached per case (id, sympy field and point).

    Parameters
    ----------
    case : kinkcheck.catalog.Case

    Returns
    -------
    OracleResult

    Raises
    ------
    kinkcheck.expr.ExprError
        When the case's sympy field does not evaluate (see :func:`to_sympy`).
    OracleError
        When a branch condition cannot be decided or a limit stays unevaluated.
    """
    key = (case.id, case.sympy, repr(case.at))
    hit = _CACHE.get(key)
    if hit is None:
        hit = _CACHE[key] = _analyze(case)
    return hit


def _point_value(f: sympy.Expr, syms: Sequence[sympy.Symbol], point: Sequence[sympy.Expr]) -> sympy.Expr | None:
    try:
        v = f.xreplace(dict(zip(syms, point)))
    except (TypeError, ValueError):  # Max(sqrt(-10), 0): not comparable
        return None
    return v if _finite_real(v) else None


def _analyze(case: Case) -> OracleResult:
    f, syms, point = to_sympy(case)
    n = len(syms)
    components = tuple(s.name for s in syms)
    try:
        probes = {d: _probe(f, syms, point, d) for d in probe_directions(n)}
    except OracleError as err:
        raise OracleError(f"case {case.id!r}: {err}") from None
    sympy_diff, notes = _sympy_diff(f, syms, point)
    defined = [p for p in probes.values() if p is not None]
    left = right = None
    if n == 1:
        lp, rp = probes[(-1,)], probes[(1,)]
        left = lp.gradient[0] if lp is not None else None
        right = rp.gradient[0] if rp is not None else None

    second = _second_order(case, components, probes)

    def result(kind: str, **kw: Any) -> OracleResult:
        base = dict(
            case_id=case.id, components=components, kind=kind, derivative=None, left=left, right=right,
            limiting_gradients=(), clarke=None, min_norm=None, midpoint=None, sympy_diff=sympy_diff,
            notes=tuple(notes), tie=case.tie, second_order=second,
        )
        base.update(kw)
        return OracleResult(**base)

    if not defined:
        notes.append("f is not real-valued near the point on any probe direction")
        return result("undefined")
    limiting = tuple(_distinct(p.gradient for p in defined))
    fp = _point_value(f, syms, point)
    if fp is None:
        notes.append("f is not finite and real at the point itself")
    sides = [p.value for p in defined]
    if fp is None or any(not _eq(v, fp) for v in sides):
        if n == 1:
            lv = probes[(-1,)].value if probes[(-1,)] is not None else None
            rv = probes[(1,)].value if probes[(1,)] is not None else None
            notes.append(f"jump: f(p-) = {lv}, f(p) = {fp}, f(p+) = {rv}; f is not locally Lipschitz, no Clarke set")
        else:
            notes.append("jump: f is discontinuous at the point; f is not locally Lipschitz, no Clarke set")
        return result("jump", limiting_gradients=limiting)
    edge = len(defined) < len(probes)
    infinite = any(c.is_finite is False for g in limiting for c in g)
    if edge:
        missing = [d for d, p in probes.items() if p is None]
        side = {(-1,): "left", (1,): "right"}.get(missing[0], "some") if n == 1 else "some"
        notes.append(f"f is not real-valued on the {side} side: the point is at the edge of the domain; no Clarke set")
    if infinite:
        notes.append("an infinite one-sided derivative: f is not locally Lipschitz at the point, no Clarke set")
    if edge or infinite:
        return result("kink", limiting_gradients=limiting)
    if len(limiting) == 1:
        g = limiting[0]
        return result("differentiable", derivative=g, limiting_gradients=limiting, clarke=(g,), min_norm=g, midpoint=g)
    if n == 1:
        lo = min(limiting, key=lambda g: _key(g[0]))
        hi = max(limiting, key=lambda g: _key(g[0]))
        clarke = (lo, hi)
        zero = sympy.S.Zero
        mn = (zero,) if _key(lo[0]) <= 0 <= _key(hi[0]) else (lo if _key(lo[0]) > 0 else hi)
    else:
        clarke = tuple(_hull_vertices(list(limiting)))
        mn = _exact_min_norm(list(clarke))
        if any(p.singular for p in defined):
            notes.append(
                "the gradient of the active smooth piece has no limit at the point (it depends on the direction "
                "of approach), so the limiting gradients form a continuum; clarke lists the limits along the "
                "probe directions, vertices of an inscribed polytope of the true Clarke set"
            )
            if all(_eq(sum(c * c for c in g), sympy.S.One) for g in limiting):
                notes.append(
                    "every sampled limiting gradient has unit norm, as for the Euclidean norm at the origin, whose "
                    "Clarke set is the closed unit ball"
                )
    mid = tuple(sympy.simplify(sum((v[i] for v in clarke), sympy.S.Zero) / len(clarke)) for i in range(n))
    return result("kink", limiting_gradients=limiting, clarke=clarke, min_norm=tuple(mn), midpoint=mid,
                  shape=_local_shape(defined, limiting))


def _local_shape(defined: Sequence[_Probe], limiting: Sequence[tuple[sympy.Expr, ...]]) -> str:
    """``"convex"``, ``"concave"`` or ``"neither"`` (see ``OracleResult.shape``)."""
    convex = concave = True
    for p in defined:
        along = sum((g * d for g, d in zip(p.gradient, p.direction)), sympy.S.Zero)
        others = [sum((g * d for g, d in zip(lg, p.direction)), sympy.S.Zero) for lg in limiting]
        convex &= _eq(along, max(others, key=_key))
        concave &= _eq(along, min(others, key=_key))
        # the pieces themselves: curved the other way (selu's left piece is convex) is neither
        k = p.curvature
        if k is None:
            convex = concave = False
        else:
            convex &= _key(k) >= 0
            concave &= _key(k) <= 0
    if convex and not concave:
        return "convex"
    if concave and not convex:
        return "concave"
    return "neither"


def _second_order(case: Case, components: tuple[str, ...], probes: dict[tuple[int, ...], _Probe | None]
                  ) -> dict[str, Any]:
    """The oracle for the ``second-order`` mode (``H @ 1``), as a :meth:`OracleResult.to_json`-shaped dict.

    Its "limiting gradients" are the one-sided ``H @ 1`` of the active smooth pieces along the probe
    directions: the piecewise second derivative. The distributional part (a Dirac mass at a kink of the
    gradient, e.g. ``relu'' = delta``) has no finite value and is left out, as every framework leaves it
    out. When all directions agree the kind is ``"differentiable"`` (label ``derivative``); otherwise
    ``"kink"`` with the convex hull of the one-sided values standing in for the Clarke set (so ``left``,
    ``right``, ``mean``, ``in-clarke`` read as for gradients). No probe direction with a finite real
    ``H @ 1``: ``"undefined"`` (e.g. sqrt at 0, where the second derivative is infinite).
    """
    n = len(components)
    sides = [p.hessian_sum for p in probes.values() if p is not None and p.hessian_sum is not None]
    left = right = None
    if n == 1:
        lp, rp = probes.get((-1,)), probes.get((1,))
        left = lp.hessian_sum[0] if lp is not None and lp.hessian_sum is not None else None
        right = rp.hessian_sum[0] if rp is not None and rp.hessian_sum is not None else None
    notes = ["second order: one-sided H @ 1 of the active smooth pieces; a Dirac mass at the kink is left out"]
    base = {"case": case.id, "components": list(components), "tie": False, "left": _num_json(left),
            "right": _num_json(right), "sympy_diff": [None] * n}
    finite = [g for g in sides if all(c.is_finite is not False for c in g)]
    if len(finite) < len(sides):
        notes.append("H @ 1 is infinite on some side; only the finite sides are kept")
    limiting = _distinct(finite) if finite else []
    if not limiting:
        notes.append("no finite one-sided H @ 1 at the point")
        return {**base, "kind": "undefined", "derivative": None, "limiting_gradients": [], "clarke": None,
                "min_norm": None, "midpoint": None, "notes": notes}

    def vec(v: Sequence[sympy.Expr] | None) -> list[Any] | None:
        return None if v is None else [_num_json(c) for c in v]

    if len(limiting) == 1:
        g = limiting[0]
        return {**base, "kind": "differentiable", "derivative": vec(g), "limiting_gradients": [vec(g)],
                "clarke": [vec(g)], "min_norm": vec(g), "midpoint": vec(g), "notes": notes}
    if n == 1:
        lo = min(limiting, key=lambda g: _key(g[0]))
        hi = max(limiting, key=lambda g: _key(g[0]))
        hull = [lo, hi]
        mn = (sympy.S.Zero,) if _key(lo[0]) <= 0 <= _key(hi[0]) else (lo if _key(lo[0]) > 0 else hi)
    else:
        hull = _hull_vertices(list(limiting))
        mn = _exact_min_norm(list(hull))
    mid = tuple(sympy.simplify(sum((v[i] for v in hull), sympy.S.Zero) / len(hull)) for i in range(n))
    notes.append("the one-sided values differ; their convex hull stands in for a Clarke set")
    return {**base, "kind": "kink", "derivative": None, "limiting_gradients": [vec(g) for g in limiting],
            "clarke": [vec(g) for g in hull], "min_norm": vec(mn), "midpoint": vec(mid), "notes": notes}
