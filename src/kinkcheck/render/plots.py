"""One plot per case for the site's case pages (matplotlib, SVG): the function near the kink, its
one-sided derivatives, and the value each framework chose at the kink.

The function is the case's sympy expression along its first input component (the others held at the
point), ``g(t) = f(p + t e_0)``, on ``[p_0 - 1, p_0 + 1]``. The derivative panel draws ``g'`` from finite
differences taken on one side only (backward left of the kink, forward right of it, step 1e-7), so each
branch ends at its one-sided derivative; the oracle's one-sided values are open circles at the kink and each
framework's measured values (first component, newest release, reverse mode, float64) are markers on the
kink line. A case whose expression does not evaluate at its point, or whose point is not finite, gets the
markers alone under the title "no curve: <why>". SVG output is deterministic for one matplotlib release on any machine: fixed hash salt, no date
and no creator in the metadata, ids numbered in document order, and every number in an attribute rounded to
:data:`DECIMALS` decimals (0.01 px on a 648 x 187 pt figure), so last-bit differences between numpy, libm or
matplotlib builds do not reach the bytes. Each plot is cached on disk keyed on the case, the marks and the
matplotlib and module versions (:func:`kinkcheck.cache.read_cached`, outside the repository).
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import math
import os
import pickle
import re
import sys
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from kinkcheck.cache import read_cached, write_cached
from kinkcheck.language import expr as ex
from kinkcheck.registry import FRAMEWORKS, view
from kinkcheck.render.view import slug
from kinkcheck.report.model import Case

__all__ = ["PARALLEL_MIN", "case_svg", "case_svgs", "kink_hits_svg"]

_STEP = 1e-7
_HALF_WIDTH = 1.0
_POINTS = 161
_MARKERS = view(lambda f: f.marker)
#: Decimals kept in the SVG's coordinates and lengths (attributes only: text such as legend values is untouched).
DECIMALS = 2


@functools.cache  # read once per process, not once per plot
def _source_hash() -> str:
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]


@functools.cache
def _matplotlib_version() -> str:
    return metadata.version("matplotlib")


def case_svg(case: Case, marks: Sequence[tuple[str, float, int]], left: float | None, right: float | None) -> str:
    """The SVG text (``<svg …>…</svg>``, no XML prolog) of the case's plot.

    Parameters
    ----------
    case : Case
        The report's case (:class:`kinkcheck.report.model.Case`; its ``id``, ``sympy`` and ``at`` are read, so a
        catalog case serves as well).
    marks : sequence of (framework, value, number of programs)
        Measured first-component derivatives at the kink; non-finite ones and those beyond ±1e300 are left out of
        the plot (the table shows them).
    left, right : float or None
        The oracle's one-sided derivatives (first component), for the open circles.
    """
    return case_svgs([(case, marks, left, right)])[0]


#: One plot request: (case, marks, left, right) as :func:`case_svg` takes them.
Request = tuple[Case, Sequence[tuple[str, float, int]], "float | None", "float | None"]


def case_svgs(requests: Sequence[Request], workers: int | None = None) -> list[str]:
    """:func:`case_svg` of many plots: the cached ones read, the others drawn, in parallel where that pays.

    Drawing a plot takes about a quarter of a second, most of it matplotlib's layout; a cold report draws one
    per case. With ``workers`` > 1 (default: the CPUs) and at least :data:`PARALLEL_MIN` plots to draw, they
    are drawn in that many child processes (:func:`_draw_in_workers`), each starting in about 1.5 s
    (matplotlib and sympy imported); a plot drawn there is byte for byte the one drawn here. Where child
    processes cannot be started or fail, the plots are drawn here.

    Parameters
    ----------
    requests : sequence of (case, marks, left, right)
        The arguments of :func:`case_svg`, one tuple a plot.
    workers : int, optional
        Processes to draw in; 1 draws every plot in this process.

    Returns
    -------
    list of str
        The SVG texts, in the order of ``requests``.
    """
    keys = [_cache_key(*r) for r in requests]
    out: list[str | None] = [_cached(k) for k in keys]
    todo = [i for i, svg in enumerate(out) if svg is None]
    n = min(workers or os.cpu_count() or 1, len(todo))
    drawn = None
    if n > 1 and len(todo) >= PARALLEL_MIN:
        drawn = _draw_in_workers([requests[i] for i in todo], n)
    if drawn is None:
        drawn = [_render(*requests[i]) for i in todo]
    for i, svg in zip(todo, drawn):
        out[i] = svg
        write_cached(_PLOTS, keys[i], svg.encode("utf-8"))
    return out  # type: ignore[return-value]


#: Fewest plots to draw for which worker processes pay their start (about 1.5 s each, in parallel).
PARALLEL_MIN = 8


def _draw_in_workers(requests: list[Request], workers: int) -> list[str] | None:
    """The plots of ``requests`` drawn by ``workers`` child Pythons (:func:`_worker`), or None when one fails.

    Plain child processes, not :mod:`multiprocessing`: its ``spawn`` re-imports the parent's main script,
    which an unguarded script (``__main__`` without ``if __name__ == "__main__"``) would run again, and its
    ``fork`` copies a process that may hold threads. The requests go to each child pickled on stdin (a child
    of this process, running this module), the SVGs come back as JSON on stdout.
    """
    import subprocess  # slow to import

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}  # where this process found kinkcheck
    chunks = [requests[k::workers] for k in range(workers)]
    try:
        procs = [subprocess.Popen([sys.executable, "-c", "from kinkcheck.render.plots import _worker; _worker()"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
                 for _ in chunks]
    except OSError:  # no processes here (a sandbox, a limit): draw them in this one
        return None
    outs = []
    for proc, chunk in zip(procs, chunks):
        try:
            proc.stdin.write(pickle.dumps(chunk))  # type: ignore[union-attr]
            proc.stdin.close()  # type: ignore[union-attr]
        except OSError:
            pass  # a child that died early: its exit status says so below
    for proc in procs:
        out = proc.stdout.read()  # type: ignore[union-attr]
        proc.stdout.close()  # type: ignore[union-attr]
        try:
            outs.append(json.loads(out) if proc.wait() == 0 else None)
        except ValueError:
            outs.append(None)
    if any(o is None for o in outs):
        return None
    drawn: list[str] = [""] * len(requests)
    for k, out in enumerate(outs):
        drawn[k::workers] = out
    return drawn


def _worker() -> None:
    """Body of a child of :func:`_draw_in_workers`: pickled requests on stdin, their SVGs as a JSON list on stdout."""
    requests = pickle.loads(sys.stdin.buffer.read())  # written by the parent process, never read from a file
    sys.stdout.write(json.dumps([_render(*r) for r in requests]))


#: The cache folder's kind for plots (:func:`kinkcheck.cache.read_cached`).
_PLOTS = "plots"


def _cache_key(case: Case, marks: Sequence[tuple[str, float, int]], left: float | None, right: float | None) -> str:
    """The file name the plot of these arguments is cached under: keyed on the case, the marks, matplotlib's
    release and this file."""
    key = json.dumps([case.id, case.sympy, repr(case.at), list(marks), left, right, _matplotlib_version(),
                      _source_hash()], sort_keys=True)
    return f"plot-{hashlib.sha256(key.encode()).hexdigest()[:24]}.svg"


def _cached(key: str) -> str | None:
    """A cached plot, or None (absent, unreadable or not UTF-8 text: it is drawn again)."""
    data = read_cached(_PLOTS, key)
    try:
        return None if data is None else data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _line(case: Case) -> tuple[Any, float, str]:
    """``g`` as a float function of t, the kink coordinate ``p_0`` and the axis label."""
    import sympy

    from kinkcheck.oracles.symbolic import to_sympy  # slow: sympy

    f, syms, point = to_sympy(case)
    rest = {s: v for s, v in zip(syms[1:], point[1:])}
    g = f.xreplace(rest)
    s0 = syms[0]
    import numpy as np

    try:
        fast = sympy.lambdify(s0, g, modules=["numpy", "sympy"])
        # numpy evaluates every branch of a Piecewise (numpy.select) and sqrt/log outside their domain give
        # NaN: discarded by select, or a gap in the curve where f is undefined, never a problem to report.
        with np.errstate(all="ignore"):
            fast(float(point[0]) + 0.5)
    except Exception:  # noqa: BLE001 - a piece numpy cannot evaluate: exact evaluation point by point
        fast = None

    def value(t: float) -> float:
        if fast is not None:
            try:
                with np.errstate(all="ignore"):  # as above: NaN off the domain or in a discarded branch
                    return float(fast(t))
            except Exception:  # noqa: BLE001
                pass
        try:
            v = complex(g.xreplace({s0: sympy.Float(t, 30)}).evalf(20))
        except (TypeError, ValueError):
            return math.nan
        return v.real if abs(v.imag) < 1e-12 else math.nan

    return value, float(point[0]), s0.name


def _nothing(t: float) -> float:
    """The curve of a case that cannot be drawn: NaN everywhere (matplotlib leaves it out)."""
    return math.nan


_FIGURE: list[Any] = []  # the one figure every plot is drawn on, made on first use


def _figure() -> tuple[Any, Any, Any]:
    """The figure, cleared, with two fresh axes; the same figure for every plot of a process.

    One figure drawn on and cleared again costs half of what a new figure a plot costs: its Agg canvas and
    renderer live on, and with them matplotlib's cache of text extents (tick labels and titles repeat from
    plot to plot), which tight_layout measures. The subplot parameters that tight_layout set for the last
    plot are put back to rcParams' defaults first, so each plot is laid out from the same start and its SVG is
    byte for byte the one a new figure gives (``tests/render/test_plots.py`` compares the two).
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if not _FIGURE:
        fig = Figure(figsize=(9.0, 2.6))
        FigureCanvasAgg(fig)  # what pyplot gives a figure under Agg: tight_layout measures text with its renderer
        _FIGURE.append(fig)
    fig = _FIGURE[0]
    fig.clf()
    fig.subplots_adjust(**_DEFAULT_SUBPLOTPARS)
    a1, a2 = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1, 1]})
    return fig, a1, a2


