"""The tinygrad adapter (kinkcheck.frameworks.tinygrad): kink values from tinygrad's gradient rules
(tinygrad/gradient.py: Ops.MAX splits a tie in half, a max reduction shares it among the tied entries;
relu and clamp are written with where), the device it picks, modes, dtypes and refusals."""

from __future__ import annotations

import pytest

tinygrad = pytest.importorskip("tinygrad", reason="tinygrad is not installed in this Python (pip install tinygrad)")

from kinkcheck.language import expr as ex
from kinkcheck.frameworks import FrameworkUnavailable, ProgramError, Unavailable, get_adapter
from kinkcheck.oracles import backprop
from kinkcheck.registry import framework
from network import network_grads

MODES = ("reverse", "jit")


@pytest.fixture(scope="module")
def adapter():
    return get_adapter("tinygrad")


def grad(adapter, text, at, dtype="float64", mode="reverse", **kw):
    return adapter.gradient(ex.parse(text, list(at), {"tinygrad"}), at, dtype, "cpu", mode, **kw)


def test_adapter_matches_its_registry_record_and_names_its_device(adapter):
    rec = framework("tinygrad")
    assert adapter.modes == rec.modes == MODES, f"adapter modes {adapter.modes}, registry {rec.modes}"
    settings = adapter.settings()
    assert settings["device"] in ("CPU", "PYTHON"), settings
    assert (settings["device"] == "CPU") == ("device_reason" not in settings), \
        f"a PYTHON run says why CPU was not used: {settings}"
    assert adapter.devices() == ["cpu"], adapter.devices()


@pytest.mark.parametrize("mode", MODES)
def test_relu_at_0(adapter, mode):
    for text, want in [("x.relu()", 0.0), ("tinygrad.Tensor.relu(x)", 0.0), ("x.maximum(0.0)", 0.5),
                       ("x.clip(0)", 1.0), ("(x > 0).where(x, 0.0)", 0.0)]:
        got = grad(adapter, text, {"x": 0.0}, mode=mode)
        assert got == {"x": want}, f"{text} at 0 ({mode}): {got}, want {want} (relu: where(x > 0); " \
                                   "maximum: Ops.MAX halves a tie; clamp: where(x < lo) keeps x at the bound)"
        assert grad(adapter, text, {"x": 0.25}, mode=mode) == {"x": 1.0}, f"{text} at 0.25 ({mode})"


@pytest.mark.parametrize("mode", MODES)
def test_maximum_and_minimum_ties_are_split_in_half(adapter, mode):
    for text in ("x.maximum(y)", "y.maximum(x)", "x.minimum(y)", "tinygrad.Tensor.stack(x, y).max()"):
        got = grad(adapter, text, {"x": 1.0, "y": 1.0}, mode=mode)
        assert got == {"x": 0.5, "y": 0.5}, f"{text} at x = y = 1 ({mode}): {got}, want (0.5, 0.5)"


def test_max_reduction_shares_a_tie_among_the_maxima(adapter):
    got = grad(adapter, "v.max()", {"v": [1.0, 0.0, 1.0, 0.0, 1.0, 0.0]})["v"]
    assert got == pytest.approx([1 / 3, 0, 1 / 3, 0, 1 / 3, 0]), f"v.max() at [1,0,1,0,1,0]: {got}"


@pytest.mark.parametrize("mode", MODES)
def test_abs_at_0_is_0(adapter, mode):
    got = grad(adapter, "x.abs()", {"x": 0.0}, mode=mode)
    assert got == {"x": 0.0}, f"x.abs() at 0 ({mode}): {got}, x * x.sign() gives 0"
    assert grad(adapter, "x.abs()", {"x": -0.5}, mode=mode) == {"x": -1.0}, f"x.abs() at -0.5 ({mode})"


def test_modes_agree_on_a_smooth_program(adapter):
    at = {"x": 0.5, "y": -2.0, "v": [0.25, -1.5]}
    text = "x ** 3 * y ** 2 + (v.abs() * v).sum()"
    want = {"x": 3 * 0.25 * 4, "y": 0.125 * 2 * -2.0, "v": [0.5, 3.0]}
    for mode in MODES:
        got = grad(adapter, text, at, mode=mode)
        for k, w in want.items():
            assert got[k] == pytest.approx(w, rel=1e-12), f"{text} ({mode}) d/d{k}: {got[k]}, want {w}"


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_narrow_dtypes_run_or_say_why_not(adapter, dtype):
    try:
        got = grad(adapter, "x.maximum(0.0) * 3.0", {"x": 0.0}, dtype=dtype)
    except Unavailable as err:  # tinygrad <= 0.12's PYTHON device has no float16 before Python 3.12
        assert "cannot hold" in str(err), err
        return
    assert got == {"x": 1.5}, f"3 * x.maximum(0.0) at 0 in {dtype}: {got}, want 1.5"
    want = {"float32": 0.10000000149011612, "float16": 0.0999755859375, "bfloat16": 0.10009765625}[dtype]
    assert adapter.rounded({"x": 0.1}, dtype) == {"x": want}, f"0.1 in {dtype}: {adapter.rounded({'x': 0.1}, dtype)}"


