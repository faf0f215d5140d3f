"""A framework's rules inferred in a child process while the render goes on (kinkcheck.rules.ahead): the same
files as inferred in the render's own process, and a child that fails changes nothing but the time."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from kinkcheck import rules
from kinkcheck.catalog import load_catalog
from kinkcheck.rules import ahead

ROOT = Path(__file__).resolve().parents[2]
CASES = ("relu@0", "clamp@1", "maximum@tie", "relu6@6")


@pytest.fixture(scope="module")
def table():
    t = pq.read_table(ROOT / "reports" / "observations.parquet", columns=list(rules.COLUMNS))
    return t.filter(pc.is_in(t["case"], value_set=pa.array(CASES, pa.string())))


@pytest.fixture(scope="module")
def parquet(table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


def _rows_of(table):
    return lambda fw: table.filter(pc.equal(table["framework"], fw))


def _sizes(table) -> dict[str, int]:
    counts = table.group_by("framework").aggregate([("case", "count")]).to_pylist()
    return {r["framework"]: r["case_count"] for r in counts}


def _no_render_cache(monkeypatch, tmp_path, name: str) -> None:
    monkeypatch.setenv("KINKCHECK_CACHE_DIR", str(tmp_path / name))
    monkeypatch.setattr(rules, "_cached_render", lambda key: None)  # the parts are what is compared


def test_the_largest_framework_is_inferred_in_a_child_and_gives_the_same_files(table, parquet, monkeypatch,
                                                                                 tmp_path) -> None:
    catalog = load_catalog()
    sources = {fw: f"rows of {fw}" for fw in sorted(set(table["framework"].to_pylist()))}
    _no_render_cache(monkeypatch, tmp_path, "here")
    here = rules.render(parquet, catalog, sources)  # every part inferred in this process
    _no_render_cache(monkeypatch, tmp_path, "ahead")
    sizes = _sizes(table)
    largest = max(sizes, key=lambda fw: (sizes[fw], fw))
    started = ahead.start(_rows_of(table), catalog, sources, sizes)
    assert list(started.children) == [largest], f"one child, for the largest framework: {list(started.children)}"
    rows_file = started.children[largest][2]
    assert rows_file.exists(), "the child reads its rows from a file"
    made: list[str] = []
    real = rules._part
    monkeypatch.setattr(rules, "_part", lambda t, fw, cat: made.append(fw) or real(t, fw, cat))
    try:
        got = rules.render(parquet, catalog, sources, started)
    finally:
        started.close()
    assert got == here, "the rules inferred in a child are the files inferred here, byte for byte"
    assert largest not in made and sorted(made) == sorted(set(sources) - {largest}), (
        f"the child's framework is read kept, the others inferred here: {made}")
    assert not rows_file.exists(), "the rows' file is removed once the child is done"
    again = ahead.start(_rows_of(table), catalog, sources, sizes)
    assert not again.children, "every part kept: no child"


def test_a_child_that_fails_leaves_the_part_to_the_render(table, parquet, monkeypatch, tmp_path, capfd) -> None:
    catalog = load_catalog()
    sources = {fw: f"rows of {fw}" for fw in sorted(set(table["framework"].to_pylist()))}
    _no_render_cache(monkeypatch, tmp_path, "here")
    here = rules.render(parquet, catalog, sources)

    import dataclasses

    # the catalog without its last case, as one with staged cases or some frameworks only keeps the file's path and
    # hash: not the child's catalog, which it refuses
    edited = dataclasses.replace(catalog, cases=catalog.cases[:-1])
    _no_render_cache(monkeypatch, tmp_path, "failed")
    started = ahead.start(_rows_of(table), edited, sources, _sizes(table))
    (fw, (key, child, rows)), = started.children.items()
    started.children[fw] = (rules._part_key(fw, sources[fw], rules._code_key(catalog)), child, rows)  # read as ours
    try:
        got = rules.render(parquet, catalog, sources, started)
    finally:
        started.close()
    assert child.returncode == 2, f"the child refuses a catalog that is not the render's: exit {child.returncode}"
    assert got == here, "the part a child failed to infer is inferred here: the same files, no error"
    err = capfd.readouterr().err
    assert f"inferring {fw}'s rules ahead failed (exit 2)" in err and "not the catalog the render read" in err, err
    assert not rows.exists(), "the child removes its rows' file once read"


def test_close_stops_a_child_still_running_and_removes_its_rows(tmp_path) -> None:
    rows = tmp_path / "rows.arrow"
    rows.write_bytes(b"")
    started = ahead.Ahead()
    child = subprocess.Popen(["sleep", "60"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    started.children["torch"] = ("k", child, rows)
    started.close()
    assert child.returncode is not None and child.returncode != 0, "a render that failed leaves no child running"
    assert not rows.exists() and not started.children, "nor its rows' file"
    assert started.wait("torch", "k") is False, "a framework with no child: nothing to wait for"


def test_a_wait_interrupted_leaves_the_child_to_close(tmp_path) -> None:
    rows = tmp_path / "rows.arrow"
    rows.write_bytes(b"")
    started = ahead.Ahead()
    child = subprocess.Popen(["sleep", "60"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    real = child.communicate
    calls = []

    def interrupted(*a, **k):
        calls.append(1)
        if len(calls) == 1:
            raise KeyboardInterrupt
        return real(*a, **k)

    child.communicate = interrupted
    started.children["torch"] = ("k", child, rows)
    with pytest.raises(KeyboardInterrupt):
        started.wait("torch", "k")
    assert "torch" in started.children, "a child whose wait was interrupted stays listed"
    started.close()
    assert child.returncode is not None and not rows.exists(), "and close stops it and removes its rows"


def test_a_child_that_cannot_be_set_up_leaves_the_part_to_the_render(table, monkeypatch, tmp_path) -> None:
    """No room for the rows' file (or no process to start): no child, no error; the render infers the part."""
    import tempfile

    monkeypatch.setenv("KINKCHECK_CACHE_DIR", str(tmp_path / "cache"))

    def full(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tempfile, "mkstemp", full)
    sources = {fw: f"rows of {fw}" for fw in sorted(set(table["framework"].to_pylist()))}
    started = ahead.start(_rows_of(table), load_catalog(), sources, _sizes(table))
    assert started.children == {}, "nothing started"
