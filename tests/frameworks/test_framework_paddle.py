"""The PaddlePaddle adapter (kinkcheck.frameworks.paddle): kink values from Paddle's grad kernels, the three modes
(eager reverse, the double-backward JVP, the static graph), dtypes, refusals, and the PyLayer migration snippet.

Values that changed between releases are asserted per release line, both as measured (2.6.2 and 3.3.1 shards)."""

from __future__ import annotations

import math

import pytest
from gradients import grad

paddle = pytest.importorskip("paddle", reason="PaddlePaddle is not installed in this Python (pip install paddlepaddle)")

from kinkcheck.language import expr as ex
from kinkcheck.catalog import load_catalog
from kinkcheck.frameworks import Unavailable, get_adapter
from kinkcheck.answers.migrate import snippet
from kinkcheck.oracles import backprop
from kinkcheck.registry import framework
from network import network_grads

MODES = ("reverse", "forward", "graph")


@pytest.fixture(scope="module")
def adapter():
    return get_adapter("paddle")


def _release(adapter) -> tuple[int, int]:
    major, minor = adapter.version.split(".")[:2]
    return int(major), int(minor)


@pytest.fixture(scope="module")
def paddle31(adapter):
    """True from 3.1 (measured: 3.0.0 → 3.1.1): ties of maximum/minimum and of max/min split evenly, clip passes
    1 at its bounds. 2.6.2 and 3.0.0 give a maximum tie to y, every tied entry of max the whole gradient, 0."""
    return _release(adapter) >= (3, 1)


@pytest.fixture(scope="module")
def paddle3(adapter):
    """True for 3.x: paddle.incubate.autograd.jvp differentiates maximum_grad (2.6: "no grad op")."""
    return _release(adapter) >= (3, 0)


def test_adapter_matches_its_registry_record(adapter):
    rec = framework("paddle")
    assert adapter.modes == rec.modes == MODES, f"adapter modes {adapter.modes}, registry {rec.modes}"
    assert adapter.devices() == ["cpu"], adapter.devices()
    assert rec.requirements("3.3.1") == ["paddlepaddle==3.3.1", "setuptools"], rec.requirements("3.3.1")


@pytest.mark.parametrize("mode", ["reverse", "graph"])
def test_relu_at_0_is_0_and_clip_at_its_bound_per_release(adapter, paddle31, mode):
    got = grad(adapter, "paddle.nn.functional.relu(x)", {"x": 0.0}, mode=mode)
    assert got == {"x": 0.0}, f"F.relu at 0 ({mode}, paddle {adapter.version}): {got}, ReluGradFunctor gives 0"
    beside = grad(adapter, "paddle.nn.functional.relu(x)", {"x": 0.25}, mode=mode)
    assert beside == {"x": 1.0}, f"F.relu at 0.25 ({mode}): {beside}, want 1"
    want = 1.0 if paddle31 else 0.0  # clip's grad mask includes its bounds from 3.1, excludes them before
    clip = grad(adapter, "paddle.clip(x, min=0.0)", {"x": 0.0}, mode=mode)
    assert clip == {"x": want}, f"paddle.clip(x, min=0.0) at 0 ({mode}, paddle {adapter.version}): {clip}"


@pytest.mark.parametrize("mode", ["reverse", "graph"])
@pytest.mark.parametrize("fn", ["maximum", "minimum"])
def test_two_argument_tie_per_release(adapter, paddle31, fn, mode):
    want = {"x": 0.5, "y": 0.5} if paddle31 else {"x": 0.0, "y": 1.0}  # before 3.1: MaxGradDy's x <= y takes it
    got = grad(adapter, f"paddle.{fn}(x, y)", {"x": 1.0, "y": 1.0}, mode=mode)
    assert got == want, f"paddle.{fn}(x, y) at x = y = 1 ({mode}, paddle {adapter.version}): {got}, want {want}"
    fmax = grad(adapter, f"paddle.f{fn[:3]}(x, y)", {"x": 1.0, "y": 1.0}, mode=mode)
    assert fmax == {"x": 1.0, "y": 0.0}, f"paddle.f{fn[:3]}(x, y) at a tie ({mode}): {fmax}, the tie goes to x"


