"""The call-expression language: parsed with :mod:`ast`, never ``eval``-ed.

One small language serves the catalog, ``kinkcheck grad`` and the report. An expression is

* a dotted name rooted in a namespace (``torch.nn.functional.relu``, ``jax.numpy.maximum``; the aliases
  ``jnp`` = ``jax.numpy``, ``F`` = ``torch.nn.functional`` and ``lax`` = ``jax.lax`` are accepted);
* a declared input (``x``, ``v``) or a numeric literal (``0``, ``-0.0``, ``1e-3``), ``True``/``False``, ``None``,
  ``...`` (``v[None]``, ``m[..., 0]``);
* a string literal, only as a call's argument (``approximate='tanh'``, ``reduction='sum'``, ``ord='nuc'``,
  ``jnp.linalg.norm(A, 'nuc')``): at most :data:`MAX_STRING` characters of :data:`STRING_CHARS` (no ``/``,
  quotes, backslashes), never an operand, an index, a list item, a called object or an attribute's owner;
* a list or tuple of expressions;
* a call with positional and keyword arguments (``torch.clamp(x, min=0)``), or a method call on a value
  (``x.clamp(min=0)``, ``x.pow(2).sum().sqrt()``);
* a public attribute of a value (``torch.max(x, dim=0).values``) or a subscript (``x[x.argmax()]``, ``v[0]``);
* arithmetic (``+ - * / // % **``), unary (``- + not``) and comparison operators, including chains.

Anything else is refused with :class:`ExprError` and a one-line reason *before* anything runs: string
literals outside a call's arguments, lambdas, comprehensions, starred arguments, names that are
neither inputs nor in the namespace, and any attribute that starts with an underscore (dunders, private
modules). Names are also refused by kind (:data:`DENIED`, :data:`DENIED_KINDS`, :data:`DENIED_ORIGINS`):
I/O and processes, loaders and savers, compilers and tracers (``torch.compile``, ``torch.CompilationUnit``,
``jax.jit``), setters of global state (``torch.set_grad_enabled``, ``torch.manual_seed``), configuration
objects, callbacks and ops registration, so that one evaluation cannot change the next one's results.
Numbers are float64-sized: a literal, a ``--at`` value or an integer constant computed in the expression
(``10 ** 10 ** 10``) beyond the float64 range is refused rather than computed for minutes.

Evaluation (:func:`evaluate`) walks the parsed tree. Names are resolved with ``getattr`` one public segment
at a time; every dotted name in the tree is resolved *before* the first call, so a misspelt name fails
without executing anything. Resolution is an allowlist, not only a denylist: every module met on a dotted
path must be one of the namespace's modules (``torch.nn.functional`` yes, ``torch.os`` no), and the object
a name ends at must come from the framework itself (its ``__module__``), so re-exported helpers such as
``os``, ``sys`` or ``builtins`` are out of reach. While evaluating, a string, bytes or module value that a
call, attribute or index *produces* is refused wherever it appears, so no path or command can be assembled
from pieces; the only strings a function ever receives are the literals written as its arguments, and the
functions that load, import or look names up by a string are refused by name and kind.

A callable passed as a value (``jax.lax.reduce_window(v, -jnp.inf, lax.max, ...)``, or
``jax.lax.while_loop(jnp.isfinite, jnp.abs, x)``, which never ends) is an allowed, resolved name like any
other: ``kinkcheck grad`` runs every evaluation in :mod:`kinkcheck.probe.worker`'s worker, under a time and a
memory limit, so such a loop ends with a one-line error.

Points (``--at``) are read by :mod:`kinkcheck.language.points`.
"""

from __future__ import annotations

import ast
import importlib
import math
import operator
import types
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kinkcheck import registry

__all__ = [
    "ALIASES",
    "DENIED",
    "DENIED_KINDS",
    "DENIED_ORIGINS",
    "MAX_STRING",
    "STRING_CHARS",
    "Attr",
    "BinOp",
    "Call",
    "Compare",
    "Const",
    "ExprError",
    "Index",
    "Input",
    "Name",
    "NameMissing",
    "Node",
    "Seq",
    "Unary",
    "evaluate",
    "exempt_prefixes",
    "parse",
    "program_key",
    "pure_setters",
    "refused_kind",
    "resolve_names",
    "same_program",
]


class ExprError(ValueError):
    """A call expression or point that kinkcheck refuses; ``str(err)`` is a one-line reason."""


class NameMissing(ExprError):
    """A dotted name that does not exist in the installed framework (``torch.func`` before 2.0)."""


#: Longest expression accepted (characters); deeper or longer input is refused, not recursed into.
MAX_LENGTH = 2000

#: Deepest nesting accepted (operators, calls, attributes); keeps evaluation far from Python's recursion limit.
MAX_DEPTH = 100


#: Longest string literal accepted (characters): keyword values like ``'tanh'``, ``'nuc'``, einsum equations.
MAX_STRING = 64

#: Characters a string literal may contain: enough for keyword values (``'sum'``, ``'fro'``), einsum equations
#: (``'ij,jk->ik'``, ``'...i->...'``) and devices (``'cuda:0'``); no ``/``, backslash, quotes, ``$``, ``;``,
#: ``|`` or control characters, so no path or shell command can be written even where a string is allowed.
STRING_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_,.:-> ")


