"""A second derivation of the labels, from numbers alone: the helpers of ``tests/oracles/test_labels_numeric.py``.

:mod:`kinkcheck.oracles.classify` labels a gradient against the sympy oracle's exact limits (:mod:`kinkcheck.oracles`:
piece selection, cones, the exact Clarke set). This module derives the same facts a second way and shares
none of that machinery: only the parser of the case's ``sympy`` field
(:func:`kinkcheck.oracles.translate.to_sympy`), :func:`kinkcheck.oracles.classify.tolerance` (a dtype's tolerance, a
fact with one home) and the convex-hull geometry of :mod:`kinkcheck.language.geometry` (NumPy, no oracle) are reused.

1. The expression is compiled here to an mpmath evaluator (:func:`_compile`): real semantics, so a complex
   or non-finite intermediate (``log`` of a negative, ``0**-1``, ``acos(1 + h)``) means "no real value";
   ``Piecewise`` evaluates only the branch it selects.
2. A probe scale ``s`` (a power of ten below 1, every nonzero point component, every nonzero value and
   constant of the expression at the point, every gap between ``Max``/``Min`` arguments or the two sides of a
   condition, and every distance of a ``floor``/``ceiling``/``Mod`` argument to an integer) puts every step
   below the constants that matter (``Max(x, 1e-300)`` at 0 is not a kink at 0; ``shared/DESIGN.md``).
3. One input (:func:`_one_input`): the one-sided difference quotients ``(f(p + h) - f(p)) / h`` and
   ``(f(p) - f(p - h)) / h`` for ``h = s 1e-8, s 1e-12, ..., s 1e-28``: two last quotients that agree give
   the one-sided derivative; quotients of one sign whose size grows at every step, by increments that do not
   shrink, give ``+-inf`` (``log`` grows that way too); anything else (``x sin(1/x)``) has no limit;
   ``f(p +- h) - f(p)`` that does not shrink is a jump, and then the slope of the piece on each side (the
   derivative at ``p +- h``, in the limit) is what ``left-piece``/``right-piece`` compare with.
4. Several inputs (:func:`_several_inputs`): 64 seeded random unit directions and the ``2n`` coordinate
   directions, each tilted by a seeded random 5% so that it moves every input (a ray along ``e_a`` never
   leaves ``v = 0`` for ``|a v|``). Along each, the directional quotients at those scales decide whether
   ``f`` is real there, continuous, and has a finite directional derivative; the gradient (forward differences,
   step ``t 1e-14``) at ``p + t d`` for ``t = s 1e-10`` and ``s 1e-14`` gives the limiting gradient along ``d``
   when the two agree. Distinct limiting gradients are clustered; their convex hull is the Clarke set.
   More than :data:`CONTINUUM` distinct ones is a continuum (the norm at the origin: every direction its own
   gradient); the sampled hull is then inscribed in the true set, so a value is judged against it only where
   the sampling cannot matter (see :class:`Field`). Bisection between directions with different gradients,
   up to the boundary of a region, finds gradients that grow without bound there (``sqrt(Max(q, 0))`` for a
   quadratic ``q``): ``f`` is then not locally Lipschitz.

The label rules (:func:`numeric_labels`) are the ones the :mod:`kinkcheck.oracles.classify` docstring states, written
again here from that text, over these numbers. The tie labels ``first``/``last``/``one-index`` are not derived:
which tied input is earlier is structure, not a number of the field; the test checks what numbers can say
about them (:meth:`Field.is_limiting`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import mpmath
import numpy as np
import sympy

from kinkcheck.oracles.classify import tolerance
from kinkcheck.language.geometry import hull_distance, min_norm_point
from kinkcheck.oracles.translate import to_sympy

__all__ = ["CONTINUUM", "TIE_LABELS", "Field", "Uncovered", "derive", "flat_value", "numeric_labels"]

#: More distinct limiting gradients than this (of 64 + 2n directions) is a continuum, not a finite set of pieces.
CONTINUUM = 24
#: Random directions per case (seeded); the tilted coordinate directions come on top.
N_RANDOM = 64
#: Decimal exponents of the one-sided steps ``h = s 10**-e`` and of the gradient distances ``t = s 10**-e``.
STEPS = (8, 12, 16, 20, 24, 28)
GRAD_T = (10, 14)
#: Forward-difference step of a gradient at ``q``, relative to the distance ``t`` of ``q`` from the point.
ETA = 14
#: Two quotients (or gradients) at consecutive scales that agree this closely (relative) have converged.
CONVERGED = 1e-11
#: Gradients closer than this (absolute plus relative, max norm) are one limiting gradient.
SAME_GRADIENT = 1e-8

# --------------------------------------------------------------------------- the field as mpmath code


class NotReal(Exception):
    """The expression has no finite real value at this point."""


class Unsupported(Exception):
    """The expression holds something this evaluator does not compute."""


def _real(v: Any) -> mpmath.mpf:
    if isinstance(v, mpmath.mpc):
        if v.imag != 0:
            raise NotReal
        v = v.real
    if not isinstance(v, mpmath.mpf):
        v = mpmath.mpf(v)
    if not mpmath.isfinite(v):
        raise NotReal
    return v


def _power(b: mpmath.mpf, e: mpmath.mpf) -> mpmath.mpf:
    if b == 0:
        if e > 0:
            return mpmath.mpf(0)
        if e == 0:
            return mpmath.mpf(1)
        raise NotReal  # 0**-1 = zoo
    if b < 0 and e != int(e):
        raise NotReal  # sympy's power of a negative real to a non-integer is the principal complex root
    return _real(mpmath.power(b, e))


_UNARY: dict[type, Callable[[Any], Any]] = {
    sympy.exp: mpmath.exp, sympy.log: mpmath.log, sympy.sin: mpmath.sin, sympy.cos: mpmath.cos,
    sympy.tan: mpmath.tan, sympy.asin: mpmath.asin, sympy.acos: mpmath.acos, sympy.atan: mpmath.atan,
    sympy.sinh: mpmath.sinh, sympy.cosh: mpmath.cosh, sympy.tanh: mpmath.tanh, sympy.asinh: mpmath.asinh,
    sympy.acosh: mpmath.acosh, sympy.atanh: mpmath.atanh, sympy.erf: mpmath.erf, sympy.erfc: mpmath.erfc,
    sympy.sinc: lambda x: mpmath.mpf(1) if x == 0 else mpmath.sin(x) / x,  # sympy's sinc is sin(x)/x
    sympy.floor: mpmath.floor, sympy.ceiling: mpmath.ceil,
    sympy.Abs: abs, sympy.sign: lambda x: mpmath.mpf(mpmath.sign(x)),
    sympy.frac: lambda x: x - mpmath.floor(x),
}

Fn = Callable[[Sequence[mpmath.mpf]], Any]


def _compile(e: sympy.Basic, index: dict[sympy.Symbol, int]) -> Fn:  # noqa: C901 - one branch per node type
    """``e`` as a function of the flat point (a sequence of mpf); raises :class:`NotReal` when evaluated where
    ``e`` has no finite real value, :class:`Unsupported` at compile time for a node it does not know."""
    if isinstance(e, sympy.Symbol):
        i = index[e]
        return lambda x: x[i]
    if e is sympy.true or e is sympy.false:
        b = bool(e)
        return lambda x: b
    if isinstance(e, sympy.Rational):  # Integer included
        p, q = int(e.p), int(e.q)
        return lambda x: mpmath.mpf(p) / q
    if isinstance(e, sympy.Float):
        r = sympy.Rational(e)
        p, q = int(r.p), int(r.q)
        return lambda x: mpmath.mpf(p) / q
    if e is sympy.pi:
        return lambda x: +mpmath.pi
    if e is sympy.E:
        return lambda x: +mpmath.e
    if e.is_Number or isinstance(e, sympy.core.numbers.NaN):  # oo, zoo, nan
        def nonreal(x: Any) -> Any:
            raise NotReal
        return nonreal
    args = [_compile(a, index) for a in e.args] if not isinstance(e, sympy.Piecewise) else []
    if isinstance(e, sympy.Add):
        def add(x: Any) -> Any:
            r = args[0](x)
            for f in args[1:]:
                r = r + f(x)
            return r
        return add
    if isinstance(e, sympy.Mul):
        def mul(x: Any) -> Any:
            r = args[0](x)
            for f in args[1:]:
                r = r * f(x)
            return r
        return mul
    if isinstance(e, sympy.Pow):
        base, ex = args
        if isinstance(e.exp, sympy.Integer):
            n = int(e.exp)

            def ipow(x: Any) -> Any:
                b = base(x)
                if b == 0 and n < 0:
                    raise NotReal
                return b ** n
            return ipow
        return lambda x: _power(base(x), ex(x))
    if isinstance(e, sympy.Max):
        return lambda x: max(f(x) for f in args)
    if isinstance(e, sympy.Min):
        return lambda x: min(f(x) for f in args)
    if isinstance(e, sympy.Heaviside):
        h0 = args[1] if len(args) > 1 else (lambda x: mpmath.mpf(1) / 2)  # sympy's Heaviside(0) = 1/2

        def heaviside(x: Any) -> Any:
            v = args[0](x)
            return mpmath.mpf(1) if v > 0 else mpmath.mpf(0) if v < 0 else h0(x)
        return heaviside
    if isinstance(e, sympy.Piecewise):
        pairs = [(_compile(ec.expr, index), _compile(ec.cond, index)) for ec in e.args]

        def piecewise(x: Any) -> Any:
            for val, cond in pairs:
                if cond(x):
                    return val(x)
            raise NotReal  # no branch: undefined there
        return piecewise
    if isinstance(e, sympy.atan2):
        return lambda x: _real(mpmath.atan2(args[0](x), args[1](x)))
    if isinstance(e, sympy.Mod):
        def mod(x: Any) -> Any:
            a, b = args[0](x), args[1](x)
            if b == 0:
                raise NotReal
            return a - b * mpmath.floor(a / b)
        return mod
    if isinstance(e, sympy.besseli):
        return lambda x: _real(mpmath.besseli(args[0](x), args[1](x)))
    fn = _UNARY.get(type(e))
    if fn is not None and len(args) == 1:
        a0 = args[0]

        def unary(x: Any) -> Any:
            try:
                return _real(fn(a0(x)))
            except (ValueError, ZeroDivisionError):
                raise NotReal from None
        return unary
    rel = {sympy.StrictGreaterThan: lambda a, b: a > b, sympy.GreaterThan: lambda a, b: a >= b,
           sympy.StrictLessThan: lambda a, b: a < b, sympy.LessThan: lambda a, b: a <= b,
           sympy.Equality: lambda a, b: a == b, sympy.Unequality: lambda a, b: a != b}.get(type(e))
    if rel is not None:
        lhs, rhs = args
        return lambda x: rel(lhs(x), rhs(x))
    if isinstance(e, sympy.And):
        return lambda x: all(f(x) for f in args)
    if isinstance(e, sympy.Or):
        return lambda x: any(f(x) for f in args)
    if isinstance(e, sympy.Not):
        return lambda x: not args[0](x)
    raise Unsupported(f"{type(e).__name__} ({e})")


def _gaps(e: sympy.Expr) -> list[sympy.Expr]:
    """Expressions whose nonzero values at the point are distances that a probe step must stay below."""
    out: list[sympy.Expr] = []
    for node in sympy.preorder_traversal(e):
        if isinstance(node, (sympy.Max, sympy.Min)):
            out.extend(a - b for a, b in itertools.combinations(node.args, 2))
        elif isinstance(node, sympy.core.relational.Relational):
            out.append(node.lhs - node.rhs)
        elif isinstance(node, sympy.Mod):
            out.append(node.args[0] / node.args[1])
        elif isinstance(node, sympy.Expr) and not isinstance(node, sympy.Symbol):
            out.append(node)
    return out


def _int_distance(v: mpmath.mpf) -> mpmath.mpf:
    return abs(v - mpmath.nint(v))


# --------------------------------------------------------------------------- what the numbers say about a case


@dataclass(frozen=True)
class Uncovered:
    """A case (or a cell) the numeric derivation cannot judge: ``kind`` is the category, ``detail`` the evidence."""

    kind: str
    detail: str


@dataclass
class Field:
    """What finite differences say about ``f`` at the point, in the terms :mod:`kinkcheck.oracles.classify` reads.

    ``kind`` is ``"differentiable"``, ``"kink"``, ``"jump"`` or ``"undefined"``; ``left``/``right`` (one input)
    are the one-sided derivatives (``+-inf`` allowed, None where that side has no real value); ``left_piece``/
    ``right_piece`` the pieces' slopes at a jump; ``limiting`` the distinct limiting gradients (None where they
    could not be had); ``clarke`` the Clarke set's generators where ``f`` is locally Lipschitz (an interval's
    ends for one input); ``lipschitz`` True, False or None (the edge of the domain with finite slopes).
    For a ``continuum`` the generators are a sample: ``resolution`` bounds how far the true set reaches past
    their hull, and ``min_norm_exact`` says whether the hull's minimum-norm point is the true one (the same for
    two disjoint halves of the sample).
    """

    case_id: str
    components: tuple[str, ...]
    kind: str
    lipschitz: bool | None = None
    derivative: tuple[float, ...] | None = None
    left: float | None = None
    right: float | None = None
    left_piece: float | None = None
    right_piece: float | None = None
    limiting: tuple[tuple[float, ...], ...] | None = None
    clarke: tuple[tuple[float, ...], ...] | None = None
    min_norm: tuple[float, ...] | None = None
    continuum: bool = False
    resolution: float = 0.0
    min_norm_exact: bool = True
    notes: list[str] = field(default_factory=list)
    limiting_samples: tuple[tuple[float, ...], ...] = ()
    gradient_at: Callable[[np.ndarray], np.ndarray | None] | None = field(default=None, repr=False)
    directions: np.ndarray | None = field(default=None, repr=False)
    _limiting_cache: dict[tuple[tuple[float, ...], float], bool] = field(default_factory=dict, repr=False)

    def is_limiting(self, value: Sequence[float], tol: float) -> bool | None:
        """Whether ``value`` is a limiting gradient (within ``tol``, absolute plus relative); None if unknown.

        For a continuum the nearest sampled direction is refined by least squares on the direction
        (:func:`scipy.optimize.least_squares`), so a value on the continuum is found, not only a sampled one.
        """
        if self.limiting is None:
            return None
        key = (tuple(float(c) for c in value), tol)
        if key not in self._limiting_cache:
            self._limiting_cache[key] = self._is_limiting(np.asarray(value, dtype=float), tol)
        return self._limiting_cache[key]

    def _is_limiting(self, v: np.ndarray, tol: float) -> bool:
        if any(_equal(v, g, tol) for g in self.limiting or ()):
            return True
        if not self.continuum or self.gradient_at is None or self.directions is None:
            return False
        if self.off_span(v) > 10 * tol * max(1.0, float(np.max(np.abs(v)))):
            return False  # every limiting gradient lies in the affine hull of the sample
        from scipy.optimize import least_squares

        grads = np.asarray(self.limiting_samples)
        start = self.directions[int(np.argmin(np.linalg.norm(grads - v, axis=1)))]

        def residual(d: np.ndarray) -> np.ndarray:
            g = self.gradient_at(d)
            return np.full(v.shape, 1e6) if g is None else g - v

        fit = least_squares(residual, start, xtol=1e-15, ftol=1e-15, gtol=1e-15, max_nfev=60)
        g = self.gradient_at(fit.x)
        return g is not None and _equal(v, g, tol)

    def off_span(self, value: Sequence[float]) -> float:
        """Distance from ``value`` to the affine hull of the sampled limiting gradients, which is the affine hull
        of the whole set once the sample spans it (a circle's plane): the sampling resolution acts only inside."""
        s = np.asarray(self.limiting_samples)
        base = s[0]
        u, sv, vt = np.linalg.svd(s - base, full_matrices=False)
        basis = vt[sv > 1e-9 * max(1.0, float(sv[0]) if sv.size else 1.0)]
        r = np.asarray(value, dtype=float) - base
        return float(np.linalg.norm(r - basis.T @ (basis @ r)))


def _equal(a: Sequence[float], b: Sequence[float], tol: float) -> bool:
    return len(a) == len(b) and all(_close(float(x), float(y), tol) for x, y in zip(a, b))


def _close(a: float, b: float, tol: float) -> bool:
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= tol + tol * abs(b)


class _Probe:
    """The compiled field, its point and probe scale, at a working precision."""

    def __init__(self, case: Any) -> None:
        expr, syms, point = to_sympy(case)
        self.components = tuple(str(s) for s in syms)
        self.n = len(syms)
        if any(not (p.is_finite and p.is_real) for p in point):
            raise _Skip(Uncovered("point not finite", f"point {tuple(str(p) for p in point)}: the numeric "
                                  "probes need a finite point (a limit at infinity is the oracle's alone)"))
        try:
            self.f = _compile(expr, {s: i for i, s in enumerate(syms)})
            gaps = [_compile(g, {s: i for i, s in enumerate(syms)}) for g in _gaps(expr)]
        except Unsupported as err:
            raise _Skip(Uncovered("not evaluable", f"no numeric evaluation of {err}")) from None
        with mpmath.workdps(60):
            p = [mpmath.mpf(int(v.p)) / int(v.q) for v in point]
            mags = [abs(c) for c in p if c != 0]
            for g in gaps:
                try:
                    v = _real(g(p))
                except (NotReal, ZeroDivisionError, ValueError, TypeError):
                    continue
                mags.extend(m for m in (abs(v), _int_distance(v)) if m != 0)
            smallest = min([mpmath.mpf(1), *mags])
        self.k = max(0, int(math.ceil(-float(mpmath.log10(smallest)))) + 1) if smallest < 1 else 1
        self.dps = 60 + self.k
        self.point = point

    def at(self) -> list[mpmath.mpf]:
        return [mpmath.mpf(int(v.p)) / int(v.q) for v in self.point]

    def value(self, x: Sequence[mpmath.mpf]) -> mpmath.mpf | None:
        try:
            return _real(self.f(x))
        except (NotReal, ZeroDivisionError, ValueError, OverflowError):
            return None

    def scale(self, e: int) -> mpmath.mpf:
        return mpmath.mpf(10) ** -(e + self.k)

    def gradient(self, q: Sequence[mpmath.mpf], eta: mpmath.mpf) -> list[mpmath.mpf] | None:
        """Forward differences at ``q``: with ``eta`` 1e-14 of the distance to the point, their error (``eta``
        times the curvature, at most about ``|g| / t`` next to a kink) is 1e-14 of the gradient."""
        fq = self.value(q)
        if fq is None:
            return None
        g = []
        for i in range(self.n):
            up = list(q)
            up[i] += eta
            a = self.value(up)
            if a is None:
                return None
            g.append((a - fq) / eta)
        return g


class _Skip(Exception):
    def __init__(self, why: Uncovered) -> None:
        super().__init__(why.detail)
        self.why = why


def _limit(seq: Sequence[Any]) -> tuple[str, Any]:
    """("finite", v), ("inf", +-inf) or ("none", None) for quotients at shrinking steps (None: no real value)."""
    if any(q is None for q in seq):
        return "none", None
    a, b = seq[-2], seq[-1]
    if abs(b - a) <= CONVERGED * (1 + abs(b)):
        return "finite", b
    signs = {mpmath.sign(q) for q in seq[1:]}
    grows = all(abs(seq[i + 1]) > abs(seq[i]) for i in range(1, len(seq) - 1))
    steady = all(abs(seq[i + 2] - seq[i + 1]) >= 0.5 * abs(seq[i + 1] - seq[i]) for i in range(1, len(seq) - 2))
    if len(signs) == 1 and 0 not in signs and grows and steady:
        return "inf", math.copysign(math.inf, float(b))
    return "none", None


def _ray(pr: _Probe, p: list[mpmath.mpf], fp: mpmath.mpf, d: Sequence[Any]) -> dict[str, Any]:
    """Along ``p + h d``: real or not, continuous or a jump, the directional derivative's limit."""
    vals = []
    for e in STEPS:
        h = pr.scale(e)
        vals.append(pr.value([pi + h * di for pi, di in zip(p, d)]))
    if vals[-1] is None and vals[-2] is None:
        return {"real": False}
    if any(v is None for v in vals):
        return {"real": None}
    deltas = [v - fp for v in vals]
    noise = mpmath.mpf(10) ** (15 - mpmath.mp.dps) * (1 + abs(fp))  # rounding of inexact constants (1e-6)
    jump = abs(deltas[0]) > noise and abs(deltas[-1]) > 0.5 * abs(deltas[0])
    kind, lim = _limit([dv / pr.scale(e) for dv, e in zip(deltas, STEPS)])
    return {"real": True, "jump": jump, "kind": kind, "limit": lim}


def _one_input(pr: _Probe, case_id: str) -> Field:
    p = pr.at()
    fp = pr.value(p)
    if fp is None:
        return Field(case_id, pr.components, "undefined", notes=["f(p) has no finite real value"])
    sides = {s: _ray(pr, p, fp, [mpmath.mpf(s)]) for s in (-1, 1)}
    if not any(r["real"] for r in sides.values()):
        if all(r["real"] is False for r in sides.values()):
            return Field(case_id, pr.components, "undefined", notes=["f has no real value on either side"])
    for s, r in sides.items():
        if r["real"] is None:
            raise _Skip(Uncovered("no limit", f"side {s:+d}: f is real at some steps and not at others"))
        if r["real"] and r["kind"] == "none":
            raise _Skip(Uncovered("no limit", f"side {s:+d}: the difference quotients neither settle nor diverge"))
    # the one-sided derivative from the left is the limit of (f(p) - f(p - h)) / h = -(directional quotient)
    left = None if not sides[-1]["real"] else 0.0 - float(sides[-1]["limit"])
    right = None if not sides[1]["real"] else float(sides[1]["limit"])
    jump = any(r["real"] and r["jump"] for r in sides.values())
    out = Field(case_id, pr.components, "kink", left=left, right=right)
    if jump:
        out.kind, out.lipschitz = "jump", False
        for s in (-1, 1):
            if not sides[s]["real"]:
                continue
            slopes = []
            for e in STEPS[1:]:
                h = pr.scale(e)
                g = pr.gradient([p[0] + s * h], h * mpmath.mpf(10) ** -ETA)
                slopes.append(None if g is None else g[0])
            kind, lim = _limit(slopes)
            if kind == "none":
                raise _Skip(Uncovered("no limit", f"jump: the slope of the piece on side {s:+d} has no limit"))
            setattr(out, "left_piece" if s < 0 else "right_piece", float(lim))
        return out
    finite = [v for v in (left, right) if v is not None]
    if any(math.isinf(v) for v in finite):
        out.lipschitz = False
        return out
    if left is None or right is None:  # the edge of the domain, finite slope
        out.lipschitz = None
        return out
    if _close(left, right, 1e-12):
        return Field(case_id, pr.components, "differentiable", lipschitz=True, derivative=(right,), left=left,
                     right=right, limiting=((right,),), clarke=((right,),), min_norm=(right,))
    lo, hi = min(left, right), max(left, right)
    out.lipschitz = True
    out.limiting = ((left,), (right,))
    out.clarke = ((lo,), (hi,))
    out.min_norm = (0.0 if lo <= 0 <= hi else (lo if abs(lo) < abs(hi) else hi),)
    return out


def _directions(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    rand = rng.standard_normal((N_RANDOM, n))
    axes = np.vstack([np.eye(n), -np.eye(n)]) + 0.05 * rng.standard_normal((2 * n, n))
    d = np.vstack([rand, axes])
    return d / np.linalg.norm(d, axis=1, keepdims=True)


def _cluster(grads: Sequence[np.ndarray]) -> tuple[list[np.ndarray], list[int]]:
    reps: list[np.ndarray] = []
    which = []
    for g in grads:
        for i, r in enumerate(reps):
            if np.all(np.abs(g - r) <= SAME_GRADIENT * (1 + np.abs(r))):
                which.append(i)
                break
        else:
            reps.append(g)
            which.append(len(reps) - 1)
    return reps, which


def _several_inputs(pr: _Probe, case_id: str, tie: bool) -> Field:
    p = pr.at()
    fp = pr.value(p)
    if fp is None:
        return Field(case_id, pr.components, "undefined", notes=["f(p) has no finite real value"])
    dirs = _directions(pr.n, seed=20240401)
    rays = [_ray(pr, p, fp, [mpmath.mpf(float(c)) for c in d]) for d in dirs]
    real = [r["real"] for r in rays]
    if not any(real):
        if all(r is False for r in real):
            return Field(case_id, pr.components, "undefined", notes=["f has no real value along any direction"])
    if any(r is None for r in real):
        raise _Skip(Uncovered("no limit", "along some direction f is real at some steps and not at others"))
    if any(r["real"] and r["kind"] == "none" for r in rays):
        raise _Skip(Uncovered("no limit", "along some direction the difference quotients neither settle nor diverge"))
    edge = not all(real)
    jump = any(r["real"] and r["jump"] for r in rays)
    steep = any(r["real"] and r["kind"] == "inf" for r in rays)
    out = Field(case_id, pr.components, "jump" if jump else "kink")
    if edge:
        out.notes.append(f"f is not real along {real.count(False)} of {len(real)} directions: edge of the domain")
    if jump or steep:
        out.lipschitz = False
        out.notes.append("a jump" if jump else "an infinite directional derivative")
        if not tie:
            return out  # labels need no limiting gradients here: no Clarke set, no tie labels

    def grad(d: Sequence[float], e: int) -> list[mpmath.mpf] | None:
        t = pr.scale(e)
        q = [pi + t * mpmath.mpf(float(c)) for pi, c in zip(p, d)]
        return pr.gradient(q, t * mpmath.mpf(10) ** -ETA)

    limits: list[np.ndarray] = []
    used: list[np.ndarray] = []
    unbounded = False
    for d, r in zip(dirs, rays):
        if not r["real"]:
            continue
        g1, g2 = grad(d, GRAD_T[0]), grad(d, GRAD_T[1])
        if g1 is None or g2 is None:
            raise _Skip(Uncovered("no limit", "the gradient next to the point has no real value along a direction"))
        if all(abs(b - a) <= 1e3 * CONVERGED * (1 + abs(b)) for a, b in zip(g1, g2)):
            limits.append(np.array([float(c) for c in g2]))
            used.append(d)
        elif max(abs(c) for c in g2) > 100 * max(abs(c) for c in g1):
            unbounded = True  # grows like 1 / t along d
        else:
            if out.lipschitz is False:
                out.limiting = None
                return out
            raise _Skip(Uncovered("no limit", "the gradient along a direction does not settle as t shrinks"))
    if unbounded:
        out.lipschitz = False
        out.notes.append("a gradient that grows without bound along a direction")
        out.limiting = None
        return out
    reps, which = _cluster(limits)
    out.limiting = tuple(tuple(float(c) for c in g) for g in reps)
    out.limiting_samples = tuple(tuple(float(c) for c in g) for g in limits)
    out.continuum = len(reps) > CONTINUUM
    out.directions = np.asarray(used)
    out.gradient_at = lambda d: _float_grad(pr, grad, d)
    if out.lipschitz is not False and len(reps) > 1 and _blows_up(pr, grad, np.asarray(used), which, reps):
        out.lipschitz = False
        out.notes.append("gradients grow without bound next to the boundary between two regions")
    if out.lipschitz is False:
        return out
    if edge:
        out.lipschitz = None
        return out
    out.lipschitz = True
    if len(reps) == 1:
        out.kind = "differentiable"
        out.derivative = out.limiting[0]
        out.clarke = out.limiting
        out.min_norm = out.limiting[0]
        return out
    out.clarke = out.limiting
    out.min_norm = tuple(float(c) for c in min_norm_point(np.asarray(reps))[0])
    if out.continuum:
        a, b = np.asarray(limits[0::2]), np.asarray(limits[1::2])
        out.resolution = max(max(hull_distance(x, a) for x in b), max(hull_distance(x, b) for x in a))
        ma, mb = min_norm_point(a)[0], min_norm_point(b)[0]
        mall = np.asarray(out.min_norm)
        out.min_norm_exact = bool(np.max(np.abs(ma - mall)) <= 1e-10 and np.max(np.abs(mb - mall)) <= 1e-10)
    return out


def _float_grad(pr: _Probe, grad: Callable[..., Any], d: np.ndarray) -> np.ndarray | None:
    with mpmath.workdps(pr.dps):
        g = grad(d / np.linalg.norm(d), GRAD_T[1])
    return None if g is None else np.array([float(c) for c in g])


def _blows_up(pr: _Probe, grad: Callable[..., Any], dirs: np.ndarray, which: list[int],
              reps: list[np.ndarray]) -> bool:
    """Bisect between close directions whose gradients differ, keeping the low end in the first one's region;
    True when the gradient at the high end grows without bound as the boundary is approached."""
    sizes = np.bincount(which)
    pairs = []
    for i in range(len(dirs)):
        if sizes[which[i]] < 2:  # a region of constant gradient only: inside a continuum every gradient differs
            continue
        others = [j for j in range(len(dirs)) if which[j] != which[i]]
        if others:
            j = max(others, key=lambda j: float(dirs[i] @ dirs[j]))
            pairs.append((float(dirs[i] @ dirs[j]), i, j))
    pairs.sort(reverse=True)
    for _, i, j in pairs[:8]:
        g_lo = reps[which[i]]
        bound = 1 + float(np.max(np.abs(g_lo))) + float(np.max(np.abs(reps[which[j]])))
        lo, hi = 0.0, 1.0
        norms = []
        for _step in range(30):
            mid = (lo + hi) / 2
            d = (1 - mid) * dirs[i] + mid * dirs[j]
            g = grad(d / np.linalg.norm(d), GRAD_T[1])
            if g is None:
                break
            gv = np.array([float(c) for c in g])
            if np.all(np.abs(gv - g_lo) <= SAME_GRADIENT * (1 + np.abs(g_lo))):
                lo = mid
            else:
                hi = mid
                norms.append(float(np.max(np.abs(gv))))
                if len(norms) == 12 and norms[-1] <= 10 * bound:
                    break  # still bounded a thousandth of the arc from the boundary: a region of a Lipschitz f
        if len(norms) >= 16 and norms[-1] > 100 * bound and norms[-1] > 4 * norms[len(norms) // 2]:
            return True
    return False


@lru_cache(maxsize=None)
def _derive(case_id: str, sympy_text: str, at_items: tuple[tuple[str, Any], ...], tie: bool) -> Field | Uncovered:
    case = _CaseText(case_id, sympy_text, {k: _unfreeze(v) for k, v in at_items})
    try:
        pr = _Probe(case)
        with mpmath.workdps(pr.dps):
            return _one_input(pr, case_id) if pr.n == 1 else _several_inputs(pr, case_id, tie)
    except _Skip as skip:
        return skip.why


@dataclass(frozen=True)
class _CaseText:
    """What :func:`kinkcheck.oracles.translate.to_sympy` reads of a case: its id, field and point."""

    id: str
    sympy: str
    at: dict[str, Any]


def _freeze(v: Any) -> Any:
    return tuple(_freeze(x) for x in v) if isinstance(v, list) else v


def _unfreeze(v: Any) -> Any:
    return [_unfreeze(x) for x in v] if isinstance(v, tuple) else v


def derive(case_id: str, sympy_text: str, at: dict[str, Any], tie: bool) -> Field | Uncovered:
    """The numeric facts of a case (cached per case), or why it cannot be derived.

    Parameters
    ----------
    case_id, sympy_text, at, tie
        The case as the report's index holds it (``kinkcheck.index``): id, ``sympy`` field, point, tie flag.
    """
    return _derive(case_id, sympy_text, tuple((k, _freeze(v)) for k, v in at.items()), tie)


def flat_value(value: dict[str, Any], at: dict[str, Any]) -> list[float]:
    """A report cell's value (input name -> gradient, nested lists, ``"nan"``/``"inf"`` strings) flattened in
    the case's input order, row-major: the oracle's component order."""

    def flat(v: Any) -> list[float]:
        return [x for e in v for x in flat(e)] if isinstance(v, list) else [float(v)]

    return [x for name in at for x in flat(value[name])]


# --------------------------------------------------------------------------- the label rules, from the docstring

#: The labels this derivation compares; the tie labels are checked separately (see the module docstring).
TIE_LABELS = frozenset({"first", "last", "one-index"})


def numeric_labels(value: Sequence[float], fd: Field, dtype: str, *, tie: bool,
                   tie_labelled: bool) -> tuple[set[str], Uncovered | None]:
    """The labels of ``value`` (flat, component order) by the :mod:`kinkcheck.oracles.classify` rules over ``fd``,
    without ``first``/``last``/``one-index``; ``tie_labelled`` says whether the cell carries one of those (they
    keep ``outside-clarke``/``not-lipschitz`` away). The second item says why a label could not be decided."""
    tol = tolerance(dtype)
    v = [float(c) for c in value]
    if any(math.isnan(c) for c in v):
        return {"nan"}, None
    labels: set[str] = set()
    finite = all(math.isfinite(c) for c in v)
    labels.update("+inf" for c in v if c == math.inf)
    labels.update("-inf" for c in v if c == -math.inf)
    scalar = len(v) == 1
    if scalar:
        for name in ("left", "right", "left_piece", "right_piece"):
            target = getattr(fd, name)
            if target is not None and _close(v[0], target, tol):
                labels.add(name.replace("_", "-"))
    if not finite:
        return labels, None
    if fd.kind == "undefined":
        return {"outside-domain"}, None
    if fd.kind == "differentiable":
        return ({"derivative"} if _equal(v, fd.derivative or (), tol) else {"outside-clarke"}), None
    if scalar and fd.left is not None and fd.right is not None:
        lo, hi = fd.left, fd.right
        if math.isfinite(lo) and math.isfinite(hi) and not _close(lo, hi, tol) and _close(v[0], (lo + hi) / 2, tol):
            labels.add("mean")
    undecided = None
    if tie and fd.limiting and not fd.continuum:
        mean = [sum(g[i] for g in fd.limiting) / len(fd.limiting) for i in range(len(v))]
        if _equal(v, mean, tol):
            labels.add("split-even")
    if fd.clarke is not None:
        scale = max(1.0, max(abs(c) for g in fd.clarke for c in g), max(abs(c) for c in v))
        dist = hull_distance(v, fd.clarke)
        inside: bool | None = dist <= tol * scale
        if fd.continuum and not inside:
            if fd.is_limiting(v, tol):
                inside = True
            elif fd.off_span(v) <= 3 * tol * scale and dist <= 3 * fd.resolution + tol * scale:
                inside = None
                undecided = Uncovered("continuum boundary", f"distance {dist:.3g} to the sampled Clarke set is within "
                                      f"its sampling resolution {fd.resolution:.3g}")
        if inside:
            labels.add("in-clarke")
        if fd.min_norm is not None:
            if _equal(v, fd.min_norm, tol):
                if fd.continuum and not fd.min_norm_exact:
                    undecided = Uncovered("continuum boundary", "the sampled minimum-norm point depends on the sample")
                labels.add("min-norm")
            elif fd.continuum and not fd.min_norm_exact and float(np.max(np.abs(np.subtract(v, fd.min_norm)))) \
                    <= 3 * fd.resolution:
                undecided = Uncovered("continuum boundary", "value within sampling resolution of the min-norm point")
    kept = {"left", "right", "left-piece", "right-piece", "mean", "split-even", "min-norm", "in-clarke"}
    if not labels & kept and not tie_labelled:
        labels.add("not-lipschitz" if (fd.lipschitz is False or fd.kind == "jump") else "outside-clarke")
    return labels, undecided
