"""Moving the staged cases into the catalog (kinkcheck.probe.staging): only when every shard holds them, unchanged, and
then every shard is fresh for the larger catalog with no re-probe."""

from __future__ import annotations

import pytest
from catalogs import MAXIMUM_AT_TIE, STAGED_RELU
from probing import plan_shard as _shard

from kinkcheck.catalog import CatalogError, load_catalog, with_staged
from kinkcheck.probe.plan import missing_work, not_measured_cases
from kinkcheck.shards import ShardError, read_shard, write_shard
from kinkcheck.vocabulary import DTYPES
from kinkcheck.probe.staging import main, pending, promote

TF_TABLE = '["maximum@tie"]\nprograms = ["tf.maximum(x, y)"]\n'
STAGED_TABLE = '# staged header\n\n["relu-written@0"]\nprograms = ["tf.maximum(x, 0.0)"]\n'


@pytest.fixture
def tree(tmp_path):
    """A catalog with one staged case (torch, jax and tensorflow programs) and a folder of torch shards."""
    (tmp_path / "programs").mkdir()
    (tmp_path / "staged" / "programs").mkdir(parents=True)
    (tmp_path / "catalog.toml").write_text(MAXIMUM_AT_TIE)
    (tmp_path / "programs" / "tensorflow.toml").write_text(TF_TABLE)
    (tmp_path / "staged" / "catalog.toml").write_text("# staged: header comment\n" + STAGED_RELU)
    (tmp_path / "staged" / "programs" / "tensorflow.toml").write_text(STAGED_TABLE)
    (tmp_path / "obs").mkdir()
    return tmp_path


def test_promotion_waits_for_every_shard_then_moves_the_cases_unchanged(tree, capsys):
    catalog = tree / "catalog.toml"
    main_cat = load_catalog(catalog)
    union = with_staged(main_cat)
    write_shard(tree / "obs" / "torch-2.13.0-cpu.json", _shard(main_cat))  # the catalog's cases only
    assert pending(catalog, tree / "obs")[0].cases == ("relu-written@0",), "the staged case is still to probe"
    before = {p: p.read_text() for p in tree.rglob("*.toml")}
    with pytest.raises(CatalogError, match=r"1 shard\(s\) lack staged cases, so nothing moved: torch-2.13.0-cpu \(1\)"):
        promote(catalog, tree / "obs")
    assert {p: p.read_text() for p in tree.rglob("*.toml")} == before, "refused: every file as it was"
    assert main(["--catalog", str(catalog), "--shards", str(tree / "obs"), "--check"]) == 1
    assert "torch-2.13.0-cpu: 1 staged case(s) to probe" in capsys.readouterr().out

    write_shard(tree / "obs" / "torch-2.13.0-cpu.json", _shard(union))  # as nox -s report leaves it
    assert pending(catalog, tree / "obs") == []
    assert promote(catalog, tree / "obs") == 1
    moved = load_catalog(catalog)
    assert [c.id for c in moved] == ["maximum@tie", "relu-written@0"]
    assert moved.case("relu-written@0").measurement_hash("torch") == union.case("relu-written@0").measurement_hash(
        "torch"), "moved unchanged"
    assert [p.id for p in moved.case("relu-written@0").programs_for("tensorflow")] == ["tensorflow.maximum(x, 0.0)"], \
        "its table moved into programs/tensorflow.toml"
    assert "# staged" not in catalog.read_text() and "# staged" not in (tree / "programs" / "tensorflow.toml").read_text()
    assert not (tree / "staged").exists(), "the staged files are gone"
    assert missing_work(read_shard(tree / "obs" / "torch-2.13.0-cpu.json"), moved).fresh, "fresh with no re-probe"


