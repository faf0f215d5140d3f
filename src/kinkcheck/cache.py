"""kinkcheck's on-disk cache folder (derived results only; deleting it costs time, never data).

``$KINKCHECK_CACHE_DIR`` or ``platformdirs.user_cache_dir("kinkcheck")``. Holds the sympy oracle's results
(:mod:`kinkcheck.oracles.table`), parsed catalogs (:func:`kinkcheck.catalog.load_catalog`), the shard schema's
compiled validator (:mod:`kinkcheck.shards`), the report's plots (:mod:`kinkcheck.render.plots`) and markers of
shard files that passed the strict JSON parse and the schema (:func:`kinkcheck.shards.read_shard`), and what a
render keeps per shard (its environment, its judged observations, the parts of sections that read it alone:
``shard-environments/``, ``judged/``, ``derived/``; removed when no render has read them for :data:`UNUSED_DAYS`
days, :func:`prune_cached`), all keyed on content hashes. An empty folder is what a fresh clone sees:
``python -m kinkcheck.dev.bench --report`` times a first render with ``$KINKCHECK_CACHE_DIR`` pointed at one.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import time
from pathlib import Path
from typing import Any

__all__ = ["UNUSED_DAYS", "cache_dir", "is_cached", "prune_cached", "read_cached", "read_pickled", "read_signed", "write_cached",
           "write_pickled", "write_signed"]


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


def read_cached(kind: str, key: str, touch: bool = False) -> bytes | None:
    """The bytes cached as ``<cache>/<kind>/<key>``, None when absent or unreadable; ``touch``: its modification
    time set to now, so that :func:`prune_cached` keeps what is read (a render's judged shards)."""
    path = cache_dir() / kind / key
    try:
        if not path.is_file():  # a folder, a link to nothing, a FIFO (whose read would wait forever)
            return None
        data = path.read_bytes()
    except OSError:
        return None
    if touch:
        try:
            os.utime(path)
        except OSError:
            pass
    return data


def is_cached(kind: str, key: str) -> bool:
    """Whether ``<cache>/<kind>/<key>`` is there (a regular file), without reading it: what is read next may still be
    damaged, and its reader computes it again then."""
    try:
        return (cache_dir() / kind / key).is_file()
    except OSError:
        return False


def read_pickled(kind: str, key: str, touch: bool = False) -> Any:
    """The object pickled as ``<cache>/<kind>/<key>`` (:func:`write_pickled`), None when absent, unreadable or
    damaged: the caller computes it again, never an error (and checks that it is what it expects)."""
    raw = read_cached(kind, key, touch)
    if raw is None:
        return None
    try:
        return pickle.loads(raw)
    except Exception:  # noqa: BLE001 - any damage to a cache entry means: compute it again
        return None


def write_pickled(kind: str, key: str, value: Any) -> None:
    """Cache ``value`` pickled (:func:`write_cached`: atomically; skipped where the cache cannot be written)."""
    write_cached(kind, key, pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))


#: Days an entry of a pruned kind (:func:`prune_cached`) stays unread before it is removed.
UNUSED_DAYS = 7


def prune_cached(kind: str, days: float = UNUSED_DAYS) -> int:
    """Remove the entries of ``<cache>/<kind>`` neither written nor read (with ``touch``) for ``days`` days, and
    temporary files a killed writer left, at most once an hour per kind (a ``.pruned`` stamp): the kinds a render
    writes per shard (a benchmark's grown copies, releases since removed) do not pile up. Returns how many were
    removed; a cache that cannot be walked or written is left as it is, never an error."""
    folder = cache_dir() / kind
    stamp = folder / ".pruned"
    now = time.time()
    try:
        if stamp.exists() and now - stamp.stat().st_mtime < 3600:
            return 0
        folder.mkdir(parents=True, exist_ok=True)
        stamp.touch()
        removed = 0
        for entry in os.scandir(folder):
            if entry.name == ".pruned" or not entry.is_file(follow_symlinks=False):
                continue
            age = now - entry.stat(follow_symlinks=False).st_mtime
            if age > days * 86400 or (entry.name.endswith(".tmp") and age > 86400):
                try:
                    os.unlink(entry.path)
                    removed += 1
                except OSError:
                    pass
        return removed
    except OSError:
        return 0


def write_cached(kind: str, key: str, data: bytes) -> None:
    """Cache ``data`` as ``<cache>/<kind>/<key>`` atomically (a temporary file, then a rename: a reader never
    sees half of it); a cache that cannot be written is skipped, never an error."""
    import tempfile  # slow to import

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


def read_signed(kind: str, key: str, touch: bool = False) -> Any:
    """The JSON :func:`write_signed` kept as ``<cache>/<kind>/<key>``, decoded; None when there is none, it is not
    JSON, or the entry is not the one written under this key (its first line, the SHA-256 of the key and the rest,
    does not match: damaged, edited by hand, or another key's entry copied over it). ``touch`` as in
    :func:`read_cached`. The caller checks the shape of what it reads."""
    raw = read_cached(kind, key, touch)
    if raw is None:
        return None
    head, _, body = raw.partition(b"\n")
    if head != _signature(key, body):
        return None
    try:
        return json.loads(body)
    except ValueError:
        return None


def write_signed(kind: str, key: str, body: bytes) -> None:
    """Cache ``body`` (JSON text) under ``key`` with a first line that ties it to the key (:func:`read_signed`)."""
    write_cached(kind, key, _signature(key, body) + b"\n" + body)


def copy_signed(kind: str, old: str, new: str) -> bool:
    """Keep the entry :func:`write_signed` kept under ``old`` under ``new`` as well, signed for ``new``; False (and
    nothing written) when ``old`` has none or it is not the one written under ``old``. The body is not decoded."""
    raw = read_cached(kind, old, touch=True)
    if raw is None:
        return False
    head, _, body = raw.partition(b"\n")
    if head != _signature(old, body):
        return False
    write_signed(kind, new, body)
    return True


def _signature(key: str, body: bytes) -> bytes:
    return hashlib.sha256(key.encode() + b"\n" + body).hexdigest().encode()
