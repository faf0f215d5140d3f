"""kinkcheck.oracles.mapping, family by family: binding spellings, reductions with dim/keepdim, where, norms
with ord, string arguments, order statistics, pooling, the Unmapped message, ``wrt`` constants, the public cases
Q1-Q8 of shared/cases/public-cases-2.md with their forms pinned, expanded tensors, writes at indices and
reconstructions (the catalog and the table against the frameworks: tests/oracles/test_mapping.py)."""

from __future__ import annotations

import pytest
import sympy
from sympy import Max, Min, Piecewise, Rational, oo, sqrt

from kinkcheck.language import expr as ex
from kinkcheck.oracles import mapping as mp
from kinkcheck.oracles import symbolic as sym
from kinkcheck.oracles import translate
from kinkcheck.oracles.mapping import Unmapped, sympy_form
from mapped import form, x, y


# --------------------------------------------------------------------------- 3. families of entries


@pytest.mark.parametrize("text, framework, want", [
    ("torch.clamp(x, min=0)", "torch", Max(x, 0)),
    ("torch.clamp(x, -1, 1)", "torch", Min(Max(x, -1), 1)),
    ("torch.clamp(x, max=1)", "torch", Min(x, 1)),
    ("torch.clip(x, min=-1, max=1)", "torch", Min(Max(x, -1), 1)),
    ("x.clamp(min=0)", "torch", Max(x, 0)),
    ("x.clamp(None, 2)", "torch", Min(x, 2)),
    ("jnp.clip(x, 0)", "jax", Max(x, 0)),
    ("jnp.clip(x, max=3)", "jax", Min(x, 3)),
    ("jax.lax.clamp(-1.0, x, 1.0)", "jax", Min(Max(x, -1), 1)),
    ("torch.nn.functional.hardtanh(x)", "torch", Min(Max(x, -1), 1)),
    ("F.hardtanh(x, max_val=0.5)", "torch", Min(Max(x, -1), Rational(1, 2))),
])
def test_clamp_binds_every_spelling(text, framework, want) -> None:
    got = form(text, {"x": 0.0}, framework).expr
    assert got == want, f"{text} maps to {got}, expected {want}"


def test_unbindable_arguments_are_unmapped_with_the_reason() -> None:
    with pytest.raises(Unmapped, match=r"no symbolic form for torch\.clamp: arguments do not bind .*nonsense"):
        form("torch.clamp(x, nonsense=1)", {"x": 0})


def test_reductions_over_dim_with_keepdim() -> None:
    m = {"m": [[1, 2], [3, 4]]}
    s = form("torch.amax(m, dim=1)", m).symbols
    m00, m01, m10, m11 = s
    assert form("torch.amax(m, dim=1)", m).expr == Max(m00, m01) + Max(m10, m11), "amax over dim 1, summed"
    assert form("torch.sum(m, dim=0)", m).expr == m00 + m01 + m10 + m11, "sum over dim 0, summed"
    # keepdim=True broadcasts against the rows; without it, against the columns
    kept = form("(m - torch.amax(m, dim=1, keepdim=True))[0][1]", m).expr
    assert kept == m01 - Max(m00, m01), f"keepdim=True: {kept}"
    flat = form("(m - torch.amax(m, dim=1))[0][1]", m).expr
    assert flat == m01 - Max(m10, m11), f"keepdim=False broadcasts the row of maxima: {flat}"
    assert form("jnp.max(m, axis=0)[1]", m, "jax").expr == Max(m01, m11), "jax axis=0"
    assert form("torch.max(m, dim=0).values[0]", m).expr == Max(m00, m10), "torch.max with dim: (values, indices)"
    assert form("torch.mean(m, dim=(0, 1))", m).expr == (m00 + m01 + m10 + m11) / 4, "mean over a tuple of dims"
    assert form("torch.sum(m, dim=None)", m).expr == m00 + m01 + m10 + m11, "dim=None is every element"
    assert form("torch.logsumexp(m, 1)[0]", m).expr == sympy.log(sympy.exp(m00) + sympy.exp(m01)), "logsumexp"


def test_torch_max_is_elementwise_with_a_tensor_second_argument() -> None:
    assert form("torch.max(x, y)", {"x": 1, "y": 1}).expr == Max(x, y)
    with pytest.raises(Unmapped, match="the indices of torch.max"):
        form("torch.max(v, 0).indices + 0", {"v": [1, 2]})


def test_where_is_a_piecewise_of_its_condition() -> None:
    assert form("torch.where(x > 0, x, 0.0)", {"x": 0}).expr == Piecewise((x, x > 0), (0, True))
    assert form("jnp.where(x <= y, x, y)", {"x": 0, "y": 1}, "jax").expr == Piecewise((x, x <= y), (y, True))
    chained = form("torch.where(0 < x < 1, x, 0.0)", {"x": 0}).expr
    assert chained == Piecewise((x, (x > 0) & (x < 1)), (0, True)), f"chained comparison: {chained}"
    numeric = form("torch.where(x, 1.0, 2.0)", {"x": 0}).expr
    assert numeric == Piecewise((1, sympy.Ne(x, 0)), (2, True)), f"a numeric condition is nonzero-ness: {numeric}"
    arith = form("(x > 0) * x", {"x": 0}).expr
    assert arith == Piecewise((1, x > 0), (0, True)) * x, f"a comparison used as a number: {arith}"


