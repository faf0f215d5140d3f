"""``kinkcheck check``: do two implementations of one function agree on gradients at kinks?

A user's pair — say a PyTorch and a JAX version of the same layer, or two PyTorch versions of it — is
evaluated at the given point and at generated variants of it that hit kinks of the common piecewise
functions: an entry set to 0 (relu, abs, sign at 0), two entries tied (max, min, sort, median), an entry on
a usual bound (clamp/hardtanh at ±1, relu6 at 6, hardswish/hardsigmoid at ±3, hardshrink/softshrink at
±0.5). The gradients of ``sum(f(*inputs))`` (reverse mode) are compared within the dtype tolerance of
:func:`kinkcheck.classify.same_value`; the result lists every differing input, and the smallest one (least
Euclidean norm, then fewest changed entries).

Python API: :func:`check_pair`. Command line: ``kinkcheck check MODULE:FN MODULE:FN --at x=0.5,y=2``.
"""

from __future__ import annotations

import importlib
import math
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kinkcheck.classify import same_value
from kinkcheck.frameworks.base import flat_value

__all__ = ["CheckError", "Point", "CheckResult", "variants", "check_pair", "load_function", "BOUNDS"]

#: Bound values tried for each entry: clamp/hardtanh ±1, relu6 6, hardswish/hardsigmoid ±3, shrink ±0.5.
BOUNDS: tuple[float, ...] = (1.0, -1.0, 6.0, 3.0, -3.0, 0.5, -0.5)
#: At most this many variants are tried (the first ones in generation order).
MAX_VARIANTS = 400


class CheckError(ValueError):
    """A function cannot be loaded or called with the given inputs (one-line reason)."""


@dataclass
class Point:
    """One input tried: the point, why, and the two gradients (or the error each side raised)."""

    at: dict[str, Any]
    why: str
    changed: int
    grads: list[dict[str, Any] | str] = field(default_factory=list)
    differs: bool = False

    @property
    def norm(self) -> float:
        return math.sqrt(sum(v * v for v in flat_value(self.at)))


@dataclass
class CheckResult:
    frameworks: tuple[str, str]
    dtype: str
    points: list[Point]
    not_tried: int = 0  # variants left out by the limit

    @property
    def differing(self) -> list[Point]:
        return [p for p in self.points if p.differs]

    @property
    def smallest(self) -> Point | None:
        d = self.differing
        return min(d, key=lambda p: (p.norm, p.changed)) if d else None


def _entries(at: Mapping[str, Any]) -> list[tuple[str, tuple[int, ...]]]:
    out: list[tuple[str, tuple[int, ...]]] = []

    def walk(name: str, v: Any, idx: tuple[int, ...]) -> None:
        if isinstance(v, list):
            for i, x in enumerate(v):
                walk(name, x, idx + (i,))
        else:
            out.append((name, idx))

    for k, v in at.items():
        walk(k, v, ())
    return out


def _get(at: Mapping[str, Any], name: str, idx: tuple[int, ...]) -> float:
    v = at[name]
    for i in idx:
        v = v[i]
    return float(v)


def _set(at: Mapping[str, Any], name: str, idx: tuple[int, ...], value: float) -> dict[str, Any]:
    import copy

    new = copy.deepcopy(dict(at))
    if not idx:
        new[name] = value
        return new
    v = new[name]
    for i in idx[:-1]:
        v = v[i]
    v[idx[-1]] = value
    return new


def _label(name: str, idx: tuple[int, ...]) -> str:
    return name + "".join(f"[{i}]" for i in idx)


def variants(at: Mapping[str, Any]) -> Iterator[tuple[dict[str, Any], str, int]]:
    """The given point, then kink-hitting variants: ``(point, why, number of entries changed)``, deduplicated."""
    seen: set[str] = set()

    def new(p: dict[str, Any], why: str, changed: int) -> Iterator[tuple[dict[str, Any], str, int]]:
        key = repr(sorted(p.items()))
        if key not in seen:
            seen.add(key)
            yield p, why, changed

    yield from new(dict(at), "the given input", 0)
    entries = _entries(at)
    zeros = dict(at)
    for name, idx in entries:
        zeros = _set(zeros, name, idx, 0.0)
    yield from new(zeros, "every entry 0", len(entries))
    # zeros and bounds (linear in the number of entries) before ties (quadratic), so a limit cuts ties first
    for name, idx in entries:
        yield from new(_set(at, name, idx, 0.0), f"{_label(name, idx)} = 0", 1)
    for name, idx in entries:
        for b in BOUNDS:
            yield from new(_set(at, name, idx, b), f"{_label(name, idx)} = {b:g} (a usual bound)", 1)
    for i, (n1, i1) in enumerate(entries):
        for n2, i2 in entries[i + 1:]:
            yield from new(_set(at, n2, i2, _get(at, n1, i1)), f"{_label(n2, i2)} tied to {_label(n1, i1)}", 1)


