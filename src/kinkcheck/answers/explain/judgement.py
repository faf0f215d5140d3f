"""The judgement of ``kinkcheck grad``: a program (or a ``--sympy`` text) at a point → its sympy form and the
oracle's answer there, cached on disk; and the labels of a measured value against it."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from importlib import metadata, resources
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from kinkcheck.cache import cache_dir
from kinkcheck.catalog import FRAMEWORKS, Case, CatalogError, load_catalog
from kinkcheck.language import expr as ex
from kinkcheck.oracles.rows import source_files
from kinkcheck.oracles.table import ORACLE_SOURCES
from kinkcheck.shards import write_json_atomic
from kinkcheck.vocabulary import NOT_JUDGED

#: Version of the cached entries' layout: bump to orphan old entries.
_FORMAT = 1


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
    h = hashlib.sha256()
    explain = [("kinkcheck.answers.explain", f) for f in ("__init__.py", "judgement.py", "rows.py")]
    for pkg, name in (*explain, *ORACLE_SOURCES):
        h.update(resources.files(pkg).joinpath(name).read_bytes())
    for path in source_files():  # the mapping: its modules and every framework's rows
        h.update(path.read_bytes())
    h.update(_sympy_release())
    return h.hexdigest()[:16]


def _sympy_release() -> bytes:
    """sympy's ``release.py`` (its version), read without importing sympy: ``importlib.metadata.version``
    scans every installed distribution, a quarter of a second on a busy machine, on every warm ``grad``."""
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
        The program's canonical text (:func:`kinkcheck.language.expr.unparse`, as catalog program ids).
    at : mapping
        Input name → number or nested list (``inf``/``nan`` allowed; ``int:`` inputs as ints).
    framework : str
        ``"torch"`` or ``"jax"``.
    tree : kinkcheck.language.expr.Node, optional
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
    kinkcheck.language.expr.ExprError
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

    from kinkcheck.oracles import symbolic as sym  # slow: numpy, sympy

    if sympy_text is not None:
        expr, symbols, point, source = *_from_text(sympy_text, at, wrt), "--sympy"
    else:
        from kinkcheck.oracles.mapping import Unmapped, sympy_form  # slow: numpy, sympy

        components = _components(at, wrt)
        same_text = [c["id"] for c in cand if program in c["programs"]]
        try:
            form = sympy_form(tree if tree is not None else ex.parse(program, at, FRAMEWORKS), at, framework, wrt=wrt)
            expr, symbols, point, source = form.expr, form.symbols, form.point, "mapping"
        except Unmapped as err:
            if not same_text:
                return Judgement(None, "none", components, None, f"not judged: {err}", (), False)
            # a catalog program at its case's point: judged on the case's hand-written field, as the report does
            # (on the program's own function where its documented constants differ: tinygrad's SELU)
            field = _own_function(same_text[0], framework, program) or next(
                c["sympy"] for c in cand if c["id"] == same_text[0])
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
    if tie and oracle.get("kind") != NOT_JUDGED and oracle.get("first") is None and oracle.get("last") is None:
        oracle = {**oracle, **_routing(expr, at, wrt, matched[0] if matched else None)}
    reason = oracle.get("reason") if oracle.get("kind") == NOT_JUDGED else None
    return Judgement(text, source, tuple(s.name for s in symbols), oracle, reason, tuple(c["id"] for c in matched), tie)


def _own_function(case_id: str, framework: str, program: str) -> str | None:
    """The program's own function in the installed catalog (:attr:`kinkcheck.catalog.Case.own_functions`), or None."""
    try:
        own = load_catalog().case(case_id).own_functions.get((framework, program))
    except (CatalogError, KeyError, OSError):
        return None
    return None if own is None else own.sympy


def _routing(expr: Any, at: Mapping[str, Any], wrt: Sequence[str], case: Mapping[str, Any] | None) -> dict[str, Any]:
    """The tie routings ``first``/``last`` (:mod:`kinkcheck.oracles.routing`) as oracle JSON entries: on the
    matched catalog case's own expression when there is one (the report's), else on the sympy form as sympy
    prints it (its symbols are named ``v[0]``, so the text is in the catalog's language), where a tied max of
    tied mins (an order statistic sympy expanded) is refused rather than routed node by node."""
    from kinkcheck.oracles import symbolic as sym  # slow: numpy, sympy
    from kinkcheck.oracles.routing import routing  # slow: sympy

    if case is not None:
        got = routing(SimpleNamespace(sympy=case["sympy"], at=case["at"]))  # type: ignore[arg-type]
    else:
        got = routing(SimpleNamespace(sympy=str(expr), at={k: at[k] for k in wrt}),  # type: ignore[arg-type]
                      nested=False)

    def vec(v: Any) -> Any:
        return None if v is None else [sym._num_json(c) for c in v]

    out = {"first": vec(got.first), "last": vec(got.last)}
    if got.first is None and got.last is None and got.reason and "tied selections" in got.reason:
        out["tie_position"] = "unknown"  # the form sympy wrote hides the ranks: not "neither first nor last"
    return out


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
    from kinkcheck.oracles import symbolic as sym  # slow: numpy, sympy

    expr, syms, point = sym.to_sympy(Case(id="--sympy", title="--sympy", sympy=text, at=dict(at)))
    keep = {c for c in _components(at, wrt)}
    fixed = {s: p for s, p in zip(syms, point) if s.name not in keep}
    if fixed:
        expr = expr.xreplace(fixed)
    pairs = [(s, p) for s, p in zip(syms, point) if s.name in keep]
    return expr, tuple(s for s, _ in pairs), tuple(p for _, p in pairs)


def _text(expr: Any) -> str:
    try:
        from kinkcheck.oracles.mapping import _TextPrinter  # slow: sympy; decimals as written (0.7, not 7/10)

        return _TextPrinter().doprint(expr)
    except ImportError:
        return str(expr)


def _same_function(expr: Any, symbols: Sequence[Any], case: Mapping[str, Any]) -> bool:
    """Whether ``expr`` and a report case's sympy field are the same function near the point: equal values
    at the point and at 12 points around it (exact substitution, compared to 1e-12)."""
    import sympy

    from kinkcheck.oracles import symbolic as sym  # slow: numpy, sympy

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


def flat_value(value: Mapping[str, Any], wrt: Sequence[str] | None = None) -> list[float]:
    """A grad answer (input name → encoded number or nested list, ``"nan"``/``"inf"``/``"-inf"`` as text) as
    the flat list of floats in component order (``wrt`` order, row-major)."""

    def rec(v: Any) -> list[float]:
        return [x for e in v for x in rec(e)] if isinstance(v, list) else [float(v)]

    return [x for k in (wrt if wrt is not None else list(value)) for x in rec(value[k])]


def labels(value: Mapping[str, Any], judgement: Judgement, dtype: str, mode: str = "reverse") -> list[str] | None:
    """The labels of a measured gradient (``grad``'s answer) under ``judgement``, in the report's precedence
    (:func:`kinkcheck.oracles.classify.classify`, tolerance of ``dtype``); ``second-order`` is judged against the
    oracle's ``H @ 1``. An oracle that could not decide gives ``["not-judged"]`` (as the report's cells);
    None when there is no oracle at all (no symbolic form, the bound exceeded)."""
    from kinkcheck.oracles.classify import OracleNumbers, classify  # slow: numpy

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