@pytest.mark.parametrize("text, want", [
    ("torch.linalg.vector_norm(v, 1)", "Abs(v[0]) + Abs(v[1])"),
    ("torch.linalg.vector_norm(v)", "sqrt(v[0]**2 + v[1]**2)"),
    ("torch.linalg.vector_norm(v, ord=torch.inf)", "Max(Abs(v[0]), Abs(v[1]))"),
    ("torch.linalg.vector_norm(v, -torch.inf)", "Min(Abs(v[0]), Abs(v[1]))"),
    ("torch.linalg.vector_norm(v, 0.5)", "(sqrt(Abs(v[0])) + sqrt(Abs(v[1])))**2"),
    ("torch.linalg.vector_norm(v, 3)", "(v[0]**2*Abs(v[0]) + v[1]**2*Abs(v[1]))**(1/3)"),  # sympy: |a|**3 = a**2*|a|
    ("torch.norm(v, 'fro')", "sqrt(v[0]**2 + v[1]**2)"),
    ("torch.norm(v, p=1)", "Abs(v[0]) + Abs(v[1])"),
    ("v.norm(2)", "sqrt(v[0]**2 + v[1]**2)"),
    ("jnp.linalg.norm(v, jnp.inf)", "Max(Abs(v[0]), Abs(v[1]))"),
    ("jnp.linalg.norm(v, ord=1)", "Abs(v[0]) + Abs(v[1])"),
    ("torch.dist(v, w)", "sqrt((v[0] - w[0])**2 + (v[1] - w[1])**2)"),
])
def test_vector_norms_with_ord(text, want) -> None:
    fw = "jax" if text.startswith("jnp") else "torch"
    got = form(text, {"v": [0, 0], "w": [1, 1]}, fw).text
    assert got == want, f"{text} maps to {got}, expected {want}"


def test_matrix_norms() -> None:
    A = {"A": [[1, 0], [0, 1]]}
    fro = "sqrt(A[0][0]**2 + A[0][1]**2 + A[1][0]**2 + A[1][1]**2)"
    assert form("torch.linalg.matrix_norm(A)", A).text == fro, "matrix_norm defaults to 'fro'"
    assert form("jnp.linalg.norm(A)", A, "jax").text == fro, "jnp.linalg.norm of a matrix, ord=None: Frobenius"
    assert form("torch.linalg.norm(A)", A).text == fro, "torch.linalg.norm, ord=None: 2-norm of the flattened A"
    nuc = form("torch.linalg.matrix_norm(A, ord='nuc')", A)
    # 2x2: sigma1 + sigma2 = sqrt(|A|_F^2 + 2 |det A|); at diag(3, -1): 3 + 1
    assert nuc.expr.xreplace(dict(zip(nuc.symbols, (3, 0, 0, -1)))) == 4, f"nuclear norm of diag(3, -1): {nuc.text}"
    spec = form("torch.linalg.matrix_norm(A, ord=2)", A)
    assert spec.expr.xreplace(dict(zip(spec.symbols, (3, 0, 0, -1)))) == 3, f"spectral norm of diag(3, -1): {spec.text}"
    one = form("torch.linalg.matrix_norm(A, ord=1)", A)
    assert one.expr.xreplace(dict(zip(one.symbols, (1, -2, 3, 4)))) == 6, "ord=1: largest column sum of |A|"
    with pytest.raises(Unmapped, match=r"torch\.linalg\.matrix_norm: ord='nuc' of a 3x3 matrix.*not judged"):
        form("torch.linalg.matrix_norm(A, ord='nuc')", {"A": [[1, 0, 0], [0, 1, 0], [0, 0, 1]]})


