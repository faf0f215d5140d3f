"""The sympy oracle against checks that share none of its machinery.

(a) One-sided derivatives from high-precision finite differences: the expression is lambdified for mpmath
(50 significant digits plus the decimal exponent of its smallest constant) and differenced with steps
``h = s 1e-20`` and ``s 1e-25`` (``s``: a power of ten below every nonzero constant, point and gap, so that
``Max(x, 1e-300)`` is differenced far below 1e-300). Two quotients that agree give a finite one-sided value;
two of one sign that grow as ``h`` shrinks give an infinite one. "Next to" the kink the quotient is taken on
``[p + h, p + 2h]`` (the limit of the derivative, what the oracle's ``left``/``right`` are); "at" the kink on
``[p, p + h]`` (the one-sided derivative; it grows like ``1/h`` at a jump). Every one-input catalog case and
public cases Q3-Q7 in one-input form are checked, and the oracle at a point next to each kink.

(b) Expressions whose Clarke set is known by construction (hypothesis, derandomized): a maximum or minimum of
affine functions that all tie at a rational point (Clarke set ``conv{a_i}``, Clarke 1983, Prop. 2.3.12), the
absolute value of an affine function that vanishes there (``conv{a, -a}``), sums of one-input kinks in
separate inputs (a box: the product of the intervals), positive scalings, and nested ``Max``/``Min``/``Abs``/
sums of one-input affine functions through the point, whose one-sided slopes follow from the directional
derivative ``f'(p; d)`` computed on the tree. The hull's vertices and its minimum-norm element are computed
here with NumPy (barycentric solves over small subsets), not with :mod:`kinkcheck.language.geometry`.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
import sympy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kinkcheck.catalog import load_catalog
from kinkcheck.oracles.symbolic import analyze, analyze_expression, sympy_namespace, to_sympy

NS = sympy_namespace()
X = sympy.Symbol("x", real=True)
CATALOG = load_catalog()
ONE_INPUT = [c for c in CATALOG if len(c.at) == 1 and not isinstance(next(iter(c.at.values())), list)]

# --------------------------------------------------------------------------- (a) finite differences


def _exact(v: sympy.Expr) -> Fraction:
    r = sympy.Rational(v)  # a binary Float converts exactly
    return Fraction(int(r.p), int(r.q))


def _scale_exponent(f: sympy.Expr, p: Fraction) -> int:
    """``k`` with ``10**-k`` below 1, ``|p|``, every nonzero constant of ``f`` and its distance to ``|p|``."""
    mags = [abs(p)] if p else []
    for a in f.atoms(sympy.Number):
        if a.is_finite and a.is_real and a != 0:
            c = abs(_exact(a))
            mags.append(c)
            if p and abs(p) != c:
                mags.append(abs(abs(p) - c))
    m = min([Fraction(1), *mags])
    return max(0, math.ceil(-math.log10(m)) + 1) if m < 1 else 0


class Differences:
    """Finite-difference quotients of a one-input expression near ``p``, in mpmath."""

    def __init__(self, f: sympy.Expr, p: Fraction) -> None:
        self.k = _scale_exponent(f, p)
        self.dps = 50 + self.k
        self.g = sympy.lambdify(X, f, modules="mpmath")
        with mpmath.workdps(self.dps):
            self.p = mpmath.mpf(p.numerator) / p.denominator

    def value(self, t: mpmath.mpf) -> mpmath.mpf | None:
        """f(t), or None where f is not real (complex, an error, not finite)."""
        try:
            v = mpmath.mpmathify(self.g(t))
        except (TypeError, ValueError, ZeroDivisionError, OverflowError):
            return None
        if isinstance(v, mpmath.mpc):
            if v.imag != 0:
                return None
            v = v.real
        return v if mpmath.isfinite(v) else None

    def quotients(self, d: int, where: str) -> list[mpmath.mpf | None]:
        """Quotients for ``h = s 1e-20`` and ``s 1e-25``: ``where`` = "next" on [p + dh, p + 2dh], "at" on [p, p + dh]."""
        out = []
        with mpmath.workdps(self.dps):
            for e in (20, 25):
                h = mpmath.mpf(10) ** -(e + self.k)
                lo, hi = (self.p + d * h, self.p + 2 * d * h) if where == "next" else (self.p, self.p + d * h)
                a, b = self.value(hi), self.value(lo)
                out.append(None if a is None or b is None else (a - b) / (d * h))
        return out


def verdict(q: list[mpmath.mpf | None]) -> tuple[str, float]:
    """("undefined", nan), ("finite", value), ("inf", +-inf), or ("inconclusive", nan) for two quotients."""
    q1, q2 = q
    if q1 is None or q2 is None:
        return "undefined", math.nan
    if abs(q1 - q2) <= 1e-8 * max(1, abs(q2)):
        return "finite", float(q2)
    if q1 * q2 > 0 and abs(q2) > 1.1 * abs(q1):
        return "inf", math.copysign(math.inf, float(q2))
    return "inconclusive", math.nan


def _agrees(side: sympy.Expr | None, got: tuple[str, float]) -> bool:
    kind, v = got
    if kind == "undefined":
        return side is None
    if side is None or kind == "inconclusive":
        return False
    s = float(side)
    return s == v if kind == "inf" else math.isfinite(s) and abs(s - v) <= 1e-8 * max(1.0, abs(v))


def check_one_input(f: sympy.Expr, p: Fraction, label: str) -> None:
    """The oracle's left/right and kind against finite differences at and next to ``p``."""
    o = analyze_expression(f, (X,), (sympy.Rational(p.numerator, p.denominator),), case_id=label)
    assert o.kind != "not-judged", f"{label}: {o.reason}"
    diff = Differences(f, p)
    ratios = []
    for d, side, piece in ((-1, o.left, o.left_piece), (1, o.right, o.right_piece)):
        nxt = verdict(diff.quotients(d, "next"))
        assert nxt[0] != "inconclusive", f"{label}: the quotients next to the kink on side {d} neither agree nor grow"
        name = "left" if d < 0 else "right"
        if o.kind == "jump":  # next to the point: the piece's slope; at the point: f's own one-sided derivative
            assert _agrees(piece, nxt), f"{label}: oracle {name} piece = {piece}, finite differences {nxt}"
            assert _agrees(side, verdict(diff.quotients(d, "at"))), \
                f"{label}: oracle {name} = {side}, quotients at the jump {verdict(diff.quotients(d, 'at'))}"
        else:
            assert _agrees(side, nxt), f"{label}: oracle {name} = {side}, finite differences {nxt}"
        at = diff.quotients(d, "at")
        if at[0] is not None and at[1] is not None and at[0] != 0:
            ratios.append(abs(at[1] / at[0]))
        if o.kind in ("kink", "differentiable") and nxt[0] != "undefined":
            assert _agrees(side, verdict(at)), f"{label}: f is continuous, so the one-sided derivative at the " \
                f"kink must be the oracle's {side}, got quotients {verdict(at)}"
    jumps = any(r > 1e4 for r in ratios)  # grows like 1/h: f(p+-h) does not tend to f(p)
    assert jumps == (o.kind == "jump"), f"{label}: oracle kind {o.kind}, at-kink quotient ratios {ratios}"
    if o.kind == "jump" or (o.kind == "kink" and o.clarke is None and o.left is not None and o.right is not None):
        assert o.lipschitz is False, f"{label}: a jump or an infinite slope is not locally Lipschitz"
    if o.kind == "differentiable":
        assert o.left == o.right and o.lipschitz is True, f"{label}: {o}"


