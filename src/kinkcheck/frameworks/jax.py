"""JAX adapter: evaluates call expressions with ``jax.numpy`` arrays.

Reverse mode is ``jax.vjp`` with a cotangent of ones (``jax.grad`` for a scalar output); forward mode is
``jax.jvp`` along each input component's unit tangent, with the output summed. float64 is evaluated
with ``jax_enable_x64`` switched on (it needs it); every other dtype with it off, JAX's default, so a
float32 program sees what most users see (with x64 on, a Python float literal becomes float64 and
``jax.lax.max(x, 0.0)`` refuses the mix).
Where JAX defines a kink's derivative: ``jax/_src/lax/lax.py`` (``max``/``min`` JVPs split ties evenly,
``abs``, ``sign``), ``jax/_src/nn/functions.py`` (``relu``'s custom JVP: 0 at 0).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from kinkcheck import expr as ex
from kinkcheck.frameworks.base import (
    FrameworkUnavailable,
    ProgramError,
    check_dtype,
    check_mode,
    resolve,
    unit_tangents,
)

try:
    import jax
    import jax.numpy as jnp
    import numpy as np

except ImportError as _err:  # pragma: no cover - depends on the environment
    jax = None
    _IMPORT_ERROR = str(_err)


@contextlib.contextmanager
def _x64(enabled: bool) -> Iterator[None]:
    """``jax_enable_x64`` set to ``enabled`` inside the block (the context manager where JAX has one)."""
    manager = getattr(jax, "enable_x64", None)  # jax >= 0.4.36; older: jax.experimental.enable_x64
    if manager is None:
        try:
            from jax.experimental import disable_x64, enable_x64

            manager = lambda on: enable_x64() if on else disable_x64()  # noqa: E731
        except ImportError:
            manager = None
    if manager is not None:
        with manager(enabled):
            yield
        return
    old = bool(jax.config.jax_enable_x64)
    jax.config.update("jax_enable_x64", enabled)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", old)


#: Modules an expression may reach; everything else a framework module re-exports (os, sys, builtins,
#: serialization) is out of reach. See kinkcheck.expr.resolve_names.
MODULES = frozenset(("jax", "jax.numpy", "jax.numpy.linalg", "jax.numpy.fft", "jax.nn", "jax.lax", "jax.scipy", "jax.scipy.special"))
#: Packages a resolved function or constant may come from.
ORIGINS = frozenset(("jax", "jaxlib"))


def load() -> JaxAdapter:
    if jax is None:
        raise FrameworkUnavailable(f"jax is not installed in this Python ({_IMPORT_ERROR})")
    return JaxAdapter()


class JaxAdapter:
    """The :class:`kinkcheck.frameworks.base.Adapter` for JAX."""

    name = "jax"

    @property
    def version(self) -> str:
        return str(jax.__version__)

    def devices(self) -> list[str]:
        try:
            gpus = jax.devices("gpu")
        except RuntimeError:
            gpus = []
        return ["cpu", "cuda"] if gpus else ["cpu"]

    def settings(self) -> dict[str, str]:
        """Framework settings that affect the values, recorded in the shard's provenance."""
        return {"jax_enable_x64": "on for float64, off (JAX's default) for other dtypes"}

    def namespace(self) -> dict[str, Any]:
        return {"jax": jax}

    def _device(self, device: str) -> Any:
        if device == "cpu":
            return jax.devices("cpu")[0]
        if device == "cuda":
            try:
                return jax.devices("gpu")[0]
            except RuntimeError:
                raise FrameworkUnavailable("not measured: no CUDA device") from None
        raise ex.ExprError(f"unknown device {device!r} (known: cpu, cuda)")

    def _resolve(self, tree: ex.Node) -> dict[str, Any]:
        return resolve(tree, self.namespace(), MODULES, ORIGINS)

    @staticmethod
    def _check_output(out: Any) -> Any:
        if not isinstance(out, jax.Array):
            raise ProgramError(f"program returned {type(out).__name__}, not an array")
        if not jnp.issubdtype(out.dtype, jnp.inexact):
            raise ProgramError(f"program returned a {out.dtype} array, which has no gradient")
        return out

    def _inputs(self, at: Mapping[str, Any], dtype: str, device: str) -> list[Any]:
        check_dtype(dtype)
        dev = self._device(device)
        return [jax.device_put(jnp.asarray(np.asarray(at[k], dtype=np.float64), dtype=dtype), dev) for k in at]

    def gradient(
        self, tree: ex.Node, at: Mapping[str, Any], dtype: str = "float64", device: str = "cpu", mode: str = "reverse"
    ) -> dict[str, Any]:
        check_mode(mode)
        check_dtype(dtype)
        with _x64(dtype == "float64"):
            return self._gradient(tree, at, dtype, device, mode)

    def _gradient(self, tree: ex.Node, at: Mapping[str, Any], dtype: str, device: str, mode: str) -> dict[str, Any]:
        names = self._resolve(tree)
        keys = list(at)
        args = self._inputs(at, dtype, device)

        def f(*a: Any) -> Any:
            return self._check_output(ex.evaluate(tree, names, dict(zip(keys, a))))

        if mode == "reverse":
            out, vjp = jax.vjp(f, *args)
            grads = vjp(jnp.ones_like(out))
            return {k: np.asarray(g, dtype=np.float64).tolist() for k, g in zip(keys, grads)}
        result = {k: np.zeros(np.shape(a), dtype=np.float64) for k, a in zip(keys, args)}
        for name, idx in unit_tangents([(k, np.shape(a)) for k, a in zip(keys, args)]):
            tangents = [jnp.zeros_like(a) for a in args]
            i = keys.index(name)
            tangents[i] = tangents[i].at[idx].set(1)
            _, jvp = jax.jvp(lambda *a: f(*a).sum(), tuple(args), tuple(tangents))
            result[name][idx] = float(jvp)
        return {k: v.tolist() for k, v in result.items()}

    def network_grads(
        self, tree: ex.Node, input_name: str, net: Any, dtype: str = "float32", device: str = "cpu"
    ) -> tuple[list[list[float]], list[list[float]]]:
        check_dtype(dtype)
        with _x64(dtype == "float64"):
            return self._network_grads(tree, input_name, net, dtype, device)

    def _network_grads(
        self, tree: ex.Node, input_name: str, net: Any, dtype: str, device: str
    ) -> tuple[list[list[float]], list[list[float]]]:
        names = self._resolve(tree)
        X, W1, W2, T = self._inputs({"X": net.X, "W1": net.W1, "W2": net.W2, "T": net.target}, dtype, device)

        def loss(w1: Any, w2: Any) -> Any:
            H = self._check_output(ex.evaluate(tree, names, {input_name: X @ w1}))
            return ((H @ w2 - T) ** 2).sum()

        g1, g2 = jax.grad(loss, argnums=(0, 1))(W1, W2)
        return np.asarray(g1, dtype=np.float64).tolist(), np.asarray(g2, dtype=np.float64).tolist()
