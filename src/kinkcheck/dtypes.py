"""The dtype registry: one record per floating-point dtype kinkcheck measures, with both of its tolerances.

Two comparisons use a dtype's precision, on purpose with different tolerances:

* ``value`` — a measured gradient against an exact oracle value (:func:`kinkcheck.oracles.classify.same_value`,
  labels, conformance, the report's "beyond its tolerance"): one operation's rounding, a few ulp;
* ``network`` — P0's two-layer network's W1/W2 gradients against the NumPy backprop oracle
  (:mod:`kinkcheck.oracles.backprop`): sums of products accumulate rounding over every summand, so the
  allowance is wider in low precision (float16 ``1e-2`` against ``2e-3``, bfloat16 ``4e-2`` against ``1.6e-2``).

A leaf module (standard library only).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DTYPES", "DTYPE_INFO", "DType", "canonical", "check"]


@dataclass(frozen=True)
class DType:
    """One dtype.

    Attributes
    ----------
    name : str
        ``"float64"``, ``"float32"``, ``"float16"``, ``"bfloat16"``: the name every framework's namespace uses.
    bits : int
        Significand bits, the implicit one included (53, 24, 11, 8).
    value : float
        Relative and absolute tolerance of a gradient value against an exact oracle value.
    network : float
        Relative tolerance of P0's network gradients against the NumPy oracle (``|observed - expected| <=
        network * (|expected| + scale)``, ``scale = max(1, max |expected|)``).
    aliases : tuple of str
        Other names a user may write (``"double"``, ``"half"``, ``"bf16"``).
    """

    name: str
    bits: int
    value: float
    network: float
    aliases: tuple[str, ...] = ()


#: dtype name → record, report order. Tolerances: float64 1e-9 (~4.5e6 ulp: far above rounding on the small
#: catalog and network, far below any convention difference); float32 1e-5 (~84 ulp); float16 value 2e-3
#: (~4 ulp), network 1e-2; bfloat16 value 1.6e-2 (~2 ulp of its 8-bit significand), network 4e-2.
DTYPE_INFO: dict[str, DType] = {d.name: d for d in (
    DType("float64", 53, 1e-9, 1e-9, ("double", "f64")),
    DType("float32", 24, 1e-5, 1e-5, ("float", "single", "f32")),
    DType("float16", 11, 2e-3, 1e-2, ("half", "f16")),
    DType("bfloat16", 8, 1.6e-2, 4e-2, ("bf16",)),
)}
#: The dtypes, report order.
DTYPES: tuple[str, ...] = tuple(DTYPE_INFO)


def canonical(dtype: str) -> str | None:
    """The registered name of ``dtype`` (a name, an alias, or a ``torch.``/``jax.numpy.``-prefixed name), or None."""
    name = str(dtype).rsplit(".", 1)[-1].strip().lower()
    if name in DTYPE_INFO:
        return name
    return next((d.name for d in DTYPE_INFO.values() if name in d.aliases), None)


def check(dtype: str) -> str:
    """``dtype`` if it is a registered name.

    Raises
    ------
    ValueError
        ``unknown dtype 'x' (known: float64, float32, float16, bfloat16)``.
    """
    if dtype not in DTYPE_INFO:
        raise ValueError(f"unknown dtype {dtype!r} (known: {', '.join(DTYPES)})")
    return dtype
