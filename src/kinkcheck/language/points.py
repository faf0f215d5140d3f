"""Points: the ``--at`` language of the catalog and of ``kinkcheck grad``.

:func:`parse_point` reads a catalog's point (``x=0,v=[1,2,2]``: finite numbers, nested lists for vectors and
matrices); :func:`parse_inputs` reads ``kinkcheck grad``'s, which may also hold ``inf``/``-inf``/``nan``, integer
inputs (``k=int:0``, ``idx=int:[2,0]``: never differentiated) and the differentiated names (``--wrt``). Values are
written as Python literals and parsed with :mod:`ast`, never evaluated; a value beyond float64, an input of more
than :data:`MAX_POINT_SIZE` components, a ragged list or an integer beyond int64 is refused with
:class:`~kinkcheck.language.expr.ExprError` and a one-line reason that names the input.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kinkcheck.language.expr import ExprError, _check_text, _finite_float, _short

__all__ = ["MAX_INT_INPUT", "MAX_POINT_SIZE", "Inputs", "parse_inputs", "parse_point"]


#: Most scalar components one ``--at`` input may have.
MAX_POINT_SIZE = 10_000


#: Largest magnitude of an ``int:`` input (int64).
MAX_INT_INPUT = 2 ** 63 - 1


def _split_top(text: str) -> list[str]:
    """Split ``x=0,v=[1,2]`` at commas outside brackets."""
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
            if depth < 0:
                raise ExprError(f"unbalanced brackets in {text!r}")
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth != 0:
        raise ExprError(f"unbalanced brackets in {text!r}")
    parts.append("".join(cur))
    return parts


class _Overflow(ExprError):
    """A numeric literal beyond float64 (``1e999``, a 400-digit int); the caller names the input."""


#: Names accepted as values by ``parse_point(..., allow_nonfinite=True)``.
_NONFINITE = {"inf": math.inf, "nan": math.nan}


def _literal(node: ast.expr, text: str, allow_nonfinite: bool = False, integer: bool = False, sign: str = "") -> Any:
    """A number or nested list of numbers written in ``text``; ``integer``: ints only (an ``int:`` input).
    ``-0`` is the negative zero ``-0.0`` (a point tells the sign of zero apart, as the catalog does)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        if integer and not isinstance(node.value, int):
            raise ExprError(f"an int: value must be integers, got {_short(text, 40)}")
        if not integer and not _finite_float(node.value):
            raise _Overflow()  # 1e999: not the inf a user writes as inf
        if node.value == 0 and isinstance(node.value, float):
            written = ast.get_source_segment(text, node) or ""
            if any(c in "123456789" for c in written.lower().partition("e")[0]):  # 1e-400: not the zero it became
                raise ExprError(f"{sign}{written} underflows to {sign}0 in float64: the point would be the kink at 0 itself "
                                "(the smallest float64 is about 5e-324)")
        return node.value
    if allow_nonfinite and not integer and isinstance(node, ast.Name) and node.id in _NONFINITE:
        return _NONFINITE[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        minus = isinstance(node.op, ast.USub)
        v = _literal(node.operand, text, allow_nonfinite, integer, ("-" if minus else "") if not sign else sign)
        if isinstance(v, list):
            raise ExprError(f"a sign before a list is not allowed in {text!r}")
        if minus and not integer and type(v) is int and v == 0:
            return -0.0
        return -v if minus else v
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_literal(e, text, allow_nonfinite, integer) for e in node.elts]
    if integer:
        raise ExprError(f"an int: value must be an integer or a (nested) list of integers, got {_short(text, 40)}")
    extra = ", inf, -inf or nan" if allow_nonfinite else ""
    raise ExprError(f"value must be a number or a (nested) list of numbers{extra}, got {_short(text, 40)}")


def parse_point(text: str, allow_nonfinite: bool = False) -> dict[str, Any]:
    """Parse ``--at`` text: ``x=0``, ``x=1,y=1``, ``v=[1,3,3]``, ``x=-0.0``.

    Returns a dict of input name → number or nested list (ints stay ints; the adapter casts to the dtype).
    ``allow_nonfinite`` also accepts the names ``inf`` and ``nan`` (``x=inf``, ``v=[0, -inf]``): for
    ``kinkcheck grad`` only; a catalog's point stays finite. A literal that overflows (``1e999``) is refused
    either way (write ``inf``).

    Raises
    ------
    ExprError
        On a missing ``=``, a bad name, a repeated name, or a value that is not numbers.
    """
    return dict(_parse_items(text, allow_nonfinite, ints=False)[0])


