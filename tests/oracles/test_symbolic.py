"""The sympy oracle on cases whose one-sided derivatives, Clarke sets and min-norm elements are known by hand."""

from __future__ import annotations

import itertools
import json
import math
import os

import pytest
import sympy
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from sympy import Rational, oo, sqrt

from kinkcheck import catalog as cat
from kinkcheck.catalog import load_catalog
from kinkcheck.oracles import symbolic as sym
from kinkcheck.oracles.symbolic import OracleResult, analyze, kth_smallest, sympy_namespace, to_sympy

CATALOG = load_catalog()


def oracle(case_id: str) -> OracleResult:
    return analyze(CATALOG.case(case_id))


def vec(*xs: object) -> tuple[sympy.Expr, ...]:
    return tuple(sympy.sympify(x) for x in xs)


def test_every_catalog_case_analyzes() -> None:
    kinds = {}
    for case in CATALOG:
        r = analyze(case)
        kinds[case.id] = r.kind
        assert r.kind in ("differentiable", "kink", "jump", "undefined"), f"{case.id}: unknown kind {r.kind}"
        assert r.case_id == case.id, f"{case.id}: result names {r.case_id}"
        assert len(r.sympy_diff) == len(r.components), f"{case.id}: one sympy_diff per component"
        assert r.tie == case.tie, f"{case.id}: tie flag not copied"
        for g in r.limiting_gradients:
            assert len(g) == len(r.components), f"{case.id}: limiting gradient {g} has the wrong length"
        if r.clarke is not None:
            assert r.min_norm is not None and r.midpoint is not None, f"{case.id}: Clarke set without min_norm/midpoint"
        json.dumps(r.to_json())  # JSON-ready, no sympy objects left
    assert len(kinds) == len(CATALOG), f"expected {len(CATALOG)} cases, analyzed {len(kinds)}"


def test_namespace_covers_catalog_names() -> None:
    missing = cat.SYMPY_NAMES - set(sympy_namespace())
    assert not missing, f"sympy_namespace lacks {sorted(missing)}"


def test_to_sympy_symbols_point_and_exact_constants() -> None:
    f, syms, point = to_sympy(CATALOG.case("maxpool2d@tied-window"))
    assert [s.name for s in syms] == ["m[0][0]", "m[0][1]", "m[1][0]", "m[1][1]"], f"component names {syms}"
    assert all(s.is_real for s in syms), "symbols must be real"
    assert point == (3, 1, 3, 3), f"point {point}"
    _, _, p = to_sympy(CATALOG.case("abs@-0.0"))
    assert p == (0,) and p[0] == sympy.S.Zero, f"-0.0 must become exact 0, got {p}"
    _, _, p = to_sympy(CATALOG.case("hardshrink@0.5"))
    assert p == (Rational(1, 2),), f"0.5 must become 1/2, got {p}"
    f, (x,), _ = to_sympy(CATALOG.case("selu@0"))
    lam = Rational("1.0507009873554804934193349852946")
    assert sympy.diff(f, x).subs(x, 1) == lam, "selu's scale must be the decimal exactly, not a binary float"
    assert not f.has(sympy.Float), f"no binary floats may remain in {f}"


def test_kth_smallest() -> None:
    a, b, c = sympy.symbols("a b c", real=True)
    k2 = kth_smallest([a, b, c], 2)
    assert k2.subs({a: 5, b: 1, c: 3}) == 3, "2nd smallest of (5, 1, 3) is 3"
    assert kth_smallest([[4, 2], [9, 7]], 1) == 2, "nested lists are flattened"
    with pytest.raises(ValueError):
        kth_smallest([a, b], 3)


def test_probe_directions() -> None:
    assert sym.probe_directions(1) == ((-1,), (1,)), "scalar probes are left then right"
    assert len(sym.probe_directions(2)) == 4 + 4, "2-D: +-e_i and four sign vectors"
    assert len(sym.probe_directions(3)) == 6 + 8, "3-D: +-e_i and eight sign vectors"
    assert len(sym.probe_directions(6)) == 12 + 4, "6-D: +-e_i and four generic directions"


def test_relu() -> None:
    r = oracle("relu@0")
    assert r.kind == "kink", r.kind
    assert (r.left, r.right) == (0, 1), f"one-sided {r.left}, {r.right}"
    assert r.clarke == (vec(0), vec(1)), f"clarke {r.clarke}"
    assert r.min_norm == vec(0), f"min_norm {r.min_norm}"
    assert r.midpoint == vec(Rational(1, 2)), f"midpoint {r.midpoint}"
    assert r.sympy_diff == (Rational(1, 2),), f"sympy's Heaviside(0) = 1/2, got {r.sympy_diff}"
    assert any("Heaviside(0)" in n for n in r.notes), f"the convention is noted: {r.notes}"


def test_abs() -> None:
    for cid in ("abs@0", "abs@-0.0"):
        r = oracle(cid)
        assert (r.left, r.right) == (-1, 1), f"{cid}: one-sided {r.left}, {r.right}"
        assert r.clarke == (vec(-1), vec(1)), f"{cid}: clarke {r.clarke}"
        assert r.min_norm == vec(0), f"{cid}: min_norm {r.min_norm}"
        assert r.sympy_diff == (0,), f"{cid}: sympy's sign(0) = 0, got {r.sympy_diff}"


