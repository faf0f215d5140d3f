"""``kinkcheck cite``: one sentence stating a measured convention or a rule, and the report's citation entry
(:mod:`kinkcheck.answers.cite`)."""

from __future__ import annotations

import argparse
import shlex
from typing import Any

from kinkcheck.errors import UsageError
from kinkcheck.faces.shared import REPORT_HELP, framework_name
from kinkcheck.registry import FRAMEWORKS
from kinkcheck.report.query import default_report, load_rules, rules_path

#: Where the command stands in ``kinkcheck --help``.
POSITION = 80


def add_parser(sub: Any) -> None:
    """Add the command to ``kinkcheck``'s subcommands."""
    c = sub.add_parser("cite", help="one sentence stating a measured convention, with its report anchor and a "
                                    "BibTeX (or CITATION.cff) entry for the report")
    c.add_argument("program", nargs="?",
                   help='a catalog program, e.g. "torch.clamp(x, min=0)" or "jnp.maximum(x, 0.0)" (or --rule)')
    c.add_argument("--rule", metavar="OPERATION[@KIND]",
                   help="cite a rule instead (rules.md): an operation as the census names it (torch.clamp, "
                        "torch.nn.functional.relu; torch.relu and jnp aliases are read too) and its kind of kink, "
                        "spelt out, as its slug or abbreviated unambiguously (torch.clamp@max-at-a-bound, "
                        "torch.clamp@max); @KIND may be left out when the operation has one kind")
    c.add_argument("--case", help="case id (e.g. relu@-0.0); default the program's principal case: the first in "
                                  "catalog order at its kink at ordinary numbers (relu@0 for torch.relu(x)), the "
                                  "others listed after the sentence")
    c.add_argument("--framework", choices=FRAMEWORKS, type=framework_name,
                   help="only for a program text both frameworks measure in the case (x ** 0.5, v.max())")
    c.add_argument("--framework-version", help="release (default: the newest measured)")
    c.add_argument("--mode", default="reverse", help="default reverse")
    c.add_argument("--dtype", default="float64", help="default float64")
    c.add_argument("--device", default="cpu", help="default cpu; off Linux x86-64 the device, then the platform "
                   "tag: cpu-macos_arm64, metal-macos_arm64")
    c.add_argument("--report", help=REPORT_HELP)
    c.add_argument("--link-base", metavar="URL",
                   help="the reports folder (a path or URL) the link starts from: BASE/cases/CASE.md#ROW; a page of "
                        "the site links the site's case page, e.g. https://USER.github.io/kinkcheck/report/"
                        "conventions.html (default: the published site, the Documentation URL of kinkcheck's "
                        "metadata, and the local page too when the reports folder read holds it)")
    c.add_argument("--cff", action="store_true", help="print a CITATION.cff references item instead of BibTeX")
    c.set_defaults(func=run)


def _print_local_page(args: argparse.Namespace, page: str, anchor: str) -> None:
    """``cite``'s second link, to the page in the reports folder read, when that page is there (a checkout, a render
    of one's own; an installed package holds the report's data, not its pages) and no ``--link-base`` was given."""
    from kinkcheck.report.model import report_path  # slow: numpy

    folder = report_path(args.report or default_report()).parent
    if args.link_base is None and (folder / page).is_file():
        print(f"Local page: {folder / page}#{anchor}")


def run(args: argparse.Namespace) -> int:
    from kinkcheck.answers.cite import CiteError, bibtex, cff, cite, site_base  # slow: numpy
    from kinkcheck.report.cells import load_report_for  # slow: numpy

    if args.framework_version and "==" in args.framework_version:  # torch==2.13.0, as lock and migrate take it
        fw, _, version = args.framework_version.partition("==")
        if args.framework is not None and args.framework != fw.strip():
            raise UsageError(f"--framework {args.framework} but --framework-version {args.framework_version}")
        args.framework, args.framework_version = fw.strip(), version.strip()
    if args.rule is not None:
        return _cite_rule(args)
    if args.program is None:
        raise UsageError('cite what? a catalog program ("torch.clamp(x, min=0)") or a rule (--rule torch.clamp@max)')
    try:
        report = load_report_for(args.report or default_report(), program=args.program, one_cell=True,
                                 case=args.case, framework=args.framework, mode=args.mode,
                                 dtype=args.dtype)  # the cell it states only
        c = cite(report, args.program, case=args.case, framework_version=args.framework_version, mode=args.mode,
                 dtype=args.dtype, device=args.device, framework=args.framework)
    except CiteError as err:
        raise UsageError(str(err)) from None
    print(c.sentence)
    print(f"Report cell: {c.link(site_base(args.link_base))}")
    _print_local_page(args, c.page, c.anchor)
    if args.case is None and c.others:  # the principal case was chosen: say which others exist

        pick = f" --framework {args.framework}" if args.framework else ""
        print(f"Also measured in: {', '.join(c.others)} (kinkcheck cite {shlex.quote(args.program)}{pick} --case ID)")
    print()
    print(cff(report) if args.cff else bibtex(report))
    return 0


def _cite_rule(args: argparse.Namespace) -> int:
    """``kinkcheck cite --rule OPERATION[@KIND]``: the rule's sentence, its place on the rules page, its history,
    evidence and counter-examples, then the dataset entry (:func:`kinkcheck.answers.cite.cite_rule`)."""
    from kinkcheck.answers.cite import FRAMEWORK_NAMES, CiteError, bibtex, cff, cite_rule, site_base  # slow: numpy
    from kinkcheck.report.cells import load_report_for  # slow: numpy
    from kinkcheck.rules import PAGE  # on first use: not loaded at start-up

    if args.program is not None or args.case is not None:
        raise UsageError("--rule cites a rule: give no program or --case with it")
    doc = load_rules(args.report)  # a missing or damaged rules file: one line, exit 2
    try:
        r = cite_rule(doc, args.rule, observations=rules_path(args.report).with_name("observations.parquet"),
                      framework=args.framework, framework_version=args.framework_version, mode=args.mode,
                      dtype=args.dtype, device=args.device)
        report = load_report_for(args.report or default_report(), frameworks=())  # the entry's head, no row
    except CiteError as err:
        raise UsageError(str(err)) from None
    print(r.sentence)
    base = site_base(args.link_base)
    here = rules_path(args.report).with_name(PAGE).is_file() or base != "reports"
    print(f"Rule: {r.link(base)}" + ("" if here else " (in kinkcheck's repository; the installed package "
                                     "holds the rules file, not its page)"))
    _print_local_page(args, PAGE, r.anchor)
    print(f"History ({r.slice}): {r.history}")
    print("Inferred from measurements: the rule summarises the measured cells below and is not itself a "
          "measurement (to cite one cell: kinkcheck cite PROGRAM --case CASE)")
    span = r.releases[0] if r.releases[0] == r.releases[1] else f"{r.releases[0]} to {r.releases[1]}"
    print(f"evidence ({FRAMEWORK_NAMES.get(r.framework, r.framework)} {span}, {r.slice}):")
    for line in r.evidence:
        print(line)
    if r.more:
        print(f"  … and {r.more} more programs (all: kinkcheck rules {shlex.quote(r.operation)} --framework "
              f"{r.framework} --json)")
    if r.counterexamples:
        print(f"counter-examples (every one of its {r.counter_cells} cells, in any mode, dtype and device):")
        for line in r.counterexamples:
            print(line)
    else:
        print("counter-examples: none in any mode, dtype or device")
    print()
    print(cff(report) if args.cff else bibtex(report))
    return 0
