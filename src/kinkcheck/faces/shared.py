"""What every command of ``kinkcheck`` shares: the parser's one-line errors, ``--report``'s help, the bounded worker's
options and call, the table printer. The faces (:mod:`kinkcheck.faces`) import this module, never one another."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from kinkcheck.errors import UsageError
from kinkcheck.registry import FRAMEWORKS, aliases


def modes_help() -> str:
    """``--mode``'s help: each framework's modes, read from the registry
    (:data:`kinkcheck.vocabulary.FRAMEWORK_MODES`), so a framework or mode added there is listed here."""
    from kinkcheck.vocabulary import FRAMEWORK_MODES  # on first use: not loaded at start-up

    return "reverse (default); " + "; ".join(f"{fw}: {', '.join(m for m in modes if m != 'reverse') or 'no other'}"
                                            for fw, modes in FRAMEWORK_MODES.items())


def dtypes_help() -> str:
    """``--dtype``'s help, from the dtypes' record (:data:`kinkcheck.vocabulary.DTYPES`)."""
    from kinkcheck.vocabulary import DTYPES  # on first use: not loaded at start-up

    return f"{DTYPES[0]} (default) | " + " | ".join(DTYPES[1:])


#: Set by :func:`kinkcheck.cli.run`: the process exits after this command (:func:`kinkcheck.cli.main` called from
#: Python keeps the collector).
EXITS_AFTER = False


#: ``--report``'s help, for every face that reads the report.
REPORT_HELP = ("a report folder or its conventions.json.gz (default: the one in $KINKCHECK_REPORTS if set, else reports/conventions.json[.gz] in "
               "the current folder, else the source tree's or the installed package's)")


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2, like every other bad input
        command = self.prog.removeprefix("kinkcheck").strip()  # "ask", or "" for kinkcheck itself
        if "required: expr" in message or "required: program" in message:
            # argparse read an expression that starts with "-" as an option
            message += (f' (an expression that starts with "-" goes after --: {command or "grad"} --at x=0 -- '
                        '"-torch.min(-x)")')
        raise UsageError(f"{command}: {message}" if command else message)


def worker_limits(args: argparse.Namespace) -> Any:
    """``--timeout``/``--memory`` (else the environment, else the defaults) as :class:`kinkcheck.probe.worker.Limits`."""
    from kinkcheck.probe.worker import Limits  # on first use: not loaded at start-up

    try:
        return Limits.resolve(args.timeout, args.memory)
    except ValueError as err:
        raise UsageError(str(err)) from None


def evaluate(args: argparse.Namespace, task: str, payload: dict[str, Any]) -> Any:
    """Run a task in a bounded worker (or in this process with ``--no-isolate``); its errors as UsageError."""
    from kinkcheck.probe import worker  # on first use: not loaded at start-up

    bounds = worker_limits(args)
    try:
        if args.no_isolate:
            return worker.run_inline(task, payload, bounds)
        return worker.run(task, payload, bounds)
    except worker.NoDevice as err:
        raise NoDevice(str(err)) from None
    except worker.TaskError as err:
        raise UsageError(str(err)) from None


class NoDevice(UsageError):
    """The evaluation asked for a device this machine lacks (:class:`kinkcheck.probe.worker.NoDevice`)."""


def filters_text(args: argparse.Namespace) -> str:
    return ", ".join(f"--{name} {getattr(args, name)}" for name in ("case", "program", "mode", "dtype", "device")
                     if getattr(args, name, None) is not None)


def print_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Rows as a table aligned by rich (no borders; when stdout is not a terminal one line a row, no wrapping, no
    trailing padding)."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, pad_edge=False, header_style="bold", show_edge=False)
    for name in header:
        table.add_column(name, overflow="fold")
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))  # Text: a program's [brackets] are not rich markup
    if sys.stdout.isatty():
        Console(highlight=False, soft_wrap=False).print(table)
        return
    console = Console(width=100_000, highlight=False, soft_wrap=False, color_system=None)
    with console.capture() as captured:
        console.print(table)
    # a pipe or a file: one line a row, without the padding rich gives every cell up to its column's width
    sys.stdout.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))


def bound_options(p: argparse.ArgumentParser) -> None:
    # on first use: not loaded at start-up
    from kinkcheck.probe.worker import DEFAULT_MEMORY_GIB, DEFAULT_TIMEOUT_S, ENV_MEMORY, ENV_TIMEOUT

    p.add_argument("--timeout", metavar="SECONDS",
                   help=f"wall-clock limit of the evaluation (default ${ENV_TIMEOUT}, else {DEFAULT_TIMEOUT_S:g})")
    p.add_argument("--memory", metavar="GIB",
                   help=f"memory limit of the evaluation in GiB (default ${ENV_MEMORY}, else {DEFAULT_MEMORY_GIB:g})")
    p.add_argument("--no-isolate", action="store_true",
                   help="evaluate in this process, without the time and memory limits (default: a worker process)")


def framework_name(text: str) -> str:
    """``--framework``'s value: a framework's name, or an alias that stands for the whole framework (``tf``,
    ``ms``; not ``jnp``, which is a module of one)."""
    path = aliases().get(text)
    return path if path is not None and path in FRAMEWORKS else text
