"""HIPS autograd's hand-written baseline for ``python -m kinkcheck.dev.bench`` (:func:`kinkcheck.dev.bench.hand_written_loop`)."""

IMPORT = "import autograd.numpy"

HEAD = """import autograd, autograd.numpy
import numpy as np
X, W1, W2, T = {net}
def grad(f, at, dtype):
    xs = [np.asarray(v, dtype=dtype) for v in at]
    try:
        return [autograd.grad(lambda *a: autograd.numpy.sum(f(*a)), i)(*xs) for i in range(len(xs))]
    except Exception as e:
        return e
def net(f, dtype):
    x, t = np.asarray(X, dtype=dtype), np.asarray(T, dtype=dtype)
    loss = lambda w1, w2: autograd.numpy.sum((f(x @ w1) @ w2 - t) ** 2)
    try:
        return [autograd.grad(loss, i)(np.asarray(W1, dtype=dtype), np.asarray(W2, dtype=dtype)) for i in (0, 1)]
    except Exception as e:
        return e
for dtype in (np.float64, np.float32):
"""
