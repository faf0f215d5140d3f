"""The adapter protocol shared by all frameworks; the modes, dtypes and value codec are :mod:`kinkcheck.vocabulary`'s,
re-exported here for the adapters."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol

from kinkcheck import expr as ex
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
    "FrameworkUnavailable",
    "ProgramError",
    "Unavailable",
    "decode",
    "encode",
    "flat_value",
    "flatten",
    "resolve",
    "short_error",
    "split_inputs",
]

class FrameworkUnavailable(RuntimeError):
    """The framework (or a device/mode/dtype of it) cannot be used in this Python; one-line reason."""


class Unavailable(RuntimeError):
    """A name, dtype or mode a program needs does not exist in this framework version (an ``unavailable`` cell)."""


class ProgramError(RuntimeError):
    """The program ran but did not produce a differentiable floating-point tensor."""


class Adapter(Protocol):
    """What the probe and the CLI need from a framework."""

    name: str

    @property
    def version(self) -> str:
        """The framework's version string (``torch.__version__``, ``jax.__version__``)."""

    def devices(self) -> list[str]:
        """Devices usable here: ``["cpu"]`` or ``["cpu", "cuda"]``."""

    def settings(self) -> dict[str, str]:
        """Framework settings that affect the values (recorded in the shard's provenance)."""

    def namespace(self) -> dict[str, Any]:
        """Root names for :func:`kinkcheck.expr.resolve_names`."""

    #: Modes this adapter knows (a subset of :data:`MODES`).
    modes: tuple[str, ...]

    def gradient(
        self, tree: ex.Node, at: Mapping[str, Any], dtype: str = "float64", device: str = "cpu", mode: str = "reverse",
        *, wrt: Sequence[str] | None = None, ints: Sequence[str] = (),
    ) -> dict[str, Any]:
        """Gradient of the program at ``at``: input name → float or nested list of floats (the input's shape).

        ``wrt``: the inputs differentiated, and the only keys of the result (None: every input not in
        ``ints``); the others are constants, float tensors of ``dtype``. ``ints``: inputs passed as integer
        tensors (int64; JAX without x64: int32), never differentiated (:class:`kinkcheck.expr.Inputs`).
        ``at`` may hold ``inf``/``nan``. Raises :class:`kinkcheck.expr.ExprError` or :class:`Unavailable`
        before running anything when a name does not resolve or ``wrt``/``ints`` do not fit ``at``;
        anything the framework raises while running propagates.
        """

    def callable_gradient(
        self, fn: Any, at: Mapping[str, Any], dtype: str = "float64", device: str = "cpu", mode: str = "reverse"
    ) -> dict[str, Any]:
        """Gradient of ``sum(fn(*inputs))`` in ``mode`` for a user's Python function (``kinkcheck check``).

        ``fn`` takes the inputs positionally, in the order of ``at``, as the framework's arrays of ``dtype``;
        returns input name → float or nested list. ``mode``: one of the adapter's :attr:`modes`, defined as
        in :data:`MODE_INFO` (an unknown one raises :class:`kinkcheck.expr.ExprError`; one this release
        lacks, :class:`Unavailable`). Whatever ``fn`` or the framework raises propagates.
        """

    def network_grads(
        self, tree: ex.Node, input_name: str, net: Any, dtype: str = "float32", device: str = "cpu"
    ) -> tuple[list[list[float]], list[list[float]]]:
        """W1 and W2 gradients of P0's two-layer net with the program as the activation (see oracles.backprop)."""


def resolve(tree: ex.Node, namespace: Mapping[str, Any], modules: Iterable[str], origins: Iterable[str]) -> dict[str, Any]:
    """:func:`kinkcheck.expr.resolve_names`, with a name missing in this version as :class:`Unavailable`.

    Refusals (a name outside the allowed modules) stay :class:`kinkcheck.expr.ExprError`.
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
def start_up_notices_dropped(*noise: str) -> Iterator[None]:
    """Drop from the process's standard error (file descriptor 2, where a C++ library writes) the lines
    matching one of the regular expressions ``noise`` while the block runs; every other line is written
    back when it ends, in order.

    For a framework's import: TensorFlow >= 2.16 logs its oneDNN notice through absl before absl's logging
    is initialized, which writes every severity to stderr with a warning about it, so ``TF_CPP_MIN_LOG_LEVEL``
    cannot silence them and they would open every ``kinkcheck grad`` answer (abseil/abseil-cpp#1718,
    tensorflow/tensorflow#102212). A no-op where descriptor 2 is closed.
    """
    import os
    import re
    import sys
    import tempfile

    fd = 2  # where native code writes, whatever object sys.stderr is
    with contextlib.suppress(AttributeError, OSError, ValueError):
        sys.stderr.flush()
    try:
        saved = os.dup(fd)
    except OSError:  # started with descriptor 2 closed
        yield
        return
    pattern = re.compile("|".join(f"(?:{n})" for n in noise))
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), fd)
        try:
            yield
        finally:
            with contextlib.suppress(AttributeError, OSError, ValueError):
                sys.stderr.flush()
            os.dup2(saved, fd)
            os.close(saved)
            sink.seek(0)
            kept = [line for line in sink.read().decode("utf-8", "replace").splitlines(keepends=True)
                    if not pattern.search(line)]
            if kept:
                os.write(fd, "".join(kept).encode("utf-8", "replace"))


#: The vector instruction sets that BLAS/LAPACK (MKL, OpenBLAS) and ATen pick their kernels by, widest first, as
#: /proc/cpuinfo names them. Rounding can follow them: MKL's QR of [[1, 1], [1, 1]] leaves R[1, 1] exactly 0
#: on its SSE4.2/AVX path and -4.7e-17 on AVX2/AVX-512, so torch's backward is nan on one and finite on the
#: other (catalog case qr@rank-deficient).
VECTOR_ISA: tuple[str, ...] = ("avx512f", "avx2", "avx", "sse4_2", "sve2", "sve", "asimd")


def _cpuinfo() -> dict[str, str]:
    """The first processor's fields of ``/proc/cpuinfo`` (Linux); {} where there is none or it is unreadable."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return {}
    fields: dict[str, str] = {}
    for line in text.split("\n\n", 1)[0].splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    return fields


def processor_name() -> str:
    """The CPU a ``cpu`` environment ran on: the ``model name`` of ``/proc/cpuinfo`` where ``platform.processor()``
    names none (empty on Debian, the machine type ``x86_64`` on Ubuntu), else ``platform.processor()``, else the
    machine type; its ``device_name`` in a shard's provenance, the same text for every adapter."""
    import platform

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
    import shutil
    import subprocess

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
    import itertools

    out = []
    for name, shape in shapes:
        for idx in itertools.product(*(range(n) for n in shape)):
            out.append((name, tuple(idx)))
    return out
