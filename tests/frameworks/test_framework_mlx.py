"""The MLX adapter (kinkcheck.frameworks.mlx): kink values from MLX's primitives (mlx/primitives.cpp:
Maximum/Minimum::vjp give a tie to the second argument, Abs is sign, Reduce::vjp shares a tied max evenly
while Reduce::jvp takes the argmax), modes, dtypes, refusals, and the mx.custom_function migration snippet."""

from __future__ import annotations

import pytest
from gradients import grad

mx = pytest.importorskip("mlx.core", reason="MLX is not installed in this Python (pip install 'mlx[cpu]')")

from kinkcheck.language import expr as ex
from kinkcheck.frameworks import FrameworkUnavailable, Unavailable, get_adapter
from kinkcheck.answers.migrate import snippet
from kinkcheck.oracles import backprop
from kinkcheck.registry import framework
from network import network_grads

MODES = ("reverse", "jit", "forward", "vmap", "second-order")
FIRST_ORDER = ("reverse", "jit", "forward", "vmap")


@pytest.fixture(scope="module")
def adapter():
    return get_adapter("mlx")


def test_adapter_matches_its_registry_record(adapter):
    rec = framework("mlx")
    assert adapter.modes == rec.modes == MODES, f"adapter modes {adapter.modes}, registry {rec.modes}"
    assert rec.dtypes == ("float64", "float32", "float16", "bfloat16"), rec.dtypes
    assert adapter.devices() == ["cpu"] and "CPU backend" in adapter.settings()["device"], adapter.settings()
    assert rec.aliases == {"mx": "mlx.core"}, rec.aliases


@pytest.mark.parametrize("mode", FIRST_ORDER)
def test_relu_at_0_is_0_and_maximum_gives_the_tie_to_the_second_argument(adapter, mode):
    for text, want in [("mlx.nn.relu(x)", 0.0), ("mx.maximum(x, 0.0)", 0.0), ("mx.maximum(0.0, x)", 1.0),
                       ("mx.clip(x, 0, None)", 0.0)]:
        got = grad(adapter, text, {"x": 0.0}, mode=mode)
        assert got == {"x": want}, f"{text} at 0 ({mode}): {got}, Maximum::vjp's mask a <= b gives {want}"
        beside = grad(adapter, text, {"x": 0.25}, mode=mode)
        assert beside == {"x": 1.0}, f"{text} at 0.25 ({mode}): {beside}, want 1"


@pytest.mark.parametrize("mode", FIRST_ORDER)
def test_two_argument_tie_goes_to_the_second_argument(adapter, mode):
    for text, want in [("mx.maximum(x, y)", {"x": 0.0, "y": 1.0}), ("mx.maximum(y, x)", {"x": 1.0, "y": 0.0}),
                       ("mx.minimum(x, y)", {"x": 0.0, "y": 1.0})]:
        got = grad(adapter, text, {"x": 1.0, "y": 1.0}, mode=mode)
        assert got == want, f"{text} at x = y = 1 ({mode}): {got}, want {want}"


def test_tied_max_reduction_reverse_shares_forward_takes_the_first(adapter):
    at = {"v": [1.0, 0.0, 1.0, 0.0, 1.0, 0.0]}
    for mode in ("reverse", "jit", "vmap"):
        got = grad(adapter, "mx.max(v)", at, mode=mode)["v"]
        assert got == pytest.approx([1 / 3, 0, 1 / 3, 0, 1 / 3, 0]), f"mx.max(v) ({mode}): {got}, Reduce::vjp shares"
    fwd = grad(adapter, "v.max()", at, mode="forward")["v"]
    assert fwd == [1.0, 0.0, 0.0, 0.0, 0.0, 0.0], f"v.max() forward: {fwd}, Reduce::jvp takes argmax (the first)"


@pytest.mark.parametrize("mode", MODES)
def test_abs_at_0_is_0(adapter, mode):
    for text in ("mx.abs(x)", "x.abs()"):
        got = grad(adapter, text, {"x": 0.0}, mode=mode)
        assert got == {"x": 0.0}, f"{text} at 0 ({mode}): {got}, Abs::vjp is sign(x), 0 at 0"
        want = 0.0 if mode == "second-order" else -1.0
        assert grad(adapter, text, {"x": -0.5}, mode=mode) == {"x": want}, f"{text} at -0.5 ({mode})"


