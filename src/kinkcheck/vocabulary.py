"""The words every part of kinkcheck shares: the dtypes, the differentiation modes, and the JSON codec of
gradient values (non-finite numbers as strings).

A leaf module (the standard library, :mod:`kinkcheck.dtypes` and :mod:`kinkcheck.registry` only), so that the
report, the read API and the command line name a mode or decode a value without importing the adapters
(:mod:`kinkcheck.frameworks.base` re-exports these names for the adapters).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kinkcheck import dtypes
from kinkcheck.registry import view

__all__ = ["COMPARISONS", "COMPARISON_RECORDS", "COMPILED_MODES", "DIFFERENTIABLE", "DTYPES", "FRAMEWORK_MODES",
           "GRADIENT_MODES", "JUMP", "KINK", "MODES", "MODE_INFO", "MODE_RECORDS", "NETWORK_MODES", "NOT_JUDGED",
           "ORACLE_KIND_RECORDS", "UNDEFINED", "Comparison", "Mode", "OracleKind", "decode", "encode", "flat_value",
           "flatten", "release_key"]

#: dtypes an adapter accepts (issue 4 adds float16 and bfloat16 to the probe).
DTYPES: tuple[str, ...] = dtypes.DTYPES

@dataclass(frozen=True)
class OracleKind:
    """What the sympy oracle finds at a case's point (``OracleResult.kind``): its name, as the report and the oracle's
    cache write it, the noun the pages and ``grad`` say, and what it says of f there (empty: nothing more)."""

    name: str
    noun: str
    says: str = ""


#: The oracle's kinds, in the order the pages list them: one record each (:class:`OracleKind`).
ORACLE_KIND_RECORDS: tuple[OracleKind, ...] = (
    OracleKind("differentiable", "differentiable here"),
    OracleKind("kink", "a kink", "continuous, not differentiable"),
    OracleKind("jump", "a jump", "not continuous"),
    OracleKind("undefined", "undefined", "no real value at the point, or none next to it"),
    OracleKind("not-judged", "not judged"),
)
#: The kinds' names, for comparisons (``oracle.kind == KINK``).
DIFFERENTIABLE, KINK, JUMP, UNDEFINED, NOT_JUDGED = (k.name for k in ORACLE_KIND_RECORDS)


@dataclass(frozen=True)
class Comparison:
    """A comparison of a mode with reverse mode (``"reverse vs forward"``), and the section page that shows its
    disagreements (``report/text.MODE_PAGES``)."""

    name: str
    page: str


#: The comparisons of a mode with reverse mode, in the order the report lists them.
COMPARISON_RECORDS: tuple[Comparison, ...] = (
    Comparison("reverse vs functional", "mode-disagreements"),
    Comparison("reverse vs forward", "mode-disagreements"),
    Comparison("eager vs compiled", "compiled-disagreements"),
    Comparison("grad vs jit", "compiled-disagreements"),
    Comparison("unbatched vs vmap", "compiled-disagreements"),
)


@dataclass(frozen=True)
class Mode:
    """One differentiation mode: what it computes (the report's words), the comparison its cells are judged in
    against reverse mode (None: reverse itself; second-order is judged on its own; graph is not compared), whether
    the probe runs it as one compiled batch per dtype, and whether P0's network runs in it too."""

    computes: str
    compared_as: str | None = None
    compiled: bool = False
    network: bool = False


#: Differentiation modes, in report order: one record each (:class:`Mode`), read by the probe, the judge, the pages
#: and the command line's help. Every mode returns a value of the inputs' shapes that is comparable with the
#: reverse-mode gradient of ``f(x).sum()``, except ``second-order`` (the Hessian times a vector of ones, ``H @ 1``:
#: the gradient of the gradient's sum).
MODE_RECORDS: dict[str, Mode] = {
    "reverse": Mode("reverse mode: torch `y.backward(ones)`; JAX `jax.grad` of the sum; autograd `make_vjp` with "
                    "ones; PyTensor `pytensor.grad` of the sum, compiled without C or Numba (FAST_COMPILE, Python "
                    "linker)", network=True),
    "functional": Mode("torch.func.grad of the sum", "reverse vs functional"),
    "forward": Mode("forward mode: `torch.func.jvp` / `jax.jvp` (autograd `make_jvp`, PyTensor the ops' `R_op`) along "
                    "each input component's unit tangent", "reverse vs forward", network=True),
    "forward-ad": Mode("forward mode with dual numbers: `torch.autograd.forward_ad`", "reverse vs forward"),
    "jacfwd": Mode("`jax.jacfwd`, summed over the output", "reverse vs forward"),
    "jacrev": Mode("`jax.jacrev`, summed over the output", "reverse vs functional"),
    "jit": Mode("compiled by the framework's compiler: `jax.jit(jax.grad(...))`; TensorFlow "
                "`tf.function(jit_compile=True)` (XLA); MLX `mx.compile`; tinygrad `TinyJit`; PyTensor "
                "`pytensor.function` in its default mode (C or Numba)", "grad vs jit", network=True),
    "graph": Mode("a traced graph run without a compiler: TensorFlow `tf.function`; PaddlePaddle a static program "
                  "(`paddle.static`, what `paddle.jit.to_static` builds) and `paddle.static.gradients`; "
                  "MindSpore GRAPH_MODE (`mindspore.jit`)"),
    "inductor": Mode("`torch.compile(backend=\"inductor\")`, backward through the compiled graph", "eager vs compiled",
                     compiled=True, network=True),
    "aot_eager": Mode("`torch.compile(backend=\"aot_eager\")`: AOTAutograd's traced backward, no code generation",
                      "eager vs compiled", compiled=True, network=True),
    "vmap": Mode("`torch.func.vmap(torch.func.grad(...))` / `jax.vmap(jax.grad(...))` over a batch of two copies of "
                 "the point", "unbatched vs vmap"),
    "second-order": Mode("the Hessian times ones, `H @ 1`: torch double backward, `jax.hessian`; autograd and "
                         "PyTensor the gradient of the gradient's sum"),
}
#: What each mode computes (:attr:`Mode.computes`).
MODE_INFO: dict[str, str] = {name: mode.computes for name, mode in MODE_RECORDS.items()}
MODES: tuple[str, ...] = tuple(MODE_RECORDS)
#: The modes each adapter implements (``Adapter.modes``).
FRAMEWORK_MODES: Mapping[str, tuple[str, ...]] = view(lambda f: f.modes)
#: Modes whose value is a gradient (comparable with ``reverse``); second-order is judged on its own.
GRADIENT_MODES: tuple[str, ...] = tuple(m for m in MODES if m != "second-order")
#: Compiled modes: the probe batches every program of the catalog into one compiled call per dtype.
COMPILED_MODES: frozenset[str] = frozenset(m for m, r in MODE_RECORDS.items() if r.compiled)
#: Modes in which activation programs also run on P0's network (where the adapter has them): the end-to-end
#: cross-check of reverse, forward and compiled gradients against the NumPy oracle.
NETWORK_MODES: tuple[str, ...] = tuple(m for m, r in MODE_RECORDS.items() if r.network)
#: Mode → the comparison its disagreements with reverse mode are listed under (:attr:`Mode.compared_as`).
COMPARISONS: dict[str, str] = {m: r.compared_as for m, r in MODE_RECORDS.items() if r.compared_as is not None}


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


@functools.lru_cache(maxsize=4096)  # a render sorts the same few hundred releases some hundred thousand times
def release_key(text: str) -> Any:
    """A sort key of release numbers in PEP 440 order (``2.9.1`` before ``2.10.0``), any text that is no version
    after them, in text order."""
    from packaging.version import InvalidVersion, Version

    try:
        return (0, Version(text), text)
    except InvalidVersion:
        return (1, text, text)


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