def test_string_and_bool_arguments_choose_the_form() -> None:
    erf = x / 2 * (1 + sympy.erf(x / sqrt(2)))
    tanh_form = form("torch.nn.functional.gelu(x, approximate='tanh')", {"x": 0}).expr
    assert form("torch.nn.functional.gelu(x)", {"x": 0}).expr == erf, "torch gelu defaults to the exact erf form"
    assert tanh_form.has(sympy.tanh) and not tanh_form.has(sympy.erf), f"approximate='tanh': {tanh_form}"
    assert form("jax.nn.gelu(x)", {"x": 0}, "jax").expr == tanh_form, "jax.nn.gelu defaults to approximate=True"
    assert form("jax.nn.gelu(x, approximate=False)", {"x": 0}, "jax").expr == erf, "jax approximate=False: erf"
    with pytest.raises(Unmapped, match=r"torch\.nn\.functional\.gelu: approximate='sigmoid' \(mapped: 'none', 'tanh'\)"):
        form("torch.nn.functional.gelu(x, approximate='sigmoid')", {"x": 0})
    loss = {"x": [0, 1], "y": [0, 2]}
    assert form("F.l1_loss(x, y, reduction='sum')", loss).text == "Abs(x[0] - y[0]) + Abs(x[1] - y[1])"
    assert form("F.l1_loss(x, y)", loss).text == "Abs(x[0] - y[0])/2 + Abs(x[1] - y[1])/2", "reduction='mean'"
    assert form("torch.sum(v[None], dim=None)", {"v": [1, 2]}).text == "v[0] + v[1]", "v[None] and dim=None"


def test_order_statistics() -> None:
    v3 = {"v": [3, 1, 2]}
    a, b, c = form("torch.sort(v).values[0]", v3).symbols
    assert form("torch.sort(v).values[0]", v3).expr == Min(a, b, c), "smallest"
    assert form("torch.sort(v, descending=True).values[0]", v3).expr == Max(a, b, c), "descending"
    assert form("jnp.sort(v)[-1]", v3, "jax").expr == Max(a, b, c), "jax sort"
    assert form("torch.topk(v, 1).values", v3).expr == Max(a, b, c), "top 1"
    assert form("jax.lax.top_k(v, 1)[0]", v3, "jax").expr == Max(a, b, c), "jax top_k: [values, indices]"
    assert form("torch.kthvalue(v, 2).values", v3).expr == sym.kth_smallest([a, b, c], 2), "kthvalue"
    v4 = {"v": [1, 2, 3, 4]}
    s = form("torch.median(v)", v4).symbols
    assert form("torch.median(v)", v4).expr == sym.kth_smallest(list(s), 2), "torch.median: the lower middle value"
    assert form("jnp.median(v)", v4, "jax").expr == (sym.kth_smallest(list(s), 2) + sym.kth_smallest(list(s), 3)) / 2, \
        "jnp.median: the mean of the two middle values"
    q = form("torch.quantile(v, 0.25)", v4)
    assert q.expr.xreplace(dict(zip(q.symbols, (4, 1, 3, 2)))) == Rational(7, 4), f"quantile 0.25 of 1..4: {q.text}"
    w = {"v": [1, 2], "w": [0, 5]}
    idx = form("v[w.argmax()]", w)
    v0, v1, w0, w1 = idx.symbols
    assert idx.expr == Piecewise((v0, w0 >= w1), (v1, True)), f"index by another tensor's argmax: {idx.expr}"
    assert form("v[v.argmax()]", w).expr == Max(v0, v1), "a tensor at its own argmax is its maximum"


def test_pooling_windows() -> None:
    m = {"m": [[3, 1, 0], [3, 3, 0], [1, 2, 5]]}
    f = form("torch.nn.functional.max_pool2d(m.reshape(1, 1, 3, 3), 2, stride=1)", m)
    s = f.symbols
    want = (Max(s[0], s[1], s[3], s[4]) + Max(s[1], s[2], s[4], s[5]) + Max(s[3], s[4], s[6], s[7])
            + Max(s[4], s[5], s[7], s[8]))
    assert f.expr == want, f"2x2 windows, stride 1: {f.text}"
    g = form("jax.lax.reduce_window(m, -jnp.inf, jax.lax.max, (3, 3), (1, 1), 'VALID')", m, "jax")
    assert g.expr == Max(*s), f"one 3x3 window: {g.text}"
    h = form("torch.nn.functional.adaptive_max_pool2d(m.reshape(1, 1, 3, 3), 1)", m)
    assert h.expr == Max(*s), "adaptive pooling to 1x1"
    with pytest.raises(Unmapped, match=r"jax\.lax\.reduce_window: init_value 0"):
        form("jax.lax.reduce_window(m, 0.0, jax.lax.max, (3, 3), (1, 1), 'VALID')", m, "jax")


def test_activations_match_their_documented_definitions() -> None:
    at = {"x": 0}
    assert form("F.leaky_relu(x)", at).expr == Piecewise((x, x > 0), (x / 100, True)), "default slope 0.01"
    assert form("F.softplus(x, beta=2)", at).expr == Piecewise(
        (x, 2 * x > 20), (sympy.log(1 + sympy.exp(2 * x)) / 2, True)), "torch softplus: linear past the threshold"
    r = form("torch.round(x)", at)
    halves = [r.expr.xreplace({r.symbols[0]: Rational(k, 2)}) for k in (-3, -1, 1, 3, 5)]
    assert halves == [-2, 0, 0, 2, 2], f"round half to even at -1.5, -0.5, 0.5, 1.5, 2.5: {halves}"
    pd = form("F.pairwise_distance(v, w)", {"v": [0, 0], "w": [0, 0]})
    assert pd.text == "sqrt((v[0] - w[0] + 1e-6)**2 + (v[1] - w[1] + 1e-6)**2)", f"eps is added: {pd.text}"
    selu = form("torch.selu(x)", at).text
    assert "1.0507009873554804934193349852946" in selu and "1.6732632423543772848170429916717" in selu, \
        f"selu's constants stay exact: {selu}"


