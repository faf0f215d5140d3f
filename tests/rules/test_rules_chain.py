"""The rules' machinery on hand-worked programs: a program cut at its calls (kinkcheck.rules.graph), the kinds of
kink and the values each rule label names (kinkcheck.rules.local), and reverse mode's chain rule with a chooser
(kinkcheck.rules.chain). Every expected value below is worked out by hand from the functions' definitions."""

from __future__ import annotations

import pytest
import sympy

from kinkcheck.language import expr as ex
from kinkcheck.oracles.mapping import Unmapped
from kinkcheck.rules import chain, graph, local


def cut(program: str, at: dict, framework: str = "torch") -> graph.Graph:
    return graph.build(ex.parse(program, at, {framework}), at, framework)


def by(label: str):
    """A chooser that takes ``label`` at every kink (raises where the label is not defined there)."""

    def choose(site, kink):
        vals = local.label_values(local.local_oracle(kink), kink.kind, kink)
        if label not in vals:
            raise chain.NotPredicted(f"{label} is not defined for {site.name} at {kink.kind}")
        return vals[label]

    return choose


def value(program: str, at: dict, label: str, framework: str = "torch") -> tuple:
    got, _ = chain.backward(cut(program, at, framework), by(label))
    return tuple(got)


# --------------------------------------------------------------------------- the cut


def test_a_program_is_cut_at_its_calls_with_local_forms_over_slots() -> None:
    g = cut("torch.relu(x) * torch.clamp(x, min=0)", {"x": 0})
    assert [s.name for s in g.sites] == ["torch.relu", "torch.clamp"], "two calls, in evaluation order"
    relu, clamp = g.sites
    assert relu.forms == (sympy.Max(0, relu.slots[0]),), f"relu's local form is Max(0, slot): {relu.forms}"
    assert g.total == relu.outputs[0] * clamp.outputs[0], f"the operators between calls stay: {g.total}"
    assert g.defs[relu.slots[0]] == g.inputs[0], "relu's slot is the input x itself"


def test_a_comparison_is_decided_at_the_point() -> None:
    g = cut("torch.where(x > 0, x, 0)", {"x": 0})
    where = g.sites[0]
    assert where.forms == (), f"where(False, x, 0) is the constant 0: no output depends on a slot ({where.forms})"
    assert tuple(chain.backward(g, by("zero"))[0]) == (0,), "AD holds the comparison constant: gradient 0"


@pytest.mark.parametrize(("program", "at", "variant"), [
    ("torch.max(v, dim=0).values", {"v": [1, 1]}, ("dim",)),
    ("torch.max(x, y)", {"x": 1, "y": 1}, ("dim=tensor",)),
    ("torch.clamp(x, min=0)", {"x": 0}, ()),
    ("torch.clamp(x, x * 0, x * 0 + 1)", {"x": 0}, ("min=tensor", "max=tensor")),
    ("jax.numpy.linalg.norm(v, ord=1)", {"v": [0, 0]}, ("ord=1",)),
])
def test_the_overload_a_call_takes_is_its_variant(program, at, variant) -> None:
    fw = program.split(".")[0]
    site = cut(program, at, fw).sites[0]
    assert site.variant == variant, f"{program}: variant {site.variant}, expected {variant}"


def test_a_decomposition_is_not_cut() -> None:
    with pytest.raises(Unmapped, match="decomposition"):
        cut("(torch.linalg.eigh(m).eigenvectors * torch.linalg.eigh(m).eigenvalues @ "
            "torch.linalg.eigh(m).eigenvectors.mT)[0, 1]", {"m": [[1, 0], [0, 1]]})


# --------------------------------------------------------------------------- kinds and label values


@pytest.mark.parametrize(("program", "at", "kind"), [
    ("torch.relu(x)", {"x": 0}, "max at a bound"),
    ("torch.clamp(x, 0, 1)", {"x": 0}, "max at a bound"),
    ("torch.clamp(x, 0, 1)", {"x": 1}, "min at a bound"),
    ("torch.maximum(x, y)", {"x": 1, "y": 1}, "max at a tie"),
    ("torch.amax(v, 0)", {"v": [1, 1, 0]}, "max at a tie"),
    ("torch.abs(x)", {"x": 0}, "abs at 0"),
    ("torch.sign(x)", {"x": 0}, "a jump"),
    ("torch.floor(x)", {"x": 1}, "a jump"),
    ("torch.sqrt(x)", {"x": 0}, "a root at 0"),
])
def test_kinds_of_kink_are_read_from_the_local_form(program, at, kind) -> None:
    _, visits = chain.backward(cut(program, at), by("zero"))
    assert [v.kind for v in visits] == [kind], f"{program} at {at}: {[v.kind for v in visits]}, expected {kind}"