_DEFAULT_SUBPLOTPARS: dict[str, float] = {}


def _setup() -> None:
    """Select the Agg backend and the rcParams every plot is drawn with (once a process)."""
    import matplotlib

    if _DEFAULT_SUBPLOTPARS:
        return
    matplotlib.use("Agg")
    matplotlib.rcParams.update({"svg.hashsalt": "kinkcheck", "svg.fonttype": "none", "font.size": 9})
    _DEFAULT_SUBPLOTPARS.update({k: matplotlib.rcParams[f"figure.subplot.{k}"]
                                 for k in ("left", "right", "bottom", "top", "wspace", "hspace")})


def _render(case: Case, marks: Sequence[tuple[str, float, int]], left: float | None, right: float | None,
            fresh: bool = False) -> str:
    """The plot's SVG, drawn on the reused figure (:func:`_figure`), or on a new pyplot figure when ``fresh``."""
    _setup()
    why = None
    try:
        g, p0, name = _line(case)
    except (ex.ExprError, ArithmeticError, ValueError, TypeError) as err:  # the markers still say what was measured
        g, p0, name, why = _nothing, 0.0, next(iter(case.at)), f"f does not evaluate here ({type(err).__name__})"
    if not math.isfinite(p0):  # a point at infinity: no neighbourhood to draw
        g, p0, why = _nothing, 0.0, f"the point {name} = {p0} is not finite"
    ts = [p0 - _HALF_WIDTH + 2 * _HALF_WIDTH * i / (_POINTS - 1) for i in range(_POINTS)]
    ys = [g(t) for t in ts]  # Python floats from here on: NaN and inf propagate without warnings
    lt = [t for t in ts if t < p0]
    rt = [t for t in ts if t > p0]
    dl = [(g(t) - g(t - _STEP)) / _STEP for t in lt]
    dr = [(g(t + _STEP) - g(t)) / _STEP for t in rt]
    if fresh:
        import matplotlib.pyplot as plt

        fig, (a1, a2) = plt.subplots(1, 2, figsize=(9.0, 2.6), gridspec_kw={"width_ratios": [1, 1]})
    else:
        fig, a1, a2 = _figure()
    a1.plot(ts, ys, color="black", lw=1.4)
    a1.axvline(p0, color="grey", lw=0.6, ls=":")
    a1.set_title(f"f along {name}" if why is None else f"no curve: {why}")
    a1.set_xlabel(name)
    a2.plot(lt, dl, color="black", lw=1.4, label="one-sided derivative")
    a2.plot(rt, dr, color="black", lw=1.4)
    sides = [v for v in (left, right) if v is not None and math.isfinite(v)]
    if sides:
        a2.plot([p0] * len(sides), sides, marker="o", mfc="white", mec="black", ms=8, ls="none", zorder=3,
                label="one-sided limits (oracle)")
    # side by side, so equal values of several frameworks all show: ±0.07 for two, closer for more
    present = sorted({fw for fw, _, _ in marks}, key=lambda fw: list(FRAMEWORKS).index(fw) if fw in FRAMEWORKS else 99)
    step = min(0.14, 0.5 / max(len(present) - 1, 1))
    shift = {fw: (i - (len(present) - 1) / 2) * step for i, fw in enumerate(present)}
    named: set[str] = set()  # one legend entry per framework: the marker's height is its value (the tables count)
    for fw, v, _n in marks:
        if math.isfinite(v) and abs(v) <= 1e300:  # past it the axis span overflows float64 (singular transform)
            marker, colour = _MARKERS.get(fw, ("^", "#2ca02c"))
            a2.plot([p0 + shift.get(fw, 0.0) * _HALF_WIDTH], [v], marker=marker, color=colour, ms=5, ls="none",
                    zorder=4, label="_nolegend_" if fw in named else fw)
            named.add(fw)
    a2.axvline(p0, color="grey", lw=0.6, ls=":")
    a2.set_title(f"∂f/∂{name}: measured at the kink (markers)")
    a2.set_xlabel(name)
    entries = len(a2.get_legend_handles_labels()[1])  # nine frameworks and the oracle: two columns, all shown
    a2.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False, ncol=1 if entries <= 6 else 2)
    fig.tight_layout()
    buf = io.StringIO()
    # the legend stands beside the axes: the saved area grows to hold it (nothing clipped)
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None}, bbox_inches="tight", pad_inches=0.05)
    if fresh:
        plt.close(fig)
    text = buf.getvalue()
    return _unique_ids(round_numbers(text[text.index("<svg"):]), f"plot-{slug(case.id)}-")


