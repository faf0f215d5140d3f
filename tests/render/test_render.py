"""Rendering the report: a set of files written whole into a checked folder, byte-identical across processes
and from kept judgements, a killed render leaving one whole set, nothing rendered when nothing changed."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, SMALL_CASES, SMALL_SHARDS

from kinkcheck import cli
from kinkcheck.render import CASES, FILES, KINK_HITS_PLOT, SECTION_PAGES, OutputError, _replace_set, set_problems
from kinkcheck.judge.build import build
from kinkcheck.report.dataset import read_observations
from kinkcheck.report.model import report_json
from kinkcheck.shards import unpack


OBS = ROOT / "references" / "observations"


_SMALL_RENDER = """
import dataclasses, json, sys
from pathlib import Path
from kinkcheck.catalog import load_catalog
from kinkcheck.render import write_reports
from kinkcheck.shards import unpack
cases, shards = json.loads(sys.argv[1]), [unpack(json.loads(Path(p).read_text())) for p in json.loads(sys.argv[2])]
catalog = load_catalog()
catalog = dataclasses.replace(catalog, cases=tuple(c for c in catalog if c.id in cases))
for s in shards:
    s["observations"] = [o for o in s["observations"] if o["case"] in cases]
write_reports(shards, catalog, Path(sys.argv[3]))
"""


def _render_small(out: Path, cache: Path, tz: str = "UTC") -> None:
    """Render the small report in a fresh process with its own plot cache and time zone."""
    env = {**os.environ, "KINKCHECK_CACHE_DIR": str(cache), "TZ": tz}
    args = [json.dumps(SMALL_CASES), json.dumps([str(OBS / n) for n in SMALL_SHARDS]), str(out)]
    proc = subprocess.run([sys.executable, "-c", _SMALL_RENDER, *args], env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Warning" not in proc.stderr, f"the render warned: {proc.stderr[-2000:]}"


def test_two_processes_render_byte_identical_sets(tmp_path):
    """Another process, another time zone, every plot drawn anew: the same bytes (what a fresh clone gets)."""
    _render_small(tmp_path / "a", tmp_path / "cache-a", "UTC")
    _render_small(tmp_path / "b", tmp_path / "cache-b", "Pacific/Kiritimati")
    from kinkcheck.rules import PAGE as RULES_PAGE
    from kinkcheck.rules.doc import FILE as RULES_FILE

    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == sorted([*FILES, *SECTION_PAGES, KINK_HITS_PLOT,
                                                                          RULES_FILE, RULES_PAGE, CASES]), \
        "the four files, the section and case pages, the kink-hit plot, the rules' two files and nothing else (no " \
        "cache, no temporary file)"
    pages = sorted(p.name for p in (tmp_path / "a" / CASES).iterdir())
    assert pages == ["relu-at-0.md", "where-sqrt-at-minus-1.md"], f"one page per case, nothing else: {pages}"
    for name in [*FILES, RULES_FILE, RULES_PAGE, *(f"{CASES}/{p}" for p in pages)]:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), f"{name} differs"
    assert set_problems(tmp_path / "a") == []
    digest = hashlib.sha256(gzip.decompress((tmp_path / "a" / "conventions.json.gz").read_bytes())).hexdigest()
    assert digest in (tmp_path / "a" / "conventions.md").read_text(), "the Markdown names its JSON's digest"
    assert digest in (tmp_path / "a" / CASES / "relu-at-0.md").read_text(), "so does each case page"
    from kinkcheck.render import _DIGEST_HOLE

    for page in [*(tmp_path / "a").glob("*.md"), *(tmp_path / "a" / CASES).glob("*.md")]:
        text = page.read_text()
        assert _DIGEST_HOLE not in text, f"{page.name}: the digest's place was filled in"
        if page.name not in ("rules.md",):  # the rules' page names the files it reads, not the JSON
            assert text.count(digest) == 1, f"{page.name} names the JSON's digest once, in its footer"


def test_a_page_whose_digest_place_is_not_named_once_is_the_renderers_error():
    """The pages are rendered while the Parquet file is written, with a place for the JSON's digest filled in after;
    a page that names that place twice or not at all is refused, not written with a placeholder or half filled."""
    from kinkcheck.render import _DIGEST_HOLE, _fill_digest

    digest = "ab" * 32
    assert _fill_digest("p.md", f"head\nsha256 `{_DIGEST_HOLE}`\n", digest) == f"head\nsha256 `{digest}`\n".encode()
    for text in ("no place", f"{_DIGEST_HOLE} and {_DIGEST_HOLE}"):
        with pytest.raises(AssertionError, match="p.md: the JSON digest's place"):
            _fill_digest("p.md", text, digest)
    assert len(_DIGEST_HOLE) == 64 and not set(_DIGEST_HOLE) <= set("0123456789abcdef"), \
        "as long as a SHA-256 in hex, and not one"


def test_one_changed_cell_changes_the_committed_files_in_proportion(tmp_path):
    """Re-measuring a release that changed one value: a few lines of the JSON, CSV, index and HTML, the case's
    own page, and only the digest line of every other case page (what a reviewer reads in a diff)."""
    import difflib

    _render_small(tmp_path / "a", tmp_path / "cache")
    shard = unpack(json.loads((OBS / SMALL_SHARDS[0]).read_text()))
    for o in shard["observations"]:
        if (o["case"], o["program"], o["mode"], o["dtype"]) == ("relu@0", "torch.relu(x)", "reverse", "float64"):
            o["value"] = {"x": 0.5}
    changed = tmp_path / "shards"
    changed.mkdir()
    (changed / SMALL_SHARDS[0]).write_text(json.dumps(shard))
    shutil.copy(OBS / SMALL_SHARDS[1], changed / SMALL_SHARDS[1])
    env = {**os.environ, "KINKCHECK_CACHE_DIR": str(tmp_path / "cache")}
    args = [json.dumps(SMALL_CASES), json.dumps([str(changed / n) for n in SMALL_SHARDS]), str(tmp_path / "b")]
    proc = subprocess.run([sys.executable, "-c", _SMALL_RENDER, *args], env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]

    def changed_lines(name: str) -> int:
        a, b = ((tmp_path / side / name).read_text().splitlines() for side in ("a", "b"))
        return sum(1 for line in difflib.unified_diff(a, b, lineterm="", n=0)
                   if line[:1] in "+-" and not line.startswith(("+++", "---")))

    pages = (f"{CASES}/relu-at-0.md", f"{CASES}/where-sqrt-at-minus-1.md")
    for side in ("a", "b"):  # the JSON is written gzipped only; its lines are what a diff of it shows
        (tmp_path / side / "conventions.json").write_bytes(gzip.decompress((tmp_path / side / "conventions.json.gz")
                                                                           .read_bytes()))
    texts = [f for f in FILES if f not in ("conventions.json.gz", "observations.parquet")]
    sizes = {name: changed_lines(name) for name in (*texts, "conventions.json", *pages)}
    rows = [read_observations(tmp_path / side / "observations.parquet") for side in ("a", "b")]
    assert len(rows[0]) == len(rows[1]) and sum(x != y for x, y in zip(*rows)) == 1, "one row of the table changed"
    assert 1 <= sizes["conventions.json"] <= 30, f"the Parquet digest and the derived sections: {sizes}"
    assert sizes[f"{CASES}/where-sqrt-at-minus-1.md"] == 2, f"another case's page: only its digest line: {sizes}"
    assert 2 < sizes[f"{CASES}/relu-at-0.md"] <= 40 and sizes["conventions.md"] <= 60, \
        f"the changed case's rows, the summary: {sizes}"
    for name in texts:
        text = (tmp_path / "b" / name).read_text()
        assert text.endswith("\n") and not text.endswith("\n\n"), f"{name} ends in one newline"


def test_a_mixed_set_is_detected(tmp_path):
    _render_small(tmp_path / "a", tmp_path / "cache")
    a = tmp_path / "a"
    older = json.loads(gzip.decompress((a / "conventions.json.gz").read_bytes()))
    older["provenance"]["gaps"] = ["an older render"]
    (a / "conventions.json.gz").write_bytes(gzip.compress(json.dumps(older).encode(), mtime=0))
    problems = set_problems(a)
    assert len(problems) == 3 + len(SECTION_PAGES) and all("does not belong to" in p for p in problems), \
        f"the index, the section pages and both case pages name another JSON: {problems}"
    older["provenance"]["observations_sha256"] = "0" * 64
    (a / "conventions.json.gz").write_bytes(gzip.compress(json.dumps(older).encode(), mtime=0))
    assert "observations.parquet is not the data of" in set_problems(a)[0], "the table is another render's"


def test_a_stale_plain_json_is_caught_and_a_render_removes_what_it_no_longer_writes(tmp_path):
    _render_small(tmp_path / "a", tmp_path / "cache")
    a = tmp_path / "a"
    assert set_problems(a) == [] and not (a / "conventions.json").exists() and not (a / "conventions.csv").exists(), \
        "a render writes the gzip and the table, no plain JSON, no CSV"
    json_bytes = gzip.decompress((a / "conventions.json.gz").read_bytes())
    (a / "conventions.json").write_bytes(json_bytes.replace(b"\n", b"\n\n", 1))
    assert set_problems(a)[0].startswith(f"{a / 'conventions.json'} is not the JSON of"), \
        "an earlier render's plain JSON (read before the gzip) is caught"
    (a / "conventions.csv").write_text("case,program,framework\n")
    (a / "notes.json").write_text("{}")
    _render_small(a, tmp_path / "cache")
    assert not (a / "conventions.json").exists() and not (a / "conventions.csv").exists(), \
        "the next render removes the stale plain JSON and CSV"
    assert (a / "notes.json").exists() and set_problems(a) == [], "a file of the user's own stays"
    (a / "conventions.json.gz").write_bytes(b"not gzip")
    problems = set_problems(a)
    assert len(problems) == 1 and "not a gzip file" in problems[0], problems


def _old_set(folder: Path) -> dict[str, bytes]:
    folder.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        (folder / name).write_text(f"old {name}\n")
    return {name: (folder / name).read_bytes() for name in FILES}


def _snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (hidden ones too) → its bytes; a link → what it points at."""
    return {str(p.relative_to(folder)): (os.readlink(p).encode() if p.is_symlink() else p.read_bytes())
            for p in sorted(folder.rglob("*")) if p.is_symlink() or p.is_file()}


