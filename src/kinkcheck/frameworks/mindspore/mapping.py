"""MindSpore's rows of the sympy mapping (:data:`kinkcheck.oracles.mapping.TABLE`): what each of its functions
computes, from its API docs (mindspore.cn/docs/en/master/api_python/; ``mindspore.ops`` and its PyTorch-compatible
``mindspore.mint``): ``ops.clamp``/``ops.clip(input, min=None, max=None)``, ``maximum``/``minimum``/``fmax``/``fmin``,
``ops.round`` ("Returns half to even of a tensor element-wise"), ``ops.xlogy(input, other)`` ("returns zero when input
is zero"), ``ops.where(condition, input, other)``, ``ops.hardtanh(input, min_val=-1.0, max_val=1.0)``,
``ops.leaky_relu(input, alpha=0.2)`` and ``mint.nn.functional.leaky_relu(input, negative_slope=0.01)`` (input if
input >= 0), ``ops.elu(input_x, alpha=1.0)``, ``ops.celu(x, alpha=1.0)``, ``ops.selu`` with SELU's constants,
``ops.hardsigmoid`` (``max(0, min(1, (x + 3) / 6))``), ``ops.hardswish``, ``ops.hardshrink``/``softshrink(input,
lambd=0.5)``, ``ops.threshold(input, thr, value)`` (input where input > thr), ``ops.amax(input, axis=None,
keepdims=False, *, initial=None, where=None)``, ``ops.sum(input, dim=None, keepdim=False)``, ``ops.sort(input_x,
axis=-1, descending=False)`` and ``ops.topk(input, k, dim=None, largest=True, sorted=True)`` (``(values, indices)``; no
dim is the last), ``ops.norm(A, ord=None, dim=None, keepdim=False)`` (torch.linalg.norm's table: no dim and no ord the
2-norm of the flattened input), ``mint.norm(input, p='fro', dim=None)``, ``mint.linalg.vector_norm(x, ord=2,
dim=None)``, ``mint.max``/``mint.min(input, dim=None, keepdim=False)`` (``(values, indices)`` over a dim), and the
``mindspore.Tensor`` methods that refer to these functions ("For details, please refer to mindspore.ops.norm()"):
:data:`METHODS`. ``mindspore.numpy`` reads ``jax.numpy``'s rows (:data:`kinkcheck.oracles.mapping.NUMPY_CLONES`).

Not mapped: ``ops.max``/``ops.min`` (a ``(values, indices)`` pair even over every element), ``ops.median`` and
``mint.median`` (which middle value of an even count: not stated), ``ops.quantile``, the losses. Text only: imports
nothing of mindspore."""

from __future__ import annotations

from kinkcheck.oracles.rows import I0E, ROUND, SELU, XLOGY, Entry, e, h, r, rename

#: MindSpore's NumPy interface (``mindspore/numpy``: "mirrors NumPy's API") reads ``jax.numpy``'s rows.
CLONES = {"mindspore.numpy.": "jax.numpy."}

#: ``x.clamp(0)`` reads the row ``mindspore.Tensor.clamp`` (:data:`kinkcheck.oracles.mapping.METHOD_PREFIXES`).
METHODS = {"mindspore": "mindspore.Tensor"}


