"""``kinkcheck diff``: the conventions that changed between two environments (:mod:`kinkcheck.answers.diff`)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kinkcheck.errors import UsageError
from kinkcheck.faces.shared import REPORT_HELP, filters_text, print_table

#: Where the command stands in ``kinkcheck --help``.
POSITION = 60


def add_parser(sub: Any) -> None:
    """Add the command to ``kinkcheck``'s subcommands."""
    d = sub.add_parser(
        "diff", help="conventions that changed between two environments (exit 0: none, 1: some, 2: bad input)",
        description="Each side is a shard file, REPORT.json#ENV for an environment inside a report, or #ENV or ENV "
                    "alone (torch-2.13.0-cpu) for an environment of --report (default: the report grad reads, the "
                    "installed package's outside a checkout).",
    )
    d.add_argument("old", help="e.g. references/observations/torch-2.13.0-cpu.json or torch-2.13.0-cpu")
    d.add_argument("new", help="e.g. reports/conventions.json#torch-2.15.0-cpu or torch-2.15.0-cpu")
    d.add_argument("--report", help=REPORT_HELP + "; the report whose environments #ENV and ENV name")
    d.add_argument("--case", help="one case id only")
    d.add_argument("--program", help="one program only (as the catalog spells it)")
    d.add_argument("--mode", help="one mode only")
    d.add_argument("--dtype", help="one dtype only")
    d.add_argument("--each", action="store_true",
                   help="one line per changed cell (case, program, [mode, dtype]: old -> new) instead of the table "
                        "that groups one change over its modes and dtypes")
    d.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kinkcheck.answers.diff import DiffError, compare, group_changes, load_side  # slow: msgspec, numpy
    from kinkcheck.vocabulary import DTYPES, MODES  # on first use: not loaded at start-up

    for what, given, known in (("mode", args.mode, MODES), ("dtype", args.dtype, DTYPES)):
        if given is not None and given not in known:  # before reading either side
            raise UsageError(f"diff: unknown {what} {given!r} (known: {', '.join(known)})")
    try:
        old, new = load_side(args.old, args.report), load_side(args.new, args.report)
        changes = compare(old, new)
    except DiffError as err:
        raise UsageError(str(err)) from None
    wanted: dict[int, Any] = {i: {v} for i, v in enumerate((args.case, args.program, args.mode, args.dtype))
                              if v is not None}
    if args.program is not None:  # any spelling of the catalog's program (min=0.0 is min=0), as on every face
        from kinkcheck.language.expr import same_program  # on first use: not loaded at start-up

        wanted[1] = set(same_program(args.program, sorted({k[1] for k in (*old.observations, *new.observations)})))
        wanted[1] = wanted[1] or {args.program}

    def kept(key: tuple[str, ...]) -> bool:  # --case, --program, --mode, --dtype
        return all(key[i] in v for i, v in wanted.items())

    changes = [ch for ch in changes if kept((ch.case, ch.program, ch.mode, ch.dtype))]
    common = sum(1 for k in old.observations if k in new.observations and kept(k))
    if wanted and not common:
        raise UsageError(f"no convention of both sides matches {filters_text(args)}")
    args.exit_status = 1 if changes else 0  # decided before any output: `kinkcheck diff A B | head -1` keeps it
    summary = f"{len(changes)} of {common} conventions changed from {old.environment.id} to {new.environment.id}"
    try:
        if args.each:
            for ch in changes:
                print(ch.describe())
        else:
            rows = group_changes(changes)
            print(summary + (f" ({filters_text(args)})" if wanted else "")
                  + (f", in {len(rows)} rows (one change over its modes × dtypes)" if rows else ""))
            if rows:
                print_table(["case", "program", "old → new", "modes", "dtypes"],
                             [[r.case, r.program, f"{r.old} → {r.new}", ", ".join(r.modes), ", ".join(r.dtypes)]
                              for r in rows])
        sys.stdout.flush()
    finally:  # the count reaches stderr even when the reader of stdout has left
        print(summary, file=sys.stderr)
        sides = (old.environment,) if old.environment.id == new.environment.id else (old.environment, new.environment)
        for env in sides:  # what a side lacks on purpose is not compared: say so
            for part in env.not_measured_parts:
                what = (f"{part.case}  {part.program}  [{', '.join(part.modes)} × {', '.join(part.dtypes or ())}]"
                        if part.case else f"the cells of {', '.join(part.modes)} mode it lacks")
                print(f"not measured in {env.id}: {what}: {part.reason.removeprefix('not measured: ')}",
                      file=sys.stderr)
    return args.exit_status