def test_promotion_without_staged_cases_or_with_a_broken_shard_is_one_line(tree, capsys):
    (tree / "obs" / "torch-2.13.0-cpu.json").write_text("{")
    assert main(["--catalog", str(tree / "catalog.toml"), "--shards", str(tree / "obs")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("kinkcheck.probe.staging: ") and len(err.splitlines()) == 1 and "torch-2.13.0-cpu" in err, err
    (tree / "obs" / "torch-2.13.0-cpu.json").unlink()
    (tree / "staged" / "catalog.toml").unlink()
    assert main(["--catalog", str(tree / "catalog.toml"), "--shards", str(tree / "obs")]) == 2
    assert "no staged cases" in capsys.readouterr().err
    assert main(["--catalog", str(tree / "catalog.toml"), "--shards", str(tree / "obs"), "--check"]) == 0, \
        "nothing staged is a normal state for --check, not bad input"
    assert "nothing staged" in capsys.readouterr().out
    assert main(["--catalog", str(tree / "catalog.toml"), "--not-measured", str(tree / "obs"), "--reason", "r"]) == 2


def test_promotion_needs_measured_shards_and_ignores_other_stale_cases(tree, capsys):
    """A mistyped or empty shard folder is not "every shard holds them"; a catalog case that is stale for another
    reason (a program added) does not stop the move, which checks the moved cases only."""
    catalog = tree / "catalog.toml"
    for folder in (tree / "observationz", tree / "obs"):
        assert main(["--catalog", str(catalog), "--shards", str(folder), "--check"]) == 2
        assert "no measured shard in" in capsys.readouterr().err
    union = with_staged(load_catalog(catalog))
    shard = _shard(union)
    shard["environment"]["case_hashes"]["maximum@tie"] = "0" * 16  # measured against another definition
    write_shard(tree / "obs" / "torch-2.13.0-cpu.json", shard)
    assert promote(catalog, tree / "obs") == 1
    work = missing_work(read_shard(tree / "obs" / "torch-2.13.0-cpu.json"), load_catalog(catalog))
    assert work.changed == ("maximum@tie",) and "relu-written@0" not in work.cases, work.summary()


def test_a_shard_no_machine_at_hand_can_probe_records_the_staged_cases_as_not_measured(tree, capsys):
    """A CUDA shard measured on a lent machine cannot measure the staged cases here: recorded as not measured with
    the reason (per program, every mode and dtype), promotion goes ahead, and the cases stay due for its next
    probe; a measured shard beside it still has to hold them."""
    catalog = tree / "catalog.toml"
    main_cat = load_catalog(catalog)
    union = with_staged(main_cat)
    cuda = tree / "obs" / "torch-2.13.0-cpu.json"  # the helper names every shard so; the device does not matter here
    write_shard(cuda, _shard(main_cat))
    assert main(["--catalog", str(catalog), "--not-measured", str(cuda), "--reason", " "]) == 2, "a reason is needed"
    assert "--reason" in capsys.readouterr().err
    assert main(["--catalog", str(catalog), "--not-measured", str(cuda), "--reason", "no CUDA device here"]) == 0
    assert "1 staged case(s) recorded as not measured (relu-written@0)" in capsys.readouterr().out
    shard = read_shard(cuda)
    parts = [p for p in shard["environment"]["not_measured_parts"] if p.get("case") == "relu-written@0"]
    programs = [p.id for p in union.case("relu-written@0").programs_for("torch")]
    assert [p["program"] for p in parts] == programs and all(
        p["reason"] == "no CUDA device here" and p["dtypes"] == list(DTYPES) and "reverse" in p["modes"]
        for p in parts), parts
    assert "relu-written@0" in missing_work(shard, union).absent, "still due for the next probe there"
    assert pending(catalog, tree / "obs") == [], "accounted for: not measured, and why"
    assert main(["--catalog", str(catalog), "--not-measured", str(cuda), "--reason", "again"]) == 0
    assert "0 staged case(s)" in capsys.readouterr().out, "recorded once"
    assert promote(catalog, tree / "obs") == 1
    assert "relu-written@0" in missing_work(read_shard(cuda), load_catalog(catalog)).absent


def test_a_shard_with_only_some_programs_recorded_still_waits(tree):
    """The staged case gets a second torch program; a shard that records only one of the two as not measured
    still holds an unaccounted cell."""
    catalog = tree / "catalog.toml"
    staged = tree / "staged" / "catalog.toml"
    staged.write_text(staged.read_text().replace(
        'torch = ["torch.maximum(x, torch.zeros_like(x))"]',
        'torch = ["torch.maximum(x, torch.zeros_like(x))", "torch.clamp(x, min=0)"]'))
    union = with_staged(load_catalog(catalog))
    assert len(union.case("relu-written@0").programs_for("torch")) == 2, "two programs, so one can be left"
    shard = _shard(load_catalog(catalog))
    shard = not_measured_cases(shard, union, ["relu-written@0"], "no device")
    shard["environment"]["not_measured_parts"] = shard["environment"]["not_measured_parts"][1:]  # one program left
    write_shard(tree / "obs" / "torch-2.13.0-cpu.json", shard)
    assert [p.cases for p in pending(catalog, tree / "obs")] == [("relu-written@0",)], "a program is unaccounted"
    with pytest.raises(ShardError, match="already measured"):
        not_measured_cases(_shard(union), union, ["relu-written@0"], "no device")


def test_not_measured_refuses_a_missing_file_a_partly_measured_case_and_stray_flags(tree, capsys):
    catalog = tree / "catalog.toml"
    missing = tree / "nodir" / "sub" / "x.json"
    assert main(["--catalog", str(catalog), "--not-measured", str(missing), "--reason", "r"]) == 2
    assert "no such shard file" in capsys.readouterr().err and not (tree / "nodir").exists(), "no folder made"
    union = with_staged(load_catalog(catalog))
    partly = _shard(union, modes=("reverse",))  # the staged case in one mode of eight
    write_shard(tree / "obs" / "torch-2.13.0-cpu.json", partly)
    assert main(["--catalog", str(catalog), "--not-measured", str(tree / "obs" / "torch-2.13.0-cpu.json"),
                 "--reason", "r"]) == 2
    assert "partly measured there" in capsys.readouterr().err
    assert main(["--catalog", str(catalog), "--reason", "r"]) == 2, "--reason alone"
    assert main(["--catalog", str(catalog), "--check", "--not-measured", "x.json", "--reason", "r"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 2, "one line each"
