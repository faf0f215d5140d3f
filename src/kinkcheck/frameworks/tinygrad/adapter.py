"""tinygrad adapter: evaluates call expressions with ``tinygrad.Tensor`` methods.

Modes (:data:`kinkcheck.vocabulary.MODE_INFO`): reverse is ``Tensor.backward`` of the output's sum
(the VJP with ones; ``requires_grad=True`` on the differentiated inputs where the release has the flag,
tinygrad >= 0.13 fills ``.grad`` of every float tensor in the graph); jit is the same function under
``TinyJit``, called three times with fresh inputs (TinyJit runs the first call eagerly, captures the kernels
on the second and replays them on the third), the third call's gradient recorded. tinygrad has no forward
mode and no vmap.

Device: tinygrad's CPU device compiles its kernels with clang (``CC``); where it cannot run (no clang) the
adapter runs on the PYTHON device, tinygrad's pure-Python interpreter of the same kernels, and makes it
the default device; :meth:`TinygradAdapter.settings` records which.

tinygrad documents no rule at a kink; its choices are the derivatives in ``tinygrad/gradient.py``
(``tinygrad/mixin/gradient.py`` from 0.14): ``Ops.MAX`` gives each argument half of a tie, a max
reduction shares the cotangent evenly among tied entries; the composite functions are written with
``where``: ``relu`` is ``(x > 0).where(x, 0)`` (0 at 0), ``clamp`` is ``(x < lo).where(lo, x)`` then
``(x > hi).where(hi, x)`` (1 at both bounds), ``abs`` is ``x * x.sign()`` (0 at 0).
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from kinkcheck.language import expr as ex
from kinkcheck.frameworks.base import Adapter, FrameworkUnavailable, ImportGuard, ProgramError, \
    Unavailable, check_dtype, check_mode, flatten, returned, short_error

GUARD = ImportGuard()
with GUARD:
    from tinygrad import Device, Tensor, dtypes

#: Modules an expression may reach: the package itself, for ``tinygrad.Tensor.<method>`` and ``tinygrad.dtypes``.
MODULES = frozenset(("tinygrad",))
#: Packages a resolved function or constant may come from.
ORIGINS = frozenset(("tinygrad",))
#: The dotted prefixes an expression may name: Tensor's methods and the dtypes (``tinygrad.nn`` holds layers
#: and state loaders, ``tinygrad.Device``/``Context``/``TinyJit`` configure or compile).
ALLOWED_PREFIXES = (("tinygrad", "Tensor"), ("tinygrad", "dtypes"))
#: Tensor members refused as a name, a method of an input or a keyword: reading a URL, a raw pointer or
#: uninitialised memory, moving data to a device (``DISK:<file>`` writes a file), assigning into a buffer,
#: running backward or the scheduler from inside a program, reading values back to Python, drawing random
#: initialisations.
DENIED_MEMBERS = frozenset({
    "from_url", "from_blob", "from_uop", "empty", "empty_like", "assign", "to", "shard", "uop", "lazydata",
    "device", "schedule", "schedule_with_vars", "kernelize", "realize", "custom_kernel", "fetch", "train", "test",
    "training", "no_grad", "backward", "gradient", "grad", "requires_grad", "replace", "numpy", "tolist", "item",
    "data", "uniform", "glorot_uniform", "kaiming_uniform", "kaiming_normal", "scaled_uniform", "randint", "randn",
    "randperm", "rand_like", "randn_like", "clone", "call", "fuse", "contiguous_backward", "disk", "bitcast",
    "nbytes", "to_", "shard_", "shard_like", "as_param", "is_param_", "callify", "invalids", "schedule_linear",
    "threefry", "random_bits", "decode_hevc_frame",
})
#: Devices tried in order: the compiled CPU device, then the pure-Python interpreter.
DEVICES = ("CPU", "PYTHON")


def _device_works(dev: str) -> str | None:
    """None when ``dev`` computes a small gradient here, else the one-line reason."""
    try:
        x = Tensor([0.0, 2.0], device=dev, dtype=dtypes.float32)
        if _has_requires_grad():
            x.requires_grad = True
        (x * x).sum().backward()
        if x.grad is None or x.grad.tolist() != [0.0, 4.0]:
            return f"{dev} computed a wrong gradient"
        return None
    except Exception as err:  # noqa: BLE001 - e.g. FileNotFoundError: no clang for the CPU device
        return short_error(err, 160)


def _has_requires_grad() -> bool:
    return "requires_grad" in inspect.signature(Tensor.__init__).parameters


def _set_default(dev: str) -> None:
    """Make ``dev`` tinygrad's default device (``Device.DEFAULT`` before 0.13, ``DEV.value`` after)."""
    try:
        Device.DEFAULT = dev
    except AttributeError:  # tinygrad >= 0.13: "setting Device.DEFAULT is deprecated, use DEV.value"
        from tinygrad.helpers import DEV

        DEV.value = dev


