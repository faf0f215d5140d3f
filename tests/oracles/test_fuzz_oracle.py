"""Fuzz the sympy oracle: generated expressions in the catalog's ``sympy`` language at generated points.

Each example is a catalog-style case (``Case(sympy=text, at=point)``) judged by
:func:`kinkcheck.oracles.symbolic.analyze`: the text goes through the same parser, name resolution and exact
constants as a catalog case, then :func:`~kinkcheck.oracles.symbolic.analyze_expression`. The grammar covers
the namespace (``Max``, ``Min``, ``Abs``, ``sqrt``, ``exp``, ``log``, ``floor``, ``sign``, ``Heaviside``,
``Piecewise``, ``atan2``, ``xlogy``, ``sin``, ``erf`` …) over the inputs ``x``, ``y``, ``v[0]``, ``v[1]`` with
constants tiny, huge, negative and irrational, at points drawn from the same constants (so pieces tie), and
sometimes ``inf``/``-inf``/``nan`` (public case Q10).

The oracle must never raise (``not-judged`` is allowed), and its result must be consistent:

* ``not-judged`` has a ``reason`` starting "not judged:" and nothing else; any other kind has no reason;
* ``differentiable``: one limiting gradient, equal to ``derivative``, ``clarke`` and ``min_norm``, finite;
* a Clarke set holds its minimum-norm element, which is the one computed here (NumPy, over subsets of the
  vertices, for up to three components), and every vertex is finite;
* ``lipschitz`` False means no Clarke set, True means one, and a jump is never Lipschitz;
* the JSON form round-trips through :class:`kinkcheck.oracles.classify.OracleNumbers` and :func:`~kinkcheck.oracles.classify.classify`
  labels the oracle's own values as they are (``left``, ``min-norm``, ``in-clarke``), never ``outside-clarke``.

Examples: ``KINKCHECK_FUZZ_EXAMPLES`` (default 300; ``nox -s fuzz`` runs 10,000). Each example runs under a
generous time bound (``KINKCHECK_FUZZ_SECONDS``, default 120 s) so that a sympy call that never returns is
reported with its input rather than hanging the run; that bound is a hang guard, far above the ~0.1 s an
example takes.
"""

from __future__ import annotations

import json
import math
import os
import signal
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, event, given, note, settings
from hypothesis import strategies as st
from test_oracle_independent import min_norm

from kinkcheck.catalog import Case
from kinkcheck.oracles.classify import OracleNumbers, classify
from kinkcheck.oracles.symbolic import analyze

EXAMPLES = int(os.environ.get("KINKCHECK_FUZZ_EXAMPLES", "300"))
SECONDS = int(os.environ.get("KINKCHECK_FUZZ_SECONDS", "120"))
KINDS = {"differentiable", "kink", "jump", "undefined", "not-judged"}

CONSTANTS = ["0", "1", "-1", "2", "3", "0.5", "-1.5", "7.25", "1e-300", "1e-35", "-1e-20", "1e300", "pi", "E"]
POINT_VALUES = [0.0, 1.0, -1.0, 2.0, 3.0, 0.5, -1.5, 7.25, 1e-300, 1e-35, -1e-20, 1e300, -0.0]
#: Where kinks usually are: drawn half the time.
KINK_VALUES = [0.0, 1.0, -1.0, 0.5]
NON_FINITE = [math.inf, -math.inf, math.nan]
UNARY = ["Abs", "sqrt", "exp", "log", "floor", "ceiling", "sign", "Heaviside", "sin", "cos", "tan", "atan", "tanh",
         "sinh", "erf", "erfc", "sigmoid", "log1p", "expm1", "sinc", "asinh", "trunc", "frac"]
BINARY = ["Max", "Min", "atan2", "xlogy", "xlog1py", "Mod"]
EXPONENTS = ["2", "3", "0.5", "(1/3)", "-1"]
#: Input layouts: the names a case's ``at`` holds, and the leaves they give.
LAYOUTS = {"x": ["x"], "xy": ["x", "y"], "xv": ["x", "v[0]", "v[1]"]}


