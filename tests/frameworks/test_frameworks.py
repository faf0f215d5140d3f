"""Adapter behaviour (kinkcheck.frameworks): the contract the probe and the CLI rely on, run in every framework
of the registry that is installed here (each in its own spelling: ``frameworks/<name>/samples.toml``), and what
only torch and JAX are held to (every eager mode with --wrt and int: inputs, -0.0's sign, state-changing calls).

These tests do not pin kink conventions (test_public_cases.py does); they hold for any installed version.
"""

from __future__ import annotations

import functools
import importlib.util
import math
import tomllib

import numpy as np
import pytest

from kinkcheck.language import expr as ex
from kinkcheck.language import points as pt
from kinkcheck.frameworks import FrameworkUnavailable, ProgramError, Unavailable, get_adapter
from kinkcheck.oracles import backprop
from kinkcheck.registry import REGISTRY
from gradients import grad
from network import network_grads

#: torch and JAX, marked so that ``-m torch`` / ``-m jax`` select them: the tests only they are held to.
FRAMEWORKS = [pytest.param("torch", marks=pytest.mark.torch), pytest.param("jax", marks=pytest.mark.jax)]
#: Every framework of the registry: the contract (a framework not installed here is skipped, saying so).
def _marks(name: str) -> list:
    """``-m torch`` / ``-m jax`` select those frameworks' cells; the others have no mark of their own."""
    return [getattr(pytest.mark, name)] if name in ("torch", "jax") else []


EVERY_FRAMEWORK = [pytest.param(name, marks=_marks(name)) for name in REGISTRY]


@functools.cache
def samples(framework: str) -> dict[str, str]:
    """The framework's sample programs (``samples.toml`` in its folder: one function per key, its spelling)."""
    folder = importlib.util.find_spec(REGISTRY[framework].adapter).submodule_search_locations[0]
    with open(f"{folder}/samples.toml", "rb") as fh:
        return tomllib.load(fh)


#: Per framework, programs written in the call-expression language: its samples, and ``v > 0`` (a boolean result).
PROGRAMS = {name: {**{k: v for k, v in samples(name).items() if isinstance(v, str)}, "boolean": "v > 0"}
            for name in REGISTRY}
#: What torch and JAX are also held to (float32 results: sin's derivative rounded).
PROGRAMS["torch"]["sin"] = "torch.sin(x)"
PROGRAMS["jax"]["sin"] = "jax.numpy.sin(x)"


def adapter_for(request, framework: str):
    if framework in ("torch", "jax"):
        return request.getfixturevalue(f"{framework}_adapter")
    if importlib.util.find_spec(REGISTRY[framework].name) is None:
        pytest.skip(f"{framework} is not installed in this Python (nox -s tests installs it where it has wheels)")
    return _adapter(framework)


@functools.cache
def _adapter(framework: str):
    return get_adapter(framework)


def tree(framework: str, key: str, inputs=("x", "y", "v")):
    return ex.parse(PROGRAMS[framework][key], inputs, {framework})


def label(adapter, key: str, at, dtype="float64", mode="reverse") -> str:
    return f"{PROGRAMS[adapter.name][key]} at {at} ({dtype}, {mode}, {adapter.name} {adapter.version})"


#: Modes the contract leaves to each framework's own tests: torch's compilers take tens of seconds a program.
SLOW_MODES = {"inductor", "aot_eager"}


def first_order(adapter) -> list[str]:
    """The adapter's first-order modes other than reverse (not second-order, which gives H @ 1; not
    :data:`SLOW_MODES`)."""
    return [m for m in adapter.modes if m not in ("reverse", "second-order", *SLOW_MODES)]


def eager(adapter, *modes: str) -> list[str]:
    """Those of ``modes`` the adapter has."""
    return [m for m in modes if m in adapter.modes]


#: (framework, program) for every name a framework's samples say the expression language refuses there.
REFUSED = [pytest.param(name, text, id=f"{name}-{i}", marks=_marks(name))
           for name in REGISTRY for i, text in enumerate(samples(name).get("refused", []))]


