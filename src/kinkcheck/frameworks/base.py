"""The adapter protocol shared by all frameworks, and the JSON encoding of gradient values."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from kinkcheck import expr as ex

__all__ = ["DTYPES", "MODES", "Adapter", "FrameworkUnavailable", "ProgramError", "Unavailable", "encode", "resolve",
           "short_error"]

#: dtypes an adapter accepts (issue 4 adds float16 and bfloat16 to the probe).
DTYPES: tuple[str, ...] = ("float64", "float32", "float16", "bfloat16")

#: Differentiation modes. ``reverse``: VJP with a cotangent of ones (``y.backward(ones)``, ``jax.vjp``);
#: ``forward``: JVP along each input component's unit tangent (``torch.func.jvp``, ``jax.jvp``), summed over
#: the output like the VJP, so the two are comparable component by component.
MODES: tuple[str, ...] = ("reverse", "forward")


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

    def gradient(
        self, tree: ex.Node, at: Mapping[str, Any], dtype: str = "float64", device: str = "cpu", mode: str = "reverse"
    ) -> dict[str, Any]:
        """Gradient of the program at ``at``: input name → float or nested list of floats (the input's shape).

        Raises :class:`kinkcheck.expr.ExprError` or :class:`Unavailable` before running anything when a
        name does not resolve; anything the framework raises while running propagates.
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


def encode(value: Any) -> Any:
    """Floats (or nested lists of floats) → JSON-ready: non-finite values as ``"nan"``, ``"inf"``, ``"-inf"``.

    -0.0 is kept (JSON writes ``-0.0``).
    """
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    v = float(value)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def decode(value: Any) -> Any:
    """Inverse of :func:`encode`."""
    if isinstance(value, list):
        return [decode(v) for v in value]
    if isinstance(value, str):
        return float(value)
    return float(value)


def flatten(value: Any) -> list[float]:
    """Nested lists → flat list, row-major (the oracle's component order)."""
    if isinstance(value, (list, tuple)):
        out: list[float] = []
        for v in value:
            out.extend(flatten(v))
        return out
    return [value]


def flat_value(value: Mapping[str, Any]) -> list[float]:
    """A shard's ``value`` (input name → number or nested list, non-finite as strings) → flat floats, input order."""
    return [float(v) for vals in value.values() for v in flatten(decode(vals))]


def short_error(err: BaseException, limit: int = 240) -> str:
    """``"TypeError: first line of the message"``, cut to ``limit`` characters."""
    msg = str(err).strip().splitlines()[0] if str(err).strip() else ""
    text = f"{type(err).__name__}: {msg}" if msg else type(err).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


def check_dtype(dtype: str) -> None:
    if dtype not in DTYPES:
        raise ex.ExprError(f"unknown dtype {dtype!r} (known: {', '.join(DTYPES)})")


def check_mode(mode: str) -> None:
    if mode not in MODES:
        raise ex.ExprError(f"unknown mode {mode!r} (known: {', '.join(MODES)})")


def unit_tangents(shapes: Sequence[tuple[str, Sequence[int]]]) -> list[tuple[str, tuple[int, ...]]]:
    """(input name, multi-index) of every scalar component, in input order then row-major."""
    import itertools

    out = []
    for name, shape in shapes:
        for idx in itertools.product(*(range(n) for n in shape)):
            out.append((name, tuple(idx)))
    return out
