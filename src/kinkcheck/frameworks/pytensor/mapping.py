"""PyTensor's rows of the sympy mapping (:data:`kinkcheck.oracles.mapping.TABLE`). ``pytensor.tensor`` names its
functions after NumPy's, with NumPy's arguments, so ``jax.numpy``'s rows describe them (:data:`CLONES`); the rows here
are its functions NumPy lacks, from PyTensor's docs (pytensor.readthedocs.io, library/tensor/basic; the docstrings of
``pytensor/tensor/math.py``, ``basic.py``, ``special.py``, ``variable.py``): ``switch(cond, ift, iff)`` ("if cond then
ift else iff"), ``eq(a, b)``, ``sqr(a)``, ``softplus``/``log1pexp(x)`` ("log(1 + exp(x))"), ``round_half_to_even`` and
``round_half_away_from_zero``, ``logsumexp(x, axis=None, keepdims=False)``, ``special.logit(x)``,
``special.xlogy(x, y)``; and the methods of a ``TensorVariable`` (:data:`METHODS`): ``reshape(shape, *, ndim=None)``,
``max``/``min(axis=None, keepdims=False)``, ``sum(axis=None, dtype=None, keepdims=False, acc_dtype=None)``,
``clip(a_min, a_max)``, ``std(axis=None, ddof=0, keepdims=False, corrected=False)``. Text only: imports nothing of
pytensor."""

from __future__ import annotations

from kinkcheck.oracles.rows import ROUND, SOFTPLUS, XLOGY, Entry, e, h, r, rename

#: Prefix → the namespace whose rows describe it (:data:`kinkcheck.oracles.mapping.NUMPY_CLONES`), the longer first; a
#: name this folder's rows give (``pytensor.tensor.switch``) reads its own row.
CLONES = {"pytensor.tensor.math.": "jax.numpy.", "pytensor.tensor.": "jax.numpy."}

#: ``x.clip(0, 1)`` reads the row ``pytensor.tensor.variable.TensorVariable.clip``.
METHODS = {"pytensor": "pytensor.tensor.variable.TensorVariable"}


def table() -> dict[str, Entry]:
    P, V = "pytensor.tensor.", "pytensor.tensor.variable.TensorVariable."
    t: dict[str, Entry] = {
        P + "switch": h("cond, ift, iff", "where"),
        P + "eq": e("a, b", "Eq(a, b)"),
        P + "sqr": e("a", "a ** 2"),
        P + "softplus": e("x", SOFTPLUS),
        P + "log1pexp": e("x", SOFTPLUS),
        P + "round_half_to_even": e("a", rename(ROUND, {"x": "a"})),
        P + "round_half_away_from_zero": e("a", "sign(a) * floor(Abs(a) + 0.5)"),
        P + "special.logit": e("x", "log(x / (1 - x))"),
        P + "special.xlogy": e("x, y", XLOGY),
    }
    t[P + "logsumexp"] = t[P + "math.logsumexp"] = r("x, axis=None, keepdims=False", "logsumexp")
    t[V + "reshape"] = h("self, shape, *, ndim=None", "reshape")
    t[V + "max"] = r("self, axis=None, keepdims=False", "max")
    t[V + "min"] = r("self, axis=None, keepdims=False", "min")
    t[V + "sum"] = r("self, axis=None, dtype=None, keepdims=False, acc_dtype=None", "sum")
    t[V + "clip"] = e("self, a_min, a_max", "Min(Max(self, a_min), a_max)")
    t[V + "std"] = h("self, axis=None, ddof=0, keepdims=False, corrected=False", "std", "std")
    return t
