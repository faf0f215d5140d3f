"""What the mapping's tests share: the catalog, two real symbols, a program's sympy form at a point, exact and
50-digit values, points next to a kink, each case's hand-written field."""

from __future__ import annotations

import random
from functools import cache

import sympy
from sympy import Rational, Symbol

from kinkcheck.language import expr as ex
from kinkcheck.catalog import load_catalog
from kinkcheck.oracles import symbolic as sym
from kinkcheck.oracles.mapping import SympyForm, sympy_form

CATALOG = load_catalog()
CASES = list(CATALOG)

x, y = Symbol("x", real=True), Symbol("y", real=True)


def form(text: str, at: dict, framework: str | None = None, wrt=None) -> SympyForm:
    fw = framework or text.replace("jnp.", "jax.numpy.").split(".")[0].split("(")[0]
    fw = fw if fw in ("torch", "jax") else "torch"
    return sympy_form(ex.parse(text, at, {fw}), at, fw, wrt=wrt)


def value(e: sympy.Expr, syms, point, exact: bool = True) -> sympy.Expr | str:
    """``e`` at ``point`` to 50 digits, or "undefined" when sympy cannot evaluate it (Max of a complex number).
    ``exact=False`` puts in 60-digit floats, not rationals: ``x ** y`` at two rationals with denominators of
    10**12 makes sympy look for exact roots for minutes (the kink point itself stays exact)."""
    if not exact:
        point = tuple(sympy.Float(p, 60) for p in point)
    try:
        v = sympy.N(e.xreplace(dict(zip(syms, point))), 50)
    except (TypeError, ValueError, ZeroDivisionError):
        return "undefined"
    return "undefined" if v.has(sympy.nan, sympy.zoo) else v


def close(a, b) -> bool:
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    if a == b:
        return True
    try:
        ca, cb = complex(a), complex(b)
    except TypeError:
        return False
    return abs(ca - cb) <= 1e-40 * max(1.0, abs(cb))


def near_points(point: tuple, n: int, seed: str) -> list[tuple]:
    """``n`` deterministic points within 10**-2 .. 10**-9 of ``point``, each component moved independently."""
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        out.append(tuple(p + rnd.choice((-1, 1)) * Rational(rnd.randint(1, 999), 10 ** rnd.randint(3, 12))
                         for p in point))
    return out


@cache
def hand(case_id: str):
    return sym.to_sympy(CATALOG.case(case_id))