def test_forward_mode_gives_a_maximum_tie_to_y_in_3x(adapter, paddle3):
    if not paddle3:
        with pytest.raises(Unavailable, match="maximum_grad.*no grad op"):
            grad(adapter, "paddle.maximum(x, y)", {"x": 1.0, "y": 1.0}, mode="forward")
        return
    # paddle.incubate.autograd.jvp differentiates maximum_grad: the double-grad kernel gives the tie to y
    got = grad(adapter, "paddle.maximum(x, y)", {"x": 1.0, "y": 1.0}, mode="forward")
    assert got == {"x": 0.0, "y": 1.0}, f"paddle.maximum(x, y) at a tie (forward, {adapter.version}): {got}"


@pytest.mark.parametrize("text", ["paddle.abs(x)", "x.abs()"])
def test_abs_at_0_is_0(adapter, paddle3, text):
    for mode in ("reverse", "graph", "forward") if paddle3 else ("reverse", "graph"):
        got = grad(adapter, text, {"x": 0.0}, mode=mode)
        assert got == {"x": 0.0}, f"{text} at 0 ({mode}, paddle {adapter.version}): {got}, want 0 (sign(0))"
        neg = grad(adapter, text, {"x": -0.5}, mode=mode)
        assert neg == {"x": -1.0}, f"{text} at -0.5 ({mode}): {neg}, want -1"


def test_max_of_a_tied_vector_per_release(adapter, paddle31):
    v = {"v": [1.0, 0.0, 1.0, 0.0, 1.0, 0.0]}
    third = [1 / 3, 0.0, 1 / 3, 0.0, 1 / 3, 0.0]
    got = grad(adapter, "paddle.max(v)", v)["v"]
    want = third if paddle31 else [1.0, 0.0, 1.0, 0.0, 1.0, 0.0]  # before 3.1: each tied entry gets it all
    assert got == pytest.approx(want), f"paddle.max(v) at [1,0,1,0,1,0] (paddle {adapter.version}): {got}"
    amax = grad(adapter, "paddle.amax(v)", v)["v"]
    assert amax == pytest.approx(third), f"paddle.amax(v): {amax}, documented to share ties evenly"


def test_modes_agree_on_a_smooth_program(adapter, paddle3):
    # y * y, not y ** 2: the JVP by double backward of elementwise_pow raises ("DX can not be nullptr");
    # in 2.6 it raises for sin too ("Unable to get ... d2x in operator SinDoubleGrad"): forward from 3.0 only
    at = {"x": 0.5, "y": -2.0, "v": [0.25, -1.5]}
    text = "paddle.sin(x) * y * y + paddle.sum(paddle.tanh(v) * v)"
    want = {"x": math.cos(0.5) * 4, "y": 2 * math.sin(0.5) * -2.0,
            "v": [math.tanh(t) + t / math.cosh(t) ** 2 for t in (0.25, -1.5)]}
    for mode in MODES if paddle3 else ("reverse", "graph"):
        got = grad(adapter, text, at, mode=mode)
        for k, w in want.items():
            assert got[k] == pytest.approx(w, rel=1e-12), f"{text} ({mode}) d/d{k}: {got[k]}, want {w}"


