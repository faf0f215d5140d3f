"""Shards: the observations of one environment in one JSON file, with provenance.

A shard is written atomically (a temporary file in the same folder, then :func:`os.replace`), so an
interrupted probe leaves the previous shard whole. Its file is ``kinkcheck/shard/v2`` (``schemas/shard.v2.json``):
the ``kinkcheck/shard/v1`` document every module uses, packed by program (:func:`pack`, :func:`unpack`; a v1
file is still read). It is validated against ``schemas/shard.v1.json`` on read, once unpacked; a corrupt or truncated shard raises :class:`ShardError` naming the file. Provenance follows the
array-api-tests compliance records: framework and Python versions, platform, device, date, kinkcheck
version, the catalog hash and a hash per case (``case_hashes``). This module only stores: what a shard lacks
and how a probe merges into it is :mod:`kinkcheck.probe.plan`'s.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import marshal
import os
import re
import reprlib
import sys
import tempfile
from collections.abc import Iterator
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kinkcheck.cache import cache_dir, read_cached, write_cached
from kinkcheck.registry import FRAMEWORKS
from kinkcheck.shards.validate import (_no_gc, _p0_shapes, one_line, parse_checked_json, parse_json, read_text,
                                       shard_problem)
from kinkcheck.vocabulary import DTYPES, MODES

if TYPE_CHECKING:
    from kinkcheck.catalog import Catalog


__all__ = ["CELL_FIELDS", "FILE_SCHEMA_ID", "SCHEMA_ID", "ShardBusy", "ShardError", "ShardFile", "file_schema",
           "json_text", "load_shards", "pack", "read_shard", "read_shard_file", "shard_lock", "shard_schema",
           "shard_text", "unpack", "write_json_atomic", "write_shard", "write_text_atomic"]


SCHEMA_ID = "kinkcheck/shard/v1"
#: The file format written since issue 14: the ``kinkcheck/shard/v1`` document packed by program (:func:`pack`).
FILE_SCHEMA_ID = "kinkcheck/shard/v2"
#: A packed cell: the observation's fields after ``case`` and ``program``, in this order (``input`` only where
#: the dtype moved the point).
CELL_FIELDS: tuple[str, ...] = ("mode", "dtype", "status", "value", "error", "input")


class ShardError(ValueError):
    """A shard that cannot be read or does not match the schema; ``str(err)`` names the file."""


class ShardBusy(ShardError):
    """Another probe holds the lock of the same environment (:func:`shard_lock`); ``str(err)`` is one line."""


@contextlib.contextmanager
def shard_lock(shard_path: str | Path) -> Iterator[None]:
    """Hold the exclusive lock of the environment whose shard is ``shard_path`` (a whole probe, or one write by nox).

    The lock is ``fcntl.flock`` on ``.<file stem>.lock`` beside the shard (removed on release; a killed probe
    leaves it, ``.gitignore`` covers it, and the kernel releases its lock however the probe dies). While it is held, the temporary files a killed
    write of this shard left (``.<shard name>.*.tmp``) are removed. Where ``fcntl`` is missing (Windows)
    nothing is locked.

    Raises
    ------
    ShardBusy
        Another probe holds the lock ("another probe is writing <id> (pid N); wait for it").
    OSError
        The lock file cannot be created.
    """
    try:
        import fcntl  # optional: not on Windows
    except ImportError:  # no flock: one probe per environment is then the user's to ensure
        yield
        return
    shard = Path(shard_path)
    lock = shard.with_name(f".{shard.stem}.lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
            os.close(fd)
            raise ShardBusy(f"another probe is writing {shard.stem}" + (f" (pid {holder})" if holder.isdigit() else "")
                            + "; wait for it") from None
        try:  # the holder before us removes the file on release: ours must still be the one at the path
            if os.stat(lock).st_ino == os.fstat(fd).st_ino:
                break
        except FileNotFoundError:
            pass
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        for tmp in shard.parent.glob(f".{shard.name}.*.tmp"):  # a killed atomic write's leftovers
            tmp.unlink(missing_ok=True)
        yield
    finally:
        Path(lock).unlink(missing_ok=True)  # while still held, so no dot-file is left beside the shard
        os.close(fd)  # releases the lock


def shard_schema() -> dict[str, Any]:
    """``schemas/shard.v1.json`` with its framework, mode and dtype enums read from the registry
    (:mod:`kinkcheck.registry`) and :mod:`kinkcheck.frameworks.base` (the committed file holds the same
    lists; ``tests/test_registry.py`` checks it)."""
    return _shard_schema((tuple(FRAMEWORKS), MODES, DTYPES))


@cache
def _shard_schema(enums: tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]) -> dict[str, Any]:
    frameworks, modes, dtypes = enums
    schema = json.loads(resources.files("kinkcheck").joinpath("schemas/shard.v1.json").read_text())
    props = schema["properties"]
    props["environment"]["properties"]["framework"]["enum"] = list(frameworks)
    props["environment"]["properties"]["modes"]["items"]["enum"] = list(modes)
    for item in ("observations", "networks"):
        fields = props[item]["items"]["properties"]
        fields["mode"]["enum"] = list(modes)
        fields["dtype"]["enum"] = list(dtypes)
    return schema


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (temp file in the same folder + rename); the old file survives a crash."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; shards and reports are public records
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: str | Path, data: Any, compact: bool = False) -> None:
    """Write ``data`` as JSON (:func:`json_text`) to ``path`` with :func:`write_text_atomic`."""
    write_text_atomic(path, json_text(data, compact))


def json_text(data: Any, compact: bool = False) -> str:
    """``data`` as JSON text ending in a newline (one space indentation; non-finite floats raise ValueError).

    ``compact``: no indentation, but one line per top-level key and one line per element of a top-level
    list (an observation of the report), so a re-render that changes one observation changes one line in
    version control, not the whole file.
    """
    if not compact or not isinstance(data, dict):
        text = json.dumps(data, ensure_ascii=False, allow_nan=False,
                          **({"separators": (",", ":")} if compact else {"indent": 1}))
        return text + "\n"

    def one(v: Any) -> str:
        return json.dumps(v, ensure_ascii=False, allow_nan=False, separators=(",", ":"))

    parts = []
    for k, v in data.items():
        if isinstance(v, list) and v:
            parts.append(f"{one(k)}:[\n" + ",\n".join(one(x) for x in v) + "\n]")
        else:
            parts.append(f"{one(k)}:{one(v)}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


def pack(shard: dict[str, Any]) -> dict[str, Any]:
    """The ``kinkcheck/shard/v1`` document ``shard`` as a shard file holds it, ``kinkcheck/shard/v2``
    (``schemas/shard.v2.json``): each run of consecutive observations of one (case, program) becomes one
    ``{"case", "program", "cells": [[mode, dtype, status, value, error], ...]}`` (a sixth item, ``input``,
    where the dtype moved the point), written on one line. A quarter of the bytes of the v1 file (the 71
    shards of issue 13: 45.2 MB → 11.6 MB) and one line per program in a diff; ``unpack(pack(s)) == s``.
    """
    groups: list[dict[str, Any]] = []
    for o in shard["observations"]:
        cell = [o["mode"], o["dtype"], o["status"], o["value"], o["error"]]
        if "input" in o:
            cell.append(o["input"])
        if groups and groups[-1]["case"] == o["case"] and groups[-1]["program"] == o["program"]:
            groups[-1]["cells"].append(cell)
        else:
            groups.append({"case": o["case"], "program": o["program"], "cells": [cell]})
    return {**shard, "schema": FILE_SCHEMA_ID, "observations": groups}


def unpack(doc: Any, name: str = "shard") -> Any:
    """A shard file's document as the ``kinkcheck/shard/v1`` document every module uses: a v2 file
    (:func:`pack`) unpacked, a v1 file (written before issue 14) as it is, anything else untouched (the
    schema then names what is wrong).

    Raises
    ------
    ShardError
        A v2 document whose packing is malformed (one line naming ``name`` and the place).
    """
    if not isinstance(doc, dict) or doc.get("schema") != FILE_SCHEMA_ID:
        return doc
    groups = doc.get("observations")
    if not isinstance(groups, list):
        raise ShardError(f"{name}: not a kinkcheck shard (observations: must be a list of packed programs)")
    observations = []
    for i, g in enumerate(groups):
        where = f"{name}: not a kinkcheck shard (observations/{i}"
        if not (isinstance(g, dict) and g.keys() == {"case", "program", "cells"} and isinstance(g["cells"], list)):
            raise ShardError(f"{where}: must be {{case, program, cells}})")
        for j, cell in enumerate(g["cells"]):
            if not isinstance(cell, list) or len(cell) not in (5, 6):
                raise ShardError(f"{where}/cells/{j}: must be [mode, dtype, status, value, error(, input)])")
            o = {"case": g["case"], "program": g["program"]}
            o.update(zip(CELL_FIELDS, cell))
            observations.append(o)
    return {**doc, "schema": SCHEMA_ID, "observations": observations}


def file_schema() -> dict[str, Any]:
    """``schemas/shard.v2.json``, the JSON Schema of a shard file (:func:`pack`), derived from the v1
    document's (:func:`shard_schema`): the same environment and networks, observations packed by program.
    ``python -m kinkcheck.shards`` writes it; a test checks the committed file is current."""
    v1 = shard_schema()
    obs = v1["properties"]["observations"]["items"]["properties"]
    cell = {"type": "array", "minItems": 5, "maxItems": 6, "items": False,
            "prefixItems": [obs[f] for f in CELL_FIELDS]}
    group = {"type": "object", "required": ["case", "program", "cells"], "additionalProperties": False,
             "properties": {"case": obs["case"], "program": obs["program"],
                            "cells": {"type": "array", "minItems": 1, "items": cell}}}
    return {**v1, "$id": "kinkcheck/shard/v2",
            "title": "kinkcheck shard file: the observations of one environment, packed by program",
            "properties": {**v1["properties"], "schema": {"const": FILE_SCHEMA_ID},
                           "observations": {"type": "array", "items": group}}}


def shard_text(shard: dict[str, Any]) -> str:
    """The text of a shard file for the v1 document ``shard``: :func:`pack`, one line per top-level key and
    per packed program (:func:`json_text` ``compact``)."""
    return json_text(pack(shard), compact=True)


def write_shard(path: str | Path, shard: dict[str, Any], validate: bool = True) -> None:
    """Write a shard atomically (:func:`shard_text`: packed, ``kinkcheck/shard/v2``), validated against the
    schema first unless ``validate`` is False.

    The probe passes ``validate=False`` for the shards it builds itself (their shape is tested, and
    every reader validates anyway): the check costs half a second, an eighth of a whole probe.

    Raises
    ------
    ShardError
        When ``shard`` does not match the shard schema (nothing is written).
    """
    if validate:
        _validate(shard, str(path))
    text = shard_text(shard)
    write_text_atomic(path, text)
    if validate:  # text that json_text wrote from a valid shard parses strictly and back to it: not checked again
        _touch(_validated_marker(text.encode()))


def _write_shard_file(path: str | Path, shard: dict[str, Any]) -> None:
    """Write the v1 document ``shard`` (read and changed here, not validated again) as a packed file."""
    write_text_atomic(path, shard_text(shard))


def _validated_marker(raw: bytes) -> Path:
    """The cache marker saying that ``raw`` passed the strict JSON parse and the shard schema."""
    return cache_dir() / "validated-shards" / hashlib.sha256(_schema_text() + b"\0" + raw).hexdigest()[:32]


def _validator() -> Any:
    return _compiled(_schema_text())


@cache
def _compiled(key: bytes) -> Any:
    """The shard schema compiled to Python by fastjsonschema (once a process): the 28 committed shards in
    about 2.5 s, where jsonschema takes about 20 s.

    The generated code's bytecode is cached (:mod:`kinkcheck.cache`, keyed on the schema, fastjsonschema's and
    Python's versions): generating and compiling it took 0.03 s of every probe, a tenth of a light framework's.
    """
    import fastjsonschema

    digest = hashlib.sha256(key + f"\0{fastjsonschema.VERSION}\0{sys.version}".encode()).hexdigest()[:32]
    data = read_cached("shard-validators", digest)
    code = None
    if data is not None:
        try:
            code = marshal.loads(data)  # the user's own cache folder, like __pycache__
        except (EOFError, ValueError, TypeError):  # a torn file: compile again
            code = None
        if not isinstance(code, type(_null_last.__code__)):
            code = None
    if code is None:
        # Without "$id": fastjsonschema resolves the relative id "kinkcheck/shard/v1" as a URL to fetch. The
        # schema's keywords (type, enum, const, pattern, required, properties, items, anyOf, $ref into $defs)
        # mean the same in draft 7, which fastjsonschema implements, as in 2020-12.
        schema = {k: v for k, v in shard_schema().items() if k not in ("$id", "$schema")}
        code = compile(fastjsonschema.compile_to_code(_null_last(schema), use_default=False),
                       "<kinkcheck shard validator>", "exec")
        write_cached("shard-validators", digest, marshal.dumps(code))
    namespace: dict[str, Any] = {}
    exec(code, namespace)  # noqa: S102 - fastjsonschema's own output (as fastjsonschema.compile runs it)
    return namespace["validate"]


def _null_last(schema: Any) -> Any:
    """``schema`` with each ``anyOf``'s ``{"type": "null"}`` branch moved last. ``anyOf`` does not depend on
    the order of its branches; fastjsonschema tries them in order, at the cost of an exception caught for each
    that fails, and the values it guards (``value``, ``W1``, ``W2``) are mostly not null: a third less time."""
    if isinstance(schema, list):
        return [_null_last(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _null_last(v) for k, v in schema.items()}
    if isinstance(out.get("anyOf"), list):
        out["anyOf"] = sorted(out["anyOf"], key=lambda branch: branch == {"type": "null"})
    return out


def _validate(data: Any, name: str) -> None:
    """Raise :class:`ShardError` (one line: the file, the path in the document, what is wrong) unless ``data``
    matches ``schemas/shard.v1.json``."""
    import fastjsonschema

    try:
        _validator()(data)
    except fastjsonschema.JsonSchemaValueException as err:
        path = list(err.path or ())[1:]  # the first element is fastjsonschema's name for the document, "data"
        where = "/".join(str(p) for p in path) or "top level"
        what = err.message.removeprefix(f"{err.name} ")  # "data.observations[0].dtype must be one of [...]"
        short = reprlib.Repr()
        short.maxlevel, short.maxstring, short.maxother, short.maxdict, short.maxlist = 2, 40, 40, 3, 3
        got = short.repr(err.value)
        raise ShardError(f"{name}: not a kinkcheck shard ({where}: {what[:160]}; got {got[:80]})") from None
    except RecursionError:  # parsed, but nested past what the validator can walk
        raise ShardError(f"{name}: not a kinkcheck shard (nested too deeply)") from None


def read_shard(path: str | Path, catalog: Catalog | None = None, raw: bytes | None = None) -> dict[str, Any]:
    """Read and validate one shard: the JSON (strictly: no key twice in one object), the schema, then the
    semantics (:func:`kinkcheck.shards.validate.shard_problem`); ``raw``: the file's bytes, read already.

    Each check is done once per content: markers in the cache (:func:`kinkcheck.cache.cache_dir`) record
    that the content-only checks passed (strict JSON and schema; keyed on the SHA-256 of the schema and the
    file's bytes), and that the semantic checks passed (keyed on that, the catalog's hash and the source of
    the checks, :func:`_checks_hash`). A shard with the first marker is parsed by orjson
    (:func:`kinkcheck.shards.validate.parse_checked_json`) and not validated again; with the second, not checked
    again. Only passes are recorded: a broken shard is checked, and named, on every read.

    Parameters
    ----------
    catalog : Catalog, optional
        When given, ``ok`` values must have the inputs and shapes of their case's point in it.

    Raises
    ------
    ShardError
        Missing file, invalid, truncated or too deeply nested JSON, a key twice in one object, a schema
        mismatch, or a semantic problem (e.g. an ``ok`` observation without a value); the message is one line
        naming the file and the first problem.
    """
    p = Path(path)
    if raw is None:
        raw = read_text(p, ShardError, missing=f"{p}: shard not found")
    validated = _validated_marker(raw)
    digest = validated.name
    semantic = hashlib.sha256(f"{digest} {catalog.hash if catalog else '-'} {_checks_hash()}".encode()).hexdigest()
    checked = cache_dir() / "checked-shards" / semantic[:32]
    data = parse_checked_json(raw) if validated.exists() else None
    if data is not None:
        data = unpack(data, str(p))
    else:
        file_doc = parse_json(raw.decode("utf-8"), p, ShardError)
        data = unpack(file_doc, str(p))
        if not validated.exists():
            try:
                _validate(data, str(p))
            except ShardError as err:  # name the place in the file, not in the unpacked list
                raise ShardError(_in_file(str(err), file_doc)) from None
            _touch(validated)
    if not checked.exists():
        problem = shard_problem(data, catalog)
        if problem:
            raise ShardError(_in_file(f"{p}: {problem}", json.loads(raw)))
        _touch(checked)
    return data


class ShardFile:
    """A shard file read for a render (:func:`load_shards` with ``lazy=True``): its environment and the digest of
    its content at once, its observations only when :meth:`load` asks (:func:`kinkcheck.judge.build.judged_shard`
    asks only for a shard it has not judged before: the other shards of a render after one new shard are hashed,
    never parsed). Made only for a file that passed every check before (both cache markers of
    :func:`read_shard`), its environment then read from the cache (``shard-environments/``, by digest); a file
    not checked yet is read whole and checked at once, its shard kept.

    Attributes
    ----------
    path : Path
    digest : str
        32 hex digits of the file's bytes (with the shard schema's): what the render's caches are keyed on.
    environment : dict
        The shard's environment, as in the shard.
    """

    __slots__ = ("_catalog", "_shard", "digest", "environment", "path")

    def __init__(self, path: Path, digest: str, environment: dict[str, Any], catalog: Catalog | None = None,
                 shard: dict[str, Any] | None = None) -> None:
        self.path, self.digest, self.environment, self._shard = path, digest, environment, shard
        self._catalog = catalog

    def load(self) -> dict[str, Any]:
        """The whole shard, as :func:`read_shard` gives it.

        Raises
        ------
        ShardError
            The file changed since it was listed (its digest is another): the render stops rather than judge
            other bytes than the ones its caches are keyed on.
        """
        if self._shard is None:

            raw = read_text(self.path, ShardError, missing=f"{self.path}: shard not found")
            if _validated_marker(raw).name != self.digest:
                raise ShardError(f"{self.path}: changed while the report was rendered; render again")
            self._shard = read_shard(self.path, self._catalog, raw=raw)  # checked before: not again
        return self._shard

    def __repr__(self) -> str:
        return f"ShardFile({str(self.path)!r}, {self.environment.get('id')!r})"


def read_shard_file(path: str | Path, catalog: Catalog | None = None) -> ShardFile:
    """:func:`read_shard`, as a :class:`ShardFile`: hashed and its environment taken from the cache where both of
    its checks passed before; else read and checked whole.

    Raises
    ------
    ShardError
        As :func:`read_shard`.
    """
    p = Path(path)
    raw = read_text(p, ShardError, missing=f"{p}: shard not found")
    validated = _validated_marker(raw)
    semantic = hashlib.sha256(
        f"{validated.name} {catalog.hash if catalog else '-'} {_checks_hash()}".encode()).hexdigest()
    if validated.exists() and (cache_dir() / "checked-shards" / semantic[:32]).exists():
        kept = read_cached("shard-environments", validated.name, touch=True)
        try:
            entry = json.loads(kept) if kept is not None else None
        except ValueError:  # a damaged entry: the file is read whole below
            entry = None
        # the entry names the digest it was written for and the digest of the two together: another file's entry
        # (copied, renamed) or one edited by hand is not taken
        if isinstance(entry, dict) and entry.get("digest") == validated.name and isinstance(entry.get("environment"),
                                                                                            dict) \
                and entry.get("check") == _environment_check(validated.name, entry["environment"]):
            return ShardFile(p, validated.name, entry["environment"], catalog)
    shard = read_shard(p, catalog, raw=raw)
    env = shard["environment"]
    write_cached("shard-environments", validated.name, json.dumps(
        {"digest": validated.name, "environment": env, "check": _environment_check(validated.name, env)}).encode())
    return ShardFile(p, validated.name, shard["environment"], catalog, shard=shard)


def _environment_check(digest: str, environment: dict[str, Any]) -> str:
    """What an environment entry in the cache (:func:`read_shard_file`) must carry: a digest of the file's digest
    and the environment, canonical JSON."""
    return hashlib.sha256(digest.encode() + json.dumps(environment, sort_keys=True).encode()).hexdigest()[:32]


def _in_file(message: str, file_doc: Any) -> str:
    """``message`` about the unpacked document with the place in a packed (v2) file: ``observations/483/status``
    → ``observations/40/cells/3 (status)``, ``observation #484 (…)`` → ``… (observations/40/cells/3 in the
    file)``. A v1 file's places are its own: returned as it is."""
    if not isinstance(file_doc, dict) or file_doc.get("schema") != FILE_SCHEMA_ID:
        return message

    def place(index: int) -> str | None:
        for g, group in enumerate(file_doc.get("observations") or []):
            cells = group.get("cells") if isinstance(group, dict) else None
            n = len(cells) if isinstance(cells, list) else 0
            if index < n:
                return f"observations/{g}/cells/{index}"
            index -= n
        return None

    def schema_path(m: re.Match[str]) -> str:
        where = place(int(m.group(1)))
        return f"{where} ({m.group(2)})" if where else m.group(0)

    def numbered(m: re.Match[str]) -> str:
        where = place(int(m.group(1)) - 1)
        return f"{m.group(0)} [{where} in the file]" if where else m.group(0)

    message = re.sub(r"\bobservations/(\d+)/(\w+)", schema_path, message)
    return re.sub(r"\bobservation #(\d+)", numbered, message)


