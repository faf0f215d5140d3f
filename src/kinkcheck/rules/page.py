"""The rules page (``rules.md`` beside ``conventions.md``) and the rules table the ``rules`` command prints, from
the rules file's document (:func:`kinkcheck.rules.store.load`): one row per operation family and kind of
kink, one column per framework, each cell the rule in the framework's newest release (reverse mode, float64,
CPU) and the release where it last changed; the leave-one-case-out figures; every program predicted wrong.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kinkcheck.language.anchors import program_slug, slug
from kinkcheck.language.decimals import decimal, decimal_vector
from kinkcheck.vocabulary import release_key

__all__ = ["LABEL_WORDS", "History", "front_table", "history", "releases_by_framework", "render_page", "rule_anchor",
           "rule_id", "rule_rows"]

#: The slice a rule's headline is stated for.
HEADLINE = ("reverse", "float64", "cpu")

#: Each rule label said in words, as the value an operation returns at its kink (``kinkcheck cite --rule`` says a
#: rule with them; the labels are :data:`kinkcheck.rules.local.LABELS`, explained in docs/rules.md).
LABEL_WORDS: dict[str, str] = {
    "left": "the left one-sided derivative f'(x0-)",
    "right": "the right one-sided derivative f'(x0+)",
    "left-piece": "the slope of the piece left of the jump",
    "right-piece": "the slope of the piece right of the jump",
    "piece-at-point": "the gradient of the piece the point itself belongs to",
    "first": "the whole credit to the earliest tied argument",
    "last": "the whole credit to the latest tied argument",
    "split-even": "the tie's gradient split evenly among the tied arguments",
    "every-tied": "the whole credit to every tied argument",
    "min-norm": "the minimum-norm element of the Clarke generalized gradient",
    "mean": "the midpoint of the one-sided derivatives",
    "zero": "a zero gradient",
    "nan": "NaN",
}


def rule_id(operation: str, kind: str) -> str:
    """A rule's stable id, what ``kinkcheck cite --rule`` takes and prints: the operation as the census names it,
    ``@`` and the :func:`~kinkcheck.language.anchors.slug` of its kind of kink (``torch.clamp@max-at-a-bound``)."""
    return f"{operation}@{slug(kind)}"


def rule_anchor(operation: str, kind: str) -> str:
    """``rule-<program slug of operation>--<slug of kind>``: the rule's anchor on the rules page, in its cell of the
    rules table (``rule-torch-clamp--max-at-a-bound``); an operation belongs to one framework, so it names the rule."""
    return f"rule-{program_slug(operation)}--{slug(kind)}"


#: Most misses the page lists (the rest are in ``rules.json.gz``: the page stays under the site's page limit).
MAX_MISSES = 150


@dataclass(frozen=True)
class History:
    """A rule's labels over the releases of its framework (one mode, dtype, device)."""

    framework: str
    operation: str
    kind: str
    family: str
    #: (release, labels) oldest first; labels () where that release measured no evidence
    releases: tuple[tuple[str, tuple[str, ...]], ...]
    counterexamples: int

    @property
    def newest(self) -> tuple[str, tuple[str, ...]] | None:
        measured = [r for r in self.releases if r[1]]
        return measured[-1] if measured else None

    @property
    def since(self) -> str | None:
        """The oldest release of the newest run of equal labels, when an older release differs; None when every
        measured release agrees."""
        measured = [r for r in self.releases if r[1]]
        if not measured:
            return None
        last = measured[-1][1]
        i = len(measured) - 1
        while i > 0 and measured[i - 1][1] == last:
            i -= 1
        return measured[i][0] if i > 0 else None

    def changes(self) -> list[tuple[str, tuple[str, ...]]]:
        """(first release, labels) of each run of equal labels, oldest first."""
        out: list[tuple[str, tuple[str, ...]]] = []
        for release, labels in self.releases:
            if labels and (not out or out[-1][1] != labels):
                out.append((release, labels))
        return out


def plain(env: str, e: Mapping[str, Any]) -> bool:
    """Whether an environment is its release's plain one on its device (``torch-2.15.0-cpu``), not a platform or
    ISA variant of it (``torch-2.15.0-cpu-linux_x86_64_v2``, ``…-macos_arm64``): a rule's history reads those."""
    return env == f"{e.get('framework')}-{e.get('version')}-{e.get('device')}"


