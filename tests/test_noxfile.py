"""The noxfile declares sessions and calls the probe package: its menu, its Python, and the probe session's
wiring to :func:`kinkcheck.probe.environments.probe_release` (what that does: tests/probe/test_probe_environments.py)."""

from __future__ import annotations

import importlib.util

import pytest
from conftest import ROOT

pytest.importorskip("nox", reason="nox is not installed (pip install -e .[test] installs it)")


@pytest.fixture(scope="module")
def noxfile():
    spec = importlib.util.spec_from_file_location("noxfile", ROOT / "noxfile.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_nox_menu_lists_the_main_sessions_first(noxfile):
    import nox.registry

    names = [n for n in nox.registry.get() if n in ("report", "render", "tests", "bench", "bench_report", "probe")]
    assert names == ["report", "render", "tests", "bench", "bench_report", "probe"], names
    for name in names:
        doc = nox.registry.get()[name].__doc__ or ""
        assert doc.strip() and len(doc.splitlines()[0]) <= 110, f"{name}: a one-line docstring for `nox -l`"


def test_sessions_run_on_the_python_that_runs_nox(noxfile):
    assert noxfile.PYTHON is None, "render, tests and bench run on the Python that runs nox"


def test_the_probe_session_probes_its_release_into_this_checkouts_shards(noxfile, monkeypatch):
    """`nox -s "probe(jax-0.10.2)"` hands the session, the release and this checkout's places to probe_release."""
    calls = []
    monkeypatch.setattr(noxfile.ENVIRONMENTS, "probe_release", lambda *a: calls.append(a))
    session = object()
    noxfile.probe(session, framework="jax", version="0.10.2")
    assert calls == [(session, "jax", "0.10.2", noxfile.PLACES)], calls
    assert noxfile.PLACES.observations == ROOT / "references" / "observations", noxfile.PLACES
    assert noxfile.PLACES.catalog == ROOT / "references" / "catalog.toml", noxfile.PLACES
    ids = {p.id for p in noxfile.PROBES}
    assert {f"{fw}-{v}" for fw, versions in noxfile.MATRIX.items() for v in versions} == ids, "one session a release"


def test_the_noxfile_only_declares_sessions():
    """Issue 33: the noxfile declares sessions and calls one entry per release; the logic is the probe package's."""
    lines = (ROOT / "noxfile.py").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200, f"noxfile.py has {len(lines)} lines (at most 200: logic goes to kinkcheck.probe)"
