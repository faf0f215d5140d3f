"""kinkcheck's on-disk cache folder (derived results only; deleting it costs time, never data).

``$KINKCHECK_CACHE_DIR`` or ``platformdirs.user_cache_dir("kinkcheck")``. Holds the sympy oracle's results
(:mod:`kinkcheck.oracles.table`), the report's plots (:mod:`kinkcheck.report.plots`) and markers of shard files
that passed the strict JSON parse and the schema (:func:`kinkcheck.shards.read_shard`), all keyed on content
hashes. An empty folder is what a fresh clone sees: ``python -m kinkcheck.bench --report`` times a first render
with ``$KINKCHECK_CACHE_DIR`` pointed at one.
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
