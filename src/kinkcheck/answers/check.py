"""``kinkcheck check``: do two implementations of one function agree on gradients at kinks?

A user's pair — say a PyTorch and a JAX version of the same layer, or two PyTorch versions of it — is
evaluated at the given point and at generated variants of it that hit kinks of the common piecewise
functions: an entry set to 0 (relu, abs, sign at 0), two entries tied (max, min, sort, median), an entry on
a usual bound (clamp/hardtanh at ±1, relu6 at 6, hardswish/hardsigmoid at ±3, hardshrink/softshrink at
±0.5). The gradients of ``sum(f(*inputs))`` — reverse mode by default, or any mode of each framework
(:data:`kinkcheck.vocabulary.MODE_INFO`: forward, jit, vmap, inductor, …) — in float64 or a lower dtype
are compared within the dtype tolerance of :func:`kinkcheck.oracles.classify.same_value`; the result lists every
differing input, and the smallest one (least Euclidean norm, then fewest changed entries).

Cost: at most :data:`MAX_VARIANTS` inputs are tried, and the variants are generated lazily, so a check
costs O(limit × entries) however many variants exist (n entries have n²/2 ties); duplicates are recognised
from the changed entry alone, without building the point. The command line runs the pair in a bounded
worker process (:mod:`kinkcheck.probe.worker`).

Python API: :func:`check_pair`. Command line: ``kinkcheck check MODULE:FN path/to/file.py:FN --at x=0.5,y=2
[--mode forward] [--dtype float32]``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kinkcheck.frameworks import FrameworkUnavailable, Unavailable, get_adapter, kink_counter
from kinkcheck.frameworks.base import short_error
from kinkcheck.language import expr as ex
from kinkcheck.oracles.classify import same_value
from kinkcheck.probe.usercode import UserCodeError, load_function
from kinkcheck.probe.worker import BoundExceeded, TaskError, _is_oom
from kinkcheck.registry import framework
from kinkcheck.vocabulary import FRAMEWORK_MODES, MODES, flat_value, flatten

if TYPE_CHECKING:
    from kinkcheck.probe.worker import Limits

__all__ = [
    "BOUNDS",
    "CheckError",
    "CheckResult",
    "Point",
    "check_pair",
    "count_variants",
    "pair_modes",
    "variants",
]

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
    seen: dict[str, Any] | None = None  # the point as the dtype holds it, when rounding changed it
    #: Per function, the kinked operations its forward pass hits exactly at this point (:func:`kinks_hit`);
    #: filled for the inputs that differ.
    kinks: list[list[str]] = field(default_factory=list)

    @property
    def norm(self) -> float:
        return math.sqrt(sum(v * v for v in flat_value(self.at)))


@dataclass
class CheckResult:
    frameworks: tuple[str, str]
    dtype: str
    points: list[Point]
    not_tried: int = 0  # variants left out by the limit
    modes: tuple[str, str] = ("reverse", "reverse")

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


def pair_modes(mode: str | Sequence[str], frameworks: Sequence[str]) -> tuple[str, str]:
    """``(first's mode, second's mode)`` from one mode for both functions or one per function.

    Raises
    ------
    CheckError
        Not one or two modes; an unknown mode; a mode the function's framework lacks (named with its modes).
    """
    pair = (mode, mode) if isinstance(mode, str) else tuple(mode)
    if len(pair) != 2:
        raise CheckError(f"expected one mode, or two (one per function), got {len(pair)}")
    for m, fw in zip(pair, frameworks):
        if m not in MODES:
            raise CheckError(f"unknown mode {m!r} (known: {', '.join(MODES)})")
        if fw in FRAMEWORK_MODES and m not in FRAMEWORK_MODES[fw]:
            raise CheckError(f"{fw} has no {m} mode (its modes: {', '.join(FRAMEWORK_MODES[fw])})")
    return pair[0], pair[1]


def kinks_hit(fn: Callable[..., Any], framework: str, at: Mapping[str, Any], dtype: str) -> list[str]:
    """The kinked operations ``fn``'s forward pass reaches exactly at their kink at ``at``, by the framework's
    kink-hit counter (:func:`kinkcheck.frameworks.kink_counter`: PyTorch's functions and methods, JAX's
    primitives): ``["torch.clamp at x = min, x = max (1 of 1)"]``; one line saying why where the framework has no
    counter, where the function fails, or where no kinked operation sits at its kink (then the difference comes from
    elsewhere, e.g. an operation the counters do not know)."""
    counter = kink_counter(framework)
    if counter is None:
        return [f"no kink-hit counter for {framework}"]
    try:
        sites = counter.hits_at(fn, at, dtype)
    except (Exception, SystemExit) as err:  # noqa: BLE001 - the user's function: say why, never fail the check
        return [f"kinks not counted ({short_error(err)})"]
    hit = [f"{s.program} at {s.kink} ({s.hits} of {s.elements})" for s in sites if s.hits]
    return hit or ["no kinked operation the counters know sits at its kink"]


def check_pair(first: Callable[..., Any], second: Callable[..., Any], at: Mapping[str, Any],
               frameworks: Sequence[str] = ("torch", "jax"), dtype: str = "float64",
               limit: int = MAX_VARIANTS, mode: str | Sequence[str] = "reverse") -> CheckResult:
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
        float64 (default), float32, float16 or bfloat16: the inputs' dtype (each point is rounded to it, as
        the framework holds it: :attr:`Point.seen`) and the comparison tolerance.
    mode : str or pair of str
        How each function is differentiated (:data:`kinkcheck.vocabulary.MODE_INFO`): one mode for both
        (``"forward"``) or one per function (``("inductor", "jit")``); default reverse. Every mode's value is
        comparable with the gradient; ``second-order`` gives ``H @ 1``, comparable between the two functions.

    Returns
    -------
    CheckResult
        Every point tried with both gradients (or each side's error message) and whether they differ.

    Raises
    ------
    CheckError
        An unknown mode, or one a framework lacks (``torch`` has no ``jit``, ``jax`` no ``inductor``) or
        that this release lacks (``torch.func`` before torch 2.0); either function fails at the given
        input itself (nothing to compare).
    """
    modes = pair_modes(mode, frameworks)
    # frameworks whose import must come first (registry.Framework.import_first: importing PaddlePaddle after
    # TensorFlow segfaults), then the others; the pair keeps its order
    loaded = {fw: get_adapter(fw) for fw in sorted(set(frameworks), key=lambda fw: not framework(fw).import_first)}
    adapters = [loaded[fw] for fw in frameworks]
    points = []
    for n, (p, why, changed) in enumerate(variants(at)):
        if n >= limit:
            break
        pt = Point(p, why, changed, seen=adapters[0].rounded(p, dtype) if dtype != "float64" else None)
        for fn, ad, m in zip((first, second), adapters, modes):
            try:
                pt.grads.append(ad.callable_gradient(fn, p, dtype, mode=m))
            except Unavailable as err:  # the mode, not the point: no point can be compared
                raise CheckError(f"{ad.name} {m} mode: {err}") from None
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
        if pt.differs:  # which operation: the kinks each forward pass hits at this input
            pt.kinks = [kinks_hit(fn, fw, p, dtype) for fn, fw in zip((first, second), frameworks)]
        points.append(pt)
    return CheckResult((frameworks[0], frameworks[1]), dtype, points, count_variants(at) - len(points), modes)


