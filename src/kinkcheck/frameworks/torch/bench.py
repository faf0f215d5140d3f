"""PyTorch's hand-written baseline for ``python -m kinkcheck.dev.bench`` (:func:`kinkcheck.dev.bench.hand_written_loop`)."""

IMPORT = "import torch"

HEAD = """import torch
X, W1, W2, T = {net}
def grad(f, at, dtype):
    xs = [torch.tensor(v, dtype=dtype, requires_grad=True) for v in at]
    try:
        y = f(*xs)
        y.backward(torch.ones_like(y))
        return [x.grad for x in xs]
    except Exception as e:
        return e
def net(f, dtype):
    w1 = torch.tensor(W1, dtype=dtype, requires_grad=True)
    w2 = torch.tensor(W2, dtype=dtype, requires_grad=True)
    try:
        loss = ((f(torch.tensor(X, dtype=dtype) @ w1) @ w2 - torch.tensor(T, dtype=dtype)) ** 2).sum()
        loss.backward()
        return w1.grad, w2.grad
    except Exception as e:
        return e
for dtype in (torch.float64, torch.float32):
"""
