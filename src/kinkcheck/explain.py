"""``kinkcheck grad`` explains: the sympy form of a program, the oracle's judgement there, the labels of the
measured value, and what the report says other programs, frameworks and releases return at that point.

Three parts, each usable alone:

* :func:`judge` — a program (or a ``--sympy`` text) at a point → :class:`Judgement`: the sympy form
  (:func:`kinkcheck.oracles.mapping.sympy_form`, or the user's text in the catalog's sympy language, parsed
  with :mod:`kinkcheck.expr`, never ``eval``-ed) and the oracle's answer
  (:func:`kinkcheck.oracles.symbolic.analyze_expression`: one-sided derivatives, Clarke set, min-norm
  element, local Lipschitz continuity). Cached on disk (:func:`kinkcheck.cache.cache_dir`) at two levels:
  per program and point (a warm ``grad`` imports no sympy) and per sympy form and point (programs that
  map to the same form share one oracle run).
* :func:`labels` — a measured gradient + a judgement → the labels of :func:`kinkcheck.classify.classify`,
  with the dtype's tolerance, exactly as the report labels its cells.
* :func:`report_rows` — what the report (``reports/conventions.json``) holds at the same point: the
  program's own row first, then the case's other programs, per framework, with each value over the
  ranges of releases that return it, read from ``observations.parquet`` beside the report: the cases and
  releases from its metadata, then the rows of those cases only (the model's dataset; no index of its own).

:class:`Pending` runs the report lookup and the cache lookup in a thread of the ``grad`` process while the
framework evaluates in its worker, so they overlap; on a cache miss :func:`judge` runs in a second worker
process (``python -m kinkcheck.explain``, memory capped like the evaluation's), killed at the bound: a
judgement that takes longer is "not judged: the oracle exceeded N s" and never holds ``grad`` up (sympy can
spend minutes inside one C call, which no thread could interrupt).
"""

from __future__ import annotations

import atexit
import hashlib
import json
import math
import os
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from importlib import metadata, resources
from pathlib import Path
from typing import Any

from kinkcheck import expr as ex
from kinkcheck.cache import cache_dir
from kinkcheck.query import DATA_ENV, default_report

__all__ = [
    "DEFAULT_ORACLE_TIMEOUT_S",
    "DEFAULT_REPORT",
    "Explanation",
    "Judgement",
    "Pending",
    "ReportUnavailable",
    "ReportView",
    "flat_value",
    "judge",
    "labels",
    "oracle_timeout_from_env",
    "render",
    "report_index",
    "report_rows",
]

#: Seconds the judgement (mapping + sympy oracle) may take before grad answers without it.
DEFAULT_ORACLE_TIMEOUT_S = 60.0
#: The report a face reads when none is named, in the current folder (:func:`kinkcheck.query.default_report`
#: falls back to the package's data when it is not there).
DEFAULT_REPORT = "reports/conventions.json"
#: Version of the cached entries' layout: bump to orphan old entries.
_FORMAT = 1


# --------------------------------------------------------------------------- judgement


@dataclass(frozen=True)
class Judgement:
    """The oracle's view of one program at one point.

    Attributes
    ----------
    sympy : str or None
        Readable sympy form of the function (the sum of the program's outputs), None when there is none.
    source : str
        ``"mapping"`` (from the framework call), ``"catalog"`` (an unmapped catalog program at its case's point:
        the case's hand-written ``sympy`` field, as the report judges it), ``"--sympy"`` (the user's text) or
        ``"none"``.
    components : tuple of str
        Gradient components in order (``"x"``, ``"v[0]"``, …): the differentiated inputs, flat.
    oracle : dict or None
        :meth:`kinkcheck.oracles.symbolic.OracleResult.to_json` (with ``kind``, ``left``, ``right``,
        ``clarke``, ``min_norm``, ``lipschitz``, ``reason``, ``second_order`` …); None when not judged before
        the oracle ran (no symbolic form, the bound exceeded).
    reason : str or None
        ``"not judged: <why>"`` when there are no labels to give (also the oracle's own reason).
    cases : tuple of str
        Report cases with the same function and point (matched by program text, else by function).
    tie : bool
        Whether tie labels apply (the matched case's flag, else a tie among a Max/Min's bare inputs).
    """

    sympy: str | None
    source: str
    components: tuple[str, ...]
    oracle: dict[str, Any] | None
    reason: str | None
    cases: tuple[str, ...] = ()
    tie: bool = False

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["components"] = list(self.components)
        d["cases"] = list(self.cases)
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Judgement:
        return cls(d["sympy"], d["source"], tuple(d["components"]), d["oracle"], d["reason"], tuple(d["cases"]),
                   bool(d["tie"]))


def _source_hash() -> str:
    """What a cached judgement depends on besides its inputs: this code, the oracle, the mapping, the parser."""
    from kinkcheck.oracles.table import ORACLE_SOURCES

    h = hashlib.sha256()
    for pkg, name in (("kinkcheck", "explain.py"), ("kinkcheck.oracles", "mapping.py"), *ORACLE_SOURCES):
        h.update(resources.files(pkg).joinpath(name).read_bytes())
    h.update(_sympy_release())
    return h.hexdigest()[:16]


def _sympy_release() -> bytes:
    """sympy's ``release.py`` (its version), read without importing sympy: ``importlib.metadata.version``
    scans every installed distribution, a quarter of a second on a busy machine, on every warm ``grad``."""
    import importlib.util

    spec = importlib.util.find_spec("sympy")
    if spec is None or spec.origin is None:
        return b"no sympy"
    try:
        return (Path(spec.origin).parent / "release.py").read_bytes()
    except OSError:
        return metadata.version("sympy").encode()


