"""The sympy oracle for a whole catalog, cached on disk.

Analysing the catalog with sympy takes seconds (one case, the 6-element median, spends most of them in
``sympy.diff``); its result depends only on the case definition, the sympy version and the oracle's
source. :func:`oracle_table` keys a JSON cache entry on exactly those, in the user cache folder
(``platformdirs.user_cache_dir("kinkcheck")``, or ``$KINKCHECK_CACHE_DIR``), so a warm report does not
import sympy at all. The cache holds :meth:`OracleResult.to_json` output only (no pickles).
"""

from __future__ import annotations

import hashlib
import json
from importlib import metadata, resources
from typing import Any

from kinkcheck.cache import cache_dir
from kinkcheck.catalog import Case, Catalog

__all__ = ["cache_dir", "case_key", "oracle_table"]


def _oracle_source_hash() -> str:
    src = resources.files("kinkcheck.oracles").joinpath("symbolic.py").read_bytes()
    return hashlib.sha256(src).hexdigest()[:16]


def case_key(case: Case) -> str:
    """Cache key of one case: its definition, the sympy version and the oracle's source."""
    definition = json.dumps({"id": case.id, "sympy": case.sympy, "at": case.at, "tie": case.tie}, sort_keys=True)
    raw = f"{definition}|sympy {metadata.version('sympy')}|oracle {_oracle_source_hash()}"
    return hashlib.sha256(raw.encode()).hexdigest()[:24]


def oracle_table(catalog: Catalog, use_cache: bool = True) -> dict[str, dict[str, Any]]:
    """Case id → :meth:`kinkcheck.oracles.symbolic.OracleResult.to_json` for every case of ``catalog``.

    Reads each entry from the cache when present and valid; otherwise runs the sympy oracle (importing
    sympy) and writes the entry. A cache that cannot be written (read-only home) only costs time.

    Never raises for a case of a loaded catalog: what the oracle cannot decide is an entry of kind
    ``"not-judged"`` with its ``reason``, cached like any other (the key includes the oracle's source, so a
    better oracle recomputes it).
    """
    folder = cache_dir()
    out: dict[str, dict[str, Any]] = {}
    for case in catalog:
        path = folder / f"oracle-{case_key(case)}.json"
        entry = None
        if use_cache:
            try:
                entry = json.loads(path.read_text())
            except (OSError, ValueError):
                entry = None
        if not isinstance(entry, dict) or entry.get("case") != case.id:
            from kinkcheck.oracles.symbolic import analyze

            entry = analyze(case).to_json()
            if use_cache:
                try:
                    from kinkcheck.shards import write_json_atomic

                    write_json_atomic(path, entry)
                except OSError:
                    pass
        out[case.id] = entry
    return out
