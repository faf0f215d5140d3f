"""``pytest --kinkcheck-lock`` (issue 34, item 4): the plugin, registered through the ``pytest11`` entry point, fails
a run whose installed framework changes a locked convention."""

from __future__ import annotations

from importlib import metadata

import pytest

from kinkcheck import lock

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
    from kinkcheck.ask import installed_release

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
    pytester.makepyfile("import sys\ndef test_quiet():\n    assert 'kinkcheck.lock' not in sys.modules\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == 0, result.stdout.str()
    assert "kinkcheck lock" not in result.stdout.str()
