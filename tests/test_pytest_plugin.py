"""``pytest --kinkcheck-lock`` (issue 34, item 4): the plugin, registered through the ``pytest11`` entry point, fails
a run whose installed framework changes a locked convention."""

from __future__ import annotations

from importlib import metadata

import pytest
from damage import FAULTS

from kinkcheck.answers import lock

pytest_plugins = ["pytester"]


def test_the_plugin_is_registered_through_the_pytest11_entry_point():
    found = [e for e in metadata.entry_points(group="pytest11") if e.name == "kinkcheck"]
    assert [e.value for e in found] == ["kinkcheck.pytest_plugin"], \
        f"pyproject.toml's [project.entry-points.pytest11] (reinstall kinkcheck after changing it): {found}"


def _lock(release: str) -> lock.Lock:
    """A lock of one clamp site written under ``release``, its convention the report's cell there."""
    program, at, dtype = "x.clamp(min=0)", "x=0.0", "float32"
    status, value, labels, source, case = lock.conventions("torch", release, [(program, at, dtype)], quiet=True)[
        (program, at, dtype)]
    assert source == "report", "the catalog holds x.clamp(min=0) at 0 (relu@0): the report's cell"
    site = lock.LockedSite(index=0, operation="torch.Tensor.clamp", call="model.py:7", kink="x at a bound",
                           dtype=dtype, hits=1, elements=8, program=program, at=at, case=case, status=status,
                           value=value, labels=labels, source=source)
    return lock.Lock(schema=lock.SCHEMA, framework="torch", release=release, device="cpu", model="model:make",
                     data="model:data", written_by="kinkcheck test", site=[site])


@pytest.fixture()
def installed_2_13_0(monkeypatch, tmp_path):
    from kinkcheck.probe.ondemand import installed_release

    if installed_release("torch") != "2.13.0":
        pytest.skip(f"the report's change of x.clamp(min=0) is from torch 2.13.0; installed: "
                    f"{installed_release('torch')}")
    monkeypatch.setenv("KINKCHECK_ASK_HOME", str(tmp_path / "ask"))


def test_a_run_fails_when_the_installed_release_changes_a_locked_convention(pytester, installed_2_13_0):
    lock.write_lock(_lock("2.14.1"), pytester.path / "kinkcheck.lock")  # locked under 2.14.1; 2.13.0 installed
    pytester.makepyfile("def test_fine():\n    assert True\n")
    result = pytester.runpytest_subprocess("--kinkcheck-lock", "kinkcheck.lock", "-p", "no:cacheprovider")
    assert result.ret == 1, result.stdout.str()
    result.stdout.fnmatch_lines([
        "*kinkcheck lock*",
        "model.py:7: torch.Tensor.clamp (x.clamp(min=0) at x=0.0, float32): 0 (left) in torch 2.14.1 → 1 (right) in "
        "2.13.0; read *reports/cases/relu-at-0.md",
        "1 of 1 locked convention(s) changed from torch 2.14.1 to 2.13.0",
        "*1 passed*",
    ])


def test_a_run_passes_when_nothing_locked_changes(pytester, installed_2_13_0):
    lock.write_lock(_lock("2.13.0"), pytester.path / "kinkcheck.lock")
    pytester.makepyfile("def test_fine():\n    assert True\n")
    result = pytester.runpytest_subprocess("--kinkcheck-lock", "kinkcheck.lock", "-p", "no:cacheprovider")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["0 of 1 locked convention(s) changed from torch 2.13.0 to 2.13.0"])


def test_a_failing_test_keeps_its_own_status(pytester, installed_2_13_0):
    lock.write_lock(_lock("2.13.0"), pytester.path / "kinkcheck.lock")
    pytester.makepyfile("def test_broken():\n    assert False\n")
    assert pytester.runpytest_subprocess("--kinkcheck-lock", "kinkcheck.lock", "-p", "no:cacheprovider").ret == 1


