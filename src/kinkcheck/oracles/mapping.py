"""Programs map to their mathematics: a framework call expression as a sympy expression.

:func:`sympy_form` walks a parsed program (:func:`kinkcheck.expr.parse`) over numpy object arrays of sympy
expressions, one element per tensor element, and returns the sum of the output's elements: the framework's
gradient of a non-scalar output is the vector-Jacobian product with ones, which is the gradient of that
sum. The oracle (:func:`kinkcheck.oracles.symbolic.analyze_expression`) then judges the result, so any
program built from mapped functions has an oracle without a hand-written ``sympy`` field.

What each framework function means is one table, :data:`TABLE`, gathered from the framework folders' rows
(``frameworks/<name>/mapping.py``, written with :mod:`kinkcheck.oracles.rows`): canonical dotted name (``torch.clamp``,
``torch.nn.functional.relu``, ``jax.numpy.clip``; a tensor method as ``torch.Tensor.clamp`` /
``jax.Array.max``) → :class:`Entry` (the framework's signature, with its defaults, so positional and
keyword spellings bind alike; a kind; a form). Kinds:

* ``"elementwise"``: the form is a scalar expression over the parameter names in the sympy language of the
  catalog's ``sympy`` fields (``"Min(Max(input, min), max)"``), evaluated per element after broadcasting
  the tensor arguments. ``Max``/``Min`` there drop ``None`` arguments (an absent clamp bound is no bound).
  A form may depend on a string/bool argument: ``{"param": "approximate", "none": "…", "tanh": "…"}``.
* ``"reduce"``: the form names a reduction of a list of elements (``sum``, ``mean``, ``max``…), applied over
  every element or the ``dim``/``axis`` argument, with ``keepdim``/``keepdims``.
* any other kind names a handler in :data:`_HANDLERS` (norms, sort/top-k, pooling, distances, reshaping).

Sources of the semantics: each framework's documentation of the function (torch.nn.functional, torch,
torch.linalg; jax.nn, jax.numpy, jax.lax), e.g. ``torch.median`` returns the lower of the two middle values
and ``jax.numpy.median`` their mean; ``torch.round``/``jax.numpy.round`` round half to even;
``torch.nn.functional.softplus`` reverts to the identity where ``beta * x > threshold``;
``jax.nn.gelu`` defaults to the tanh approximation; ``torch.nn.functional.pairwise_distance`` adds ``eps``
to the difference. Ties among elements (``max``, ``sort``) take the value, which ties do not change.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, localcontext
from functools import cache
from typing import Any, NamedTuple

import numpy as np
import sympy
from sympy.printing.precedence import precedence
from sympy.printing.str import StrPrinter

from kinkcheck import expr as ex
from kinkcheck.oracles.rows import Entry
from kinkcheck.oracles import symbolic as sym
from kinkcheck.oracles import translate

__all__ = ["CONSTANTS", "TABLE", "Entry", "SympyForm", "Unmapped", "mapped_names", "sympy_form"]

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


@dataclass(frozen=True)
class SympyForm:
    """A program's mathematics at a point.

    Attributes
    ----------
    expr : sympy.Expr
        Scalar: the sum of the program's output elements (a non-scalar output's gradient is its VJP with ones).
    symbols : tuple of sympy.Symbol, shape (n,)
        Real symbols of the differentiated inputs' components, flat, in input order.
    point : tuple of sympy.Expr, shape (n,)
        Exact point (``Integer``/``Rational``; ``oo``, ``-oo``, ``nan`` for non-finite values).
    components : tuple of str, shape (n,)
        Symbol names: ``"x"``, ``"v[0]"``, ``"m[0][1]"`` (row-major), as :func:`symbolic.to_sympy` names them.
    text : str
        Readable form, e.g. ``"Max(0, x)"``.
    """

    expr: sympy.Expr
    symbols: tuple[sympy.Symbol, ...]
    point: tuple[sympy.Expr, ...]
    components: tuple[str, ...]
    text: str


def _table() -> dict[str, Entry]:
    """Every registered framework's rows (``table()`` of its folder's ``mapping.py``), report order; a framework
    without such a module has none (its programs are unmapped, or read another's rows: :data:`NUMPY_CLONES`)."""
    import importlib

    from kinkcheck.registry import REGISTRY

    out: dict[str, Entry] = {}
    for record in REGISTRY.values():
        try:
            module = importlib.import_module(f"{record.adapter}.mapping")
        except ModuleNotFoundError:
            continue
        out.update(module.table())
    return out


#: Canonical dotted name → :class:`Entry`: the one table of what each mapped function computes, written in the
#: framework folders (``frameworks/<name>/mapping.py``).
TABLE: dict[str, Entry] = _table()

#: Constants a program may name (``torch.inf``, ``jax.numpy.pi``).
CONSTANTS: dict[str, Any] = {
    **{f"{root}.{n}": v for root in ("torch", "jax.numpy")
       for n, v in (("inf", sympy.oo), ("pi", sympy.pi), ("e", sympy.E), ("nan", sympy.nan))},
    **{f"{root}.{dt}": f"dtype:{dt}" for root in ("torch", "jax.numpy")
       for dt in ("float64", "float32", "float16", "bfloat16", "double", "float", "int64", "int32")},
}


def mapped_names() -> tuple[str, ...]:
    """Every function and method name :data:`TABLE` maps, sorted."""
    return tuple(sorted(TABLE))


# --------------------------------------------------------------------------- signatures and forms


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
    """A table form parsed with :mod:`kinkcheck.expr` (never eval-ed), its literals exact from their text."""
    parsed = ex.parse(form, params, _FORM_NS)
    texts = translate._literal_texts(form)
    n_consts = sum(1 for n in ex.walk(parsed) if isinstance(n, ex.Const) and not isinstance(n.value, bool))
    tree = translate._exact_consts(parsed, iter(texts if len(texts) == n_consts else []))
    return tree, ex.resolve_names(tree, _FORM_NS)


# --------------------------------------------------------------------------- values


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


# --------------------------------------------------------------------------- the walk


def sympy_form(tree: ex.Node, at: Mapping[str, Any], framework: str, *, wrt: Sequence[str] | None = None) -> SympyForm:
    """The sympy expression a framework program computes, at a point.

    Parameters
    ----------
    tree : kinkcheck.expr.Node
        A parsed program (``kinkcheck.expr.parse(text, at, {framework})``; a catalog program's ``.tree``).
    at : mapping
        Input name → number or nested list of numbers (``inf``/``-inf``/``nan`` allowed).
    framework : str
        ``"torch"`` or ``"jax"``: which table rows a method (``x.max()``) and operators use.
    wrt : sequence of str, optional
        Differentiated inputs (default: all). The others, and their elements, become exact constants.

    Returns
    -------
    SympyForm

    Raises
    ------
    Unmapped
        A function, method, argument value or construct without a symbolic form here (one-line reason naming
        it canonically, e.g. ``no symbolic form for torch.nn.functional.glu (pass one with --sympy '…')``).
    kinkcheck.expr.ExprError
        When ``wrt`` names an input that is not in ``at``.
    """
    names = tuple(at) if wrt is None else tuple(wrt)
    unknown = [n for n in names if n not in at]
    if unknown:
        raise ex.ExprError(f"--wrt names {', '.join(map(repr, unknown))}, not an input (inputs: {', '.join(at)})")
    syms: list[sympy.Symbol] = []
    vals: list[sympy.Expr] = []
    ctx = _Ctx(framework)
    for name, value in at.items():
        ctx.inputs[name] = _input_array(name, value, name in names, syms, vals)
    ctx.point.update(zip(syms, vals))
    try:
        out = _eval(tree, ctx)
    except RecursionError:
        raise Unmapped("this program", "nested too deeply") from None
    except ex.ExprError:
        raise
    except (TypeError, ValueError, ArithmeticError, IndexError) as err:  # sympy: Max(sqrt(-10), 0) is not comparable
        raise Unmapped("this program", f"sympy cannot form it at this point ({' '.join(str(err).split())})") from None
    if isinstance(out, (_Factor, _Decomposition)):
        raise Unmapped(out.name, "a factor of a decomposition maps only in a reconstruction of the matrix")
    if isinstance(out, (_Pair, _Arg, _Indices, _Fn, str)) or out is None:
        raise Unmapped("this program", f"its output is {_describe(out)}, not a tensor")
    arr = _arr(out, "the output")
    elems = [_numeric(e) for e in arr.flat]
    if any(_is_bool(e) for e in elems):
        raise Unmapped("this program", "its output is boolean")
    total = sympy.Add(*elems)
    if not isinstance(total, sympy.Expr):
        raise Unmapped("this program", "its output is not a number")
    return SympyForm(total, tuple(syms), tuple(vals), tuple(s.name for s in syms), _TextPrinter().doprint(total))


class _TextPrinter(StrPrinter):
    """sympy's str form, with terminating fractions written as the decimals they are (``1e-300``, ``0.7``,
    selu's ``1.0507009873554804934193349852946``): readable and still exact when parsed back."""

    def _print_Rational(self, expr: sympy.Rational) -> str:
        return _decimal(expr) or super()._print_Rational(expr)

    def _print_Mul(self, expr: sympy.Mul) -> str:
        coeff, rest = expr.as_coeff_Mul()
        # 2101…/2000… * Max(0, x) reads as 1.0507…*Max(0, x); small fractions keep sympy's x/2
        if isinstance(coeff, sympy.Rational) and coeff.q > 1000 and rest != 1 and _decimal(abs(coeff)):
            sign = "-" if coeff < 0 else ""
            return f"{sign}{_decimal(abs(coeff))}*{self.parenthesize(rest, precedence(expr))}"
        return super()._print_Mul(expr)


def _decimal(r: sympy.Rational) -> str | None:
    """Exact decimal text of a Rational whose denominator is 2**a * 5**b; None otherwise."""
    q = int(r.q)
    twos = fives = 0
    while q % 2 == 0:
        q, twos = q // 2, twos + 1
    while q % 5 == 0:
        q, fives = q // 5, fives + 1
    if q != 1:
        return None
    digits = max(twos, fives)
    scaled = int(r.p) * 10**digits // int(r.q)  # exact: 10**digits is a multiple of the denominator
    with localcontext(prec=len(str(abs(scaled))) + 2):
        d = Decimal(scaled).scaleb(-digits).normalize()
        texts = [format(d, "f"), format(d, "e").replace("e+", "e").replace("e0", "")]
    return min(texts, key=len)


def _input_array(name: str, value: Any, differentiated: bool, syms: list[sympy.Symbol],
                 vals: list[sympy.Expr]) -> np.ndarray:
    def build(v: Any, label: str) -> Any:
        if isinstance(v, list):
            return [build(e, f"{label}[{i}]") for i, e in enumerate(v)]
        exact = _exact_number(v)
        if not differentiated:
            return exact
        s = sympy.Symbol(label, real=True)
        syms.append(s)
        vals.append(exact)
        return s

    out = _arr(build(value, name), name)
    if out.size > MAX_ELEMENTS:
        raise Unmapped("this program", f"input {name!r} has {out.size} elements (at most {MAX_ELEMENTS} are mapped)")
    return out


def _canonical(framework: str, method: str) -> str:
    """The table name of a tensor method: ``torch.Tensor.max``, ``jax.Array.max``; another framework's tensor
    methods are not in the table (their semantics are its own)."""
    prefix = {"torch": "torch.Tensor", "jax": "jax.Array"}.get(framework)
    if prefix is None:
        raise Unmapped(f"{framework} tensor method .{method}")
    return f"{prefix}.{method}"


#: Namespaces of other frameworks that implement NumPy's API (HIPS autograd wraps NumPy itself;
#: ``tf.experimental.numpy`` follows it; ``pytensor.tensor`` names its functions after NumPy's, with NumPy's
#: arguments): their function of a name computes what ``jax.numpy``'s does, which follows NumPy too, so the
#: table rows of ``jax.numpy`` describe them. A name the table lacks (``pt.switch``) stays unmapped.
NUMPY_CLONES: dict[str, str] = {"autograd.numpy.": "jax.numpy.", "tensorflow.experimental.numpy.": "jax.numpy.",
                                "pytensor.tensor.math.": "jax.numpy.", "pytensor.tensor.": "jax.numpy.",
                                # mlx.core follows NumPy's names and positional arguments (round half to even,
                                # median of an even length the mean): python/src/ops.cpp docstrings
                                "mlx.core.": "jax.numpy.",
                                # MindSpore's NumPy interface (mindspore/numpy: "mirrors NumPy's API")
                                "mindspore.numpy.": "jax.numpy."}


def _table_name(dotted: str) -> str:
    """``dotted`` with a NumPy-clone prefix (:data:`NUMPY_CLONES`) read as ``jax.numpy.``'s."""
    for prefix, same in NUMPY_CLONES.items():
        if dotted.startswith(prefix):
            return same + dotted[len(prefix):]
    return dotted


#: Decompositions whose factors map only in a reconstruction of the matrix (``U diag(S) V^T``, ``Q diag(L) Q^T``):
#: name -> (kind, the names of the returned factors in order, with None for one no reconstruction uses). A
#: singular vector or eigenvector alone has no form (at a repeated value it is no function of the matrix).
DECOMPOSITIONS: dict[str, tuple[str, tuple[str, ...]]] = {
    "torch.linalg.svd": ("svd", ("U", "S", "Vh")), "torch.svd": ("svd", ("U", "S", "V")),
    "jax.numpy.linalg.svd": ("svd", ("U", "S", "Vh")),
    "torch.linalg.eigh": ("eigh", ("L", "Q")), "jax.numpy.linalg.eigh": ("eigh", ("L", "Q")),
}
#: The factors' names as the frameworks' named tuples spell them.
_FACTOR_FIELDS = {"U": "U", "S": "S", "Vh": "Vh", "V": "V", "eigenvalues": "L", "eigenvectors": "Q"}
#: Products of factors: (left, operator, right) -> the product's factor, or "m" for the matrix rebuilt.
_PRODUCTS = {("U", "*", "S"): "US", ("U", "@", "diagS"): "US", ("US", "@", "Vh"): "m",
             ("Q", "*", "L"): "QL", ("Q", "@", "diagL"): "QL", ("QL", "@", "Qt"): "m"}
_TRANSPOSED = {"V": "Vh", "Q": "Qt"}


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


def _decompose(name: str, args: list[Any], kwargs: dict[str, Any], ctx: _Ctx) -> _Decomposition:
    kind, parts = DECOMPOSITIONS[name]
    if len(args) != 1 or any(k not in ("full_matrices", "some", "UPLO", "symmetrize_input") for k in kwargs):
        raise Unmapped(name, "arguments other than the matrix")
    m = _arr(args[0], name)
    if m.ndim != 2 or m.shape[0] != m.shape[1]:
        raise Unmapped(name, "a reconstruction maps for a square matrix")
    if kind == "eigh" and kwargs.get("symmetrize_input") is False:
        raise Unmapped(name, "symmetrize_input=False reads one triangle")
    if kind == "eigh" and name.startswith("torch."):
        # torch reads one triangle (UPLO) but returns a symmetric gradient: the symmetric part is its function
        # (as eigvalsh@repeated writes it) only where the matrix is symmetric; elsewhere the triangle's differs
        here = np.vectorize(lambda e: sympy.sympify(e).xreplace(ctx.point), otypes=[object])(m)
        if any(sympy.simplify(a - b) != 0 for a, b in zip(here.flat, here.T.flat)):
            raise Unmapped(name, "torch.linalg.eigh reads one triangle of a matrix that is not symmetric here")
    return _Decomposition(tuple(_Factor(name, kind, m, p) for p in parts), name)


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


def _eval(n: ex.Node, ctx: _Ctx) -> Any:
    if isinstance(n, ex.Const):
        return n.value
    if isinstance(n, ex.Input):
        return ctx.inputs[n.name]
    if isinstance(n, ex.Name):
        dotted = _table_name(n.dotted)
        if dotted in CONSTANTS:
            return CONSTANTS[dotted]
        if dotted in TABLE:
            return _Fn(dotted)
        raise Unmapped(n.dotted)
    if isinstance(n, ex.Seq):
        items = [_eval(i, ctx) for i in n.items]
        return items if n.kind == "list" else tuple(items)
    if isinstance(n, ex.Call):
        if isinstance(n.func, ex.Name):
            name, args = _table_name(n.func.dotted), [_eval(a, ctx) for a in n.args]
            if name in DECOMPOSITIONS:
                return _decompose(name, args, {k: _eval(v, ctx) for k, v in n.kwargs}, ctx)
            factors = [a for a in args if isinstance(a, (_Factor, _Decomposition))]
            if factors:
                f = factors[0]
                if (name in ("torch.diag", "jax.numpy.diag") and len(args) == 1 and not n.kwargs
                        and isinstance(f, _Factor) and f.part in ("S", "L")):
                    return _Factor(f.name, f.kind, f.source, "diag" + f.part)
                raise Unmapped(f.name, "a factor of a decomposition maps only in a reconstruction of the matrix")
            if name not in TABLE:
                raise Unmapped(n.func.dotted)
        elif isinstance(n.func, ex.Attr):
            self_value = _eval(n.func.value, ctx)
            if isinstance(self_value, (_Factor, _Decomposition)):
                raise Unmapped(self_value.name, "a factor of a decomposition maps only in a reconstruction")
            if isinstance(self_value, _AtIndex):
                return _at_update(n.func.name, self_value, [_eval(a, ctx) for a in n.args],
                                  {k: _eval(v, ctx) for k, v in n.kwargs})
            if isinstance(self_value, (_Pair, _Arg, _Indices, _Fn)) or not _tensorish(self_value):
                raise Unmapped(f"{_describe(self_value)}.{n.func.name}")
            name = _canonical(ctx.framework, n.func.name)
            if name not in TABLE:
                raise Unmapped(name)
            args = [self_value, *[_eval(a, ctx) for a in n.args]]
        else:
            raise Unmapped("a call of a computed value")
        kwargs = {k: _eval(v, ctx) for k, v in n.kwargs}
        return _call(name, args, kwargs, ctx)
    if isinstance(n, ex.Attr):
        value = _eval(n.value, ctx)
        if isinstance(value, _Decomposition):
            return value.field(n.name)
        if isinstance(value, _Factor):
            if n.name in ("T", "mT") and value.part in _TRANSPOSED:
                return _Factor(value.name, value.kind, value.source, _TRANSPOSED[value.part])
            raise value.unmapped()
        if isinstance(value, _Pair) and n.name in ("values", "indices"):
            return getattr(value, n.name)
        if _tensorish(value) and n.name in ("T", "mT"):
            a = _arr(value)
            return a.T if n.name == "T" else np.swapaxes(a, -1, -2)
        if _tensorish(value) and n.name == "real":
            return value
        if _tensorish(value) and n.name == "at" and ctx.framework == "jax":
            return _At(_arr(value))
        raise Unmapped(f"{_describe(value)}.{n.name}" if not _tensorish(value) else _canonical(ctx.framework, n.name))
    if isinstance(n, ex.Index):
        value = _eval(n.value, ctx)
        if isinstance(value, _Decomposition):
            i = _static_int(_eval(n.index, ctx), value.name)
            if not -len(value.factors) <= i < len(value.factors):
                raise Unmapped(value.name, f"no factor {i}")
            return value.factors[i]
        if isinstance(value, _Factor):
            raise value.unmapped()
        if isinstance(value, _At):
            return _AtIndex(value.array, _static_write_key(_eval(n.index, ctx)))
        return _index(value, _eval(n.index, ctx))
    if isinstance(n, ex.BinOp):
        return _binop(n.op, _eval(n.left, ctx), _eval(n.right, ctx))
    if isinstance(n, ex.Unary):
        v = _eval(n.operand, ctx)
        if isinstance(v, (_Factor, _Decomposition)):
            raise Unmapped(v.name, "a factor of a decomposition maps only in a reconstruction of the matrix")
        if n.op == "+":
            return v
        if n.op == "-":
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return -v
            return _vec(lambda e: -_numeric(e), _arr(v))
        return _vec(lambda e: sympy.Not(e) if _is_bool(e) else sympy.Eq(e, 0), _arr(v))
    if isinstance(n, ex.Compare):
        left = _eval(n.left, ctx)
        result = None
        for op, r in zip(n.ops, n.rights):
            right = _eval(r, ctx)
            step = _compare(op, left, right)
            result = step if result is None else _vec(sympy.And, result, step)
            left = right
        return result
    raise Unmapped(type(n).__name__)


def _tensorish(v: Any) -> bool:
    return isinstance(v, (np.ndarray, list, tuple, int, float, sympy.Basic)) and not isinstance(v, (bool, _Pair))


_REL = {">": sympy.Gt, ">=": sympy.Ge, "<": sympy.Lt, "<=": sympy.Le, "==": sympy.Eq, "!=": sympy.Ne}


def _compare(op: str, a: Any, b: Any) -> np.ndarray:
    rel = _REL[op]
    return _vec(lambda x, y: rel(_numeric(x), _numeric(y)), _arr(a), _arr(b))


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


def _index(value: Any, index: Any) -> Any:
    if isinstance(value, _Pair):
        return value[_static_int(index, "a (values, indices) pair")]
    if isinstance(value, (list, tuple)) and not _all_numbers(value):
        return value[_static_int(index, "a list")]
    if not _tensorish(value):
        raise Unmapped(f"indexing {_describe(value)}")
    a = _arr(value)
    if isinstance(index, _Arg):
        if a.ndim == 0:
            raise Unmapped("indexing", "a 0-d tensor has no elements to pick")
        if len(index.choices) != a.shape[0]:
            raise Unmapped("indexing", f"the indices of {index.name} do not match the first dimension")
        if a.ndim == 1 and index.source is not None and np.array_equal(index.source, a):
            # v[v.argmax()] is the maximum itself, whichever tied index is picked
            return _obj((), [(sympy.Max if index.name.endswith("max") else sympy.Min)(*map(_numeric, a.flat))])
        picks = [a[i] for _, i in index.choices]
        conds = [c for c, _ in index.choices]
        return _vec(lambda *es: sympy.Piecewise(*[(_numeric(e), c) for e, c in zip(es[:-1], conds[:-1])],
                                                (_numeric(es[-1]), True)),
                    *[np.asarray(p, dtype=object) for p in picks])
    key = _static_key(index)
    try:
        out = a[key]
    except IndexError as err:
        raise Unmapped("indexing", str(err)) from None
    return out if isinstance(out, np.ndarray) else _obj((), [out])


def _static_write_key(index: Any) -> Any:
    """The key of ``x.at[key]``: integers, index arrays and slices' absence (None), as numpy takes them."""
    if isinstance(index, tuple):
        return tuple(_static_write_key(i) for i in index)
    if index is None:
        return None
    a = _arr(index, "x.at[…]")
    return _static_index(a, "x.at[…]") if a.ndim else _static_int(a, "x.at[…]")


def _all_numbers(v: Any) -> bool:
    return all(isinstance(i, (int, float, sympy.Basic, np.ndarray, list, tuple)) and not isinstance(i, _Pair)
               for i in v)


def _static_key(index: Any) -> Any:
    if index is None:
        return None
    if isinstance(index, tuple):
        return tuple(_static_key(i) for i in index)
    if isinstance(index, (np.ndarray, list)) and _arr(index).ndim:  # v[jnp.array([0, 1])]: known integers
        return _static_index(index, "an index")
    return _static_int(index, "an index")


# --------------------------------------------------------------------------- calls


def _bind(name: str, entry: Entry, args: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    try:
        bound = entry.parameters.bind(*args, **kwargs)
    except TypeError as err:
        raise Unmapped(name, f"arguments do not bind ({err})") from None
    bound.apply_defaults()
    return dict(bound.arguments)


def _call(name: str, args: list[Any], kwargs: dict[str, Any], ctx: _Ctx) -> Any:
    entry = TABLE[name]
    for v in [*args, *kwargs.values()]:
        if isinstance(v, (_Factor, _Decomposition)):
            raise Unmapped(v.name, "a factor of a decomposition maps only in a reconstruction of the matrix")
        if isinstance(v, (_Arg, _Indices)):
            raise Unmapped(name, f"an argument is {_describe(v)}")
    bound = _bind(name, entry, args, kwargs)
    if entry.kind == "elementwise":
        return _elementwise(name, entry, bound)
    if entry.kind == "reduce":
        first = next(iter(bound))
        a = _arr(bound[first], name)
        dim = bound.get("dim", bound.get("axis", bound.get("axes")))
        keep = bool(bound.get("keepdim", bound.get("keepdims", False)))
        if bound.get("where") is not None or bound.get("initial") is not None or bound.get("b") is not None:
            raise Unmapped(name, "where=/initial=/b= arguments")
        return _reduce(a, _dims(dim, a.ndim, name), keep, _REDUCERS[entry.form])
    return _HANDLERS[entry.kind](name, entry, bound, ctx)


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


def _h_where(name: str, entry: Entry, b: dict[str, Any], ctx: _Ctx) -> np.ndarray:
    keys = list(b)
    cond, x, y = b[keys[0]], b[keys[1]], b[keys[2]]
    if x is None or y is None:
        raise Unmapped(name, "the one-argument form (indices)")
    return _where(cond, x, y)


def _where(cond: Any, x: Any, y: Any) -> np.ndarray:
    def pick(c: Any, a: Any, e: Any) -> Any:
        c = c if _is_bool(c) else sympy.Ne(c, 0)
        return sympy.Piecewise((_numeric(a), c), (_numeric(e), True))

    return _vec(pick, _arr(cond), _arr(x), _arr(y))


def _h_where_method(name: str, entry: Entry, b: dict[str, Any], ctx: _Ctx) -> np.ndarray:
    return _where(b["condition"], b["self"], b["y"])


def _h_asarray(name: str, entry: Entry, b: dict[str, Any], ctx: _Ctx) -> np.ndarray:
    return _arr(next(iter(b.values())), name)


def _h_torch_minmax(name: str, entry: Entry, b: dict[str, Any], ctx: _Ctx) -> Any:
    first, second = list(b)[:2]
    a, other = _arr(b[first], name), b[second]
    red = _REDUCERS[entry.form]
    if other is None:
        return _reduce(a, _dims(None, a.ndim, name), False, red)
    if isinstance(other, int) and not isinstance(other, bool):
        values = _reduce(a, _dims(other, a.ndim, name), bool(b["keepdim"]), red)
        return _Pair(values, _Indices(name))
    fn = sympy.Max if entry.form == "max" else sympy.Min
    return _vec(lambda x, y: fn(_numeric(x), _numeric(y)), a, _arr(other, name))


def _h_argext(name: str, entry: Entry, b: dict[str, Any], ctx: _Ctx) -> Any:
    a = _arr(next(iter(b.values())), name)
    dim = b.get("dim", b.get("axis"))
    if dim is not None or a.ndim != 1:
        raise Unmapped(name, "only over every element of a 1-D tensor")
    items = list(a.flat)
    better = sympy.Gt if entry.form == "max" else sympy.Lt
    choices = []
    for i, e in enumerate(items):
        # first index wins ties: strictly better than the earlier ones, at least as good as the later ones
        conds = [better(e, items[j]) for j in range(i)] + [sympy.Not(better(items[j], e)) for j in range(i + 1, len(items))]
        choices.append((sympy.And(*conds), i))
    return _Arg(tuple(choices), name, a)


def _order_stats(a: np.ndarray, dim: int, keep: bool, ks: Callable[[int], list[int]], what: str) -> np.ndarray:
    """Along ``dim``: the k-th smallest elements for each k in ``ks(n)`` (a new last axis moved back to ``dim``)."""
    if a.ndim == 0:
        a = a.reshape(1)
    d = _dims(dim, a.ndim, what)[0]
    moved = np.moveaxis(a, d, -1)
    n = moved.shape[-1]
    chosen = ks(n)
    lead = moved.shape[:-1]
    rows = moved.reshape(-1, n)
    out = _obj((rows.shape[0], len(chosen)), [_OrderStat(tuple(r), k, what) for r in rows for k in chosen])
    out = out.reshape(*lead, len(chosen))
    return np.moveaxis(out, -1, d)


def _h_sort(name: str, entry: Entry, b: dict[str, Any], ctx: _Ctx) -> Any:
    keys = list(b)
    a = _arr(b[keys[0]], name)
    if entry.form == "lax":
        if isinstance(b["operand"], (list, tuple)):
            raise Unmapped(name, "sorting several operands")
        return _order_stats(a, b["dimension"], False, lambda n: list(range(1, n + 1)), name)
    dim = b.get("dim", b.get("axis"))
    if dim is None:
        a, dim = a.reshape(-1), 0
    desc = bool(b.get("descending", False))
    vals = _order_stats(a, dim, False, lambda n: list(range(n, 0, -1)) if desc else list(range(1, n + 1)), name)
    return _Pair(vals, _Indices(name)) if entry.form == "pair" else vals


def _h_msort(name: str, entry: Entry, b: dict[str, Any], ctx: _Ctx) -> Any:
    return _order_stats(_arr(next(iter(b.values())), name), 0, False, lambda n: list(range(1, n + 1)), name)


def _h_topk(name: str, entry: Entry, b: dict[str, Any], ctx: _Ctx) -> Any:
    keys = list(b)
    a = _arr(b[keys[0]], name)
    k = _static_int(b["k"], name)
    dim = b.get("dim", b.get("axis", -1))
    largest = bool(b.get("largest", True))
    n = (a.shape[_dims(dim, a.ndim, name)[0]] if a.ndim else 1)
    if not 0 <= k <= n:
        raise Unmapped(name, f"k={k} is out of range for {n} elements")
    vals = _order_stats(a, dim, False, lambda m: list(range(m, m - k, -1)) if largest else list(range(1, k + 1)), name)
    return _Pair(vals, _Indices(name))


def _h_kthvalue(name: str, entry: Entry, b: dict[str, Any], ctx: _Ctx) -> Any:
    a = _arr(next(iter(b.values())), name)
    k = _static_int(b["k"], name)
    vals = _order_stats(a, b["dim"], False, lambda n: [k] if 1 <= k <= n else _bad_k(name, k, n), name)
    vals = np.take(vals, 0, axis=_dims(b["dim"], max(a.ndim, 1), name)[0])
    vals = vals if isinstance(vals, np.ndarray) else _obj((), [vals])
    if b["keepdim"]:
        vals = np.expand_dims(vals, _dims(b["dim"], max(a.ndim, 1), name)[0])
    return _Pair(vals, _Indices(name))


def _bad_k(name: str, k: int, n: int) -> list[int]:
    raise Unmapped(name, f"k={k} is out of range for {n} elements")


def _median_values(a: np.ndarray, dim: Any, keep: bool, name: str, lower: bool) -> np.ndarray:
    if dim is None:
        a, d = a.reshape(-1), 0
    else:
        d = _dims(dim, max(a.ndim, 1), name)[0]

    def med(items: list[Any]) -> Any:
        n = len(items)
        if lower or n % 2:
            return _kth(items, (n + 1) // 2, name)  # torch: the lower of the two middle values
        return (_kth(items, n // 2, name) + _kth(items, n // 2 + 1, name)) / 2

    return _reduce(a, (d,) if a.ndim else (), keep and dim is not None, med)


def _h_torch_median(name: str, entry: Entry, b: dict[str, Any], ctx: _Ctx) -> Any:
    a = _arr(next(iter(b.values())), name)
    vals = _median_values(a, b["dim"], bool(b["keepdim"]), name, lower=True)
    return vals if b["dim"] is None else _Pair(vals, _Indices(name))


def _h_jnp_median(name: str, entry: Entry, b: dict[str, Any], ctx: _Ctx) -> Any:
    a = _arr(b["a"], name)
    if isinstance(b["axis"], (tuple, list)):
        raise Unmapped(name, "a tuple of axes")
    return _median_values(a, b["axis"], bool(b["keepdims"]), name, lower=False)


def _h_quantile(name: str, entry: Entry, b: dict[str, Any], ctx: _Ctx) -> Any:
    keys = list(b)
    a = _arr(b[keys[0]], name)
    method = b.get("interpolation", b.get("method"))
    if method != "linear":
        raise Unmapped(name, f"interpolation {method!r} (mapped: 'linear')")
    q = _static_number(b["q"], name)
    if not (q.is_real and 0 <= q <= 1):
        raise Unmapped(name, f"q={q} is outside [0, 1]")
    dim = b.get("dim", b.get("axis"))
    keep = bool(b.get("keepdim", b.get("keepdims", False)))
    if dim is None:
        a, dims = a.reshape(-1), (0,)
    else:
        dims = _dims(dim, max(a.ndim, 1), name)

    def quant(items: list[Any]) -> Any:
        pos = q * (len(items) - 1)  # linear: between the floor(pos)-th and ceil(pos)-th smallest
        lo = int(sympy.floor(pos))
        frac = pos - lo
        low = _kth(items, lo + 1, name)
        return low if frac == 0 else low + frac * (_kth(items, lo + 2, name) - low)

    return _reduce(a, dims, keep and dim is not None, quant)


def _vector_norm_of(items: list[Any], ord_: sympy.Expr, name: str) -> sympy.Expr:
    xs = [_numeric(x) for x in items]
    if ord_ == sympy.oo:
        return sympy.Max(*[sympy.Abs(x) for x in xs])
    if ord_ == -sympy.oo:
        return sympy.Min(*[sympy.Abs(x) for x in xs])
    if ord_ == 0:
        return sympy.Add(*[sympy.Piecewise((0, sympy.Eq(x, 0)), (1, True)) for x in xs])
    if ord_ == 2:
        return sympy.sqrt(sympy.Add(*[x ** 2 for x in xs]))
    if ord_ == 1:
        return sympy.Add(*[sympy.Abs(x) for x in xs])
    if not ord_.is_real:
        raise Unmapped(name, f"ord={ord_}")
    return sympy.Add(*[sympy.Abs(x) ** ord_ for x in xs]) ** (1 / ord_)


def _ord(v: Any, name: str) -> Any:
    if isinstance(v, str):
        return v
    if isinstance(v, float) and math.isinf(v):
        return sympy.oo if v > 0 else -sympy.oo
    return _static_number(v, name)


def _vector_norm(a: np.ndarray, ord_: Any, dim: Any, keep: bool, name: str) -> np.ndarray:
    if isinstance(ord_, str):
        raise Unmapped(name, f"ord={ord_!r} for a vector norm")
    return _reduce(a, _dims(dim, a.ndim, name), keep, lambda xs: _vector_norm_of(xs, ord_, name))


def _h_vector_norm(name: str, entry: Entry, b: dict[str, Any], ctx: _Ctx) -> Any:
    a = _arr(b["x"], name)
    dim = b.get("dim", b.get("axis"))
    return _vector_norm(a, _ord(b["ord"], name), dim, bool(b.get("keepdim", b.get("keepdims"))), name)


def _matrix_norm_of(m: np.ndarray, ord_: Any, name: str) -> sympy.Expr:
    rows, cols = m.shape
    els = [[_numeric(e) for e in row] for row in m]
    fro2 = sympy.Add(*[e ** 2 for row in els for e in row])
    if ord_ == "fro":
        return sympy.sqrt(fro2)
    if ord_ in (1, -1):
        sums = [sympy.Add(*[sympy.Abs(els[i][j]) for i in range(rows)]) for j in range(cols)]
        return sympy.Max(*sums) if ord_ == 1 else sympy.Min(*sums)
    if ord_ in (sympy.oo, -sympy.oo):
        sums = [sympy.Add(*[sympy.Abs(e) for e in row]) for row in els]
        return sympy.Max(*sums) if ord_ == sympy.oo else sympy.Min(*sums)
    if ord_ in ("nuc", 2, -2):
        if min(rows, cols) == 1:
            return sympy.sqrt(fro2)  # one singular value
        if (rows, cols) != (2, 2):
            raise Unmapped(name, f"ord={ord_!r} of a {rows}x{cols} matrix (singular values have a closed form "
                                 "for 2x2 only here; not judged)")
        det = els[0][0] * els[1][1] - els[0][1] * els[1][0]
        # singular values of a 2x2 matrix: (sqrt(F^2 + 2|det|) +- sqrt(F^2 - 2|det|)) / 2
        plus, minus = sympy.sqrt(fro2 + 2 * sympy.Abs(det)), sympy.sqrt(fro2 - 2 * sympy.Abs(det))
        if ord_ == "nuc":
            return plus
        return (plus + minus) / 2 if ord_ == 2 else (plus - minus) / 2
    raise Unmapped(name, f"ord={ord_!r} for a matrix norm")


def _matrix_norm(a: np.ndarray, ord_: Any, dims: tuple[int, int], keep: bool, name: str) -> np.ndarray:
    if a.ndim < 2:
        raise Unmapped(name, f"a matrix norm of a {a.ndim}-D tensor")
    d0, d1 = (d % a.ndim for d in dims)
    moved = np.moveaxis(a, (d0, d1), (-2, -1))
    lead = moved.shape[:-2]
    flat = moved.reshape(-1, *moved.shape[-2:])
    out = _obj(lead, [_matrix_norm_of(m, ord_, name) for m in flat])
    if keep:
        out = np.expand_dims(out, tuple(sorted((d0, d1))))
    return out


def _h_matrix_norm(name: str, entry: Entry, b: dict[str, Any], ctx: _Ctx) -> Any:
    first = next(iter(b))
    dims = b.get("dim", (-2, -1))
    return _matrix_norm(_arr(b[first], name), _ord(b["ord"], name), tuple(_static_ints(dims, name)),  # type: ignore[arg-type]
                        bool(b.get("keepdim", b.get("keepdims"))), name)


def _h_linalg_norm(name: str, entry: Entry, b: dict[str, Any], ctx: _Ctx) -> Any:
    """torch.linalg.norm / jax.numpy.linalg.norm: a vector norm of 1-D input (or flattened when ord is None and
    no axis is given), a matrix norm of 2-D input with an ord or a 2-axis dim."""
    first = next(iter(b))
    a = _arr(b[first], name)
    dim = b.get("dim", b.get("axis"))
    keep = bool(b.get("keepdim", b.get("keepdims")))
    ord_ = None if b["ord"] is None else _ord(b["ord"], name)
    dims = None if dim is None else _static_ints(dim, name)
    if dims is not None and len(dims) == 2 or (dims is None and a.ndim == 2 and ord_ is not None):
        return _matrix_norm(a, "fro" if ord_ is None else ord_, dims or (-2, -1), keep, name)  # type: ignore[arg-type]
    if dims is None and ord_ is not None and a.ndim > 2:
        raise Unmapped(name, f"ord={ord_} over a {a.ndim}-D tensor without dim")
    return _vector_norm(a, sympy.Integer(2) if ord_ is None else ord_, dim, keep, name)


def _h_torch_norm(name: str, entry: Entry, b: dict[str, Any], ctx: _Ctx) -> Any:
    """torch.norm(input, p='fro', dim=None): 'fro' and numbers are vector norms of the flattened input
    (or over dim); 'nuc' a matrix norm."""
    first = next(iter(b))
    a = _arr(b[first], name)
    p, dim, keep = b["p"], b["dim"], bool(b["keepdim"])
    if p == "nuc":
        return _matrix_norm(a, "nuc", _static_ints(dim, name) if dim is not None else (-2, -1), keep, name)  # type: ignore[arg-type]
    if p == "fro" or p is None:
        p = 2
    return _vector_norm(a, _ord(p, name), dim, keep, name)


def _p_distance(diffs: list[Any], p: sympy.Expr, name: str) -> sympy.Expr:
    return _vector_norm_of(diffs, p, name)


def _h_dist(name: str, entry: Entry, b: dict[str, Any], ctx: _Ctx) -> Any:
    keys = list(b)
    d = _binop("-", _arr(b[keys[0]], name), _arr(b[keys[1]], name))
    return _obj((), [_p_distance(list(d.flat), _ord(b["p"], name), name)])


def _h_cdist(name: str, entry: Entry, b: dict[str, Any], ctx: _Ctx) -> Any:
    x1, x2 = _arr(b["x1"], name), _arr(b["x2"], name)
    if x1.ndim < 2 or x2.ndim < 2 or x1.shape[-1] != x2.shape[-1]:
        raise Unmapped(name, f"shapes {x1.shape} and {x2.shape} (expected (…, P, M) and (…, R, M))")
    p = _ord(b["p"], name)
    lead = np.broadcast_shapes(x1.shape[:-2], x2.shape[:-2])
    x1 = np.broadcast_to(x1, (*lead, *x1.shape[-2:]))
    x2 = np.broadcast_to(x2, (*lead, *x2.shape[-2:]))
    P, R = x1.shape[-2], x2.shape[-2]
    out = np.empty((*lead, P, R), dtype=object)
    for idx in np.ndindex(*lead) if lead else [()]:
        for i in range(P):
            for j in range(R):
                diffs = [_numeric(x1[(*idx, i, k)]) - _numeric(x2[(*idx, j, k)]) for k in range(x1.shape[-1])]
                out[(*idx, i, j)] = _p_distance(diffs, p, name)
    return out


def _h_pairwise_distance(name: str, entry: Entry, b: dict[str, Any], ctx: _Ctx) -> Any:
    """‖x1 - x2 + eps‖_p over the last dimension (torch adds eps to the difference)."""
    eps = _static_number(b["eps"], name)
    d = _vec(lambda x, y: _numeric(x) - _numeric(y) + eps, _arr(b["x1"], name), _arr(b["x2"], name))
    p = _ord(b["p"], name)
    return _reduce(d, (d.ndim - 1,) if d.ndim else (), bool(b["keepdim"]), lambda xs: _p_distance(xs, p, name))


def _h_loss(name: str, entry: Entry, b: dict[str, Any], ctx: _Ctx) -> Any:
    if b.get("size_average") is not None or b.get("reduce") is not None:
        raise Unmapped(name, "size_average=/reduce= (deprecated)")
    ent = Entry(entry.signature, "elementwise", entry.form)
    bound = {k: v for k, v in b.items() if k not in ("size_average", "reduce")}
    per = _elementwise(name, ent, bound)
    red = b["reduction"]
    if red == "none":
        return per
    if red not in ("sum", "mean"):
        raise Unmapped(name, f"reduction={red!r}")
    return _reduce(per, _dims(None, per.ndim, name), False, _REDUCERS[red])


def _h_softmax(name: str, entry: Entry, b: dict[str, Any], ctx: _Ctx) -> Any:
    first = next(iter(b))
    a = _arr(b[first], name)
    dim = b.get("dim", b.get("axis"))
    if dim is None:
        if a.ndim > 1:
            raise Unmapped(name, "dim=None on a tensor of more than one dimension")
        dim = 0
    if b.get("where") is not None:
        raise Unmapped(name, "where=")
    d = _dims(dim, max(a.ndim, 1), name)
    lse = _reduce(a, d, True, _REDUCERS["logsumexp"]) if a.ndim else _obj((), [_numeric(a[()])])
    if entry.form == "log_softmax":
        return _vec(lambda x, s: _numeric(x) - s, a, lse)
    return _vec(lambda x, s: sympy.exp(_numeric(x) - s), a, lse)


def _h_reshape(name: str, entry: Entry, b: dict[str, Any], ctx: _Ctx) -> Any:
    first = next(iter(b))
    a = _arr(b[first], name)
    shape = b.get("shape")
    if isinstance(shape, tuple) and len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = shape[0]  # x.reshape((1, 2)) as well as x.reshape(1, 2)
    dims = _static_ints(shape, name)
    try:
        return a.reshape(dims)
    except ValueError as err:
        raise Unmapped(name, str(err)) from None


def _sizes(b: dict[str, Any], key: str) -> Any:
    """A shape given as one tuple or as separate arguments (``x.expand((2, 3))`` as ``x.expand(2, 3)``)."""
    v = b.get(key)
    if isinstance(v, tuple) and len(v) == 1 and isinstance(v[0], (tuple, list)):
        return v[0]
    return v


def _h_broadcast(name: str, entry: Entry, b: dict[str, Any], ctx: _Ctx) -> Any:
    """``broadcast_to`` / ``expand`` / ``expand_as``: the elements repeated by numpy's broadcasting rules (a size
    of -1 keeps that dimension, as torch's ``expand`` does); each copy is the same sympy element."""
    first = next(iter(b))
    a = _arr(b[first], name)
    if "other" in b:
        shape = _arr(b["other"], name).shape
    else:
        shape = _static_ints(_sizes(b, "size" if "size" in b else "shape"), name)
        lead = len(shape) - a.ndim
        shape = tuple(a.shape[i - lead] if n == -1 and i >= lead else n for i, n in enumerate(shape))
    try:
        return np.broadcast_to(a, shape)
    except ValueError as err:
        raise Unmapped(name, str(err)) from None


def _h_tile(name: str, entry: Entry, b: dict[str, Any], ctx: _Ctx) -> Any:
    """``tile`` / torch's ``repeat``: copies of the whole tensor along each dimension (numpy's ``tile``)."""
    first = next(iter(b))
    a = _arr(b[first], name)
    reps = _static_ints(_sizes(b, "dims" if "dims" in b else "reps"), name)
    if any(r < 0 for r in reps):
        raise Unmapped(name, f"a negative repetition {reps}")
    return np.tile(a, reps)


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


def _h_index_put(name: str, entry: Entry, b: dict[str, Any], ctx: _Ctx) -> Any:
    """``index_put(indices, values, accumulate)``: ``out[indices] = values`` (or ``+=``), out of place."""
    first = next(iter(b))
    a = _arr(b[first], name)
    indices = b["indices"]
    if not isinstance(indices, (list, tuple)):
        raise Unmapped(name, "indices must be a tuple of index tensors")
    key = tuple(_static_index(i, name) for i in indices)
    return _write(name, a, np.asarray(_positions(a, key, name)), b["values"], bool(b["accumulate"]))


def _h_put(name: str, entry: Entry, b: dict[str, Any], ctx: _Ctx) -> Any:
    """``put(index, source, accumulate)``: writes at flat indices (negative ones count from the end)."""
    a = _arr(b["self"], name)
    flat = _static_index(b["index"], name)
    if _arr(b["source"], name).size != flat.size:
        raise Unmapped(name, "source and index must have the same number of elements")
    return _write(name, a, np.where(flat < 0, flat + a.size, flat), b["source"], bool(b["accumulate"]))


def _h_index_along(name: str, entry: Entry, b: dict[str, Any], ctx: _Ctx) -> Any:
    """``index_add(dim, index, source, alpha)`` / ``index_copy(dim, index, source)``: the slices of ``source``
    written into ``self`` at ``index`` along ``dim``; index_add adds ``alpha * source``."""
    first = next(iter(b))
    a = _arr(b[first], name)
    dim = _dims(b["dim"], max(a.ndim, 1), name)[0]
    index = _static_index(b["index"], name)
    if index.ndim > 1 or (index < 0).any():
        raise Unmapped(name, "the index must be 0-d or 1-d and not negative (torch raises otherwise)")
    index = index.reshape(-1)
    key = (slice(None),) * dim + (index,)
    source = _arr(b["source"], name)
    if source.shape != _positions(a, key, name).shape:
        raise Unmapped(name, f"source has shape {source.shape}, the indexed slices {_positions(a, key, name).shape}")
    add = name.endswith("index_add")
    if add and b.get("alpha", 1) != 1:
        source = _vec(lambda e: _numeric(e) * _scalar(b["alpha"]), source)
    return _write(name, a, np.asarray(_positions(a, key, name)), source, add)


def _h_scatter(name: str, entry: Entry, b: dict[str, Any], ctx: _Ctx) -> Any:
    """``scatter(dim, index, src)`` / ``scatter_add``: ``out[..., index[p], ...] = src[p]`` (index at ``dim``)
    for every position p of ``index``; a number for ``src`` (or ``value=``) is written everywhere."""
    first = next(iter(b))
    a = _arr(b[first], name)
    if b.get("reduce") is not None:
        raise Unmapped(name, "reduce= (a deprecated reduction)")
    src = b["src"] if b.get("src") is not None else b.get("value")
    if src is None:
        raise Unmapped(name, "neither src nor value")
    index = _static_index(b["index"], name)
    dim = _dims(b["dim"], max(a.ndim, 1), name)[0]
    if index.ndim != a.ndim:
        raise Unmapped(name, "index must have as many dimensions as the tensor")
    if name.endswith("scatter_add") and not isinstance(src, np.ndarray):
        raise Unmapped(name, "src must be a tensor")
    src_a = _arr(src, name)
    if src_a.ndim:
        if src_a.ndim != index.ndim or any(s < i for s, i in zip(src_a.shape, index.shape)):
            raise Unmapped(name, "src must cover index in every dimension")
        src_a = src_a[tuple(slice(0, n) for n in index.shape)]  # scatter reads src over index's shape
    targets = np.empty(index.shape, dtype=np.int64)
    for p in np.ndindex(*index.shape):
        q = list(p)
        q[dim] = int(index[p])
        if not all(0 <= c < n for c, n in zip(q, a.shape)):
            raise Unmapped(name, f"index {q} is out of range for shape {a.shape}")
        targets[p] = int(np.ravel_multi_index(tuple(q), a.shape))
    return _write(name, a, targets, src_a, name.endswith("scatter_add"))


@dataclass(frozen=True, eq=False)
class _AtIndex:
    """``x.at[key]`` (JAX's out-of-place index update): the array and the static key."""

    array: np.ndarray
    key: Any


@dataclass(frozen=True, eq=False)
class _At:
    """``x.at`` before it is indexed."""

    array: np.ndarray


def _at_update(method: str, at: _AtIndex, args: list[Any], kwargs: dict[str, Any]) -> np.ndarray:
    """``x.at[key].set(v)`` / ``.add(v)`` / ``.max(v)`` / ``.min(v)`` (jax.numpy's ndarray.at): a write, added for
    ``add``, the maximum (minimum) of the entry and the values for ``max`` (``min``)."""
    name = f"jax.Array.at[].{method}"
    if method not in ("set", "add", "max", "min") or len(args) != 1:
        raise Unmapped(name)
    if any(k not in ("indices_are_sorted", "unique_indices", "mode") for k in kwargs) or kwargs.get("mode") not in (
            None, "promise_in_bounds"):
        raise Unmapped(name, "arguments other than the values")
    how = {"set": False, "add": True}.get(method, method)
    targets = np.asarray(_positions(at.array, at.key, name))
    if kwargs.get("unique_indices") and len(set(targets.flat)) < targets.size:
        raise Unmapped(name, "unique_indices=True with a duplicate index: JAX leaves the result undefined")
    return _write(name, at.array, targets, args[0], how)


def _h_flatten(name: str, entry: Entry, b: dict[str, Any], ctx: _Ctx) -> Any:
    first = next(iter(b))
    a = _arr(b[first], name)
    start, end = b.get("start_dim", 0), b.get("end_dim", -1)
    if a.ndim == 0:
        return a.reshape(1)
    s, e = start % a.ndim, end % a.ndim
    return a.reshape(*a.shape[:s], -1, *a.shape[e + 1:])


def _h_stack(name: str, entry: Entry, b: dict[str, Any], ctx: _Ctx) -> Any:
    first = next(iter(b))
    items = b[first]
    if not isinstance(items, (list, tuple)) or not items:
        raise Unmapped(name, "expected a non-empty list of tensors")
    arrays = [_arr(i, name) for i in items]
    axis = _static_int(b.get("dim", b.get("axis", 0)), name)
    try:
        return (np.stack if entry.kind == "stack" else np.concatenate)(arrays, axis=axis)
    except ValueError as err:
        raise Unmapped(name, str(err)) from None


def _h_squeeze(name: str, entry: Entry, b: dict[str, Any], ctx: _Ctx) -> Any:
    first = next(iter(b))
    a = _arr(b[first], name)
    dim = b.get("dim", b.get("axis"))
    if dim is None:
        return a.squeeze()
    dims = tuple(d for d in _dims(dim, a.ndim, name) if a.shape[d] == 1)
    return a.squeeze(axis=dims) if dims else a


def _h_unsqueeze(name: str, entry: Entry, b: dict[str, Any], ctx: _Ctx) -> Any:
    first = next(iter(b))
    a = _arr(b[first], name)
    return np.expand_dims(a, _static_int(b.get("dim", b.get("axis")), name))


def _h_transpose2(name: str, entry: Entry, b: dict[str, Any], ctx: _Ctx) -> Any:
    first = next(iter(b))
    a = _arr(b[first], name)
    if b.get("axes") is not None:
        return np.transpose(a, _static_ints(b["axes"], name))
    return a.T


def _h_swapaxes(name: str, entry: Entry, b: dict[str, Any], ctx: _Ctx) -> Any:
    keys = list(b)
    a = _arr(b[keys[0]], name)
    return np.swapaxes(a, _static_int(b[keys[1]], name), _static_int(b[keys[2]], name))


def _h_matmul(name: str, entry: Entry, b: dict[str, Any], ctx: _Ctx) -> Any:
    keys = list(b)
    return _matmul(_arr(b[keys[0]], name), _arr(b[keys[1]], name))


def _h_vdot(name: str, entry: Entry, b: dict[str, Any], ctx: _Ctx) -> Any:
    a, c = _arr(b["a"], name).reshape(-1), _arr(b["b"], name).reshape(-1)
    return _matmul(a, c)


def _windows(a: np.ndarray, ranges: list[list[tuple[int, int]]], fn: Callable[[list[Any]], Any]) -> np.ndarray:
    """``fn`` over windows of the last ``len(ranges)`` axes; ``ranges[k]`` lists (start, end) per output index."""
    k = len(ranges)
    lead = a.shape[:-k] if k else a.shape
    out = np.empty((*lead, *[len(r) for r in ranges]), dtype=object)
    for li in np.ndindex(*lead) if lead else [()]:
        for oi in itertools.product(*[range(len(r)) for r in ranges]):
            idx = [range(*ranges[d][oi[d]]) for d in range(k)]
            out[(*li, *oi)] = fn([a[(*li, *w)] for w in itertools.product(*idx)])
    return out


def _tuple_of(v: Any, d: int, name: str) -> tuple[int, ...]:
    t = _static_ints(v, name)
    return t * d if len(t) == 1 else t


def _h_max_pool(name: str, entry: Entry, b: dict[str, Any], ctx: _Ctx) -> Any:
    d = entry.form
    a = _arr(b["input"], name)
    if b["return_indices"] or b["ceil_mode"] or any(_tuple_of(b["padding"], d, name)) \
            or any(x != 1 for x in _tuple_of(b["dilation"], d, name)):
        raise Unmapped(name, "padding, dilation, ceil_mode or return_indices")
    ks = _tuple_of(b["kernel_size"], d, name)
    st = ks if b["stride"] is None else _tuple_of(b["stride"], d, name)
    if a.ndim < d:
        raise Unmapped(name, f"a {a.ndim}-D input")
    sizes = a.shape[-d:]
    ranges = [[(i * s, i * s + k) for i in range((n - k) // s + 1)] for n, k, s in zip(sizes, ks, st)]
    return _windows(a, ranges, _REDUCERS["max"])


def _h_adaptive_max_pool(name: str, entry: Entry, b: dict[str, Any], ctx: _Ctx) -> Any:
    d = entry.form
    a = _arr(b["input"], name)
    if b["return_indices"]:
        raise Unmapped(name, "return_indices=True")
    outs = _tuple_of(b["output_size"], d, name)
    sizes = a.shape[-d:]
    # torch's adaptive windows: [floor(i * n / o), ceil((i + 1) * n / o))
    ranges = [[(i * n // o, -((-(i + 1) * n) // o)) for i in range(o)] for n, o in zip(sizes, outs)]
    return _windows(a, ranges, _REDUCERS["max"])


_WINDOW_OPS = {"jax.lax.max": "max", "jax.lax.min": "min", "jax.lax.add": "sum", "jax.numpy.maximum": "max",
               "jax.numpy.minimum": "min", "jax.numpy.add": "sum"}


def _h_reduce_window(name: str, entry: Entry, b: dict[str, Any], ctx: _Ctx) -> Any:
    comp = b["computation"]
    if not isinstance(comp, _Fn) or comp.name not in _WINDOW_OPS:
        raise Unmapped(name, f"computation {_describe(comp)} (mapped: {', '.join(sorted(_WINDOW_OPS))})")
    if b["base_dilation"] is not None or b["window_dilation"] is not None:
        raise Unmapped(name, "dilation")
    a = _arr(b["operand"], name)
    red = _WINDOW_OPS[comp.name]
    init = _arr(b["init_value"], name)[()] if _tensorish(b["init_value"]) else None
    identity = {"max": -sympy.oo, "min": sympy.oo, "sum": sympy.Integer(0)}[red]
    if init is None or init != identity:
        raise Unmapped(name, f"init_value {init} (mapped: the identity of {red}, {identity})")
    wd = _static_ints(b["window_dimensions"], name)
    ws = _static_ints(b["window_strides"], name) if b["window_strides"] is not None else (1,) * len(wd)
    pad = b["padding"]
    if not (pad == "VALID" or (isinstance(pad, (list, tuple)) and all(_static_ints(p, name) == (0, 0) for p in pad))):
        raise Unmapped(name, f"padding {pad!r} (mapped: 'VALID' or zeros)")
    if len(wd) != a.ndim or len(ws) != a.ndim:
        raise Unmapped(name, "window dimensions do not match the operand")
    ranges = [[(i * s, i * s + k) for i in range((n - k) // s + 1)] for n, k, s in zip(a.shape, wd, ws)]
    return _windows(a, ranges, _REDUCERS[red])


def _h_logit(name: str, entry: Entry, b: dict[str, Any], ctx: _Ctx) -> Any:
    """``logit(x, eps)``: the input clamped to [eps, 1 - eps] first (torch.logit's docs)."""
    first = next(iter(b))
    eps = b["eps"]
    form = "log(x / (1 - x))" if eps is None else \
        "log(Min(Max(x, eps), 1 - eps) / (1 - Min(Max(x, eps), 1 - eps)))"
    return _elementwise(name, Entry("x, eps", "elementwise", form), {"x": b[first], "eps": eps})


def _h_masked_fill(name: str, entry: Entry, b: dict[str, Any], ctx: _Ctx) -> Any:
    first = next(iter(b))
    return _where(b["mask"], b["value"], b[first])


def _h_tuple(name: str, entry: Entry, b: dict[str, Any], ctx: _Ctx) -> Any:
    """A function returning a tuple of elementwise results (``divmod``, ``modf``)."""
    return tuple(_elementwise(name, Entry(entry.signature, "elementwise", f), b) for f in entry.form)


def _h_cumulative(name: str, entry: Entry, b: dict[str, Any], ctx: _Ctx) -> Any:
    """A cumulative reduction along one axis: element i is the reduction of elements 0..i (reverse: i..n-1).
    torch.cummax/cummin return ``(values, indices)``."""
    first = next(iter(b))
    a = _arr(b[first], name)
    if a.ndim == 0:
        a = a.reshape(1)
    axis = _dims(b.get("dim", b.get("axis")), a.ndim, name)[0]
    moved = np.moveaxis(a, axis, -1)
    fn, n = _REDUCERS[entry.form], moved.shape[-1]
    out = np.empty(moved.shape, dtype=object)
    for idx in np.ndindex(*moved.shape[:-1]):
        row = list(moved[idx])
        for i in range(n):
            out[idx + (i,)] = fn(row[i:] if b.get("reverse") else row[: i + 1])
    values = np.moveaxis(out, -1, axis)
    return _Pair(values, _Indices(name)) if name.startswith("torch.") and entry.form != "logsumexp" else values


def _h_std(name: str, entry: Entry, b: dict[str, Any], ctx: _Ctx) -> Any:
    """Standard deviation with ``correction`` (torch; jax's ``ddof``); torch's default corrects by 1, numpy's
    by 0. ``std_mean`` returns ``(std, mean)``."""
    first = next(iter(b))
    a = _arr(b[first], name)
    if b.get("where") is not None or b.get("mean") is not None:
        raise Unmapped(name, "where=/mean= arguments")
    dim, unbiased = b.get("dim", b.get("axis")), b.get("unbiased")
    if isinstance(dim, bool):  # torch.std(input, unbiased) overload
        dim, unbiased = None, dim
    corr = b.get("correction")
    if corr is None:
        corr = b.get("ddof", 0 if unbiased is False else 1)
    corr = _static_number(corr, name)
    keep = bool(b.get("keepdim", b.get("keepdims", False)))
    dims = _dims(dim, a.ndim, name)

    def std(xs: list[Any]) -> Any:
        xs = [_numeric(x) for x in xs]
        m = sympy.Add(*xs) / len(xs)
        return sympy.sqrt(sympy.Add(*[(x - m) ** 2 for x in xs]) / (len(xs) - corr))

    out = _reduce(a, dims, keep, std)
    return (out, _reduce(a, dims, keep, _REDUCERS["mean"])) if entry.form == "std_mean" else out


def _h_select(name: str, entry: Entry, b: dict[str, Any], ctx: _Ctx) -> Any:
    return _where(b["pred"], b["on_true"], b["on_false"])


def _h_select_n(name: str, entry: Entry, b: dict[str, Any], ctx: _Ctx) -> Any:
    """``select_n(which, case0, case1)``: case1 where ``which`` is true (or 1); more than two cases unmapped."""
    cases = b["cases"]
    if len(cases) != 2:
        raise Unmapped(name, f"{len(cases)} cases (mapped: 2)")
    return _where(b["which"], cases[1], cases[0])


def _h_jnp_select(name: str, entry: Entry, b: dict[str, Any], ctx: _Ctx) -> Any:
    """``jnp.select``: the choice of the first true condition, else ``default``."""
    conds, choices = b["condlist"], b["choicelist"]
    if not isinstance(conds, (list, tuple)) or not isinstance(choices, (list, tuple)) or len(conds) != len(choices):
        raise Unmapped(name, "condlist and choicelist must be lists of one length")
    out = b["default"]
    for cond, choice in reversed(list(zip(conds, choices))):
        out = _where(cond, choice, out)
    return out


_HANDLERS: dict[str, Callable[[str, Entry, dict[str, Any], _Ctx], Any]] = {
    "where": _h_where, "where_method": _h_where_method, "asarray": _h_asarray, "torch_minmax": _h_torch_minmax,
    "argext": _h_argext, "sort": _h_sort, "msort": _h_msort, "topk": _h_topk, "kthvalue": _h_kthvalue,
    "torch_median": _h_torch_median, "jnp_median": _h_jnp_median, "quantile": _h_quantile,
    "vector_norm": _h_vector_norm, "matrix_norm": _h_matrix_norm, "linalg_norm": _h_linalg_norm,
    "torch_norm": _h_torch_norm, "dist": _h_dist, "cdist": _h_cdist, "pairwise_distance": _h_pairwise_distance,
    "logit": _h_logit, "masked_fill": _h_masked_fill, "tuple": _h_tuple, "cumulative": _h_cumulative,
    "std": _h_std, "select": _h_select, "select_n": _h_select_n, "jnp_select": _h_jnp_select,
    "loss": _h_loss, "softmax": _h_softmax, "reshape": _h_reshape, "flatten": _h_flatten, "stack": _h_stack,
    "broadcast": _h_broadcast, "tile": _h_tile, "index_put": _h_index_put, "put": _h_put,
    "index_along": _h_index_along, "scatter": _h_scatter,
    "cat": _h_stack, "squeeze": _h_squeeze, "unsqueeze": _h_unsqueeze, "transpose2": _h_transpose2,
    "swapaxes": _h_swapaxes, "matmul": _h_matmul, "vdot": _h_vdot, "max_pool": _h_max_pool,
    "adaptive_max_pool": _h_adaptive_max_pool, "reduce_window": _h_reduce_window,
}
