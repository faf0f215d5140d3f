"""Autograd's rows of the sympy mapping (:data:`kinkcheck.oracles.mapping.TABLE`): none of its own.
``autograd.numpy`` wraps NumPy's functions with NumPy's names and arguments, so ``jax.numpy``'s rows, which follow
NumPy too, describe them (:data:`CLONES`). Text only: imports nothing of autograd."""

from __future__ import annotations

#: Prefix → the namespace whose rows describe it (:data:`kinkcheck.oracles.mapping.NUMPY_CLONES`).
CLONES = {"autograd.numpy.": "jax.numpy."}