def _beside(folder: Path) -> list[str]:
    """What renders of ``folder`` left beside it (``.<name>.render-…tmp``, ``.<name>.old-…tmp``)."""
    return sorted(p.name for p in folder.parent.iterdir() if p.name.startswith(f".{folder.name}."))


def test_a_failed_write_keeps_the_old_set_whole_and_cleans_up(tmp_path, monkeypatch):
    import kinkcheck.render as rep

    out = tmp_path / "out"
    old = _old_set(out)
    (out / ".conventions.md.k1ll3d.tmp").write_text("left by a killed run of an earlier kinkcheck")

    def refuse(a, b):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(rep, "_exchange", refuse)
    with pytest.raises(OutputError, match="previous report files are untouched"):
        _replace_set(out, {name: f"new {name}\n" for name in FILES})
    assert {n: (out / n).read_bytes() for n in FILES} == old, "the old set must survive a failed render"
    assert _beside(out) == [], f"the new set's folder is removed: {_beside(out)}"
    monkeypatch.undo()
    (out / ".observations.parquet.k1ll3d.tmp").write_bytes(b"PAR1 left by a killed run")
    (tmp_path / ".out.render-1-k1ll3d.tmp").mkdir()  # a killed render's new set, never switched in
    (tmp_path / ".out.render-1-k1ll3d.tmp" / "conventions.md").write_text("half a set\n")
    _replace_set(out, {name: f"new {name}\n" for name in FILES})
    assert all((out / n).read_text() == f"new {n}\n" for n in FILES), "all four replaced"
    assert sorted(p.name for p in out.iterdir()) == sorted(FILES), "stale temporary files are not carried over"
    assert _beside(out) == [], f"a killed render's folder beside is removed: {_beside(out)}"


