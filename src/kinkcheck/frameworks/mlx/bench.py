"""MLX's hand-written baseline for ``python -m kinkcheck.dev.bench`` (:func:`kinkcheck.dev.bench.hand_written_loop`)."""

IMPORT = "import mlx.core, mlx.nn"

HEAD = """import numpy as np, mlx.core, mlx.nn
X, W1, W2, T = {net}
def grad(f, at, dtype):
    try:
        xs = [mlx.core.array(np.asarray(v, dtype=np.float64)).astype(dtype) for v in at]
        gs = mlx.core.grad(lambda *a: f(*a).sum(), argnums=list(range(len(xs))))(*xs)
        mlx.core.eval(gs)
        return gs
    except Exception as e:
        return e
def net(f, dtype):
    try:
        x, t = (mlx.core.array(np.asarray(v, dtype=np.float64)).astype(dtype) for v in (X, T))
        loss = lambda w1, w2: ((f(x @ w1) @ w2 - t) ** 2).sum()
        ws = [mlx.core.array(np.asarray(v, dtype=np.float64)).astype(dtype) for v in (W1, W2)]
        gs = mlx.core.grad(loss, argnums=[0, 1])(*ws)
        mlx.core.eval(gs)
        return gs
    except Exception as e:
        return e
mlx.core.set_default_device(mlx.core.cpu)
for dtype in (mlx.core.float64, mlx.core.float32):
"""
