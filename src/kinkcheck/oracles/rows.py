"""The rows of the sympy mapping (:data:`kinkcheck.oracles.mapping.TABLE`): the :class:`Entry` record, its
constructors and the forms several frameworks' rows share. A leaf (standard library only): each framework's folder
writes its rows with it (``frameworks/<name>/mapping.py``, a ``table()``), and the mapping reads them."""

from __future__ import annotations

import ast
import importlib.util
import inspect
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from kinkcheck.registry import REGISTRY

__all__ = ["BINARY", "FMOD", "GELU_ERF", "GELU_TANH", "HARDSIGMOID", "I0E", "RELU6", "REMAINDER", "ROUND", "SELU", "SIGMOID",
           "SINC", "SOFTPLUS", "UNARY", "XLOG1PY", "XLOGY", "Entry", "constants", "e", "h", "r", "rename",
           "source_files"]


@dataclass(frozen=True)
class Entry:
    """One row of :data:`kinkcheck.oracles.mapping.TABLE`.

    Attributes
    ----------
    signature : str
        The framework's parameter list in Python syntax with its defaults (``"input, min=None, max=None"``);
        ``/`` and ``*`` as in Python.
    kind : str
        ``"elementwise"``, ``"reduce"`` or a handler name (see the module docstring).
    form : str or dict or None
        Elementwise: a scalar form over the parameter names, or ``{"param": p, value: form, …}`` chosen by a
        static argument. Reduce: the reduction's name. Handlers: an option they read.
    """

    signature: str
    kind: str
    form: Any = None

    @property
    def parameters(self) -> inspect.Signature:
        return _signature(self.signature)


def e(signature: str, form: Any) -> Entry:
    return Entry(signature, "elementwise", form)


def r(signature: str, form: str) -> Entry:
    return Entry(signature, "reduce", form)


def h(signature: str, kind: str, form: Any = None) -> Entry:
    return Entry(signature, kind, form)


# Shared forms (the sympy language of the catalog's ``sympy`` fields; parameter names as in the signature).
RELU6 = "Min(Max(x, 0), 6)"
HARDSIGMOID = "Min(Max(x + 3, 0), 6) / 6"
SELU = ("1.0507009873554804934193349852946 * (Max(x, 0) + Min(0, 1.6732632423543772848170429916717"
         " * (exp(x) - 1)))")
GELU_ERF = "x / 2 * (1 + erf(x / sqrt(2)))"
GELU_TANH = "x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x ** 3)))"
SIGMOID = "1 / (1 + exp(-x))"
SOFTPLUS = "log(1 + exp(x))"
# torch.round / jax.numpy.round: half to even (x + 1/2 an odd integer rounds down).
ROUND = "Piecewise((floor(x + 0.5) - 1, Eq(Mod(x + 0.5, 2), 1)), (floor(x + 0.5), True))"
XLOGY = "xlogy(x, y)"  # symbolic.xlogy: Piecewise((0, Eq(x, 0)), (x*log(y), True))
XLOG1PY = "xlog1py(x, y)"
SINC = "Piecewise((1, Eq(x, 0)), (sin(pi * x) / (pi * x), True))"
REMAINDER = "x - y * floor(x / y)"  # Python's sign-of-divisor remainder (torch %, jnp.remainder)
FMOD = "x - y * Piecewise((floor(x / y), x / y >= 0), (ceiling(x / y), True))"
I0E = "exp(-Abs(x)) * besseli(0, x)"  # the exponentially scaled modified Bessel function of order 0: a kink at 0

#: Elementwise functions of one input shared by both frameworks' spellings: short name → form over ``x``.
UNARY: dict[str, str] = {
    "abs": "Abs(x)", "sqrt": "sqrt(x)", "rsqrt": "1 / sqrt(x)", "exp": "exp(x)", "exp2": "2 ** x",
    "expm1": "exp(x) - 1", "log": "log(x)", "log2": "log(x) / log(2)", "log10": "log(x) / log(10)",
    "log1p": "log(1 + x)", "sign": "sign(x)", "floor": "floor(x)", "ceil": "ceiling(x)",
    "trunc": "trunc(x)", "round": ROUND, "square": "x ** 2", "reciprocal": "1 / x",
    "negative": "-x", "positive": "x", "sigmoid": SIGMOID, "tanh": "tanh(x)", "sin": "sin(x)", "cos": "cos(x)",
    "tan": "tan(x)", "arcsin": "asin(x)", "arccos": "acos(x)", "arctan": "atan(x)", "sinh": "sinh(x)",
    "cosh": "cosh(x)", "arcsinh": "asinh(x)", "arccosh": "acosh(x)", "arctanh": "atanh(x)", "erf": "erf(x)",
    "erfc": "erfc(x)", "sinc": SINC, "relu": "Max(x, 0)", "heaviside0": "Heaviside(x)",
}