def test_modes_agree_on_a_smooth_program(adapter):
    at = {"x": 0.5, "y": -2.0, "v": [0.25, -1.5]}
    # polynomials and abs: MLX's CPU float64 sin/cos/exp are only float32-accurate (sin(0.5) is 1e-8 off)
    text = "x ** 3 * y ** 2 + mx.sum(mx.abs(v) * v)"
    want = {"x": 3 * 0.25 * 4, "y": 0.125 * 2 * -2.0, "v": [0.5, 3.0]}
    for mode in FIRST_ORDER:
        got = grad(adapter, text, at, mode=mode)
        assert got == want, f"{text} ({mode}): {got}, want {want}"


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_narrow_dtypes_run_and_round_the_point(adapter, dtype):
    got = grad(adapter, "mx.maximum(x, 0.0) * 3.0", {"x": 0.5}, dtype=dtype)
    assert got == {"x": 3.0}, f"3 * mx.maximum(x, 0.0) at 0.5 in {dtype}: {got}, want 3"
    want = {"float32": 0.10000000149011612, "float16": 0.0999755859375, "bfloat16": 0.10009765625}[dtype]
    assert adapter.rounded({"x": 0.1}, dtype) == {"x": want}, f"0.1 in {dtype}: {adapter.rounded({'x': 0.1}, dtype)}"
    assert adapter.rounded({"x": 0.5}, dtype) is None, f"0.5 is exact in {dtype}"


def test_integer_inputs_and_wrt(adapter):
    got = grad(adapter, "mx.maximum(x, y) * k", {"x": 1.0, "y": 1.0, "k": 3}, ints=["k"])
    assert got == {"x": 0.0, "y": 3.0}, f"mx.maximum(x, y) * k at x = y = 1, k = 3: {got}"
    only = grad(adapter, "mx.maximum(x, y)", {"x": 1.0, "y": 1.0}, mode="forward", wrt=["y"])
    assert only == {"y": 1.0}, f"--wrt y: {only}"


@pytest.mark.parametrize(("text", "kink"), [("mx.maximum(x, 0.0)", 0.0), ("mx.maximum(0.0, x)", 1.0)])
def test_network_grads_match_the_numpy_oracle(adapter, text, kink):
    w1, w2 = network_grads(adapter, ex.parse(text, ["x"], {"mlx"}), "float64")
    check = backprop.crosscheck(w1, w2, "relu", kink, "float64")
    assert check.ok, f"{text} on the P0 net, relu'(0) = {kink}: {check.detail}"


def test_missing_name_or_method_is_unavailable(adapter):
    with pytest.raises(Unavailable, match="does not exist"):
        grad(adapter, "mx.no_such_function_in_mlx(x)", {"x": 0.0})
    with pytest.raises(Unavailable, match="'mlx.core.array.no_such_method' does not exist"):
        grad(adapter, "x.no_such_method()", {"x": 0.0})


def test_callable_gradient_in_every_mode(adapter):
    for mode in MODES:
        got = adapter.callable_gradient(lambda x, y: mx.maximum(x, y) ** 2, {"x": 1.0, "y": 1.0}, mode=mode)
        # max(x, y)**2 at the tie, the tie to y: d/dy = 2; H @ 1 = 2 on y
        want = {"x": 0.0, "y": 2.0}
        assert got == want, f"callable max(x, y)**2 at the tie ({mode}): {got}, want {want}"
    with pytest.raises(TypeError, match="not an mlx.core.array"):
        adapter.callable_gradient(lambda x: 1.0, {"x": 0.0})


@pytest.mark.parametrize(("target", "value"), [("mlx.core.abs(x)", 1.0), ("mlx.core.maximum(x, 0.0)", 0.5),
                                               ("mlx.nn.relu(x)", 1.0)])
def test_migration_snippet_keeps_the_source_value_at_the_kink(target, value):
    code = snippet("mlx", target, "x", 0.0, value, note="the source's value")
    ns: dict = {}
    exec(compile(code, "<mlx snippet>", "exec"), ns)  # noqa: S102 - the generated code, as a user runs it
    f = ns["f"]
    for x, want in [(0.0, value), (0.25, 1.0), (-0.25, -1.0 if "abs" in target else 0.0)]:
        a = mx.array(x, dtype=mx.float64)
        rev = mx.grad(f)(a).item()
        fwd = mx.jvp(f, [a], [mx.ones_like(a)])[1][0].item()
        jit = mx.compile(mx.grad(f))(a).item()
        assert rev == fwd == jit == want, f"snippet for {target} at {x}: reverse {rev}, forward {fwd}, jit {jit}, want {want}"


def test_mlx_core_reads_jax_numpy_rows_of_the_mapping_and_methods_stay_unmapped():
    """mlx.core follows NumPy's names and positional arguments (kinkcheck.oracles.mapping.NUMPY_CLONES): the
    oracle of ``kinkcheck grad`` reads jax.numpy's rows for it; an mlx array method has its own semantics."""
    from kinkcheck.oracles.mapping import Unmapped, sympy_form

    for text, at, want in [("mx.maximum(x, y)", {"x": 1, "y": 1}, "Max(x, y)"), ("mx.clip(x, 0, None)", {"x": 0}, "Max(0, x)"),
                           ("mx.linalg.norm(v)", {"v": [0, 0]}, "sqrt(v[0]**2 + v[1]**2)")]:
        got = sympy_form(ex.parse(text, at, {"mlx"}), at, "mlx").text
        assert got == want, f"{text}: mapped to {got}, want {want}"
    with pytest.raises(Unmapped, match="mlx tensor method .max"):
        sympy_form(ex.parse("v.max()", {"v": [1, 1]}, {"mlx"}), {"v": [1, 1]}, "mlx")


