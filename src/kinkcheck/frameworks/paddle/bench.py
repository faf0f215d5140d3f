"""PaddlePaddle's hand-written baseline for ``python -m kinkcheck.dev.bench`` (:func:`kinkcheck.dev.bench.hand_written_loop`)."""

IMPORT = "import paddle"

HEAD = """import numpy as np, paddle
X, W1, W2, T = {net}
def grad(f, at, dtype):
    try:
        xs = [paddle.to_tensor(np.asarray(v, dtype=np.float64), dtype=dtype, stop_gradient=False) for v in at]
        y = f(*xs)
        return paddle.grad([y], xs, grad_outputs=[paddle.ones_like(y)], allow_unused=True)
    except Exception as e:
        return e
def net(f, dtype):
    try:
        w1, w2 = (paddle.to_tensor(np.asarray(v, dtype=np.float64), dtype=dtype, stop_gradient=False) for v in (W1, W2))
        x, t = (paddle.to_tensor(np.asarray(v, dtype=np.float64), dtype=dtype) for v in (X, T))
        loss = ((f(x @ w1) @ w2 - t) ** 2).sum()
        return paddle.grad([loss], [w1, w2])
    except Exception as e:
        return e
for dtype in ("float64", "float32"):
"""