def test_unmapped_names_the_function_canonically() -> None:
    for text, fw, name in [("F.glu(x)", "torch", "torch.nn.functional.glu"),
                           ("torch.special.zeta(x, 2.0)", "torch", "torch.special.zeta"),
                           ("jnp.cumsum(x)", "jax", "jax.numpy.cumsum"),
                           ("x.cumprod(0)", "torch", "torch.Tensor.cumprod")]:
        with pytest.raises(Unmapped) as err:
            form(text, {"x": [0, 1]}, fw)
        assert str(err.value) == f"no symbolic form for {name} (pass one with --sympy '…')", f"{text}: {err.value}"
        assert isinstance(err.value, ex.ExprError), "Unmapped is an ExprError (one-line, exit 2 where refused)"


def test_wrt_and_integers_become_constants() -> None:
    f = form("torch.maximum(x, y)", {"x": 1, "y": 2}, wrt=["x"])
    assert (f.expr, f.components, f.point) == (Max(x, 2), ("x",), (1,)), f"y is the constant 2: {f}"
    k = form("x ** k", {"x": 0, "k": 0}, "jax", wrt=["x"])
    assert k.expr == 1 and k.components == ("x",), f"x ** 0 with k an integer constant: {k.text}"
    with pytest.raises(ex.ExprError, match="--wrt names 'z'"):
        form("x + 1", {"x": 0}, wrt=["z"])


def test_non_finite_points_are_exact_infinities() -> None:
    f = form("torch.where(x <= 10, torch.exp(x), 1.0)", {"x": float("inf")})
    assert f.point == (oo,) and f.expr == Piecewise((sympy.exp(x), x <= 10), (1, True)), f"Q10: {f}"
    g = form("x + y", {"x": float("-inf"), "y": float("nan")})
    assert g.point[0] == -oo and g.point[1] is sympy.nan, f"-inf and nan: {g.point}"


# --------------------------------------------------------------------------- public cases Q1-Q8

#: (framework, program, point, pinned text) from shared/cases/public-cases-2.md.
PUBLIC = [
    ("Q1", "jax", "jnp.linalg.norm(a * v)", {"a": 1.3, "v": [0, 0]}, "sqrt(a**2*v[0]**2 + a**2*v[1]**2)"),
    ("Q1", "torch", "torch.linalg.vector_norm(a * v)", {"a": 1.3, "v": [0, 0]}, "sqrt(a**2*v[0]**2 + a**2*v[1]**2)"),
    ("Q2", "torch", "torch.cdist(x.reshape(1, 2), y.reshape(1, 2))", {"x": [1, 2], "y": [1, 2]},
     "sqrt((x[0] - y[0])**2 + (x[1] - y[1])**2)"),
    ("Q2", "torch", "torch.cdist(x.reshape(1, 2), y.reshape(1, 2), p=0.5)", {"x": [1, 2], "y": [1, 3]},
     "(sqrt(Abs(x[0] - y[0])) + sqrt(Abs(x[1] - y[1])))**2"),
    ("Q3", "torch", "torch.clamp(x, min=1e-300)", {"x": 0}, "Max(1e-300, x)"),
    ("Q4", "torch", "torch.pow(torch.zeros_like(b), b)", {"b": 1}, "0**b"),
    ("Q5", "torch", "torch.sqrt(torch.abs(x - 1)) + 1", {"x": 1}, "sqrt(Abs(x - 1)) + 1"),
    ("Q6", "torch", "torch.atan2(y, x)", {"y": 0, "x": 0}, "atan2(y, x)"),
    ("Q6", "jax", "jnp.arctan2(y, x)", {"y": 0, "x": 0}, "atan2(y, x)"),
    ("Q7", "torch", "torch.xlogy(x, 2.0)", {"x": 0}, "Piecewise((0, Eq(x, 0)), (x*log(2), True))"),
    ("Q7", "torch", "torch.xlogy(x, y)", {"x": 0, "y": 0}, "Piecewise((0, Eq(x, 0)), (x*log(y), True))"),
    ("Q7", "jax", "jax.scipy.special.xlogy(x, y)", {"x": 0, "y": 0}, "Piecewise((0, Eq(x, 0)), (x*log(y), True))"),
    ("Q8", "torch", "torch.linalg.matrix_norm(A, ord='nuc')", {"A": [[1, 0], [0, 1]]},
     "sqrt(A[0][0]**2 + A[0][1]**2 + A[1][0]**2 + A[1][1]**2 + 2*Abs(A[0][0]*A[1][1] - A[0][1]*A[1][0]))"),
    ("Q8", "jax", "jnp.linalg.norm(A, 'nuc')", {"A": [[1, 0], [0, 1]]},
     "sqrt(A[0][0]**2 + A[0][1]**2 + A[1][0]**2 + A[1][1]**2 + 2*Abs(A[0][0]*A[1][1] - A[0][1]*A[1][0]))"),
]


