"""The TensorFlow adapter (kinkcheck.frameworks.tensorflow): P10's tie to the first argument, relu at 0, the five
modes (tape, ForwardAccumulator, tf.function, XLA, nested tapes), float16/bfloat16, refusals, dtype-rounded
points, the P0 network, ``kinkcheck grad`` and the tf.custom_gradient migration snippet."""

from __future__ import annotations

import json
import math

import pytest
from gradients import grad

tf = pytest.importorskip("tensorflow", reason="TensorFlow is not installed in this Python (pip install tensorflow-cpu)")

from kinkcheck import cli
from kinkcheck.language import expr as ex
from kinkcheck.catalog import FRAMEWORKS, load_catalog
from kinkcheck.frameworks import ProgramError, Unavailable, get_adapter
from kinkcheck.answers.migrate import snippet
from kinkcheck.oracles import backprop
from kinkcheck.registry import framework
from network import network_grads

MODES = ("reverse", "forward", "graph", "jit", "second-order")
FIRST_ORDER = MODES[:-1]


@pytest.fixture(scope="module")
def adapter():
    return get_adapter("tensorflow")


def test_adapter_matches_its_registry_record(adapter):
    rec = framework("tensorflow")
    assert adapter.modes == rec.modes == MODES, f"adapter modes {adapter.modes}, registry {rec.modes}"
    assert adapter.devices() == ["cpu"], f"tensorflow-cpu has no GPU: {adapter.devices()}"
    assert rec.requirements("2.21.0") == ["tensorflow-cpu==2.21.0"], rec.requirements("2.21.0")
    assert rec.versions[-1] == rec.tested == "2.21.0" and "2.18.1" in rec.versions, rec.versions
    assert rec.max_python["2.12.1"] == (3, 11) and rec.max_python["2.21.0"] == (3, 13), rec.max_python
    settings = adapter.settings()
    assert settings["numpy"] == __import__("numpy").__version__ and "TF_ENABLE_ONEDNN_OPTS" in settings, settings


@pytest.mark.parametrize("mode", FIRST_ORDER)
def test_p10_minimum_gives_a_tie_to_the_first_argument(adapter, mode):
    got = grad(adapter, "tf.minimum(x, y)", {"x": [4.0, 5.0, 3.0], "y": [4.0, 2.0, 6.0]}, mode=mode)
    want = {"x": [1.0, 0.0, 1.0], "y": [0.0, 1.0, 0.0]}  # P10; _MinimumGrad: grad * (x <= y) to x
    assert got == want, f"tf.minimum([4,5,3], [4,2,6]) ({mode}): {got}, want {want}"
    mx = grad(adapter, "tf.maximum(x, y)", {"x": 1.0, "y": 1.0}, mode=mode)
    assert mx == {"x": 1.0, "y": 0.0}, f"tf.maximum(x, y) at x = y = 1 ({mode}): {mx}, _MaximumGrad's x >= y"
    swapped = grad(adapter, "tf.maximum(y, x)", {"x": 1.0, "y": 1.0}, mode=mode)
    assert swapped == {"x": 0.0, "y": 1.0}, f"tf.maximum(y, x) at a tie ({mode}): {swapped}, the tie follows position"


@pytest.mark.parametrize("mode", FIRST_ORDER)
def test_relu_at_0_is_0_and_maximum_with_0_is_1(adapter, mode):
    assert grad(adapter, "tf.nn.relu(x)", {"x": 0.0}, mode=mode) == {"x": 0.0}, f"ReluGrad masks x > 0 ({mode})"
    assert grad(adapter, "tf.nn.relu(x)", {"x": 0.25}, mode=mode) == {"x": 1.0}, f"relu'(0.25) ({mode})"
    assert grad(adapter, "tf.maximum(x, 0.0)", {"x": 0.0}, mode=mode) == {"x": 1.0}, \
        f"tf.maximum(x, 0.0) at 0 ({mode}): the tie goes to x"
    clip = grad(adapter, "tf.clip_by_value(x, -1.0, 1.0)", {"x": 1.0}, mode=mode)
    assert clip == {"x": 1.0}, f"tf.clip_by_value at its upper bound ({mode}): {clip}, a minimum then a maximum"
    # tnp.maximum with a literal 0 takes tf.nn.relu's fast path (np_math_ops.maximum); with a tensor it is tf.maximum
    assert grad(adapter, "tnp.maximum(x, 0.0)", {"x": 0.0}, mode=mode) == {"x": 0.0}, f"tnp fast path ({mode})"
    assert grad(adapter, "tnp.maximum(x, tnp.zeros_like(x))", {"x": 0.0}, mode=mode) == {"x": 1.0}, mode


