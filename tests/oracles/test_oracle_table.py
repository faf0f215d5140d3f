"""The on-disk oracle cache: same answers as sympy, keyed on the case, recomputed when corrupt."""

from __future__ import annotations

import json

from catalogs import MAXIMUM_AT_TIE

from kinkcheck.catalog import load_catalog
from kinkcheck.oracles.classify import OracleNumbers, classify
from kinkcheck.oracles.symbolic import analyze
from kinkcheck.oracles.table import case_key, oracle_table

SMALL = """
[[case]]
id = "relu@0"
sympy = "Max(x, 0)"
at = { x = 0 }
[case.programs]
torch = ["torch.relu(x)"]
jax = ["jax.nn.relu(x)"]

""" + MAXIMUM_AT_TIE


def test_cache_round_trip_and_corruption(tmp_path, monkeypatch):
    monkeypatch.setenv("KINKCHECK_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "c.toml").write_text(SMALL)
    cat = load_catalog(tmp_path / "c.toml")
    cold = oracle_table(cat)
    for case in cat:
        assert cold[case.id] == analyze(case).to_json(), f"{case.id}: cache entry equals the sympy oracle"
    files = sorted(p.name for p in (tmp_path / "cache").iterdir() if p.name.startswith("oracle-"))
    assert files == sorted(f"oracle-{case_key(c)}.json" for c in cat), f"one entry per case: {files}"

    monkeypatch.setattr("kinkcheck.oracles.symbolic.analyze", lambda case: (_ for _ in ()).throw(AssertionError))
    assert oracle_table(cat) == cold, "a warm table is read from the cache without running sympy"

    monkeypatch.undo()
    monkeypatch.setenv("KINKCHECK_CACHE_DIR", str(tmp_path / "cache"))
    bad = tmp_path / "cache" / f"oracle-{case_key(cat.case('relu@0'))}.json"
    bad.write_text('{"case": "relu@0", "trunc')
    assert oracle_table(cat) == cold, "a corrupt entry is recomputed"
    assert json.loads(bad.read_text()) == cold["relu@0"], "and rewritten"


def test_numbers_classify_like_the_exact_result(tmp_path, monkeypatch):
    (tmp_path / "c.toml").write_text(SMALL)
    cat = load_catalog(tmp_path / "c.toml")
    for case, value in (("relu@0", [0.0]), ("relu@0", [0.5]), ("maximum@tie", [1.0, 0.0]),
                        ("maximum@tie", [0.5, 0.5])):
        exact = analyze(cat.case(case))
        nums = OracleNumbers.from_json(exact.to_json())
        assert classify(value, nums, "float64") == classify(value, exact, "float64"), f"{case} {value}"


def test_key_changes_with_the_case(tmp_path):
    (tmp_path / "a.toml").write_text(SMALL)
    (tmp_path / "b.toml").write_text(SMALL.replace("at = { x = 0 }", "at = { x = 1 }"))
    a, b = load_catalog(tmp_path / "a.toml"), load_catalog(tmp_path / "b.toml")
    assert case_key(a.case("relu@0")) != case_key(b.case("relu@0")), "a changed point is a new cache entry"
    assert case_key(a.case("maximum@tie")) == case_key(b.case("maximum@tie")), "other cases keep their entry"


def test_not_judged_entry_is_cached(tmp_path, monkeypatch):
    """sin(1/x) at 0 has no limit: the table holds a not-judged entry with its reason, and reads it back."""
    monkeypatch.setenv("KINKCHECK_CACHE_DIR", str(tmp_path / "cache"))
    text = SMALL + """
[[case]]
id = "sin-inverse@0"
sympy = "sin(1 / x)"
at = { x = 0 }
[case.programs]
torch = ["torch.sin(1 / x)"]
jax = ["jax.numpy.sin(1 / x)"]
"""
    (tmp_path / "c.toml").write_text(text)
    cat = load_catalog(tmp_path / "c.toml")
    cold = oracle_table(cat)
    entry = cold["sin-inverse@0"]
    assert entry["kind"] == "not-judged", f"an oscillation is not judged: {entry['kind']}"
    assert entry["reason"].startswith("not judged: ") and "no limit" in entry["reason"], entry["reason"]
    assert entry["lipschitz"] is None and entry["clarke"] is None, "nothing is claimed for it"
    assert cold["relu@0"]["lipschitz"] is True, "relu at 0 is Lipschitz"
    monkeypatch.setattr("kinkcheck.oracles.symbolic.analyze", lambda case: (_ for _ in ()).throw(AssertionError))
    assert oracle_table(cat) == cold, "the not-judged entry is read from the cache like the others"