class _Aliases(Mapping[str, str]):
    """Every registered framework's ``aliases``, read from the registry on each access."""

    def __getitem__(self, alias: str) -> str:
        return registry.aliases()[alias]

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(registry.aliases())

    def __len__(self) -> int:
        return len(registry.aliases())


#: Short names users write, mapped to the dotted path they stand for: every registered framework's
#: ``aliases`` (``jnp`` = ``jax.numpy``, ``F`` = ``torch.nn.functional``, ``tf`` = ``tensorflow``).
ALIASES: Mapping[str, str] = _Aliases()

#: Name segments refused anywhere in a dotted name, attribute or keyword, by exact name.
DENIED = frozenset(
    {
        "load", "save", "hub", "utils", "distributed", "multiprocessing", "package", "jit_load",
        "compile", "export", "onnx", "profiler", "library", "ops", "classes", "serialization",
        "experimental", "debug", "config", "pure_callback", "io_callback", "callback",
        "tofile", "fromfile", "from_file", "memmap", "frombuffer", "storage", "untyped_storage", "dump", "dumps",
        "system", "popen", "exec", "eval",
        "jit", "fx", "seed", "cpp_extension", "backends", "monitoring", "empty_cache", "default_generator",
        "normal",  # torch.normal draws from the RNG; normalize is deterministic and stays
    }
)

#: Refused kinds of names: (kind, prefixes, substrings), matched on the lower-cased segment. A kind, not a
#: list of today's names: a framework release that adds ``torch.set_foo`` or ``jax.foo_callback`` is refused
#: without a change here. Every catalog program still resolves (tests/language/test_expr.py checks it).
DENIED_KINDS: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("it changes global state (a setter, seed, hook registration or cache reset)",
     ("set_", "use_", "enable_", "disable_", "clear_", "reset_", "register", "manual_seed", "seed_", "init_",
      "autocast_", "share_memory"),
     ()),
    ("it compiles or traces code", ("aot",), ("compil", "script", "export", "dynamo", "inductor")),
    ("it draws from the global random number generator (a value that changes from run to run is no measurement)",
     ("rand", "bernoulli", "multinomial", "poisson", "normal_", "log_normal"), ("dropout", "rrelu")),
    ("it loads or saves data or code", ("load", "save"), ("file", "import", "storage", "pickle", "serializ")),
    ("it looks a name up by a string (an attribute, submodule or foreign function)",
     ("get_submodule", "get_parameter", "get_buffer", "get_extra_state", "get_device_module", "ffi"),
     ("getattr", "import_module")),
    ("it reaches framework infrastructure (configuration, callbacks, ops registration, debugging, processes)", (),
     ("config", "callback", "debug", "custom_op", "profil", "environ", "multiprocessing", "distributed")),
)

#: Modules whose objects are refused wherever they are re-exported (``torch.CompilationUnit`` is
#: ``torch.jit``'s, ``jax.numpy_rank_promotion`` a ``jax._src.config`` state): a segment of the object's
#: ``__module__``, leading underscores stripped.
DENIED_ORIGINS = frozenset(
    {
        "config", "jit", "serialization", "hub", "library", "distributed", "multiprocessing", "profiler",
        "debugging", "cpp_extension", "backends", "export", "onnx", "package", "dynamo", "compiler",
        "compilation_cache", "callback", "random", "cuda", "mps", "xpu", "grad_mode", "autocast_mode",
        "higher_order_ops",  # torch.cond, torch.while_loop: they run dynamo
    }
)


@dataclass(frozen=True)
class Node:
    """Base of the parsed tree."""


@dataclass(frozen=True)
class Name(Node):
    """A dotted name in a namespace, already alias-expanded: ``("torch", "nn", "functional", "relu")``."""

    parts: tuple[str, ...]

    @property
    def dotted(self) -> str:
        return ".".join(self.parts)


@dataclass(frozen=True)
class Input(Node):
    name: str


@dataclass(frozen=True)
class Const(Node):
    """A literal: a number, ``True``/``False``, ``None``, ``...``, or a string (only ever a call's argument)."""

    value: int | float | bool | str | None | types.EllipsisType


@dataclass(frozen=True)
class Seq(Node):
    items: tuple[Node, ...]
    kind: str  # "list" | "tuple"


@dataclass(frozen=True)
class Call(Node):
    func: Node
    args: tuple[Node, ...]
    kwargs: tuple[tuple[str, Node], ...]


@dataclass(frozen=True)
class Attr(Node):
    """``value.name`` where ``value`` is not a namespace name (a method or field of a result)."""

    value: Node
    name: str


@dataclass(frozen=True)
class Index(Node):
    value: Node
    index: Node


@dataclass(frozen=True)
class BinOp(Node):
    op: str
    left: Node
    right: Node


@dataclass(frozen=True)
class Unary(Node):
    op: str
    operand: Node


@dataclass(frozen=True)
class Compare(Node):
    left: Node
    ops: tuple[str, ...]
    rights: tuple[Node, ...]


_BINOPS: dict[type, str] = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
    ast.Pow: "**", ast.MatMult: "@",
}
_UNARY: dict[type, str] = {ast.USub: "-", ast.UAdd: "+", ast.Not: "not"}
_CMP: dict[type, str] = {ast.Gt: ">", ast.GtE: ">=", ast.Lt: "<", ast.LtE: "<=", ast.Eq: "==", ast.NotEq: "!="}

