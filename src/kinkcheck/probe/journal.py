"""The probe journal: one JSON line per case or compiled batch started and finished, beside the shard.

It outlives a worker that crashed or was killed, so the isolated probe restarts after the case that crashed
it, and a killed probe resumes where it stopped.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kinkcheck.frameworks import FrameworkUnavailable
from kinkcheck.probe.cells import DEFAULT_DTYPES
from kinkcheck.shards import write_text_atomic


def journal_path(shard_path: str | Path, modes: Sequence[str] | None = None, dtypes: Sequence[str] | None = None,
                 cases: Sequence[str] | None = None) -> Path:
    """Where a probe of one selection into ``shard_path`` journals its finished cases, beside the shard:
    ``.<file stem>.<selection>.journal.jsonl``.

    ``<selection>`` is a short hash of the modes, dtypes and cases asked for (None or empty: every mode,
    the four dtypes, every case), so each selection has its own journal: a narrowed probe never touches
    the journal of a killed full probe. Kept when the probe is interrupted (the same command resumes from
    it), deleted once the shard is written; ``.gitignore`` covers it (``.*.journal.jsonl``).
    """
    selection = json.dumps([sorted(set(modes or ())), sorted(set(dtypes or DEFAULT_DTYPES)), sorted(set(cases or ()))])
    p = Path(shard_path)
    return p.with_name(f".{p.stem}.{hashlib.sha256(selection.encode()).hexdigest()[:8]}.journal.jsonl")


def _append(journal: str | Path, record: dict[str, Any]) -> None:
    with open(journal, "a+b") as fh:
        end = fh.seek(0, os.SEEK_END)
        if end:
            fh.seek(end - 1)  # a line cut short by a killed worker must not swallow this record
            if fh.read(1) != b"\n":
                fh.write(b"\n")
        fh.write(json.dumps(record).encode() + b"\n")


def _read_journal(journal: str | Path | None) -> tuple[dict[str, Any] | None, dict[str, dict[str, Any]], list[str]]:
    """(environment, case id → results, case ids started) from a journal; a torn last line is ignored."""
    env, done, started = None, {}, []
    if journal is None or not Path(journal).exists():
        return env, done, started
    for line in Path(journal).read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue  # the line a crash cut short
        if "environment" in rec:
            env = rec["environment"]
        elif "start" in rec:
            started.append(rec["start"])
        elif "case" in rec:
            done[rec["case"]] = {k: v for k, v in rec.items() if k != "case"}
        elif "fatal" in rec:
            raise FrameworkUnavailable(rec["fatal"])
    return env, done, started


class _Progress:
    """The cases and compiled batches in progress in a probe journal, read as the journal grows: key → the
    monotonic time its ``start`` line was read. Lines written before the watch began are not read (a restarted
    worker writes a new ``start`` line for whatever it runs again); a journal the worker rewrote
    (:func:`_prepare_journal` keeps no ``start`` line) is read from its beginning."""

    def __init__(self, journal: Path) -> None:
        self.journal = journal
        self.file, self.offset = self._identity()
        self.rest = b""
        self.running: dict[str, float] = {}

    def _identity(self) -> tuple[int | None, int]:
        try:
            st = self.journal.stat()
        except OSError:
            return None, 0
        return st.st_ino, st.st_size

    def update(self, now: float) -> bool:
        """Read what was appended since the last call; True when the journal changed."""
        ino, size = self._identity()
        if ino != self.file or size < self.offset:  # replaced, deleted or cut: what it holds now is new
            self.file, self.offset, self.rest = ino, 0, b""
            if ino is None:
                return True
        try:
            with open(self.journal, "rb") as fh:
                fh.seek(self.offset)
                new = fh.read()
        except OSError:
            return False
        if not new:
            return False
        self.offset += len(new)
        *lines, self.rest = (self.rest + new).split(b"\n")
        for line in lines:
            try:
                rec = json.loads(line)
            except ValueError:  # a line a killed worker cut short
                continue
            if not isinstance(rec, dict):
                continue
            if isinstance(rec.get("start"), str):
                self.running[rec["start"]] = now
            elif isinstance(rec.get("case"), str):
                self.running.pop(rec["case"], None)
            elif isinstance(rec.get("retry"), str):  # its process died; the worker runs it again later
                self.running.pop(rec["retry"], None)
        return True


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return -1


def _prepare_journal(journal: str | Path, env: dict[str, Any]) -> None:
    """Keep of a journal what a probe with environment ``env`` can reuse, before it resumes from it.

    A journal of another environment, build, device, mode list, dtype list or kinkcheck version is deleted. Otherwise a case's
    record is kept when the case is still probed with the same measurement hash, and a compiled batch's
    when every case is (a batch compiles all of them in one call); ``start`` lines of unfinished cases and
    ``fatal`` lines of an earlier run are dropped.
    """
    p = Path(journal)
    if not p.exists():
        return
    records = []
    for line in p.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue  # the line a kill cut short
        if isinstance(rec, dict):
            records.append(rec)
    header = next((r["environment"] for r in records if isinstance(r.get("environment"), dict)), None)
    if header is None or any(header.get(k) != env.get(k) for k in ("id", "framework_build", "device", "modes",
                                                                      "dtypes", "kinkcheck_version")):
        p.unlink(missing_ok=True)
        return
    old, new = header.get("case_hashes") or {}, env["case_hashes"]
    keep: list[dict[str, Any]] = [{"environment": {**header, "case_hashes": new}}]
    for r in records:
        key = r.get("case")
        if not isinstance(key, str):
            continue
        batch = key.startswith("batch:")
        if (batch and old == new) or (not batch and key in new and old.get(key) == new[key]):
            keep.append(r)
    if keep != records:
        write_text_atomic(p, "".join(json.dumps(r) + "\n" for r in keep))
