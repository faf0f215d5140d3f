"""MLX's rows of the sympy mapping (:data:`kinkcheck.oracles.mapping.TABLE`): none of its own. ``mlx.core``
follows NumPy's names and positional arguments (round half to even, the median of an even length the mean:
``python/src/ops.cpp`` docstrings), so ``jax.numpy``'s rows describe it (:data:`CLONES`). Text only: imports
nothing of mlx."""

from __future__ import annotations

#: Prefix → the namespace whose rows describe it (:data:`kinkcheck.oracles.mapping.NUMPY_CLONES`).
CLONES = {"mlx.core.": "jax.numpy."}