@pytest.mark.parametrize(
    ("cid", "left", "right"),
    [
        ("clamp@1", 1, 0),
        ("clamp@-1", 0, 1),
        ("relu6@6", 1, 0),
        ("hardswish@-3", 0, Rational(-1, 2)),
        ("hardswish@3", Rational(3, 2), 1),
        ("hardsigmoid@-3", 0, Rational(1, 6)),
        ("hardsigmoid@3", Rational(1, 6), 0),
        ("leaky_relu@0", Rational(1, 100), 1),  # DESIGN pitfall: sympy.limit gave 1/100 from both sides
        ("elu@0", Rational(1, 2), 1),
        ("softshrink@0.5", 0, 1),
        ("softshrink@-0.5", 1, 0),
        ("norm2@[0]", -1, 1),
    ],
)
def test_one_sided_derivatives(cid: str, left: sympy.Expr, right: sympy.Expr) -> None:
    r = oracle(cid)
    assert r.kind == "kink", f"{cid}: kind {r.kind}"
    assert r.left == left, f"{cid}: left {r.left}, expected {left}"
    assert r.right == right, f"{cid}: right {r.right}, expected {right}"
    lo, hi = sorted((left, right))
    assert r.clarke == (vec(lo), vec(hi)), f"{cid}: clarke {r.clarke}"
    assert r.midpoint == vec(Rational(left + right, 2)), f"{cid}: midpoint {r.midpoint}"
    mn = 0 if lo <= 0 <= hi else (lo if lo > 0 else hi)
    assert r.min_norm == vec(mn), f"{cid}: min_norm {r.min_norm}, expected {mn}"


def test_selu_exact_constants() -> None:
    r = oracle("selu@0")
    lam = Rational("1.0507009873554804934193349852946")
    alpha = Rational("1.6732632423543772848170429916717")
    assert r.right == lam, f"right {r.right}"
    assert r.left == lam * alpha, f"left {r.left}"
    assert r.min_norm == (lam,), f"min_norm {r.min_norm}"
    assert r.sympy_diff == ((lam + lam * alpha) / 2,), f"sympy_diff {r.sympy_diff}"


@pytest.mark.parametrize(
    ("cid", "derivative"),
    [
        ("celu@0", (1,)),
        ("softplus@0", (Rational(1, 2),)),
        ("where-sqrt@-1", (1,)),
        ("where-sqrt@[-1,-4]", (1, 1)),
        ("sqrt-relu@-10", (0,)),
        ("norm2-squared@[0]", (0,)),
    ],
)
def test_differentiable(cid: str, derivative: tuple[int, ...]) -> None:
    r = oracle(cid)
    assert r.kind == "differentiable", f"{cid}: kind {r.kind} ({r.notes})"
    assert r.derivative == vec(*derivative), f"{cid}: derivative {r.derivative}"
    assert r.clarke == (vec(*derivative),), f"{cid}: clarke is the single point, got {r.clarke}"
    assert r.min_norm == r.midpoint == vec(*derivative), f"{cid}: min_norm/midpoint {r.min_norm}/{r.midpoint}"


@pytest.mark.parametrize(
    ("cid", "left", "right", "pieces"),
    [("floor@1", oo, 0, (0, 0)), ("round@0.5", 0, oo, (0, 0)), ("sign@0", oo, oo, (0, 0)),
     ("threshold@1", 0, oo, (0, 1)), ("hardshrink@0.5", 0, oo, (0, 1)), ("hardshrink@-0.5", oo, 0, (1, 0))],
)
def test_jumps(cid: str, left: object, right: object, pieces: tuple[int, int]) -> None:
    """The one-sided derivatives of f at the point (the limits of its difference quotients: infinite where f
    jumps, the piece's slope where f is continuous from that side), and the pieces' slopes kept apart."""
    r = oracle(cid)
    assert r.kind == "jump", f"{cid}: kind {r.kind}"
    assert (r.left, r.right) == (left, right), f"{cid}: one-sided {r.left}, {r.right}"
    assert (r.left_piece, r.right_piece) == pieces, f"{cid}: pieces {r.left_piece}, {r.right_piece}"
    assert r.clarke is None and r.min_norm is None and r.midpoint is None, f"{cid}: a jump has no Clarke set"
    assert any(n.startswith("jump") for n in r.notes), f"{cid}: notes {r.notes}"


def test_jump_sympy_diff() -> None:
    # sympy: d/dx sign(x) = 2*DiracDelta(x), DiracDelta(0) stays unevaluated; floor's derivative is unevaluated.
    r = oracle("sign@0")
    assert r.sympy_diff == (None,), f"sign@0 sympy_diff {r.sympy_diff}"
    assert any("DiracDelta(0)" in n for n in r.notes), f"what sympy gave is recorded: {r.notes}"
    assert oracle("floor@1").sympy_diff == (None,), "floor's derivative stays unevaluated"


def test_memoized_diff_is_sympys_diff() -> None:
    """``_sympy_diff`` builds each ``Max``/``Min`` partial once across symbols; the derivative must be the very
    expression ``sympy.diff`` gives (same tree), or sympy's own value at the point could change."""
    x, y, z, u = sympy.symbols("x y z u", real=True)
    forms = [
        kth_smallest([x, y, z, u], 2),  # a Max of Mins, as the median cases
        sympy.Max(x**2, sympy.Min(x, y, 1), y - 1, sympy.Abs(z)),
        sympy.Min(sympy.Max(x, y, 2 * x), sympy.Max(x, z), u) + sympy.sin(x) * sympy.Max(y, 0),
        sympy.Max(y, z),  # x absent: 0
    ]
    for f in forms:
        partials: dict = {}
        for s in (x, y, z, u):
            got, want = sym._diff(f, s, partials), sympy.diff(f, s)
            assert sympy.srepr(got) == sympy.srepr(want), f"d/d{s} {f}: {got} != sympy's {want}"
    partials = {}
    sym._diff(forms[0], x, partials)
    built = len(partials)
    sym._diff(forms[0], y, partials)
    assert 0 < built < len(partials) < 2 * built, f"partials are shared across symbols: {built} then {len(partials)}"


