"""The HIPS autograd adapter (kinkcheck.frameworks.autograd): kink values from autograd's own rules
(autograd/numpy/numpy_vjps.py, numpy_jvps.py), modes, dtypes, refusals, and the migration snippet."""

from __future__ import annotations

import math

import numpy as np
import pytest
from gradients import grad

autograd = pytest.importorskip("autograd", reason="HIPS autograd is not installed in this Python (pip install autograd)")

from kinkcheck.language import expr as ex
from kinkcheck.frameworks import ProgramError, Unavailable, get_adapter
from kinkcheck.answers.migrate import snippet
from kinkcheck.oracles import backprop
from kinkcheck.registry import framework
from network import network_grads

MODES = ("reverse", "forward", "second-order")


@pytest.fixture(scope="module")
def adapter():
    return get_adapter("autograd")


def test_adapter_matches_its_registry_record(adapter):
    rec = framework("autograd")
    assert adapter.modes == rec.modes == MODES, f"adapter modes {adapter.modes}, registry {rec.modes}"
    assert "bfloat16" not in rec.dtypes, f"NumPy has no bfloat16, registry dtypes {rec.dtypes}"
    assert adapter.devices() == ["cpu"], adapter.devices()
    assert adapter.settings()["numpy"] == np.__version__, adapter.settings()


@pytest.mark.parametrize("mode", ["reverse", "forward"])
def test_relu_via_maximum_at_0_is_split_evenly(adapter, mode):
    # balanced_eq: (x == z) / (1.0 + (x == y)) gives each tied argument half
    got = grad(adapter, "anp.maximum(x, 0.0)", {"x": 0.0}, mode=mode)
    assert got == {"x": 0.5}, f"anp.maximum(x, 0.0) at 0 ({mode}): {got}, autograd's balanced_eq gives 0.5"
    beside = grad(adapter, "anp.maximum(x, 0.0)", {"x": 0.25}, mode=mode)
    assert beside == {"x": 1.0}, f"anp.maximum(x, 0.0) at 0.25 ({mode}): {beside}, want 1"


@pytest.mark.parametrize("mode", ["reverse", "forward"])
@pytest.mark.parametrize("fn", ["maximum", "minimum", "fmax", "fmin"])
def test_two_argument_tie_is_split_evenly(adapter, fn, mode):
    got = grad(adapter, f"anp.{fn}(x, y)", {"x": 1.0, "y": 1.0}, mode=mode)
    assert got == {"x": 0.5, "y": 0.5}, f"anp.{fn}(x, y) at x = y = 1 ({mode}): {got}, want (0.5, 0.5)"


@pytest.mark.parametrize("mode", ["reverse", "forward"])
def test_max_of_a_tied_vector_shares_among_the_maxima(adapter, mode):
    got = grad(adapter, "anp.max(v)", {"v": [1.0, 0.0, 1.0, 0.0, 1.0, 0.0]}, mode=mode)["v"]
    want = [1 / 3, 0.0, 1 / 3, 0.0, 1 / 3, 0.0]
    assert got == pytest.approx(want), f"anp.max(v) at [1,0,1,0,1,0] ({mode}): {got}, grad_chooser gives {want}"


@pytest.mark.parametrize("mode", MODES)
def test_abs_at_0_and_clip_at_a_bound_are_0(adapter, mode):
    first = 0.0 if mode == "second-order" else 1.0  # beside the kink: the slope (H = 0 for both pieces)
    for text, at, beside in [("anp.abs(x)", 0.0, 0.5), ("anp.clip(x, -1.0, 1.0)", 1.0, 0.5),
                             ("anp.clip(x, -1.0, 1.0)", -1.0, -0.5)]:
        got = grad(adapter, text, {"x": at}, mode=mode)
        assert got == {"x": 0.0}, f"{text} at {at} ({mode}): {got}, autograd's rule gives 0 at the kink"
        off = grad(adapter, text, {"x": beside}, mode=mode)
        assert off == {"x": first}, f"{text} at {beside} ({mode}): {off}, want {first}"


def test_sqrt_at_0_is_inf(adapter):
    for text in ("anp.sqrt(x)", "x ** 0.5"):
        got = grad(adapter, text, {"x": 0.0})["x"]
        assert got == math.inf, f"{text} at 0: {got}, autograd's 0.5 * x ** -0.5 gives inf"


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_narrow_dtypes_run(adapter, dtype):
    got = grad(adapter, "anp.maximum(x, 0.0) * 3.0", {"x": 0.0}, dtype=dtype)
    assert got == {"x": 1.5}, f"3 * anp.maximum(x, 0.0) at 0 in {dtype}: {got}, want 1.5"
    rounded = adapter.rounded({"x": 0.1}, dtype)
    assert rounded is not None and rounded["x"] == float(np.asarray(0.1, dtype=dtype)), \
        f"0.1 in {dtype}: {rounded}, want {float(np.asarray(0.1, dtype=dtype))}"


def test_bfloat16_is_unavailable_naming_numpy(adapter):
    with pytest.raises(Unavailable, match="NumPy, which has no bfloat16"):
        grad(adapter, "anp.abs(x)", {"x": 0.0}, dtype="bfloat16")
    assert adapter.rounded({"x": 0.1}, "bfloat16") is None, "bfloat16 cells are unavailable: no rounded point"


def test_integer_inputs_and_wrt(adapter):
    got = grad(adapter, "anp.maximum(x, y) * k", {"x": 1.0, "y": 1.0, "k": 3}, ints=["k"])
    assert got == {"x": 1.5, "y": 1.5}, f"anp.maximum(x, y) * k at x = y = 1, k = 3: {got}"
    only = grad(adapter, "anp.maximum(x, y)", {"x": 1.0, "y": 1.0}, mode="forward", wrt=["y"])
    assert only == {"y": 0.5}, f"--wrt y: {only}"


