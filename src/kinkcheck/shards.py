"""Shards: the observations of one environment in one JSON file, with provenance.

A shard is written atomically (a temporary file in the same folder, then :func:`os.replace`), so an
interrupted probe leaves the previous shard whole. It is validated against ``schemas/shard.v1.json`` on
read; a corrupt or truncated shard raises :class:`ShardError` naming the file. Provenance follows the
array-api-tests compliance records: framework and Python versions, platform, device, date, kinkcheck
version and the catalog hash (a shard is *fresh* when its hash matches the current catalog).
"""

from __future__ import annotations

import json
import os
import tempfile
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

__all__ = ["SCHEMA_ID", "ShardError", "is_fresh", "load_shards", "read_shard", "shard_schema", "write_json_atomic",
           "write_shard", "write_text_atomic"]

SCHEMA_ID = "kinkcheck/shard/v1"


class ShardError(ValueError):
    """A shard that cannot be read or does not match the schema; ``str(err)`` names the file."""


@cache
def shard_schema() -> dict[str, Any]:
    return json.loads(resources.files("kinkcheck").joinpath("schemas/shard.v1.json").read_text())


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
    """Write ``data`` as JSON to ``path`` with :func:`write_text_atomic`.

    ``compact``: no indentation, but one line per top-level key and one line per element of a top-level
    list (an observation of the report), so a re-render that changes one observation or the timestamp
    changes one line in version control, not the whole file.
    """
    if not compact or not isinstance(data, dict):
        text = json.dumps(data, ensure_ascii=False, allow_nan=False,
                          **({"separators": (",", ":")} if compact else {"indent": 1}))
        write_text_atomic(path, text + "\n")
        return

    def one(v: Any) -> str:
        return json.dumps(v, ensure_ascii=False, allow_nan=False, separators=(",", ":"))

    parts = []
    for k, v in data.items():
        if isinstance(v, list) and v:
            parts.append(f"{one(k)}:[\n" + ",\n".join(one(x) for x in v) + "\n]")
        else:
            parts.append(f"{one(k)}:{one(v)}")
    write_text_atomic(path, "{\n" + ",\n".join(parts) + "\n}\n")


def write_shard(path: str | Path, shard: dict[str, Any], validate: bool = True) -> None:
    """Write a shard atomically, validated against the schema first unless ``validate`` is False.

    The probe passes ``validate=False`` for the shards it builds itself (their shape is tested, and
    every reader validates anyway): the check costs half a second, an eighth of a whole probe.

    Raises
    ------
    ShardError
        When ``shard`` does not match the shard schema (nothing is written).
    """
    if validate:
        _validate(shard, str(path))
    write_json_atomic(path, shard)


@cache
def _validator() -> Any:
    import jsonschema

    cls = jsonschema.validators.validator_for(shard_schema())
    cls.check_schema(shard_schema())
    return cls(shard_schema())


def _validate(data: Any, name: str) -> None:
    import jsonschema

    try:
        _validator().validate(data)
    except jsonschema.ValidationError as err:
        where = "/".join(str(p) for p in err.absolute_path) or "top level"
        raise ShardError(f"{name}: not a kinkcheck shard ({where}: {err.message[:160]})") from None


def read_shard(path: str | Path) -> dict[str, Any]:
    """Read and validate one shard.

    Raises
    ------
    ShardError
        Missing file, invalid or truncated JSON, or a schema mismatch; the message names the file.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ShardError(f"{p}: shard not found") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ShardError(f"{p}: cannot read shard ({err})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise ShardError(f"{p}: corrupt shard (invalid JSON at line {err.lineno}, column {err.colno})") from None
    # Schema validation costs ~0.1 s a shard; a marker keyed on (content, schema) skips it the next time.
    marker = _validated_marker(text)
    if not marker.exists():
        _validate(data, str(p))
        try:
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.touch()
        except OSError:
            pass  # an unwritable cache only costs time
    return data


def _validated_marker(text: str) -> Path:
    import hashlib

    from kinkcheck.cache import cache_dir

    schema = json.dumps(shard_schema(), sort_keys=True)
    digest = hashlib.sha256((schema + "\0" + text).encode()).hexdigest()[:32]
    return cache_dir() / "validated-shards" / digest


def is_fresh(path: str | Path, catalog_hash: str) -> bool:
    """Whether the shard at ``path`` exists, parses, and was measured against the catalog ``catalog_hash``.

    A stale or missing shard is re-probed by ``nox -s report``; a fresh one is kept as it is (and so is a
    shard of an environment outside the matrix, e.g. one recorded on a CUDA machine). Reads JSON only, no
    schema validation, so nox can call it without kinkcheck's dependencies.
    """
    try:
        env = json.loads(Path(path).read_text(encoding="utf-8"))["environment"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return isinstance(env, dict) and env.get("catalog_hash") == catalog_hash


def load_shards(folder: str | Path) -> tuple[list[dict[str, Any]], list[str]]:
    """All shards ``*.json`` in ``folder``, sorted by environment id, and one error line per bad file.

    A bad shard does not stop the others from loading: the caller reports the gap.

    Raises
    ------
    ShardError
        When ``folder`` does not exist or is not a folder.
    """
    d = Path(folder)
    if not d.is_dir():
        raise ShardError(f"{d}: no such shard folder")
    by_env: dict[str, tuple[Path, dict[str, Any]]] = {}
    errors = []
    for p in sorted(d.glob("*.json")):
        try:
            shard = read_shard(p)
        except ShardError as err:
            errors.append(str(err))
            continue
        eid = shard["environment"]["id"]
        if eid in by_env:
            errors.append(f"{p}: a second shard for environment {eid} (first: {by_env[eid][0].name}); ignored")
            continue
        by_env[eid] = (p, shard)
    return [by_env[e][1] for e in sorted(by_env)], errors