def test_sqrt_edge_of_domain() -> None:
    r = oracle("sqrt@0")
    assert r.kind == "kink", r.kind
    assert r.left is None, f"no real values left of 0, got {r.left}"
    assert r.right == oo, f"right {r.right}"
    assert r.clarke is None and r.min_norm is None, "sqrt is not Lipschitz at 0"
    r = oracle("sqrt-abs@0")
    assert (r.left, r.right) == (-oo, oo), f"sqrt-abs one-sided {r.left}, {r.right}"
    assert r.clarke is None, "a cusp has no Clarke set"


def test_undefined() -> None:
    r = oracle("relu-sqrt@-10")
    assert r.kind == "undefined", r.kind
    assert r.left is None and r.right is None and r.limiting_gradients == (), "no side is real-valued"
    assert r.clarke is None and r.derivative is None, "nothing to judge against"


def test_maximum_and_minimum_tie() -> None:
    for cid in ("maximum@tie", "minimum@tie", "max@[1,1]"):
        r = oracle(cid)
        assert r.tie, f"{cid}: tie flag"
        assert r.limiting_gradients == (vec(1, 0), vec(0, 1)), f"{cid}: limiting {r.limiting_gradients}"
        assert set(r.clarke) == {vec(1, 0), vec(0, 1)}, f"{cid}: clarke {r.clarke}"
        assert r.min_norm == vec(Rational(1, 2), Rational(1, 2)), f"{cid}: min_norm {r.min_norm}"
        assert r.left is None and r.right is None, f"{cid}: no one-sided derivatives for two components"


def test_max_min_vector_ties() -> None:
    third = Rational(1, 3)
    r = oracle("max@[1,0,1,0,1,0]")
    e = lambda i, n=6: vec(*(1 if j == i else 0 for j in range(n)))
    assert r.limiting_gradients == (e(0), e(2), e(4)), f"max limiting {r.limiting_gradients}"
    assert r.min_norm == vec(third, 0, third, 0, third, 0), f"max min_norm {r.min_norm}"
    assert r.midpoint == r.min_norm, "for a simplex of unit vectors the centroid is the min-norm element"
    r = oracle("min@[1,0,1,0,1,0]")
    assert r.limiting_gradients == (e(1), e(3), e(5)), f"min limiting {r.limiting_gradients}"
    r = oracle("median@[1,0,1,0,1,0]")
    assert r.limiting_gradients == (e(1), e(3), e(5)), f"median (3rd smallest) ties the zeros: {r.limiting_gradients}"
    assert r.min_norm == vec(0, third, 0, third, 0, third), f"median min_norm {r.min_norm}"
    r = oracle("median@[1,0,1,0,1]")
    assert r.limiting_gradients == (e(0, 5), e(2, 5), e(4, 5)), f"odd median ties the ones: {r.limiting_gradients}"
    r = oracle("maxpool2d@tied-window")
    assert r.limiting_gradients == (e(0, 4), e(2, 4), e(3, 4)), f"maxpool limiting {r.limiting_gradients}"
    assert r.min_norm == vec(third, 0, third, third), f"maxpool min_norm {r.min_norm}"


def test_norms_at_origin() -> None:
    r = oracle("norm1@origin")
    assert set(r.clarke) == {vec(a, b) for a in (-1, 1) for b in (-1, 1)}, f"norm1 clarke {r.clarke}"
    assert r.min_norm == vec(0, 0), f"norm1 min_norm {r.min_norm}"
    r = oracle("norminf@origin")
    assert set(r.clarke) == {vec(1, 0), vec(-1, 0), vec(0, 1), vec(0, -1)}, f"norminf clarke {r.clarke}"
    assert r.min_norm == vec(0, 0), f"norminf min_norm {r.min_norm}"
    r = oracle("norm2@origin")
    h = sqrt(2) / 2
    expected = {vec(1, 0), vec(-1, 0), vec(0, 1), vec(0, -1), vec(h, h), vec(h, -h), vec(-h, h), vec(-h, -h)}
    assert set(r.limiting_gradients) == expected, f"norm2 limiting gradients d/|d|: {r.limiting_gradients}"
    assert r.min_norm == vec(0, 0), f"norm2 min_norm {r.min_norm}"
    assert r.midpoint == vec(0, 0), f"norm2 midpoint {r.midpoint}"
    assert any("unit ball" in n for n in r.notes), f"the inscribed-polygon caveat is noted: {r.notes}"
    assert r.sympy_diff == (None, None), f"sympy's diff is nan at the origin: {r.sympy_diff}"


def test_limiting_gradient_order() -> None:
    # Sorted by the position of the first nonzero component, then by value.
    r = oracle("norminf@origin")
    assert r.limiting_gradients == (vec(-1, 0), vec(1, 0), vec(0, -1), vec(0, 1)), f"{r.limiting_gradients}"


def test_to_json() -> None:
    j = oracle("sqrt@0").to_json()
    assert j["right"] == {"exact": "oo", "float": "inf"}, f"right {j['right']}"
    assert j["left"] is None and j["clarke"] is None, "None stays None"
    j = oracle("relu@0").to_json()
    assert j["midpoint"] == [{"exact": "1/2", "float": 0.5}], f"midpoint {j['midpoint']}"
    assert j["kind"] == "kink" and j["components"] == ["x"], f"{j['kind']} {j['components']}"
    j = oracle("norm2@origin").to_json()
    assert {"exact": "sqrt(2)/2", "float": pytest.approx(2**-0.5)} in [c for g in j["clarke"] for c in g], (
        "irrational vertices keep their exact text"
    )
    assert set(j) >= {"kind", "components", "derivative", "left", "right", "limiting_gradients", "clarke",
                      "min_norm", "midpoint", "sympy_diff", "notes"}, f"keys {sorted(j)}"