def _key(*parts: Any) -> str:
    raw = json.dumps([_FORMAT, *parts], sort_keys=True, default=repr, allow_nan=True)
    return hashlib.sha256(raw.encode()).hexdigest()[:24]


def _read_cache(name: str) -> Any:
    try:
        return json.loads((cache_dir() / name).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _write_cache(name: str, data: Any) -> None:
    try:
        from kinkcheck.shards import write_json_atomic

        write_json_atomic(cache_dir() / name, data)
    except (OSError, ValueError, TypeError):  # a read-only home only costs time
        pass


def _point_key(at: Mapping[str, Any]) -> list[Any]:
    """The point as JSON-able data that tells -0.0 from 0 and keeps inf/nan (repr of each number)."""

    def rec(v: Any) -> Any:
        return [rec(e) for e in v] if isinstance(v, list) else repr(float(v) if isinstance(v, float) else v)

    return [[k, rec(v)] for k, v in at.items()]


def _same_point(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Same input names in the same order and the same numbers (0 == 0.0, but -0.0 is not 0)."""

    def norm(v: Any) -> Any:
        if isinstance(v, list):
            return tuple(norm(e) for e in v)
        f = float(v)
        return ("nan",) if math.isnan(f) else (f, math.copysign(1.0, f))

    return list(a) == list(b) and all(norm(a[k]) == norm(b[k]) for k in a)


def judge(program: str, at: Mapping[str, Any], framework: str, *, tree: ex.Node | None = None,
          wrt: Sequence[str] | None = None, sympy_text: str | None = None,
          cases: Sequence[Mapping[str, Any]] = (), use_cache: bool = True, compute: bool = True) -> Judgement | None:
    """The sympy form of ``program`` at ``at`` and the oracle's judgement there, in this process (unbounded:
    :class:`Pending` runs it in a bounded worker).

    Parameters
    ----------
    program : str
        The program's canonical text (:func:`kinkcheck.expr.unparse`, as catalog program ids).
    at : mapping
        Input name → number or nested list (``inf``/``nan`` allowed; ``int:`` inputs as ints).
    framework : str
        ``"torch"`` or ``"jax"``.
    tree : kinkcheck.expr.Node, optional
        The parsed program (parsed from ``program`` when omitted).
    wrt : sequence of str, optional
        The differentiated inputs (default: every input); the others are exact constants.
    sympy_text : str, optional
        A sympy form in the catalog's sympy language over the input names (``"Max(x, 0)"``, ``"Abs(v[0])"``)
        to use instead of the mapping.
    cases : sequence of dict
        Report cases at this point (``id``, ``sympy``, ``at``, ``tie``, ``programs``): the judgement names
        those with the same function and takes their tie flag.
    use_cache : bool
        Read and write the on-disk cache.
    compute : bool
        False: only read the cache (no sympy import); None when the judgement is not there.

    Returns
    -------
    Judgement or None
        Never raises for a mathematical reason or an unmapped function: those are ``reason``.

    Raises
    ------
    kinkcheck.expr.ExprError
        ``sympy_text`` does not parse or evaluate (bad input, one line).
    """
    wrt_t = tuple(at) if wrt is None else tuple(wrt)
    cand = [{"id": c["id"], "sympy": c["sympy"], "at": c["at"], "tie": bool(c["tie"]),
             "programs": sorted(p for fw, p in c["programs"] if fw == framework)} for c in cases
            if _same_point(c["at"], at) and tuple(c["at"]) == wrt_t]
    name = "judgement-" + _key(program, framework, _point_key(at), list(wrt_t), sympy_text,
                               [[c["id"], c["sympy"], _point_key(c["at"]), c["tie"], c["programs"]] for c in cand],
                               _source_hash()) + ".json"
    if use_cache:
        hit = _read_cache(name)
        if isinstance(hit, dict):
            try:
                return Judgement.from_json(hit)
            except (KeyError, TypeError):
                pass
    if not compute:
        return None
    out = _judge(program, at, framework, tree, wrt_t, sympy_text, cand, use_cache)
    if use_cache:
        _write_cache(name, out.to_json())
    return out


def _judge(program: str, at: Mapping[str, Any], framework: str, tree: ex.Node | None, wrt: tuple[str, ...],
           sympy_text: str | None, cand: list[dict[str, Any]], use_cache: bool) -> Judgement:
    import sympy

    from kinkcheck.oracles import symbolic as sym

    if sympy_text is not None:
        expr, symbols, point, source = *_from_text(sympy_text, at, wrt), "--sympy"
    else:
        from kinkcheck.catalog import FRAMEWORKS
        from kinkcheck.oracles.mapping import Unmapped, sympy_form

        components = _components(at, wrt)
        same_text = [c["id"] for c in cand if program in c["programs"]]
        try:
            form = sympy_form(tree if tree is not None else ex.parse(program, at, FRAMEWORKS), at, framework, wrt=wrt)
            expr, symbols, point, source = form.expr, form.symbols, form.point, "mapping"
        except Unmapped as err:
            if not same_text:
                return Judgement(None, "none", components, None, f"not judged: {err}", (), False)
            # a catalog program at its case's point: judged on the case's hand-written field, as the report does
            field = next(c["sympy"] for c in cand if c["id"] == same_text[0])
            expr, symbols, point, source = *_from_text(field, at, wrt), "catalog"
        except (ex.ExprError, ArithmeticError, ValueError, TypeError, IndexError, RecursionError) as err:
            return Judgement(None, "none", components, None,
                             f"not judged: the mapping failed ({type(err).__name__}: {str(err)[:200]})",
                             tuple(same_text), False)
    text = _text(expr)
    matched = [c for c in cand if (source in ("mapping", "catalog") and program in c["programs"])
               or _same_function(expr, symbols, c)]
    if source == "catalog":  # the case whose field judged it comes first: render names it
        matched.sort(key=lambda c: c["id"] != same_text[0])
    tie = matched[0]["tie"] if matched else _tie_at(expr, symbols, point)
    key = "oracle-form-" + _key(sympy.srepr(expr), [sympy.srepr(s) for s in symbols], [str(p) for p in point], tie,
                                _source_hash()) + ".json"
    oracle = _read_cache(key) if use_cache else None
    if not (isinstance(oracle, dict) and oracle.get("components") == [s.name for s in symbols]):
        try:
            oracle = sym.analyze_expression(expr, symbols, point, case_id=program, tie=tie).to_json()
        except (ValueError, TypeError) as err:  # a caller error in the oracle's terms: say so, do not crash
            oracle = sym._not_judged(program, tuple(s.name for s in symbols), tie,
                                     f"not judged: {type(err).__name__}: {err}").to_json()
        if use_cache:
            _write_cache(key, oracle)
    reason = oracle.get("reason") if oracle.get("kind") == "not-judged" else None
    return Judgement(text, source, tuple(s.name for s in symbols), oracle, reason, tuple(c["id"] for c in matched), tie)


def _components(at: Mapping[str, Any], wrt: Sequence[str]) -> tuple[str, ...]:
    out: list[str] = []

    def rec(v: Any, label: str) -> None:
        if isinstance(v, list):
            for i, e in enumerate(v):
                rec(e, f"{label}[{i}]")
        else:
            out.append(label)

    for k in wrt:
        rec(at[k], k)
    return tuple(out)


def _from_text(text: str, at: Mapping[str, Any], wrt: Sequence[str]) -> tuple[Any, tuple[Any, ...], tuple[Any, ...]]:
    """A ``--sympy`` text over the inputs → (expr, differentiated symbols, exact point); others substituted."""
    from kinkcheck.catalog import Case
    from kinkcheck.oracles import symbolic as sym

    expr, syms, point = sym.to_sympy(Case(id="--sympy", title="--sympy", sympy=text, at=dict(at)))
    keep = {c for c in _components(at, wrt)}
    fixed = {s: p for s, p in zip(syms, point) if s.name not in keep}
    if fixed:
        expr = expr.xreplace(fixed)
    pairs = [(s, p) for s, p in zip(syms, point) if s.name in keep]
    return expr, tuple(s for s, _ in pairs), tuple(p for _, p in pairs)


def _text(expr: Any) -> str:
    try:
        from kinkcheck.oracles.mapping import _TextPrinter  # decimals as written (0.7, not 7/10)

        return _TextPrinter().doprint(expr)
    except ImportError:
        return str(expr)


def _same_function(expr: Any, symbols: Sequence[Any], case: Mapping[str, Any]) -> bool:
    """Whether ``expr`` and a report case's sympy field are the same function near the point: equal values
    at the point and at 12 points around it (exact substitution, compared to 1e-12)."""
    import sympy

    from kinkcheck.catalog import Case
    from kinkcheck.oracles import symbolic as sym

    try:
        g, gsyms, gpoint = sym.to_sympy(Case(id=case["id"], title="", sympy=case["sympy"], at=dict(case["at"])))
    except ex.ExprError:
        return False
    if [s.name for s in gsyms] != [s.name for s in symbols] or any(not p.is_finite for p in gpoint):
        return False
    rename = dict(zip(gsyms, symbols))
    g = g.xreplace(rename)
    n = len(symbols)
    offsets = [(0,) * n]
    scales = (sympy.Rational(1, 8), sympy.Rational(1, 1000), sympy.Rational(3, 7), sympy.Integer(3), sympy.Integer(11),
              sympy.Integer(1000))  # near and far: relu6 is relu near 0, not at 11
    for k, scale in enumerate(scales):
        for sign in (1, -1):
            offsets.append(tuple(sign * scale * ((i * 5 + k * 3) % 7 - 3 or 1) / 3 for i in range(n)))
            offsets.append(tuple(sign * scale * (1 if i == k % n else 0) for i in range(n)))
    for off in offsets:
        sub = {s: p + o for s, p, o in zip(symbols, gpoint, off)}
        try:
            # relative only, in 50-digit sympy numbers (no float overflow): clamp(x, min=1e-300) is not relu
            a, b = sympy.N(expr.xreplace(sub), 50), sympy.N(g.xreplace(sub), 50)
            if a.has(sympy.nan) or b.has(sympy.nan):
                if not (a.has(sympy.nan) and b.has(sympy.nan)):
                    return False
                continue
            if not (a.is_finite and b.is_finite):
                return False
            if abs(sympy.N(a - b, 50)) > sympy.Float("1e-30", 50) * max(abs(a), abs(b)):
                return False
        except (TypeError, ValueError, ArithmeticError):
            return False
    return True


def _tie_at(expr: Any, symbols: Sequence[Any], point: Sequence[Any]) -> bool:
    """A tie (tie labels apply): some Max/Min has two or more bare differentiated inputs as arguments that are
    equal at the point and equal to its value there (``Max(x, y)`` at x = y, ``Max(v)`` at a repeated maximum;
    not ``Max(Abs(v[0]), Abs(v[1]))``, whose tie is of two kinks, as the catalog's norminf@origin)."""
    import sympy

    at = dict(zip(symbols, point))
    for node in expr.atoms(sympy.Max, sympy.Min):
        try:
            value = node.xreplace(at)
            tied = [a for a in node.args if a in at and at[a] == value]
        except (TypeError, ValueError):
            continue
        if len(tied) >= 2:
            return True
    return False


# --------------------------------------------------------------------------- labels


def flat_value(value: Mapping[str, Any], wrt: Sequence[str] | None = None) -> list[float]:
    """A grad answer (input name → encoded number or nested list, ``"nan"``/``"inf"``/``"-inf"`` as text) as
    the flat list of floats in component order (``wrt`` order, row-major)."""

    def rec(v: Any) -> list[float]:
        return [x for e in v for x in rec(e)] if isinstance(v, list) else [float(v)]

    return [x for k in (wrt if wrt is not None else list(value)) for x in rec(value[k])]


def labels(value: Mapping[str, Any], judgement: Judgement, dtype: str, mode: str = "reverse") -> list[str] | None:
    """The labels of a measured gradient (``grad``'s answer) under ``judgement``, in the report's precedence
    (:func:`kinkcheck.classify.classify`, tolerance of ``dtype``); ``second-order`` is judged against the
    oracle's ``H @ 1``. An oracle that could not decide gives ``["not-judged"]`` (as the report's cells);
    None when there is no oracle at all (no symbolic form, the bound exceeded)."""
    from kinkcheck.classify import OracleNumbers, classify

    oracle = judgement.oracle
    if oracle is None:
        return None
    if mode == "second-order":
        oracle = oracle.get("second_order")
        if not oracle:
            return None
    flat = flat_value(value, [k for k in value])
    if len(flat) != len(oracle["components"]):
        return None
    return classify(flat, OracleNumbers.from_json(oracle), dtype)


# --------------------------------------------------------------------------- the report


class ReportUnavailable(Exception):
    """No report to read (missing or invalid file): ``str(err)`` says why, in one line."""


def _report_key(path: Path) -> str:
    from kinkcheck.report.model import SCHEMA_ID

    st = path.stat()  # the schema id too: a cache of a file read under an older model is not reused
    return _key(SCHEMA_ID, str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ino)


def report_index(path: str | Path) -> dict[str, Any]:
    """The report's cases and measured releases, small: ``{"key", "path", "table", "cases": [{id, sympy, at, tie,
    programs: [[framework, program], …]}], "releases": {framework: {place: [version, …] oldest first}}}``, read
    from the metadata of ``observations.parquet`` beside the report (the model's dataset; nothing of the JSON is
    read): :func:`report_rows` then reads the rows of the cases it shows, and nothing else.

    Raises
    ------
    ReportUnavailable
        The file is missing, unreadable or not a kinkcheck report (:func:`kinkcheck.report.model.load_report`),
        or has no ``observations.parquet`` beside it (every ``kinkcheck report`` writes one).
    """
    from kinkcheck.report.model import ReportError, load_report, report_path

    p = report_path(path)  # reports/conventions.json, or the .gz a clone has
    if not p.is_file():
        env = os.environ.get(DATA_ENV)
        named = f" (${DATA_ENV})" if env and Path(path).parent == Path(env) else ""
        raise ReportUnavailable(f"no report at {path}{named}" if not p.exists() else f"{p}: not a regular file")
    table = p.with_name("observations.parquet")
    if table.is_file():  # written with the report: its cases and releases, then only the rows asked for
        return _table_index(p, table)
    try:  # why it cannot be read, when it cannot: another schema, an older model
        load_report(p, select=lambda report: ())
    except ReportError as err:
        raise ReportUnavailable(str(err)) from None
    raise ReportUnavailable(f"{p}: no observations.parquet beside it (`kinkcheck report` writes the two together; "
                            "re-render it)")


def _table_index(report: Path, table: Path) -> dict[str, Any]:
    """:func:`report_index` from the ``observations.parquet`` written beside the report (its ``kinkcheck.index``
    metadata).

    Raises
    ------
    ReportUnavailable
        The table is not kinkcheck's, or has no index (written before it had one: re-render).
    """
    from kinkcheck.report.dataset import DatasetError, table_index  # the model's one reader of the table

    try:
        index = table_index(table)
    except DatasetError as err:  # the message names the table
        raise ReportUnavailable(f"{err} (the table written beside {report.name})") from None
    return {"key": _report_key(table), "path": str(report), "table": str(table), "cases": index["cases"],
            "releases": index["releases"]}


def _table_cells(index: Mapping[str, Any], case_ids: Sequence[str], mode: str, dtype: str,
                 device: str) -> dict[str, dict[str, dict[str, Any]]]:
    """The cells of ``case_ids`` in one mode, dtype and place from the table, as :func:`report_index`'s cache
    holds them: ``"case\tframework\tprogram"`` → release → ``{status, value, label}``."""
    from kinkcheck.platforms import DEFAULT
    from kinkcheck.query import read_table

    if not case_ids:  # no report case at this point: nothing to read
        return {}
    dev, _, tag = device.partition("-")
    table = read_table(index["table"], filters=[("case", "in", list(case_ids)), ("mode", "==", mode),
                                               ("dtype", "==", dtype), ("device", "==", dev),
                                               ("platform_tag", "==", tag or DEFAULT)],
                       columns=["case", "framework", "program", "framework_version", "status", "value", "label",
                                "labels"])
    cells: dict[str, dict[str, dict[str, Any]]] = {}
    for r in table.to_pylist():
        cells.setdefault(f"{r['case']}\t{r['framework']}\t{r['program']}", {})[r["framework_version"]] = {
            "status": r["status"], "value": None if r["value"] is None else json.loads(r["value"]),
            "label": r["label"], "labels": list(r["labels"] or [])}
    return cells


@dataclass(frozen=True)
class ReportView:
    """What the report says at the point.

    Attributes
    ----------
    path : str
    problem : str or None
        Why there is nothing to show (``"no report at reports/conventions.json"``), else None.
    cases : tuple of str
        The report cases shown (same function and point as the program).
    rows : list of dict
        One per (case, framework, program): ``{"case", "framework", "program", "this": bool, "ranges":
        [{"from", "to", "releases", "status", "value", "label"}]}`` — consecutive measured releases with the
        same answer in one range, oldest first; the program's own rows first.
    elsewhere : tuple of str
        Other report cases that measure this program (at other points).
    mode, dtype, device : str
    same_operation : tuple of str
        When the program is measured at no case of this point but a program calling the same operations with
        other arguments is (ELU with ``alpha=14.5``; the catalog has 1 and 2): those operations, and ``rows``
        and ``cases`` are those programs' (the closest measured cases); else empty.
    other_points : bool
        Those cases are at other points (the point asked is a kink and no case at it calls the operations).
    """

    path: str
    problem: str | None = None
    cases: tuple[str, ...] = ()
    rows: list[dict[str, Any]] = field(default_factory=list)
    elsewhere: tuple[str, ...] = ()
    mode: str = "reverse"
    dtype: str = "float64"
    device: str = "cpu"
    same_operation: tuple[str, ...] = ()
    other_points: bool = False

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["cases"], d["elsewhere"] = list(self.cases), list(self.elsewhere)
        d["same_operation"] = list(self.same_operation)
        return d


def report_rows(index: Mapping[str, Any], program: str, framework: str, case_ids: Sequence[str], *,
                mode: str = "reverse", dtype: str = "float64", device: str = "cpu",
                at: Mapping[str, Any] | None = None, kink: bool = False) -> ReportView:
    """The report's cells of ``case_ids`` in one mode, dtype and device, per program over release ranges.

    When ``case_ids`` holds nothing of the report (the function with these arguments is not in the catalog:
    ``torch.nn.functional.elu(x, alpha=14.5)``) and ``at`` is given, the closest measured cases instead: the
    cases at that point with a program of ``framework`` calling the same operations (ELU with ``alpha=1`` and
    ``alpha=2``), those programs' rows only (:attr:`ReportView.same_operation`).

    Parameters
    ----------
    index : dict
        :func:`report_index`.
    program, framework : str
        The program asked about (canonical text): its rows come first and carry ``"this": True``.
    case_ids : sequence of str
        Cases with the same function and point (:attr:`Judgement.cases`).
    at : mapping, optional
        The point asked about.
    kink : bool
        The oracle finds a kink or a jump at ``at``: where no case at this point calls the same operations, the
        cases that do at another point are the closest (hardtanh with bounds -2 and 2 at 2: the bound is where
        the catalog measured hardtanh, at 1 and at 0.7); away from a kink only the same point is close.
    """
    view = _rows_of(index, program, framework, case_ids, mode, dtype, device)
    if view.rows or at is None:
        return view
    from kinkcheck.query import calls_of

    ops = calls_of(program)
    if not ops:
        return view
    near = {c["id"]: {prog for fw, prog in c["programs"] if fw == framework and calls_of(prog) == ops}
            for c in index["cases"] if _same_point(c["at"], at)}
    near = {cid: progs for cid, progs in near.items() if progs}
    other_points = not near and kink
    if other_points:
        near = {c["id"]: {prog for fw, prog in c["programs"] if fw == framework and calls_of(prog) == ops}
                for c in index["cases"]}
        near = {cid: progs for cid, progs in near.items() if progs}
    if not near:
        return view
    other = _rows_of(index, program, framework, list(near), mode, dtype, device)
    rows = [r for r in other.rows if r["framework"] == framework and r["program"] in near[r["case"]]]
    return ReportView(view.path, None, tuple(near), rows, view.elsewhere, mode, dtype, device, tuple(sorted(ops)),
                      other_points)


#: Labels a convention that is a rule of a parameter can name (most specific first), with the words ``grad``
#: prints for them.
RULE_LABELS: dict[str, str] = {
    "left": "the left one-sided derivative", "right": "the right one-sided derivative",
    "left-piece": "the left piece's slope", "right-piece": "the right piece's slope",
    "first": "the whole tie to the first tied input", "last": "the whole tie to the last tied input",
    "split-even": "the tie split evenly", "min-norm": "the minimum-norm element of the Clarke set",
    "mean": "the midpoint of the Clarke set",
}


def parameter_rule(view: ReportView) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """The rule the closest measured cases follow (:attr:`ReportView.same_operation`): the labels of
    :data:`RULE_LABELS` that every measured release of every such case carries where it is a kink (PyTorch's ELU:
    ``left``, which is ``alpha``; leaky_relu at slopes 0.01 and 0.2: ``left`` and ``min-norm``, which the cases
    cannot tell apart), most specific first, and those cases; None with fewer than two such cases, an error
    range, or no label in common.

    A case where the function is differentiable (``derivative``) agrees with any rule and is left out."""
    if not view.same_operation:
        return None
    kinks: dict[str, list[set[str]]] = {}
    for r in view.rows:
        for g in r["ranges"]:
            if g["status"] != "ok":
                return None
            labels = set(g.get("labels") or [g["label"]])
            if "derivative" not in labels:
                kinks.setdefault(r["case"], []).append(labels)
    if len(kinks) < 2:
        return None
    common = set.intersection(*(s for sets in kinks.values() for s in sets))
    rule = tuple(lab for lab in RULE_LABELS if lab in common)
    return (rule, tuple(kinks)) if rule else None


#: The oracle's field that gives a rule label's value at a point (the labels without one: ties, pieces).
_RULE_VALUE = {"left": "left", "right": "right", "min-norm": "min_norm", "mean": "midpoint"}


def _rule_lines(e: Explanation, oracle: Mapping[str, Any] | None) -> list[str]:
    """``grad``'s lines for :func:`parameter_rule`: the rule, what it gives at this point, and whether this value
    follows it; where the cases carry two rules that differ at this point, that it is ambiguous."""
    found = parameter_rule(e.report)
    if found is None:
        return []
    rules, cases = found
    where = "at other points" if e.report.other_points else "with other arguments"
    head = f"rule: at every kink measured {where} ({', '.join(cases)}), every measured {e.framework} release gives"

    def here(label: str) -> Any:
        v = (oracle or {}).get(_RULE_VALUE.get(label, ""))
        return v[0] if isinstance(v, list) and len(v) == 1 else v

    values = {lab: here(lab) for lab in rules if here(lab) is not None}
    if len({json.dumps(v, sort_keys=True, default=str) for v in values.values()}) > 1:
        lines = [f"{head} {' and '.join(f'{RULE_LABELS[lab]} ({lab})' for lab in values)}, equal there; here they "
                 f"differ ({', '.join(f'{lab} {_exact(v)}' for lab, v in values.items())}), so the measured cases "
                 "do not say which rule holds"]
        if e.labels is not None:
            own = next((lab for lab in values if lab in e.labels), None)
            lines.append(f"  this value is {RULE_LABELS[own]} ({own})" if own is not None else
                         f"  this value is neither (its labels: {', '.join(e.labels)})")
        return lines
    rule = rules[0]
    lines = [f"{head} {RULE_LABELS[rule]} ({rule})"
             + (f"; at this point that is {_exact(values[rule])}" if rule in values else "")]
    if e.labels is not None:
        lines.append("  this value follows it" if rule in e.labels else
                     f"  this value does not follow it (its labels: {', '.join(e.labels)})")
    return lines


def _rows_of(index: Mapping[str, Any], program: str, framework: str, case_ids: Sequence[str], mode: str,
             dtype: str, device: str) -> ReportView:
    cells = _table_cells(index, case_ids, mode, dtype, device)
    rows: list[dict[str, Any]] = []
    shown: set[str] = set()
    for case in index["cases"]:
        if case["id"] not in case_ids:
            continue
        for fw, prog in case["programs"]:
            measured = cells.get(f"{case['id']}\t{fw}\t{prog}", {})
            versions = index["releases"].get(fw, {}).get(device, [])
            ranges = _ranges(versions, measured)
            key = json.dumps([fw, prog, ranges], sort_keys=True)
            if key in shown:  # one program in two cases of the same function: one row when it measured alike
                continue
            shown.add(key)
            rows.append({"case": case["id"], "framework": fw, "program": prog,
                         "this": fw == framework and prog == program, "ranges": ranges})
    order = {fw: i for i, fw in enumerate([framework, *sorted({r["framework"] for r in rows} - {framework})])}
    rows.sort(key=lambda r: (not r["this"], order[r["framework"]]))  # stable: the case's program order within
    elsewhere = tuple(c["id"] for c in index["cases"] if c["id"] not in case_ids
                      and [framework, program] in c["programs"])
    return ReportView(index["path"], None, tuple(case_ids), rows, elsewhere, mode, dtype, device)


def _ranges(versions: Sequence[str], measured: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    prev: tuple[Any, ...] | None = None
    for v in versions:
        cell = measured.get(v)
        if cell is None:  # not measured in this mode/dtype there: a gap between ranges
            prev = None
            continue
        sig = (cell["status"], json.dumps(cell["value"], sort_keys=True), cell["label"])
        if sig == prev:
            out[-1]["to"] = v
            out[-1]["releases"] += 1
        else:
            out.append({"from": v, "to": v, "releases": 1, "status": cell["status"], "value": cell["value"],
                        "label": cell["label"], "labels": cell.get("labels") or [cell["label"]]})
        prev = sig
    return out


# --------------------------------------------------------------------------- the whole answer


@dataclass
class Explanation:
    """``grad``'s answer: the value, the judgement, the labels and the report's view (see :func:`render`)."""

    value: dict[str, Any]
    program: str
    framework: str
    dtype: str
    mode: str
    judgement: Judgement
    labels: list[str] | None
    report: ReportView

    def to_json(self) -> dict[str, Any]:
        j = self.judgement
        return {"value": self.value, "program": self.program, "framework": self.framework, "dtype": self.dtype,
                "mode": self.mode,
                "sympy": None if j.sympy is None else {"text": j.sympy, "source": j.source},
                "oracle": j.oracle, "judged": j.reason is None, "reason": j.reason, "labels": self.labels,
                "tie": j.tie, "report": self.report.to_json()}


@dataclass
class _Request:
    program: str
    tree: ex.Node | None
    at: dict[str, Any]
    framework: str
    wrt: tuple[str, ...]
    sympy_text: str | None
    report: str
    report_given: bool
    mode: str
    dtype: str
    device: str


class Pending:
    """The judgement and report lookup of one ``grad`` call, running in a daemon thread from construction.

    The report index is read in the thread; the judgement comes from the cache (no sympy) or, on a miss, from
    :func:`judge` in a worker process (``python -m kinkcheck.explain``, memory capped at ``memory_gib``).
    :meth:`finish` waits for it at most ``bound_s`` seconds after the start; past that the worker is killed
    and the judgement is "not judged: the oracle exceeded N s".
    """

    def __init__(self, program: str, at: Mapping[str, Any], framework: str, *, tree: ex.Node | None = None,
                 wrt: Sequence[str] | None = None, sympy_text: str | None = None, report: str | None = None,
                 mode: str = "reverse", dtype: str = "float64", device: str = "cpu",
                 bound_s: float = DEFAULT_ORACLE_TIMEOUT_S, memory_gib: float = 8.0) -> None:
        self.request = _Request(program, tree, dict(at), framework, tuple(at) if wrt is None else tuple(wrt),
                                sympy_text, report or str(default_report()),
                                report is not None or bool(os.environ.get(DATA_ENV)),  # named: it must be there
                                mode, dtype, device)
        self.bound_s = bound_s
        self.index: dict[str, Any] | None = None
        self.report_problem: str | None = None
        self.judgement: Judgement | None = None
        self.error: BaseException | None = None
        self.memory_gib = memory_gib
        self._proc: Any = None
        self._lock = threading.Lock()
        self._cancelled = False
        self._start = time.monotonic()
        atexit.register(self.cancel)  # a grad that ends early (bad program, Ctrl-C) leaves no worker behind
        self._thread = threading.Thread(target=self._run, name="kinkcheck-explain", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        r = self.request
        try:
            try:
                self.index = report_index(r.report)
            except ReportUnavailable as err:
                self.report_problem = str(err)
            cases = self.index["cases"] if self.index else ()
            hit = judge(r.program, r.at, r.framework, wrt=r.wrt, sympy_text=r.sympy_text, cases=cases, compute=False)
            self.judgement = hit if hit is not None else self._in_worker(cases)
        except BaseException as err:  # noqa: BLE001 - handed to the main thread by finish()
            self.error = err

    def _in_worker(self, cases: Sequence[Mapping[str, Any]]) -> Judgement | None:
        """Run :func:`judge` in ``python -m kinkcheck.explain`` within the bound (time, memory): sympy can spend
        minutes in one C call (``10 ** 10 ** 10``) that no thread could interrupt; a process can be killed."""
        import subprocess
        import sys

        import kinkcheck

        r = self.request
        request = json.dumps({"program": r.program, "at": r.at, "framework": r.framework, "wrt": list(r.wrt),
                              "sympy_text": r.sympy_text, "cases": list(cases),
                              "memory_bytes": int(self.memory_gib * 2 ** 30)}).encode()
        env = dict(os.environ)  # the worker imports this very kinkcheck
        src = str(Path(kinkcheck.__file__).resolve().parents[1])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
        with self._lock:
            if self._cancelled:
                return None
            self._proc = subprocess.Popen(_WORKER or [sys.executable, "-m", "kinkcheck.explain"],
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          start_new_session=True, env=env)
        try:
            out, err = self._proc.communicate(request, timeout=max(0.1, self._start + self.bound_s - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.cancel()
            return None
        except (OSError, ValueError):  # cancelled from the main thread while waiting
            return None
        try:
            answer = json.loads(out)
        except ValueError:
            answer = None
        if isinstance(answer, dict) and isinstance(answer.get("ok"), dict):
            return Judgement.from_json(answer["ok"])
        if isinstance(answer, dict) and answer.get("bad_input"):
            raise ex.ExprError(str(answer.get("error")))
        code = self._proc.returncode
        said = [ln for ln in err.decode("utf-8", "replace").splitlines() if ln.strip()]
        why = (answer or {}).get("error") if isinstance(answer, dict) else None
        if why is None and code is not None and code < 0:
            why = f"killed by signal {-code}; its memory limit is {self.memory_gib:g} GiB"
        if why is None:
            why = f"exit status {code}{': ' + said[-1][:200] if said else ''}"
        return Judgement(None, "none", _components(r.at, r.wrt), None, f"not judged: the judgement failed ({why})")

    def cancel(self) -> None:
        """Kill the judgement's worker, if one runs (grad is answering without it, or leaving)."""
        from kinkcheck.probe.worker import kill_group

        with self._lock:
            self._cancelled = True
            proc = self._proc
        if proc is not None and proc.poll() is None:
            kill_group(proc)

    def finish(self, value: Mapping[str, Any]) -> Explanation:
        """The explanation of the measured ``value`` (grad's answer).

        Any other failure of the judgement becomes "not judged: the judgement failed (…)".

        Raises
        ------
        kinkcheck.expr.ExprError
            A ``--sympy`` text that does not evaluate over the inputs.
        ReportUnavailable
            ``--report`` was given and the file is missing or not a report.
        """
        r = self.request
        self._thread.join(max(0.0, self._start + self.bound_s - time.monotonic()))
        if isinstance(self.error, ex.ExprError) and not self._thread.is_alive():  # a bad --sympy text
            raise self.error
        if r.report_given and self.report_problem is not None:
            raise ReportUnavailable(self.report_problem)
        timed_out = self._thread.is_alive()
        if timed_out:
            self.cancel()
        j = None if timed_out else self.judgement
        if self.error is not None and not timed_out:  # a failure of this code, not the user's: said, no traceback
            j = Judgement(None, "none", _components(r.at, r.wrt), None,
                          f"not judged: the judgement failed ({type(self.error).__name__}: {str(self.error)[:200]})")
        elif j is None:  # still running: answer without it
            j = Judgement(None, "none", _components(r.at, r.wrt), None,
                          f"not judged: the oracle exceeded {self.bound_s:g} s (change it with --oracle-timeout)")
        if self.index is None:
            view = ReportView(r.report, self.report_problem or f"the report at {r.report} was not read in time")
        else:
            view = report_rows(self.index, r.program, r.framework, j.cases, mode=r.mode, dtype=r.dtype,
                               device=r.device, at=r.at,
                               kink=j.oracle is not None and j.oracle.get("kind") in ("kink", "jump"))
        value = dict(value)
        return Explanation(value, r.program, r.framework, r.dtype, r.mode, j, labels(value, j, r.dtype, r.mode), view)


def _exact(entry: Any) -> str:
    if entry is None:
        return "—"
    if isinstance(entry, list):
        return "(" + ", ".join(_exact(e) for e in entry) + ")"
    return str(entry["exact"])


def render(e: Explanation) -> str:
    """The text ``grad`` prints after the value line (several lines, ending with a newline)."""
    from kinkcheck.report.view import fmt_value, oracle_finding

    j = e.judgement
    lines: list[str] = []
    if j.sympy is not None:
        src = "from --sympy" if j.source == "--sympy" else "mapped from the program; --sympy '…' to pass another"
        if j.source == "catalog":
            src = f"the sympy field of {j.cases[0]}: the mapping lacks this program; --sympy '…' to pass another"
        lines.append(f"sympy form: {j.sympy}  ({src})")
    o = j.oracle
    if o is not None and o.get("kind") != "not-judged":
        lines.append(f"oracle: {oracle_finding(o['kind'], o.get('lipschitz'))}")  # as the case pages say it
        if len(j.components) == 1 and (o.get("left") or o.get("right")):
            lines.append(f"one-sided derivatives: left {_exact(o.get('left'))}, right {_exact(o.get('right'))}")
        if o.get("derivative") is not None:
            lines.append(f"derivative: {_exact(o['derivative'])}")
        elif o.get("clarke") is not None:
            cl = o["clarke"]
            hull = (f"[{_exact(cl[0][0])}, {_exact(cl[-1][0])}]" if len(j.components) == 1
                    else "conv{" + ", ".join(_exact(v) for v in cl) + "}")
            mn = o["min_norm"]
            lines.append(f"Clarke set: {hull}; min-norm element: {_exact(mn[0] if len(mn) == 1 else mn)}")
        for note in o.get("notes") or ():
            if "Lipschitz" in note or "jump" in note or "continuum" in note or "pieces' slopes" in note:
                lines.append(f"  note: {note}")
    if j.reason is not None:
        lines.append(j.reason)
    if e.labels is not None:
        what = "H @ 1" if e.mode == "second-order" else "value"
        lines.append(f"labels of this {what} ({e.dtype}, {e.framework}): {', '.join(e.labels)}")
    v = e.report
    if v.problem is not None:
        lines.append(f"report: {v.problem}")
    elif not v.rows:
        lines.append(f"report ({v.path}): nothing at this point"
                     + (f"; {e.program} is measured at {', '.join(v.elsewhere)}" if v.elsewhere else ""))
    elif v.same_operation:
        lines.append(f"report ({v.path}): {e.program} is not measured at this point; {', '.join(v.same_operation)} "
                     f"with other arguments is, {'at other points: ' if v.other_points else 'at '}"
                     f"{', '.join(v.cases)} (the closest measured cases), "
                     f"{v.mode} {v.dtype} {v.device}:")
    else:
        lines.append(f"report ({v.path}), case {', '.join(v.cases)}, {v.mode} {v.dtype} {v.device}:")
    if v.rows:
        width = min(max(len(r["program"]) for r in v.rows), 44)  # a long program pushes only its own row right
        fw_width = max(len(r["framework"]) for r in v.rows)  # tensorflow, mindspore: the programs stay aligned
        several = len({r["case"] for r in v.rows}) > 1  # rows of several cases at this point: each names its own
        case_width = max(len(r["case"]) for r in v.rows)
        for r in v.rows:
            ranges = " · ".join(
                (f"{fmt_value(g['value'])} ({g['label']})" if g["status"] == "ok" else g["status"])
                + f" {g['from']}" + (f"–{g['to']}" if g["to"] != g["from"] else "") for g in r["ranges"]) or "not measured"
            mark = "  ← this program" if r["this"] else ""
            case = f"{r['case']:<{case_width}}  " if several else ""
            lines.append(f"  {case}{r['framework']:<{fw_width}} {r['program']:<{width}}  {ranges}{mark}")
        if v.elsewhere:
            lines.append(f"  also measured at: {', '.join(v.elsewhere)}")
        lines += _rule_lines(e, o if isinstance(o, dict) else None)
    return "\n".join(lines) + "\n"


def oracle_timeout_from_env(value: str | float | None) -> float:
    """``--oracle-timeout`` (else ``$KINKCHECK_ORACLE_TIMEOUT``, else the default) as seconds.

    Raises
    ------
    ValueError
        Not a positive finite number (one line).
    """
    from kinkcheck.probe.worker import _positive  # the one parser of --timeout/--memory-like limits

    return _positive(value, "KINKCHECK_ORACLE_TIMEOUT", "--oracle-timeout", os.environ, DEFAULT_ORACLE_TIMEOUT_S)


#: The judgement worker's command when not the default ``python -m kinkcheck.explain`` (tests point it elsewhere).
_WORKER: list[str] | None = None


def _worker() -> int:
    """``python -m kinkcheck.explain``: one request (JSON on stdin) → ``{"ok": judgement}``, ``{"error": …,
    "bad_input": true}`` for a ``--sympy`` text that does not evaluate, or ``{"error": …}``."""
    import sys

    request = json.loads(sys.stdin.buffer.read())
    from kinkcheck.probe.worker import limit_memory

    limit_memory(int(request["memory_bytes"]))
    try:
        j = judge(request["program"], request["at"], request["framework"], wrt=request["wrt"],
                  sympy_text=request["sympy_text"], cases=request["cases"])
        answer: dict[str, Any] = {"ok": j.to_json()}  # type: ignore[union-attr]
    except ex.ExprError as err:
        answer = {"error": str(err), "bad_input": True}
    except MemoryError:
        answer = {"error": "the oracle exceeded its memory limit"}
    sys.stdout.write(json.dumps(answer))
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(_worker())
