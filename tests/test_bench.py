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
