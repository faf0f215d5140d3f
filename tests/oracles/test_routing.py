"""The tie routings by input position (kinkcheck.oracles.routing): ``first`` credits each tied selection's
earliest tied input, ``last`` its latest.

Values known by hand, the report's own cases, and random compositions of max, min, cummax, sort and top-k
over tied vectors whose routing this test computes itself with NumPy (stable orderings by value then position).
"""

from __future__ import annotations

import numpy as np
import pytest
import sympy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kinkcheck.catalog import Case
from kinkcheck.oracles.classify import OracleNumbers, classify
from kinkcheck.oracles.routing import NotRoutable, routing, routing_of
from kinkcheck.oracles.symbolic import analyze


def _case(expr: str, **at: object) -> Case:
    return Case(id="t@0", title="t", sympy=expr, at=at, tie=True)


def _ints(v: tuple[sympy.Expr, ...]) -> list[object]:
    return [int(c) if c == int(c) else c for c in v]


@pytest.mark.parametrize(("expr", "at", "first", "last"), [
    # torch.cummax(v, 0).values.sum() at [1, 1] (issue 44): first credits v[0] twice, last gives v[1] its max
    ("v[0] + Max(v[0], v[1])", {"v": [1, 1]}, [2, 0], [1, 1]),
    ("v[0] + Max(v[0], v[1]) + Max(v[0], v[1], v[2])", {"v": [1, 1, 0]}, [3, 0, 0], [1, 2, 0]),
    ("Max(x, y)", {"x": 1, "y": 1}, [1, 0], [0, 1]),
    ("Min(Max(x, lo), hi)", {"x": 1, "lo": 0, "hi": 1}, [1, 0, 0], [0, 0, 1]),
    ("Max(v) - Min(v)", {"v": [1, 0, 1, 0]}, [1, -1, 0, 0], [0, 0, 1, -1]),
    ("kth_smallest(v, 2)", {"v": [1, 0, 1, 0]}, [0, 1, 0, 0], [0, 0, 0, 1]),
    # top-2 of three tied ones: the two earliest / the two latest
    ("kth_smallest(v, 3) + kth_smallest(v, 4)", {"v": [1, 1, 1, 0]}, [1, 1, 0, 0], [0, 1, 1, 0]),
    # a max-pool's two windows share the tied m[1][1]
    ("Max(m[0][0], m[0][1], m[1][0], m[1][1]) + Max(m[0][1], m[0][2], m[1][1], m[1][2])",
     {"m": [[3, 1, 3], [1, 3, 1]]}, [1, 0, 1, 0, 0, 0], [0, 0, 0, 0, 2, 0]),
    # the chain rule through a smooth outer function: d(1/u) = -du/u**2
    ("1 / (Max(v) - Min(v))", {"v": [0, 0, 1]}, [1, 0, -1], [0, 1, -1]),
])
def test_routing_by_hand(expr: str, at: dict[str, object], first: list[int], last: list[int]) -> None:
    got = routing(_case(expr, **at))
    assert got.first is not None and _ints(got.first) == first, f"first of {expr} at {at}: {got.first}, expected {first}"
    assert got.last is not None and _ints(got.last) == last, f"last of {expr} at {at}: {got.last}, expected {last}"


@pytest.mark.parametrize(("expr", "at", "why"), [
    # ranks 2 and 3 of one tied group with coefficients -1 and +1: both routings credit v[0] and v[1]
    ("kth_smallest(v, 3) - kth_smallest(v, 2)", {"v": [1, 1, 0]}, "different coefficients"),
    ("Max(Abs(x - y), Abs(y - x))", {"x": 1, "y": 1}, "Abs at 0"),
    # a repeated eigenvalue: a tie between smooth pieces (the sqrt at 0), which no input position names
    ("(x + y) / 2 + sqrt(((x - y) / 2)**2 + z**2)", {"x": 1, "y": 1, "z": 0}, "sqrt is not differentiable"),
    ("Max(x, y) + x * y", {"x": 1, "y": 0}, "no max, min or order statistic"),
    ("Max(x, 0)", {"x": 0}, "reaches no input"),
    ("Piecewise((x, x >= y), (y, True))", {"x": 1, "y": 1}, "comparison"),
])
def test_routing_refused_where_position_does_not_decide(expr: str, at: dict[str, object], why: str) -> None:
    got = routing(_case(expr, **at))
    assert got.first is None and got.last is None, f"{expr} at {at}: routed {got.first}, {got.last}"
    assert got.reason is not None and why in got.reason, f"{expr}: reason {got.reason!r} should say {why!r}"


