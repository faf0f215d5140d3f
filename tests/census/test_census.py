"""The census model: loading refuses malformed files in one line, coverage is computed from the catalog's
programs (never written by hand), the writer round-trips."""

from __future__ import annotations

import pytest

from kinkcheck.catalog import load_catalog
from kinkcheck.census import Census, CensusError, Op, coverage, load_census, names_used, write_census

CATALOG = """
[[case]]
id = "relu@0"
sympy = "Max(x, 0)"
at = { x = 0 }
[case.programs]
torch = ["torch.relu(x)", "x.clamp(min=0)"]
jax = ["jax.nn.relu(x)"]

[[case]]
id = "abs@0"
sympy = "Abs(x)"
at = { x = 0 }
[case.programs]
torch = ["torch.abs(x)"]
jax = ["jax.numpy.abs(x)"]
"""


@pytest.fixture
def catalog(tmp_path):
    p = tmp_path / "catalog.toml"
    p.write_text(CATALOG)
    return load_catalog(p)


def test_names_used_are_dotted_names_and_methods(catalog):
    used = names_used(catalog, "torch")
    assert used == {"torch.relu": {"relu@0"}, ".clamp": {"relu@0"}, "torch.abs": {"abs@0"}}, used


def test_coverage_is_computed_from_the_programs(catalog):
    census = Census("torch", "2.13.0", "test", (
        Op("torch.nn.functional.relu", aliases=("torch.relu",), kink="x = 0"),
        Op("torch.clamp", aliases=(".clamp",), kink="x at a bound"),
        Op("torch.maximum", kink="a tie"),
        Op("torch.argmax", status="excluded", reason="integer-valued output"),
    ))
    cov = coverage(census, catalog)
    assert cov.covered == {"torch.nn.functional.relu": ("relu@0",), "torch.clamp": ("relu@0",)}, cov.covered
    assert cov.uncovered == ("torch.maximum",) and cov.excluded == {"integer-valued output": ("torch.argmax",)}
    assert cov.kinked == 3 and cov.fraction == pytest.approx(2 / 3)


def test_write_then_load_round_trips(tmp_path):
    census = Census("jax", "0.10.2", "jax/_src/lax/lax.py", (
        Op("jax.numpy.maximum", aliases=("jax.lax.max",), derivative="_balanced_eq", kink='a tie "x = y"'),
        Op("jax.numpy.argmax", derivative="integer output", status="excluded", reason="integer-valued output"),
    ))
    write_census(census, tmp_path / "jax.toml", header=["generated"])
    again = load_census("jax", tmp_path)
    assert again.ops == census.ops and (again.framework, again.release, again.source) == ("jax", "0.10.2",
                                                                                          "jax/_src/lax/lax.py")
    first = (tmp_path / "jax.toml").read_bytes()
    write_census(again, tmp_path / "jax.toml", header=["generated"])
    assert (tmp_path / "jax.toml").read_bytes() == first, "the writer is deterministic"


@pytest.mark.parametrize("body, message", [
    ('[[op]]\nstatus = "kinked"\n', "needs a name"),
    ('[[op]]\nname = "torch.abs"\nstatus = "smooth"\n', "status must be one of kinked, excluded"),
    ('[[op]]\nname = "torch.argmax"\nstatus = "excluded"\n', "an excluded operation needs a reason"),
    ('[[op]]\nname = "torch.abs"\n[[op]]\nname = "torch.absolute"\naliases = ["torch.abs"]\n', "already listed"),
    ("[[op\n", "not valid TOML"),
    ("op = 3\n", "'op' must be an array of tables"),
    ('[[op]]\nname = "torch.abs"\naliases = 5\n', "aliases must be a list of names"),
    ('[[op]]\nname = "torch.abs"\nkink = 0\n', "kink must be a string"),
])
def test_a_malformed_census_is_one_line(tmp_path, body, message):
    (tmp_path / "torch.toml").write_text(body)
    with pytest.raises(CensusError, match=message) as err:
        load_census("torch", tmp_path)
    assert "\n" not in str(err.value)


def test_a_missing_census_is_one_line(tmp_path):
    with pytest.raises(CensusError, match="cannot read census"):
        load_census("torch", tmp_path)
