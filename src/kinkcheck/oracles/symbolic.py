"""The sympy oracle: one-sided derivatives, limiting gradients, the Clarke set and its minimum-norm element.

A case's ``sympy`` field is parsed with :mod:`kinkcheck.language.expr` and evaluated over real sympy symbols
(:func:`to_sympy`); a mapped program gives the same kind of expression (:mod:`kinkcheck.oracles.mapping`).
:func:`analyze_expression` then probes the function along curves ``p + t d + t**2 w`` (``t -> 0+``):

1. The expression is prepared: binary floats become exact decimals, ``atan2`` becomes a ``Piecewise`` of
   ``atan`` pieces (its branch cut and the origin are kinks like the others), ``Mod``/``frac`` become
   ``floor`` forms, and ``0**e`` becomes ``Piecewise((0, e > 0), (1, Eq(e, 0)))`` (undefined for ``e < 0``).
2. For each probe direction ``d`` it decides, exactly, which analytic piece of every ``Max``/``Min``/``Abs``/
   ``sign``/``Heaviside``/``floor``/``ceiling``/``Piecewise`` (and ``0**e`` after a selection) is active on
   the curve. ``w`` is a fixed generic tie-breaker, so a tie among several elements resolves to one piece
   whose region contains the curve, and the curve leaves every non-differentiable set through ``p`` (the
   straight ray ``p + t d`` stays inside ``v = 0`` for ``|a v|`` along ``d = e_a``). Conditions are decided
   by the sign of exact expressions at ``t = s 10**-30`` and ``t = s 10**-40``; the two signs must agree.
   ``s`` is a power of ten no larger than 1, than any nonzero ``|p_i|``, than any nonzero constant of the
   expression and than any nonzero gap at ``p`` (a kinked function's argument, the difference of two
   ``Max``/``Min`` arguments, a ``floor`` argument's distance to the nearest integer), so ``Max(x, 1e-300)``
   at 0 is probed at ``t = 10**-330``. The working precision and the threshold below which a value counts
   as zero scale with ``t`` (``_Scale``).
3. The selected piece has no kinks left; its value and gradient are substituted at the point when finite
   (their limit, by continuity of elementary functions) or else their limit along the same curve is taken
   with :func:`sympy.limit`; when that limit has no value the piece is simplified once and tried again.

A component at ``+-oo`` (``--at x=inf``) is probed on ``x = +-1 / (t + t**2 w)``: the limits as
``x -> +-oo``, with one side only. A component that is nan is not judged.

This order avoids two sympy 1.14 pitfalls (``shared/DESIGN.md``): ``limit`` across pieces returned the
wrong one-sided value for ``Piecewise((x, x > 0), (x/100, True))`` and raised on nested ``Max``/``Min``.

The Clarke generalized gradient of a locally Lipschitz ``f`` is the convex hull of the limits of gradients
taken at points of differentiability (Clarke 1983, *Optimization and Nonsmooth Analysis*, Theorem 2.5.1);
the probe directions sample those limits. PyTorch documents the minimum-norm element of that set as its
rule for convex/concave points (autograd notes, "Gradients for non-differentiable functions"). Where ``f``
is not locally Lipschitz (a jump, an infinite one-sided derivative) no Clarke set exists
(``OracleResult.lipschitz`` is False).

Probe directions: for one component ``-1`` then ``+1`` (left, right); for ``n <= 3`` components ``+-e_i``
and every sign vector in ``{-1, 1}**n``; for ``n > 3`` ``+-e_i`` and four fixed generic directions. These
alone miss a piece selected only on a cone that holds none of them (``Max(5x + 2y, -20x + 50y, 20x - 50y)``
at 0: ``5x + 2y`` wins only between 16 and 27 degrees), so for ``n >= 2`` finite components they are refined
(:mod:`kinkcheck.oracles.cones`). The piece selected along ``d`` depends only on the signs of the
selection's decisions (a ``Max``'s winner minus each other argument, an ``Abs`` argument, a condition's
``lhs - rhs``, a ``floor`` argument minus an integer); a decision that is 0 at ``p`` with a finite nonzero
gradient ``g`` has the sign of ``g . d``, so it changes sign on the hyperplane ``g . d = 0``, and each
probe's selection holds on the open cone where its decisions keep their signs (its region). Every open cell
of the arrangement of those hyperplanes that lies in no region gets a probe at an interior integer
direction, whose decisions may add hyperplanes, until every cell is covered. Guarantee, when no note says
otherwise: every piece selected on an open cone of directions through ``p`` whose boundaries are first-order
ties contributes its limiting gradient (for a piecewise-affine ``f``, nested
``Max``/``Min``/``Abs``/``Piecewise`` included, the Clarke set is then exact). Not covered: a tie whose
first-order term vanishes at ``p`` (``x**2 - y**2``; such cones are left to the fixed probes), cones thinner
than about ``1e-7`` radians, and more than 64 added directions, 16 rounds, 512 cells or 1000 tested cells to
split (a note then says the Clarke set may miss vertices). A piece active only on a set without interior
(``(x + y)/2 - (x - y)**2`` inside ``Max(x, y, .)``) is never selected: the curve's ``t**2 w`` leaves such
sets. A function whose active piece is itself singular at the point (the Euclidean norm at the origin) has a
continuum of limiting gradients; the probes then give an inscribed polytope, and a note says so.

Whatever cannot be decided (a sign that differs between the probe scales, a limit sympy leaves unevaluated
or that does not exist, a sympy failure) comes back as ``kind == "not-judged"`` with a ``reason``; the
oracle never raises for a mathematical reason.

The work is split by job, each module importing only those before it: :mod:`~kinkcheck.oracles.translate`
(the case as a sympy expression, step 1), :mod:`~kinkcheck.oracles.pieces` (probe scale, directions, piece
selection and limits, steps 2-3), :mod:`~kinkcheck.oracles.cones` (the refinement of directions),
:mod:`~kinkcheck.oracles.clarke` (distinct gradients, hull, exact minimum-norm element, shape) and this
module, the public face: :class:`OracleResult` (one type for the gradient oracle and the second-order one),
:func:`analyze` and :func:`analyze_expression`, with the public names of the others re-exported.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import sympy

from kinkcheck.language import expr as ex
from kinkcheck.catalog import Case
from kinkcheck.oracles.clarke import _continuum, _distinct, _eq, _hull_summary, _local_shape
from kinkcheck.oracles.cones import _refine
from kinkcheck.oracles.routing import routing
from kinkcheck.oracles.pieces import (
    OracleError,
    _finite_real,
    axis_jump,
    _Probe,
    _probe,
    _Scale,
    _scale_for,
    probe_directions,
)
from kinkcheck.oracles.translate import (
    _SYMPY_FAILURES,
    _exact_float,
    _prepare,
    _symbols_for,
    kth_smallest,
    sympy_namespace,
    to_sympy,
    xlogy,
)

__all__ = [
    "OracleError",
    "OracleResult",
    "analyze",
    "analyze_expression",
    "kth_smallest",
    "probe_directions",
    "sympy_namespace",
    "to_sympy",
    "xlogy",
]


@dataclass(frozen=True)
class OracleResult:
    """What the sympy oracle says about one case.

    Every number is an exact sympy expression (``Integer``, ``Rational``, ``sqrt(2)/2``, ``oo``, ``-oo``).

    Attributes
    ----------
    case_id : str
    components : tuple of str
        Flattened gradient components in input order: ``("x",)``, ``("x", "y")``, ``("v[0]", ...)``,
        ``("m[0][0]", "m[0][1]", ...)`` (row-major).
    kind : str
        ``"differentiable"``, ``"kink"`` (continuous, not differentiable, or at the edge of the domain),
        ``"jump"`` (discontinuous), ``"undefined"`` (no probe direction is real-valued) or ``"not-judged"``
        (the oracle cannot decide; ``reason`` says why and every other value is empty). A continuous ``f``
        that is not locally Lipschitz (``sqrt(Abs(x - 1))`` at 1: one-sided derivatives ``-oo``, ``oo``)
        stays ``"kink"`` with ``clarke`` None and ``lipschitz`` False.
    derivative : tuple of sympy.Expr or None
        The gradient, shape ``(n,)``, when ``kind == "differentiable"``.
    left, right : sympy.Expr or None
        One-sided derivatives ``f'(p-)``, ``f'(p+)`` for one-component cases (may be ``oo``/``-oo``): the
        limits of the difference quotients ``(f(p + h) - f(p)) / h``. At a jump that is ``oo`` or ``-oo`` on a
        side where ``f`` jumps (the quotient grows without bound; ``heaviside`` at 0: ``oo`` on both sides),
        the piece's slope on a side where ``f`` is continuous (``floor`` at 1: left ``oo``, right 0), and None
        when ``f(p)`` is not a number. None for several components or when that side is outside the real domain.
    left_piece, right_piece : sympy.Expr or None
        At a jump of a one-component case, the slopes of the pieces on each side (what a framework that
        differentiates the active piece returns: ``floor`` has 0 on both), never called one-sided derivatives;
        None elsewhere.
    limiting_gradients : tuple of tuple of sympy.Expr
        Distinct limits of the active pieces' gradients along the probe directions, each of shape ``(n,)``,
        sorted by the position of the first nonzero component (all-zero last), then by value.
    clarke : tuple of tuple of sympy.Expr or None
        Vertices of the convex hull of ``limiting_gradients`` (for one component ``((lo,), (hi,))`` or a single
        point); None when ``f`` is not locally Lipschitz at the point (jump, infinite one-sided derivative,
        edge of the domain, undefined).
    min_norm : tuple of sympy.Expr or None
        Minimum-norm element of the Clarke set, exact.
    midpoint : tuple of sympy.Expr or None
        Mean of the Clarke vertices (for an interval ``(lo + hi) / 2``).
    sympy_diff : tuple of (sympy.Expr or None)
        ``diff(f, s)`` at the point (substituted simultaneously, then ``doit()``) per component: sympy's
        own value, a convention (``Heaviside(0) = 1/2``, ``sign(0) = 0``); None when unevaluated
        (``floor``, ``DiracDelta(0)``), nan, infinite or complex. The notes record what sympy gave.
    notes : tuple of str
    tie : bool
        Copied from the case: the kink is a tie, so tie labels apply.
    shape : str or None
        First-order shape of the kink, for PyTorch's documented rule (see :mod:`kinkcheck.judge.conformance`):
        ``"convex"`` when along every probe direction ``d`` the directional derivative ``f'(p; d)`` is the
        largest of ``g . d`` over the limiting gradients ``g`` (f is locally a max of its pieces, so the
        Clarke set is the subdifferential), ``"concave"`` when it is the smallest (a min of its pieces: the
        superdifferential), and every active piece curves upwards along the probe lines (``d^T H d >= 0``
        in the limit at the point); ``"concave"`` when it is the smallest and every piece curves downwards;
        ``"neither"`` otherwise (``selu`` at 0: left slope 1.758 > right slope 1.051, but the left piece
        ``λα(e^x - 1)`` is strictly convex). None unless ``kind == "kink"`` with a Clarke set.
    reason : str or None
        ``"not judged: <why>"`` when ``kind == "not-judged"``, else None.
    lipschitz : bool or None
        True when ``f`` is locally Lipschitz at the point, so the Clarke set exists (``differentiable``, or a
        ``kink`` with ``clarke``); False when it is not: a jump or a value that is not finite at the point, an
        infinite one-sided derivative (``sqrt`` at 0, ``xlogy(x, y)`` at the origin); None when undecided
        (``not-judged``, ``undefined``, or the edge of the domain with finite one-sided derivatives). At a
        point with an infinite component "locally" means on a neighbourhood of infinity.
    second_order : OracleResult or None
        The oracle of the ``second-order`` mode (``H @ 1``), of the same type with ``order == 2``: its
        ``derivative``, ``left``, ``right``, ``limiting_gradients``, ``clarke``, ``min_norm`` and ``midpoint``
        hold one-sided ``H @ 1`` values where the fields above hold gradients (see :func:`_second_order`), so
        :func:`kinkcheck.oracles.classify.classify` reads it as it reads this one. None on a second-order result
        and on a not-judged one.
    order : int
        1 for the gradient oracle, 2 for the second-order one.

    At a point with a component at ``+oo`` only the left side exists (``left`` holds the limit of the
    derivative as ``x -> oo``, ``right`` is None); at ``-oo`` only the right side.
    """

    case_id: str
    components: tuple[str, ...]
    kind: str
    derivative: tuple[sympy.Expr, ...] | None
    left: sympy.Expr | None
    right: sympy.Expr | None
    limiting_gradients: tuple[tuple[sympy.Expr, ...], ...]
    clarke: tuple[tuple[sympy.Expr, ...], ...] | None
    min_norm: tuple[sympy.Expr, ...] | None
    midpoint: tuple[sympy.Expr, ...] | None
    sympy_diff: tuple[sympy.Expr | None, ...]
    notes: tuple[str, ...] = ()
    tie: bool = False
    #: The oracle of the ``second-order`` mode (``order == 2``, see :func:`_second_order`); None on itself.
    second_order: OracleResult | None = field(default=None, compare=False)
    shape: str | None = None
    reason: str | None = None
    lipschitz: bool | None = None
    order: int = 1
    #: At a jump (one component): the slopes of the pieces left and right of the point, which are not the
    #: one-sided derivatives there (see ``left``, ``right``); None elsewhere.
    left_piece: sympy.Expr | None = None
    right_piece: sympy.Expr | None = None
    #: At a tie (``tie`` True): the gradient under each tie routing by input position (``first``: every tied
    #: max, min or order statistic credits its earliest tied input; ``last``: its latest), exact, shape
    #: ``(n,)``, from :func:`kinkcheck.oracles.routing.routing`; None where position does not decide it (the
    #: notes say why) and on every case that is not a tie.
    first: tuple[sympy.Expr, ...] | None = None
    last: tuple[sympy.Expr, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict.

        Every exact value becomes ``{"exact": str(value), "float": float}`` with non-finite floats written
        ``"inf"``, ``"-inf"``, ``"nan"``; vectors are lists of those; None stays None. ``second_order`` is
        its own ``to_json()``; a second-order result (``order == 2``) leaves out ``second_order``, ``shape``,
        ``reason`` and ``lipschitz`` and orders its keys as such entries always have.
        """

        def vec(v: Sequence[sympy.Expr] | None) -> list[Any] | None:
            return None if v is None else [_num_json(c) for c in v]

        if self.order == 2:  # the layout second-order entries have always had, so cached tables and reports keep
            return {
                "case": self.case_id,
                "components": list(self.components),
                "tie": self.tie,
                "left": _num_json(self.left),
                "right": _num_json(self.right),
                "sympy_diff": vec(self.sympy_diff),
                "kind": self.kind,
                "derivative": vec(self.derivative),
                "limiting_gradients": [vec(g) for g in self.limiting_gradients],
                "clarke": None if self.clarke is None else [vec(g) for g in self.clarke],
                "min_norm": vec(self.min_norm),
                "midpoint": vec(self.midpoint),
                "notes": list(self.notes),
            }
        return {
            "case": self.case_id,
            "components": list(self.components),
            "kind": self.kind,
            "tie": self.tie,
            "derivative": vec(self.derivative),
            "left": _num_json(self.left),
            "right": _num_json(self.right),
            "limiting_gradients": [vec(g) for g in self.limiting_gradients],
            "clarke": None if self.clarke is None else [vec(g) for g in self.clarke],
            "min_norm": vec(self.min_norm),
            "midpoint": vec(self.midpoint),
            "sympy_diff": vec(self.sympy_diff),
            "notes": list(self.notes),
            "second_order": None if self.second_order is None else self.second_order.to_json(),
            "shape": self.shape,
            "reason": self.reason,
            "lipschitz": self.lipschitz,
            "left_piece": _num_json(self.left_piece),
            "right_piece": _num_json(self.right_piece),
            "first": vec(self.first),
            "last": vec(self.last),
        }


