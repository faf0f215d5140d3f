"""MLX's rows of the sympy mapping (:data:`kinkcheck.oracles.mapping.TABLE`). ``mlx.core`` follows NumPy's names and
positional arguments (round half to even, the median of an even length the mean: ``python/src/ops.cpp`` docstrings), so
``jax.numpy``'s rows describe it (:data:`CLONES`). The rows here are ``mlx.nn``'s activations, by the formulas of their
docstrings (ml-explore.github.io/mlx/build/html/python/nn/functional; ``python/mlx/nn/layers/activations.py``): ``relu``
("Simply mx.maximum(x, 0)"), ``relu6``, ``hard_tanh(x, min_val=-1.0, max_val=1.0)``, ``elu(x, alpha=1.0)`` ("mx.where(x
> 0, x, alpha * (mx.exp(x) - 1))"), ``celu(x, alpha=1.0)``, ``hardswish``, ``hard_shrink``/``softshrink(x, lambd=0.5)``,
``step(x, threshold=0.0)`` (1 where x >= threshold), ``softplus``, ``prelu(x, alpha)`` (``max(0, x) + alpha * min(0,
x)``); and the ``mlx.core.array`` methods whose docs read "See :func:`<name>`" (:data:`METHODS`): ``reshape(*shape)``,
``sum``/``min``/``logsumexp(axis=None, keepdims=False)``, ``abs``, ``sqrt``, ``round(decimals=0)``.

Not mapped: ``mlx.nn.leaky_relu(x, negative_slope=0.01)``, documented as "mx.maximum(negative_slope * x, x)": for a
slope above 1 that is ``negative_slope * x`` where x > 0, not the leaky ReLU of the catalog's ``leaky_relu1.5@0`` (its
mlx programs compute another function there); ``mlx.nn.selu`` (its docs give lambda = 1.0507 and alpha = 1.67326, five
digits: not the catalog case's function), ``array.max`` (tests/frameworks/test_framework_mlx.py pins it as unmapped). Text only:
imports nothing of mlx."""

from __future__ import annotations

from kinkcheck.oracles.rows import HARDSIGMOID, RELU6, ROUND, SOFTPLUS, Entry, e, h, r, rename

#: Prefix → the namespace whose rows describe it (:data:`kinkcheck.oracles.mapping.NUMPY_CLONES`).
CLONES = {"mlx.core.": "jax.numpy."}

#: ``v.sum()`` reads the row ``mlx.core.array.sum`` (:data:`kinkcheck.oracles.mapping.METHOD_PREFIXES`).
METHODS = {"mlx": "mlx.core.array"}


def table() -> dict[str, Entry]:
    N, A = "mlx.nn.", "mlx.core.array."
    t: dict[str, Entry] = {
        N + "relu": e("x", "Max(x, 0)"),
        N + "relu6": e("x", RELU6),
        N + "hard_tanh": e("x, min_val=-1.0, max_val=1.0", "Min(Max(x, min_val), max_val)"),
        N + "elu": e("x, alpha=1.0", "Piecewise((x, x > 0), (alpha * (exp(x) - 1), True))"),
        N + "celu": e("x, alpha=1.0", "Max(0, x) + Min(0, alpha * (exp(x / alpha) - 1))"),
        N + "hardswish": e("x", "x * " + HARDSIGMOID),
        N + "hard_shrink": e("x, lambd=0.5", "Piecewise((x, Abs(x) > lambd), (0, True))"),
        N + "softshrink": e("x, lambd=0.5", "Piecewise((x - lambd, x > lambd), (x + lambd, x < -lambd), (0, True))"),
        N + "step": e("x, threshold=0.0", "Piecewise((1, x >= threshold), (0, True))"),
        N + "softplus": e("x", SOFTPLUS),
        N + "prelu": e("x, alpha", "Max(0, x) + alpha * Min(0, x)"),
    }
    t[A + "reshape"] = h("self, *shape, stream=None", "reshape")
    for n in ("sum", "min", "logsumexp"):
        t[A + n] = r("self, axis=None, keepdims=False, *, stream=None", n)
    t[A + "abs"] = e("self, *, stream=None", "Abs(self)")
    t[A + "sqrt"] = e("self, *, stream=None", "sqrt(self)")
    t[A + "round"] = e("self, decimals=0, *, stream=None", {"param": "decimals", 0: rename(ROUND, {"x": "self"})})
    return t
