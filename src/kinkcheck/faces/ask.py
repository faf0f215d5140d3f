"""``kinkcheck ask``: any program at a point across releases (:mod:`kinkcheck.answers.ask` answers it)."""

from __future__ import annotations

import argparse
from typing import Any

from kinkcheck.faces.shared import framework_name
from kinkcheck.registry import FRAMEWORKS

#: Where the command stands in ``kinkcheck --help``.
POSITION = 20


def add_parser(sub: Any) -> None:
    """Add the command to ``kinkcheck``'s subcommands."""
    a = sub.add_parser(
        "ask", help="any program at a point, measured as the catalog's programs are (every mode and dtype) in the "
                    "releases asked, each in its own environment, judged and printed as a case page shows a program",
        description="Answers a program at a point across releases. A program of a catalog case at that case's point "
                    "is answered from the report's cells (measured by nox -s report, every mode and dtype); any other "
                    "program, point or release is measured here by kinkcheck probe, every mode and dtype, each "
                    "release in a virtualenv of its own. The answer is judged against the sympy oracle and printed as "
                    "a case page shows a program. Read docs/ask.md.",
        epilog="Virtualenvs and answers are kept in $KINKCHECK_ASK_HOME (default: the user cache folder's "
               "kinkcheck/ask); a question asked again measures only what its shards lack.")
    a.add_argument("expr", help='call expression, e.g. "torch.clamp(x, min=0)"')
    a.add_argument("--at", required=True, help="point: x=0 | x=1,y=1 | 'v=[1,3,3]' (finite numbers)")
    a.add_argument("--release", action="append", metavar="VERSION",
                   help="repeatable: a release of the framework's matrix, or the installed one")
    a.add_argument("--releases", metavar="SPEC", help="the matrix's releases in a version specifier, e.g. '>=2.0'")
    a.add_argument("--all", action="store_true", help="every release of the matrix")
    a.add_argument("--mode", action="append", help="repeatable; default every mode of the framework")
    a.add_argument("--dtype", action="append", help="repeatable; default all four dtypes")
    a.add_argument("--framework", choices=FRAMEWORKS, type=framework_name, help="only for a bare method chain")
    a.add_argument("--sympy", metavar="FORM", help="the function in the oracle's sympy language (default: mapped "
                   "from the program)")
    a.add_argument("--disk-budget", type=float, metavar="GB", help="disk the kept virtualenvs and the installer's "
                   "cache may take (default $KINKCHECK_ASK_DISK_GB, else 20); past it the cache is removed first, then "
                   "the least recently used virtualenvs")
    a.add_argument("--tie", action="store_true", default=None, help="the kink is a tie between arguments or "
                   "elements: the tie labels apply (split-even, first, last, one-index); a catalog program at its "
                   "case's point takes the case's own flag")
    a.add_argument("--stage", metavar="ID", help="also write the question as a staged case ID (references/staged/): "
                   "its program, and for the other frameworks a reason 'not written yet' to replace before it moves "
                   "into the catalog")
    a.add_argument("--title", help="with --stage: the case's title (default: the program at the point)")
    a.add_argument("--catalog", metavar="PATH", help="with --stage: the catalog to stage beside (default "
                   "references/catalog.toml in the current folder: run it in the checkout)")
    a.add_argument("--report", metavar="PATH", help="the report whose cells answer a catalog program: a folder "
                   "(conventions.json.gz, observations.parquet) or its conventions.json.gz (default $KINKCHECK_REPORTS, "
                   "else ./reports, else the installed package's)")
    a.add_argument("--live", action="store_true", help="measure every release here, even those whose cells the "
                   "report holds (default: a catalog program at its case's point is answered from the report's "
                   "cells, measured by nox -s report)")
    a.add_argument("--device", default="cpu", choices=("cpu", "cuda"),
                   help="cpu (default) | cuda: the report's cells of the program on an NVIDIA GPU (the releases the "
                        "report measured there), from the report; not measured here")
    a.add_argument("--json", action="store_true", help="print one JSON object: the question and its one-case report")
    a.add_argument("--quiet", action="store_true", help="no progress on stderr")
    a.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kinkcheck.answers.ask import command  # on first use: not loaded at start-up

    return command(args)