def _expr(leaves: list[str]):
    leaf = st.one_of(st.sampled_from(leaves), st.sampled_from(leaves + CONSTANTS))  # inputs at least half the time

    def extend(sub):
        return st.one_of(
            st.builds(lambda f, a: f"{f}({a})", st.sampled_from(UNARY), sub),
            st.builds(lambda f, a, b: f"{f}({a}, {b})", st.sampled_from(BINARY), sub, sub),
            st.builds(lambda a, b, c: f"Max({a}, {b}, {c})", sub, sub, sub),
            st.builds(lambda a, op, b: f"({a} {op} {b})", sub, st.sampled_from(["+", "-", "*", "/"]), sub),
            st.builds(lambda a, e: f"({a}) ** {e}", sub, st.sampled_from(EXPONENTS)),
            st.builds(lambda a: f"(-{a})", sub),
            st.builds(lambda a, rel, b, c, d: f"Piecewise(({a}, {b} {rel} {c}), ({d}, True))",
                      sub, st.sampled_from([">", ">=", "<", "<="]), sub, sub, sub),
            st.builds(lambda a, b, c, d: f"Piecewise(({a}, Eq({b}, {c})), ({d}, True))", sub, sub, sub, sub),
        )

    return st.recursive(leaf, extend, max_leaves=6)


@st.composite
def cases(draw) -> Case:
    layout = draw(st.sampled_from(list(LAYOUTS)))
    text = draw(_expr(LAYOUTS[layout]))
    value = st.one_of(st.sampled_from(POINT_VALUES), st.sampled_from(NON_FINITE)) if draw(st.integers(0, 9)) == 0 \
        else st.one_of(st.sampled_from(KINK_VALUES), st.sampled_from(POINT_VALUES))
    at = {"x": draw(value)}
    if layout == "xy":
        at["y"] = draw(value)
    elif layout == "xv":
        at["v"] = [draw(value), draw(value)]
    return Case(id="fuzz", title="fuzz", sympy=text, at=at, tie=draw(st.booleans()))


#: Exceptions the fuzz found escaping ``analyze`` (sympy's ``Mod(x, 0)``, mpmath's ``erfc(1e300)``), pinned by
#: the strict xfail tests at the end of this file. The fuzz counts them (``--hypothesis-show-statistics``) and
#: goes on; when those tests pass (XPASS fails them), empty this tuple and drop their xfail marks.
KNOWN_ESCAPES: tuple[type[BaseException], ...] = ()


class Hang(BaseException):
    """The oracle did not answer within the hang guard (a BaseException: no ``except Exception`` in sympy
    swallows it)."""