def test_analyze_is_cached() -> None:
    case = CATALOG.case("relu@0")
    assert analyze(case) is analyze(case), "analyze caches per case"


def test_probe_scale_follows_a_tiny_point() -> None:
    """A point at 1e-45 is 1e-45 away from relu's kink: the probes must stay much closer than that."""
    for cid, slope in (("relu@1e-45", 1), ("relu@-1e-45", 0)):
        r = analyze(CATALOG.case(cid))
        assert r.kind == "differentiable" and r.derivative == (slope,), f"{cid}: {r.kind} {r.derivative}"


@pytest.mark.parametrize(("case_id", "kind", "limiting"), [
    ("relu@0", "differentiable", [["0"]]),  # piecewise linear: H @ 1 = 0 on both sides (the Dirac mass is left out)
    ("hardswish@3", "kink", [["1/3"], ["0"]]),  # x (x + 3) / 6 on the left: second derivative 1/3; x on the right
    ("softplus@0", "differentiable", [["1/4"]]),  # sigmoid'(0) = 1/4
    ("norm2-squared@[0]", "differentiable", [["2"]]),
    ("sqrt@0", "undefined", []),  # sqrt'' = -x^(-3/2) / 4 -> -oo
])
def test_second_order_oracle(catalog, case_id, kind, limiting):
    so = analyze(catalog.case(case_id)).second_order
    assert isinstance(so, OracleResult) and so.order == 2, f"{case_id}: second order is {so!r}"
    assert so.kind == kind, so
    assert [[str(c) for c in g] for g in so.limiting_gradients] == limiting, so.limiting_gradients
    assert so.second_order is None and so.tie is False, f"{case_id}: a second-order result nests nothing"


def test_second_order_json_keeps_its_layout(catalog):
    """The nested ``to_json()`` of a second-order result is the dict reports and cached tables hold."""
    j = analyze(catalog.case("hardswish@3")).to_json()["second_order"]
    assert list(j) == ["case", "components", "tie", "left", "right", "sympy_diff", "kind", "derivative",
                       "limiting_gradients", "clarke", "min_norm", "midpoint", "notes"], list(j)
    assert j["left"] == {"exact": "1/3", "float": 1 / 3} and j["right"] == {"exact": "0", "float": 0.0}, j
    assert j["clarke"] == [[{"exact": "0", "float": 0.0}], [{"exact": "1/3", "float": 1 / 3}]], j["clarke"]
    assert j["min_norm"] == [{"exact": "0", "float": 0.0}] and j["sympy_diff"] == [None], j


def test_second_order_oracle_classifies(catalog):
    from kinkcheck.oracles.classify import OracleNumbers, classify

    exact = analyze(catalog.case("hardswish@3")).second_order
    for so in (exact, OracleNumbers.from_json(exact.to_json())):
        assert classify([1 / 3], so, "float64")[0] == "left", f"{type(so).__name__}: hardswish''(3-) = 1/3 is left"
        assert classify([0.0], so, "float64")[0] == "right", type(so).__name__
        assert classify([0.5], so, "float64") == ["outside-clarke"], type(so).__name__
        assert classify([1 / 6], so, "float64")[:2] == ["mean", "in-clarke"], type(so).__name__


# -- issue 11: the oracle is right or says why not (public cases Q1-Q7, Q10; shared/cases/public-cases-2.md) --

NS = sympy_namespace()
_a, _b, _x, _y = sympy.symbols("a b x y", real=True)
_v = sympy.symbols("v0 v1", real=True)
_p = sympy.symbols("x0 x1 y0 y1", real=True)


def judge(f: sympy.Expr, syms: tuple, point: tuple) -> OracleResult:
    return sym.analyze_expression(f, syms, tuple(sympy.sympify(p) for p in point), case_id="q")


def test_every_catalog_case_is_judged_with_a_lipschitz_flag() -> None:
    for case in CATALOG:
        r = analyze(case)
        assert r.kind != "not-judged" and r.reason is None, f"{case.id}: not judged: {r.reason}"
        expected = {"differentiable": True, "jump": False, "undefined": None}.get(r.kind)
        if r.kind == "kink":
            expected = True if r.clarke is not None else (False if any(
                c.is_finite is False for g in r.limiting_gradients for c in g) else None)
        assert r.lipschitz is expected, f"{case.id}: lipschitz {r.lipschitz} for kind {r.kind}, clarke {r.clarke}"
        j = r.to_json()
        assert j["reason"] is None and j["lipschitz"] is r.lipschitz, f"{case.id}: to_json keys {j}"