def _parse_items(text: str, allow_nonfinite: bool, ints: bool) -> tuple[dict[str, Any], tuple[str, ...]]:
    """``--at`` items → (name → value, names written ``int:``); ``ints`` accepts the ``int:`` prefix."""
    if not text or not text.strip():
        raise ExprError("--at is empty; write e.g. --at x=0 or --at x=1,y=1 or --at 'v=[1,3,3]'")
    _check_text(text, "--at")
    out: dict[str, Any] = {}
    int_names: list[str] = []
    for item in _split_top(text):
        name, eq, value = item.partition("=")
        name = name.strip()
        if not eq or not value.strip():
            raise ExprError(f"malformed --at item {item.strip()!r}: expected NAME=VALUE")
        if not name.isidentifier() or name.startswith("_"):
            raise ExprError(f"malformed --at item {item.strip()!r}: {name!r} is not an input name")
        if name in out:
            raise ExprError(f"input {name!r} given twice in --at")
        value = value.strip()
        integer = ints and value.startswith("int:")
        if integer:
            value = value[len("int:"):].strip()
            int_names.append(name)
        try:
            tree = ast.parse(value, mode="eval")
        except SyntaxError as err:
            if "Exceeds the limit" in str(err.msg):  # an integer of more than 4300 digits
                raise ExprError(f"value for {name!r} is not a finite float64 number "
                                f"({_short(value, 40)})") from None
            raise ExprError(f"malformed value for {name!r}: {_short(value, 40)}") from None
        except RecursionError:
            raise ExprError(f"value for {name!r} is nested too deeply") from None
        hint = "write inf or -inf for an infinite point" if allow_nonfinite else "a point must be finite"
        try:
            val = _literal(tree.body, value, allow_nonfinite, integer)
        except RecursionError:
            raise ExprError(f"value for {name!r} is nested too deeply") from None
        except _Overflow:
            raise ExprError(f"value for {name!r} is not a finite float64 number ({_short(value, 40)}); {hint}") \
                from None
        _check_rectangular(val, name)
        flat = _flat(val)
        if len(flat) > MAX_POINT_SIZE:
            raise ExprError(f"value for {name!r} has {len(flat)} numbers; at most {MAX_POINT_SIZE}")
        if integer and not all(abs(v) <= MAX_INT_INPUT for v in flat):
            raise ExprError(f"int: value for {name!r} does not fit in int64 ({_short(value, 40)})")
        out[name] = val
    return out, tuple(int_names)


@dataclass(frozen=True)
class Inputs:
    """The inputs of ``kinkcheck grad``: where, which are differentiated, which are integers.

    Attributes
    ----------
    at : dict
        Input name → number or nested list, in the order written (floats may be ``inf``/``nan``; an
        ``int:`` input's values are Python ints).
    wrt : tuple of str
        The differentiated inputs, in ``at``'s order; every other input is a constant: a float input a
        tensor/array of the dtype, an ``int:`` input an integer one (int64; int32 in JAX without x64).
    ints : tuple of str
        The inputs written ``int:`` (never differentiated).
    """

    at: dict[str, Any]
    wrt: tuple[str, ...]
    ints: tuple[str, ...] = ()

    @property
    def constants(self) -> tuple[str, ...]:
        """The inputs that are not differentiated (``int:`` ones and those left out of ``--wrt``), in order."""
        return tuple(k for k in self.at if k not in self.wrt)


def parse_inputs(text: str, wrt: str | Iterable[str] | None = None) -> Inputs:
    """Parse ``kinkcheck grad``'s ``--at`` (and ``--wrt``) into :class:`Inputs`.

    ``--at`` is :func:`parse_point`'s syntax, plus ``inf``, ``-inf`` and ``nan`` as values (``x=inf``,
    ``v=[0,nan]``) and ``int:`` before an integer input's value (``k=int:0``, ``n=int:[1,2]``), which is
    passed as an integer tensor/array and never differentiated. ``wrt`` names the differentiated inputs
    (``"x"``, ``"x,y"`` or an iterable of names); None differentiates every input not written ``int:``.

    Raises
    ------
    ExprError
        Everything :func:`parse_point` refuses; an ``int:`` value that is not integers or beyond int64; a
        ``--wrt`` name that ``--at`` does not give, that is an ``int:`` input, or given twice; nothing left
        to differentiate.
    """
    at, ints = _parse_items(text, allow_nonfinite=True, ints=True)
    if wrt is None:
        names = [k for k in at if k not in ints]
        if not names:
            raise ExprError("every --at input is int: (never differentiated); give a float input to differentiate")
        return Inputs(at, tuple(names), ints)
    if isinstance(wrt, str):
        _check_text(wrt, "--wrt")
        wanted = [w.strip() for w in wrt.split(",")]
    else:
        wanted = [str(w).strip() for w in wrt]
    if not wanted or any(not w for w in wanted):
        raise ExprError(f"--wrt {_short(wrt if isinstance(wrt, str) else ','.join(wanted), 40)}: "
                        "expected input names separated by commas, e.g. --wrt x or --wrt x,y")
    for w in wanted:
        if w not in at:
            raise ExprError(f"--wrt names {w!r}, which --at does not give (inputs: {', '.join(at)})")
        if w in ints:
            raise ExprError(f"--wrt names {w!r}, an int: input; integer inputs are never differentiated")
        if wanted.count(w) > 1:
            raise ExprError(f"--wrt names {w!r} twice")
    return Inputs(at, tuple(k for k in at if k in wanted), ints)


def _flat(val: Any) -> list[int | float]:
    if isinstance(val, list):
        return [x for v in val for x in _flat(v)]
    return [val]


def _check_rectangular(val: Any, name: str) -> None:
    if isinstance(val, list):
        if not val:
            raise ExprError(f"input {name!r} is an empty list")
        shapes = {_shape(v) for v in val}
        if len(shapes) != 1:
            raise ExprError(f"input {name!r} is a ragged list")


def _shape(val: Any) -> tuple[int, ...]:
    if isinstance(val, list):
        inner = {_shape(v) for v in val}
        if len(inner) != 1:
            raise ExprError("ragged nested list")
        return (len(val), *inner.pop())
    return ()