def _num_json(v: sympy.Expr | None) -> dict[str, Any] | None:
    if v is None:
        return None
    return {"exact": str(v), "float": _float_json(v)}


def _float_json(v: sympy.Expr) -> float | str:
    if v is sympy.oo:
        return "inf"
    if v is sympy.S.NegativeInfinity:
        return "-inf"
    try:
        f = float(v)
    except (TypeError, ValueError):
        return "nan"
    if math.isnan(f):
        return "nan"
    if math.isinf(f):
        return "inf" if f > 0 else "-inf"
    return f


# --------------------------------------------------------------------------- sympy's own value


def _sympy_diff(
    f: sympy.Expr, syms: Sequence[sympy.Symbol], point: Sequence[sympy.Expr]
) -> tuple[tuple[sympy.Expr | None, ...], list[str]]:
    """sympy's own derivative at the point, per component, and notes naming the conventions it used.

    The point is substituted simultaneously (``xreplace``): sequential ``subs`` turns
    ``v0/sqrt(v0**2 + v1**2)`` into ``0/sqrt(v1**2) = 0`` before ``v1`` is replaced, an artifact of order.
    """
    sub = dict(zip(syms, point))
    out: list[sympy.Expr | None] = []
    conventions: set[str] = set()
    raw: list[str] = []
    partials: dict[tuple[sympy.Expr, int], sympy.Expr] = {}
    for s in syms:
        try:
            d = _diff(f, s, partials)
            if d.has(sympy.Derivative, sympy.Subs):  # floor/ceiling: sympy leaves the derivative unevaluated
                out.append(None)
                raw.append(f"{s.name}: an unevaluated Derivative")
                continue
            for h in d.atoms(sympy.Heaviside):
                if h.args[0].xreplace(sub) == 0:
                    conventions.add("Heaviside(0) = 1/2")
            for h in d.atoms(sympy.sign):
                if h.args[0].xreplace(sub) == 0:
                    conventions.add("sign(0) = 0")
            v = d.xreplace(sub).doit()
        except _SYMPY_FAILURES as err:  # sympy's own value is informative only; its failure is recorded
            out.append(None)
            raw.append(f"{s.name}: {type(err).__name__}")
            continue
        if v.has(sympy.DiracDelta, sympy.floor, sympy.ceiling) or not _finite_real(v):
            out.append(None)
            raw.append(f"{s.name}: {v}")
        else:
            out.append(v)
    notes = [f"sympy_diff uses sympy's convention {c}" for c in sorted(conventions)]
    if raw:
        notes.append("sympy's own derivative at the point is not a finite real number (" + "; ".join(raw) + ")")
    return tuple(out), notes