def load_function(spec: str) -> Callable[..., Any]:
    """``"module:function"`` or ``"path/to/file.py:function"`` → the function (the module is imported).

    Raises
    ------
    CheckError
        Malformed spec, module not importable, no such callable.
    """
    module, sep, name = spec.rpartition(":")
    if not sep or not module or not name:
        raise CheckError(f"expected MODULE:FUNCTION, got {spec!r}")
    try:
        if module.endswith(".py") or "/" in module:
            path = Path(module)
            if not path.is_file():
                raise CheckError(f"no file {module}")
            spec_ = importlib.util.spec_from_file_location(path.stem, path)
            mod = importlib.util.module_from_spec(spec_)  # type: ignore[arg-type]
            spec_.loader.exec_module(mod)  # type: ignore[union-attr]
        else:
            if "" not in sys.path:
                sys.path.insert(0, "")  # the current folder, as `python -m` would
            mod = importlib.import_module(module)
    except CheckError:
        raise
    except Exception as err:  # noqa: BLE001 - the user's module failed to import: one line
        raise CheckError(f"cannot import {module}: {type(err).__name__}: {err}") from None
    fn = getattr(mod, name, None)
    if not callable(fn):
        raise CheckError(f"{module} has no function {name!r}")
    return fn


def check_pair(first: Callable[..., Any], second: Callable[..., Any], at: Mapping[str, Any],
               frameworks: Sequence[str] = ("torch", "jax"), dtype: str = "float64",
               limit: int = MAX_VARIANTS) -> CheckResult:
    """Compare the gradients of two implementations at ``at`` and at kink-hitting variants of it.

    Parameters
    ----------
    first, second : callable
        Functions of the inputs (positional, in the order of ``at``) returning an array of the framework
        named in ``frameworks`` (same position).
    at : mapping
        Input name → float or nested list of floats (one point).
    frameworks : pair of str
        ``("torch", "jax")``, ``("torch", "torch")``, ``("jax", "torch")``, …
    dtype : str
        float64 (default), float32, float16 or bfloat16; sets the comparison tolerance too.

    Returns
    -------
    CheckResult
        Every point tried with both gradients (or each side's error message) and whether they differ.

    Raises
    ------
    CheckError
        Either function fails at the given input itself (nothing to compare).
    """
    from kinkcheck.frameworks import get_adapter
    from kinkcheck.frameworks.base import short_error

    adapters = [get_adapter(fw) for fw in frameworks]
    points = []
    not_tried = 0
    for n, (p, why, changed) in enumerate(variants(at)):
        if n >= limit:
            not_tried += 1
            continue
        pt = Point(p, why, changed)
        for fn, ad in zip((first, second), adapters):
            try:
                pt.grads.append(ad.callable_gradient(fn, p, dtype))
            except (Exception, SystemExit) as err:  # noqa: BLE001 - the user's function failed here: recorded
                if n == 0:
                    raise CheckError(f"{getattr(fn, '__name__', fn)} fails at the given input: {short_error(err)}") \
                        from None
                pt.grads.append(short_error(err))
        a, b = pt.grads
        if isinstance(a, str) or isinstance(b, str):
            pt.differs = not (isinstance(a, str) and isinstance(b, str))
        else:
            pt.differs = not same_value(flat_value(a), flat_value(b), dtype)
        points.append(pt)
    return CheckResult((frameworks[0], frameworks[1]), dtype, points, not_tried)


def render(result: CheckResult, names: Sequence[str]) -> str:
    """Plain-text summary: each differing input with both gradients, then the smallest one."""
    from kinkcheck.report.markdown import fmt_number, fmt_value

    def g(v: Any) -> str:
        return v if isinstance(v, str) else named(v)

    def named(v: dict[str, Any]) -> str:  # always name the inputs, even a single scalar one
        return ", ".join(f"{k}={fmt_value({k: x})}" if isinstance(x, list) else f"{k}={fmt_number(x)}"
                         for k, x in v.items())

    lines = [f"{len(result.points)} inputs tried ({result.dtype}): the given one and kink-hitting variants; "
             f"{len(result.differing)} give different gradients"]
    if result.not_tried:
        lines.append(f"  ({result.not_tried} more variants not tried: the limit is {len(result.points)}; "
                     "zeros and bounds come first, then ties)")
    for p in result.differing:
        lines.append(f"  {p.why}: at {named(p.at)}: {names[0]} {g(p.grads[0])} | {names[1]} {g(p.grads[1])}")
    s = result.smallest
    if s is not None:
        lines.append(f"smallest differing input: {named(s.at)} ({s.why}): {names[0]} {g(s.grads[0])}, "
                     f"{names[1]} {g(s.grads[1])}")
    return "\n".join(lines) + "\n"
