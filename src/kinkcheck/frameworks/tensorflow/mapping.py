"""TensorFlow's rows of the sympy mapping (:data:`kinkcheck.oracles.mapping.TABLE`): what each of its functions
computes, as a form over its parameters (:class:`kinkcheck.oracles.rows.Entry`). Text only: imports nothing of
tensorflow."""

from __future__ import annotations

from kinkcheck.oracles.rows import I0E, Entry, e

#: ``tf.experimental.numpy`` follows NumPy's names and arguments, so ``jax.numpy``'s rows describe it
#: (:data:`kinkcheck.oracles.mapping.NUMPY_CLONES`).
CLONES = {"tensorflow.experimental.numpy.": "jax.numpy."}


def table() -> dict[str, Entry]:
    """TensorFlow's elementwise kinked functions (``tf.math`` API docs; ``tf.maximum`` is ``tf.math.maximum``).
    Its NumPy namespace, ``tf.experimental.numpy``, reads ``jax.numpy``'s rows (:data:`CLONES`)."""
    t: dict[str, Entry] = {}
    for root in ("tensorflow.", "tensorflow.math."):
        t[root + "maximum"] = e("x, y, name=None", "Max(x, y)")
        t[root + "minimum"] = e("x, y, name=None", "Min(x, y)")
        t[root + "abs"] = e("x, name=None", "Abs(x)")
        t[root + "sign"] = e("x, name=None", "sign(x)")
        t[root + "sqrt"] = e("x, name=None", "sqrt(x)")
    t["tensorflow.math.bessel_i0e"] = e("x, name=None", I0E)
    t["tensorflow.nn.relu"] = e("features, name=None", "Max(features, 0)")
    t["tensorflow.nn.relu6"] = e("features, name=None", "Min(Max(features, 0), 6)")
    t["tensorflow.clip_by_value"] = e("t, clip_value_min, clip_value_max, name=None",
                                       "Min(Max(t, clip_value_min), clip_value_max)")
    return t
