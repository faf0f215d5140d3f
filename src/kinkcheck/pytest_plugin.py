"""A pytest plugin: ``pytest --kinkcheck-lock kinkcheck.lock`` fails the run when the installed framework returns
another convention at a kinked call the lock holds (:mod:`kinkcheck.answers.lock`).

Registered through the ``pytest11`` entry point, so installing kinkcheck is enough. Without the option it does
nothing (and imports nothing of kinkcheck's). With it, the lock's questions are asked of the installed release once,
before the tests run (the report's cells where the catalog holds them, else measured live); each changed site is
listed in a "kinkcheck lock" section of the summary and the run's exit status is 1, whatever the tests did. A
lock that cannot be read, an empty ``--kinkcheck-lock ""`` (as ``kinkcheck lock --lock ""`` is refused), report
data that cannot be read (damaged, or not one render) and a check that compared nothing (a lock with no locked
site) each stop pytest before any test with one line (exit 4, pytest's usage error): the plugin never passes a run
on what it did not check.
"""

from __future__ import annotations

from typing import Any

import pytest

#: Where the check's result waits for the summary: (the lock, the release checked, the changes).
_STASH: Any = pytest.StashKey()


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("kinkcheck", "gradient conventions at kinks")
    group.addoption("--kinkcheck-lock", metavar="PATH", default=None,
                    help="fail the run when the installed framework changes a gradient convention locked in PATH "
                         "(written by kinkcheck lock)")


def pytest_configure(config: Any) -> None:
    path = config.getoption("kinkcheck_lock", None)
    if path is None:
        return
    if not path.strip():  # `--kinkcheck-lock "$LOCK"` with $LOCK unset: refused, never a check turned off
        raise pytest.UsageError("--kinkcheck-lock is empty: name the lock file (kinkcheck.lock), or leave the option "
                                "out")
    from kinkcheck.answers import lock  # slow: msgspec
    from kinkcheck.errors import UsageError  # on first use: not loaded at start-up

    try:
        held = lock.read_lock(path)
        target, changes, unknown = lock.check(held, quiet=True)
        why = lock.nothing_compared(held, unknown, f"{held.framework} {target}")
        if why is not None:
            raise UsageError(f"the lock {path}: {why}")
    except UsageError as err:
        raise pytest.UsageError(f"--kinkcheck-lock: {err}") from None
    config.stash[_STASH] = (held, target, changes)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: Any) -> None:
    got = config.stash.get(_STASH, None)
    if got is None:
        return
    held, target, changes = got
    terminalreporter.section("kinkcheck lock")
    for c in changes:
        terminalreporter.write_line(c.line(held.framework), red=True)
    terminalreporter.write_line(f"{len(changes)} of {len(held.site)} locked convention(s) changed from "
                                f"{held.framework} {held.release} to {target}")


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    got = session.config.stash.get(_STASH, None)
    if got is not None and got[2] and exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED

