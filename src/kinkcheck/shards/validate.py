"""Checks on the files a user hands in: JSON reading, and the semantics of shards.

The JSON Schema (``schemas/shard.v1.json``) fixes a shard's layout; the checks here fix what the schema
cannot say and the code relies on: an ``ok`` observation has a value with the case's inputs and the shape
of its point, a P0 network run has P0's weight shapes, an environment's id is
``<framework>-<framework_version>-<device>``, a shard measured something or says why not. Each check
returns the *first* problem as one line (or None), so a caller raises its own error naming the file
(:class:`kinkcheck.shards.ShardError`, :class:`kinkcheck.answers.diff.DiffError`).

A report (``kinkcheck/conventions/v2``) is checked where it is decoded, by its types and cross-references:
:func:`kinkcheck.report.model.load_report`.
"""

from __future__ import annotations

import gc
import json
import math
import zlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kinkcheck.oracles import p0
from kinkcheck.platforms import DEFAULT, DEVICES, environment_id, tag_of, title
from kinkcheck.platforms.isa import LEVELS, capped_tag, split_tag
from kinkcheck.vocabulary import DTYPES, MODES

if TYPE_CHECKING:
    from kinkcheck.catalog import Catalog

__all__ = ["MAX_DEPTH", "MAX_INFLATED", "gunzip", "one_line", "parse_checked_json", "parse_json", "read_json", "read_text", "shape_of",
           "shard_problem"]

#: Deepest nesting of a value (a nested list of numbers) accepted; catalog points are at most matrices.
MAX_DEPTH = 16

_NONFINITE = ("nan", "inf", "-inf")


class _DuplicateKey(ValueError):
    pass


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        raise _DuplicateKey(next(k for k, _ in pairs if k in seen or seen.add(k)))  # type: ignore[func-returns-value]
    return out


def read_json(path: str | Path, error: type[Exception], missing: str | None = None) -> tuple[Any, str]:
    """Read and parse a JSON file a user handed in; every failure is ``error`` with a one-line reason.

    Parameters
    ----------
    path : str or Path
    error : exception class
        Raised with a message naming the file (e.g. :class:`kinkcheck.shards.ShardError`).
    missing : str, optional
        The message for a file that does not exist (default ``"<path>: no such file"``).

    Returns
    -------
    (data, text)
        The parsed document and its text.

    Raises
    ------
    error
        Missing or unreadable file, not UTF-8, invalid JSON, a key twice in one object, or JSON nested too
        deeply for the parser (``RecursionError``, about 1,000 levels).
    """
    p = Path(path)
    text = read_text(p, error, missing).decode("utf-8")  # read_text checked it decodes
    return parse_json(text, p, error), text


def read_text(path: Path, error: type[Exception], missing: str | None = None) -> bytes:
    """The bytes of the file at ``path``, checked to be UTF-8 text; failures are ``error`` as in :func:`read_json`.
    A gzip file (``.gz``) is inflated, every member of it."""
    return _read(path, error, missing, utf8=True, first=False)[0]


def read_first_member(path: Path, error: type[Exception], missing: str | None = None) -> tuple[bytes, bool]:
    """The first member of the gzip file at ``path`` (``.gz``; another file: all of it), checked to be UTF-8 text,
    and whether more members follow, unread: a report's head is its first member
    (:func:`kinkcheck.report.model.head_end`). Failures as :func:`read_text`."""
    return _read(path, error, missing, utf8=True, first=True)


def _read(path: Path, error: type[Exception], missing: str | None, utf8: bool, first: bool) -> tuple[bytes, bool]:
    more = False
    try:
        if path.exists() and not path.is_dir() and not path.is_file():  # a FIFO or device would block or never end
            raise error(f"{path}: not a regular file")
        raw = path.read_bytes()
        if path.suffix == ".gz":  # the committed report is gzipped (reports/conventions.json.gz)
            raw, more = _inflate(raw, path, error, first)
        if utf8:
            raw.decode("utf-8")
    except FileNotFoundError:
        raise error(missing or f"{path}: no such file") from None
    except IsADirectoryError:
        raise error(f"{path}: is a folder, not a JSON file") from None
    except UnicodeDecodeError as err:
        raise error(f"{path}: cannot read (not UTF-8 text: byte {err.start})") from None
    except OSError as err:
        raise error(f"{path}: cannot read ({err.strerror or type(err).__name__})") from None
    return raw, more