@pytest.mark.parametrize("qid, framework, text, at, want", PUBLIC, ids=[f"{p[0]}-{p[2]}" for p in PUBLIC])
def test_public_cases_map(qid, framework, text, at, want) -> None:
    f = form(text, at, framework)
    assert f.text == want, f"{qid}: {text} maps to {f.text}, pinned {want}"
    assert f.point == tuple(translate._exact(v) for v in _flat(at)), f"{qid}: point {f.point}"


def _flat(at: dict) -> list:
    def rec(v):
        return [e for i in v for e in rec(i)] if isinstance(v, list) else [v]

    return [e for v in at.values() for e in rec(v)]


def test_what_sympy_cannot_form_is_unmapped_not_a_crash() -> None:
    with pytest.raises(Unmapped, match=r"torch\.relu: its form does not evaluate here .*not comparable"):
        form("torch.relu(torch.sqrt(x))", {"x": -10}, wrt=[])  # Max(0, sqrt(-10)): a constant, complex
    with pytest.raises(Unmapped, match=r"no symbolic form for torch\.reshape: cannot reshape"):
        form("torch.reshape(v, (3,))", {"v": [1, 2]})
    with pytest.raises(Unmapped, match=r"index 5 is out of bounds"):
        form("v[5]", {"v": [1, 2]})
    with pytest.raises(Unmapped, match=rf"at most {mp.MAX_ELEMENTS} are mapped"):
        form("torch.sum(v.reshape(80, 1) * v)", {"v": list(range(80))})


def test_text_writes_terminating_fractions_as_decimals() -> None:
    assert form("torch.clamp(x, -0.7, 0.7)", {"x": 0}).text == "Min(0.7, Max(-0.7, x))"
    assert form("x / 2 + 0.25", {"x": 0}).text == "x/2 + 0.25", "small fractions of a symbol stay sympy's"
    assert form("x * 3 / 7", {"x": 0}).text == "3*x/7", "a fraction with no decimal form stays a fraction"


def test_numpy_clone_namespaces_read_jax_numpy_rows_and_other_methods_stay_unmapped():
    """autograd.numpy and tf.experimental.numpy implement NumPy's API, as jax.numpy does; a tensor method of
    another framework has its own semantics and is not read as ``jax.Array``'s: one its rows lack (paddle's
    ``x.exp2()``) is unmapped."""
    from kinkcheck.oracles.mapping import Unmapped

    at = {"x": 0}
    assert sympy_form(ex.parse("anp.maximum(x, 0.0)", at, {"autograd"}), at, "autograd").text == "Max(0, x)"
    assert sympy_form(ex.parse("tnp.clip(x, 0, 1)", at, {"tensorflow"}), at, "tensorflow").text == "Min(1, Max(0, x))"
    with pytest.raises(Unmapped, match="paddle tensor method .exp2"):
        sympy_form(ex.parse("x.exp2()", at, {"paddle"}), at, "paddle")
    assert sympy_form(ex.parse("tf.minimum(x, y)", {"x": 4, "y": 4}, {"tensorflow"}), {"x": 4, "y": 4},
                      "tensorflow").text == "Min(x, y)"
    with pytest.raises(Unmapped, match="tensorflow.nn.l2_loss"):
        sympy_form(ex.parse("tf.nn.l2_loss(x)", at, {"tensorflow"}), at, "tensorflow")