def test_integer_inputs_and_wrt(adapter):
    got = grad(adapter, "x.maximum(y) * k", {"x": 1.0, "y": 1.0, "k": 3}, ints=["k"])
    assert got == {"x": 1.5, "y": 1.5}, f"x.maximum(y) * k at x = y = 1, k = 3: {got}"
    only = grad(adapter, "x.maximum(y)", {"x": 1.0, "y": 1.0}, wrt=["y"])
    assert only == {"y": 0.5}, f"--wrt y: {only}"


def test_network_grads_match_the_numpy_oracle(adapter):
    w1, w2 = network_grads(adapter, ex.parse("x.maximum(0.0)", ["x"], {"tinygrad"}), "float64")
    check = backprop.crosscheck(w1, w2, "relu", 0.5, "float64")
    assert check.ok, f"x.maximum(0.0) on the P0 net, relu'(0) = 1/2: {check.detail}"


@pytest.mark.parametrize("text", ["v.argmax()", "v > 0"])
def test_non_float_output_is_a_program_error(adapter, text):
    with pytest.raises(ProgramError, match="no gradient"):
        grad(adapter, text, {"v": [1.0, 2.0]})


def test_missing_name_is_unavailable(adapter):
    with pytest.raises(Unavailable, match="does not exist"):
        grad(adapter, "tinygrad.Tensor.no_such_method_in_tinygrad(x)", {"x": 0.0})


@pytest.mark.parametrize("text", [
    "tinygrad.Tensor.from_url(x)", "tinygrad.Tensor(x)", "x.to('DISK:f')", "x.clone(device='DISK:f')",
    "x.zeros_like(device='DISK:f')", "tinygrad.Tensor.empty(2)", "tinygrad.Tensor.rand(2)",
    "tinygrad.Tensor.manual_seed(0)", "tinygrad.Tensor.uniform(2)", "tinygrad.Tensor.kaiming_normal(2)",
    "x.assign(x)", "x * x.backward()", "x.numpy()", "x * x.item()", "tinygrad.Tensor.from_blob(0, (1,))",
    "x * tinygrad.Device.DEFAULT", "tinygrad.TinyJit(x)", "tinygrad.nn.state.safe_load(x)",
    "x * tinygrad.helpers.getenv(x)", "x.dropout()", "x.shard(x)", "x.realize()",
])
def test_refused_names_raise_before_anything_runs(adapter, monkeypatch, text):
    calls = []
    monkeypatch.setattr(ex, "evaluate", lambda *a, **k: calls.append(a))
    with pytest.raises(ex.ExprError, match="refused|outside the expression namespace|not allowed"):
        grad(adapter, text, {"x": 0.0})
    assert not calls, f"{text}: evaluated before being refused"


def test_callable_gradient_in_every_mode(adapter):
    for mode in MODES:
        got = adapter.callable_gradient(lambda x, y: x.maximum(y) ** 2, {"x": 1.0, "y": 1.0}, mode=mode)
        assert got == {"x": 1.0, "y": 1.0}, f"callable max(x, y)**2 at the tie ({mode}): {got}, want 2 * 1 * 1/2 each"
    with pytest.raises(TypeError, match="not a tinygrad.Tensor"):
        adapter.callable_gradient(lambda x: 1.0, {"x": 0.0})


def test_cuda_is_not_measured(adapter):
    with pytest.raises(FrameworkUnavailable, match="not measured"):
        adapter.gradient(ex.parse("x.abs()", ["x"], {"tinygrad"}), {"x": 0.0}, device="cuda")


def test_every_catalog_program_resolves(adapter):
    from kinkcheck.catalog import load_catalog

    refused = []
    for case, program in load_catalog().programs("tinygrad"):
        try:
            adapter._resolve(program.tree)
        except Unavailable:
            pass  # a name this release lacks is an unavailable cell, not a refusal
        except ex.ExprError as err:
            refused.append(f"{case.id}: {program.id}: {err}")
    assert refused == [], "the deny rules must not refuse a catalog program:\n" + "\n".join(refused)


def test_a_method_this_release_lacks_is_unavailable(adapter):
    with pytest.raises(Unavailable, match="'Tensor.no_such_method' does not exist"):
        grad(adapter, "x.no_such_method()", {"x": 0.0})


def test_there_is_no_snippet_generator_for_tinygrad():
    """tinygrad has no custom-gradient API kinkcheck writes code for: snippet() refuses it, and migrate records
    a differing target without an equivalent program as "no replacement" (kinkcheck.answers.migrate._pair)."""
    from kinkcheck.answers.migrate import MigrateError, snippet

    with pytest.raises(MigrateError, match="no snippet generator for 'tinygrad'"):
        snippet("tinygrad", "x.abs()", "x", 0.0, 1.0)
