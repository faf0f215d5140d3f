"""The public cases P0-P9 of ``shared/cases/public-cases.md``, pinned to the framework versions they were
measured on (torch 2.13.0, jax 0.10.2; ``conftest.PINNED``), on CPU.

Every expectation below was measured with those versions before it was written down. Where the measured
value differs from what the report claims, the measured value is pinned and a comment says what differs.
(Measured on 2.13.0+cpu / 0.10.2: every reported value P0-P9 was reproduced; the comments mark values the
report does not state, such as P5 at -0.0 and the float32 subnormals of P4.)

Each test calls ``require_pinned(adapter)`` first: on another version it is skipped with the reason, and the
report shows that version's values as measured. Programs come from the catalog (``references/catalog.toml``)
through the adapters, so a renamed or dropped program fails here with a KeyError.

P10 (TensorFlow: ``tf.minimum``/``tf.maximum`` send a tie to the first argument) has no test: kinkcheck has
no TensorFlow adapter (``kinkcheck.frameworks.KNOWN`` holds torch and jax only), so there is nothing to
measure it with; it becomes a test when a TF adapter exists.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
import sympy
from conftest import require_pinned

from kinkcheck.oracles import backprop
from kinkcheck.oracles.symbolic import analyze
from network import network_grads

THIRD = 1 / 3


def measure(adapter, catalog, case_id, program_id, dtype="float64", mode="reverse", at=None):
    """Gradient of a catalog program, and a message prefix naming program, point, dtype, mode and version."""
    case = catalog.case(case_id)
    program = case.program(adapter.name, program_id)
    point = case.at if at is None else at
    where = f"{program.id} at {point} ({dtype}, {mode}, {adapter.name} {adapter.version}, case {case_id})"
    return adapter.gradient(program.tree, point, dtype, device="cpu", mode=mode), where


def same(got, want) -> bool:
    """Equal as floats, nan equal to nan (component-wise for lists)."""
    if isinstance(want, list):
        return isinstance(got, list) and len(got) == len(want) and all(same(g, w) for g, w in zip(got, want))
    if math.isnan(want):
        return math.isnan(got)
    return got == want


# --------------------------------------------------------------------------------------------------- P0

P0_W1_DIFF = [[0.0, 0.0], [0.0, 0.0], [0.0, -38.0]]
P0_ZERO_2x2 = [[0.0, 0.0], [0.0, 0.0]]


def _oracle(kink_derivative) -> tuple[list, list]:
    g = backprop.two_layer_grads(backprop.P0, "relu", kink_derivative, dtype=object)
    return [[float(v) for v in r] for r in g.dW1], [[float(v) for v in r] for r in g.dW2]


def test_p0_relu_minus_clamp_on_the_two_layer_net(torch_adapter, catalog):
    require_pinned(torch_adapter)
    case = catalog.case("relu@0")
    relu, clamp = "torch.nn.functional.relu(x)", "x.clamp(min=0)"
    where = f"P0 net, float32, torch {torch_adapter.version}"
    w1_relu, w2_relu = network_grads(torch_adapter, case.program("torch", relu).tree, "float32")
    w1_clamp, w2_clamp = network_grads(torch_adapter, case.program("torch", clamp).tree, "float32")
    d1 = (np.array(w1_relu) - np.array(w1_clamp)).tolist()
    d2 = (np.array(w2_relu) - np.array(w2_clamp)).tolist()
    assert d1 == P0_W1_DIFF, f"{where}: W1.grad({relu}) - W1.grad({clamp}) is {d1}, reported {P0_W1_DIFF}"
    assert d2 == P0_ZERO_2x2, f"{where}: W2.grad({relu}) - W2.grad({clamp}) is {d2}, reported zero"
    o1_zero, o2_zero = _oracle(0)
    o1_one, o2_one = _oracle(1)
    assert (w1_relu, w2_relu) == (o1_zero, o2_zero), (
        f"{where}: {relu} gives W1 {w1_relu}, W2 {w2_relu}; NumPy oracle relu'(0)=0 gives {o1_zero}, {o2_zero}"
    )
    assert (w1_clamp, w2_clamp) == (o1_one, o2_one), (
        f"{where}: {clamp} gives W1 {w1_clamp}, W2 {w2_clamp}; NumPy oracle relu'(0)=1 gives {o1_one}, {o2_one}"
    )


def test_p0_oracle_for_half_and_the_programs_that_give_it(torch_adapter, catalog):
    """relu'(0) = 1/2 puts W1[2][1] halfway (1279); torch.maximum(x, 0) and the symmetric form give exactly that."""
    require_pinned(torch_adapter)
    o1_half, o2_half = _oracle(Fraction(1, 2))
    _, o2_zero = _oracle(0)
    assert o1_half == [[932.0, 2376.0], [354.0, 904.0], [512.0, 1279.0]], f"NumPy oracle relu'(0)=1/2: W1 {o1_half}"
    assert o2_half == o2_zero, f"NumPy oracle relu'(0)=1/2: W2 {o2_half} should not depend on relu'(0)"
    case = catalog.case("relu@0")
    for pid in ("torch.maximum(x, torch.zeros_like(x))", "(torch.relu(x) + torch.relu(-x) + x) / 2"):
        w1, w2 = network_grads(torch_adapter, case.program("torch", pid).tree, "float32")
        assert (w1, w2) == (o1_half, o2_half), (
            f"{pid} on the P0 net (float32, torch {torch_adapter.version}): W1 {w1}, W2 {w2}; "
            f"NumPy oracle relu'(0)=1/2 gives {o1_half}, {o2_half}"
        )


