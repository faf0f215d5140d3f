"""The HTML report's plots: drawn without numpy warnings, and SVG that does not depend on float noise (every
geometry number rounded, ids numbered in document order, no date or creator in the metadata)."""

from __future__ import annotations

import re
import warnings

import pytest

from kinkcheck.render.plots import DECIMALS, case_svg, round_numbers

#: Cases whose numpy lambdification takes sqrt of negatives: Piecewise branches that numpy.select evaluates
#: everywhere, and a curve undefined left of the kink.
SQRT_CASES = ("where-sqrt@-1", "where-sqrt@[-1,-4]", "relu-sqrt@-10", "sqrt@0")


@pytest.fixture()
def fresh_cache(tmp_path, monkeypatch):
    """A cache folder of its own, so every plot is drawn here rather than read from an earlier run."""
    monkeypatch.setenv("KINKCHECK_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.mark.parametrize("case_id", SQRT_CASES)
def test_plot_draws_without_runtime_warnings(catalog, fresh_cache, case_id):
    # record=True, not the "error" filter: the plot code catches exceptions from numpy and would hide one
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        svg = case_svg(catalog.case(case_id), [("torch", 0.0, 1), ("jax", 1.0, 2)], None, None)
    runtime = [f"{w.category.__name__}: {w.message}" for w in caught if issubclass(w.category, RuntimeWarning)]
    assert not runtime, f"{case_id}: drawing the plot warned {runtime}"
    assert svg.startswith("<svg") and "<path" in svg, f"{case_id}: no curve drawn"


def test_svg_numbers_are_rounded_and_ids_resolve(catalog, fresh_cache):
    svg = case_svg(catalog.case("relu@0"), [("torch", 0.0, 3), ("jax", 0.5, 1)], 0.0, 1.0)
    attrs = re.findall(r'\s(?:d|x|y|width|height|viewBox|transform|style)="([^"]*)"', svg)
    long = [n for a in attrs for n in re.findall(r"-?\d+\.(\d+)", a) if len(n) > DECIMALS]
    assert attrs and not long, f"SVG numbers with more than {DECIMALS} decimals: {long[:5]}"
    assert "Matplotlib v" not in svg and "<dc:date>" not in svg, "no creator version or date in the SVG metadata"
    ids = re.findall(r'\bid="([^"]+)"', svg)
    assert len(ids) == len(set(ids)) and all(i.startswith("plot-relu-at-0-") for i in ids), ids[:5]
    refs = set(re.findall(r'href="#([^"]+)"', svg)) | set(re.findall(r"url\(#([^)]+)\)", svg))
    assert refs and refs <= set(ids), f"references to missing ids: {sorted(refs - set(ids))[:5]}"
    legend = re.findall(r">\s*([\w() -]+?)\s*</text>", svg)
    assert "torch" in legend and "jax" in legend and "one-sided limits (oracle)" in legend, \
        f"one legend entry per framework, and the oracle's: {legend}"


def test_round_numbers_touches_geometry_only():
    svg = ('<svg width="648pt" viewBox="0 0 648 187.2"><path d="M 31.123456 -0.001 L 251.497273 23.925469" '
           'style="stroke-width: 0.8"/><use xlink:href="#m3e4" x="41.137149"/>'
           '<text x="1.005">0.333333 (x = 1e-45)</text></svg>')
    got = round_numbers(svg)
    assert 'd="M 31.12 0 L 251.5 23.93"' in got, got
    assert 'viewBox="0 0 648 187.2"' in got and 'x="41.14"' in got and 'xlink:href="#m3e4"' in got, got
    assert ">0.333333 (x = 1e-45)</text>" in got, "text between tags is drawn as written"
    assert round_numbers(got) == got, "rounding twice changes nothing"


#: Plots of different kinds in a row: a smooth kink, a two-input case, a curve undefined left of the kink.
SEQUENCE = (("relu@0", [("torch", 0.0, 3), ("jax", 0.5, 1)], 0.0, 1.0),
            ("maximum@tie", [("torch", 0.5, 2)], 0.0, 1.0),
            ("sqrt@0", [("jax", 1e300, 1)], None, None))


def test_the_reused_figure_draws_what_a_new_figure_draws(catalog, fresh_cache):
    """Each plot is drawn on one figure cleared again (kinkcheck.render.plots._figure); nothing of the plot
    before (subplot parameters set by tight_layout, ticks, legend) may reach the next one's SVG."""
    from kinkcheck.render.plots import _render

    reused = [_render(catalog.case(c), marks, left, right) for c, marks, left, right in SEQUENCE]
    fresh = [_render(catalog.case(c), marks, left, right, fresh=True) for c, marks, left, right in SEQUENCE]
    for (c, *_), a, b in zip(SEQUENCE, reused, fresh):
        assert a == b, f"{c}: the reused figure's SVG differs from a new figure's"
    assert len(set(reused)) == len(SEQUENCE), "three different plots"


def test_plots_drawn_in_child_processes_are_the_ones_drawn_here(catalog, fresh_cache, monkeypatch, tmp_path):
    from kinkcheck.render import plots

    requests = [(catalog.case(c), marks, left, right) for c, marks, left, right in SEQUENCE]
    here = plots.case_svgs(requests, workers=1)
    assert here == [plots._render(*r) for r in requests], "case_svgs draws what _render draws"
    monkeypatch.setenv("KINKCHECK_CACHE_DIR", str(tmp_path / "cache-2"))  # nothing cached: all drawn again
    monkeypatch.setattr(plots, "PARALLEL_MIN", 2)
    calls = []
    real = plots._draw_in_workers
    monkeypatch.setattr(plots, "_draw_in_workers", lambda r, n: calls.append(n) or real(r, n))
    assert plots.case_svgs(requests, workers=2) == here, "two child processes draw the same bytes, in order"
    assert calls == [2], f"drawn in two child processes: {calls}"
    assert plots.case_svgs(requests, workers=2) == here and calls == [2], "then read from the cache"


def test_plots_are_drawn_here_when_child_processes_fail(catalog, fresh_cache, monkeypatch):
    import sys

    from kinkcheck.render import plots

    requests = [(catalog.case(c), marks, left, right) for c, marks, left, right in SEQUENCE[:2]]
    monkeypatch.setattr(plots, "PARALLEL_MIN", 2)
    monkeypatch.setattr(sys, "executable", "/bin/false")  # every child exits 1 at once
    assert plots._draw_in_workers(requests, 2) is None, "a failed child is noticed"
    assert plots.case_svgs(requests, workers=2) == [plots._render(*r) for r in requests], "drawn here instead"