def history(doc: Mapping[str, Any], rule: Mapping[str, Any], mode: str = "reverse", dtype: str = "float64",
            device: str = "cpu", versions: Mapping[str, Sequence[str]] | None = None) -> History:
    """The labels of one rule (a ``rules`` entry of the document) over its framework's releases. ``versions``:
    :func:`releases_by_framework` of the document at ``device``, when the caller has it (one sort for every rule,
    not one per rule)."""
    cells = doc["cells"]
    envs = doc["environments"]
    per_release: dict[str, tuple[str, ...]] = {}
    for labels, idx in rule["labels"].items():
        for i in idx:
            env, m, d = cells[i]
            e = envs.get(env, {})
            if m == mode and d == dtype and e.get("device") == device and plain(env, e):
                per_release[e.get("version", env)] = tuple(labels.split()) if labels != "-" else ()
    if versions is None:
        versions = releases_by_framework(doc, device)
    return History(rule["framework"], rule["operation"], rule["kind"], rule["family"],
                   tuple((v, per_release.get(v, ())) for v in versions.get(rule["framework"], ())),
                   len(rule["counterexamples"]))


def releases_by_framework(doc: Mapping[str, Any], device: str = "cpu") -> dict[str, list[str]]:
    """Framework → the releases of the document's environments at ``device``, oldest first (PEP 440 order)."""
    out: dict[str, set[str]] = defaultdict(set)
    for e in doc["environments"].values():
        if e.get("device") == device:
            out[e.get("framework")].add(e["version"])
    return {fw: sorted(vs, key=release_key) for fw, vs in out.items()}


def rule_rows(doc: Mapping[str, Any], *, framework: str | None = None, operation: str | None = None) -> list[History]:
    """Every rule's history, filtered, in (family, kind, framework, operation) order."""
    out = []
    versions = releases_by_framework(doc)
    for r in doc["rules"]:
        if framework is not None and r["framework"] != framework:
            continue
        if operation is not None and operation not in (r["operation"], r["family"]) and \
                not r["operation"].endswith("." + operation):
            continue
        out.append(history(doc, r, versions=versions))
    return sorted(out, key=lambda h: (h.family, h.kind, h.framework, h.operation))


def cell_text(h: History) -> str:
    """``left (since 2.14.1)``, ``left``, or ``—`` when the newest CPU release measured no evidence."""
    newest = h.newest
    if newest is None:
        return "—"
    text = "/".join(newest[1])
    return f"{text} (since {h.since})" if h.since else text


def _short(op: str) -> str:
    """``torch.linalg.vector_norm(ord=2.0)`` → ``vector_norm(ord=2.0)``: the last name, with its overload."""
    base, paren, rest = op.partition("(")
    return base.rsplit(".", 1)[-1] + paren + rest


