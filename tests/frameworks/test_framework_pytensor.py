"""The PyTensor adapter (kinkcheck.frameworks.pytensor): kink values from PyTensor's L_op rules
(pytensor/scalar/basic.py, pytensor/tensor/math.py), modes, dtypes and refusals."""

from __future__ import annotations

import math

import numpy as np
import pytest
from gradients import grad

pytest.importorskip("pytensor", reason="PyTensor is not installed in this Python (pip install pytensor)")

from kinkcheck.language import expr as ex
from kinkcheck.frameworks import Unavailable, get_adapter
from kinkcheck.oracles import backprop
from kinkcheck.registry import framework
from network import network_grads

#: The modes compiled with the Python linker (cheap); ``jit`` compiles C or Numba and is tested sparingly.
FAST_MODES = ("reverse", "forward", "second-order")


@pytest.fixture(scope="module")
def adapter():
    return get_adapter("pytensor")


def test_adapter_matches_its_registry_record(adapter):
    rec = framework("pytensor")
    assert adapter.modes == rec.modes == ("reverse", "forward", "jit", "second-order"), \
        f"adapter modes {adapter.modes}, registry {rec.modes}"
    assert "bfloat16" not in rec.dtypes, f"PyTensor has no bfloat16, registry dtypes {rec.dtypes}"
    settings = adapter.settings()
    assert {"jit", "cxx", "reverse, forward, second-order"} <= set(settings), f"settings name each compile: {settings}"


@pytest.mark.parametrize("mode", ["reverse", "forward", "jit"])
def test_relu_via_maximum_at_0_goes_to_the_first_argument(adapter, mode):
    # Maximum.L_op: eq(output, x) * gz to x, (1 - eq(output, x)) * gz to y
    got = grad(adapter, "pt.maximum(x, 0.0)", {"x": 0.0}, mode=mode)
    assert got == {"x": 1.0}, f"pt.maximum(x, 0.0) at 0 ({mode}): {got}, the tie goes to x: 1"
    swapped = grad(adapter, "pt.maximum(0.0, x)", {"x": 0.0}, mode=mode)
    assert swapped == {"x": 0.0}, f"pt.maximum(0.0, x) at 0 ({mode}): {swapped}, the tie goes to the constant: 0"


@pytest.mark.parametrize("mode", FAST_MODES[:2])
@pytest.mark.parametrize("fn", ["maximum", "minimum"])
def test_two_argument_tie_goes_to_the_first(adapter, fn, mode):
    got = grad(adapter, f"pt.{fn}(x, y)", {"x": 1.0, "y": 1.0}, mode=mode)
    assert got == {"x": 1.0, "y": 0.0}, f"pt.{fn}(x, y) at x = y = 1 ({mode}): {got}, want (1, 0)"
    got = grad(adapter, f"pt.{fn}(y, x)", {"x": 1.0, "y": 1.0}, mode=mode)
    assert got == {"x": 0.0, "y": 1.0}, f"pt.{fn}(y, x) at x = y = 1 ({mode}): {got}, want (0, 1)"


def test_max_of_a_tied_vector_gives_every_tied_entry_the_whole_derivative(adapter):
    got = grad(adapter, "pt.max(v)", {"v": [1.0, 0.0, 1.0, 0.0, 1.0, 0.0]})
    assert got == {"v": [1.0, 0.0, 1.0, 0.0, 1.0, 0.0]}, f"pt.max(v) at [1,0,1,0,1,0]: {got}, Max.L_op: eq(max, v)"


@pytest.mark.parametrize("mode", FAST_MODES[:2])
def test_abs_at_0_is_0_and_clip_at_a_bound_is_1(adapter, mode):
    assert grad(adapter, "pt.abs(x)", {"x": 0.0}, mode=mode) == {"x": 0.0}, f"pt.abs at 0 ({mode}): gz * sign(0)"
    for at in (-1.0, 1.0):
        got = grad(adapter, "pt.clip(x, -1.0, 1.0)", {"x": at}, mode=mode)
        assert got == {"x": 1.0}, f"pt.clip(x, -1, 1) at {at} ({mode}): {got}, Clip.L_op: (x >= min) & (x <= max)"
        beyond = grad(adapter, "pt.clip(x, -1.0, 1.0)", {"x": 2 * at}, mode=mode)
        assert beyond == {"x": 0.0}, f"pt.clip(x, -1, 1) at {2 * at} ({mode}): {beyond}, want 0"