def test_a_render_keeps_the_users_files_and_drops_what_the_report_no_longer_writes(tmp_path):
    """The new set is a new folder: everything of the old folder that is not the report's is linked into it (the
    same file, not a copy), links stay links; an earlier render's retired files and stale generated pages go."""
    out = tmp_path / "out"
    _old_set(out)
    (out / "notes.txt").write_text("the user's own\n")
    (out / "extra").mkdir()
    (out / "extra" / "data.csv").write_text("a,b\n")
    (out / "notes.link").symlink_to("notes.txt")
    (out / CASES).mkdir()
    (out / CASES / "mine.md").write_text("my own page\n")
    (out / CASES / "gone-case.md").write_bytes(b"<!-- Generated by `kinkcheck report` -->\nremoved case\n")
    (out / "conventions.csv").write_text("case,program,framework\n")
    inode = os.stat(out / "notes.txt").st_ino
    _replace_set(out, {**{name: f"new {name}\n" for name in FILES}, f"{CASES}/relu-at-0.md": "page\n"})
    files = _snapshot(out)
    assert sorted(files) == sorted([*FILES, "notes.txt", "notes.link", "extra/data.csv", f"{CASES}/mine.md",
                                    f"{CASES}/relu-at-0.md"]), sorted(files)
    assert os.stat(out / "notes.txt").st_ino == inode, "the user's file is the same file (a hard link), not a copy"
    assert os.readlink(out / "notes.link") == "notes.txt", "a link stays a link"
    assert _beside(out) == [], _beside(out)


