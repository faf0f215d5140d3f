"""The kink catalog: cases and programs, loaded from ``references/catalog.toml``.

A :class:`Case` is a function (a sympy expression in the call-expression language) at a kink point; a
:class:`Program` is one framework's call expression for it. Ids are stable: a case id is
``"<function>@<point>"``; a program id is its canonical expression text (aliases expanded), unique within
its case and framework. Loading validates every expression with :mod:`kinkcheck.expr` (no framework is imported).
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from kinkcheck import expr as ex

__all__ = ["FRAMEWORKS", "Case", "Program", "Catalog", "CatalogError", "load_catalog", "default_catalog_path"]

#: Frameworks that have adapters; a program's framework is its expression's root name.
FRAMEWORKS: tuple[str, ...] = ("torch", "jax")

#: Names usable in a case's ``sympy`` field (resolved by :mod:`kinkcheck.oracles.symbolic`).
SYMPY_NAMES: frozenset[str] = frozenset(
    {"Max", "Min", "Abs", "sqrt", "exp", "log", "floor", "ceiling", "sign", "Piecewise", "Heaviside", "kth_smallest"}
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
    tree : kinkcheck.expr.Node
        The parsed expression.
    """

    id: str
    framework: str
    tree: ex.Node = field(repr=False, compare=False)


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


@dataclass(frozen=True)
class Catalog:
    """All cases, in file order, with the catalog hash written into shards."""

    cases: tuple[Case, ...]
    hash: str
    path: str

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
    for cand in (here.parents[2] / "references" / "catalog.toml", here.parent / "data" / "catalog.toml"):
        if cand.is_file():
            return cand
    raise CatalogError(f"catalog not found next to {here.parent} (expected references/catalog.toml)")


def _need(entry: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    if key not in entry:
        raise CatalogError(f"{where}: missing field {key!r}")
    val = entry[key]
    if not isinstance(val, kind):
        raise CatalogError(f"{where}: field {key!r} must be {kind.__name__}")
    return val


def _case(entry: Mapping[str, Any], index: int) -> Case:
    where = f"case #{index + 1}"
    cid = _need(entry, "id", str, where)
    where = f"case {cid!r}"
    at = dict(_need(entry, "at", dict, where))
    if not at:
        raise CatalogError(f"{where}: 'at' names no input")
    for name, val in at.items():
        try:
            ex._check_rectangular(val, name)
        except ex.ExprError as err:
            raise CatalogError(f"{where}: {err}") from None
    sympy_text = _need(entry, "sympy", str, where)
    try:
        ex.parse(sympy_text, at, SYMPY_NAMES)
    except ex.ExprError as err:
        raise CatalogError(f"{where}: sympy field: {err}") from None
    programs: list[Program] = []
    seen: set[tuple[str, str]] = set()
    table = entry.get("programs", {})
    if not isinstance(table, dict):
        raise CatalogError(f"{where}: 'programs' must be a table of framework = [expressions]")
    no_eq = dict(entry.get("no_equivalent", {}))
    for fw in table:
        if fw not in FRAMEWORKS:
            raise CatalogError(f"{where}: unknown framework {fw!r} (known: {', '.join(FRAMEWORKS)})")
    for fw in FRAMEWORKS:
        texts = table.get(fw, [])
        if not texts and fw not in no_eq:
            raise CatalogError(f"{where}: no {fw} program and no no_equivalent.{fw} reason")
        for text in texts:
            try:
                tree = ex.parse(text, at, {fw})
            except ex.ExprError as err:
                raise CatalogError(f"{where}: {err}") from None
            pid = ex.unparse(tree)
            if (fw, pid) in seen:
                raise CatalogError(f"{where}: {fw} program {pid!r} listed twice")
            seen.add((fw, pid))
            programs.append(Program(pid, fw, tree))
    return Case(
        id=cid,
        title=entry.get("title", cid),
        sympy=sympy_text,
        at=at,
        tie=bool(entry.get("tie", False)),
        activation=entry.get("activation"),
        sources=tuple(entry.get("sources", ())),
        note=entry.get("note"),
        programs=tuple(programs),
        notes=dict(entry.get("notes", {})),
        no_equivalent=no_eq,
        modes=_modes(entry.get("modes", ()), where),
    )


def _modes(value: Any, where: str) -> tuple[str, ...]:
    known = ("reverse", "forward")  # kinkcheck.frameworks.MODES; not imported: the catalog stays framework-free
    if not isinstance(value, (list, tuple)) or any(m not in known for m in value):
        raise CatalogError(f"{where}: 'modes' must be a list of {', '.join(known)}")
    return tuple(value)


@cache
def _load(path: str) -> Catalog:
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as err:
        raise CatalogError(f"cannot read catalog {path}: {err.strerror}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise CatalogError(f"catalog {path} is not valid TOML: {err}") from None
    entries = data.get("case", [])
    cases = tuple(_case(e, i) for i, e in enumerate(entries))
    ids = [c.id for c in cases]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise CatalogError(f"catalog {path}: duplicate case ids {dupes}")
    # Hash the parsed content, not the bytes: comments and layout do not make shards stale.
    canon = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    digest = hashlib.sha256(canon.encode()).hexdigest()[:16]
    return Catalog(cases, digest, str(p))


def load_catalog(path: str | Path | None = None) -> Catalog:
    """Load and validate the catalog.

    Raises
    ------
    CatalogError
        Missing file, invalid TOML, a malformed expression, a duplicate id, or a framework without programs
        and without a ``no_equivalent`` reason.
    """
    return _load(str(Path(path).resolve()) if path is not None else str(default_catalog_path()))
