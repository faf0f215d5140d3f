"""kinkcheck.vocabulary: one record per mode, comparison and oracle kind, and what is derived from them."""

from __future__ import annotations

import typing

from kinkcheck import vocabulary as v
from kinkcheck.render.view import _KIND_ORDER
from kinkcheck.report.records import Oracle
from kinkcheck.report.text import ORACLE_KINDS, oracle_finding


def test_the_oracle_kinds_are_one_record_each_and_every_reader_takes_them_from_it():
    """Issue 47, item 4: the report's type, the pages' words and their order come from ORACLE_KIND_RECORDS."""
    names = [k.name for k in v.ORACLE_KIND_RECORDS]
    assert names == ["differentiable", "kink", "jump", "undefined", "not-judged"], names
    assert (v.DIFFERENTIABLE, v.KINK, v.JUMP, v.UNDEFINED, v.NOT_JUDGED) == tuple(names), "the names, in order"
    literal = typing.get_args(typing.get_type_hints(Oracle)["kind"])
    assert list(literal) == names, f"report/records.py's kind {literal} is not the vocabulary's {names}"
    assert list(ORACLE_KINDS) == names and ORACLE_KINDS["jump"] == ("a jump", "not continuous"), ORACLE_KINDS
    assert sorted(names, key=_KIND_ORDER.get) == names, _KIND_ORDER
    assert oracle_finding(v.KINK, True) == "a kink: continuous, not differentiable; locally Lipschitz", \
        oracle_finding(v.KINK, True)


def test_the_oracle_writes_only_the_vocabularys_kinds():
    """The sympy oracle (oracles/symbolic.py) writes its kinds as text, so that the vocabulary stays out of the
    oracle's cache key (a new mode would recompute every case); each kind it writes is a record's."""
    import re
    from pathlib import Path

    import kinkcheck.oracles.symbolic as sym

    written = set(re.findall(r'result\("([a-z-]+)"', Path(sym.__file__).read_text()))
    written |= set(re.findall(r'kind="([a-z-]+)"', Path(sym.__file__).read_text()))
    assert written and written <= {k.name for k in v.ORACLE_KIND_RECORDS}, written


def test_every_mode_record_names_a_comparison_that_exists():
    pages = {c.name: c.page for c in v.COMPARISON_RECORDS}
    for name, mode in v.MODE_RECORDS.items():
        assert mode.compared_as is None or mode.compared_as in pages, f"{name}: {mode.compared_as}"
    assert set(v.COMPILED_MODES) <= set(v.MODES) and set(v.NETWORK_MODES) <= set(v.MODES), (v.COMPILED_MODES,
                                                                                    v.NETWORK_MODES)
