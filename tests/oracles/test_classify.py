"""Labels of observed values against the sympy oracle."""

from __future__ import annotations

import math

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from kinkcheck.catalog import load_catalog
from kinkcheck.oracles.classify import LABELS, OracleNumbers, classify, tolerance
from kinkcheck.oracles.symbolic import OracleResult, analyze, analyze_expression, sympy_namespace

CATALOG = load_catalog()


def oracle(case_id: str) -> OracleResult:
    return analyze(CATALOG.case(case_id))


def labels(case_id: str, value: list[float], dtype: str = "float64") -> list[str]:
    return classify(value, oracle(case_id), dtype)


def test_relu_labels() -> None:
    got = labels("relu@0", [0.0])
    assert got[:2] == ["left", "min-norm"], f"relu'(0) = 0 is left then min-norm, got {got}"
    assert "in-clarke" in got, f"0 is in [0, 1]: {got}"
    assert labels("relu@0", [1.0])[0] == "right", "relu'(0) = 1 is right"
    assert labels("relu@0", [0.5])[0] == "mean", "relu'(0) = 1/2 is the mean"
    assert labels("relu@0", [math.nan]) == ["nan"], "nan is the only label"
    assert labels("relu@0", [2.0]) == ["outside-clarke"], "2 is outside [0, 1]"
    assert labels("relu@0", [0.25]) == ["in-clarke"], "0.25 is inside [0, 1] but no named convention"


def test_tie_labels() -> None:
    got = labels("maximum@tie", [0.5, 0.5])
    assert got[:2] == ["split-even", "min-norm"], f"(1/2, 1/2) splits evenly and is min-norm: {got}"
    assert labels("maximum@tie", [1.0, 0.0])[0] == "first", "gradient to the first tied argument"
    assert labels("maximum@tie", [0.0, 1.0])[0] == "last", "gradient to the last tied argument"
    assert labels("maximum@tie", [1.0, 1.0]) == ["outside-clarke"], "(1, 1) is outside the segment"
    got = labels("max@[1,0,1,0,1,0]", [0, 0, 1, 0, 0, 0])
    assert got[0] == "one-index", f"e_2 is one tied element, neither first nor last: {got}"
    assert labels("max@[1,0,1,0,1,0]", [1, 0, 0, 0, 0, 0])[0] == "first", "e_0 is the first tied element"
    assert labels("max@[1,0,1,0,1,0]", [0, 0, 0, 0, 1, 0])[0] == "last", "e_4 is the last tied element"
    third = 1 / 3
    got = labels("max@[1,0,1,0,1,0]", [third, 0, third, 0, third, 0])
    assert got[:2] == ["split-even", "min-norm"], f"an even split over three ties: {got}"
    assert labels("max@[1,0,1,0,1,0]", [0, 1, 0, 0, 0, 0]) == ["outside-clarke"], "e_1 is not a tied element"
    got = labels("maxpool2d@tied-window", [0.5, 0, 0.5, 0])
    assert got == ["in-clarke"], f"a split over two of three tied elements is only in-clarke: {got}"


def test_dtype_tolerance() -> None:
    assert labels("relu@0", [0.50000006], "float32")[0] == "mean", "float32 tolerance accepts 0.50000006"
    assert "mean" not in labels("relu@0", [0.50000006], "float64"), "float64 tolerance rejects 0.50000006"
    assert tolerance("float64") == 1e-9 and tolerance("bfloat16") == 1.6e-2, "documented tolerances"
    assert tolerance("torch.float16") == 2e-3, "framework prefixes are accepted"
    with pytest.raises(ValueError, match="unknown dtype"):
        tolerance("int8")
    with pytest.raises(ValueError, match="unknown dtype"):
        classify([0.0], oracle("relu@0"), "complex64")


def test_error_and_unavailable() -> None:
    o = oracle("relu@0")
    assert classify(None, o, "float64", error="RuntimeError: boom") == ["error"], "error is the only label"
    assert classify(None, o, "float64", unavailable="no CUDA device") == ["unavailable"], "unavailable only"
    assert classify([0.0], o, "float64", error="x") == ["error"], "error wins even with a value"
    with pytest.raises(ValueError, match="neither error nor unavailable"):
        classify(None, o, "float64")
    with pytest.raises(ValueError, match="components"):
        classify([0.0, 1.0], o, "float64")