@pytest.mark.parametrize("fw, text, at, want", [
    ("tinygrad", "x.clip(0)", {"x": 0}, "Max(0, x)"),
    ("tinygrad", "tinygrad.Tensor.hardtanh(x)", {"x": 0}, "Min(1, Max(-1, x))"),
    ("tinygrad", "(x > 0).where(x, 0.0)", {"x": 0}, "Piecewise((x, x > 0), (0, True))"),
    ("tinygrad", "v.sort(descending=True)[0][0]", {"v": [1, 0]}, "Max(v[0], v[1])"),
    ("paddle", "x.clip(max=1.0)", {"x": 0}, "Min(1, x)"),
    ("paddle", "paddle.max(m, axis=1).sum()", {"m": [[1, 0], [0, 1]]}, "Max(m[0][0], m[0][1]) + Max(m[1][0], m[1][1])"),
    ("paddle", "paddle.topk(v, 1)[0].sum()", {"v": [1, 0]}, "Max(v[0], v[1])"),
    ("paddle", "paddle.linalg.norm(m, 1)", {"m": [[1, 0], [0, 1]]},
     "Abs(m[0][0]) + Abs(m[0][1]) + Abs(m[1][0]) + Abs(m[1][1])"),
    ("mindspore", "x.clamp(-1.0, 1.0)", {"x": 0}, "Min(1, Max(-1, x))"),
    ("mindspore", "mindspore.ops.norm(v)", {"v": [0, 0]}, "sqrt(v[0]**2 + v[1]**2)"),
    ("tensorflow", "tf.norm(v)", {"v": [0, 0]}, "sqrt(v[0]**2 + v[1]**2)"),
    ("tensorflow", "tf.math.top_k(v, 1).values[0]", {"v": [1, 0]}, "Max(v[0], v[1])"),
    ("tensorflow", "tf.sort(v, direction='DESCENDING')[0]", {"v": [1, 0]}, "Max(v[0], v[1])"),
    ("pytensor", "pytensor.tensor.switch(x > 0, x, 0.0)", {"x": 0}, "Piecewise((x, x > 0), (0, True))"),
    ("mlx", "mlx.nn.hard_tanh(x)", {"x": 0}, "Min(1, Max(-1, x))"),
])
def test_other_frameworks_rows_follow_their_own_signatures(fw, text, at, want) -> None:
    """Each framework's rows bind its own documented signature: tinygrad's ``clip(min_=None, max_=None)``, paddle's
    ``max(x, axis)`` and ``topk`` on the last axis, tf.norm's default ``'euclidean'`` and top_k's ``(values,
    indices)``, tf.sort's ``direction``, PyTensor's ``switch(cond, ift, iff)``."""
    got = sympy_form(ex.parse(text, at, {fw}), at, fw).text
    assert got == want, f"{fw}: {text} maps to {got}, expected {want}"


def test_i0e_maps_in_every_spelling_and_the_oracle_finds_its_kink() -> None:
    """i0e(x) = exp(-|x|) I0(x) (torch.special.i0e, jax.scipy.special.i0e, lax.bessel_i0e, tf.math.bessel_i0e,
    paddle.i0e): a kink at 0 with one-sided derivatives 1 and -1 (I0'(0) = I1(0) = 0), so the Clarke set is
    [-1, 1] and its minimum-norm element 0. PaddlePaddle returns -1 there, PyTensor's ive(0, x) 1."""
    want = sympy.exp(-sympy.Abs(x)) * sympy.besseli(0, x)
    for text, fw in [("torch.special.i0e(x)", "torch"), ("jax.scipy.special.i0e(x)", "jax"),
                     ("jax.lax.bessel_i0e(x)", "jax"), ("tf.math.bessel_i0e(x)", "tensorflow"),
                     ("paddle.i0e(x)", "paddle")]:
        assert sympy_form(ex.parse(text, {"x": 0}, {fw}), {"x": 0}, fw).expr == want, text
    r = sym.analyze_expression(want, [x], [sympy.Integer(0)], case_id="i0e@0")
    assert r.kind == "kink" and (r.left, r.right) == (1, -1), f"one-sided {r.left}, {r.right}"
    assert r.min_norm == (0,), f"min-norm {r.min_norm}"


# --------------------------------------------------------------------------- issue 32, item 5: expanded tensors


@pytest.mark.parametrize(("fw", "text", "expected"), [
    ("torch", "torch.amax(v.expand(2, 3), 0).sum()", "v[0] + v[1] + v[2]"),
    ("torch", "torch.amax(v.expand(2, -1))", "Max(v[0], v[1], v[2])"),
    ("torch", "torch.amax(torch.broadcast_to(v, (2, 3)), 1).sum()", "2*Max(v[0], v[1], v[2])"),
    ("torch", "v.repeat(2).sum()", "2*v[0] + 2*v[1] + 2*v[2]"),
    ("torch", "torch.tile(v, (2,)).max()", "Max(v[0], v[1], v[2])"),
    ("jax", "jax.numpy.max(jax.numpy.broadcast_to(v, (2, 3)), axis=1).sum()", "2*Max(v[0], v[1], v[2])"),
    ("jax", "jax.numpy.tile(v, 3).sum()", "3*v[0] + 3*v[1] + 3*v[2]"),
])
def test_reductions_over_an_expanded_tensor_map(fw: str, text: str, expected: str) -> None:
    """Broadcast copies are the same element: a max over copies is the max of the elements (grad judges
    ``torch.amax(v.expand(2, 3), 0)`` without --sympy; the copies' tie is the framework's business)."""
    f = form(text, {"v": [0.0, 0.0, 1.0]}, fw)
    assert str(f.expr) == expected, f"{text}: {f.expr}"


def test_expand_as_takes_the_other_tensor_s_shape() -> None:
    at = {"v": [0.0, 0.0, 1.0], "m": [[0.0, 0.0, 0.0]] * 4}
    f = form("(torch.amax(v.expand_as(m), 0) + m.sum(0)).sum()", at, "torch", wrt=["v"])
    assert str(f.expr) == "v[0] + v[1] + v[2]", f.expr


