"""The report's words and marks, shared by every page and face: the label legend and its marks and colours,
anchors and page names, and the formatting of numbers, values, exact values, Clarke sets and oracle findings
(:mod:`kinkcheck.render.view` builds the pages' views with them; ``cite``, ``migrate``, ``check``, ``explain``
and the plots use them too)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, NamedTuple

from kinkcheck.language.anchors import program_slug, slug
from kinkcheck.language.decimals import decimal
from kinkcheck.report.model import (COMPARISON_RECORDS, Exact, Observation, Oracle, flatten)
from kinkcheck.vocabulary import NOT_JUDGED, ORACLE_KIND_RECORDS

#: One line per label, for the legend (the order of :data:`kinkcheck.oracles.classify.LABELS` is the precedence).
LABEL_HELP: dict[str, str] = {
    "error": "the program raised; the message is listed under the case's errors and unavailable cells",
    "unavailable": "a name, dtype or mode the program needs does not exist in that version",
    "nan": "at least one component is NaN",
    "+inf": "a component is +inf",
    "-inf": "a component is -inf",
    "derivative": "f is differentiable at the point and the value is its derivative",
    "left": "equals the left one-sided derivative f'(x0-)",
    "right": "equals the right one-sided derivative f'(x0+)",
    "left-piece": "at a jump: equals the slope of the piece left of the point (not a derivative of f there: its "
                  "one-sided derivative on a jumping side is infinite)",
    "right-piece": "at a jump: equals the slope of the piece right of the point (not a derivative of f there)",
    "mean": "equals the midpoint of the Clarke set ((left + right) / 2 for a scalar kink)",
    "split-even": "a tie: the mean of the tied pieces' gradients (max(x, y) at x = y: [0.5, 0.5])",
    "first": "a tie: each tied max, min or order statistic credits its earliest tied input, by input position "
             "(max(x, y) at x = y: [1, 0])",
    "last": "a tie: each tied max, min or order statistic credits its latest tied input (max(x, y) at x = y: [0, 1])",
    "one-index": "a tie: one tied piece's gradient, neither first nor last (or a tie input position does not name)",
    "min-norm": "the minimum-norm element of the Clarke generalized gradient (PyTorch's documented rule)",
    "in-clarke": "inside the Clarke generalized gradient, but none of the above",
    "not-lipschitz": "f is not locally Lipschitz at the point (a jump, an infinite one-sided derivative), so no "
                     "Clarke set exists; the finite value is neither one-sided derivative nor their mean",
    "outside-clarke": "not an element of the Clarke generalized gradient (or, at the edge of the domain, neither "
                      "one-sided derivative)",
    "outside-domain": "f has no real value at the point, or none next to it; a finite value is not a derivative",
    "not-judged": "the sympy oracle could not judge the case (the reason is under the case); the value is shown "
                  "unjudged",
    "own-constants": "judged against the program's own function, whose documented constants differ from the "
                     "case's (the program's note names them: tinygrad's SELU λ = 1.0507)",
}


class Mark(NamedTuple):
    """How a label is drawn in a strip: ``emoji`` in Markdown, ``colour`` (CSS) in HTML; ``family`` names the
    hue the label shares with its kin."""

    emoji: str
    colour: str
    family: str


#: Strip square per label. One hue per family (green: the derivative or the minimum-norm element; blue: a
#: one-sided derivative; yellow: a midpoint or even share; orange: a tie given to one piece; brown: elsewhere in
#: the Clarke set; red: not a generalized gradient; purple: not finite; black: raised; white/grey: nothing to
#: judge), a square for the first member of a family and a circle (or diamond) for the next, so a change of
#: convention changes the strip.
LABEL_MARK: dict[str, Mark] = {
    "derivative": Mark("🟩", "#43a047", "derivative or minimum norm"),
    "min-norm": Mark("🟢", "#81c784", "derivative or minimum norm"),
    "left": Mark("🟦", "#1e88e5", "one-sided"),
    "right": Mark("🔵", "#90caf9", "one-sided"),
    "left-piece": Mark("🔷", "#5c6bc0", "a piece's slope at a jump"),
    "right-piece": Mark("🔹", "#9fa8da", "a piece's slope at a jump"),
    "mean": Mark("🟨", "#fdd835", "midpoint"),
    "split-even": Mark("🟡", "#fff176", "midpoint"),
    "first": Mark("🟧", "#fb8c00", "tie to one piece"),
    "last": Mark("🟠", "#ffb74d", "tie to one piece"),
    "one-index": Mark("🔶", "#ffe0b2", "tie to one piece"),
    "in-clarke": Mark("🟫", "#a1887f", "elsewhere in the Clarke set"),
    "outside-clarke": Mark("🟥", "#e53935", "not a generalized gradient"),
    "not-lipschitz": Mark("🔴", "#ef9a9a", "not a generalized gradient"),
    "outside-domain": Mark("🔻", "#b71c1c", "not a generalized gradient"),
    "nan": Mark("🟪", "#8e24aa", "not finite"),
    "+inf": Mark("🟣", "#ce93d8", "not finite"),
    "-inf": Mark("💜", "#6a1b9a", "not finite"),
    "error": Mark("⬛", "#212121", "raised"),
    "unavailable": Mark("⬜", "#e0e0e0", "nothing to judge"),
    "not-judged": Mark("⚪", "#bdbdbd", "nothing to judge"),
    "own-constants": Mark("🔖", "#78909c", "judged by the program's own constants (never first)"),
}


#: The strip square of a release with no observation of the program.
NO_OBSERVATION = Mark("➖", "#ffffff", "no observation")

#: A strip's letter per label (:data:`LABEL_MARK`), for where an emoji may not show: the site draws each in a box
#: (:mod:`kinkcheck.render.site`), ``kinkcheck ask`` prints them in a terminal. The emoji need a colour-emoji font
#: and tell left from right by shape alone; a letter reads anywhere.
LABEL_LETTER: dict[str, str] = {
    "derivative": "D", "min-norm": "m", "left": "L", "right": "R", "left-piece": "l", "right-piece": "r",
    "mean": "M", "split-even": "S", "first": "F", "last": "Z", "one-index": "I", "in-clarke": "C",
    "outside-clarke": "X", "not-lipschitz": "J", "outside-domain": "O", "nan": "N", "+inf": "+", "-inf": "-",
    "error": "E", "unavailable": "U", "not-judged": "?", "own-constants": "K",
}
#: The letter of a release with no observation (:data:`NO_OBSERVATION`).
NO_OBSERVATION_LETTER = "·"


DTYPE_SHORT = {"float64": "f64", "float32": "f32", "float16": "f16", "bfloat16": "bf16"}


def mark(label: str | None) -> Mark:
    """The strip square of ``label`` (:data:`NO_OBSERVATION` for None or an unknown label)."""
    return LABEL_MARK.get(label, NO_OBSERVATION) if label is not None else NO_OBSERVATION


#: The pages of the mode, dtype and device disagreements (each under a code host's page size at 169 cases):
#: file stem → title. The first holds the introduction.
MODE_PAGES: dict[str, str] = {
    "mode-disagreements": "by mode (functional, forward), device and platform",
    "compiled-disagreements": "compiled, jit and vmap against eager",
    "dtype-disagreements": "float32 and float16 against float64",
    "bfloat16-disagreements": "bfloat16 against float64",
}


def mode_page(comparison: str) -> str:
    """The :data:`MODE_PAGES` stem a comparison (``"reverse vs forward"``, ``"float64 vs float16"``) is shown on."""
    if comparison.startswith("float64 vs bfloat16"):
        return "bfloat16-disagreements"
    if comparison.startswith("float64 vs"):
        return "dtype-disagreements"
    page = next((c.page for c in COMPARISON_RECORDS if c.name == comparison), None)
    if page is not None:  # a mode against reverse mode: the page its record names
        return page
    if comparison.startswith("CPU vs "):  # an accelerator: devices.md, one row per program with its modes
        return "devices"
    if is_isa_comparison(comparison):  # an x86-64 level against another: isa-levels.md, laid out as devices.md
        return "isa-levels"
    return "mode-disagreements"


def is_isa_comparison(comparison: str) -> bool:
    """Whether a comparison is one x86-64 instruction-set level against another (``"x86-64-v4 vs x86-64-v2"``:
    :func:`kinkcheck.judge.sections.place_comparison`), shown on ``isa-levels.md``."""
    return comparison.startswith("x86-64")


def case_anchor(case_id: str) -> str:
    """``case-<slug>``: the anchor of a case (on its page, in the HTML, and in the index's list of cases)."""
    return f"case-{slug(case_id)}"


#: The folder of the per-case pages, beside the index page ``conventions.md``.
CASES_DIR = "cases"


#: The index's long sections, each on a page of its own beside it (a code host renders pages up to a few
#: hundred KB; with nine frameworks these tables alone are twice that).
SECTION_PAGES: tuple[str, ...] = (
    "changed-in.md", "changed-in-raises.md", "disagreements-within.md", "disagreements-across.md",
    "mode-disagreements.md", "compiled-disagreements.md", "dtype-disagreements.md", "bfloat16-disagreements.md",
    "devices.md", "isa-levels.md", "census.md")


def case_file(case_id: str) -> str:
    """The file name of a case's Markdown page: ``<slug of case id>.md`` (under ``cases/``)."""
    return f"{slug(case_id)}.md"


def case_page(case_id: str) -> str:
    """The case's own page, relative to the reports folder: ``"cases/relu-at-0.md"`` for ``relu@0``
    (:func:`case_file` under :data:`CASES_DIR`)."""
    return f"{CASES_DIR}/{case_file(case_id)}"


def row_anchor(case_id: str, framework: str, program: str) -> str:
    """``case-<slug>--<framework>-<program slug>``: the anchor of a program's row
    (:func:`kinkcheck.language.anchors.program_slug`: ``>=``, ``<=``, ``==``, ``!=`` read as words, so ``x > 0`` and
    ``x >= 0`` name two rows)."""
    return f"case-{slug(case_id)}--{framework}-{program_slug(program)}"


def mode_anchor(case_id: str, framework: str, program: str, mode: str) -> str:
    """``<row anchor>--modes--<slug of mode>``: the program's cell in the modes table of the newest release."""
    return f"{row_anchor(case_id, framework, program)}--modes--{slug(mode)}"


def release_anchor(case_id: str, framework: str, program: str, environment: str) -> str:
    """``<row anchor>--<slug of environment id>``: one release's square in a program's strip (reverse mode)."""
    return f"{row_anchor(case_id, framework, program)}--{slug(environment)}"


def fmt_number(v: Any, digits: int = 6) -> str:
    """Shortest readable form: ``0``, ``-0``, ``0.5``, ``0.333333``, ``nan``, ``inf`` (``digits`` significant)."""
    if isinstance(v, str):
        return v
    f = float(v)
    if f == 0:
        return "-0" if str(f).startswith("-") else "0"
    if f.is_integer() and abs(f) < 1e15:
        return str(int(f))
    return f"{f:.{digits}g}"


def fmt_distinct(values: Sequence[Sequence[Any]]) -> list[str]:
    """Each value (a sequence of numbers) as :func:`fmt_number` prints it, joined by ", ", with more
    significant digits (9, 12, then 17, which tells every two float64 apart) where 6 would print two
    different values alike (selu'(0) exactly, 1.7581, beside a value one ulp away)."""
    distinct = len({tuple(v if isinstance(v, str) else float(v) for v in vec) for vec in values})
    texts: list[str] = []
    for digits in (6, 9, 12, 17):
        texts = [", ".join(fmt_number(v, digits) for v in vec) for vec in values]
        if len(set(texts)) == distinct:
            break
    return texts


def fmt_value(value: dict[str, Any] | None) -> str:
    """A gradient per input: ``0.5`` for one scalar input, ``x=0.5, y=0.5``, ``[0.333, 0, …]`` for a vector;
    ``—`` for None."""
    if value is None:
        return "—"
    parts = []
    for k, v in value.items():
        text = "[" + ", ".join(fmt_number(x) for x in flatten(v)) + "]" if isinstance(v, list) else fmt_number(v)
        parts.append(text if len(value) == 1 else f"{k}={text}")
    return ", ".join(parts)


def fmt_matrix(rows: Any) -> str:
    """``[[932, 2376], [354, 904]]`` with numbers in :func:`fmt_number` form; ``—`` for None."""
    if rows is None:
        return "—"
    if isinstance(rows, list):
        return "[" + ", ".join(fmt_matrix(r) for r in rows) + "]"
    return fmt_number(rows)


def fmt_vector(v: Sequence[Any]) -> str:
    """A flat gradient vector: one number alone, else ``[a, b]``."""
    return fmt_number(v[0]) if len(v) == 1 else "[" + ", ".join(fmt_number(x) for x in v) + "]"


def describe_observation(ob: Observation, labels: bool = True, limit: int | None = None) -> str:
    """``0.5 (mean)``, ``[0, 1] (last)``, ``error``; values as measured; the first label when known. ``limit``: a
    vector longer than that shows its first and last elements around ``…`` and its length
    (``[0, 0, 0, …, 0, 1] (300 elements)``)."""
    if ob.status != "ok" or ob.value is None:
        return ob.status
    flat = [v for vals in ob.value.values() for v in flatten(vals)]
    if limit is not None and len(flat) > limit:
        head, tail = fmt_vector(flat[:3])[:-1], fmt_vector(flat[-2:])[1:]
        text = f"{head}, …, {tail} ({len(flat)} elements)"
    else:
        text = fmt_vector(flat)
    return f"{text} ({ob.labels[0]})" if labels and ob.labels else text


def fmt_exact(entry: Exact | Sequence[Exact | None] | None) -> str:
    """An oracle value: its exact text (``1/2``, ``sqrt(2)/2``), ``≈float`` when the text is longer than 24
    characters (selu's 60-digit rationals; the JSON keeps them exact), a vector as ``(a, b)``; ``—`` for None."""
    if entry is None:
        return "—"
    if isinstance(entry, Exact):
        if len(entry.exact) <= 24 and not _LONG_DIGITS.search(entry.exact):
            return entry.exact

        return f"≈{decimal(entry.float_)}"
    entries = list(entry)
    if len(entries) == 1:
        return fmt_exact(entries[0])
    return "(" + ", ".join(fmt_exact(e) for e in entries) + ")"


def clarke_text(oracle: Oracle) -> str:
    """The Clarke generalized gradient: ``[a, b]`` (scalar), ``{a}``, ``conv{(a, b), …}``; ``none: f is not
    locally Lipschitz`` or ``undefined`` when there is none."""
    verts = oracle.clarke
    if verts is None:
        return "none: f is not locally Lipschitz" if oracle.lipschitz is False else "undefined"
    if len(oracle.components) == 1:
        vals = [fmt_exact(v[0]) for v in verts]
        return f"[{vals[0]}, {vals[-1]}]" if len(vals) > 1 else f"{{{vals[0]}}}"
    if len(verts) == 1:
        return "{" + fmt_exact(verts[0]) + "}"
    return "conv{" + ", ".join(fmt_exact(v) for v in verts) + "}"


#: What each kind the oracle finds means: the noun, then what it says of f at the point (the vocabulary's records).
ORACLE_KINDS: dict[str, tuple[str, str]] = {k.name: (k.noun, k.says) for k in ORACLE_KIND_RECORDS}


def oracle_finding(kind: str, lipschitz: bool | None, markdown: bool = False) -> str:
    """What the oracle finds, in one phrase: the kind and local Lipschitz continuity together (``a kink:
    continuous, not differentiable; not locally Lipschitz (no Clarke set)``), so that a case page and ``grad``
    say the same thing and never a kind that a later sentence contradicts. ``markdown``: the noun in bold and
    the rest in parentheses, for a case page's first sentence."""
    noun, says = ORACLE_KINDS.get(kind, (kind, ""))
    lip = "" if kind == NOT_JUDGED else \
        {True: "locally Lipschitz", False: "not locally Lipschitz (no Clarke set)"}.get(lipschitz, "")  # type: ignore[arg-type]
    if markdown:
        detail = "; ".join(t for t in (says, lip.replace(" (no Clarke set)", ", no Clarke set")) if t)
        return f"**{noun}**" + (f" ({detail})" if detail else "")
    return noun + (f": {says}" if says else "") + (f"; {lip}" if lip else "")


def oracle_reason(oracle: Oracle) -> str:
    """Why the oracle did not judge (``"not judged: …"``); ``""`` when it did."""
    if oracle.kind != NOT_JUDGED:
        return ""
    return oracle.reason or "not judged: no reason given"


def md_cell(text: Any) -> str:
    """Text safe inside one Markdown table cell: pipes escaped, newlines folded."""
    return " ".join(str(text).split()).replace("|", "\\|")


def md_prose(text: Any) -> str:
    """A paragraph of Markdown (a case's note): a line that begins with ``|`` (``|R00| is …``) has it escaped,
    so no Markdown reader takes the line for a table row."""
    return re.sub(r"(?m)^(\s*)\|", r"\1\\|", str(text))


def md_text(text: Any) -> str:
    """Free text (an error message) safe in a Markdown table cell outside code: :func:`md_cell`, and ``&``,
    ``<``, ``>`` as entities, so ``<lambda>`` is shown rather than taken for an HTML tag."""
    return md_cell(_LONG_DIGITS.sub(lambda m: m.group()[:6] + "…", str(text))
                   .replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;"))


#: A run of more digits than a float64 holds in a quoted message: an identifier (TensorFlow's
#: ``config_proto=3175580994766145631``), shown by its first six digits; the Parquet keeps the message whole.
_LONG_DIGITS = re.compile(r"\d{18,}")
