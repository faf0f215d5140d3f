"""PaddlePaddle adapter: evaluates call expressions with ``paddle`` tensors (dynamic graph; ``graph``: static).

Modes (:data:`kinkcheck.vocabulary.MODE_INFO`):

* reverse: ``paddle.grad(y, inputs, grad_outputs=ones_like(y))`` (the VJP with ones, what
  ``y.sum().backward()`` gives), through the eager backward nodes (``paddle/phi/kernels/*_grad_kernel``);
* forward: ``paddle.incubate.autograd.jvp`` along each input component's unit tangent, output summed. In
  dynamic mode Paddle has no forward-mode AD: that function computes the JVP by the *double backward trick*
  (``_double_backward_trick`` in ``python/paddle/incubate/autograd/functional.py``: the VJP as a function
  of its cotangent, differentiated again with ``create_graph=True``), so it runs the ops' double-grad
  kernels, and raises where one has no grad op of its own (``relu_double_grad``, ``clip_double_grad``);
* graph: the program built as a static graph (``paddle.static.program_guard`` under ``paddle.enable_static()``,
  inputs ``paddle.static.data``), differentiated by ``paddle.static.gradients`` with a cotangent of ones (the
  static autodiff: ``paddle.autograd.ir_backward`` on PIR programs from 3.0, ``paddle.base.backward``
  before) and run by ``paddle.static.Executor`` on the CPU. This is the graph ``paddle.jit.to_static``
  produces; ``to_static`` itself cannot take a parsed program: its AST translator (``full_graph=True``)
  needs the function's source code, and its bytecode translator (SOT, ``full_graph=False``) cannot
  translate kinkcheck's evaluator ("Break graph in closure is not support") and then runs it eagerly,
  silently (with ``STRICT_MODE=1`` it raises instead).

dtypes: float64, float32, float16, bfloat16; a CPU kernel Paddle lacks for a dtype (``The kernel with key
(CPU, ..., float16) of kernel `relu` is not registered``) is :class:`Unavailable`, naming the kernel. Paddle
2.6.2 and 3.0.0 convert a float to bfloat16 by truncation (0.1 → 0.099609375), 3.3.1 to nearest
(0.10009765625): the shards' rounded points record what the release does.
Where Paddle defines a kink's derivative: the grad functors in ``paddle/phi/kernels/funcs/activation_functor.h``
(``ReluGradFunctor``: ``out > 0``) and the elementwise grad kernels in
``paddle/phi/kernels/impl/elementwise_grad_kernel_impl.h`` (``maximum``/``minimum``).
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from kinkcheck.language import expr as ex
from kinkcheck.frameworks.base import Adapter, ImportGuard, ProgramError, Unavailable, \
    by_unit_tangents, check_dtype, check_mode, native_stderr, of_differentiated
from kinkcheck.platforms.isa import this_cpu

GUARD = ImportGuard()
with GUARD:
    import numpy as np

    with warnings.catch_warnings():  # "No ccache found" (paddle/utils/cpp_extension): for building extensions only
        warnings.filterwarnings("ignore", message="No ccache found")
        import paddle

#: Modules an expression may reach (everything else paddle re-exports, such as paddle.io, paddle.static,
#: paddle.jit, paddle.utils or paddle.device, is out of reach). See kinkcheck.language.expr.resolve_names.
MODULES = frozenset(("paddle", "paddle.nn", "paddle.nn.functional", "paddle.tensor", "paddle.linalg"))
#: Packages a resolved function or constant may come from.
ORIGINS = frozenset(("paddle",))

#: Paddle's messages for a dtype an op lacks, each as (pattern, what it says): the eager kernel registry
#: (phi ``KernelFactory::SelectKernelOrThrowError``, named groups place/dtype/op), the PIR static graph's
#: dtype check, the legacy (2.x) static graph's operator registry, and the Python-side dtype checks
#: (``check_variable_and_dtype`` in ``python/paddle/base/data_feeder.py``: bfloat16 reads uint16 there).
_NO_DTYPE = tuple(re.compile(p, re.DOTALL) for p in (
    r"kernel with key \((?P<place>\w+), [^,]*, (?P<dtype>\w+)\) of kernel `(?P<op>\w+)` is not registered",
    r"Check data type error for op: (?P<op>\w+), input: \w+, \w+\.dtype: (?P<dtype>\w+)",
    r"There are no kernels which are registered in the (?P<op>\w+) operator",
    r"The data type of '\w+' in (?P<op>\w+) must be \[[^]]*\], but received (?P<dtype>\w+)",
    r"The data type of input must be one of \[[^]]*\], but got paddle\.(?P<dtype>\w+)",
    r"(?P<dtype>float16|bfloat16) can only be used on GPU.*?\[operator < (?P<op>\w+) > error\]",
))

#: The line of a static-graph error ("In user code:", the user's traceback, then the error) that says what failed.
_USER_CODE_ERROR = re.compile(r"^\s*(\w+Error): (.+)$", re.MULTILINE)

#: Python's message for a keyword a function does not take.
_NO_KEYWORD = re.compile(r"^(\w+)\(\) got an unexpected keyword argument '(\w+)'")

#: What Paddle's executor logs (glog, on standard error) when a oneDNN kernel fails; its exception says only
#: "std::exception". oneDNN picks kernels by the CPU's instruction set: 3.3.1's static graph runs ``abs`` in
#: bfloat16 on an AVX-512 CPU and raises this on an AVX2 one (or under ``ONEDNN_MAX_CPU_ISA=AVX2``).
_ONEDNN_FAILED = re.compile(r"onednn_op\.(\w+) raises an exception (dnnl::error)")

#: Paddle's message when the double backward trick (forward mode) needs the grad of a grad op that has none
#: (2.x writes "gradop").
_NO_GRAD_OP = re.compile(r"The Op (\w+) doesn't have any grad ?op")


def _unavailable(err: BaseException, dtype: str, mode: str) -> Unavailable | None:
    """Paddle's error as :class:`Unavailable` when it says an op lacks the dtype (on the CPU, in a static
    graph), or, in forward mode, that an op has no grad op for the double backward trick; else None."""
    text = str(err)
    for pattern in _NO_DTYPE:
        m = pattern.search(text)
        if m is not None:
            found = m.groupdict()
            kind = found.get("dtype") or dtype
            kind = "bfloat16" if kind == "uint16" else kind
            op = f" `{found['op']}`" if found.get("op") else ""
            where = f"{found['place']} kernel" if found.get("place") else \
                "static-graph kernel" if mode == "graph" else "implementation"
            return Unavailable(f"paddle {paddle.__version__} has no {kind} {where} for{op or ' this program'}")
    m = _NO_KEYWORD.search(text) if isinstance(err, TypeError) else None
    if m is not None:  # a keyword this release's function lacks (paddle.median(mode=) is 3.0's)
        return Unavailable(f"{m.group(1)}() has no keyword {m.group(2)!r} in paddle {paddle.__version__}")
    m = _NO_GRAD_OP.search(text) if mode == "forward" else None
    if m is not None:
        return Unavailable(f"paddle.incubate.autograd.jvp differentiates `{m.group(1)}` (the JVP by double "
                           f"backward), which has no grad op in paddle {paddle.__version__}")
    return None


def _tensor_like(out: Any) -> bool:
    """A ``paddle.Tensor``, or in a static graph the value standing for one (``pir.Value``, 2.x ``Variable``)."""
    if isinstance(out, paddle.Tensor):
        return True
    return not paddle.in_dynamic_mode() and hasattr(out, "dtype") and hasattr(out, "shape") and \
        not isinstance(out, (bool, int, float))


class PaddleAdapter(Adapter):
    """The :class:`kinkcheck.frameworks.base.Adapter` for PaddlePaddle (dynamic-graph mode, CPU)."""

    name = "paddle"
    guard = GUARD
    modules, origins = MODULES, ORIGINS
    cuda_refusal = "kinkcheck measures paddle on the CPU only"

    def _place(self, device: str) -> Any:
        self._cpu_only(device)
        return paddle.CPUPlace()

    @staticmethod
    def _check_output(out: Any) -> Any:
        """``out`` when it is a floating-point tensor (eager) or value (static graph), else :class:`ProgramError`."""
        if not _tensor_like(out):
            raise ProgramError(f"program returned {type(out).__name__}, not a paddle.Tensor")
        if out.dtype not in (paddle.float64, paddle.float32, paddle.float16, paddle.bfloat16):
            raise ProgramError(f"program returned a {out.dtype} tensor, which has no gradient")
        return out

    def _tensors(self, at: Mapping[str, Any], dtype: str, device: str, ints: Sequence[str] = (),
                 diff: Sequence[str] = ()) -> list[Any]:
        """The point's tensors: ``ints`` as int64, others of ``dtype``; ``diff`` ones with ``stop_gradient=False``."""
        check_dtype(dtype)
        place = self._place(device)
        return [paddle.to_tensor(at[k], dtype="int64" if k in ints else dtype, place=place,
                                 stop_gradient=k not in diff) for k in at]

    def _run(self, tree: ex.Node, f: Any, at: Mapping[str, Any], dtype: str, device: str, mode: str,
             diff: tuple[str, ...], ints: tuple[str, ...]) -> dict[str, Any]:
        """See :meth:`kinkcheck.frameworks.base.Adapter.gradient`; :meth:`_modes` with Paddle's errors read.

        Raises
        ------
        Unavailable
            A name or keyword this release lacks, ``paddle.incubate.autograd.jvp`` missing, an op without
            the dtype (Paddle's "kernel ... is not registered" and its static-graph and Python-side dtype
            checks), or, in forward mode, an op whose grad has no grad op (the double backward trick).
        """
        try:
            with native_stderr() as logged:
                return self._modes(f, list(at), at, dtype, device, mode, diff, ints)
        except Exception as err:  # re-raised unless it says the dtype or a grad op is missing
            failed = next((m for m in map(_ONEDNN_FAILED.search, logged) if m is not None), None)
            if failed is not None:  # the CPU's doing: the framework's error on this CPU, in one line
                what = f"has no {dtype} `{failed.group(1)}` kernel for" if dtype in ("float16", "bfloat16") else \
                    f"`{failed.group(1)}` failed in {dtype} on"
                raise RuntimeError(f"paddle {paddle.__version__}'s oneDNN {what} {this_cpu()}: "
                                   f"{failed.group(2)}") from None
            missing = _unavailable(err, dtype, mode)
            if missing is not None:
                raise missing from None
            found = _USER_CODE_ERROR.findall(str(err)) if str(err).lstrip().startswith("In user code:") else []
            if found:  # the first line says only "In user code:"; a shard's error cell keeps one line
                raise RuntimeError(": ".join(found[-1])) from None
            raise

    def _modes(self, f: Any, keys: list[str], at: Mapping[str, Any], dtype: str, device: str, mode: str,
             diff: Sequence[str], ints: Sequence[str]) -> dict[str, Any]:
        """The gradient of ``f(*inputs)`` (all of ``at``'s inputs, positionally) w.r.t. ``diff`` in ``mode``."""
        base = self._tensors(at, dtype, device, ints, diff if mode != "forward" else ())
        pos = [keys.index(k) for k in diff]
        if mode == "forward":
            jvp = self._jvp()
            wbase = [base[i] for i in pos]

            f_wrt = of_differentiated(f, base, pos)

            def total(*w: Any) -> Any:
                return f_wrt(*w).sum()

            def along(k: int, idx: tuple[int, ...]) -> Any:
                tangents = []
                for j, b in enumerate(wbase):
                    t = np.zeros(tuple(b.shape), dtype=np.float64)
                    if j == k:
                        t[idx] = 1
                    tangents.append(paddle.to_tensor(t, dtype=dtype, place=b.place))
                return jvp(total, wbase, tangents)[1].astype("float64")

            return by_unit_tangents([(k, tuple(b.shape)) for k, b in zip(diff, wbase)], along)
        if mode == "graph":
            return self._graph(f, keys, at, dtype, diff, ints)
        out = self._check_output(f(*base))
        leaves = [base[i] for i in pos]
        grads = paddle.grad([out], leaves, grad_outputs=[paddle.ones_like(out)], allow_unused=True)
        return {k: (paddle.zeros(b.shape, dtype="float64") if g is None else g.astype("float64")).tolist()
                for k, g, b in zip(diff, grads, leaves)}

    @staticmethod
    def _jvp() -> Any:
        incubate = getattr(getattr(paddle, "incubate", None), "autograd", None)
        jvp = getattr(incubate, "jvp", None)
        if jvp is None:
            raise Unavailable(f"paddle.incubate.autograd.jvp does not exist in paddle {paddle.__version__}")
        return jvp

    def _graph(self, f: Any, keys: list[str], at: Mapping[str, Any], dtype: str, diff: Sequence[str],
               ints: Sequence[str]) -> dict[str, Any]:
        """``graph`` mode: ``f`` built into a static program, ``paddle.static.gradients`` with ones, one run.

        bfloat16 (NumPy has none to feed) enters as float32 data cast in the graph; the gradient is taken
        w.r.t. the float32 data, through the cast (exact: the fed point is already rounded to bfloat16).
        """
        feed_dtype = "float32" if dtype == "bfloat16" else dtype
        # the point rounded as eagerly (to_tensor), so the in-graph cast is exact: 2.6 truncates to bfloat16
        feed = {k: np.asarray(at[k], dtype=np.int64) if k in ints else
                paddle.to_tensor(at[k], dtype=dtype).astype(feed_dtype).numpy() for k in keys}
        paddle.enable_static()
        try:
            main, startup = paddle.static.Program(), paddle.static.Program()
            with paddle.static.program_guard(main, startup):
                data = {k: paddle.static.data(k, shape=list(np.shape(at[k])), dtype="int64" if k in ints
                                              else feed_dtype) for k in keys}
                for k in diff:
                    data[k].stop_gradient = False
                args = [paddle.cast(data[k], dtype) if dtype != feed_dtype and k not in ints else data[k]
                        for k in keys]
                out = f(*args)
                # target_gradients None: ones of the output's shape (ones_like warns in a PIR graph)
                grads = paddle.static.gradients([out], [data[k] for k in diff], target_gradients=None)
            exe = paddle.static.Executor(paddle.CPUPlace())
            exe.run(startup)
            missing = [k for k, g in zip(diff, grads) if g is None]
            values = exe.run(main, feed=feed, fetch_list=[g for g in grads if g is not None])
        finally:
            paddle.disable_static()
        values = iter(values)
        return {k: (np.zeros(np.shape(at[k])) if k in missing else np.asarray(next(values), dtype=np.float64)).tolist()
                for k in diff}

    def callable_gradient(
        self, fn: Any, at: Mapping[str, Any], dtype: str = "float64", device: str = "cpu", mode: str = "reverse"
    ) -> dict[str, Any]:
        """See :meth:`kinkcheck.frameworks.base.Adapter.callable_gradient`; ``mode`` is any of :attr:`modes`."""
        check_mode(mode, self.modes)
        check_dtype(dtype)
        keys = list(at)

        def f(*args: Any) -> Any:
            out = fn(*args)
            if not _tensor_like(out):  # a Python float would differentiate to 0 silently
                raise TypeError(f"the function returned a {type(out).__name__}, not a paddle.Tensor")
            return out

        return self._modes(f, keys, at, dtype, device, mode, tuple(keys), ())

    def _round_trip(self, dtype: str) -> Any:
        return lambda v: paddle.to_tensor(v, dtype=dtype).astype("float64").tolist()



load = PaddleAdapter.load
