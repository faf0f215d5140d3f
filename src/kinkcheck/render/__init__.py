"""The render: shards + oracles → ``reports/conventions.md`` (the index page), ``reports/cases/<case>.md``
(one page per case), ``conventions.json.gz`` (the typed report, gzipped), ``observations.parquet`` (every
observation as one table: :mod:`kinkcheck.report.dataset`). The site (MkDocs, :mod:`kinkcheck.render.site`) is built
from these files by ``nox -s site``; the single HTML file of earlier renders is retired.

:func:`write_reports` judges the shards (:mod:`kinkcheck.judge`) into the typed report
(:mod:`kinkcheck.report.model`), renders its pages (:mod:`kinkcheck.render.view`, ``markdown``, ``plots``; the site:
``site``) and replaces the report folder whole, or not at all, the way a database commits: the new set is written into
a folder beside it (``.<name>.render-<pid>-<random>.tmp``, in the same parent), the user's own files of the old folder
are hard-linked into it (anything that is not the report's: the set's files, an earlier render's
``conventions.json``/``.csv``/``.html``, a generated page of a case no longer in the catalog, an earlier kinkcheck's
``.*.tmp`` are the report's), and the two folders are exchanged in **one rename** (Linux
``renameat2(RENAME_EXCHANGE)``, macOS ``renamex_np(RENAME_SWAP)``); the old set, now beside, is then removed. A
``kill -9`` at any moment leaves the folder wholly old or wholly new; what it leaves beside (a new set never switched
in, an old one never removed) the next render removes, unless a live render holds it (each holds its folder with
``flock``, and two renders into one folder switch one after the other, each set whole). Where the file system has no
atomic exchange, two renames stand in for it: a kill between them leaves no folder (readers say "no report"), and the
next render first renames the old set back. The folder stays a plain folder of plain files (``reports/`` is committed
as one); a link to it is followed and the folder it names is switched. A folder's files of two renders (copied by
hand) are still told apart: the files are chained by digests, the JSON records the Parquet file's SHA-256 and the
Markdown pages name the JSON's SHA-256; :func:`set_problems` checks a whole folder, and every reader of the table
checks it is the one its JSON records (:func:`kinkcheck.report.query.check_one_render`). ``$KINKCHECK_TEST_PAUSE_SWITCH``
(``before``, ``after``; tests only) pauses a render at the switch so a test can kill it there. The files are a
function of the shards and catalog alone (no clock), so the same shards render byte-identical files on any machine
with the same matplotlib and pyarrow releases (``noxfile.MATPLOTLIB``, ``noxfile.PYARROW``). :func:`validate_report`
checks a JSON document against ``schemas/conventions.v2.json`` (generated from the model; the tests run it on the
committed report).
"""

from __future__ import annotations

import ctypes
import errno
import functools
import hashlib
import json
import os
import re
import shutil
import stat
import sys
import tempfile
import time
import zlib
from collections.abc import Sequence
from importlib import metadata, resources
from pathlib import Path
from typing import Any

from kinkcheck.cache import cache_dir, prune_cached
from kinkcheck.catalog import Catalog
from kinkcheck.judge.build import derive, judged_report
from kinkcheck.render.markdown import render_case_pages, render_markdown, render_section_pages
from kinkcheck.render.plots import kink_hits_svg
from kinkcheck.report.dataset import sorted_rows, write_parquet
from kinkcheck.report.model import Provenance, gzip_bytes, head_end, report_json
from kinkcheck.report.text import CASES_DIR, SECTION_PAGES  # not the view: it imports the classifier, NumPy
from kinkcheck.rules import render as render_rules
from kinkcheck.rules.ahead import start
from kinkcheck.shards.validate import _no_gc, gunzip

__all__ = ["CASES", "FILES", "KINK_HITS_PLOT", "OPTIONAL", "RETIRED", "SECTION_PAGES", "OutputError",
           "check_output", "inputs_digest", "is_current", "record_render", "set_problems", "validate_report",
           "write_reports"]