_BIN_FN: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "//": operator.floordiv, "%": operator.mod, "**": operator.pow, "@": operator.matmul,
}
_UNARY_FN: dict[str, Callable[[Any], Any]] = {"-": operator.neg, "+": operator.pos, "not": operator.not_}
_CMP_FN: dict[str, Callable[[Any, Any], Any]] = {
    ">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le, "==": operator.eq,
    "!=": operator.ne,
}


def refused_kind(seg: str) -> str | None:
    """Why a name segment is refused (one of :data:`DENIED_KINDS`), or None when it is allowed."""
    if seg in DENIED:
        return "kinkcheck expressions may not do I/O, load or compile code, or change global state"
    if seg in pure_setters():
        return None
    low = seg.lower()
    for kind, prefixes, parts in DENIED_KINDS:
        if low.startswith(prefixes) or any(p in low for p in parts):
            return kind
    if seg.endswith("_") or seg == "data":  # x.sub_(1), x.data: the point moves under the next evaluation
        return "it modifies a tensor in place (a name ending in '_', or .data)"
    return None


def pure_setters() -> frozenset[str]:
    """Names of a refused kind that are pure functions: every registered framework's ``pure_setters`` (PyTensor's
    ``set_subtensor`` builds a new symbolic variable, the subtensor written into a copy; it sets no state)."""
    return frozenset(n for f in registry.REGISTRY.values() for n in f.pure_setters)


def exempt_prefixes() -> frozenset[tuple[str, ...]]:
    """Public namespaces whose dotted path carries a refused word but that hold only array functions: every
    registered framework's ``exempt`` (``tensorflow.experimental.numpy``, MindSpore's functional ``mindspore.ops``).
    Only the segments of the exact prefix are exempt (``tensorflow.experimental.numpy.maximum`` passes,
    ``tensorflow.experimental.dlpack`` and any name below a prefix that is itself refused do not)."""
    return frozenset(p for f in registry.REGISTRY.values() for p in f.exempt)


def _exempt_segments(parts: list[str] | tuple[str, ...]) -> frozenset[int]:
    """Indices of ``parts`` that lie inside one of :func:`exempt_prefixes` (a prefix of the whole name)."""
    return frozenset(i for p in exempt_prefixes() if tuple(parts[:len(p)]) == p for i in range(len(p)))


def _check_segment(seg: str, where: str) -> None:
    if seg.startswith("_"):
        raise ExprError(f"private or dunder name {seg!r} is not allowed ({where})")
    kind = refused_kind(seg)
    if kind is not None:
        raise ExprError(f"{seg!r} is refused: {kind} ({where})")


