"""MLX adapter: evaluates call expressions with ``mlx.core`` arrays on MLX's CPU backend or its Metal GPU.

Modes (:data:`kinkcheck.vocabulary.MODE_INFO`): reverse is ``mx.grad`` of the output's sum (the VJP
with ones); forward is ``mx.jvp`` along each input component's unit tangent; jit is
``mx.compile(mx.grad(...))``; vmap is ``mx.vmap(mx.grad(...))`` over a batch of two copies of the point;
second-order is ``mx.grad`` of the gradient's sum (``H @ 1``). Every op runs on the shard's device: the
CPU (the default device of Linux's ``mlx[cpu]`` wheel; ``mx.stream(mx.cpu)`` where the GPU is the default)
or, for device ``metal``, the GPU on Apple silicon (``mx.gpu``, macOS's default); float64 exists on the CPU
only.

MLX documents no rule at a kink; its choices are the primitives' derivatives in ``mlx/primitives.cpp``:
``Maximum::vjp``/``jvp`` give a tie to the second argument (masks ``a > b`` and ``a <= b``), ``Minimum``
likewise (``a < b``, ``a >= b``), ``Abs`` is ``sign(x)`` (0 at 0), ``Reduce::vjp`` for max/min shares the
cotangent evenly among tied entries while ``Reduce::jvp`` takes the ``argmax``/``argmin`` entry (the first).
``mlx.nn.relu`` is ``mx.maximum(x, 0)`` (``python/mlx/nn/layers/activations.py``).
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from kinkcheck.frameworks.base import (Adapter, DeviceAbsent, FrameworkUnavailable, ImportGuard, ProgramError,
                                       Unavailable, by_unit_tangents, check_dtype, check_mode, of_differentiated,
                                       processor_name, resolve, returned)
from kinkcheck.language import expr as ex

GUARD = ImportGuard()
with GUARD:
    import mlx.core as mx
    import mlx.nn  # noqa: F401 - makes mlx.nn reachable from the expression root
    import numpy as np

#: Modules an expression may reach (``mx.random``, ``mx.metal``, ``mx.distributed``, ``mx.fast`` are out).
MODULES = frozenset(("mlx", "mlx.core", "mlx.core.linalg", "mlx.nn"))
#: Packages a resolved function or constant may come from.
ORIGINS = frozenset(("mlx",))
#: The only module whose functions ``mlx.nn.<name>`` may resolve to: the functional activations (the
#: layers are classes with state, the losses and initialisers are out of scope, ``nn.init`` draws randoms).
#: Checked by identity with that module's functions: their ``__module__`` differs between releases.
NN_FUNCTIONS = "mlx.nn.layers.activations"


def _on_device(device: str = "cpu", dtype: str | None = None) -> Any:
    """A context that runs every op on ``device``: none where it is already MLX's default device (the CPU on
    Linux's ``mlx[cpu]``, the GPU on macOS), else ``mx.stream(mx.cpu)`` / ``mx.stream(mx.gpu)``. Not the stream
    where it is not needed: under it MLX evaluates on another thread, and an error there (a float64 op the CPU
    backend lacks) aborts the interpreter instead of raising. Raises what :meth:`MlxAdapter._device` raises."""
    target = MlxAdapter._device(device, dtype)
    if not hasattr(mx, "stream") or mx.default_device().type == target:  # MLX 0.2 has no mx.stream
        return contextlib.nullcontext()
    return mx.stream(target)


def _metal_available() -> bool:
    """Whether MLX has a Metal GPU here (``mx.metal.is_available()``; False without ``mx.metal``)."""
    metal = getattr(mx, "metal", None)
    return bool(metal is not None and metal.is_available())


def _from_float64(value: Any, dt: Any) -> Any:
    """Python floats as an array of ``dt``, rounded once from float64. Built from a NumPy float64 array with
    ``dtype=mx.float64``: ``mx.array`` of a list goes through float32 in older releases (0.25, 0.26), and of a
    NumPy array without a dtype gives float32. MLX 0.21 and older have no float64: there MLX rounds to ``dt``
    itself."""
    f64 = getattr(mx, "float64", None)
    values = np.asarray(value, dtype=np.float64)
    return mx.array(values, dtype=dt) if f64 is None else mx.array(values, dtype=f64).astype(dt)


_FAILS: dict[str, str | None] = {}


def _fails(code: str) -> str | None:
    """Whether ``code`` (after ``import mlx.core as mx`` and ``import numpy as np``) fails in this MLX: None
    when it runs, else its last line of error output. Run once per process, in a child interpreter: in some
    releases an error MLX throws while evaluating leaves its state corrupt, and a later, unrelated call in the
    same process crashes (SIGSEGV), which would lose every cell of that case."""
    if code not in _FAILS:
        import subprocess  # slow to import

        try:
            run = subprocess.run([sys.executable, "-c", "import mlx.core as mx\nimport numpy as np\n" + code],
                                 capture_output=True, text=True, timeout=120, check=False)
            lines = (run.stderr or run.stdout).strip().splitlines()
            _FAILS[code] = None if run.returncode == 0 else (lines[-1].strip() if lines else f"exit {run.returncode}")
        except (OSError, subprocess.TimeoutExpired) as err:
            _FAILS[code] = f"{type(err).__name__}: {err}"
    return _FAILS[code]


#: The JVP of a float64 matrix product (P0's network in forward mode): MLX 0.26 – 0.28 raise "[AddMM::eval_cpu]
#: Currently only supports float32".
_F64_MATMUL_JVP = "a = mx.ones((2, 2), dtype=mx.float64)\nmx.eval(mx.jvp(lambda a: a @ a, [a], [a])[1])"
#: A compiled float64 gradient (jit mode): MLX 0.25 raises "Unsupported constant type".
_F64_COMPILE = ("a = mx.array(np.asarray([0.5]), dtype=mx.float64)\n"
                "mx.eval(mx.compile(mx.grad(lambda x: mx.maximum(x, 0.0).sum()))(a))")


def load() -> MlxAdapter:
    """The adapter; :class:`FrameworkUnavailable` (one line) when MLX does not import or has no CPU backend."""
    MlxAdapter.imported()
    try:
        with _on_device():
            mx.eval(mx.array([1.0]) + 1)
    except Exception as err:  # noqa: BLE001 - e.g. the bare 'mlx' wheel on Linux, without mlx-cpu
        raise FrameworkUnavailable(f"mlx {mx.__version__} cannot compute on the CPU here ({err}); "
                                   "install mlx[cpu]") from None
    return MlxAdapter()


def _lists(keys: Sequence[str], grads: Sequence[Any]) -> dict[str, Any]:
    """Arrays → input name → nested Python floats, through NumPy (``array.tolist`` of float64 raises in MLX
    0.25 – 0.29; float16/bfloat16 are widened exactly to float32 first)."""
    out = {}
    for k, g in zip(keys, grads):
        f64 = getattr(mx, "float64", None)
        wide = g if g.dtype == mx.float32 or (f64 is not None and g.dtype == f64) else g.astype(mx.float32)
        mx.eval(wide)  # an error here raises; inside NumPy's buffer conversion it would abort the interpreter
        out[k] = np.asarray(wide).tolist()
    return out


def _modes(f: Any, keys: list[str], args: list[Any], argnums: tuple[int, ...], mode: str) -> dict[str, Any]:
    """The derivative of ``sum(f(*args))`` with respect to ``args[i]`` for ``i`` in ``argnums`` in ``mode``:
    input name (``keys``) → nested floats. Shared by programs and by ``kinkcheck check``'s callables."""
    diff = [keys[i] for i in argnums]

    def total(*a: Any) -> Any:
        return f(*a).sum()

    if mode == "reverse":
        grads = mx.grad(total, argnums=list(argnums))(*args)
    elif mode == "jit":
        grads = mx.compile(mx.grad(total, argnums=list(argnums)))(*args)
    elif mode == "vmap":
        batched = mx.vmap(mx.grad(total, argnums=list(argnums)))(*[mx.stack([a, a]) for a in args])
        grads = [g[0] for g in (batched if isinstance(batched, (list, tuple)) else [batched])]
    elif mode == "second-order":
        def grad_sum(*a: Any) -> Any:
            g = mx.grad(total, argnums=list(argnums))(*a)
            return sum(x.sum() for x in (g if isinstance(g, (list, tuple)) else [g]))

        grads = mx.grad(grad_sum, argnums=list(argnums))(*args)
    else:  # forward: mx.jvp along each unit tangent of the differentiated inputs, the output's tangent summed
        wargs = [args[i] for i in argnums]

        f_wrt = of_differentiated(f, args, argnums)

        def along(i: int, idx: tuple[int, ...]) -> Any:
            onehot = np.zeros(tuple(wargs[i].shape))
            onehot[idx] = 1.0
            tangents = [mx.zeros_like(w) for w in wargs]
            tangents[i] = mx.array(onehot).astype(wargs[i].dtype)
            # the sum taken outside MLX, in float64: MLX 0.29 and older have no JVP for Sum
            _, (jvp,) = mx.jvp(f_wrt, wargs, tangents)
            return np.sum(np.asarray(_lists(["t"], [jvp])["t"], dtype=np.float64))

        return by_unit_tangents([(k, tuple(w.shape)) for k, w in zip(diff, wargs)], along)
    grads = list(grads) if isinstance(grads, (list, tuple)) else [grads]
    for k, i, g in zip(diff, argnums, grads):
        if tuple(g.shape) != tuple(args[i].shape):  # MLX 0.2's vmap of mx.maximum(0.0, x) batches a wrong axis
            raise ProgramError(f"{mode} gave input {k!r} (shape {tuple(args[i].shape)}) a gradient of shape "
                               f"{tuple(g.shape)}")
    return _lists(diff, grads)


