"""Seed case P0's two-layer network as plain nested lists (``shared/cases/public-cases.md``, P0): what the
probe feeds every framework and what a shard's network gradients are checked against, without importing
NumPy (:data:`kinkcheck.oracles.backprop.P0` is the same network as arrays).

``X @ W1`` is exactly 0 at (row 3, column 1), where relu'(0) decides the W1 gradient.
"""

from __future__ import annotations

__all__ = ["W1", "W2", "T", "X", "point", "shapes"]

#: Inputs, shape (4, 3).
X = ((3, 2, 1), (1, 0, 2), (4, 1, 2), (0, 0, 1))
#: First layer, shape (3, 2).
W1 = ((1, 2), (0, 1), (4, 0))
#: Second layer, shape (2, 2).
W2 = ((-1, 1), (-2, 3))
#: Target, shape (4, 2): all ones.
T = ((1, 1),) * 4


def point() -> dict[str, list[list[int]]]:
    """The network's point as fresh lists: ``{"X", "W1", "W2", "T"}``."""
    return {name: [list(row) for row in m] for name, m in (("X", X), ("W1", W1), ("W2", W2), ("T", T))}


def shapes() -> tuple[tuple[int, int], tuple[int, int]]:
    """The shapes of the W1 and W2 gradients: ``((3, 2), (2, 2))``."""
    return (len(W1), len(W1[0])), (len(W2), len(W2[0]))
