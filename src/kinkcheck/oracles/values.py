"""The values a mapped program evaluates to, for :mod:`kinkcheck.oracles.mapping` and its handlers.

A tensor is a numpy object array of sympy expressions, one per element (:func:`_arr`, :func:`_vec`); beside it
travel the pieces a call may return that are not tensors: a (values, indices) pair, indices, an argument left
unevaluated, a function, an order statistic, a factor of a decomposition, an ``.at[]`` update. The helpers here
turn an argument into what a parameter needs (a static int, dims, a number), reduce lists of elements, evaluate
an elementwise form over broadcast arguments, and write into a tensor by index. Anything a value cannot be
raises :class:`Unmapped` with the reason, and the program is not mapped (the oracle then says "not judged").

The names with an underscore are the mapping's own: :mod:`~kinkcheck.oracles.mapping` (the evaluator) and
:mod:`~kinkcheck.oracles.handlers` (the functions that are not elementwise or a reduction) share them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any, NamedTuple

import numpy as np
import sympy

from kinkcheck.language import expr as ex
from kinkcheck.oracles import symbolic as sym
from kinkcheck.oracles import translate
from kinkcheck.oracles.rows import Entry

#: Most elements a subset-based order statistic may combine (``kth_smallest`` of n elements builds
#: ``C(n, k)`` minima); beyond it the program is not mapped rather than built for minutes.
MAX_TERMS = 5000


#: Most elements one mapped value may have.
MAX_ELEMENTS = 4096


class Unmapped(ex.ExprError):
    """A program uses a function (or an argument of it) that has no symbolic form in :data:`TABLE`.

    ``str(err)`` reads ``no symbolic form for torch.X (pass one with --sympy '…')``, naming the function
    canonically (``torch.nn.functional.X``, ``jax.numpy.X``, ``torch.Tensor.X`` for a method).
    """

    def __init__(self, name: str, why: str | None = None) -> None:
        self.name = name
        self.why = why
        detail = f": {why}" if why else ""
        super().__init__(f"no symbolic form for {name}{detail} (pass one with --sympy '…')")


def _max_none(*args: Any) -> sympy.Expr:
    return sympy.Max(*[a for a in translate._flatten(args) if a is not None])


def _min_none(*args: Any) -> sympy.Expr:
    return sympy.Min(*[a for a in translate._flatten(args) if a is not None])


def _form_namespace() -> dict[str, Any]:
    ns = dict(sym.sympy_namespace())
    ns.update({
        "Max": _max_none, "Min": _min_none, "Eq": sympy.Eq, "Mod": sympy.Mod, "atan2": sympy.atan2,
        "erf": sympy.erf, "erfc": sympy.erfc, "tanh": sympy.tanh, "sin": sympy.sin, "cos": sympy.cos,
        "tan": sympy.tan, "asin": sympy.asin, "acos": sympy.acos, "atan": sympy.atan, "sinh": sympy.sinh,
        "cosh": sympy.cosh, "asinh": sympy.asinh, "acosh": sympy.acosh, "atanh": sympy.atanh, "pi": sympy.pi,
    })
    return ns


_FORM_NS = _form_namespace()


@cache
def _compile(form: str, params: tuple[str, ...]) -> tuple[ex.Node, dict[str, Any]]:
    """A table form parsed with :mod:`kinkcheck.language.expr` (never eval-ed), its literals exact from their text."""
    parsed = ex.parse(form, params, _FORM_NS)
    texts = translate._literal_texts(form)
    n_consts = sum(1 for n in ex.walk(parsed) if isinstance(n, ex.Const) and not isinstance(n.value, bool))
    tree = translate._exact_consts(parsed, iter(texts if len(texts) == n_consts else []))
    return tree, ex.resolve_names(tree, _FORM_NS)


class _Pair(NamedTuple):
    """``(values, indices)`` as torch.max(v, dim), torch.sort, torch.topk and jax.lax.top_k return."""

    values: Any
    indices: Any


@dataclass(frozen=True)
class _Arg:
    """An argmax/argmin over every element: the index as ``[(condition, i), …]`` (first true wins)."""

    choices: tuple[tuple[Any, int], ...]
    name: str
    source: np.ndarray | None = field(default=None, compare=False)


@dataclass(frozen=True)
class _Fn:
    """A mapped function passed as a value (``jax.lax.max`` to ``jax.lax.reduce_window``)."""

    name: str


@dataclass(frozen=True)
class _Indices:
    """Indices returned beside values (sort, topk, max with dim): piecewise constant, not mapped as numbers."""

    name: str


@dataclass
class _Ctx:
    framework: str
    inputs: dict[str, np.ndarray] = field(default_factory=dict)
    point: dict[sympy.Symbol, sympy.Expr] = field(default_factory=dict)  # the differentiated inputs' values
    #: called in place of each mapped call, ``(name, args, kwargs, ctx) -> value`` (:mod:`kinkcheck.rules.graph`
    #: cuts a program at its calls with it); None: the call's form is computed in place
    site_hook: Any = None
    #: the program's own spelling of the call a ``site_hook`` is given (``mlx.core.maximum``, not the NumPy-clone
    #: row ``jax.numpy.maximum`` that computes it)
    spelled: str = ""


def _is_bool(e: Any) -> bool:
    """A sympy truth value or condition (a Symbol is also a sympy Boolean, so Expr is excluded)."""
    return isinstance(e, sympy.logic.boolalg.Boolean) and not isinstance(e, sympy.Expr)


def _scalar(v: Any) -> Any:
    """A Python or sympy number as an exact sympy number; sympy expressions and Booleans unchanged."""
    if isinstance(v, (sympy.Basic,)):
        return v
    if isinstance(v, bool):
        return sympy.true if v else sympy.false
    if isinstance(v, (int, float)):
        return _exact_number(v)
    raise TypeError(f"not a number: {v!r}")


def _exact_number(v: float) -> sympy.Expr:
    if isinstance(v, float) and not math.isfinite(v):
        return sympy.nan if math.isnan(v) else (sympy.oo if v > 0 else -sympy.oo)
    return translate._exact(v)


@dataclass(frozen=True)
class _OrderStat:
    """The k-th smallest of ``items``, built only when used: ``torch.sort(v).values[2]`` needs one of the n
    order statistics, and each costs sympy seconds to build from ``Max``/``Min`` at n = 6."""

    items: tuple[Any, ...]
    k: int
    what: str


def _numeric(e: Any) -> sympy.Expr:
    """An element as a sympy number: a Boolean as 1 where true and 0 elsewhere; an order statistic built."""
    if isinstance(e, _OrderStat):
        return _kth(list(e.items), e.k, e.what)
    if e is sympy.true:
        return sympy.Integer(1)
    if e is sympy.false:
        return sympy.Integer(0)
    if _is_bool(e):
        return sympy.Piecewise((1, e), (0, True))
    return e


def _obj(shape: tuple[int, ...], items: Sequence[Any]) -> np.ndarray:
    out = np.empty(len(items), dtype=object)
    for i, it in enumerate(items):
        out[i] = it
    return out.reshape(shape)


def _arr(v: Any, what: str = "value") -> np.ndarray:
    """Any tensor-like value (number, nested list, object array) as a numpy object array of sympy elements."""
    if isinstance(v, np.ndarray):
        return v
    if isinstance(v, (list, tuple)) and not isinstance(v, _Pair):
        parts = [_arr(i, what) for i in v]
        if not parts:
            raise Unmapped(what, "an empty list")
        if len({p.shape for p in parts}) != 1:
            raise Unmapped(what, "a ragged list")
        out = np.empty((len(parts), *parts[0].shape), dtype=object)
        for i, p in enumerate(parts):
            out[i] = p[()] if p.ndim == 0 else p  # a 0-d array would be stored as one object
        return out
    if isinstance(v, (int, float, sympy.Basic)):
        return _obj((), [_scalar(v)])
    raise Unmapped(what, f"{_describe(v)} is not a tensor")


def _describe(v: Any) -> str:
    if isinstance(v, _Pair):
        return "a (values, indices) pair"
    if isinstance(v, (_Arg, _Indices)):
        return f"the indices of {v.name}"
    if isinstance(v, _Fn):
        return f"the function {v.name}"
    if isinstance(v, (_Factor, _Decomposition)):
        return f"a factor of {v.name}"
    if isinstance(v, (_At, _AtIndex)):
        return "an unfinished x.at[…] update"
    return type(v).__name__ if not isinstance(v, str) else repr(v)


def _vec(fn: Callable[..., Any], *arrays: np.ndarray) -> np.ndarray:
    """``fn`` per element of the broadcast arrays (an object array; 0-d for scalars)."""
    try:
        size = math.prod(np.broadcast_shapes(*(a.shape for a in arrays)))
    except ValueError as err:
        raise Unmapped("broadcasting", str(err)) from None
    if size > MAX_ELEMENTS:
        raise Unmapped("this program", f"a value of {size} elements (at most {MAX_ELEMENTS} are mapped)")
    out = np.vectorize(fn, otypes=[object])(*arrays)
    return out if isinstance(out, np.ndarray) else _obj((), [out])


def _static_int(v: Any, what: str) -> int:
    if isinstance(v, bool) or v is None:
        raise Unmapped(what, f"expected an integer, got {v!r}")
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, np.ndarray) and v.shape == () and isinstance(v[()], sympy.Integer):
        return int(v[()])
    if isinstance(v, sympy.Integer):
        return int(v)
    if isinstance(v, float) and v.is_integer():
        return int(v)
    raise Unmapped(what, f"expected an integer, got {_describe(v)}")


def _static_ints(v: Any, what: str) -> tuple[int, ...]:
    if isinstance(v, (list, tuple)):
        return tuple(_static_int(i, what) for i in v)
    return (_static_int(v, what),)


def _static_number(v: Any, what: str) -> sympy.Expr:
    """An argument that must be a known number (a norm order, a quantile): exact sympy number."""
    if isinstance(v, np.ndarray) and v.shape == ():
        v = v[()]
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return _exact_number(v)
    if isinstance(v, sympy.Expr) and v.is_number:
        return v
    raise Unmapped(what, f"expected a number, got {_describe(v)}")


def _dims(dim: Any, ndim: int, what: str) -> tuple[int, ...]:
    """Normalised reduction axes; None or () means every axis."""
    if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
        return tuple(range(ndim))
    out = []
    for d in _static_ints(dim, what):
        if not -max(ndim, 1) <= d < max(ndim, 1):
            raise Unmapped(what, f"dim {d} is out of range for {ndim} dimensions")
        out.append(d % max(ndim, 1))
    return tuple(sorted(set(out))) if ndim else ()


def _reduce(a: np.ndarray, dims: tuple[int, ...], keepdim: bool, fn: Callable[[list[Any]], Any]) -> np.ndarray:
    """``fn`` over the elements along ``dims`` (every axis when ``dims`` covers all), numpy's keepdims rule."""
    if a.ndim == 0:
        return _obj((), [fn([a[()]])])
    rest = [d for d in range(a.ndim) if d not in dims]
    moved = np.transpose(a, rest + list(dims))
    lead = moved.shape[: len(rest)]
    rows = moved.reshape(*lead, -1) if lead else moved.reshape(1, -1)
    flat = rows.reshape(-1, rows.shape[-1])
    out = _obj(lead, [fn(list(r)) for r in flat])
    if keepdim:
        out = out.reshape([1 if d in dims else a.shape[d] for d in range(a.ndim)])
    return out


