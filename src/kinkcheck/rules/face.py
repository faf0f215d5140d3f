"""``kinkcheck rules [OPERATION] [--framework F] [--json]``: the rules table, or one operation's rules with their
changes over releases, evidence and counter-examples (read from ``rules.json.gz`` beside the report)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kinkcheck.errors import UsageError
from kinkcheck.rules import store
from kinkcheck.rules.page import cell_text, rule_rows

__all__ = ["command", "rules_path"]


def rules_path(report: str | Path | None = None) -> Path:
    """``rules.json.gz`` beside the report the faces read (``--report``, ``$KINKCHECK_REPORTS``, ``./reports``, the
    package's data)."""
    from kinkcheck.query import LookupFailed, data_path, default_report

    if report is not None:
        p = Path(report)
        if p.is_dir():
            return p / store.FILE
        if not p.is_file():
            raise UsageError(f"--report {report}: no such folder or file (a report folder, or its "
                             "conventions.json.gz)")
        return p.with_name(store.FILE)
    local = default_report()
    if local.parent.joinpath(store.FILE).is_file() or os.environ.get("KINKCHECK_REPORTS"):
        return local.parent / store.FILE
    try:
        return data_path(store.FILE)
    except LookupFailed:
        return local.parent / store.FILE


def load(report: str | Path | None = None) -> dict[str, Any]:
    """The rules document, or a :class:`~kinkcheck.errors.UsageError` in one line."""
    try:
        return store.load(rules_path(report))
    except store.RulesUnreadable as err:
        raise UsageError(str(err)) from None


def resolve_operation(rules: Sequence[Mapping[str, Any]], text: str) -> tuple[str, set[str]]:
    """The operations of ``rules`` (the rules file's entries) that ``text`` names, and the text as read (aliases
    expanded, spaces dropped): the census's name (``torch.clamp``), a user alias (``jnp.maximum``), a spelling the
    census maps to it (``torch.relu`` → ``torch.nn.functional.relu``, ``torch.Tensor.clamp`` → ``torch.clamp``), the
    name without its overload when only one overload has rules, or its last name(s) (``clamp``); among overloads a
    short name is the one without an overload. Empty when none fits; several when the text is ambiguous."""
    from kinkcheck import expr as ex
    from kinkcheck.rules.names import operation

    op_text = "".join(text.split())
    head, dot, tail = op_text.partition(".")
    if head in ex.ALIASES:
        op_text = ex.ALIASES[head] + dot + tail
    ops = {"".join(r["operation"].split()): r["operation"] for r in rules}
    found = {ops[op_text]} if op_text in ops else set()
    if not found:  # a spelling the census maps to its name: torch.relu, torch.Tensor.clamp
        root = op_text.split(".", 1)[0]
        for fw in sorted({r["framework"] for r in rules if r["operation"].split(".", 1)[0] == root}):
            named = "".join(operation(fw, op_text).split())
            if named in ops:
                found.add(ops[named])
    if not found:  # the name without its overload, or its last names
        base = {name: name.partition("(")[0] for name in ops.values()}
        found = {name for name, b in base.items() if b == op_text} or \
                {name for name, b in base.items() if b.endswith("." + op_text)}
        plain = {name for name in found if "(" not in name}
        found = plain if len(plain) == 1 else found  # clamp → torch.clamp, not its overloads
    return op_text, found


def command(args: Any) -> int:
    doc = load(args.report)
    known = sorted({r["framework"] for r in doc["rules"]})
    if args.framework is not None and args.framework not in known:
        raise UsageError(f"no rules for framework {args.framework!r} (frameworks with rules: {', '.join(known)})")
    rows = rule_rows(doc, framework=args.framework, operation=args.operation)
    if args.operation is not None and not rows:  # a spelling of an operation's name: torch.relu, jnp.maximum
        rules = [r for r in doc["rules"] if args.framework is None or r["framework"] == args.framework]
        rows = [h for name in sorted(resolve_operation(rules, args.operation)[1])
                for h in rule_rows(doc, framework=args.framework, operation=name)]
    if args.operation is not None and not rows:
        import difflib

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
