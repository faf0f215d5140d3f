"""tinygrad's hand-written baseline for ``python -m kinkcheck.dev.bench`` (:func:`kinkcheck.dev.bench.hand_written_loop`)."""

IMPORT = "import tinygrad"

HEAD = """import os, shutil
import numpy as np, tinygrad
from tinygrad import Tensor, dtypes
if shutil.which("clang") is None:  # its CPU device compiles with clang; the pure-Python device otherwise
    try:
        tinygrad.Device.DEFAULT = "PYTHON"
    except AttributeError:
        from tinygrad.helpers import DEV
        DEV.value = "PYTHON"
X, W1, W2, T = {net}
def leaf(v, dtype):  # a flat buffer reshaped: tinygrad folds a 0-d tensor into a constant without a gradient
    t = Tensor(np.asarray(v, dtype=np.float64).reshape(-1).astype(dtype))
    t.requires_grad = True
    return t, t.reshape(np.shape(v))
def grad(f, at, dtype):
    try:
        pairs = [leaf(v, dtype) for v in at]
        f(*[x for _, x in pairs]).sum().backward()
        return [t.grad.numpy() for t, _ in pairs]
    except Exception as e:
        return e
def net(f, dtype):
    try:
        (w1, a), (w2, b) = leaf(W1, dtype), leaf(W2, dtype)
        x, t = (Tensor(np.asarray(v, dtype=dtype)) for v in (X, T))
        ((f(x @ a) @ b - t) ** 2).sum().backward()
        return w1.grad.numpy(), w2.grad.numpy()
    except Exception as e:
        return e
for dtype in (np.float64, np.float32):
"""
