"""kinkcheck: which gradient does each autodiff framework return at a kink, and is it a valid one?

Measures nine autodiff frameworks (PyTorch, JAX, TensorFlow, PaddlePaddle, MLX, tinygrad, autograd, PyTensor
and more in the registry) at kinks, ties and jumps, across releases, modes, dtypes and devices; judges every value
against a sympy oracle (one-sided derivatives, Clarke generalized gradient, minimum-norm element) and a pure-NumPy
manual-backprop oracle; and publishes the report. Its values, from Python::

    >>> import kinkcheck
    >>> print(kinkcheck.lookup("torch.clamp(x, min=0)", case="relu@0", release="2.14.1"))
    torch 2.14.1 cpu reverse float64  relu@0  torch.clamp(x, min=0): 0 (left)
"""

__version__ = "0.1.0"
__all__ = ["LookupFailed", "__version__", "lookup", "search"]


def __getattr__(name: str) -> object:
    """``kinkcheck.lookup``, ``kinkcheck.search`` and ``kinkcheck.LookupFailed`` (:mod:`kinkcheck.report.query`), imported
    on first use: ``import kinkcheck`` needs nothing beyond the standard library (the noxfile imports the
    registry under nox's own Python)."""
    if name in ("lookup", "search", "LookupFailed"):
        from kinkcheck.report import query  # slow: msgspec

        return getattr(query, name)
    raise AttributeError(f"module 'kinkcheck' has no attribute {name!r}")
