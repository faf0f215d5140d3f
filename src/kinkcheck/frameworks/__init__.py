"""Framework adapters, one folder per framework (``frameworks/<name>/``): its ``adapter.py`` is the only module that
imports the framework; beside it its registry record and the text the faces read (mapping rows, migrate and bench
templates).

Each adapter (on :class:`kinkcheck.frameworks.base.Adapter`) evaluates a parsed call expression
(:mod:`kinkcheck.language.expr`) at a point and returns the gradient per named input. :func:`get_adapter` imports the adapter
(and so the framework) lazily.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Mapping
from types import ModuleType

from kinkcheck.frameworks.base import (DTYPES, MODES, Adapter, DeviceAbsent, FrameworkUnavailable, ProgramError,
                                       Unavailable, encode)
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
    "census_network",
    "kink_counter",
    "kink_counters",
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


def _folder_module(name: str, leaf: str) -> ModuleType | None:
    """Module ``leaf`` of framework ``name``'s folder (``kinkcheck.frameworks.<name>.<leaf>``), None where the folder
    has none or ``name`` is not registered."""
    if name not in KNOWN:
        return None
    module = f"{KNOWN[name]}.{leaf}"  # the record's adapter is its folder's package
    try:
        if importlib.util.find_spec(module) is None:
            return None
    except ModuleNotFoundError:  # an adapter that is a plain module (the tests' fake framework): no folder
        return None
    return importlib.import_module(module)


def kink_counter(name: str) -> ModuleType | None:
    """The kink-hit counter of framework ``name``: its folder's ``kinkhits.py`` (what :mod:`kinkcheck.kinkhits`
    says a kink hit is), None where the framework has none. Importing it does not import the framework.

    A counter module has ``hits_at(fn, at, dtype)`` (the sites of ``fn``'s forward pass at a point, ``kinkcheck
    check``), ``MODEL`` (what a model of the framework is, in words), ``is_model(made)`` and ``model_passes(made,
    eval_mode)`` (the mode it runs in, and a function counting one forward pass: ``census --model``, ``lock``),
    ``census_names(program)`` (the census operations a site's program may be); and optionally
    ``first_layer_shift`` (``lock --check``: the size of a change of convention on the user's batch)."""
    return _folder_module(name, "kinkhits")


def kink_counters() -> dict[str, ModuleType]:
    """Framework → its kink-hit counter (:func:`kink_counter`), registry order, for the frameworks that have one."""
    return {name: counter for name in KNOWN if (counter := kink_counter(name)) is not None}


def census_network(name: str) -> ModuleType | None:
    """The kink-hit census's reference network in framework ``name`` (its folder's ``hitcensus.py``: ``bifurcation``
    and ``version``; PyTorch's also ``digits``, ``threads`` and ``train``), None where it has none. Importing it
    does not import the framework."""
    return _folder_module(name, "hitcensus")


#: What an import that failed for want of memory says (a shared object's segment not mapped, ``ENOMEM``).
_OUT_OF_MEMORY = ("failed to map segment", "Cannot allocate memory", "MemoryError", "cannot allocate memory")


def data_limit() -> int | None:
    """This process's ``RLIMIT_DATA`` in bytes (set by a probe or ``grad`` worker, :mod:`kinkcheck.probe.worker`),
    None when unlimited (or where there is no rlimit: Windows)."""
    try:
        import resource  # optional: not on Windows
    except ImportError:  # Windows
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_DATA)
    return None if soft == resource.RLIM_INFINITY else soft
