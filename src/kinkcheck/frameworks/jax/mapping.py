"""JAX's rows of the sympy mapping (:data:`kinkcheck.oracles.mapping.TABLE`): what each of its functions
computes, as a form over its parameters (:class:`kinkcheck.oracles.rows.Entry`). Text only: imports nothing of
jax."""

from __future__ import annotations

from kinkcheck.oracles.rows import (
    BINARY, FMOD, GELU_ERF, GELU_TANH, HARDSIGMOID, I0E, RELU6, ROUND, SELU, SIGMOID, SOFTPLUS, UNARY, XLOG1PY, XLOGY,
    Entry, constants, e, h, r, rename,
)

#: ``jax.numpy.inf``, ``jax.numpy.pi``, ``jax.numpy.float64``…
CONSTANTS = constants("jax.numpy")

#: Tensor methods are rows named ``jax.Array.<method>`` (:data:`kinkcheck.oracles.mapping.METHOD_PREFIXES`).
METHODS = {"jax": "jax.Array"}

#: Decompositions whose factors map in a reconstruction (:data:`kinkcheck.oracles.mapping.DECOMPOSITIONS`).
DECOMPOSITIONS = {"jax.numpy.linalg.svd": ("svd", ("U", "S", "Vh")), "jax.numpy.linalg.eigh": ("eigh", ("L", "Q"))}


