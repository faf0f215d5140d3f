"""Property tests: away from its kinks, every catalog program's gradient is the ordinary derivative.

For each catalog case and framework, hypothesis draws one offset per scalar component (in [-0.75, 0.75],
``|offset| >= 0.05``, pairwise at least 0.01 apart so ties are broken) and moves the case's point by it. The
point is rounded to float32 once, so the float64 and the float32 run see the same number, and sympy sees its
exact binary value (``sympy.Rational(float)``). Every program of the case is then run in reverse mode in
float64 and float32 and compared with the exact derivative within ``tolerance(dtype) * max(1, |exact|)``.

The exact derivative is taken piece by piece, as ``shared/DESIGN.md`` ("Oracle pitfalls") advises: each
``Max``/``Min``/``Abs``/``Piecewise``/``floor``/``sign`` in the case's sympy expression is replaced by the
piece active at the (exact) point, and the resulting smooth expression is differentiated. sympy's plain
``diff`` is not enough on its own: on ``sqrt(Max(0, x))`` at ``x < 0`` it gives ``Heaviside(x) /
(2 sqrt(Max(0, x))) = 0 * zoo = nan`` although the function is constant 0 there, and it leaves
``Derivative(floor(x), x)`` unevaluated. Where the plain ``diff`` does evaluate to a finite real number, the
test asserts that it equals the piecewise one (a check on this file's oracle). A point within
:data:`MARGIN` of a kink (a near tie, ``|x| < MARGIN`` under an ``Abs``, ...) is rejected with ``assume``,
and so is a point where the function is not real-valued (``sqrt`` at a negative number).

Known disagreements away from kinks are listed in :data:`KNOWN`, each with its reason; for those the test
asserts that the disagreement is still there, so an entry cannot go stale silently.

Runtime: ``MAX_EXAMPLES`` examples per (case, framework), 3 (6 before the catalog grew from 51 to 169 cases: the
file took 7.7 minutes with 6); override with ``KINKCHECK_PROPERTY_EXAMPLES``. Cases whose programs are not the
ordinary derivative on the drawn neighbourhood by design or by domain are in :data:`NOT_PROPERTY_TESTED`.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from functools import cache, lru_cache

import numpy as np
import pytest
import sympy
from hypothesis import HealthCheck, Phase, assume, given, note, settings
from hypothesis import strategies as st

from kinkcheck.catalog import load_catalog
from kinkcheck.oracles.classify import tolerance
from kinkcheck.vocabulary import flatten
from kinkcheck.oracles.symbolic import to_sympy

CATALOG = load_catalog()
DTYPES = ("float64", "float32")
MAX_EXAMPLES = int(os.environ.get("KINKCHECK_PROPERTY_EXAMPLES", "3"))
#: A drawn point must be at least this far (in the value of the deciding quantity) from any kink or tie.
MARGIN = sympy.Rational(1, 1000)


@dataclass(frozen=True)
class Known:
    """A documented disagreement away from the kink.

    ``expect`` is what the framework returns instead of the derivative: ``"nan"`` (every component nan),
    ``"value"`` (exactly :attr:`value` in every component whose exact derivative is nonzero, the exact 0
    elsewhere) or the name of the exception it raises. ``oracle`` is ``"real"`` when the exact derivative exists at
    every drawn point (so the value is wrong), ``"outside-domain"`` when the function is not real-valued
    there (so there is nothing to agree with, and the test asserts that instead).
    """

    case: str
    framework: str
    program: str
    dtypes: tuple[str, ...]
    expect: str
    oracle: str
    reason: str
    value: float | None = None


WHERE_TRAP = (
    "the where trap (public case P8): where(x > 0, sqrt(x), x) selects x for x < 0, but the VJP of the "
    "unselected sqrt branch is 0 * (1 / (2 sqrt(x))) = 0 * nan = nan and where's backward adds it in"
)
RELU_SQRT = (
    "relu(sqrt(x)) for x < 0 (public case P9): sqrt(x) is not real there, so sympy has no real derivative; "
    "reverse mode gives nan (relu's VJP 0 times sqrt's nan derivative)"
)
HARDSIGMOID_F64 = (
    "torch's CPU hardsigmoid_backward (aten/src/ATen/native/cpu/Activation.cpp) multiplies by the constant "
    "one_sixth(1.0f / 6.0f), computed in float even for double, so the float64 gradient on (-3, 3) is "
    "float32(1/6) = 0.16666667163372040, 3e-8 relative from 1/6: outside the float64 tolerance, not a kink value"
)
ONE_SIXTH_F32 = float(np.float32(1) / np.float32(6))

KNOWN: tuple[Known, ...] = (
    Known("where-sqrt@-1", "torch", "torch.where(x > 0, torch.sqrt(x), x)", DTYPES, "nan", "real", WHERE_TRAP),
    Known("where-sqrt@-1", "jax", "jax.numpy.where(x > 0, jax.numpy.sqrt(x), x)", DTYPES, "nan", "real", WHERE_TRAP),
    Known("where-sqrt@[-1,-4]", "torch", "torch.where(v > 0, torch.sqrt(v), v).sum()", DTYPES, "nan", "real", WHERE_TRAP),
    Known(
        "where-sqrt@[-1,-4]", "jax", "jax.numpy.where(v > 0, jax.numpy.sqrt(v), v).sum()", DTYPES, "nan", "real",
        WHERE_TRAP,
    ),
    Known("relu-sqrt@-10", "torch", "torch.relu(torch.sqrt(x))", DTYPES, "nan", "outside-domain", RELU_SQRT),
    Known("relu-sqrt@-10", "jax", "jax.nn.relu(jax.numpy.sqrt(x))", DTYPES, "nan", "outside-domain", RELU_SQRT),
    Known(
        "hardsigmoid@-3", "torch", "torch.nn.functional.hardsigmoid(x)", ("float64",), "value", "real",
        HARDSIGMOID_F64, ONE_SIXTH_F32,
    ),
    Known(
        "hardsigmoid@3", "torch", "torch.nn.functional.hardsigmoid(x)", ("float64",), "value", "real",
        HARDSIGMOID_F64, ONE_SIXTH_F32,
    ),
)


def _known(case_id: str, framework: str, program_id: str, dtype: str) -> Known | None:
    for k in KNOWN:
        if (k.case, k.framework, k.program) == (case_id, framework, program_id) and dtype in k.dtypes:
            return k
    return None


# --------------------------------------------------------------------------- the exact derivative


class _NearKink(Exception):
    """The point is within MARGIN of a kink, tie or jump."""


class _OutsideDomain(Exception):
    """Some subexpression is not real-valued at the point."""


def _floats(sub: dict) -> dict:
    """``sub`` as 60-digit floats (exact for a float32's value): ``x ** y`` at two binary rationals makes sympy
    look for exact roots of huge integers for minutes."""
    return {k: sympy.Float(v, 60) for k, v in sub.items()}


def _value(e: sympy.Expr, sub: dict) -> float:
    v = sympy.N(e.xreplace(_floats(sub)), 30)
    if v.has(sympy.nan, sympy.zoo, sympy.oo, -sympy.oo) or not v.is_real:
        raise _OutsideDomain(f"{e} is {v} at the point")
    return float(v)


def _active(e: sympy.Basic, sub: dict) -> sympy.Basic:
    """``e`` with every non-smooth function replaced by the smooth piece active at ``sub``."""
    margin = float(MARGIN)
    if e.is_Atom:
        return e
    if isinstance(e, sympy.Piecewise):
        for expr, cond in e.args:
            if cond is sympy.true:
                return _active(expr, sub)
            if not isinstance(cond, sympy.core.relational.Relational):
                raise NotImplementedError(f"condition {cond} is not a single comparison")
            if abs(_value(cond.lhs - cond.rhs, sub)) < margin:
                raise _NearKink(f"condition {cond} is within {MARGIN} of switching")
            if bool(cond.xreplace(sub)):
                return _active(expr, sub)
        raise _OutsideDomain(f"no branch of {e} is selected")
    args = [_active(a, sub) for a in e.args]
    if isinstance(e, (sympy.Max, sympy.Min)):
        vals = [_value(a, sub) for a in args]
        best = (max if isinstance(e, sympy.Max) else min)(range(len(args)), key=vals.__getitem__)
        for a, v in zip(args, vals):
            if a != args[best] and abs(v - vals[best]) < margin:
                raise _NearKink(f"{e}: {a} and {args[best]} are within {MARGIN}")
        return args[best]
    if isinstance(e, (sympy.Abs, sympy.sign, sympy.Heaviside)):
        v = _value(args[0], sub)
        if abs(v) < margin:
            raise _NearKink(f"{e}: argument within {MARGIN} of 0")
        if isinstance(e, sympy.Abs):
            return args[0] if v > 0 else -args[0]
        if isinstance(e, sympy.sign):
            return sympy.Integer(1 if v > 0 else -1)
        return sympy.Integer(1 if v > 0 else 0)
    if isinstance(e, (sympy.floor, sympy.ceiling)):
        v = _value(args[0], sub)
        if abs(v - round(v)) < margin:
            raise _NearKink(f"{e}: argument within {MARGIN} of an integer")
        return sympy.Integer(math.floor(v) if isinstance(e, sympy.floor) else math.ceil(v))
    return e.func(*args)


@cache
def _symbolic(case_id: str) -> tuple[sympy.Expr, tuple[sympy.Symbol, ...], tuple[sympy.Expr | None, ...]]:
    """The case's expression, its symbols and sympy's plain ``diff`` per symbol (None when it keeps a
    ``Derivative``, as for ``floor``). Cached: ``diff`` of the median's 15-term ``Max`` of ``Min`` takes ~1.5 s."""
    expr, syms, _ = to_sympy(CATALOG.case(case_id))
    plain = tuple(sympy.diff(expr, s) for s in syms)
    return expr, syms, tuple(None if d.has(sympy.Derivative) else d for d in plain)


@lru_cache(maxsize=4096)
def exact_gradient(case_id: str, point: tuple[float, ...]) -> tuple[str, tuple[float, ...] | str]:
    """``("ok", gradient)``, ``("near-kink", why)`` or ``("outside-domain", why)`` at the float ``point``."""
    expr, syms, plain = _symbolic(case_id)
    sub = {s: sympy.Rational(p) for s, p in zip(syms, point)}  # the exact binary value of each float
    try:
        smooth = _active(expr, sub)
        grad = tuple(_value(sympy.diff(smooth, s), sub) for s in syms)
    except _NearKink as err:
        return "near-kink", str(err)
    except _OutsideDomain as err:
        return "outside-domain", str(err)
    # Cross-check against sympy's plain diff where that evaluates to a finite real number.
    for s, d, g in zip(syms, plain, grad):
        if d is None:
            continue
        try:
            value = sympy.N(d.xreplace(_floats(sub)), 30)
        except (ValueError, TypeError, RecursionError):  # Heaviside of a non-real argument; floor's diff
            continue
        if value.is_real and value.is_finite:
            assert abs(float(value) - g) <= 1e-12 * max(1.0, abs(g)), (
                f"{case_id} at {point}: piecewise derivative d/d{s} = {g} but sympy's diff gives {value}"
            )
    return "ok", grad


# --------------------------------------------------------------------------- points


def _shape_like(flat: list[float], like: object) -> object:
    it = iter(flat)

    def build(v: object) -> object:
        if isinstance(v, list):
            return [build(e) for e in v]
        return next(it)

    return build(like)


def _base_point(case) -> list[float]:
    return [float(v) for name in case.inputs for v in flatten(case.at[name])]


def offsets(n: int) -> st.SearchStrategy[list[float]]:
    mag = st.floats(0.05, 0.75, allow_nan=False, allow_infinity=False)
    one = st.tuples(mag, st.booleans()).map(lambda t: -t[0] if t[1] else t[0])
    return st.lists(one, min_size=n, max_size=n).filter(
        lambda xs: all(abs(a - b) >= 0.01 for i, a in enumerate(xs) for b in xs[i + 1 :])
    )


_NO_DERIVATIVE = "the framework has no derivative for it (an error cell in every release)"
_STE = ("a straight-through estimator: the gradient is 1 inside the clamp range by design, not the staircase's 0 "
        "(torch's fake_quantize docs; the jax program's stop_gradient)")

#: (case, framework) pairs whose programs are not the ordinary derivative on the drawn neighbourhood by design or
#: by domain, with why; skipped here (their cells at the kink are judged by the report like any other).
NOT_PROPERTY_TESTED: dict[tuple[str, str], str] = {
    ("nextafter@tie", "jax"): "jax.numpy.nextafter: " + _NO_DERIVATIVE,
    ("while_loop@0", "jax"): "jax.lax.while_loop has no reverse mode (ValueError)",
    ("eigvals@repeated", "jax"): "jax refuses derivatives of a non-symmetric eig without enable_eigvec_derivs",
    ("eigvalsh@repeated", "torch"): "eigvalsh reads the lower triangle only (UPLO='L'): the field is for symmetric "
                                    "matrices, the drawn points are not symmetric",
    ("eigh-vector@identity", "torch"): "eigh reads the lower triangle only (UPLO='L'), as for eigvalsh@repeated",
    ("eigh-reconstruct@identity", "torch"): "eigh reads the lower triangle only (UPLO='L'), as for eigvalsh@repeated",
    ("set@duplicate-index", "torch"): "the field Max(v0, v1) stands in for 'one of the writes wins' at equal values "
                                      "only; away from the tie each framework's own order is the function",
    ("set@duplicate-index", "jax"): "the field Max(v0, v1) stands in for 'one of the writes wins' at equal values "
                                    "only; away from the tie each framework's own order is the function",
    ("binary_cross_entropy@0-target1", "torch"): "the target must lie in [0, 1] (torch raises outside it): the "
                                                 "drawn points leave the domain",
    ("binary_cross_entropy@0-target1", "jax"): "log(x) is not real for x < 0: the drawn points leave the domain",
    ("binary_cross_entropy@0-target0", "torch"): "the target must lie in [0, 1] (torch raises outside it)",
    ("binary_cross_entropy@0-target0", "jax"): "log(x) is not real for x < 0: the drawn points leave the domain",
    ("gaussian_nll_loss@var0.5-eps0.5", "torch"): "torch clamps the variance at eps under no_grad (the gradient "
                                                  "passes through the clamp) and refuses a negative variance",
    ("gaussian_nll_loss@var0.5-eps0.5", "jax"): "the jax program reproduces torch's clamp with stop_gradient",
    ("gaussian_nll_loss@var0.25-eps0.5", "torch"): "as gaussian_nll_loss@var0.5-eps0.5",
    ("gaussian_nll_loss@var0.25-eps0.5", "jax"): "as gaussian_nll_loss@var0.5-eps0.5",
    ("frexp@1", "torch"): "the case's field is the mantissa near 1 only (x on [1/2, 1), x / 2 on [1, 2))",
    ("frexp@1", "jax"): "the case's field is the mantissa near 1 only",
    ("fake_quantize_per_channel_affine@2.5", "torch"): _STE + " (both torch programs are fake quantizers)",
    ("polyfit@coincident-x", "torch"): "least squares beside coincident x is ill-conditioned: float32's rounding "
                                       "is amplified past its tolerance (9e-5 of 6 at x = 1.5, 1.75)",
}

_WHERE_TRAP = ("written out for beta = 0 it divides by 0 in where's unselected branch: nan everywhere (the where "
               "trap, public case P8)")

#: Single programs skipped here, with why (the case's other programs are tested).
NOT_PROPERTY_TESTED_PROGRAMS: dict[tuple[str, str, str], str] = {
    ("heaviside@0", "torch", "torch.heaviside(x, torch.full_like(x, 0.5))"): _NO_DERIVATIVE,
    ("heaviside@0", "torch", "x.heaviside(torch.full_like(x, 0.5))"): _NO_DERIVATIVE,
    ("floor_divide@(2,1)", "torch", "torch.floor_divide(x, y)"): _NO_DERIVATIVE,
    ("floor_divide@(2,1)", "torch", "x // y"): _NO_DERIVATIVE + " (x // y is floor_divide)",
    ("histogram-density@tied-min", "torch", "torch.histogram(v, 1, density=True)[0]"): _NO_DERIVATIVE,
    ("histogram2d-density@tied-min", "torch", "torch.histogramdd(m, 1, density=True)[0]"): _NO_DERIVATIVE,
    ("histogram_bin_edges@tied-min", "torch", "torch.histogram(v, 1)[1]"): _NO_DERIVATIVE,
    ("qr@rank-deficient", "torch", "torch.abs(torch.linalg.qr(m, mode='r').R[0, 0])"):
        "torch refuses the derivative of linalg.qr(mode='r') (it depends on Q, not computed)",
    ("smooth_l1_loss-beta0@0", "torch",
     "torch.where(torch.abs(x - y) < 0.0, 0.5 * (x - y) ** 2 / 0.0, torch.abs(x - y) - 0.0)"): _WHERE_TRAP,
    ("smooth_l1_loss-beta0@0", "jax",
     "jax.numpy.where(jax.numpy.abs(x - y) < 0.0, 0.5 * (x - y) ** 2 / 0.0, jax.numpy.abs(x - y) - 0.0)"): _WHERE_TRAP,
    ("pdist@coincident-rows", "jax",
     "jax.numpy.linalg.norm(m.reshape(3, 1, 2) - m.reshape(1, 3, 2), axis=-1).sum() / 2"):
        "it takes each row's distance to itself (0): sqrt's derivative there makes the gradient nan at every point",
    ("fake_quantize_per_tensor_affine@0.5", "torch", "torch.fake_quantize_per_tensor_affine(x, 1.0, 0, 0, 2)"): _STE,
    ("fake_quantize_per_tensor_affine@0.5", "jax",
     "x + jax.lax.stop_gradient(jax.numpy.clip(jax.numpy.round(x), 0, 2) - x)"): _STE,
    ("clamp-tensor@min=max", "jax", "jax.lax.clamp(lo, x, hi)"):
        "half the drawn points have min > max, where lax.clamp's JVP rule gives every input 0 (its value is max there, "
        "so the derivative in max is 1): min > max is outside what lax.clamp's rule covers",
    ("fake_quantize_per_channel_affine@2.5", "jax",
     "x + jax.lax.stop_gradient(jax.numpy.clip(jax.numpy.round(x), 0, 2) - x)"): _STE,
}


def _tested_programs(case, framework: str) -> list:
    return [p for p in case.programs_for(framework)
            if (case.id, framework, p.id) not in NOT_PROPERTY_TESTED_PROGRAMS]


def _cases_and_frameworks():
    for case in CATALOG:
        for fw in ("torch", "jax"):
            if case.programs_for(fw):
                marks = [getattr(pytest.mark, fw)]
                if (case.id, fw) in NOT_PROPERTY_TESTED:
                    marks.append(pytest.mark.skip(reason=NOT_PROPERTY_TESTED[(case.id, fw)]))
                yield pytest.param(case.id, fw, id=f"{case.id}-{fw}", marks=marks)


def test_not_property_tested_names_catalog_cases():
    for case_id, fw in NOT_PROPERTY_TESTED:
        assert CATALOG.case(case_id).programs_for(fw), f"{case_id} has no {fw} program: remove it"
    for case_id, fw, program in NOT_PROPERTY_TESTED_PROGRAMS:
        CATALOG.case(case_id).program(fw, program)  # KeyError when the program was renamed or removed
        assert (case_id, fw) not in NOT_PROPERTY_TESTED, f"{case_id} {fw} is skipped whole: remove {program}"
        assert _tested_programs(CATALOG.case(case_id), fw), f"{case_id} {fw}: every program skipped: skip it whole"


def _adapter(request, framework: str):
    return request.getfixturevalue(f"{framework}_adapter")


# --------------------------------------------------------------------------- tests


def test_known_table_names_existing_programs():
    for k in KNOWN:
        case = CATALOG.case(k.case)
        case.program(k.framework, k.program)  # KeyError when the program was renamed or removed
        assert set(k.dtypes) <= set(DTYPES), f"{k}: dtypes outside {DTYPES}"
        assert k.expect in ("nan", "value", "TypeError"), f"{k}: unknown expectation"
        assert (k.value is not None) == (k.expect == "value"), f"{k}: value goes with expect='value' only"
        assert k.oracle in ("real", "outside-domain"), f"{k}: unknown oracle status"


@pytest.mark.parametrize(("case_id", "framework"), list(_cases_and_frameworks()))
def test_gradient_is_the_derivative_away_from_kinks(request, case_id: str, framework: str) -> None:
    adapter = _adapter(request, framework)
    case = CATALOG.case(case_id)
    base = _base_point(case)
    programs = _tested_programs(case, framework)
    # A case whose every program is a known outside-domain disagreement never has a real oracle value.
    all_outside = all(
        (k := _known(case_id, framework, p.id, dt)) is not None and k.oracle == "outside-domain"
        for p in programs
        for dt in DTYPES
    )

    @settings(
        max_examples=MAX_EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,  # the same points on every run: a red CI run is reproducible, never a draw's luck
        phases=(Phase.explicit, Phase.reuse, Phase.generate),  # no shrinking: a failure is already reproducible
        suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
    )
    @given(offs=offsets(len(base)))
    def check(offs: list[float]) -> None:
        # The drawn offsets and their mirror image: both sides of a kink, both orders of a tie, at every draw.
        assume(any([at_point(offs), at_point([-o for o in offs])]))

    def at_point(offs: list[float]) -> bool:
        """Check every program at base + offs; False where the point is not one to check."""
        point = tuple(float(np.float32(b + o)) for b, o in zip(base, offs))
        note(f"point {point}")
        status, grad = exact_gradient(case_id, point)
        if status == "near-kink" or (status == "outside-domain" and not all_outside):
            return False
        flat = list(point)
        at = {}
        for name in case.inputs:
            size = len(flatten(case.at[name]))
            at[name] = _shape_like(flat[:size], case.at[name])
            flat = flat[size:]
        for program in programs:
            for dtype in DTYPES:
                where = f"{program.id} at {at} ({dtype}, reverse, {framework} {adapter.version})"
                known = _known(case_id, framework, program.id, dtype)
                if known is not None and known.expect not in ("nan", "value"):
                    with pytest.raises(Exception) as info:
                        adapter.gradient(program.tree, at, dtype, mode="reverse")
                    assert type(info.value).__name__ == known.expect, (
                        f"{where}: known disagreement ({known.reason}) now raises {info.typename}: {info.value}"
                    )
                    continue
                got = adapter.gradient(program.tree, at, dtype, mode="reverse")
                values = [g for name in case.inputs for g in flatten(got[name])]
                if known is not None and known.expect == "value":
                    assert status == "ok", f"{where}: known disagreement expects a real oracle, got {grad}"
                    want = [known.value if e != 0 else 0.0 for e in grad]
                    assert values == want, (
                        f"{where}: known disagreement ({known.reason}) expected {want}, got {values} "
                        f"(exact {grad}); remove it from KNOWN if it is fixed"
                    )
                    continue
                if known is not None:  # expect == "nan"
                    assert (known.oracle, status) in (("real", "ok"), ("outside-domain", "outside-domain")), (
                        f"{where}: known disagreement expects the oracle {known.oracle}, it is {status} ({grad})"
                    )
                    assert all(math.isnan(v) for v in values), (
                        f"{where}: known disagreement ({known.reason}) expected nan, got {values} "
                        f"(exact {grad}); remove it from KNOWN if it is fixed"
                    )
                    continue
                assert status == "ok", f"{where}: no real derivative here ({grad}) but no KNOWN entry"
                tol = tolerance(dtype)
                for i, (v, e) in enumerate(zip(values, grad)):
                    assert abs(v - e) <= tol * max(1.0, abs(e)), (
                        f"{where}: component {i} is {v}, exact derivative {e} (tolerance {tol:g} x max(1, |exact|))"
                    )
        return True

    check()
