"""The MindSpore adapter (kinkcheck.frameworks.mindspore): kink values from MindSpore's bprops in PyNative mode,
dtypes and CPU kernels, refusals (mindspore.ops is allowed, its I/O, random, hook and assignment ops are not)."""

from __future__ import annotations

import math

import pytest
from gradients import grad

mindspore = pytest.importorskip(
    "mindspore", reason="MindSpore is not installed in this Python: it needs numpy<2, so `nox -s tests` leaves it out; "
    "run `nox -s \"framework_tests(mindspore)\"` (its own virtualenv)")

from kinkcheck.language import expr as ex
from kinkcheck.catalog import load_catalog
from kinkcheck.frameworks import FrameworkUnavailable, Unavailable, get_adapter
from kinkcheck.oracles import backprop
from kinkcheck.registry import framework
from network import network_grads


@pytest.fixture(scope="module")
def adapter():
    return get_adapter("mindspore")


def test_adapter_matches_its_registry_record(adapter):
    rec = framework("mindspore")
    assert adapter.modes == rec.modes == ("reverse",), f"adapter modes {adapter.modes}, registry {rec.modes}"
    assert adapter.devices() == ["cpu"], adapter.devices()
    settings = adapter.settings()
    assert settings["mode"] == "PYNATIVE_MODE" and "synchronous" in settings, settings
    assert "numpy<2" in rec.requirements("2.10.0"), rec.requirements("2.10.0")


@pytest.mark.parametrize("text, want", [
    ("ms.ops.relu(x)", 0.0), ("ms.mint.nn.functional.relu(x)", 0.0), ("ms.ops.clamp(x, min=0.0)", 1.0),
    ("x.clamp(min=0.0)", 1.0), ("ms.ops.maximum(x, ms.ops.zeros_like(x))", 0.5), ("ms.numpy.maximum(x, 0.0)", 0.5),
    ("ms.ops.relu(-x) + x", 1.0),
])
def test_relu_spellings_at_0(adapter, text, want):
    got = grad(adapter, text, {"x": 0.0})
    assert got == {"x": want}, f"{text} at 0 (mindspore {adapter.version}): {got}, want {want}"
    beside = grad(adapter, text, {"x": 0.25})
    assert beside == {"x": 1.0}, f"{text} at 0.25: {beside}, want 1"


@pytest.mark.parametrize("fn", ["ms.ops.maximum", "ms.ops.minimum", "ms.mint.maximum", "ms.numpy.maximum"])
def test_two_argument_tie_is_split_evenly(adapter, fn):
    got = grad(adapter, f"{fn}(x, y)", {"x": 1.0, "y": 1.0})
    assert got == {"x": 0.5, "y": 0.5}, f"{fn}(x, y) at x = y = 1: {got}, MinimumMaximumGrad gives (0.5, 0.5)"
    fmax = grad(adapter, "ms.ops.fmax(x, y)", {"x": 1.0, "y": 1.0})
    assert fmax == {"x": 1.0, "y": 0.0}, f"ms.ops.fmax(x, y) at a tie: {fmax}, the tie goes to x"


@pytest.mark.parametrize("text", ["ms.ops.abs(x)", "x.abs()", "ms.mint.abs(x)"])
def test_abs_at_0_is_0(adapter, text):
    assert grad(adapter, text, {"x": 0.0}) == {"x": 0.0}, f"{text} at 0"
    assert grad(adapter, text, {"x": -0.5}) == {"x": -1.0}, f"{text} at -0.5"


def test_hardtanh_splits_at_its_bounds_where_clamp_passes(adapter):
    ht = grad(adapter, "ms.ops.hardtanh(x, -1.0, 1.0)", {"x": 1.0})
    cl = grad(adapter, "ms.ops.clamp(x, -1.0, 1.0)", {"x": 1.0})
    assert ht == {"x": 0.5} and cl == {"x": 1.0}, f"at the bound 1: hardtanh {ht} (want 0.5), clamp {cl} (want 1)"


