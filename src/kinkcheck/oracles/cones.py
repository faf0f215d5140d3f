"""The sympy oracle's refinement of probe directions: probe every open cone of directions on which one
piece is selected (decided at first order), so that no limiting gradient of such a piece is missed.

The fixed directions of :func:`kinkcheck.oracles.pieces.probe_directions` miss a piece selected only on a
cone that holds none of them; :func:`_refine` finds the tie hyperplanes through the point (:class:`_Ties`)
and probes an interior direction of every cell of their arrangement that no probe covers.

Imports :mod:`kinkcheck.oracles.pieces` and :mod:`kinkcheck.language.geometry` only
(``translate <- pieces <- cones <- clarke <- symbolic``); underscored names are internal to the package.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import sympy

from kinkcheck.language.geometry import min_norm_point
from kinkcheck.oracles.pieces import _finite_real, _Probe, _probe, _Scale
from kinkcheck.oracles.translate import _SYMPY_FAILURES

#: Extra probe directions :func:`_refine` may add at one point, in all rounds together, and its rounds.
_REFINE_BUDGET = 64
_REFINE_ROUNDS = 16
#: Most cones of directions :func:`_split_cells` keeps, and most cones it tests, before giving up (a central
#: arrangement of m hyperplanes in R^k has O(m**(k-1)) cells; a sort of eight tied values has 40320).
_CELL_CAP = 512
_SPLIT_CAP = 1000


class _Ties:
    """The hyperplanes through ``p`` on which a recorded decision changes sign at first order, and the
    region of directions each probe's selection holds on.

    A decision ``e`` (the winner of a ``Max`` minus another argument, an ``Abs`` argument, a condition's
    ``lhs - rhs``...) that is 0 at ``p`` with a finite nonzero gradient ``g`` has, along a direction ``d``
    with ``g . d != 0``, the sign of ``g . d`` (the curve is ``p + t d + O(t**2)``). A probe's region is the
    open cone where every such decision keeps the sign it had on the probe's curve; there every decision
    does (those not 0 at ``p`` keep their sign near ``p``), so the same piece is selected. Ties whose
    gradient is 0 or not finite at ``p`` (``x**2 - y**2`` at 0) are decided at a higher order; they are
    left out of regions.
    """

    def __init__(self, syms: Sequence[sympy.Symbol], point: Sequence[sympy.Expr]) -> None:
        self.syms = syms
        self.at_point = dict(zip(syms, point))
        self.normals: list[np.ndarray] = []  # unit vectors, first nonzero component positive
        self._keys: dict[tuple[float, ...], int] = {}
        self._memo: dict[sympy.Expr, tuple[int, int] | None] = {}

    def normal_of(self, e: sympy.Expr) -> tuple[int, int] | None:
        """``(index, orientation)`` of ``e``'s hyperplane (``sign(e) = orientation * sign(normal . d)``)."""
        if e in self._memo:
            return self._memo[e]
        self._memo[e] = None
        try:
            v = e.xreplace(self.at_point)
            if not (v.is_number and (v.is_zero is True or (_finite_real(v) and abs(sympy.N(v, 50)) < 1e-40))):
                return None
            g = [sympy.diff(e, s).xreplace(self.at_point) for s in self.syms]
            if not all(_finite_real(c) for c in g):
                return None
            vec = np.array([float(c) for c in g])
        except _SYMPY_FAILURES:
            return None
        size = float(np.linalg.norm(vec))
        if not math.isfinite(size) or size == 0.0:
            return None
        vec = vec / size
        orient = 1 if vec[np.flatnonzero(np.abs(vec) > 1e-12)[0]] > 0 else -1
        key = tuple(round(float(c), 10) for c in orient * vec)
        if key not in self._keys:
            self._keys[key] = len(self.normals)
            self.normals.append(orient * vec)
        self._memo[e] = (self._keys[key], orient)
        return self._memo[e]

    def region(self, d: tuple[int, ...], probe: _Probe | None) -> dict[int, int] | None:
        """``{normal index: sign}`` of the probe's region; None when it covers nothing known. A probe
        outside the domain (no decisions kept) covers the cell it lies strictly inside, once no more
        hyperplanes come."""
        if probe is None:
            if not self.normals:
                return None
            dots = np.array(self.normals) @ np.array(d, dtype=float)
            if np.any(np.abs(dots) <= 1e-9 * np.linalg.norm(d)):
                return None
            return {j: (1 if v > 0 else -1) for j, v in enumerate(dots)}
        region: dict[int, int] = {}
        for e, s in probe.decisions:
            found = self.normal_of(e)
            if found is None:
                continue
            idx, orient = found
            if s == 0 or region.get(idx, s * orient) != s * orient:  # an exact tie, or orders disagree
                return None
            region[idx] = s * orient
        return region


