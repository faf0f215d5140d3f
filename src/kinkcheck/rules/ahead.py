"""Rules inferred ahead: a framework's part of the rules (:func:`kinkcheck.rules._part`) inferred in a child
process while the render writes its pages and its table.

A render after one new shard infers that shard's framework's rules again (the others are kept: kind
``rules-part``). The rules read the observations table; the render has that framework's rows as soon as it has
judged its shards (:func:`kinkcheck.report.dataset.sorted_rows`: the very rows of the file, in its order), and the
inference (sympy, NumPy) and the pages (Jinja2) are each one Python thread's work: on a second core they run side
by side. :func:`start` hands the largest framework whose part is not kept to a child (:func:`main`)
with its rows as an Arrow IPC file; the child infers the part from them and keeps it under the key the render
reads it by. :func:`kinkcheck.rules.render` waits for it (:meth:`Ahead.wait`) and reads the kept part; a child
that failed or kept nothing leaves the part to the render itself, never an error and never another answer.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from kinkcheck.cache import is_cached
from kinkcheck.catalog import load_catalog
from kinkcheck.rules import COLUMNS, _code_key, _keep_part, _part, _part_key

__all__ = ["Ahead", "start"]


class Ahead:
    """The children inferring parts of the rules: framework → (part key, child process, its rows' file)."""

    def __init__(self) -> None:
        self.children: dict[str, tuple[str, subprocess.Popen[bytes], Path]] = {}

    def wait(self, framework: str, key: str) -> bool:
        """Wait for ``framework``'s child if it infers the part kept under ``key``: True when it ended well (its
        part is then kept), False when there was none for that key or it failed (its stderr goes to ours). The
        child stays listed until it has ended, so that :meth:`close` stops one whose wait was interrupted."""
        got = self.children.get(framework)
        if got is None:
            return False
        child_key, child, rows = got
        _, err = child.communicate()
        del self.children[framework]
        rows.unlink(missing_ok=True)
        said = err.decode(errors="replace").strip().splitlines() if err else []
        if child.returncode != 0:
            sys.stderr.write(f"kinkcheck: inferring {framework}'s rules ahead failed (exit {child.returncode}); "
                             f"inferred here instead{': ' + said[-1] if said else ''}\n")
        return child_key == key and child.returncode == 0

    def close(self) -> None:
        """Stop every child still running (a render that failed on the way, or whose rules were read from the
        cache whole) and remove their rows' files."""
        for _, child, rows in self.children.values():
            if child.poll() is None:
                child.kill()
            child.communicate()
            rows.unlink(missing_ok=True)
        self.children.clear()


def fingerprint(catalog: Any) -> str:
    """What the child checks its catalog against: the file's hash and every case and program the parent's catalog
    holds (a catalog with its staged cases, or loaded for some frameworks only, keeps the file's hash)."""
    cases = [(c.id, [(p.framework, p.id) for p in c.programs]) for c in catalog]
    return hashlib.sha256(repr((str(catalog.hash), cases)).encode()).hexdigest()


def start(rows_of: Callable[[str], Any], catalog: Any, sources: Mapping[str, str], sizes: Mapping[str, int]) -> Ahead:
    """Start a child for the largest framework of ``sources`` (framework → its rows' digest, as for
    :func:`kinkcheck.rules.render`; ``sizes``: framework → its count of rows) whose part is not kept;
    ``rows_of(framework)`` gives its rows (a ``pyarrow.Table`` with :data:`kinkcheck.rules.COLUMNS`, in the
    observations file's order). One child: after one new shard, the one part to infer; after many, the largest
    beside the pages and the others here (each child imports sympy and NumPy again). Every part kept already, or
    one CPU: no child, nothing read."""
    import pyarrow as pa

    ahead = Ahead()
    if len(os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else range(os.cpu_count() or 1)) < 2:
        return ahead  # nothing would run beside the render
    code = _code_key(catalog)
    keys = {fw: _part_key(fw, sources[fw], code) for fw in sources}
    stale = [fw for fw in sorted(sources) if not is_cached("rules-part", keys[fw])]  # damaged: inferred here
    if not stale:
        return ahead
    fw = max(stale, key=lambda f: (sizes.get(f, 0), f))
    rows: Path | None = None
    try:  # an optional speed-up: anything that fails here leaves the part to the render, never fails the render
        table = rows_of(fw).select(list(COLUMNS))
        fd, name = tempfile.mkstemp(prefix=f"kinkcheck-rules-{fw}-", suffix=".arrow")
        rows = Path(name)
        with os.fdopen(fd, "wb") as fh, pa.ipc.new_file(fh, table.schema) as writer:
            writer.write_table(table)
        child = subprocess.Popen(  # isolated (-I), then given this process's own module path: the same kinkcheck
            [sys.executable, "-I", "-c", _CHILD, json.dumps(sys.path), str(rows), str(catalog.path),
             fingerprint(catalog), fw, keys[fw]],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    except (OSError, pa.ArrowException, ValueError):
        if rows is not None:
            rows.unlink(missing_ok=True)
        return ahead
    except BaseException:
        if rows is not None:
            rows.unlink(missing_ok=True)
        raise
    ahead.children[fw] = (keys[fw], child, rows)
    return ahead


#: The child's program: this process's module path as its own (it runs with ``-I``: no working folder, no
#: environment's paths of its own), then :func:`main`.
_CHILD = ("import json, sys; sys.path[:] = json.loads(sys.argv[1]); from kinkcheck.rules.ahead import main; "
          "raise SystemExit(main(sys.argv[2:]))")


def main(argv: list[str]) -> int:
    """The child: ``ROWS CATALOG FINGERPRINT FRAMEWORK KEY``; infers the framework's part from the rows (a file it
    removes once read) and keeps it under ``KEY``. Exit 0 when kept; 2 with a line on stderr when the catalog is
    not the render's (:func:`fingerprint`)."""
    rows, catalog_path, wanted, framework, key = argv
    import pyarrow as pa

    with pa.OSFile(rows, "rb") as fh:
        table = pa.ipc.open_file(fh).read_all()
    Path(rows).unlink(missing_ok=True)  # read: nothing left behind should the render be killed meanwhile
    catalog = load_catalog(catalog_path)
    if fingerprint(catalog) != wanted:  # edited since the render read it, or not the catalog the render holds
        print(f"{catalog_path}: not the catalog the render read (changed since, or with staged cases or some "
              "frameworks only)", file=sys.stderr)
        return 2
    _keep_part(key, _part(table, framework, catalog))
    return 0