def test_same_field_different_spelling() -> None:
    """3*v0 - max(v0, v1) and 2*v0 - v1 + min(v0, v1) are one function with one field, but the max credits v0
    with -1 and the min credits v0 with +1: the routing is the spelling's, which is why the case's expression
    (not its limiting gradients) decides it."""
    a = routing_of(_case("3 * v[0] - Max(v[0], v[1])", v=[1, 1]), "first")
    b = routing_of(_case("2 * v[0] - v[1] + Min(v[0], v[1])", v=[1, 1]), "first")
    assert _ints(a) == [2, 0] and _ints(b) == [3, -1], f"first routings {a} and {b}"


def test_routing_rule_must_be_named() -> None:
    with pytest.raises(ValueError, match="first"):
        routing_of(_case("Max(x, y)", x=1, y=1), "middle")
    with pytest.raises(NotRoutable, match="no max"):
        routing_of(_case("x + y", x=1, y=1), "first")


# --------------------------------------------------------------------------- the oracle and the classifier


@pytest.mark.parametrize(("case", "value", "label", "not_label"), [
    # issue 44: torch's cummax gives [1, 2, 0] (the latest occurrence), TensorFlow's [3, 0, 0]
    (_case("v[0] + Max(v[0], v[1]) + Max(v[0], v[1], v[2])", v=[1, 1, 0]), [1, 2, 0], "last", "first"),
    (_case("v[0] + Max(v[0], v[1]) + Max(v[0], v[1], v[2])", v=[1, 1, 0]), [3, 0, 0], "first", "last"),
    (_case("kth_smallest(v, 3) + kth_smallest(v, 4)", v=[1, 1, 1, 0]), [1, 1, 0, 0], "first", "one-index"),
    # a limiting gradient of a tie position does not name: one-index, never first or last
    (_case("kth_smallest(v, 3) - kth_smallest(v, 2)", v=[1, 1, 0]), [-1, 1, 0], "one-index", "first"),
    (_case("Max(v)", v=[1, 0, 1, 0, 1]), [0, 0, 1, 0, 0], "one-index", "first"),
])
def test_classify_reads_the_routing(case: Case, value: list[int], label: str, not_label: str) -> None:
    oracle = analyze(case)
    labels = classify([float(c) for c in value], oracle, "float64")
    assert label in labels and not_label not in labels, f"{case.sympy} at {case.at}: {value} labelled {labels}"
    numbers = OracleNumbers.from_json(oracle.to_json())  # the report classifies from the cached JSON
    assert classify([float(c) for c in value], numbers, "float64") == labels, f"{case.sympy}: JSON round trip"


# --------------------------------------------------------------------------- random compositions


def _argbest(values: np.ndarray, idx: list[int], largest: bool, rule: str) -> int:
    """The index of ``idx`` a max (``largest``) or min credits: the extreme value, then the earliest/latest."""
    best = max(values[i] for i in idx) if largest else min(values[i] for i in idx)
    tied = [i for i in idx if values[i] == best]
    return tied[0] if rule == "first" else tied[-1]


