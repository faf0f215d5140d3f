"""The mapping's handlers: framework functions that are neither elementwise nor a plain reduction.

A row of the mapping (:mod:`kinkcheck.oracles.rows`) whose kind is not ``"elementwise"`` or ``"reduce"`` names a
handler in :data:`_HANDLERS`: order statistics (sort, top-k, k-th value, median, quantile), norms and distances,
losses, softmax, standard deviation, cumulative reductions, reshaping and broadcasting, writes by index
(``index_put``, ``scatter``, ``put``, ``.at[]``), stacking, pooling windows, selects. Each takes the function's
name, its row, its bound arguments and the evaluation context, and returns a value of
:mod:`kinkcheck.oracles.values`, or raises :class:`~kinkcheck.oracles.values.Unmapped` with the reason.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import sympy

from kinkcheck.oracles.rows import Entry
from kinkcheck.oracles.values import (
    _REDUCERS, Unmapped, _Arg, _arr, _binop, _Ctx, _describe, _dims, _elementwise, _Fn, _Indices, _kth, _matmul,
    _numeric, _obj, _OrderStat, _Pair, _positions, _reduce, _scalar, _static_index, _static_int, _static_ints,
    _static_number, _tensorish, _vec, _where, _write,
)


def _h_where(name: str, entry: Entry, b: dict[str, Any], ctx: _Ctx) -> np.ndarray:
    keys = list(b)
    cond, x, y = b[keys[0]], b[keys[1]], b[keys[2]]
    if x is None or y is None:
        raise Unmapped(name, "the one-argument form (indices)")
    return _where(cond, x, y)


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
    if "direction" in b:  # tf.sort(values, axis=-1, direction='ASCENDING')
        if b["direction"] not in ("ASCENDING", "DESCENDING"):
            raise Unmapped(name, f"direction={b['direction']!r}")
        desc = b["direction"] == "DESCENDING"
    vals = _order_stats(a, dim, False, lambda n: list(range(n, 0, -1)) if desc else list(range(1, n + 1)), name)
    return _Pair(vals, _Indices(name)) if entry.form == "pair" else vals


def _h_msort(name: str, entry: Entry, b: dict[str, Any], ctx: _Ctx) -> Any:
    return _order_stats(_arr(next(iter(b.values())), name), 0, False, lambda n: list(range(1, n + 1)), name)


def _h_topk(name: str, entry: Entry, b: dict[str, Any], ctx: _Ctx) -> Any:
    keys = list(b)
    a = _arr(b[keys[0]], name)
    k = _static_int(b["k"], name)
    dim = b.get("dim", b.get("axis", -1))
    dim = -1 if dim is None else dim  # paddle.topk: axis=None is the last axis
    largest = bool(b.get("largest", True))
    n = (a.shape[_dims(dim, a.ndim, name)[0]] if a.ndim else 1)
    if not 0 <= k <= n:
        raise Unmapped(name, f"k={k} is out of range for {n} elements")
    vals = _order_stats(a, dim, False, lambda m: list(range(m, m - k, -1)) if largest else list(range(1, k + 1)), name)
    return _Pair(vals, _Indices(name))


def _h_kthvalue(name: str, entry: Entry, b: dict[str, Any], ctx: _Ctx) -> Any:
    a = _arr(next(iter(b.values())), name)
    k = _static_int(b["k"], name)
    dim = b["dim"] if "dim" in b else b["axis"]
    dim = -1 if dim is None else dim  # paddle.kthvalue: axis=None is the last axis
    vals = _order_stats(a, dim, False, lambda n: [k] if 1 <= k <= n else _bad_k(name, k, n), name)
    vals = np.take(vals, 0, axis=_dims(dim, max(a.ndim, 1), name)[0])
    vals = vals if isinstance(vals, np.ndarray) else _obj((), [vals])
    if b["keepdim"]:
        vals = np.expand_dims(vals, _dims(dim, max(a.ndim, 1), name)[0])
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


def _h_paddle_median(name: str, entry: Entry, b: dict[str, Any], ctx: _Ctx) -> Any:
    """``paddle.median(x, axis=None, keepdim=False, mode='avg')``: of an even count the mean of the two middle
    values (``'avg'``) or the lower (``'min'``); ``'min'`` with an axis returns ``(values, indices)``."""
    a = _arr(b["x"], name)
    if b["mode"] not in ("avg", "min") or isinstance(b["axis"], (tuple, list)):
        raise Unmapped(name, f"mode={b['mode']!r}, axis={b['axis']!r} (mapped: 'avg' or 'min', one axis or None)")
    vals = _median_values(a, b["axis"], bool(b["keepdim"]), name, lower=b["mode"] == "min")
    return _Pair(vals, _Indices(name)) if b["mode"] == "min" and b["axis"] is not None else vals


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
    a = _arr(next(iter(b.values())), name)
    dim = b.get("dim", b.get("axis"))
    # paddle.linalg.vector_norm(x, p=2.0); tf.math.reduce_euclidean_norm has no order: the 2-norm
    ord_ = b["ord"] if "ord" in b else b.get("p", 2)
    return _vector_norm(a, _ord(ord_, name), dim, bool(b.get("keepdim", b.get("keepdims"))), name)


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
    dims = b.get("dim", b.get("axis", (-2, -1)))
    ord_ = b["ord"] if "ord" in b else b["p"]  # paddle.linalg.matrix_norm(x, p='fro', axis=[-2, -1])
    return _matrix_norm(_arr(b[first], name), _ord(ord_, name),
                        tuple(_static_ints(dims, name)),  # type: ignore[arg-type]
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


def _h_axis_norm(name: str, entry: Entry, b: dict[str, Any], ctx: _Ctx) -> Any:
    """``paddle.linalg.norm(x, p=None, axis=None)`` / ``tf.norm(tensor, ord='euclidean', axis=None)``: no axis is
    one vector norm of every element (the input read as a flat vector, whatever its shape); an int axis (or a
    one-element list) vector norms along it; two axes matrix norms. ``p=None`` (paddle) and ``ord='euclidean'``
    (tf) are the 2-norm of a vector and the Frobenius norm of a matrix; a string order for a vector is unmapped
    (both document 'fro' and 'nuc' as matrix norms only)."""
    first = next(iter(b))
    a = _arr(b[first], name)
    p = b["p"] if "p" in b else b["ord"]
    keep = bool(b["keepdim"] if "keepdim" in b else b["keepdims"])
    euclidean = p is None or p == "euclidean"
    dims = None if b["axis"] is None else _static_ints(b["axis"], name)
    if dims is not None and len(dims) == 2:
        ord_ = "fro" if euclidean else _ord(p, name)
        return _matrix_norm(a, ord_, dims, keep, name)  # type: ignore[arg-type]
    if dims is not None and len(dims) != 1:
        raise Unmapped(name, f"axis={b['axis']!r} (mapped: None, one axis or two)")
    if isinstance(p, str) and not euclidean:
        raise Unmapped(name, f"ord={p!r} for a vector norm")
    return _vector_norm(a, sympy.Integer(2) if euclidean else _ord(p, name), dims, keep, name)


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
    if "args" in b:  # tinygrad's Tensor.stack(self, *args, dim=0): self is the first tensor
        items = [items, *b["args"]]
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
    "torch_median": _h_torch_median, "jnp_median": _h_jnp_median, "paddle_median": _h_paddle_median,
    "axis_norm": _h_axis_norm, "quantile": _h_quantile,
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