# --------------------------------------------------------------------------------------------------- P1


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize(
    ("program", "expected"),
    [
        ("torch.nn.functional.relu(x)", 0.0),
        # The report writes torch.maximum(x, tensor(0.)); the catalog's program is the same call with
        # torch.zeros_like(x) as the second argument (same dtype and device as x).
        ("torch.maximum(x, torch.zeros_like(x))", 0.5),
        ("torch.clamp_min(x, 0)", 1.0),
        ("torch.clamp(x, min=0)", 1.0),
    ],
)
def test_p1_torch_relu_programs_at_0(torch_adapter, catalog, program, expected, dtype):
    require_pinned(torch_adapter)
    got, where = measure(torch_adapter, catalog, "relu@0", program, dtype)
    assert got == {"x": expected}, f"P1: {where}: d/dx is {got['x']}, reported {expected}"


# --------------------------------------------------------------------------------------------------- P2


@pytest.mark.parametrize(
    ("case_id", "program", "expected"),
    [
        ("relu6@0", "torch.nn.functional.relu6(x)", 0.0),
        ("relu6@6", "torch.nn.functional.relu6(x)", 0.0),
        ("relu6@0", "torch.clamp(x, 0, 6)", 1.0),
        ("relu6@6", "torch.clamp(x, 0, 6)", 1.0),
        # Not in the report: relu6 is hardtanh(x, 0, 6) in torch, and shares its convention.
        ("relu6@0", "torch.nn.functional.hardtanh(x, 0.0, 6.0)", 0.0),
        ("relu6@6", "torch.nn.functional.hardtanh(x, 0.0, 6.0)", 0.0),
        ("clamp@-1", "torch.nn.functional.hardtanh(x, -1.0, 1.0)", 0.0),
        ("clamp@1", "torch.nn.functional.hardtanh(x, -1.0, 1.0)", 0.0),
        ("clamp@-1", "torch.clamp(x, -1, 1)", 1.0),
        ("clamp@1", "torch.clamp(x, -1, 1)", 1.0),
        ("clamp@-1", "torch.clamp(x, min=-torch.ones_like(x), max=torch.ones_like(x))", 1.0),
        ("clamp@1", "torch.clamp(x, min=-torch.ones_like(x), max=torch.ones_like(x))", 1.0),
    ],
)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_p2_torch_relu6_hardtanh_vs_clamp(torch_adapter, catalog, case_id, program, expected, dtype):
    require_pinned(torch_adapter)
    got, where = measure(torch_adapter, catalog, case_id, program, dtype)
    assert got == {"x": expected}, f"P2: {where}: d/dx is {got['x']}, reported {expected}"


# --------------------------------------------------------------------------------------------------- P3

EVEN_ON_ONES = [THIRD, 0.0, THIRD, 0.0, THIRD, 0.0]
EVEN_ON_ZEROS = [0.0, THIRD, 0.0, THIRD, 0.0, THIRD]