def test_an_expand_that_does_not_broadcast_is_unmapped_with_its_reason() -> None:
    with pytest.raises(Unmapped, match="broadcast"):
        form("v.expand(2, 2).sum()", {"v": [0.0, 0.0, 1.0]}, "torch")


# --------------------------------------------------------------------------- issue 32, item 5: writes at indices

WRITE_AT = {"x": [0.0, 0.0, 0.0], "v": [1.0, 2.0]}


@pytest.mark.parametrize(("fw", "text", "expected"), [
    ("torch", "x.index_put((torch.tensor([0, 0]),), v, accumulate=True)[0]", "v[0] + v[1] + x[0]"),
    ("torch", "x.index_add(0, torch.tensor([0, 0]), v)[0]", "v[0] + v[1] + x[0]"),
    ("torch", "x.index_add(0, torch.tensor([0, 0]), v, alpha=2)[0]", "2*v[0] + 2*v[1] + x[0]"),
    ("torch", "x.scatter_add(0, torch.tensor([0, 0]), v)[0]", "v[0] + v[1] + x[0]"),
    ("torch", "x.put(torch.tensor([0, 0]), v, accumulate=True)[0]", "v[0] + v[1] + x[0]"),
    ("torch", "x.put(torch.tensor([-1, 0]), v).sum()", "v[0] + v[1] + x[1]"),
    ("torch", "x.index_put((torch.tensor([2, 0]),), v).sum()", "v[0] + v[1] + x[1]"),
    ("torch", "torch.index_put(x, (torch.tensor([1]),), v[1])[1]", "v[1]"),
    ("torch", "x.scatter(0, torch.tensor([1, 2]), v).sum()", "v[0] + v[1] + x[0]"),
    ("torch", "x.index_copy(0, torch.tensor([2, 1]), v)[1]", "v[1]"),
    ("jax", "x.at[jax.numpy.array([0, 0])].add(v)[0]", "v[0] + v[1] + x[0]"),
    ("jax", "x.at[0].set(v[1]).sum()", "v[1] + x[1] + x[2]"),
    ("jax", "x.at[jax.numpy.array([2, 1])].set(v).max()", "Max(v[0], v[1], x[0])"),
])
def test_writes_at_indices_map(fw: str, text: str, expected: str) -> None:
    """An accumulating write at a duplicate index is a sum; a plain write at distinct indices is a copy."""
    f = form(text, WRITE_AT, fw)
    assert str(f.expr) == expected, f"{text}: {f.expr}"


@pytest.mark.parametrize(("fw", "text"), [
    ("torch", "x.index_put((torch.tensor([0, 0]),), v)[0]"),
    ("torch", "x.put(torch.tensor([0, -3]), v)[0]"),
    ("torch", "x.scatter(0, torch.tensor([0, 0]), v)[0]"),
    ("torch", "x.index_copy(0, torch.tensor([0, 0]), v)[0]"),
    ("jax", "x.at[jax.numpy.array([0, 0])].set(v)[0]"),
])
def test_a_plain_write_at_a_duplicate_index_is_no_one_function(fw: str, text: str) -> None:
    """Which write wins is undefined (PyTorch) or implementation-defined (JAX): not mapped, with the reason."""
    with pytest.raises(Unmapped, match="duplicate index"):
        form(text, WRITE_AT, fw)


def test_a_write_out_of_range_is_unmapped_not_wrapped() -> None:
    with pytest.raises(Unmapped, match="out of range|out of bounds"):
        form("x.index_put((torch.tensor([3]),), v[0])[0]", WRITE_AT, "torch")


# --------------------------------------------------------------------------- issue 32, item 5: reconstructions

RECONSTRUCT_AT = {"m": [[1.0, 0.0], [0.0, 1.0]]}


@pytest.mark.parametrize(("fw", "text", "expected"), [
    ("torch", "((torch.linalg.svd(m).U * torch.linalg.svd(m).S) @ torch.linalg.svd(m).Vh)[0, 1]", "m[0][1]"),
    ("torch", "(torch.linalg.svd(m)[0] @ torch.diag(torch.linalg.svd(m)[1]) @ torch.linalg.svd(m)[2]).sum()",
     "m[0][0] + m[0][1] + m[1][0] + m[1][1]"),
    ("torch", "(torch.svd(m).U @ torch.diag(torch.svd(m).S) @ torch.svd(m).V.mT)[1, 0]", "m[1][0]"),
    ("jax", "((jax.numpy.linalg.svd(m)[0] * jax.numpy.linalg.svd(m)[1]) @ jax.numpy.linalg.svd(m)[2])[0, 1]",
     "m[0][1]"),
    ("torch", "((torch.linalg.eigh(m).eigenvectors * torch.linalg.eigh(m).eigenvalues) "
              "@ torch.linalg.eigh(m).eigenvectors.mT)[0, 1]", "m[0][1]/2 + m[1][0]/2"),
    ("jax", "((jax.numpy.linalg.eigh(m)[1] * jax.numpy.linalg.eigh(m)[0]) @ jax.numpy.linalg.eigh(m)[1].T)[0, 1]",
     "m[0][1]/2 + m[1][0]/2"),
])
def test_a_reconstruction_through_a_decomposition_maps_to_the_matrix(fw: str, text: str, expected: str) -> None:
    """U diag(S) V^T is m, and Q diag(L) Q^T is m's symmetric part (eigh's input, as eigvalsh@repeated writes it):
    smooth, although the factors are no functions of m where values repeat."""
    f = form(text, RECONSTRUCT_AT, fw)
    assert str(f.expr) == expected, f"{text}: {f.expr}"


