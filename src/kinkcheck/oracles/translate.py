"""The sympy oracle's input side: a case's ``sympy`` field as an exact sympy expression, and that expression
prepared for piece selection.

:func:`to_sympy` parses the field with :mod:`kinkcheck.language.expr`, resolves its names in :func:`sympy_namespace`
(sympy's functions plus :func:`kth_smallest`, :func:`xlogy` … defined here) and evaluates it over real
symbols at the exact point (float literals from their decimal text). :func:`_prepare` then rewrites what
:mod:`kinkcheck.oracles.pieces` cannot select into what it can: binary floats into exact decimals, ``atan2``
into ``atan`` pieces, ``Mod``/``frac`` into ``floor`` forms and ``0**e`` into a ``Piecewise``.

The lowest of the oracle's modules (``translate <- pieces <- cones <- clarke <- symbolic``); the public names
are re-exported by :mod:`kinkcheck.oracles.symbolic`, and underscored names are internal to the package.
"""

from __future__ import annotations

import io
import itertools
import math
import tokenize
from collections.abc import Iterable, Iterator
from typing import Any

import sympy

from kinkcheck import catalog as cat
from kinkcheck.language import expr as ex
from kinkcheck.catalog import Case

__all__ = ["kth_smallest", "sympy_namespace", "to_sympy", "xlog1py", "xlogy"]


#: What sympy raises when it cannot do something (a limit, a simplification, a comparison).
_SYMPY_FAILURES = (ArithmeticError, ValueError, TypeError, NotImplementedError, RecursionError, AttributeError,
                   IndexError, KeyError, sympy.PoleError, sympy.polys.polyerrors.BasePolynomialError)


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
    :func:`kinkcheck.language.expr.resolve_names`.

    ``Max``/``Min`` accept (nested) lists and flatten them (``Max(v)``, ``Max(m)``); ``kth_smallest(v, k)``
    is :func:`kth_smallest`; ``xlogy``, ``xlog1py``, ``log1p``, ``expm1``, ``log2``, ``log10``, ``sigmoid``,
    ``trunc`` and ``frac`` are the functions of this module of those names. ``sinc`` is sympy's
    *unnormalized* ``sin(x)/x`` (torch's and NumPy's ``sinc(x)`` is ``sinc(pi*x)`` here); ``atan2(y, x)``
    is sympy's, with ``atan2(0, 0)`` taken as 0 (IEEE 754, C99) when the oracle evaluates it. ``besseli(nu, x)``
    is the modified Bessel function of the first kind (``exp(-Abs(x)) * besseli(0, x)`` is ``i0e``). ``pi`` and
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
        "besseli": sympy.besseli,
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


def _exact_literal(v: float, text: str | None) -> sympy.Expr:
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

    ``texts`` yields the literals' source text in :func:`kinkcheck.language.expr.walk` order, which is source order.
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
    kinkcheck.language.expr.ExprError
        When the field does not parse, names something outside the namespace, or does not evaluate.
    """
    parsed, tree = _exact_tree(case)
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


def _exact_tree(case: Any) -> tuple[ex.Node, ex.Node]:
    """The case's ``sympy`` field parsed (over ``case.at``), and the same tree with every numeric literal an exact
    sympy number from its source text (:func:`_exact_consts`); ``case`` needs only ``sympy`` and ``at``."""
    parsed = ex.parse(case.sympy, case.at, cat.SYMPY_NAMES)
    texts = _literal_texts(case.sympy)
    n_consts = sum(1 for n in ex.walk(parsed) if isinstance(n, ex.Const) and not isinstance(n.value, bool))
    # Pair literal texts with Const nodes only when the counts agree; otherwise use each float's repr.
    return parsed, _exact_consts(parsed, iter(texts if len(texts) == n_consts else []))


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
