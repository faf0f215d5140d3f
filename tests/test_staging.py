"""Moving the staged cases into the catalog (kinkcheck.staging): only when every shard holds them, unchanged, and
then every shard is fresh for the larger catalog with no re-probe."""

from __future__ import annotations

import pytest
from catalogs import MAXIMUM_AT_TIE, STAGED_RELU
from test_shards import _shard

from kinkcheck.catalog import CatalogError, load_catalog, with_staged
from kinkcheck.shards import missing_work, read_shard, write_shard
from kinkcheck.staging import main, pending, promote

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
    assert err.startswith("kinkcheck.staging: ") and len(err.splitlines()) == 1 and "torch-2.13.0-cpu" in err, err
    (tree / "obs" / "torch-2.13.0-cpu.json").unlink()
    (tree / "staged" / "catalog.toml").unlink()
    assert main(["--catalog", str(tree / "catalog.toml"), "--shards", str(tree / "obs")]) == 2
    assert "no staged cases" in capsys.readouterr().err


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