def test_forward_mode_names_the_grad_op_it_lacks(adapter):
    with pytest.raises(Unavailable, match=r"jvp differentiates `relu_double_grad`.*no grad op"):
        grad(adapter, "paddle.nn.functional.relu(x)", {"x": 0.0}, mode="forward")


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("mode", MODES)
def test_dtypes_give_a_value_or_name_the_missing_kernel(adapter, dtype, mode):
    for text, at in [("paddle.maximum(x, y) * 3.0", {"x": 0.0, "y": 0.0}), ("paddle.abs(x)", {"x": 0.0}),
                     ("x * x", {"x": 0.5})]:
        try:
            got = grad(adapter, text, at, dtype=dtype, mode=mode)
        except Unavailable as err:
            assert dtype in str(err) or "no grad op" in str(err), f"{text} in {dtype} ({mode}): {err}"
            continue
        except RuntimeError as err:  # oneDNN's kernels follow the CPU: bfloat16 abs in a static graph needs AVX-512
            assert str(err).startswith(f"paddle {adapter.version}'s oneDNN has no {dtype} `") and \
                "this CPU" in str(err) and "\n" not in str(err), \
                f"{text} in {dtype} ({mode}): a CPU's error names the kernel, dtype and CPU in one line: {err}"
            continue
        assert all(math.isfinite(v) for v in got.values()), f"{text} in {dtype} ({mode}): {got}"
    assert grad(adapter, "x * x", {"x": 0.5}, dtype="float32", mode=mode) == {"x": 1.0}, f"x*x in float32 ({mode})"


def test_float16_relu_has_no_cpu_kernel(adapter):
    with pytest.raises(Unavailable, match=r"no float16 .*`relu`"):
        grad(adapter, "paddle.nn.functional.relu(x)", {"x": 0.0}, dtype="float16")


def test_rounded_point(adapter):
    r = adapter.rounded({"x": 0.1}, "bfloat16")
    # 2.6.2 and 3.0.0 truncate to bfloat16, 3.3.1 rounds to nearest (checked on those three)
    want = {(2, 6): 0.099609375, (3, 0): 0.099609375, (3, 3): 0.10009765625}.get(_release(adapter))
    assert r is not None and r["x"] in (0.099609375, 0.10009765625), f"0.1 in bfloat16: {r}"
    assert want is None or r["x"] == want, f"0.1 in bfloat16 (paddle {adapter.version}): {r}, want {want}"
    assert adapter.rounded({"x": 0.5}, "float16") is None, "0.5 is exact in float16"
    assert adapter.rounded({"x": -0.0}, "float32") is None, "-0.0 keeps its sign in float32"


def test_integer_inputs_and_wrt(adapter, paddle31):
    got = grad(adapter, "paddle.maximum(x, y) * k", {"x": 1.0, "y": 2.0, "k": 3}, ints=["k"])
    assert got == {"x": 0.0, "y": 3.0}, f"paddle.maximum(x, y) * k at (1, 2), k = 3: {got}"
    only = grad(adapter, "paddle.maximum(x, y)", {"x": 1.0, "y": 1.0}, mode="graph", wrt=["y"])
    assert only == {"y": 0.5 if paddle31 else 1.0}, f"--wrt y (graph, paddle {adapter.version}): {only}"


def test_missing_name_and_keyword_are_unavailable(adapter):
    with pytest.raises(Unavailable, match="does not exist"):
        grad(adapter, "paddle.nn.functional.no_such_activation_in_paddle(x)", {"x": 0.0})
    with pytest.raises(Unavailable, match=r"relu\(\) has no keyword .no_such_keyword."):
        grad(adapter, "paddle.nn.functional.relu(x, no_such_keyword=1)", {"x": 0.0})


def test_every_catalog_program_resolves_or_is_missing(adapter):
    refused = []
    for case, program in load_catalog().programs("paddle"):
        try:
            ex.resolve_names(program.tree, adapter.namespace(), *_allowed())
        except ex.NameMissing:
            continue  # a name this release lacks (paddle.linalg.vector_norm before 3.0): an unavailable cell
        except ex.ExprError as err:
            refused.append(f"{case.id} {program.id}: {err}")
    assert not refused, "catalog programs refused by the adapter:\n" + "\n".join(refused)


def _allowed():
    from kinkcheck.frameworks.paddle import adapter as adapter_module

    return adapter_module.MODULES, adapter_module.ORIGINS


