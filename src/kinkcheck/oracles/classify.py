"""Labels for an observed gradient judged against the sympy oracle.

:func:`classify` compares a value (the flat gradient in the oracle's component order) with an
:class:`~kinkcheck.oracles.symbolic.OracleResult` and returns every label that applies, ordered by
:data:`LABELS`. That order is the documented precedence: the first label is the one a report shows.

Precedence, and why
-------------------
* ``error``, ``unavailable``: nothing was measured; they are the only label.
* ``nan``: a nan anywhere makes every comparison meaningless; it is the only label.
* ``+inf``, ``-inf``: an infinite component; ``left``/``right`` follow when it equals that one-sided
  derivative (``sqrt`` at 0 from the right is ``oo``).
* ``derivative``: ``f`` is differentiable there; the only correct value.
* ``left``, ``right``: the one-sided derivatives (one component), before the tie labels and ``min-norm``
  because they name the *mechanism* a program used (relu'(0) = 0 is ``left`` and also ``min-norm``;
  ``left`` says more about how it was computed).
* ``left-piece``, ``right-piece``: at a jump (one component), the slope of the piece left or right of the
  point (``floor`` at 1: 0 on both). Not a derivative of ``f`` there: at a jump the one-sided derivative on
  the jumping side is infinite (``left``/``right`` hold ``oo``), so a framework that returns the active piece's
  slope is labelled by what it did, under a name that says so.
* ``split-even``, ``first``, ``last``, ``one-index``: tie conventions. ``split-even`` is the mean of the
  limiting gradients. ``first`` and ``last`` are by **input position** (:mod:`kinkcheck.oracles.routing`):
  ``first`` gives every tied max, min or order statistic's credit to its earliest tied input in the flattened
  order of the case's inputs, ``last`` to its latest (``cummax`` of ``[1, 1, 0]``, summed: ``first`` is
  ``[3, 0, 0]``, ``last`` ``[1, 2, 0]``); they may both hold (a tie whose inputs share one gradient) and may
  be a value that is not a limiting gradient (``max(v) - min(v)`` with one tie each). ``one-index`` is a
  limiting gradient (one active piece) that is neither: another tied input, or a tie that position does not
  name (``oracle.first``/``oracle.last`` None: ranks with different coefficients, repeated eigenvalues).
* ``min-norm``: PyTorch's documented rule (autograd notes, "Gradients for non-differentiable functions").
* ``mean``: the midpoint of the one-sided derivatives (one component). After ``min-norm``: at a symmetric
  kink (``abs`` at 0) the two coincide, and 0 there is PyTorch's documented min-norm choice, not an average.
* ``in-clarke``: inside the Clarke generalized gradient (Clarke 1983, *Optimization and Nonsmooth
  Analysis*); added whenever true, also alongside the labels above, so "valid" can be counted by one label.
* ``not-lipschitz``: finite, at a point where ``f`` is not locally Lipschitz (``OracleResult.lipschitz`` is
  False: a jump, an infinite one-sided derivative, ``f`` not continuous), and matching none of the above
  (neither one-sided derivative, nor their mean when both are finite). No Clarke set exists there, so no
  value is "outside" it: ``sqrt(|x - 1|) + 1`` at 1 has one-sided derivatives ``-oo`` and ``oo`` and a value
  of 0 is ``not-lipschitz``, not ``outside-clarke``. It takes the place of ``outside-clarke`` at such points.
* ``outside-clarke``: finite and matching none of the above where the oracle has a Clarke set (``f``
  locally Lipschitz), or at the edge of the domain with finite one-sided derivatives (``lipschitz`` None,
  no Clarke set): no oracle set contains the value.
* ``outside-domain``: a finite value where ``f`` has no real value at the point or none next to it (``relu(sqrt(x))``
  at -10; an eigenvector's entry at a repeated eigenvalue, 0/0).
* ``not-judged``: the oracle could not decide the case (``OracleResult.kind == "not-judged"``, its ``reason``
  says why); a finite value gets this label alone, an infinite one follows ``+inf``/``-inf``. Last: it is
  no judgement at all, only a marker that the value was not compared with anything.
* ``own-constants``: never from :func:`classify` and never first: the report adds it where a program's own
  function differs from its case's by documented constants (:attr:`kinkcheck.catalog.Case.own_functions`:
  tinygrad's and MLX's SELU round λ to 1.0507), so the labels before it judge the value against the
  program's own function; the program's note names the constants. The same value then reads the same in
  every dtype (1.0507 is ``right`` for λ = 1.0507, in float32 and float64 alike).

Equality is component-wise within :func:`tolerance` of the dtype (absolute plus relative); two infinities
of the same sign are equal. This module imports only NumPy; it reads oracle numbers with ``float()``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np

from kinkcheck.dtypes import DTYPE_INFO, canonical
from kinkcheck.language.geometry import hull_distance
from kinkcheck.vocabulary import DIFFERENTIABLE, JUMP, KINK, NOT_JUDGED, UNDEFINED

if TYPE_CHECKING:
    from kinkcheck.oracles.symbolic import OracleResult

__all__ = [
    "LABELS",
    "TOLERANCES",
    "OracleNumbers",
    "classify",
    "lipschitz_of_json",
    "same_value",
    "tolerance",
]

LABELS: tuple[str, ...] = (
    "error",
    "unavailable",
    "nan",
    "+inf",
    "-inf",
    "derivative",
    "left",
    "right",
    "left-piece",
    "right-piece",
    "split-even",
    "first",
    "last",
    "one-index",
    "min-norm",
    "mean",
    "in-clarke",
    "not-lipschitz",
    "outside-clarke",
    "outside-domain",
    "not-judged",
    "own-constants",
)

#: Absolute and relative tolerance per dtype: a few units in the last place of each format's epsilon
#: (float64 2.2e-16, float32 1.2e-7, float16 9.8e-4, bfloat16 7.8e-3), loose enough for one rounding of
#: a product or a transcendental, tight enough that 0.5 and 0.50000006 differ in float64.
#: dtype → value tolerance (:attr:`kinkcheck.dtypes.DType.value`).
TOLERANCES: dict[str, float] = {d.name: d.value for d in DTYPE_INFO.values()}


def tolerance(dtype: str) -> float:
    """Absolute and relative tolerance for comparing a value of ``dtype`` with an exact oracle value.

    Parameters
    ----------
    dtype : str
        ``"float64"``, ``"float32"``, ``"float16"`` or ``"bfloat16"``; a ``torch.`` or ``jax.numpy.`` prefix
        and the aliases ``double``/``float``/``half`` are accepted.

    Returns
    -------
    float
        ``1e-9``, ``1e-5``, ``2e-3`` or ``1.6e-2``.

    Raises
    ------
    ValueError
        For any other dtype.
    """
    name = canonical(dtype)
    if name is None:
        raise ValueError(f"unknown dtype {dtype!r} (known: {', '.join(TOLERANCES)})")
    return TOLERANCES[name]


# --------------------------------------------------------------------------- labels


@dataclass(frozen=True)
class OracleNumbers:
    """The oracle's numbers as floats, read from :meth:`OracleResult.to_json` (e.g. the on-disk cache).

    Has the attributes :func:`classify` reads, with the same meaning as on
    :class:`~kinkcheck.oracles.symbolic.OracleResult`, so the report can classify without sympy.
    """

    case_id: str
    components: tuple[str, ...]
    kind: str
    tie: bool
    derivative: tuple[float, ...] | None
    left: float | None
    right: float | None
    limiting_gradients: tuple[tuple[float, ...], ...]
    clarke: tuple[tuple[float, ...], ...] | None
    min_norm: tuple[float, ...] | None
    midpoint: tuple[float, ...] | None
    shape: str | None = None
    lipschitz: bool | None = None
    reason: str | None = None
    left_piece: float | None = None
    right_piece: float | None = None
    first: tuple[float, ...] | None = None
    last: tuple[float, ...] | None = None
    #: "unknown" where the form judged hides which input is earlier (grad's sympy form of an order statistic):
    #: then no tie-position label is given, ``one-index`` included
    tie_position: str | None = None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> OracleNumbers:
        """Build from a ``to_json()`` dict; raises KeyError or ValueError on a malformed one.

        A dict written before the oracle had ``lipschitz`` and ``reason`` (an old cache entry, a second-order
        entry) still reads: ``reason`` is then None and ``lipschitz`` is derived by :func:`lipschitz_of_json`.
        """

        def num(e: Any) -> float | None:
            return None if e is None else float(e["float"])

        def vec(v: Any) -> tuple[float, ...] | None:
            return None if v is None else tuple(num(c) for c in v)

        return cls(
            case_id=d["case"], components=tuple(d["components"]), kind=d["kind"], tie=bool(d["tie"]),
            derivative=vec(d["derivative"]), left=num(d["left"]), right=num(d["right"]),
            limiting_gradients=tuple(vec(g) for g in d["limiting_gradients"]),
            clarke=None if d["clarke"] is None else tuple(vec(g) for g in d["clarke"]),
            min_norm=vec(d["min_norm"]), midpoint=vec(d["midpoint"]), shape=d.get("shape"),
            lipschitz=d["lipschitz"] if "lipschitz" in d else lipschitz_of_json(d), reason=d.get("reason"),
            left_piece=num(d.get("left_piece")), right_piece=num(d.get("right_piece")),
            first=vec(d.get("first")), last=vec(d.get("last")), tie_position=d.get("tie_position"),
        )


def lipschitz_of_json(d: dict[str, Any]) -> bool | None:
    """``OracleResult.lipschitz`` for a ``to_json()`` dict that predates the field.

    True for ``differentiable`` and for a ``kink`` with a Clarke set; False for a ``jump`` and for a ``kink``
    without a Clarke set whose notes say ``f`` is not locally Lipschitz or whose limiting gradients hold an
    infinite component (``sqrt`` at 0); None otherwise (``undefined``, the edge of the domain with finite
    one-sided derivatives, ``not-judged``).
    """
    kind = d.get("kind")
    if kind == DIFFERENTIABLE or (kind == KINK and d.get("clarke") is not None):
        return True
    if kind == JUMP:
        return False
    if kind == KINK:
        notes = " ".join(str(n) for n in d.get("notes") or ())
        infinite = any(math.isinf(float(c["float"])) for g in d.get("limiting_gradients") or () for c in g
                       if c is not None)
        if infinite or "not locally Lipschitz" in notes:
            return False
    return None


def _f(v: Any) -> float:
    return float(v)  # sympy numbers, oo and -oo convert; sympy is not imported here


@lru_cache(maxsize=4096)
def _numbers(oracle: OracleResult | OracleNumbers) -> dict[str, Any]:
    def vec(v: Sequence[Any] | None) -> tuple[float, ...] | None:
        return None if v is None else tuple(_f(c) for c in v)

    return {
        "derivative": vec(oracle.derivative),
        "left": None if oracle.left is None else _f(oracle.left),
        "right": None if oracle.right is None else _f(oracle.right),
        "limiting": tuple(vec(g) for g in oracle.limiting_gradients),
        "clarke": None if oracle.clarke is None else tuple(vec(g) for g in oracle.clarke),
        "min_norm": vec(oracle.min_norm),
        "midpoint": vec(oracle.midpoint),
        "left_piece": None if oracle.left_piece is None else _f(oracle.left_piece),
        "right_piece": None if oracle.right_piece is None else _f(oracle.right_piece),
        "first": vec(getattr(oracle, "first", None)),
        "last": vec(getattr(oracle, "last", None)),
    }


def _close(a: float, b: float, tol: float) -> bool:
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= tol + tol * abs(b)


def _equals(value: Sequence[float], target: Sequence[float] | None, tol: float) -> bool:
    return target is not None and len(target) == len(value) and all(_close(a, b, tol) for a, b in zip(value, target))


def same_value(a: Sequence[float], b: Sequence[float], dtype: str) -> bool:
    """Whether two observed gradients (flat, same component order) are equal within :func:`tolerance`.

    Used to group programs that return the same convention; unlike a comparison with the oracle, NaN
    matches NaN here (two programs that both return NaN agree with each other).
    """
    if len(a) != len(b):
        return False
    if a == b:  # the common case: equal values (a NaN falls through to the comparison below)
        return True
    tol = TOLERANCES.get(dtype) or tolerance(dtype)  # the canonical names first, without normalising
    return all(
        (math.isnan(x) and math.isnan(y)) or (not math.isnan(x) and not math.isnan(y) and _close(x, y, tol))
        for x, y in zip(a, b)
    )


def classify(
    value: Sequence[float] | None,
    oracle: OracleResult | OracleNumbers,
    dtype: str,
    *,
    error: str | None = None,
    unavailable: str | None = None,
) -> list[str]:
    """Labels of an observed gradient, in :data:`LABELS` order (the first is the one shown); never empty.

    Parameters
    ----------
    value : sequence of float, shape (n,), or None
        The flat gradient in ``oracle.components`` order; may hold nan and infinities. None only with
        ``error`` or ``unavailable``.
    oracle : kinkcheck.oracles.symbolic.OracleResult or OracleNumbers
        Its ``lipschitz`` decides ``not-lipschitz`` against ``outside-clarke``; a ``"not-judged"`` kind gives
        ``not-judged`` (after ``+inf``/``-inf``; ``nan``, ``error`` and ``unavailable`` as usual).
    dtype : str
        The dtype the value was computed in; sets the tolerance (:func:`tolerance`).
    error : str, optional
        The program raised: the only label is ``"error"``.
    unavailable : str, optional
        The program could not run here (mode or op missing): the only label is ``"unavailable"``.

    Returns
    -------
    list of str

    Raises
    ------
    ValueError
        Unknown dtype; ``value`` None without ``error``/``unavailable``; a length other than the oracle's
        number of components.
    """
    tol = tolerance(dtype)
    if error is not None:
        return ["error"]
    if unavailable is not None:
        return ["unavailable"]
    if value is None:
        raise ValueError("value is None but neither error nor unavailable is given")
    v = [float(c) for c in np.asarray(value, dtype=np.float64).reshape(-1)]
    if len(v) != len(oracle.components):
        raise ValueError(f"value has {len(v)} components, the oracle {len(oracle.components)} ({oracle.case_id})")
    if any(math.isnan(c) for c in v):
        return ["nan"]
    num = _numbers(oracle)
    labels: set[str] = set()
    scalar = len(v) == 1
    finite = all(math.isfinite(c) for c in v)
    if not finite:
        labels.update("+inf" for c in v if c == math.inf)
        labels.update("-inf" for c in v if c == -math.inf)
    if scalar:
        if num["left"] is not None and _close(v[0], num["left"], tol):
            labels.add("left")
        if num["right"] is not None and _close(v[0], num["right"], tol):
            labels.add("right")
        for side in ("left", "right"):  # at a jump: the slope of a piece, which is not a derivative of f there
            piece = num[f"{side}_piece"]
            if piece is not None and _close(v[0], piece, tol):
                labels.add(f"{side}-piece")
    if oracle.kind == NOT_JUDGED:  # nothing to compare with; an infinity is still said
        labels.add("not-judged")
        return _ordered(labels)
    if not finite:
        return _ordered(labels)
    if oracle.kind == UNDEFINED:
        return ["outside-domain"]
    if oracle.kind == DIFFERENTIABLE:
        return ["derivative"] if _equals(v, num["derivative"], tol) else ["outside-clarke"]
    if scalar and num["left"] is not None and num["right"] is not None:
        lo, hi = num["left"], num["right"]
        if math.isfinite(lo) and math.isfinite(hi) and not _close(lo, hi, tol) and _close(v[0], (lo + hi) / 2, tol):
            labels.add("mean")
    limiting = num["limiting"]
    if oracle.tie and limiting:
        mean = tuple(sum(g[i] for g in limiting) / len(limiting) for i in range(len(v)))
        if _equals(v, mean, tol):
            labels.add("split-even")
        if _equals(v, num["first"], tol):
            labels.add("first")
        if _equals(v, num["last"], tol):
            labels.add("last")
        if not labels & {"first", "last"} and getattr(oracle, "tie_position", None) != "unknown" and any(
                _equals(v, g, tol) for g in limiting):
            labels.add("one-index")
    clarke = num["clarke"]
    unmeasurable = False  # a Clarke set with an infinite corner (a constant past float64): no distance to it
    if clarke is not None:
        if _equals(v, num["min_norm"], tol):
            labels.add("min-norm")
        unmeasurable = not all(math.isfinite(c) for g in clarke for c in g) or not all(math.isfinite(c) for c in v)
        if not unmeasurable:
            scale = max(1.0, max(abs(c) for g in clarke for c in g), max(abs(c) for c in v))
            if hull_distance(v, clarke) <= tol * scale:
                labels.add("in-clarke")
    if not labels & {"left", "right", "left-piece", "right-piece", "mean", "split-even", "first", "last", "one-index",
                     "min-norm", "in-clarke"}:
        # no Clarke set exists where f is not locally Lipschitz: the value cannot be outside one; nor is a value
        # outside a set whose corners are not finite numbers (nothing measures the distance)
        labels.add("not-lipschitz" if _lipschitz(oracle) is False else "not-judged" if unmeasurable
                   else "outside-clarke")
    return _ordered(labels)


def _lipschitz(oracle: OracleResult | OracleNumbers) -> bool | None:
    """``oracle.lipschitz``; a jump is never locally Lipschitz, whatever an older result says."""
    if oracle.kind == JUMP:
        return False
    return oracle.lipschitz


def _ordered(labels: set[str]) -> list[str]:
    return [lab for lab in LABELS if lab in labels]
