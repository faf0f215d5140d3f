"""HIPS autograd adapter: evaluates call expressions with ``autograd.numpy`` (alias ``anp``) on NumPy arrays.

Modes (:data:`kinkcheck.vocabulary.MODE_INFO`): reverse is ``autograd.make_vjp`` with a cotangent of
ones (the VJP of the output's sum, what ``autograd.grad`` of the sum gives); forward is
``autograd.make_jvp`` along each input component's unit tangent, the output summed; second-order is
``autograd.grad`` of the sum of ``autograd.grad``'s components (``H @ 1``). autograd is pure NumPy: it
computes on the CPU only, in NumPy's float64, float32 and float16; NumPy has no bfloat16 (such a cell is
``unavailable``). autograd returns its gradients in the dtype its rules compute them in (often float64
for a float32 input: ``balanced_eq`` divides by the Python float ``1.0``); kinkcheck records them as floats.

autograd documents no rule at a kink; its choices are in its rules' source,
``autograd/numpy/numpy_vjps.py`` (reverse) and ``autograd/numpy/numpy_jvps.py`` (forward):
``anp.maximum``/``minimum``/``fmax``/``fmin`` split a tie evenly (``balanced_eq``: ``(x == z) / (1.0 + (x ==
y))``), ``anp.max``/``min``/``amax``/``amin`` share the derivative among tied entries (``grad_chooser``),
``anp.clip`` has derivative 0 at either bound (``ans != a_min`` and ``ans != a_max``), ``anp.abs`` 0 at 0
(``replace_zero``; ``anp.absolute`` divided by ``|x|``, nan at 0, until 1.9.0: HIPS/autograd#712),
``anp.sqrt`` ``0.5 * x ** -0.5`` (inf at 0); ``anp.sign``, ``floor``, ``round`` are registered as
non-differentiable (derivative 0). The values also depend on the NumPy underneath (releases before 1.7 need
NumPy 1; :meth:`AutogradAdapter.settings` records its version).

Expressions reach ``autograd``, ``autograd.numpy`` (with ``linalg`` and ``fft``) and ``autograd.scipy.special``
(when SciPy is installed). ``autograd.numpy`` wraps every NumPy function as an autograd primitive, so besides
the names :mod:`kinkcheck.language.expr` refuses everywhere, this adapter refuses the wrapped NumPy functions that read
files, print, run code or change NumPy's or autograd's global state (:data:`REFUSED`).
"""

from __future__ import annotations

import contextlib
import importlib
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from kinkcheck.language import expr as ex
from kinkcheck.frameworks.base import Adapter, ImportGuard, ProgramError, Unavailable, \
    by_unit_tangents, check_mode, of_differentiated, resolve, returned

GUARD = ImportGuard()
with GUARD:
    import autograd
    import autograd.numpy as anp
    import numpy as np
    from autograd.tracer import getval

#: Modules an expression may reach (``autograd.numpy.random`` and autograd's internals are out of reach);
#: see :func:`kinkcheck.language.expr.resolve_names`.
MODULES = frozenset(("autograd", "autograd.numpy", "autograd.numpy.linalg", "autograd.numpy.fft", "autograd.scipy",
                     "autograd.scipy.special"))
#: Packages a resolved function or constant may come from (autograd's wrappers of NumPy say ``autograd.tracer``).
ORIGINS = frozenset(("autograd",))
#: Names refused in an autograd expression beyond :mod:`kinkcheck.language.expr`'s refusals, with the reason:
#: ``autograd.numpy`` wraps every NumPy function like any other, including these.
REFUSED: dict[str, str] = {
    **dict.fromkeys(("genfromtxt", "fromregex"), "it reads files"),
    **dict.fromkeys(("seterr", "seterrcall", "setbufsize"), "it changes NumPy's global state"),
    **dict.fromkeys(("info", "show_runtime", "test"), "it prints or runs code"),
    **dict.fromkeys(("copyto", "place", "put", "putmask", "fill_diagonal", "put_along_axis"),
                    "it writes into an array in place"),
    **dict.fromkeys(("primitive", "notrace_primitive", "defvjp", "defjvp", "defvjp_argnum", "defjvp_argnum",
                     "def_linear", "wrap_namespace", "wrap_intdtype"),
                    "it changes autograd's derivative rules or wrappers for every later gradient"),
}


