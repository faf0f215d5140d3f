"""TensorFlow's rows of the sympy mapping (:data:`kinkcheck.oracles.mapping.TABLE`): what each of its functions
computes, as a form over its parameters (:class:`kinkcheck.oracles.rows.Entry`), from the API docs
(tensorflow.org/api_docs/python/tf; the docstrings of ``tensorflow/python/ops``): ``tf.math``'s elementwise functions
(``tf.math.round`` and ``tf.math.rint`` round half to even; ``tf.math.xlogy`` "returns 0 if x == 0, and x * log(y)
otherwise"; ``tf.math.floormod`` takes the sign of the divisor; ``tf.math.atan2(y, x)``), ``tf.nn``'s activations
(``leaky_relu(features, alpha=0.2)``, ``elu`` with alpha 1, ``selu`` with SELU's constants, ``softplus`` as
``log(exp(features) + 1)``), the reductions ``tf.reduce_max``/``min``/``sum``/``mean``/``logsumexp(input_tensor,
axis=None, keepdims=False)`` (every element when axis is None), ``tf.math.reduce_euclidean_norm``, ``tf.norm(tensor,
ord='euclidean', axis=None, keepdims=None)`` ("If axis is None (the default), the input is considered a vector";
'euclidean' is the 2-norm of a vector and the Frobenius norm of a matrix), ``tf.sort(values, axis=-1,
direction='ASCENDING')`` (values only), ``tf.math.top_k(input, k=1, sorted=True)`` (a ``(values, indices)`` pair
along the last axis), ``tf.where(condition, x, y)``, ``tf.reshape``, ``tf.stack``, ``tf.broadcast_to``. Its NumPy
namespace, ``tf.experimental.numpy``, reads ``jax.numpy``'s rows (:data:`CLONES`). ``top_k``'s ``index_type`` default
(``tf.int32``, not a literal) is written None: an output dtype, no part of the values.

Not mapped: ``tf.math.reduce_std`` (the population deviation, which the ``std`` handler does not default to),
``tf.nn.l2_loss``, ``tf.argmax``/``argmin`` (no tie rule in the docs). Text only: imports nothing of tensorflow."""

from __future__ import annotations

from kinkcheck.oracles.rows import I0E, ROUND, SELU, XLOG1PY, XLOGY, Entry, e, h, r, rename

#: ``tf.experimental.numpy`` follows NumPy's names and arguments, so ``jax.numpy``'s rows describe it
#: (:data:`kinkcheck.oracles.mapping.NUMPY_CLONES`).
CLONES = {"tensorflow.experimental.numpy.": "jax.numpy."}


def table() -> dict[str, Entry]:
    """TensorFlow's rows; ``tf.maximum`` is ``tf.math.maximum`` (and so on for every name exported at both)."""
    t: dict[str, Entry] = {}
    for root in ("tensorflow.", "tensorflow.math."):
        t[root + "maximum"] = e("x, y, name=None", "Max(x, y)")
        t[root + "minimum"] = e("x, y, name=None", "Min(x, y)")
        t[root + "pow"] = e("x, y, name=None", "x ** y")
        for n, form in (("abs", "Abs(x)"), ("sign", "sign(x)"), ("sqrt", "sqrt(x)"), ("exp", "exp(x)"),
                        ("square", "x ** 2"), ("floor", "floor(x)"), ("round", ROUND), ("tanh", "tanh(x)")):
            t[root + n] = e("x, name=None", form)
        t[root + "reduce_max"] = r("input_tensor, axis=None, keepdims=False, name=None", "max")
        t[root + "reduce_min"] = r("input_tensor, axis=None, keepdims=False, name=None", "min")
        t[root + "reduce_sum"] = r("input_tensor, axis=None, keepdims=False, name=None", "sum")
        t[root + "reduce_mean"] = r("input_tensor, axis=None, keepdims=False, name=None", "mean")
        t[root + "reduce_logsumexp"] = r("input_tensor, axis=None, keepdims=False, name=None", "logsumexp")
    M = "tensorflow.math."
    for n, form in (("log", "log(x)"), ("expm1", "exp(x) - 1"), ("log1p", "log(1 + x)"), ("ceil", "ceiling(x)"),
                    ("rint", ROUND), ("asin", "asin(x)"), ("acos", "acos(x)"), ("acosh", "acosh(x)")):
        t[M + n] = e("x, name=None", form)
    t[M + "atan2"] = e("y, x, name=None", "atan2(y, x)")
    t[M + "floormod"] = t[M + "mod"] = e("x, y, name=None", "x - y * floor(x / y)")
    t[M + "floordiv"] = e("x, y, name=None", "floor(x / y)")
    t["tensorflow.truncatemod"] = e("x, y, name=None",
                                    "x - y * Piecewise((floor(x / y), x / y >= 0), (ceiling(x / y), True))")
    t[M + "xlogy"] = e("x, y, name=None", XLOGY)
    t[M + "xlog1py"] = e("x, y, name=None", XLOG1PY)
    t[M + "bessel_i0e"] = e("x, name=None", I0E)
    t[M + "reduce_euclidean_norm"] = h("input_tensor, axis=None, keepdims=False, name=None", "vector_norm")
    t[M + "top_k"] = t["tensorflow.nn.top_k"] = h("input, k=1, sorted=True, index_type=None, name=None", "topk")
    t[M + "softplus"] = t["tensorflow.nn.softplus"] = e("features, name=None", "log(exp(features) + 1)")
    t["tensorflow.nn.relu"] = e("features, name=None", "Max(features, 0)")
    t["tensorflow.nn.relu6"] = e("features, name=None", "Min(Max(features, 0), 6)")
    t["tensorflow.nn.leaky_relu"] = e("features, alpha=0.2, name=None",
                                      "Piecewise((features, features > 0), (alpha * features, True))")
    t["tensorflow.nn.elu"] = e("features, name=None", "Piecewise((features, features > 0), (exp(features) - 1, True))")
    t["tensorflow.nn.selu"] = e("features, name=None", rename(SELU, {"x": "features"}))
    t["tensorflow.clip_by_value"] = e("t, clip_value_min, clip_value_max, name=None",
                                       "Min(Max(t, clip_value_min), clip_value_max)")
    t["tensorflow.where"] = h("condition, x=None, y=None, name=None", "where")
    t["tensorflow.zeros_like"] = e("input, dtype=None, name=None, layout=None", "0")
    t["tensorflow.ones_like"] = e("input, dtype=None, name=None, layout=None", "1")
    t["tensorflow.norm"] = t["tensorflow.linalg.norm"] = h(
        "tensor, ord='euclidean', axis=None, keepdims=None, name=None", "axis_norm")
    t["tensorflow.sort"] = h("values, axis=-1, direction='ASCENDING', name=None", "sort", "array")
    t["tensorflow.reshape"] = h("tensor, shape, name=None", "reshape")
    t["tensorflow.broadcast_to"] = h("input, shape, name=None", "broadcast")
    t["tensorflow.stack"] = h("values, axis=0, name='stack'", "stack")
    return t