#: The most a gzipped file may inflate to (a 50 MB gzip bomb would otherwise fill the memory).
MAX_INFLATED = 2 * 2**30


def gunzip(raw: bytes, path: Path, error: type[Exception]) -> bytes:
    """The inflated bytes of the gzip file ``raw`` (read from ``path``), its members one after another as
    ``gzip.decompress`` reads them (a report is two: :func:`kinkcheck.report.model.head_end`); ``error`` (one
    line) when it is not gzip, is truncated or would inflate past :data:`MAX_INFLATED`."""
    return _inflate(raw, path, error, first=False)[0]


def _inflate(raw: bytes, path: Path, error: type[Exception], first: bool) -> tuple[bytes, bool]:
    """Every member of ``raw`` inflated (``first``: the first one only), and whether members were left unread."""
    parts: list[bytes] = []
    size = 0
    rest = raw
    while True:
        inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        try:
            out = inflater.decompress(rest, MAX_INFLATED - size)
        except zlib.error as err:
            raise error(f"{path}: cannot read (not a gzip file: {err})") from None
        size += len(out)
        if inflater.unconsumed_tail or (size >= MAX_INFLATED and not inflater.eof):
            raise error(f"{path}: cannot read (inflates past {MAX_INFLATED // 2**30} GiB)")
        if not inflater.eof:
            raise error(f"{path}: cannot read (truncated gzip file)")
        parts.append(out)
        rest = inflater.unused_data
        if not rest or first:
            return b"".join(parts) if len(parts) > 1 else out, bool(rest)
        if size >= MAX_INFLATED:
            raise error(f"{path}: cannot read (inflates past {MAX_INFLATED // 2**30} GiB)")


@contextmanager
def _no_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector: parsing ~100,000 small objects triggers it hundreds of times for
    nothing (a parsed document has no cycles); a third of the time of a 20 MB parse."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def parse_json(text: str, path: Path, error: type[Exception]) -> Any:
    """Parse ``text`` (the content of ``path``) strictly: a key twice in one object is refused, because
    parsers disagree on which one counts. Failures are ``error`` with the one-line reasons of :func:`read_json`."""
    try:
        with _no_gc():
            return json.loads(text, object_pairs_hook=_no_duplicate_keys)
    except _DuplicateKey as err:
        raise error(f"{path}: cannot read (key {str(err)!r} appears twice in one object; readers would disagree "
                    "on which one counts)") from None
    except json.JSONDecodeError as err:
        raise error(f"{path}: cannot read (invalid JSON at line {err.lineno}, column {err.colno})") from None
    except RecursionError:
        raise error(f"{path}: cannot read (JSON nested too deeply)") from None
    except ValueError as err:  # e.g. an integer literal longer than Python's int-to-str limit
        raise error(f"{path}: cannot read (invalid JSON: {str(err).splitlines()[0][:120]})") from None


def parse_checked_json(raw: bytes) -> Any | None:
    """Parse bytes already known to pass :func:`parse_json` (e.g. by a content-keyed cache marker) with orjson,
    about three times faster; None when orjson reads them differently from :mod:`json` and so refuses them (a
    bare ``NaN``, an integer beyond 64 bits, a lone surrogate): then parse them with :func:`parse_json`."""
    import orjson

    try:
        with _no_gc():
            return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None


def one_line(text: str, limit: int = 400) -> str:
    """``text`` as one printable line: control characters and line breaks (names read from a file may hold
    any) written as escapes, cut to ``limit`` characters."""
    out = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return out if len(out) <= limit else out[: limit - 1] + "…"


