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


def test_a_kept_graph_damaged_inside_is_found_when_its_case_is_read() -> None:
    """A graph pickled on its own and damaged inside its entry would load with the entry and fail only when first
    asked for: its digest says so at once (:meth:`ProgramModel.intact`), so its case is modelled again."""
    case = next(c for c in load_catalog() if c.id == "clamp@1")
    built = [model_program(case, p) for p in case.programs if p.framework == "torch"][:2]
    raw = pickle.dumps(built, protocol=pickle.HIGHEST_PROTOCOL)
    clean = unpickle(raw)
    assert all(m.intact() for m in clean), "as written: intact"
    blob = clean[0].__dict__["_graph_blob"]
    at = raw.index(blob) + len(blob) // 2
    damaged = unpickle(raw[:at] + bytes([raw[at] ^ 0x55]) + raw[at + 1:])
    assert damaged is not None and not damaged[0].intact() and damaged[1].intact(), \
        "the damaged graph is found by its digest, before anyone asks for it"
