"""The census of kinked operations: every public differentiable function of a framework whose derivative is
not smooth somewhere in its domain, each covered by a catalog case or excluded with a reason.

One TOML file per framework under ``references/census/`` (``torch.toml``, ``jax.toml``), written by the
framework's generator (:mod:`kinkcheck.frameworks.torch.census`, :mod:`kinkcheck.frameworks.jax.census`; ``nox -s census``)
from the framework's own derivative definitions, with the hand-checked fields (``status = "excluded"`` and
its ``reason``, a corrected ``kink``) kept across regenerations::

    framework = "torch"
    release = "2.13.0"
    source = "torchgen/packaged/autograd/derivatives.yaml of torch 2.13.0 ..."

    [[op]]
    name = "torch.nn.functional.relu"           # the public dotted name; ".clamp" is a Tensor method
    aliases = ["torch.relu", ".relu"]           # other public spellings of the same operation
    derivative = "threshold_backward(grad, result, 0)"   # the defining derivative (formula or JVP rule)
    kink = "x = 0"                              # where the derivative is not smooth
    status = "kinked"                           # or "excluded", with a reason
    reason = ""

Coverage is computed, never written by hand (:func:`coverage`): a kinked operation is *covered* when a
catalog program of its framework calls it by its name or an alias (the expression's dotted names and
method names, :func:`names_used`); *excluded* entries carry the reason they need no case (integer-valued
output, random, complex-only, not differentiable by design ...); the rest are *uncovered*: the gaps.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kinkcheck.catalog import Catalog, default_catalog_path
from kinkcheck.language import expr as ex

__all__ = ["STATUSES", "Census", "CensusError", "Coverage", "Op", "census_dir", "census_path", "coverage",
           "load_census", "names_used", "write_census"]

#: An entry's status: a kinked operation (covered or not: computed), or one excluded with a reason.
STATUSES = ("kinked", "excluded")


class CensusError(ValueError):
    """A census file is missing or malformed; ``str(err)`` is one line naming the file and the problem."""


@dataclass(frozen=True)
class Op:
    """One public operation of the census.

    Attributes
    ----------
    name : str
        Public dotted name (``torch.nn.functional.relu``, ``jax.numpy.maximum``) or ``.method`` (a Tensor or
        array method, ``.clamp``).
    aliases : tuple of str
        Other public spellings of the same operation (``torch.relu``, ``.relu``).
    derivative : str
        The framework's definition of the derivative that makes it kinked (a ``derivatives.yaml`` formula, a
        JVP rule), verbatim or abridged.
    kink : str
        Where the derivative is not smooth (``x = 0``, ``a tie of two inputs``, ``|x| = lambda``).
    status : {"kinked", "excluded"}
    reason : str
        Why an excluded operation needs no case ("" for a kinked one).
    """

    name: str
    aliases: tuple[str, ...] = ()
    derivative: str = ""
    kink: str = ""
    status: str = "kinked"
    reason: str = ""

    @property
    def spellings(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)


@dataclass(frozen=True)
class Census:
    """A framework's census: its operations, the release and the sources it was generated from."""

    framework: str
    release: str
    source: str
    ops: tuple[Op, ...]
    path: str = ""

    def op(self, name: str) -> Op:
        for o in self.ops:
            if name in o.spellings:
                return o
        raise KeyError(name)


@dataclass(frozen=True)
class Coverage:
    """What the catalog covers of a census: per kinked operation the cases whose programs call it."""

    census: Census
    covered: dict[str, tuple[str, ...]] = field(default_factory=dict)  # op name -> case ids
    uncovered: tuple[str, ...] = ()
    excluded: dict[str, tuple[str, ...]] = field(default_factory=dict)  # reason -> op names

    @property
    def kinked(self) -> int:
        return len(self.covered) + len(self.uncovered)

    @property
    def fraction(self) -> float:
        """Covered share of the kinked operations (1.0 when there are none)."""
        return len(self.covered) / self.kinked if self.kinked else 1.0


def census_dir() -> Path:
    """The folder of the census files, beside the catalog: ``references/census``."""
    return default_catalog_path().parent / "census"


def census_path(framework: str, folder: str | Path | None = None) -> Path:
    return Path(folder if folder is not None else census_dir()) / f"{framework}.toml"


