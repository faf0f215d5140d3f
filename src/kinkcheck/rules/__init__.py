"""The rules: what each operation returns at its kinks, inferred from every measurement, and the prediction of
any program by the chain rule AD applies.

* :mod:`kinkcheck.rules.graph` cuts a program at its calls (each call's local form over its own arguments);
* :mod:`kinkcheck.rules.local` says where a local form sits at its kink, the kind of kink, and what each rule
  label names there (the project's oracle on the local form);
* :mod:`kinkcheck.rules.chain` is reverse mode's chain rule over the cut program, with a chooser at each kink;
* :mod:`kinkcheck.rules.infer` infers the rules from the observations table, keeping evidence and
  counter-examples; :mod:`kinkcheck.rules.predict` predicts a program from them;
* :mod:`kinkcheck.rules.validate` leaves one case out and compares every prediction with the measured cell;
* :mod:`kinkcheck.rules.store` writes and reads ``rules.json.gz`` beside the report.
* :mod:`kinkcheck.rules.ahead` infers a framework's part in a child process while the render writes its pages.

Sources of the approach: Bolte & Pauwels, "A mathematical model for automatic differentiation in machine
learning", NeurIPS 2020 (conservative fields: what AD's chain rule returns is the composition of its
primitives' choices); Lee, Yu, Rival & Yang, "On correctness of automatic differentiation for non-differentiable
functions", NeurIPS 2020 (intensional derivatives). docs/rules.md explains the rules, their limits and the
validation figures.

Only sympy, NumPy, pyarrow and the project's oracle; no framework is imported.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["COLUMNS", "PAGE", "from_table", "render"]

#: The rules page beside ``conventions.md``.
PAGE = "rules.md"

from kinkcheck.cache import copy_signed, is_cached, prune_cached, read_cached, read_signed, write_cached, write_signed
from kinkcheck.registry import REGISTRY
from kinkcheck.rules import store
from kinkcheck.rules.cached import code_digest
from kinkcheck.rules.page import render_page
from kinkcheck.rules.table import COLUMNS, encode  # the observation columns the rules read


def from_table(table: Any, catalog: Any) -> tuple[Any, Any]:
    """Infer the rules from an observations table and validate them by leaving one case out:
    ``(RuleBook, Validation)``."""
    from kinkcheck.rules.infer import infer  # slow: numpy, sympy
    from kinkcheck.rules.validate import validate  # slow: numpy, sympy

    coded = encode(table)
    book = infer(coded, catalog)
    return book, validate(book, coded)


def environments(table: Any) -> Mapping[str, Mapping[str, str]]:
    """Environment → framework, version, device (for the rules file)."""
    t = table.select(["environment", "framework", "framework_version", "device"]).group_by(
        ["environment", "framework", "framework_version", "device"]).aggregate([])
    return {r["environment"]: {"framework": r["framework"], "version": r["framework_version"], "device": r["device"]}
            for r in t.to_pylist()}


def render(parquet: bytes, catalog: Any, sources: Mapping[str, str] | None = None,
           ahead: Any = None) -> dict[str, bytes]:
    """The rules' files of a report set, from its observations table's bytes: ``rules.json.gz`` (the rules, their
    evidence and the leave-one-case-out validation) and ``rules.md`` (the page).

    A rule, its evidence and its validation are one framework's (:class:`~kinkcheck.rules.infer.Rule` is keyed on
    the framework; a program is predicted from its own framework's rules): each framework's part is inferred from
    its rows alone and the parts merged (:func:`kinkcheck.rules.store.merge`, the same bytes as all rows at once).
    ``sources``: framework → a digest of what its rows come from (the render passes its shards' judged keys); a
    framework's part is then kept on disk under it (:mod:`kinkcheck.cache`, kind ``rules-part``), so a render
    after one new shard infers only that shard's framework again. ``ahead``: the parts being inferred in child
    processes meanwhile (:func:`kinkcheck.rules.ahead.start`), waited for and read kept."""
    import pyarrow.parquet as pq

    start = time.perf_counter()

    code = _code_key(catalog)  # read once: every framework's part is keyed on it too
    key = _render_key(parquet, code)
    cached = _cached_render(key)
    if cached is not None:
        if sources is not None:  # the same rows under other sources (the judge's code changed, not its output)
            _carry_parts(cached[_PARTS], {fw: _part_key(fw, sources[fw], code) for fw in sources})
        SPENT.append(time.perf_counter() - start)
        return {name: blob for name, blob in cached.items() if name != _PARTS}
    table = None
    if sources is None:
        table = pq.read_table(io.BytesIO(parquet), columns=list(COLUMNS))
        frameworks = sorted(set(table.column("framework").unique().to_pylist()))
    else:
        frameworks = sorted(sources)

    def parts_of(read: bool) -> list[dict[str, Any]]:
        nonlocal table
        out = []
        for fw in frameworks:
            pkey = _part_key(fw, sources[fw], code) if sources is not None else None
            if ahead is not None and pkey is not None:
                ahead.wait(fw, pkey)  # its child keeps the part under pkey (or leaves it to be inferred here)
            got = _cached_part(pkey) if pkey is not None and read else None
            if got is None:
                if table is None:
                    table = pq.read_table(io.BytesIO(parquet), columns=list(COLUMNS))
                got = _part(table, fw, catalog)
                if pkey is not None:
                    _keep_part(pkey, got)
            out.append(got)
        return out

    def merged(parts: list[dict[str, Any]]) -> bytes:
        programs: dict[str, Any] = {}
        for part in parts:
            programs.update(part["case_programs"])
        return store.dumps(store.merge(parts, programs))

    try:
        blob = merged(parts_of(read=True))
    except (KeyError, TypeError, IndexError, ValueError, AttributeError):  # a kept part damaged inside:
        blob = merged(parts_of(read=False))  # every part inferred again (and kept again), never an error

    doc = json.loads(gzip.decompress(blob))
    out = {store.FILE: blob, PAGE: render_page(doc, list(REGISTRY)).encode("utf-8")}
    _keep_render(key, out, {} if sources is None else {fw: _part_key(fw, sources[fw], code) for fw in frameworks})

    for kind in ("rules-part", "rules-render"):  # what no render has read for a week (releases since removed)
        prune_cached(kind)
    SPENT.append(time.perf_counter() - start)
    return out


def _part(table: Any, framework: str, catalog: Any) -> dict[str, Any]:
    """One framework's part of the rules document (:func:`kinkcheck.rules.store.to_doc` of its rows), with
    ``case_programs`` (:func:`kinkcheck.rules.validate.case_programs`) for the merge."""
    import pyarrow.compute as pc

    from kinkcheck.rules.validate import case_programs  # slow: numpy, sympy

    rows = table.filter(pc.equal(table.column("framework"), framework))
    book, validation = from_table(rows, catalog)
    return {**store.to_doc(book, validation.as_dict(), environments(rows)), "case_programs": case_programs(book)}


def _part_key(framework: str, source: str, code: str) -> str:
    """A framework's part depends on its rows (``source``) and the catalog and code (``code``: :func:`_code_key`)."""
    return hashlib.sha256(repr((framework, source, code)).encode()).hexdigest()[:32]


def _cached_part(key: str) -> dict[str, Any] | None:
    """A framework's part kept by an earlier render (kind ``rules-part``); None when there is none, or the entry
    is not the one written under this key (its first line, the digest of the key and the rest, does not match: a
    damaged, edited or copied entry) or not a part (computed again, never an error)."""
    got = read_signed("rules-part", key, touch=True)  # read: kept from pruning (kinkcheck.cache.prune_cached)
    wanted = {"cells": list, "environments": dict, "rules": list, "validation": dict, "case_programs": dict}
    if not isinstance(got, dict) or any(not isinstance(got.get(k), t) for k, t in wanted.items()):
        return None
    return got


def _keep_part(key: str, part: dict[str, Any]) -> None:
    """Keep ``part`` under ``key``: its JSON, signed with the key (:func:`kinkcheck.cache.write_signed`)."""
    write_signed("rules-part", key, json.dumps(part, sort_keys=True, separators=(",", ":")).encode("utf-8"))


def _render_key(parquet: bytes, code: str) -> str:
    """The rules' files depend on the observations and on the catalog and code (``code``: :func:`_code_key`)."""
    h = hashlib.sha256(parquet)
    h.update(code.encode())
    return h.hexdigest()[:32]


def _code_key(catalog: Any) -> str:
    """The catalog and the code of the rules, oracles and mapping (:func:`~kinkcheck.rules.cached.code_digest`),
    with every module of the rules (the page and the file's layout too)."""
    h = hashlib.sha256(str(getattr(catalog, "hash", "")).encode())
    h.update(code_digest().encode())
    for path in sorted(Path(__file__).resolve().parent.glob("*.py")):
        h.update(path.read_bytes())
    return h.hexdigest()


#: The name under which :func:`_cached_render` returns the part keys its entry was written with (not a file).
_PARTS = ""


def _cached_render(key: str) -> dict[str, Any] | None:
    """The rules' files of an earlier render of the same inputs (:mod:`kinkcheck.cache`, kind ``rules-render``),
    with, under :data:`_PARTS`, framework → the key its part was kept under by that render (empty for an entry
    written without sources); None when there is none or it is damaged."""
    raw = read_cached("rules-render", key, touch=True)  # read: kept from pruning (kinkcheck.cache.prune_cached)
    if raw is None:
        return None
    try:
        head, _, rest = raw.partition(b"\n")
        sizes = json.loads(head)
        blob, page = rest[:sizes[0]], rest[sizes[0]:sizes[0] + sizes[1]]
        if len(blob) != sizes[0] or len(page) != sizes[1] or len(rest) != sizes[0] + sizes[1]:
            return None
        parts = sizes[2] if len(sizes) > 2 else {}
        if not isinstance(parts, dict) or not all(isinstance(v, str) for v in parts.values()):
            return None
    except (ValueError, TypeError, IndexError, KeyError):
        return None
    return {store.FILE: blob, PAGE: page, _PARTS: parts}


def _keep_render(key: str, out: dict[str, bytes], parts: dict[str, str]) -> None:
    """Keep the rules' files ``out`` under ``key``, with ``parts`` (framework → the key its part is kept under)."""
    blob, page = out[store.FILE], out[PAGE]
    write_cached("rules-render", key, json.dumps([len(blob), len(page), parts]).encode() + b"\n" + blob + page)


def _carry_parts(kept: dict[str, str], wanted: dict[str, str]) -> None:
    """A render whose rules' files were kept (the same observations, catalog and code) keeps each framework's part
    under its own key (``wanted``) too, copied from the key an earlier render kept it under (``kept``): the rows are
    the same, so the part is. Without this, a render after the judge's code changed (its keys with it, not its
    output) would find the files kept and keep no part, and the next render after one new shard would infer every
    framework's part again. A part not kept, or damaged, is left to be inferred when next needed."""
    for fw, new in sorted(wanted.items()):
        old = kept.get(fw)
        if old is not None and old != new and not is_cached("rules-part", new):
            copy_signed("rules-part", old, new)


#: Seconds each :func:`render` of this process took (the benchmark reads the last one: the rules' share of a
#: full render, measured inside that render).
SPENT: list[float] = []