def test_every_framework_has_its_samples():
    """Each framework's folder holds the programs the contract runs (a new framework adds its samples.toml)."""
    for name in REGISTRY:
        missing = {"relu", "missing", "integer", "smooth"} - set(samples(name))
        assert not missing, f"frameworks/{name}/samples.toml lacks {sorted(missing)}"
        for key, text in samples(name).items():
            if isinstance(text, str):  # every sample is a program of the language
                ex.parse(text, ("x", "y", "v"), {name})


@pytest.mark.parametrize("framework", EVERY_FRAMEWORK)
def test_every_catalog_program_resolves(request, catalog, framework):
    """The deny rules refuse no catalog program: each of the framework's resolves, or names what this release
    lacks (an unavailable cell, not a refusal)."""
    adapter = adapter_for(request, framework)
    refused = []
    for case, program in catalog.programs(framework):
        try:
            adapter._resolve(program.tree)
        except Unavailable:
            pass  # a name this release lacks is an unavailable cell, not a refusal
        except ex.ExprError as err:
            refused.append(f"{case.id}: {program.id}: {err}")
    assert refused == [], f"the deny rules must not refuse a catalog program ({framework}):\n" + "\n".join(refused)


@pytest.mark.parametrize("framework, text", REFUSED)
def test_refused_names_raise_before_anything_runs(request, monkeypatch, framework, text):
    """What the expression language refuses in a framework (its samples' ``refused``: global state, files,
    randomness, compilation, custom gradients, layers with parameters) raises before anything is evaluated."""
    adapter = adapter_for(request, framework)
    calls = []
    monkeypatch.setattr(ex, "evaluate", lambda *a, **k: calls.append(a))
    with pytest.raises(ex.ExprError, match="refused|outside|not allowed"):
        adapter.gradient(ex.parse(text, ["x"], {framework}), {"x": 0.0}, "float64")
    assert not calls, f"{framework}: {text}: evaluated before being refused"


@pytest.mark.parametrize("framework", EVERY_FRAMEWORK)
def test_missing_name_is_unavailable_before_anything_runs(request, monkeypatch, framework):
    adapter = adapter_for(request, framework)
    calls = []
    real_evaluate = ex.evaluate

    def spy(*args, **kwargs):
        calls.append(args)
        return real_evaluate(*args, **kwargs)

    monkeypatch.setattr(ex, "evaluate", spy)
    at = {"x": 0.0}
    where = label(adapter, "missing", at)
    for mode in eager(adapter, "reverse", "forward"):
        with pytest.raises(Unavailable, match="no_such_[a-z]+_in_this_version") as info:
            adapter.gradient(tree(framework, "missing"), at, "float64", mode=mode)
        assert "does not exist" in str(info.value), f"{where} ({mode}): reason {info.value!r} does not say why"
    with pytest.raises(Unavailable, match="no_such_[a-z]+_in_this_version"):
        network_grads(adapter, tree(framework, "missing"), "float32")
    assert calls == [], f"{where}: the program was evaluated {len(calls)} time(s) before the missing name was found"


