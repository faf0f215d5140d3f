"""P0's two-layer network as the probe measures it: the program as the activation
(:func:`kinkcheck.probe.cells.network_tree`), differentiated by the adapter's own ``gradient`` at P0's point
(:func:`kinkcheck.probe.cells.network_point`); the gradients of W1 and W2 as nested lists of floats."""

from __future__ import annotations

from typing import Any

import numpy as np

from kinkcheck.probe.cells import network_point, network_tree


def network_grads(adapter: Any, tree: Any, dtype: str = "float32", device: str = "cpu",
                  mode: str = "reverse") -> tuple[list[list[float]], list[list[float]]]:
    """W1's and W2's gradients of P0's squared-error loss with ``tree`` (over ``x``) as the activation."""
    got = adapter.gradient(network_tree(tree, "x"), network_point(), dtype, device, mode)
    return (np.asarray(got["W1"], dtype=np.float64).tolist(), np.asarray(got["W2"], dtype=np.float64).tolist())