def _diff(e: sympy.Expr, s: sympy.Symbol, partials: dict[tuple[sympy.Expr, int], sympy.Expr]) -> sympy.Expr:
    """``sympy.diff(e, s)``, the same expression, with the partial derivatives of ``Max``/``Min`` kept in
    ``partials`` from one symbol to the next.

    sympy differentiates ``Max(a_1, ..., a_k)`` as ``sum_i Heaviside(a_i - Max(others)) * diff(a_i, s)``
    (``MinMaxBase._eval_derivative`` and ``Max.fdiff`` in sympy 1.14); building each ``Max(others)``
    compares its arguments pairwise, and the 15 arguments of the median of 6 took 0.8 s per symbol. Those
    partials do not depend on ``s``, so each is built once. The steps are sympy's own (an argument whose
    derivative is zero is skipped; ``s`` not in ``e`` gives 0), so the result is the expression
    ``sympy.diff`` gives; anything else is left to ``sympy.diff``.
    """
    if not isinstance(e, (sympy.Max, sympy.Min)) or s not in e.free_symbols:
        return sympy.diff(e, s)
    terms = []
    for i, a in enumerate(e.args, 1):
        da = _diff(a, s, partials)
        if da.is_zero:
            continue
        if (e, i) not in partials:
            partials[e, i] = e.fdiff(i)
        terms.append(partials[e, i] * da)
    return sympy.Add(*terms)