#: The census page's plot of the kink-hit census (``kinkcheck census``), written when one is measured.
KINK_HITS_PLOT = "kinkhits.svg"
#: The report files, in the order they are renamed into place (the case pages, ``CASES/<slug>.md``, go
#: before the index). ``conventions.json.gz`` is the report JSON gzipped (level 9, no name, mtime 0: the same
#: bytes for the same JSON with the same zlib), its head and its derived sections as two members (:func:`~kinkcheck.report.model.gzip_bytes`,
#: :func:`kinkcheck.report.model.head_end`); the JSON itself (162 MB at 169 cases, growing with cases ×
#: programs × environments) is not written: readers take the gzip (:func:`kinkcheck.report.model.report_path`),
#: and ``observations.parquet`` (1 MB) is the data in a form pandas, polars and DuckDB read directly.
FILES: tuple[str, ...] = ("observations.parquet", "conventions.json.gz", "conventions.md")
#: Files of the set that a folder may lack: none (the JSON names the Parquet file that holds its observations).
OPTIONAL: frozenset[str] = frozenset()
#: Files an earlier render wrote that this one does not: removed from the output folder when they are
#: kinkcheck's (they would be read before the gzip, and go stale).
#: Each with how it begins (whitespace left out).
RETIRED: dict[str, bytes] = {"conventions.json": b'{"schema":"kinkcheck/conventions/', "conventions.csv": b"case,program,",
                             "conventions.html": b"<!DOCTYPEhtml>"}
#: The folder of the per-case pages, inside the output folder.
CASES = CASES_DIR
#: How every generated Markdown page begins (a page of a removed case is removed only when it starts so).
GENERATED_MARK = b"<!-- Generated by `kinkcheck report`"


class OutputError(ValueError):
    """The output folder cannot take the report (not a folder, not writable, a target that is not a regular
    file) or writing failed; ``str(err)`` is one line naming the path. Nothing of the old set was replaced."""


def validate_report(doc: dict[str, Any]) -> None:
    """Validate a parsed report JSON document against ``schemas/conventions.v2.json`` (fastjsonschema).

    The schema is generated by msgspec as JSON Schema 2020-12 and uses only keywords draft 7 reads the same
    way (``$ref`` into ``$defs``, ``anyOf``, ``enum``, ``type``, ``properties``, ``required``, ``items``), so
    fastjsonschema's draft-7 compiler checks it, ~20× faster than jsonschema on the 25 MB report.

    Raises
    ------
    fastjsonschema.JsonSchemaException
        When the document breaks the contract (``err.message`` names the path, e.g.
        ``data.observations[5].status must be one of …``).
    """
    _report_validator()(doc)


@functools.cache
def _report_validator() -> Any:
    import fastjsonschema

    schema = json.loads(resources.files("kinkcheck").joinpath("schemas/conventions.v2.json").read_text())
    return fastjsonschema.compile({**schema, "$schema": "http://json-schema.org/draft-07/schema#"})


