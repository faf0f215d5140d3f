"""``kinkcheck cite``: one sentence, ready to paste, stating a measured convention, and a citation entry.

The sentence names the value, its label, the framework release, device, dtype and mode, whether the value
follows the framework's documented rule, and the report anchor of the cell
(``reports/conventions.md#case-<case>--<framework>-<program>--<environment>``). The entry cites the report
as a dataset (BibTeX ``@misc`` or a CITATION.cff ``references`` item), with its generation date and catalog
hash. Everything comes from the report JSON; nothing is measured here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kinkcheck import expr as ex
from kinkcheck.catalog import FRAMEWORKS
from kinkcheck.report.markdown import LABEL_HELP, fmt_value, slug

__all__ = ["CiteError", "Citation", "cite", "principal_case", "bibtex", "cff", "load_report"]

FRAMEWORK_NAMES = {"torch": "PyTorch", "jax": "JAX"}
REPORT_MD = "reports/conventions.md"


class CiteError(ValueError):
    """The program, case or environment is not in the report (one-line reason)."""


@dataclass(frozen=True)
class Citation:
    """One cited cell: the sentence, its report anchor, the observation and environment it states, the case
    cited and the program's other cases (those not cited: the command line lists them after the sentence)."""

    sentence: str
    anchor: str
    observation: dict[str, Any]
    environment: dict[str, Any]
    case: str = ""
    others: tuple[str, ...] = ()


def load_report(path: str | Path) -> dict[str, Any]:
    """The report document, checked before use (:func:`kinkcheck.validate.report_problem`).

    Raises
    ------
    CiteError
        The file is missing, unreadable, not JSON or too deeply nested, not a ``kinkcheck/conventions/v1``
        report, or a report with missing or mistyped parts (the first one named, e.g. a hand-made or
        truncated report).
    """
    from kinkcheck.validate import read_json, report_problem

    doc, _text = read_json(path, CiteError, missing=f"no report at {path} (run `nox -s report`, or pass --report)")
    problem = report_problem(doc)
    if problem:
        raise CiteError(f"{path}: {problem}")
    return doc


def check_cell(framework: str | None, mode: str, dtype: str) -> None:
    """Raises CiteError for a dtype or mode no framework (or not ``framework``) has."""
    from kinkcheck.frameworks.base import FRAMEWORK_MODES, check_dtype, check_mode

    try:
        check_dtype(dtype)
        check_mode(mode)
    except ex.ExprError as err:
        raise CiteError(str(err)) from None
    if framework is not None and mode not in FRAMEWORK_MODES.get(framework, (mode,)):
        raise CiteError(f"{framework} has no {mode} mode (its modes: {', '.join(FRAMEWORK_MODES[framework])})")


def _matches(program: str, case: dict[str, Any]) -> str | None:
    """The case's program id that ``program`` spells (aliases and spacing canonicalised), or None."""
    ids = {p["program"] for p in case["programs"]}
    if program in ids:
        return program
    try:
        canonical = ex.unparse(ex.parse(program, case["at"].keys(), FRAMEWORKS))
    except ex.ExprError:
        return None
    return canonical if canonical in ids else None


#: The smallest positive normal float32; a nonzero coordinate below it makes a case a floating-point edge.
_TINY = 2.0 ** -126


def _flat(value: Any) -> list[float]:
    return [y for v in value for y in _flat(v)] if isinstance(value, list) else [float(value)]


def _ordinary_kink(case: dict[str, Any]) -> bool:
    """Whether a case is the function's kink at ordinary numbers: the sympy oracle finds it non-differentiable
    (kind kink, jump, undefined, ...) and no coordinate is a negative zero or a float32 subnormal."""
    import math

    xs = [x for v in case["at"].values() for x in _flat(v)]
    edge = any((x == 0 and math.copysign(1.0, x) < 0) or 0 < abs(x) < _TINY for x in xs)
    return case.get("kind") != "differentiable" and not edge


