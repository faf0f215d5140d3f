"""PaddlePaddle's rows of the sympy mapping (:data:`kinkcheck.oracles.mapping.TABLE`): what each of its functions
computes, from its API docs (paddlepaddle.org.cn/documentation/docs/en/api/; the docstrings of ``python/paddle/tensor``
and ``python/paddle/nn/functional``): ``paddle.clip(x, min=None, max=None)``, ``maximum``/``minimum``/``fmax``/``fmin``,
``paddle.max(x, axis=None, keepdim=False)`` (every element when axis is None), ``paddle.sort(x, axis=-1,
descending=False)`` (the sorted values only), ``paddle.topk(x, k, axis=None, largest=True)`` and ``paddle.kthvalue(x, k,
axis=None)`` ("if the axis is None, it will computed as -1"; both return ``(values, indices)``), ``paddle.median(x,
axis=None, keepdim=False, mode='avg')`` (``'min'``: the lower middle value, with indices when an axis is given),
``paddle.linalg.norm(x, p=None, axis=None)`` (no axis: the input "compressed into a one-dimensional vector"; ``p=None``
the 2-norm of a vector, the Frobenius norm of a matrix), ``paddle.where(condition, x, y)``, ``paddle.std(x, axis=None,
unbiased=True)``, ``paddle.logit(x, eps=None)`` (x clamped to [eps, 1 - eps]); ``paddle.nn.functional``'s activations
by their documented formulas (``hardtanh(x, min=-1.0, max=1.0)``, ``leaky_relu(x, negative_slope=0.01)``: x if
x >= 0, ``elu(x, alpha=1.0)``, ``celu(x, alpha=1.0)``, ``thresholded_relu(x, threshold=1.0, value=0.0)``: x if
x > threshold, ``softshrink``/``hardshrink(x, threshold=0.5)``, ``hardswish``, ``relu6``, ``selu(x,
scale=1.0507009873554805, alpha=1.6732632423543772)``). A ``paddle.Tensor`` method is the function of the same name
with the tensor first (the API docs of each method refer to ``paddle.<name>``): :data:`METHODS`.

Not mapped: ``paddle.round`` (PaddlePaddle 3 rounds half to even, 2.x half away from zero: the docs' example changed),
``paddle.nn.functional.hardsigmoid``, whose default ``slope=0.1666667`` is not 1/6 (its kink is at -2.9999994, not -3),
``softplus`` (no formula in the installed docstring), ``copysign`` (the sign bit of -0.0), ``to_tensor``
(``stop_gradient=True`` by default). Text only: imports nothing of paddle."""

from __future__ import annotations

from kinkcheck.oracles.rows import I0E, Entry, constants, e, h, r

#: ``paddle.inf``, ``paddle.float64``…
CONSTANTS = constants("paddle")

#: ``x.clip(0)`` reads the row ``paddle.Tensor.clip`` (:data:`kinkcheck.oracles.mapping.METHOD_PREFIXES`).
METHODS = {"paddle": "paddle.Tensor"}

#: Functions whose ``paddle.Tensor`` method is the same function with the tensor as ``x``.
_METHODS = ("abs", "sqrt", "exp", "log", "sign", "floor", "ceil", "trunc", "square", "asin", "acos", "acosh",
            "maximum", "minimum", "pow", "clip", "max", "min", "amax", "amin", "sum", "mean", "logsumexp", "sort",
            "topk", "kthvalue", "median", "norm", "std", "logit", "masked_fill", "reshape", "expand")