@pytest.mark.parametrize("key", ["integer", "boolean"])
@pytest.mark.parametrize("mode", ["reverse", "forward", "graph"])
@pytest.mark.parametrize("framework", EVERY_FRAMEWORK)
def test_non_float_output_is_a_program_error(request, framework, mode, key):
    adapter = adapter_for(request, framework)
    if mode not in adapter.modes:
        pytest.skip(f"{framework} has no {mode} mode")
    at = {"v": [1.0, 3.0, 2.0]}
    with pytest.raises(ProgramError, match="no gradient") as info:
        adapter.gradient(tree(framework, key, ("v",)), at, "float64", mode=mode)
    assert ("int" in str(info.value)) or ("bool" in str(info.value)), (
        f"{label(adapter, key, at, mode=mode)}: ProgramError {info.value!r} does not name the dtype"
    )


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("framework", EVERY_FRAMEWORK)
def test_every_mode_gives_a_smooth_programs_exact_gradient(request, framework, dtype):
    """Reverse mode gives the exact gradient of a smooth program, and every other first-order mode the same."""
    adapter = adapter_for(request, framework)
    at = {"x": 0.3, "y": -1.2, "v": [[0.5, -2.0], [1.5, 0.0]]}
    where = label(adapter, "smooth", at, dtype)
    rev = adapter.gradient(tree(framework, "smooth"), at, dtype, mode="reverse")
    v = np.array(at["v"])
    exact = {
        "x": math.cos(0.3) * 1.2**2,
        "y": 2 * math.sin(0.3) * -1.2,
        "v": (np.tanh(v) + v / np.cosh(v) ** 2).tolist(),
    }
    tol = float(samples(framework).get("smooth_float64_tolerance", 1e-12)) if dtype == "float64" else 1e-5
    assert set(rev) == {"x", "y", "v"}, f"{where}: gradient keys {set(rev)}"
    for name in ("x", "y", "v"):
        assert np.shape(rev[name]) == np.shape(at[name]), f"{where}: reverse {name} has shape {np.shape(rev[name])}"
        np.testing.assert_allclose(rev[name], exact[name], rtol=tol, atol=tol, err_msg=f"{where}: reverse vs exact, {name}")
    for mode in first_order(adapter):  # every other first-order mode gives what reverse mode gives
        got = adapter.gradient(tree(framework, "smooth"), at, dtype, mode=mode)
        assert set(got) == set(rev), f"{where}: {mode}'s gradient keys {set(got)}"
        for name in ("x", "y", "v"):
            assert np.shape(got[name]) == np.shape(at[name]), f"{where}: {mode} {name} has shape {np.shape(got[name])}"
            np.testing.assert_allclose(got[name], rev[name], rtol=tol, atol=tol, err_msg=f"{where}: {mode} vs reverse, {name}")


@pytest.mark.parametrize("framework", EVERY_FRAMEWORK)
def test_second_order_is_the_hessian_times_ones(request, framework):
    """Second-order mode gives H @ 1: f = x**3 * y has H = [[6xy, 3x²], [3x², 0]], so at (2, 1) H @ 1 = (24, 12); a
    linear program's is 0 (a constant gradient). In every framework that has the mode."""
    adapter = adapter_for(request, framework)
    if "second-order" not in adapter.modes:
        pytest.skip(f"{framework} has no second-order mode")
    got = grad(adapter, "x ** 3 * y", {"x": 2.0, "y": 1.0}, mode="second-order")
    assert got == pytest.approx({"x": 24.0, "y": 12.0}), f"{framework}: x**3 * y at (2, 1), H @ 1: {got}, want (24, 12)"
    linear = grad(adapter, "3.0 * x", {"x": 1.0}, mode="second-order")
    assert linear == {"x": 0.0}, f"{framework}: 3x: H @ 1 = {linear}, want 0 (a constant gradient)"


