"""TensorFlow's hand-written baseline for ``python -m kinkcheck.dev.bench`` (:func:`kinkcheck.dev.bench.hand_written_loop`)."""

IMPORT = "import tensorflow"

HEAD = """import tensorflow
import tensorflow as tf
X, W1, W2, T = {net}
def grad(f, at, dtype):
    xs = [tf.constant(v, dtype=dtype) for v in at]
    try:
        with tf.GradientTape() as tape:
            tape.watch(xs)
            y = f(*xs)
        return tape.gradient(y, xs, output_gradients=tf.ones_like(y))
    except Exception as e:
        return e
def net(f, dtype):
    w1, w2 = tf.constant(W1, dtype=dtype), tf.constant(W2, dtype=dtype)
    try:
        with tf.GradientTape() as tape:
            tape.watch([w1, w2])
            loss = tf.reduce_sum((f(tf.constant(X, dtype=dtype) @ w1) @ w2 - tf.constant(T, dtype=dtype)) ** 2)
        return tape.gradient(loss, [w1, w2])
    except Exception as e:
        return e
for dtype in (tf.float64, tf.float32):
"""