@pytest.mark.parametrize("case", ONE_INPUT, ids=[c.id for c in ONE_INPUT])
def test_catalog_one_sided_derivatives_match_finite_differences(case):
    f, syms, point = to_sympy(case)
    f = f.xreplace({syms[0]: X})
    check_one_input(f, _exact(point[0]), case.id)
    o = analyze(case)
    assert o.kind != "not-judged", f"{case.id}: a catalog case must be judged: {o.reason}"


@pytest.mark.parametrize("case", ONE_INPUT, ids=[c.id for c in ONE_INPUT])
def test_oracle_next_to_the_kink_is_the_derivative(case):
    """At ``p +- 1/1000`` every catalog function is smooth: the oracle's derivative is the difference quotient."""
    f, syms, point = to_sympy(case)
    f = f.xreplace({syms[0]: X})
    for d in (-1, 1):
        q = _exact(point[0]) + Fraction(d, 1000)
        o = analyze_expression(f, (X,), (sympy.Rational(q.numerator, q.denominator),))
        got = verdict(Differences(f, q).quotients(1, "at"))
        if got[0] == "undefined":
            assert o.kind == "undefined" or o.right is None, f"{case.id} at {q}: f is not real there, oracle {o.kind}"
            continue
        assert o.kind == "differentiable", f"{case.id} at {q}: oracle says {o.kind}"
        assert got[0] == "finite" and abs(float(o.derivative[0]) - got[1]) <= 1e-8 * max(1, abs(got[1])), \
            f"{case.id} at {q}: oracle {o.derivative}, finite differences {got}"