def check_output(out: str | Path) -> None:
    """Refuse an output folder the report cannot be written into, before anything is rendered or written.

    ``out`` must be a folder or creatable as one (its nearest existing ancestor a writable folder), and each
    of :data:`FILES` in it absent or a regular file; the folder that holds it must be writable too (the new set
    is written beside ``out`` and switched with it). Writability is tried, not inferred from permission
    bits (root passes ``os.access`` on ``/proc``): a temporary file (or folder, when ``out`` does not exist
    yet) is created and removed at once, and a temporary folder beside ``out``.

    Raises
    ------
    OutputError
        ``/dev/null``, a path under a regular file, ``/proc/...``, a read-only folder, or a target that is a
        folder, a device or a dangling link.
    """
    if not str(out).strip():  # Path("") is the current folder: an empty --out is a slip, not a choice
        raise OutputError("--out is empty: name the report folder, e.g. reports/")
    out = Path(out)
    base = out
    try:
        while not os.path.lexists(base) and base != base.parent:
            base = base.parent
        if not base.is_dir():
            raise OutputError(f"--out {out}: {base} is not a folder" if base != out else f"--out {out}: not a folder")
        for name in FILES:
            target = out / name
            if os.path.lexists(target) and not target.is_file():
                raise OutputError(f"--out {out}: {target} exists and is not a regular file")
        if os.path.lexists(out / CASES) and not (out / CASES).is_dir():
            raise OutputError(f"--out {out}: {out / CASES} exists and is not a folder")
        if base == out:
            fd, probe = tempfile.mkstemp(prefix=".conventions.", suffix=".tmp", dir=out)
            os.close(fd)
            os.unlink(probe)
            base = Path(os.path.realpath(out)).parent  # where the new set is written, beside the old
            if base == Path(os.path.realpath(out)):
                raise OutputError(f"--out {out}: the root of a file system cannot be switched; name a folder in it")
        os.rmdir(tempfile.mkdtemp(prefix=".conventions.", suffix=".tmp", dir=base))
    except OSError as err:
        raise OutputError(f"--out {out}: cannot write in {base} ({err.strerror or err})") from None


def write_reports(shards: Sequence[dict[str, Any]], catalog: Catalog, out: Path,
                  gaps: Sequence[str] = ()) -> list[Path]:
    """Render the report set into ``out``; return the paths of ``observations.parquet``, ``conventions.json.gz``,
    ``.md``, the section pages and plots, then the case pages.

    The output folder is checked first (:func:`check_output`), then everything is rendered in memory,
    written to temporary files beside the targets and renamed into place (see the module docstring).
    ``provenance.observations_sha256`` is set to the Parquet file's digest before the JSON is written.

    Raises
    ------
    OutputError
        The folder is refused, or writing fails (disk full, the folder changed meanwhile); the temporary
        files are removed, and unless a rename had already happened the old set is untouched.
    """
    out = Path(out)
    check_output(out)
    with _no_gc():  # 100,000 observations make no cycles; the collector would walk them again and again
        return _write(shards, catalog, out, gaps)


def _write(shards: Sequence[dict[str, Any]], catalog: Catalog, out: Path, gaps: Sequence[str]) -> list[Path]:
    from concurrent.futures import ThreadPoolExecutor  # slow to import

    # conformance to the schema is checked by the tests, not per render
    report, predictions = judged_report(shards, catalog, gaps)  # its index built, once, before a thread reads it
    sources = _rules_sources(report)
    ahead = _rules_ahead(report, catalog, sources)  # a framework's rules to infer again: in a child, meanwhile
    try:
        # The Parquet file is written (Arrow's sort, take and zstd, outside the GIL) in a thread while this one
        # derives the sections and renders the pages (Python): it reads what the judged report holds, which the
        # sections do not change. The pages name the JSON's digest, which follows from the file's: they are
        # rendered with a placeholder of its length, put in its place after (each page names it once, in its
        # footer).
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="kinkcheck-parquet") as pool:
            written = pool.submit(write_parquet, report, getattr(report, "fragments", None))  # kept columns joined
            derive(report, catalog, predictions)
            return _write_set(report, catalog, out, sources, ahead, written)
    finally:
        if ahead is not None:
            ahead.close()


