"""Convex-hull geometry in float64: the minimum-norm point of a convex hull (Wolfe's algorithm) and the
distance from a point to a hull.

Shared by the sympy oracle (:mod:`kinkcheck.oracles.clarke`: the hull vertices among the limiting gradients
and the support of the Clarke set's minimum-norm element; :mod:`kinkcheck.oracles.cones`: a direction inside
an open cone) and the classifier (:mod:`kinkcheck.oracles.classify`: ``in-clarke`` / ``outside-clarke``), so neither
imports the other. Imports nothing of kinkcheck.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["hull_distance", "min_norm_point"]


def _affine_min_norm(B: np.ndarray) -> np.ndarray:
    """Barycentric weights of the least-norm point of the affine hull of the rows of ``B``."""
    k = B.shape[0]
    A = np.zeros((k + 1, k + 1))
    A[:k, :k] = B @ B.T
    A[:k, k] = 1.0
    A[k, :k] = 1.0
    rhs = np.zeros(k + 1)
    rhs[k] = 1.0
    sol = np.linalg.lstsq(A, rhs, rcond=None)[0]
    return sol[:k]


def min_norm_point(points: Sequence[Sequence[float]] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Minimum-norm point of the convex hull of ``points`` (Wolfe's algorithm).

    Parameters
    ----------
    points : array_like, shape (k, n), float64
        Finite points; ``k >= 1``.

    Returns
    -------
    x : ndarray, shape (n,)
        The point of ``conv(points)`` closest to the origin.
    weights : ndarray, shape (k,)
        Convex weights with ``weights @ points == x``; nonzero only on the final support.

    Raises
    ------
    ValueError
        When ``points`` is empty, not two-dimensional, or not finite.

    Notes
    -----
    P. Wolfe, "Finding the nearest point in a polytope", Mathematical Programming 11 (1976) 128-149.
    Finite: each major cycle strictly decreases ``|x|``; a cap on iterations guards against rounding.
    """
    P = np.asarray(points, dtype=np.float64)
    if P.ndim != 2 or P.shape[0] == 0:
        raise ValueError(f"points must have shape (k, n) with k >= 1, got {P.shape}")
    if not np.all(np.isfinite(P)):
        raise ValueError("points must be finite")
    k = P.shape[0]
    # Work on points scaled into [-1, 1]: squared norms of huge values would overflow.
    scale = float(np.max(np.abs(P)))
    if scale > 0:
        P = P / scale
    else:
        scale = 1.0
    eps = 1e-15
    S = [int(np.argmin(np.einsum("ij,ij->i", P, P)))]
    lam = np.array([1.0])
    x = P[S[0]].copy()
    for _ in range(50 * (k + 1)):
        j = int(np.argmin(P @ x))
        if x @ x - x @ P[j] <= eps or j in S:
            break
        S.append(j)
        lam = np.append(lam, 0.0)
        for _ in range(k + 1):  # minor cycles: drop support points until the affine minimizer is convex
            alpha = _affine_min_norm(P[S])
            if np.all(alpha > 1e-14):
                lam = alpha
                break
            neg = alpha <= 1e-14
            theta = float(np.min(lam[neg] / (lam[neg] - alpha[neg])))
            lam = theta * alpha + (1 - theta) * lam
            keep = lam > 1e-14
            if not np.any(keep):
                keep[int(np.argmax(lam))] = True
            S = [s for s, kp in zip(S, keep) if kp]
            lam = lam[keep] / lam[keep].sum()
        x = lam @ P[S]
    weights = np.zeros(k)
    weights[S] = lam
    return x * scale, weights


def hull_distance(point: Sequence[float], vertices: Sequence[Sequence[float]]) -> float:
    """Euclidean distance from ``point`` to the convex hull of ``vertices``.

    Parameters
    ----------
    point : array_like, shape (n,), float64
    vertices : array_like, shape (k, n), float64, k >= 1

    Returns
    -------
    float
        0 (up to rounding) when the point lies in the hull.

    Raises
    ------
    ValueError
        On a shape mismatch, no vertices, or non-finite input.
    """
    p = np.asarray(point, dtype=np.float64).reshape(-1)
    V = np.asarray(vertices, dtype=np.float64)
    if V.ndim == 1:
        V = V.reshape(-1, 1) if p.size == 1 else V.reshape(1, -1)
    if V.ndim != 2 or V.shape[0] == 0 or V.shape[1] != p.size:
        raise ValueError(f"vertices must have shape (k, {p.size}), got {V.shape}")
    if not np.all(np.isfinite(p)):
        raise ValueError("point must be finite")
    x, _ = min_norm_point(V - p)
    m = float(np.max(np.abs(x)))
    return 0.0 if m == 0 else m * float(np.linalg.norm(x / m))  # scaled: no overflow for huge values
