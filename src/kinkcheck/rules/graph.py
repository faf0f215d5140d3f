"""A program cut at its calls: the graph the chain rule of automatic differentiation walks.

Reverse-mode AD never sees a program's mathematics whole: it sees the calls the program makes, each with its
own backward rule, glued by the chain rule (Bolte & Pauwels, NeurIPS 2020, "conservative fields"; Lee et al.,
NeurIPS 2020, "intensional derivatives"). :func:`build` evaluates a program with the project's one mapping
(:func:`kinkcheck.oracles.mapping.sympy_form`) but cuts it at every mapped call:

* each argument element that depends on the inputs becomes a **slot** (a fresh symbol with its exact value at
  the point and its definition over the inputs and earlier calls' outputs);
* the call's form is computed on the slots (:func:`kinkcheck.oracles.mapping.call_form`), so each output
  element is a **local form**: a function of the call's own slots only, the thing the call's backward rule
  differentiates;
* each output element becomes a fresh symbol, so what follows the call sees only its value.

A boolean argument (``x > 0`` in ``torch.where(x > 0, x, 0)``) is evaluated at the point: AD holds a comparison
constant, so the call selects the branch the point takes. Operators between calls (``+``, ``*``, ``-x``,
indexing) stay in the definitions; :mod:`kinkcheck.rules.chain` differentiates them as written.

Only sympy, NumPy and the mapping; no framework is imported.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sympy

from kinkcheck.language import expr as ex
from kinkcheck.oracles import mapping as mp
from kinkcheck.oracles import values as va

__all__ = ["Graph", "Site", "build"]


@dataclass(frozen=True)
class Site:
    """One call of a program.

    Attributes
    ----------
    index : int
        Order of evaluation (0 = first call made).
    name : str
        The call's name as the program spells it (``torch.clamp``, ``mlx.core.maximum``); a tensor method as
        its canonical row (``torch.Tensor.max``).
    kind : str
        The mapping's kind of the call (``"elementwise"``, ``"reduce"``, a handler's name).
    slots : tuple of sympy.Symbol
        The call's argument elements that depend on the inputs (the variables of its local forms).
    outputs : tuple of sympy.Symbol
        One symbol per output element that depends on a slot.
    forms : tuple of sympy.Expr
        The local form of each output (same order as ``outputs``), over ``slots`` only.
    variant : tuple of str
        The overload the call takes, as the parameters beyond the first that it is given a tensor for, or a
        ``dim``/``axis`` (``("dim",)`` for ``torch.max(v, dim=0)``, ``("min=tensor", "max=tensor")`` for
        ``torch.clamp(x, lo, hi)`` with tensor bounds, ``("dim=tensor",)`` for ``torch.max(x, y)``; empty for ``torch.clamp(x, min=0)``): frameworks dispatch these to different
        backward formulas (``max.dim`` returns indices; ``clamp.Tensor`` differs from ``clamp``).
    """

    index: int
    name: str
    kind: str
    slots: tuple[sympy.Symbol, ...]
    outputs: tuple[sympy.Symbol, ...]
    forms: tuple[sympy.Expr, ...]
    variant: tuple[str, ...] = ()

    @property
    def elementwise(self) -> bool:
        return self.kind == "elementwise"


@dataclass
class Graph:
    """A program cut at its calls, at a point.

    Attributes
    ----------
    inputs : tuple of sympy.Symbol
        The differentiated input components, flat, in input order.
    components : tuple of str
        Their names (``"x"``, ``"v[0]"``), as the oracle and the shards name them.
    total : sympy.Expr
        The sum of the program's output elements, over ``inputs`` and the sites' outputs.
    defs : dict
        Slot → its definition over ``inputs`` and earlier sites' outputs.
    values : dict
        Every symbol (inputs, slots, outputs) → its exact value at the point.
    sites : list of Site
        The calls, in evaluation order.
    """

    inputs: tuple[sympy.Symbol, ...]
    components: tuple[str, ...]
    total: sympy.Expr
    defs: dict[sympy.Symbol, sympy.Expr] = field(default_factory=dict)
    values: dict[sympy.Symbol, sympy.Expr] = field(default_factory=dict)
    sites: list[Site] = field(default_factory=list)
    framework: str = ""
    #: derivatives and kink tests at the point, kept between chain-rule walks of this graph and pickled with it
    #: (they do not depend on the rules chosen): (expression, symbol) → derivative or the reason it has none;
    #: form → kinds found
    memo: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def calls(self) -> int:
        """How many calls the program makes (operators are not calls)."""
        return len(self.sites)


class _Cutter:
    def __init__(self) -> None:
        self.defs: dict[sympy.Symbol, sympy.Expr] = {}
        self.values: dict[sympy.Symbol, sympy.Expr] = {}
        self.sites: list[Site] = []
        self._nslot = 0
        self._out = 0

    def _value(self, e: sympy.Expr) -> sympy.Expr:
        return e.xreplace(self.values)

    def _slot_elem(self, e: Any, slots: list[sympy.Symbol]) -> Any:
        if isinstance(e, va._OrderStat):
            e = va._numeric(e)
        if not isinstance(e, sympy.Basic) or not e.free_symbols:
            return e
        if va._is_bool(e):
            v = e.xreplace(self.values)
            if v in (sympy.true, sympy.false):
                return v
            v = sympy.simplify(v)
            if v in (sympy.true, sympy.false):
                return v
            raise mp.Unmapped("a condition", "it does not decide at the point")
        s = sympy.Symbol(f"a{self._nslot}", real=True)
        self._nslot += 1
        self.defs[s] = e
        self.values[s] = self._value(e)
        slots.append(s)
        return s

    def _slot(self, v: Any, slots: list[sympy.Symbol]) -> Any:
        if isinstance(v, np.ndarray):
            return va._vec(lambda e: self._slot_elem(e, slots), v) if v.dtype == object else v
        if isinstance(v, va._Pair):
            return va._Pair(self._slot(v.values, slots), v.indices)
        if isinstance(v, list):
            return [self._slot(i, slots) for i in v]
        if isinstance(v, tuple) and not isinstance(v, va._Pair):
            return tuple(self._slot(i, slots) for i in v)
        if isinstance(v, (sympy.Basic, va._OrderStat)):
            return self._slot_elem(v, slots)
        return v

    def _out_elem(self, e: Any, slots: set[sympy.Symbol], outs: list[sympy.Symbol], forms: list[sympy.Expr]) -> Any:
        if isinstance(e, va._OrderStat):
            e = va._numeric(e)
        if not isinstance(e, sympy.Basic) or not (e.free_symbols & slots):
            return e
        if va._is_bool(e):
            return self._slot_elem(e, [])  # decided at the point, like a comparison
        s = sympy.Symbol(f"s{self._out}", real=True)
        self._out += 1
        outs.append(s)
        forms.append(e)
        self.values[s] = self._value(e)
        return s

    def _wrap(self, v: Any, slots: set[sympy.Symbol], outs: list[sympy.Symbol], forms: list[sympy.Expr]) -> Any:
        if isinstance(v, np.ndarray):
            return va._vec(lambda e: self._out_elem(e, slots, outs, forms), v) if v.dtype == object else v
        if isinstance(v, va._Pair):
            return va._Pair(self._wrap(v.values, slots, outs, forms), v.indices)
        if isinstance(v, list):
            return [self._wrap(i, slots, outs, forms) for i in v]
        if isinstance(v, tuple):
            return tuple(self._wrap(i, slots, outs, forms) for i in v)
        if isinstance(v, (sympy.Basic, va._OrderStat)):
            return self._out_elem(v, slots, outs, forms)
        return v

    def __call__(self, name: str, args: list[Any], kwargs: dict[str, Any], ctx: Any) -> Any:
        spelled = ctx.spelled or name
        variant = _variant(name, args, kwargs)
        for k, v in ctx.point.items():
            self.values.setdefault(k, v)
        slots: list[sympy.Symbol] = []
        args = [self._slot(a, slots) for a in args]
        kwargs = {k: self._slot(v, slots) for k, v in kwargs.items()}
        ctx.point.update({s: self.values[s] for s in slots})
        out = mp.call_form(name, args, kwargs, ctx)
        outs: list[sympy.Symbol] = []
        forms: list[sympy.Expr] = []
        wrapped = self._wrap(out, set(slots), outs, forms)
        ctx.point.update({s: self.values[s] for s in outs})
        if slots:
            self.sites.append(Site(len(self.sites), spelled, mp.TABLE[name].kind, tuple(slots), tuple(outs),
                                   tuple(forms), variant))
        return wrapped


_DIMS = ("dim", "axis", "axes")
#: Parameters that choose what a function computes (a norm's order, an approximation): their value is part of the
#: overload (``jax.numpy.linalg.norm(ord=1)`` is not the 2-norm).
_SELECTORS = ("ord", "p", "approximate", "interpolation", "method", "mode", "stable", "descending", "side",
              "reduction", "norm_type")


def _variant(name: str, args: list[Any], kwargs: dict[str, Any]) -> tuple[str, ...]:
    try:
        bound = mp._bind(name, mp.TABLE[name], args, kwargs)
    except mp.Unmapped:
        return ()
    out = []
    for k, v in list(bound.items())[1:]:
        if isinstance(v, np.ndarray) or (isinstance(v, (list, tuple)) and any(isinstance(i, np.ndarray) for i in v)):
            out.append(f"{k}=tensor")
        elif k in _DIMS and v is not None:
            out.append(k)
        elif k in _SELECTORS and isinstance(v, (str, int, float, bool)):
            out.append(f"{k}={v!r}" if isinstance(v, str) else f"{k}={v}")
    return tuple(out)


def build(tree: ex.Node, at: Mapping[str, Any], framework: str, *, wrt: Sequence[str] | None = None) -> Graph:
    """Cut a parsed program at its calls, at a point.

    Parameters
    ----------
    tree : kinkcheck.language.expr.Node
        A parsed program (a catalog program's ``.tree``; ``kinkcheck.language.expr.parse``).
    at : mapping
        Input name → number or nested list.
    framework : str
        The program's framework (which rows name its methods and operators).
    wrt : sequence of str, optional
        Differentiated inputs (default: all).

    Returns
    -------
    Graph

    Raises
    ------
    kinkcheck.oracles.mapping.Unmapped
        A call or construct without a symbolic form (the message names it).
    """
    decomposed = sorted({n.dotted for n in ex.walk(tree) if isinstance(n, ex.Name)
                         and mp._table_name(n.dotted) in mp.DECOMPOSITIONS})
    if decomposed:
        raise mp.Unmapped(decomposed[0], "a decomposition's backward (1/(λi − λj) at a repeated value) is not the "
                                         "derivative of the reconstruction, so no rule composes it")
    cutter = _Cutter()
    form = mp.sympy_form(tree, at, framework, wrt=wrt, site_hook=cutter)
    values = dict(zip(form.symbols, form.point))
    values.update(cutter.values)
    total = form.expr
    leaked = [s for s in cutter.defs if s in total.free_symbols]
    if leaked:  # a slot used outside its call (a tie's indices): read it as its definition
        total = total.xreplace({s: cutter.defs[s] for s in leaked})
    return Graph(form.symbols, form.components, total, cutter.defs, values, cutter.sites, framework)