# --------------------------------------------------------------------------- analysis

_CACHE: dict[tuple[str, str, str, bool], OracleResult] = {}


def analyze(case: Case) -> OracleResult:
    """Judge a catalog case: :func:`to_sympy` then :func:`analyze_expression`.

    Results are cached per case (id, sympy field, point and tie flag).

    Parameters
    ----------
    case : kinkcheck.catalog.Case

    Returns
    -------
    OracleResult
        ``kind == "not-judged"`` (with ``reason``) when the oracle cannot decide, or when the case's sympy
        field does not evaluate at its point; never raises for a catalog case.
    """
    key = (case.id, case.sympy, repr(case.at), case.tie)
    hit = _CACHE.get(key)
    if hit is None:
        try:
            f, syms, point = to_sympy(case)
        except ex.ExprError as err:
            names: list[sympy.Symbol] = []
            for name, value in case.at.items():
                _symbols_for(name, value, names, [])
            hit = _not_judged(case.id, tuple(s.name for s in names), case.tie, f"not judged: {err}")
        else:
            hit = analyze_expression(f, syms, point, case_id=case.id, tie=case.tie)
            if case.tie and hit.kind != "not-judged":
                hit = _with_routing(hit, case)
        _CACHE[key] = hit
    return hit


def _with_routing(hit: OracleResult, case: Any, nested: bool = True) -> OracleResult:
    """``hit`` with the tie routings ``first`` and ``last`` of :func:`kinkcheck.oracles.routing.routing` of
    ``case`` (anything with ``sympy`` and ``at``); a routing position does not decide is None and a note says
    why."""
    got = routing(case, nested=nested)
    notes = hit.notes
    if got.reason is not None:
        notes = (*notes, f"first/last by input position: none ({got.reason})")
    return replace(hit, first=got.first, last=got.last, notes=notes)