@pytest.mark.parametrize("mode", ["reverse", "forward"])
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_float32_inputs_give_float32_results(request, framework, mode):
    adapter = adapter_for(request, framework)
    at = {"x": 0.1}
    g32 = adapter.gradient(tree(framework, "sin", ("x",)), at, "float32", mode=mode)["x"]
    g64 = adapter.gradient(tree(framework, "sin", ("x",)), at, "float64", mode=mode)["x"]
    where = label(adapter, "sin", at, "float32", mode)
    assert float(np.float32(g32)) == g32, f"{where}: {g32!r} is not a float32 value"
    want = float(np.cos(np.float32(0.1)))  # cos of the float32 input, rounded to float32
    assert g32 == pytest.approx(want, rel=1e-6), f"{where}: {g32!r}, float32 cos(0.1) is {want!r}"
    assert g64 == math.cos(0.1), f"{label(adapter, 'sin', at, 'float64', mode)}: {g64!r}, cos(0.1) is {math.cos(0.1)!r}"
    assert g32 != g64, f"{where}: float32 result {g32!r} equals the float64 one; was the input cast to float32?"


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("mode", ["reverse", "forward"])
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_negative_zero_keeps_its_sign(request, catalog, framework, mode, dtype):
    """-0.0 reaches the framework as -0.0: the catalog keeps it, and d/dx x * copysign(1, x) is -1 there."""
    adapter = adapter_for(request, framework)
    x = catalog.case("abs@-0.0").at["x"]
    assert math.copysign(1.0, x) == -1.0, f"catalog case abs@-0.0 holds {x!r}, not -0.0"
    for point, want in ((x, -1.0), (0.0, 1.0)):
        got = adapter.gradient(tree(framework, "sign_probe", ("x",)), {"x": point}, dtype, mode=mode)["x"]
        assert got == want, f"{label(adapter, 'sign_probe', {'x': point}, dtype, mode)}: {got!r}, expected {want}"
    # abs at -0.0 through the catalog program runs and returns a finite number (its value is pinned in P5).
    got = adapter.gradient(tree(framework, "abs", ("x",)), {"x": x}, dtype, mode=mode)["x"]
    assert math.isfinite(got), f"{label(adapter, 'abs', {'x': x}, dtype, mode)}: {got!r}"


@pytest.mark.parametrize("dtype", ["int32", "complex64", "float8", "torch.float64"])
@pytest.mark.parametrize("framework", EVERY_FRAMEWORK)
def test_unknown_dtype_is_rejected(request, framework, dtype):
    adapter = adapter_for(request, framework)
    with pytest.raises(ex.ExprError, match="unknown dtype") as info:
        adapter.gradient(tree(framework, "relu", ("x",)), {"x": 0.1}, dtype)
    assert repr(dtype) in str(info.value), f"{adapter.name} {adapter.version}: {info.value!r} does not name {dtype!r}"


@pytest.mark.parametrize("framework", EVERY_FRAMEWORK)
def test_cuda_without_a_gpu_is_framework_unavailable(request, framework):
    """A CUDA request where there is none (no GPU, or a framework kinkcheck measures on CPU only) is a
    framework-unavailable line, never a value."""
    adapter = adapter_for(request, framework)
    if "cuda" in adapter.devices():
        pytest.skip(f"{adapter.name} {adapter.version} sees a CUDA device here; the no-GPU path cannot be tested")
    where = f"{PROGRAMS[framework]['relu']} on cuda ({adapter.name} {adapter.version}, no GPU)"
    reason = "no CUDA device" if "cuda" in REGISTRY[framework].devices else "CPU only|not measured"
    with pytest.raises(FrameworkUnavailable, match=reason):
        adapter.gradient(tree(framework, "relu", ("x",)), {"x": 0.0}, "float64", device="cuda")
    with pytest.raises(FrameworkUnavailable, match=reason):
        network_grads(adapter, tree(framework, "relu", ("x",)), "float32", device="cuda")
    assert adapter.devices() == ["cpu"], f"{where}: devices() is {adapter.devices()}"


@pytest.mark.torch
def test_metal_without_apple_silicon_is_framework_unavailable_and_never_runs_float64(torch_adapter, monkeypatch):
    """PyTorch's MPS backend is the ``metal`` device: absent here (no Apple silicon), a one-line 'not measured';
    where present, float64 is an unavailable cell before any tensor is made (the MPS framework has no float64)."""
    import kinkcheck.frameworks.torch.adapter as adapter_module

    if "metal" in torch_adapter.devices():
        pytest.skip(f"torch {torch_adapter.version} sees a Metal device here; the no-Metal path cannot be tested")
    relu = tree("torch", "relu", ("x",))
    with pytest.raises(FrameworkUnavailable, match="no Metal device"):
        torch_adapter.gradient(relu, {"x": 0.0}, "float32", device="metal")
    with pytest.raises(FrameworkUnavailable, match="no Metal device"):
        network_grads(torch_adapter, relu, "float32", device="metal")
    monkeypatch.setattr(adapter_module, "_mps_available", lambda: True)
    assert torch_adapter.devices() == ["cpu", "metal"]
    for mode in ("reverse", "inductor"):
        with pytest.raises(Unavailable, match="float64 does not exist on Metal"):
            torch_adapter.gradient(relu, {"x": 0.0}, "float64", device="metal", mode=mode)
    assert str(torch_adapter._device("metal", "float32")) == "mps", "kinkcheck's metal is torch's mps"


