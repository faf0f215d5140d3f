"""MindSpore's hand-written baseline for ``python -m kinkcheck.dev.bench`` (:func:`kinkcheck.dev.bench.hand_written_loop`)."""

IMPORT = "import mindspore, mindspore.ops"

HEAD = """import numpy as np, mindspore, mindspore.ops
X, W1, W2, T = {net}
def grad(f, at, dtype):
    try:
        xs = [mindspore.Tensor(np.asarray(v, dtype=np.float64), dtype=dtype) for v in at]
        return mindspore.grad(lambda *a: f(*a).sum(), grad_position=tuple(range(len(xs))))(*xs)
    except Exception as e:
        return e
def net(f, dtype):
    try:
        x, t = (mindspore.Tensor(np.asarray(v, dtype=np.float64), dtype=dtype) for v in (X, T))
        ws = [mindspore.Tensor(np.asarray(v, dtype=np.float64), dtype=dtype) for v in (W1, W2)]
        return mindspore.grad(lambda w1, w2: ((f(x @ w1) @ w2 - t) ** 2).sum(), grad_position=(0, 1))(*ws)
    except Exception as e:
        return e
for dtype in (mindspore.float64, mindspore.float32):
"""
