"""PyTensor adapter: builds each call expression as a symbolic ``pytensor.tensor`` graph (alias ``pt``) and
evaluates its derivative through a compiled function.

PyTensor evaluates nothing eagerly: every value comes from ``pytensor.function``, which rewrites the graph and
links it to an implementation (C through the CVM linker where a C compiler is present, Numba from 3.0, else
Python). So each mode names both the derivative graph and how it is compiled
(:data:`kinkcheck.vocabulary.MODE_INFO`):

* ``reverse``: ``pytensor.grad`` of the output's sum (the VJP with ones), compiled with
  ``Mode(linker="py", optimizer="fast_compile")``: the derivative graph as PyTensor's ``L_op`` rules build it,
  only the few rewrites FAST_COMPILE applies, each op's Python ``perform`` (no C or Numba compilation, so every
  dtype runs and nothing is compiled per program);
* ``forward``: the push-forward along each input component's unit tangent, output summed, from the ops' own
  forward rules (``R_op``: ``pytensor.gradient.pushforward(..., use_op_pushforward=True)`` where it exists,
  else ``pytensor.gradient.Rop(..., use_op_rop_implementation=True)``, else ``Rop``), compiled as ``reverse``.
  PyTensor's default ``Rop`` since 2.2x transposes the pull-back twice, which is reverse mode again;
* ``second-order``: ``pytensor.grad`` of the sum of the gradient's components (``H @ 1``), compiled as ``reverse``;
* ``jit``: the ``reverse`` graph compiled with ``pytensor.function``'s default mode, what a user's
  ``pytensor.function(inputs, pytensor.grad(cost, wrt))`` runs: FAST_RUN rewrites linked to C (2.x, a C
  compiler present) or Numba (3.x). Neither backend compiles float16 (such a cell is ``unavailable``).

:meth:`PytensorAdapter.settings` records the default mode, its linker and the C compiler found. PyTensor has
float64, float32 and float16; no bfloat16 (``unavailable``). CPU only.

Where PyTensor defines a kink's derivative (``L_op``/``grad`` of each op): ``pytensor/scalar/basic.py``
(``Maximum.L_op``/``Minimum.L_op``: a tie goes wholly to the first argument, ``eq(output, x) * gz``;
``Abs.L_op``: ``gz * sign(x)``, 0 at 0; ``Clip.L_op``: ``(x >= min) & (x <= max)``, 1 at either bound;
``Sqrt``: ``0.5 * gz / sqrt(x)``, inf at 0; ``Switch``: the gradient flows to the selected branch) and
``pytensor/tensor/math.py`` (``Max.L_op``: ``eq(max, x) * g``, every tied entry gets the whole derivative;
``Max.R_op``: the entry at ``argmax``).

Expressions reach ``pytensor.tensor`` and its ``math``, ``special``, ``basic``, ``extra_ops``, ``linalg`` and
``nlinalg`` modules; nothing else under ``pytensor`` (``pytensor.function``, ``pytensor.shared``, updates,
``pytensor.config``, printing, ``wrap_py``) is in reach, and :data:`REFUSED` names are refused where they appear.
"""

from __future__ import annotations

import contextlib
import inspect
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from kinkcheck.language import expr as ex
from kinkcheck.frameworks.base import Adapter, ImportGuard, ProgramError, Unavailable, \
    by_unit_tangents, check_mode, returned, short_error

GUARD = ImportGuard()
with GUARD:
    import numpy as np
    import pytensor
    import pytensor.gradient
    import pytensor.tensor as pt
    from pytensor.compile.mode import Mode, get_default_mode
    from pytensor.graph.basic import Variable

#: Modules an expression may pass through (see :func:`kinkcheck.language.expr.resolve_names`).
MODULES = frozenset(("pytensor.tensor", "pytensor.tensor.math", "pytensor.tensor.special", "pytensor.tensor.basic",
                     "pytensor.tensor.extra_ops", "pytensor.tensor.linalg", "pytensor.tensor.nlinalg"))
#: Packages a resolved function or constant may come from.
ORIGINS = frozenset(("pytensor",))
#: Names refused wherever they appear (a dotted name or a method of a value), beyond :mod:`kinkcheck.language.expr`'s:
#: compiling functions, shared variables and their updates, printing, wrapping Python or JAX code as ops.
REFUSED: dict[str, str] = {
    **dict.fromkeys(("function", "Mode", "FunctionMaker", "shared", "updates", "OrderedUpdates"),
                    "it compiles a function or makes shared state"),
    **dict.fromkeys(("dprint", "debugprint", "pprint", "pp", "function_dump"), "it prints or writes"),
    **dict.fromkeys(("wrap_py", "wrap_jax", "as_op"), "it runs Python or JAX code as an op"),
}


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Floating-point warnings of the Python implementations (``0.5 / sqrt(0)``) and PyTensor's deprecation
    warnings silenced: they go to stderr only and change no value."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        yield


