"""Framework adapters, one folder per framework (``frameworks/<name>/``): its ``adapter.py`` is the only module that
imports the framework; beside it its registry record and the text the faces read (mapping rows, migrate and bench
templates).

Each adapter (on :class:`kinkcheck.frameworks.base.Adapter`) evaluates a parsed call expression
(:mod:`kinkcheck.language.expr`) at a point and returns the gradient per named input. :func:`get_adapter` imports the adapter
(and so the framework) lazily.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from kinkcheck.frameworks.base import (
    DTYPES,
    MODES,
    Adapter,
    DeviceAbsent,
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
    "DeviceAbsent",
    "FrameworkUnavailable",
    "ProgramError",
    "Unavailable",
    "data_limit",
    "encode",
    "get_adapter",
]

#: Framework name → adapter module (:data:`kinkcheck.registry.REGISTRY`).
KNOWN: Mapping[str, str] = view(lambda f: f.adapter)


def get_adapter(name: str) -> Adapter:
    """The adapter for ``name`` (a registered framework), importing the framework.

    Raises
    ------
    FrameworkUnavailable
        Unknown framework, the framework is not installed in this Python, or it could not be imported under
        the worker's memory limit (one-line reason).
    """
    if name not in KNOWN:
        raise FrameworkUnavailable(f"unknown framework {name!r} (known: {', '.join(KNOWN)})")
    module = importlib.import_module(KNOWN[name])
    try:
        return module.load()
    except FrameworkUnavailable as err:
        text = " ".join(str(err).split())  # an import error's text may hold a page (NumPy's "PLEASE READ")
        limit = data_limit()
        if limit is not None and any(s in text for s in _OUT_OF_MEMORY):
            raise FrameworkUnavailable(f"{name} could not be imported under the memory limit of "
                                       f"{limit / 2 ** 30:g} GiB (raise it with --memory): {text[:240]}") from None
        raise FrameworkUnavailable(text[:600]) from None


#: What an import that failed for want of memory says (a shared object's segment not mapped, ``ENOMEM``).
_OUT_OF_MEMORY = ("failed to map segment", "Cannot allocate memory", "MemoryError", "cannot allocate memory")


def data_limit() -> int | None:
    """This process's ``RLIMIT_DATA`` in bytes (set by a probe or ``grad`` worker, :mod:`kinkcheck.probe.worker`),
    None when unlimited (or where there is no rlimit: Windows)."""
    try:
        import resource
    except ImportError:  # Windows
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_DATA)
    return None if soft == resource.RLIM_INFINITY else soft