@pytest.mark.parametrize("option, value", [("mode", "sideways"), ("device", "tpu7")])
@pytest.mark.parametrize("framework", EVERY_FRAMEWORK)
def test_unknown_mode_or_device_is_rejected(request, framework, option, value):
    adapter = adapter_for(request, framework)
    with pytest.raises(ex.ExprError, match=f"unknown {option}"):
        adapter.gradient(tree(framework, "relu", ("x",)), {"x": 0.0}, "float64", **{option: value})


@pytest.mark.parametrize("framework", EVERY_FRAMEWORK)
def test_network_grads_relu_matches_the_numpy_oracle(request, framework):
    adapter = adapter_for(request, framework)
    w1, w2 = network_grads(adapter, tree(framework, "relu", ("x",)), "float32")
    where = f"{PROGRAMS[framework]['relu']} on the P0 net (float32, {adapter.name} {adapter.version})"
    oracle = backprop.two_layer_grads(backprop.P0, "relu", 0, dtype=object)
    assert w1 == [[float(v) for v in row] for row in oracle.dW1], f"{where}: W1 {w1}, NumPy oracle (relu'(0)=0) {oracle.dW1.tolist()}"
    assert w2 == [[float(v) for v in row] for row in oracle.dW2], f"{where}: W2 {w2}, NumPy oracle {oracle.dW2.tolist()}"
    check = backprop.crosscheck(w1, w2, "relu", 0, "float32")
    assert check.ok, f"{where}: {check.detail}"


def test_unknown_framework_is_framework_unavailable():
    with pytest.raises(FrameworkUnavailable, match="unknown framework"):
        get_adapter("caffe")


@pytest.mark.parametrize(
    "framework, sources",
    [
        pytest.param("torch", ["x * torch.set_grad_enabled(False)", "x * torch.set_default_dtype(torch.float16)",
                               "x * torch.no_grad()", "x * torch.inference_mode()", "x * torch.autocast(x)",
                               "x * torch.CompilationUnit()", "torch.cond(x > 0, torch.sin, torch.cos, (x,))"],
                     marks=pytest.mark.torch),
        pytest.param("jax", ["x * jax.numpy_rank_promotion(x)", "x * jax.default_matmul_precision(x)",
                             "x * jax.transfer_guard(x)", "jax.jit(jax.numpy.abs)(x)"], marks=pytest.mark.jax),
    ],
)
def test_state_changing_programs_are_refused_and_leave_the_next_evaluation_alone(framework, sources):
    adapter = get_adapter(framework)
    plain = ex.parse({"torch": "torch.abs(x)", "jax": "jax.numpy.abs(x)"}[framework], {"x"}, {framework})
    before = adapter.gradient(plain, {"x": -2.0})
    for source in sources:
        with pytest.raises(ex.ExprError, match="is refused"):  # at parse or name resolution: nothing ran
            adapter.gradient(ex.parse(source, {"x"}, {framework}), {"x": -2.0})
    after = adapter.gradient(plain, {"x": -2.0})
    assert before == after == {"x": -1.0}, f"{before} then {after}"
    if framework == "torch":
        import torch

        assert torch.is_grad_enabled() and torch.get_default_dtype() == torch.float32, "global state unchanged"


# -- issue 11 part 4: --wrt, int: inputs and non-finite points in every mode -------------------------------

EAGER_MODES = {"torch": ["reverse", "functional", "forward", "forward-ad", "vmap", "second-order"],
               "jax": ["reverse", "jit", "forward", "jacfwd", "jacrev", "vmap", "second-order"]}