#: One-input forms of public cases Q3-Q7 and of functions the oracle gained for them, with their point.
PUBLIC = {
    "Q3 Max(x, 1e-35) at 0": (NS["Max"](X, sympy.Float(1e-35)), Fraction(0)),
    "Q3 clamp(x, min=1e-300) at 0": (NS["Min"](NS["Max"](X, sympy.Float(1e-300)), 1), Fraction(0)),
    "Q3 Max(x, -1e-300) at -1e-300": (NS["Max"](X, sympy.Float(-1e-300)), _exact(sympy.Float(-1e-300))),
    "Q4 0**b at 1": (sympy.Pow(0, X, evaluate=False), Fraction(1)),
    "Q5 sqrt(|x - 1|) + 1 at 1": (sympy.sqrt(sympy.Abs(X - 1)) + 1, Fraction(1)),
    "Q6 atan2(x, -1) at 0 (branch cut)": (NS["atan2"](X, -1), Fraction(0)),
    "Q6 atan2(x, 0) at 0": (NS["atan2"](X, 0), Fraction(0)),
    "Q7 xlogy(x, 2) at 0": (NS["xlogy"](X, 2), Fraction(0)),
    "Q7 xlogy(x, x) at 0": (NS["xlogy"](X, X), Fraction(0)),
    "erf(|x|) at 0": (NS["erf"](sympy.Abs(X)), Fraction(0)),
    "sin(|x|) at 0": (NS["sin"](sympy.Abs(X)), Fraction(0)),
    "sinc(x) at 0": (NS["sinc"](X), Fraction(0)),
    "tanh(Max(x, 0)) at 0": (NS["tanh"](NS["Max"](X, 0)), Fraction(0)),
    "sigmoid(Max(x, 0)) at 0": (NS["sigmoid"](NS["Max"](X, 0)), Fraction(0)),
    "log1p(|x|) at 0": (NS["log1p"](sympy.Abs(X)), Fraction(0)),
    "Heaviside(x) at 0": (NS["Heaviside"](X), Fraction(0)),
    "Mod(x, 1) at 1": (NS["Mod"](X, 1), Fraction(1)),
    "frac(x) at 2": (NS["frac"](X), Fraction(2)),
    "trunc(x) at -1": (NS["trunc"](X), Fraction(-1)),
    "x * floor(x) at 1/2": (X * NS["floor"](X), Fraction(1, 2)),
    "cbrt-like Abs(x)**(1/3) at 0": (sympy.Abs(X) ** sympy.Rational(1, 3), Fraction(0)),
}


@pytest.mark.parametrize("label", list(PUBLIC))
def test_public_cases_one_sided_derivatives_match_finite_differences(label):
    f, p = PUBLIC[label]
    check_one_input(f, p, label)