def table() -> dict[str, Entry]:
    P, F = "paddle.", "paddle.nn.functional."
    t: dict[str, Entry] = {}
    for n, form in (("maximum", "Max(x, y)"), ("minimum", "Min(x, y)"), ("fmax", "Max(x, y)"), ("fmin", "Min(x, y)"),
                    ("pow", "x ** y"), ("atan2", "atan2(x, y)"), ("hypot", "sqrt(x ** 2 + y ** 2)"),
                    ("remainder", "x - y * floor(x / y)"), ("mod", "x - y * floor(x / y)"),
                    ("floor_mod", "x - y * floor(x / y)")):
        t[P + n] = e("x, y, name=None", form)
    for n, form in (("abs", "Abs(x)"), ("sqrt", "sqrt(x)"), ("exp", "exp(x)"), ("log", "log(x)"), ("sign", "sign(x)"),
                    ("sgn", "sign(x)"), ("floor", "floor(x)"), ("ceil", "ceiling(x)"), ("square", "x ** 2"),
                    ("asin", "asin(x)"), ("acos", "acos(x)"), ("acosh", "acosh(x)"), ("tanh", "tanh(x)")):
        t[P + n] = e("x, name=None", form)
    t[P + "trunc"] = e("input, name=None", "trunc(input)")
    t[P + "clip"] = e("x, min=None, max=None, name=None", "Min(Max(x, min), max)")
    t[P + "i0e"] = e("x, name=None", I0E)
    t[P + "logit"] = h("x, eps=None, name=None", "logit")
    t[P + "where"] = h("condition, x=None, y=None, name=None", "where")
    t[P + "masked_fill"] = h("x, mask, value, name=None", "masked_fill")
    like = "x, dtype=None, name=None, *, device=None, requires_grad=False, pin_memory=False"
    t[P + "zeros_like"] = e(like, "0")
    t[P + "ones_like"] = e(like, "1")
    t[P + "full_like"] = e(like.replace("x,", "x, fill_value,"), "fill_value")
    # reductions and order statistics
    for n in ("max", "min", "amax", "amin"):
        t[P + n] = r("x, axis=None, keepdim=False, name=None", n.lstrip("a") if n.startswith("am") else n)
    t[P + "sum"] = r("x, axis=None, dtype=None, keepdim=False, name=None", "sum")
    t[P + "mean"] = r("x, axis=None, keepdim=False, name=None", "mean")
    t[P + "logsumexp"] = r("x, axis=None, keepdim=False, name=None", "logsumexp")
    t[P + "std"] = h("x, axis=None, unbiased=True, keepdim=False, name=None", "std", "std")
    t[P + "sort"] = h("x, axis=-1, descending=False, stable=False, name=None", "sort", "array")
    t[P + "topk"] = h("x, k, axis=None, largest=True, sorted=True, name=None", "topk")
    t[P + "kthvalue"] = h("x, k, axis=None, keepdim=False, name=None", "kthvalue")
    t[P + "median"] = t[P + "nanmedian"] = h("x, axis=None, keepdim=False, mode='avg', name=None", "paddle_median")
    t[P + "quantile"] = t[P + "nanquantile"] = h("x, q, axis=None, keepdim=False, interpolation='linear', name=None",
                                                 "quantile")
    # norms
    t[P + "linalg.norm"] = t[P + "norm"] = h("x, p=None, axis=None, keepdim=False, name=None", "axis_norm")
    t[P + "linalg.vector_norm"] = h("x, p=2.0, axis=None, keepdim=False, name=None", "vector_norm")
    t[P + "linalg.matrix_norm"] = h("x, p='fro', axis=[-2, -1], keepdim=False, name=None", "matrix_norm")
    # shapes
    t[P + "reshape"] = h("x, shape, name=None", "reshape")
    t[P + "expand"] = h("x, shape, name=None", "broadcast")
    t[P + "stack"] = h("x, axis=0, name=None", "stack")
    # paddle.nn.functional
    t[F + "relu"] = e("x, name=None", "Max(x, 0)")
    t[F + "relu6"] = e("x, name=None", "Min(Max(x, 0), 6)")
    t[F + "hardtanh"] = e("x, min=-1.0, max=1.0, name=None", "Min(Max(x, min), max)")
    t[F + "leaky_relu"] = e("x, negative_slope=0.01, name=None", "Piecewise((x, x >= 0), (negative_slope * x, True))")
    t[F + "elu"] = e("x, alpha=1.0, name=None", "Piecewise((x, x > 0), (alpha * (exp(x) - 1), True))")
    t[F + "celu"] = e("x, alpha=1.0, name=None", "Max(0, x) + Min(0, alpha * (exp(x / alpha) - 1))")
    t[F + "selu"] = e("x, scale=1.0507009873554805, alpha=1.6732632423543772, name=None",
                      "scale * Piecewise((x, x > 0), (alpha * exp(x) - alpha, True))")
    t[F + "thresholded_relu"] = e("x, threshold=1.0, value=0.0, name=None",
                                  "Piecewise((x, x > threshold), (value, True))")
    t[F + "softshrink"] = e("x, threshold=0.5, name=None",
                            "Piecewise((x - threshold, x > threshold), (x + threshold, x < -threshold), (0, True))")
    t[F + "hardshrink"] = e("x, threshold=0.5, name=None", "Piecewise((x, Abs(x) > threshold), (0, True))")
    t[F + "hardswish"] = e("x, name=None", "Piecewise((0, x <= -3), (x, x >= 3), (x * (x + 3) / 6, True))")
    t[F + "l1_loss"] = h("input, label, reduction='mean', name=None", "loss", "Abs(input - label)")
    for n in _METHODS:
        t[f"paddle.Tensor.{n}"] = t[P + n]
    return t
