"""The sympy oracle for a whole catalog, cached on disk.

Analysing the catalog with sympy takes seconds (one case, the 6-element median, spends most of them in
``sympy.diff``); its result depends only on the case definition, the sympy version and the oracle's
source (:data:`ORACLE_SOURCES`). :func:`oracle_table` keys a JSON cache entry on exactly those, in the
user cache folder (``platformdirs.user_cache_dir("kinkcheck")``, or ``$KINKCHECK_CACHE_DIR``), so a warm
report does not import sympy at all. The cache holds :meth:`OracleResult.to_json` output only (no pickles).
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import replace
from importlib import metadata, resources
from typing import Any

from kinkcheck.cache import cache_dir
from kinkcheck.catalog import Case, Catalog
from kinkcheck.registry import FOLDERS
from kinkcheck.shards import write_json_atomic

__all__ = ["ORACLE_SOURCES", "cache_dir", "case_key", "oracle_table", "own_function_table"]


#: The source files the sympy oracle's results depend on, as ``(package, file)``: its modules and every
#: module of kinkcheck they import (the hull geometry, the expression parser, the catalog's names), so a
#: change to any of them recomputes every cached entry (``tests/test_imports.py`` checks the list). The framework
#: folders' records, which :mod:`kinkcheck.registry` reads from their files, are hashed beside them.
ORACLE_SOURCES: tuple[tuple[str, str], ...] = (
    ("kinkcheck.oracles", "translate.py"), ("kinkcheck.oracles", "pieces.py"), ("kinkcheck.oracles", "cones.py"),
    ("kinkcheck.oracles", "clarke.py"), ("kinkcheck.oracles", "symbolic.py"), ("kinkcheck.oracles", "routing.py"),
    ("kinkcheck.language", "geometry.py"), ("kinkcheck.language", "expr.py"), ("kinkcheck.language", "points.py"),
    ("kinkcheck", "catalog.py"), ("kinkcheck.language", "anchors.py"),
    ("kinkcheck", "registry.py"), ("kinkcheck", "cache.py"),
)


@functools.cache  # once a process: read for every case of a warm report
def _oracle_source_hash() -> str:
    h = hashlib.sha256()
    for pkg, name in ORACLE_SOURCES:
        h.update(resources.files(pkg).joinpath(name).read_bytes())
    for record in sorted(FOLDERS.glob("*/record.py")):  # the registry's records: aliases, exempt namespaces
        h.update(record.read_bytes())
    return h.hexdigest()[:16]


def case_key(case: Case) -> str:
    """Cache key of one case: its definition, the sympy version and the oracle's source (:data:`ORACLE_SOURCES`)."""
    definition = json.dumps({"id": case.id, "sympy": case.sympy, "at": case.at, "tie": case.tie}, sort_keys=True)
    raw = f"{definition}|sympy {_sympy_version()}|oracle {_oracle_source_hash()}"
    return hashlib.sha256(raw.encode()).hexdigest()[:24]


@functools.cache
def _sympy_version() -> str:
    """The installed sympy's version, read once per process (``importlib.metadata`` scans the installed
    distributions on every call: 2-3 ms, for every case of every render)."""
    return metadata.version("sympy")


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
            from kinkcheck.oracles.symbolic import analyze  # slow: numpy, sympy

            entry = analyze(case).to_json()
            if use_cache:
                try:

                    write_json_atomic(path, entry)
                except OSError:
                    pass
        out[case.id] = entry
    return out


def own_function_table(catalog: Catalog, use_cache: bool = True) -> dict[tuple[str, str, str], dict[str, Any]]:
    """(case id, framework, program id) → the oracle's JSON for a program's own function
    (:attr:`kinkcheck.catalog.Case.own_functions`: its documented constants differ from the case's), cached
    as :func:`oracle_table` caches a case: the own function is judged as a case of its own at the same point."""
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    for case in catalog:
        for (fw, pid), own in sorted(case.own_functions.items()):
            variant = replace(case, sympy=own.sympy, programs=(), own_functions={})
            entry = oracle_table([variant], use_cache=use_cache)[case.id]  # type: ignore[arg-type]
            out[(case.id, fw, pid)] = entry
    return out

