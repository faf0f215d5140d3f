"""Render the report document as Markdown (Jinja2 template ``templates/conventions.md.j2``).

Anchors are stable: ``case-<slug>`` for a case, ``case-<slug>--<framework>-<slug of program>`` for a
program row, and ``env-<environment id>`` for an environment, so a report link can be cited.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["render_markdown", "slug", "fmt_number", "fmt_value"]


#: One line per label, for the legend (the order of :data:`kinkcheck.classify.LABELS` is the precedence).
LABEL_HELP: dict[str, str] = {
    "error": "the program raised; the message is listed under *Errors and unavailable cells*",
    "unavailable": "a name, dtype or mode the program needs does not exist in that version",
    "nan": "at least one component is NaN",
    "+inf": "a component is +inf",
    "-inf": "a component is -inf",
    "derivative": "f is differentiable at the point and the value is its derivative",
    "left": "equals the left one-sided derivative f'(x0-)",
    "right": "equals the right one-sided derivative f'(x0+)",
    "mean": "equals the midpoint of the Clarke set ((left + right) / 2 for a scalar kink)",
    "split-even": "a tie: the gradient is shared evenly among the tied pieces",
    "first": "a tie: everything goes to the first tied piece (lowest input position)",
    "last": "a tie: everything goes to the last tied piece",
    "one-index": "a tie: everything goes to one tied piece, neither first nor last",
    "min-norm": "the minimum-norm element of the Clarke generalized gradient (PyTorch's documented rule)",
    "in-clarke": "inside the Clarke generalized gradient, but none of the above",
    "not-lipschitz": "f is not locally Lipschitz at the point (a jump, an infinite one-sided derivative), so no "
                     "Clarke set exists; the finite value is neither one-sided derivative nor their mean",
    "outside-clarke": "not an element of the Clarke generalized gradient (or, at the edge of the domain, neither "
                      "one-sided derivative)",
    "outside-domain": "f is not real-valued near the point; a finite value is not a derivative",
    "not-judged": "the sympy oracle could not judge the case (the reason is under the case); the value is shown "
                  "unjudged",
}


def slug(text: str) -> str:
    """Anchor-safe, collision-free id: lowercase letters, digits and single dashes.

    ``@`` reads ``-at-``; a minus sign (a ``-`` not preceded by a letter or digit) reads ``minus``, so
    ``clamp@-1`` → ``clamp-at-minus-1`` and ``clamp@1`` → ``clamp-at-1`` stay distinct, while the
    separator in ``sqrt-abs@0`` stays a dash: ``sqrt-abs-at-0``.
    """
    out = []
    prev = ""
    for ch in text.lower():
        if ch == "@":
            out.append("-at-")
        elif ch == "-" and not prev.isalnum():
            out.append("-minus-")
        elif ch.isalnum() and ch.isascii():
            out.append(ch)
        else:
            out.append("-")
        if not ch.isspace():
            prev = ch
    return re.sub(r"-+", "-", "".join(out)).strip("-") or "x"


def fmt_number(v: Any) -> str:
    """Shortest readable form: ``0``, ``-0``, ``0.5``, ``0.333333``, ``nan``, ``inf``."""
    if isinstance(v, str):
        return v
    f = float(v)
    if f == 0:
        return "-0" if str(f).startswith("-") else "0"
    if f.is_integer() and abs(f) < 1e15:
        return str(int(f))
    return f"{f:.6g}"


def _flat(v: Any) -> list[Any]:
    if isinstance(v, list):
        out: list[Any] = []
        for x in v:
            out.extend(_flat(x))
        return out
    return [v]


def fmt_value(value: dict[str, Any] | None) -> str:
    """A gradient per input: ``0.5`` for one scalar input, ``x=0.5, y=0.5``, ``[0.333, 0, …]`` for a vector."""
    if value is None:
        return "—"
    parts = []
    for k, v in value.items():
        if isinstance(v, list):
            text = "[" + ", ".join(fmt_number(x) for x in _flat(v)) + "]"
        else:
            text = fmt_number(v)
        parts.append(text if len(value) == 1 else f"{k}={text}")
    return ", ".join(parts)


def fmt_matrix(rows: Any) -> str:
    """``[[932, 2376], [354, 904]]`` with numbers in :func:`fmt_number` form."""
    if rows is None:
        return "—"
    if isinstance(rows, list):
        return "[" + ", ".join(fmt_matrix(r) for r in rows) + "]"
    return fmt_number(rows)


def _exact(entry: Any) -> str:
    """An oracle value from :meth:`OracleResult.to_json`: exact text, or a vector of them."""
    if entry is None:
        return "—"
    if isinstance(entry, list):
        if len(entry) == 1:
            return _exact(entry[0])
        return "(" + ", ".join(_exact(e) for e in entry) + ")"
    if isinstance(entry, dict):
        text = str(entry.get("exact"))
        if len(text) > 24:  # 60-digit rationals (selu's constants) help nobody; the JSON keeps them exact
            return f"≈{fmt_number(entry.get('float'))}"
        return text
    return str(entry)


def _clarke(case: dict[str, Any]) -> str:
    verts = case.get("clarke")
    if verts is None:
        return "none: f is not locally Lipschitz" if case.get("lipschitz") is False else "undefined"
    if len(case["components"]) == 1:
        vals = [_exact(v[0]) for v in verts]
        return f"[{vals[0]}, {vals[-1]}]" if len(vals) > 1 else f"{{{vals[0]}}}"
    if len(verts) == 1:
        return "{" + _exact(verts[0]) + "}"
    return "conv{" + ", ".join(_exact(v) for v in verts) + "}"


def oracle_reason(case: dict[str, Any]) -> str:
    """Why the oracle did not judge a case (``"not judged: …"``), for its oracle row; ``""`` when it did."""
    if case.get("kind") != "not-judged":
        return ""
    return str(case.get("reason") or "not judged: no reason given")


def _md_cell(text: str) -> str:
    """Text safe inside one Markdown table cell: pipes escaped, newlines folded."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _one(ob: dict[str, Any] | None) -> str:
    if ob is None:
        return "—"
    if ob["status"] != "ok":
        return ob["status"]
    return f"{fmt_value(ob['value'])} <sub>{ob['labels'][0]}</sub>"