def test_label_values_at_clamps_upper_bound() -> None:
    # clamp(x, 0, 1) at 1: slope 1 on the left, 0 on the right; Clarke set [0, 1], min-norm 0, midpoint 1/2
    g = cut("torch.clamp(x, 0, 1)", {"x": 1})
    got = {label: value("torch.clamp(x, 0, 1)", {"x": 1}, label)
           for label in ("left", "right", "min-norm", "mean", "zero")}
    assert got == {"left": (1,), "right": (0,), "min-norm": (0,), "mean": (sympy.Rational(1, 2),), "zero": (0,)}, got
    assert g.calls == 1


def test_label_values_at_a_tie_of_two_inputs() -> None:
    at = {"x": 1, "y": 1}
    got = {label: value("torch.maximum(x, y)", at, label)
           for label in ("first", "last", "split-even", "every-tied", "min-norm")}
    half = sympy.Rational(1, 2)
    assert got == {"first": (1, 0), "last": (0, 1), "split-even": (half, half), "every-tied": (1, 1),
                   "min-norm": (half, half)}, got


def test_piece_at_point_at_a_jump_of_two_inputs() -> None:
    # remainder(x, y) = x - y*floor(x/y) at (2, 1): the piece holding the point is x - 2y: gradient (1, -2)
    assert value("torch.remainder(x, y)", {"x": 2, "y": 1}, "piece-at-point") == (1, -2)


# --------------------------------------------------------------------------- the chain rule


def test_compositions_take_the_rule_at_each_kink() -> None:
    program = "torch.relu(x) * torch.clamp(x, min=0) + torch.relu(x)"
    # d/dx = relu'·clamp + relu·clamp' + relu' = relu'(0)·0 + 0 + relu'(0): the rule's value itself
    assert value(program, {"x": 0}, "left") == (0,), "relu'(0) = 0 (left)"
    assert value(program, {"x": 0}, "right") == (1,), "relu'(0) = 1 (right)"
    # clamp(2x, 0, 1) at x = 1/2: the inner 2 multiplies the rule's choice at the upper bound
    assert value("torch.clamp(2 * x, 0, 1)", {"x": 0.5}, "left") == (2,)
    assert value("torch.clamp(2 * x, 0, 1)", {"x": 0.5}, "right") == (0,)


def test_a_kink_under_a_zero_cotangent_needs_no_rule() -> None:
    # tinygrad's asinh, sign(x)·log(|x| + sqrt(x² + 1)), at 0: sign's cotangent is log(1) = 0 and abs's is sign(0) = 0
    g = cut("torch.sign(x) * torch.log(torch.abs(x) + torch.sqrt(x * x + 1))", {"x": 0})

    def refuse(site, kink):
        raise chain.NotPredicted(f"no rule wanted here, asked for {site.name}")

    got, visits = chain.backward(g, refuse)
    assert tuple(got) == (0,) and visits == [], f"0 without any rule, got {got} visiting {visits}"


def test_ieee_arithmetic_of_the_chain_rule() -> None:
    # sqrt'(0) = inf; sqrt(x * x) multiplies it by 2x = 0: nan, as torch and JAX return
    got = value("torch.sqrt(x * x)", {"x": 0}, "right")
    assert got[0] is sympy.nan, f"inf × 0 is nan: {got}"
    # the unselected branch of a where: sqrt'(-1) is not real (nan), times the where's 0: nan (the where-nan trap)
    got = value("torch.where(x > 0, torch.sqrt(x), x)", {"x": -1}, "zero")
    assert got[0] is sympy.nan, f"0 × nan is nan: {got}"
    # relu's backward selects (threshold_backward): sqrt's inf at relu(-10) = 0 is masked, not multiplied
    assert value("torch.sqrt(torch.relu(x))", {"x": -10}, "right") == (0,), "a selecting derivative drops inf"


def test_a_kink_outside_any_call_is_not_predicted() -> None:
    with pytest.raises(chain.NotPredicted, match="outside any call"):
        chain.backward(cut("x ** 0.5", {"x": 0}), by("zero"))


def test_a_kink_over_too_many_elements_is_refused() -> None:
    v = [0] * (chain.MAX_LOCAL + 1)
    with pytest.raises(chain.NotPredicted, match="at most"):
        chain.backward(cut("torch.linalg.vector_norm(v)", {"v": v}), by("zero"))
