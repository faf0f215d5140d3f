"""PaddlePaddle's rows of the sympy mapping (:data:`kinkcheck.oracles.mapping.TABLE`): its elementwise kinked
functions, from its API docs (``paddle.clip(x, min, max)``, ``maximum``/``minimum``, ``abs``, ``sqrt``, ``relu``).
Text only: imports nothing of paddle."""

from __future__ import annotations

from kinkcheck.oracles.rows import I0E, Entry, e


def table() -> dict[str, Entry]:
    t: dict[str, Entry] = {
        "paddle.maximum": e("x, y, name=None", "Max(x, y)"),
        "paddle.minimum": e("x, y, name=None", "Min(x, y)"),
        "paddle.abs": e("x, name=None", "Abs(x)"),
        "paddle.sqrt": e("x, name=None", "sqrt(x)"),
    }
    t["paddle.clip"] = e("x, min=None, max=None, name=None", "Min(Max(x, min), max)")
    t["paddle.i0e"] = e("x, name=None", I0E)
    t["paddle.nn.functional.relu"] = e("x, name=None", "Max(x, 0)")
    return t
