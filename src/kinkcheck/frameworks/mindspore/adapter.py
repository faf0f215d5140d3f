"""MindSpore adapter: evaluates call expressions with ``mindspore`` tensors in PyNative mode, on the CPU.

Mode: reverse only, ``mindspore.grad(f, grad_position=...)`` in PyNative mode (MindSpore's default from 2.0;
the adapter does not change the mode, and refuses to run in GRAPH_MODE): the VJP with a sensitivity of ones,
what the gradient of the output's sum gives, through each primitive's bprop builder
(``mindspore/ccsrc/frontend/expander/bprop/grad_ops/``). On loading, the adapter makes PyNative launch every op
synchronously (``mindspore.runtime.launch_blocking()``, where absent ``set_context(pynative_synchronize=True)``):
PyNative queues ops, and an op's failure was otherwise raised by a later program, in another cell. The other
modes MindSpore has do not take a parsed program:

* forward: ``mindspore.ops.jvp`` always compiles its function with ``@jit`` (``_wrap_container`` in
  ``mindspore/ops/function/grad/grad_func.py``), and graph mode compiles from Python source;
* graph: ``mindspore.jit`` in its default AST mode parses the function's source, and kinkcheck's evaluator
  is no graph-mode program ("Unsupported exception type: ExprError"); the bytecode capture
  (``capture_mode="bytecode"``) with ``fullgraph=True`` fails to trace it ("Trace function call failed"), and
  without ``fullgraph`` it falls back to PyNative silently, so a value from it could be an eager value.

dtypes: float64, float32, float16, bfloat16; an op without a CPU kernel for the dtype ("Select CPU
operator[ReLU] fail! Unsupported data type!", "The kernel Hardtanh unregistered", a primitive's dtype check)
is :class:`Unavailable`, naming the operator. MindSpore documents no derivative at a kink (see the registry's
rule); the bprops decide (``Maximum``/``Minimum``: ``MinimumMaximumGrad`` in ``grad_math_ops.cc``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from kinkcheck.language import expr as ex
from kinkcheck.frameworks.base import Adapter, FrameworkUnavailable, ImportGuard, ProgramError, \
    Unavailable, check_dtype, check_mode, returned

GUARD = ImportGuard()
with GUARD:
    import mindspore
    import numpy as np

#: Modules an expression may reach: the functional ops, mint (the torch-like API) and mindspore.numpy.
#: mindspore.nn (Cells), mindspore.train, mindspore.dataset, mindspore.communication and the rest are out of
#: reach. See kinkcheck.language.expr.resolve_names; ``mindspore.ops`` passes expr's refusal of "ops" by
#: its record's ``exempt`` (kinkcheck.language.expr.exempt_prefixes).
MODULES = frozenset(("mindspore", "mindspore.ops", "mindspore.mint", "mindspore.mint.nn",
                     "mindspore.mint.nn.functional", "mindspore.mint.linalg", "mindspore.numpy"))
#: Packages a resolved function or constant may come from.
ORIGINS = frozenset(("mindspore",))

#: Modules (a segment of an object's ``__module__``, leading underscores stripped) whose objects are refused:
#: random draws, printing/dumping/summaries and backward hooks (debug), custom ops that compile or call
#: Python code, ``Depend``/``PyFunc`` (other_ops), collective communication, ops acting on ``Parameter``s in
#: place, training, parallelism, the runtime, files.
DENIED_ORIGINS = frozenset((
    "random_ops", "random_func", "debug_ops", "debug_func", "custom_ops", "other_ops", "comm_ops",
    "op_info_register", "parameter_func", "embedding_cache_ops", "communication", "parallel", "train", "runtime",
    "file_system", "seed", "generator", "hook",
))
#: Words refused in a name or attribute (lower-cased substring): Parameter assignment (``ops.assign``,
#: ``Tensor.assign_value``), hooks, dumps, summaries, printing, custom and Python-function ops, ``depend``,
#: ``mutable``, ``Parameter``, recomputation, checkpoints.
DENIED_WORDS = ("assign", "hook", "morph", "dump", "summary", "print", "custom", "pyfunc", "depend",
                "insert_gradient", "mutable", "parameter", "recompute", "env_get", "checkpoint")

#: MindSpore's messages for an op without a CPU kernel for the dtype (kernel selection), each with the op.
_NO_DTYPE = tuple(re.compile(p, re.DOTALL) for p in (
    r"Select CPU operator\[(?P<op>\w+)\] fail! Unsupported data type",
    r"(?P<op>\w+) does not support this kernel data type",
    r"Unsupported op \[(?P<op>\w+)\] on CPU",
))
#: MindSpore's messages for an op without any CPU kernel (mint's ``*Ext`` ops are Ascend-first).
_NO_KERNEL = tuple(re.compile(p) for p in (
    r"The kernel (?P<op>\w+) unregistered",
    r"Not found op (?P<op>\w+) on device (?:CPU|\d+)",  # 2.8 names the C++ class: N9mindspore...FuncMaxPool2DE
))
#: The op's name in a mangled C++ class name (``N9mindspore6kernel7pyboost13FuncMaxPool2DE``).
_MANGLED = re.compile(r"pyboost\d+(?P<op>\w+)E$")
#: A primitive's dtype check ("For primitive[ReLU6], the input argument[input_x] must be a type of {...}, but got
#: Tensor[Float64]"): unavailable when what it got is the dtype asked for.
_DTYPE_CHECK = re.compile(r"For primitive\[(?P<op>\w+)\], the input argument\[\w+\] must be a type of \{[^}]*\}, "
                          r"but got (?:Tensor\[)?(?P<got>\w+)")


def _unavailable(err: BaseException, dtype: str) -> Unavailable | None:
    """MindSpore's error as :class:`Unavailable` when it says an op has no CPU kernel (for the dtype, or at
    all), or a primitive refuses the dtype; else None."""
    text, version = str(err), mindspore.__version__
    for pattern in _NO_DTYPE:
        m = pattern.search(text)
        if m is not None:
            return Unavailable(f"mindspore {version} has no CPU {dtype} kernel for {m.group('op')}")
    for pattern in _NO_KERNEL:
        m = pattern.search(text)
        if m is not None:
            op = m.group("op")
            mangled = _MANGLED.search(op)
            op = mangled.group("op") if mangled else op
            return Unavailable(f"mindspore {version} has no CPU kernel for {op} (asked in {dtype})")
    m = _DTYPE_CHECK.search(text)
    if m is not None and m.group("got").lower() == dtype:
        return Unavailable(f"mindspore {version}: {m.group('op')} does not take {dtype}")
    return None


def _refusal(tree: ex.Node, names: Mapping[str, Any]) -> None:
    """Refuse MindSpore's I/O, random, hook, assignment and communication names (:data:`DENIED_ORIGINS`,
    :data:`DENIED_WORDS`), in dotted names and in attributes of values, before anything runs.

    Raises
    ------
    ExprError
        Naming the refused name and why.
    """
    for n in ex.walk(tree):
        segs = n.parts if isinstance(n, ex.Name) else (n.name,) if isinstance(n, ex.Attr) else ()
        for seg in segs:
            word = next((w for w in DENIED_WORDS if w in seg.lower()), None)
            if word is not None:
                raise ex.ExprError(f"{seg!r} is refused: MindSpore's {word} names assign, hook, print, dump or "
                                   "compile, so one evaluation could change the next one's")
        if isinstance(n, ex.Name):
            obj = names[n.dotted]
            module = getattr(obj, "__module__", None) or type(obj).__module__
            denied = [m for m in str(module).split(".") if m.lstrip("_") in DENIED_ORIGINS]
            if denied:
                raise ex.ExprError(f"{n.dotted!r} is refused: it comes from {module!r} (random draws, printing, "
                                   "hooks, custom or Python ops, communication and Parameter updates are out of reach)")


def _synchronous() -> str:
    """Make PyNative launch each op before returning (it queues them by default), so an op's failure is raised
    by the program that ran it, not by a later one; returns how (for the shard's settings)."""
    runtime = getattr(mindspore, "runtime", None)
    if hasattr(runtime, "launch_blocking"):
        runtime.launch_blocking()
        return "mindspore.runtime.launch_blocking()"
    mindspore.set_context(pynative_synchronize=True)
    return "set_context(pynative_synchronize=True)"


class MindSporeAdapter(Adapter):
    """The :class:`kinkcheck.frameworks.base.Adapter` for MindSpore (PyNative mode, CPU)."""

    name = "mindspore"
    guard = GUARD
    modules, origins = MODULES, ORIGINS
    cuda_refusal = "kinkcheck measures mindspore on the CPU only"

    def __init__(self) -> None:
        self._synchronous = _synchronous()

    def settings(self) -> dict[str, str]:
        """Framework settings that affect the values, recorded in the shard's provenance."""
        mode = mindspore.get_context("mode")
        return {"mode": "PYNATIVE_MODE" if mode == mindspore.PYNATIVE_MODE else "GRAPH_MODE",
                "device_target": str(mindspore.get_context("device_target")), "synchronous": self._synchronous}

    @staticmethod
    def _check_pynative() -> None:
        if mindspore.get_context("mode") != mindspore.PYNATIVE_MODE:
            raise FrameworkUnavailable("not measured: MindSpore is in GRAPH_MODE in this process; kinkcheck "
                                       "differentiates parsed programs in PyNative mode only")

    def _resolve(self, tree: ex.Node) -> dict[str, Any]:
        names = super()._resolve(tree)
        _refusal(tree, names)
        return names

    @staticmethod
    def _check_output(out: Any) -> Any:
        if not isinstance(out, mindspore.Tensor):
            raise ProgramError(f"program returned {type(out).__name__}, not a mindspore.Tensor")
        if out.dtype not in (mindspore.float64, mindspore.float32, mindspore.float16, mindspore.bfloat16):
            raise ProgramError(f"program returned a {out.dtype} tensor, which has no gradient")
        return out

    def _tensors(self, at: Mapping[str, Any], dtype: str, ints: Sequence[str] = ()) -> list[Any]:
        """The point's tensors: ``ints`` as int64, the others of ``dtype``, built from float64 values."""
        check_dtype(dtype)
        out = []
        for k in at:
            if k in ints:
                out.append(mindspore.Tensor(np.asarray(at[k], dtype=np.int64), mindspore.int64))
            else:
                out.append(mindspore.Tensor(np.asarray(at[k], dtype=np.float64), getattr(mindspore, dtype)))
        return out

    def _run(self, tree: ex.Node, f: Any, at: Mapping[str, Any], dtype: str, device: str, mode: str,
             diff: tuple[str, ...], ints: tuple[str, ...]) -> dict[str, Any]:
        """See :meth:`kinkcheck.frameworks.base.Adapter.gradient`; the result has the ``wrt`` inputs only.

        Raises
        ------
        Unavailable
            A name this release lacks, or an op without a CPU kernel for the dtype.
        ExprError
            A refused name (:func:`_refusal`), before anything runs.
        """
        self._cpu_only(device)
        return self._grad(f, list(at), at, dtype, diff, ints)

    def _grad(self, f: Any, keys: list[str], at: Mapping[str, Any], dtype: str, diff: Sequence[str],
             ints: Sequence[str]) -> dict[str, Any]:
        """``mindspore.grad`` of ``f`` (every input positionally) w.r.t. ``diff``: input name → nested floats."""
        self._check_pynative()
        base = self._tensors(at, dtype, ints)
        pos = tuple(keys.index(k) for k in diff)
        try:
            f(*base)  # the forward pass alone first: a program error is not hidden inside grad's wrappers
            grads = mindspore.grad(f, grad_position=pos)(*base)
        except (RuntimeError, TypeError, ValueError) as err:
            missing = _unavailable(err, dtype)
            if missing is not None:
                raise missing from None
            raise
        grads = grads if isinstance(grads, tuple) else (grads,)
        return {k: g.astype(mindspore.float64).asnumpy().tolist() for k, g in zip(diff, grads)}

    def callable_gradient(
        self, fn: Any, at: Mapping[str, Any], dtype: str = "float64", device: str = "cpu", mode: str = "reverse"
    ) -> dict[str, Any]:
        """See :meth:`kinkcheck.frameworks.base.Adapter.callable_gradient` (reverse mode only)."""
        check_mode(mode, self.modes)
        check_dtype(dtype)
        self._cpu_only(device)
        return self._grad(lambda *a: returned(fn(*a), mindspore.Tensor, "a mindspore.Tensor"), list(at), at, dtype,
                          tuple(at), ())

    def _round_trip(self, dtype: str) -> Any:
        return lambda v: self._tensors({"v": v}, dtype)[0].astype(mindspore.float64).asnumpy().tolist()


load = MindSporeAdapter.load
