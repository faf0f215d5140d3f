"""One plot per case for the HTML report (matplotlib, inline SVG): the function near the kink, its
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
matplotlib and module versions (:func:`kinkcheck.cache.cache_dir`, outside the repository).
"""

from __future__ import annotations

import hashlib
import io
import json
import math
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from kinkcheck import expr as ex
from kinkcheck.cache import cache_dir
from kinkcheck.catalog import Case
from kinkcheck.report.markdown import slug

__all__ = ["case_svg"]

_STEP = 1e-7
_HALF_WIDTH = 1.0
_POINTS = 161
_MARKERS = {"torch": ("o", "#d62728"), "jax": ("s", "#1f77b4")}
#: Decimals kept in the SVG's coordinates and lengths (attributes only: text such as legend values is untouched).
DECIMALS = 2


def _source_hash() -> str:
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]


def case_svg(case: Case, marks: Sequence[tuple[str, float, int]], left: float | None, right: float | None) -> str:
    """The SVG text (``<svg …>…</svg>``, no XML prolog) of the case's plot.

    Parameters
    ----------
    case : Case
    marks : sequence of (framework, value, number of programs)
        Measured first-component derivatives at the kink; non-finite ones and those beyond ±1e300 are left out of
        the plot (the table shows them).
    left, right : float or None
        The oracle's one-sided derivatives (first component), for the open circles.
    """
    key = json.dumps([case.id, case.sympy, repr(case.at), list(marks), left, right, metadata.version("matplotlib"),
                      _source_hash()], sort_keys=True)
    path = cache_dir() / f"plot-{hashlib.sha256(key.encode()).hexdigest()[:24]}.svg"
    try:
        return path.read_text()
    except OSError:
        pass
    svg = _render(case, marks, left, right)
    try:
        from kinkcheck.shards import write_text_atomic

        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, svg)
    except OSError:
        pass
    return svg


def _line(case: Case) -> tuple[Any, float, str]:
    """``g`` as a float function of t, the kink coordinate ``p_0`` and the axis label."""
    import sympy

    from kinkcheck.oracles.symbolic import to_sympy

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


def _render(case: Case, marks: Sequence[tuple[str, float, int]], left: float | None, right: float | None) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    matplotlib.rcParams.update({"svg.hashsalt": "kinkcheck", "svg.fonttype": "none", "font.size": 9})
    why = None
    try:
        g, p0, name = _line(case)
    except (ex.ExprError, ArithmeticError, ValueError, TypeError) as err:  # the markers still say what was measured
        g, p0, name, why = _nothing, 0.0, case.inputs[0], f"f does not evaluate here ({type(err).__name__})"
    if not math.isfinite(p0):  # a point at infinity: no neighbourhood to draw
        g, p0, why = _nothing, 0.0, f"the point {name} = {p0} is not finite"
    ts = [p0 - _HALF_WIDTH + 2 * _HALF_WIDTH * i / (_POINTS - 1) for i in range(_POINTS)]
    ys = [g(t) for t in ts]  # Python floats from here on: NaN and inf propagate without warnings
    lt = [t for t in ts if t < p0]
    rt = [t for t in ts if t > p0]
    dl = [(g(t) - g(t - _STEP)) / _STEP for t in lt]
    dr = [(g(t + _STEP) - g(t)) / _STEP for t in rt]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9.0, 2.6), gridspec_kw={"width_ratios": [1, 1]})
    a1.plot(ts, ys, color="black", lw=1.4)
    a1.axvline(p0, color="grey", lw=0.6, ls=":")
    a1.set_title(f"f along {name} (other inputs at the point)" if why is None else f"no curve: {why}")
    a1.set_xlabel(name)
    a2.plot(lt, dl, color="black", lw=1.4, label="one-sided derivative")
    a2.plot(rt, dr, color="black", lw=1.4)
    sides = [v for v in (left, right) if v is not None and math.isfinite(v)]
    if sides:
        a2.plot([p0] * len(sides), sides, marker="o", mfc="white", mec="black", ms=8, ls="none", zorder=3,
                label="one-sided limits (oracle)")
    shift = {"torch": -0.07, "jax": 0.07}  # side by side, so equal values of the two frameworks both show
    for fw, v, n in marks:
        if math.isfinite(v) and abs(v) <= 1e300:  # past it the axis span overflows float64 (singular transform)
            marker, colour = _MARKERS.get(fw, ("^", "#2ca02c"))
            a2.plot([p0 + shift.get(fw, 0.0) * _HALF_WIDTH], [v], marker=marker, color=colour, ms=5, ls="none",
                    zorder=4, label=f"{fw}: {v:.4g} ({n} program{'s' if n != 1 else ''})")
    a2.axvline(p0, color="grey", lw=0.6, ls=":")
    a2.set_title(f"∂f/∂{name}; markers: measured values at the kink")
    a2.set_xlabel(name)
    a2.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
    fig.tight_layout()
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
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
    import re

    def number(m: re.Match[str]) -> str:
        text = f"{float(m.group(0)):.{decimals}f}".rstrip("0").rstrip(".")
        return "0" if text == "-0" else text

    def attr(m: re.Match[str]) -> str:
        return m.group(1) + re.sub(r"-?\d+\.\d+", number, m.group(2)) + m.group(3)

    return re.sub(rf'(\s(?:{"|".join(_NUMERIC_ATTRS)})=")([^"]*)(")', attr, svg)


def _unique_ids(svg: str, prefix: str) -> str:
    """Rename every id (and each reference to it) to ``prefix`` + its rank in the document, so 50 inline plots
    share one HTML document validly and no id carries matplotlib's hash of unrounded coordinates."""
    import re

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