NAMESPACE = {"torch": "torch", "jax": "jax.numpy"}


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_wrt_differentiates_only_the_named_inputs_in_every_mode(request, framework):
    """d/dx of sin(x) * y**2 + sum(tanh(v) * v) at x=0.5, y=3 is 9 cos(0.5); y and v are constants."""
    adapter = adapter_for(request, framework)
    ns = NAMESPACE[framework]
    tree = ex.parse(f"{ns}.sin(x) * y ** 2 + {ns}.sum({ns}.tanh(v) * v)", ("x", "y", "v"), {framework})
    at = {"x": 0.5, "y": 3.0, "v": [1.0, -2.0]}
    for mode in EAGER_MODES[framework]:
        got = adapter.gradient(tree, at, mode=mode, wrt=("x",))
        want = -9 * math.sin(0.5) if mode == "second-order" else 9 * math.cos(0.5)  # H @ 1 in x alone
        assert list(got) == ["x"], f"{framework} {mode}: only x comes back, got {got}"
        assert got["x"] == pytest.approx(want, rel=1e-12), f"{framework} {mode}: d/dx = {got['x']}, want {want}"
        got = adapter.gradient(tree, at, mode=mode, wrt=("v", "y"))
        assert list(got) == ["y", "v"], f"{framework} {mode}: the --at order, got {list(got)}"


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_an_int_input_is_an_integer_tensor_and_never_differentiated(request, framework):
    adapter = adapter_for(request, framework)
    ns = NAMESPACE[framework]
    # an integer tensor indexes; a float one would be refused by take/gather
    tree = ex.parse(f"{ns}.sum(v[k] * 2) + x * k.sum()", ("x", "v", "k"), {framework})
    inputs = pt.parse_inputs("x=1.5,v=[1,2,3],k=int:[2,0]")
    for mode in EAGER_MODES[framework]:
        got = adapter.gradient(tree, inputs.at, mode=mode, wrt=inputs.wrt, ints=inputs.ints)
        want = {"x": 0.0, "v": [0.0] * 3} if mode == "second-order" else {"x": 2.0, "v": [2.0, 0.0, 2.0]}
        assert got == want, f"{framework} {mode}: {got}"


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("wrt, ints, reason", [(("z",), (), "'z' is not in the point"),
                                               (("k",), ("k",), "integer inputs are never differentiated"),
                                               (None, ("x", "k"), "no input to differentiate"),
                                               ((), (), "no input to differentiate")])
def test_wrt_and_ints_must_fit_the_point(request, framework, wrt, ints, reason):
    adapter = adapter_for(request, framework)
    tree = ex.parse("x * k", ("x", "k"), {framework})
    with pytest.raises(ex.ExprError, match=reason):
        adapter.gradient(tree, {"x": 1.0, "k": 2}, wrt=wrt, ints=ints)


@pytest.mark.torch
def test_a_compiled_mode_takes_wrt_and_ints(torch_adapter):
    tree = ex.parse("torch.maximum(x, y) * k", ("x", "y", "k"), {"torch"})
    got = torch_adapter.gradient(tree, {"x": 0.0, "y": 0.0, "k": 3}, mode="aot_eager", wrt=("y",), ints=("k",))
    assert got == {"y": 1.5}, f"aot_eager: maximum's tie split evenly, times k = 3; only y: {got}"


@pytest.mark.jax
def test_jax_int_inputs_without_x64_must_fit_int32(jax_adapter):
    tree = ex.parse("x * k", ("x", "k"), {"jax"})
    assert jax_adapter.gradient(tree, {"x": 1.0, "k": 7}, dtype="float32", ints=("k",)) == {"x": 7.0}
    with pytest.raises(ex.ExprError, match="does not fit in int32"):
        jax_adapter.gradient(tree, {"x": 1.0, "k": 2 ** 40}, dtype="float32", ints=("k",))
    assert jax_adapter.gradient(tree, {"x": 1.0, "k": 2 ** 40}, ints=("k",)) == {"x": float(2 ** 40)}, "int64 with x64"


# Q8-Q10 of ../shared/cases/public-cases-2.md, measured in the pinned releases (conftest.PINNED).