@pytest.mark.parametrize("text, at", [
    ("x * x * x + tf.sin(x)", {"x": 0.7}),
    ("tf.nn.softplus(x) * y", {"x": -0.3, "y": 2.0}),
    ("tf.reduce_sum(tf.exp(v) * v)", {"v": [0.5, -1.0, 2.0]}),
])
def test_the_modes_agree_where_the_function_is_differentiable(adapter, text, at):
    ref = grad(adapter, text, at)
    for mode in FIRST_ORDER[1:]:
        got = grad(adapter, text, at, mode=mode)
        for k in ref:
            assert got[k] == pytest.approx(ref[k], rel=1e-12), f"{text} at {at}: {mode} {got}, reverse {ref}"
    h = grad(adapter, "x * x * x + tf.sin(x)", {"x": 0.7}, mode="second-order")
    assert h["x"] == pytest.approx(6 * 0.7 - math.sin(0.7), rel=1e-12), f"H @ 1 of x^3 + sin x at 0.7: {h}"
    hy = grad(adapter, "x * y", {"x": 1.0, "y": 2.0}, mode="second-order")
    assert hy == {"x": 1.0, "y": 1.0}, f"H @ 1 of x*y is (1, 1): {hy}"


def test_an_input_the_output_ignores_and_an_op_without_gradient_get_zeros(adapter):
    # tape.gradient answers None for both; the adapter asks for UnconnectedGradients.ZERO
    assert grad(adapter, "tf.floor(x)", {"x": 1.0}) == {"x": 0.0}, "_FloorGrad returns None: read as 0"
    for mode in MODES:
        got = grad(adapter, "tf.ones_like(x) + y", {"x": 1.0, "y": 2.0}, mode=mode)
        assert got == {"x": 0.0, "y": 0.0 if mode == "second-order" else 1.0}, f"unconnected x ({mode}): {got}"


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("mode", MODES)
def test_half_precision_dtypes_run(adapter, dtype, mode):
    relu = grad(adapter, "tf.nn.relu(x)", {"x": 0.0}, dtype=dtype, mode=mode)
    assert relu == {"x": 0.0}, f"tf.nn.relu at 0 in {dtype} ({mode}): {relu}"
    got = grad(adapter, "x * x", {"x": 1.5}, dtype=dtype, mode=mode)
    want = 2.0 if mode == "second-order" else 3.0
    assert got == {"x": want}, f"d(x*x) at 1.5 in {dtype} ({mode}): {got}, want {want} (exact in {dtype})"


def test_a_point_rounded_by_the_dtype_is_reported_and_used(adapter):
    assert adapter.rounded({"x": 0.7}, "bfloat16") == {"x": 0.69921875}, "0.7 in bfloat16 (8 significant bits)"
    assert adapter.rounded({"x": 0.7}, "float64") is None, "0.7 is held as given in float64"
    assert adapter.rounded({"x": 1e-45}, "float16") == {"x": 0.0}, "1e-45 underflows to 0 in float16"
    assert adapter.rounded({"x": -0.0}, "bfloat16") is None, "-0.0 keeps its sign"
    # in bfloat16 the bound 0.7 rounds onto the point 0.69921875: a tie, which clip_by_value passes
    got = grad(adapter, "tf.clip_by_value(x, -0.7, 0.7)", {"x": 0.69921875}, dtype="bfloat16")
    assert got == {"x": 1.0}, f"clip_by_value at its rounded bound in bfloat16: {got}"
    sub = grad(adapter, "tf.nn.relu(x)", {"x": 1e-45}, dtype="float16")
    assert sub == {"x": 0.0}, f"relu at 1e-45, which float16 holds as 0: {sub}"


