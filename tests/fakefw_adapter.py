"""The adapter of ``tests/fakefw`` (see ``tests/test_registry.py``): the :class:`kinkcheck.frameworks.base.Adapter`
protocol over a forward-mode dual-number library, float64 scalars only."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import fakefw

from kinkcheck import expr as ex
from kinkcheck.frameworks.base import ProgramError, Unavailable, check_mode, resolve, split_inputs


def load() -> FakeAdapter:
    return FakeAdapter()


class FakeAdapter:
    name = "fakefw"
    modes: tuple[str, ...] = ("reverse", "forward")
    version = fakefw.__version__

    def devices(self) -> list[str]:
        return ["cpu"]

    def settings(self) -> dict[str, str]:
        return {"arithmetic": "Python floats"}

    def namespace(self) -> dict[str, Any]:
        return {"fakefw": fakefw}

    def gradient(self, tree: ex.Node, at: Mapping[str, Any], dtype: str = "float64", device: str = "cpu",
                 mode: str = "reverse", *, wrt: Sequence[str] | None = None, ints: Sequence[str] = ()) -> dict[str, Any]:
        check_mode(mode, self.modes)
        if dtype != "float64":
            raise Unavailable(f"fakefw computes in float64 only, not {dtype}")
        names = resolve(tree, self.namespace(), ("fakefw",), ("fakefw",))
        diff = split_inputs(at, wrt, ints)
        if any(isinstance(v, list) for v in at.values()):
            raise Unavailable("fakefw has scalars only")
        out = {}
        for k in diff:  # one forward pass per input: the tangent seeded on it (both modes are forward here)
            value = ex.evaluate(tree, names, {n: fakefw.Dual(v, 1.0 if n == k else 0.0) for n, v in at.items()})
            if not isinstance(value, fakefw.Dual):
                raise ProgramError(f"program returned {type(value).__name__}, not a fakefw.Dual")
            out[k] = value.tangent
        return out

    def rounded(self, at: Mapping[str, Any], dtype: str) -> dict[str, Any] | None:
        return None  # float64 only: the catalog's points hold exactly

    def callable_gradient(self, fn: Any, at: Mapping[str, Any], dtype: str = "float64", device: str = "cpu",
                          mode: str = "reverse") -> dict[str, Any]:
        raise Unavailable("fakefw runs catalog programs only")

    def network_grads(self, tree: ex.Node, input_name: str, net: Any, dtype: str = "float32",
                      device: str = "cpu") -> tuple[list[list[float]], list[list[float]]]:
        raise Unavailable("fakefw has no matrix product")