def test_callable_gradient_in_every_mode(adapter):
    anp = autograd.numpy
    for mode in MODES:
        # d/dx max(x, y)**2 = 2 max * (1/2) at the tie; H @ 1 = 2 * (1/2 + 1/2) * (1/2) per input
        got = adapter.callable_gradient(lambda x, y: anp.maximum(x, y) ** 2, {"x": 1.0, "y": 1.0}, mode=mode)
        assert got == {"x": 1.0, "y": 1.0}, f"maximum(x, y) ** 2 at a tie ({mode}): {got}, want (1, 1)"
    with pytest.raises(TypeError, match="not a NumPy array"):
        adapter.callable_gradient(lambda x: 1.0, {"x": 0.0})


def test_network_grads_match_the_numpy_oracle_at_the_even_split(adapter):
    tree = ex.parse("anp.maximum(x, 0.0)", ["x"], {"autograd"})
    w1, w2 = network_grads(adapter, tree, "float64")
    check = backprop.crosscheck(w1, w2, "relu", 0.5, "float64")
    assert check.ok, f"anp.maximum(x, 0.0) on the P0 net: {check.detail}"


@pytest.mark.parametrize("target, point, value, beside", [
    ("autograd.numpy.maximum(x, 0.0)", 0.0, 0.0, [(0.5, 1.0), (-0.5, 0.0)]),
    ("autograd.numpy.abs(x)", 0.0, 1.0, [(0.5, 1.0), (-0.5, -1.0)]),
    ("autograd.numpy.clip(x, -1, 1)", 1.0, 0.5, [(1.5, 0.0), (0.5, 1.0)]),
])
def test_migration_snippet_keeps_the_source_value_at_the_kink(target, point, value, beside):
    ns: dict = {}
    code = compile(snippet("autograd", target, "x", point, value, note="the source's value"), "<snippet>", "exec")
    exec(code, ns)  # noqa: S102 - the generated code, as a user runs it
    f = ns["f"]
    for x, want in [(point, value), *beside]:
        rev = float(autograd.grad(f)(np.float64(x)))
        fwd = float(autograd.make_jvp(f)(np.float64(x))(np.float64(1.0))[1])
        assert rev == want and fwd == want, f"snippet for {target} at {x}: grad {rev}, jvp {fwd}, want {want}"


#: Programs autograd itself cannot differentiate, with the error it raises (measured as error cells): no VJP for
#: clip's bounds (argnum 1: a KeyError in autograd.core), broadcast_to and repeat of a 0-d array.
AUTOGRAD_OWN_ERRORS = {
    "autograd.numpy.clip(x, lo, hi)": (KeyError, "1"),
    "autograd.numpy.max(autograd.numpy.broadcast_to(x, (70000,)))": (AssertionError, "extra leading dims"),
    "autograd.numpy.max(autograd.numpy.repeat(x, 70000))": (TypeError, "cannot be interpreted as an integer"),
}


def test_every_catalog_program_runs_in_reverse_mode(adapter):
    from kinkcheck.catalog import load_catalog

    failed = []
    for case, program in load_catalog().programs("autograd"):
        try:
            adapter.gradient(program.tree, case.at, "float64", "cpu", "reverse")
        except (ex.ExprError, Unavailable, ProgramError) as err:  # a refusal or adapter failure, not autograd's
            failed.append(f"{case.id} {program.id}: {err}")
        except tuple(kind for kind, _ in AUTOGRAD_OWN_ERRORS.values()) as err:
            kind, text = AUTOGRAD_OWN_ERRORS.get(program.id, (None, None))
            if isinstance(err, TypeError) and "ArrayBox" in str(err):
                continue  # an operator autograd's traced values lack (x // y): an error cell, measured as such
            if not (kind is not None and isinstance(err, kind) and text in str(err)):
                raise
            continue  # autograd's own refusal: an error cell, measured as such
        except NotImplementedError:
            continue  # autograd has no derivative rule (anp.median): an error cell, measured as such
    assert not failed, f"catalog programs the adapter cannot run in autograd {adapter.version}:\n" + "\n".join(failed)


#: A tie of two inputs (P10): the source values at every tie x == y, the target's own derivative off it.
TIES = [((1.0, 1.0), None), ((3.0, 3.0), None), ((-0.0, 0.0), None), ((1.0, 2.0), "lower"), ((2.0, 1.0), "lower")]


@pytest.mark.parametrize("target, values", [("autograd.numpy.minimum(x, y)", (1.0, 0.0)),
                                            ("autograd.numpy.minimum(x, y)", (0.5, 0.5))])
def test_migration_tie_snippet_keeps_the_source_values_on_the_whole_tie_line(target, values):
    from kinkcheck.answers.migrate import tie_snippet

    ns: dict = {}
    code = tie_snippet("autograd", target, ("x", "y"), values, note="the source's value")
    exec(compile(code, "<snippet>", "exec"), ns)  # noqa: S102 - the generated code, as a user runs it
    f = ns["f"]
    for (a, b), off in TIES:
        want = values if off is None else ((1.0, 0.0) if a < b else (0.0, 1.0))  # minimum: the lower input
        rev = tuple(float(g) for g in autograd.grad(f, (0, 1))(np.float64(a), np.float64(b)))
        fwd = float(autograd.make_jvp(f, 0)(np.float64(a), np.float64(b))(np.float64(1.0))[1])
        assert rev == want and fwd == want[0], f"tie snippet for {target} at ({a}, {b}): {rev}, jvp {fwd}, want {want}"
