"""What the probe's tests share: a small catalog (two cases; torch and jax programs, some failing on purpose),
the command line, the count of current observations no command may lower, and the mark of Linux-only limits."""

from __future__ import annotations

import sys

import pytest
from catalogs import MAXIMUM_AT_TIE, RELU_AT_0

from kinkcheck.catalog import load_catalog

SMALL = "\n" + RELU_AT_0 + """[case.programs]
torch = ["torch.relu(x)", "torch.relu(x, 1, 2)", "torch.nn.functional.no_such_function(x)", "torch.argmax(x)"]
jax = ["jax.nn.relu(x)", "jax.nn.no_such_function(x)"]
""" + MAXIMUM_AT_TIE

linux_only = pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_DATA bounds allocations only on Linux")


def small_catalog(tmp_path):
    """:data:`SMALL` written into ``tmp_path`` and loaded (the ``small`` fixture of tests/conftest.py)."""
    p = tmp_path / "catalog.toml"
    p.write_text(SMALL)
    return load_catalog(p)


def by_program(shard, dtype="float64", mode="reverse"):
    """A shard's observations of one dtype and mode, by program."""
    return {o["program"]: o for o in shard["observations"] if o["dtype"] == dtype and o["mode"] == mode}


def run_cli(*argv):
    """``kinkcheck ARGV…`` in this process: its exit status."""
    from kinkcheck.cli import main

    return main(list(argv))


def current(folder, catalog):
    """Observations of the current catalog's cases in the shards of ``folder`` (the count no command may lower)."""
    from kinkcheck.probe.plan import current_count
    from kinkcheck.shards import load_shards

    shards, errors = load_shards(folder)
    assert not errors, errors
    return sum(current_count(s, catalog) for s in shards)