def _not_judged(case_id: str, components: tuple[str, ...], tie: bool, reason: str,
                notes: Sequence[str] = ()) -> OracleResult:
    return OracleResult(
        case_id=case_id, components=components, kind="not-judged", derivative=None, left=None, right=None,
        limiting_gradients=(), clarke=None, min_norm=None, midpoint=None, sympy_diff=(None,) * len(components),
        notes=(*notes, reason), tie=tie, reason=reason, lipschitz=None,
    )


def analyze_expression(f: sympy.Expr, symbols: Sequence[sympy.Symbol], point: Sequence[sympy.Expr], *,
                       case_id: str = "expression", tie: bool = False, sympy_diff: bool = True) -> OracleResult:
    """Judge a scalar sympy expression at a point: its kind, one-sided derivatives, limiting gradients,
    Clarke set and minimum-norm element, and whether it is locally Lipschitz there.

    Parameters
    ----------
    f : sympy.Expr
        Scalar, over real symbols; the names of :func:`sympy_namespace` (``atan2``, ``Mod``, ``Piecewise`` …).
    symbols : sequence of sympy.Symbol, shape (n,)
        The differentiated components, flat, in input order (names become ``OracleResult.components``).
        Any other free symbol of ``f`` makes the result not judged.
    point : sequence of sympy numbers, shape (n,)
        Exact values (``Integer``/``Rational``, or other real numbers such as ``sqrt(2)``); ``oo``/``-oo``
        judge the limit as that component goes to infinity; ``nan`` is not judged.
    case_id : str
    tie : bool
        Copied to the result (the kink is a tie, so tie labels apply).
    sympy_diff : bool
        Also work out sympy's own value of the derivative at the point (``OracleResult.sympy_diff``, a convention
        the report shows); False leaves it None (the rules' local oracle needs no convention of sympy's, and on a
        large order statistic it costs seconds).

    Returns
    -------
    OracleResult
        ``kind == "not-judged"`` with ``reason`` ``"not judged: <why>"`` when the oracle cannot decide:
        a condition whose sign differs between the probe scales, a limit sympy leaves unevaluated or that
        does not exist, a sympy failure.

    Raises
    ------
    ValueError
        When ``symbols`` and ``point`` differ in length (a caller's error, not a mathematical one).
    TypeError
        When ``f`` is not a scalar sympy expression (``sympy.sympify`` may raise ``SympifyError`` first).
    """
    syms = tuple(symbols)
    components = tuple(s.name for s in syms)
    if len(syms) != len(point):
        raise ValueError(f"{len(syms)} symbols but {len(point)} point components")
    f = sympy.sympify(f)
    if not isinstance(f, sympy.Expr):
        raise TypeError(f"not a scalar sympy expression: {f!r}")
    try:
        pt = tuple(sympy.sympify(p) for p in point)
        nan = [c for c, p in zip(components, pt) if p is sympy.nan]
        if nan:
            return _not_judged(case_id, components, tie, f"not judged: the point is nan ({', '.join(nan)})")
        bad = [c for c, p in zip(components, pt)
               if not (p in (sympy.oo, sympy.S.NegativeInfinity) or _finite_real(p))]
        if bad:
            return _not_judged(case_id, components, tie, f"not judged: the point is not real ({', '.join(bad)})")
        if not syms:
            return _not_judged(case_id, components, tie, "not judged: no differentiated inputs")
        infinite = [c for c, p in zip(components, pt) if p in (sympy.oo, sympy.S.NegativeInfinity)]
        if len(infinite) > 1:  # max(x, y) at (inf, inf): x - y may go anywhere; one curve would pick a side
            return _not_judged(case_id, components, tie, "not judged: several inputs at infinity "
                               f"({', '.join(infinite)}): the limit depends on the path")
        extra = sorted(s.name for s in f.free_symbols - set(syms))
        if extra:
            return _not_judged(case_id, components, tie,
                               f"not judged: {', '.join(extra)} in the expression are not among the inputs")
        return _analyze(f, syms, pt, case_id, tie, sympy_diff)
    except OracleError as err:
        return _not_judged(case_id, components, tie, f"not judged: {err}")
    except _SYMPY_FAILURES as err:  # sympy's own failures, never a traceback in a report
        return _not_judged(case_id, components, tie, f"not judged: sympy failed ({type(err).__name__}: {err})")


