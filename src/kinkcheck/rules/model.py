"""A catalog program as the rules see it: cut at its calls at its case's point (:mod:`kinkcheck.rules.graph`),
the one (operation, kind) at a kink in it when there is exactly one, and its value under each rule label (the
chain rule with that label at the kink: :func:`kinkcheck.rules.chain.backward`). Cached on disk per case; the
cache key is the digest of this module and of the code it depends on (:func:`kinkcheck.rules.cached.code_digest`),
not of the inference that reads the models (:mod:`kinkcheck.rules.infer`)."""

from __future__ import annotations

import hashlib
import pickle
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import sympy

from kinkcheck.cache import read_cached, write_cached
from kinkcheck.oracles.mapping import Unmapped
from kinkcheck.rules import graph as gr
from kinkcheck.rules.cached import code_digest, unpickle
from kinkcheck.rules.chain import NotPredicted, backward
from kinkcheck.rules.local import LABELS, LocalKink, label_values, local_oracle
from kinkcheck.rules.names import site_operation

__all__ = ["ProgramModel", "case_models", "model_program"]


@dataclass(frozen=True)
class ProgramModel:
    """A catalog program cut at its calls, at its case's point, with its value under each rule label.

    Attributes
    ----------
    case, framework, program : str
    calls : int
        Calls the program makes (0 when it is not mapped).
    graph : Graph or None
        None when the program has no symbolic form (``reason`` says why).
    key : tuple (operation, kind) or None
        The one operation and kind at a kink in the program, when there is exactly one (evidence for its rule).
    by_label : dict
        Rule label → the program's value (exact, flat) with that label at the kink; only when ``key`` is set.
    reason : str or None
    """

    case: str
    framework: str
    program: str
    calls: int
    graph: gr.Graph | None
    key: tuple[str, str] | None = None
    by_label: Mapping[str, tuple[sympy.Expr, ...]] = field(default_factory=dict)
    reason: str | None = None
    #: every (operation, kind) a walk of the program met at a kink (a prediction depends on their rules only)
    seen: frozenset[tuple[str, str]] = frozenset()
    #: the disk cache key of its case's models (:func:`case_models`): what else is cached of it is keyed on it
    source: str = ""

    @property
    def has_graph(self) -> bool:
        """Whether the program has a graph (``graph`` is not None), without reading back one kept on disk."""
        return self.__dict__.get("_graph_blob") is not None or self.__dict__.get("graph") is not None

    # Kept on disk with its graph pickled on its own and read back when first asked for: most readers (the
    # inference, and predictions kept on disk) never ask, and the graphs' sympy forms are most of a case's entry.
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        if "graph" in state:
            graph = state.pop("graph")
            blob = None if graph is None else pickle.dumps(graph, protocol=pickle.HIGHEST_PROTOCOL)
            state["_graph_blob"] = blob
            state["_graph_sha"] = None if blob is None else hashlib.sha256(blob).hexdigest()
        return state

    def intact(self) -> bool:
        """Whether a graph kept on disk and not read back yet is the one written (its digest matches): a damaged one
        would fail only when first asked for, far from the cache's reader, which computes a damaged entry again."""
        blob = self.__dict__.get("_graph_blob")
        return blob is None or hashlib.sha256(blob).hexdigest() == self.__dict__.get("_graph_sha")

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if self.__dict__.get("_graph_blob") is None:
            self.__dict__.pop("_graph_blob", None)
            self.__dict__.setdefault("graph", None)

    def __getattr__(self, name: str) -> Any:  # only what the instance lacks: a graph not read back yet
        blob = self.__dict__.get("_graph_blob") if name == "graph" else None
        if blob is None:
            raise AttributeError(name)

        from sympy.core.parameters import evaluate

        with evaluate(False):  # pickled evaluated (see kinkcheck.rules.cached.unpickle)
            graph = pickle.loads(blob)
        self.__dict__["graph"] = graph
        self.__dict__.pop("_graph_blob", None)
        return graph


def case_models(case: Any) -> list[ProgramModel]:
    """Every program of a catalog case, modelled (:func:`model_program`); cached on disk per case
    (:mod:`kinkcheck.cache`, kind ``rules``), keyed on the case, its programs and :func:`code_digest`."""
    key = hashlib.sha256(repr((code_digest(), case.id, case.sympy, repr(case.at), case.tie,
                               [(p.framework, p.id) for p in case.programs])).encode()).hexdigest()[:32]
    if key in _MODELS:  # read once per process: each framework's rules read the case (kinkcheck.rules.render)
        return _MODELS[key]
    raw = read_cached("rules", key)
    if raw is not None:
        got = unpickle(raw)
        if isinstance(got, list) and all(isinstance(m, ProgramModel) and m.intact() for m in got):
            _MODELS[key] = got
            return got

    models = [replace(model_program(case, p), source=key) for p in case.programs]
    try:
        write_cached("rules", key, pickle.dumps(models, protocol=pickle.HIGHEST_PROTOCOL))
    except (pickle.PicklingError, RecursionError, TypeError):
        pass
    _MODELS[key] = models
    return models


#: The models :func:`case_models` gave in this process, by its key (they are not changed by their readers).
_MODELS: dict[str, list[ProgramModel]] = {}


def model_program(case: Any, program: Any) -> ProgramModel:
    """Cut a catalog program (``case.program(...)``) at its calls and evaluate it under each rule label."""
    try:
        graph = gr.build(program.tree, case.at, program.framework)
    except (Unmapped, ArithmeticError, TypeError, ValueError, IndexError, RecursionError) as err:
        return ProgramModel(case.id, program.framework, program.id, 0, None, reason=f"not mapped: {err}")
    keys: set[tuple[str, str]] = set()

    def discover(site: gr.Site, kink: LocalKink) -> tuple[sympy.Expr, ...]:
        keys.add((site_operation(program.framework, site), kink.kind))
        vals = label_values(local_oracle(kink), kink.kind, kink)
        return vals.get("zero", (sympy.S.Zero,) * len(kink.symbols))

    try:
        backward(graph, discover)
    except NotPredicted as err:
        return ProgramModel(case.id, program.framework, program.id, graph.calls, graph, reason=str(err))
    if len(keys) != 1:
        why = "no call sits at its kink" if not keys else "calls of more than one operation sit at their kinks"
        return ProgramModel(case.id, program.framework, program.id, graph.calls, graph, reason=why,
                            seen=frozenset(keys))
    key = next(iter(keys))
    by_label: dict[str, tuple[sympy.Expr, ...]] = {}
    for label in LABELS:
        def choose(site: gr.Site, kink: LocalKink, label: str = label) -> tuple[sympy.Expr, ...]:
            vals = label_values(local_oracle(kink), kink.kind, kink)
            if label not in vals:
                raise NotPredicted(f"{label} is not defined for {site.name} at {kink.kind}")
            return vals[label]
        try:
            value, visits = backward(graph, choose)
        except NotPredicted:
            continue
        walked = {(v.operation, v.kind) for v in visits}
        keys |= walked
        if walked == {key}:
            by_label[label] = value
    return ProgramModel(case.id, program.framework, program.id, graph.calls, graph, key, by_label,
                        seen=frozenset(keys))
