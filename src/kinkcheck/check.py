"""``kinkcheck check``: do two implementations of one function agree on gradients at kinks?

A user's pair — say a PyTorch and a JAX version of the same layer, or two PyTorch versions of it — is
evaluated at the given point and at generated variants of it that hit kinks of the common piecewise
functions: an entry set to 0 (relu, abs, sign at 0), two entries tied (max, min, sort, median), an entry on
a usual bound (clamp/hardtanh at ±1, relu6 at 6, hardswish/hardsigmoid at ±3, hardshrink/softshrink at
±0.5). The gradients of ``sum(f(*inputs))`` (reverse mode) are compared within the dtype tolerance of
:func:`kinkcheck.classify.same_value`; the result lists every differing input, and the smallest one (least
Euclidean norm, then fewest changed entries).

Cost: at most :data:`MAX_VARIANTS` inputs are tried, and the variants are generated lazily, so a check
costs O(limit × entries) however many variants exist (n entries have n²/2 ties); duplicates are recognised
from the changed entry alone, without building the point. The command line runs the pair in a bounded
worker process (:mod:`kinkcheck.bounded`).

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

__all__ = ["CheckError", "Point", "CheckResult", "variants", "count_variants", "check_pair", "load_function", "BOUNDS"]

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
    """A new point with one entry changed; only the lists on the entry's path are copied (the rest is shared)."""
    new = dict(at)
    if not idx:
        new[name] = value
        return new
    top = list(new[name])
    new[name] = v = top
    for i in idx[:-1]:
        v[i] = list(v[i])
        v = v[i]
    v[idx[-1]] = value
    return new


def _zeros(value: Any) -> Any:
    return [_zeros(v) for v in value] if isinstance(value, list) else 0.0


def _label(name: str, idx: tuple[int, ...]) -> str:
    return name + "".join(f"[{i}]" for i in idx)


def _key(value: float) -> str:
    """Identity of an entry's value: 1 and 1.0 are one value, 0.0 and -0.0 two (the sign is part of the input)."""
    return repr(float(value))


_ZERO = _key(0.0)


def _plan(at: Mapping[str, Any]) -> Iterator[tuple[str, int, float, str]]:
    """The variants after the given input, lazily and without duplicates, as (kind, entry, value, label).

    kind is ``"zeros"`` (every entry 0; entry and value unused), ``"one"`` (one entry set to value).
    Work is linear in the number of entries plus the number of variants taken: a duplicate is skipped
    without building its point, and a tie value is only tried from its first occurrence (a later entry of
    the same value, or a value that is 0 or a bound, would give variants already generated).
    """
    entries = _entries(at)
    values = [_get(at, n, i) for n, i in entries]
    keys = [_key(v) for v in values]
    singles: set[tuple[int, str]] = set()
    zeros = [j for j, k in enumerate(keys) if k != _ZERO]
    if zeros:
        if len(zeros) == 1:
            singles.add((zeros[0], _ZERO))
        yield "zeros", len(zeros), 0.0, "every entry 0"
    # zeros and bounds (linear in the number of entries) before ties (quadratic), so a limit cuts ties first
    for j, (name, idx) in enumerate(entries):
        if keys[j] != _ZERO and (j, _ZERO) not in singles:
            singles.add((j, _ZERO))
            yield "one", j, 0.0, f"{_label(name, idx)} = 0"
    for j, (name, idx) in enumerate(entries):
        for b in BOUNDS:
            kb = _key(b)
            if keys[j] != kb and (j, kb) not in singles:
                singles.add((j, kb))
                yield "one", j, b, f"{_label(name, idx)} = {b:g} (a usual bound)"
    done = {_ZERO, *(_key(b) for b in BOUNDS)}
    for i, (n1, i1) in enumerate(entries):
        if keys[i] in done:
            continue
        done.add(keys[i])
        for j in range(i + 1, len(entries)):
            if keys[j] != keys[i]:
                n2, i2 = entries[j]
                yield "one", j, values[i], f"{_label(n2, i2)} tied to {_label(n1, i1)}"


def count_variants(at: Mapping[str, Any]) -> int:
    """How many points :func:`variants` yields (the given input included), in time linear in the entries."""
    from collections import Counter

    entries = _entries(at)
    keys = [_key(_get(at, n, i)) for n, i in entries]
    total = 1
    changed = sum(k != _ZERO for k in keys)
    total += changed > 0  # every entry 0 (when it differs from the input)
    total += changed - (changed == 1)  # each entry 0 (one of them is the every-zero point when only one differs)
    bound_keys = [_key(b) for b in BOUNDS]
    total += sum(k != kb for k in keys for kb in bound_keys)
    count = Counter(keys)
    done = {_ZERO, *bound_keys}
    for i, k in enumerate(keys):
        if k not in done:
            done.add(k)
            total += (len(keys) - 1 - i) - (count[k] - 1)  # later entries of another value
    return total


def variants(at: Mapping[str, Any]) -> Iterator[tuple[dict[str, Any], str, int]]:
    """The given point, then kink-hitting variants: ``(point, why, number of entries changed)``, deduplicated.

    Lazy: each point is built when it is taken, so taking the first ``k`` costs O(k × entries) whatever
    the number of variants (quadratic in the entries, because of the ties). :func:`count_variants` gives
    their number without building them.
    """
    yield dict(at), "the given input", 0
    entries = _entries(at)
    for kind, j, value, why in _plan(at):
        if kind == "zeros":
            yield {k: _zeros(v) for k, v in at.items()}, why, j
        else:
            name, idx = entries[j]
            yield _set(at, name, idx, value), why, 1


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
    for n, (p, why, changed) in enumerate(variants(at)):
        if n >= limit:
            break
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
    return CheckResult((frameworks[0], frameworks[1]), dtype, points, count_variants(at) - len(points))


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