@pytest.mark.parametrize(
    ("case_id", "program", "expected"),
    [
        # Full reductions share the gradient evenly among the tied elements (reported).
        ("max@[1,0,1,0,1,0]", "torch.max(v)", EVEN_ON_ONES),
        ("max@[1,0,1,0,1,0]", "torch.amax(v)", EVEN_ON_ONES),
        ("max@[1,0,1,0,1,0]", "v.max()", EVEN_ON_ONES),
        # "min of negated": the zeros are tied for the min; the untied entries come back as -0.0.
        ("min@[1,0,1,0,1,0]", "-torch.max(-v)", EVEN_ON_ZEROS),
        ("min@[1,0,1,0,1,0]", "torch.min(v)", EVEN_ON_ZEROS),
        ("median@[1,0,1,0,1,0]", "torch.median(v)", EVEN_ON_ZEROS),
        ("median@[1,0,1,0,1,0]", "torch.nanmedian(v)", EVEN_ON_ZEROS),
        # A reduction along a dim sends it to one index (the report does not say which; measured: the first
        # tied index for max/min(dim=0), the last tied index for median(dim=0)).
        ("max@[1,0,1,0,1,0]", "torch.max(v, dim=0).values", [1.0, 0.0, 0.0, 0.0, 0.0, 0.0]),
        ("min@[1,0,1,0,1,0]", "torch.min(v, dim=0).values", [0.0, 1.0, 0.0, 0.0, 0.0, 0.0]),
        ("median@[1,0,1,0,1,0]", "torch.median(v, dim=0).values", [0.0, 0.0, 0.0, 0.0, 0.0, 1.0]),
    ],
)
def test_p3_torch_reductions_over_a_tie(torch_adapter, catalog, case_id, program, expected):
    require_pinned(torch_adapter)
    got, where = measure(torch_adapter, catalog, case_id, program)
    assert same(got["v"], expected), f"P3: {where}: gradient {got['v']}, expected {expected}"
    if expected.count(0.0) == len(expected) - 1:
        nonzero = [i for i, g in enumerate(got["v"]) if g != 0]
        assert len(nonzero) == 1, f"P3: {where}: reduction along dim=0 should pick one index, got {got['v']}"


def test_p3_even_split_is_the_oracles_min_norm(catalog):
    """The even split is the minimum-norm element of the Clarke set (the sympy oracle)."""
    r = analyze(catalog.case("max@[1,0,1,0,1,0]"))
    want = tuple(sympy.sympify(x) for x in ("1/3", 0, "1/3", 0, "1/3", 0))
    assert r.min_norm == want, f"P3: sympy oracle min-norm of max at [1,0,1,0,1,0] is {r.min_norm}, expected {want}"


# --------------------------------------------------------------------------------------------------- P4


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize(
    ("program", "expected"),
    [
        ("jax.numpy.maximum(x, 0.0)", 0.5),
        ("jax.numpy.where(x > 0, x, 0.0)", 0.0),
        ("jax.nn.relu(x)", 0.0),
        # Not in the report: clip is built on maximum and splits the tie the same way.
        ("jax.numpy.clip(x, 0)", 0.5),
    ],
)
def test_p4_jax_relu_programs_at_0(jax_adapter, catalog, program, expected, dtype):
    require_pinned(jax_adapter)
    got, where = measure(jax_adapter, catalog, "relu@0", program, dtype)
    assert got == {"x": expected}, f"P4: {where}: d/dx is {got['x']}, reported {expected}"


@pytest.mark.parametrize(
    ("program", "x", "dtype", "expected"),
    [
        # Reported: float32 subnormals give 0.5 on CPU (they compare equal to 0). Measured: yes, for both signs.
        ("jax.numpy.maximum(x, 0.0)", 1e-45, "float32", 0.5),
        ("jax.numpy.maximum(x, 0.0)", -1e-45, "float32", 0.5),
        # Not in the report: relu's custom JVP uses x > 0, which is False for a flushed subnormal.
        ("jax.nn.relu(x)", 1e-45, "float32", 0.0),
        ("jax.nn.relu(x)", -1e-45, "float32", 0.0),
        # In float64 1e-45 is a normal number: an ordinary derivative on each side.
        ("jax.numpy.maximum(x, 0.0)", 1e-45, "float64", 1.0),
        ("jax.numpy.maximum(x, 0.0)", -1e-45, "float64", 0.0),
    ],
)
def test_p4_jax_maximum_at_float32_subnormals(jax_adapter, catalog, program, x, dtype, expected):
    require_pinned(jax_adapter)
    if dtype == "float32":
        assert np.float32(x) != 0 and abs(np.float32(x)) < np.finfo(np.float32).tiny, f"{x} is not a float32 subnormal"
    got, where = measure(jax_adapter, catalog, "relu@0", program, dtype, at={"x": x})
    assert got == {"x": expected}, f"P4: {where}: d/dx is {got['x']}, expected {expected}"