def _judge(case: Case):
    """``analyze(case)`` under the hang guard (SIGALRM, main thread only)."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGALRM"):
        return analyze(case)

    def ring(signum, frame):
        raise Hang(f"no answer in {SECONDS} s")

    old = signal.signal(signal.SIGALRM, ring)
    # then again every second: a signal that lands in a gc callback is swallowed ("Exception ignored in ...")
    signal.setitimer(signal.ITIMER_REAL, SECONDS, 1.0)
    try:
        return analyze(case)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _f(v) -> float:
    return float(v)


def _finite(v) -> bool:
    """Finite and real as an exact number (``exp(10**300)`` is, though no float64 holds it)."""
    return bool(v.is_finite) and v.is_real is not False


def problems(r) -> list[str]:
    """Every inconsistency of one OracleResult (empty when it is consistent)."""
    out = []
    n = len(r.components)
    if r.kind not in KINDS:
        out.append(f"unknown kind {r.kind!r}")
    if r.kind == "not-judged":
        if not (isinstance(r.reason, str) and r.reason.startswith("not judged:")):
            out.append(f"not-judged without a 'not judged: ...' reason: {r.reason!r}")
        if r.lipschitz is not None or r.clarke is not None or r.derivative is not None or r.min_norm is not None:
            out.append("not-judged but carries values")
        return out
    if r.reason is not None:
        out.append(f"kind {r.kind} with a reason {r.reason!r}")
    if r.kind == "jump" and r.lipschitz is not False:
        out.append(f"a jump with lipschitz {r.lipschitz}")
    if r.lipschitz is False and r.clarke is not None:
        out.append("lipschitz False but a Clarke set")
    if r.lipschitz is True and r.clarke is None:
        out.append("lipschitz True but no Clarke set")
    if r.kind == "differentiable":
        if len(r.limiting_gradients) != 1:
            out.append(f"differentiable with {len(r.limiting_gradients)} limiting gradients")
        g = r.derivative
        if g is None or any(not _finite(c) for c in g):
            out.append(f"differentiable with derivative {g}")
        elif r.limiting_gradients and tuple(r.limiting_gradients[0]) != tuple(g):
            out.append(f"derivative {g} is not the limiting gradient {r.limiting_gradients[0]}")
        if r.clarke is None or len(r.clarke) != 1 or r.min_norm != g:
            out.append(f"differentiable: clarke {r.clarke}, min_norm {r.min_norm}, derivative {g}")
        if n == 1 and r.left is not None and r.right is not None and not (r.left == r.right == g[0]):
            out.append(f"differentiable with left {r.left}, right {r.right}, derivative {g}")
    if r.clarke is not None:
        if any(len(v) != n or not all(_finite(c) for c in v) for v in r.clarke):
            out.append(f"a Clarke vertex that is not a finite vector of {n}: {r.clarke}")
        elif r.min_norm is None:
            out.append("a Clarke set without a min-norm element")
        elif all(math.isfinite(_f(c)) for v in r.clarke for c in v):  # else beyond float64 (exp(1e300))
            verts = [tuple(_f(c) for c in v) for v in r.clarke]
            mn = np.array([_f(c) for c in r.min_norm])
            size = max(abs(c) for v in verts for c in v)
            if n <= 3 and len(verts) <= 12 and size > 0:  # computed on verts / size: no Gram over- or underflow
                want = min_norm([tuple(c / size for c in v) for v in verts]) * size
                if not np.allclose(mn, want, atol=1e-9 * size, rtol=1e-9):
                    out.append(f"min-norm {r.min_norm} but the nearest point of conv(clarke) to 0 is {want.tolist()}")
            unit = mn / size if size > 0 else mn
            if any(float(unit @ unit) > float(v @ v) * (1 + 1e-9) + 1e-12
                   for v in (np.array(v) / size if size > 0 else np.array(v) for v in verts)):
                out.append(f"min-norm {r.min_norm} is longer than a vertex of {r.clarke}")
    for name in ("left", "right"):
        v = getattr(r, name)
        if v is not None and math.isnan(_f(v)):
            out.append(f"{name} is nan")
    return out


def labels_problems(r) -> list[str]:
    """classify on the oracle's own values, live and through JSON."""
    out = []
    d = json.loads(json.dumps(r.to_json()))  # no sympy object leaks into the JSON
    nums = OracleNumbers.from_json(d)
    if nums.lipschitz != r.lipschitz or nums.reason != r.reason or nums.kind != r.kind:
        out.append(f"JSON round trip changed lipschitz/reason/kind: {nums.lipschitz}, {nums.reason}, {nums.kind}")
    n = len(r.components)
    probes = [[0.0] * n]
    if r.min_norm is not None:
        probes.append([_f(c) for c in r.min_norm])
    if n == 1 and r.left is not None:
        probes.append([_f(r.left)])
    for value in probes:
        for oracle in (r, nums):
            got = classify(value, oracle, "float64")
            if not got:
                out.append(f"no label for {value}")
            if r.kind == "not-judged" and all(math.isfinite(c) for c in value) and got != ["not-judged"]:
                out.append(f"{value} at a not-judged case labelled {got}")
            if r.min_norm is not None and value == probes[1] and r.kind == "kink" and r.clarke is not None \
                    and not {"min-norm", "in-clarke"} <= set(got) and all(math.isfinite(c) for c in value):
                out.append(f"the oracle's own min-norm {value} labelled {got}")
            if "outside-clarke" in got and r.lipschitz is False:
                out.append(f"{value} labelled outside-clarke where f is not locally Lipschitz")
    return out