_CHOSEN: dict[str, str] = {}


def load() -> TinygradAdapter:
    """The adapter on the first device of :data:`DEVICES` that computes here.

    Raises :class:`FrameworkUnavailable` (one line) when tinygrad does not import or no device computes.
    """
    TinygradAdapter.imported()
    if not _CHOSEN:
        reasons = {}
        for dev in DEVICES:
            _set_default(dev)  # before the check: backward and constants reach for the default device
            why = _device_works(dev)
            if why is None:
                _CHOSEN.update(device=dev, why=reasons.get("CPU", ""))
                break
            reasons[dev] = why
        else:
            raise FrameworkUnavailable("tinygrad has no device that computes here: " +
                                       "; ".join(f"{d}: {w}" for d, w in reasons.items()))
    return TinygradAdapter(_CHOSEN["device"], _CHOSEN["why"])


def _shape(value: Any) -> tuple[int, ...]:
    """The shape of a nested list of numbers (``()`` for a number)."""
    shape: list[int] = []
    while isinstance(value, (list, tuple)):
        shape.append(len(value))
        value = value[0] if value else 0
    return tuple(shape)


def _to_list(t: Any) -> Any:
    """A tensor → nested Python floats (float16/bfloat16 widened exactly through float32)."""
    wide = dtypes.float64 if t.dtype == dtypes.float64 else dtypes.float32
    return t.cast(wide).tolist()