#: Attributes whose numbers are geometry or style (not ids, references or text).
_NUMERIC_ATTRS = ("d", "x", "y", "width", "height", "viewBox", "transform", "style")


def round_numbers(svg: str, decimals: int = DECIMALS) -> str:
    """``svg`` with every decimal number inside a geometry or style attribute rounded to ``decimals``.

    ``d="M 31.12 148.480001"`` becomes ``d="M 31.12 148.48"``; ``-0`` is written ``0``. Text between tags
    (tick labels, legend values) is left as drawn.
    """
    def number(m: re.Match[str]) -> str:
        text = f"{float(m.group(0)):.{decimals}f}".rstrip("0").rstrip(".")
        return "0" if text == "-0" else text

    def attr(m: re.Match[str]) -> str:
        return m.group(1) + re.sub(r"-?\d+\.\d+", number, m.group(2)) + m.group(3)

    return re.sub(rf'(\s(?:{"|".join(_NUMERIC_ATTRS)})=")([^"]*)(")', attr, svg)


def _unique_ids(svg: str, prefix: str) -> str:
    """Rename every id (and each reference to it) to ``prefix`` + its rank in the document, so 50 inline plots
    share one HTML document validly and no id carries matplotlib's hash of unrounded coordinates."""
    order: dict[str, str] = {}
    for name in re.findall(r'\bid="([^"]+)"', svg):
        order.setdefault(name, f"{prefix}{len(order) + 1}")
    if not order:
        return svg

    def sub(m: re.Match[str]) -> str:
        return m.group(1) + order[m.group(2)] + m.group(3) if m.group(2) in order else m.group(0)

    svg = re.sub(r'(\bid=")([^"]+)(")', sub, svg)
    svg = re.sub(r'(href="#)([^"]+)(")', sub, svg)
    return re.sub(r"(url\(#)([^)]+)(\))", sub, svg)


