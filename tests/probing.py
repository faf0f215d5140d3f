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


#: relu at 0 with two torch programs and a tie of maximum: the planning tests' catalog (tests/probe/test_probe_plan.py,
#: tests/shards/test_shards.py, tests/probe/test_staging.py).
TINY = "\n" + RELU_AT_0 + """sources = ["P0"]
[case.programs]
torch = ["torch.relu(x)", "torch.clamp(x, min=0)"]
jax = ["jax.nn.relu(x)"]
""" + MAXIMUM_AT_TIE


#: Every torch mode and dtype: the cells a planning shard holds (:func:`plan_shard`).
MODES = ("reverse", "functional", "forward", "forward-ad", "inductor", "aot_eager", "vmap", "second-order")


DTYPES = ("float64", "float32", "float16", "bfloat16")


def plan_catalog(tmp_path, text=TINY, name="catalog.toml"):
    """``text`` (a small catalog: :data:`TINY`) written into ``tmp_path`` and loaded."""
    p = tmp_path / name
    p.write_text(text)
    return load_catalog(p)


def _value(case_id, v=0.0):
    return {"x": v} if case_id == "relu@0" else {"x": v, "y": v}


def plan_shard(catalog, cases=None, modes=MODES, dtypes=DTYPES, v=0.0, status="ok", hashes=True, measured_at="t0"):
    """A torch-2.13.0-cpu shard of ``cases`` × every program × ``modes`` × ``dtypes`` (value ``v``)."""
    cases = [c for c in catalog if cases is None or c.id in cases]
    env = {"id": "torch-2.13.0-cpu", "framework": "torch", "framework_version": "2.13.0", "device": "cpu",
           "python": "3.11.7", "platform": "test", "measured_at": measured_at, "kinkcheck_version": "0.1.0",
           "catalog_hash": catalog.hash, "dtypes": list(dtypes), "modes": list(modes)}
    if hashes:
        env["case_hashes"] = {c.id: c.measurement_hash("torch") for c in cases}
    obs = [{"case": c.id, "program": p.id, "mode": m, "dtype": d, "status": status,
            "value": _value(c.id, v) if status == "ok" else None, "error": None if status == "ok" else "why"}
           for c in cases for p in c.programs_for("torch") for m in modes for d in dtypes]
    nets = [{"case": c.id, "program": p.id, "mode": m, "dtype": d, "status": "ok", "W1": [[v, v]] * 3,
             "W2": [[v, v]] * 2, "error": None}
            for c in cases if c.activation for p in c.programs_for("torch") for m in ("reverse", "forward")
            if m in modes for d in ("float64", "float32") if d in dtypes]
    return {"schema": "kinkcheck/shard/v1", "environment": env, "observations": obs, "networks": nets}