def _kth(items: list[Any], k: int, what: str) -> sympy.Expr:
    """k-th smallest (1-based) via :func:`symbolic.kth_smallest`, bounded in size."""
    return _kth_cached(tuple(_numeric(i) for i in items), k, what)


@cache
def _kth_cached(items: tuple[Any, ...], k: int, what: str) -> sympy.Expr:
    n = len(items)
    if math.comb(n, n - k + 1) > MAX_TERMS:
        raise Unmapped(what, f"an order statistic of {n} elements has more than {MAX_TERMS} terms")
    if n == 1:
        return items[0]
    if k == 1:
        return sympy.Min(*items)
    if k == n:
        return sympy.Max(*items)
    return sym.kth_smallest(list(items), k)


_REDUCERS: dict[str, Callable[[list[Any]], Any]] = {
    "sum": lambda xs: sympy.Add(*map(_numeric, xs)),
    "mean": lambda xs: sympy.Add(*map(_numeric, xs)) / len(xs),
    "prod": lambda xs: sympy.Mul(*map(_numeric, xs)),
    "max": lambda xs: sympy.Max(*map(_numeric, xs)),
    "min": lambda xs: sympy.Min(*map(_numeric, xs)),
    "logsumexp": lambda xs: sympy.log(sympy.Add(*[sympy.exp(_numeric(x)) for x in xs])),
    "logmeanexp": lambda xs: sympy.log(sympy.Add(*[sympy.exp(_numeric(x)) for x in xs]) / len(xs)),
    "ptp": lambda xs: sympy.Max(*map(_numeric, xs)) - sympy.Min(*map(_numeric, xs)),
}