def _changed_shards(tmp_path: Path) -> Path:
    """The small report's shards with torch 2.13.0's relu@0 (torch.relu, reverse, float64) measured as 0.5: a
    render of them differs from :func:`_render_small`'s in the table, the JSON and the pages."""
    shard = unpack(json.loads((OBS / SMALL_SHARDS[0]).read_text()))
    for o in shard["observations"]:
        if (o["case"], o["program"], o["mode"], o["dtype"]) == ("relu@0", "torch.relu(x)", "reverse", "float64"):
            o["value"] = {"x": 0.5}
    changed = tmp_path / "shards"
    changed.mkdir(exist_ok=True)
    (changed / SMALL_SHARDS[0]).write_text(json.dumps(shard))
    shutil.copy(OBS / SMALL_SHARDS[1], changed / SMALL_SHARDS[1])
    return changed


@pytest.mark.parametrize("moment", ["before", "after"])
def test_a_render_killed_at_the_switch_leaves_one_whole_set_and_the_next_removes_its_leftovers(tmp_path, moment):
    """Issue 44, item 6: `kill -9` during the final renames left a mixed set 7 times out of 7 and a 1.2 MB
    `.observations.parquet.*.tmp` nothing removed. Now the new set is switched in by one rename: a render killed
    just before it leaves the old set whole, one killed just after it the new set whole (the user's file in both),
    every reader takes either; the next render removes what the killed one left beside the folder."""
    import signal
    import select

    from kinkcheck.report.query import lookup
    from kinkcheck.render import PAUSE_ENV

    out, new = tmp_path / "out", tmp_path / "new"
    _render_small(out, tmp_path / "cache")
    (out / "notes.txt").write_text("the user's own\n")
    changed = _changed_shards(tmp_path)
    env = {**os.environ, "KINKCHECK_CACHE_DIR": str(tmp_path / "cache")}
    args = [json.dumps(SMALL_CASES), json.dumps([str(changed / n) for n in SMALL_SHARDS])]
    subprocess.run([sys.executable, "-c", _SMALL_RENDER, *args, str(new)], env=env, check=True, timeout=300,
                   capture_output=True)
    (new / "notes.txt").write_text("the user's own\n")
    sets = {"old": _snapshot(out), "new": _snapshot(new)}
    assert sets["old"] != sets["new"], "the two renders differ"

    proc = subprocess.Popen([sys.executable, "-c", _SMALL_RENDER, *args, str(out)], env={**env, PAUSE_ENV: moment},
                            stderr=subprocess.PIPE, text=True)
    said = ""
    try:
        while "paused" not in said:
            ready, _, _ = select.select([proc.stderr], [], [], 240)
            line = proc.stderr.readline() if ready else ""
            assert line, f"the render ended or hung before the switch: {said[-2000:]}"
            said += line
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(timeout=60)
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL, proc.returncode
    whole = "old" if moment == "before" else "new"
    assert _snapshot(out) == sets[whole], f"killed {moment} the switch: the folder is the {whole} set, whole"
    assert set_problems(out) == [], f"one render's files: {set_problems(out)}"
    (cell,) = lookup("torch.relu(x)", case="relu@0", release="2.13.0", path=out)
    assert cell.value == ({"x": 0.0} if whole == "old" else {"x": 0.5}), f"a reader reads the {whole} set: {cell}"
    assert _beside(out), f"the killed render left its folder beside {out} (killed {moment} the switch)"

    _render_small_from(changed, out, tmp_path / "cache")
    assert _snapshot(out) == sets["new"], "the next render switches the new set in, with the user's file"
    assert _beside(out) == [], f"and removes what the killed one left: {_beside(out)}"
    assert not list(out.rglob("*.tmp")), f"no temporary file in {out}: {list(out.rglob('*.tmp'))}"