def dtype_cell(obs: list[dict[str, Any] | None], one: Any, line: Any) -> Any:
    """One environment's cell: ``one`` of the first dtype's observation, then ``line(short dtype, one(o))``
    for each other dtype whose rendering differs; None when there is no observation."""
    present = [o for o in obs if o is not None]
    if not present:
        return None
    first = one(present[0])
    out = first
    for o in present[1:]:
        text = one(o)
        if str(text) != str(first):
            out += line(DTYPE_SHORT.get(o["dtype"], o["dtype"]), text)
    return out


def _cell(obs: list[dict[str, Any] | None]) -> str:
    cell = dtype_cell(obs, _one, lambda d, text: f"<br>{d}: {text}")
    return "—" if cell is None else cell


DTYPE_SHORT = {"float64": "f64", "float32": "f32", "float16": "f16", "bfloat16": "bf16"}


def _columns(doc: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Framework → one column per measured environment (environments without observations are skipped)."""
    measured = {o["environment"] for o in doc["observations"]}
    cols: dict[str, list[dict[str, Any]]] = {}
    for env in doc["environments"]:
        if env["id"] in measured:
            cols.setdefault(env["framework"], []).append(
                {"env": env["id"], "title": f"{env['framework_version']}" + ("" if env["device"] == "cpu" else f" {env['device']}")})
    return cols


def render_markdown(doc: dict[str, Any], json_sha256: str | None = None) -> str:
    """The whole Markdown report as one string, a function of ``doc`` alone (byte-identical for the same doc).

    ``json_sha256``: the SHA-256 (hex) of the ``conventions.json`` written beside it, named in the footer so a
    reader can tell the Markdown belongs to that JSON; left out when None.
    """
    from importlib import resources

    import jinja2

    text = resources.files("kinkcheck.report").joinpath("templates/conventions.md.j2").read_text()
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True, trim_blocks=True,
                             lstrip_blocks=True, autoescape=False)
    env.filters.update(matrix=fmt_matrix, slug=slug, num=fmt_number, value=fmt_value, exact=_exact, clarke=_clarke,
                       cell=_cell, brief=_brief, vec=fmt_vector, reason=oracle_reason, md_cell=_md_cell)
    return env.from_string(text).render(**context(doc), json_sha256=json_sha256)


def context(doc: dict[str, Any]) -> dict[str, Any]:
    """What the Markdown and HTML templates render: the document plus its tables, grouped for display."""
    cols = _columns(doc)
    dtypes = [d for d in ("float64", "float32", "float16", "bfloat16") if any(o["dtype"] == d for o in doc["observations"])]
    index = {(o["case"], o["framework"], o["program"], o["mode"], o["environment"], o["dtype"]): o
             for o in doc["observations"]}
    from kinkcheck.frameworks.base import MODE_INFO, MODES

    env_modes: dict[str, list[str]] = {}
    for o in doc["observations"]:
        ms = env_modes.setdefault(o["environment"], [])
        if o["mode"] not in ms:
            ms.append(o["mode"])
    verdicts = {(r["case"], r["framework"], r["program"], e): r for r in doc["conformance"]["rows"]
                for e in r["environments"]}
    departing = {(r["case"], r["framework"], r["program"]) for r in doc["conformance"]["rows"] if r["verdict"] == "departs"}
    tables: dict[str, list[dict[str, Any]]] = {}
    mode_tables: dict[str, list[dict[str, Any]]] = {}
    for case in doc["cases"]:
        tables[case["id"]], mode_tables[case["id"]] = [], []
        for fw, fw_cols in cols.items():
            progs = [p["program"] for p in case["programs"] if p["framework"] == fw]
            rows = [
                {"program": p, "mode": "reverse", "framework": fw,
                 "cells": [[index.get((case["id"], fw, p, "reverse", c["env"], d)) for d in dtypes] for c in fw_cols],
                 "conformance": _verdict(verdicts.get((case["id"], fw, p, fw_cols[-1]["env"])))}
                for p in progs
            ]
            if rows:
                tables[case["id"]].append({"framework": fw, "cols": fw_cols, "rows": rows})
            newest = next((c for c in reversed(fw_cols) if len(env_modes.get(c["env"], [])) > 1), None)
            if newest is None or not progs:
                continue
            modes = [m for m in MODES if m in env_modes[newest["env"]]]
            mode_tables[case["id"]].append({
                "framework": fw, "title": newest["title"], "modes": modes,
                "rows": [{"program": p, "cells": [[index.get((case["id"], fw, p, m, newest["env"], d)) for d in dtypes]
                                                  for m in modes]} for p in progs],
            })
    from kinkcheck.classify import LABELS

    groups: dict[str, list[dict[str, Any]]] = {}
    for r in doc["mode_disagreements"]["rows"]:
        groups.setdefault(r["comparison"], []).append(r)
    return dict(
        conformance_rows=[r for r in doc["conformance"]["rows"] if (r["case"], r["framework"], r["program"]) in departing],
        doc=doc, tables=tables, mode_tables=mode_tables, dtypes=dtypes, problems=_problems(doc),
        labels=[lb for lb in LABELS if lb in LABEL_HELP], label_help=LABEL_HELP, mode_groups=list(groups.items()),
        mode_help={m: MODE_INFO[m] for m in MODES},
    )


def fmt_vector(v: list[Any]) -> str:
    """A flat gradient vector: one number alone, else ``[a, b]``."""
    return fmt_number(v[0]) if len(v) == 1 else "[" + ", ".join(fmt_number(x) for x in v) + "]"


def _verdict(row: dict[str, Any] | None) -> str:
    """The rule column of a case table: the verdict, and what the rule admits when the program departs."""
    if row is None:
        return "—"
    if row["verdict"] == "departs":
        return "**departs**: admits " + " or ".join(fmt_vector(v) for v in row["predicted"])
    return row["verdict"]


def _brief(cell: dict[str, Any]) -> str:
    """A mode-disagreement cell: ``value label`` or the status, and the rounded input where there is one."""
    text = f"{fmt_value(cell['value'])} {cell['label']}" if cell["status"] == "ok" else \
        f"{cell['status']}: {(cell['error'] or '')[:80]}".replace("|", "\\|")
    if cell.get("input"):
        text += f" (*input* {fmt_value(cell['input'])})"
    return text


def _problems(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Error and unavailable observations, one row per case, program, mode, status and message."""
    env_by_id = {e["id"]: e for e in doc["environments"]}
    out: dict[tuple[str, ...], dict[str, Any]] = {}
    for o in doc["observations"]:
        if o["status"] == "ok":
            continue
        key = (o["case"], o["framework"], o["program"], o["mode"], o["status"], o["error"] or "")
        row = out.setdefault(key, {**{k: o[k] for k in ("case", "framework", "program", "mode", "status", "error")},
                                   "dtypes": [], "envs": []})
        if o["dtype"] not in row["dtypes"]:
            row["dtypes"].append(o["dtype"])
        if o["environment"] not in row["envs"]:
            row["envs"].append(o["environment"])
    for row in out.values():
        row["releases"] = ", ".join(env_by_id[e]["framework_version"] + ("" if env_by_id[e]["device"] == "cpu"
                                                                          else f" {env_by_id[e]['device']}")
                                    for e in row["envs"])
    return list(out.values())