def test_infinite_values() -> None:
    assert labels("sqrt@0", [math.inf]) == ["+inf", "right"], "sqrt'(0+) = oo"
    assert labels("sqrt-abs@0", [-math.inf]) == ["-inf", "left"], "sqrt(|x|)'(0-) = -oo"
    assert labels("relu@0", [math.inf]) == ["+inf"], "an infinity where none belongs"
    assert labels("sqrt@0", [0.0]) == ["not-lipschitz"], "a finite value where f is not Lipschitz: no Clarke set"


def test_differentiable_jump_undefined() -> None:
    assert labels("celu@0", [1.0]) == ["derivative"], "celu is differentiable at 0"
    assert labels("celu@0", [0.5]) == ["outside-clarke"], "any other finite value is wrong"
    assert labels("where-sqrt@-1", [math.nan]) == ["nan"], "the where trap leaks nan"
    assert labels("where-sqrt@[-1,-4]", [1.0, 1.0]) == ["derivative"], "vector derivative"
    assert labels("threshold@1", [0.0]) == ["left", "left-piece"], "continuous from the left: f'(1-) = 0"
    assert labels("threshold@1", [1.0]) == ["right-piece"], "the right piece's slope; f'(1+) is oo (it jumps)"
    assert labels("threshold@1", [math.inf]) == ["+inf", "right"], "the right one-sided derivative of a jump"
    assert labels("threshold@1", [0.5]) == ["not-lipschitz"], "no mean of an infinite and a finite derivative"
    assert labels("threshold@1", [3.0]) == ["not-lipschitz"], "a jump has no Clarke set to be outside of"
    assert labels("floor@1", [0.0]) == ["right", "left-piece", "right-piece"], \
        "floor is continuous from the right at 1: 0 is f'(1+), and both pieces' slope"
    assert labels("relu-sqrt@-10", [0.0]) == ["outside-domain"], "finite where f is not real"
    assert labels("relu-sqrt@-10", [math.nan]) == ["nan"], "nan where f is not real"


def test_norm_labels() -> None:
    assert labels("norm2@origin", [0.0, 0.0])[0] == "min-norm", "0 is the min-norm element of the unit ball"
    assert labels("norm2@origin", [0.6, 0.6]) == ["in-clarke"], "inside the inscribed octagon"
    assert labels("norm2@origin", [1.0, 1.0]) == ["outside-clarke"], "outside the unit ball"
    assert labels("norm1@origin", [1.0, -1.0]) == ["in-clarke"], "a corner of the square"


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from([c.id for c in CATALOG if len(c.inputs) == 1 and not isinstance(c.at[c.inputs[0]], list)]),
    st.one_of(st.floats(allow_nan=True, allow_infinity=True, width=64), st.sampled_from([0.0, 0.5, 1.0, -1.0])),
    st.sampled_from(["float64", "float32", "float16", "bfloat16"]),
)
def test_labels_are_ordered_and_never_empty(case_id: str, x: float, dtype: str) -> None:
    got = labels(case_id, [x], dtype)
    assert got, f"{case_id} {x}: no label"
    assert set(got) <= set(LABELS), f"{case_id} {x}: unknown labels {got}"
    assert got == sorted(got, key=LABELS.index), f"{case_id} {x}: labels out of order {got}"
    assert not ({"in-clarke", "outside-clarke"} <= set(got)), f"{case_id} {x}: contradictory {got}"


# --------------------------------------------------------------------------- not locally Lipschitz, not judged

_NS = sympy_namespace()
_X, _Y = sympy.symbols("x y", real=True)


def test_not_lipschitz_replaces_outside_clarke_where_no_clarke_set_exists() -> None:
    """Q5: sqrt(|x - 1|) + 1 at 1 has one-sided derivatives -oo and oo; a finite 0 there is not "outside" a set."""
    o = analyze_expression(sympy.sqrt(sympy.Abs(_X - 1)) + 1, (_X,), (sympy.Integer(1),))
    assert o.lipschitz is False and o.clarke is None, f"the oracle must say f is not locally Lipschitz: {o}"
    assert classify([0.0], o, "float64") == ["not-lipschitz"], "Q5's measured 0"
    assert classify([math.inf], o, "float64") == ["+inf", "right"], "an infinity equal to a one-sided derivative"
    assert classify([math.nan], o, "float64") == ["nan"]