def shape_of(value: Any, depth: int = 0) -> tuple[int, ...] | None:
    """Shape of a number or rectangular nested list of numbers (``"nan"``/``"inf"``/``"-inf"`` allowed).

    ``0.5`` → ``()``, ``[[1, 2], [3, 4]]`` → ``(2, 2)``; None for a ragged or empty list, a non-number
    leaf (booleans, a bare NaN or Infinity, an integer beyond float64 included) or nesting deeper than
    :data:`MAX_DEPTH`.
    """
    if isinstance(value, list):
        if not value or depth >= MAX_DEPTH:
            return None
        inner = shape_of(value[0], depth + 1)
        if inner is None or any(shape_of(v, depth + 1) != inner for v in value[1:]):
            return None
        return (len(value), *inner)
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):  # non-finite numbers are the strings; a bare NaN or 1e999 is not JSON
        try:
            return () if math.isfinite(float(value)) else None
        except OverflowError:  # an integer beyond float64
            return None
    if isinstance(value, str) and value in _NONFINITE:
        return ()
    return None


def _fmt_shape(shape: tuple[int, ...] | None) -> str:
    if shape is None:
        return "not a number or a rectangular list of numbers"
    if not shape:
        return "a number"
    return f"a list of {shape[0]}" if len(shape) == 1 else f"a {'x'.join(map(str, shape))} array"


#: Largest finite number of each dtype: a measured value beyond it cannot have come from that dtype.
DTYPE_MAX = {"float64": 1.7976931348623157e308, "float32": 3.4028234663852886e38, "float16": 65504.0,
             "bfloat16": 3.3895313892515355e38}


