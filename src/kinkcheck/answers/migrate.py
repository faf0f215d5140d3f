"""``kinkcheck migrate``: what changes at each kink when code moves between frameworks or releases.

For every case of the report, each source program's measured value is compared with each target
program's (same mode and dtype, the newest release unless one is named). For a target that differs, a
replacement keeping the source convention is offered:

1. an equivalent target program of the same case whose measured value is the source value (e.g.
   ``jax.nn.relu(x)`` for ``torch.relu(x)`` at 0 instead of ``jnp.maximum(x, 0.0)``); else
2. generated code: a ``jax.custom_jvp``, ``torch.autograd.Function``, ``tf.custom_gradient``, autograd
   ``primitive``, ``paddle.autograd.PyLayer`` or ``mlx.core.custom_function`` around the target program that
   returns the source value at the kink and the target's own derivative elsewhere (the true derivative
   where the function is differentiable). Generated where the kink is a single point of one scalar input
   (:func:`snippet`; the source value and both one-sided derivatives finite) or a tie of two scalar inputs,
   ``maximum``/``minimum`` at x = y (:func:`tie_snippet`: the source's (dx, dy) on the whole tie line, P10's
   ``tf.minimum``); otherwise the reason is given.

Every value comes from the report JSON (measured, with provenance); the snippets are executed by the
tests (``tests/answers/test_migrate.py``) at the kink and beside it.
"""

from __future__ import annotations

import ast
import importlib
import math
import re
from dataclasses import dataclass, field
from string import Template
from typing import Any

from kinkcheck.catalog import FRAMEWORKS
from kinkcheck.language.decimals import decimal, decimal_value
from kinkcheck.oracles.classify import same_value
from kinkcheck.platforms import DEVICES
from kinkcheck.registry import framework as framework_record
from kinkcheck.report.cells import CellError, check_cell, program_in_case
from kinkcheck.report.model import Case, Environment, Observation, Report, ReportIndex, parts_by_reason
from kinkcheck.report.query import nearest_programs

__all__ = ["CasePairs", "MigrateError", "Migration", "Pair", "migrate", "parse_side", "render", "snippet",
           "tie_snippet"]


class MigrateError(ValueError):
    """A side names an unknown framework or a release the report does not hold (one-line reason)."""


@dataclass
class Pair:
    """A source program against a target program at one case: their measured values (input name → number or
    nested list, as in the report), first labels (or the status when no value), and a replacement for a
    target that differs: an ``equivalent`` target program, a generated ``snippet``, or why there is none."""

    case: str
    source: str
    source_value: dict[str, Any] | None
    source_label: str
    target: str
    target_value: dict[str, Any] | None
    target_label: str
    differs: bool
    equivalent: str | None = None
    snippet: str | None = None
    no_replacement: str | None = None


@dataclass
class CasePairs:
    """The pairs of one case, source program order."""

    case: Case
    pairs: list[Pair]


@dataclass
class Migration:
    source_env: Environment
    target_env: Environment
    mode: str
    dtype: str
    cases: list[CasePairs] = field(default_factory=list)

    @property
    def pairs(self) -> list[Pair]:
        return [p for c in self.cases for p in c.pairs]


def split_place(text: str, device: str) -> tuple[str, str]:
    """``"torch==2.11.0@cuda"`` → ``("torch==2.11.0", "cuda")``: a side may name its own place (a CPU → CUDA
    migration); without ``@`` the side is on ``device`` (``--device``)."""
    side, sep, place = text.partition("@")
    place = place.strip()
    if sep and not place:
        raise MigrateError(f"{text!r}: no device after @ (e.g. {side.strip()}@cuda)")
    if sep and place.split("-")[0] not in DEVICES:
        raise MigrateError(f"{text!r}: unknown device {place.split('-')[0]!r} (known: {', '.join(DEVICES)}; off Linux "
                           "x86-64, or at a lower x86-64 level, the platform tag follows: cpu-macos_arm64, "
                           "cpu-linux_x86_64_v3)")
    return side, (place if sep else device)


def side_frameworks(source: str, target: str, device: str = "cpu") -> set[str]:
    """The frameworks of a migration's two sides (``torch==2.11.0@cuda`` → ``torch``): the programs a migration
    reads (``kinkcheck.report.cells.load_report_for(..., frameworks=...)``).

    Raises
    ------
    MigrateError
        An unknown framework or a malformed side.
    """
    return {parse_side(split_place(side, device)[0])[0] for side in (source, target)}


