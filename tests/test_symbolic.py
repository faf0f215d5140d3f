"""The sympy oracle on cases whose one-sided derivatives, Clarke sets and min-norm elements are known by hand."""

from __future__ import annotations

import json
import time

import pytest
import sympy
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
    start = time.perf_counter()
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
    elapsed = time.perf_counter() - start
    assert len(kinds) == len(CATALOG), f"expected {len(CATALOG)} cases, analyzed {len(kinds)}"
    assert elapsed < 60, f"analyzing the catalog took {elapsed:.1f} s"


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
    ("cid", "left", "right"),
    [("floor@1", 0, 0), ("round@0.5", 0, 0), ("sign@0", 0, 0), ("threshold@1", 0, 1), ("hardshrink@0.5", 0, 1),
     ("hardshrink@-0.5", 1, 0)],
)
def test_jumps(cid: str, left: int, right: int) -> None:
    r = oracle(cid)
    assert r.kind == "jump", f"{cid}: kind {r.kind}"
    assert (r.left, r.right) == (left, right), f"{cid}: one-sided {r.left}, {r.right}"
    assert r.clarke is None and r.min_norm is None and r.midpoint is None, f"{cid}: a jump has no Clarke set"
    assert any(n.startswith("jump") for n in r.notes), f"{cid}: notes {r.notes}"


def test_jump_sympy_diff() -> None:
    # sympy: d/dx sign(x) = 2*DiracDelta(x), DiracDelta(0) stays unevaluated; floor's derivative is unevaluated.
    r = oracle("sign@0")
    assert r.sympy_diff == (None,), f"sign@0 sympy_diff {r.sympy_diff}"
    assert any("DiracDelta(0)" in n for n in r.notes), f"what sympy gave is recorded: {r.notes}"
    assert oracle("floor@1").sympy_diff == (None,), "floor's derivative stays unevaluated"


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
    e = lambda i, n=6: vec(*(1 if j == i else 0 for j in range(n)))  # noqa: E731
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
    assert so["kind"] == kind, so
    assert [[c["exact"] for c in g] for g in so["limiting_gradients"]] == limiting, so["limiting_gradients"]


def test_second_order_oracle_classifies(catalog):
    from kinkcheck.classify import OracleNumbers, classify

    so = OracleNumbers.from_json(analyze(catalog.case("hardswish@3")).second_order)
    assert classify([1 / 3], so, "float64")[0] == "left", "hardswish''(3-) = 1/3 is the left value"
    assert classify([0.0], so, "float64")[0] == "right"
    assert classify([0.5], so, "float64") == ["outside-clarke"]