#: The factors' names as the frameworks' named tuples spell them.
_FACTOR_FIELDS = {"U": "U", "S": "S", "Vh": "Vh", "V": "V", "eigenvalues": "L", "eigenvectors": "Q"}


#: Products of factors: (left, operator, right) -> the product's factor, or "m" for the matrix rebuilt.
_PRODUCTS = {("U", "*", "S"): "US", ("U", "@", "diagS"): "US", ("US", "@", "Vh"): "m",
             ("Q", "*", "L"): "QL", ("Q", "@", "diagL"): "QL", ("QL", "@", "Qt"): "m"}


@dataclass(frozen=True, eq=False)
class _Factor:
    """One factor (or a product of factors) of a decomposition of ``source``, by the function ``name``."""

    name: str
    kind: str
    source: np.ndarray
    part: str

    def unmapped(self, why: str = "") -> Unmapped:
        return Unmapped(self.name, why or "a factor of a decomposition maps only in a reconstruction of the matrix "
                                          "(U diag(S) V^T, Q diag(L) Q^T)")

    def rebuilt(self) -> np.ndarray:
        """The matrix the factors rebuild: the source; for eigh its symmetric part ((m + m^T) / 2), as the catalog
        writes eigh's input (the frameworks read one triangle and return a symmetric gradient)."""
        m = self.source
        if self.kind == "eigh":
            return _vec(lambda a, b: (_numeric(a) + _numeric(b)) / 2, m, np.swapaxes(m, -1, -2))
        return m


