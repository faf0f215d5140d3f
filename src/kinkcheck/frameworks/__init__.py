"""Framework adapters: the only modules that import a framework.

Each adapter evaluates a parsed call expression (:mod:`kinkcheck.expr`) at a point and returns the
gradient per named input. :func:`get_adapter` imports the adapter (and so the framework) lazily.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from kinkcheck.frameworks.base import (
    DTYPES,
    MODES,
    Adapter,
    FrameworkUnavailable,
    ProgramError,
    Unavailable,
    encode,
)
from kinkcheck.registry import view

__all__ = [
    "DTYPES",
    "KNOWN",
    "MODES",
    "Adapter",
    "FrameworkUnavailable",
    "ProgramError",
    "Unavailable",
    "encode",
    "get_adapter",
]

#: Framework name → adapter module (:data:`kinkcheck.registry.REGISTRY`).
KNOWN: Mapping[str, str] = view(lambda f: f.adapter)


def get_adapter(name: str) -> Adapter:
    """The adapter for ``name`` (``"torch"`` or ``"jax"``), importing the framework.

    Raises
    ------
    FrameworkUnavailable
        Unknown framework, or the framework is not installed in this Python (one-line reason).
    """
    if name not in KNOWN:
        raise FrameworkUnavailable(f"unknown framework {name!r} (known: {', '.join(KNOWN)})")
    module = importlib.import_module(KNOWN[name])
    return module.load()
