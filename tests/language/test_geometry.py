"""The convex-hull geometry behind the minimum-norm element and ``in-clarke``: Wolfe's algorithm against a
brute-force enumeration of small supports."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kinkcheck.language.geometry import hull_distance, min_norm_point


def _brute_distance(p: np.ndarray, V: np.ndarray) -> float:
    """Distance to conv(V) by enumerating affine least-norm points of every small subset."""
    P = V - p
    best = math.inf
    for k in range(1, min(len(P), P.shape[1] + 1) + 1):
        for sub in itertools.combinations(range(len(P)), k):
            B = P[list(sub)]
            A = np.block([[B @ B.T, np.ones((k, 1))], [np.ones((1, k)), np.zeros((1, 1))]])
            if abs(np.linalg.det(A)) < 1e-12:
                continue
            lam = np.linalg.solve(A, np.r_[np.zeros(k), 1.0])[:k]
            if np.all(lam >= -1e-12):
                best = min(best, float(np.linalg.norm(lam @ B)))
    return best


@settings(max_examples=150, deadline=None)
@given(
    st.integers(1, 4).flatmap(
        lambda n: st.tuples(
            st.lists(st.floats(-3, 3), min_size=n, max_size=n),
            st.lists(st.lists(st.floats(-3, 3), min_size=n, max_size=n), min_size=1, max_size=6),
        )
    )
)
def test_hull_distance_matches_enumeration(data: tuple[list[float], list[list[float]]]) -> None:
    p, V = np.array(data[0]), np.array(data[1])
    d = hull_distance(p, V)
    ref = _brute_distance(p, V)
    assert d >= -1e-12, f"negative distance {d}"
    assert abs(d - ref) <= 1e-7 * (1 + ref), f"Wolfe {d} vs enumeration {ref} for p={p}, V={V}"


def test_min_norm_point_known() -> None:
    x, w = min_norm_point([[1.0, 0.0], [0.0, 1.0]])
    assert np.allclose(x, [0.5, 0.5]), f"min-norm point of the segment e_0..e_1 is (1/2, 1/2), got {x}"
    assert np.isclose(w.sum(), 1.0) and np.all(w >= 0), f"convex weights {w}"
    assert hull_distance([0.0, 0.0], [[1.0, 1.0], [1.0, -1.0], [-1.0, 1.0], [-1.0, -1.0]]) == 0.0, "origin in square"
    assert math.isclose(hull_distance([2.0], [[0.0], [1.0]]), 1.0), "1-D interval distance"
    with pytest.raises(ValueError):
        hull_distance([0.0, 0.0], [[1.0]])