def table() -> dict[str, Entry]:
    t: dict[str, Entry] = {}
    jnp, lax, nn = "jax.numpy.", "jax.lax.", "jax.nn."
    for name, form in UNARY.items():
        if name == "heaviside0":
            continue
        names = {"abs": ["abs", "absolute", "fabs"], "round": ["round", "rint", "around"], "relu": [],
                 "arcsin": ["arcsin", "asin"], "arccos": ["arccos", "acos"], "arctan": ["arctan", "atan"],
                 "arcsinh": ["arcsinh", "asinh"], "arccosh": ["arccosh", "acosh"], "arctanh": ["arctanh", "atanh"],
                 "erf": [], "erfc": [], "sigmoid": [], "rsqrt": []}.get(name, [name])
        for n in names:
            if n in ("round", "around"):
                t[jnp + n] = e("a, decimals=0, out=None", {"param": "decimals", 0: rename(form, {"x": "a"})})
            else:
                t[jnp + n] = e("x, /", form)
        lax_name = {"abs": "abs", "sqrt": "sqrt", "rsqrt": "rsqrt", "exp": "exp", "expm1": "expm1", "log": "log",
                    "log1p": "log1p", "sign": "sign", "floor": "floor", "ceil": "ceil", "tanh": "tanh", "sin": "sin",
                    "cos": "cos", "tan": "tan", "erf": "erf", "erfc": "erfc", "negative": "neg", "sigmoid": "logistic",
                    "square": "square", "reciprocal": "reciprocal", "arctan": "atan", "exp2": "exp2"}.get(name)
        if lax_name:
            t[lax + lax_name] = e("x", form)
    t["jax.Array.round"] = e("self, decimals=0, out=None", {"param": "decimals", 0: rename(ROUND, {"x": "self"})})
    t[lax + "round"] = e("x, rounding_method=0", {"param": "rounding_method", 0: "sign(x) * floor(Abs(x) + 0.5)",
                                                   1: ROUND})
    for n in ("erf", "erfc"):
        t[f"jax.scipy.special.{n}"] = e("x", UNARY[n])
    t["jax.scipy.special.expit"] = e("x", SIGMOID)
    t["jax.scipy.special.i0e"] = e("x", I0E)
    t[lax + "bessel_i0e"] = e("x", I0E)
    for name, form in BINARY.items():
        names = {"atan2": ["arctan2", "atan2"], "xlogy": [], "xlog1py": [], "pow": ["power", "pow"],
                 "sub": ["subtract"], "mul": ["multiply"], "div": ["divide", "true_divide"], "add": ["add"],
                 "maximum": ["maximum", "fmax"], "minimum": ["minimum", "fmin"]}.get(name, [name])
        for n in names:
            t[jnp + n] = e("x, y, /", form)
    t[jnp + "heaviside"] = e("x1, x2, /", "Piecewise((0, x1 < 0), (x2, Eq(x1, 0)), (1, True))")
    t["jax.scipy.special.xlogy"] = e("x, y", XLOGY)
    t["jax.scipy.special.xlog1py"] = e("x, y", XLOG1PY)
    for n, form in (("max", "Max(x, y)"), ("min", "Min(x, y)"), ("atan2", "atan2(x, y)"), ("pow", "x ** y"),
                    ("add", "x + y"), ("sub", "x - y"), ("mul", "x * y"), ("div", "x / y"), ("rem", FMOD)):
        t[lax + n] = e("x, y", form)
    t[lax + "clamp"] = e("min, x, max", "Min(Max(x, min), max)")
    t[jnp + "clip"] = e("arr=None, /, min=None, max=None", "Min(Max(arr, min), max)")
    t["jax.Array.clip"] = e("self, min=None, max=None", "Min(Max(self, min), max)")
    t[jnp + "where"] = h("condition, x=None, y=None, /, *, size=None, fill_value=None", "where")
    for n, form in (("zeros_like", "0"), ("ones_like", "1")):
        t[jnp + n] = e("a, dtype=None, shape=None, *, device=None", form)
    t[jnp + "full_like"] = e("a, fill_value, dtype=None, shape=None, *, device=None", "fill_value")
    t[jnp + "array"] = h("object, dtype=None, copy=True, order='K', ndmin=0, *, device=None", "asarray")
    t[jnp + "asarray"] = h("a, dtype=None, order=None, *, copy=None, device=None", "asarray")
    # jax.nn
    t[nn + "relu"] = e("x", "Max(x, 0)")
    t[nn + "relu6"] = e("x", RELU6)
    t[nn + "hard_tanh"] = e("x", "Min(Max(x, -1), 1)")
    t[nn + "hard_sigmoid"] = e("x", HARDSIGMOID)
    t[nn + "hard_swish"] = t[nn + "hard_silu"] = e("x", "x * " + HARDSIGMOID)
    t[nn + "leaky_relu"] = e("x, negative_slope=0.01", "Piecewise((x, x >= 0), (negative_slope * x, True))")
    t[nn + "elu"] = e("x, alpha=1.0", "Piecewise((x, x > 0), (alpha * (exp(x) - 1), True))")
    t[nn + "celu"] = e("x, alpha=1.0", "Max(x, 0) + alpha * (exp(Min(x, 0) / alpha) - 1)")
    t[nn + "selu"] = e("x", SELU)
    t[nn + "gelu"] = e("x, approximate=True", {"param": "approximate", True: GELU_TANH, False: GELU_ERF})
    t[nn + "silu"] = t[nn + "swish"] = e("x", "x * " + SIGMOID)
    t[nn + "sigmoid"] = e("x", SIGMOID)
    t[nn + "softplus"] = e("x", SOFTPLUS)
    t[nn + "log_sigmoid"] = e("x", "-log(1 + exp(-x))")
    t[nn + "soft_sign"] = e("x", "x / (Abs(x) + 1)")
    t[nn + "mish"] = e("x", "x * tanh(log(1 + exp(x)))")
    t[nn + "squareplus"] = e("x, b=4", "(x + sqrt(x ** 2 + b)) / 2")
    t[nn + "sparse_plus"] = e("x", "Piecewise((0, x <= -1), (x, x >= 1), ((x + 1) ** 2 / 4, True))")
    t[nn + "softmax"] = h("x, axis=-1, where=None", "softmax", "softmax")
    t[nn + "log_softmax"] = h("x, axis=-1, where=None", "softmax", "log_softmax")
    # reductions
    red_sig = "a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None"
    for n, red in (("sum", "sum"), ("nansum", "sum"), ("prod", "prod"), ("max", "max"), ("amax", "max"),
                   ("nanmax", "max"), ("min", "min"), ("amin", "min"), ("nanmin", "min")):
        sig = red_sig if red in ("sum", "prod") else red_sig.replace("dtype=None, ", "")
        t[jnp + n] = r(sig, red)
        if n in ("sum", "prod", "max", "min"):  # jax.Array has no amax/amin/nan* methods
            t[f"jax.Array.{n}"] = r(sig.replace("a,", "self,"), red)
    for n in ("mean", "nanmean"):
        t[jnp + n] = r("a, axis=None, dtype=None, out=None, keepdims=False, *, where=None", "mean")
    t["jax.Array.mean"] = r("self, axis=None, dtype=None, out=None, keepdims=False, *, where=None", "mean")
    t["jax.scipy.special.logsumexp"] = r("a, axis=None, b=None, keepdims=False, return_sign=False, where=None",
                                          "logsumexp")
    t[jnp + "logaddexp"] = e("x1, x2, /", "log(exp(x1) + exp(x2))")
    for n, red in (("argmax", "max"), ("argmin", "min")):
        t[jnp + n] = h("a, axis=None, out=None, keepdims=None", "argext", red)
        t[f"jax.Array.{n}"] = h("self, axis=None, out=None, keepdims=None", "argext", red)
    t[jnp + "median"] = t[jnp + "nanmedian"] = h("a, axis=None, out=None, overwrite_input=False, keepdims=False",
                                                  "jnp_median")
    t[jnp + "quantile"] = t[jnp + "nanquantile"] = h(
        "a, q, axis=None, out=None, overwrite_input=False, method='linear', keepdims=False, *, weights=None",
        "quantile")
    t[jnp + "sort"] = h("a, axis=-1, *, kind=None, order=None, stable=True, descending=False", "sort", "array")
    t["jax.Array.sort"] = h("self, axis=-1, *, kind=None, order=None, stable=True, descending=False", "sort", "array")
    t[lax + "top_k"] = h("operand, k, *, axis=-1", "topk")
    t[lax + "sort"] = h("operand, dimension=-1, is_stable=True, num_keys=1", "sort", "lax")
    t[lax + "reduce_window"] = h("operand, init_value, computation, window_dimensions, window_strides=None, "
                                  "padding='VALID', base_dilation=None, window_dilation=None", "reduce_window")
    t[jnp + "linalg.norm"] = h("x, ord=None, axis=None, keepdims=False", "linalg_norm")
    t[jnp + "linalg.vector_norm"] = h("x, /, *, axis=None, keepdims=False, ord=2", "vector_norm")
    t[jnp + "linalg.matrix_norm"] = h("x, /, *, keepdims=False, ord='fro'", "matrix_norm")
    # shapes
    t[jnp + "reshape"] = h("a, shape=None, order='C', *, copy=None, out_sharding=None", "reshape")
    t["jax.Array.reshape"] = h("self, *shape, order='C'", "reshape")
    t[jnp + "broadcast_to"] = h("array, shape, *, out_sharding=None", "broadcast")
    t[jnp + "tile"] = h("A, reps", "tile")
    t[jnp + "ravel"] = h("a, order='C', *, out_sharding=None", "flatten")
    t["jax.Array.ravel"] = t["jax.Array.flatten"] = h("self, order='C'", "flatten")
    t[jnp + "stack"] = h("arrays, axis=0, out=None, dtype=None", "stack")
    t[jnp + "concatenate"] = t[jnp + "concat"] = h("arrays, axis=0, dtype=None", "cat")
    t[jnp + "squeeze"] = h("a, axis=None", "squeeze")
    t[jnp + "expand_dims"] = h("a, axis", "unsqueeze")
    t[jnp + "transpose"] = h("a, axes=None", "transpose2")
    t[jnp + "swapaxes"] = h("a, axis1, axis2", "swapaxes")
    t[jnp + "matmul"] = t[jnp + "dot"] = t[jnp + "inner"] = h("a, b, *, precision=None, preferred_element_type=None",
                                                              "matmul")
    t[jnp + "vdot"] = h("a, b, *, precision=None, preferred_element_type=None", "vdot")
    t["jax.Array.dot"] = h("self, b, *, precision=None, preferred_element_type=None", "matmul")
    # the functions of the census's cases (issue 14)
    for n in ("asin", "acos", "asinh", "acosh", "atanh", "sinh", "cosh"):
        t[lax + n] = e("x", f"{n}(x)")
    t[jnp + "cbrt"] = e("x, /", "sign(x) * Abs(x) ** (1 / 3)")
    t[lax + "cbrt"] = e("x, *, accuracy=None", {"param": "accuracy", None: "sign(x) * Abs(x) ** (1 / 3)"})
    t[jnp + "float_power"] = e("x, y, /", "x ** y")
    t[jnp + "mod"] = t[jnp + "remainder"]
    t[jnp + "floor_divide"] = e("x1, x2, /", "floor(x1 / x2)")
    t[jnp + "divmod"] = h("x1, x2, /", "tuple", ("floor(x1 / x2)", "x1 - x2 * floor(x1 / x2)"))
    t[jnp + "modf"] = h("x, /, out=None", "tuple", ("x - trunc(x)", "trunc(x)"))
    t[jnp + "angle"] = e("z, deg=False", {"param": "deg", False: "Piecewise((pi, z < 0), (0, True))",
                                           True: "Piecewise((180, z < 0), (0, True))"})
    t["jax.scipy.special.entr"] = e("x", "-xlogy(x, x)")
    t["jax.scipy.special.rel_entr"] = e("p, q", "xlogy(p, p) - xlogy(p, q)")
    t["jax.scipy.special.kl_div"] = e("p, q", "xlogy(p, p) - xlogy(p, q) - p + q")
    t["jax.scipy.special.logit"] = e("x", "log(x / (1 - x))")
    t[nn + "sparse_sigmoid"] = e("x", "Min(Max(x + 1, 0), 2) / 2")
    t[nn + "logsumexp"] = t["jax.scipy.special.logsumexp"]
    t[nn + "logmeanexp"] = r("x, axis=None, where=None, keepdims=False", "logmeanexp")
    t[jnp + "ptp"] = r("a, axis=None, out=None, keepdims=False", "ptp")
    t["jax.Array.ptp"] = r("self, axis=None, out=None, keepdims=False", "ptp")
    t[lax + "reduce_max"] = r("operand, axes", "max")
    t[lax + "reduce_min"] = r("operand, axes", "min")
    for n, red in (("cummax", "max"), ("cummin", "min"), ("cumlogsumexp", "logsumexp")):
        t[lax + n] = h("operand, axis=0, reverse=False", "cumulative", red)
    std = "a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None, mean=None, correction=None"
    t[jnp + "std"] = t[jnp + "nanstd"] = h(std, "std", "std")
    t["jax.Array.std"] = h(std.replace("a,", "self,").replace(" mean=None,", ""), "std", "std")
    t[lax + "select"] = h("pred, on_true, on_false", "select")
    t[lax + "select_n"] = h("which, *cases", "select_n")
    t[jnp + "select"] = h("condlist, choicelist, default=0", "jnp_select")
    return t
