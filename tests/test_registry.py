"""The framework registry: every place that names a framework reads one record."""

from __future__ import annotations

import importlib

import pytest

from kinkcheck import catalog, cli, registry
from kinkcheck.cite import FRAMEWORK_NAMES
from kinkcheck.frameworks import KNOWN
from kinkcheck.frameworks.base import FRAMEWORK_MODES, MODES
from kinkcheck.probe import DISTRIBUTIONS
from kinkcheck.report import plots


def test_every_consumer_reads_the_registry():
    names = tuple(registry.REGISTRY)
    assert catalog.FRAMEWORKS == registry.FRAMEWORKS == names == ("torch", "jax"), names
    assert KNOWN == {n: registry.REGISTRY[n].adapter for n in names}, "adapters"
    assert FRAMEWORK_MODES == {n: registry.REGISTRY[n].modes for n in names}, "modes"
    assert DISTRIBUTIONS == {"torch": "torch", "jax": "jax"} and FRAMEWORK_NAMES == {"torch": "PyTorch", "jax": "JAX"}
    assert plots._MARKERS == {n: registry.REGISTRY[n].marker for n in names}, "plot markers"
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for command in ("grad", "probe", "cite"):
        fw = next(a for a in sub.choices[command]._actions if a.dest == "framework")
        assert tuple(fw.choices) == names, f"{command} --framework choices come from the registry"


@pytest.mark.parametrize("name", list(registry.REGISTRY))
def test_a_record_is_consistent_with_its_adapter(name):
    rec = registry.framework(name)
    assert set(rec.modes) <= set(MODES) and rec.modes[0] == "reverse", rec.modes
    module = importlib.import_module(rec.adapter)
    adapter_class = next(v for v in vars(module).values() if isinstance(v, type) and getattr(v, "modes", None)
                         and v.__module__ == module.__name__)
    assert adapter_class.modes == rec.modes, f"{name}: the adapter implements the registered modes"


def test_an_unknown_framework_is_one_line():
    with pytest.raises(KeyError, match=r"unknown framework 'tensorflow' \(known: torch, jax\)"):
        registry.framework("tensorflow")
