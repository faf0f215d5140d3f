"""Catalog TOML fragments the tests build small catalogs from (one place, not a copy per test file)."""

#: ``Max(x, y)`` at the tie x = y = 1, one program per framework.
MAXIMUM_AT_TIE = """
[[case]]
id = "maximum@tie"
title = "maximum at a tie"
sympy = "Max(x, y)"
at = { x = 1, y = 1 }
tie = true
[case.programs]
torch = ["torch.maximum(x, y)"]
jax = ["jax.numpy.maximum(x, y)"]
"""