# --------------------------------------------------------------------------------------------------- P5


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize(
    ("framework", "case_id", "program", "expected"),
    [
        ("jax", "abs@0", "jax.numpy.abs(x)", 1.0),
        ("jax", "abs@0", "jax.lax.abs(x)", 1.0),
        ("torch", "abs@0", "torch.abs(x)", 0.0),
        # The report leaves x = -0.0 open. Measured: unchanged, JAX 1.0 (its rule is select(x >= 0, 1, -1),
        # and -0.0 >= 0), torch 0.0 (sgn(-0.0) * grad, a zero).
        ("jax", "abs@-0.0", "jax.numpy.abs(x)", 1.0),
        ("jax", "abs@-0.0", "jax.lax.abs(x)", 1.0),
        ("torch", "abs@-0.0", "torch.abs(x)", 0.0),
        ("torch", "abs@-0.0", "x.abs()", 0.0),
    ],
)
def test_p5_abs_at_zero(request, catalog, framework, case_id, program, expected, dtype):
    adapter = request.getfixturevalue(f"{framework}_adapter")
    require_pinned(adapter)
    if case_id == "abs@-0.0":
        x = catalog.case(case_id).at["x"]
        assert x == 0 and math.copysign(1.0, x) == -1.0, f"case {case_id} must hold -0.0, holds {x!r}"
    got, where = measure(adapter, catalog, case_id, program, dtype)
    assert got == {"x": expected}, f"P5: {where}: d/dx is {got['x']}, expected {expected}"


# --------------------------------------------------------------------------------------------------- P6


@pytest.mark.parametrize(
    ("program", "expected"),
    [("jax.numpy.max(v)", [0.5, 0.5]), ("v.max()", [0.5, 0.5]), ("v[v.argmax()]", [1.0, 0.0])],
)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_p6_jax_max_of_ones(jax_adapter, catalog, program, expected, dtype):
    require_pinned(jax_adapter)
    got, where = measure(jax_adapter, catalog, "max@[1,1]", program, dtype)
    assert got == {"v": expected}, f"P6: {where}: gradient {got['v']}, reported {expected}"


# --------------------------------------------------------------------------------------------------- P7


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize(
    ("framework", "case_id", "program", "expected"),
    [
        ("torch", "norm2@[0]", "v.norm()", [0.0]),
        ("torch", "norm2@[0]", "v.pow(2).sum().sqrt()", [math.nan]),
        ("jax", "norm2-squared@[0]", "jax.numpy.linalg.norm(v) ** 2", [math.nan]),
        ("jax", "norm2-squared@[0]", "jax.numpy.sum(v ** 2)", [0.0]),
    ],
)
def test_p7_norm_at_the_origin(request, catalog, framework, case_id, program, expected, dtype):
    adapter = request.getfixturevalue(f"{framework}_adapter")
    require_pinned(adapter)
    got, where = measure(adapter, catalog, case_id, program, dtype)
    assert same(got["v"], expected), f"P7: {where}: gradient {got['v']}, reported {expected}"


def test_p7_squared_norm_is_differentiable_per_oracle(catalog):
    r = analyze(catalog.case("norm2-squared@[0]"))
    assert r.kind == "differentiable" and r.derivative == (0,), (
        f"P7: sympy oracle says norm(v)**2 at [0] is {r.kind} with derivative {r.derivative}; the nan is JAX's"
    )