#: One colour per dtype of the kink-hit plot (16-bit dtypes beside the paper's 16-bit line, in its colour).
_DTYPE_COLOURS = {"float64": "#1f77b4", "float32": "#2ca02c", "float16": "#d62728", "bfloat16": "#ff7f0e"}
#: Markers per dtype: float64's large hollow square shows where float32's line lies on it (both at 0).
_DTYPE_MARKERS = {"float64": ("s", 8, "none"), "float32": ("o", 4, None), "float16": ("^", 5, None),
                  "bfloat16": ("v", 5, None)}
_PAPER_COLOURS = {"32 bit": "#2ca02c", "16 bit": "#d62728"}


#: Line style per framework of the kink-hit plot (the paper's lines are dashed).
_FRAMEWORK_LINES = {"torch": "-", "jax": ":"}


def kink_hits_svg(measurements: Sequence[Any]) -> str:
    """The kink-hit census plot of :class:`kinkcheck.report.model.KinkHits` measurements: the % of
    initialisations whose first-layer gradient differs between ReLU'(0) = 0 and 1, by depth, one line per
    framework and dtype measured here (torch solid, JAX dotted), and the paper's 32- and 16-bit figures (from
    the first measurement's record) dashed with hollow markers. Deterministic SVG, as the case plots; cached on
    disk as they are, keyed on the measurements, matplotlib's release and this file."""
    import msgspec

    key = f"{_source_hash()}|{_matplotlib_version()}|".encode() + msgspec.json.encode(list(measurements))
    name = f"kinkhits-{hashlib.sha256(key).hexdigest()[:24]}.svg"
    svg = _cached(name)
    if svg is None:
        svg = _draw_kink_hits(measurements)
        write_cached(_PLOTS, name, svg.encode("utf-8"))
    return svg