def principal_case(cases: list[dict[str, Any]]) -> dict[str, Any]:
    """The case ``kinkcheck cite`` states when none is named, among the cases that measure one program.

    The rule: the first case, in catalog order, whose point is the function's kink at ordinary numbers —
    one where the sympy oracle finds the function not differentiable, held without a negative zero or a
    float32 subnormal (cases such as ``relu@-0.0``, ``relu@1e-45`` or ``maximum@-0.0`` probe a
    floating-point edge of a kink that another case states plainly). When no case qualifies, the first case
    in catalog order. So ``torch.relu(x)`` → ``relu@0``, ``torch.maximum(x, y)`` → ``maximum@tie``,
    ``torch.abs(x)`` → ``abs@0``, ``torch.clamp(x, -1, 1)`` → ``clamp@-1``.

    Raises
    ------
    ValueError
        ``cases`` is empty.
    """
    if not cases:
        raise ValueError("no case to choose from")
    return next((c for c in cases if _ordinary_kink(c)), cases[0])


def cite(doc: dict[str, Any], program: str, case: str | None = None, framework_version: str | None = None,
         mode: str = "reverse", dtype: str = "float64", device: str = "cpu",
         framework: str | None = None) -> Citation:
    """The citation sentence for one cell of the report.

    Parameters
    ----------
    doc : dict
        The report (``reports/conventions.json``).
    program : str
        A program of the catalog, e.g. ``"torch.clamp(x, min=0)"`` (``jnp``/``F``/``lax`` aliases accepted).
    case : str, optional
        Case id. Default: the program's principal case (:func:`principal_case`); the others are in
        :attr:`Citation.others`.
    framework_version : str, optional
        Release; default the newest release measured on ``device``.
    framework : str, optional
        ``torch`` or ``jax``: needed only for a program text that both frameworks measure in the case
        (``x ** 0.5``, ``v.max()``).

    Raises
    ------
    CiteError
        Unknown program or case, program measured by both frameworks and no ``framework`` given, release not
        measured, no such cell.
    """
    cells = [(c, pid, p["framework"]) for c in doc["cases"] if (pid := _matches(program, c)) is not None
             for p in c["programs"] if p["program"] == pid]
    if framework is not None:
        if framework not in FRAMEWORKS:
            raise CiteError(f"unknown framework {framework!r} (known: {', '.join(FRAMEWORKS)})")
        cells = [cell for cell in cells if cell[2] == framework]
    if case is not None:
        known = [c["id"] for c in doc["cases"]]
        if case not in known:
            raise CiteError(f"unknown case {case!r}")
        chosen = [cell for cell in cells if cell[0]["id"] == case]
        if not chosen:
            raise CiteError(f"case {case!r} has no program {program!r}"
                            + (f" in {framework}" if framework is not None else ""))
    elif not cells:
        raise CiteError(f"program {program!r} is not in the report's catalog"
                        + (f" for {framework}" if framework is not None else ""))
    else:
        first = principal_case(list({id(c): c for c, _, _ in cells}.values()))
        chosen = [cell for cell in cells if cell[0] is first]
    if len({fw for _, _, fw in chosen}) > 1:
        raise CiteError(f"{chosen[0][1]} is measured in both {' and '.join(fw for _, _, fw in chosen)} at "
                        f"{chosen[0][0]['id']}; pick one with --framework")
    c, pid, framework = chosen[0]
    others = tuple(dict.fromkeys(cc["id"] for cc, _, fw in cells if cc["id"] != c["id"] and fw == framework))
    check_cell(framework, mode, dtype)
    envs = [e for e in doc["environments"] if e["framework"] == framework and e["device"] == device
            and not e.get("not_measured")]
    if framework_version is not None:
        envs = [e for e in envs if e["framework_version"] == framework_version]
        if not envs:
            measured = _sorted_versions({e["framework_version"] for e in doc["environments"] if e["framework"] == framework})
            raise CiteError(f"{framework} {framework_version} on {device} is not in the report "
                            f"(measured: {', '.join(measured)})")
    obs = {o["environment"]: o for o in doc["observations"] if o["case"] == c["id"] and o["program"] == pid
           and o["framework"] == framework and o["mode"] == mode and o["dtype"] == dtype}
    envs = [e for e in envs if e["id"] in obs]
    if not envs:
        raise CiteError(f"no observation of {pid} at {c['id']} in {mode} mode, {dtype}, on {device}")
    env, ob = envs[-1], obs[envs[-1]["id"]]
    row = f"case-{slug(c['id'])}--{framework}-{slug(pid)}"
    if mode == "reverse":  # the case table: one cell per release, every dtype in it
        anchor = f"{row}--{slug(env['id'])}"
    elif env["id"] == newest_with_modes(doc, framework, device):  # the modes table shows the newest release
        anchor = f"{row}--modes--{slug(mode)}"
    else:  # other modes of older releases are in the JSON and CSV only: the program's row
        anchor = row
    return Citation(_sentence(c, pid, env, ob, mode, dtype), anchor, ob, env, c["id"], others)