def test_sqrt_at_0_is_inf(adapter):
    for text in ("pt.sqrt(x)", "x ** 0.5"):
        got = grad(adapter, text, {"x": 0.0})["x"]
        assert got == math.inf, f"{text} at 0: {got}, Sqrt.L_op gives 0.5 / sqrt(0) = inf"


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_narrow_dtypes_run(adapter, dtype):
    got = grad(adapter, "pt.maximum(x, 0.0) * 3.0", {"x": 0.0}, dtype=dtype)
    assert got == {"x": 3.0}, f"3 * pt.maximum(x, 0.0) at 0 in {dtype}: {got}, want 3"
    rounded = adapter.rounded({"x": 0.1}, dtype)
    assert rounded is not None and rounded["x"] == float(np.asarray(0.1, dtype=dtype)), \
        f"0.1 in {dtype}: {rounded}, want {float(np.asarray(0.1, dtype=dtype))}"


def test_float16_in_jit_runs_or_names_the_backend(adapter):
    try:
        got = grad(adapter, "pt.abs(x)", {"x": 0.5}, dtype="float16", mode="jit")
    except Unavailable as err:
        assert "float16" in str(err) and "default mode" in str(err), f"jit float16 unavailable: {err}"
    else:
        assert got == {"x": 1.0}, f"pt.abs at 0.5 in float16 (jit): {got}"


def test_bfloat16_is_unavailable(adapter):
    with pytest.raises(Unavailable, match="pytensor has no bfloat16"):
        grad(adapter, "pt.abs(x)", {"x": 0.0}, dtype="bfloat16")
    assert adapter.rounded({"x": 0.1}, "bfloat16") is None, "bfloat16 cells are unavailable: no rounded point"


def test_integer_inputs_and_wrt(adapter):
    got = grad(adapter, "pt.maximum(x, y) * k", {"x": 1.0, "y": 1.0, "k": 3}, ints=["k"])
    assert got == {"x": 3.0, "y": 0.0}, f"pt.maximum(x, y) * k at x = y = 1, k = 3: {got}"
    only = grad(adapter, "pt.maximum(x, y)", {"x": 1.0, "y": 1.0}, mode="forward", wrt=["y"])
    assert only == {"y": 0.0}, f"--wrt y: {only}"


def test_callable_gradient(adapter):
    import pytensor.tensor as pt

    for mode in FAST_MODES:
        # d/dx max(x, y)**2 = 2 max * 1 at the tie (y gets 0); H @ 1 = 2 * (1 + 0) * 1 for x, 0 for y
        got = adapter.callable_gradient(lambda x, y: pt.maximum(x, y) ** 2, {"x": 1.0, "y": 1.0}, mode=mode)
        assert got == {"x": 2.0, "y": 0.0}, f"maximum(x, y) ** 2 at a tie ({mode}): {got}, want (2, 0)"
    with pytest.raises(TypeError, match="not a PyTensor variable"):
        adapter.callable_gradient(lambda x: 1.0, {"x": 0.0})


def test_network_grads_match_the_numpy_oracle_with_the_tie_to_x(adapter):
    tree = ex.parse("pt.maximum(x, 0.0)", ["x"], {"pytensor"})
    w1, w2 = network_grads(adapter, tree, "float64")
    check = backprop.crosscheck(w1, w2, "relu", 1, "float64")
    assert check.ok, f"pt.maximum(x, 0.0) on the P0 net: {check.detail}"


def test_every_catalog_program_resolves(adapter):
    from kinkcheck.catalog import load_catalog

    failed = []
    for case, program in load_catalog().programs("pytensor"):
        try:
            adapter._resolve(program.tree)
        except (ex.ExprError, Unavailable) as err:  # refused, or a name this PyTensor lacks
            failed.append(f"{case.id} {program.id}: {err}")
    assert not failed, f"catalog programs that do not resolve in PyTensor {adapter.version}:\n" + "\n".join(failed)
