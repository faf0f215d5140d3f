"""TensorFlow's registry record: standard library only (:func:`kinkcheck.registry.read_record`)."""

from __future__ import annotations

from kinkcheck.registry import Framework


RULE = (
    "no framework-wide rule; documented in the gradient code: tf.nn.relu'(0) = 0 and tf.nn.relu6'(0) = "
    "relu6'(6) = 0 (ReluGrad: \"When the activation is exactly zero, we do not propagate the associated "
    "gradient value\"; Relu6Grad, at zero or six: \"we arbitrarily choose to not propagate\" it); "
    "tf.maximum/tf.minimum give a tie to the first argument (grad * (x >= y) to x for Maximum, grad * (x <= y) "
    "for Minimum), so tf.clip_by_value, a minimum then a maximum, passes the gradient at both bounds; the "
    "reductions tf.reduce_max/tf.reduce_min divide it among tied entries; elsewhere at a kink the value is left "
    "open",
    "tensorflow/core/kernels/relu_op_functor.h (ReluGrad, Relu6Grad); tensorflow/python/ops/math_grad.py "
    "(_MaximumGrad, _MinimumGrad via _MaximumMinimumGrad; _MinOrMaxGrad); tensorflow/python/ops/clip_ops.py "
    "(clip_by_value)",
)
# tnp.maximum(x, 0) and tnp.clip(x, 0, None) are tf.nn.relu (a fast path in numpy_ops/np_math_ops.py maximum),
# so tnp.maximum and tnp.clip are not "first"; tnp.minimum is math_ops.minimum.
DOCUMENTED = {
    **dict.fromkeys(("tensorflow.nn.relu", "tensorflow.nn.relu6"), "zero"),
    **dict.fromkeys(("tensorflow.reduce_max", "tensorflow.reduce_min", "tensorflow.math.reduce_max",
                     "tensorflow.math.reduce_min"), "even"),
    **dict.fromkeys(("tensorflow.maximum", "tensorflow.minimum", "tensorflow.math.maximum", "tensorflow.math.minimum",
                     "tensorflow.clip_by_value", "tensorflow.experimental.numpy.minimum"), "first"),
}


RECORD = Framework(
    "tensorflow", "TensorFlow", "tensorflow-cpu", "kinkcheck.frameworks.tensorflow",
    ("reverse", "forward", "graph", "jit", "second-order"), ("^", "#ff7f0e"),
    aliases={"tf": "tensorflow", "tnp": "tensorflow.experimental.numpy"},
    # the newest patch of every minor line with a cp311 wheel (checked 2026-12-01, pip index versions)
    # tensorflow-cpu pins its own numpy (< 2 before 2.18), protobuf and ml_dtypes; uv resolves them beside
    # kinkcheck's for every release of the matrix
    requirements=lambda v: [f"tensorflow-cpu=={v}"],
    # cp312 from 2.16, cp313 from 2.20; none has cp314
    max_python={**dict.fromkeys(("2.12.1", "2.13.1", "2.14.1", "2.15.1"), (3, 11)),
                **dict.fromkeys(("2.16.2", "2.17.1", "2.18.1", "2.19.1"), (3, 12)),
                "2.20.0": (3, 13), "2.21.0": (3, 13)},
    tested="2.21.0", rule=RULE, documented=DOCUMENTED,
    # tnp: array functions under a refused word (experimental), kinkcheck.language.expr.exempt_prefixes
    exempt=(("tensorflow", "experimental", "numpy"),),
)
