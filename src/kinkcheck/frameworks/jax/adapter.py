"""JAX adapter: evaluates call expressions with ``jax.numpy`` arrays.

Modes (:data:`kinkcheck.vocabulary.MODE_INFO`): reverse is ``jax.grad`` of the output's sum (the VJP
with ones); jit is ``jax.jit(jax.grad(...))``; forward is ``jax.jvp`` along each input component's unit
tangent; jacfwd and jacrev are ``jax.jacfwd``/``jax.jacrev`` summed over the output; vmap is
``jax.vmap(jax.grad(...))``; second-order is ``jax.hessian`` times ones (``H @ 1``). float64 is evaluated
with ``jax_enable_x64`` switched on (it needs it); every other dtype with it off, JAX's default, so a
float32 program sees what most users see (with x64 on, a Python float literal becomes float64 and
``jax.lax.max(x, 0.0)`` refuses the mix).
Where JAX defines a kink's derivative: ``jax/_src/lax/lax.py`` (``max``/``min`` JVPs split ties evenly,
``abs``, ``sign``), ``jax/_src/nn/functions.py`` (``relu``'s custom JVP: 0 at 0).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from kinkcheck.frameworks.base import (Adapter, DeviceAbsent, ImportGuard, ProgramError, by_unit_tangents, check_dtype,
                                       check_mode, nvidia_driver, of_differentiated, processor_name, returned,
                                       rounded_point)
from kinkcheck.language import expr as ex

GUARD = ImportGuard()
with GUARD:
    import jax
    import jax.numpy as jnp
    import numpy as np


@contextlib.contextmanager
def _x64(enabled: bool) -> Iterator[None]:
    """``jax_enable_x64`` set to ``enabled`` inside the block (the context manager where JAX has one)."""
    manager = getattr(jax, "enable_x64", None)  # jax >= 0.4.36; older: jax.experimental.enable_x64
    if manager is None:
        try:
            from jax.experimental import disable_x64, enable_x64

            manager = lambda on: enable_x64() if on else disable_x64()
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
#: serialization) is out of reach. See kinkcheck.language.expr.resolve_names.
MODULES = frozenset(("jax", "jax.numpy", "jax.numpy.linalg", "jax.numpy.fft", "jax.nn", "jax.lax", "jax.scipy", "jax.scipy.special"))
#: Packages a resolved function or constant may come from.
ORIGINS = frozenset(("jax", "jaxlib"))


def _modes(f: Any, keys: Sequence[str], args: list[Any], argnums: tuple[int, ...], mode: str) -> dict[str, Any]:
    """The derivative of ``sum(f(*args))`` with respect to ``args[i]`` for ``i`` in ``argnums``, in ``mode``
    (:data:`kinkcheck.vocabulary.MODE_INFO`): input name (``keys[i]``) → nested floats. The other arguments are
    passed too, not differentiated. Shared by programs and by ``kinkcheck check``'s callables (every argument)."""
    diff = [keys[i] for i in argnums]
    wargs = [args[i] for i in argnums]

    def total(*a: Any) -> Any:
        return f(*a).sum()

    def lists(grads: Any) -> dict[str, Any]:
        return {k: np.asarray(g, dtype=np.float64).tolist() for k, g in zip(diff, grads)}

    if mode == "reverse":
        return lists(jax.grad(total, argnums=argnums)(*args))
    if mode == "jit":
        return lists(jax.jit(jax.grad(total, argnums=argnums))(*args))
    if mode == "vmap":
        batched = [jnp.stack([a, a]) for a in args]
        return lists(g[0] for g in jax.vmap(jax.grad(total, argnums=argnums))(*batched))
    if mode in ("jacfwd", "jacrev"):
        jac = getattr(jax, mode)(f, argnums=argnums)(*args)
        out_ndim = jnp.ndim(f(*args))
        return lists(jnp.sum(j, axis=tuple(range(out_ndim))) for j in jac)
    if mode == "second-order":
        hess = jax.hessian(total, argnums=argnums)(*args)  # hess[i][j]: shape wargs[i].shape + wargs[j].shape
        return lists(
            sum(jnp.sum(hess[i][j], axis=tuple(range(jnp.ndim(wargs[i]), jnp.ndim(hess[i][j]))))
                for j in range(len(wargs)))
            for i in range(len(wargs))
        )

    # forward: jax.jvp along each unit tangent of the differentiated inputs
    total_wrt = of_differentiated(total, args, argnums)

    def along(i: int, idx: tuple[int, ...]) -> Any:
        tangents = [jnp.zeros_like(a) for a in wargs]
        tangents[i] = tangents[i].at[idx].set(1)
        return jax.jvp(total_wrt, tuple(wargs), tuple(tangents))[1]

    return by_unit_tangents([(k, np.shape(a)) for k, a in zip(diff, wargs)], along)