def _touch(marker: Path) -> None:
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
    except OSError:
        pass  # an unwritable cache only costs time


def _schema_text() -> bytes:
    return _text(id(shard_schema()))


@cache
def _text(_key: int) -> bytes:
    return json.dumps(shard_schema(), sort_keys=True).encode()


@cache
def _checks_hash() -> str:
    """What the semantic checks of a shard depend on besides the shard and the catalog's content: the source
    of :mod:`kinkcheck.shards.validate` and of :mod:`kinkcheck.catalog` (the measurement hashes), and P0's shapes."""
    h = hashlib.sha256(repr(_p0_shapes()).encode())
    for name in ("shards/validate.py", "catalog.py"):
        h.update(resources.files("kinkcheck").joinpath(name).read_bytes())
    return h.hexdigest()[:16]


def load_shards(folder: str | Path, catalog: Catalog | None = None,
                lazy: bool = False) -> tuple[list[Any], list[str]]:
    """All shards ``*.json`` in ``folder``, sorted by environment id, and one error line per bad file; with
    ``lazy``, each a :class:`ShardFile` (:func:`read_shard_file`: what a render reads), else a dict.

    A bad shard (unreadable, off the schema, or semantically broken: see :func:`read_shard`, checked against
    ``catalog`` when given) does not stop the others from loading: the caller reports the gap.

    Raises
    ------
    ShardError
        When ``folder`` does not exist or is not a folder.
    """
    d = Path(folder)
    if not d.is_dir():
        raise ShardError(f"{d}: not a folder (--shards takes the folder of shard files)" if d.exists()
                         else f"{d}: no such shard folder")
    with _no_gc():  # 500,000 small dicts and no cycle: the collector would walk them again and again (3.6x)
        return _load_shards(d, catalog, one_line, read_shard_file if lazy else read_shard)