#: No shrinking: one sympy call takes up to seconds and shrinking a failure took more than five minutes; the
#: failing input is printed (``note``) as generated, at most six leaves.
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None, print_blob=True,
                phases=[Phase.explicit, Phase.reuse, Phase.generate],
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large])


@FUZZ
@given(cases())
def test_the_oracle_answers_every_generated_expression_consistently(case):
    note(f"sympy = {case.sympy!r}, at = {case.at!r}, tie = {case.tie}")
    try:
        r = _judge(case)
    except Hang:
        pytest.fail(f"the oracle hung (> {SECONDS} s) on sympy = {case.sympy!r} at {case.at!r}")
    except KNOWN_ESCAPES as err:  # pinned below as strict xfails; counted, not hidden
        event(f"known oracle finding: {type(err).__name__} escapes analyze()")
        return
    event(f"kind {r.kind}")
    bad = problems(r) + labels_problems(r)
    assert not bad, f"sympy = {case.sympy!r} at {case.at!r}: {bad}; result {r}"


@pytest.mark.parametrize(("text", "at"), [
    ("Max(x, 1e-300)", {"x": 0.0}),                       # Q3: a constant far below the probe scale
    ("atan2(y, x)", {"x": 0.0, "y": 0.0}),                # Q6: not continuous at the origin
    ("xlogy(x, y)", {"x": 0.0, "y": 0.0}),                # Q7
    ("sqrt(Abs(x - 1)) + 1", {"x": 1.0}),                 # Q5: infinite one-sided derivatives
    ("Piecewise((exp(x), x <= 10), (1, True))", {"x": math.inf}),  # Q10: a point at infinity
    ("Max(x, 0)", {"x": math.nan}),                       # a nan point: not judged
    ("x**2 * sin(1/x)", {"x": 0.0}),                      # a gradient with no limit: not judged
    ("floor(x) * Max(v[0], v[1])", {"x": 1.0, "v": [2.0, 2.0]}),
])
def test_pinned_fuzz_inputs_are_consistent(text, at):
    """Inputs of the kinds the fuzz generates, pinned, so a change in behaviour shows without the fuzz."""
    r = _judge(Case(id="pinned", title="pinned", sympy=text, at=at))
    bad = problems(r) + labels_problems(r)
    assert not bad, f"{text} at {at}: {bad}; result {r}"


@pytest.mark.parametrize(("text", "error"), [
    ("Mod(x, 0)", ZeroDivisionError),  # both escaped analyze() before the fix in to_sympy
    ("Min(erfc(1e300), x * 0.5)", OverflowError),
])
def test_sympy_arithmetic_errors_are_not_judged_rather_than_raised(text, error):
    r = analyze(Case(id="arith", title="arith", sympy=text, at={"x": 1.0}))
    assert r.kind == "not-judged" and r.reason.startswith("not judged:"), f"{text}: {r}"


def test_a_tiny_positive_scaling_keeps_the_clarke_set():
    """``Max(0, a, b) / 10**300`` at the origin: the Clarke set is ``10**-300 conv{0, e_a, e_b}``, min-norm 0."""
    import sympy

    from kinkcheck.oracles.symbolic import analyze_expression

    a, b = sympy.symbols("a b", real=True)
    c = sympy.Rational(1, 10**300)
    r = analyze_expression(sympy.Max(0, a, b) * c, (a, b), (sympy.Integer(0), sympy.Integer(0)))
    assert r.kind == "kink" and set(r.clarke) == {(0, 0), (c, 0), (0, c)} and r.min_norm == (0, 0), r