@pytest.mark.parametrize("text", [
    "tf.print(x)", "tf.py_function(tf.abs, [x], tf.float64)", "tf.numpy_function(tf.abs, [x], tf.float64)",
    "tf.Variable(x) * 1.0", "tf.random.uniform([1])", "tf.random_uniform_initializer()([1])", "tf.function(tf.abs)(x)",
    "tf.keras.activations.relu(x)", "tf.io.read_file(x)", "tf.GradientTape()", "tf.config.run_functions_eagerly(True)",
    "tf.debugging.enable_check_numerics()", "tf.saved_model.save(x, 'a')", "tf.experimental.dlpack.to_dlpack(x)",
    "tf.device('cpu')", "tf.custom_gradient(tf.abs)(x)", "tf.raw_ops.Relu(features=x)",
    "tnp.experimental_enable_numpy_behavior()", "tf.nn.learned_unigram_candidate_sampler(x, 1, 1, True, 1)",
])
def test_refused_names_raise_before_running(adapter, text, capfd):
    with pytest.raises(ex.ExprError, match="refused|outside"):
        grad(adapter, text, {"x": 0.0})
    assert "0.0" not in capfd.readouterr().out, f"{text} printed something: it ran"


def test_unknown_names_and_non_float_outputs(adapter):
    with pytest.raises(Unavailable, match="tensorflow.nn.rleu"):
        grad(adapter, "tf.nn.rleu(x)", {"x": 0.0})
    with pytest.raises(ProgramError, match="int64"):
        grad(adapter, "tf.argmax(v)", {"v": [1.0, 2.0]})
    with pytest.raises(ex.ExprError, match="unknown mode"):
        grad(adapter, "tf.abs(x)", {"x": 0.0}, mode="vmap")


def test_integer_inputs_are_not_differentiated(adapter):
    for mode in FIRST_ORDER:
        got = grad(adapter, "tf.gather(v, k)", {"v": [1.0, 3.0], "k": 1}, mode=mode, ints=["k"])
        assert got == {"v": [0.0, 1.0]}, f"tf.gather(v, k) with k = int 1 ({mode}): {got}"


def test_every_catalog_program_resolves(adapter):
    missing = []
    for case in load_catalog():
        for p in case.programs_for("tensorflow"):
            try:
                adapter._resolve(p.tree)
            except Unavailable as err:
                missing.append(f"{p.id}: {err}")
    assert not missing, f"catalog programs that do not resolve in TensorFlow {adapter.version}: {missing}"


@pytest.mark.parametrize("text, kink", [("tf.nn.relu(x)", 0.0), ("tf.maximum(x, 0.0)", 1.0)])
def test_network_grads_match_the_numpy_oracle(adapter, text, kink):
    w1, w2 = network_grads(adapter, ex.parse(text, ["x"], FRAMEWORKS), "float64")
    check = backprop.crosscheck(w1, w2, "relu", kink, "float64")
    assert check.ok, f"{text} on the P0 net, relu'(0) = {kink}: {check.detail}"


