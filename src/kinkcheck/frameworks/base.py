"""The adapters' base class and what they share; the modes, dtypes and value codec are :mod:`kinkcheck.vocabulary`'s,
re-exported here for the adapters."""

from __future__ import annotations

import abc
import contextlib
import importlib
import itertools
import math
import os
import platform
import re
import shutil
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from importlib import metadata
from typing import Any

from kinkcheck.language import expr as ex
from kinkcheck.platforms.isa import cpuinfo as _cpuinfo
from kinkcheck.registry import framework
from kinkcheck.vocabulary import (COMPILED_MODES, DTYPES, FRAMEWORK_MODES, GRADIENT_MODES, MODE_INFO, MODES, decode,
                                  encode, flat_value, flatten)

__all__ = [
    "COMPILED_MODES",
    "DTYPES",
    "FRAMEWORK_MODES",
    "GRADIENT_MODES",
    "MODES",
    "MODE_INFO",
    "Adapter",
    "DeviceAbsent",
    "FrameworkUnavailable",
    "ImportGuard",
    "ProgramError",
    "Unavailable",
    "adapter_loader",
    "by_unit_tangents",
    "decode",
    "encode",
    "flat_value",
    "flatten",
    "of_differentiated",
    "resolve",
    "returned",
    "short_error",
    "split_inputs",
]

class FrameworkUnavailable(RuntimeError):
    """The framework (or a device/mode/dtype of it) cannot be used in this Python; one-line reason."""


class DeviceAbsent(FrameworkUnavailable):
    """This machine has no such device (``"not measured: no CUDA device"``): what a face answers from the report's
    cells of that device instead (``kinkcheck grad --device cuda`` on a machine without one)."""


class Unavailable(RuntimeError):
    """A name, dtype or mode a program needs does not exist in this framework version (an ``unavailable`` cell)."""


class ProgramError(RuntimeError):
    """The program ran but did not produce a differentiable floating-point tensor."""


class ImportGuard:
    """An adapter module's import of its framework: ``with GUARD: import torch``. An ``ImportError`` inside the
    block is kept (its text) instead of raised, so the module imports where the framework is not installed and
    :meth:`Adapter.load` says why in one line."""

    def __init__(self) -> None:
        self.error: str | None = None

    def __enter__(self) -> ImportGuard:
        return self

    def __exit__(self, kind: Any, err: Any, tb: Any) -> bool:
        if kind is not None and issubclass(kind, ImportError):
            self.error = str(err)
            return True
        return False