def test_max_of_a_tied_vector_shares_among_the_maxima(adapter):
    v = {"v": [1.0, 0.0, 1.0, 0.0, 1.0, 0.0]}
    for text in ("ms.mint.max(v)", "ms.ops.amax(v)", "v.max()"):
        got = grad(adapter, text, v)["v"]
        assert got == pytest.approx([1 / 3, 0.0, 1 / 3, 0.0, 1 / 3, 0.0]), f"{text} at [1,0,1,0,1,0]: {got}"
    top = grad(adapter, "v[v.argmax()]", v)["v"]
    assert top == [1.0, 0.0, 0.0, 0.0, 0.0, 0.0], f"v[v.argmax()]: {top}, the first maximum"


def test_smooth_program(adapter):
    at = {"x": 0.5, "y": -2.0, "v": [0.25, -1.5]}
    text = "ms.ops.sin(x) * y * y + ms.ops.sum(ms.ops.tanh(v) * v)"
    want = {"x": math.cos(0.5) * 4, "y": 2 * math.sin(0.5) * -2.0,
            "v": [math.tanh(t) + t / math.cosh(t) ** 2 for t in (0.25, -1.5)]}
    got = grad(adapter, text, at)
    for k, w in want.items():
        assert got[k] == pytest.approx(w, rel=1e-12), f"{text} d/d{k}: {got[k]}, want {w}"


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_dtypes_give_a_value_or_name_the_missing_kernel(adapter, dtype):
    for text, at in [("ms.ops.maximum(x, y) * 3.0", {"x": 0.0, "y": 0.0}), ("ms.ops.relu(x)", {"x": 0.0}),
                     ("x * x", {"x": 0.5})]:
        try:
            got = grad(adapter, text, at, dtype=dtype)
        except Unavailable as err:
            assert dtype in str(err), f"{text} in {dtype}: {err}"
            continue
        assert all(math.isfinite(v) for v in got.values()), f"{text} in {dtype}: {got}"
    assert grad(adapter, "ms.ops.relu(x)", {"x": 0.0}, dtype="float16") == {"x": 0.0}, "relu in float16"


def test_missing_kernels_are_unavailable_and_do_not_leak_into_the_next_program(adapter):
    with pytest.raises(Unavailable, match="no CPU bfloat16 kernel for ReLU"):
        grad(adapter, "ms.ops.relu(x)", {"x": 0.0}, dtype="bfloat16")
    with pytest.raises(Unavailable, match="ReLU6 does not take float64"):
        grad(adapter, "ms.ops.relu6(x)", {"x": 0.0})
    # PyNative queues ops: without synchronous launches a failure surfaced in the next program's cell
    after = grad(adapter, "ms.ops.clamp(x, 0.0, 6.0)", {"x": 6.0})
    assert after == {"x": 1.0}, f"ms.ops.clamp(x, 0.0, 6.0) at 6 after failing programs: {after}"


@pytest.mark.parametrize("message, want", [
    ("Select CPU operator[ReLU] fail! Unsupported data type!", "no CPU bfloat16 kernel for ReLU"),
    ("The kernel LinalgVectorNorm unregistered.", "no CPU kernel for LinalgVectorNorm (asked in bfloat16)"),
    ("Not found op N9mindspore6kernel7pyboost13FuncMaxPool2DE on device 1",  # 2.8.0
     "no CPU kernel for FuncMaxPool2D (asked in bfloat16)"),
    (("For primitive[ReLU6], the input argument[input_x] must be a type of {Tensor[Float16], Tensor[Float32]}, "
      "but got Tensor[BFloat16]."), "ReLU6 does not take bfloat16"),
])
def test_kernel_messages_become_unavailable(message, want):
    from kinkcheck.frameworks.mindspore.adapter import _unavailable

    got = _unavailable(RuntimeError(message), "bfloat16")
    assert got is not None and want in str(got), f"{message!r} → {got}, want {want!r}"


