"""The fake framework's hand-written baseline for ``python -m kinkcheck.dev.bench``: each input's tangent seeded in turn."""

IMPORT = "import fakefw"

HEAD = """import fakefw
X, W1, W2, T = {net}
def grad(f, at, dtype):
    try:
        return [f(*[fakefw.Dual(v, float(i == j)) for j, v in enumerate(at)]).tangent for i in range(len(at))]
    except Exception as e:
        return e
def net(f, dtype):
    return None  # fakefw has no matrix product
for dtype in ("float64",):
"""