def test_q1_norm_beside_another_input() -> None:
    """|a v| at a = 1.3, v = 0: the ray along e_a keeps v = 0 (gradient 0/0); the probe curve leaves it."""
    a = Rational(13, 10)
    r = judge(sqrt((_a * _v[0]) ** 2 + (_a * _v[1]) ** 2), (_a, *_v), (a, 0, 0))
    assert r.kind == "kink" and r.lipschitz is True, f"Q1: {r.kind} {r.lipschitz} {r.reason}"
    assert all(g[0] == 0 for g in r.limiting_gradients), f"Q1: d/da must be 0 at v = 0: {r.limiting_gradients}"
    norms = {sympy.nsimplify(sympy.sqrt(g[1] ** 2 + g[2] ** 2)) for g in r.limiting_gradients}
    assert norms == {a}, f"Q1: every sampled v-gradient lies on the circle of radius |a|: {norms}"
    assert len(r.limiting_gradients) >= 8, f"Q1: a sampled disc, not two points: {r.limiting_gradients}"
    assert r.min_norm == vec(0, 0, 0), f"Q1: min-norm of the disc is 0: {r.min_norm}"
    assert any("inscribed polytope" in n for n in r.notes), f"Q1: the sampled-disc note: {r.notes}"


def test_q2_cdist_coincident_points_and_p_half() -> None:
    x0, x1, y0, y1 = _p
    r = judge(sqrt((x0 - y0) ** 2 + (x1 - y1) ** 2), _p, (1, 2, 1, 2))
    assert r.kind == "kink" and r.lipschitz is True, f"Q2: {r.kind} {r.reason}"
    for g in r.limiting_gradients:
        assert g[2] == -g[0] and g[3] == -g[1], f"Q2: the y-gradient is minus the x-gradient: {g}"
        assert sympy.simplify(g[0] ** 2 + g[1] ** 2 - 1) == 0, f"Q2: x-gradient on the unit circle: {g}"
    assert r.min_norm == vec(0, 0, 0, 0), f"Q2: min_norm {r.min_norm}"
    half = Rational(1, 2)
    r = judge((sympy.Abs(x0 - y0) ** half + sympy.Abs(x1 - y1) ** half) ** 2, _p, (1, 2, 1, 3))
    assert r.kind == "kink" and r.lipschitz is False and r.clarke is None, f"Q2 p=0.5: {r.kind} {r.lipschitz}"
    assert all({g[0], g[2]} == {oo, -oo} for g in r.limiting_gradients), (
        f"Q2 p=0.5: infinite one-sided derivatives in x0, y0: {r.limiting_gradients}")
    assert all((g[1], g[3]) == (-1, 1) for g in r.limiting_gradients), (
        f"Q2 p=0.5: d/dx1 = -1, d/dy1 = 1 (|x1 - y1| = 1 there): {r.limiting_gradients}")


@pytest.mark.parametrize(("const", "at"), [("1e-35", "0"), ("1e-300", "0"), ("2e-45", "1e-45")])
def test_q3_probe_scale_respects_constants(const: str, at: str) -> None:
    r = judge(sympy.Max(_x, Rational(const)), (_x,), (Rational(at),))
    assert r.kind == "differentiable" and r.derivative == (0,), (
        f"Q3: Max(x, {const}) at {at} is the constant branch: {r.kind} {r.derivative} {r.reason}")
    r = judge(sympy.Max(_x, Rational(const)), (_x,), (Rational(const),))
    assert (r.kind, r.left, r.right) == ("kink", 0, 1), f"Q3: at x = {const} itself it is a kink: {r.kind}"


def test_q3_tiny_jump_is_a_jump() -> None:
    r = judge(sympy.Piecewise((Rational("1e-300"), _x > 0), (0, True)), (_x,), (0,))
    assert r.kind == "jump" and r.lipschitz is False, f"a jump of 1e-300 is a jump: {r.kind}"


def test_q4_zero_base_power() -> None:
    r = judge(sympy.Integer(0) ** _b, (_b,), (1,))
    assert r.kind == "differentiable" and r.derivative == (0,), f"Q4: 0**b near b = 1: {r.kind} {r.derivative}"
    r = judge(sympy.Max(_x, 0) ** _b, (_x, _b), (-1, 1))
    assert r.kind == "differentiable" and r.derivative == (0, 0), f"Max(x, 0)**b at x < 0: {r.derivative}"
    r = judge(sympy.Integer(0) ** _b, (_b,), (0,))
    assert r.kind == "jump" and r.left is None and r.right == -oo and r.right_piece == 0, \
        f"0**b at 0: 0**0 = 1, 0 to the right (a drop: -oo), not real to the left: {r.kind} {r.right}"


def test_q5_not_lipschitz() -> None:
    r = judge(sqrt(sympy.Abs(_x - 1)) + 1, (_x,), (1,))
    assert (r.kind, r.left, r.right) == ("kink", -oo, oo), f"Q5: {r.kind} {r.left} {r.right}"
    assert r.lipschitz is False and r.clarke is None, f"Q5: no Clarke set: {r.lipschitz} {r.clarke}"


def test_q6_atan2() -> None:
    atan2 = NS["atan2"]
    r = judge(atan2(_y, _x), (_y, _x), (0, 0))
    assert r.kind == "jump" and r.lipschitz is False, f"Q6: atan2 at the origin is discontinuous: {r.kind}"
    r = judge(atan2(_y, _x), (_y, _x), (0, -1))
    assert r.kind == "jump", f"atan2 on its branch cut (y = 0, x < 0) jumps: {r.kind}"
    for (yv, xv), grad in (((1, 0), (0, -1)), ((0, 1), (1, 0)), ((1, 1), (Rational(1, 2), Rational(-1, 2)))):
        r = judge(atan2(_y, _x), (_y, _x), (yv, xv))
        assert r.kind == "differentiable" and r.derivative == vec(*grad), (
            f"atan2 at (y, x) = {(yv, xv)}: {r.kind} {r.derivative}, expected {grad}")