# --------------------------------------------------------------------------------------------------- P8


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize(
    ("framework", "program", "mode", "expected"),
    [
        ("torch", "torch.where(v > 0, torch.sqrt(v), v).sum()", "reverse", [math.nan, math.nan]),
        # Not in the report: JAX falls into the same trap in reverse mode ...
        ("jax", "jax.numpy.where(v > 0, jax.numpy.sqrt(v), v).sum()", "reverse", [math.nan, math.nan]),
        # ... and forward mode (JVP) avoids it in both: where selects the tangent of x, so no 0 * nan is formed.
        ("torch", "torch.where(v > 0, torch.sqrt(v), v).sum()", "forward", [1.0, 1.0]),
        ("jax", "jax.numpy.where(v > 0, jax.numpy.sqrt(v), v).sum()", "forward", [1.0, 1.0]),
    ],
)
def test_p8_the_where_trap(request, catalog, framework, program, mode, expected, dtype):
    adapter = request.getfixturevalue(f"{framework}_adapter")
    require_pinned(adapter)
    got, where = measure(adapter, catalog, "where-sqrt@[-1,-4]", program, dtype, mode=mode)
    assert same(got["v"], expected), f"P8: {where}: gradient {got['v']}, expected {expected}"


def test_p8_oracle_says_one_one(catalog):
    r = analyze(catalog.case("where-sqrt@[-1,-4]"))
    assert r.kind == "differentiable" and r.derivative == (1, 1), (
        f"P8: sympy oracle at [-1, -4]: {r.kind}, derivative {r.derivative}; mathematically [1, 1]"
    )


# --------------------------------------------------------------------------------------------------- P9

P9 = [
    # (case, program, forward, reverse)
    ("sqrt-relu@-10", "jax.numpy.sqrt(jax.nn.relu(x))", math.nan, 0.0),
    ("relu-sqrt@-10", "jax.nn.relu(jax.numpy.sqrt(x))", 0.0, math.nan),
]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize(("case_id", "program", "forward", "reverse"), P9)
def test_p9_jax_forward_vs_reverse(jax_adapter, catalog, case_id, program, forward, reverse, dtype):
    require_pinned(jax_adapter)
    for mode, expected in (("forward", forward), ("reverse", reverse)):
        got, where = measure(jax_adapter, catalog, case_id, program, dtype, mode=mode)
        assert same(got["x"], expected), f"P9: {where}: d/dx is {got['x']}, reported {expected}"


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize(("case_id", "program", "forward", "reverse"), P9)
def test_p9_adapter_modes_match_jacfwd_and_jacrev(jax_adapter, catalog, case_id, program, forward, reverse, dtype):
    """The adapter's forward/reverse modes are jax.jacfwd/jax.jacrev, called here directly."""
    require_pinned(jax_adapter)
    import jax
    import jax.numpy as jnp

    f = {
        "jax.numpy.sqrt(jax.nn.relu(x))": lambda x: jnp.sqrt(jax.nn.relu(x)),
        "jax.nn.relu(jax.numpy.sqrt(x))": lambda x: jax.nn.relu(jnp.sqrt(x)),
    }[program]
    x = jnp.asarray(catalog.case(case_id).at["x"], dtype=dtype)
    direct = {"forward": float(jax.jacfwd(f)(x)), "reverse": float(jax.jacrev(f)(x))}
    for mode, expected in (("forward", forward), ("reverse", reverse)):
        got, where = measure(jax_adapter, catalog, case_id, program, dtype, mode=mode)
        assert same(direct[mode], expected), (
            f"P9: jax.jac{'fwd' if mode == 'forward' else 'rev'}({program}) at x=-10 ({dtype}, jax "
            f"{jax_adapter.version}) is {direct[mode]}, reported {expected}"
        )
        assert same(got["x"], direct[mode]), f"P9: {where}: adapter gives {got['x']}, jax directly {direct[mode]}"


@pytest.mark.parametrize(
    ("case_id", "program", "forward", "reverse"),
    [
        # Not in the report, for comparison: torch agrees with JAX on sqrt(relu(x)) but gives nan in both modes
        # on relu(sqrt(x)) (JAX's forward mode gives 0 there).
        ("sqrt-relu@-10", "torch.sqrt(torch.relu(x))", math.nan, 0.0),
        ("relu-sqrt@-10", "torch.relu(torch.sqrt(x))", math.nan, math.nan),
    ],
)
def test_p9_torch_for_comparison(torch_adapter, catalog, case_id, program, forward, reverse):
    require_pinned(torch_adapter)
    for mode, expected in (("forward", forward), ("reverse", reverse)):
        got, where = measure(torch_adapter, catalog, case_id, program, mode=mode)
        assert same(got["x"], expected), f"P9: {where}: d/dx is {got['x']}, expected {expected}"