def newest_with_modes(doc: dict[str, Any], framework: str, device: str) -> str | None:
    """The environment whose modes the report's per-case modes table shows (newest with several modes)."""
    modes: dict[str, set[str]] = {}
    for o in doc["observations"]:
        if o["framework"] == framework:
            modes.setdefault(o["environment"], set()).add(o["mode"])
    envs = [e["id"] for e in doc["environments"] if e["framework"] == framework and len(modes.get(e["id"], ())) > 1
            and e["device"] == device]
    return envs[-1] if envs else None


def _sentence(case: dict[str, Any], program: str, env: dict[str, Any], ob: dict[str, Any], mode: str,
              dtype: str) -> str:
    name = FRAMEWORK_NAMES.get(env["framework"], env["framework"])
    point = ", ".join(f"{k} = {json.dumps(v)}" for k, v in case["at"].items())
    where = f"{name} {env['framework_version']} ({env['device'].upper() if env['device'] == 'cpu' else env['device']}, " \
            f"{dtype}, {mode} mode)"
    if ob["status"] != "ok":
        what = f"`{program}` at {point} gives no derivative ({ob['status']}: {ob['error']})"
    else:
        label = ob["labels"][0]
        what = f"the derivative of `{program}` at {point} is {fmt_value(ob['value'])} ({label}: {LABEL_HELP.get(label, label)})"
        if ob.get("input"):
            what += f"; in {dtype} the input is {fmt_value(ob['input'])}"
    rule = {"conforms": f"; this follows {name}'s documented rule",
            "departs": f"; this departs from {name}'s documented rule",
            "open": f"; {name}'s documented rules leave this value open"}.get(ob.get("conformance", ""), "")
    return f"In {where}, {what}{rule} (kinkcheck, case {case['id']})."


def _sorted_versions(versions: Any) -> list[str]:
    from packaging.version import InvalidVersion, Version

    def key(v: str) -> Any:
        try:
            return (0, Version(v), v)
        except InvalidVersion:
            return (1, Version("0"), v)

    return sorted(versions, key=key)


def _span(doc: dict[str, Any]) -> str:
    """``PyTorch 1.13.1–2.15.0 (17 releases) and JAX 0.4.13–0.10.2 (11 releases)``."""
    parts = []
    for fw in FRAMEWORKS:
        vs = _sorted_versions({e["framework_version"] for e in doc["environments"]
                               if e["framework"] == fw and not e.get("not_measured")})
        if vs:
            name = FRAMEWORK_NAMES.get(fw, fw)
            parts.append(f"{name} {vs[0]}" if len(vs) == 1 else f"{name} {vs[0]}–{vs[-1]} ({len(vs)} releases)")
    return " and ".join(parts)


def bibtex(doc: dict[str, Any]) -> str:
    """A BibTeX ``@misc`` entry for the report (date and catalog hash from its provenance)."""
    prov = doc["provenance"]
    date = prov["generated_at"][:10]
    envs = _span(doc)
    return (
        f"@misc{{kinkcheck-{date},\n"
        f"  title        = {{Gradient conventions at kinks: a kinkcheck report}},\n"
        f"  author       = {{{{kinkcheck contributors}}}},\n"
        f"  year         = {{{date[:4]}}},\n"
        f"  note         = {{kinkcheck {prov['kinkcheck_version']}, catalog {prov['catalog_hash']}, generated "
        f"{prov['generated_at']}; {len(doc['cases'])} cases measured in {envs}}},\n"
        f"  howpublished = {{{REPORT_MD}}}\n"
        f"}}"
    )


def cff(doc: dict[str, Any]) -> str:
    """A CITATION.cff ``references`` item (YAML) for the report."""
    prov = doc["provenance"]
    return (
        "- type: data\n"
        "  title: \"Gradient conventions at kinks: a kinkcheck report\"\n"
        "  authors:\n"
        "    - name: kinkcheck contributors\n"
        f"  date-released: \"{prov['generated_at'][:10]}\"\n"
        f"  version: \"{prov['kinkcheck_version']}+catalog.{prov['catalog_hash']}\"\n"
        f"  notes: \"{REPORT_MD}; {len(doc['cases'])} cases, {len(doc['observations'])} observations\"\n"
    )
