"""The benchmarks' choices (kinkcheck.dev.bench): which cases the add-case benchmark adds."""

from __future__ import annotations

from types import SimpleNamespace

from kinkcheck.dev.bench import _added_cases


def _case(case_id: str, n: int) -> SimpleNamespace:
    return SimpleNamespace(id=case_id, programs_for=lambda fw, n=n: [f"p{i}" for i in range(n)] if fw == "jax" else [])


def test_the_typical_case_is_the_median_and_the_heaviest_the_largest_last_in_file_order() -> None:
    catalog = [_case("a", 1), _case("b", 7), _case("c", 2), _case("d", 2), _case("e", 7), _case("f", 0)]
    assert _added_cases(catalog, "jax") == [("typical", "d"), ("heaviest", "e")], \
        "sizes a 1, c 2, d 2, b 7, e 7 (file order within a size; f has none): the middle is d; heaviest: the last 7"
    assert _added_cases([_case("only", 3)], "jax") == [("typical", "only")], "one case: one row, not two"
    assert _added_cases(catalog[:4], "jax")[0] == ("typical", "c"), "an even count takes the lower middle: a c d b"


def test_grown_shards_are_fresh_other_releases_the_render_reads_without_a_gap(tmp_path, catalog) -> None:
    from pathlib import Path

    from kinkcheck.dev.bench import grow_shards
    from kinkcheck.probe.plan import is_fresh
    from kinkcheck.shards import load_shards

    src = tmp_path / "src"
    src.mkdir()
    name = "autograd-1.5-cpu.json"
    (src / name).write_bytes((Path(__file__).parents[2] / "references" / "observations" / name).read_bytes())
    rows = grow_shards(src, tmp_path / "grown", 3)
    shards, errors = load_shards(tmp_path / "grown", catalog)
    assert errors == [], f"a copy the render would skip makes the x10 figure a lie: {errors[:2]}"
    envs = [s["environment"] for s in shards]
    assert sorted(e["framework_version"] for e in envs) == ["1.5", "1.5+copy1", "1.5+copy2"], \
        "the release and two copies, each a release of its own (PEP 440 local versions)"
    assert {e["id"] for e in envs} == {"autograd-1.5-cpu", "autograd-1.5+copy1-cpu", "autograd-1.5+copy2-cpu"}, \
        "each copy's environment id matches its framework, release and device"
    assert rows == 3 * len(shards[0]["observations"]) and rows > 0, "every observation, three times"
    assert all(is_fresh(p, catalog) for p in (tmp_path / "grown").glob("*.json")), \
        "the copies keep the case hashes: fresh, so the render judges every one"


def test_a_report_run_that_fails_inside_is_one_line_and_exit_2(tmp_path, capsys) -> None:
    """The timed `kinkcheck report` runs in a child that exits cleanly whatever the CLI says: the CLI's own status
    is read, so a missing shard folder stops the benchmark with its one-line error, not a KeyError later."""
    import os

    import pytest

    from kinkcheck.dev.bench import _report_run

    with pytest.raises(SystemExit) as exit_:
        _report_run(tmp_path / "none", tmp_path / "out", os.environ.copy())
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "no such shard folder" in err and err.count("\n") == 1, err