def test_callable_gradient_in_every_mode(adapter, paddle31):
    want = {"x": 1.0, "y": 1.0} if paddle31 else {"x": 0.0, "y": 2.0}
    for mode in ("reverse", "graph"):
        # d/dx max(x, y)**2 = 2 max * (the tie's share)
        got = adapter.callable_gradient(lambda x, y: paddle.maximum(x, y) ** 2, {"x": 1.0, "y": 1.0}, mode=mode)
        assert got == want, f"maximum(x, y) ** 2 at a tie ({mode}, paddle {adapter.version}): {got}, want {want}"
    with pytest.raises(TypeError, match="not a paddle.Tensor"):
        adapter.callable_gradient(lambda x: 1.0, {"x": 0.0})


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_network_grads_match_the_numpy_oracle_at_relu_0(adapter, dtype):
    tree = ex.parse("paddle.nn.functional.relu(x)", ["x"], {"paddle"})
    w1, w2 = network_grads(adapter, tree, dtype)
    check = backprop.crosscheck(w1, w2, "relu", 0.0, dtype)
    assert check.ok, f"F.relu on the P0 net ({dtype}): {check.detail}"


@pytest.mark.parametrize("target, point, value, beside", [
    ("paddle.nn.functional.relu(x)", 0.0, 0.5, [(0.5, 1.0), (-0.5, 0.0)]),
    ("paddle.abs(x)", 0.0, 1.0, [(0.5, 1.0), (-0.5, -1.0)]),
    ("paddle.clip(x, -1.0, 1.0)", 1.0, 0.0, [(1.5, 0.0), (0.5, 1.0)]),
    ("paddle.sqrt(x)", 0.0, 0.0, [(0.25, 1.0)]),
])
def test_migration_snippet_keeps_the_source_value_at_the_kink(target, point, value, beside):
    ns: dict = {}
    code = compile(snippet("paddle", target, "x", point, value, note="the source's value"), "<snippet>", "exec")
    exec(code, ns)  # noqa: S102 - the generated code, as a user runs it
    f = ns["f"]
    for x0, want in [(point, value), *beside]:
        x = paddle.to_tensor(x0, dtype="float64", stop_gradient=False)
        (g,) = paddle.grad(f(x), x)
        assert float(g) == want, f"PyLayer snippet for {target} at {x0}: {float(g)}, want {want}"
    batch = paddle.to_tensor([point, beside[0][0]], dtype="float64", stop_gradient=False)
    (g,) = paddle.grad(f(batch).sum(), batch)
    assert g.tolist() == [value, beside[0][1]], f"PyLayer snippet for {target} on a batch: {g.tolist()}"


@pytest.mark.parametrize("values", [(1.0, 0.0), (0.5, 0.5)])
def test_migration_tie_snippet_keeps_the_source_values_on_the_whole_tie_line(values):
    """P10 → PaddlePaddle: at every tie x == y of paddle.minimum the source's (dx, dy); off it the target's."""
    from kinkcheck.answers.migrate import tie_snippet

    ns: dict = {}
    code = tie_snippet("paddle", "paddle.minimum(x, y)", ("x", "y"), values, note="the source's value")
    exec(compile(code, "<snippet>", "exec"), ns)  # noqa: S102 - the generated code, as a user runs it
    x = paddle.to_tensor([1.0, 3.0, -0.0, 1.0, 2.0], dtype="float64", stop_gradient=False)
    y = paddle.to_tensor([1.0, 3.0, 0.0, 2.0, 1.0], dtype="float64", stop_gradient=False)
    gx, gy = paddle.grad(ns["f"](x, y).sum(), [x, y])
    vx, vy = values
    assert gx.tolist() == [vx, vx, vx, 1.0, 0.0] and gy.tolist() == [vy, vy, vy, 0.0, 1.0], \
        f"PyLayer tie snippet: dx {gx.tolist()}, dy {gy.tolist()}"
