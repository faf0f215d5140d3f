"""The benchmarks' choices (kinkcheck.bench): which cases the add-case benchmark adds."""

from __future__ import annotations

from types import SimpleNamespace

from kinkcheck.bench import _added_cases


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

    from kinkcheck.bench import grow_shards
    from kinkcheck.probe.plan import is_fresh
    from kinkcheck.shards import load_shards

    src = tmp_path / "src"
    src.mkdir()
    name = "autograd-1.5-cpu.json"
    (src / name).write_bytes((Path(__file__).parent.parent / "references" / "observations" / name).read_bytes())
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

    from kinkcheck.bench import _report_run

    with pytest.raises(SystemExit) as exit_:
        _report_run(tmp_path / "none", tmp_path / "out", os.environ.copy())
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "no such shard folder" in err and err.count("\n") == 1, err


def test_bench_ask_refuses_a_bad_specifier_in_one_line(capsys):
    """``python -m kinkcheck.bench --ask SPEC``: a specifier that is none is one line and exit 2, nothing made."""
    from kinkcheck.bench import main

    assert main(["--ask", "~~"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bench --ask: --releases '~~' is not a version specifier" in err, err
