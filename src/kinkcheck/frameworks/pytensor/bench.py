"""PyTensor's hand-written baseline for ``python -m kinkcheck.dev.bench`` (:func:`kinkcheck.dev.bench.hand_written_loop`)."""

IMPORT = "import pytensor.tensor"

HEAD = """import numpy as np, pytensor, pytensor.tensor
from pytensor.compile.mode import Mode
MODE = Mode(linker="py", optimizer="fast_compile")  # what kinkcheck's reverse mode compiles with
X, W1, W2, T = {net}
def grad(f, at, dtype):
    try:
        xs = [pytensor.tensor.tensor(dtype=dtype, shape=np.shape(v)) for v in at]
        gs = pytensor.grad(f(*xs).sum(), xs)
        return pytensor.function(xs, gs, mode=MODE, on_unused_input="ignore")(*[np.asarray(v, dtype=dtype) for v in at])
    except Exception as e:
        return e
def net(f, dtype):
    try:
        w1, w2 = pytensor.tensor.matrix(dtype=dtype), pytensor.tensor.matrix(dtype=dtype)
        loss = ((f(np.asarray(X, dtype=dtype) @ w1) @ w2 - np.asarray(T, dtype=dtype)) ** 2).sum()
        fn = pytensor.function([w1, w2], pytensor.grad(loss, [w1, w2]), mode=MODE)
        return fn(np.asarray(W1, dtype=dtype), np.asarray(W2, dtype=dtype))
    except Exception as e:
        return e
for dtype in ("float64", "float32"):
"""