def _dotted(node: ast.expr) -> list[str] | None:
    """``a.b.c`` → ["a", "b", "c"]; None when the chain does not end in a plain name."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return parts[::-1]
    return None


class _Builder:
    def __init__(self, inputs: frozenset[str], roots: frozenset[str], source: str) -> None:
        self.inputs = inputs
        self.roots = roots
        self.source = source
        self.depth = 0

    def _not_literal(self, node: ast.expr, why: str) -> None:
        """A string or None literal never owns an attribute and is never called (``'os'.join``, ``None()``)."""
        if isinstance(node, ast.Constant) and (node.value is None or node.value is Ellipsis
                                               or isinstance(node.value, str)):
            raise self.fail(node, f"the literal {_short(repr(node.value), 40)} {why}")

    def fail(self, node: ast.AST, why: str) -> ExprError:
        col = getattr(node, "col_offset", None)
        at = f" at column {col + 1}" if col is not None else ""
        return ExprError(f"{why}{at} in {_short(self.source)}")

    def build(self, node: ast.expr, arg: bool = False) -> Node:
        """``arg``: ``node`` is a call's argument (positional or keyword value), the one place for a string."""
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ExprError(f"expression nested more than {MAX_DEPTH} levels: {_short(self.source)}")
        try:
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                return self._string(node, arg)
            return self._build(node)
        finally:
            self.depth -= 1

    def _string(self, node: ast.Constant, arg: bool) -> Const:
        text = node.value
        if not arg:
            raise self.fail(node, f"string {_short(text, 40)} is allowed only as a call's argument "
                                  "(e.g. approximate='tanh')")
        if len(text) > MAX_STRING:
            raise self.fail(node, f"string {_short(text, 40)} is longer than {MAX_STRING} characters")
        bad = sorted(set(text) - STRING_CHARS)
        if bad:
            raise self.fail(node, f"string {_short(text, 40)} contains {bad[0]!r}; a string argument may hold "
                                  "letters, digits, spaces and _ , . : - > only")
        return Const(text)

    def _build(self, node: ast.expr) -> Node:
        if isinstance(node, (ast.Name, ast.Attribute)):
            parts = _dotted(node)
            if parts is not None and parts[0] not in self.inputs:
                head = ALIASES.get(parts[0])
                if head is not None:
                    parts = head.split(".") + parts[1:]
                if parts[0] in ("True", "False"):
                    return Const(parts[0] == "True")
                if parts[0] not in self.roots:
                    allowed = ", ".join(sorted(self.inputs)) or "none"
                    raise self.fail(
                        node,
                        f"unknown name {parts[0]!r} (inputs: {allowed}; namespaces: {', '.join(sorted(self.roots))})",
                    )
                exempt = _exempt_segments(parts)
                for i, seg in enumerate(parts):
                    if i not in exempt:
                        _check_segment(seg, ".".join(parts))
                return Name(tuple(parts))
            if isinstance(node, ast.Name):
                return Input(node.id)
            _check_segment(node.attr, f"attribute .{node.attr}")
            self._not_literal(node.value, "has no attributes here")
            return Attr(self.build(node.value), node.attr)
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or node.value is None or node.value is Ellipsis:
                return Const(node.value)  # ... as in v[..., 0]
            if isinstance(node.value, (int, float)):
                if not _finite_float(node.value):
                    raise self.fail(node, f"literal {_short(ast.unparse(node), 40)} is not a finite float64 number")
                return Const(node.value)
            raise self.fail(node, f"literal {_short(repr(node.value), 40)} is not allowed "
                                  "(numbers, True/False, None, and strings as a call's argument)")
        if isinstance(node, (ast.List, ast.Tuple)):
            return Seq(tuple(self.build(e) for e in node.elts), "list" if isinstance(node, ast.List) else "tuple")
        if isinstance(node, ast.Call):
            for a in node.args:
                if isinstance(a, ast.Starred):
                    raise self.fail(a, "starred arguments are not allowed")
            kwargs = []
            for kw in node.keywords:
                if kw.arg is None:
                    raise self.fail(node, "**kwargs are not allowed")
                _check_segment(kw.arg, f"keyword {kw.arg}=")
                if kw.arg in _MUTATING_KEYWORDS:  # out=v, inplace=True: the point moves under the next evaluation
                    raise self.fail(node, f"keyword {kw.arg}= is refused: it modifies a tensor in place")
                kwargs.append((kw.arg, self.build(kw.value, arg=True)))
            self._not_literal(node.func, "cannot be called")
            return Call(self.build(node.func), tuple(self.build(a, arg=True) for a in node.args), tuple(kwargs))
        if isinstance(node, ast.Subscript):
            sl = node.slice
            if isinstance(sl, ast.Slice):
                raise self.fail(node, "slices are not allowed; index with a number or an expression")
            return Index(self.build(node.value), self.build(sl))
        if isinstance(node, ast.BinOp):
            op = _BINOPS.get(type(node.op))
            if op is None:
                raise self.fail(node, f"operator {type(node.op).__name__} is not allowed")
            return BinOp(op, self.build(node.left), self.build(node.right))
        if isinstance(node, ast.UnaryOp):
            op = _UNARY.get(type(node.op))
            if op is None:
                raise self.fail(node, f"operator {type(node.op).__name__} is not allowed")
            operand = self.build(node.operand)
            if op == "-" and isinstance(operand, Const) and not isinstance(operand.value, bool):
                return Const(-operand.value)  # keeps -0.0 a literal
            return Unary(op, operand)
        if isinstance(node, ast.Compare):
            ops = []
            for o in node.ops:
                sym = _CMP.get(type(o))
                if sym is None:
                    raise self.fail(node, f"comparison {type(o).__name__} is not allowed")
                ops.append(sym)
            return Compare(self.build(node.left), tuple(ops), tuple(self.build(c) for c in node.comparators))
        kind = type(node).__name__
        friendly = {
            "Lambda": "lambdas", "ListComp": "comprehensions", "SetComp": "comprehensions",
            "DictComp": "comprehensions", "GeneratorExp": "generator expressions", "IfExp": "conditional expressions",
            "NamedExpr": "assignment expressions", "JoinedStr": "f-strings", "Dict": "dict literals",
            "Set": "set literals", "BoolOp": "and/or", "Await": "await", "Yield": "yield", "Starred": "starred values",
        }.get(kind, f"{kind} syntax")
        raise self.fail(node, f"{friendly} are not allowed")


def parse(source: str, inputs: Iterable[str], roots: Iterable[str]) -> Node:
    """Parse ``source`` into a tree of :class:`Node`.

    Parameters
    ----------
    source : str
        One Python expression, e.g. ``"torch.clamp(x, min=0)"``.
    inputs : iterable of str
        Declared input names; they shadow namespace roots.
    roots : iterable of str
        Allowed namespace roots after alias expansion (``{"torch"}``, ``{"jax"}``, or sympy's).

    Raises
    ------
    ExprError
        On a syntax error or any construct outside the language (one-line reason).
    """
    if not isinstance(source, str) or not source.strip():
        raise ExprError("empty expression")
    if "\n" in source.strip():
        raise ExprError(f"one expression on one line expected, got {_short(source)}")
    if len(source) > MAX_LENGTH:
        raise ExprError(f"expression too long ({len(source)} characters; at most {MAX_LENGTH})")
    _check_text(source, "the expression")
    try:
        tree = ast.parse(source.strip(), mode="eval")
        return _Builder(frozenset(inputs), frozenset(roots), source).build(tree.body)
    except SyntaxError as err:
        raise ExprError(f"malformed expression {_short(source)}: {err.msg} at column {err.offset}") from None
    except (RecursionError, MemoryError):
        raise ExprError(f"expression nested too deeply: {_short(source)}") from None