def table() -> dict[str, Entry]:
    t: dict[str, Entry] = {}
    O, M, MF = "mindspore.ops.", "mindspore.mint.", "mindspore.mint.nn.functional."
    for root in (O, M):
        t[root + "maximum"] = e("input, other", "Max(input, other)")
        t[root + "minimum"] = e("input, other", "Min(input, other)")
        t[root + "pow"] = e("input, exponent", "input ** exponent")
        t[root + "xlogy"] = e("input, other", rename(XLOGY, {"x": "input", "y": "other"}))
        for n, form in (("abs", "Abs(input)"), ("sqrt", "sqrt(input)"), ("exp", "exp(input)"), ("log", "log(input)"),
                        ("sign", "sign(input)"), ("floor", "floor(input)"), ("ceil", "ceiling(input)"),
                        ("trunc", "trunc(input)"), ("asin", "asin(input)"), ("acos", "acos(input)"),
                        ("acosh", "acosh(input)")):
            t[root + n] = e("input", form)
        t[root + "round"] = e("input, *, decimals=0", {"param": "decimals", 0: rename(ROUND, {"x": "input"})})
        t[root + "clamp"] = t[root + "clip"] = e("input, min=None, max=None", "Min(Max(input, min), max)")
        t[root + "where"] = h("condition, input, other", "where")
        t[root + "zeros_like"] = e("input, *, dtype=None", "0")
        t[root + "ones_like"] = e("input, *, dtype=None", "1")
        t[root + "full_like"] = e("input, fill_value, *, dtype=None", "fill_value")
    t[O + "sgn"] = e("input", "sign(input)")
    t[O + "fmax"] = e("input, other", "Max(input, other)")
    t[O + "fmin"] = e("input, other", "Min(input, other)")
    t[O + "bessel_i0e"] = e("x", I0E)
    t[O + "logit"] = h("input, eps=None", "logit")
    t[O + "masked_fill"] = h("input_x, mask, value", "masked_fill")
    # activations
    t[O + "relu"] = t[MF + "relu"] = e("input", "Max(input, 0)")
    t[O + "relu6"] = t[MF + "relu6"] = e("input", "Min(Max(input, 0), 6)")
    t[O + "hardtanh"] = t[MF + "hardtanh"] = e("input, min_val=-1.0, max_val=1.0", "Min(Max(input, min_val), max_val)")
    t[O + "leaky_relu"] = e("input, alpha=0.2", "Piecewise((input, input >= 0), (alpha * input, True))")
    t[MF + "leaky_relu"] = e("input, negative_slope=0.01",
                             "Piecewise((input, input >= 0), (negative_slope * input, True))")
    t[O + "elu"] = t[MF + "elu"] = e("input, alpha=1.0",
                                     "Piecewise((input, input > 0), (alpha * (exp(input) - 1), True))")
    t[O + "celu"] = e("x, alpha=1.0", "Max(0, x) + Min(0, alpha * (exp(x / alpha) - 1))")
    t[O + "selu"] = t[MF + "selu"] = e("input", rename(SELU, {"x": "input"}))
    t[O + "hardsigmoid"] = t[MF + "hardsigmoid"] = e("input", "Max(0, Min(1, (input + 3) / 6))")
    t[O + "hardswish"] = t[MF + "hardswish"] = e("input", "input * Max(0, Min(1, (input + 3) / 6))")
    t[O + "hardshrink"] = t[MF + "hardshrink"] = e("input, lambd=0.5",
                                                   "Piecewise((input, Abs(input) > lambd), (0, True))")
    t[O + "softshrink"] = t[MF + "softshrink"] = e(
        "input, lambd=0.5", "Piecewise((input - lambd, input > lambd), (input + lambd, input < -lambd), (0, True))")
    t[O + "threshold"] = e("input, thr, value", "Piecewise((input, input > thr), (value, True))")
    t[MF + "threshold"] = e("input, threshold, value", "Piecewise((input, input > threshold), (value, True))")
    # reductions and order statistics
    t[O + "amax"] = r("input, axis=None, keepdims=False, *, initial=None, where=None", "max")
    t[O + "amin"] = r("input, axis=None, keepdims=False, *, initial=None, where=None", "min")
    t[M + "amax"] = r("input, dim=(), keepdim=False", "max")
    t[M + "amin"] = r("input, dim=(), keepdim=False", "min")
    t[O + "sum"] = r("input, dim=None, keepdim=False, *, dtype=None", "sum")
    for n in ("max", "min"):
        t[M + n] = h("input, dim=None, keepdim=False", "torch_minmax", n)
    t[O + "sort"] = h("input_x, axis=-1, descending=False", "sort", "pair")
    t[O + "topk"] = h("input, k, dim=None, largest=True, sorted=True", "topk")
    # norms
    t[O + "norm"] = h("A, ord=None, dim=None, keepdim=False, *, dtype=None", "linalg_norm")
    t[M + "norm"] = h("input, p='fro', dim=None, keepdim=False, *, dtype=None", "torch_norm")
    t[M + "linalg.vector_norm"] = h("x, ord=2, dim=None, keepdim=False, *, dtype=None", "vector_norm")
    # the Tensor methods that refer to these functions
    T = "mindspore.Tensor."
    for n in ("abs", "sqrt", "exp", "log", "sign", "floor", "ceil", "trunc", "maximum", "minimum", "clamp", "clip"):
        t[T + n] = t[O + n]
    t[T + "logit"] = t[O + "logit"]
    t[T + "masked_fill"] = h("self, mask, value", "masked_fill")
    t[T + "norm"] = h("self, ord=None, dim=None, keepdim=False, *, dtype=None", "linalg_norm")
    t[T + "reshape"] = h("self, *shape", "reshape")
    return t
