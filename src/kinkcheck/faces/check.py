"""``kinkcheck check``: two implementations of one function compared at an input and its kink-hitting variants
(:mod:`kinkcheck.answers.check`)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kinkcheck.errors import UsageError
from kinkcheck.faces.shared import bound_options, dtypes_help, evaluate, modes_help
from kinkcheck.registry import FRAMEWORKS

#: Where the command stands in ``kinkcheck --help``.
POSITION = 100


def add_parser(sub: Any) -> None:
    """Add the command to ``kinkcheck``'s subcommands."""
    ck = sub.add_parser("check", help="two implementations of one function: gradients at the input and at "
                                      "kink-hitting variants of it (exit 0: agree, 1: differ, 2: bad input)")
    ck.add_argument("first", help="MODULE:FUNCTION or path/to/file.py:FUNCTION (the first framework's version)")
    ck.add_argument("second", help="MODULE:FUNCTION or path/to/file.py:FUNCTION (the second framework's version)")
    ck.add_argument("--at", required=True, help="the input: x=0.5,y=2 | 'v=[1,2,3]'; passed positionally in this order")
    ck.add_argument("--frameworks", default="torch,jax", help="framework of each function, two of the registered ones (default torch,jax)")
    ck.add_argument("--dtype", default="float64",
                    help=f"the inputs' dtype and the comparison's tolerance: {dtypes_help()}")
    ck.add_argument("--mode", default="reverse",
                    help="how both functions are differentiated: a mode both frameworks have, or one per function "
                         f"(inductor,jit); {modes_help()}")
    ck.add_argument("--all", action="store_true", help="list every differing input (default: the first 20)")
    bound_options(ck)
    ck.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kinkcheck.language import expr as ex  # on first use: not loaded at start-up
    from kinkcheck.language import points as pt  # on first use: not loaded at start-up
    from kinkcheck.answers.check import SHOWN, CheckError, CheckResult, Point, pair_modes, render  # slow: numpy
    from kinkcheck.vocabulary import DTYPES  # on first use: not loaded at start-up

    frameworks = tuple(f.strip() for f in args.frameworks.split(","))
    if len(frameworks) != 2 or any(f not in FRAMEWORKS for f in frameworks):
        raise UsageError(f"--frameworks takes two of {', '.join(FRAMEWORKS)} separated by a comma, "
                         f"got {args.frameworks!r}")
    if args.dtype not in DTYPES:
        raise UsageError(f"unknown dtype {args.dtype!r} (known: {', '.join(DTYPES)})")
    try:  # before the worker starts: a mode a framework lacks is bad input, not a failed evaluation
        modes = pair_modes([m.strip() for m in args.mode.split(",")] if "," in args.mode else args.mode, frameworks)
        at = pt.parse_point(args.at)
    except (CheckError, ex.ExprError) as err:
        raise UsageError(f"--mode: {err}" if isinstance(err, CheckError) else str(err)) from None
    done = evaluate(args, "check", {"first": args.first, "second": args.second, "at": at,
                                     "frameworks": list(frameworks), "dtype": args.dtype, "modes": list(modes)})
    result = CheckResult((frameworks[0], frameworks[1]), done["dtype"], [Point(**p) for p in done["points"]],
                         done["not_tried"], tuple(done["modes"]))
    args.exit_status = 1 if result.differing else 0  # decided before any output: survives `| head -1`
    sys.stdout.write(render(result, [f"{args.first} ({frameworks[0]})", f"{args.second} ({frameworks[1]})"],
                            shown=None if args.all else SHOWN))
    return args.exit_status
