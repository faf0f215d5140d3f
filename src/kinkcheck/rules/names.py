"""The names rules give operations: the census's name of a call, with the overload it takes.

``torch.relu`` and ``torch.Tensor.relu`` are the census's ``torch.nn.functional.relu``; ``torch.max(v, dim=0)`` is
``torch.max(dim)`` (another backward formula than ``torch.max(v)``); a framework without a census keeps its
program's own spelling.
"""

from __future__ import annotations

from kinkcheck.rules import graph as gr

__all__ = ["operation", "site_operation"]


def operation(framework: str, name: str) -> str:
    """The census's name of a mapped call (``torch.Tensor.clamp`` → ``torch.clamp``, ``torch.relu`` →
    ``torch.nn.functional.relu``); the mapped name where the census has no entry for it."""
    return _aliases(framework).get(name, name)


_ALIAS_CACHE: dict[str, dict[str, str]] = {}


def _aliases(framework: str) -> dict[str, str]:
    hit = _ALIAS_CACHE.get(framework)
    if hit is not None:
        return hit
    from kinkcheck.census import CensusError, load_census

    out: dict[str, str] = {}
    try:
        census = load_census(framework)
    except (CensusError, OSError):
        census = None
    from kinkcheck.oracles.mapping import METHOD_PREFIXES

    method_prefix = METHOD_PREFIXES.get(framework)
    if census is not None:
        for op in census.ops:
            canonical = op.name if not op.name.startswith(".") or method_prefix is None else method_prefix + op.name
            for spelling in op.spellings:
                key = method_prefix + spelling if spelling.startswith(".") and method_prefix else spelling
                out.setdefault(key, canonical)
    _ALIAS_CACHE[framework] = out
    return out


def site_operation(framework: str, site: gr.Site) -> str:
    """A call's operation as rules name it: the census name, with the overload it takes
    (:attr:`~kinkcheck.rules.graph.Site.variant`): ``torch.max(dim)``, ``torch.clamp(min, max)``."""
    base = operation(framework, site.name)
    return f"{base}({', '.join(site.variant)})" if site.variant else base
