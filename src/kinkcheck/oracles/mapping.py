"""Programs map to their mathematics: a framework call expression as a sympy expression.

:func:`sympy_form` walks a parsed program (:func:`kinkcheck.language.expr.parse`) over numpy object arrays of sympy
expressions, one element per tensor element, and returns the sum of the output's elements: the framework's
gradient of a non-scalar output is the vector-Jacobian product with ones, which is the gradient of that
sum. The oracle (:func:`kinkcheck.oracles.symbolic.analyze_expression`) then judges the result, so any
program built from mapped functions has an oracle without a hand-written ``sympy`` field.

What each framework function means is one table, :data:`TABLE`, gathered from the framework folders' rows
(``frameworks/<name>/mapping.py``, written with :mod:`kinkcheck.oracles.rows`): canonical dotted name (``torch.clamp``,
``torch.nn.functional.relu``, ``jax.numpy.clip``; a tensor method as ``torch.Tensor.clamp`` /
``jax.Array.max`` / ``tinygrad.Tensor.clip``, :data:`METHOD_PREFIXES`) → :class:`Entry` (the framework's
signature, with its defaults, so positional and keyword spellings bind alike; a kind; a form). Kinds:

* ``"elementwise"``: the form is a scalar expression over the parameter names in the sympy language of the
  catalog's ``sympy`` fields (``"Min(Max(input, min), max)"``), evaluated per element after broadcasting
  the tensor arguments. ``Max``/``Min`` there drop ``None`` arguments (an absent clamp bound is no bound).
  A form may depend on a string/bool argument: ``{"param": "approximate", "none": "…", "tanh": "…"}``.
* ``"reduce"``: the form names a reduction of a list of elements (``sum``, ``mean``, ``max``…), applied over
  every element or the ``dim``/``axis`` argument, with ``keepdim``/``keepdims``.
* any other kind names a handler in :data:`kinkcheck.oracles.handlers._HANDLERS` (norms, sort/top-k, pooling, distances, reshaping).

Sources of the semantics: each framework's documentation of the function (torch.nn.functional, torch,
torch.linalg; jax.nn, jax.numpy, jax.lax), e.g. ``torch.median`` returns the lower of the two middle values
and ``jax.numpy.median`` their mean; ``torch.round``/``jax.numpy.round`` round half to even;
``torch.nn.functional.softplus`` reverts to the identity where ``beta * x > threshold``;
``jax.nn.gelu`` defaults to the tanh approximation; ``torch.nn.functional.pairwise_distance`` adds ``eps``
to the difference. Ties among elements (``max``, ``sort``) take the value, which ties do not change.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, localcontext
from typing import Any

import numpy as np
import sympy
from sympy.printing.precedence import precedence
from sympy.printing.str import StrPrinter

from kinkcheck.language import expr as ex
from kinkcheck.oracles.handlers import _HANDLERS
from kinkcheck.oracles.rows import Entry
from kinkcheck.oracles.values import (_REDUCERS, MAX_ELEMENTS, Unmapped, _Arg, _arr, _At, _AtIndex, _binop, _Ctx,
                                      _Decomposition, _describe, _dims, _elementwise, _exact_number, _Factor, _Fn,
                                      _Indices, _is_bool, _numeric, _obj, _Pair, _positions, _reduce, _static_index,
                                      _static_int, _tensorish, _vec, _write)
from kinkcheck.registry import REGISTRY

__all__ = ["CONSTANTS", "TABLE", "Entry", "SympyForm", "Unmapped", "call_form", "mapped_names", "sympy_form"]


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


def _framework_rows() -> list[Any]:
    """Every registered framework's rows module (``frameworks/<name>/mapping.py``), report order; a framework
    without one has no rows (its programs are unmapped)."""
    out = []
    for record in REGISTRY.values():
        try:
            out.append(importlib.import_module(f"{record.adapter}.mapping"))
        except ModuleNotFoundError as e:
            if e.name != f"{record.adapter}.mapping":  # the rows' module exists and imports something missing
                raise
    return out


_ROWS = _framework_rows()

#: Canonical dotted name → :class:`Entry`: the one table of what each mapped function computes, written in the
#: framework folders (``frameworks/<name>/mapping.py``: ``table()``).
TABLE: dict[str, Entry] = {k: v for m in _ROWS if hasattr(m, "table") for k, v in m.table().items()}

#: Constants a program may name (``torch.inf``, ``jax.numpy.pi``, ``torch.float64``): a framework folder's
#: ``CONSTANTS`` (:func:`kinkcheck.oracles.rows.constants`), sympy text or ``"dtype:<name>"``.
CONSTANTS: dict[str, Any] = {k: v if v.startswith("dtype:") else sympy.sympify(v)
                             for m in _ROWS for k, v in getattr(m, "CONSTANTS", {}).items()}

#: NumPy clones: a prefix whose functions compute what another namespace's of the same name do, so that
#: namespace's rows describe them (a framework folder's ``CLONES``: ``autograd.numpy.`` → ``jax.numpy.``). A name
#: the table lacks (``pt.switch``) stays unmapped.
NUMPY_CLONES: dict[str, str] = {k: v for m in _ROWS for k, v in getattr(m, "CLONES", {}).items()}

#: Framework → the prefix its tensor methods' rows are named under (a framework folder's ``METHODS``:
#: ``{"tinygrad": "tinygrad.Tensor"}``), so ``x.clip(0)`` in a tinygrad program reads the row
#: ``tinygrad.Tensor.clip``. torch's and jax's are ``torch.Tensor`` and ``jax.Array``.
METHOD_PREFIXES: dict[str, str] = {k: v for m in _ROWS for k, v in getattr(m, "METHODS", {}).items()}

#: Decompositions whose factors map only in a reconstruction of the matrix (``U diag(S) V^T``, ``Q diag(L) Q^T``):
#: name -> (kind, the names of the returned factors in order, with None for one no reconstruction uses); a
#: framework folder's ``DECOMPOSITIONS``. A singular vector or eigenvector alone has no form (at a repeated value it
#: is no function of the matrix).
DECOMPOSITIONS: dict[str, tuple[str, tuple[str, ...]]] = {
    k: v for m in _ROWS for k, v in getattr(m, "DECOMPOSITIONS", {}).items()}


def mapped_names() -> tuple[str, ...]:
    """Every function and method name :data:`TABLE` maps, sorted."""
    return tuple(sorted(TABLE))


# --------------------------------------------------------------------------- signatures and forms


# --------------------------------------------------------------------------- values


# --------------------------------------------------------------------------- the walk


def sympy_form(tree: ex.Node, at: Mapping[str, Any], framework: str, *, wrt: Sequence[str] | None = None,
               site_hook: Any = None) -> SympyForm:
    """The sympy expression a framework program computes, at a point.

    Parameters
    ----------
    tree : kinkcheck.language.expr.Node
        A parsed program (``kinkcheck.language.expr.parse(text, at, {framework})``; a catalog program's ``.tree``).
    at : mapping
        Input name → number or nested list of numbers (``inf``/``-inf``/``nan`` allowed).
    framework : str
        ``"torch"`` or ``"jax"``: which table rows a method (``x.max()``) and operators use.
    wrt : sequence of str, optional
        Differentiated inputs (default: all). The others, and their elements, become exact constants.
    site_hook : callable, optional
        Called in place of each mapped call as ``site_hook(name, args, kwargs, ctx)`` (the call's canonical name,
        its evaluated arguments); it returns the call's value. :mod:`kinkcheck.rules.graph` cuts a program at its
        calls with it. Default: each call's form is computed in place.

    Returns
    -------
    SympyForm

    Raises
    ------
    Unmapped
        A function, method, argument value or construct without a symbolic form here (one-line reason naming
        it canonically, e.g. ``no symbolic form for torch.nn.functional.glu (pass one with --sympy '…')``).
    kinkcheck.language.expr.ExprError
        When ``wrt`` names an input that is not in ``at``.
    """
    names = tuple(at) if wrt is None else tuple(wrt)
    unknown = [n for n in names if n not in at]
    if unknown:
        raise ex.ExprError(f"--wrt names {', '.join(map(repr, unknown))}, not an input (inputs: {', '.join(at)})")
    syms: list[sympy.Symbol] = []
    vals: list[sympy.Expr] = []
    ctx = _Ctx(framework, site_hook=site_hook)
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
    """The table name of a tensor method: ``torch.Tensor.max``, ``jax.Array.max``, ``tinygrad.Tensor.clip``
    (:data:`METHOD_PREFIXES`). torch's and jax's methods are named so whether or not the table maps them (their
    census lists every method); another framework's method maps only where its rows name it, with that
    framework's own documented signature, and any other is ``<framework> tensor method .<name>`` (its semantics
    are its own, not torch's method of the same name)."""
    prefix = METHOD_PREFIXES.get(framework)
    if prefix is None:
        raise Unmapped(f"{framework} tensor method .{method}")
    name = f"{prefix}.{method}"
    if framework not in ("torch", "jax") and name not in TABLE:
        raise Unmapped(f"{framework} tensor method .{method}")
    return name


def _table_name(dotted: str) -> str:
    """``dotted`` with a NumPy-clone prefix (:data:`NUMPY_CLONES`) read as ``jax.numpy.``'s, unless the clone's own
    rows name it (``pytensor.tensor.switch``, which NumPy lacks)."""
    if dotted in TABLE or dotted in CONSTANTS:
        return dotted
    for prefix, same in NUMPY_CLONES.items():
        if dotted.startswith(prefix):
            return same + dotted[len(prefix):]
    return dotted


_TRANSPOSED = {"V": "Vh", "Q": "Qt"}


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
        if ctx.site_hook is None:
            return _call(name, args, kwargs, ctx)
        ctx.spelled = n.func.dotted if isinstance(n.func, ex.Name) else name  # the program's own name of the call
        return ctx.site_hook(name, args, kwargs, ctx)
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


_REL = {">": sympy.Gt, ">=": sympy.Ge, "<": sympy.Lt, "<=": sympy.Le, "==": sympy.Eq, "!=": sympy.Ne}


def _compare(op: str, a: Any, b: Any) -> np.ndarray:
    rel = _REL[op]
    return _vec(lambda x, y: rel(_numeric(x), _numeric(y)), _arr(a), _arr(b))


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


def call_form(name: str, args: list[Any], kwargs: dict[str, Any], ctx: _Ctx) -> Any:
    """The value of one mapped call (``name`` in :data:`TABLE`) on evaluated arguments: what a ``site_hook`` of
    :func:`sympy_form` computes in the call's place."""
    return _call(name, args, kwargs, ctx)


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