def test_cli_grad_of_tf_minimum_at_a_tie(capsys):
    assert cli.main(["grad", "tf.minimum(x, y)", "--at", "x=4,y=4", "--no-isolate", "--no-judge"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert json.loads(first) == {"x": 1.0, "y": 0.0}, f"kinkcheck grad 'tf.minimum(x, y)' at 4, 4: {first}"


@pytest.mark.parametrize("target, point, value, beside", [
    ("tensorflow.maximum(x, 0.0)", 0.0, 0.0, [(0.5, 1.0), (-0.5, 0.0)]),
    ("tensorflow.abs(x)", 0.0, 1.0, [(0.5, 1.0), (-0.5, -1.0)]),
    ("tensorflow.clip_by_value(x, -1.0, 1.0)", 1.0, 0.0, [(1.5, 0.0), (0.5, 1.0)]),
    ("tensorflow.sqrt(x)", 0.0, 0.0, [(0.25, 1.0)]),
    ("tensorflow.floor(x)", 1.0, 0.5, [(1.5, 0.0)]),
])
def test_migration_snippet_keeps_the_source_value_at_the_kink(target, point, value, beside):
    ns: dict = {}
    code = compile(snippet("tensorflow", target, "x", point, value, note="the source's value"), "<snippet>", "exec")
    exec(code, ns)  # noqa: S102 - the generated code, as a user runs it

    def d(x0, traced=False):
        x = tf.constant(x0, dtype=tf.float64)

        def g(x):
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = ns["f"](x)
            return tape.gradient(y, x)

        return (tf.function(g) if traced else g)(x).numpy()

    for traced in (False, True):
        assert float(d(point, traced)) == value, f"tf.custom_gradient snippet for {target} at {point} (traced={traced})"
        for x0, want in beside:
            assert float(d(x0, traced)) == want, f"snippet for {target} at {x0} (traced={traced}): {float(d(x0))}"
    batch = d([point, beside[0][0]])
    assert batch.tolist() == [value, beside[0][1]], f"snippet for {target} on a batch: {batch.tolist()}"


@pytest.mark.parametrize("case_id, program, measured, verdict", [
    ("minimum@tie", "tf.minimum(x, y)", [1.0, 0.0], "conforms"),  # _MinimumGrad: the tie goes to x
    ("relu@0", "tf.maximum(x, 0.0)", [1.0], "conforms"),
    ("clamp@-1", "tf.clip_by_value(x, -1.0, 1.0)", [1.0], "conforms"),  # a minimum then a maximum: first argument
    ("relu6@6", "tf.nn.relu6(x)", [0.0], "conforms"),  # Relu6Grad: 0 at zero and six
    ("max@[1,0,1,0,1,0]", "tf.reduce_max(v)", [1 / 3, 0, 1 / 3, 0, 1 / 3, 0], "conforms"),  # _MinOrMaxGrad
    ("relu@0", "tnp.maximum(x, 0.0)", [0.0], "open"),  # relu's fast path: tnp.maximum is not a documented "first"
    ("relu@0", "tf.maximum(x, 0.0)", [0.5], "departs"),
])
def test_the_documented_rule_judges_the_measured_values(catalog, case_id, program, measured, verdict):
    from kinkcheck.judge import conformance as conf
    from kinkcheck.oracles.classify import OracleNumbers
    from kinkcheck.oracles.symbolic import analyze

    case = catalog.case(case_id)
    tree = next(p.tree for p in case.programs_for("tensorflow") if p.id == ex.unparse(ex.parse(program, list(case.at),
                                                                                                FRAMEWORKS)))
    oracle = OracleNumbers.from_json(analyze(case).to_json())
    got = conf.verdict(conf.predict("tensorflow", tree, oracle), measured, "float64")
    assert got == verdict, f"{program} at {case_id} = {measured}: {got}, want {verdict}"


@pytest.mark.parametrize("values", [(0.5, 0.5), (0.0, 1.0)])
def test_migration_tie_snippet_keeps_the_source_values_on_the_whole_tie_line(values):
    """jax/torch → TensorFlow at P10's tie: tf.minimum's own (1, 0) is replaced by the source's (dx, dy) at every
    tie x == y, eager and traced; off it tf.minimum's own derivative."""
    from kinkcheck.answers.migrate import tie_snippet

    ns: dict = {}
    code = tie_snippet("tensorflow", "tensorflow.minimum(x, y)", ("x", "y"), values, note="the source's value")
    exec(compile(code, "<snippet>", "exec"), ns)  # noqa: S102 - the generated code, as a user runs it
    x = tf.constant([1.0, 3.0, -0.0, 1.0, 2.0], dtype=tf.float64)
    y = tf.constant([1.0, 3.0, 0.0, 2.0, 1.0], dtype=tf.float64)

    def g(x, y):
        with tf.GradientTape() as tape:
            tape.watch([x, y])
            out = ns["f"](x, y)
        return tape.gradient(out, [x, y])

    vx, vy = values
    want = ([vx, vx, vx, 1.0, 0.0], [vy, vy, vy, 0.0, 1.0])
    for traced in (False, True):
        gx, gy = (tf.function(g) if traced else g)(x, y)
        assert (gx.numpy().tolist(), gy.numpy().tolist()) == want, f"traced={traced}: {gx}, {gy}, want {want}"