def _point_value(f: sympy.Expr, syms: Sequence[sympy.Symbol], point: Sequence[sympy.Expr]) -> sympy.Expr | None:
    try:
        v = f.xreplace(dict(zip(syms, point)))
    except (TypeError, ValueError):  # Max(sqrt(-10), 0): not comparable
        return None
    return v if _finite_real(v) else None


def _embed(d: tuple[int, ...], finite: Sequence[int], n: int) -> tuple[int, ...]:
    """A direction over the finite components as a direction in R^n (0 on components at infinity)."""
    out = [0] * n
    for i, di in zip(finite, d):
        out[i] = di
    return tuple(out)


def _analyze(f: sympy.Expr, syms: tuple[sympy.Symbol, ...], point: tuple[sympy.Expr, ...], case_id: str,
             tie: bool, with_sympy_diff: bool = True) -> OracleResult:
    n = len(syms)
    components = tuple(s.name for s in syms)
    original = f.xreplace({v: _exact_float(v) for v in f.atoms(sympy.Float)})
    f = _prepare(f)
    scale = _scale_for(f, syms, point)
    finite_idx = [i for i, p in enumerate(point) if p.is_finite]
    at_infinity = len(finite_idx) < n
    dirs = (tuple(_embed(d, finite_idx, n) for d in probe_directions(len(finite_idx))) if finite_idx
            else ((0,) * n,))
    probes = {d: _probe(f, syms, point, d, scale) for d in dirs}
    refined = _refine(f, syms, point, scale, probes) if n >= 2 and not at_infinity else None
    sympy_diff, notes = _sympy_diff(original, syms, point) if with_sympy_diff else ((None,) * n, [])
    if refined is not None:
        notes.append(refined)
    defined = [p for p in probes.values() if p is not None]
    left = right = None
    if n == 1 and not at_infinity:
        lp, rp = probes[(-1,)], probes[(1,)]
        left = lp.gradient[0] if lp is not None else None
        right = rp.gradient[0] if rp is not None else None
    elif n == 1:
        only = probes[(0,)]
        g = only.gradient[0] if only is not None else None
        left, right = (g, None) if point[0] is sympy.oo else (None, g)
    if at_infinity:
        notes.append("a component is infinite: the limits are taken as it goes to infinity (one side only)")

    second = _second_order(case_id, components, probes, scale)

    def result(kind: str, lipschitz: bool | None, **kw: Any) -> OracleResult:
        base = dict(
            case_id=case_id, components=components, kind=kind, derivative=None, left=left, right=right,
            limiting_gradients=(), clarke=None, min_norm=None, midpoint=None, sympy_diff=sympy_diff,
            notes=tuple(notes), tie=tie, second_order=second, lipschitz=lipschitz,
        )
        base.update(kw)
        return OracleResult(**base)

    if not defined:
        notes.append("f is not real-valued near the point on any probe direction")
        return result("undefined", None)
    limiting = tuple(_distinct((p.gradient for p in defined), scale))
    sides = [p.value for p in defined]
    if at_infinity:
        fp = sides[0]
        discontinuous = any(not _eq(v, fp, scale) for v in sides)
    else:
        fp = _point_value(f, syms, point)
        if fp is None:  # 0/0 at an eigenvector of a repeated eigenvalue: no function there, so no kind of kink
            notes.append("f has no finite real value at the point itself (it is real on the probe directions "
                         "next to it): not a function there, so no one-sided derivative and no Clarke set")
            return result("undefined", None, limiting_gradients=limiting, left=None, right=None, left_piece=left,
                          right_piece=right)
        discontinuous = any(not _eq(v, fp, scale) for v in sides)
        hit = None if discontinuous or n < 2 else axis_jump(f, syms, point, fp, scale)
        if hit is not None:
            i, s, v = hit
            notes.append(f"along the {'+' if s > 0 else '-'}{components[i]} axis f is {v} at both probe distances, "
                         f"not f(p) = {fp}: a jump on the axis itself, which the probe curves (bent off the axes) "
                         "miss")
            discontinuous = True
    if discontinuous:
        if n == 1 and not at_infinity:
            lp, rp = probes[(-1,)], probes[(1,)]
            lv = lp.value if lp is not None else None
            rv = rp.value if rp is not None else None
            notes.append(f"jump: f(p-) = {lv}, f(p) = {fp}, f(p+) = {rv}; f is not locally Lipschitz, no Clarke set")

            def one_sided(probe: _Probe | None, side: int) -> sympy.Expr | None:
                """lim (f(p + side h) - f(p)) / (side h), h -> 0+: the piece's slope where f is continuous from
                that side, an infinity of the jump's sign where it jumps, none where f(p) is no number."""
                if probe is None or fp is None:
                    return None
                if _eq(probe.value, fp, scale):
                    return probe.gradient[0]
                return sympy.oo if (probe.value - fp) * side > 0 else sympy.S.NegativeInfinity

            left_d, right_d = one_sided(lp, -1), one_sided(rp, 1)
            notes.append("the one-sided derivatives are those of f at the point, not the pieces' slopes "
                         f"(left piece {left}, right piece {right})")
            return result("jump", False, limiting_gradients=limiting, left=left_d, right=right_d, left_piece=left,
                          right_piece=right)
        notes.append("jump: f is discontinuous at the point; f is not locally Lipschitz, no Clarke set")
        return result("jump", False, limiting_gradients=limiting)
    edge = len(defined) < len(probes)
    infinite = any(c.is_finite is False for g in limiting for c in g)
    if edge:
        missing = [d for d, p in probes.items() if p is None]
        where = (f"on the {'left' if missing[0] == (-1,) else 'right'} side" if n == 1
                 else f"along {len(missing)} of the {len(probes)} probe directions")
        notes.append(f"f is not real-valued {where}: the point is at the edge of the domain; no Clarke set")
    if infinite:
        notes.append("an infinite one-sided derivative: f is not locally Lipschitz at the point, no Clarke set")
    if edge or infinite:
        return result("kink", False if infinite else None, limiting_gradients=limiting)
    if len(limiting) == 1:
        g = limiting[0]
        return result("differentiable", True, derivative=g, limiting_gradients=limiting, clarke=(g,), min_norm=g,
                      midpoint=g)
    clarke, mn, mid = _hull_summary(limiting, n)
    if n > 1 and _continuum(defined, scale):
        notes.append(
            "the gradient of the active smooth piece has no limit at the point (it depends on the direction "
            "of approach), so the limiting gradients form a continuum; clarke lists the limits along the "
            "probe directions, vertices of an inscribed polytope of the true Clarke set"
        )
        if all(_eq(sum(c * c for c in g), sympy.S.One, scale) for g in limiting):
            notes.append(
                "every sampled limiting gradient has unit norm, as for the Euclidean norm at the origin, whose "
                "Clarke set is the closed unit ball"
            )
    return result("kink", True, limiting_gradients=limiting, clarke=clarke, min_norm=mn, midpoint=mid,
                  shape=_local_shape(defined, limiting, scale))