def _render_small_from(shards: Path, out: Path, cache: Path) -> None:
    env = {**os.environ, "KINKCHECK_CACHE_DIR": str(cache)}
    args = [json.dumps(SMALL_CASES), json.dumps([str(shards / n) for n in SMALL_SHARDS]), str(out)]
    proc = subprocess.run([sys.executable, "-c", _SMALL_RENDER, *args], env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]


def _judged_entries(cache: Path) -> dict[str, int]:
    """The judged shards kept in ``cache`` (:func:`kinkcheck.judge.build.judged_shard`): name → inode (an entry is
    written by a rename, so a new inode; reading it touches its time, for pruning, not its inode)."""
    folder = cache / "judged"
    return {p.name: p.stat().st_ino for p in folder.iterdir() if not p.name.startswith(".")} \
        if folder.is_dir() else {}


def test_a_render_from_judged_shards_in_the_cache_is_byte_identical_to_one_from_scratch(tmp_path):
    """Issue 46, item 5: the judged observations are kept per shard. Two renders at once into one empty cache,
    a render from that cache, and a render after one shard changed (its unchanged neighbour read from the cache)
    write the same bytes, file for file, as renders from scratch of the same shards."""
    cache = tmp_path / "cache"
    args = [json.dumps(SMALL_CASES), json.dumps([str(OBS / n) for n in SMALL_SHARDS])]
    env = {**os.environ, "KINKCHECK_CACHE_DIR": str(cache)}
    both = [subprocess.Popen([sys.executable, "-c", _SMALL_RENDER, *args, str(tmp_path / side)], env=env,
                             stderr=subprocess.PIPE, text=True) for side in ("a1", "a2")]
    for proc in both:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-2000:]
    entries = _judged_entries(cache)
    assert len(entries) == len(SMALL_SHARDS), f"one entry per shard, whole, after two renders at once: {entries}"
    assert not list((cache / "judged").glob(".*.tmp")), "no half-written entry left"
    _render_small(tmp_path / "warm", cache)
    assert _judged_entries(cache) == entries, "the second render read every shard's judgement, wrote none"
    first = _snapshot(tmp_path / "a1")
    assert _snapshot(tmp_path / "a2") == first, "two renders at once into one empty cache: the same set"
    assert _snapshot(tmp_path / "warm") == first, "rendered from the cache: the same bytes as from scratch"

    changed = _changed_shards(tmp_path)
    _render_small_from(changed, tmp_path / "b", cache)
    after = _judged_entries(cache)
    assert len(after) == len(entries) + 1 and all(after[k] == v for k, v in entries.items()), \
        f"one shard changed: that shard alone judged again ({len(entries)} entries before, {len(after)} after)"
    _render_small_from(changed, tmp_path / "scratch", tmp_path / "empty-cache")
    new = _snapshot(tmp_path / "b")
    assert new != first, "the changed value shows"
    scratch = _snapshot(tmp_path / "scratch")
    assert sorted(new) == sorted(scratch), "the same files"
    for name in scratch:
        assert new[name] == scratch[name], f"{name}: a render after one changed shard differs from one from scratch"