class Adapter(abc.ABC):
    """What the probe and the CLI need from a framework, and what the adapters share.

    A subclass names its framework (:attr:`name`, the registry key), its modes, the guard of its module's import
    (:attr:`guard`) and the modules and packages an expression may reach (:attr:`modules`, :attr:`origins`); it
    implements :meth:`_run` (the derivative of a checked program in one mode) and :meth:`_check_output`. The base
    owns loading, the version, the CPU-only device check, the dtype refusals of a framework with fewer dtypes than
    :data:`DTYPES` (its registry record's), the rounded point and the order of checks in :meth:`gradient`.
    """

    name: str
    #: Modes this adapter knows (a subset of :data:`MODES`): the registry record's, set on subclassing.
    modes: tuple[str, ...]
    #: The guard around the module's framework import.
    guard: ImportGuard
    #: Modules an expression may reach, and packages a resolved object may come from (:func:`resolve`).
    modules: frozenset[str] = frozenset()
    origins: frozenset[str] = frozenset()
    #: The module whose ``__version__`` is the version (default: :attr:`name`); without one, the distribution's.
    version_module: str | None = None
    #: Devices named in an unknown device's message, and why ``cuda`` is not measured (a CPU-only adapter).
    known_devices: tuple[str, ...] = ("cpu",)
    cuda_refusal: str = ""
    #: Why a dtype of :data:`DTYPES` the framework lacks is unavailable (``{dtype}`` is filled in).
    dtype_refusal: str = "{name} has no {dtype}"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "modes" not in vars(cls):
            cls.modes = FRAMEWORK_MODES[cls.name]

    @classmethod
    def load(cls) -> Adapter:
        """The adapter, once the framework imported (:meth:`imported`)."""
        cls.imported()
        return cls()

    @classmethod
    def imported(cls) -> None:
        """Raises :class:`FrameworkUnavailable` (one line) when the framework did not import in this Python."""
        if cls.guard.error is not None:
            raise FrameworkUnavailable(f"{cls.name} is not installed in this Python ({cls.guard.error})")

    @property
    def version(self) -> str:
        """The framework's version string (``torch.__version__``; the distribution's where there is none)."""
        found = getattr(importlib.import_module(self.version_module or self.name), "__version__", None)
        return str(found or metadata.version(_record(self.name).distribution))

    def devices(self) -> list[str]:
        """Devices usable here: ``["cpu"]`` or ``["cpu", "cuda"]``."""
        return ["cpu"]

    def device_name(self, device: str) -> str:
        """The platform's processor (:func:`processor_name`)."""
        return processor_name()

    def accelerator(self, device: str) -> dict[str, str]:
        """The accelerator of ``device`` for the shard's ``runner`` (nothing on the CPU)."""
        return {}

    def settings(self) -> dict[str, str]:
        """Framework settings that affect the values (recorded in the shard's provenance)."""
        return {}

    def namespace(self) -> dict[str, Any]:
        """Root names for :func:`kinkcheck.language.expr.resolve_names`: the framework's package under its name."""
        return {self.name: importlib.import_module(self.name)}

    def _resolve(self, tree: ex.Node) -> dict[str, Any]:
        return resolve(tree, self.namespace(), self.modules, self.origins)

    def _cpu_only(self, device: str) -> None:
        """Nothing on ``cpu``; :class:`FrameworkUnavailable` on ``cuda`` (:attr:`cuda_refusal`); ExprError else."""
        if device == "cuda":
            raise FrameworkUnavailable(f"not measured: {self.cuda_refusal}")
        if device != "cpu":
            raise ex.ExprError(f"unknown device {device!r} (known: {', '.join(self.known_devices)})")

    def _has_dtype(self, dtype: str) -> str:
        """``dtype`` when the framework has it (its registry record's dtypes); else :class:`Unavailable`
        (:attr:`dtype_refusal`). An unknown dtype is an ExprError."""
        check_dtype(dtype)
        if dtype not in _record(self.name).dtypes:
            raise Unavailable(self.dtype_refusal.format(name=self.name, dtype=dtype))
        return dtype

    def _program(self, tree: ex.Node, names: Mapping[str, Any], keys: Sequence[str]) -> Any:
        """The program as a function of its inputs (positionally, in ``keys``' order), its output checked."""
        def program(*args: Any) -> Any:
            return self._check_output(ex.evaluate(tree, names, dict(zip(keys, args))))

        return program

    @staticmethod
    @abc.abstractmethod
    def _check_output(out: Any) -> Any:
        """``out`` when it is the framework's floating-point array, else :class:`ProgramError`."""

    def gradient(
        self, tree: ex.Node, at: Mapping[str, Any], dtype: str = "float64", device: str = "cpu", mode: str = "reverse",
        *, wrt: Sequence[str] | None = None, ints: Sequence[str] = (),
    ) -> dict[str, Any]:
        """Gradient of the program at ``at``: input name → float or nested list of floats (the input's shape).

        ``wrt``: the inputs differentiated, and the only keys of the result (None: every input not in
        ``ints``); the others are constants, float tensors of ``dtype``. ``ints``: inputs passed as integer
        tensors (int64; JAX without x64: int32), never differentiated (:class:`kinkcheck.language.points.Inputs`).
        ``at`` may hold ``inf``/``nan``. Raises :class:`kinkcheck.language.expr.ExprError` or :class:`Unavailable`
        before running anything when a name does not resolve or ``wrt``/``ints`` do not fit ``at``;
        anything the framework raises while running propagates. The checks run in this order: the mode, the
        dtype's name, the inputs, the names (:meth:`_resolve`); then :meth:`_run` places and runs the program.
        """
        check_mode(mode, self.modes)
        check_dtype(dtype)
        diff = split_inputs(at, wrt, ints)
        names = self._resolve(tree)
        return self._run(tree, self._program(tree, names, list(at)), at, dtype, device, mode, diff, tuple(ints))

    def _run(self, tree: ex.Node, f: Any, at: Mapping[str, Any], dtype: str, device: str, mode: str,
             diff: tuple[str, ...], ints: tuple[str, ...]) -> dict[str, Any]:
        """The derivative of ``sum(f(*inputs))`` (``at``'s inputs positionally) w.r.t. ``diff`` in ``mode``."""
        raise TypeError(f"{type(self).__name__} implements neither gradient nor _run")

    @abc.abstractmethod
    def callable_gradient(
        self, fn: Any, at: Mapping[str, Any], dtype: str = "float64", device: str = "cpu", mode: str = "reverse"
    ) -> dict[str, Any]:
        """Gradient of ``sum(fn(*inputs))`` in ``mode`` for a user's Python function (``kinkcheck check``).

        ``fn`` takes the inputs positionally, in the order of ``at``, as the framework's arrays of ``dtype``;
        returns input name → float or nested list. ``mode``: one of the adapter's :attr:`modes`, defined as
        in :data:`MODE_INFO` (an unknown one raises :class:`kinkcheck.language.expr.ExprError`; one this release
        lacks, :class:`Unavailable`). Whatever ``fn`` or the framework raises propagates.
        """

    def rounded(self, at: Mapping[str, Any], dtype: str) -> dict[str, Any] | None:
        """The point after a round trip through ``dtype``, when it differs from ``at`` (else None; None for a
        dtype the framework lacks, whose cells are unavailable)."""
        check_dtype(dtype)
        try:
            cast = self._round_trip(dtype)
        except Unavailable:
            return None
        return rounded_point(at, cast)

    def _round_trip(self, dtype: str) -> Any:
        """Nested floats → the same after a round trip through ``dtype`` (:class:`Unavailable` when it lacks it)."""
        import numpy as np

        self._has_dtype(dtype)
        return lambda v: np.asarray(v, dtype=np.float64).astype(dtype).astype(np.float64).tolist()


