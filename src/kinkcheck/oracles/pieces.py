"""The sympy oracle's probes: which analytic piece is active along a probe curve, and the limits of its
value, gradient and second-order extras there.

:func:`_scale_for` picks the probe scale (:class:`_Scale`), :func:`probe_directions` the fixed directions;
along each direction ``d`` a :class:`_Curve` ``p + t d + t**2 w`` decides every kinked function's branch
exactly (:func:`_select`), and :func:`_probe` takes the selected piece's limits at ``t -> 0+``
(:func:`_quick_limit` by continuity, else :func:`sympy.limit`). See :mod:`kinkcheck.oracles.symbolic` for the
method as a whole.

Imports only :mod:`kinkcheck.oracles.translate` (``translate <- pieces <- cones <- clarke <- symbolic``);
underscored names are internal to the package.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import sympy

from kinkcheck.oracles.translate import _SYMPY_FAILURES

__all__ = ["OracleError", "probe_directions"]


_T_EXPONENTS = (30, 40)  # probe scales t = s * 10**-30 and s * 10**-40 (s: see _scale_for)
_T = sympy.Symbol("t", positive=True)


class OracleError(RuntimeError):
    """The oracle cannot decide something (a condition whose sign changes between probe scales, a limit
    sympy leaves unevaluated); ``str(err)`` is the reason. Internal: :func:`analyze_expression` turns it
    into a ``"not-judged"`` result."""


class _OutsideDomain(Exception):
    """Raised internally when a piece or condition is not real-valued along a probe curve."""



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


def axis_jump(f: sympy.Expr, syms: Sequence[sympy.Symbol], point: Sequence[sympy.Expr], fp: sympy.Expr,
              scale: _Scale) -> tuple[int, int, sympy.Expr] | None:
    """A jump along a coordinate axis that the probe curves miss: ``(i, s, v)`` when ``f(p + s t e_i)`` is the same
    real number ``v != f(p)`` at both probe scales (a constant offset, not a slow approach), else None.

    The probe curves bend off the axes (``p + t d + t**2 w``) so that they cross no tie; a function whose other
    value lives on an axis alone escapes them: ``x ** y`` at (0, 0) is ``t ** (t + ...) -> 1`` on a curve but
    ``0 ** t = 0`` on the y-axis, while ``0 ** 0 = 1``. Points outside the domain (not real) on an axis are
    skipped; so is an infinite point. Two samples cannot tell a constant offset from an approach slower than
    any power (``1 / log(1/t) ** 1e-13``), and a jump along another line (``(x - y) ** (x + y)`` on x = y) is not
    looked for: both are limits of this check."""
    if len(syms) < 2 or not all(p.is_finite for p in point):
        return None
    tol = sympy.Float(10) ** -12
    for i, (s_i, p_i) in enumerate(zip(syms, point)):
        for s in (1, -1):
            values = []
            for t in scale.ts:
                sub = {sym: (p + s * t if j == i else p) for j, (sym, p) in enumerate(zip(syms, point))}
                try:
                    v = sympy.N(f.xreplace(sub), 30)
                except (TypeError, ValueError, ZeroDivisionError):
                    break
                if not _finite_real(v):
                    break
                values.append(v)
            else:
                far = [abs(v - fp) > tol * max(1, abs(fp)) for v in values]
                if all(far) and abs(values[0] - values[-1]) <= tol * max(1, abs(values[0])):
                    return i, s, sympy.nsimplify(values[-1], rational=False, tolerance=1e-20)
    return None


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