def test_q3_constant_below_the_probe_scale_is_respected():
    """Q3: Max(x, 1e-35) and clamp(x, min=1e-300) are constant near 0: derivative 0, not a kink."""
    for label in ("Q3 Max(x, 1e-35) at 0", "Q3 clamp(x, min=1e-300) at 0"):
        f, _ = PUBLIC[label]
        o = analyze_expression(f, (X,), (sympy.Integer(0),))
        assert o.kind == "differentiable" and o.derivative == (0,), f"{label}: {o.kind} {o.derivative}"


# --------------------------------------------------------------------------- (b) Clarke sets by construction

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
RATIONALS = st.builds(Fraction, st.integers(-4, 4), st.integers(1, 3))


def _inside(q: np.ndarray, pts: list[np.ndarray]) -> bool:
    """Whether ``q`` is a convex combination of ``pts`` (subsets of at most dim + 1 points, least squares)."""
    dim = len(q)
    for m in range(1, min(len(pts), dim + 1) + 1):
        for sub in itertools.combinations(pts, m):
            a = np.vstack([np.array(sub).T, np.ones(m)])
            b = np.append(q, 1.0)
            lam, *_ = np.linalg.lstsq(a, b, rcond=None)
            if np.allclose(a @ lam, b, atol=1e-9) and (lam >= -1e-12).all():
                return True
    return False


def hull_vertices(points: list[tuple[float, ...]]) -> list[tuple[float, ...]]:
    """The extreme points of ``conv(points)``: those not in the hull of the others (duplicates merged)."""
    uniq = sorted(set(points))
    arr = [np.array(p, dtype=float) for p in uniq]
    return [uniq[i] for i in range(len(arr)) if not _inside(arr[i], arr[:i] + arr[i + 1:])]


def min_norm(points: list[tuple[float, ...]]) -> np.ndarray:
    """The minimum-norm point of ``conv(points)``: the best over subsets of the affine-hull minimizers
    ``min |sum l_i p_i|`` subject to ``sum l_i = 1`` whose weights are all nonnegative (KKT, exact enough)."""
    arr = [np.array(p, dtype=float) for p in sorted(set(points))]
    best = None
    for m in range(1, min(len(arr), len(arr[0]) + 1) + 1):
        for sub in itertools.combinations(arr, m):
            g = np.array([[u @ v for v in sub] for u in sub])
            kkt = np.block([[g, np.ones((m, 1))], [np.ones((1, m)), np.zeros((1, 1))]])
            rhs = np.append(np.zeros(m), 1.0)
            if abs(np.linalg.det(kkt)) < 1e-12:
                continue
            lam = np.linalg.solve(kkt, rhs)[:m]
            if (lam >= -1e-12).all():
                q = sum(l * v for l, v in zip(lam, sub))
                if best is None or q @ q < best @ best - 1e-15:
                    best = q
    assert best is not None
    return best


def _same_points(got, want) -> bool:
    g = sorted(tuple(round(float(c), 9) for c in v) for v in got)
    w = sorted(tuple(round(float(c), 9) for c in v) for v in want)
    return g == w


def check_clarke(f: sympy.Expr, syms, point, generators: list[tuple[Fraction, ...]], label: str) -> None:
    """The oracle's Clarke vertices and min-norm element against ``conv(generators)`` computed here."""
    o = analyze_expression(f, syms, tuple(sympy.Rational(p.numerator, p.denominator) for p in point))
    assert o.kind in ("kink", "differentiable"), f"{label}: oracle kind {o.kind} ({o.reason})"
    pts = [tuple(float(c) for c in g) for g in generators]
    want = hull_vertices(pts)
    assert o.clarke is not None, f"{label}: a piecewise-affine function is locally Lipschitz"
    assert _same_points(o.clarke, want), f"{label}: oracle Clarke vertices {o.clarke}, true conv{{}} vertices {want}"
    mn = min_norm(pts)
    assert np.allclose([float(c) for c in o.min_norm], mn, atol=1e-9), \
        f"{label}: oracle min-norm {o.min_norm}, true {mn.tolist()}"
    assert (o.kind == "differentiable") == (len(want) == 1), f"{label}: kind {o.kind} with vertices {want}"


