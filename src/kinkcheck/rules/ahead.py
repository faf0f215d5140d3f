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

import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["Ahead", "start"]


class Ahead:
    """The children inferring parts of the rules: framework → (part key, child process, its rows' file)."""

    def __init__(self) -> None:
        self.children: dict[str, tuple[str, subprocess.Popen[bytes], Path]] = {}

    def wait(self, framework: str, key: str) -> bool:
        """Wait for ``framework``'s child if it infers the part kept under ``key``: True when it ended well (its
        part is then kept), False when there was none for that key or it failed (its stderr goes to ours)."""
        got = self.children.pop(framework, None)
        if got is None:
            return False
        child_key, child, rows = got
        try:
            _, err = child.communicate()
        finally:
            rows.unlink(missing_ok=True)
        if child.returncode != 0 and err:
            sys.stderr.write(f"kinkcheck: inferring {framework}'s rules ahead failed; inferred here instead: "
                             f"{err.decode(errors='replace').strip().splitlines()[-1]}\n")
        return child_key == key and child.returncode == 0

    def close(self) -> None:
        """Stop every child still running (a render that failed on the way) and remove their rows' files."""
        for _, child, rows in self.children.values():
            if child.poll() is None:
                child.kill()
            child.communicate()
            rows.unlink(missing_ok=True)
        self.children.clear()


def start(rows_of: Callable[[str], Any], catalog: Any, sources: Mapping[str, str], sizes: Mapping[str, int]) -> Ahead:
    """Start a child for the largest framework of ``sources`` (framework → its rows' digest, as for
    :func:`kinkcheck.rules.render`; ``sizes``: framework → its count of rows) whose part is not kept;
    ``rows_of(framework)`` gives its rows (a ``pyarrow.Table`` with :data:`kinkcheck.rules.COLUMNS`, in the
    observations file's order). One child: after one new shard, the one part to infer; after many, the largest
    beside the pages and the others here (each child imports sympy and NumPy again). Every part kept already, or
    one CPU: no child, nothing read."""
    import pyarrow as pa

    from kinkcheck.cache import is_cached
    from kinkcheck.rules import COLUMNS, _code_key, _part_key

    ahead = Ahead()
    if len(os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else range(os.cpu_count() or 1)) < 2:
        return ahead  # nothing would run beside the render
    code = _code_key(catalog)
    keys = {fw: _part_key(fw, sources[fw], code) for fw in sources}
    stale = [fw for fw in sorted(sources) if not is_cached("rules-part", keys[fw])]  # damaged: inferred here
    if not stale:
        return ahead
    fw = max(stale, key=lambda f: (sizes.get(f, 0), f))
    table = rows_of(fw).select(list(COLUMNS))
    fd, name = tempfile.mkstemp(prefix=f"kinkcheck-rules-{fw}-", suffix=".arrow")
    rows = Path(name)
    try:
        with os.fdopen(fd, "wb") as fh, pa.ipc.new_file(fh, table.schema) as writer:
            writer.write_table(table)
        child = subprocess.Popen(  # this very kinkcheck: its folder first on the child's path
            [sys.executable, "-c", _CHILD, str(Path(__file__).resolve().parents[2]), str(rows), str(catalog.path),
             str(catalog.hash), fw, keys[fw]], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE)
    except BaseException:
        rows.unlink(missing_ok=True)
        raise
    ahead.children[fw] = (keys[fw], child, rows)
    return ahead


#: The child's program: the folder that holds this kinkcheck put first on its path, then :func:`main`.
_CHILD = ("import sys; sys.path.insert(0, sys.argv[1]); from kinkcheck.rules.ahead import main; "
          "raise SystemExit(main(sys.argv[2:]))")


def main(argv: list[str]) -> int:
    """The child: ``ROWS CATALOG CATALOG_HASH FRAMEWORK KEY``; infers the framework's part from the rows and keeps
    it under ``KEY``. Exit 0 when kept; 2 with a line on stderr when the catalog is not the render's."""
    rows, catalog_path, catalog_hash, framework, key = argv
    import pyarrow as pa

    from kinkcheck.catalog import load_catalog
    from kinkcheck.rules import _keep_part, _part

    with pa.OSFile(rows, "rb") as fh:
        table = pa.ipc.open_file(fh).read_all()
    catalog = load_catalog(catalog_path)
    if str(catalog.hash) != catalog_hash:  # changed since the render read it: the render infers the part itself
        print(f"{catalog_path}: changed since the render read it", file=sys.stderr)
        return 2
    _keep_part(key, _part(table, framework, catalog))
    return 0