def _covers(region: dict[int, int] | None, normals: np.ndarray, d: np.ndarray) -> bool:
    """True when direction ``d`` lies strictly inside the region."""
    if region is None:
        return False
    idx = np.fromiter(region, dtype=int, count=len(region))
    if not len(idx):
        return True
    signs = np.fromiter(region.values(), dtype=float, count=len(region))
    return bool(np.all(signs * (normals[idx] @ d) > 1e-9 * np.linalg.norm(d)))


def _interior(a: np.ndarray, candidates: Sequence[np.ndarray]) -> np.ndarray | None:
    """A direction ``d`` with ``a_i . d > 0`` for every row ``a_i``, or None when that open cone is empty
    (or thinner than about ``1e-7`` radians).

    A candidate is tried first. Otherwise, by Gordan's theorem the cone is empty exactly when 0 lies in the
    convex hull of the rows; when it does not, the hull's minimum-norm point ``x`` has ``a_i . x >= |x|**2``
    for every i (its optimality condition), so ``x`` is an interior direction
    (:func:`kinkcheck.language.geometry.min_norm_point`).
    """
    for c in candidates:
        if np.all(a @ c > 1e-9 * np.linalg.norm(c)):
            return c
    x, _ = min_norm_point(a)
    size = float(np.linalg.norm(x))
    if size <= 1e-7 or not np.all(a @ x > 0.5 * size * size):
        return None
    return x


def _cells_2d(normals: np.ndarray) -> list[np.ndarray]:
    """An interior direction of every open cone (sector) cut out of the plane by lines with these normals:
    the bisectors of consecutive boundary rays."""
    rays = [math.atan2(a, -b) for a, b in normals]  # the line a x + b y = 0 runs along (-b, a) and (b, -a)
    angles = sorted({round((r + h) % (2 * math.pi), 12) for r in rays for h in (0.0, math.pi)})
    out = []
    for i, lo in enumerate(angles):
        hi = angles[i + 1] if i + 1 < len(angles) else angles[0] + 2 * math.pi
        mid = (lo + hi) / 2
        out.append(np.array([math.cos(mid), math.sin(mid)]))
    return out


def _split_cells(normals: np.ndarray, regions: Sequence[dict[int, int] | None],
                 candidates: Sequence[np.ndarray]) -> list[np.ndarray] | None:
    """An interior direction of every open cell of the hyperplane arrangement of ``normals`` that lies in
    no region (cells are split one hyperplane at a time; a partial cell inside a region is not split
    further); None when more than :data:`_CELL_CAP` cells remain to split or :data:`_SPLIT_CAP` were tested."""
    known = [r for r in regions if r is not None]
    tested = 0
    cells: list[tuple[tuple[int, ...], np.ndarray | None]] = [((), None)]
    for h in range(len(normals)):
        split: list[tuple[tuple[int, ...], np.ndarray | None]] = []
        for signs, pt in cells:
            if any(all(i < h and signs[i] == s for i, s in r.items()) for r in known):
                continue
            tested += 2
            if tested > _SPLIT_CAP:
                return None
            for s in (1, -1):
                child = (*signs, s)
                a = normals[: len(child)] * np.array(child, dtype=float)[:, None]
                inside = _interior(a, [c for c in (pt, *candidates) if c is not None])
                if inside is not None:
                    split.append((child, inside))
        cells = split
        if len(cells) > _CELL_CAP:
            return None
    return [pt for signs, pt in cells
            if pt is not None and not any(all(signs[i] == s for i, s in r.items()) for r in known)]