def parse_side(text: str) -> tuple[str, str | None]:
    """``"torch"`` → ``("torch", None)``; ``"jax==0.10.2"`` → ``("jax", "0.10.2")``."""
    fw, sep, version = text.partition("==")
    fw = fw.strip()
    if fw not in FRAMEWORKS:
        raise MigrateError(f"unknown framework {fw!r} (known: {', '.join(FRAMEWORKS)})")
    if sep and not version.strip():
        raise MigrateError(f"{text!r}: no version after == (write {fw} for the newest measured release)")
    return fw, (version.strip() or None)


def _version(text: str) -> Any:
    """A release as a sortable key; a version packaging cannot parse sorts first, by its text."""
    from packaging.version import InvalidVersion, Version

    try:
        return (1, Version(text), text)
    except InvalidVersion:
        return (0, None, text)


def _environment(report: Report, fw: str, version: str | None, device: str) -> Environment:
    from packaging.version import InvalidVersion, Version

    envs = [e for e in report.index.columns.get(fw, []) if e.place == device]  # measured ones, at that place
    if version is not None:
        try:
            want = Version(version)
        except InvalidVersion:
            raise MigrateError(f"{fw}=={version}: not a version number") from None
        match = [e for e in envs if _version(e.framework_version)[1:2] == (want,)]  # 2.13 is 2.13.0
        if not match:
            have = ", ".join(sorted({e.framework_version for e in envs}, key=_version))
            raise MigrateError(f"{fw} {version} on {device} is not in the report (measured: {have or 'none'})")
        return match[0]
    if not envs:
        places = sorted({e.place for e in report.index.columns.get(fw, [])})
        raise MigrateError(f"no measured {fw} environment on {device} in the report (measured on: "
                           f"{', '.join(places) or 'none'}; off Linux x86-64 a place is <device>-<platform>, "
                           "e.g. cpu-macos_arm64, and at a lower x86-64 level cpu-linux_x86_64_v3)")
    return max(envs, key=lambda e: _version(e.framework_version))


def migrate(report: Report, source: str, target: str, mode: str = "reverse", dtype: str = "float64",
            device: str = "cpu", case: str | None = None, program: str | None = None) -> Migration:
    """Compare every case's programs between two environments of the report.

    Parameters
    ----------
    report : Report
        The report (:func:`kinkcheck.report.cells.load_report_for` of ``reports/conventions.json``).
    source, target : str
        ``"torch"``, ``"torch==2.13.0"``, ``"jax"``, ``"jax==0.10.2"``; the same framework twice compares releases;
        ``@<device>`` after a side puts it on that device instead of ``device`` (``"torch==2.11.0@cuda"``).

    Raises
    ------
    MigrateError
        Unknown framework or case, a release not in the report, the same environment on both sides.
    """
    source, sdev = split_place(source, device)
    target, tdev = split_place(target, device)
    sfw, sver = parse_side(source)
    tfw, tver = parse_side(target)
    try:
        check_cell(sfw, mode, dtype)
        check_cell(tfw, mode, dtype)
    except CellError as err:
        raise MigrateError(str(err)) from None
    senv, tenv = _environment(report, sfw, sver, sdev), _environment(report, tfw, tver, tdev)
    if senv.id == tenv.id:
        raise MigrateError(f"both sides are {senv.id}: name two releases (torch==2.13.0 → torch==2.15.0) or two "
                           "devices (torch==2.11.0@cpu → torch==2.11.0@cuda)")
    ix = report.index
    if case is not None and case not in ix.case:
        raise MigrateError(f"unknown case {case!r}")
    spelled: dict[str, str] = {}  # case → the source program ``program`` spells there (aliases canonicalised)
    if program is not None:

        spelled = {c.id: pid for c in report.cases if (pid := program_in_case(program, c)) in c.programs_of(sfw)}
        if not spelled:

            near = nearest_programs(program, sorted({p for c in report.cases for p in c.programs_of(sfw)}))
            raise MigrateError(f"{program!r} is not a {sfw} program of the report's catalog"
                               + (f"; nearest: {'; '.join(near)}" if near else ""))

    def cell(env: Environment, c: Case, program: str) -> Observation | None:
        return ix.cell.get((c.id, env.framework, program, mode, env.id, dtype))

    m = Migration(senv, tenv, mode, dtype)
    for c in report.cases:
        if case is not None and c.id != case:
            continue
        tprogs = c.programs_of(tfw)
        targets = {t: to for t in tprogs if (to := cell(tenv, c, t)) is not None}
        pairs = []
        for s in c.programs_of(sfw):
            if program is not None and spelled.get(c.id) != s:
                continue
            so = cell(senv, c, s)
            if so is None:
                continue
            for t in ([s] if sfw == tfw else tprogs):  # across releases: the same program, then alternatives
                if t in targets:
                    pairs.append(_pair(ix, c, so, targets[t], targets, sfw, tfw))
        if pairs:
            m.cases.append(CasePairs(c, pairs))
    return m