def _grad(adapter, source, at, mode="reverse", wrt=None):
    inputs = pt.parse_inputs(at, wrt)
    tree = ex.parse(source, inputs.at, {adapter.name})
    return adapter.gradient(tree, inputs.at, mode=mode, wrt=inputs.wrt, ints=inputs.ints)


@pytest.mark.torch
@pytest.mark.parametrize("source, at, want", [
    ("torch.nn.functional.gelu(x, approximate='tanh')", "x=0", {"x": 0.5}),
    ("torch.nn.functional.gelu(x, approximate='tanh')", "x=1", {"x": 1.0829640838457826}),
    ("torch.nn.functional.l1_loss(x, y, reduction='sum')", "x=[0,1],y=[0,2]", {"x": [0.0, -1.0], "y": [0.0, 1.0]}),
    ("torch.nn.functional.l1_loss(x, y, reduction='mean')", "x=[0,1],y=[0,2]", {"x": [0.0, -0.5], "y": [0.0, 0.5]}),
    ("torch.linalg.matrix_norm(A, ord='nuc')", "A=[[1,0],[0,1]]", {"A": [[1.0, 0.0], [0.0, 1.0]]}),
    ("torch.sum(v[None] * 2, dim=None, keepdim=True)", "v=[1,2]", {"v": [2.0, 2.0]}),
])
def test_q8_string_none_and_bool_arguments_in_torch(torch_adapter, source, at, want):
    from conftest import require_pinned

    require_pinned(torch_adapter)
    got = _grad(torch_adapter, source, at)
    assert list(got) == list(want), f"{source} at {at}: {got}"
    for k in want:
        assert np.allclose(got[k], want[k], rtol=1e-12, atol=0), f"{source} at {at}: {got}"


@pytest.mark.jax
def test_q8_nuclear_norm_in_jax(jax_adapter):
    from conftest import require_pinned

    require_pinned(jax_adapter)
    got = _grad(jax_adapter, "jnp.linalg.norm(A, 'nuc')", "A=[[1,0],[0,1]]")
    assert np.allclose(got["A"], [[1.0, 0.0], [0.0, 1.0]], rtol=0, atol=1e-12), f"U V^T at the identity: {got}"


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_q9_integer_power_zero_under_jit_and_reverse(request, framework):
    """x ** k with k = 0 an integer input at x = 0: jax 0.4.13 gave nan under jit (public report); 0 measured
    in jax 0.10.2 (jit and reverse) and torch 2.13 (reverse)."""
    from conftest import require_pinned

    adapter = adapter_for(request, framework)
    require_pinned(adapter)
    for mode in ("jit", "reverse") if framework == "jax" else ("reverse",):
        got = _grad(adapter, "x ** k", "x=0,k=int:0", mode=mode)
        assert got == {"x": 0.0}, f"{framework} {adapter.version} {mode}: {got}"


@pytest.mark.torch
def test_q10_where_at_infinity_gives_nan_in_reverse_and_0_in_forward(torch_adapter):
    """torch.where(x <= 10, exp(x), 1.0) at x = inf: the selected branch is the constant 1 (truth: 0), but the
    unselected exp(inf) = inf times the mask's 0 is nan in reverse mode (measured, torch 2.13.0); forward mode
    pushes the tangent through the selected branch only (0)."""
    from conftest import require_pinned

    require_pinned(torch_adapter)
    source = "torch.where(x <= 10, torch.exp(x), 1.0)"
    assert math.isnan(_grad(torch_adapter, source, "x=inf")["x"]), "reverse mode: nan"
    assert _grad(torch_adapter, source, "x=inf", mode="forward") == {"x": 0.0}, "forward mode: 0"
    assert _grad(torch_adapter, "torch.exp(x)", "x=-inf") == {"x": 0.0}, "exp at -inf: 0"