def _integer_direction(d: np.ndarray, normals: np.ndarray) -> tuple[int, ...] | None:
    """A small integer vector strictly on the same side of every hyperplane as ``d``, or None."""
    signs = np.sign(normals @ d)
    if np.any(signs == 0):
        return None
    a = normals * signs[:, None]
    for scale in (4, 16, 64, 256, 1024, 2**14, 2**20, 2**30):
        v = np.round(d / np.abs(d).max() * scale)
        if np.all(a @ v > 1e-9 * np.linalg.norm(v)):
            ints = [int(c) for c in v]
            g = math.gcd(*ints)
            return tuple(c // g for c in ints)
    return None


def _refine(f: sympy.Expr, syms: Sequence[sympy.Symbol], point: Sequence[sympy.Expr], scale: _Scale,
            probes: dict[tuple[int, ...], _Probe | None]) -> str | None:
    """Probe further directions until every cone of directions on which one piece is selected (decided at
    first order) holds a probe; adds them to ``probes``. Returns a note when it stopped short.

    The fixed directions of :func:`probe_directions` miss a piece whose region holds none of them
    (``Max(5x + 2y, -20x + 50y, 20x - 50y)`` at 0: ``5x + 2y`` is the largest only between 16 and 27
    degrees). The piece selected along a direction depends only on the signs of the selection's decisions,
    and each decision tied at ``p`` changes sign on a hyperplane (:class:`_Ties`). Each round enumerates
    the open cells of those hyperplanes' arrangement that lie in no probe's region and probes an interior
    integer direction of each (skipping cells a probe of the same round already covers); the new probes'
    decisions may add hyperplanes. It ends when every cell is covered: then every direction off the
    hyperplanes selects the piece of some probe, so each limiting gradient of a piece active on an open
    cone of directions is among the probes' gradients.
    """
    ties = _Ties(syms, point)
    regions = {d: ties.region(d, p) for d, p in probes.items()}
    added = 0
    for _ in range(_REFINE_ROUNDS):
        regions = {d: ties.region(d, p) if p is None else r for (d, r), p in zip(regions.items(), probes.values())}
        if not ties.normals:
            return None
        mat = np.array(ties.normals)
        if len(syms) == 2:
            cells = [c for c in _cells_2d(mat) if not any(_covers(r, mat, c) for r in regions.values())]
        else:
            found = _split_cells(mat, list(regions.values()), [np.array(d, dtype=float) for d in probes])
            if found is None:
                return (f"the probe directions were not refined: the {len(ties.normals)} tie hyperplanes through "
                        f"the point cut the directions into more cones than {_CELL_CAP} (or {_SPLIT_CAP} tested); "
                        "the Clarke set may miss vertices")
            cells = found
        if not cells:
            return None
        progress = False
        for c in cells:
            mat = np.array(ties.normals)
            if any(_covers(r, mat, c) for r in regions.values()):
                continue  # a probe of this round covers it
            d = _integer_direction(c, mat)
            if d is None or d in probes:
                continue
            if added == _REFINE_BUDGET:
                return (f"the probe directions were refined with {added} directions and cones of directions were "
                        f"left unprobed (budget {_REFINE_BUDGET}); the Clarke set may miss vertices")
            probes[d] = _probe(f, syms, point, d, scale)
            regions[d] = ties.region(d, probes[d])
            added += 1
            progress = True
        if not progress:
            return ("cones of directions were left without a probe that covers them (thinner than the probes "
                    "resolve, or holding a probe whose selection ties exactly); the Clarke set may miss vertices")
    return (f"the probe directions were refined in {_REFINE_ROUNDS} rounds ({added} directions) and new tie "
            "hyperplanes still appeared; the Clarke set may miss vertices")