def _check_text(text: str, what: str) -> None:
    """Refuse text that is not valid Unicode: on Linux, non-UTF-8 bytes in argv arrive as lone surrogates."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise ExprError(f"{what} is not valid UTF-8 text (byte {_byte(text[err.start])} at position "
                        f"{err.start + 1}): {text[:40]!a}") from None


def _byte(ch: str) -> str:
    code = ord(ch)
    return f"0x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"U+{code:04X}"


def _short(text: str, limit: int = 80) -> str:
    """``repr`` of ``text``, cut to ``limit`` characters so an error stays one readable line."""
    return repr(text) if len(text) <= limit else repr(text[: limit - 1] + "…")


def walk(node: Node) -> Iterable[Node]:
    """Every node of the tree, parents first."""
    yield node
    if isinstance(node, Seq):
        for i in node.items:
            yield from walk(i)
    elif isinstance(node, Call):
        yield from walk(node.func)
        for a in node.args:
            yield from walk(a)
        for _, v in node.kwargs:
            yield from walk(v)
    elif isinstance(node, Attr):
        yield from walk(node.value)
    elif isinstance(node, Index):
        yield from walk(node.value)
        yield from walk(node.index)
    elif isinstance(node, BinOp):
        yield from walk(node.left)
        yield from walk(node.right)
    elif isinstance(node, Unary):
        yield from walk(node.operand)
    elif isinstance(node, Compare):
        yield from walk(node.left)
        for r in node.rights:
            yield from walk(r)


def roots_of(node: Node) -> set[str]:
    """Namespace roots the tree uses (``{"torch"}``); the framework of a program."""
    return {n.parts[0] for n in walk(node) if isinstance(n, Name)}


def check_input_names(at: Mapping[str, Any], namespaces: Iterable[str]) -> None:
    """Raise ExprError for an input named like a namespace or alias (``torch=0`` would hide the framework)."""
    shadowing = sorted(set(at) & (set(namespaces) | set(ALIASES)))
    if shadowing:
        raise ExprError(f"input name {shadowing[0]!r} is a namespace; call the input x, y, v, …")


def program_framework(tree: Node, at: Mapping[str, Any], framework: str | None, namespaces: Sequence[str]) -> str:
    """The one framework a parsed program calls (``framework`` where a bare method chain names none), checked
    against the point: raises ExprError (one line) for a program that mixes frameworks, a method chain without
    ``framework``, a ``framework`` the program does not call, or an input of ``at`` the program does not use."""
    roots = roots_of(tree)
    if len(roots) > 1:
        raise ExprError(f"expression mixes frameworks {sorted(roots)}; use one")
    fw = framework or (roots.pop() if roots else None)
    if fw is None:
        what = "a method chain" if any(isinstance(n, Call) for n in walk(tree)) else "an expression that calls nothing"
        raise ExprError(f"cannot tell the framework from {what} (it names no torch., jax., …); add --framework NAME "
                        f"({', '.join(namespaces)})")
    if roots and fw not in roots:
        raise ExprError(f"--framework {fw} but the expression uses {sorted(roots)}")
    used = {n.name for n in walk(tree) if isinstance(n, Input)}
    unused = [k for k in at if k not in used]
    if unused:
        raise ExprError(f"--at gives {', '.join(unused)} but the expression does not use it")
    return fw


def _origin(obj: Any) -> str:
    """The module an object was defined in (``__module__``, or its class's for descriptors and instances)."""
    for holder in (obj, getattr(obj, "__objclass__", None), getattr(obj, "__self__", None)):
        mod = getattr(holder, "__module__", None) if holder is not None else None
        if isinstance(mod, str) and mod != "builtins":
            return mod
        if isinstance(holder, types.ModuleType):
            return holder.__name__
    return type(obj).__module__


def _defining_file(obj: Any, root: str) -> tuple[str, ...]:
    """Package path of the file that defines a function, below ``root`` (``torch.cond`` says its
    ``__module__`` is ``torch`` but lives in ``torch/_higher_order_ops/cond.py``); () for other objects."""
    code = getattr(obj, "__code__", None)
    parts = Path(code.co_filename).with_suffix("").parts if code is not None else ()
    return tuple(parts[len(parts) - parts[::-1].index(root):]) if root in parts else ()


def resolve_names(
    node: Node,
    namespace: Mapping[str, Any],
    modules: Iterable[str] | None = None,
    origins: Iterable[str] | None = None,
) -> dict[str, Any]:
    """Resolve every dotted name in the tree to an object, before anything is called.

    Parameters
    ----------
    namespace : mapping
        Root name → object (``{"torch": torch}``).
    modules : iterable of str, optional
        Modules a dotted path may pass through or end at (``"torch.nn.functional"``); None allows any.
    origins : iterable of str, optional
        Top-level packages the final object may come from (``"torch"``); numbers are always allowed;
        None allows any.

    Raises
    ------
    ExprError
        When a segment does not exist (``torch.nn.functional.rleu``), or a path leaves the allowed modules
        or origins (``torch.os.system``), naming the offending part.
    """
    allowed_modules = None if modules is None else frozenset(modules)
    allowed_origins = None if origins is None else frozenset(origins)
    out: dict[str, Any] = {}
    for n in walk(node):
        if isinstance(n, Name) and n.dotted not in out:
            if n.parts[0] not in namespace:
                raise ExprError(f"namespace {n.parts[0]!r} is not available here")
            obj = namespace[n.parts[0]]
            for i, seg in enumerate(n.parts[1:], start=1):
                here = ".".join(n.parts[: i + 1])
                try:
                    obj = getattr(obj, seg)
                except AttributeError:
                    raise NameMissing(f"{here!r} does not exist in this {n.parts[0]} installation") from None
                if isinstance(obj, types.ModuleType) and allowed_modules is not None \
                        and obj.__name__ not in allowed_modules:
                    raise ExprError(f"{here!r} is the module {obj.__name__!r}, outside the expression namespace")
            if allowed_origins is not None and not isinstance(obj, (types.ModuleType, int, float, complex)):
                origin = _origin(obj)
                if origin.split(".")[0] not in allowed_origins:
                    raise ExprError(f"{n.dotted!r} comes from {origin!r}, outside {', '.join(sorted(allowed_origins))}")
                denied = [m for m in (*origin.split("."), *_defining_file(obj, origin.split(".")[0]))
                          if m.lstrip("_") in DENIED_ORIGINS]
                if denied:
                    raise ExprError(f"{n.dotted!r} is refused: it comes from {origin!r} (compilers, loaders, "
                                    "configuration and global-state setters are out of reach)")
            out[n.dotted] = obj
    return out


_FORBIDDEN_VALUES = (str, bytes, bytearray, types.ModuleType)

#: Keywords that write into an existing tensor (``torch.relu(x, out=v)``, ``F.relu(x, inplace=True)``,
#: ``paddle.assign(x, output=v)``).
_MUTATING_KEYWORDS = frozenset({"out", "inplace", "output"})


def _guard_off(value: Any, where: Node) -> Any:
    return value


def _guard_on(value: Any, where: Node) -> Any:
    if isinstance(value, _FORBIDDEN_VALUES):
        raise ExprError(f"{unparse(where)[:60]!r} produced a {type(value).__name__}; strings and modules are not allowed")
    return value


#: Largest integer constant the expression may compute: float64's largest finite value, rounded up.
MAX_INT = 2 ** 1024


def _finite_float(value: float) -> bool:
    """True when ``value`` is a finite float64 number (an int beyond ±2**1024 is not)."""
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def _plain_int(value: Any) -> bool:
    return type(value) in (int, bool)


def _int_arithmetic(n: BinOp, left: int, right: int) -> Any:
    """Python-int arithmetic on constants, refused past :data:`MAX_INT` (``10 ** 10 ** 10`` would run for minutes)."""
    def too_big() -> ExprError:
        return ExprError(f"{_short(unparse(n), 60)} is not a finite float64 number "
                         "(integer constants stay below 2**1024)")

    if n.op == "**" and right > 0 and abs(left) > 1 and right * math.log2(abs(left)) > 1024:
        raise too_big()  # decided from the exponent: computing 10 ** 10 ** 10 would take minutes
    out = _BIN_FN[n.op](left, right)
    if _plain_int(out) and abs(out) > MAX_INT:
        raise too_big()
    return out


def evaluate(node: Node, names: Mapping[str, Any], inputs: Mapping[str, Any], guard: bool = True) -> Any:
    """Evaluate a parsed tree.

    ``names`` comes from :func:`resolve_names`; ``inputs`` maps each declared input to its value.
    Errors raised by the called functions propagate unchanged (the adapters record them).
    ``guard=False`` skips the run-time refusal of strings and modules; only for a tree that has already
    been evaluated once with the guard on the same names (``torch.compile`` cannot trace the check).
    """
    _guard = _guard_on if guard else _guard_off

    def ev(n: Node) -> Any:
        if isinstance(n, Const):
            return n.value
        if isinstance(n, Input):
            return inputs[n.name]
        if isinstance(n, Name):
            return names[n.dotted]
        if isinstance(n, Seq):
            items = [ev(i) for i in n.items]
            return items if n.kind == "list" else tuple(items)
        if isinstance(n, Call):
            fn = ev(n.func)
            return _guard(fn(*[ev(a) for a in n.args], **{k: ev(v) for k, v in n.kwargs}), n)
        if isinstance(n, Attr):
            return _guard(getattr(_guard(ev(n.value), n.value), n.name), n)
        if isinstance(n, Index):
            return _guard(ev(n.value)[ev(n.index)], n)
        if isinstance(n, BinOp):
            left, right = ev(n.left), ev(n.right)
            if _plain_int(left) and _plain_int(right):
                return _int_arithmetic(n, left, right)
            return _BIN_FN[n.op](left, right)
        if isinstance(n, Unary):
            return _UNARY_FN[n.op](ev(n.operand))
        if isinstance(n, Compare):
            left = ev(n.left)
            result = None
            for op, r in zip(n.ops, n.rights):
                right = ev(r)
                step = _CMP_FN[op](left, right)
                result = step if result is None else result & step
                left = right
            return result
        raise ExprError(f"cannot evaluate {type(n).__name__}")  # unreachable for parsed trees

    return ev(node)


def unparse(node: Node) -> str:
    """Canonical text of a tree (aliases expanded, Python's spacing and minimal parentheses).

    Used as the stable program id: ``unparse(parse("F.relu( x )", ...)) == "torch.nn.functional.relu(x)"``.
    """
    return ast.unparse(_to_ast(node))


def program_key(program: str | Node, inputs: Iterable[str] | None = None, *, arguments: bool = True) -> str:
    """The one spelling of a program: every face that matches a user's program to the catalog's (``lookup``,
    ``cite``, ``grad``, ``ask``, ``lock``, ``migrate``) compares these (:func:`same_program`), never the text as
    typed.

    Two programs have the same key when they differ only in

    * spacing, parentheses and aliases (``F.relu( x )`` is ``torch.nn.functional.relu(x)``: :func:`unparse`);
    * how a number is written: an integral float literal is its integer (``0.0``, ``0.``, ``0e0`` are ``0``;
      ``1e0`` and ``1.0`` are ``1``), except ``-0.0``, which the catalog tells apart from ``0``;
    * with ``arguments``: positional against keyword arguments, and the order of keywords, for a function the sympy
      mapping's rows give a signature (``torch.clamp(x, 0)`` is ``torch.clamp(x, min=0)``; the rows of
      ``frameworks/<name>/mapping.py`` as :data:`kinkcheck.oracles.mapping.TABLE` reads them, NumPy clones
      included); other calls (methods, unmapped functions) keep their positional arguments as written and their
      keywords in name order.

    The key is for comparing only (``torch.clamp(input=x, min=0)``); a face shows the catalog's own text.

    Parameters
    ----------
    program : str or Node
        Program text (its inputs: the bare names that are no namespace or alias, unless ``inputs`` says) or a tree.
    inputs : iterable of str, optional
        The input names of a text.
    arguments : bool
        Also bind the arguments to the function's signature (False: only numbers and spelling).

    Raises
    ------
    ExprError
        ``program`` is not in the call-expression language (one line).
    """
    tree = program if isinstance(program, Node) else _parsed(program, inputs)
    return unparse(_normal(tree, arguments))


def same_program(program: str, programs: Iterable[str], inputs: Iterable[str] | None = None) -> list[str]:
    """The texts of ``programs`` (the catalog's) that spell ``program``, the closest spelling only: the text
    itself; else those with its canonical text (:func:`unparse`); else with its numbers
    (:func:`program_key` without ``arguments``); else the same call (:func:`program_key`). Several only where the
    catalog measures several spellings of that call (``torch.clamp(x, -1, 1)`` and ``torch.clamp(x, min=-1,
    max=1)`` for ``torch.clamp(x, -1.0, max=1)``), in the order given; ``[]`` for none, or for a ``program``
    outside the language (a text of ``programs`` outside it matches only itself)."""
    programs = list(dict.fromkeys(programs))
    if program in programs:
        return [program]
    try:
        tree = _parsed(program, inputs)
    except ExprError:
        return []
    # every name the program calls or reads keeps its last segment whatever the alias: a cheap first sieve
    words = {n.parts[-1] if isinstance(n, Name) else n.name for n in walk(tree) if isinstance(n, (Name, Attr))}
    trees = []
    for p in programs:
        if all(w in p for w in words):
            try:
                trees.append((p, _parsed(p, inputs)))
            except ExprError:
                continue
    for level in range(3):
        want = _spelling(tree, level)
        hits = [p for p, t in trees if _spelling(t, level) == want]
        if hits:
            return hits
    return []


def _spelling(tree: Node, level: int) -> str:
    """:func:`same_program`'s spellings of a parsed tree, closest first: 0 its canonical text (:func:`unparse`),
    1 with its numbers (:func:`program_key` without arguments), 2 its call (:func:`program_key`). Cached per tree
    (the parsed trees are cached, :func:`_parsed`): a face matching a program to every case's asks each once."""
    key = (id(tree), level)
    hit = _SPELT.get(key)
    if hit is not None and hit[0] is tree:
        return hit[1]
    out = unparse(tree) if level == 0 else program_key(tree, arguments=level == 2)
    if len(_SPELT) >= 3 * 4096:
        _SPELT.clear()
    _SPELT[key] = (tree, out)
    return out


#: (id of a tree, level) → (the tree, its spelling): :func:`_spelling`'s cache (the tree kept, so its id is its own).
_SPELT: dict[tuple[int, int], tuple[Node, str]] = {}


def _parsed(text: str, inputs: Iterable[str] | None) -> Node:
    """``text`` parsed with every registered framework's namespace (cached: faces compare many catalog texts)."""
    if not isinstance(text, str):
        raise ExprError(f"a program is text, not {type(text).__name__}")
    roots = tuple(registry.FRAMEWORKS)
    key = (text, None if inputs is None else frozenset(inputs), roots)
    tree = _PARSED.get(key)
    if tree is None:
        names = key[1]
        if names is None:  # the bare names that no namespace or alias claims
            try:  # parse() below refuses what is too long or not one expression, saying why
                found = ({n.id for n in ast.walk(ast.parse(text.strip(), mode="eval")) if isinstance(n, ast.Name)}
                         if len(text) <= MAX_LENGTH else set())
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                found = set()
            names = frozenset(found - set(roots) - set(ALIASES) - {"True", "False", "None"})
        tree = parse(text, names, roots)
        if len(_PARSED) >= 4096:
            _PARSED.clear()
        _PARSED[key] = tree
    return tree


_PARSED: dict[tuple[str, frozenset[str] | None, tuple[str, ...]], Node] = {}


def _call_signatures() -> tuple[dict[str, Any], dict[str, str]]:
    """The mapping rows (dotted name → row; its ``parameters`` is the ``inspect.Signature``, parsed when first
    asked for: a face matching one program reads a few of the 900) and NumPy-clone prefixes, read from each
    registered framework's ``mapping.py`` as :mod:`kinkcheck.oracles.mapping` reads them (no sympy: the rows are
    text)."""
    adapters = tuple(r.adapter for r in registry.REGISTRY.values())
    if _SIGNATURES and _SIGNATURES[0] == adapters:
        return _SIGNATURES[1], _SIGNATURES[2]
    table: dict[str, Any] = {}
    clones: dict[str, str] = {}
    for adapter in adapters:
        try:
            rows = importlib.import_module(f"{adapter}.mapping")
        except ModuleNotFoundError as err:
            if err.name != f"{adapter}.mapping":
                raise
            continue
        table.update(rows.table() if hasattr(rows, "table") else {})
        clones.update(getattr(rows, "CLONES", {}))
    _SIGNATURES[:] = [adapters, table, clones]
    return table, clones


_SIGNATURES: list[Any] = []


def _normal(node: Node, arguments: bool = True) -> Node:
    """``node`` with its numbers (and ``arguments``: call arguments) in the one spelling :func:`program_key`
    prints."""
    if isinstance(node, Const):
        v = node.value
        if isinstance(v, float) and v.is_integer() and abs(v) < 2 ** 53 and not (v == 0 and math.copysign(1, v) < 0):
            return Const(int(v))
        return node
    if isinstance(node, Seq):
        return Seq(tuple(_normal(i, arguments) for i in node.items), node.kind)
    if isinstance(node, Attr):
        return Attr(_normal(node.value, arguments), node.name)
    if isinstance(node, Index):
        return Index(_normal(node.value, arguments), _normal(node.index, arguments))
    if isinstance(node, BinOp):
        return BinOp(node.op, _normal(node.left, arguments), _normal(node.right, arguments))
    if isinstance(node, Unary):
        return Unary(node.op, _normal(node.operand, arguments))
    if isinstance(node, Compare):
        return Compare(_normal(node.left, arguments), node.ops, tuple(_normal(r, arguments) for r in node.rights))
    if not isinstance(node, Call):
        return node
    func = _normal(node.func, arguments)
    args = [_normal(a, arguments) for a in node.args]
    kwargs = {k: _normal(v, arguments) for k, v in node.kwargs}
    if not arguments:
        return Call(func, tuple(args), tuple(kwargs.items()))
    signature = None
    if isinstance(func, Name):
        table, clones = _call_signatures()
        dotted = func.dotted
        for prefix, same in clones.items():
            if dotted.startswith(prefix):
                dotted = same + dotted[len(prefix):]
                break
        row = table.get(dotted)
        signature = None if row is None else row.parameters
    if signature is not None:
        import inspect  # slow to import

        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:  # not this signature's call: as written
            pass
        else:
            args, kwargs = [], {}
            params = list(signature.parameters.values())
            star = next((i for i, p in enumerate(params) if p.kind is inspect.Parameter.VAR_POSITIONAL), -1)
            before_star = {p.name for p in params[:max(star, 0)]}  # f(a, *rest): a stays positional
            for name, value in bound.arguments.items():
                kind = signature.parameters[name].kind
                if kind is inspect.Parameter.POSITIONAL_ONLY or name in before_star:
                    args.append(value)
                elif kind is inspect.Parameter.VAR_POSITIONAL:
                    args.extend(value)
                elif kind is inspect.Parameter.VAR_KEYWORD:
                    kwargs.update(dict(sorted(value.items())))
                else:
                    kwargs[name] = value
            return Call(func, tuple(args), tuple(kwargs.items()))
    return Call(func, tuple(args), tuple(sorted(kwargs.items())))


_BIN_AST = {v: k for k, v in _BINOPS.items()}
_UNARY_AST = {v: k for k, v in _UNARY.items()}
_CMP_AST = {v: k for k, v in _CMP.items()}


def _to_ast(node: Node) -> ast.expr:
    if isinstance(node, Const):
        if isinstance(node.value, (int, float)) and not isinstance(node.value, bool) \
                and (node.value < 0 or repr(node.value) == "-0.0"):
            return ast.UnaryOp(ast.USub(), ast.Constant(-node.value))
        return ast.Constant(node.value)
    if isinstance(node, Input):
        return ast.Name(node.name)
    if isinstance(node, Name):
        out: ast.expr = ast.Name(node.parts[0])
        for seg in node.parts[1:]:
            out = ast.Attribute(out, seg)
        return out
    if isinstance(node, Seq):
        elts = [_to_ast(i) for i in node.items]
        return ast.List(elts) if node.kind == "list" else ast.Tuple(elts)
    if isinstance(node, Call):
        return ast.Call(
            _to_ast(node.func), [_to_ast(a) for a in node.args], [ast.keyword(k, _to_ast(v)) for k, v in node.kwargs]
        )
    if isinstance(node, Attr):
        return ast.Attribute(_to_ast(node.value), node.name)
    if isinstance(node, Index):
        return ast.Subscript(_to_ast(node.value), _to_ast(node.index))
    if isinstance(node, BinOp):
        return ast.BinOp(_to_ast(node.left), _BIN_AST[node.op](), _to_ast(node.right))
    if isinstance(node, Unary):
        return ast.UnaryOp(_UNARY_AST[node.op](), _to_ast(node.operand))
    if isinstance(node, Compare):
        return ast.Compare(_to_ast(node.left), [_CMP_AST[o]() for o in node.ops], [_to_ast(r) for r in node.rights])
    raise ExprError(f"cannot print {type(node).__name__}")