#: Differing inputs :func:`render` lists before it says how many more there are (``kinkcheck check --all``: all).
SHOWN = 20
#: Elements of a vector shown before the middle is elided (``[0, 0, 0, …, 0, 1] (300 elements)``).
VECTOR_LIMIT = 8


def render(result: CheckResult, names: Sequence[str], shown: int | None = SHOWN) -> str:
    """Plain-text summary: each differing input (the first ``shown``; None: all) with both gradients and the
    kinked operations each function hits there, then the smallest differing input. Long vectors are elided."""
    from kinkcheck.render.view import fmt_number, fmt_vector  # slow: msgspec

    def g(v: Any) -> str:
        return v if isinstance(v, str) else named(v)

    def vector(x: Any) -> str:
        flat = list(flatten(x))
        if len(flat) <= VECTOR_LIMIT:
            return fmt_vector(flat)
        return f"{fmt_vector(flat[:3])[:-1]}, …, {fmt_vector(flat[-2:])[1:]} ({len(flat)} elements)"

    def named(v: dict[str, Any]) -> str:  # always name the inputs, even a single scalar one
        return ", ".join(f"{k}={vector(x)}" if isinstance(x, list) else f"{k}={fmt_number(x)}"
                         for k, x in v.items())

    m1, m2 = result.modes
    how = f"{m1} mode" if m1 == m2 else f"{result.frameworks[0]} {m1} mode, {result.frameworks[1]} {m2} mode"
    lines = [f"{len(result.points)} inputs tried ({result.dtype}, {how}): the given one and kink-hitting variants; "
             f"{len(result.differing)} give different gradients"]
    if result.not_tried:
        lines.append(f"  ({result.not_tried} more variants not tried: the limit is {len(result.points)}; "
                     "zeros and bounds come first, then ties)")

    def exact(v: Any) -> str:  # every digit: 0.3 and 0.30000001192092896 must not print alike
        if isinstance(v, list):
            flat = list(flatten(v))
            if len(flat) > VECTOR_LIMIT:
                return (f"[{', '.join(exact(x) for x in flat[:3])}, …, {', '.join(exact(x) for x in flat[-2:])}] "
                        f"({len(flat)} elements)")
            return "[" + ", ".join(exact(x) for x in v) + "]"
        return fmt_number(v) if isinstance(v, str) or float(v).is_integer() else repr(float(v))

    def where(p: Point) -> str:  # the point, and what the dtype made of it when rounding changed it
        if not p.seen:
            return named(p.at)
        return (", ".join(f"{k}={exact(v)}" for k, v in p.at.items()) + f" (in {result.dtype}: "
                + ", ".join(f"{k}={exact(v)}" for k, v in p.seen.items()) + ")")

    differing = result.differing
    for p in differing if shown is None else differing[:shown]:
        lines.append(f"  {p.why}: at {where(p)}: {names[0]} {g(p.grads[0])} | {names[1]} {g(p.grads[1])}")
        if p.kinks:
            lines.append("    kinks hit: " + " | ".join(f"{name.split(' (')[0]}: {'; '.join(k)}"
                                                      for name, k in zip(names, p.kinks)))
    if shown is not None and len(differing) > shown:
        lines.append(f"  … and {len(differing) - shown} more differing inputs (--all lists them)")
    s = result.smallest
    if s is not None:
        lines.append(f"smallest differing input: {where(s)} ({s.why}): {names[0]} {g(s.grads[0])}, "
                     f"{names[1]} {g(s.grads[1])}")
    return "\n".join(lines) + "\n"