def adapter_loader(package: str) -> Any:
    """A framework folder's ``load``: imports ``<package>.adapter`` (and so the framework) when called, and returns
    what that module's ``load()`` returns; importing the folder's package imports no framework."""
    def load() -> Adapter:
        return importlib.import_module(f"{package}.adapter").load()

    load.__doc__ = f"The adapter of {package} (``{package}.adapter.load``), importing the framework."
    return load


def _record(name: str) -> Any:
    """The registry record of ``name`` (:func:`kinkcheck.registry.framework`)."""
    return framework(name)


def returned(out: Any, kind: Any, what: str) -> Any:
    """``out`` when a user's function returned ``kind``, else TypeError: a Python float would differentiate to
    0 silently (``what``: ``"a torch.Tensor"``)."""
    if not isinstance(out, kind):
        raise TypeError(f"the function returned a {type(out).__name__}, not {what}")
    return out


def of_differentiated(f: Any, args: Sequence[Any], positions: Sequence[int]) -> Any:
    """``f`` as a function of the differentiated arguments only: ``g(*w)`` calls ``f`` with ``args[i]`` replaced by
    ``w[k]`` for the ``k``-th ``i`` of ``positions``, every other argument as in ``args`` (for a JVP or a VJP that
    differentiates some inputs and passes the others)."""
    def of_w(*w: Any) -> Any:
        a = list(args)
        for i, v in zip(positions, w):
            a[i] = v
        return f(*a)

    return of_w


