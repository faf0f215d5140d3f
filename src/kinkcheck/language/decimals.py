"""Numbers as a person reads them: the shortest decimal that reads back as the same float64.

Every face a person reads (``grad``, ``ask``, ``cite``, ``lookup``'s rows, ``migrate``, ``lock``) prints a number
with :func:`decimal`: Python's ``repr`` of the float (at most 17 significant digits, e.g. selu's derivative from the
left at 0, ``1.7580993408473766``), an integral value without ``.0`` (``0``, ``-0``, ``1``), ``nan`` and ``inf`` as
words. An oracle value is exact (``1/3``, selu's 60-digit rationals); a text face prints its float, and only
``--json`` keeps the exact form, under its own key (``{"exact": "1/3", "float": 0.3333333333333333}``).

A leaf module (the standard library only).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

__all__ = ["MAX_DIGITS", "decimal", "decimal_clarke", "decimal_exact", "decimal_text", "decimal_value",
           "decimal_vector"]

#: The most significant digits :func:`decimal` prints: 17 tell every two float64 values apart.
MAX_DIGITS = 17


def decimal(v: Any) -> str:
    """One number as a person reads it: ``repr(float(v))``, the shortest decimal that reads back as the same
    float64 (``1.7580993408473766``, ``0.3333333333333333``, ``1e-300``); an integral value below 1e16 without
    ``.0`` (``0``, ``-0``, ``6``); ``nan``, ``inf``, ``-inf``; a string (a cell's ``"nan"``) as it is; None ``—``."""
    if v is None:
        return "—"
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return str(v)
    try:
        f = float(v)
    except OverflowError:  # an integer beyond float64
        return "inf" if v > 0 else "-inf"
    if f == 0:
        return "-0" if math.copysign(1.0, f) < 0 else "0"
    if f.is_integer() and abs(f) < 1e16:
        return str(int(f))
    return repr(f)


def decimal_vector(values: Sequence[Any]) -> str:
    """A flat or nested list of numbers as ``[a, b]`` (nesting kept), each :func:`decimal`."""
    return "[" + ", ".join(decimal_vector(v) if isinstance(v, (list, tuple)) else decimal(v) for v in values) + "]"


def decimal_value(value: Mapping[str, Any] | None) -> str:
    """A gradient per input: ``1.7580993408473766`` for one scalar input, ``[0, 1]`` for one vector, ``x=0.5,
    y=0.5`` for several; ``—`` for None (no value)."""
    if value is None:
        return "—"
    parts = []
    for k, v in value.items():
        text = decimal_vector(v) if isinstance(v, (list, tuple)) else decimal(v)
        parts.append(text if len(value) == 1 else f"{k}={text}")
    return ", ".join(parts)


def _float_of(entry: Any) -> Any:
    """The float of an oracle value: its record's ``float_`` or its JSON's ``"float"`` (else its exact text read as
    a fraction, else the text)."""
    if isinstance(entry, Mapping):
        if "float" in entry:
            return entry["float"]
        entry = entry.get("exact")
    elif hasattr(entry, "float_"):
        return entry.float_
    if isinstance(entry, str):
        try:
            return float(Fraction(entry))
        except (ValueError, ZeroDivisionError, OverflowError):
            return entry
    return entry


def decimal_exact(entry: Any) -> str:
    """An oracle value (an exact record with ``float_``, or its JSON ``{"exact", "float"}``) as :func:`decimal`
    prints its float; a vector of them as ``(a, b)``; ``—`` for None."""
    if entry is None:
        return "—"
    if isinstance(entry, (list, tuple)):
        entries = list(entry)
        if len(entries) == 1:
            return decimal_exact(entries[0])
        return "(" + ", ".join(decimal_exact(e) for e in entries) + ")"
    return decimal(_float_of(entry))


def decimal_clarke(vertices: Sequence[Sequence[Any]] | None, components: int, lipschitz: bool | None = None) -> str:
    """The Clarke generalized gradient from its vertices: ``[a, b]`` for one component (``{a}`` for one vertex),
    ``{(a, b)}`` or ``conv{(a, b), (c, d)}`` for several; ``none: f is not locally Lipschitz`` or ``undefined``
    without vertices."""
    if vertices is None:
        return "none: f is not locally Lipschitz" if lipschitz is False else "undefined"
    if components == 1:
        ends = [decimal_exact(v[0]) for v in vertices]
        return f"[{ends[0]}, {ends[-1]}]" if len(ends) > 1 else f"{{{ends[0]}}}"
    if len(vertices) == 1:
        return "{" + decimal_exact(vertices[0]) + "}"
    return "conv{" + ", ".join(decimal_exact(v) for v in vertices) + "}"


#: A number in a text: a rational ``p/q``, or a decimal literal, not part of a name (``x1``, ``v[0]`` keep theirs).
_NUMBER = re.compile(r"(?<![\w.])(\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)(?:/(\d+(?:\.\d*)?))?(?![\w.])")


def _digits(text: str) -> int:
    """Significant digits of a decimal literal's mantissa (``0.0012`` has 2)."""
    mantissa = re.split(r"[eE]", text)[0].replace(".", "").lstrip("0")
    return len(mantissa)


def decimal_text(text: str) -> str:
    """``text`` (a sympy form, an oracle note) with every number of more than :data:`MAX_DIGITS` significant digits
    printed as :func:`decimal` prints its float: selu's ``1.0507009873554804934193349852946`` reads
    ``1.0507009873554805``, a rational ``p/q`` with a long part its quotient. Shorter numbers stay as written."""

    def short(m: re.Match[str]) -> str:
        num, den = m.group(1), m.group(2)
        if _digits(num) <= MAX_DIGITS and (den is None or _digits(den) <= MAX_DIGITS):
            return m.group(0)
        try:
            value = Fraction(num) / Fraction(den) if den is not None else Fraction(num)
            return decimal(float(value))
        except (ValueError, ZeroDivisionError, OverflowError):
            return m.group(0)

    return _NUMBER.sub(short, text)