def _syms(n: int):
    return tuple(sympy.Symbol(f"v[{i}]", real=True) for i in range(n))


def _affine(a, syms, point, value):
    """``a . x + b`` with ``b`` chosen so that it equals ``value`` at ``point`` (all pieces tie there)."""
    b = value - sum(ai * pi for ai, pi in zip(a, point))
    return sum(sympy.Integer(ai) * s for ai, s in zip(a, syms)) + sympy.Rational(b.numerator, b.denominator)


@st.composite
def tied_pieces(draw):
    n = draw(st.integers(1, 3))
    k = draw(st.integers(2, 4))
    grads = draw(st.lists(st.tuples(*[st.integers(-3, 3)] * n), min_size=k, max_size=k))
    point = draw(st.lists(RATIONALS, min_size=n, max_size=n))
    value = draw(RATIONALS)
    scale = draw(st.sampled_from([Fraction(1), Fraction(2), Fraction(1, 3)]))
    return n, grads, point, value, scale


@SETTINGS
@given(tied_pieces(), st.sampled_from(["Max", "Min", "-Max"]))
def test_max_or_min_of_tied_affine_pieces(data, op):
    """``c Max(a_i . x + b_i)`` (and Min, and -Max) with every piece equal at p: Clarke set ``c conv{a_i}``
    (``-conv{a_i}`` for -Max)."""
    n, grads, point, value, scale = data
    syms = _syms(n)
    pieces = [_affine(a, syms, point, value) for a in grads]
    core = NS["Min"](*pieces) if op == "Min" else NS["Max"](*pieces)
    sign = -1 if op == "-Max" else 1
    f = sympy.Rational(scale.numerator, scale.denominator) * sign * core
    gens = [tuple(sign * scale * ai for ai in a) for a in grads]
    check_clarke(f, syms, point, gens, f"{op} {grads} at {point}, scale {scale}")


@SETTINGS
@given(st.integers(1, 3).flatmap(lambda n: st.tuples(st.tuples(*[st.integers(-3, 3)] * n),
                                                       st.lists(RATIONALS, min_size=n, max_size=n))))
def test_abs_of_an_affine_function_vanishing_at_the_point(data):
    a, point = data
    syms = _syms(len(a))
    f = sympy.Abs(_affine(a, syms, point, Fraction(0)))
    check_clarke(f, syms, point, [a, tuple(-c for c in a)], f"|{a} . (x - p)| at {point}")


_ONE_INPUT_KINKS = st.sampled_from(["Max", "Min", "Abs", "smooth"])


@SETTINGS
@given(st.integers(1, 3).flatmap(lambda n: st.lists(
    st.tuples(_ONE_INPUT_KINKS, st.integers(-3, 3), st.integers(-3, 3), RATIONALS), min_size=n, max_size=n)))
def test_separable_sum_has_a_box_for_clarke_set(terms):
    """``sum_j g_j(x_j)`` with a kink of each ``g_j`` at ``p_j``: Clarke set the product of the intervals
    ``[min slope, max slope]`` (a box; its vertices are the corners)."""
    syms = _syms(len(terms))
    point = [t[3] for t in terms]
    f = sympy.Integer(0)
    intervals = []
    for (kind, a1, a2, p), s in zip(terms, syms):
        u = s - sympy.Rational(p.numerator, p.denominator)
        if kind == "Max":
            f += NS["Max"](a1 * u, a2 * u)
            intervals.append((min(a1, a2), max(a1, a2)))
        elif kind == "Min":
            f += NS["Min"](a1 * u, a2 * u) + 7
            intervals.append((min(a1, a2), max(a1, a2)))
        elif kind == "Abs":
            f += a1 * sympy.Abs(u)
            intervals.append((-abs(a1), abs(a1)))
        else:
            f += a1 * s + a2 * s**2
            slope = a1 + 2 * a2 * p
            intervals.append((slope, slope))
    corners = list(itertools.product(*intervals))
    check_clarke(f, syms, point, corners, f"separable {terms}")


