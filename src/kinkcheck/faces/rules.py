"""``kinkcheck rules``: the rules inferred from the report's measurements (:mod:`kinkcheck.rules.face`)."""

from __future__ import annotations

import argparse
from typing import Any

#: Where the command stands in ``kinkcheck --help``.
POSITION = 70


def add_parser(sub: Any) -> None:
    """Add the command to ``kinkcheck``'s subcommands."""
    ru = sub.add_parser("rules", help="what each operation returns at its kinks, inferred from every measurement: "
                                      "the rules table, or one operation's rules over releases with their evidence",
                        description="The rules inferred from the report's measurements (rules.json.gz beside it): per "
                                    "framework, operation and kind of kink, the label of the value it returns in each "
                                    "release, mode and dtype. Read docs/rules.md.")
    ru.add_argument("operation", nargs="?", help="an operation (torch.clamp, clamp, jax.nn.relu) or a family (relu); "
                                                  "default: every rule")
    ru.add_argument("--framework", help="only this framework's rules")
    ru.add_argument("--json", action="store_true", help="machine-readable: each rule's changes and evidence")
    ru.add_argument("--report", help="a report folder or its conventions.json (default: as grad reads it)")
    ru.set_defaults(func=run)



def run(args: argparse.Namespace) -> int:
    from kinkcheck.rules.face import command

    return command(args)
