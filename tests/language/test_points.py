"""Points (``--at``): what :func:`kinkcheck.language.points.parse_point` and :func:`~kinkcheck.language.points.parse_inputs` accept
and what they refuse (one line naming the input)."""

from __future__ import annotations

import math

import pytest

from kinkcheck.language import expr as ex
from kinkcheck.language import points as pt


@pytest.mark.parametrize(
    "text, expected",
    [
        ("x=0", {"x": 0}),
        ("x=1,y=1", {"x": 1, "y": 1}),
        ("v=[1,3,3]", {"v": [1, 3, 3]}),
        ("x=-0.0", {"x": -0.0}),
        ("m=[[3,1],[3,3]], s=2.5", {"m": [[3, 1], [3, 3]], "s": 2.5}),
        ("x=1e-45", {"x": 1e-45}),
    ],
)
def test_parse_point(text, expected):
    got = pt.parse_point(text)
    assert got == expected, f"--at {text!r}"
    if text == "x=-0.0":
        assert math.copysign(1.0, got["x"]) == -1.0, "-0.0 keeps its sign"


def test_parse_point_keeps_zeros_and_the_smallest_subnormal():
    got = pt.parse_point("x=0.0,y=0e5,z=5e-324")
    assert got == {"x": 0.0, "y": 0.0, "z": 5e-324}, f"only a nonzero literal that became 0 is refused: {got}"


@pytest.mark.parametrize(
    "text, reason",
    [
        ("", "--at is empty"),
        ("x", "expected NAME=VALUE"),
        ("x=", "expected NAME=VALUE"),
        ("1x=2", "is not an input name"),
        ("x=1,x=2", "given twice"),
        ("x=[1,[2]]", "ragged"),
        ("x=[1,2", "unbalanced brackets"),
        ("x=abc", "must be a number"),
        ("x=__import__('os')", "must be a number"),
        ("x=[]", "empty list"),
        ("x=nan", "must be a number"),
        ("x=1e400", "not a finite float64 number"),
        ("v=[1, 1e999]", "not a finite float64 number"),
        ("x=1e-400", "underflows to 0 in float64"),  # it would be measured at the kink 0 itself
        ("v=[1, -2.5e-330]", "-2.5e-330 underflows to -0 in float64"),
        ("x=" + "[" * 500 + "1" + "]" * 500, "malformed value"),
    ],
)
def test_parse_point_refuses(text, reason):
    with pytest.raises(ex.ExprError, match=None) as info:
        pt.parse_point(text)
    assert reason in str(info.value), f"--at {text!r} should say {reason!r}, said {info.value}"


@pytest.mark.parametrize(
    "text",
    ["x=" + "1" + "0" * 309, "v=[1e999999, 2]", "v=[2, -" + "1" + "0" * 309 + "]", "x=" + "9" * 5000,
     "m=[[1, 2], [3, 1e400]]"],
)
def test_point_values_beyond_float64_are_refused(text):
    with pytest.raises(ex.ExprError, match="is not a finite float64 number"):
        pt.parse_point(text)


def test_large_integers_within_float64_stay_exact():
    assert pt.parse_point("x=" + "1" + "0" * 300) == {"x": 10 ** 300}, "an int within float64 range is accepted"


@pytest.mark.parametrize(
    "text, wrt, at, diff, ints",
    [
        ("x=0,k=int:0", None, {"x": 0, "k": 0}, ("x",), ("k",)),
        ("x=0,y=1", "x", {"x": 0, "y": 1}, ("x",), ()),
        ("x=0,y=1", "y, x", {"x": 0, "y": 1}, ("x", "y"), ()),
        ("x=0,y=1", ["y"], {"x": 0, "y": 1}, ("y",), ()),
        ("n=int:[1,-2],v=[0,1]", None, {"n": [1, -2], "v": [0, 1]}, ("v",), ("n",)),
        ("k = int: -3, x=2", None, {"k": -3, "x": 2}, ("x",), ("k",)),
    ],
)
def test_parse_inputs_marks_integer_and_constant_inputs(text, wrt, at, diff, ints):
    got = pt.parse_inputs(text, wrt)
    assert (got.at, got.wrt, got.ints) == (at, diff, ints), f"--at {text!r} --wrt {wrt!r}: {got}"
    assert all(type(v) is int for k in ints for v in (got.at[k] if isinstance(got.at[k], list) else [got.at[k]]))
    assert got.constants == tuple(k for k in at if k not in diff), "every other input is a constant"


def test_parse_inputs_takes_non_finite_points():
    got = pt.parse_inputs("x=inf,y=-inf,v=[0,nan],w=[[1,-inf]]")
    assert got.at["x"] == math.inf and got.at["y"] == -math.inf, got
    assert got.at["v"][0] == 0 and math.isnan(got.at["v"][1]) and got.at["w"] == [[1, -math.inf]], got
    assert pt.parse_point("x=inf", allow_nonfinite=True) == {"x": math.inf}
    for text in ("x=inf", "x=nan", "v=[0,-inf]"):  # a catalog's point stays finite
        with pytest.raises(ex.ExprError, match="must be a number"):
            pt.parse_point(text)


@pytest.mark.parametrize(
    "text, wrt, reason",
    [
        ("x=1e999", None, "not a finite float64 number ('1e999'); write inf or -inf"),
        ("v=[1, -1e400]", None, "not a finite float64 number"),
        ("k=int:1.5", None, "an int: value must be integers"),
        ("k=int:inf", None, "an int: value must be an integer"),
        ("k=int:True", None, "an int: value must be an integer"),
        ("k=int:" + str(2 ** 63), None, "does not fit in int64"),
        ("k=int:[1,[2]]", None, "ragged"),
        ("k=int:0", None, "every --at input is int:"),
        ("x=0,k=int:0", "k", "an int: input; integer inputs are never differentiated"),
        ("x=0", "y", "--wrt names 'y', which --at does not give"),
        ("x=0", "x,x", "--wrt names 'x' twice"),
        ("x=0", "", "expected input names separated by commas"),
        ("x=0", "x,", "expected input names separated by commas"),
        ("x=inff", None, "inf, -inf or nan"),
        ("x=float('inf')", None, "must be a number"),
        ("x=int:0", None, "every --at input is int:"),
    ],
)
def test_parse_inputs_refuses(text, wrt, reason):
    with pytest.raises(ex.ExprError) as info:
        pt.parse_inputs(text, wrt)
    assert reason in str(info.value) and "\n" not in str(info.value), f"--at {text!r} --wrt {wrt!r}: {info.value}"


def test_int_prefix_is_grad_only():
    with pytest.raises(ex.ExprError, match="malformed value for 'k'"):
        pt.parse_point("x=0,k=int:0")
