"""``python -m kinkcheck`` = the ``kinkcheck`` command."""

from kinkcheck.cli import run

run()