def load_census(framework: str, folder: str | Path | None = None) -> Census:
    """Read ``references/census/<framework>.toml``.

    Raises
    ------
    CensusError
        The file is missing, not TOML, or an entry lacks a name, has an unknown status, an excluded entry
        has no reason, or a name (or alias) appears twice.
    """
    path = census_path(framework, folder)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise CensusError(f"cannot read census {path}: {err.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise CensusError(f"census {path} is not valid TOML: {err}") from None
    ops = []
    seen: dict[str, str] = {}
    raws = data.get("op", [])
    if not isinstance(raws, list):
        raise CensusError(f"census {path}: 'op' must be an array of tables ([[op]]), not {type(raws).__name__}")
    for i, raw in enumerate(raws):
        where = f"census {path}: op #{i + 1}"
        if not isinstance(raw, dict) or not isinstance(raw.get("name"), str) or not raw["name"]:
            raise CensusError(f"{where}: needs a name")
        aliases = raw.get("aliases", [])
        if not isinstance(aliases, list) or not all(isinstance(a, str) and a for a in aliases):
            raise CensusError(f"{where} ({raw['name']}): aliases must be a list of names")
        for key in ("derivative", "kink", "status", "reason"):
            if key in raw and not isinstance(raw[key], str):
                raise CensusError(f"{where} ({raw['name']}): {key} must be a string")
        op = Op(name=raw["name"], aliases=tuple(aliases), derivative=raw.get("derivative", ""),
                kink=raw.get("kink", ""), status=raw.get("status", "kinked"), reason=raw.get("reason", ""))
        if op.status not in STATUSES:
            raise CensusError(f"{where} ({op.name}): status must be one of {', '.join(STATUSES)}, not {op.status!r}")
        if op.status == "excluded" and not op.reason:
            raise CensusError(f"{where} ({op.name}): an excluded operation needs a reason")
        for s in op.spellings:
            if s in seen:
                raise CensusError(f"{where}: {s!r} is already listed under {seen[s]!r}")
            seen[s] = op.name
        ops.append(op)
    return Census(framework=str(data.get("framework", framework)), release=str(data.get("release", "")),
                  source=str(data.get("source", "")), ops=tuple(ops), path=str(path))


def names_used(catalog: Catalog, framework: str) -> dict[str, set[str]]:
    """Every dotted name (``torch.nn.functional.relu``) and method (``.clamp``) the catalog's programs of
    ``framework`` call or reach, each with the case ids that use it."""
    out: dict[str, set[str]] = {}
    for case, program in catalog.programs(framework):
        for name in _names(program.tree):
            out.setdefault(name, set()).add(case.id)
    return out


def _names(tree: ex.Node) -> Iterable[str]:
    for n in ex.walk(tree):
        if isinstance(n, ex.Name):
            yield n.dotted
        elif isinstance(n, ex.Attr):
            yield f".{n.name}"


def coverage(census: Census, catalog: Catalog, used: Mapping[str, set[str]] | None = None) -> Coverage:
    """Which kinked operations of ``census`` the catalog's programs call (see the module docstring)."""
    used = used if used is not None else names_used(catalog, census.framework)
    covered: dict[str, tuple[str, ...]] = {}
    uncovered: list[str] = []
    excluded: dict[str, list[str]] = {}
    for op in census.ops:
        if op.status == "excluded":
            excluded.setdefault(op.reason, []).append(op.name)
            continue
        cases = sorted({c for s in op.spellings for c in used.get(s, ())}, key=_case_order(catalog))
        if cases:
            covered[op.name] = tuple(cases)
        else:
            uncovered.append(op.name)
    return Coverage(census, covered, tuple(uncovered), {r: tuple(n) for r, n in excluded.items()})


def _case_order(catalog: Catalog) -> Any:
    order = {c.id: i for i, c in enumerate(catalog)}
    return lambda cid: order.get(cid, len(order))


def write_census(census: Census, path: str | Path, header: Sequence[str] = ()) -> None:
    """Write ``census`` as TOML (deterministic: the ops in the given order, fixed key order)."""
    def q(s: str) -> str:
        return json.dumps(s, ensure_ascii=False)  # a TOML basic string is a JSON string

    lines = [f"# {h}" for h in header]
    lines += [f"framework = {q(census.framework)}", f"release = {q(census.release)}", f"source = {q(census.source)}"]
    for op in census.ops:
        lines += ["", "[[op]]", f"name = {q(op.name)}"]
        if op.aliases:
            lines.append("aliases = [" + ", ".join(q(a) for a in op.aliases) + "]")
        lines += [f"derivative = {q(op.derivative)}", f"kink = {q(op.kink)}", f"status = {q(op.status)}"]
        if op.reason:
            lines.append(f"reason = {q(op.reason)}")
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")
