"""The cache folder: entries read and written atomically, and the kinds a render keeps per shard pruned."""

from __future__ import annotations

import os
import time

from kinkcheck.cache import UNUSED_DAYS, prune_cached, read_cached, write_cached


def test_entries_no_render_read_for_a_week_are_pruned_and_read_ones_kept(tmp_path, monkeypatch):
    """Issue 46: ``judged/`` grew by a whole set per benchmark run and was never emptied. An entry neither written
    nor read (with ``touch``) for :data:`UNUSED_DAYS` days is removed, one read since is kept, a killed writer's
    temporary file goes after a day; a second prune within the hour does nothing."""
    monkeypatch.setenv("KINKCHECK_CACHE_DIR", str(tmp_path))
    for key in ("old-unread", "old-read", "new"):
        write_cached("judged", key, key.encode())
    folder = tmp_path / "judged"
    (folder / ".k.tmp").write_bytes(b"half")
    past = time.time() - (UNUSED_DAYS + 1) * 86400
    for name in ("old-unread", "old-read", ".k.tmp"):
        os.utime(folder / name, (past, past))
    assert read_cached("judged", "old-read", touch=True) == b"old-read", "read back whole"
    assert read_cached("judged", "old-unread") == b"old-unread" and (folder / "old-unread").stat().st_mtime < \
        time.time() - UNUSED_DAYS * 86400, "a read without touch leaves the time as it was"
    assert prune_cached("judged") == 2, "the unread entry and the stale temporary file"
    assert sorted(p.name for p in folder.iterdir() if p.name != ".pruned") == ["new", "old-read"], \
        list(folder.iterdir())
    os.utime(folder / "new", (past, past))
    assert prune_cached("judged") == 0 and (folder / "new").exists(), "pruned at most once an hour"
    os.utime(folder / ".pruned", (past, past))
    assert prune_cached("judged") == 1 and not (folder / "new").exists(), "an hour later: pruned again"
    assert prune_cached("never-written") == 0, "a kind with no folder: nothing to prune, no error"


def test_an_entry_that_is_not_a_regular_file_is_no_entry(tmp_path, monkeypatch):
    """A folder or a named pipe where an entry should be is read as no entry (a pipe's read would wait forever)."""
    monkeypatch.setenv("KINKCHECK_CACHE_DIR", str(tmp_path))
    (tmp_path / "derived").mkdir()
    os.mkfifo(tmp_path / "derived" / "pipe")
    (tmp_path / "derived" / "folder").mkdir()
    assert read_cached("derived", "pipe", touch=True) is None and read_cached("derived", "folder") is None
    write_cached("derived", "file", b"x")
    assert read_cached("derived", "file") == b"x", "a regular file is read"


def test_a_signed_entry_reads_back_only_under_its_own_key_and_unedited(tmp_path, monkeypatch) -> None:
    """write_signed / read_signed: what the rules' and the pages' kept parts are stored with. An entry copied over
    another key, edited after it was written, or written without a signature reads as absent (computed again)."""
    from kinkcheck.cache import read_cached, read_signed, write_cached, write_signed

    monkeypatch.setenv("KINKCHECK_CACHE_DIR", str(tmp_path))
    write_signed("parts", "a", b'{"x": "1\\n2"}')
    assert read_signed("parts", "a") == {"x": "1\n2"}, "the JSON reads back, decoded"
    assert read_signed("parts", "b") is None, "nothing under another key"
    write_cached("parts", "b", read_cached("parts", "a"))
    assert read_signed("parts", "b") is None, "a's entry copied under b is not b's"
    head, _, body = read_cached("parts", "a").partition(b"\n")
    write_cached("parts", "a", head + b"\n" + body.replace(b"1", b"2"))
    assert read_signed("parts", "a") is None, "an entry edited after it was written is not read"
    write_cached("parts", "a", b'{"x": 1}')
    assert read_signed("parts", "a") is None, "an entry without its signature line is not read"
    write_signed("parts", "a", b"not json")
    assert read_signed("parts", "a") is None, "a signed entry that is not JSON is not read"


def test_a_signed_entry_copied_under_another_key_is_signed_for_it(tmp_path, monkeypatch) -> None:
    """copy_signed: an entry kept under one key kept under another (the rules' parts when the judge's keys change and
    the rows do not); nothing is written from an absent or edited entry."""
    from kinkcheck.cache import copy_signed, read_cached, read_signed, write_cached, write_signed

    monkeypatch.setenv("KINKCHECK_CACHE_DIR", str(tmp_path))
    write_signed("parts", "old", b'{"x": [1, 2]}')
    assert copy_signed("parts", "old", "new") is True, "a signed entry is copied"
    assert read_signed("parts", "new") == {"x": [1, 2]}, "and reads back under its new key"
    assert read_signed("parts", "old") == {"x": [1, 2]}, "the old entry stays"
    assert copy_signed("parts", "none", "other") is False and read_cached("parts", "other") is None, (
        "nothing under the old key: nothing written")
    head, _, body = read_cached("parts", "old").partition(b"\n")
    write_cached("parts", "old", head + b"\n" + body.replace(b"1", b"3"))
    assert copy_signed("parts", "old", "edited") is False and read_cached("parts", "edited") is None, (
        "an entry edited after it was written is not copied")