def _second_order(case_id: str, components: tuple[str, ...], probes: dict[tuple[int, ...], _Probe | None],
                  scale: _Scale) -> OracleResult:
    """The oracle for the ``second-order`` mode (``H @ 1``): an :class:`OracleResult` with ``order == 2``.

    Its "limiting gradients" are the one-sided ``H @ 1`` of the active smooth pieces along the probe
    directions: the piecewise second derivative. The distributional part (a Dirac mass at a kink of the
    gradient, e.g. ``relu'' = delta``) has no finite value and is left out, as every framework leaves it
    out. When all directions agree the kind is ``"differentiable"`` (label ``derivative``); otherwise
    ``"kink"`` with the convex hull of the one-sided values standing in for the Clarke set (so ``left``,
    ``right``, ``mean``, ``in-clarke`` read as for gradients). No probe direction with a finite real
    ``H @ 1``: ``"undefined"`` (e.g. sqrt at 0, where the second derivative is infinite). ``tie`` is False,
    ``sympy_diff`` all None, ``shape`` and ``reason`` None; ``lipschitz`` is True where the hull stands in
    (as :func:`kinkcheck.oracles.classify.lipschitz_of_json` reads the JSON), None when undefined.
    """
    n = len(components)
    sides = [p.hessian_sum for p in probes.values() if p is not None and p.hessian_sum is not None]
    left = right = None
    if n == 1:
        lp, rp = probes.get((-1,)), probes.get((1,))
        left = lp.hessian_sum[0] if lp is not None and lp.hessian_sum is not None else None
        right = rp.hessian_sum[0] if rp is not None and rp.hessian_sum is not None else None
    notes = ["second order: one-sided H @ 1 of the active smooth pieces; a Dirac mass at the kink is left out"]
    finite = [g for g in sides if all(c.is_finite is not False for c in g)]
    if len(finite) < len(sides):
        notes.append("H @ 1 is infinite on some side; only the finite sides are kept")
    limiting = tuple(_distinct(finite, scale)) if finite else ()

    def result(kind: str, lipschitz: bool | None, **kw: Any) -> OracleResult:
        return OracleResult(case_id=case_id, components=components, kind=kind, left=left, right=right,
                            sympy_diff=(None,) * n, notes=tuple(notes), lipschitz=lipschitz, order=2, **kw)

    if not limiting:
        notes.append("no finite one-sided H @ 1 at the point")
        return result("undefined", None, derivative=None, limiting_gradients=(), clarke=None, min_norm=None,
                      midpoint=None)
    if len(limiting) == 1:
        g = limiting[0]
        return result("differentiable", True, derivative=g, limiting_gradients=limiting, clarke=(g,), min_norm=g,
                      midpoint=g)
    hull, mn, mid = _hull_summary(limiting, n)
    notes.append("the one-sided values differ; their convex hull stands in for a Clarke set")
    return result("kink", True, derivative=None, limiting_gradients=limiting, clarke=hull, min_norm=mn,
                  midpoint=mid)
