"""The rules' disk cache: the digest of the code a cached result depends on, and a fast read of cached sympy objects
(:mod:`kinkcheck.cache` holds the bytes)."""

from __future__ import annotations

import hashlib
import pickle
from pathlib import Path
from typing import Any

__all__ = ["code_digest", "unpickle"]


def code_digest() -> str:
    """A digest of the code a program model depends on (the rules, the oracles, the framework rows)."""
    if _DIGEST:
        return _DIGEST[0]

    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    models = [root / "rules" / f"{name}.py" for name in ("graph", "local", "chain", "model", "names")]
    for path in sorted([*models, *root.glob("oracles/*.py"), *root.glob("frameworks/*/mapping.py")]):
        h.update(path.relative_to(root).as_posix().encode())
        h.update(path.read_bytes())
    _DIGEST.append(h.hexdigest()[:16])
    return _DIGEST[0]


def unpickle(raw: bytes) -> Any:
    """A cached pickle of sympy objects, read back without sympy re-evaluating what it built already (they were
    pickled evaluated, so they compare equal; re-evaluating a large ``Max`` of ``Min``s costs seconds); None when the
    entry is damaged (it is recomputed, never an error)."""
    from sympy.core.parameters import evaluate

    try:
        with evaluate(False):
            return pickle.loads(raw)
    except Exception:  # noqa: BLE001 - any damage to a cache entry means: compute it again
        return None


_DIGEST: list[str] = []