def by_unit_tangents(shapes: Sequence[tuple[str, Sequence[int]]], jvp: Any) -> dict[str, Any]:
    """Forward mode's derivative, one JVP per scalar component: input name → nested floats of its shape.

    ``shapes``: (input name, shape) of the differentiated inputs, in order; ``jvp(k, idx)``: the JVP of the output's
    sum along the unit tangent of component ``idx`` of the ``k``-th input (a float, or anything ``float`` takes).
    """
    def zeros(shape: Sequence[int]) -> Any:
        return 0.0 if not shape else [zeros(shape[1:]) for _ in range(shape[0])]

    result = {name: zeros(tuple(shape)) for name, shape in shapes}
    order = [name for name, _ in shapes]
    for name, idx in unit_tangents(shapes):
        value = float(jvp(order.index(name), idx))
        if not idx:
            result[name] = value
            continue
        row = result[name]
        for i in idx[:-1]:
            row = row[i]
        row[idx[-1]] = value
    return result


def resolve(tree: ex.Node, namespace: Mapping[str, Any], modules: Iterable[str], origins: Iterable[str]) -> dict[str, Any]:
    """:func:`kinkcheck.language.expr.resolve_names`, with a name missing in this version as :class:`Unavailable`.

    Refusals (a name outside the allowed modules) stay :class:`kinkcheck.language.expr.ExprError`.
    """
    try:
        return ex.resolve_names(tree, namespace, modules, origins)
    except ex.NameMissing as err:
        raise Unavailable(str(err)) from None


def split_inputs(at: Mapping[str, Any], wrt: Sequence[str] | None, ints: Sequence[str]) -> tuple[str, ...]:
    """The differentiated inputs in ``at``'s order: ``wrt``, or every input not in ``ints`` when it is None.

    Raises
    ------
    ExprError
        A name in ``wrt`` or ``ints`` that ``at`` lacks, an input in both, or nothing to differentiate.
    """
    for name in (*(wrt or ()), *ints):
        if name not in at:
            raise ex.ExprError(f"input {name!r} is not in the point (inputs: {', '.join(at)})")
    both = [k for k in (wrt or ()) if k in ints]
    if both:
        raise ex.ExprError(f"input {both[0]!r} is an integer input; integer inputs are never differentiated")
    names = tuple(k for k in at if (k in wrt if wrt is not None else k not in ints))
    if not names:
        raise ex.ExprError("no input to differentiate (every input is an integer input or left out of --wrt)")
    return names


def short_error(err: BaseException, limit: int = 240) -> str:
    """``"TypeError: first line of the message"``, cut to ``limit`` characters."""
    msg = str(err).strip().splitlines()[0] if str(err).strip() else ""
    text = f"{type(err).__name__}: {msg}" if msg else type(err).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


@contextlib.contextmanager
def native_stderr(keep: Any = None) -> Iterator[list[str]]:
    """What the process writes to file descriptor 2 (where a C++ library logs) while the block runs: yields a
    list that holds those lines once the block ends, also when it raises. The lines ``keep`` accepts (default
    all) are written back in order when it ends. A no-op (an empty list) where descriptor 2 is closed.
    """
    import tempfile  # slow to import

    fd = 2  # where native code writes, whatever object sys.stderr is
    seen: list[str] = []
    with contextlib.suppress(AttributeError, OSError, ValueError):
        sys.stderr.flush()
    try:
        saved = os.dup(fd)
    except OSError:  # started with descriptor 2 closed
        yield seen
        return
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), fd)
        try:
            yield seen
        finally:
            with contextlib.suppress(AttributeError, OSError, ValueError):
                sys.stderr.flush()
            os.dup2(saved, fd)
            os.close(saved)
            sink.seek(0)
            seen.extend(sink.read().decode("utf-8", "replace").splitlines(keepends=True))
            kept = [line for line in seen if keep is None or keep(line)]
            if kept:
                os.write(fd, "".join(kept).encode("utf-8", "replace"))