@dataclass(frozen=True, eq=False)
class _Decomposition:
    """What a decomposition returns: its factors by position and by field name."""

    factors: tuple[_Factor | None, ...]
    name: str

    def field(self, attr: str) -> _Factor:
        part = _FACTOR_FIELDS.get(attr)
        found = [f for f in self.factors if f is not None and f.part == part]
        if not found:
            raise Unmapped(self.name, f"no factor {attr!r}")
        return found[0]


def _factor_product(op: str, a: Any, b: Any) -> Any:
    """A product of factors (a reconstruction, or a step towards one); anything else with a factor is unmapped."""
    fa, fb = (a if isinstance(a, _Factor) else None), (b if isinstance(b, _Factor) else None)
    if fa is not None and fb is not None and fa.source is fb.source:
        part = _PRODUCTS.get((fa.part, op, fb.part))
        if part == "m":
            return fa.rebuilt()
        if part is not None:
            return _Factor(fa.name, fa.kind, fa.source, part)
    raise (fa or fb).unmapped()  # type: ignore[union-attr]


def _tensorish(v: Any) -> bool:
    return isinstance(v, (np.ndarray, list, tuple, int, float, sympy.Basic)) and not isinstance(v, (bool, _Pair))


_BIN: dict[str, Callable[[Any, Any], Any]] = {
    "+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": lambda x, y: x * y, "/": lambda x, y: x / y,
    "//": lambda x, y: sympy.floor(x / y), "%": lambda x, y: x - y * sympy.floor(x / y), "**": lambda x, y: _power(x, y),
}


#: A constant past this magnitude (float64's largest is 1.8e308) is no number a framework computes with.
_MAX_LOG10 = 400


def _power(x: Any, y: Any) -> Any:
    """``x ** y``; two numbers whose power is past float64 (``10 ** 10 ** 10``) are refused, not expanded."""
    x, y = sympy.sympify(x), sympy.sympify(y)
    if x.is_number and y.is_number and x.is_finite and y.is_finite and x != 0:
        try:
            size = float(abs(y) * sympy.log(abs(x), 10).evalf(20)) if abs(x) != 1 else 0.0
        except (TypeError, ValueError):
            size = 0.0
        if size > _MAX_LOG10:
            raise Unmapped("the operator **", f"{x} ** {y} is past float64")
    return x ** y


def _binop(op: str, a: Any, b: Any) -> Any:
    if isinstance(a, _Factor) or isinstance(b, _Factor):
        return _factor_product(op, a, b)
    for v in (a, b):
        if not _tensorish(v):
            raise Unmapped(f"the operator {op}", f"applied to {_describe(v)}")
    if op == "@":
        return _matmul(_arr(a), _arr(b))
    fn = _BIN[op]
    return _vec(lambda x, y: fn(_numeric(x), _numeric(y)), _arr(a), _arr(b))


def _matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.ndim == 0 or b.ndim == 0:
        raise Unmapped("matmul", "both operands must have at least one dimension")
    out = np.matmul(_vec(_numeric, a), _vec(_numeric, b))
    return out if isinstance(out, np.ndarray) else _obj((), [out])


_STATIC = (str, bool, type(None))