def _write_set(report: Any, catalog: Catalog, out: Path, sources: dict[str, str] | None, ahead: Any,
               written: Any) -> list[Path]:
    pages = {f"{CASES}/{name}": text for name, text in render_case_pages(report, json_sha256=_DIGEST_HOLE).items()}
    sections = render_section_pages(report, json_sha256=_DIGEST_HOLE)
    parquet = written.result()
    report.provenance.observations_sha256 = hashlib.sha256(parquet).hexdigest()
    json_bytes = report_json(report, observations_file="observations.parquet")  # the observations once, there
    digest = hashlib.sha256(json_bytes).hexdigest()
    pages = {name: _fill_digest(name, text, digest) for name, text in pages.items()}
    sections = {name: _fill_digest(name, text, digest) for name, text in sections.items()}
    plots = {}
    measured = [k for k in report.kink_hits if k.error is None and k.cells]
    if measured:  # the census page shows it (section.md.j2): every measurement, by file name

        plots[KINK_HITS_PLOT] = kink_hits_svg(measured).encode("utf-8")

    rules = render_rules(parquet, catalog, sources, ahead)  # the rules inferred, and their validation
    blobs = {"observations.parquet": parquet, **pages, **sections, **plots, **rules,
             "conventions.json.gz": gzip_bytes(json_bytes, head_end(json_bytes)),  # the head alone first
             "conventions.md": render_markdown(report, json_sha256=digest).encode("utf-8")}
    _replace_set(out, blobs)

    prune_cached("case-parts")  # kept per framework: what no render has read for a week goes
    return [out / name for name in ("observations.parquet", "conventions.json.gz", "conventions.md",
                                    *sections, *plots, *rules, *pages)]



#: What the pages rendered before the JSON's digest is known name in its place (64 characters, as a SHA-256 in hex;
#: not hex, so no digest is taken for it): :func:`_fill_digest` puts the digest there.
_DIGEST_HOLE = "kinkcheck-the-SHA-256-of-conventions-json-is-filled-in-here".ljust(64, "-")


def _fill_digest(name: str, text: str, digest: str) -> bytes:
    """Page ``name``'s text with the JSON's digest in place of :data:`_DIGEST_HOLE` (its footer names it once),
    as UTF-8."""
    if text.count(_DIGEST_HOLE) != 1:  # a page that names it otherwise (or not) is the renderer's error
        raise AssertionError(f"{name}: the JSON digest's place is named {text.count(_DIGEST_HOLE)} times, not once")
    return text.replace(_DIGEST_HOLE, digest).encode("utf-8")


def _rules_ahead(report: Any, catalog: Catalog, sources: dict[str, str] | None) -> Any:
    """The largest framework whose rules are not kept, inferred in a child process from its rows while the pages are
    rendered (:func:`kinkcheck.rules.ahead.start`); None where the report has no kept columns or sources."""
    fragments = getattr(report, "fragments", None)
    if sources is None or fragments is None:
        return None

    sizes: dict[str, int] = {}
    for e in report.environments:
        f = fragments.get(e.id)
        sizes[e.framework] = sizes.get(e.framework, 0) + (f.num_rows if f is not None else 0)
    return start(lambda fw: sorted_rows(report, fragments, framework=fw), catalog, sources, sizes)


def _rules_sources(report: Any) -> dict[str, str] | None:
    """Framework → a digest of its shards' judged keys (``report.judged_keys``: each shard's content, the judging
    code and its environment record), what its rows of the observations table come from: the rules keep each
    framework's part under it (:func:`kinkcheck.rules.render`). None when a shard has no judged key."""
    keys = getattr(report, "judged_keys", None) or {}
    ids: dict[str, list[str]] = {}
    for e in report.environments:
        if e.id not in keys:
            return None
        ids.setdefault(e.framework, []).append(e.id)
    return {fw: hashlib.sha256("\n".join(f"{i} {keys[i]}" for i in sorted(envs)).encode()).hexdigest()
            for fw, envs in ids.items()}


