"""The kink catalog: cases and programs, loaded from ``references/catalog.toml``.

A :class:`Case` is a function (a sympy expression in the call-expression language) at a kink point; a
:class:`Program` is one framework's call expression for it. Ids are stable: a case id is
``"<function>@<point>"``; a program id is its canonical expression text (aliases expanded), unique within
its case and framework. Loading validates every expression with :mod:`kinkcheck.language.expr` (no framework is imported).
"""

from __future__ import annotations

import hashlib
import json
import math
import pickle
import sys
import tomllib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

from kinkcheck import registry
from kinkcheck.cache import read_cached, write_cached
from kinkcheck.language import expr as ex
from kinkcheck.language import points
from kinkcheck.language.anchors import program_slug, slug

__all__ = ["FRAMEWORKS", "PROGRAMS_DIR", "STAGED_DIR", "Case", "Catalog", "CatalogError", "Program", "default_catalog_path",
           "forget_loaded", "load_catalog", "staged_case_ids", "staged_path", "with_staged"]

#: Frameworks that have adapters; a program's framework is its expression's root name.
FRAMEWORKS: tuple[str, ...] = registry.FRAMEWORKS

#: Names usable in a case's ``sympy`` field (resolved by :mod:`kinkcheck.oracles.symbolic`).
SYMPY_NAMES: frozenset[str] = frozenset(
    {"Max", "Min", "Abs", "sqrt", "exp", "log", "floor", "ceiling", "sign", "Piecewise", "Heaviside", "kth_smallest",
     "Eq", "Ne", "Mod", "atan2", "xlogy", "xlog1py", "log1p", "expm1", "log2", "log10", "sigmoid", "trunc", "frac",
     "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "sinc", "erf",
     "erfc", "besseli", "pi", "E"}
)


class CatalogError(ValueError):
    """The catalog file is missing, malformed or inconsistent; ``str(err)`` is a one-line reason."""


@dataclass(frozen=True)
class Program:
    """One framework's call expression for a case.

    Attributes
    ----------
    id : str
        Canonical expression text, e.g. ``"torch.clamp(x, min=0)"``; unique within its case and
        framework (a method chain such as ``v.max()`` may appear under both frameworks).
    framework : str
        ``"torch"`` or ``"jax"`` (the expression's root name).
    tree : kinkcheck.language.expr.Node
        The parsed expression.
    """

    id: str
    framework: str
    tree: ex.Node = field(repr=False, compare=False)


@dataclass(frozen=True)
class OwnFunction:
    """A program's own function where it differs from its case's by documented constants.

    Attributes
    ----------
    sympy : str
        The program's function in the case's language, with the program's constants
        (``1.0507 * (Max(x, 0) + Min(0, 1.67326 * (exp(x) - 1)))``).
    constants : str
        The constants in words, as a reader checks them (``"λ = 1.0507, α = 1.67326"``).
    """

    sympy: str
    constants: str


