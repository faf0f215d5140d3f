"""The fake framework's registry record; its releases are its matrix line (the test adds it)."""

from __future__ import annotations

from kinkcheck.registry import Framework

RECORD = Framework(
    "fakefw", "FakeFW", "fakefw", "fake_frameworks.fakefw", ("reverse", "forward"), ("d", "#000000"),
    aliases={"ffw": "fakefw"}, dtypes=("float64",), requirements=lambda v: [f"fakefw=={v}"],
    rule=("relu'(0) = 0 (documented, and violated by the implementation)", "tests/fakefw/__init__.py"),
    documented={"fakefw.relu": "zero"},
)