BINARY: dict[str, str] = {
    "maximum": "Max(x, y)", "minimum": "Min(x, y)", "atan2": "atan2(x, y)", "xlogy": XLOGY,
    "xlog1py": XLOG1PY, "pow": "x ** y", "hypot": "sqrt(x ** 2 + y ** 2)", "remainder": REMAINDER,
    "fmod": FMOD, "add": "x + y", "sub": "x - y", "mul": "x * y", "div": "x / y", "logaddexp": "log(exp(x) + exp(y))",
    "copysign": "Abs(x) * Piecewise((1, y >= 0), (-1, True))", "heaviside": "Piecewise((0, x < 0), (y, Eq(x, 0)), (1, True))",
}


def rename(form: str, names: Mapping[str, str]) -> str:
    """``form`` with its parameter names renamed, whole words only (``exp`` keeps its ``x``); the text of every
    literal is kept (selu's 31-digit constants must stay exact)."""
    return re.sub(r"\b[A-Za-z_]\w*\b", lambda mo: names.get(mo.group(0), mo.group(0)), form)



@cache
def _signature(text: str) -> inspect.Signature:
    """``inspect.Signature`` of a parameter list written in Python syntax (defaults are literals)."""
    fn = ast.parse(f"def f({text}): pass").body[0]
    a = fn.args  # type: ignore[attr-defined]
    params: list[inspect.Parameter] = []
    positional = [*a.posonlyargs, *a.args]
    defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    for i, (arg, d) in enumerate(zip(positional, defaults)):
        kind = inspect.Parameter.POSITIONAL_ONLY if i < len(a.posonlyargs) else inspect.Parameter.POSITIONAL_OR_KEYWORD
        default = inspect.Parameter.empty if d is None else ast.literal_eval(d)
        params.append(inspect.Parameter(arg.arg, kind, default=default))
    if a.vararg is not None:
        params.append(inspect.Parameter(a.vararg.arg, inspect.Parameter.VAR_POSITIONAL))
    for arg, d in zip(a.kwonlyargs, a.kw_defaults):
        default = inspect.Parameter.empty if d is None else ast.literal_eval(d)
        params.append(inspect.Parameter(arg.arg, inspect.Parameter.KEYWORD_ONLY, default=default))
    return inspect.Signature(params)


#: The numbers a NumPy-like namespace names (``torch.inf``, ``jax.numpy.pi``), as sympy text.
_NUMBERS = {"inf": "oo", "pi": "pi", "e": "E", "nan": "nan"}
#: The dtypes a program may name as an argument (``dtype=torch.float64``).
_DTYPE_NAMES = ("float64", "float32", "float16", "bfloat16", "double", "float", "int64", "int32")


def constants(root: str) -> dict[str, str]:
    """The constants of namespace ``root`` a program may name: its numbers (sympy text: ``"oo"``, ``"pi"``) and its
    dtypes (``"dtype:float64"``); a framework folder's ``CONSTANTS``."""
    return {**{f"{root}.{n}": v for n, v in _NUMBERS.items()},
            **{f"{root}.{dt}": f"dtype:{dt}" for dt in _DTYPE_NAMES}}


#: The mapping's own modules, besides the framework folders' rows.
_OWN_SOURCES = ("mapping.py", "values.py", "handlers.py", "rows.py")


def source_files() -> tuple[Path, ...]:
    """The files the mapping's meaning is read from: its own modules and every registered framework's rows
    (``frameworks/<name>/mapping.py``). A cache of what the mapping gave keys on their bytes
    (:mod:`kinkcheck.answers.explain.judgement`), so a changed row recomputes it. Here, beside the rows' form, so that
    reading the key imports neither the mapping nor sympy."""
    here = Path(__file__).parent
    rows = [importlib.util.find_spec(f"{record.adapter}.mapping") for record in REGISTRY.values()]
    return (*(here / name for name in _OWN_SOURCES), *(Path(spec.origin) for spec in rows if spec and spec.origin))