def test_q7_xlogy() -> None:
    r = judge(NS["xlogy"](_x, 2), (_x,), (0,))
    assert r.kind == "differentiable" and r.derivative == (sympy.log(2),), f"Q7: xlogy(x, 2) at 0: {r.derivative}"
    r = judge(NS["xlogy"](_x, _y), (_x, _y), (0, 0))
    assert r.lipschitz is False and r.clarke is None, f"Q7: xlogy at (0, 0) is not Lipschitz: {r.kind}"
    r = judge(NS["xlog1py"](_x, _y), (_x, _y), (0, 0))
    assert r.kind == "differentiable" and r.derivative == (0, 0), f"xlog1py(x, y) at (0, 0): {r.derivative}"


@pytest.mark.parametrize(("name", "at", "derivative"), [
    ("sin", 0, 1), ("cos", 0, 0), ("tan", 0, 1), ("sinh", 0, 1), ("cosh", 0, 0), ("tanh", 0, 1), ("atan", 1, "1/2"),
    ("asinh", 0, 1), ("erf", 0, "2/sqrt(pi)"), ("erfc", 0, "-2/sqrt(pi)"), ("log1p", 0, 1), ("expm1", 0, 1),
    ("sigmoid", 0, "1/4"), ("sinc", 0, 0), ("log2", 1, "1/log(2)"), ("log10", 1, "1/log(10)"),
])
def test_new_smooth_functions(name: str, at: int, derivative: object) -> None:
    r = judge(NS[name](_x), (_x,), (at,))
    assert r.kind == "differentiable" and sympy.simplify(r.derivative[0] - sympy.sympify(derivative)) == 0, (
        f"{name}'({at}) = {derivative}, got {r.kind} {r.derivative}")
    assert name in cat.SYMPY_NAMES, f"{name} is listed in catalog.SYMPY_NAMES"


@pytest.mark.parametrize(("form", "at", "kind"), [
    ("trunc(x)", "1", "jump"), ("trunc(x)", "1/2", "differentiable"), ("frac(x)", "2", "jump"),
    ("Mod(x, 2)", "2", "jump"), ("Mod(x, 2)", "1", "differentiable"), ("pi * x + E", "0", "differentiable"),
])
def test_piecewise_constant_functions(form: str, at: str, kind: str) -> None:
    f = sympy.sympify(form, locals={**NS, "x": _x})
    r = judge(f, (_x,), (Rational(at),))
    assert r.kind == kind, f"{form} at {at}: {r.kind} ({r.reason})"
    if kind == "jump":
        assert r.lipschitz is False and r.clarke is None, f"{form} at {at}: a jump has no Clarke set"


def test_point_at_infinity() -> None:
    r = judge(sympy.Piecewise((sympy.exp(_x), _x <= 10), (1, True)), (_x,), (oo,))
    assert r.kind == "differentiable" and r.derivative == (0,), f"Q10: the constant branch at x = oo: {r.derivative}"
    assert (r.left, r.right) == (0, None), f"at +oo only the left side exists: {r.left}, {r.right}"
    r = judge(sympy.exp(_x), (_x,), (-oo,))
    assert r.derivative == (0,) and (r.left, r.right) == (None, 0), f"exp at -oo: {r.derivative} {r.left} {r.right}"
    r = judge(_x * _y, (_x, _y), (oo, 2))
    assert r.kind == "kink" and r.lipschitz is False, f"x*y as x -> oo: d/dy -> oo: {r.kind} {r.limiting_gradients}"


def test_not_judged() -> None:
    r = judge(_x, (_x,), (sympy.nan,))
    assert r.kind == "not-judged" and r.reason == "not judged: the point is nan (x)", f"nan point: {r.reason}"
    assert r.to_json()["reason"] == r.reason and r.lipschitz is None, "reason and lipschitz in to_json"
    r = judge(sympy.sin(1 / _x), (_x,), (0,))
    assert r.kind == "not-judged" and "no limit" in r.reason, f"sin(1/x) at 0 oscillates: {r.reason}"
    assert r.clarke is None and r.limiting_gradients == () and r.sympy_diff == (None,), "nothing else is claimed"
    r = judge(_x + _y, (_x,), (0,))
    assert r.kind == "not-judged" and "y" in r.reason, f"a free symbol that is not an input: {r.reason}"


# --------------------------------------------------------------------------- refined probe directions

_a, _b, _c = sympy.symbols("a b c", real=True)


def _active_gradients_2d(grads_a: list[tuple[int, int]], grads_b: list[tuple[int, int]]) -> set[tuple[int, int]]:
    """Independent of the oracle: the gradient of ``Min(Max(A . d), Max(B . d))`` along 36,000 directions."""
    import numpy as np

    th = np.linspace(0.0, 2 * np.pi, 36000, endpoint=False)
    d = np.stack([np.cos(th), np.sin(th)])
    ga, gb = np.array(grads_a, dtype=float), np.array(grads_b, dtype=float)
    ia, ib = (ga @ d).argmax(axis=0), (gb @ d).argmax(axis=0)
    a_wins = (ga @ d).max(axis=0) < (gb @ d).max(axis=0)
    return {grads_a[i] if w else grads_b[j] for i, j, w in zip(ia, ib, a_wins)}


def test_a_narrow_cone_in_three_inputs_is_found() -> None:
    # (5, 2, 1) is the largest only on a thin cone around (5, 2, 1) that holds none of the fixed probes
    # (+-e_i, sign vectors): each of those selects one of the three other pieces.
    grads = [(5, 2, 1), (-20, 50, 3), (20, -50, 3), (1, 1, -30)]
    f = sympy.Max(*(p * _a + q * _b + r * _c for p, q, r in grads))
    origin = (sympy.S.Zero,) * 3
    scale = sym._scale_for(f, (_a, _b, _c), origin)
    fixed = {sym._probe(f, (_a, _b, _c), origin, d, scale).gradient for d in sym.probe_directions(3)}
    assert vec(5, 2, 1) not in fixed, f"the fixed probes alone must miss (5, 2, 1) for this test to bite: {fixed}"
    r = judge(f, (_a, _b, _c), (0, 0, 0))
    assert set(r.clarke) == {vec(*g) for g in grads}, f"every piece is a vertex of the Clarke set: {r.clarke}"
    assert not any("refine" in n for n in r.notes), f"the refinement finished: {r.notes}"


