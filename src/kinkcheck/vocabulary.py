"""The words every part of kinkcheck shares: the dtypes, the differentiation modes, and the JSON codec of
gradient values (non-finite numbers as strings).

A leaf module (the standard library, :mod:`kinkcheck.dtypes` and :mod:`kinkcheck.registry` only), so that the
report, the read API and the command line name a mode or decode a value without importing the adapters
(:mod:`kinkcheck.frameworks.base` re-exports these names for the adapters).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from kinkcheck import dtypes
from kinkcheck.registry import view

__all__ = ["COMPILED_MODES", "DTYPES", "FRAMEWORK_MODES", "GRADIENT_MODES", "MODES", "MODE_INFO", "decode", "encode", "release_key",
           "flat_value", "flatten"]

#: dtypes an adapter accepts (issue 4 adds float16 and bfloat16 to the probe).
DTYPES: tuple[str, ...] = dtypes.DTYPES

#: Differentiation modes, in report order, with what each computes. Every mode returns a value of the
#: inputs' shapes that is comparable with the reverse-mode gradient of ``f(x).sum()``, except
#: ``second-order`` (the Hessian times a vector of ones, ``H @ 1``: the gradient of the gradient's sum).
MODE_INFO: dict[str, str] = {
    "reverse": "reverse mode: torch `y.backward(ones)`; JAX `jax.grad` of the sum; autograd `make_vjp` with ones; "
               "PyTensor `pytensor.grad` of the sum, compiled without C or Numba (FAST_COMPILE, Python linker)",
    "functional": "torch.func.grad of the sum",
    "forward": "forward mode: `torch.func.jvp` / `jax.jvp` (autograd `make_jvp`, PyTensor the ops' `R_op`) along "
               "each input component's unit tangent",
    "forward-ad": "forward mode with dual numbers: `torch.autograd.forward_ad`",
    "jacfwd": "`jax.jacfwd`, summed over the output",
    "jacrev": "`jax.jacrev`, summed over the output",
    "jit": "compiled by the framework's compiler: `jax.jit(jax.grad(...))`; TensorFlow `tf.function(jit_compile=True)` "
           "(XLA); MLX `mx.compile`; tinygrad `TinyJit`; PyTensor `pytensor.function` in its default mode (C or Numba)",
    "graph": "a traced graph run without a compiler: TensorFlow `tf.function`; PaddlePaddle a static program "
             "(`paddle.static`, what `paddle.jit.to_static` builds) and `paddle.static.gradients`; "
             "MindSpore GRAPH_MODE (`mindspore.jit`)",
    "inductor": "`torch.compile(backend=\"inductor\")`, backward through the compiled graph",
    "aot_eager": "`torch.compile(backend=\"aot_eager\")`: AOTAutograd's traced backward, no code generation",
    "vmap": "`torch.func.vmap(torch.func.grad(...))` / `jax.vmap(jax.grad(...))` over a batch of two copies of the point",
    "second-order": "the Hessian times ones, `H @ 1`: torch double backward, `jax.hessian`; autograd and PyTensor "
                    "the gradient of the gradient's sum",
}
MODES: tuple[str, ...] = tuple(MODE_INFO)
#: The modes each adapter implements (``Adapter.modes``).
FRAMEWORK_MODES: Mapping[str, tuple[str, ...]] = view(lambda f: f.modes)
#: Modes whose value is a gradient (comparable with ``reverse``); second-order is judged on its own.
GRADIENT_MODES: tuple[str, ...] = tuple(m for m in MODES if m != "second-order")
#: Compiled modes: the probe batches every program of the catalog into one compiled call per dtype.
COMPILED_MODES: frozenset[str] = frozenset(("inductor", "aot_eager"))


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