def _replace_set(out: Path, blobs: dict[str, bytes | str]) -> None:
    """Replace the report folder ``out`` with one holding ``blobs`` (path relative to ``out`` → content) and the
    user's own files of the old folder, in one rename (see the module docstring): leftovers of killed renders are
    removed, the new set is written into a folder beside ``out``, the user's files are linked into it, and the two
    folders are exchanged; the old set is then removed."""
    target = Path(os.path.realpath(out))  # a link to the report folder: the folder it names is switched
    if target == target.parent:
        raise OutputError(f"--out {out}: the root of a file system cannot be switched; name a folder in it")
    for name in blobs:  # before anything is written: a target that is a folder would fail half way through
        if os.path.lexists(target / name) and not (target / name).is_file():
            raise OutputError(f"--out {out}: {out / name} exists and is not a regular file")
    try:
        _remove_leftovers(target)
        staging = Path(tempfile.mkdtemp(prefix=f"{_leftover_prefix(target)}render-{os.getpid()}-", suffix=".tmp",
                                        dir=target.parent))
    except OSError as err:
        raise OutputError(f"--out {out}: cannot write beside it in {target.parent} ({err.strerror or err})") from None
    locks = [_hold(staging)]  # a live render's folder: the next render's clean-up leaves it alone
    cwd = _cwd_within(target)
    switched = False
    old: Path | None = None
    try:
        for name in sorted(blobs):
            path = staging / name
            path.parent.mkdir(parents=True, exist_ok=True)
            content = blobs[name]
            with open(path, "wb") as fh:
                fh.write(content.encode("utf-8") if isinstance(content, str) else content)
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(path, 0o644)  # reports are public records
        if target.is_dir():
            _carry(target, staging, blobs)
        os.chmod(staging, _folder_mode(target))
        for folder in sorted({(staging / n).parent for n in blobs}, reverse=True):
            _fsync_folder(folder)
        _pause("before")
        if target.is_dir():
            locks.append(_hold_current(target))  # two renders at once: one switch at a time, each set whole
            if _exchange(staging, target):  # THE switch: the old set is at `staging` now, the new one at `target`
                old = staging
            else:  # no atomic exchange on this file system: two renames; a kill between them leaves no `target`
                # (readers say so), and the next render renames the old set back first
                old = target.parent / f"{_leftover_prefix(target)}old-{staging.name.rsplit('render-', 1)[1]}"
                os.rename(target, old)
                try:
                    os.rename(staging, target)
                except OSError:
                    os.rename(old, target)  # the old set back where it was
                    raise
        else:
            os.rename(staging, target)  # a new folder: one rename
        switched = True
        _pause("after")
        if cwd is not None:  # this process stood in the old folder (`--out .`): it stands in the new one
            try:
                os.chdir(target / cwd)
            except OSError:
                os.chdir(target)
        if old is not None:
            _settle(old, target, blobs)
            _fsync_folder(target.parent)
            shutil.rmtree(old)
    except OSError as err:
        if not switched:
            raise OutputError(f"--out {out}: writing the report failed ({err.strerror or err}); the previous report "
                              "files are untouched") from None
        raise OutputError(f"--out {out}: the report was written, but removing the previous set at {old} failed "
                          f"({err.strerror or err}); the next render removes it") from None
    finally:
        if not switched:
            shutil.rmtree(staging, ignore_errors=True)
        for fd in locks:
            if fd is not None and fd >= 0:
                os.close(fd)
    _fsync_folder(target.parent)


#: Test-only: ``before`` or ``after`` makes a render stop 60 s just before or just after the one rename that
#: switches the report folders, after a line on stderr, so a test can kill it there (tests/render/test_render.py).
PAUSE_ENV = "KINKCHECK_TEST_PAUSE_SWITCH"


def _pause(where: str) -> None:
    if os.environ.get(PAUSE_ENV) == where:

        print(f"kinkcheck report: paused {where} the switch (${PAUSE_ENV})", file=sys.stderr, flush=True)
        time.sleep(60)


def _leftover_prefix(target: Path) -> str:
    """How the folders a render makes beside ``target`` begin: ``.<name>.`` (then ``render-`` or ``old-``, the pid,
    a random part, ``.tmp``; ``.gitignore``'s ``.*.tmp`` covers them)."""
    return f".{target.name[:120]}."