def test_nested_min_max_pieces_are_found() -> None:
    # Regions of Min(Max(...), Max(...)) are unions of cones: (7, -1) is selected at 0 and 45 degrees and on
    # most of the sector between, but (20, -50), (5, 2) and (-20, 50) in turn between 14.9 and 27.9 degrees
    # (the last on 0.4 degrees only).
    grads_a, grads_b = [(5, 2), (-20, 50), (20, -50)], [(1, 3), (7, -1)]
    f = sympy.Min(sympy.Max(*(p * _a + q * _b for p, q in grads_a)), sympy.Max(*(p * _a + q * _b for p, q in grads_b)))
    r = judge(f, (_a, _b), (0, 0))
    want = _active_gradients_2d(grads_a, grads_b)
    assert want == {(-20, 50), (1, 3), (5, 2), (7, -1), (20, -50)}, f"the independent scan itself: {want}"
    assert set(r.limiting_gradients) == {vec(*g) for g in want}, f"limiting gradients {r.limiting_gradients}"


def test_refinement_finds_every_piece_of_a_fine_fan() -> None:
    # 12 pieces with gradients around a circle: each is the largest on a 30-degree cone; the 8 fixed probes
    # (45 degrees apart) select 8 of them.
    grads = [(round(1000 * math.cos(math.pi * k / 6)), round(1000 * math.sin(math.pi * k / 6))) for k in range(12)]
    r = judge(sympy.Max(*(p * _a + q * _b for p, q in grads)), (_a, _b), (0, 0))
    assert set(r.clarke) == {vec(*g) for g in grads}, f"all 12 gradients are Clarke vertices: {len(r.clarke)} found"


def test_refinement_adds_no_gradient_of_a_piece_active_on_a_line_only() -> None:
    # (a + b)/2 - (a - b)**2 reaches Max(a, b) only on a == b: its gradient (1/2, 1/2) is no limiting gradient.
    r = judge(sympy.Max(_a, _b, (_a + _b) / 2 - (_a - _b) ** 2), (_a, _b), (0, 0))
    assert r.limiting_gradients == (vec(1, 0), vec(0, 1)), f"limiting gradients {r.limiting_gradients}"
    r = judge(sympy.Max(_a, _a - _b**2), (_a, _b), (0, 0))
    assert r.kind == "differentiable" and r.derivative == vec(1, 0), f"Max(a, a - b**2): {r.kind} {r.derivative}"


def test_second_smallest_of_five_ties_has_every_vertex() -> None:
    # Each component is the 2nd smallest on an open cone (an ordering); the fixed probes for n > 3 miss one.
    v = sympy.symbols("v0:5", real=True)
    r = judge(kth_smallest(list(v), 2), v, (0,) * 5)
    unit = {vec(*(1 if j == i else 0 for j in range(5))) for i in range(5)}
    assert set(r.clarke) == unit, f"Clarke vertices e_0..e_4: {r.clarke}"
    assert r.min_norm == vec(*(Rational(1, 5),) * 5), f"min-norm {r.min_norm}"


def test_refinement_that_stops_short_says_so() -> None:
    # sum |v_i - v_j| over 8 tied inputs: 28 hyperplanes, 8! = 40320 cones of directions: too many to probe.
    v = sympy.symbols("v0:8", real=True)
    r = judge(sum(abs(p - q) for p, q in itertools.combinations(v, 2)), v, (0,) * 8)
    assert r.kind == "kink", f"kind {r.kind}"
    assert any("Clarke set may miss vertices" in n for n in r.notes), f"the inner approximation is noted: {r.notes}"


# --------------------------------------------------------------------------- issue 32, item 1: one-sided derivatives at a jump


def test_at_every_jump_of_the_catalog_the_jumping_side_has_no_finite_derivative():
    """At a jump the difference quotient on the jumping side grows without bound: the oracle's one-sided derivative
    there is oo or -oo (None where f(p) is no number), never the piece's slope, which it keeps as left_piece and
    right_piece; on a side where f is continuous it is that piece's slope (floor at 1: left oo, right 0)."""
    from kinkcheck.oracles.table import oracle_table

    table = oracle_table(load_catalog())
    jumps = {cid: d for cid, d in table.items() if d["kind"] == "jump" and len(d["components"]) == 1}
    assert {"heaviside@0", "floor@1", "sign@0", "round@0.5"} <= set(jumps), sorted(jumps)
    for cid, d in jumps.items():
        sides = [d["left"], d["right"]]
        assert any(s is None or s["float"] in ("inf", "-inf") for s in sides), f"{cid}: a jump on some side: {sides}"
        assert d["left_piece"] is not None and d["right_piece"] is not None, f"{cid}: the pieces' slopes kept"
        for s, piece in zip(sides, (d["left_piece"], d["right_piece"])):
            assert s is None or s["float"] in ("inf", "-inf") or s == piece, \
                f"{cid}: a finite one-sided derivative is the slope of a piece f is continuous with: {s} {piece}"
    assert (jumps["floor@1"]["left"]["exact"], jumps["floor@1"]["right"]["exact"]) == ("oo", "0"), jumps["floor@1"]
    assert (jumps["heaviside@0"]["left"]["exact"], jumps["heaviside@0"]["right"]["exact"]) == ("oo", "oo")


