"""MindSpore's rows of the sympy mapping (:data:`kinkcheck.oracles.mapping.TABLE`): its elementwise kinked functions,
from its API docs (``mindspore.ops.clamp(input, min, max)``, ``maximum``/``minimum``, ``abs``, ``sqrt``, ``relu``);
``mindspore.numpy`` reads ``jax.numpy``'s rows (:data:`kinkcheck.oracles.mapping.NUMPY_CLONES`). Text only: imports
nothing of mindspore."""

from __future__ import annotations

from kinkcheck.oracles.rows import I0E, Entry, e

#: MindSpore's NumPy interface (``mindspore/numpy``: "mirrors NumPy's API") reads ``jax.numpy``'s rows.
CLONES = {"mindspore.numpy.": "jax.numpy."}


def table() -> dict[str, Entry]:
    t: dict[str, Entry] = {}
    for root in ("mindspore.ops.", "mindspore.mint."):
        t[root + "maximum"] = e("input, other", "Max(input, other)")
        t[root + "minimum"] = e("input, other", "Min(input, other)")
        t[root + "abs"] = e("input", "Abs(input)")
        t[root + "sqrt"] = e("input", "sqrt(input)")
    t["mindspore.ops.bessel_i0e"] = e("x", I0E)
    for root in ("mindspore.ops.", "mindspore.mint."):
        t[root + "clamp"] = e("input, min=None, max=None", "Min(Max(input, min), max)")
    t["mindspore.ops.relu"] = e("input", "Max(input, 0)")
    t["mindspore.mint.nn.functional.relu"] = e("input", "Max(input, 0)")
    return t