def _flat(ix: ReportIndex, o: Observation) -> tuple[float, ...] | None:
    return ix.flat(o) if o.status == "ok" else None


def _label(o: Observation) -> str:
    return o.labels[0] if o.status == "ok" else o.status


def _pair(ix: ReportIndex, c: Case, so: Observation, to: Observation, targets: dict[str, Observation], sfw: str,
          tfw: str) -> Pair:
    sv, tv = _flat(ix, so), _flat(ix, to)
    differs = not (sv is not None and tv is not None and same_value(sv, tv, so.dtype)) and \
        not (sv is None and tv is None and so.status == to.status)
    p = Pair(c.id, so.program, so.value, _label(so), to.program, to.value, _label(to), differs)
    if not differs:
        return p
    if sv is not None:
        for alt, ao in targets.items():
            av = _flat(ix, ao)
            if alt != to.program and av is not None and same_value(sv, av, so.dtype) and \
                    _combines_inputs(alt) == _combines_inputs(so.program):
                p.equivalent = alt
                return p
    tie = _tie_of_two(c)
    why = _why_no_snippet(c, sv, tie)
    if why is None and to.status != "ok":  # the snippet takes the target's own derivative away from the kink
        why = f"the target gives no derivative here ({to.status}): kinkcheck wraps only a target that returns one"
    if why is None:
        note = f"{so.program} ({sfw}) gives {decimal_value(so.value)} here"
        try:
            if tie is not None:
                p.snippet = tie_snippet(tfw, to.program, tie, sv, note=note)
            else:
                name, point = next(iter(c.at.items()))
                p.snippet = snippet(tfw, to.program, name, float(point), sv[0],
                                    note=f"{so.program} ({sfw}) gives {decimal(sv[0])} here")
        except MigrateError:  # a target without a custom-gradient API kinkcheck writes code for (tinygrad)
            p.no_replacement = f"kinkcheck generates no custom-gradient code for {tfw}"
    else:
        p.no_replacement = why
    return p


#: A call that builds one array out of several inputs (see :func:`_combines_inputs`).
_COMBINING = re.compile(r"\b(?:stack|array|asarray|concatenate|concat|hstack|vstack|cat)\(")


def _combines_inputs(program: str) -> bool:
    """Whether ``program`` builds one array out of its inputs (``stack([x, y])``, ``array([x, y])``,
    ``concatenate``) and reduces it. Such a program agrees with an elementwise one (``maximum(x, y)``) at the
    catalog's scalar point only: on arrays it returns one number. An equivalent is offered only between
    programs alike in this (a breaker found ``mlx.core.max(mlx.core.stack([x, y]))`` offered for
    ``torch.maximum``: 5.0 where torch gives [1, 5, 3])."""
    return bool(_COMBINING.search(program))


def _tie_of_two(c: Case) -> tuple[str, str] | None:
    """The two inputs when the case is a tie of two scalars whose kink is the whole line ``x == y``: its sympy
    form is ``Max`` or ``Min`` of exactly those inputs, and they are equal at the point (P10's ``tf.minimum``
    at x = y); else None. The form is parsed (:mod:`ast`), never evaluated."""
    if len(c.at) != 2 or any(isinstance(v, list) for v in c.at.values()):
        return None
    (a, va), (b, vb) = c.at.items()
    if float(va) != float(vb):  # -0.0 == 0.0: a tie of signed zeros is a tie
        return None
    try:
        form = ast.parse(c.sympy, mode="eval").body
    except SyntaxError:
        return None
    if not (isinstance(form, ast.Call) and isinstance(form.func, ast.Name) and form.func.id in ("Max", "Min")
            and not form.keywords and sorted(getattr(x, "id", "") for x in form.args) == sorted((a, b))):
        return None
    return a, b