def _remove_leftovers(target: Path) -> None:
    """Remove what killed renders left beside ``target``: their folders (a new set never switched in, or an old
    one never removed), each unless a live render holds it (two renders at once). Where a kill came between the
    two renames of a file system without an atomic exchange, ``target`` is missing: its old set is renamed back
    first."""
    prefix = _leftover_prefix(target)
    found = sorted((e for e in os.scandir(target.parent) if e.name.startswith(prefix) and e.name.endswith(".tmp")
                    and e.name[len(prefix):].startswith(("render-", "old-")) and e.is_dir(follow_symlinks=False)),
                   key=lambda e: -e.stat(follow_symlinks=False).st_mtime_ns)
    for e in found:
        fd = _hold(Path(e.path), wait=False)
        if fd is None:  # held: a render running now
            continue
        try:
            if e.name[len(prefix):].startswith("old-") and not os.path.lexists(target):
                os.rename(e.path, target)  # the newest old set: the folder as it was before the killed render
            else:
                shutil.rmtree(e.path)
        finally:
            if fd >= 0:
                os.close(fd)


def _hold(folder: Path, wait: bool = True) -> int | None:
    """An open descriptor of ``folder`` with an exclusive ``flock`` on it (``-1`` where the system has none);
    None when another process holds it and ``wait`` is False."""
    try:
        import fcntl  # optional: not on Windows
    except ImportError:  # no flock (Windows): renders into one folder at once are not told apart
        return -1
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except BlockingIOError:
        os.close(fd)
        return None
    except OSError:  # a file system without flock: nothing to hold
        pass
    return fd


def _hold_current(target: Path) -> int | None:
    """:func:`_hold` the folder that is ``target`` now: waits while another render switches it, then holds the one
    that render switched in."""
    while True:
        fd = _hold(target)
        if fd is None or fd < 0 or os.fstat(fd).st_ino == os.stat(target).st_ino:
            return fd
        os.close(fd)  # switched while this waited: hold the new one


def _exchange(a: Path, b: Path) -> bool:
    """Swap the folders ``a`` and ``b`` in one rename: Linux's ``renameat2(RENAME_EXCHANGE)`` (3.15+), macOS's
    ``renamex_np(RENAME_SWAP)``. False where the system or file system cannot (the caller renames twice)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if sys.platform.startswith("linux"):
            fn = libc.renameat2
            fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
            call = lambda: fn(-100, os.fsencode(a), -100, os.fsencode(b), 2)  # noqa: E731 - AT_FDCWD, EXCHANGE
        elif sys.platform == "darwin":
            fn = libc.renamex_np
            fn.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint]
            call = lambda: fn(os.fsencode(a), os.fsencode(b), 2)  # noqa: E731 - RENAME_SWAP
        else:
            return False
    except (OSError, AttributeError):  # no such call in this C library
        return False
    if call() == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def _ours(rel: str, path: Path, blobs: dict[str, bytes | str]) -> bool:
    """Whether the entry ``rel`` (relative to the report folder) of the old folder is the report's, so that the
    new set replaces or drops it, not the user's to keep: a file of the new set; one of the set's names at the top
    (a plot this render does not draw); an earlier render's JSON, CSV or HTML (:data:`RETIRED`, by how it begins);
    a generated page the new set has not (a case removed from the catalog); a temporary file of an earlier
    kinkcheck's per-file renames (``.observations.parquet.<random>.tmp``)."""
    if rel in blobs:
        return True
    top = "/" not in rel
    if top and rel in (*FILES, *SECTION_PAGES, KINK_HITS_PLOT):
        return True
    try:
        if not path.is_file() or path.is_symlink():
            return False
        if top and rel in RETIRED:
            with path.open("rb") as fh:
                return b"".join(fh.read(4096).split()).startswith(RETIRED[rel])
        if rel.endswith(".md") and (top or rel.startswith(f"{CASES}/")):
            with path.open("rb") as fh:
                return fh.read(len(GENERATED_MARK)) == GENERATED_MARK
    except OSError:
        return False
    stale = re.fullmatch(r"\.(.+)\.[^./]+\.tmp", path.name)
    return bool(stale and (stale.group(1).startswith("conventions.") or stale.group(1) in (*FILES, *SECTION_PAGES,
                KINK_HITS_PLOT) or (not top and stale.group(1).endswith(".md"))))


