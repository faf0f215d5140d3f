"""Program models (kinkcheck.rules.model): kept on disk per case, their graphs read back only when asked for."""

from __future__ import annotations

import pickle

import pytest

from kinkcheck.catalog import load_catalog
from kinkcheck.rules.cached import unpickle
from kinkcheck.rules.model import model_program


def test_a_kept_model_reads_its_graph_back_when_first_asked_for_and_equals_the_one_built() -> None:
    case = next(c for c in load_catalog() if c.id == "clamp@1")
    built = [model_program(case, p) for p in case.programs if p.framework == "torch"][:4]
    assert built and all(m.graph is not None for m in built), "torch's clamp programs cut into calls"
    unmapped = type(built[0])(case.id, "torch", "not a program", 0, None, reason="not mapped: test")
    back = unpickle(pickle.dumps([*built, unmapped], protocol=pickle.HIGHEST_PROTOCOL))
    assert all("graph" not in m.__dict__ for m in back[:-1]), "read back without their graphs"
    assert all(m.has_graph for m in back[:-1]) and all("graph" not in m.__dict__ for m in back[:-1]), \
        "has_graph answers without reading the graph back"
    assert not back[-1].has_graph and back[-1].graph is None and back[-1].__dict__["graph"] is None, \
        "no graph is None at once"
    for a, b in zip(built, back):
        assert b.key == a.key and b.by_label == a.by_label and b.seen == a.seen, f"{a.program}: the same model"
        assert repr(b.graph) == repr(a.graph) and "graph" in b.__dict__, f"{a.program}: its graph, read once asked"
        assert b == a, f"{a.program}: equal as a whole"
    again = pickle.loads(pickle.dumps(back[0]))
    assert repr(again.graph) == repr(built[0].graph), "a model read back and kept again keeps its graph"
    with pytest.raises(AttributeError):  # another missing attribute is an AttributeError, not a graph
        back[0].no_such_field  # noqa: B018
