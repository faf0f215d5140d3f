"""The tinygrad adapter (kinkcheck.frameworks.tinygrad): kink values from tinygrad's gradient rules
(tinygrad/gradient.py: Ops.MAX splits a tie in half, a max reduction shares it among the tied entries;
relu and clamp are written with where), the device it picks, modes, dtypes and refusals."""

from __future__ import annotations

import pytest
from gradients import grad

tinygrad = pytest.importorskip("tinygrad", reason="tinygrad is not installed in this Python (pip install tinygrad)")

from kinkcheck.language import expr as ex
from kinkcheck.frameworks import Unavailable, get_adapter
from kinkcheck.oracles import backprop
from kinkcheck.registry import framework
from network import network_grads

MODES = ("reverse", "jit")


@pytest.fixture(scope="module")
def adapter():
    return get_adapter("tinygrad")


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


def test_callable_gradient_in_every_mode(adapter):
    for mode in MODES:
        got = adapter.callable_gradient(lambda x, y: x.maximum(y) ** 2, {"x": 1.0, "y": 1.0}, mode=mode)
        assert got == {"x": 1.0, "y": 1.0}, f"callable max(x, y)**2 at the tie ({mode}): {got}, want 2 * 1 * 1/2 each"
    with pytest.raises(TypeError, match="not a tinygrad.Tensor"):
        adapter.callable_gradient(lambda x: 1.0, {"x": 0.0})


def test_a_method_this_release_lacks_is_unavailable(adapter):
    with pytest.raises(Unavailable, match="'Tensor.no_such_method' does not exist"):
        grad(adapter, "x.no_such_method()", {"x": 0.0})


def test_there_is_no_snippet_generator_for_tinygrad():
    """tinygrad has no custom-gradient API kinkcheck writes code for: snippet() refuses it, and migrate records
    a differing target without an equivalent program as "no replacement" (kinkcheck.answers.migrate._pair)."""
    from kinkcheck.answers.migrate import MigrateError, snippet

    with pytest.raises(MigrateError, match="no snippet generator for 'tinygrad'"):
        snippet("tinygrad", "x.abs()", "x", 0.0, 1.0)