#: Whether ``autograd.scipy.special`` was tried (see ``AutogradAdapter._import_scipy``).
_SCIPY_TRIED: list[bool] = []
#: Parsed program → its resolved names (the objects do not change within a process).
_RESOLVED: dict[ex.Node, dict[str, Any]] = {}


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """NumPy's floating-point warnings (``0 ** -0.5``) and autograd's "Output seems independent of input"
    silenced: they go to stderr only and change no value."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.filterwarnings("ignore", message="Output seems independent of input")
        yield


def _floats(value: Any) -> Any:
    """A gradient (NumPy array or scalar) → float or nested list of floats."""
    return np.asarray(value, dtype=np.float64).tolist()


def _derivatives(f: Callable[..., Any], args: Sequence[Any], diff: Sequence[int], mode: str) -> list[Any]:
    """The derivative of ``sum(f(*args))`` with respect to ``args[i]`` for ``i`` in ``diff``, in ``mode``.

    reverse: ``autograd.make_vjp`` with ones; forward: ``autograd.make_jvp`` along each unit tangent;
    second-order: ``autograd.grad`` of the sum of the gradient's components (``H @ 1``).
    """
    wargs = [args[i] for i in diff]

    f_wrt = of_differentiated(f, args, diff)

    def total(*w: Any) -> Any:
        return anp.sum(f_wrt(*w))

    argnum = tuple(range(len(wargs)))
    if mode == "reverse":
        vjp, ans = autograd.make_vjp(f_wrt, argnum)(*wargs)
        return list(vjp(np.ones_like(ans)))
    if mode == "second-order":
        grad = autograd.grad(total, argnum)

        def grad_sum(*w: Any) -> Any:
            return sum(anp.sum(g) for g in grad(*w))

        return list(autograd.grad(grad_sum, argnum)(*wargs))
    # forward: one JVP per unit tangent of the differentiated inputs
    jvp = autograd.make_jvp(total, argnum)(*wargs)

    def along(k: int, idx: tuple[int, ...]) -> Any:
        tangents = [np.zeros_like(w) for w in wargs]
        tangents[k][idx] = 1
        return jvp(tuple(tangents))[1]

    return list(by_unit_tangents([(str(k), np.shape(w)) for k, w in enumerate(wargs)], along).values())


class AutogradAdapter(Adapter):
    """The :class:`kinkcheck.frameworks.base.Adapter` for HIPS autograd (its version is the distribution's: autograd
    has no ``__version__``)."""

    name = "autograd"
    guard = GUARD
    modules, origins = MODULES, ORIGINS
    known_devices = ("cpu", "cuda")
    cuda_refusal = "autograd computes with NumPy on the CPU only"
    dtype_refusal = "autograd has no {dtype}: it computes with NumPy, which has no {dtype} dtype"

    def settings(self) -> dict[str, str]:
        """What decides the values besides autograd: the NumPy it computes with (NumPy 2's promotion rules,
        NEP 50, keep a float16 input float16 next to a Python float; NumPy 1 promoted a 0-d one)."""
        return {"numpy": str(np.__version__)}

    @staticmethod
    def _import_scipy() -> None:
        """Import ``autograd.scipy.special`` once, when a program first names ``autograd.scipy``: it imports
        all of SciPy's stats and integrate (0.6 s, five times a whole-catalog probe that needs none of it)."""
        if not _SCIPY_TRIED:  # once: a failed import is not cached by Python and costs a search of sys.path
            _SCIPY_TRIED.append(True)
            with contextlib.suppress(ImportError):  # autograd.scipy needs SciPy
                importlib.import_module("autograd.scipy.special")

    def _resolve(self, tree: ex.Node) -> dict[str, Any]:
        cached = _RESOLVED.get(tree)
        if cached is not None:  # a program runs in every mode and dtype: resolve it once
            return cached
        _RESOLVED[tree] = names = self._resolve_uncached(tree)
        return names

    def _resolve_uncached(self, tree: ex.Node) -> dict[str, Any]:
        namespace = self.namespace()
        for n in ex.walk(tree):
            if isinstance(n, ex.Name) and n.parts[:2] == ("autograd", "scipy"):
                self._import_scipy()
            segments = n.parts if isinstance(n, ex.Name) else (n.name,) if isinstance(n, ex.Attr) else ()
            refused = [s for s in segments if s in REFUSED]
            if refused:
                raise ex.ExprError(f"{refused[0]!r} is refused: {REFUSED[refused[0]]} ({ex.unparse(n)[:60]})")
            if isinstance(n, ex.Name) and n.parts[:2] == ("autograd", "scipy") and not hasattr(autograd, "scipy"):
                raise Unavailable(f"{n.dotted!r} needs SciPy, which is not installed here (autograd.scipy wraps it)")
        return resolve(tree, namespace, self.modules, self.origins)

    @staticmethod
    def _check_output(out: Any) -> Any:
        value = getval(out)
        if not isinstance(value, (np.ndarray, np.generic)):
            raise ProgramError(f"program returned {type(value).__name__}, not a NumPy array")
        if not np.issubdtype(value.dtype, np.inexact):
            raise ProgramError(f"program returned a {value.dtype} array, which has no gradient")
        return out

    def _inputs(self, at: Mapping[str, Any], dtype: str, device: str, ints: Sequence[str] = ()) -> list[Any]:
        """The point's arrays: ``ints`` as int64, the others of ``dtype`` (0-d arrays for scalars)."""
        ndtype = np.dtype(self._has_dtype(dtype))
        self._cpu_only(device)
        return [np.asarray(at[k], dtype=np.int64) if k in ints else np.asarray(np.asarray(at[k], dtype=np.float64),
                                                                                dtype=ndtype) for k in at]

    def _run(self, tree: ex.Node, f: Any, at: Mapping[str, Any], dtype: str, device: str, mode: str,
             diff: tuple[str, ...], ints: tuple[str, ...]) -> dict[str, Any]:
        """See :meth:`kinkcheck.frameworks.base.Adapter.gradient`. Raises :class:`Unavailable` for bfloat16 (NumPy
        has none), a name this autograd lacks, ``autograd.scipy`` without SciPy; ExprError for a refused name
        (:data:`REFUSED` and :mod:`kinkcheck.language.expr`'s)."""
        keys = list(at)
        args = self._inputs(at, dtype, device, ints)
        with _quiet():
            grads = _derivatives(f, args, [keys.index(k) for k in diff], mode)
        return {k: _floats(g) for k, g in zip(diff, grads)}

    def callable_gradient(
        self, fn: Any, at: Mapping[str, Any], dtype: str = "float64", device: str = "cpu", mode: str = "reverse"
    ) -> dict[str, Any]:
        """See :meth:`kinkcheck.frameworks.base.Adapter.callable_gradient`; ``fn`` takes NumPy arrays (autograd
        boxes while traced) and returns one."""
        check_mode(mode, self.modes)
        args = self._inputs(at, dtype, device)
        with _quiet():
            returned(fn(*args), (np.ndarray, np.generic), "a NumPy array")
            grads = _derivatives(fn, args, list(range(len(args))), mode)
        return {k: _floats(g) for k, g in zip(at, grads)}


load = AutogradAdapter.load
