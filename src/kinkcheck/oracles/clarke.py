"""The sympy oracle's summary of its probes: distinct limiting gradients, the vertices of their convex
hull (the Clarke generalized gradient), its exact minimum-norm element and midpoint, and the local shape
(convex, concave) of the kink.

Comparisons are exact, or to the working precision of the probe scale (:func:`_eq`); the hull's support is
found in float64 (:mod:`kinkcheck.language.geometry`) and the minimum-norm point then solved exactly.

Imports :mod:`kinkcheck.oracles.pieces` and :mod:`kinkcheck.language.geometry` only
(``translate <- pieces <- cones <- clarke <- symbolic``); underscored names are internal to the package.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import sympy

from kinkcheck.language.geometry import hull_distance, min_norm_point
from kinkcheck.oracles.pieces import OracleError, _Probe, _Scale


def _key(v: sympy.Expr) -> float:
    return float(sympy.N(v, 30)) if v.is_finite is not False else (math.inf if v == sympy.oo else -math.inf)


def _order(g: tuple[sympy.Expr, ...]) -> tuple[Any, ...]:
    floats = tuple(_key(c) for c in g)
    first = next((i for i, c in enumerate(floats) if c != 0), len(g))
    return (first, floats, tuple(str(c) for c in g))


def _distinct(grads: Iterable[tuple[sympy.Expr, ...]], scale: _Scale) -> list[tuple[sympy.Expr, ...]]:
    """The distinct gradients (equal to the working precision, see :func:`_eq`), in :func:`_order`."""
    out: list[tuple[sympy.Expr, ...]] = []
    for g in grads:
        if not any(all(_eq(a, b, scale) for a, b in zip(g, h)) for h in out):
            out.append(g)
    return sorted(out, key=_order)


def _hull_vertices(points: list[tuple[sympy.Expr, ...]]) -> list[tuple[sympy.Expr, ...]]:
    """Points that are not in the convex hull of the others (decided in float64; catalog points are far apart)."""
    if len(points) <= 1:
        return list(points)
    # normalised first: gradients of size 1e-300 would square to 0 in float64
    big = max((abs(c) for p in points for c in p), key=_key)
    fl = np.array([[float(c / big) if big != 0 else 0.0 for c in p] for p in points])
    keep = []
    for i, p in enumerate(points):
        others = np.delete(fl, i, axis=0)
        if hull_distance(fl[i], others) > 1e-9:
            keep.append(p)
    return keep


def _exact_min_norm(vertices: list[tuple[sympy.Expr, ...]]) -> tuple[sympy.Expr, ...]:
    """Exact minimum-norm point of ``conv(vertices)``.

    The support is found in float64 (Wolfe's method), the affine least-norm problem on it is solved
    exactly, and optimality (``x . (v - x) >= 0`` for every vertex) is checked; if the check fails every
    subset of at most ``n + 1`` vertices is tried exactly.
    """
    if len(vertices) == 1:
        return vertices[0]
    n = len(vertices[0])
    fl = np.array([[float(c) for c in v] for v in vertices])
    _, weights = min_norm_point(fl)
    support = [i for i, w in enumerate(weights) if w > 1e-12]
    cand = _affine_min_norm([vertices[i] for i in support])
    if cand is not None and _optimal(cand, vertices):
        return cand
    best, best_norm = None, None
    for k in range(1, min(n + 1, len(vertices)) + 1):
        for sub in itertools.combinations(vertices, k):
            x = _affine_min_norm(list(sub))
            if x is None:
                continue
            nrm = float(sum(c * c for c in x))
            if best_norm is None or nrm < best_norm - 1e-15:
                best, best_norm = x, nrm
    if best is None:
        raise OracleError("no minimum-norm point found")
    return best


def _affine_min_norm(pts: list[tuple[sympy.Expr, ...]]) -> tuple[sympy.Expr, ...] | None:
    """Least-norm point of the affine hull of ``pts`` if it lies in their convex hull, else None."""
    k = len(pts)
    P = sympy.Matrix(pts)  # k x n
    G = P * P.T
    A = sympy.zeros(k + 1, k + 1)
    A[:k, :k] = G
    for i in range(k):
        A[i, k] = 1
        A[k, i] = 1
    rhs = sympy.zeros(k + 1, 1)
    rhs[k] = 1
    if sympy.simplify(A.det()) == 0:
        return None
    sol = A.LUsolve(rhs)
    lam = [sympy.simplify(sol[i]) for i in range(k)]
    if any(float(sympy.N(l, 30)) < -1e-25 for l in lam):
        return None
    x = (sympy.Matrix([lam]) * P)
    return tuple(sympy.simplify(c) for c in x)


def _optimal(x: tuple[sympy.Expr, ...], vertices: list[tuple[sympy.Expr, ...]]) -> bool:
    xx = sum(c * c for c in x)
    return all(float(sympy.N(sum(a * b for a, b in zip(x, v)) - xx, 30)) >= -1e-25 for v in vertices)


def _eq(a: sympy.Expr, b: sympy.Expr, scale: _Scale) -> bool:
    """``a == b`` for exact limits: exactly, or to the working precision relative to their size (a jump of
    ``1e-300`` in ``Piecewise((1e-300, x > 0), (0, True))`` is a jump)."""
    if a.is_finite is False or b.is_finite is False:
        return a == b
    diff = a - b
    if diff.is_zero is True or (diff.is_Rational and diff == 0):
        return True
    if diff.is_Rational:
        return False
    size = max(sympy.Integer(1), abs(sympy.N(a, 15)), abs(sympy.N(b, 15)))
    return bool(abs(sympy.N(diff, scale.dps)) <= scale.zero * size)


def _continuum(defined: Sequence[_Probe], scale: _Scale) -> bool:
    """True when one active piece, singular at the point, gives different gradient limits along different
    directions (the Euclidean norm at the origin): the limiting gradients are then a continuum."""
    by_piece: dict[sympy.Expr, list[tuple[sympy.Expr, ...]]] = {}
    for p in defined:
        if p.singular:
            by_piece.setdefault(p.piece, []).append(p.gradient)
    return any(len(_distinct(gs, scale)) > 1 for gs in by_piece.values())


def _local_shape(defined: Sequence[_Probe], limiting: Sequence[tuple[sympy.Expr, ...]], scale: _Scale) -> str:
    """``"convex"``, ``"concave"`` or ``"neither"`` (see ``OracleResult.shape``)."""
    convex = concave = True
    for p in defined:
        along = sum((g * d for g, d in zip(p.gradient, p.direction)), sympy.S.Zero)
        others = [sum((g * d for g, d in zip(lg, p.direction)), sympy.S.Zero) for lg in limiting]
        convex &= _eq(along, max(others, key=_key), scale)
        concave &= _eq(along, min(others, key=_key), scale)
        # the pieces themselves: curved the other way (selu's left piece is convex) is neither
        k = p.curvature
        if k is None:
            convex = concave = False
        else:
            convex &= _key(k) >= 0
            concave &= _key(k) <= 0
    if convex and not concave:
        return "convex"
    if concave and not convex:
        return "concave"
    return "neither"


def _hull_summary(limiting: Sequence[tuple[sympy.Expr, ...]], n: int) -> tuple[
        tuple[tuple[sympy.Expr, ...], ...], tuple[sympy.Expr, ...], tuple[sympy.Expr, ...]]:
    """The convex hull of two or more distinct limiting values of shape ``(n,)``: its vertices (``(lo, hi)``
    for one component), its exact minimum-norm element and the mean of its vertices.

    Raises
    ------
    OracleError
        When no exact minimum-norm point is found (:func:`_exact_min_norm`).
    """
    if n == 1:
        lo = min(limiting, key=lambda g: _key(g[0]))
        hi = max(limiting, key=lambda g: _key(g[0]))
        hull: tuple[tuple[sympy.Expr, ...], ...] = (lo, hi)
        zero = sympy.S.Zero
        mn = (zero,) if _key(lo[0]) <= 0 <= _key(hi[0]) else (lo if _key(lo[0]) > 0 else hi)
    else:
        hull = tuple(_hull_vertices(list(limiting)))
        mn = _exact_min_norm(list(hull))
    mid = tuple(sympy.simplify(sum((v[i] for v in hull), sympy.S.Zero) / len(hull)) for i in range(n))
    return hull, tuple(mn), mid
