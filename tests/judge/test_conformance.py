"""Conformance with each framework's documented rule: the oracle's kink shape, predictions, verdicts, report."""

from __future__ import annotations

import math

import pytest
from conftest import ROOT

from kinkcheck.judge import conformance as conf
from kinkcheck.oracles.classify import OracleNumbers
from kinkcheck.oracles.symbolic import analyze
from kinkcheck.judge.build import build
from kinkcheck.shards import read_shard

OBS = ROOT / "references" / "observations"


def numbers(catalog, case_id: str) -> OracleNumbers:
    return OracleNumbers.from_json(analyze(catalog.case(case_id)).to_json())


@pytest.mark.parametrize(("case_id", "shape"), [
    ("relu@0", "convex"),          # left 0 < right 1
    ("clamp@-1", "convex"),        # locally max(x, -1)
    ("clamp@1", "concave"),        # locally min(x, 1)
    ("abs@0", "convex"),
    ("minimum@tie", "concave"),
    ("maximum@tie", "convex"),
    ("norm2@origin", "convex"),    # singular piece: the limiting gradients are the unit directions
    ("selu@0", "neither"),         # left slope 1.758 > right 1.051, but the left piece is strictly convex
    ("hardswish@3", "neither"),    # left piece x(x+3)/6 is convex, the kink concave
])
def test_oracle_shape_from_directional_derivatives(catalog, case_id, shape):
    assert analyze(catalog.case(case_id)).shape == shape, f"{case_id} should be a {shape} kink"


@pytest.mark.parametrize("case_id", ["sqrt@0", "floor@1", "sign@0"])
def test_no_shape_without_a_clarke_set(catalog, case_id):
    r = analyze(catalog.case(case_id))
    assert r.clarke is None and r.shape is None, f"{case_id}: shape is only defined for a Lipschitz kink"


def _tree(catalog, case_id, framework, program):
    return catalog.case(case_id).program(framework, program).tree


@pytest.mark.parametrize(("case_id", "program", "value", "expected"), [
    ("relu@0", "torch.relu(x)", [0.0], "conforms"),              # min-norm subgradient of a convex kink
    ("relu@0", "torch.clamp(x, min=0)", [1.0], "departs"),       # torch <= 2.13 returned 1
    ("clamp@1", "torch.clamp(x, -1, 1)", [0.0], "conforms"),     # concave: min-norm supergradient 0
    ("clamp@1", "torch.clamp(x, -1, 1)", [1.0], "departs"),
    ("abs@0", "torch.abs(x)", [0.0], "conforms"),
    ("maximum@tie", "torch.maximum(x, y)", [0.5, 0.5], "conforms"),
    ("maximum@tie", "torch.maximum(x, y)", [1.0, 0.0], "departs"),  # a subgradient, but not the min-norm one
    ("sqrt@0", "torch.sqrt(x)", [math.inf], "conforms"),         # step 4: by continuity, inf is possible
    ("selu@0", "torch.nn.functional.selu(x)", [1.7580993408473766], "conforms"),  # step 4: either side
    ("relu@0", "torch.relu(-x) + x", [1.0], "open"),             # composite: the rule is per operation
    ("relu@0", "torch.maximum(x, torch.zeros_like(x))", [0.5], "open"),  # a tensor argument: a 2-input max
])
def test_torch_rule(catalog, case_id, program, value, expected):
    p = conf.predict("torch", _tree(catalog, case_id, "torch", program), numbers(catalog, case_id))
    assert conf.verdict(p, value, "float64") == expected, f"{program} = {value} at {case_id}: {p}"


def test_torch_rule_steps(catalog):
    assert conf.predict("torch", _tree(catalog, "clamp@-1", "torch", "torch.clamp(x, -1, 1)"),
                        numbers(catalog, "clamp@-1")).step.startswith("2."), "convex kink: step 2"
    assert conf.predict("torch", _tree(catalog, "clamp@1", "torch", "torch.clamp(x, -1, 1)"),
                        numbers(catalog, "clamp@1")).step.startswith("3."), "concave kink: step 3"
    assert conf.predict("torch", _tree(catalog, "sqrt@0", "torch", "torch.sqrt(x)"),
                        numbers(catalog, "sqrt@0")).step.startswith("4."), "edge of the domain: step 4"


