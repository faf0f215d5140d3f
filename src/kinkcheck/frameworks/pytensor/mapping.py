"""PyTensor's rows of the sympy mapping (:data:`kinkcheck.oracles.mapping.TABLE`): none of its own.
``pytensor.tensor`` names its functions after NumPy's, with NumPy's arguments, so ``jax.numpy``'s rows describe them
(:data:`CLONES`); a name the table lacks (``pt.switch``) stays unmapped. Text only: imports nothing of pytensor."""

from __future__ import annotations

#: Prefix → the namespace whose rows describe it (:data:`kinkcheck.oracles.mapping.NUMPY_CLONES`), the longer first.
CLONES = {"pytensor.tensor.math.": "jax.numpy.", "pytensor.tensor.": "jax.numpy."}
