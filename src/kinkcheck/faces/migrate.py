"""``kinkcheck migrate``: per case, the source's and the target's programs side by side (:mod:`kinkcheck.answers.migrate`)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kinkcheck.errors import UsageError
from kinkcheck.faces.shared import REPORT_HELP
from kinkcheck.report.query import default_report

#: Where the command stands in ``kinkcheck --help``.
POSITION = 90


def add_parser(sub: Any) -> None:
    """Add the command to ``kinkcheck``'s subcommands."""
    mg = sub.add_parser("migrate", help="per case, source vs target programs' conventions, with replacements that "
                                        "keep the source value (an equivalent program or generated code)")
    mg.add_argument("--from", dest="source", required=True,
                    help="a framework (torch, jax, tensorflow, paddle, …) or one release of it (torch==2.13.0); "
                         "@DEVICE puts this side on a device of its own (torch==2.11.0@cpu)")
    mg.add_argument("--to", dest="target", required=True,
                    help="jax | torch==2.15.0 | torch==2.11.0@cuda (a CPU → CUDA migration) | …")
    mg.add_argument("--case", help="one case id only")
    mg.add_argument("--program", help="one source program only (aliases accepted: jnp.maximum(x, 0.0))")
    mg.add_argument("--mode", default="reverse", help="default reverse")
    mg.add_argument("--dtype", default="float64", help="default float64")
    mg.add_argument("--device", default="cpu", help="default cpu; off Linux x86-64 the device, then the platform "
                   "tag: cpu-macos_arm64, metal-macos_arm64")
    mg.add_argument("--only-differences", action="store_true", help="leave out the pairs that agree")
    mg.add_argument("--report", help=REPORT_HELP)
    mg.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kinkcheck.answers.migrate import MigrateError, migrate, render, side_frameworks  # slow: numpy
    from kinkcheck.report.cells import CellError, load_report_for  # slow: numpy

    try:  # only the two sides' frameworks' rows
        sides = side_frameworks(args.source, args.target, args.device)
        report = load_report_for(args.report or default_report(), frameworks=sides)
        m = migrate(report, args.source, args.target, mode=args.mode, dtype=args.dtype, device=args.device,
                    case=args.case, program=args.program)
    except (CellError, MigrateError) as err:
        raise UsageError(str(err)) from None
    sys.stdout.write(render(m, only_differences=args.only_differences))
    return 0
