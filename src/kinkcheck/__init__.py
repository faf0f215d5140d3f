"""kinkcheck: which gradient does each autodiff framework return at a kink, and is it a valid one?

Measures PyTorch and JAX at kinks, ties and jumps, judges the values against a sympy oracle (one-sided
derivatives, Clarke generalized gradient, minimum-norm element) and a pure-NumPy manual-backprop oracle,
and renders a report across environments.
"""

__version__ = "0.1.0"