def _why_no_snippet(c: Case, sv: tuple[float, ...] | None, tie: tuple[str, str] | None = None) -> str | None:
    if sv is None:
        return "the source gives no derivative here"
    if tie is not None:
        return None if all(math.isfinite(v) for v in sv) else "the source value is not finite"
    if len(c.at) != 1 or isinstance(next(iter(c.at.values())), list):
        return ("the kink is not a single point of one scalar input, nor a tie of two (a vector, or a tie of "
                "more): no generated code")
    if not all(math.isfinite(v) for v in sv):
        return "the source value is not finite"
    o = c.oracle  # at a jump the pieces' slopes (its one-sided derivatives are infinite there by definition)
    sides = (o.left_piece, o.right_piece) if o.left_piece is not None else (o.left, o.right)
    if any(s is None or isinstance(s.float_, str) for s in sides):  # "inf", "nan"
        return "a one-sided derivative is infinite or undefined here: no generated code"
    return None


def snippet(framework: str, target: str, name: str, point: float, value: float, note: str = "") -> str:
    """Python source defining ``f``: ``target`` with derivative ``value`` at ``name == point``.

    Parameters
    ----------
    framework : str
        ``"jax"`` (a ``jax.custom_jvp``), ``"torch"`` (a ``torch.autograd.Function``), ``"autograd"`` (an
        ``autograd.extend.primitive`` with ``defvjp`` and ``defjvp``) or ``"paddle"`` (a
        ``paddle.autograd.PyLayer``: reverse mode only) or ``"mlx"`` (an ``mlx.core.custom_function`` with a
        ``vjp`` and a ``jvp``) or ``"tensorflow"`` (a ``tf.custom_gradient``: reverse mode, eager and
        ``tf.function``).
    target : str
        The target program, an expression in the input ``name`` (canonical catalog text).
    point, value : float
        The kink and the derivative to return there; elsewhere ``f`` differentiates ``target`` itself.
    """
    p, v = repr(float(point)), repr(float(value))
    return _fill(_snippets(framework).SNIPPET, note, target=target, name=name, p=p, v=v)


def tie_snippet(framework: str, target: str, names: tuple[str, str], values: tuple[float, ...],
                note: str = "") -> str:
    """Python source defining ``f(x, y)``: ``target`` with the derivatives ``values`` wherever ``x == y``.

    For a kink that is a whole tie line (``maximum``/``minimum`` of two inputs, P10): at every tie the
    derivative is ``(values[0], values[1])`` times the incoming gradient (a JVP: the tangents combined with
    them); off the ties, ``target``'s own derivative, taken with the first input moved off the tie (by +1)
    where it is replaced (an inf or NaN there would otherwise reach the result through the unselected branch
    of a ``where``). ``x`` and ``y`` are arrays of one shape (or scalars).

    Parameters
    ----------
    framework : str
        ``"jax"`` (``jax.custom_jvp``), ``"torch"`` (``torch.autograd.Function``), ``"tensorflow"``
        (``tf.custom_gradient``), ``"autograd"`` (``primitive`` with ``defvjp``/``defjvp``), ``"paddle"``
        (``PyLayer``) or ``"mlx"`` (``mlx.core.custom_function``), as :func:`snippet`.
    target : str
        The target program, an expression in the two inputs (canonical catalog text).
    names : (str, str)
        The inputs, in the order ``f`` takes them.
    values : (float, float)
        The derivatives to return at a tie.

    Raises
    ------
    MigrateError
        ``framework`` has no generator here.
    """
    x, y = names
    vx, vy = (repr(float(v)) for v in values[:2])
    return _fill(_snippets(framework).TIE_SNIPPET, note, target=target, x=x, y=y, vx=vx, vy=vy)


def _fill(template: str, note: str, **values: str) -> str:
    """A framework's code template (``string.Template`` text) with ``values`` in place, and its ``# $note`` line
    saying ``note``, or left out where there is none."""
    text = Template(template).substitute(values, note=note)
    return text if note else re.sub(r"(?m)^ *# \n", "", text)