def _carry(old: Path, new: Path, blobs: dict[str, bytes | str], rel: str = "") -> None:
    """Link (else copy) into ``new`` every entry of ``old`` that is not the report's (:func:`_ours`): the user's
    own files and folders stay in the report folder across renders; links are recreated as links."""
    for entry in sorted(os.scandir(old / rel) if rel else os.scandir(old), key=lambda e: e.name):
        name = f"{rel}/{entry.name}" if rel else entry.name
        src, dst = Path(entry.path), new / name
        if entry.is_dir(follow_symlinks=False):
            if not dst.is_dir():
                dst.mkdir()
                shutil.copystat(src, dst)
            _carry(old, new, blobs, name)
        elif _ours(name, src, blobs):
            continue
        elif entry.is_symlink():
            os.symlink(os.readlink(src), dst)
        elif entry.is_file(follow_symlinks=False):
            try:
                os.link(src, dst)  # the same file: nothing copied, and an edit made meanwhile is in both
            except OSError:
                shutil.copy2(src, dst)
        else:
            raise OSError(f"{src} is not a file, a folder or a link, and cannot be kept in the new report folder")


def _settle(old: Path, new: Path, blobs: dict[str, bytes | str], rel: str = "") -> None:
    """After the switch: move into ``new`` each file of the user's that ``old`` holds and ``new`` lacks or holds
    another version of (one written or replaced between :func:`_carry` and the switch)."""
    for entry in sorted(os.scandir(old / rel) if rel else os.scandir(old), key=lambda e: e.name):
        name = f"{rel}/{entry.name}" if rel else entry.name
        src, dst = Path(entry.path), new / name
        if entry.is_dir(follow_symlinks=False):
            if not os.path.lexists(dst):
                os.rename(src, dst)
            elif dst.is_dir() and not dst.is_symlink():
                _settle(old, new, blobs, name)
        elif not _ours(name, src, blobs) and not (os.path.lexists(dst) and _same_file(src, dst)):
            os.replace(src, dst)


def _same_file(a: Path, b: Path) -> bool:
    try:
        sa, sb = os.lstat(a), os.lstat(b)
    except OSError:
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino) or (a.is_symlink() and b.is_symlink()
                                                                  and os.readlink(a) == os.readlink(b))


def _cwd_within(target: Path) -> Path | None:
    """Where this process stands inside ``target`` (relative), or None."""
    try:
        return Path(os.getcwd()).resolve().relative_to(target)
    except (OSError, ValueError):
        return None


def _folder_mode(target: Path) -> int:
    """The old folder's permissions for the new one, else the default a new folder gets (0o777 less the umask)."""
    try:
        return stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o777 & ~mask


def _fsync_folder(folder: Path) -> None:
    """Make a folder's entries durable; not every file system lets a folder be opened or synced."""
    try:
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass


def set_problems(out: str | Path) -> list[str]:
    """What makes the report files in ``out`` not one set (empty when they are): a missing file, a Parquet file
    whose SHA-256 is not the JSON's ``provenance.observations_sha256``, a Markdown page (index or case) or HTML
    that does not name the JSON's SHA-256, a plain ``conventions.json`` that is not the gzip's. Only the JSON's
    provenance is decoded."""
    import msgspec

    head = msgspec.defstruct("Head", [("provenance", Provenance)])  # the rest of the JSON is skipped
    out = Path(out)
    try:
        raw = {name: (out / name).read_bytes() for name in FILES if name not in OPTIONAL or (out / name).exists()}
        plain = (out / "conventions.json").read_bytes() if (out / "conventions.json").is_file() else None
        raw.update({name: (out / name).read_bytes() for name in SECTION_PAGES})
        raw.update({f"{CASES}/{p.name}": p.read_bytes() for p in sorted((out / CASES).glob("*.md"))})
    except OSError as err:
        return [f"{err.filename}: {err.strerror}"]
    problems = []
    try:
        inflated = gunzip(raw["conventions.json.gz"], out / "conventions.json.gz", ValueError)
    except ValueError as err:
        return [str(err)]
    if plain is not None and plain != inflated:
        problems.append(f"{out / 'conventions.json'} is not the JSON of {out / 'conventions.json.gz'} (an earlier "
                        "render's: readers take it first; remove it)")
    try:
        recorded = msgspec.json.decode(inflated, type=head).provenance.observations_sha256
    except (msgspec.DecodeError, RecursionError):
        return [f"{out / 'conventions.json.gz'}: not a kinkcheck report"]
    if "observations.parquet" in raw and recorded != hashlib.sha256(raw["observations.parquet"]).hexdigest():
        problems.append(f"{out / 'observations.parquet'} is not the data of {out / 'conventions.json.gz'}")
    digest = hashlib.sha256(inflated).hexdigest()
    for name, data in raw.items():
        if name in ("observations.parquet", "conventions.json.gz"):
            continue
        if digest.encode() not in re.findall(rb"\b[0-9a-f]{64}\b", data):
            problems.append(f"{out / name} does not belong to {out / 'conventions.json.gz'} (it names no sha256 "
                            f"{digest[:12]}…)")
    return problems