def test_a_shard_is_judged_once_per_content_and_judging_code(tmp_path, monkeypatch, catalog):
    """A second build reads each shard's judgement from the cache (the judge is not called); a damaged entry, a
    changed observation or another judging code judges again, and the report is the same as judged afresh."""
    import dataclasses

    import kinkcheck.judge.build as b

    monkeypatch.setenv("KINKCHECK_CACHE_DIR", str(tmp_path))
    small = dataclasses.replace(catalog, cases=tuple(c for c in catalog if c.id in SMALL_CASES))
    shards = []
    for name in SMALL_SHARDS:
        s = unpack(json.loads((OBS / name).read_text()))
        s["observations"] = [o for o in s["observations"] if o["case"] in SMALL_CASES]
        shards.append(s)
    calls: list[str] = []
    real = b._judge
    monkeypatch.setattr(b, "_judge", lambda s, ctx: calls.append(s["environment"]["id"]) or real(s, ctx))
    first = report_json(build(shards, small))
    assert sorted(calls) == ["jax-0.10.2-cpu", "torch-2.13.0-cpu"], f"an empty cache judges every shard: {calls}"
    calls.clear()
    assert report_json(build(shards, small)) == first and calls == [], f"judged again from the cache: {calls}"

    for entry in sorted((tmp_path / "judged").glob("[!.]*")):  # an entry, not the pruning stamp
        entry.write_bytes(b"not a pickle")
        break
    assert report_json(build(shards, small)) == first and len(calls) == 1, \
        f"a damaged entry: that shard judged again, the same report ({calls})"
    calls.clear()

    torch = next(s for s in shards if s["environment"]["framework"] == "torch")
    cell = ("relu@0", "torch.relu(x)", "reverse", "float64")
    for o in torch["observations"]:
        if (o["case"], o["program"], o["mode"], o["dtype"]) == cell:
            o["value"] = {"x": 0.5}
    report = build(shards, small)
    assert calls == ["torch-2.13.0-cpu"], f"one changed shard: it alone judged again ({calls})"
    (ob,) = [o for o in report.observations if (o.case, o.program, o.mode, o.dtype) == cell
             and o.environment == "torch-2.13.0-cpu"]
    assert ob.value == {"x": 0.5} and ob.labels[0] == "mean", f"the changed value, judged: {ob}"
    calls.clear()
    monkeypatch.setattr(b, "_JUDGE_DIGEST", ["another judge"])
    build(shards, small)
    assert sorted(calls) == ["jax-0.10.2-cpu", "torch-2.13.0-cpu"], f"another judging code judges all: {calls}"


def test_without_an_atomic_exchange_two_renames_stand_in_and_a_kill_between_them_is_undone(tmp_path, monkeypatch):
    """A file system without RENAME_EXCHANGE: the old folder is renamed aside, the new one into its place. A kill
    between the two leaves no folder (readers say there is no report); the next render renames the old set back
    first (the user's files with it), then switches its own in."""
    import kinkcheck.render as rep
    from kinkcheck.report.query import LookupFailed, lookup

    monkeypatch.setattr(rep, "_exchange", lambda a, b: False)
    out = tmp_path / "out"
    _old_set(out)
    (out / "notes.txt").write_text("the user's own\n")
    _replace_set(out, {name: f"new {name}\n" for name in FILES})
    assert _snapshot(out) == {**{n: f"new {n}\n".encode() for n in FILES}, "notes.txt": b"the user's own\n"}
    assert _beside(out) == [], _beside(out)
    os.rename(out, tmp_path / ".out.old-7-k1ll3d.tmp")  # killed between the two renames
    (tmp_path / ".out.render-7-k1ll3d.tmp").mkdir()
    with pytest.raises(LookupFailed, match="no observations at") as err:
        lookup("torch.relu(x)", path=out)
    assert "\n" not in str(err.value), str(err.value)
    _replace_set(out, {name: f"newer {name}\n" for name in FILES})
    assert _snapshot(out) == {**{n: f"newer {n}\n".encode() for n in FILES}, "notes.txt": b"the user's own\n"}, \
        "the old set came back (the user's file with it) before the new one replaced it"
    assert _beside(out) == [], _beside(out)