def test_float64_computations_a_release_lacks_are_unavailable_not_run(adapter, monkeypatch):
    """MLX 0.25 compiles no float64 gradient and 0.26 – 0.28 have no float64 JVP of a matrix product: the error
    corrupts MLX's state, so the adapter checks in a child interpreter and records an unavailable cell."""
    from kinkcheck.frameworks.mlx import adapter as adapter_module

    assert adapter_module._fails(adapter_module._F64_COMPILE) is None, f"mlx {mx.__version__} compiles float64"
    monkeypatch.setitem(adapter_module._FAILS, adapter_module._F64_COMPILE, "RuntimeError: Unsupported constant type")
    with pytest.raises(Unavailable, match="compiles no float64 gradient on the CPU .RuntimeError: Unsupported"):
        grad(adapter, "mx.abs(x)", {"x": 0.0}, mode="jit")
    assert grad(adapter, "mx.abs(x)", {"x": 0.0}, dtype="float32", mode="jit") == {"x": 0.0}, "float32 still runs"
    monkeypatch.setitem(adapter_module._FAILS, adapter_module._F64_MATMUL_JVP, "RuntimeError: [AddMM::eval_cpu]")
    with pytest.raises(Unavailable, match="no float64 JVP of a matrix product"):
        grad(adapter, "(v @ v) * 1.0", {"v": [1.0, 2.0]}, mode="forward")
    assert grad(adapter, "(v @ v) * 1.0", {"v": [1.0, 2.0]}) == {"v": [2.0, 4.0]}, "reverse mode still runs"


@pytest.mark.parametrize("values", [(1.0, 0.0), (0.5, 0.5)])
def test_migration_tie_snippet_keeps_the_source_values_on_the_whole_tie_line(values):
    """P10 → MLX: at every tie x == y of mlx.core.minimum the source's (dx, dy), in reverse, forward and
    compiled mode; off it the target's own derivative."""
    from kinkcheck.answers.migrate import tie_snippet

    ns: dict = {}
    code = compile(tie_snippet("mlx", "mlx.core.minimum(x, y)", ("x", "y"), values, note="the source's value"),
                 "<mlx snippet>", "exec")
    exec(code, ns)  # noqa: S102 - the generated code, as a user runs it
    f = ns["f"]
    x = mx.array([1.0, 3.0, -0.0, 1.0, 2.0], dtype=mx.float64)
    y = mx.array([1.0, 3.0, 0.0, 2.0, 1.0], dtype=mx.float64)
    vx, vy = values
    want = ([vx, vx, vx, 1.0, 0.0], [vy, vy, vy, 0.0, 1.0])
    for how, vjp in (("reverse", mx.grad(lambda a, b: f(a, b).sum(), argnums=[0, 1])),
                     ("compiled", mx.compile(mx.grad(lambda a, b: f(a, b).sum(), argnums=[0, 1])))):
        gx, gy = vjp(x, y)
        assert (gx.tolist(), gy.tolist()) == want, f"{how}: dx {gx.tolist()}, dy {gy.tolist()}, want {want}"
    fwd = mx.jvp(f, [x, y], [mx.ones_like(x), mx.zeros_like(y)])[1][0]
    assert fwd.tolist() == want[0], f"forward along x: {fwd.tolist()}, want {want[0]}"


def test_metal_without_apple_silicon_is_framework_unavailable_and_never_runs_float64(adapter, monkeypatch):
    """MLX's GPU (``mx.gpu``) is the ``metal`` device: absent here, a one-line 'not measured'; where present,
    float64 is an unavailable cell ("float64 only work with CPU operations", MLX docs) before anything runs."""
    import kinkcheck.frameworks.mlx.adapter as adapter_module

    if "metal" in adapter.devices():
        pytest.skip(f"mlx {adapter.version} sees a Metal GPU here; the no-Metal path cannot be tested")
    relu = ex.parse("mlx.nn.relu(x)", ("x",), {"mlx"})
    with pytest.raises(FrameworkUnavailable, match="no Metal device"):
        adapter.gradient(relu, {"x": 0.0}, "float32", device="metal")
    monkeypatch.setattr(adapter_module, "_metal_available", lambda: True)
    assert adapter.devices() == ["cpu", "metal"]
    for mode in ("reverse", "jit"):
        with pytest.raises(Unavailable, match="float64 does not exist on Metal"):
            adapter.gradient(relu, {"x": 0.0}, "float64", device="metal", mode=mode)
    assert adapter._device("metal", "float32") == mx.gpu