def test_a_value_at_a_jump_is_labelled_by_the_piece_not_as_a_derivative():
    from kinkcheck.oracles.classify import OracleNumbers, classify
    from kinkcheck.oracles.table import oracle_table

    table = oracle_table(load_catalog())
    heaviside = OracleNumbers.from_json(table["heaviside@0"])
    assert classify((0.0,), heaviside, "float64")[:2] == ["left-piece", "right-piece"], \
        "0 is both pieces' slope, and neither one-sided derivative (both are oo)"
    assert classify((math.inf,), heaviside, "float64")[:3] == ["+inf", "left", "right"], "oo is the derivative"
    floor = OracleNumbers.from_json(table["floor@1"])
    assert classify((0.0,), floor, "float64")[0] == "right", "floor is continuous from the right at 1: 0 is f'(1+)"


_slope = st.integers(-3, 3)
_level = st.integers(-3, 3)


@settings(max_examples=int(os.environ.get("KINKCHECK_FUZZ_EXAMPLES", "40")), deadline=None)
@given(a=_slope, b=_level, c=_slope, d=_level, at=st.integers(-2, 2), left_closed=st.booleans())
def test_step_functions_have_infinite_one_sided_derivatives_on_the_jumping_side(a, b, c, d, at, left_closed):
    """Hypothesis-made piecewise-linear functions with a jump at ``at``: ``a x + b`` left of it, ``c x + d`` right,
    and f(at) taken from the left or the right piece. The side f(at) does not come from has an infinite one-sided
    derivative of the jump's sign; the other side has its piece's slope; the pieces' slopes are kept apart."""
    x = sympy.Symbol("x", real=True)
    left_value, right_value = a * at + b, c * at + d
    assume(left_value != right_value)
    f = sympy.Piecewise((a * x + b, x < at), (c * x + d, True)) if not left_closed else \
        sympy.Piecewise((a * x + b, x <= at), (c * x + d, True))
    r = sym.analyze_expression(f, (x,), (sympy.Integer(at),))
    assert r.kind == "jump" and r.lipschitz is False and r.clarke is None, r
    assert (r.left_piece, r.right_piece) == (a, c), (r.left_piece, r.right_piece)
    fp = left_value if left_closed else right_value
    if left_closed:  # continuous from the left, jumps on the right
        assert r.left == a and r.right == (oo if right_value > fp else -oo), (r.left, r.right)
    else:
        assert r.right == c and r.left == (oo if fp > left_value else -oo), (r.left, r.right)


def test_a_jump_that_lives_on_an_axis_is_found():
    """``x ** y`` at (0, 0): every probe curve (bent off the axes) gives 1 = 0 ** 0, but on the y-axis
    ``0 ** t = 0``; the oracle says jump (no Clarke set, not Lipschitz), not kink (issue 32, item 2)."""
    r = analyze(CATALOG.case("pow@(0,0)"))
    assert r.kind == "jump" and r.lipschitz is False and r.clarke is None, r
    assert any("along the +y axis f is 0 at both probe distances, not f(p) = 1" in n for n in r.notes), r.notes
    still = analyze(CATALOG.case("pow@(0,0.5)"))
    assert still.kind == "kink", f"0 ** (0.5 + t) -> 0 = f(p) on every axis: no jump there ({still.kind})"


@settings(max_examples=int(os.environ.get("KINKCHECK_FUZZ_EXAMPLES", "40")), deadline=None)
@given(a=st.integers(-3, 3).filter(bool), b=st.integers(-3, 3), c=st.integers(-3, 3), axis=st.sampled_from("xy"))
def test_a_value_set_only_on_an_axis_is_a_jump(a, b, c, axis):
    """Hypothesis-made: f = c != 0 on one axis (the origin left out) and a x + b y elsewhere, so f(0, 0) = 0 and
    only the axis carries the jump, which the probe curves (bent off the axes) never touch."""
    x, y = sympy.Symbol("x", real=True), sympy.Symbol("y", real=True)
    on = sympy.Eq(x, 0) & sympy.Ne(y, 0) if axis == "y" else sympy.Eq(y, 0) & sympy.Ne(x, 0)
    assume(c != 0)
    f = sympy.Piecewise((c, on), (a * x + b * y, True))
    r = sym.analyze_expression(f, (x, y), (sympy.Integer(0), sympy.Integer(0)))
    assert r.kind == "jump" and r.clarke is None, (f, r.kind, r.notes)


def test_a_point_where_f_has_no_value_is_undefined_not_a_jump():
    """eigh-vector@identity: an eigenvector's entry at a repeated eigenvalue is 0/0 at the point (every unit vector
    is an eigenvector) although f is real next to it: the oracle says undefined, with no one-sided derivative and no
    Clarke set, never "a jump" (which would say f has a value there)."""
    for cid in ("eigh-vector@identity", "svd-vector@identity"):
        r = analyze(CATALOG.case(cid))
        assert r.kind == "undefined" and r.clarke is None and (r.left, r.right) == (None, None), (cid, r.kind)
        assert any("no finite real value at the point itself" in n for n in r.notes), r.notes
    x = sympy.Symbol("x", real=True)
    r = sym.analyze_expression(sympy.sin(x) / x, (x,), (sympy.Integer(0),))
    assert r.kind == "undefined" and (r.left_piece, r.right_piece) == (0, 0), "sin(x)/x at 0: no value; slopes kept"