@pytest.mark.parametrize(("case_id", "program", "value", "expected"), [
    ("relu@0", "jax.nn.relu(x)", [0.0], "conforms"),                  # documented relu'(0) = 0
    ("relu@0", "jax.nn.relu(x)", [0.5], "departs"),
    ("relu@0", "jax.numpy.maximum(x, 0.0)", [0.5], "conforms"),       # lax.max ties share evenly
    ("relu@0", "jax.numpy.maximum(x, 0.0)", [0.0], "departs"),
    ("maximum@tie", "jax.numpy.maximum(x, y)", [0.5, 0.5], "conforms"),
    ("abs@0", "jax.numpy.abs(x)", [1.0], "open"),                     # no documented choice for abs
    ("relu@0", "jax.nn.relu(-x) + x", [1.0], "open"),                 # a composite: no documented rule
])
def test_jax_rule(catalog, case_id, program, value, expected):
    p = conf.predict("jax", _tree(catalog, case_id, "jax", program), numbers(catalog, case_id))
    assert conf.verdict(p, value, "float64") == expected, f"{program} = {value} at {case_id}: {p}"


def test_no_value_no_verdict(catalog):
    p = conf.predict("torch", _tree(catalog, "relu@0", "torch", "torch.relu(x)"), numbers(catalog, "relu@0"))
    assert conf.verdict(p, None, "float64") is None, "error/unavailable cells get no verdict"


@pytest.fixture(scope="module")
def doc(catalog):
    shards = [read_shard(OBS / f"{e}.json") for e in ("torch-2.13.0-cpu", "torch-2.15.0-cpu", "jax-0.10.2-cpu")]
    return build(shards, catalog)


def test_report_conformance_tracks_the_clamp_change(doc):
    rows = [r for r in doc.conformance.rows if r.case == "relu@0" and r.program == "torch.clamp(x, min=0)"]
    got = [(r.environments, r.verdict) for r in rows]
    assert got == [(["torch-2.13.0-cpu"], "departs"), (["torch-2.15.0-cpu"], "conforms")], \
        f"torch.clamp(x, min=0) at 0 should depart in 2.13.0 (1) and conform in 2.15.0 (0): {got}"
    assert rows[0].predicted == [[0]] and rows[0].step.startswith("2."), rows[0]


def test_low_precision_and_rounded_inputs_are_not_judged(doc):
    low = [o for o in doc.observations if o.dtype in ("float16", "bfloat16") and o.conformance is not None]
    assert not low, f"float16/bfloat16 cells must carry no verdict: {low[:2]}"
    rounded = [o for o in doc.observations if o.input is not None and o.conformance is not None]
    assert not rounded, f"cells whose input the dtype rounded carry no verdict: {rounded[:2]}"


def test_report_observations_carry_verdicts(doc):
    obs = [o for o in doc.observations if o.case == "relu@0" and o.program == "jax.nn.relu(x)"
           and o.mode == "jit" and o.dtype == "float32"]
    assert obs and obs[0].conformance == "conforms", obs
    second = [o for o in doc.observations if o.mode == "second-order"]
    assert second and not any(o.conformance is not None for o in second), "second-order cells are not judged"
    newest = doc.conformance.newest
    assert newest["torch"].environment == "torch-2.15.0-cpu" and newest["torch"].departs > 0, newest
    assert sum(doc.summary.conformance.values()) > 0, doc.summary.conformance


def test_not_judged_and_path_dependent_cases_are_open(catalog):
    """No rule is checked against an oracle that did not judge, nor against the path-dependent limits of a
    gradient where f of several inputs is not locally Lipschitz (atan2 at the origin, Q6)."""
    import sympy

    from kinkcheck.oracles.symbolic import analyze_expression, sympy_namespace

    x, y = sympy.symbols("x y", real=True)
    tree = _tree(catalog, "maximum@tie", "torch", "torch.maximum(x, y)")  # one operation: the rule would apply
    wiggle = OracleNumbers.from_json(analyze_expression(x**2 * sympy.sin(1 / x) + 0 * y, (x, y),
                                                        (sympy.Integer(0), sympy.Integer(1))).to_json())
    assert wiggle.kind == "not-judged", wiggle
    for fw in ("torch", "jax"):
        p = conf.predict(fw, tree, wiggle)
        assert p.open and p.step.startswith("not judged:"), f"{fw}: {p}"
        assert conf.verdict(p, [0.0, 0.0], "float64") == "open"
    atan2 = OracleNumbers.from_json(analyze_expression(sympy_namespace()["atan2"](y, x), (y, x),
                                                       (sympy.Integer(0), sympy.Integer(0))).to_json())
    assert atan2.lipschitz is False, atan2
    p = conf.predict("torch", _tree(catalog, "maximum@tie", "torch", "torch.maximum(x, y)"), atan2)
    assert p.open and "not locally Lipschitz" in p.step, p
    sqrt = numbers(catalog, "sqrt@0")
    assert sqrt.lipschitz is False and not conf.predict("torch", _tree(catalog, "sqrt@0", "torch", "torch.sqrt(x)"),
                                                        sqrt).open, "one input: step 4 admits the one-sided limits"