def _load_shards(d: Path, catalog: Catalog | None, one_line: Any, read: Any) -> tuple[list[Any], list[str]]:
    by_env: dict[str, tuple[Path, Any]] = {}
    errors = []
    for p in sorted(d.glob("*.json")):
        try:
            shard = read(p, catalog)
        except ShardError as err:
            errors.append(one_line(str(err)))  # the report prints and lists each as one line
            continue
        eid = (shard.environment if isinstance(shard, ShardFile) else shard["environment"])["id"]
        if eid in by_env:
            # the file named for its environment wins over a stray copy ("torch-2.13.0-cpu (copy).json")
            kept, dropped = ((p, shard), by_env[eid][0]) if p.name == f"{eid}.json" else (by_env[eid], p)
            errors.append(one_line(f"{dropped}: a second shard for environment {eid} (kept: {kept[0].name}); ignored"))
            by_env[eid] = kept
            continue
        by_env[eid] = (p, shard)
    return [by_env[e][1] for e in sorted(by_env)], errors


def _read_loose(path: str | Path) -> dict[str, Any] | None:
    """The JSON at ``path`` when it looks like a shard (an environment and lists of rows), else None.

    Parsed by orjson where nox's Python has it (three times faster: nox reads each shard three times a warm
    ``nox -s report``), else, or where orjson refuses what :mod:`json` reads (a bare NaN), by :mod:`json`.
    """
    try:
        raw = Path(path).read_bytes()
        was = gc.isenabled()
        gc.disable()  # a parsed document has no cycles: collections while parsing find nothing
        try:
            data = unpack(_loads_loose(raw), str(path))
        finally:
            if was:
                gc.enable()
    except (OSError, ValueError, RecursionError):  # ShardError is a ValueError
        return None
    ok = (isinstance(data, dict) and isinstance(data.get("environment"), dict)
          and isinstance(data["environment"].get("framework"), str)
          and isinstance(data.get("observations"), list) and isinstance(data.get("networks"), list)
          and all(isinstance(o, dict) and {"case", "program", "mode", "dtype"} <= o.keys()
                  for o in data["observations"]))
    return data if ok else None


def _loads_loose(raw: bytes) -> Any:
    try:
        import orjson
    except ImportError:  # nox's own Python may have no kinkcheck dependency
        return json.loads(raw.decode("utf-8"))
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(raw.decode("utf-8"))