class TinygradAdapter(Adapter):
    """The :class:`kinkcheck.frameworks.base.Adapter` for tinygrad (one device: CPU, or PYTHON without clang)."""

    name = "tinygrad"
    guard = GUARD
    modules, origins = MODULES, ORIGINS
    cuda_refusal = "kinkcheck runs tinygrad on its CPU/PYTHON device only"

    def __init__(self, device: str, cpu_reason: str = "") -> None:
        self._dev = device
        self._cpu_reason = cpu_reason
        self._stores: dict[str, str] = {}  # dtype -> "" when the device stores it, else why not

    def device_name(self, device: str) -> str:
        return self._dev

    def settings(self) -> dict[str, str]:
        """The tinygrad device the ``cpu`` cells ran on, and why not CPU when it is PYTHON."""
        out = {"device": self._dev}
        if self._dev != "CPU":
            out["device_reason"] = f"the CPU device does not run here ({self._cpu_reason})"
        return out

    def _dtype(self, dtype: str) -> Any:
        """tinygrad's dtype; :class:`Unavailable` when the release lacks it or the device cannot store it."""
        check_dtype(dtype)
        dt = getattr(dtypes, dtype, None)
        if dt is None:
            raise Unavailable(f"tinygrad {self.version} has no {dtype}")
        if dtype not in self._stores:
            try:
                # a kernel that reads and writes the dtype's buffers, as every program does
                x = Tensor([1.0, 2.0], device=self._dev, dtype=dt).realize()
                if (x * x).realize().cast(dtypes.float32).tolist() != [1.0, 4.0]:
                    raise RuntimeError(f"{dtype} computed 1 * 1, 2 * 2 wrongly")
                self._stores[dtype] = ""
            except Exception as err:  # noqa: BLE001
                why = short_error(err)
                if self._dev == "PYTHON" and dtype == "float16" and sys.version_info < (3, 12):
                    # tinygrad <= 0.12's ops_python.py: assert storage_fmt != "e" before Python 3.12
                    why = "its PYTHON device stores float16 with memoryview.cast('e'), which needs Python >= 3.12"
                self._stores[dtype] = f"tinygrad {self.version} cannot hold {dtype} on {self._dev}: {why}"
        if self._stores[dtype]:
            raise Unavailable(self._stores[dtype])
        return dt

    def _resolve(self, tree: ex.Node) -> dict[str, Any]:
        for n in ex.walk(tree):
            members = []
            if isinstance(n, ex.Name):
                if not any(n.parts[:len(p)] == p for p in ALLOWED_PREFIXES) or n.parts == ("tinygrad", "Tensor"):
                    raise ex.ExprError(f"{n.dotted!r} is refused: a tinygrad program names only tinygrad.Tensor's "
                                       "methods (tinygrad.Tensor.relu), not its constructor, and tinygrad.dtypes")
                members = list(n.parts[2:])
            elif isinstance(n, ex.Attr):
                members = [n.name]
            elif isinstance(n, ex.Call):
                members = [k for k, _ in n.kwargs]
            bad = [m for m in members if m in DENIED_MEMBERS]
            if bad:
                raise ex.ExprError(f"{bad[0]!r} is refused in a tinygrad program (I/O, devices, buffers, backward, "
                                   "randomness and reading values back are out of reach)")
        names = super()._resolve(tree)
        missing = [n.name for n in ex.walk(tree) if isinstance(n, ex.Attr) and not hasattr(Tensor, n.name)]
        if missing:  # a method this release lacks (x.hardtanh before it was added): an unavailable cell
            raise Unavailable(f"'Tensor.{missing[0]}' does not exist in this tinygrad installation")
        return names

    @staticmethod
    def _check_output(out: Any) -> Any:
        if not isinstance(out, Tensor):
            raise ProgramError(f"program returned {type(out).__name__}, not a tinygrad.Tensor")
        if not dtypes.is_float(out.dtype):
            raise ProgramError(f"program returned a {out.dtype} tensor, which has no gradient")
        return out

    def _buffers(self, at: Mapping[str, Any], dtype: str, ints: Sequence[str] = ()) -> list[Any]:
        """The point's values as flat, realized device buffers: ``ints`` int64, the others ``dtype``.

        Built from Python floats in the dtype (correctly rounded; a float64 tensor cast down is not: the
        PYTHON device folds float64 -> float16 -> float64 to the float32 value), and never from a Python
        scalar: tinygrad makes that a constant, two equal constants one node (``x.maximum(y)`` at a tie
        would see one input) and TinyJit refuses it as an input.
        """
        dt = self._dtype(dtype)
        return [Tensor(flatten(at[k]), device=self._dev, dtype=dtypes.int64 if k in ints else dt).realize()
                for k in at]

    @staticmethod
    def _views(at: Mapping[str, Any], buffers: Sequence[Any], diff: Sequence[str]) -> list[Any]:
        """Each buffer reshaped to its input's shape; ``requires_grad`` on the differentiated ones where the
        release has the flag (tinygrad < 0.13)."""
        flag = _has_requires_grad()
        out = []
        for k, b in zip(at, buffers):
            t = b.reshape(_shape(at[k]))
            if flag and k in diff:
                t.requires_grad = True
            out.append(t)
        return out

    def _reverse(self, f: Any, args: list[Any], keys: list[str], diff: Sequence[str]) -> list[Any]:
        """``f(*args).sum().backward()``: the differentiated inputs' ``.grad`` (zeros where the output does not
        depend on one), realized."""
        f(*args).sum().backward()
        grads = []
        for k, a in zip(keys, args):
            if k in diff:
                grads.append((a.grad if a.grad is not None else a.zeros_like()).contiguous().realize())
        return grads

    def _modes(self, f: Any, at: Mapping[str, Any], dtype: str, mode: str, diff: Sequence[str],
               ints: Sequence[str] = ()) -> dict[str, Any]:
        keys = list(at)
        if mode == "reverse":
            grads = self._reverse(f, self._views(at, self._buffers(at, dtype, ints), diff), keys, diff)
        else:  # jit
            from tinygrad import TinyJit

            jitted = TinyJit(lambda *b: self._reverse(f, self._views(at, b, diff), keys, diff))
            for _ in range(3):  # the third call replays the captured kernels
                grads = jitted(*self._buffers(at, dtype, ints))
        return {k: _to_list(g) for k, g in zip(diff, grads)}

    def _run(self, tree: ex.Node, f: Any, at: Mapping[str, Any], dtype: str, device: str, mode: str,
             diff: tuple[str, ...], ints: tuple[str, ...]) -> dict[str, Any]:
        """See :meth:`kinkcheck.frameworks.base.Adapter.gradient`. Raises :class:`Unavailable` for a dtype or name
        this tinygrad lacks; its own errors propagate."""
        self._cpu_only(device)
        return self._modes(f, at, dtype, mode, diff, ints)

    def callable_gradient(
        self, fn: Any, at: Mapping[str, Any], dtype: str = "float64", device: str = "cpu", mode: str = "reverse"
    ) -> dict[str, Any]:
        """See :meth:`kinkcheck.frameworks.base.Adapter.callable_gradient`; ``mode`` is any of :attr:`modes`."""
        check_mode(mode, self.modes)
        self._cpu_only(device)
        return self._modes(lambda *a: returned(fn(*a), Tensor, "a tinygrad.Tensor"), at, dtype, mode, list(at))

    def _round_trip(self, dtype: str) -> Any:
        dt = self._dtype(dtype)
        return lambda v: Tensor(flatten(v), device=self._dev, dtype=dt).reshape(_shape(v)).cast(dtypes.float64).tolist()