@dataclass(frozen=True)
class Case:
    """A function at a kink point.

    Attributes
    ----------
    id : str
        Stable id, e.g. ``"relu@0"``.
    sympy : str
        The function over sympy names; inputs as in :attr:`at` (vectors indexed, ``v[0]``).
    at : dict
        Input name → number or nested list of numbers (order = argument order of the gradient).
    tie : bool
        True when the kink is a tie between arguments or elements (tie labels apply).
    activation : str or None
        NumPy activation used for the P0 network cross-check.
    programs : tuple of Program
    notes : dict
        Framework → note about its programs (e.g. "JAX has no hardshrink").
    no_equivalent : dict
        Framework → why it has no program for this case.
    modes : tuple of str
        Modes probed for this case besides the probe's own (P9 needs ``forward`` next to ``reverse``).
    """

    id: str
    title: str
    sympy: str
    at: Mapping[str, Any]
    tie: bool = False
    activation: str | None = None
    sources: tuple[str, ...] = ()
    note: str | None = None
    programs: tuple[Program, ...] = ()
    notes: Mapping[str, str] = field(default_factory=dict)
    no_equivalent: Mapping[str, str] = field(default_factory=dict)
    modes: tuple[str, ...] = ()
    #: (framework, program id) → the program's own function where it differs from the case's by documented
    #: constants (tinygrad's SELU rounds λ to 1.0507): judged against both, labelled by its own.
    own_functions: Mapping[tuple[str, str], OwnFunction] = field(default_factory=dict)

    @property
    def inputs(self) -> tuple[str, ...]:
        return tuple(self.at)

    def programs_for(self, framework: str) -> tuple[Program, ...]:
        return tuple(p for p in self.programs if p.framework == framework)

    def program(self, framework: str, program_id: str) -> Program:
        for p in self.programs:
            if p.framework == framework and p.id == program_id:
                return p
        raise KeyError(f"case {self.id!r} has no program {program_id!r}")

    def measurement_hash(self, framework: str) -> str:
        """16 hex digits of what determines ``framework``'s observations of this case.

        SHA-256 of the canonical JSON of the point (input order kept: it orders the gradient), the
        framework's program ids (canonical text, so an alias spelling does not count as a change), the
        extra modes and the activation (P0's network runs). The sympy expression, tie flag, title, notes
        and sources are left out: they change how observations are judged, which every render redoes, not
        what a framework returns; and another framework's programs do not make this one's shard stale.
        Shards record it per case (``environment.case_hashes``) for per-case freshness.
        """
        canon = json.dumps(
            {"at": [[k, v] for k, v in self.at.items()], "programs": [p.id for p in self.programs_for(framework)],
             "modes": list(self.modes), "activation": self.activation},
            separators=(",", ":"), default=str,
        )
        return hashlib.sha256(canon.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Catalog:
    """All cases, in file order, with the catalog hash written into shards."""

    cases: tuple[Case, ...]
    hash: str
    path: str
    #: The staged cases follow the catalog's (:func:`with_staged`); a probe's worker loads them too.
    staged: bool = False

    def __iter__(self) -> Iterator[Case]:
        return iter(self.cases)

    def __len__(self) -> int:
        return len(self.cases)

    def case(self, case_id: str) -> Case:
        for c in self.cases:
            if c.id == case_id:
                return c
        raise KeyError(f"no case {case_id!r} in the catalog")

    def programs(self, framework: str | None = None) -> Iterator[tuple[Case, Program]]:
        for c in self.cases:
            for p in c.programs:
                if framework is None or p.framework == framework:
                    yield c, p


def default_catalog_path() -> Path:
    """``references/catalog.toml`` of the source tree, or the copy installed with the package."""
    here = Path(__file__).resolve()
    tree = here.parents[1].name == "src" and (here.parents[2] / "pyproject.toml").is_file()  # not an installed copy
    for cand in (*([here.parents[2] / "references" / "catalog.toml"] if tree else []),
                 here.parent / "data" / "catalog.toml"):
        if cand.is_file():
            return cand
    raise CatalogError(f"catalog not found next to {here.parent} (expected references/catalog.toml)")


_KIND_NAMES = {str: "a string", dict: "a table", list: "a list", bool: "true or false"}


def _need(entry: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    if key not in entry:
        raise CatalogError(f"{where}: missing field {key!r}")
    return _opt(entry, key, kind, where, None)


def _opt(entry: Mapping[str, Any], key: str, kind: type, where: str, default: Any) -> Any:
    """``entry[key]`` (or ``default`` when absent), which must be a ``kind``; a list or table of strings
    for ``list``/``dict`` (every catalog list and table holds text)."""
    if key not in entry:
        return default
    val = entry[key]
    if not isinstance(val, kind):
        raise CatalogError(f"{where}: field {key!r} must be {_KIND_NAMES.get(kind, kind.__name__)}, "
                           f"not {_toml_type(val)}")
    items = val.values() if isinstance(val, dict) else val if isinstance(val, list) else ()
    bad = next((v for v in items if not isinstance(v, str)), None)
    if bad is not None:
        raise CatalogError(f"{where}: field {key!r} must hold strings, not {_toml_type(bad)} {bad!r}")
    return val


def _toml_type(val: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a float", str: "a string", list: "a list",
            dict: "a table"}.get(type(val), type(val).__name__)


def _point(at: Mapping[str, Any], where: str) -> None:
    """Each input of ``at``: a finite number (float64) or a non-empty rectangular list of them."""
    for name, val in at.items():
        if not name.isidentifier() or name in FRAMEWORKS or name in ex.ALIASES:
            raise CatalogError(f"{where}: input name {name!r} must be an identifier other than a namespace")
        stack = [val]
        while stack:
            v = stack.pop()
            if isinstance(v, list):
                stack.extend(v)
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise CatalogError(f"{where}: input {name!r}: {_toml_type(v)} {str(v)[:20]!r} is not a number")
            try:
                ok = math.isfinite(float(v))
            except OverflowError:
                ok = False
            if not ok:
                raise CatalogError(f"{where}: input {name!r}: {v!r} is not a finite float64 number")
        try:
            points._check_rectangular(val, name)
            if isinstance(val, list):
                points._shape(val)
        except ex.ExprError as err:
            raise CatalogError(f"{where}: {err}") from None


def _case(entry: Any, index: int, catalogued: frozenset[str] = frozenset(),
          files: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None,
          only: frozenset[str] | None = None, programs_dir: str = "references/programs") -> Case:
    where = f"case #{index + 1}"
    if not isinstance(entry, dict):
        raise CatalogError(f"{where}: a case must be a table ([[case]]), not {_toml_type(entry)}")
    cid = _need(entry, "id", str, where)
    where = f"case {cid!r}"
    if "at" not in entry:
        raise CatalogError(f"{where}: missing field 'at'")
    if not isinstance(entry["at"], dict):
        raise CatalogError(f"{where}: field 'at' must be a table of input = number or list, not {_toml_type(entry['at'])}")
    at = dict(entry["at"])
    if not at:
        raise CatalogError(f"{where}: 'at' names no input")
    _point(at, where)
    sympy_text = _need(entry, "sympy", str, where)
    try:
        ex.parse(sympy_text, at, SYMPY_NAMES)
    except ex.ExprError as err:
        raise CatalogError(f"{where}: sympy field: {err}") from None
    table = entry.get("programs", {})
    if not isinstance(table, dict):
        raise CatalogError(f"{where}: 'programs' must be a table of framework = [expressions]")
    no_eq = dict(_opt(entry, "no_equivalent", dict, where, {}))
    notes = dict(_opt(entry, "notes", dict, where, {}))
    for fw in table:
        if fw not in FRAMEWORKS:
            raise CatalogError(f"{where}: unknown framework {fw!r} (known: {', '.join(FRAMEWORKS)})")
        _opt(table, fw, list, f"{where}: programs", [])
    texts = {fw: list(table.get(fw, [])) for fw in FRAMEWORKS}
    own_texts: dict[tuple[str, str], Any] = {}
    for fw, entries in (files or {}).items():  # a framework's own program file (references/programs/<fw>.toml)
        if fw in table or fw in no_eq:
            raise CatalogError(f"{where}: {fw} programs are in both the case and {programs_dir}/{fw}.toml")
        own = entries.get(cid)
        if own is None:
            raise CatalogError(f"{programs_dir}/{fw}.toml: no entry for case {cid!r} (list its programs or "
                               "give a no_equivalent reason)")
        texts[fw] = list(own.get("programs", []))
        if "no_equivalent" in own:
            no_eq[fw] = own["no_equivalent"]
        if "note" in own:
            notes[fw] = own["note"]
        for text, fn in (own.get("own_functions") or {}).items():
            own_texts[(fw, text)] = fn
    programs: list[Program] = []
    seen: set[tuple[str, str]] = set()
    for fw in FRAMEWORKS:
        if fw not in catalogued:
            continue  # registered, but no program table yet: it has no programs (the report says so)
        if not texts[fw] and fw not in no_eq:
            raise CatalogError(f"{where}: no {fw} program and no no_equivalent.{fw} reason")
        if only is not None and fw not in only:
            continue  # a probe of one framework parses its programs only (the catalog grows with frameworks)
        for text in texts[fw]:
            try:
                tree = ex.parse(text, at, {fw})
            except ex.ExprError as err:
                raise CatalogError(f"{where}: {err}") from None
            pid = ex.unparse(tree)
            if (fw, pid) in seen:
                raise CatalogError(f"{where}: {fw} program {pid!r} listed twice")
            seen.add((fw, pid))
            programs.append(Program(pid, fw, tree))
    own_functions: dict[tuple[str, str], OwnFunction] = {}
    for (fw, text), fn in own_texts.items():
        at_where = f"{where}: {fw} own_functions[{text!r}]"
        if only is not None and fw not in only:
            continue
        try:
            pid = ex.unparse(ex.parse(text, at, {fw}))
        except ex.ExprError as err:
            raise CatalogError(f"{at_where}: {err}") from None
        if (fw, pid) not in seen:
            raise CatalogError(f"{at_where}: not one of the case's {fw} programs")
        if not isinstance(fn, dict) or set(fn) != {"sympy", "constants"} or not all(
                isinstance(v, str) and v for v in fn.values()):
            raise CatalogError(f"{at_where}: must be a table with a 'sympy' and a 'constants' string")
        try:
            ex.parse(fn["sympy"], at, SYMPY_NAMES)
        except ex.ExprError as err:
            raise CatalogError(f"{at_where}: sympy field: {err}") from None
        own_functions[(fw, pid)] = OwnFunction(fn["sympy"], fn["constants"])
    return Case(
        id=cid,
        title=_opt(entry, "title", str, where, cid),
        sympy=sympy_text,
        at=at,
        tie=_opt(entry, "tie", bool, where, False),
        activation=_opt(entry, "activation", str, where, None),
        sources=tuple(_opt(entry, "sources", list, where, ())),
        note=_opt(entry, "note", str, where, None),
        programs=tuple(programs),
        notes={fw: notes[fw] for fw in FRAMEWORKS if fw in notes},  # registry order, wherever each was written
        no_equivalent={fw: no_eq[fw] for fw in FRAMEWORKS if fw in no_eq},
        modes=_modes(entry.get("modes", ()), where),
        own_functions=own_functions,
    )


def _modes(value: Any, where: str) -> tuple[str, ...]:
    known = ("reverse", "forward")  # kinkcheck.frameworks.MODES; not imported: the catalog stays framework-free
    if not isinstance(value, (list, tuple)) or any(not isinstance(m, str) or m not in known for m in value):
        raise CatalogError(f"{where}: 'modes' must be a list of {', '.join(known)}")
    return tuple(value)


#: Folder beside the catalog holding one program file per framework (``programs/tensorflow.toml``).
PROGRAMS_DIR = "programs"
_PROGRAM_FIELDS = {"programs": list, "no_equivalent": str, "note": str, "own_functions": dict}


def _program_files(folder: Path, case_ids: list[Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """Framework → case id → ``{"programs": [...], "no_equivalent": "...", "note": "..."}`` from
    ``folder/<framework>.toml`` (a registered framework's own program table; none when the folder is absent).

    Every key of a file must be a case id of the catalog, and every case must have an entry (programs, or
    a ``no_equivalent`` reason).
    """
    if not folder.is_dir():
        return {}
    out: dict[str, dict[str, dict[str, Any]]] = {}
    known = set(case_ids)
    for path in sorted(folder.glob("*.toml")):
        fw = path.stem
        where = f"{folder.parent.name}/{PROGRAMS_DIR}/{path.name}"  # references/… or staged/…
        if fw not in FRAMEWORKS:
            raise CatalogError(f"{where}: {fw!r} is not a registered framework (known: {', '.join(FRAMEWORKS)})")
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except OSError as err:
            raise CatalogError(f"cannot read {where}: {err.strerror}") from None
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
            raise CatalogError(f"{where} is not valid TOML: {err}") from None
        for cid, entry in data.items():
            if cid not in known:
                raise CatalogError(f"{where}: {cid!r} is not a case id of the catalog")
            if not isinstance(entry, dict):
                raise CatalogError(f"{where}: [{cid!r}] must be a table, not {_toml_type(entry)}")
            for key, value in entry.items():
                kind = _PROGRAM_FIELDS.get(key)
                if kind is None:
                    raise CatalogError(f"{where}: case {cid!r}: unknown field {key!r} "
                                       f"(known: {', '.join(_PROGRAM_FIELDS)})")
                if key == "own_functions":  # program → {sympy, constants}: checked where the case is parsed
                    if not isinstance(value, dict):
                        raise CatalogError(f"{where}: case {cid!r}: field 'own_functions' must be a table of "
                                           "program = { sympy = ..., constants = ... }")
                    continue
                _opt(entry, key, kind, f"{where}: case {cid!r}", None)
            if not entry.get("programs") and "no_equivalent" not in entry:
                raise CatalogError(f"{where}: case {cid!r}: no program and no no_equivalent reason")
        out[fw] = data
    return out


@cache
def _load(path: str, only: frozenset[str] | None = None) -> Catalog:
    """:func:`_parse`, through a disk cache keyed on everything the parse reads (:func:`_cache_key`): parsing
    the expressions is a tenth of a light framework's whole probe, and a catalog rarely changes."""
    key = _cache_key(path, only)
    if key is not None:
        data = read_cached("catalogs", key)
        if data is not None:
            try:
                cached = pickle.loads(data)
            except Exception:  # noqa: BLE001 - a torn or stale file: parse again
                cached = None
            if isinstance(cached, Catalog):
                return cached if cached.path == path else replace(cached, path=path)
    catalog = _parse(path, only)
    if key is not None:
        write_cached("catalogs", key, pickle.dumps(catalog, protocol=pickle.HIGHEST_PROTOCOL))
    return catalog


#: Modules whose code decides what a parse of the catalog gives (their source is part of the cache key).
_PARSER_MODULES = ("catalog", "language/expr", "registry", "language/anchors", "dtypes")


def _cache_key(path: str, only: frozenset[str] | None) -> str | None:
    """A digest of the catalog file, its program files, the parser's source, the registry's names, aliases and
    modes, the selection ``only`` and Python's version; None when a file cannot be read (the parse then says
    why). Not the path: the same content anywhere (the tests' catalogs) is one entry."""
    p = Path(path)
    h = hashlib.sha256(repr((sorted(only) if only is not None else None, sys.version,
                             [(f.name, f.aliases, f.modes) for f in registry.REGISTRY.values()])).encode())
    folder = p.parent / PROGRAMS_DIR
    try:
        files = [p, *(sorted(folder.glob("*.toml")) if folder.is_dir() else ())]
        files += [Path(__file__).parent / f"{m}.py" for m in _PARSER_MODULES]
        if not p.is_file():
            return None
        for f in files:
            h.update(f"\0{f.name}\0".encode())
            h.update(f.read_bytes())
    except OSError:
        return None
    return h.hexdigest()[:32]


def _parse(path: str, only: frozenset[str] | None = None) -> Catalog:
    p = Path(path)
    if p.exists() and not p.is_dir() and not p.is_file():  # a FIFO or device would block the reader
        raise CatalogError(f"cannot read catalog {path}: not a regular file")
    try:
        raw = p.read_bytes()
    except OSError as err:
        raise CatalogError(f"cannot read catalog {path}: {err.strerror}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise CatalogError(f"catalog {path} is not valid TOML: {err}") from None
    except RecursionError:
        raise CatalogError(f"catalog {path} is not valid TOML: nested too deeply") from None
    entries = data.get("case", [])
    if not isinstance(entries, list):
        raise CatalogError(f"catalog {path}: 'case' must be an array of tables ([[case]]), not {_toml_type(entries)}")
    if not entries:
        raise CatalogError(f"catalog {path} has no case (add [[case]] tables; see references/catalog.toml)")
    files = _program_files(p.parent / PROGRAMS_DIR, [e.get("id") for e in entries if isinstance(e, dict)])
    catalogued = frozenset(fw for e in entries if isinstance(e, dict)
                           for key in ("programs", "no_equivalent") if isinstance(e.get(key), dict)
                           for fw in e[key]) | frozenset(files)
    try:
        cases = tuple(_case(e, i, catalogued, files, only, f"{p.parent.name}/{PROGRAMS_DIR}")
                      for i, e in enumerate(entries))
    except RecursionError:  # a point nested past what the shape checks walk (parsed, but no catalog point)
        raise CatalogError(f"catalog {path}: a value is nested too deeply") from None
    ids = [c.id for c in cases]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise CatalogError(f"catalog {path}: duplicate case ids {dupes}")
    named: dict[str, str] = {}
    for i in ids:  # the report names a case's page and anchors by its slug: two ids must not share one
        other = named.setdefault(slug(i), i)
        if other != i:
            raise CatalogError(f"catalog {path}: case ids {other!r} and {i!r} read the same in a report page name "
                               f"and anchor ({slug(i)!r}): rename one")
    for c in cases:  # each program's row has an anchor named by its slug
        rows: dict[tuple[str, str], str] = {}
        for prog in c.programs:
            other = rows.setdefault((prog.framework, program_slug(prog.id)), prog.id)
            if other != prog.id:
                raise CatalogError(f"catalog {path}: case {c.id!r}: {prog.framework} programs {other!r} and "
                                   f"{prog.id!r} read the same in a report anchor "
                                   f"({program_slug(prog.id)!r}): rewrite one")
    return Catalog(cases, _content_hash(entries, files), str(p))


#: A case's per-framework tables (``[case.programs]``, ``[case.notes]``, ``[case.no_equivalent]``) and the field
#: of a program file (``programs/<framework>.toml``) each one is.
_CASE_TABLES = {"programs": "programs", "notes": "note", "no_equivalent": "no_equivalent"}


def _content_hash(entries: list[Any], files: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> str:
    """16 hex digits of the catalog's parsed content, not its bytes: comments and layout do not make shards stale,
    nor does where a framework's programs are written (a case's own tables, or the framework's program file: each
    case table is hashed as the program file's entry it would be)."""
    cases: list[Any] = []
    programs: dict[str, dict[str, dict[str, Any]]] = {fw: {cid: dict(e) for cid, e in t.items()} for fw, t in files.items()}
    for entry in entries:
        cases.append({k: v for k, v in entry.items() if k not in _CASE_TABLES})
        for key, named in _CASE_TABLES.items():
            for fw, value in entry.get(key, {}).items():
                programs.setdefault(fw, {}).setdefault(entry["id"], {})[named] = value
    canon = json.dumps({"case": cases, "programs": programs}, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canon.encode()).hexdigest()[:16]


def forget_loaded() -> None:
    """Forget the catalogs :func:`load_catalog` memoized in this process (by path): after a catalog file is
    rewritten in place (:func:`kinkcheck.probe.staging.promote`), the next load reads it again."""
    _load.cache_clear()


#: Folder beside the catalog holding the staged cases: written and checked, measured into the shards ahead of
#: their move into the catalog (``nox -s report`` probes them), not reported until they move.
STAGED_DIR = "staged"


#: How a staged case's ``no_equivalent`` reason begins while a framework's program is still to be written
#: (``kinkcheck ask --stage`` writes one framework's program and this for the others): the case is measured, and
#: moving it into the catalog (:func:`kinkcheck.probe.staging.promote`) waits until each reason is written.
DRAFT_REASON = "not written yet"


def staged_path(catalog_path: str | Path) -> Path:
    """Where the staged cases of the catalog at ``catalog_path`` live: ``staged/catalog.toml`` beside it (with
    their programs in ``staged/programs/<framework>.toml``, as for the catalog)."""
    return Path(catalog_path).parent / STAGED_DIR / "catalog.toml"


def with_staged(catalog: Catalog, frameworks: Sequence[str] | None = None) -> Catalog:
    """``catalog`` followed by its staged cases (:func:`staged_path`); ``catalog`` itself when it has none.

    The union keeps ``catalog.hash`` and ``catalog.path``: a probe of it records the catalog it was measured
    with, and each case's own measurement hash (``case_hashes``) keeps freshness per case, so a staged case
    measured now is fresh once it moves into the catalog unchanged. ``frameworks`` as for :func:`load_catalog`.

    Raises
    ------
    CatalogError
        The staged file is malformed, one of its ids is already a catalog case (or reads the same in a report
        page name), or its ``programs/`` files are not the catalog's (a case would lack a framework once moved).
    """
    path = staged_path(catalog.path)
    if catalog.staged or not path.is_file():
        return catalog
    staged = load_catalog(path, frameworks)
    twice = sorted({c.id for c in staged} & {c.id for c in catalog})
    if twice:
        raise CatalogError(f"{path}: case ids already in the catalog {catalog.path}: {', '.join(twice[:5])}"
                           f"{', …' if len(twice) > 5 else ''} (remove them from the staged file once moved)")
    named = {slug(c.id): c.id for c in catalog}
    clash = next(((named[slug(c.id)], c.id) for c in staged if slug(c.id) in named), None)
    if clash is not None:
        raise CatalogError(f"{path}: case ids {clash[0]!r} (catalog) and {clash[1]!r} (staged) read the same in a "
                           f"report page name and anchor ({slug(clash[1])!r}): rename the staged one")
    files = [{f.name for f in (folder / PROGRAMS_DIR).glob("*.toml")} if (folder / PROGRAMS_DIR).is_dir() else set()
             for folder in (Path(catalog.path).parent, path.parent)]
    if files[0] != files[1]:
        odd = sorted(files[0] ^ files[1])
        raise CatalogError(f"{path.parent / PROGRAMS_DIR}: the program files must be the catalog's "
                           f"({', '.join(sorted(files[0])) or 'none'}); {', '.join(odd)} on one side only")
    return Catalog(catalog.cases + staged.cases, catalog.hash, catalog.path, staged=True)


def staged_case_ids(catalog_path: str | Path) -> frozenset[str]:
    """The ids of the staged cases beside the catalog at ``catalog_path`` (read, not validated: the report
    only tells their observations apart); empty when there is no staged file or it cannot be read."""
    try:
        data = tomllib.loads(staged_path(catalog_path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError):
        return frozenset()
    entries = data.get("case", [])
    return frozenset(e["id"] for e in entries if isinstance(e, dict) and isinstance(e.get("id"), str)) \
        if isinstance(entries, list) else frozenset()


def load_catalog(path: str | Path | None = None, frameworks: Sequence[str] | None = None) -> Catalog:
    """Load and validate the catalog.

    ``frameworks``: parse only these frameworks' programs (the others are left out of the cases' ``programs``;
    the catalog hash is the whole catalog's). A probe of one framework loads it so: parsing every framework's
    programs is most of a light framework's probe time.

    Raises
    ------
    CatalogError
        Missing file, invalid TOML, a malformed expression, a duplicate id, two case ids or two programs of a
        case and framework with one anchor (:func:`kinkcheck.language.anchors.slug`, :func:`~kinkcheck.language.anchors.program_slug`),
        or a framework without programs and without a ``no_equivalent`` reason.
    """
    return _load(str(Path(path).resolve()) if path is not None else str(default_catalog_path()),
                 frozenset(frameworks) if frameworks is not None else None)


def point_key(value: Any) -> Any:
    """A point's numbers compared as the catalog tells them apart: ``-0.0`` is not ``0``, ``0`` is ``0.0``
    (``{"x": -0.0}`` → ``[["x", "-0.0"]]``); a mapping's names sorted, a vector's order kept."""
    if isinstance(value, Mapping):
        return [[k, point_key(v)] for k, v in sorted(value.items())]
    if isinstance(value, list | tuple):
        return [point_key(v) for v in value]
    return repr(float(value))


def find(framework: str, program: str, at: Mapping[str, Any], cases: Iterable[Case] | None = None
         ) -> tuple[Case, str] | None:
    """The case that holds ``program`` of ``framework`` at the point ``at`` (:func:`point_key`: the sign of zero
    counts) and the catalog's text of it, or None: the one lookup every face makes (``ask``, ``lock``). ``program``
    in any spelling of the catalog's (:func:`kinkcheck.language.expr.same_program`: ``torch.clamp(x, min=0.0)`` is the
    catalog's ``torch.clamp(x, min=0)``); the closest spelling the cases at this point hold, the first case in
    catalog order. ``cases``: default the installed catalog's (:func:`load_catalog` of ``framework`` alone; none
    when it cannot be read)."""
    if cases is None:
        try:
            cases = load_catalog(frameworks=[framework])
        except (CatalogError, OSError):
            return None
    key = point_key(at)
    here = [case for case in cases if point_key(case.at) == key]
    texts = [p.id for case in here for p in case.programs if p.framework == framework]
    for text in ex.same_program(program, texts, at.keys()):
        for case in here:
            if any(p.framework == framework and p.id == text for p in case.programs):
                return case, text
    return None