def _fast_mode() -> Any:
    """FAST_COMPILE's rewrites with the Python linker: nothing compiled, every dtype runs."""
    return Mode(linker="py", optimizer="fast_compile")


def _pushforward(cost: Any, wrt: list[Any], tangents: list[Any]) -> list[Any]:
    """The ops' own forward rules (``R_op``), whatever this release calls them."""
    gradient = pytensor.gradient
    if hasattr(gradient, "pushforward"):  # 3.x; Rop is deprecated there
        return list(gradient.pushforward([cost], wrt, tangents, use_op_pushforward=True,
                                         disconnected_outputs="ignore"))
    if "use_op_rop_implementation" in inspect.signature(gradient.Rop).parameters:
        return list(gradient.Rop([cost], wrt, tangents, use_op_rop_implementation=True,
                                 disconnected_outputs="ignore"))
    return list(gradient.Rop([cost], wrt, tangents, disconnected_outputs="ignore"))


def _floats(value: Any) -> Any:
    return np.asarray(value, dtype=np.float64).tolist()


class PytensorAdapter(Adapter):
    """The :class:`kinkcheck.frameworks.base.Adapter` for PyTensor (CPU only; NumPy's dtypes: no bfloat16)."""

    name = "pytensor"
    guard = GUARD
    modules, origins = MODULES, ORIGINS
    known_devices = ("cpu", "cuda")
    cuda_refusal = "the pytensor adapter runs on the CPU only"
    dtype_refusal = "pytensor has no {dtype} (its tensor types are NumPy dtypes)"

    def settings(self) -> dict[str, str]:
        """How each mode compiles (:mod:`kinkcheck.frameworks.pytensor`), the default mode's linker and optimizer,
        and the C compiler PyTensor found (none: its C linker falls back to Python)."""
        default = get_default_mode()
        out = {
            "reverse, forward, second-order": "pytensor.function(mode=Mode(linker='py', optimizer='fast_compile'))",
            "jit": f"pytensor.function's default mode: {pytensor.config.mode}, linker "
                   f"{type(default.linker).__name__}, optimizer {pytensor.config.optimizer}",
            "cxx": str(pytensor.config.cxx) or "none: PyTensor falls back to Python implementations",
            "floatX": str(pytensor.config.floatX),
        }
        if "Numba" in type(default.linker).__name__ and hasattr(pytensor.config, "numba__fastmath"):
            out["numba__fastmath"] = str(pytensor.config.numba__fastmath)  # fast-math flags in jit's kernels
        return out

    def _resolve(self, tree: ex.Node) -> dict[str, Any]:
        for n in ex.walk(tree):
            if isinstance(n, ex.Name) and n.parts[0] == "pytensor" and n.parts[1:2] != ("tensor",):
                raise ex.ExprError(f"{n.dotted!r} is outside pytensor.tensor, the only part of pytensor in reach "
                                   "(functions, shared variables, configuration and printing are not)")
            segments = n.parts if isinstance(n, ex.Name) else (n.name,) if isinstance(n, ex.Attr) else ()
            refused = [s for s in segments if s in REFUSED]
            if refused:
                raise ex.ExprError(f"{refused[0]!r} is refused: {REFUSED[refused[0]]} ({ex.unparse(n)[:60]})")
        return super()._resolve(tree)

    @staticmethod
    def _check_output(out: Any) -> Any:
        if not isinstance(out, Variable) or not hasattr(out, "dtype"):
            raise ProgramError(f"program returned {type(out).__name__}, not a PyTensor tensor")
        if not str(out.dtype).startswith(("float", "complex")):
            raise ProgramError(f"program returned a {out.dtype} tensor, which has no gradient")
        return out

    def _symbols(self, at: Mapping[str, Any], dtype: str, ints: Sequence[str]) -> tuple[list[Any], list[Any]]:
        """Symbolic inputs with the point's static shapes and their values: ``ints`` int64, the others ``dtype``."""
        symbols, values = [], []
        for k, v in at.items():
            d = "int64" if k in ints else dtype
            value = np.asarray(v, dtype=np.int64) if k in ints else np.asarray(np.asarray(v, dtype=np.float64),
                                                                                dtype=dtype)
            symbols.append(pt.tensor(name=k, dtype=d, shape=value.shape))
            values.append(value)
        return symbols, values

    def _run(self, tree: ex.Node, f: Any, at: Mapping[str, Any], dtype: str, device: str, mode: str,
             diff: tuple[str, ...], ints: tuple[str, ...]) -> dict[str, Any]:
        """See :meth:`kinkcheck.frameworks.base.Adapter.gradient`. Raises :class:`Unavailable` for bfloat16, float16
        in ``jit`` (the C and Numba backends compile no float16) and a name this release lacks; ExprError for a
        refused name or one outside ``pytensor.tensor``."""
        self._cpu_only(device)
        symbols, values = self._symbols(at, self._has_dtype(dtype), ints)
        with _quiet():
            out = f(*symbols)
            grads = _derivatives(out, symbols, values, [list(at).index(k) for k in diff], mode, dtype)
        return {k: _floats(g) for k, g in zip(diff, grads)}

    def callable_gradient(
        self, fn: Any, at: Mapping[str, Any], dtype: str = "float64", device: str = "cpu", mode: str = "reverse"
    ) -> dict[str, Any]:
        """See :meth:`kinkcheck.frameworks.base.Adapter.callable_gradient`; ``fn`` takes symbolic ``pytensor.tensor``
        variables and returns one."""
        check_mode(mode, self.modes)
        self._cpu_only(device)
        symbols, values = self._symbols(at, self._has_dtype(dtype), ())
        with _quiet():
            out = returned(fn(*symbols), Variable, "a PyTensor variable")
            grads = _derivatives(self._check_output(out), symbols, values, list(range(len(symbols))), mode, dtype)
        return {k: _floats(g) for k, g in zip(at, grads)}