def _draw_kink_hits(measurements: Sequence[Any]) -> str:
    _setup()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.2, 3.4))
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    for k in measurements:
        fw = str(k.environment.get("framework", "torch"))
        for dtype, colour in _DTYPE_COLOURS.items():
            cells = sorted((c for c in k.cells if c.dtype == dtype), key=lambda c: c.depth)
            if cells:
                marker, size, face = _DTYPE_MARKERS[dtype]
                ax.plot([c.depth for c in cells], [100 * c.differ / c.inits if c.inits else 0.0 for c in cells],
                        marker=marker, ms=size, mfc=face, lw=1.4, ls=_FRAMEWORK_LINES.get(fw, "-."), color=colour,
                        label=f"{fw} {dtype}")
    for precision, colour in _PAPER_COLOURS.items():
        row = (measurements[0].paper.get("proportions") or {}).get(precision) or {}
        pts = sorted((int(d), v) for d, v in row.items() if v is not None)
        if pts:
            ax.plot([d for d, _ in pts], [v for _, v in pts], marker="o", mfc="white", ms=5, lw=1.0, ls="--",
                    color=colour, label=f"{precision} (paper, MNIST)")
    ax.set_xlabel("hidden layers")
    ax.set_ylabel("% of initialisations that differ")
    ax.set_ylim(-3, 103)
    ax.set_title("ReLU'(0) = 0 vs 1: first-layer gradient differs on some minibatch")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
    fig.tight_layout()
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    text = buf.getvalue()
    return _unique_ids(round_numbers(text[text.index("<svg"):]), "kinkhits-")