@pytest.mark.parametrize(("fw", "text", "name"), [
    ("torch", "torch.linalg.svd(m).U[0, 0] ** 2", "torch.linalg.svd"),
    ("torch", "torch.linalg.svd(m).S[0]", "torch.linalg.svd"),
    ("torch", "((torch.linalg.svd(m).U * torch.linalg.svd(m).S) @ torch.linalg.svd(m).Vh.mT)[0, 1]", "torch.linalg.svd"),
    ("torch", "(torch.linalg.svd(m).U @ torch.linalg.svd(m).Vh)[0, 1]", "torch.linalg.svd"),
    ("torch", "(torch.linalg.svd(m).U * torch.linalg.svd(m + 0).S @ torch.linalg.svd(m).Vh)[0, 1]",
     "torch.linalg.svd"),
    ("jax", "jax.numpy.linalg.eigh(m)[1][0, 0] ** 2", "jax.numpy.linalg.eigh"),
    ("jax", "jax.numpy.linalg.eigh(m, symmetrize_input=False)[0][-1]", "jax.numpy.linalg.eigh"),
])
def test_a_factor_outside_a_reconstruction_is_unmapped_under_its_decomposition(fw: str, text: str, name: str) -> None:
    """A singular vector alone, a wrong transpose, a product of two decompositions: unmapped, named by the
    decomposition (as before: tests list it among the decompositions)."""
    with pytest.raises(Unmapped) as err:
        form(text, RECONSTRUCT_AT, fw)
    assert err.value.name == name, err.value


@pytest.mark.parametrize(("fw", "text", "why"), [
    ("torch", "x.index_copy(0, torch.tensor([-1]), v[0].reshape(1))[0]", "not negative"),
    ("torch", "x.index_add(0, torch.tensor([[0], [1]]), v)[0]", "0-d or 1-d"),
    ("torch", "x.index_add(0, torch.tensor([0, 1]), v[0].reshape(1))[0]", "source has shape"),
    ("torch", "x.put(torch.tensor([0, 1]), v[0])[0]", "same number of elements"),
    ("torch", "x.scatter_add(0, torch.tensor([0, 1]), 1.0)[0]", "src must be a tensor"),
    ("torch", "x.scatter(0, torch.tensor([0, 1]), v[0].reshape(1))[0]", "cover index"),
    ("jax", "x.at[jax.numpy.array([0, 0])].add(v, unique_indices=True)[0]", "unique_indices"),
])
def test_writes_the_framework_refuses_or_leaves_undefined_are_unmapped(fw: str, text: str, why: str) -> None:
    """What torch raises for (a negative or 2-d index_add index, a source of another size) or JAX leaves
    undefined (unique_indices=True with a duplicate) is not given numpy's meaning."""
    with pytest.raises(Unmapped, match=why):
        form(text, WRITE_AT, fw)


def test_torch_eigh_maps_only_where_the_matrix_is_symmetric() -> None:
    """torch reads one triangle: the symmetric part is its function only at a symmetric point (issue 32 review)."""
    text = "((torch.linalg.eigh(m).eigenvectors * torch.linalg.eigh(m).eigenvalues) @ torch.linalg.eigh(m).eigenvectors.mT)[0, 1]"
    with pytest.raises(Unmapped, match="not symmetric here"):
        form(text, {"m": [[1.0, 2.0], [3.0, 4.0]]}, "torch")
    jax_text = "((jax.numpy.linalg.eigh(m)[1] * jax.numpy.linalg.eigh(m)[0]) @ jax.numpy.linalg.eigh(m)[1].T)[0, 1]"
    assert str(form(jax_text, {"m": [[1.0, 2.0], [3.0, 4.0]]}, "jax").expr) == "m[0][1]/2 + m[1][0]/2", \
        "JAX symmetrizes its input by default: exact everywhere"


def test_a_factor_passed_by_keyword_is_named_by_its_decomposition() -> None:
    with pytest.raises(Unmapped) as err:
        form("torch.sum(input=torch.linalg.svd(m).U)", RECONSTRUCT_AT, "torch")
    assert err.value.name == "torch.linalg.svd" and "_Factor" not in str(err.value), err.value