@st.composite
def _compositions(draw: st.DrawFn) -> tuple[str, list[int], dict[str, list[int]]]:
    """A sum of coefficient times selection over a tied vector, and the routings computed here with NumPy."""
    n = draw(st.integers(3, 6))
    v = draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
    vals = np.array(v)
    terms: list[str] = []
    expected = {"first": np.zeros(n, dtype=int), "last": np.zeros(n, dtype=int)}
    used_order_stat = False
    for _ in range(draw(st.integers(1, 4))):
        c = draw(st.sampled_from([1, 2, 3, -1, -2]))
        kind = draw(st.sampled_from(["max", "min", "cummax", "cummin", "topk", "sort"]))
        if kind in ("topk", "sort") and used_order_stat:
            kind = "max"  # one order statistic per vector: two on one tied group may not be decided by position
        if kind in ("max", "min"):
            idx = sorted(draw(st.sets(st.integers(0, n - 1), min_size=2, max_size=n)))
            terms.append(f"{c} * {'Max' if kind == 'max' else 'Min'}({', '.join(f'v[{i}]' for i in idx)})")
            for rule in expected:
                expected[rule][_argbest(vals, idx, kind == "max", rule)] += c
        elif kind in ("cummax", "cummin"):  # torch.cummax(v, 0).values[j]: the max of the prefix
            j = draw(st.integers(1, n - 1))
            idx = list(range(j + 1))
            terms.append(f"{c} * {'Max' if kind == 'cummax' else 'Min'}({', '.join(f'v[{i}]' for i in idx)})")
            for rule in expected:
                expected[rule][_argbest(vals, idx, kind == "cummax", rule)] += c
        elif kind == "topk":  # torch.topk(v, k).values.sum(): the k largest
            used_order_stat = True
            k = draw(st.integers(1, n - 1))
            terms.append(f"{c} * ({' + '.join(f'kth_smallest(v, {r})' for r in range(n - k + 1, n + 1))})")
            for rule in expected:  # order by value, ties by position: the earliest (first) or latest (last) win
                pos = np.arange(n) if rule == "first" else -np.arange(n)
                for i in np.lexsort((pos, -vals))[:k]:
                    expected[rule][i] += c
        else:  # torch.sort(v).values[j]: the (j+1)-th smallest, one rank of its tied group
            used_order_stat = True
            j = draw(st.integers(0, n - 1))
            terms.append(f"{c} * kth_smallest(v, {j + 1})")
            target = np.sort(vals)[j]
            tied = [i for i in range(n) if vals[i] == target]
            expected["first"][tied[0]] += c
            expected["last"][tied[-1]] += c
    return " + ".join(terms), v, {r: [int(x) for x in e] for r, e in expected.items()}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_compositions())
def test_random_compositions_route_as_computed_here(drawn: tuple[str, list[int], dict[str, list[int]]]) -> None:
    expr, v, expected = drawn
    case = _case(expr, v=v)
    for rule in ("first", "last"):
        try:
            got = _ints(routing_of(case, rule))
        except NotRoutable as err:
            # only when nothing is tied: then the routing is not a tie's, and both rules agree with the gradient
            assert "no max, min or order statistic" in str(err), f"{expr} at {v}: {rule} refused: {err}"
            continue
        assert got == expected[rule], f"{expr} at v={v}: {rule} routing {got}, computed here {expected[rule]}"


# --------------------------------------------------------------------------- every tie cell of the report


def test_every_tie_label_of_the_committed_report_follows_input_position() -> None:
    """Every cell of the committed report at a tie case: ``first`` exactly where the value is the case's
    ``first`` routing (within the dtype's tolerance), ``last`` likewise, and ``one-index`` only on a limiting
    gradient that is neither (the audit of issue 44's relabelling; first-order modes)."""
    from pathlib import Path

    import pyarrow.parquet as pq

    from kinkcheck.catalog import load_catalog
    from kinkcheck.oracles.classify import same_value
    from kinkcheck.oracles.table import oracle_table

    catalog = load_catalog()
    tie_cases = [c.id for c in catalog if c.tie]
    oracles = {cid: OracleNumbers.from_json(d) for cid, d in oracle_table(catalog).items() if cid in tie_cases}
    path = Path(__file__).resolve().parents[2] / "reports" / "observations.parquet"
    rows = pq.read_table(path, columns=["case", "environment", "program", "mode", "dtype", "status", "value", "labels"],
                         filters=[("case", "in", tie_cases), ("status", "=", "ok")]).to_pylist()
    import json

    checked = 0
    for r in rows:
        if r["mode"] == "second-order":
            continue
        o = oracles[r["case"]]
        value = [float(x) for v in json.loads(r["value"]).values() for x in np.ravel(np.asarray(v, dtype=float))]
        if any(np.isnan(value)) or not all(np.isfinite(value)):
            continue
        labels = set(r["labels"])
        where = f"{r['case']} {r['environment']} {r['program']} {r['mode']} {r['dtype']}: {value} labelled {sorted(labels)}"
        for rule in ("first", "last"):
            target = getattr(o, rule)
            expected = target is not None and same_value(value, list(target), r["dtype"])
            assert (rule in labels) == expected, f"{where}; the case's {rule} routing is {target}"
        if "one-index" in labels:
            assert not labels & {"first", "last"} and any(
                same_value(value, list(g), r["dtype"]) for g in o.limiting_gradients), where
        checked += 1
    assert checked > 40_000, f"only {checked} tie cells checked: the report should hold tens of thousands"