class MlxAdapter(Adapter):
    """The :class:`kinkcheck.frameworks.base.Adapter` for MLX (CPU backend)."""

    name = "mlx"
    guard = GUARD
    version_module = "mlx.core"

    def devices(self) -> list[str]:
        """``cpu``, and ``metal`` where MLX has a Metal GPU (macOS on Apple silicon)."""
        return ["cpu", "metal"] if _metal_available() else ["cpu"]

    def device_name(self, device: str) -> str:
        """The processor; on ``metal`` the GPU's name as MLX reports it (``device_info()["device_name"]``)."""
        if device == "metal":
            return self.accelerator(device).get("accelerator") or processor_name()
        return processor_name()

    def accelerator(self, device: str) -> dict[str, str]:
        """On ``metal``: the GPU (``mx.device_info()``, ``mx.metal.device_info()`` before 0.29) and its
        architecture, for the shard's ``runner``; nothing on the CPU."""
        if device != "metal":
            return {}
        info_of = getattr(mx, "device_info", None) or getattr(mx.metal, "device_info", None)
        info = info_of() if callable(info_of) else {}
        return {"accelerator": str(info.get("device_name", "")), "metal": str(info.get("architecture", ""))}

    def settings(self) -> dict[str, str]:
        """Framework settings that affect the values, recorded in the shard's provenance."""
        return {"device": "every op on the shard's device: MLX's CPU backend (cpu) or its Metal GPU (metal)"}

    def _dtype(self, dtype: str) -> Any:
        check_dtype(dtype)
        dt = getattr(mx, dtype, None)
        if dt is None:
            raise Unavailable(f"mlx {mx.__version__} has no {dtype}")
        return dt

    @staticmethod
    def _device(device: str, dtype: str | None = None) -> Any:
        """The MLX device of a kinkcheck device: ``mx.cpu``, ``mx.gpu`` for ``metal``. Raises FrameworkUnavailable
        for ``cuda`` and for ``metal`` without a Metal GPU, :class:`Unavailable` for float64 on ``metal`` ("Arrays
        with type float64 only work with CPU operations", MLX docs, Data Types), ExprError for an unknown one."""
        if device == "metal":
            if not _metal_available():
                raise DeviceAbsent("not measured: no Metal device (mx.metal.is_available() is False; "
                                           "MLX's GPU backend is Metal on Apple silicon)")
            if dtype == "float64":
                raise Unavailable("float64 does not exist on Metal: MLX runs float64 on the CPU only")
            return mx.gpu
        if device != "cpu":
            if device == "cuda":
                raise FrameworkUnavailable("not measured: kinkcheck runs MLX on its CPU and Metal backends only")
            raise ex.ExprError(f"unknown device {device!r} (known: cpu, metal)")
        return mx.cpu

    def _resolve(self, tree: ex.Node) -> dict[str, Any]:
        # mx.compile'd activations (mlx.nn.relu) say they come from nanobind in MLX 0.21 and from mlx (no
        # __module__) in 0.25: resolved with nanobind allowed, then every such object must be one of them
        names = resolve(tree, self.namespace(), MODULES, ORIGINS | {"nanobind"})
        activations = [v for v in vars(importlib.import_module(NN_FUNCTIONS)).values() if not isinstance(v, type)]
        for dotted, obj in names.items():
            is_activation = any(obj is a for a in activations)
            if dotted.startswith("mlx.nn.") and not is_activation:
                raise ex.ExprError(f"{dotted!r} is refused: only mlx.nn's functional activations are allowed "
                                   "(layers hold state; use mlx.nn.relu, not mlx.nn.ReLU)")
            if ex._origin(obj).split(".")[0] == "nanobind" and not is_activation:
                raise ex.ExprError(f"{dotted!r} comes from 'nanobind', outside mlx")
        missing = [n.name for n in ex.walk(tree) if isinstance(n, ex.Attr) and not hasattr(mx.array, n.name)]
        if missing:  # an array method this release lacks: an unavailable cell
            raise Unavailable(f"'mlx.core.array.{missing[0]}' does not exist in this mlx installation")
        return names

    @staticmethod
    def _check_float64(tree: ex.Node, mode: str) -> None:
        """:class:`Unavailable` for a float64 computation this MLX's CPU backend lacks (checked in a child
        interpreter, :func:`_fails`): a compiled float64 gradient (jit), the JVP of a float64 matrix product."""
        why = None
        if mode == "jit":
            why = _fails(_F64_COMPILE)
            what = "compiles no float64 gradient"
        elif mode == "forward" and any(isinstance(n, ex.BinOp) and n.op == "@" for n in ex.walk(tree)):
            why = _fails(_F64_MATMUL_JVP)
            what = "has no float64 JVP of a matrix product"
        if why is not None:
            raise Unavailable(f"mlx {mx.__version__} {what} on the CPU ({why}); not run: the error corrupts "
                              "MLX's state and crashes later calls")

    @staticmethod
    def _check_output(out: Any) -> Any:
        if not isinstance(out, mx.array):
            raise ProgramError(f"program returned {type(out).__name__}, not an mlx array")
        if not any(out.dtype == getattr(mx, t) for t in ("float16", "bfloat16", "float32", "float64") if hasattr(mx, t)):
            raise ProgramError(f"program returned a {out.dtype} array, which has no gradient")
        return out

    def _inputs(self, at: Mapping[str, Any], dtype: str, ints: Sequence[str] = ()) -> list[Any]:
        """The point's arrays: ``ints`` as int64, the others ``dtype`` (rounded from float64 by MLX)."""
        dt = self._dtype(dtype)
        return [mx.array(np.asarray(at[k], dtype=np.int64), dtype=mx.int64) if k in ints else _from_float64(at[k], dt)
                for k in at]

    def _run(self, tree: ex.Node, f: Any, at: Mapping[str, Any], dtype: str, device: str, mode: str,
             diff: tuple[str, ...], ints: tuple[str, ...]) -> dict[str, Any]:
        """See :meth:`kinkcheck.frameworks.base.Adapter.gradient`; the result has the ``wrt`` inputs only.

        Raises :class:`Unavailable` for a dtype this MLX lacks; MLX's own errors (a float64 op the CPU
        backend does not implement, an op ``mx.compile`` cannot trace) propagate.
        """
        self._device(device, dtype)  # float64 on Metal is unavailable before any CPU float64 check
        if dtype == "float64" and getattr(mx, "float64", None) is not None:
            self._check_float64(tree, mode)
        keys = list(at)
        with _on_device(device, dtype):
            return _modes(f, keys, self._inputs(at, dtype, ints), tuple(keys.index(k) for k in diff), mode)

    def callable_gradient(
        self, fn: Any, at: Mapping[str, Any], dtype: str = "float64", device: str = "cpu", mode: str = "reverse"
    ) -> dict[str, Any]:
        """See :meth:`kinkcheck.frameworks.base.Adapter.callable_gradient`; ``mode`` is any of :attr:`modes`."""
        check_mode(mode, self.modes)
        keys = list(at)
        with _on_device(device, dtype):
            args = self._inputs(at, dtype)
            return _modes(lambda *a: returned(fn(*a), mx.array, "an mlx.core.array"), keys, args,
                          tuple(range(len(keys))), mode)

    def rounded(self, at: Mapping[str, Any], dtype: str) -> dict[str, Any] | None:
        """See :meth:`kinkcheck.frameworks.base.Adapter.rounded`; on MLX's CPU."""
        with _on_device():
            return super().rounded(at, dtype)

    def _round_trip(self, dtype: str) -> Any:
        dt = self._dtype(dtype)
        return lambda v: _lists(["v"], [_from_float64(v, dt)])["v"]