def test_bench_ask_refuses_a_bad_specifier_in_one_line(capsys):
    """``python -m kinkcheck.dev.bench --ask SPEC``: a specifier that is none is one line and exit 2, nothing made."""
    from kinkcheck.dev.bench import main

    assert main(["--ask", "~~"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bench --ask: --releases '~~' is not a version specifier" in err, err


def test_a_new_shard_is_the_largest_as_another_release_the_render_reads_without_a_gap(tmp_path, catalog) -> None:
    """``bench --report``'s render after one new shard: the copy is the largest shard as release ``+new``, read
    without a gap, fresh (so the render judges every observation of it) and not the same content as its source
    (so its judgement is not in the cache)."""
    import shutil
    from pathlib import Path

    from kinkcheck.dev.bench import add_new_shard
    from kinkcheck.probe.plan import is_fresh
    from kinkcheck.shards import load_shards

    obs = Path(__file__).parents[2] / "references" / "observations"
    for name in ("autograd-1.5-cpu.json", "jax-0.10.2-cpu.json"):
        shutil.copy(obs / name, tmp_path)
    new = add_new_shard(tmp_path)
    assert new.name == "jax-0.10.2+new-cpu.json", f"a copy of the larger shard (jax's) as a new release: {new.name}"
    shards, errors = load_shards(tmp_path, catalog)
    assert errors == [] and len(shards) == 3, f"read without a gap: {errors[:2]}"
    source, copy = (next(s for s in shards if s["environment"]["id"] == e)
                    for e in ("jax-0.10.2-cpu", "jax-0.10.2+new-cpu"))
    assert copy["observations"] == source["observations"] and copy["environment"] != source["environment"], \
        "every observation of the source, under another environment"
    assert is_fresh(new, catalog), "fresh: the render judges it, skips none of it"


def test_each_new_release_of_the_benchmark_is_one_no_earlier_run_rendered() -> None:
    """The render after one new shard is timed after a release the cache has never seen: a fixed tag (``+new``) was
    the same shard run after run, its judgement, rules and pages kept from the first run."""
    from packaging.version import Version

    from kinkcheck.dev.bench import new_release_tag

    tags = [new_release_tag(k) for k in range(2) for _ in range(20)]
    assert len(set(tags)) == len(tags), f"no tag twice: {tags[:4]}"
    for tag in tags[:3]:
        assert Version(f"2.14.1+{tag}").local == tag, f"{tag}: a PEP 440 local version"


def test_the_new_shard_figure_says_missed_past_either_target() -> None:
    from kinkcheck.dev.bench import new_shard_lines

    full = {"wall": 30.0, "judged_shard": 2.0}
    ok = new_shard_lines(1, full, {"wall": 4.0, "judge": 3.5, "observations": 9000, "judged_shard": 3.4,
                                   "write_reports": 3.6, "load_shards": 0.2, "peak_mb": 500})
    assert ok[0].endswith("ok") and "ratio 1.1" in ok[0] and "9,000 observations" in ok[0], ok
    slow = new_shard_lines(10, full, {"wall": 4.0, "judge": 2.0, "observations": 9000})
    assert slow[0].endswith("MISSED") and "x10" in slow[0], f"4 s is 2 x judging alone: {slow}"
    assert new_shard_lines(1, full, {"wall": 6.0, "judge": 6.0, "observations": 1})[0].endswith("MISSED"), \
        "over 5 s misses though the ratio is 1"


def test_the_lookup_table_marks_each_figure_against_both_targets() -> None:
    """``bench --lookup``'s table: the floor without a target, then each measurement ok only within 0.5 s and
    200 MB, MISSED past either."""
    from pathlib import Path

    from kinkcheck.dev.bench import lookup_lines

    rows = [("lookup", 0.31, 104.0), ("cite, data x10", 0.62, 150.0), ("grad's report rows, data x10", 0.2, 201.0)]
    lines = lookup_lines(rows, 3, Path("r/observations.parquet"), (0.25, 70.0))
    assert lines[0].split() == ["measurement", "s", "peak", "MB", "target"], lines[0]
    assert lines[1].startswith("floor: python, pyarrow, kinkcheck imports") and lines[1].endswith("(no target)") \
        and "0.25" in lines[1] and " 70 " in lines[1], lines[1]
    assert [line.rsplit(" ", 1)[-1] for line in lines[2:5]] == ["ok", "MISSED", "MISSED"], \
        f"0.31 s and 104 MB is within; 0.62 s is past 0.5 s; 201 MB is past 200 MB: {lines[2:5]}"
    assert "<= 0.5 s, <= 200 MB" in lines[3] and lines[-1].startswith("(best of 3 fresh processes"), lines


def test_grown_report_data_is_ten_times_the_releases_laid_out_as_a_render_lays_it(shards_report_files, tmp_path):
    """``grow_report``: every row again as ``+copy<k>`` releases, written through the render's writer (the
    row-group index), the JSON naming the grown table's digest and environments, so lookup and grad read it."""
    import json

    import pyarrow.parquet as pq

    from kinkcheck import lookup

    from kinkcheck.answers import explain
    from kinkcheck.dev.bench import grow_report
    from kinkcheck.report.query import ROW_GROUPS

    src = shards_report_files.parent
    rows = grow_report(src, tmp_path, 3)
    table = tmp_path / "observations.parquet"
    n = pq.ParquetFile(src / "observations.parquet").metadata.num_rows
    assert rows == 3 * n == pq.ParquetFile(table).metadata.num_rows, "every row three times"
    meta = pq.ParquetFile(table).metadata.metadata
    assert ROW_GROUPS in meta and json.loads(meta[b"kinkcheck.index"])["releases"]["torch"]["cpu"][-1] == \
        "2.15.0+copy2", "laid out with its index; the copies are releases of the index"
    same = [(r.value, r.label) for r in lookup("torch.clamp(x, min=0)", case="relu@0", release="2.14.1", path=src)]
    for release in ("2.14.1", "2.14.1+copy2"):
        got = [(r.value, r.label) for r in lookup("torch.clamp(x, min=0)", case="relu@0", release=release,
                                                   path=tmp_path)]
        assert got == same == [({"x": 0.0}, "left")], f"{release}: the copied cell, read from a set of one render"
    view = explain.report_rows(explain.report_index(tmp_path / "conventions.json.gz"), "torch.clamp(x, min=0)",
                               "torch", ("relu@0",))
    assert view.rows[0]["ranges"][-1]["to"] == "2.15.0+copy2", view.rows[0]["ranges"]


def test_the_table_write_floor_times_the_rendered_table_and_it_grown(tmp_path, monkeypatch) -> None:
    """``bench --report``'s floor: the seconds to write a render's observations table, and the table grown; both
    written through the render's own writer (the grown one twice the rows, as ``--scale 2`` would have it)."""
    import pyarrow.parquet as pq

    from conftest import ROOT
    from kinkcheck.dev import bench
    from kinkcheck.report import dataset

    table = pq.read_table(ROOT / "reports" / "observations.parquet").slice(0, 3000)
    path = tmp_path / "observations.parquet"
    path.write_bytes(dataset.write_table(table))
    rows: list[int] = []
    real = dataset.write_table
    monkeypatch.setattr(dataset, "write_table", lambda t: rows.append(t.num_rows) or real(t))
    small, big = bench.table_write_s(path, 2)
    assert rows == [3000, 6000], f"the table, then it grown twice, each written once: {rows}"
    assert 0 < small and 0 < big, (small, big)