def test_start_up_notices_are_dropped_and_everything_else_kept(capfd):
    """What a C++ library writes to descriptor 2 during a framework's import: the known notices dropped (TF's
    absl and oneDNN lines), every other line written back in order (a real warning or error stays)."""
    import os
    import sys

    from kinkcheck.frameworks.base import start_up_notices_dropped

    capfd.readouterr()
    with start_up_notices_dropped(r"All log messages before absl::InitializeLog", r"oneDNN custom operations"):
        os.write(2, b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n")
        os.write(2, b"a real problem\n")
        os.write(2, b"I0000 port.cc:153] oneDNN custom operations are on.\n")
        os.write(2, b"a second problem\n")
        print("a Python warning", file=sys.stderr)  # pytest's capture object here: not through descriptor 2
    err = capfd.readouterr().err
    assert "a real problem\na second problem\n" in err and "a Python warning\n" in err, err
    assert "absl" not in err and "oneDNN" not in err, f"only the notices are dropped: {err!r}"


def test_an_import_that_fails_for_memory_says_so_in_one_line(monkeypatch):
    """A probe worker under a tiny --memory could not map NumPy's shared objects; the adapter said "autograd is
    not installed" followed by NumPy's 20-line import help. Now: one line naming the memory limit."""
    import kinkcheck.frameworks as fws
    from kinkcheck.frameworks import FrameworkUnavailable, get_adapter

    class Broken:
        @staticmethod
        def load():
            raise FrameworkUnavailable("autograd is not installed in this Python (\n\nIMPORTANT: PLEASE READ THIS\n"
                                       "libopenblas.so: failed to map segment from shared object\n)")

    monkeypatch.setattr(fws.importlib, "import_module", lambda name: Broken)
    monkeypatch.setattr(fws, "data_limit", lambda: 2 ** 29)
    with pytest.raises(FrameworkUnavailable) as err:
        get_adapter("autograd")
    text = str(err.value)
    assert "\n" not in text and text.startswith("autograd could not be imported under the memory limit of 0.5 GiB"), text
    monkeypatch.setattr(fws, "data_limit", lambda: None)
    with pytest.raises(FrameworkUnavailable) as err:
        get_adapter("autograd")
    assert "\n" not in str(err.value) and str(err.value).startswith("autograd is not installed"), str(err.value)


def test_cpuinfo_gives_the_model_name_and_the_vector_isa_widest_first(monkeypatch, tmp_path):
    """/proc/cpuinfo of an AVX-512 Xeon VM and of an arm64 machine; none (macOS) gives "" and the arch."""
    import builtins
    import platform

    from kinkcheck.frameworks import base

    xeon = ("processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Processor\nflags\t\t: fpu sse4_2 avx avx2 avx512f "
            "avx512bw\n\nprocessor\t: 1\nmodel name\t: other\nflags\t\t: fpu\n")
    arm = "processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd evtstrm sve\n"
    real_open = builtins.open

    def fake(text):
        def opener(path, *a, **k):
            if path == "/proc/cpuinfo":
                if text is None:
                    raise FileNotFoundError(path)
                (tmp_path / "cpuinfo").write_text(text)
                return real_open(tmp_path / "cpuinfo", *a, **k)
            return real_open(path, *a, **k)
        return opener

    monkeypatch.setattr(platform, "processor", lambda: "")
    monkeypatch.setattr(builtins, "open", fake(xeon))
    assert base.vector_isa() == "avx512f avx2 avx sse4_2", "widest first, only the listed sets, first processor"
    assert base.processor_name() == "Intel(R) Xeon(R) Processor"
    monkeypatch.setattr(builtins, "open", fake(arm))
    assert base.vector_isa() == "sve asimd" and base.processor_name() == platform.machine()
    monkeypatch.setattr(builtins, "open", fake(None))
    assert base.vector_isa() == "" and base.processor_name() == platform.machine()
    monkeypatch.setattr(platform, "processor", platform.machine)  # Ubuntu: the machine type, not the model
    monkeypatch.setattr(builtins, "open", fake(xeon))
    assert base.processor_name() == "Intel(R) Xeon(R) Processor", "the model name where processor() is the arch"
