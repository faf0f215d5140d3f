"""``kinkcheck rules [OPERATION] [--framework F] [--json]``: the rules table, or one operation's rules with their
changes over releases, evidence and counter-examples (read from ``rules.json.gz`` beside the report)."""

from __future__ import annotations

import argparse
import difflib
import json
from typing import Any

from kinkcheck.errors import UsageError

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
    from kinkcheck.report.query import load_rules  # slow: msgspec
    from kinkcheck.rules.names import resolve_operation  # slow: numpy, sympy; the rules' modules, on first use
    from kinkcheck.rules.page import cell_text, rule_rows  # on first use: not loaded at start-up

    doc = load_rules(args.report)
    known = sorted({r["framework"] for r in doc["rules"]})
    if args.framework is not None and args.framework not in known:
        raise UsageError(f"no rules for framework {args.framework!r} (frameworks with rules: {', '.join(known)})")
    rows = rule_rows(doc, framework=args.framework, operation=args.operation)
    if args.operation is not None and not rows:  # a spelling of an operation's name: torch.relu, jnp.maximum
        rules = [r for r in doc["rules"] if args.framework is None or r["framework"] == args.framework]
        rows = [h for name in sorted(resolve_operation(rules, args.operation)[1])
                for h in rule_rows(doc, framework=args.framework, operation=name)]
    if args.operation is not None and not rows:

        elsewhere = sorted({h.framework for h in rule_rows(doc, operation=args.operation)})
        if elsewhere:
            raise UsageError(f"no rule for {args.operation!r} in {args.framework} (it has rules in "
                             f"{', '.join(elsewhere)})")
        names = sorted({r["operation"] for r in doc["rules"]} | {r["family"] for r in doc["rules"]})
        close = difflib.get_close_matches(args.operation, names, n=5, cutoff=0.5)
        hint = f" (close: {', '.join(close)})" if close else " (`kinkcheck rules` lists every operation)"
        raise UsageError(f"no rule for {args.operation!r}{hint}")
    by_key = {(r["framework"], r["operation"], r["kind"]): r for r in doc["rules"]}
    if args.json:
        out = []
        for h in rows:
            r = by_key[(h.framework, h.operation, h.kind)]
            out.append({"framework": h.framework, "operation": h.operation, "kind": h.kind, "family": h.family,
                        "newest": None if h.newest is None else {"release": h.newest[0], "labels": list(h.newest[1])},
                        "since": h.since,
                        "changes": [{"release": v, "labels": list(lab)} for v, lab in h.changes()],
                        "evidence": r["programs"], "counterexamples": len(r["counterexamples"]),
                        "slice": {"mode": "reverse", "dtype": "float64", "device": "cpu"}})
        print(json.dumps({"rules": out}, indent=1))
        return 0
    if args.operation is None:
        print("rules in each framework's newest release (reverse mode, float64, CPU); `kinkcheck rules OPERATION` "
              "for one operation's changes and evidence")
        for h in rows:
            mark = f"  [{h.counterexamples} counter-example cells]" if h.counterexamples else ""
            print(f"{h.family:<22} {h.kind:<34} {h.framework:<10} {h.operation:<44} {cell_text(h)}{mark}")
        return 0
    print("each rule over the releases in reverse mode, float64, CPU (every mode and dtype: --json, rules.json.gz); "
          "counter-examples from any mode and dtype")
    for h in rows:
        r = by_key[(h.framework, h.operation, h.kind)]
        print(f"{h.operation} ({h.framework}) at {h.kind}")
        for v, labels in h.changes():
            print(f"  from {v}: {'/'.join(labels)}")
        runs: list[list[str]] = []
        for i, (v, labels) in enumerate(h.releases):  # evidence there, but no rule: never hidden behind the runs above
            if not labels:
                if runs and runs[-1][-1] == h.releases[i - 1][0] and not h.releases[i - 1][1]:
                    runs[-1].append(v)
                else:
                    runs.append([v])
        if runs:
            spans = ", ".join(r[0] if len(r) == 1 else f"{r[0]}–{r[-1]}" for r in runs)
            print(f"  no rule in {spans} (its cells there contradict each other or fit no label)")
        if not h.changes():
            print("  no evidence in reverse mode, float64, CPU (other modes and dtypes: --json, rules.json.gz)")
        progs = r["programs"]
        print(f"  evidence: {len(progs)} program{'s' if len(progs) != 1 else ''}, e.g. "
              + "; ".join(f"{c}: {p}" for c, p in progs[:3]))
        if r["counterexamples"]:
            cells = doc["cells"]
            print(f"  counter-examples: {len(r['counterexamples'])} cells, e.g.")
            for c in r["counterexamples"][:3]:
                env, mode, dtype = cells[c[0]]
                print(f"    {c[1]}: {c[2]} in {env} {mode} {dtype} gave {c[3]}")
    return 0