# --------------------------------------------------------------------------- a render that has nothing to do

#: Libraries whose release can change the bytes of a render (plots, Parquet, templates, JSON, numbers).
_RENDER_LIBRARIES = ("matplotlib", "pyarrow", "jinja2", "msgspec", "numpy", "sympy")


def inputs_digest(shards: str | Path, catalog: str | Path) -> str:
    """SHA-256 of everything a render of ``shards`` against ``catalog`` reads: every file under the shards'
    folder and the catalog's folder (programs, census, staged cases), the kinkcheck package's files, and the
    releases of Python, zlib and the libraries that draw, write or format (:data:`_RENDER_LIBRARIES`). The same
    digest means the same report set (the render is a function of these alone)."""
    h = hashlib.sha256()
    package = Path(__file__).resolve().parents[1]
    seen: set[Path] = set()  # the shards' folder usually sits in the catalog's: each file read once
    for root in (Path(shards), Path(catalog).parent, package):
        for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                           and not p.name.startswith(".")):
            if path.resolve() in seen:
                continue
            seen.add(path.resolve())
            h.update(str(path.relative_to(root)).encode() + b"\0")
            h.update(hashlib.sha256(path.read_bytes()).digest())
    versions = [sys.version, zlib.ZLIB_RUNTIME_VERSION]
    for name in _RENDER_LIBRARIES:
        try:
            versions.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{name} none")
    h.update("\n".join(versions).encode())
    return h.hexdigest()


def _stamp_path(out: Path) -> Path:
    return cache_dir() / "renders" / f"{hashlib.sha256(str(out.resolve()).encode()).hexdigest()[:24]}.json"


def _outputs(out: Path) -> dict[str, str]:
    names = [*FILES, *SECTION_PAGES, KINK_HITS_PLOT, *(f"{CASES}/{p.name}" for p in sorted((out / CASES).glob("*.md")))]
    return {n: hashlib.sha256((out / n).read_bytes()).hexdigest() for n in names if (out / n).is_file()}


def is_current(out: str | Path, digest: str) -> bool:
    """Whether ``out`` holds the render of inputs with ``digest`` (:func:`inputs_digest`), untouched since: the
    stamp :func:`record_render` left in the cache names this digest and every output file's SHA-256, the set is
    one (:func:`set_problems`) and no file an earlier render wrote is left (:data:`RETIRED`)."""
    out = Path(out)
    try:
        stamp = json.loads(_stamp_path(out).read_text())
        return bool(stamp.get("inputs") == digest and stamp.get("outputs") == _outputs(out)
                    and not any((out / name).exists() for name in RETIRED) and not set_problems(out))
    except (OSError, ValueError):
        return False


def record_render(out: str | Path, digest: str) -> None:
    """Leave the stamp :func:`is_current` reads (in the cache folder; nothing is written beside the report).
    A stamp that cannot be written only costs the next run a render."""
    out = Path(out)
    path = _stamp_path(out)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"out": str(out.resolve()), "inputs": digest, "outputs": _outputs(out)}))
    except OSError:
        pass
