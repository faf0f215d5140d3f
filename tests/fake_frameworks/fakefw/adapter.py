"""The adapter of ``tests/fakefw`` on :class:`kinkcheck.frameworks.base.Adapter`: a forward-mode dual-number library,
float64 scalars only. What the base class does not do for it is what this framework does differently."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kinkcheck.language import expr as ex
from kinkcheck.frameworks.base import Adapter, ImportGuard, ProgramError, Unavailable

GUARD = ImportGuard()
with GUARD:
    import fakefw


class FakeAdapter(Adapter):
    name = "fakefw"
    guard = GUARD
    modules = origins = frozenset(("fakefw",))
    dtype_refusal = "fakefw computes in float64 only, not {dtype}"

    def settings(self) -> dict[str, str]:
        return {"arithmetic": "Python floats"}

    @staticmethod
    def _check_output(out: Any) -> Any:
        if not isinstance(out, fakefw.Dual):
            raise ProgramError(f"program returned {type(out).__name__}, not a fakefw.Dual")
        return out

    def _run(self, tree: ex.Node, f: Any, at: Mapping[str, Any], dtype: str, device: str, mode: str,
             diff: tuple[str, ...], ints: tuple[str, ...]) -> dict[str, Any]:
        self._has_dtype(dtype)
        if any(isinstance(v, list) for v in at.values()):
            raise Unavailable("fakefw has scalars only")
        # one forward pass per input: the tangent seeded on it (both modes are forward here)
        return {k: f(*(fakefw.Dual(v, 1.0 if n == k else 0.0) for n, v in at.items())).tangent for k in diff}

    def callable_gradient(self, fn: Any, at: Mapping[str, Any], dtype: str = "float64", device: str = "cpu",
                          mode: str = "reverse") -> dict[str, Any]:
        raise Unavailable("fakefw runs catalog programs only")


load = FakeAdapter.load