@contextlib.contextmanager
def start_up_notices_dropped(*noise: str) -> Iterator[None]:
    """Drop from the process's standard error (file descriptor 2, where a C++ library writes) the lines
    matching one of the regular expressions ``noise`` while the block runs; every other line is written
    back when it ends, in order (:func:`native_stderr`).

    For a framework's import: TensorFlow >= 2.16 logs its oneDNN notice through absl before absl's logging
    is initialized, which writes every severity to stderr with a warning about it, so ``TF_CPP_MIN_LOG_LEVEL``
    cannot silence them and they would open every ``kinkcheck grad`` answer (abseil/abseil-cpp#1718,
    tensorflow/tensorflow#102212). A no-op where descriptor 2 is closed.
    """
    pattern = re.compile("|".join(f"(?:{n})" for n in noise))
    with native_stderr(lambda line: not pattern.search(line)):
        yield


#: The vector instruction sets that BLAS/LAPACK (MKL, OpenBLAS) and ATen pick their kernels by, widest first, as
#: /proc/cpuinfo names them. Rounding can follow them: MKL's QR of [[1, 1], [1, 1]] leaves R[1, 1] exactly 0
#: on its SSE4.2/AVX path and -4.7e-17 on AVX2/AVX-512, so torch's backward is nan on one and finite on the
#: other (catalog case qr@rank-deficient).
VECTOR_ISA: tuple[str, ...] = ("avx512f", "avx2", "avx", "sse4_2", "sve2", "sve", "asimd")


def processor_name() -> str:
    """The CPU a ``cpu`` environment ran on: the ``model name`` of ``/proc/cpuinfo`` where ``platform.processor()``
    names none (empty on Debian, the machine type ``x86_64`` on Ubuntu), else ``platform.processor()``, else the
    machine type; its ``device_name`` in a shard's provenance, the same text for every adapter."""
    name = platform.processor()
    if not name or name == platform.machine():
        name = _cpuinfo().get("model name") or name
    return name or platform.machine()


def vector_isa() -> str:
    """The vector instruction sets of :data:`VECTOR_ISA` this CPU has, widest first, space-separated
    (``"avx512f avx2 avx sse4_2"`` on an AVX-512 Xeon, ``"asimd"`` on most arm64 Linux machines); "" where
    ``/proc/cpuinfo`` does not exist (macOS, Windows)."""
    info = _cpuinfo()
    flags = set((info.get("flags") or info.get("Features") or "").split())
    return " ".join(f for f in VECTOR_ISA if f in flags)


def nvidia_driver() -> str:
    """The NVIDIA driver's version (``nvidia-smi --query-gpu=driver_version``), "" where there is none."""
    import subprocess  # slow to import

    smi = shutil.which("nvidia-smi")
    if smi is None:
        return ""
    try:
        out = subprocess.run([smi, "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=30, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.strip().splitlines()[0].strip() if out.strip() else ""


def check_dtype(dtype: str) -> None:
    if dtype not in DTYPES:
        raise ex.ExprError(f"unknown dtype {dtype!r} (known: {', '.join(DTYPES)})")


def check_mode(mode: str, known: Sequence[str] = MODES) -> None:
    if mode not in known:
        raise ex.ExprError(f"unknown mode {mode!r} (known: {', '.join(known)})")


def rounded_point(at: Mapping[str, Any], cast: Any) -> dict[str, Any] | None:
    """The point as the framework holds it in a dtype, when that differs from ``at`` (else None).

    ``cast`` maps a nested list of floats to the same nested list after a round trip through the dtype.
    -0.0 and 0.0 count as different (the sign bit is part of the input).
    """
    out, differs = {}, False
    for k, v in at.items():
        r = cast(v)
        out[k] = r
        a, b = flatten(v), flatten(r)
        differs |= any(float(x) != float(y) or math.copysign(1, float(x)) != math.copysign(1, float(y))
                       for x, y in zip(a, b))
    return encode_point(out) if differs else None


def encode_point(at: Mapping[str, Any]) -> dict[str, Any]:
    return {k: encode(v) for k, v in at.items()}


def unit_tangents(shapes: Sequence[tuple[str, Sequence[int]]]) -> list[tuple[str, tuple[int, ...]]]:
    """(input name, multi-index) of every scalar component, in input order then row-major."""
    out = []
    for name, shape in shapes:
        for idx in itertools.product(*(range(n) for n in shape)):
            out.append((name, tuple(idx)))
    return out