def _beyond(value: Any, limit: float) -> float | None:
    """The first finite number in a nested list whose magnitude exceeds ``limit``, or None."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, list):
            stack.extend(v)
        elif isinstance(v, (int, float)) and abs(v) > limit:
            return v
    return None


def _point_problem(value: Any, expected: Mapping[str, tuple[int, ...]], what: str, subset: bool = False,
                   ref: str = "the case's point") -> str | None:
    """A value (input name → number or nested list) against the expected input names and shapes (``ref``
    says where they come from)."""
    if not isinstance(value, dict) or not value:
        return f"{what} is {json.dumps(value)[:40]}, not a table of the case's inputs"
    names = list(value)
    unknown = [n for n in names if n not in expected]
    if unknown:
        return f"{what} names input {unknown[0]!r}; {ref} has {', '.join(expected)}"
    if not subset and set(names) != set(expected):
        lacking = [n for n in expected if n not in value]
        return f"{what} lacks input {lacking[0]!r} ({ref} has {', '.join(expected)})"
    for n in names:
        shape = shape_of(value[n])
        if shape != expected[n]:
            return f"{what}: input {n!r} is {_fmt_shape(shape)}, in {ref} {_fmt_shape(expected[n])}"
    return None


def _p0_shapes() -> tuple[tuple[int, ...], tuple[int, ...]]:
    return p0.shapes()


def _current(env: Mapping[str, Any], case: Any, catalog: Catalog) -> bool:
    """Whether the shard measured ``case`` as the catalog defines it now (``environment.case_hashes``; a shard
    from before per-case hashes: its catalog hash is the catalog's). Mirrors
    :func:`kinkcheck.probe.plan.recorded_case_hashes`, which cannot be imported here (shards imports this module)."""
    hashes = env.get("case_hashes")
    if isinstance(hashes, dict):
        return hashes.get(case.id) == case.measurement_hash(env["framework"])
    return env.get("catalog_hash") == catalog.hash


_SHAPES: list[Any] = [None, None]  # (catalog, its shapes): the last catalog asked for, by identity


def _point_shapes(catalog: Catalog) -> dict[str, dict[str, tuple[int, ...]]]:
    """Case id → input name → shape of the case's point, computed once for the catalog all shards are read with."""
    if _SHAPES[0] is not catalog:
        _SHAPES[:] = [catalog, {c.id: {k: shape_of(v) or () for k, v in c.at.items()} for c in catalog}]
    return _SHAPES[1]  # type: ignore[no-any-return]


def _what(i: int, ob: Mapping[str, Any]) -> str:
    """How an error message names the ``i``-th observation of a shard (built only for a problem)."""
    return f"observation #{i + 1} ({ob['case']}, {ob['program']}, {ob['mode']}, {ob['dtype']})"


def _value_fast(value: Any, shapes: Mapping[str, tuple[int, ...]], limit: float) -> bool:
    """True when ``value`` certainly passes the value checks of :func:`shard_problem` (the inputs and shapes of
    ``shapes``, every number within ``limit``): the common forms (finite floats, ``"nan"``/``"inf"``/``"-inf"``,
    flat lists of them) in a few type checks; anything else goes to the detailed checks, which name the problem.
    Of the ~100,000 committed observations this takes 0.1 s instead of 0.8 s."""
    if type(value) is not dict or not value or len(value) != len(shapes):
        return False
    for name, v in value.items():
        shape = shapes.get(name)
        if type(v) is float:
            if shape != () or not -limit <= v <= limit:  # NaN fails both comparisons
                return False
        elif type(v) is list:
            if shape is None or len(shape) != 1 or len(v) != shape[0]:
                return False
            for x in v:
                if not ((type(x) is float and -limit <= x <= limit) or (type(x) is str and x in _NONFINITE_SET)):
                    return False
        elif not (type(v) is str and v in _NONFINITE_SET and shape == ()):
            return False
    return True


_NONFINITE_SET = frozenset(_NONFINITE)


def shard_problem(shard: Mapping[str, Any], catalog: Catalog | None = None) -> str | None:
    """The first semantic problem of a shard that passed the schema, as one line, or None.

    Parameters
    ----------
    shard : dict
        A shard valid against ``schemas/shard.v1.json``.
    catalog : Catalog, optional
        When given, each ``ok`` value (and ``input``) must have exactly the inputs of its case's ``at``,
        each of the point's shape, for the cases measured against their current definition (a case whose
        point changed since is checked for self-consistency only: the report leaves it out until it is
        re-probed). Observations of cases or programs the catalog does not hold are not checked here: the report skips them and names them in its gaps (a shard measured against an older
        catalog stays usable). Without a catalog, the ``ok`` values of one case must agree with each other.

    Checks
    ------
    environment id ``<framework>-<framework_version>-<device>``, then ``-<platform_tag>`` off Linux x86-64
    (:func:`kinkcheck.platforms.environment_id`; a shard without ``platform_tag`` was measured there), and the
    tag the runner's ``os`` and ``arch`` make where it records them, with the level of its ``isa_cap``
    (:func:`kinkcheck.platforms.isa.capped_tag`); a device of
    :data:`kinkcheck.platforms.DEVICES` on a platform it exists on (Metal on macOS arm64); ``not_measured`` a
    non-empty string; observations present unless ``not_measured`` says why; no (case, program, mode, dtype)
    twice; an ``ok`` observation has a value within its dtype's finite range, an ``error`` or ``unavailable``
    one an error message and no value; an ``ok`` network run (P0, :data:`kinkcheck.oracles.backprop.P0`) has
    W1 and W2 of P0's shapes (3x2, 2x2).
    """
    env = shard["environment"]

    tag = env.get("platform_tag", DEFAULT)
    runner = env.get("runner") or {}
    cap = runner.get("isa_cap") or None
    if cap is not None and cap not in LEVELS:
        return f"environment.runner.isa_cap is {cap!r}, not an instruction-set level ({', '.join(LEVELS)})"
    if runner.get("os") and runner.get("arch") and capped_tag(tag_of(runner["os"], runner["arch"]), cap) != tag:
        return (f"environment.platform_tag is {tag!r} (absent: {DEFAULT!r}) but its runner was "
                f"{runner['os']} {runner['arch']}{f' capped at {cap}' if cap else ''} "
                f"({capped_tag(tag_of(runner['os'], runner['arch']), cap)!r})")
    dev = DEVICES.get(env["device"])
    if dev is not None and dev.platforms is not None and split_tag(tag)[0] not in dev.platforms:  # Metal off macOS
        return (f"environment.device {env['device']!r} ({dev.title}) does not exist on {title(tag)} "
                f"(platform_tag {tag!r}); it exists on {', '.join(title(t) for t in dev.platforms)}")
    want = environment_id(env["framework"], env["framework_version"], env["device"], tag)
    if env["id"] != want:
        return (f"environment id {env['id']!r} does not match its framework, version and device (and platform) "
                f"({want!r})")
    reason = env.get("not_measured")
    if reason is not None and (not isinstance(reason, str) or not reason.strip()):
        return "environment.not_measured must be a sentence saying why nothing was measured"
    observations = shard["observations"]
    parts = env.get("not_measured_parts") or []
    if parts:

        present = {(o["case"], o["program"], o["mode"], o["dtype"]) for o in observations}
        for part in parts:
            where = f"environment.not_measured_parts ({part.get('case', 'every case')}, {', '.join(part['modes'])})"
            if not part["reason"].strip() or ("case" in part) != ("program" in part) or ("case" in part) != (
                    "dtypes" in part):
                return f"{where}: a part names a case with its program and dtypes, or whole modes, and says why"
            if any(m not in MODES for m in part["modes"]) or any(d not in DTYPES for d in part.get("dtypes", ())):
                return f"{where}: unknown mode or dtype"
            if "case" in part and any((part["case"], part["program"], m, d) in present
                                      for m in part["modes"] for d in part["dtypes"]):
                return f"{where}: says not measured, but the shard holds a cell of it"
            if "case" not in part and set(part["modes"]) & set(env.get("modes") or ()):
                return f"{where}: says not measured, but environment.modes says they were probed"
    if not observations and reason is None:
        return "no observation, and no environment.not_measured reason saying why"
    expected: dict[str, dict[str, tuple[int, ...]]] = {}
    ref: dict[str, str] = {}
    if catalog is not None:
        shapes = _point_shapes(catalog)
        for c in catalog:
            if _current(env, c, catalog):  # a case measured against another definition is checked on its own
                expected[c.id] = shapes[c.id]
                ref[c.id] = f"the point of {c.id} in {Path(catalog.path).name}"
        programs = {(c.id, p.id) for c, p in catalog.programs(env["framework"])}
    seen: set[tuple[str, str, str, str]] = set()
    for i, ob in enumerate(observations):
        case, status, value = ob["case"], ob["status"], ob["value"]
        key = (case, ob["program"], ob["mode"], ob["dtype"])
        if key in seen:
            return f"{_what(i, ob)} is listed twice"
        seen.add(key)
        if status != "ok":  # the probe records why there is no value: the report shows it
            if type(ob["error"]) is not str or not ob["error"].strip():
                return f"{_what(i, ob)} is {status} but does not say why (error is {json.dumps(ob['error'])})"
            if value is not None:
                return f"{_what(i, ob)} is {status} but has a value"
        if catalog is not None and key[:2] not in programs:
            continue  # not in this catalog: the report skips it and names it in its gaps
        if status == "ok" and not (case in expected and _value_fast(value, expected[case], DTYPE_MAX[key[3]])):
            what = _what(i, ob)  # the detailed checks, which name the problem, for what the fast one cannot vouch
            if value is None:
                return f"{what} is ok but has no value"
            if case not in expected:  # no catalog: the first ok value of a case sets the inputs and shapes
                first = {k: shape_of(v) for k, v in value.items()}
                if not first or any(s is None for s in first.values()):
                    return f"{what}: value is not a table of numbers or rectangular lists of numbers"
                expected[case] = first  # type: ignore[assignment]
                ref[case] = f"observation #{i + 1} of {case}"
            problem = _point_problem(value, expected[case], f"{what}: value", ref=ref[case])
            if problem:
                return problem
            big = _beyond(list(value.values()), DTYPE_MAX[key[3]])
            if big is not None:
                return f"{what}: value {big!r} is beyond the largest finite {key[3]} ({DTYPE_MAX[key[3]]:.6g})"
        if ob.get("input") is not None and case in expected:
            problem = _point_problem(ob["input"], expected[case], f"{_what(i, ob)}: input", subset=True, ref=ref[case])
            if problem:
                return problem
    w1, w2 = _p0_shapes()
    for i, nw in enumerate(shard["networks"]):
        if nw["status"] != "ok":
            continue
        what = f"network run #{i + 1} ({nw['case']}, {nw['program']}, {nw['dtype']})"
        for name, shape in (("W1", w1), ("W2", w2)):
            got = shape_of(nw[name]) if nw[name] is not None else None
            if got != shape:
                return (f"{what}: {name} is {'missing' if nw[name] is None else _fmt_shape(got)}, "
                        f"P0's {name} gradient is {_fmt_shape(shape)}")
    return None