def test_a_dtype_check_about_another_dtype_stays_an_error():
    from kinkcheck.frameworks.mindspore.adapter import _unavailable

    message = "For primitive[ReLU6], the input argument[input_x] must be a type of {...}, but got Tensor[Float64]."
    assert _unavailable(TypeError(message), "float32") is None, "asked float32, the op refused a float64 value"


def test_rounded_point(adapter):
    r = adapter.rounded({"x": 0.1}, "bfloat16")
    assert r is not None and r["x"] == 0.10009765625, f"0.1 in bfloat16: {r}"
    assert adapter.rounded({"x": 0.5}, "float16") is None, "0.5 is exact in float16"


def test_integer_inputs_and_wrt(adapter):
    got = grad(adapter, "ms.ops.maximum(x, y) * k", {"x": 1.0, "y": 1.0, "k": 3}, ints=["k"])
    assert got == {"x": 1.5, "y": 1.5}, f"ms.ops.maximum(x, y) * k at x = y = 1, k = 3: {got}"
    only = grad(adapter, "ms.ops.maximum(x, y)", {"x": 1.0, "y": 1.0}, wrt=["y"])
    assert only == {"y": 0.5}, f"--wrt y: {only}"


def test_mindspore_ops_is_the_only_exempt_ops_path():
    roots = {"mindspore", "torch", "jax"}
    assert ex.parse("mindspore.ops.relu(x)", ["x"], roots), "mindspore.ops is MindSpore's functional API"
    for text in ("torch.ops.aten.relu(x)", "jax.ops.segment_sum(x, x)", "mindspore.mint.ops(x)"):
        with pytest.raises(ex.ExprError, match="'ops' is refused"):
            ex.parse(text, ["x"], roots)


def test_every_catalog_program_resolves_or_is_missing(adapter):
    from kinkcheck.frameworks.mindspore import adapter as adapter_module

    refused = []
    for case, program in load_catalog().programs("mindspore"):
        try:
            adapter_module._refusal(program.tree, ex.resolve_names(program.tree, adapter.namespace(),
                                                                   adapter_module.MODULES, adapter_module.ORIGINS))
        except ex.NameMissing:
            continue
        except ex.ExprError as err:
            refused.append(f"{case.id} {program.id}: {err}")
    assert not refused, "catalog programs refused by the adapter:\n" + "\n".join(refused)


def test_callable_gradient(adapter):
    got = adapter.callable_gradient(lambda x, y: mindspore.ops.maximum(x, y) ** 2, {"x": 1.0, "y": 1.0})
    assert got == {"x": 1.0, "y": 1.0}, f"maximum(x, y) ** 2 at a tie: {got}, want (1, 1)"
    with pytest.raises(TypeError, match="not a mindspore.Tensor"):
        adapter.callable_gradient(lambda x: 1.0, {"x": 0.0})


def test_other_modes_and_cuda_are_refused(adapter):
    with pytest.raises(ex.ExprError, match="unknown mode"):
        adapter.gradient(ex.parse("ms.ops.abs(x)", ["x"], {"mindspore"}), {"x": 0.0}, mode="forward")
    with pytest.raises(FrameworkUnavailable, match="CPU only"):
        adapter.gradient(ex.parse("ms.ops.abs(x)", ["x"], {"mindspore"}), {"x": 0.0}, device="cuda")


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_network_grads_match_the_numpy_oracle_at_relu_0(adapter, dtype):
    tree = ex.parse("ms.ops.relu(x)", ["x"], {"mindspore"})
    w1, w2 = network_grads(adapter, tree, dtype)
    check = backprop.crosscheck(w1, w2, "relu", 0.0, dtype)
    assert check.ok, f"ms.ops.relu on the P0 net ({dtype}): {check.detail}"