def test_a_lock_that_cannot_be_read_stops_pytest_in_one_line(pytester):
    (pytester.path / "kinkcheck.lock").write_text("[package]\nname = 'requests'\n")
    pytester.makepyfile("def test_fine():\n    assert True\n")
    result = pytester.runpytest_subprocess("--kinkcheck-lock", "kinkcheck.lock", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stderr.str()
    result.stderr.fnmatch_lines(["ERROR: --kinkcheck-lock: the lock kinkcheck.lock is not a kinkcheck lock*"])
    assert "Traceback" not in result.stderr.str()


def test_without_the_option_the_plugin_does_nothing(pytester):
    pytester.makepyfile("import sys\ndef test_quiet():\n    assert 'kinkcheck.answers.lock' not in sys.modules\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == 0, result.stdout.str()
    assert "kinkcheck lock" not in result.stdout.str()


# --------------------------------------------------------------------------- never a pass on what was not checked


def _one_error(result) -> str:
    """The one line pytest printed for a usage error (exit 4), and no traceback or INTERNALERROR."""
    text = result.stderr.str() + result.stdout.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, f"a usage error, exit 4: {result.ret}\n{text[-2000:]}"
    assert "Traceback" not in text and "INTERNALERROR" not in text, text[-2000:]
    said = [ln for ln in result.stderr.str().splitlines() if ln.startswith("ERROR:")]
    assert len(said) == 1, f"one line: {result.stderr.str()}"
    return said[0]


def test_an_empty_lock_option_is_refused_not_a_check_turned_off(pytester):
    """Issue 44, item 7: `pytest --kinkcheck-lock ""` (a $LOCK that was not set) turned the check off silently;
    `kinkcheck lock --lock ""` is refused. So is the option now."""
    pytester.makepyfile("def test_fine():\n    assert True\n")
    line = _one_error(pytester.runpytest_subprocess("--kinkcheck-lock", "", "-p", "no:cacheprovider"))
    assert "--kinkcheck-lock is empty: name the lock file" in line, line


def test_a_lock_with_no_site_compares_nothing_and_stops_the_run(pytester, installed_2_13_0):
    empty = lock.Lock(schema=lock.SCHEMA, framework="torch", release="2.13.0", device="cpu", model="model:make",
                      data="model:data", written_by="kinkcheck test")
    lock.write_lock(empty, pytester.path / "kinkcheck.lock")
    pytester.makepyfile("def test_fine():\n    assert True\n")
    line = _one_error(pytester.runpytest_subprocess("--kinkcheck-lock", "kinkcheck.lock", "-p", "no:cacheprovider"))
    assert "the lock holds no locked site, so nothing was compared with torch 2.13.0" in line, line


@pytest.mark.parametrize("fault", FAULTS)
def test_a_damaged_or_mixed_report_stops_the_run_in_one_line(pytester, installed_2_13_0, monkeypatch, faulty_report,
                                                             fault):
    """Issue 44, item 6: a damaged observations.parquet was an INTERNALERROR. Each kind, and a mixed set, is now a
    usage error naming the table (exit 4), before any test runs."""
    from damage import SAYS

    folder = faulty_report(fault)
    monkeypatch.setenv("KINKCHECK_REPORTS", str(folder))
    site = lock.LockedSite(index=0, operation="torch.Tensor.clamp", call="model.py:7", kink="x at a bound",
                           dtype="float32", hits=1, elements=8, program="x.clamp(min=0)", at="x=0.0", case="relu@0",
                           status="ok", value={"x": 1.0}, labels=["right", "in-clarke"], source="report")
    lock.write_lock(lock.Lock(schema=lock.SCHEMA, framework="torch", release="2.13.0", device="cpu",
                              model="model:make", data="model:data", written_by="kinkcheck test", site=[site]),
                    pytester.path / "kinkcheck.lock")
    pytester.makepyfile("def test_fine():\n    assert True\n")
    line = _one_error(pytester.runpytest_subprocess("--kinkcheck-lock", "kinkcheck.lock", "-p", "no:cacheprovider"))
    assert str(folder / "observations.parquet") in line and SAYS[fault] in line, f"{fault}: {line}"