def render_page(doc: Mapping[str, Any], frameworks: Sequence[str]) -> str:
    """The rules page's Markdown."""
    lines: list[str] = []
    val = doc["validation"]
    rules = rule_rows(doc)
    lines += [
        "# Rules: what each operation does at its kinks",
        "",
        "Inferred from every measured cell where one operation alone sits at its kink, and used to predict any "
        "program by the chain rule AD applies (docs/rules.md). A rule's **labels** name the value its operation "
        "returns there: `left`/`right` (a one-sided derivative), `left-piece`/`right-piece` (a piece's slope at "
        "a jump), `piece-at-point` (the gradient of the piece the point belongs to), `first`/`last` (the "
        "earliest/latest tied argument), `split-even` (a tie shared evenly), `every-tied` (each tied argument the "
        "whole credit), `min-norm` (the minimum-norm element of the Clarke generalized gradient), `mean`, `zero`, "
        "`nan`; — where nothing was measured or the cells contradict each other. Labels its "
        "evidence does not tell apart are listed together (`left/min-norm/zero`: relu's 0 at 0 is all three). "
        "Every rule's evidence cells and counter-examples are in `rules.json.gz`; `kinkcheck rules OPERATION` "
        "prints one.",
        "",
        f"{len(rules)} rules over {len({(h.framework, h.operation) for h in rules})} operations of "
        f"{len({h.framework for h in rules})} frameworks; "
        f"{sum(1 for h in rules if h.counterexamples)} have counter-examples.",
        "",
        "What the catalog's programs give the rules (a program is evidence when one operation alone sits at its "
        "kink; the others say why not, the 8 commonest reasons): " + "; ".join(
            f"{n} {reason}"
            for reason, n in sorted(val.get("programs", {}).items(), key=lambda kv: (-kv[1], kv[0]))[:8]) + ".",
        "",
        "## How well the rules predict what was measured (leave one case out)",
        "",
        "Each case's programs predicted from rules inferred without that case, compared with every measured "
        "cell. *Headline*: float64, reverse mode, CPU. *Programs of two or more calls*: how many are predicted in "
        "every headline cell.",
        "",
        "| framework | headline: right / predicted / cells | all first-order cells: right / predicted / cells | "
        "programs of ≥ 2 calls predicted everywhere |",
        "|---|---|---|---|",
    ]
    tot = defaultdict(int)
    for fw in frameworks:
        h = val["headline"].get(fw)
        a = val["by_framework"].get(fw)
        mc = val["multi_call"].get(fw, {"programs": 0, "predicted_everywhere": 0})
        if h is None and a is None:
            continue
        h = h or {"cells": 0, "predicted": 0, "right": 0}
        a = a or {"cells": 0, "predicted": 0, "right": 0}
        for k in ("cells", "predicted", "right"):
            tot["h" + k] += h[k]
            tot["a" + k] += a[k]
        tot["mp"] += mc["programs"]
        tot["me"] += mc["predicted_everywhere"]
        lines.append(f"| {fw} | {_ratio(h)} | {_ratio(a)} | {mc['predicted_everywhere']} / {mc['programs']} |")
    lines.append(f"| **all** | {_ratio({k: tot['h' + k] for k in ('cells', 'predicted', 'right')})} | "
                 f"{_ratio({k: tot['a' + k] for k in ('cells', 'predicted', 'right')})} | {tot['me']} / {tot['mp']} |")
    reasons = sorted(val["not_predicted"].items(), key=lambda kv: (-kv[1], kv[0]))
    lines += ["", f"Why headline cells were not predicted (the {min(15, len(reasons))} commonest of {len(reasons)} "
              f"reasons, {sum(n for _, n in reasons):,} cells; \"no rule\" is with the cell's own case left out):", ""]
    for reason, n in reasons[:15]:
        lines.append(f"- {n}: {reason}")
    lines += ["", "## The rules in each framework's newest release (reverse mode, float64, CPU)", "",
              "Each cell: the operation (short name) and its rule; *since R*: the release where it last changed.",
              "", *front_table(doc, frameworks, anchors=True)]
    misses = val["misses"]
    cells = sum(m["cells"] for m in misses)
    lines += ["", f"## Programs predicted wrong ({len(misses)} programs, {cells:,} cells)", "",
              "The measured value is not what the program's operations' rules compose to: the point is not exactly a "
              "kink in floating point, a fused kernel, a compiler's decomposition, a custom VJP, or a rule that "
              f"depends on more than the kind of kink. The first {MAX_MISSES} programs (by case) are listed with one "
              "example cell (float64, reverse mode, CPU where there is one); all are in `rules.json.gz`.", "",
              "| case | framework | program | cells (modes; dtypes) | example | measured | predicted | rules used | "
              "first release |",
              "|---|---|---|---|---|---|---|---|---|"]
    for m in misses[:MAX_MISSES]:
        lines.append(f"| {m['case']} | {m['framework']} | `{_cell(m['program'])}` | {m['cells']} "
                     f"({', '.join(m['modes'])}; {', '.join(m['dtypes'])}) | {m['example']} | {_vec(m['measured'])} | "
                     f"{_vec(m['predicted'])} | {_cell(m['rules'])} | {m['first_release']} |")
    return "\n".join(lines) + "\n"


def front_table(doc: Mapping[str, Any], frameworks: Sequence[str], *, anchors: bool = False) -> list[str]:
    """The rules table's Markdown lines: one row per operation family and kind of kink, one column per framework,
    each cell its operations' rules in the newest release and the release where each last changed; with ``anchors``
    (the rules page) each rule carries its :func:`rule_anchor`, where ``kinkcheck cite --rule`` links."""
    frameworks = [fw for fw in frameworks if any(r["framework"] == fw for r in doc["rules"])]
    lines = ["| family | kind of kink | " + " | ".join(frameworks) + " |", "|---|---|" + "---|" * len(frameworks)]
    rows: dict[tuple[str, str], dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for h in rule_rows(doc):
        mark = f'<a id="{rule_anchor(h.operation, h.kind)}"></a>' if anchors else ""
        rows[(h.family, h.kind)][h.framework].append(f"{mark}`{_short(h.operation)}` {cell_text(h)}")
    for (fam, kind), cols in sorted(rows.items()):
        lines.append(f"| {fam} | {kind} | " + " | ".join("<br>".join(cols.get(fw, [])) or "—" for fw in frameworks)
                     + " |")
    return lines


def _ratio(t: Mapping[str, int]) -> str:
    if not t["cells"]:
        return "—"
    right = 100 * t["right"] / t["predicted"] if t["predicted"] else 0.0
    return f"{t['right']:,} / {t['predicted']:,} / {t['cells']:,} ({right:.1f} % right, " \
           f"{100 * t['predicted'] / t['cells']:.1f} % predicted)"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _vec(v: Sequence[Any]) -> str:
    return decimal_vector(v) if len(v) != 1 else decimal(v[0])
