"""Catalog TOML fragments the tests build small catalogs from (one place, not a copy per test file)."""

#: relu at 0, P0's kink: the case's head, which each catalog follows with its own sources and programs.
RELU_AT_0 = """[[case]]
id = "relu@0"
title = "relu at 0"
sympy = "Max(x, 0)"
at = { x = 0 }
activation = "relu"
"""

#: ``Max(x, y)`` at the tie x = y = 1: the case's head, without programs.
MAXIMUM_TIE_HEAD = """[[case]]
id = "maximum@tie"
title = "maximum at a tie"
sympy = "Max(x, y)"
at = { x = 1, y = 1 }
tie = true
"""

#: ``Max(x, y)`` at the tie x = y = 1, one program per framework.
MAXIMUM_AT_TIE = "\n" + MAXIMUM_TIE_HEAD + """[case.programs]
torch = ["torch.maximum(x, y)"]
jax = ["jax.numpy.maximum(x, y)"]
"""

#: A staged case (``staged/catalog.toml`` beside a catalog): relu written as ``maximum`` with a zero tensor.
STAGED_RELU = """
[[case]]
id = "relu-written@0"
title = "relu written as maximum(x, 0) at 0"
sympy = "Max(x, 0)"
at = { x = 0 }
[case.programs]
torch = ["torch.maximum(x, torch.zeros_like(x))"]
jax = ["jax.numpy.maximum(x, 0.0)"]
"""
