"""What every command raises for bad input: one line on stderr, exit status 2 (:data:`EXIT_BAD_INPUT`)."""

from __future__ import annotations

__all__ = ["EXIT_BAD_INPUT", "UsageError"]

#: The exit status of bad input, for every command.
EXIT_BAD_INPUT = 2


class UsageError(Exception):
    """Bad input: printed as one line, exit status 2."""