def _compiled(inputs: list[Any], outputs: list[Any], mode: str, dtype: str) -> Callable[..., list[Any]]:
    """``pytensor.function`` in the adapter's mode for ``mode`` (``jit``: PyTensor's default mode).

    In ``jit``, a float16 graph the default backend cannot compile (it may say so when compiling or, Numba
    compiling lazily, at the first call) raises :class:`Unavailable`.
    """
    def lacks_float16(err: NotImplementedError) -> Unavailable:
        linker = type(get_default_mode().linker).__name__
        return Unavailable(f"pytensor's default mode ({linker}) compiles no float16: {short_error(err)}")

    float16_jit = mode == "jit" and dtype == "float16"
    try:
        fn = pytensor.function(inputs, outputs, mode=None if mode == "jit" else _fast_mode(), on_unused_input="ignore")
    except NotImplementedError as err:
        if float16_jit:
            raise lacks_float16(err) from None
        raise
    if not float16_jit:
        return fn

    def run(*args: Any) -> list[Any]:
        try:
            return fn(*args)
        except NotImplementedError as err:
            raise lacks_float16(err) from None

    return run


def _derivatives(out: Any, symbols: list[Any], values: list[Any], diff: list[int], mode: str,
                 dtype: str) -> list[Any]:
    """The derivative of ``out.sum()`` with respect to ``symbols[i]`` for ``i`` in ``diff``, in ``mode``, evaluated
    at ``values`` (one per symbol): NumPy arrays of the inputs' shapes."""
    wrt = [symbols[i] for i in diff]
    cost = out.sum()
    if mode in ("reverse", "jit"):
        grads = pytensor.grad(cost, wrt, disconnected_inputs="ignore")
        return list(_compiled(symbols, grads, mode, dtype)(*values))
    if mode == "second-order":
        grads = pytensor.grad(cost, wrt, disconnected_inputs="ignore")
        total = sum((g.sum() for g in grads), pt.constant(0.0, dtype=dtype))
        hess = pytensor.grad(total, wrt, disconnected_inputs="ignore")
        return list(_compiled(symbols, hess, mode, dtype)(*values))
    # forward: one compiled push-forward, evaluated along each unit tangent
    tangents = [w.type() for w in wrt]
    jvp = _pushforward(cost, wrt, tangents)[0]
    run = _compiled([*symbols, *tangents], [jvp], mode, dtype)

    def along(k: int, idx: tuple[int, ...]) -> Any:
        t = [np.zeros(np.shape(values[i]), dtype=dtype) for i in diff]
        t[k][idx] = 1
        return run(*values, *t)[0]

    return list(by_unit_tangents([(str(k), np.shape(values[i])) for k, i in enumerate(diff)], along).values())


load = PytensorAdapter.load
