"""Independent oracles: the sympy symbolic oracle and the NumPy manual-backprop oracle."""
