"""kinkcheck's on-disk cache folder (derived results only; deleting it costs time, never data).

``$KINKCHECK_CACHE_DIR`` or ``platformdirs.user_cache_dir("kinkcheck")``. Holds the sympy oracle's results
(:mod:`kinkcheck.oracles.table`) and markers of shards already validated against the schema
(:mod:`kinkcheck.shards`), both keyed on content hashes.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_dir"]


def cache_dir() -> Path:
    """Where derived results are cached: ``$KINKCHECK_CACHE_DIR`` or the platform's user cache folder."""
    env = os.environ.get("KINKCHECK_CACHE_DIR")
    if env:
        return Path(env)
    import platformdirs

    return Path(platformdirs.user_cache_dir("kinkcheck"))