def test_not_lipschitz_at_a_discontinuity_of_several_inputs() -> None:
    """Q6: atan2(y, x) at the origin is not continuous; torch 2.13's (0, -0) is neither outside nor inside a set."""
    o = analyze_expression(_NS["atan2"](_Y, _X), (_Y, _X), (sympy.Integer(0), sympy.Integer(0)))
    assert o.lipschitz is False and o.clarke is None, f"atan2 at the origin: {o.kind}, {o.lipschitz}"
    assert classify([0.0, -0.0], o, "float64") == ["not-lipschitz"], "Q6 (0, -0)"


def test_a_jump_keeps_its_one_sided_labels() -> None:
    o = analyze(CATALOG.case("threshold@1"))
    assert o.lipschitz is False, "a jump is not locally Lipschitz"
    assert labels("threshold@1", [0.0]) == ["left", "left-piece"] and \
        labels("threshold@1", [1.0]) == ["right-piece"], "one-sided values and pieces are named before not-lipschitz"


def test_not_judged_cases_carry_no_judgement() -> None:
    """x**2 sin(1/x) at 0: its gradient has no limit at 0; the oracle says so and classify judges nothing."""
    o = analyze_expression(_X**2 * sympy.sin(1 / _X), (_X,), (sympy.Integer(0),))
    assert o.kind == "not-judged" and o.reason and o.reason.startswith("not judged:"), o
    assert classify([0.0], o, "float64") == ["not-judged"], "a finite value: only the marker"
    assert classify([123.0], o, "float32") == ["not-judged"], "not outside-clarke: nothing was compared"
    assert classify([-math.inf], o, "float64") == ["-inf", "not-judged"], "an infinity is still said"
    assert classify([math.nan], o, "float64") == ["nan"], "nan needs no oracle"
    assert classify(None, o, "float64", error="boom") == ["error"]
    n = OracleNumbers.from_json(o.to_json())
    assert n.kind == "not-judged" and n.reason == o.reason and n.lipschitz is None, n
    assert classify([0.0], n, "float64") == ["not-judged"], "the JSON form classifies the same"


@pytest.mark.parametrize(("case_id", "expected"), [
    ("relu@0", True), ("celu@0", True), ("sqrt@0", False), ("threshold@1", False), ("floor@1", False),
    ("relu-sqrt@-10", None),
])
def test_old_json_without_lipschitz_reads(case_id: str, expected: bool | None) -> None:
    """A cache entry written before ``lipschitz``/``reason`` existed: derived from kind, Clarke set and notes."""
    d = oracle(case_id).to_json()
    assert d["lipschitz"] is expected, f"{case_id}: the oracle's own lipschitz is {d['lipschitz']}"
    old = {k: v for k, v in d.items() if k not in ("lipschitz", "reason")}
    n = OracleNumbers.from_json(old)
    assert n.lipschitz is expected and n.reason is None, f"{case_id}: derived {n.lipschitz}, want {expected}"
    for value in ([0.0], [0.5], [7.0], [math.inf]):
        assert classify(value, n, "float64") == classify(value, oracle(case_id), "float64"), \
            f"{case_id} {value}: old JSON must label as the live oracle does"


def test_not_lipschitz_for_q2_and_q7() -> None:
    """Q2: cdist with p = 0.5 at x = [1, 2], y = [1, 3] (|x0 - y0|**0.5 has infinite slopes at 0); Q7: xlogy(x, y)
    at the origin (x log y: unbounded slopes as y -> 0). A finite value at either is not-lipschitz."""
    x0, x1, y0, y1 = sympy.symbols("x[0] x[1] y[0] y[1]", real=True)
    half = sympy.Rational(1, 2)
    cdist = (sympy.Abs(x0 - y0) ** half + sympy.Abs(x1 - y1) ** half) ** 2
    o = analyze_expression(cdist, (x0, x1, y0, y1), tuple(sympy.Integer(v) for v in (1, 2, 1, 3)))
    assert o.lipschitz is False and o.clarke is None, f"cdist p=0.5 at coincident first coordinates: {o.kind}"
    assert classify([0.0, 1.0, 0.0, -1.0], o, "float64") == ["not-lipschitz"], "Q2"
    o = analyze_expression(_NS["xlogy"](_X, _Y), (_X, _Y), (sympy.Integer(0), sympy.Integer(0)))
    assert o.lipschitz is False and o.clarke is None, f"xlogy at the origin: {o.kind}"
    assert classify([0.0, 0.0], o, "float64") == ["not-lipschitz"], "Q7 with finite values"
    assert classify([0.0, math.nan], o, "float64") == ["nan"], "Q7 as torch measured it"