def check_task(payload: Mapping[str, Any], limits: Limits) -> Any:
    """``kinkcheck check``'s evaluation, a task of the worker (:data:`kinkcheck.probe.worker.TASKS`): payload
    ``first``, ``second``, ``at``, ``frameworks``, ``dtype``, and optionally ``modes`` (one per function; default
    reverse)."""
    try:
        fns = [load_function(payload["first"]), load_function(payload["second"])]
        result = check_pair(fns[0], fns[1], payload["at"], frameworks=tuple(payload["frameworks"]),
                            dtype=payload["dtype"], mode=tuple(payload.get("modes") or ("reverse", "reverse")))
    except (ex.ExprError, CheckError, UserCodeError, FrameworkUnavailable) as err:
        if _is_oom(err):
            raise BoundExceeded(f"{limits.memory_message()}: {err}") from None
        raise TaskError(str(err)) from None
    # by hand: dataclasses.asdict deep-copies every nested list (seconds for 400 points of 1,500 entries)
    return {"frameworks": list(result.frameworks), "dtype": result.dtype, "not_tried": result.not_tried,
            "modes": list(result.modes),
            "points": [{"at": p.at, "why": p.why, "changed": p.changed, "grads": p.grads, "differs": p.differs,
                        "seen": p.seen, "kinks": p.kinks} for p in result.points]}
