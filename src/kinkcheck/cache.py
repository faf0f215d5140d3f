"""kinkcheck's on-disk cache folder (derived results only; deleting it costs time, never data).

``$KINKCHECK_CACHE_DIR`` or ``platformdirs.user_cache_dir("kinkcheck")``. Holds the sympy oracle's results
(:mod:`kinkcheck.oracles.table`), parsed catalogs (:func:`kinkcheck.catalog.load_catalog`), the shard schema's
compiled validator (:mod:`kinkcheck.shards`), the report's plots (:mod:`kinkcheck.report.plots`) and markers of
shard files that passed the strict JSON parse and the schema (:func:`kinkcheck.shards.read_shard`), all keyed on
content hashes. An empty folder is what a fresh clone sees: ``python -m kinkcheck.bench --report`` times a first render
with ``$KINKCHECK_CACHE_DIR`` pointed at one.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_dir", "read_cached", "write_cached"]


def cache_dir() -> Path:
    """Where derived results are cached: ``$KINKCHECK_CACHE_DIR`` or the platform's user cache folder."""
    env = os.environ.get("KINKCHECK_CACHE_DIR")
    if env:
        return Path(env)
    if not _PLATFORM:  # asked per cached item (thousands a render): platformdirs once
        import platformdirs

        _PLATFORM.append(Path(platformdirs.user_cache_dir("kinkcheck")))
    return _PLATFORM[0]


_PLATFORM: list[Path] = []


def read_cached(kind: str, key: str) -> bytes | None:
    """The bytes cached as ``<cache>/<kind>/<key>``, None when absent or unreadable."""
    try:
        return (cache_dir() / kind / key).read_bytes()
    except OSError:
        return None


def write_cached(kind: str, key: str, data: bytes) -> None:
    """Cache ``data`` as ``<cache>/<kind>/<key>`` atomically (a temporary file, then a rename: a reader never
    sees half of it); a cache that cannot be written is skipped, never an error."""
    import tempfile

    folder = cache_dir() / kind
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{key}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, folder / key)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError:
        pass
