"""What the framework tests share: a program's gradient from its text."""

from __future__ import annotations

from typing import Any


def grad(adapter: Any, text: str, at: dict[str, Any], dtype: str = "float64", mode: str = "reverse", **kw: Any) -> Any:
    """``adapter``'s gradient of ``text`` (the call-expression language, in the adapter's framework's names) at
    ``at``, on the CPU; ``kw``: ``wrt``, ``ints`` as :meth:`kinkcheck.frameworks.base.Adapter.gradient` takes them."""
    from kinkcheck.language import expr as ex

    return adapter.gradient(ex.parse(text, list(at), {adapter.name}), at, dtype, "cpu", mode, **kw)