def _bad_outputs(tmp: Path) -> dict[str, Path]:
    (tmp / "file").write_text("a regular file\n")
    _old_set(tmp / "index-is-a-folder")
    (tmp / "index-is-a-folder" / "conventions.md").unlink()
    (tmp / "index-is-a-folder" / "conventions.md").mkdir()
    return {"/dev/null": Path("/dev/null"), "under a file": tmp / "file" / "reports",
            "/proc": Path("/proc/kinkcheck-reports"), "index is a folder": tmp / "index-is-a-folder", "empty": ""}


@pytest.mark.parametrize("kind", ["/dev/null", "under a file", "/proc", "index is a folder", "empty"])
def test_report_refuses_an_unusable_output_folder(tmp_path, capsys, kind):
    out = _bad_outputs(tmp_path)[kind]
    if kind == "/proc" and not Path("/proc").is_dir():
        pytest.skip("no /proc on this system")
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    old = {n: (Path(out) / n).read_bytes() for n in FILES if (Path(out) / n).is_file()}  # "" is the cwd
    code = cli.main(["report", "--shards", str(OBS), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2, f"{kind}: exit {code}, {err}"
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err and ("--out" in err if kind == "empty"
                                                                             else str(out) in err), err
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before, f"{kind}: something was written"
    assert {n: (Path(out) / n).read_bytes() for n in FILES if (Path(out) / n).is_file()} == old, \
        f"{kind}: old files changed"
    assert not Path("/proc/kinkcheck-reports").exists()


def test_temporary_files_are_ignored_by_git():
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    for path in ("reports/.conventions.json.abc123.tmp", "references/observations/.torch-2.13.0-cpu.json.x.tmp",
                 ".reports.render-123-abc.tmp/conventions.md", ".reports.old-123-abc.tmp/conventions.md"):
        proc = subprocess.run(["git", "check-ignore", "-q", path], cwd=ROOT, check=False)
        assert proc.returncode == 0, f"{path} is not ignored by .gitignore"


def test_generated_files_are_marked_generated_for_code_hosts():
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    paths = ["reports/conventions.json.gz", "reports/conventions.md", f"reports/{CASES}/relu-at-0.md",
             "src/kinkcheck/schemas/conventions.v2.json", "references/observations/torch-2.13.0-cpu.json"]
    proc = subprocess.run(["git", "check-attr", "linguist-generated", *paths], cwd=ROOT, capture_output=True,
                          text=True, check=True)
    marked = [line.split(":")[0] for line in proc.stdout.splitlines() if line.endswith(": true")]
    assert marked == paths, f"collapsed in code-host diffs (.gitattributes): {proc.stdout}"




def test_a_render_of_unchanged_inputs_does_nothing_and_any_change_renders_again(tmp_path, monkeypatch, capsys):
    """`nox -s report` with every shard fresh: the second `kinkcheck report` finds OUT current (same shards, catalog,
    kinkcheck and libraries; files untouched) and writes nothing; a new shard, an edited output file or --force
    render again."""
    monkeypatch.setenv("KINKCHECK_CACHE_DIR", str(tmp_path / "cache"))
    shards, out = tmp_path / "shards", tmp_path / "out"
    shards.mkdir()
    shutil.copy(OBS / "jax-0.10.2-cpu.json", shards)
    args = ["report", "--shards", str(shards), "--out", str(out), "--strict"]

    def render() -> str:
        assert cli.main(args) == 0
        return capsys.readouterr().err

    assert "wrote" in render()
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()}
    err = render()
    assert "current" in err and "wrote" not in err, err
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()} == before, "nothing rewritten"
    page = out / CASES / "relu-at-0.md"
    kept = page.read_text()
    page.write_text(kept + "an edit\n")
    assert "wrote" in render() and page.read_text() == kept, "an edited output is rendered again"
    shutil.copy(OBS / "torch-2.13.0-cpu.json", shards)
    assert "wrote" in render() and "torch-2.13.0-cpu" in (out / "conventions.md").read_text(), "a new shard"
    assert "current" in render()
    assert cli.main([*args, "--force"]) == 0 and "wrote" in capsys.readouterr().err, "--force renders anyway"