def _elementwise(name: str, entry: Entry, bound: dict[str, Any]) -> np.ndarray:
    form = entry.form
    if isinstance(form, dict):
        value = bound[form["param"]]
        choices = [k for k in form if k != "param"]
        # True == 1 in a dict: the key must also have the argument's type (approximate=True is not decimals=1)
        key = next((k for k in choices if k == value and type(k) is type(value)), None) \
            if isinstance(value, (str, bool, int, type(None))) else None
        if key is None and not (value is None and None in choices):
            shown = "a tensor" if isinstance(value, np.ndarray) else repr(value)
            raise Unmapped(name, f"{form['param']}={shown} (mapped: {', '.join(repr(k) for k in choices)})")
        form = form[key]
    params = tuple(bound)
    tree, names = _compile(form, params)
    statics = {k: v for k, v in bound.items() if isinstance(v, _STATIC)}
    tensors = [k for k in params if k not in statics]
    for k in tensors:
        if not _tensorish(bound[k]):
            raise Unmapped(name, f"{k} is {_describe(bound[k])}")
    arrays = [_arr(bound[k], name) for k in tensors]

    def one(*elems: Any) -> Any:
        inputs = dict(statics)
        inputs.update({k: _numeric(e) for k, e in zip(tensors, elems)})
        try:
            return sympy.sympify(ex.evaluate(tree, names, inputs, guard=False))
        except (TypeError, ValueError, ZeroDivisionError) as err:
            raise Unmapped(name, f"its form does not evaluate here ({err})") from None

    if not arrays:
        return _obj((), [one()])
    return _vec(one, *arrays)


def _where(cond: Any, x: Any, y: Any) -> np.ndarray:
    def pick(c: Any, a: Any, e: Any) -> Any:
        c = c if _is_bool(c) else sympy.Ne(c, 0)
        return sympy.Piecewise((_numeric(a), c), (_numeric(e), True))

    return _vec(pick, _arr(cond), _arr(x), _arr(y))


def _static_index(v: Any, what: str) -> np.ndarray:
    """An index tensor whose elements are known integers, as a numpy integer array of its shape."""
    a = _arr(v, what)
    return np.array([_static_int(e, what) for e in a.flat], dtype=np.int64).reshape(a.shape)


def _write(name: str, a: np.ndarray, targets: np.ndarray, values: Any, accumulate: bool | str) -> np.ndarray:
    """``a`` with ``values`` written at the flat positions ``targets``: added where ``accumulate`` is True, combined
    by ``"max"`` or ``"min"`` (JAX's ``.at[].max``: the entry and every value written there).

    Two plain writes to one entry are refused: PyTorch leaves the result undefined (``index_put_``, ``put_``,
    ``scatter_``, ``index_copy_``) and JAX's order of ``.at[].set`` updates is implementation-defined, so
    the program is no one function of its inputs (even where the values written are equal, each order is a
    different function, with another derivative)."""
    out = a.reshape(-1).copy()
    try:
        vals = np.broadcast_to(_arr(values, name), targets.shape)
    except ValueError as err:
        raise Unmapped(name, str(err)) from None
    written: set[int] = set()
    for pos, val in zip(targets.flat, vals.flat):
        pos = int(pos)
        if not 0 <= pos < out.size:
            raise Unmapped(name, f"index {pos} is out of range for {out.size} elements")
        if accumulate in ("max", "min"):
            out[pos] = (sympy.Max if accumulate == "max" else sympy.Min)(_numeric(out[pos]), _numeric(val))
        elif accumulate:
            out[pos] = _numeric(out[pos]) + _numeric(val)
        elif pos in written:
            raise Unmapped(name, "two writes to one entry (a duplicate index): which one wins is undefined, so the "
                                 "program is no one function")
        else:
            out[pos] = val
        written.add(pos)
    return out.reshape(a.shape)


def _positions(a: np.ndarray, key: Any, name: str) -> np.ndarray:
    """The flat positions of ``a`` that ``a[key]`` picks (numpy's basic and advanced indexing)."""
    try:
        return np.arange(a.size).reshape(a.shape)[key]
    except IndexError as err:
        raise Unmapped(name, str(err)) from None


@dataclass(frozen=True, eq=False)
class _AtIndex:
    """``x.at[key]`` (JAX's out-of-place index update): the array and the static key."""

    array: np.ndarray
    key: Any


@dataclass(frozen=True, eq=False)
class _At:
    """``x.at`` before it is indexed."""

    array: np.ndarray
