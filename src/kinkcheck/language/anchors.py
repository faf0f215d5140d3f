"""Report anchors and page names: :func:`slug` turns a case id or environment id into the part of a URL
fragment or file name that names it (``relu@0`` → ``relu-at-0``), :func:`program_slug` a program's text (two-character
comparisons read as words). A leaf module: the catalog
checks its ids with it, the report's view builds every anchor with it.
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["program_slug", "slug"]


@lru_cache(maxsize=1 << 16)  # the same environment ids and programs recur in every row
def slug(text: str) -> str:
    """Anchor-safe id: lowercase letters, digits and single dashes (a case's page name and anchors).

    ``@`` reads ``-at-``; a minus sign (a ``-`` not preceded by a letter or digit) reads ``minus``, so
    ``clamp@-1`` → ``clamp-at-minus-1`` and ``clamp@1`` → ``clamp-at-1`` stay distinct, while the
    separator in ``sqrt-abs@0`` stays a dash: ``sqrt-abs-at-0``. Different texts can read the same
    (``f@(1,2)`` and ``f@[1,2]``): the catalog refuses two case ids with one slug, so a page or anchor is
    never shared.
    """
    out = []
    prev = ""
    for ch in text.lower():
        if ch == "@":
            out.append("-at-")
        elif ch == "-" and not prev.isalnum():
            out.append("-minus-")
        elif ch.isalnum() and ch.isascii():
            out.append(ch)
        else:
            out.append("-")
        if not ch.isspace():
            prev = ch
    return re.sub(r"-+", "-", "".join(out)).strip("-") or "x"


#: Two-character comparisons read as words in a program's slug: ``x > 0`` and ``x >= 0`` must name two rows.
#: The word stands in parentheses so a minus after it still reads as one (``x <= -1`` → ``x-le-minus-1``).
_COMPARISONS = ((">=", " (ge) "), ("<=", " (le) "), ("==", " (eq) "), ("!=", " (ne) "))


@lru_cache(maxsize=1 << 16)
def program_slug(text: str) -> str:
    """:func:`slug` of a program's text, with ``>=``, ``<=``, ``==``, ``!=`` read as ``ge``, ``le``, ``eq``, ``ne``
    (``jax.lax.cond(x > 0, …)`` and ``jax.lax.cond(x >= 0, …)`` → ``…-x-0-…`` and ``…-x-ge-0-…``; a minus
    after one stays a minus: ``x <= -1`` → ``x-le-minus-1``, ``x <= 1`` → ``x-le-1``); the catalog
    refuses two programs of one case and framework that still read the same."""
    for op, word in _COMPARISONS:
        text = text.replace(op, word)
    return slug(text)
