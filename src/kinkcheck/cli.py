"""The ``kinkcheck`` command: one subcommand per module of :mod:`kinkcheck.faces` (``grad``, ``ask``, ``lock``,
``probe``, ``report``, ``diff``, ``rules``, ``cite``, ``migrate``, ``check``, ``census``), run with the handling they
share.

Bad input (an unknown name, a malformed ``--at``, an unknown dtype, a framework that is not installed, a
corrupt shard) prints one line on stderr and exits with status 2; no traceback, nothing executed.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from collections.abc import Sequence

from kinkcheck import __version__, faces
from kinkcheck.errors import EXIT_BAD_INPUT, UsageError
from kinkcheck.faces import shared

__all__ = ["UsageError", "build_parser", "main", "run"]


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``kinkcheck``: each face adds its command (:func:`kinkcheck.faces.faces`)."""
    p = shared.Parser(prog="kinkcheck", description="Gradient conventions at kinks, measured in real frameworks.")
    p.add_argument("--version", action="version", version=f"kinkcheck {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=shared.Parser)
    for face in faces.faces():
        face.add_parser(sub)
    return p


def _check_utf8(argv: Sequence[str]) -> None:
    """Refuse an argument holding non-UTF-8 bytes (Linux hands them over as lone surrogates, which cannot be
    printed, parsed or written to a UTF-8 report)."""
    for i, arg in enumerate(argv, start=1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError as err:
            code = ord(arg[err.start])
            byte = f"0x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"U+{code:04X}"
            raise UsageError(f"argument {i} is not valid UTF-8 text (byte {byte} at position {err.start + 1}): "
                             f"{arg[:40]!a}") from None


def run() -> None:
    """The ``kinkcheck`` console script: :func:`main`, then exit without the cyclic garbage collector walking
    what the command left alive (a report's 100,000 observations cost half a second at interpreter exit). A
    ``report`` run this way also leaves the collector off after its render (:data:`kinkcheck.faces.shared.EXITS_AFTER`):
    switched back on, its first pass walks the millions of objects the render made (0.6 s), for a process about to
    exit."""
    shared.EXITS_AFTER = True
    try:
        rc = main()
    finally:
        shared.EXITS_AFTER = False  # a caller that catches the exit and calls main again keeps its collector
    gc.freeze()
    raise SystemExit(rc)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; the exit status: 0, 1 (``diff``/``check``: a difference), 2 (bad input), 130 (interrupted).

    A command that knows its status before writing its output sets ``args.exit_status``; when the reader of
    stdout leaves early (``| head -1``) that status is returned, not 0.
    """
    args = None
    try:
        _check_utf8(sys.argv[1:] if argv is None else argv)
        args = build_parser().parse_args(argv)
        _refuse_empty_paths(args)
        if sys.stdout is None:  # started with stdout closed (`>&-`): there is nowhere to answer
            raise UsageError("standard output is closed: nowhere to write the answer")
        rc = int(args.func(args))
        sys.stdout.flush()  # a closed pipe shows here, inside the handler below, not at interpreter exit
        return rc
    except UsageError as err:
        from kinkcheck.shards.validate import one_line  # on first use: not loaded at start-up

        msg = one_line(str(err), limit=2000)  # names read from a user's file may hold line breaks
        print(f"kinkcheck: error: {msg}" if not msg.startswith("kinkcheck") else msg, file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("kinkcheck: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `kinkcheck diff … | head -1`: the reader left; the status stays the command's
        _quiet_stdout()
        return int(getattr(args, "exit_status", 0))
    except OSError as err:  # `> /dev/full`: the answer could not be written; neither 0 nor diff's 1 would be true
        if err.filename is not None:  # a file the command read or wrote, not the output
            print(f"kinkcheck: error: {err.strerror or err}: {err.filename}", file=sys.stderr)
            return EXIT_BAD_INPUT
        _quiet_stdout()
        try:
            print(f"kinkcheck: error: cannot write the output: {err.strerror or err}", file=sys.stderr)
        except (OSError, ValueError, AttributeError):
            pass
        return EXIT_BAD_INPUT


#: Arguments that name a file, a folder or a release: an empty one (``--report ""``, ``$(…)`` that printed
#: nothing) would otherwise fall back to a default or to the current folder without a word.
EMPTY_REFUSED = {"report": "--report", "shards": "--shards", "catalog": "--catalog", "out_dir": "--out-dir",
                 "old": "OLD", "new": "NEW", "framework_version": "--framework-version", "model": "--model",
                 "data": "--data", "first": "FIRST", "second": "SECOND", "lock": "--lock"}


def _refuse_empty_paths(args: argparse.Namespace) -> None:
    """One line and exit 2 for an empty path, file or release argument (:data:`EMPTY_REFUSED`)."""
    for dest, name in EMPTY_REFUSED.items():
        value = getattr(args, dest, None)
        if isinstance(value, str) and not value.strip():
            what = "a release, or leave it out for the newest measured" if dest == "framework_version" else \
                "MODULE:FUNCTION" if dest in ("model", "data") else \
                "a shard file, REPORT#ENV, #ENV or ENV (e.g. torch-2.13.0-cpu)" if (
                    args.command == "diff" and dest in ("old", "new")) else \
                "a path" if dest in ("old", "new", "first", "second", "shards") else \
                "a path, or leave it out for the default"
            raise UsageError(f"{args.command}: {name} is empty: name {what}")


def _quiet_stdout() -> None:
    """Send later writes to stdout (and the interpreter's last flush) to /dev/null, so they cannot fail again."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # a stdout without a file descriptor (embedded, captured)
        pass