class JaxAdapter(Adapter):
    """The :class:`kinkcheck.frameworks.base.Adapter` for JAX."""

    name = "jax"
    guard = GUARD
    modules, origins = MODULES, ORIGINS

    def devices(self) -> list[str]:
        try:
            gpus = jax.devices("gpu")
        except RuntimeError:
            gpus = []
        return ["cpu", "cuda"] if gpus else ["cpu"]

    def device_name(self, device: str) -> str:
        """The accelerator's ``device_kind`` (e.g. ``"NVIDIA H200"``), or the platform's processor for ``cpu``."""
        if device == "cuda":
            return str(self._device("cuda").device_kind)
        return processor_name()

    def accelerator(self, device: str) -> dict[str, str]:
        """The accelerator of ``device`` for the shard's ``runner``: its ``device_kind``, the runtime its client
        reports (``platform_version``, e.g. the CUDA version) and the NVIDIA driver (:func:`nvidia_driver`)."""
        if device != "cuda":
            return {}
        dev = self._device("cuda")
        return {"accelerator": str(dev.device_kind), "cuda": str(getattr(dev.client, "platform_version", "")),
                "driver": nvidia_driver()}

    def settings(self) -> dict[str, str]:
        """Framework settings that affect the values, recorded in the shard's provenance."""
        return {"jax_enable_x64": "on for float64, off (JAX's default) for other dtypes"}

    def _device(self, device: str) -> Any:
        if device == "cpu":
            return jax.devices("cpu")[0]
        if device == "cuda":
            try:
                return jax.devices("gpu")[0]
            except RuntimeError:
                raise DeviceAbsent("not measured: no CUDA device") from None
        raise ex.ExprError(f"unknown device {device!r} (known: cpu, cuda)")

    def _placed(self, device: str) -> Any:
        """The context in which a program runs on ``device``: ``jax.default_device`` of it where it is not JAX's
        default device already, so that an array the program makes itself (``jnp.arange(-1, 2)``) is made where its
        inputs are committed, instead of being made on the default device and moved (on a CUDA machine the GPU is
        the default, so CPU and CUDA probes enter nothing)."""
        dev = self._device(device)
        place = getattr(jax, "default_device", None)
        if place is None or dev == jax.devices()[0]:
            return contextlib.nullcontext()
        return place(dev)

    @staticmethod
    def _check_output(out: Any) -> Any:
        if not isinstance(out, jax.Array):
            raise ProgramError(f"program returned {type(out).__name__}, not an array")
        if not jnp.issubdtype(out.dtype, jnp.inexact):
            raise ProgramError(f"program returned a {out.dtype} array, which has no gradient")
        return out

    def _inputs(self, at: Mapping[str, Any], dtype: str, device: str, ints: Sequence[str] = ()) -> list[Any]:
        """The point's arrays: ``ints`` as JAX's default integer (int64 with x64 on, else int32), others ``dtype``."""
        check_dtype(dtype)
        dev = self._device(device)
        out = []
        for k in at:
            if k in ints:
                itype = jax.dtypes.canonicalize_dtype(np.int64)
                values = np.asarray(at[k], dtype=np.int64)
                if values.size and (values.min() < np.iinfo(itype).min or values.max() > np.iinfo(itype).max):
                    raise ex.ExprError(f"int: input {k!r} does not fit in {np.dtype(itype).name} (JAX without x64, "
                                       f"as for --dtype {dtype})")
                out.append(jax.device_put(jnp.asarray(values, dtype=itype), dev))
            else:
                out.append(jax.device_put(jnp.asarray(np.asarray(at[k], dtype=np.float64), dtype=dtype), dev))
        return out

    def _run(self, tree: ex.Node, f: Any, at: Mapping[str, Any], dtype: str, device: str, mode: str,
             diff: tuple[str, ...], ints: tuple[str, ...]) -> dict[str, Any]:
        """See :meth:`kinkcheck.frameworks.base.Adapter.gradient`; the result has the ``wrt`` inputs only."""
        keys = list(at)
        with _x64(dtype == "float64"), self._placed(device):
            return _modes(f, keys, self._inputs(at, dtype, device, ints), tuple(keys.index(k) for k in diff), mode)

    def callable_gradient(
        self, fn: Any, at: Mapping[str, Any], dtype: str = "float64", device: str = "cpu", mode: str = "reverse"
    ) -> dict[str, Any]:
        """See :meth:`kinkcheck.frameworks.base.Adapter.callable_gradient`; ``mode`` is any of :attr:`modes`."""
        check_mode(mode, self.modes)
        check_dtype(dtype)
        with _x64(dtype == "float64"), self._placed(device):
            args = self._inputs(at, dtype, device)
            returned(fn(*args), jax.Array, "a jax.Array")
            return _modes(fn, list(at), args, tuple(range(len(args))), mode)

    def rounded(self, at: Mapping[str, Any], dtype: str) -> dict[str, Any] | None:
        """The point after a round trip through ``dtype``, when it differs from ``at`` (else None)."""
        check_dtype(dtype)
        with _x64(dtype == "float64"):
            return rounded_point(at, lambda v: np.asarray(jnp.asarray(np.asarray(v, dtype=np.float64), dtype=dtype),
                                                          dtype=np.float64).tolist())


load = JaxAdapter.load