def _tree(depth: int):
    """One-input trees of affine leaves ``a (x - p)``: (kind, payload) tuples."""
    leaf = st.builds(lambda a: ("leaf", a), st.integers(-3, 3))
    if depth == 0:
        return leaf
    sub = _tree(depth - 1)
    return st.one_of(
        leaf,
        st.builds(lambda cs: ("Max", cs), st.lists(sub, min_size=2, max_size=3)),
        st.builds(lambda cs: ("Min", cs), st.lists(sub, min_size=2, max_size=3)),
        st.builds(lambda c: ("Abs", c), sub),
        st.builds(lambda cs: ("Add", cs), st.lists(sub, min_size=2, max_size=2)),
        st.builds(lambda k, c: ("Mul", (k, c)), st.sampled_from([Fraction(2), Fraction(1, 2), Fraction(-1)]), sub),
    )


def _build(tree, u: sympy.Expr) -> sympy.Expr:
    kind, payload = tree
    if kind == "leaf":
        return payload * u
    if kind in ("Max", "Min"):
        return NS[kind](*[_build(c, u) for c in payload])
    if kind == "Abs":
        return sympy.Abs(_build(payload, u))
    if kind == "Add":
        return sympy.Add(*[_build(c, u) for c in payload])
    k, c = payload
    return sympy.Rational(k.numerator, k.denominator) * _build(c, u)


def _directional(tree, d: int) -> Fraction:
    """``f'(p; d)`` of a tree whose every node is 0 at p: max/min/abs/sum/scaling of the children's."""
    kind, payload = tree
    if kind == "leaf":
        return Fraction(payload * d)
    if kind == "Max":
        return max(_directional(c, d) for c in payload)
    if kind == "Min":
        return min(_directional(c, d) for c in payload)
    if kind == "Abs":
        return abs(_directional(payload, d))
    if kind == "Add":
        return sum((_directional(c, d) for c in payload), Fraction(0))
    k, c = payload
    return k * _directional(c, d)


@SETTINGS
@given(_tree(3), RATIONALS)
def test_nested_max_min_abs_in_one_input(tree, p):
    """Nested Max/Min/Abs/sums/scalings of ``a (x - p)``: right slope ``f'(p; 1)``, left ``-f'(p; -1)``, Clarke
    set the interval between them."""
    f = _build(tree, X - sympy.Rational(p.numerator, p.denominator))
    right, left = _directional(tree, 1), -_directional(tree, -1)
    o = analyze_expression(f, (X,), (sympy.Rational(p.numerator, p.denominator),))
    label = f"{f} at {p}"
    assert o.kind in ("kink", "differentiable"), f"{label}: {o.kind} ({o.reason})"
    assert (o.left, o.right) == (sympy.Rational(left.numerator, left.denominator),
                                 sympy.Rational(right.numerator, right.denominator)), \
        f"{label}: oracle left/right {o.left}/{o.right}, by construction {left}/{right}"
    check_clarke(f, (X,), [p], [(left,), (right,)], label)


def test_a_vertex_with_a_narrow_normal_cone_is_in_the_clarke_set():
    """``Max(5x + 2y, -20x + 50y, 20x - 50y)`` at the origin: all three pieces tie and each is the maximum on an
    open cone (``5x + 2y`` around the direction (5, 2)), so (5, 2) is a limiting gradient and a vertex. Its
    normal cone (16-27 degrees) holds none of the fixed probe directions (0, 45, 90, … degrees): an oracle that
    only samples those directions misses it (it did, until the fuzz of issue 11 found it)."""
    x, y = sympy.symbols("x y", real=True)
    grads = [(5, 2), (-20, 50), (20, -50)]
    f = NS["Max"](*[a * x + b * y for a, b in grads])
    for t in (sympy.Rational(1, 10**6),):  # independent: the gradient at a point of that cone is (5, 2)
        g = [sympy.diff(f, s).subs({x: 5 * t, y: 2 * t}) for s in (x, y)]
        assert g == [5, 2], g
    check_clarke(f, (x, y), [Fraction(0), Fraction(0)], [tuple(map(Fraction, g)) for g in grads], "narrow cone")
