"""The sympy oracle: one-sided derivatives, limiting gradients, the Clarke set and its minimum-norm element.

A case's ``sympy`` field is parsed with :mod:`kinkcheck.expr` and evaluated over real sympy symbols
(:func:`to_sympy`); a mapped program gives the same kind of expression (:mod:`kinkcheck.oracles.mapping`).
:func:`analyze_expression` then probes the function along curves ``p + t d + t**2 w`` (``t -> 0+``):

1. The expression is prepared: binary floats become exact decimals, ``atan2`` becomes a ``Piecewise`` of
   ``atan`` pieces (its branch cut and the origin are kinks like the others), ``Mod``/``frac`` become
   ``floor`` forms, and ``0**e`` becomes ``Piecewise((0, e > 0), (1, Eq(e, 0)))`` (undefined for ``e < 0``).
2. For each probe direction ``d`` it decides, exactly, which analytic piece of every ``Max``/``Min``/``Abs``/
   ``sign``/``Heaviside``/``floor``/``ceiling``/``Piecewise`` (and ``0**e`` after a selection) is active on
   the curve. ``w`` is a fixed generic tie-breaker, so a tie among several elements resolves to one piece
   whose region contains the curve, and the curve leaves every non-differentiable set through ``p`` (the
   straight ray ``p + t d`` stays inside ``v = 0`` for ``|a v|`` along ``d = e_a``). Conditions are decided
   by the sign of exact expressions at ``t = s 10**-30`` and ``t = s 10**-40``; the two signs must agree.
   ``s`` is a power of ten no larger than 1, than any nonzero ``|p_i|``, than any nonzero constant of the
   expression and than any nonzero gap at ``p`` (a kinked function's argument, the difference of two
   ``Max``/``Min`` arguments, a ``floor`` argument's distance to the nearest integer), so ``Max(x, 1e-300)``
   at 0 is probed at ``t = 10**-330``. The working precision and the threshold below which a value counts
   as zero scale with ``t`` (``_Scale``).
3. The selected piece has no kinks left; its value and gradient are substituted at the point when finite
   (their limit, by continuity of elementary functions) or else their limit along the same curve is taken
   with :func:`sympy.limit`; when that limit has no value the piece is simplified once and tried again.

A component at ``+-oo`` (``--at x=inf``) is probed on ``x = +-1 / (t + t**2 w)``: the limits as
``x -> +-oo``, with one side only. A component that is nan is not judged.

This order avoids two sympy 1.14 pitfalls (``shared/DESIGN.md``): ``limit`` across pieces returned the
wrong one-sided value for ``Piecewise((x, x > 0), (x/100, True))`` and raised on nested ``Max``/``Min``.

The Clarke generalized gradient of a locally Lipschitz ``f`` is the convex hull of the limits of gradients
taken at points of differentiability (Clarke 1983, *Optimization and Nonsmooth Analysis*, Theorem 2.5.1);
the probe directions sample those limits. PyTorch documents the minimum-norm element of that set as its
rule for convex/concave points (autograd notes, "Gradients for non-differentiable functions"). Where ``f``
is not locally Lipschitz (a jump, an infinite one-sided derivative) no Clarke set exists
(``OracleResult.lipschitz`` is False).

Probe directions: for one component ``-1`` then ``+1`` (left, right); for ``n <= 3`` components
``+-e_i`` and every sign vector in ``{-1, 1}**n``; for ``n > 3`` ``+-e_i`` and four fixed generic
directions. These alone miss a piece selected only on a cone that holds none of them (``Max(5x + 2y,
-20x + 50y, 20x - 50y)`` at 0: ``5x + 2y`` wins only between 16 and 27 degrees), so for ``n >= 2`` finite
components they are refined (:func:`_refine`). The piece selected along ``d`` depends only on the signs of
the selection's decisions (a ``Max``'s winner minus each other argument, an ``Abs`` argument, a condition's
``lhs - rhs``, a ``floor`` argument minus an integer); a decision that is 0 at ``p`` with a finite nonzero
gradient ``g`` has the sign of ``g . d``, so it changes sign on the hyperplane ``g . d = 0``, and each probe's
selection holds on the open cone where its decisions keep their signs (its region). Every open cell of the
arrangement of those hyperplanes that lies in no region gets a probe at an interior integer direction,
whose decisions may add hyperplanes, until every cell is covered. Guarantee, when no note says otherwise:
every piece selected on an open cone of directions through ``p`` whose boundaries are first-order ties
contributes its limiting gradient (for a piecewise-affine ``f``, nested ``Max``/``Min``/``Abs``/``Piecewise``
included, the Clarke set is then exact). Not covered: a tie whose first-order term vanishes at ``p``
(``x**2 - y**2``; such cones are left to the fixed probes), cones thinner than about ``1e-7`` radians, and
more than 64 added directions, 16 rounds, 512 cells or 1000 tested cells to split (a note then says the
Clarke set may miss vertices). A piece active only on a set without interior (``(x + y)/2 - (x - y)**2``
inside ``Max(x, y, .)``) is never selected: the curve's ``t**2 w`` leaves such sets. A function whose active
piece is itself singular at the point (the Euclidean norm at the origin) has a continuum of limiting
gradients; the probes then give an inscribed polytope, and a note says so.

Whatever cannot be decided (a sign that differs between the probe scales, a limit sympy leaves unevaluated
or that does not exist, a sympy failure) comes back as ``kind == "not-judged"`` with a ``reason``; the
oracle never raises for a mathematical reason.
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
    "analyze_expression",
    "probe_directions",
]

_T_EXPONENTS = (30, 40)  # probe scales t = s * 10**-30 and s * 10**-40 (s: see _scale_for)
_T = sympy.Symbol("t", positive=True)
#: What sympy raises when it cannot do something (a limit, a simplification, a comparison).
_SYMPY_FAILURES = (ArithmeticError, ValueError, TypeError, NotImplementedError, RecursionError, AttributeError,
                   IndexError, KeyError, sympy.PoleError, sympy.polys.polyerrors.BasePolynomialError)


class OracleError(RuntimeError):
    """The oracle cannot decide something (a condition whose sign changes between probe scales, a limit
    sympy leaves unevaluated); ``str(err)`` is the reason. Internal: :func:`analyze_expression` turns it
    into a ``"not-judged"`` result."""


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
        ``"jump"`` (discontinuous), ``"undefined"`` (no probe direction is real-valued) or ``"not-judged"``
        (the oracle cannot decide; ``reason`` says why and every other value is empty). A continuous ``f``
        that is not locally Lipschitz (``sqrt(Abs(x - 1))`` at 1: one-sided derivatives ``-oo``, ``oo``)
        stays ``"kink"`` with ``clarke`` None and ``lipschitz`` False.
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
    reason : str or None
        ``"not judged: <why>"`` when ``kind == "not-judged"``, else None.
    lipschitz : bool or None
        True when ``f`` is locally Lipschitz at the point, so the Clarke set exists (``differentiable``, or a
        ``kink`` with ``clarke``); False when it is not: a jump or a value that is not finite at the point, an
        infinite one-sided derivative (``sqrt`` at 0, ``xlogy(x, y)`` at the origin); None when undecided
        (``not-judged``, ``undefined``, or the edge of the domain with finite one-sided derivatives). At a
        point with an infinite component "locally" means on a neighbourhood of infinity.

    At a point with a component at ``+oo`` only the left side exists (``left`` holds the limit of the
    derivative as ``x -> oo``, ``right`` is None); at ``-oo`` only the right side.
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
    reason: str | None = None
    lipschitz: bool | None = None

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
            "reason": self.reason,
            "lipschitz": self.lipschitz,
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


def xlogy(x: Any, y: Any) -> sympy.Expr:
    """``x * log(y)``, 0 where ``x == 0`` (even where ``log(y)`` is not finite), as ``torch.xlogy`` and
    ``scipy.special.xlogy`` define it: ``Piecewise((0, Eq(x, 0)), (x*log(y), True))``."""
    return sympy.Piecewise((0, sympy.Eq(x, 0)), (x * sympy.log(y), True))


def xlog1py(x: Any, y: Any) -> sympy.Expr:
    """``x * log(1 + y)``, 0 where ``x == 0`` (``torch.special.xlog1py``, ``scipy.special.xlog1py``)."""
    return sympy.Piecewise((0, sympy.Eq(x, 0)), (x * sympy.log(1 + y), True))


def log1p(x: Any) -> sympy.Expr:
    """``log(1 + x)`` (exact arithmetic needs no separate small-``x`` form)."""
    return sympy.log(1 + x)


def expm1(x: Any) -> sympy.Expr:
    """``exp(x) - 1``."""
    return sympy.exp(x) - 1


def log2(x: Any) -> sympy.Expr:
    """``log(x) / log(2)``."""
    return sympy.log(x) / sympy.log(2)


def log10(x: Any) -> sympy.Expr:
    """``log(x) / log(10)``."""
    return sympy.log(x) / sympy.log(10)


def sigmoid(x: Any) -> sympy.Expr:
    """The logistic function ``1 / (1 + exp(-x))``."""
    return 1 / (1 + sympy.exp(-x))


def trunc(x: Any) -> sympy.Expr:
    """Rounding toward zero: ``floor(x)`` for ``x >= 0``, ``ceiling(x)`` below (piecewise constant)."""
    return sympy.Piecewise((sympy.floor(x), x >= 0), (sympy.ceiling(x), True))


def frac(x: Any) -> sympy.Expr:
    """``x - floor(x)`` (sympy's ``frac``, spelled with ``floor`` so its pieces are selected)."""
    return x - sympy.floor(x)


def sympy_namespace() -> dict[str, Any]:
    """Names a case's ``sympy`` field (or a mapped program's form) may use, for
    :func:`kinkcheck.expr.resolve_names`.

    ``Max``/``Min`` accept (nested) lists and flatten them (``Max(v)``, ``Max(m)``); ``kth_smallest(v, k)``
    is :func:`kth_smallest`; ``xlogy``, ``xlog1py``, ``log1p``, ``expm1``, ``log2``, ``log10``, ``sigmoid``,
    ``trunc`` and ``frac`` are the functions of this module of those names. ``sinc`` is sympy's
    *unnormalized* ``sin(x)/x`` (torch's and NumPy's ``sinc(x)`` is ``sinc(pi*x)`` here); ``atan2(y, x)``
    is sympy's, with ``atan2(0, 0)`` taken as 0 (IEEE 754, C99) when the oracle evaluates it. ``pi`` and
    ``E`` are the constants. Covers :data:`kinkcheck.catalog.SYMPY_NAMES` (the same names).
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
        "Eq": sympy.Eq,
        "Ne": sympy.Ne,
        "Mod": sympy.Mod,
        "atan2": sympy.atan2,
        "xlogy": xlogy,
        "xlog1py": xlog1py,
        "log1p": log1p,
        "expm1": expm1,
        "log2": log2,
        "log10": log10,
        "sigmoid": sigmoid,
        "trunc": trunc,
        "frac": frac,
        "sin": sympy.sin,
        "cos": sympy.cos,
        "tan": sympy.tan,
        "asin": sympy.asin,
        "acos": sympy.acos,
        "atan": sympy.atan,
        "sinh": sympy.sinh,
        "cosh": sympy.cosh,
        "tanh": sympy.tanh,
        "asinh": sympy.asinh,
        "acosh": sympy.acosh,
        "atanh": sympy.atanh,
        "sinc": sympy.sinc,
        "erf": sympy.erf,
        "erfc": sympy.erfc,
        "pi": sympy.pi,
        "E": sympy.E,
    }


def _exact(v: Any) -> sympy.Expr:
    """A point value as an exact number: ints as they are, floats from their shortest decimal repr,
    ``inf``/``-inf``/``nan`` as ``oo``/``-oo``/``nan``."""
    if isinstance(v, bool):
        return sympy.Integer(int(v))
    if isinstance(v, int):
        return sympy.Integer(v)
    if isinstance(v, float):
        if math.isnan(v):
            return sympy.nan
        if math.isinf(v):
            return sympy.oo if v > 0 else -sympy.oo
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
        The point, converted exactly from each value's decimal repr (``-0.0`` becomes ``0``; ``inf``,
        ``-inf``, ``nan`` become ``oo``, ``-oo``, ``nan``).

    Raises
    ------
    kinkcheck.expr.ExprError
        When the field does not parse, names something outside the namespace, or does not evaluate.
    """
    parsed = ex.parse(case.sympy, case.at, cat.SYMPY_NAMES)
    texts = _literal_texts(case.sympy)
    n_consts = sum(1 for n in ex.walk(parsed) if isinstance(n, ex.Const) and not isinstance(n.value, bool))
    # Pair literal texts with Const nodes only when the counts agree; otherwise use each float's repr.
    tree = _exact_consts(parsed, iter(texts if len(texts) == n_consts else []))
    _check_constants(parsed, case)
    names = ex.resolve_names(tree, sympy_namespace(), modules=(), origins=("sympy", "kinkcheck"))
    syms: list[sympy.Symbol] = []
    vals: list[sympy.Expr] = []
    inputs = {name: _symbols_for(name, value, syms, vals) for name, value in case.at.items()}
    try:
        out = ex.evaluate(tree, names, inputs)
    except _SYMPY_FAILURES as err:  # Mod(x, 0): ZeroDivisionError; erfc(1e300) compared: OverflowError
        raise ex.ExprError(f"case {case.id!r}: sympy field {case.sympy!r} does not evaluate: "
                           f"{type(err).__name__}: {err}") from None
    out = sympy.sympify(out)
    if not isinstance(out, sympy.Expr):
        raise ex.ExprError(f"case {case.id!r}: sympy field {case.sympy!r} is not a scalar expression")
    return out, tuple(syms), tuple(vals)  # type: ignore[return-value]


def _check_constants(tree: ex.Node, case: Case) -> None:
    """Refuse constant arithmetic past float64 (``10**10**10``, ``2**2000``), as program texts are refused:
    sympy would expand it exactly, for minutes."""

    def value(n: ex.Node) -> float | None:
        if isinstance(n, ex.Const) and isinstance(n.value, (int, float)) and not isinstance(n.value, bool):
            return float(n.value)
        if isinstance(n, ex.Unary) and n.op in "+-":
            v = value(n.operand)
            return None if v is None else (-v if n.op == "-" else v)
        if isinstance(n, ex.BinOp) and n.op in ("+", "-", "*", "/", "**"):
            a, b = value(n.left), value(n.right)
            if a is None or b is None:
                return None
            try:
                out = {"+": a + b, "-": a - b, "*": a * b}[n.op] if n.op in "+-*" else (
                    a / b if n.op == "/" else a ** b)
            except ZeroDivisionError:
                return None
            if isinstance(out, complex):
                return None
            if not math.isfinite(out):
                raise OverflowError
            return out
        return None

    for node in ex.walk(tree):
        try:
            value(node)
        except OverflowError:
            raise ex.ExprError(f"case {case.id!r}: sympy field {case.sympy!r}: {ex.unparse(node)[:60]!r} is not a "
                               "finite float64 number") from None


# --------------------------------------------------------------------------- preparation and probe scale


def _exact_float(v: sympy.Float) -> sympy.Rational:
    """A binary Float as its shortest decimal when that is the same double, else its exact binary value."""
    try:
        dec = sympy.Rational(repr(float(v)))
    except (TypeError, ValueError, OverflowError):
        return sympy.Rational(v)
    return dec if sympy.Float(dec, v._prec) == v else sympy.Rational(v)


def _atan2_pieces(y: sympy.Expr, x: sympy.Expr) -> sympy.Expr:
    """``atan2(y, x)`` as ``atan`` pieces, each analytic on its region: ``atan(y/x)`` right of the y axis,
    ``±pi/2 - atan(x/y)`` above/below the x axis, ``atan(y/x) + pi`` on the branch cut ``y == 0, x < 0``
    (its value there, as in IEEE 754 for ``y = +0``); 0 at the origin (IEEE 754 ``atan2(+0, +0)``)."""
    return sympy.Piecewise(
        (sympy.atan(y / x), x > 0),
        (sympy.pi / 2 - sympy.atan(x / y), y > 0),
        (-sympy.pi / 2 - sympy.atan(x / y), y < 0),
        (sympy.atan(y / x) + sympy.pi, x < 0),
        (0, True),
    )


def _zero_power(expo: sympy.Expr) -> sympy.Expr:
    """``0**expo``: 0 for ``expo > 0``, 1 for ``expo == 0``, undefined (no branch) for ``expo < 0``."""
    return sympy.Piecewise((0, expo > 0), (1, sympy.Eq(expo, 0)))


def _prepare(f: sympy.Expr) -> sympy.Expr:
    """``f`` with exact constants and every function the piece selection does not know rewritten into ones
    it does (see the module docstring, step 1)."""
    floats = f.atoms(sympy.Float)
    if floats:
        f = f.xreplace({v: _exact_float(v) for v in floats})
    f = f.replace(lambda e: isinstance(e, sympy.atan2), lambda e: _atan2_pieces(*e.args))
    f = f.replace(lambda e: isinstance(e, sympy.Mod), lambda e: e.args[0] - e.args[1] * sympy.floor(e.args[0] / e.args[1]))
    f = f.replace(lambda e: isinstance(e, sympy.frac), lambda e: e.args[0] - sympy.floor(e.args[0]))
    f = f.replace(lambda e: isinstance(e, sympy.Pow) and e.base.is_zero is True, lambda e: _zero_power(e.exp))
    return f


@dataclass(frozen=True)
class _Scale:
    """Probe scale ``s`` (a power of ten ``<= 1``), the probe values of ``t``, the working precision and
    the threshold below which a decided value counts as zero.

    Values along a probe curve are ``c t**k`` for small ``k``; the threshold ``t_min**8`` lies far below
    them and the precision (``10 log10(1/t_min) + 50`` digits, more for large magnitudes) far below that.
    """

    s: sympy.Rational
    dps: int
    zero: sympy.Float

    @property
    def ts(self) -> tuple[sympy.Rational, ...]:
        return tuple(self.s / sympy.Integer(10) ** k for k in _T_EXPONENTS)


def _gaps(f: sympy.Expr, at_point: dict[sympy.Symbol, sympy.Expr]) -> Iterator[sympy.Expr]:
    """Values at the point whose sign or integer part a piece selection decides: a kinked function's
    argument, the difference of two ``Max``/``Min`` arguments, a condition's ``lhs - rhs``, a ``floor``
    argument's distance to the nearest integer."""
    for e in sympy.preorder_traversal(f):
        if isinstance(e, (sympy.Max, sympy.Min)):
            yield from (a - b for a, b in itertools.combinations(e.args, 2))
        elif isinstance(e, (sympy.Abs, sympy.sign, sympy.Heaviside)):
            yield e.args[0]
        elif isinstance(e, sympy.core.relational.Relational):
            yield e.lhs - e.rhs
        elif isinstance(e, (sympy.floor, sympy.ceiling)):
            v = e.args[0].xreplace(at_point)
            if _finite_real(v):
                yield v - sympy.floor(v + sympy.Rational(1, 2))
        elif isinstance(e, sympy.Pow) and not e.exp.is_number:
            yield e.base


def _magnitude(v: sympy.Expr) -> sympy.Float | None:
    """``|v|`` to 30 digits when ``v`` evaluates at the point to a finite nonzero real, else None."""
    if not v.is_number:
        return None
    try:
        num = sympy.N(v, 30)
    except (TypeError, ValueError, ArithmeticError):
        return None
    if not num.is_real or num.is_finite is not True or num == 0:  # an exact zero gap is the kink itself
        return None
    return abs(num)


def _scale_for(f: sympy.Expr, syms: Sequence[sympy.Symbol], point: Sequence[sympy.Expr]) -> _Scale:
    """The probe scale: far closer to ``p`` than ``p`` is to 0, than any constant of ``f`` and than any
    nonzero gap at ``p`` (so ``Max(x, 1e-300)`` at 0 is not mistaken for a kink)."""
    finite = {s: p for s, p in zip(syms, point) if p.is_finite}
    small, large = [sympy.Float(1)], [sympy.Float(1)]
    consts = [c for c in f.atoms(sympy.Number) if c.is_finite]
    for v in (*point, *consts):
        m = _magnitude(v)
        if m is not None:
            small.append(m)
            large.append(m)
    if len(finite) == len(syms):
        for g in _gaps(f, finite):
            m = _magnitude(g.xreplace(finite))
            if m is not None:
                small.append(m)
    if len(finite) < len(syms):  # x = +-1/t must lie beyond every constant
        small.extend(1 / m for m in large)
    k = math.floor(float(sympy.log(min(small), 10).evalf(30)))
    k = min(k, 0)
    depth = -k + max(_T_EXPONENTS)  # t_min = 10**-depth
    digits = math.ceil(float(sympy.log(max(large), 10).evalf(30)))
    extra = depth if len(finite) < len(syms) else 0
    dps = 10 * depth + 50 + digits + extra
    zero = sympy.Float(sympy.Integer(10) ** (-8 * depth), dps)
    return _Scale(sympy.Integer(10) ** k, dps, zero)


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


def _curve_point(p: sympy.Expr, t: sympy.Expr, d: int, w: sympy.Expr) -> sympy.Expr:
    """One component of the probe curve: ``p + t d + t**2 w``, or ``+-1 / (t + t**2 w)`` at ``p = +-oo``."""
    if p is sympy.oo:
        return 1 / (t + t * t * w)
    if p is sympy.S.NegativeInfinity:
        return -1 / (t + t * t * w)
    return p + t * d + t * t * w


class _Curve:
    """The exact probe curve at the two probe scales (sign decisions) and in ``t`` (limits)."""

    def __init__(self, syms: Sequence[sympy.Symbol], point: Sequence[sympy.Expr], d: Sequence[int],
                 scale: _Scale) -> None:
        w = _tie_breaker(len(syms))
        self.scale = scale
        self.subs = [{s: _curve_point(p, t, di, wi) for s, p, di, wi in zip(syms, point, d, w)} for t in scale.ts]
        self.along = {s: _curve_point(p, _T, di, wi) for s, p, di, wi in zip(syms, point, d, w)}
        # The straight ray (w = 0) for the second-order extras: far cheaper limits than on the curve.
        self.ray = {s: _curve_point(p, _T, di, 0) for s, p, di in zip(syms, point, d)}
        self.limits = dict(zip(syms, point))  # each component's limit along the curve (p_i, or +-oo)
        #: Every ``(expression, sign)`` a piece selection decided on this curve (see :func:`_refine`).
        self.decisions: list[tuple[sympy.Expr, int]] = []

    def values(self, e: sympy.Expr) -> list[sympy.Expr]:
        out = []
        for sub in self.subs:
            v = e.xreplace(sub)
            if v.is_zero is True:
                out.append(sympy.S.Zero)
                continue
            num = sympy.N(v, self.scale.dps)
            if num.has(sympy.nan, sympy.zoo, sympy.oo, -sympy.oo):
                raise _OutsideDomain(str(e))
            re_, im_ = num.as_real_imag()
            if abs(im_) > self.scale.zero:
                raise _OutsideDomain(str(e))
            if not re_.is_number:
                raise OracleError(f"{e} does not evaluate to a number on the probe curve")
            out.append(re_)
        return out

    def sign(self, e: sympy.Expr) -> int:
        zero = self.scale.zero
        signs = {0 if abs(v) <= zero else (1 if v > 0 else -1) for v in self.values(e)}
        if len(signs) != 1:
            raise OracleError(f"the sign of {e} changes between probe scales")
        return signs.pop()

    def decide(self, e: sympy.Expr) -> int:
        """:meth:`sign`, recorded in :attr:`decisions`: a piece selection depends on these signs only."""
        s = self.sign(e)
        self.decisions.append((e, s))
        return s

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
            s = self.decide(_select(cond.lhs, self) - _select(cond.rhs, self))
            return bool({"<": s < 0, "<=": s <= 0, ">": s > 0, ">=": s >= 0, "==": s == 0, "!=": s != 0}[cond.rel_op])
        raise OracleError(f"cannot decide the condition {cond}")


#: Functions whose active piece :func:`_select` decides (``atan2``, ``Mod``, ``frac`` and ``0**e`` are
#: rewritten into these by :func:`_prepare`; a ``Pow`` whose base a selection makes 0 is decided too).
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
        best, strict = 0, [False] * len(args)  # strict[j]: args[j] is known to lose strictly to the best
        want = 1 if isinstance(e, sympy.Max) else -1
        for j in range(1, len(args)):
            s = curve.sign(args[j] - args[best])
            if s == want:  # equal pieces keep the first: same function, same gradient
                strict = [True] * len(args)  # every earlier one lost to the old best, which loses strictly now
                best = j
            else:
                strict[j] = s != 0
        # The piece depends only on which argument wins, so these are the decisions (not the scan's order).
        curve.decisions.extend((want * (args[best] - a), 1 if strict[j] else 0)
                               for j, a in enumerate(args) if j != best)
        return args[best]
    if isinstance(e, (sympy.Abs, sympy.sign, sympy.Heaviside)):
        a = _select(e.args[0], curve)
        s = curve.decide(a)
        if isinstance(e, sympy.Abs):
            return a if s >= 0 else -a
        if isinstance(e, sympy.sign):
            return sympy.Integer(s)
        return sympy.Integer(1) if s > 0 else (sympy.Integer(0) if s < 0 else sympy.Heaviside(0))
    if isinstance(e, (sympy.floor, sympy.ceiling)):
        a = _select(e.args[0], curve)
        values = curve.values(a)
        vals = {int(e.func(v)) for v in values}
        if len(vals) != 1:
            raise OracleError(f"{e} changes value between probe scales")
        nearest = sympy.Integer(round(float(values[0])))  # a kink through p lies where a == this integer
        curve.decisions.append((a - nearest, curve.sign(a - nearest)))
        return sympy.Integer(vals.pop())  # constant on the piece: derivative 0
    if isinstance(e, sympy.Pow):
        base, expo = _select(e.base, curve), _select(e.exp, curve)
        if base.is_zero is True:  # Max(x, 0)**b left of 0: 0**b is constant where it is defined
            s = curve.decide(expo)
            if s < 0:
                raise _OutsideDomain(f"0**({expo})")
            return sympy.S.Zero if s > 0 else sympy.S.One
        return base**expo
    return e.func(*[_select(a, curve) for a in e.args])


def _finite_real(v: sympy.Expr) -> bool:
    return bool(v.is_number and v.is_finite is True and v.is_extended_real is True)


def _quick_limit(e: sympy.Expr, curve: _Curve) -> sympy.Expr | None:
    """The limit of ``e`` along the curve by continuity, argument by argument, or None when undecided.

    Each argument's limit is put into its function as sympy evaluates it at ``+-oo`` (``atan(oo) = pi/2``,
    ``exp(-oo) = 0``, ``2 * oo = oo``); ``1/b`` with ``b -> 0`` is ``+-oo`` by the sign of ``b`` on the curve.
    Indeterminate forms (``oo - oo``, ``0 * oo``, ``0**0``, ``oo**0``) give nan or are refused, and leave
    the limit to :func:`sympy.limit`, which is slow on ``atan(x/y)`` along the curve.
    """
    if e.is_number:
        return e if e.is_extended_real else None
    if isinstance(e, sympy.Symbol):
        return curve.limits.get(e)
    args = []
    for a in e.args:
        la = _quick_limit(a, curve)
        if la is None:
            return None
        args.append(la)
    if isinstance(e, sympy.Pow):
        base, expo = args
        if expo.is_zero or (base.is_zero and not expo.is_number) or base.is_infinite and expo.is_zero:
            return None
        if base.is_zero and expo.is_negative:
            s = curve.sign(e.base)
            if s == 0:
                return None
            if expo.is_integer:
                return sympy.oo if (s > 0 or expo.is_even) else -sympy.oo
            return sympy.oo if s > 0 else None
        if not expo.is_number:
            return None
    v = e.func(*args)
    if v.has(sympy.nan, sympy.zoo, sympy.AccumBounds) or v.is_extended_real is not True or not v.is_number:
        return None
    return v


def _limit(g: sympy.Expr, at_point: dict[sympy.Symbol, sympy.Expr] | None,
           along: dict[sympy.Symbol, sympy.Expr], curve: _Curve | None = None) -> tuple[sympy.Expr, bool]:
    """``lim_{t->0+} g(curve(t))``; second item True when ``g`` itself is singular at ``p`` (needed a limit).

    ``at_point`` None (a component at infinity) always takes the limit. With ``curve``, the limit by
    continuity (:func:`_quick_limit`) is tried before :func:`sympy.limit`.

    Raises
    ------
    OracleError
        When sympy leaves the limit unevaluated, finds none (an oscillation) or fails.
    _OutsideDomain
        When the limit is not real.
    """
    if at_point is not None:
        direct = g.xreplace(at_point)
        if _finite_real(direct):
            return direct, False
    if curve is not None:
        quick = _quick_limit(g, curve)
        if quick is not None:
            return quick, True
    try:
        lim = sympy.limit(g.xreplace(along), _T, 0, "+")
    except _SYMPY_FAILURES as err:  # sympy's own failures: nothing to decide with
        raise OracleError(f"sympy cannot take the limit of {g} along the probe curve ({type(err).__name__})") from None
    if lim.has(sympy.Limit):
        raise OracleError(f"sympy leaves the limit of {g} along the probe curve unevaluated")
    if lim.has(sympy.AccumBounds) or lim.has(sympy.nan) or lim is sympy.zoo:
        raise OracleError(f"{g} has no limit along the probe curve (sympy gives {lim})")
    if lim.is_extended_real is not True:
        if lim.is_extended_real is False:
            raise _OutsideDomain(str(g))
        raise OracleError(f"sympy cannot tell whether the limit {lim} of {g} is real")
    return lim, True


@dataclass
class _Probe:
    direction: tuple[int, ...]
    value: sympy.Expr
    gradient: tuple[sympy.Expr, ...]
    singular: bool
    piece: sympy.Expr
    hessian_sum: tuple[sympy.Expr, ...] | None = None  # H @ 1 of the active piece; None: no finite real limit
    curvature: sympy.Expr | None = None  # lim d^T H d of the active piece along the curve; None: undecided
    decisions: tuple[tuple[sympy.Expr, int], ...] = ()  # the selection's (expression, sign) decisions


def _value_and_gradient(piece: sympy.Expr, syms: Sequence[sympy.Symbol], at_point: dict | None,
                        curve: _Curve) -> tuple[sympy.Expr, tuple[sympy.Expr, ...], bool]:
    value, _ = _limit(piece, at_point, curve.along, curve)
    grad, singular = [], False
    for s in syms:
        g, sing = _limit(sympy.diff(piece, s), at_point, curve.along, curve)
        grad.append(g)
        singular |= sing
    return value, tuple(grad), singular


def _probe(f: sympy.Expr, syms: Sequence[sympy.Symbol], point: Sequence[sympy.Expr], d: tuple[int, ...],
           scale: _Scale) -> _Probe | None:
    """Active piece along ``d`` and the limits of its value and gradient; None when outside the domain."""
    curve = _Curve(syms, point, d, scale)
    probe = _probe_on(f, syms, point, d, curve)
    if probe is not None:
        probe.decisions = tuple(curve.decisions)
    return probe


def _probe_on(f: sympy.Expr, syms: Sequence[sympy.Symbol], point: Sequence[sympy.Expr], d: tuple[int, ...],
              curve: _Curve) -> _Probe | None:
    finite = all(p.is_finite for p in point)
    at_point = dict(zip(syms, point)) if finite else None
    try:
        piece = _select(f, curve)
        curve.values(piece)  # raises when the piece is not real-valued next to the point on this side
        try:
            value, grad, singular = _value_and_gradient(piece, syms, at_point, curve)
        except OracleError:
            # 0**b * log(0), x*log(x)/x...: a form whose derivative does not evaluate; a simpler equal form may
            simpler = sympy.simplify(piece)
            if simpler == piece:
                raise
            piece = simpler
            value, grad, singular = _value_and_gradient(piece, syms, at_point, curve)
    except _OutsideDomain:
        return None
    if not _ray_leaves(piece, syms, curve.ray):
        return _Probe(d, value, grad, singular, piece)
    return _Probe(d, value, grad, singular, piece, _hessian_sum(piece, syms, at_point, curve.ray),
                  _curvature(piece, syms, d, at_point, curve.ray))


def _ray_leaves(piece: sympy.Expr, syms: Sequence[sympy.Symbol], ray: dict[sympy.Symbol, sympy.Expr]) -> bool:
    """False when the piece's gradient is nan or infinite identically along the straight ray (the ray stays
    in the set where the piece is singular, ``v = 0`` for ``|a v|``): second-order limits there are
    meaningless and sympy.limit can run for minutes."""
    for s in syms:
        g = sympy.diff(piece, s).xreplace(ray)
        if g.has(sympy.nan, sympy.zoo, sympy.oo, -sympy.oo):
            return False
    return True


# The second-order extras (curvature for OracleResult.shape, H @ 1 for the second-order mode) take their
# limits along the straight ray p + t d: on the curve sympy.limit of a second derivative of a norm takes
# seconds. Where the ray stays inside a singular set the limit is nan and the extra stays undecided (None).
# sympy's failures there only leave an extra undecided too.
_AUX_ERRORS = (OracleError, _OutsideDomain, *_SYMPY_FAILURES)


def _curvature(piece: sympy.Expr, syms: Sequence[sympy.Symbol], d: tuple[int, ...], at_point: dict | None,
               along: dict) -> sympy.Expr | None:
    """``lim_{t->0+} d^T H d`` of the active piece along the probe curve (its second derivative along ``d``)."""
    along_d = sum((di * sympy.diff(piece, s) for s, di in zip(syms, d) if di), sympy.S.Zero)
    second = sum((di * sympy.diff(along_d, s) for s, di in zip(syms, d) if di), sympy.S.Zero)
    return _aux_limit(second, at_point, along)


def _hessian_sum(piece: sympy.Expr, syms: Sequence[sympy.Symbol], at_point: dict | None,
                 along: dict) -> tuple[sympy.Expr, ...] | None:
    """One-sided ``H @ 1`` of the active piece: component i is the limit of ``sum_j d2 piece / dx_i dx_j``."""
    total = sum((sympy.diff(piece, s) for s in syms), sympy.S.Zero)
    out = []
    for s in syms:
        v = _aux_limit(sympy.diff(total, s), at_point, along)
        if v is None:
            return None
        out.append(v)
    return tuple(out)


#: Largest second derivative (sympy.count_ops) whose limit an extra takes when substitution fails: the
#: 2-D Euclidean norm's are 22 operations (a few ms); |a v|'s are 71-102 (seconds each, along 14 probes).
_AUX_MAX_OPS = 40


def _aux_limit(g: sympy.Expr, at_point: dict | None, along: dict) -> sympy.Expr | None:
    """A second-order extra's limit, or None when undecided (sympy fails, or it would be slow)."""
    try:
        if at_point is not None:
            direct = g.xreplace(at_point)
            if _finite_real(direct):
                return direct
        if sympy.count_ops(g) > _AUX_MAX_OPS:
            return None
        v, _ = _limit(g, at_point, along)
    except _AUX_ERRORS:
        return None
    return v


# --------------------------------------------------------------------------- refinement

#: Extra probe directions :func:`_refine` may add at one point, in all rounds together, and its rounds.
_REFINE_BUDGET = 64
_REFINE_ROUNDS = 16
#: Most cones of directions :func:`_split_cells` keeps, and most cones it tests, before giving up (a central
#: arrangement of m hyperplanes in R^k has O(m**(k-1)) cells; a sort of eight tied values has 40320).
_CELL_CAP = 512
_SPLIT_CAP = 1000


class _Ties:
    """The hyperplanes through ``p`` on which a recorded decision changes sign at first order, and the
    region of directions each probe's selection holds on.

    A decision ``e`` (the winner of a ``Max`` minus another argument, an ``Abs`` argument, a condition's
    ``lhs - rhs``...) that is 0 at ``p`` with a finite nonzero gradient ``g`` has, along a direction ``d``
    with ``g . d != 0``, the sign of ``g . d`` (the curve is ``p + t d + O(t**2)``). A probe's region is the
    open cone where every such decision keeps the sign it had on the probe's curve; there every decision
    does (those not 0 at ``p`` keep their sign near ``p``), so the same piece is selected. Ties whose
    gradient is 0 or not finite at ``p`` (``x**2 - y**2`` at 0) are decided at a higher order; they are
    left out of regions.
    """

    def __init__(self, syms: Sequence[sympy.Symbol], point: Sequence[sympy.Expr]) -> None:
        self.syms = syms
        self.at_point = dict(zip(syms, point))
        self.normals: list[np.ndarray] = []  # unit vectors, first nonzero component positive
        self._keys: dict[tuple[float, ...], int] = {}
        self._memo: dict[sympy.Expr, tuple[int, int] | None] = {}

    def normal_of(self, e: sympy.Expr) -> tuple[int, int] | None:
        """``(index, orientation)`` of ``e``'s hyperplane (``sign(e) = orientation * sign(normal . d)``)."""
        if e in self._memo:
            return self._memo[e]
        self._memo[e] = None
        try:
            v = e.xreplace(self.at_point)
            if not (v.is_number and (v.is_zero is True or (_finite_real(v) and abs(sympy.N(v, 50)) < 1e-40))):
                return None
            g = [sympy.diff(e, s).xreplace(self.at_point) for s in self.syms]
            if not all(_finite_real(c) for c in g):
                return None
            vec = np.array([float(c) for c in g])
        except _SYMPY_FAILURES:
            return None
        size = float(np.linalg.norm(vec))
        if not math.isfinite(size) or size == 0.0:
            return None
        vec = vec / size
        orient = 1 if vec[np.flatnonzero(np.abs(vec) > 1e-12)[0]] > 0 else -1
        key = tuple(round(float(c), 10) for c in orient * vec)
        if key not in self._keys:
            self._keys[key] = len(self.normals)
            self.normals.append(orient * vec)
        self._memo[e] = (self._keys[key], orient)
        return self._memo[e]

    def region(self, d: tuple[int, ...], probe: _Probe | None) -> dict[int, int] | None:
        """``{normal index: sign}`` of the probe's region; None when it covers nothing known. A probe
        outside the domain (no decisions kept) covers the cell it lies strictly inside, once no more
        hyperplanes come."""
        if probe is None:
            if not self.normals:
                return None
            dots = np.array(self.normals) @ np.array(d, dtype=float)
            if np.any(np.abs(dots) <= 1e-9 * np.linalg.norm(d)):
                return None
            return {j: (1 if v > 0 else -1) for j, v in enumerate(dots)}
        region: dict[int, int] = {}
        for e, s in probe.decisions:
            found = self.normal_of(e)
            if found is None:
                continue
            idx, orient = found
            if s == 0 or region.get(idx, s * orient) != s * orient:  # an exact tie, or orders disagree
                return None
            region[idx] = s * orient
        return region


def _covers(region: dict[int, int] | None, normals: np.ndarray, d: np.ndarray) -> bool:
    """True when direction ``d`` lies strictly inside the region."""
    if region is None:
        return False
    idx = np.fromiter(region, dtype=int, count=len(region))
    if not len(idx):
        return True
    signs = np.fromiter(region.values(), dtype=float, count=len(region))
    return bool(np.all(signs * (normals[idx] @ d) > 1e-9 * np.linalg.norm(d)))


def _interior(a: np.ndarray, candidates: Sequence[np.ndarray]) -> np.ndarray | None:
    """A direction ``d`` with ``a_i . d > 0`` for every row ``a_i``, or None when that open cone is empty
    (or thinner than about ``1e-7`` radians).

    A candidate is tried first. Otherwise, by Gordan's theorem the cone is empty exactly when 0 lies in the
    convex hull of the rows; when it does not, the hull's minimum-norm point ``x`` has ``a_i . x >= |x|**2``
    for every i (its optimality condition), so ``x`` is an interior direction
    (:func:`kinkcheck.geometry.min_norm_point`).
    """
    for c in candidates:
        if np.all(a @ c > 1e-9 * np.linalg.norm(c)):
            return c
    x, _ = min_norm_point(a)
    size = float(np.linalg.norm(x))
    if size <= 1e-7 or not np.all(a @ x > 0.5 * size * size):
        return None
    return x


def _cells_2d(normals: np.ndarray) -> list[np.ndarray]:
    """An interior direction of every open cone (sector) cut out of the plane by lines with these normals:
    the bisectors of consecutive boundary rays."""
    rays = [math.atan2(a, -b) for a, b in normals]  # the line a x + b y = 0 runs along (-b, a) and (b, -a)
    angles = sorted({round((r + h) % (2 * math.pi), 12) for r in rays for h in (0.0, math.pi)})
    out = []
    for i, lo in enumerate(angles):
        hi = angles[i + 1] if i + 1 < len(angles) else angles[0] + 2 * math.pi
        mid = (lo + hi) / 2
        out.append(np.array([math.cos(mid), math.sin(mid)]))
    return out


def _split_cells(normals: np.ndarray, regions: Sequence[dict[int, int] | None],
                 candidates: Sequence[np.ndarray]) -> list[np.ndarray] | None:
    """An interior direction of every open cell of the hyperplane arrangement of ``normals`` that lies in
    no region (cells are split one hyperplane at a time; a partial cell inside a region is not split
    further); None when more than :data:`_CELL_CAP` cells remain to split or :data:`_SPLIT_CAP` were tested."""
    known = [r for r in regions if r is not None]
    tested = 0
    cells: list[tuple[tuple[int, ...], np.ndarray | None]] = [((), None)]
    for h in range(len(normals)):
        split: list[tuple[tuple[int, ...], np.ndarray | None]] = []
        for signs, pt in cells:
            if any(all(i < h and signs[i] == s for i, s in r.items()) for r in known):
                continue
            tested += 2
            if tested > _SPLIT_CAP:
                return None
            for s in (1, -1):
                child = (*signs, s)
                a = normals[: len(child)] * np.array(child, dtype=float)[:, None]
                inside = _interior(a, [c for c in (pt, *candidates) if c is not None])
                if inside is not None:
                    split.append((child, inside))
        cells = split
        if len(cells) > _CELL_CAP:
            return None
    return [pt for signs, pt in cells
            if pt is not None and not any(all(signs[i] == s for i, s in r.items()) for r in known)]


def _integer_direction(d: np.ndarray, normals: np.ndarray) -> tuple[int, ...] | None:
    """A small integer vector strictly on the same side of every hyperplane as ``d``, or None."""
    signs = np.sign(normals @ d)
    if np.any(signs == 0):
        return None
    a = normals * signs[:, None]
    for scale in (4, 16, 64, 256, 1024, 2**14, 2**20, 2**30):
        v = np.round(d / np.abs(d).max() * scale)
        if np.all(a @ v > 1e-9 * np.linalg.norm(v)):
            ints = [int(c) for c in v]
            g = math.gcd(*ints)
            return tuple(c // g for c in ints)
    return None


def _refine(f: sympy.Expr, syms: Sequence[sympy.Symbol], point: Sequence[sympy.Expr], scale: _Scale,
            probes: dict[tuple[int, ...], _Probe | None]) -> str | None:
    """Probe further directions until every cone of directions on which one piece is selected (decided at
    first order) holds a probe; adds them to ``probes``. Returns a note when it stopped short.

    The fixed directions of :func:`probe_directions` miss a piece whose region holds none of them
    (``Max(5x + 2y, -20x + 50y, 20x - 50y)`` at 0: ``5x + 2y`` is the largest only between 16 and 27
    degrees). The piece selected along a direction depends only on the signs of the selection's decisions,
    and each decision tied at ``p`` changes sign on a hyperplane (:class:`_Ties`). Each round enumerates
    the open cells of those hyperplanes' arrangement that lie in no probe's region and probes an interior
    integer direction of each (skipping cells a probe of the same round already covers); the new probes'
    decisions may add hyperplanes. It ends when every cell is covered: then every direction off the
    hyperplanes selects the piece of some probe, so each limiting gradient of a piece active on an open
    cone of directions is among the probes' gradients.
    """
    ties = _Ties(syms, point)
    regions = {d: ties.region(d, p) for d, p in probes.items()}
    added = 0
    for _ in range(_REFINE_ROUNDS):
        regions = {d: ties.region(d, p) if p is None else r for (d, r), p in zip(regions.items(), probes.values())}
        if not ties.normals:
            return None
        mat = np.array(ties.normals)
        if len(syms) == 2:
            cells = [c for c in _cells_2d(mat) if not any(_covers(r, mat, c) for r in regions.values())]
        else:
            found = _split_cells(mat, list(regions.values()), [np.array(d, dtype=float) for d in probes])
            if found is None:
                return (f"the probe directions were not refined: the {len(ties.normals)} tie hyperplanes through "
                        f"the point cut the directions into more cones than {_CELL_CAP} (or {_SPLIT_CAP} tested); "
                        "the Clarke set may miss vertices")
            cells = found
        if not cells:
            return None
        progress = False
        for c in cells:
            mat = np.array(ties.normals)
            if any(_covers(r, mat, c) for r in regions.values()):
                continue  # a probe of this round covers it
            d = _integer_direction(c, mat)
            if d is None or d in probes:
                continue
            if added == _REFINE_BUDGET:
                return (f"the probe directions were refined with {added} directions and cones of directions were "
                        f"left unprobed (budget {_REFINE_BUDGET}); the Clarke set may miss vertices")
            probes[d] = _probe(f, syms, point, d, scale)
            regions[d] = ties.region(d, probes[d])
            added += 1
            progress = True
        if not progress:
            return ("cones of directions were left without a probe that covers them (thinner than the probes "
                    "resolve, or holding a probe whose selection ties exactly); the Clarke set may miss vertices")
    return (f"the probe directions were refined in {_REFINE_ROUNDS} rounds ({added} directions) and new tie "
            "hyperplanes still appeared; the Clarke set may miss vertices")


# --------------------------------------------------------------------------- sets


def _key(v: sympy.Expr) -> float:
    return float(sympy.N(v, 30)) if v.is_finite is not False else (math.inf if v == sympy.oo else -math.inf)


def _order(g: tuple[sympy.Expr, ...]) -> tuple[Any, ...]:
    floats = tuple(_key(c) for c in g)
    first = next((i for i, c in enumerate(floats) if c != 0), len(g))
    return (first, floats, tuple(str(c) for c in g))


def _distinct(grads: Iterable[tuple[sympy.Expr, ...]], scale: _Scale) -> list[tuple[sympy.Expr, ...]]:
    """The distinct gradients (equal to the working precision, see :func:`_eq`), in :func:`_order`."""
    out: list[tuple[sympy.Expr, ...]] = []
    for g in grads:
        if not any(all(_eq(a, b, scale) for a, b in zip(g, h)) for h in out):
            out.append(g)
    return sorted(out, key=_order)


def _hull_vertices(points: list[tuple[sympy.Expr, ...]]) -> list[tuple[sympy.Expr, ...]]:
    """Points that are not in the convex hull of the others (decided in float64; catalog points are far apart)."""
    if len(points) <= 1:
        return list(points)
    # normalised first: gradients of size 1e-300 would square to 0 in float64
    big = max((abs(c) for p in points for c in p), key=_key)
    fl = np.array([[float(c / big) if big != 0 else 0.0 for c in p] for p in points])
    keep = []
    for i, p in enumerate(points):
        others = np.delete(fl, i, axis=0)
        if hull_distance(fl[i], others) > 1e-9:
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


def _eq(a: sympy.Expr, b: sympy.Expr, scale: _Scale) -> bool:
    """``a == b`` for exact limits: exactly, or to the working precision relative to their size (a jump of
    ``1e-300`` in ``Piecewise((1e-300, x > 0), (0, True))`` is a jump)."""
    if a.is_finite is False or b.is_finite is False:
        return a == b
    diff = a - b
    if diff.is_zero is True or (diff.is_Rational and diff == 0):
        return True
    if diff.is_Rational:
        return False
    size = max(sympy.Integer(1), abs(sympy.N(a, 15)), abs(sympy.N(b, 15)))
    return bool(abs(sympy.N(diff, scale.dps)) <= scale.zero * size)


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
        except _SYMPY_FAILURES as err:  # sympy's own value is informative only; its failure is recorded
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

_CACHE: dict[tuple[str, str, str, bool], OracleResult] = {}


def analyze(case: Case) -> OracleResult:
    """Judge a catalog case: :func:`to_sympy` then :func:`analyze_expression`.

    Results are cached per case (id, sympy field, point and tie flag).

    Parameters
    ----------
    case : kinkcheck.catalog.Case

    Returns
    -------
    OracleResult
        ``kind == "not-judged"`` (with ``reason``) when the oracle cannot decide, or when the case's sympy
        field does not evaluate at its point; never raises for a catalog case.
    """
    key = (case.id, case.sympy, repr(case.at), case.tie)
    hit = _CACHE.get(key)
    if hit is None:
        try:
            f, syms, point = to_sympy(case)
        except ex.ExprError as err:
            names: list[sympy.Symbol] = []
            for name, value in case.at.items():
                _symbols_for(name, value, names, [])
            hit = _not_judged(case.id, tuple(s.name for s in names), case.tie, f"not judged: {err}")
        else:
            hit = analyze_expression(f, syms, point, case_id=case.id, tie=case.tie)
        _CACHE[key] = hit
    return hit


def _not_judged(case_id: str, components: tuple[str, ...], tie: bool, reason: str,
                notes: Sequence[str] = ()) -> OracleResult:
    return OracleResult(
        case_id=case_id, components=components, kind="not-judged", derivative=None, left=None, right=None,
        limiting_gradients=(), clarke=None, min_norm=None, midpoint=None, sympy_diff=(None,) * len(components),
        notes=(*notes, reason), tie=tie, reason=reason, lipschitz=None,
    )


def analyze_expression(f: sympy.Expr, symbols: Sequence[sympy.Symbol], point: Sequence[sympy.Expr], *,
                       case_id: str = "expression", tie: bool = False) -> OracleResult:
    """Judge a scalar sympy expression at a point: its kind, one-sided derivatives, limiting gradients,
    Clarke set and minimum-norm element, and whether it is locally Lipschitz there.

    Parameters
    ----------
    f : sympy.Expr
        Scalar, over real symbols; the names of :func:`sympy_namespace` (``atan2``, ``Mod``, ``Piecewise`` …).
    symbols : sequence of sympy.Symbol, shape (n,)
        The differentiated components, flat, in input order (names become ``OracleResult.components``).
        Any other free symbol of ``f`` makes the result not judged.
    point : sequence of sympy numbers, shape (n,)
        Exact values (``Integer``/``Rational``, or other real numbers such as ``sqrt(2)``); ``oo``/``-oo``
        judge the limit as that component goes to infinity; ``nan`` is not judged.
    case_id : str
    tie : bool
        Copied to the result (the kink is a tie, so tie labels apply).

    Returns
    -------
    OracleResult
        ``kind == "not-judged"`` with ``reason`` ``"not judged: <why>"`` when the oracle cannot decide:
        a condition whose sign differs between the probe scales, a limit sympy leaves unevaluated or that
        does not exist, a sympy failure.

    Raises
    ------
    ValueError
        When ``symbols`` and ``point`` differ in length (a caller's error, not a mathematical one).
    TypeError
        When ``f`` is not a scalar sympy expression (``sympy.sympify`` may raise ``SympifyError`` first).
    """
    syms = tuple(symbols)
    components = tuple(s.name for s in syms)
    if len(syms) != len(point):
        raise ValueError(f"{len(syms)} symbols but {len(point)} point components")
    f = sympy.sympify(f)
    if not isinstance(f, sympy.Expr):
        raise TypeError(f"not a scalar sympy expression: {f!r}")
    try:
        pt = tuple(sympy.sympify(p) for p in point)
        nan = [c for c, p in zip(components, pt) if p is sympy.nan]
        if nan:
            return _not_judged(case_id, components, tie, f"not judged: the point is nan ({', '.join(nan)})")
        bad = [c for c, p in zip(components, pt)
               if not (p in (sympy.oo, sympy.S.NegativeInfinity) or _finite_real(p))]
        if bad:
            return _not_judged(case_id, components, tie, f"not judged: the point is not real ({', '.join(bad)})")
        if not syms:
            return _not_judged(case_id, components, tie, "not judged: no differentiated inputs")
        infinite = [c for c, p in zip(components, pt) if p in (sympy.oo, sympy.S.NegativeInfinity)]
        if len(infinite) > 1:  # max(x, y) at (inf, inf): x - y may go anywhere; one curve would pick a side
            return _not_judged(case_id, components, tie, "not judged: several inputs at infinity "
                               f"({', '.join(infinite)}): the limit depends on the path")
        extra = sorted(s.name for s in f.free_symbols - set(syms))
        if extra:
            return _not_judged(case_id, components, tie,
                               f"not judged: {', '.join(extra)} in the expression are not among the inputs")
        return _analyze(f, syms, pt, case_id, tie)
    except OracleError as err:
        return _not_judged(case_id, components, tie, f"not judged: {err}")
    except _SYMPY_FAILURES as err:  # sympy's own failures, never a traceback in a report
        return _not_judged(case_id, components, tie, f"not judged: sympy failed ({type(err).__name__}: {err})")


def _point_value(f: sympy.Expr, syms: Sequence[sympy.Symbol], point: Sequence[sympy.Expr]) -> sympy.Expr | None:
    try:
        v = f.xreplace(dict(zip(syms, point)))
    except (TypeError, ValueError):  # Max(sqrt(-10), 0): not comparable
        return None
    return v if _finite_real(v) else None


def _embed(d: tuple[int, ...], finite: Sequence[int], n: int) -> tuple[int, ...]:
    """A direction over the finite components as a direction in R^n (0 on components at infinity)."""
    out = [0] * n
    for i, di in zip(finite, d):
        out[i] = di
    return tuple(out)


def _analyze(f: sympy.Expr, syms: tuple[sympy.Symbol, ...], point: tuple[sympy.Expr, ...], case_id: str,
             tie: bool) -> OracleResult:
    n = len(syms)
    components = tuple(s.name for s in syms)
    original = f.xreplace({v: _exact_float(v) for v in f.atoms(sympy.Float)})
    f = _prepare(f)
    scale = _scale_for(f, syms, point)
    finite_idx = [i for i, p in enumerate(point) if p.is_finite]
    at_infinity = len(finite_idx) < n
    dirs = (tuple(_embed(d, finite_idx, n) for d in probe_directions(len(finite_idx))) if finite_idx
            else ((0,) * n,))
    probes = {d: _probe(f, syms, point, d, scale) for d in dirs}
    refined = _refine(f, syms, point, scale, probes) if n >= 2 and not at_infinity else None
    sympy_diff, notes = _sympy_diff(original, syms, point)
    if refined is not None:
        notes.append(refined)
    defined = [p for p in probes.values() if p is not None]
    left = right = None
    if n == 1 and not at_infinity:
        lp, rp = probes[(-1,)], probes[(1,)]
        left = lp.gradient[0] if lp is not None else None
        right = rp.gradient[0] if rp is not None else None
    elif n == 1:
        only = probes[(0,)]
        g = only.gradient[0] if only is not None else None
        left, right = (g, None) if point[0] is sympy.oo else (None, g)
    if at_infinity:
        notes.append("a component is infinite: the limits are taken as it goes to infinity (one side only)")

    second = _second_order(case_id, components, probes, scale)

    def result(kind: str, lipschitz: bool | None, **kw: Any) -> OracleResult:
        base = dict(
            case_id=case_id, components=components, kind=kind, derivative=None, left=left, right=right,
            limiting_gradients=(), clarke=None, min_norm=None, midpoint=None, sympy_diff=sympy_diff,
            notes=tuple(notes), tie=tie, second_order=second, lipschitz=lipschitz,
        )
        base.update(kw)
        return OracleResult(**base)

    if not defined:
        notes.append("f is not real-valued near the point on any probe direction")
        return result("undefined", None)
    limiting = tuple(_distinct((p.gradient for p in defined), scale))
    sides = [p.value for p in defined]
    if at_infinity:
        fp = sides[0]
        discontinuous = any(not _eq(v, fp, scale) for v in sides)
    else:
        fp = _point_value(f, syms, point)
        if fp is None:
            notes.append("f is not finite and real at the point itself")
        discontinuous = fp is None or any(not _eq(v, fp, scale) for v in sides)
    if discontinuous:
        if n == 1 and not at_infinity:
            lv = probes[(-1,)].value if probes[(-1,)] is not None else None
            rv = probes[(1,)].value if probes[(1,)] is not None else None
            notes.append(f"jump: f(p-) = {lv}, f(p) = {fp}, f(p+) = {rv}; f is not locally Lipschitz, no Clarke set")
        else:
            notes.append("jump: f is discontinuous at the point; f is not locally Lipschitz, no Clarke set")
        return result("jump", False, limiting_gradients=limiting)
    edge = len(defined) < len(probes)
    infinite = any(c.is_finite is False for g in limiting for c in g)
    if edge:
        missing = [d for d, p in probes.items() if p is None]
        side = {(-1,): "left", (1,): "right"}.get(missing[0], "some") if n == 1 else "some"
        notes.append(f"f is not real-valued on the {side} side: the point is at the edge of the domain; no Clarke set")
    if infinite:
        notes.append("an infinite one-sided derivative: f is not locally Lipschitz at the point, no Clarke set")
    if edge or infinite:
        return result("kink", False if infinite else None, limiting_gradients=limiting)
    if len(limiting) == 1:
        g = limiting[0]
        return result("differentiable", True, derivative=g, limiting_gradients=limiting, clarke=(g,), min_norm=g,
                      midpoint=g)
    if n == 1:
        lo = min(limiting, key=lambda g: _key(g[0]))
        hi = max(limiting, key=lambda g: _key(g[0]))
        clarke = (lo, hi)
        zero = sympy.S.Zero
        mn = (zero,) if _key(lo[0]) <= 0 <= _key(hi[0]) else (lo if _key(lo[0]) > 0 else hi)
    else:
        clarke = tuple(_hull_vertices(list(limiting)))
        mn = _exact_min_norm(list(clarke))
        if _continuum(defined, scale):
            notes.append(
                "the gradient of the active smooth piece has no limit at the point (it depends on the direction "
                "of approach), so the limiting gradients form a continuum; clarke lists the limits along the "
                "probe directions, vertices of an inscribed polytope of the true Clarke set"
            )
            if all(_eq(sum(c * c for c in g), sympy.S.One, scale) for g in limiting):
                notes.append(
                    "every sampled limiting gradient has unit norm, as for the Euclidean norm at the origin, whose "
                    "Clarke set is the closed unit ball"
                )
    mid = tuple(sympy.simplify(sum((v[i] for v in clarke), sympy.S.Zero) / len(clarke)) for i in range(n))
    return result("kink", True, limiting_gradients=limiting, clarke=clarke, min_norm=tuple(mn), midpoint=mid,
                  shape=_local_shape(defined, limiting, scale))


def _continuum(defined: Sequence[_Probe], scale: _Scale) -> bool:
    """True when one active piece, singular at the point, gives different gradient limits along different
    directions (the Euclidean norm at the origin): the limiting gradients are then a continuum."""
    by_piece: dict[sympy.Expr, list[tuple[sympy.Expr, ...]]] = {}
    for p in defined:
        if p.singular:
            by_piece.setdefault(p.piece, []).append(p.gradient)
    return any(len(_distinct(gs, scale)) > 1 for gs in by_piece.values())


def _local_shape(defined: Sequence[_Probe], limiting: Sequence[tuple[sympy.Expr, ...]], scale: _Scale) -> str:
    """``"convex"``, ``"concave"`` or ``"neither"`` (see ``OracleResult.shape``)."""
    convex = concave = True
    for p in defined:
        along = sum((g * d for g, d in zip(p.gradient, p.direction)), sympy.S.Zero)
        others = [sum((g * d for g, d in zip(lg, p.direction)), sympy.S.Zero) for lg in limiting]
        convex &= _eq(along, max(others, key=_key), scale)
        concave &= _eq(along, min(others, key=_key), scale)
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


def _second_order(case_id: str, components: tuple[str, ...], probes: dict[tuple[int, ...], _Probe | None],
                  scale: _Scale) -> dict[str, Any]:
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
    base = {"case": case_id, "components": list(components), "tie": False, "left": _num_json(left),
            "right": _num_json(right), "sympy_diff": [None] * n}
    finite = [g for g in sides if all(c.is_finite is not False for c in g)]
    if len(finite) < len(sides):
        notes.append("H @ 1 is infinite on some side; only the finite sides are kept")
    limiting = _distinct(finite, scale) if finite else []
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
