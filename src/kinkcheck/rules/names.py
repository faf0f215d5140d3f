"""The names rules give operations: the census's name of a call, with the overload it takes.

``torch.relu`` and ``torch.Tensor.relu`` are the census's ``torch.nn.functional.relu``; ``torch.max(v, dim=0)`` is
``torch.max(dim)`` (another backward formula than ``torch.max(v)``); a framework without a census keeps its
program's own spelling.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kinkcheck.census import CensusError, load_census
from kinkcheck.language import expr as ex
from kinkcheck.oracles.mapping import METHOD_PREFIXES
from kinkcheck.rules import graph as gr

__all__ = ["operation", "resolve_operation", "site_operation"]


def operation(framework: str, name: str) -> str:
    """The census's name of a mapped call (``torch.Tensor.clamp`` → ``torch.clamp``, ``torch.relu`` →
    ``torch.nn.functional.relu``); the mapped name where the census has no entry for it."""
    return _aliases(framework).get(name, name)


_ALIAS_CACHE: dict[str, dict[str, str]] = {}


def _aliases(framework: str) -> dict[str, str]:
    hit = _ALIAS_CACHE.get(framework)
    if hit is not None:
        return hit

    out: dict[str, str] = {}
    try:
        census = load_census(framework)
    except (CensusError, OSError):
        census = None

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


def resolve_operation(rules: Sequence[Mapping[str, Any]], text: str) -> tuple[str, set[str]]:
    """The operations of ``rules`` (the rules file's entries) that ``text`` names, and the text as read (aliases
    expanded, spaces dropped): the census's name (``torch.clamp``), a user alias (``jnp.maximum``), a spelling the
    census maps to it (``torch.relu`` → ``torch.nn.functional.relu``, ``torch.Tensor.clamp`` → ``torch.clamp``), the
    name without its overload when only one overload has rules, or its last name(s) (``clamp``); among overloads a
    short name is the one without an overload. Empty when none fits; several when the text is ambiguous."""
    op_text = "".join(text.split())
    head, dot, tail = op_text.partition(".")
    if head in ex.ALIASES:
        op_text = ex.ALIASES[head] + dot + tail
    ops = {"".join(r["operation"].split()): r["operation"] for r in rules}
    found = {ops[op_text]} if op_text in ops else set()
    if not found:  # a spelling the census maps to its name: torch.relu, torch.Tensor.clamp
        root = op_text.split(".", 1)[0]
        for fw in sorted({r["framework"] for r in rules if r["operation"].split(".", 1)[0] == root}):
            named = "".join(operation(fw, op_text).split())
            if named in ops:
                found.add(ops[named])
    if not found:  # the name without its overload, or its last names
        base = {name: name.partition("(")[0] for name in ops.values()}
        found = {name for name, b in base.items() if b == op_text} or \
                {name for name, b in base.items() if b.endswith("." + op_text)}
        plain = {name for name in found if "(" not in name}
        found = plain if len(plain) == 1 else found  # clamp → torch.clamp, not its overloads
    return op_text, found
