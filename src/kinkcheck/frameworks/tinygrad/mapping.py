"""tinygrad's rows of the sympy mapping (:data:`kinkcheck.oracles.mapping.TABLE`): its ``Tensor`` methods, each a row
``tinygrad.Tensor.<method>`` that a method call (``x.clip(0)``) and the unbound spelling (``tinygrad.Tensor.clip(x,
0)``) both read (:data:`METHODS`). Signatures and semantics are tinygrad's own docstrings (docs.tinygrad.org/tensor/;
``tinygrad/mixin/elementwise.py``, ``reduce.py``, ``op.py``, ``movement.py`` of tinygrad 0.14), not torch's methods of
the same names: ``clip(min_=None, max_=None)`` ("If min_ is None, there is no lower bound"), ``hardtanh(min_val=-1,
max_val=1)``, ``leaky_relu(neg_slope=0.01)`` (``(self < 0).where(neg_slope*self, self)``), ``elu(alpha=1.0)`` (``relu(x)
- alpha*relu(1 - exp(x))``), ``celu(alpha=1.0)``, ``hardsigmoid(alpha=1/6, beta=0.5)``, ``softplus(beta=1.0)`` (no
threshold), ``round()`` ("rounding half to even"), ``where(x, y)`` on the condition (``output_i = x_i if self_i else
y_i``), ``sum``/``max``/``min``/``mean``/``logsumexp(axis=None, keepdim=False)``, ``std(axis, keepdim, correction=1)``,
``sort(dim=-1, descending=False)`` and ``topk(k, dim=-1, largest=True, sorted_=True)`` returning ``(values, indices)``,
``reshape(shape, *args)``, ``stack(self, *args, dim=0)``.

Not mapped: ``selu``, whose defaults are ``alpha=1.67326, gamma=1.0507`` (five digits, not SELU's constants: the catalog
case's function differs), ``copysign`` (reads the sign bit of -0.0), ``argmax``/``argmin`` (no tie rule in the
docstring). Text only: imports nothing of tinygrad."""

from __future__ import annotations

from kinkcheck.oracles.rows import RELU6, ROUND, Entry, e, h, r, rename

#: ``x.clip(0)`` reads the row ``tinygrad.Tensor.clip`` (:data:`kinkcheck.oracles.mapping.METHOD_PREFIXES`).
METHODS = {"tinygrad": "tinygrad.Tensor"}

T = "tinygrad.Tensor."

#: Methods of one tensor (no arguments besides ``self``): name → form over ``self``.
_UNARY = {
    "abs": "Abs(self)", "sign": "sign(self)", "neg": "-self", "sqrt": "sqrt(self)", "rsqrt": "1 / sqrt(self)",
    "square": "self ** 2", "reciprocal": "1 / self", "exp": "exp(self)", "exp2": "2 ** self", "log": "log(self)",
    "log2": "log(self) / log(2)", "log10": "log(self) / log(10)", "trunc": "trunc(self)", "floor": "floor(self)",
    "ceil": "ceiling(self)", "round": rename(ROUND, {"x": "self"}), "relu": "Max(self, 0)",
    "relu6": rename(RELU6, {"x": "self"}), "hardswish": "self * Min(Max(self + 3, 0), 6) / 6",
    "sigmoid": "1 / (1 + exp(-self))", "tanh": "tanh(self)", "sin": "sin(self)", "cos": "cos(self)",
    "tan": "tan(self)", "asin": "asin(self)", "acos": "acos(self)", "atan": "atan(self)", "sinh": "sinh(self)",
    "cosh": "cosh(self)", "asinh": "asinh(self)", "acosh": "acosh(self)", "atanh": "atanh(self)",
    "softsign": "self / (1 + Abs(self))", "logsigmoid": "-log(1 + exp(-self))",
}


def table() -> dict[str, Entry]:
    t: dict[str, Entry] = {T + n: e("self", form) for n, form in _UNARY.items()}
    t[T + "maximum"] = e("self, x", "Max(self, x)")
    t[T + "minimum"] = e("self, x", "Min(self, x)")
    t[T + "pow"] = e("self, x, reverse=False", {"param": "reverse", False: "self ** x", True: "x ** self"})
    t[T + "clip"] = t[T + "clamp"] = e("self, min_=None, max_=None", "Min(Max(self, min_), max_)")
    t[T + "hardtanh"] = e("self, min_val=-1, max_val=1", "Min(Max(self, min_val), max_val)")
    t[T + "leaky_relu"] = e("self, neg_slope=0.01", "Piecewise((neg_slope * self, self < 0), (self, True))")
    t[T + "elu"] = e("self, alpha=1.0", "Max(self, 0) - alpha * Max(1 - exp(self), 0)")
    t[T + "celu"] = e("self, alpha=1.0", "Max(self, 0) + Min(alpha * (exp(self / alpha) - 1), 0)")
    t[T + "hardsigmoid"] = e("self, alpha=0.16666666666666666, beta=0.5", "Min(Max(alpha * self + beta, 0), 1)")
    t[T + "softplus"] = e("self, beta=1.0", "log(1 + exp(beta * self)) / beta")
    t[T + "where"] = h("self, x, y", "where")
    t[T + "zeros_like"] = e("self, *, dtype=None, device=None", "0")
    t[T + "ones_like"] = e("self, *, dtype=None, device=None", "1")
    t[T + "sum"] = r("self, axis=None, keepdim=False, dtype=None", "sum")
    for n in ("max", "min", "mean", "logsumexp"):
        t[T + n] = r("self, axis=None, keepdim=False", n)
    t[T + "std"] = h("self, axis=None, keepdim=False, correction=1", "std", "std")
    t[T + "sort"] = h("self, dim=-1, descending=False", "sort", "pair")
    t[T + "topk"] = h("self, k, dim=-1, largest=True, sorted_=True", "topk")
    t[T + "reshape"] = h("self, *shape", "reshape")
    t[T + "stack"] = h("self, *args, dim=0", "stack")
    return t
