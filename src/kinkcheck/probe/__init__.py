"""The probe: measure the catalog in an installed framework release and keep the shard current.

Four parts, each a module or two (``docs/architecture.md`` draws the map):

* **planning** (:mod:`~kinkcheck.probe.plan`): what a shard lacks for the catalog (freshness, the cells to
  measure), and merging a probe's result into the shard there is; :mod:`kinkcheck.shards` only stores.
* **running** (:mod:`~kinkcheck.probe.run`, :mod:`~kinkcheck.probe.cells`, :mod:`~kinkcheck.probe.compiled`,
  :mod:`~kinkcheck.probe.command`): the loop over cases, modes and dtypes, the compiled batches, and the
  ``kinkcheck probe`` command (lock, probe, merge, write).
* **the worker** (:mod:`~kinkcheck.probe.worker`, :mod:`~kinkcheck.probe.journal`,
  :mod:`~kinkcheck.probe.isolated`): bounded and forked processes, their limits, and the journal that lets a
  crash lose one case and a killed probe resume. ``kinkcheck grad`` and ``check`` evaluate in the same workers.
* **environments** (:mod:`~kinkcheck.probe.environments`): one virtualenv per framework release, its
  interpreter and installs, and the record of a release that could not be measured; ``nox -s "probe(…)"``
  calls :func:`~kinkcheck.probe.environments.probe_release`.

The names below are the probe's public face, re-exported from those modules and imported on first use, so
that planning (the report, nox's own Python) never imports the frameworks the running part needs.
"""

from __future__ import annotations

import importlib
from typing import Any


#: Public name → the module of this package that defines it.
_PUBLIC: dict[str, str] = {
    **dict.fromkeys(("DEFAULT_DTYPES", "NETWORK_DTYPES", "NETWORK_MODES", "network_tree", "select_cases"), "cells"),
    **dict.fromkeys(("ENV_COMPILE_JOBS", "compile_jobs"), "compiled"),
    "probe_isolated": "isolated",
    "journal_path": "journal",
    **dict.fromkeys(("DISTRIBUTIONS", "ProbeBusy", "environment", "environment_id", "probe", "probe_lock", "runner"),
                    "run"),
    **dict.fromkeys(("DEFAULT_BATCH_TIMEOUT_S", "DEFAULT_CASE_TIMEOUT_S", "DEFAULT_PROBE_MEMORY_GIB",
                     "ENV_BATCH_TIMEOUT", "ENV_CASE_TIMEOUT", "ENV_PROBE_MEMORY", "ForkedWorker", "ProbeInterrupted",
                     "ProbeLimits", "die_with_parent", "fork_safe"), "worker"),
}


__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC})
