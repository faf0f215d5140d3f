"""fakefw: a framework that exists only for ``tests/test_registry.py``'s fake-framework flow.

A forward-mode autodiff library on Python floats (dual numbers), with its own conventions at the kinks, chosen
to differ from PyTorch's and JAX's so the report can tell them apart: ``relu'(0) = 1`` (the right derivative),
``maximum(a, b)`` sends a tie to the second argument, ``abs'(0) = 0``.
"""

from __future__ import annotations

__version__ = "0.3.1"


class Dual:
    """A value and its tangent (the derivative along one input direction)."""

    def __init__(self, value: float, tangent: float = 0.0) -> None:
        self.value, self.tangent = float(value), float(tangent)

    @staticmethod
    def lift(other: object) -> Dual:
        return other if isinstance(other, Dual) else Dual(float(other))  # type: ignore[arg-type]

    def __add__(self, other: object) -> Dual:
        o = Dual.lift(other)
        return Dual(self.value + o.value, self.tangent + o.tangent)

    __radd__ = __add__

    def __neg__(self) -> Dual:
        return Dual(-self.value, -self.tangent)

    def __sub__(self, other: object) -> Dual:
        return self + (-Dual.lift(other))

    def __rsub__(self, other: object) -> Dual:
        return Dual.lift(other) - self

    def __mul__(self, other: object) -> Dual:
        o = Dual.lift(other)
        return Dual(self.value * o.value, self.tangent * o.value + self.value * o.tangent)

    __rmul__ = __mul__

    def __truediv__(self, other: object) -> Dual:
        o = Dual.lift(other)
        return Dual(self.value / o.value, (self.tangent * o.value - self.value * o.tangent) / (o.value * o.value))


def relu(x: Dual) -> Dual:
    return Dual(max(x.value, 0.0), x.tangent if x.value >= 0 else 0.0)


def maximum(a: object, b: object) -> Dual:
    a, b = Dual.lift(a), Dual.lift(b)
    return a if a.value > b.value else b


def abs(x: Dual) -> Dual:
    return Dual(x.value if x.value >= 0 else -x.value, 0.0 if x.value == 0 else (x.tangent if x.value > 0 else -x.tangent))