def _snippets(framework: str) -> Any:
    """The ``snippets`` module of ``framework``'s folder (``frameworks/<name>/snippets.py``: its code templates,
    ``SNIPPET`` and ``TIE_SNIPPET``).

    Raises
    ------
    MigrateError
        The framework has no such module: no generated code for it.
    """
    try:
        package = framework_record(framework).adapter
        return importlib.import_module(f"{package}.snippets")
    except (KeyError, ModuleNotFoundError):
        raise MigrateError(f"no snippet generator for {framework!r}") from None


def render(m: Migration, only_differences: bool = False) -> str:
    """The migration as Markdown: the summary first (how many program pairs differ, in which cases, what is not
    measured), then one table per case, then the generated code."""
    s, t = m.source_env, m.target_env
    sname, tname = f"{s.framework} {s.framework_version}", f"{t.framework} {t.framework_version}"
    if s.place != t.place:  # a CPU → CUDA migration: each side names its place
        sname, tname = f"{sname} {s.place}", f"{tname} {t.place}"
    where = s.place if s.place == t.place else f"{s.place} → {t.place}"
    pairs = m.pairs
    differ = [p for p in pairs if p.differs]
    cases = list(dict.fromkeys(p.case for p in differ))
    lines = [f"# Migration {sname} → {tname} ({where}, {m.dtype}, {m.mode} mode)", "",
             f"{len(differ)} of {len(pairs)} program pairs differ, in {len(cases)} of {len(m.cases)} cases: "
             f"{sum(1 for p in differ if p.equivalent)} have an equivalent {t.framework} program, "
             f"{sum(1 for p in differ if p.snippet)} generated code, "
             f"{sum(1 for p in differ if p.no_replacement)} no replacement."]
    if cases:
        shown = ", ".join(cases[:12]) + (f" and {len(cases) - 12} more" if len(cases) > 12 else "")
        lines.append(f"Cases that differ: {shown}.")
    for env in (s,) if s.id == t.id else (s, t):  # what a side does not hold in this mode and dtype: say why
        parts = [p for p in env.not_measured_parts if m.mode in p.modes and (p.case is None or m.dtype in p.dtypes)]
        for reason, mine in parts_by_reason(parts):
            what = (f"{len(mine)} program(s) ({', '.join(f'`{p.program}` at {p.case}' for p in mine)})"
                    if mine[0].case is not None else f"the cells of {m.mode} mode it lacks")
            lines.append(f"Not measured in {env.id} ({m.mode}, {m.dtype}), so not compared: {what}: "
                         f"{reason.removeprefix('not measured: ')}")
    lines += ["", "Measured values from the report; a differing target gets a replacement that keeps the source "
              "value.", ""]
    snippets: list[tuple[str, Pair]] = []
    numbered: dict[tuple[str, str, str], int] = {}  # the same code for several source programs: shown once
    for entry in m.cases:
        c, case_pairs = entry.case, entry.pairs
        if only_differences and not any(p.differs for p in case_pairs):
            continue
        point = ", ".join(f"{k} = {v}" for k, v in c.at.items())
        lines += [f"## {c.id} — {c.title} ({point})", "",
                  f"| {sname} program | value | {tname} program | value | | replacement keeping the source value |",
                  "|---|---|---|---|---|---|"]
        for p in case_pairs:
            if only_differences and not p.differs:
                continue
            fix = ""
            if p.equivalent:
                fix = f"use `{p.equivalent}`"
            elif p.snippet:
                key = (c.id, p.target, decimal_value(p.source_value))
                if key not in numbered:
                    snippets.append((f"{c.id}: `{p.target}` with {p.source}'s value", p))
                    numbered[key] = len(snippets)
                fix = f"generated code [{numbered[key]}](#code-{numbered[key]})"
            elif p.no_replacement:
                fix = p.no_replacement
            lines.append(f"| `{p.source}` | {decimal_value(p.source_value)} {p.source_label} | `{p.target}` | "
                         f"{decimal_value(p.target_value)} {p.target_label} | {'**differs**' if p.differs else 'same'} | {fix} |")
        lines.append("")
    if snippets:
        lines += ["## Generated code", ""]
        for i, (title, p) in enumerate(snippets, 1):
            lines += [f"### <a id=\"code-{i}\"></a>[{i}] {title}", "", "```python", p.snippet.rstrip(), "```", ""]
    return "\n".join(lines).rstrip("\n") + "\n"
