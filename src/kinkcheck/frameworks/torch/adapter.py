"""PyTorch adapter: evaluates call expressions with ``torch`` tensors.

Modes (:data:`kinkcheck.vocabulary.MODE_INFO`): reverse is ``y.backward(torch.ones_like(y))`` (the VJP
with ones, what ``y.sum().backward()`` gives); functional is ``torch.func.grad``; forward is
``torch.func.jvp`` and forward-ad ``torch.autograd.forward_ad``, along each input component's unit tangent
with the output summed; inductor and aot_eager are ``torch.compile`` backends (reverse through the compiled
graph, many programs compiled together, see :meth:`TorchAdapter.compiled_gradients`); vmap is
``torch.func.vmap(torch.func.grad(...))``; second-order is double backward (``H @ 1``).
Where PyTorch defines a kink's derivative: ``tools/autograd/derivatives.yaml`` (e.g. ``clamp``,
``maximum``, ``abs``) and ``torch/csrc/autograd/FunctionsManual.cpp``.
"""

from __future__ import annotations

import contextlib
import functools
import platform
from collections.abc import Mapping, Sequence
from typing import Any

from kinkcheck.frameworks.base import (COMPILED_MODES, Adapter, DeviceAbsent, FrameworkUnavailable, ImportGuard,
                                       ProgramError, Unavailable, by_unit_tangents, check_dtype, check_mode,
                                       nvidia_driver, of_differentiated, processor_name, returned, short_error,
                                       split_inputs)
from kinkcheck.language import expr as ex

GUARD = ImportGuard()
with GUARD:
    import torch


#: Modules an expression may reach; everything else a framework module re-exports (os, sys, builtins,
#: serialization) is out of reach. See kinkcheck.language.expr.resolve_names.
MODULES = frozenset(("torch", "torch.nn", "torch.nn.functional", "torch.linalg", "torch.special", "torch.fft"))
#: Packages a resolved function or constant may come from.
ORIGINS = frozenset(("torch",))


def _mps_available() -> bool:
    """Whether PyTorch's MPS backend (the ``metal`` device) is usable: ``torch.backends.mps`` exists from 1.12."""
    mps = getattr(torch.backends, "mps", None)
    return bool(mps is not None and mps.is_available())


def _placed(tdev: Any) -> Any:
    """The context in which a program runs on ``tdev``: PyTorch's default-device context (``with torch.device(...)``,
    torch >= 2.0), so that every tensor the program builds itself (``torch.tensor([0, 0, 1])``, ``torch.ones(1)``)
    is made on the device probed, as its inputs are, in every mode (``torch.compile`` traces under it too). On the
    CPU nothing is entered: CPU measurements stay exactly as they were.

    Seen without it (the probe of 2d3abce on an NVIDIA H200): a program's constants were built on the CPU beside
    CUDA inputs, and PyTorch raised "Expected all tensors to be on the same device", which is the probe's doing, not
    PyTorch's. :meth:`TorchAdapter._device` refuses a device other than the CPU on a release without the context.
    """
    return contextlib.nullcontext() if tdev.type == "cpu" else tdev


def _made_on(names: dict[str, Any], tdev: Any) -> dict[str, Any]:
    """``names`` with every tensor factory (``torch.tensor``, ``torch.ones``, ...: the functions PyTorch's
    default-device context redirects, ``torch.utils._device._device_constructors``) given ``device=tdev`` where the
    program names no device; on the CPU, ``names`` as they are.

    For ``torch.compile``: dynamo ignores the default-device context for factory calls (pytorch/pytorch#175953,
    #151202), so under :func:`_placed` a compiled program still made ``torch.tensor([0, 0, 1])`` on the CPU beside
    CUDA inputs ("Unhandled FakeTensor Device Propagation ... found two different devices cuda:0, cpu", seen on an
    NVIDIA H200 with torch 2.11.0): the probe's doing, not what the program computes on the device. The device is
    passed explicitly, as a user's code for CUDA does (``device=x.device``).
    """
    if tdev.type == "cpu":
        return names

    try:
        from torch.utils._device import _device_constructors
        factories = _device_constructors()
    except ImportError:  # torch < 2.0 is refused off the CPU before this (TorchAdapter._device)
        return names

    # a partial: dynamo traces it as the factory call it is; a device the program names wins over the keyword
    return {k: functools.partial(v, device=tdev) if _is_factory(v, factories) else v for k, v in names.items()}


def _is_factory(fn: Any, factories: Any) -> bool:
    try:
        return fn in factories
    except TypeError:  # an unhashable name (a module, a class instance)
        return False


def _to_lists(keys: Sequence[str], grads: Sequence[Any], like: Sequence[Any]) -> dict[str, Any]:
    """Gradients (None for an input the output does not depend on: zeros) → input name → nested floats."""
    # clone(): some backward formulas (torch.sgn) return a storage-less "zero tensor".
    return {k: (torch.zeros_like(b) if g is None else g).detach().to("cpu", torch.float64).clone().tolist()
            for k, g, b in zip(keys, grads, like)}


def _tensors(at: Mapping[str, Any], keys: Sequence[str], ints: Sequence[str], tdtype: Any, tdev: Any,
             requires_grad: Sequence[str] = ()) -> list[Any]:
    """The point's tensors: ``ints`` as int64, the others of ``tdtype``; ``requires_grad`` ones as leaves."""
    return [torch.tensor(at[k], dtype=torch.int64 if k in ints else tdtype, device=tdev,
                         requires_grad=k in requires_grad) for k in keys]


def _callable_modes(f: Any, keys: Sequence[str], base: Sequence[Any], mode: str) -> dict[str, Any]:
    """The derivative of ``f(*base).sum()`` in an eager ``mode`` (:data:`kinkcheck.vocabulary.MODE_INFO`):
    input name → nested floats.

    The modes' definitions are :meth:`TorchAdapter.gradient`'s, for a Python function of every input (what
    ``kinkcheck check`` differentiates) rather than a parsed program.
    """
    if mode in ("reverse", "second-order"):
        leaves = [b.clone().requires_grad_(True) for b in base]
        out = f(*leaves).sum()
        if mode == "reverse":
            out.backward()
            return _to_lists(keys, [lf.grad for lf in leaves], base)
        grads = torch.autograd.grad(out, leaves, create_graph=True, allow_unused=True)
        zero = torch.zeros((), dtype=base[0].dtype, device=base[0].device)
        total = sum((g.sum() for g in grads if g is not None and g.requires_grad), zero)
        if not total.requires_grad:  # every gradient is a constant: H = 0
            return _to_lists(keys, [None] * len(keys), base)
        return _to_lists(keys, torch.autograd.grad(total, leaves, allow_unused=True), base)
    func = getattr(torch, "func", None)
    if func is None and mode != "forward-ad":
        raise Unavailable(f"torch.func does not exist in torch {torch.__version__} (added in 2.0)")
    argnums = tuple(range(len(keys)))
    if mode == "functional":
        return _to_lists(keys, func.grad(lambda *a: f(*a).sum(), argnums=argnums)(*base), base)
    if mode == "vmap":
        grads = func.vmap(func.grad(lambda *a: f(*a).sum(), argnums=argnums))(*[torch.stack([b, b]) for b in base])
        return _to_lists(keys, [g[0] for g in grads], base)
    # forward, forward-ad: the JVP along each input component's unit tangent
    fwd = torch.autograd.forward_ad

    def along(i: int, idx: tuple[int, ...]) -> Any:
        tangents = [torch.zeros_like(b) for b in base]
        tangents[i][idx] = 1
        if mode == "forward":
            _, jvp = func.jvp(lambda *a: f(*a).sum(), tuple(base), tuple(tangents))
        else:
            with fwd.dual_level():
                jvp = fwd.unpack_dual(f(*[fwd.make_dual(b, t) for b, t in zip(base, tangents)]).sum()).tangent
        return 0.0 if jvp is None else jvp.detach().to("cpu", torch.float64)

    return by_unit_tangents([(k, tuple(b.shape)) for k, b in zip(keys, base)], along)


def _fx_graph(fn: Any, keys: Sequence[str]) -> Any:
    """``fn`` of one positional input per name in ``keys``, recorded by ``torch.fx`` as a ``GraphModule`` (None
    when it cannot be: a branch on a traced value, a call fx cannot record)."""
    import torch.fx

    tracer = torch.fx.Tracer()
    tracer.graph, tracer.root, tracer.tensor_attrs = torch.fx.Graph(), torch.nn.Module(), {}
    try:
        out = fn(*[tracer.create_proxy("placeholder", k, (), {}) for k in keys])
        tracer.create_node("output", "output", (tracer.create_arg(out),), {})
        graph = torch.fx.GraphModule(tracer.root, tracer.graph)
    except Exception:  # noqa: BLE001 - not recordable: the interpreter is traced instead
        return None
    # A tensor the program builds from no input (torch.ones(1)) is made while fx records and kept as a
    # constant attribute, which dynamo would lift into a graph input where it captures the construction
    # itself (and inductor may fold it): not the same graph, so the interpreter is traced instead.
    return None if any(n.op == "get_attr" for n in graph.graph.nodes) else graph


def _same_bits(a: Any, b: Any) -> bool:
    """Whether two tensors (or two Nones) are the same values bit for bit where it matters: dtype, shape, every
    element, the sign of zeros and infinities, NaN where NaN (its payload aside); complex parts alike."""
    if a is None or b is None:
        return a is None and b is None
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.is_complex():
        a, b = torch.view_as_real(a), torch.view_as_real(b)
    if not a.is_floating_point():
        return torch.equal(a, b)
    nan = a.isnan()
    if not torch.equal(nan, b.isnan()):
        return False
    a, b = a.masked_fill(nan, 0), b.masked_fill(nan, 0)
    return torch.equal(a, b) and torch.equal(a.signbit(), b.signbit())


def _compile_error(err: BaseException) -> BaseException:
    """The innermost error of a failed compilation (dynamo wraps the backend's in BackendCompilerFailed)."""
    inner = err
    while getattr(inner, "inner_exception", None) is not None:
        inner = inner.inner_exception
    if inner is not err:
        return RuntimeError(f"torch.compile failed: {short_error(inner)}")
    return err


class TorchAdapter(Adapter):
    """The :class:`kinkcheck.frameworks.base.Adapter` for PyTorch."""

    name = "torch"
    guard = GUARD
    modules, origins = MODULES, ORIGINS

    def devices(self) -> list[str]:
        """``cpu``, ``cuda`` where ``torch.cuda.is_available()``, ``metal`` where ``torch.backends.mps.is_available()``
        (Apple silicon's GPU through PyTorch's MPS backend, torch >= 1.12)."""
        found = ["cpu"]
        if torch.cuda.is_available():
            found.append("cuda")
        if _mps_available():
            found.append("metal")
        return found

    def device_name(self, device: str) -> str:
        """The accelerator's name (``torch.cuda.get_device_name``; on ``metal`` the Apple chip, which runs the
        GPU), or the platform's processor for ``cpu``."""
        if device == "cuda":
            return str(torch.cuda.get_device_name(0))
        return processor_name()

    def accelerator(self, device: str) -> dict[str, str]:
        """The accelerator of ``device`` for the shard's ``runner``: on ``cuda`` its name, the CUDA (or HIP)
        version the build targets (``torch.version.cuda`` / ``.hip``) and the NVIDIA driver (:func:`nvidia_driver`);
        on ``metal`` the chip and the macOS release, whose Metal framework the MPS backend runs on."""
        if device == "metal":
            return {"accelerator": processor_name(), "metal": f"macOS {platform.mac_ver()[0]}"}
        if device != "cuda":
            return {}
        return {"accelerator": str(torch.cuda.get_device_name(0)), "cuda": str(torch.version.cuda or ""),
                "hip": str(getattr(torch.version, "hip", None) or ""), "driver": nvidia_driver()}

    def settings(self) -> dict[str, str]:
        """The CPU kernels ATen dispatches to (``torch.backends.cpu.get_cpu_capability()``: ``DEFAULT``, ``AVX2``,
        ``AVX512``; capped by ``ATEN_CPU_CAPABILITY``, :mod:`kinkcheck.platforms.isa`), where the release can say (2.1 on)."""
        capability = getattr(getattr(torch.backends, "cpu", None), "get_cpu_capability", None)
        return {"aten_cpu_capability": str(capability())} if callable(capability) else {}

    def _dtype(self, dtype: str) -> Any:
        check_dtype(dtype)
        return getattr(torch, dtype)

    def _device(self, device: str, dtype: str | None = None) -> Any:
        """The ``torch.device`` of a kinkcheck device (``metal`` is ``"mps"``). Raises FrameworkUnavailable for a
        device absent here, :class:`Unavailable` for float64 on ``metal`` (the MPS framework has none: torch
        refuses "Cannot convert a MPS Tensor to float64 dtype"), ExprError for an unknown device."""
        if device == "cuda" and not torch.cuda.is_available():
            raise DeviceAbsent("not measured: no CUDA device")
        if device == "metal":
            if not _mps_available():
                raise DeviceAbsent("not measured: no Metal device (torch.backends.mps.is_available() is "
                                           "False; PyTorch's MPS backend needs Apple silicon and macOS 12.3)")
            if dtype == "float64":
                raise Unavailable("float64 does not exist on Metal: PyTorch's MPS backend has no float64")
            return self._placeable(torch.device("mps"))
        if device == "meta":  # no data, shapes only: what the CPU-only tests of device placement run on
            return self._placeable(torch.device("meta"))
        if device not in ("cpu", "cuda"):
            raise ex.ExprError(f"unknown device {device!r} (known: cpu, cuda, metal)")
        return self._placeable(torch.device(device))

    @staticmethod
    def _placeable(tdev: Any) -> Any:
        """``tdev``, where a program's own tensors can be made on it (:func:`_placed`); FrameworkUnavailable on a
        device other than the CPU in a release without PyTorch's default-device context (torch < 2.0)."""
        if tdev.type != "cpu" and not hasattr(tdev, "__enter__"):
            raise FrameworkUnavailable(
                f"not measured on {tdev.type}: torch {torch.__version__} has no default-device context (`with "
                "torch.device(...)`, added in 2.0), so a program's own constants would stay on the CPU beside inputs "
                f"on {tdev.type}")
        return tdev

    @staticmethod
    def _check_output(out: Any) -> Any:
        if not isinstance(out, torch.Tensor):
            raise ProgramError(f"program returned {type(out).__name__}, not a tensor")
        if not (out.is_floating_point() or out.is_complex()):
            raise ProgramError(f"program returned a {out.dtype} tensor, which has no gradient")
        return out

    def gradient(
        self, tree: ex.Node, at: Mapping[str, Any], dtype: str = "float64", device: str = "cpu", mode: str = "reverse",
        *, wrt: Sequence[str] | None = None, ints: Sequence[str] = (),
    ) -> dict[str, Any]:
        """See :meth:`kinkcheck.frameworks.base.Adapter.gradient`; the result has the ``wrt`` inputs only."""
        check_mode(mode, self.modes)
        diff = split_inputs(at, wrt, ints)
        if mode in COMPILED_MODES:
            (result,) = self.compiled_gradients([(tree, at, diff, tuple(ints))], dtype, device, mode)
            if isinstance(result, BaseException):
                raise result
            return result
        tdtype, tdev = self._dtype(dtype), self._device(device, dtype)
        with _placed(tdev):
            return self._eager_gradient(tree, at, mode, diff, tuple(ints), tdtype, tdev)

    def _eager_gradient(self, tree: ex.Node, at: Mapping[str, Any], mode: str, diff: Sequence[str],
                        ints: Sequence[str], tdtype: Any, tdev: Any) -> dict[str, Any]:
        """:meth:`gradient` in an eager mode, inside :func:`_placed`."""
        names = self._resolve(tree)
        keys = list(at)
        base = _tensors(at, keys, ints, tdtype, tdev)
        pos = [keys.index(k) for k in diff]  # where the differentiated inputs sit among the arguments
        wbase = [base[i] for i in pos]

        def f(*args: Any) -> Any:
            return self._check_output(ex.evaluate(tree, names, dict(zip(keys, args))))

        f_wrt = of_differentiated(f, base, pos)  # the other inputs passed, not differentiated

        if mode == "reverse":
            leaves = [b.clone().requires_grad_(True) for b in wbase]
            out = f_wrt(*leaves)
            out.backward(torch.ones_like(out))
            return _to_lists(diff, [lf.grad for lf in leaves], wbase)
        if mode == "second-order":
            leaves = [b.clone().requires_grad_(True) for b in wbase]
            out = f_wrt(*leaves).sum()
            grads = torch.autograd.grad(out, leaves, create_graph=True, allow_unused=True)
            total = sum((g.sum() for g in grads if g is not None and g.requires_grad),
                        torch.zeros((), dtype=tdtype, device=tdev))
            if not total.requires_grad:  # every gradient is a constant: H = 0
                return _to_lists(diff, [None] * len(diff), wbase)
            return _to_lists(diff, torch.autograd.grad(total, leaves, allow_unused=True), wbase)
        shapes = [(k, tuple(b.shape)) for k, b in zip(diff, wbase)]

        def unit(i: int, idx: tuple[int, ...]) -> list[Any]:
            tangents = [torch.zeros_like(b) for b in wbase]
            tangents[i][idx] = 1
            return tangents

        if mode == "forward-ad":
            fwd = torch.autograd.forward_ad

            def dual(i: int, idx: tuple[int, ...]) -> Any:
                with fwd.dual_level():
                    tangents = unit(i, idx)
                    out = fwd.unpack_dual(f_wrt(*[fwd.make_dual(b, t) for b, t in zip(wbase, tangents)]))
                    return 0.0 if out.tangent is None else out.tangent.sum().to("cpu", torch.float64)

            return by_unit_tangents(shapes, dual)
        func = getattr(torch, "func", None)
        if func is None:
            raise Unavailable(f"torch.func does not exist in torch {torch.__version__} (added in 2.0)")
        argnums = tuple(pos)
        if mode == "functional":
            grads = func.grad(lambda *a: f(*a).sum(), argnums=argnums)(*base)
            return _to_lists(diff, grads, wbase)
        if mode == "vmap":
            batched = [torch.stack([b, b]) for b in base]
            grads = func.vmap(func.grad(lambda *a: f(*a).sum(), argnums=argnums))(*batched)
            return _to_lists(diff, [g[0] for g in grads], wbase)
        # forward: torch.func.jvp along each unit tangent
        def jvp(i: int, idx: tuple[int, ...]) -> Any:
            _, value = func.jvp(lambda *w: f_wrt(*w).sum(), tuple(wbase), tuple(unit(i, idx)))
            return value.detach().to("cpu", torch.float64)

        return by_unit_tangents(shapes, jvp)

    def callable_gradient(
        self, fn: Any, at: Mapping[str, Any], dtype: str = "float64", device: str = "cpu", mode: str = "reverse"
    ) -> dict[str, Any]:
        """See :meth:`kinkcheck.frameworks.base.Adapter.callable_gradient`; ``mode`` is any of :attr:`modes`
        (inductor and aot_eager: ``torch.compile(fn, backend=mode)``, graph breaks allowed, then reverse)."""
        check_mode(mode, self.modes)
        tdtype, tdev = self._dtype(dtype), self._device(device, dtype)
        keys = list(at)
        base = [torch.tensor(at[k], dtype=tdtype, device=tdev) for k in keys]
        run = fn
        if mode in COMPILED_MODES:
            if not hasattr(torch, "compile"):
                raise Unavailable(f"torch.compile does not exist in torch {torch.__version__} (added in 2.0)")
            self._backend_works(mode, tdtype_name=dtype, device=device)
            run = torch.compile(fn, backend=mode)  # dynamo caches by fn's code: one compilation for every point

        def f(*args: Any) -> Any:
            try:
                out = run(*args)
            except Exception as err:
                if run is fn:
                    raise
                raise _compile_error(err) from None  # dynamo's wrapper hides the backend's error
            return returned(out, torch.Tensor, "a torch.Tensor")

        with _placed(tdev):
            return _callable_modes(f, keys, base, "reverse" if mode in COMPILED_MODES else mode)

    def _round_trip(self, dtype: str) -> Any:
        tdtype = self._dtype(dtype)
        return lambda v: torch.tensor(v, dtype=tdtype).to(torch.float64).tolist()

    def compiled_gradients(
        self, items: Sequence[tuple[ex.Node, Mapping[str, Any]]], dtype: str, device: str, mode: str
    ) -> list[dict[str, Any] | BaseException]:
        """Reverse-mode gradients of many programs through ``torch.compile``, compiled together.

        All ``items`` (program tree, point), or (tree, point, differentiated inputs, integer inputs) as in
        :meth:`gradient`'s ``wrt`` and ``ints``, are evaluated by one compiled function returning each program's
        output; ``torch.autograd.backward`` sends ones into each output, so every program gets its own
        gradient, as if compiled alone. One compilation per call instead of one per program and point
        (compiling is what costs: about 2 s per graph with inductor on 2 cores). The batch is compiled with
        ``fullgraph=True``, so nothing silently falls back to eager; when it fails to compile or run, it is
        split in halves until the failing programs are alone, and a program alone is compiled as users
        compile it (``fullgraph=False``: graph breaks run eagerly). Exceptions are returned in their places.
        Each program is first evaluated once eagerly with the expression guard on (see
        :func:`kinkcheck.language.expr.evaluate`); the traced evaluation skips that check, and dynamo traces the program's
        ``torch.fx`` graph where that computes the same (:meth:`_program`): the same captured graph, traced faster.

        Returns
        -------
        list
            Per item, the gradient (input name → nested list of float) or the exception it raised.

        Raises
        ------
        Unavailable
            ``torch.compile`` does not exist (torch < 2.0) or the backend is unknown in this version.
        """
        check_mode(mode, tuple(COMPILED_MODES))
        if not hasattr(torch, "compile"):
            raise Unavailable(f"torch.compile does not exist in torch {torch.__version__} (added in 2.0)")
        try:
            torch.compile(lambda v: v, backend=mode)
        except RuntimeError as err:  # torch 2.0 on Python 3.11: "Python 3.11+ not yet supported for torch.compile"
            raise Unavailable(f"torch.compile is not usable here: {short_error(err)}") from None
        self._backend_works(mode, tdtype_name=dtype, device=device)
        tdtype, tdev = self._dtype(dtype), self._device(device, dtype)
        with _placed(tdev):  # eager checks, tracing, compiling and the backward pass alike
            return self._compiled_on(items, tdtype, tdev, mode)

    def _compiled_on(self, items: Sequence[tuple[ex.Node, Mapping[str, Any]]], tdtype: Any, tdev: Any,
                     mode: str) -> list[dict[str, Any] | BaseException]:
        """:meth:`compiled_gradients` once the backend works, inside :func:`_placed`."""
        prepared: list[Any] = []
        for tree, at, *spec in items:
            try:
                wrt, ints = (spec[0], tuple(spec[1])) if spec else (None, ())
                diff = split_inputs(at, wrt, ints)
                names = _made_on(self._resolve(tree), tdev)
                with torch.no_grad():  # the guarded evaluation: refusals and eager failures surface here
                    self._check_output(ex.evaluate(tree, names, dict(zip(at, _tensors(at, list(at), ints, tdtype,
                                                                                      tdev)))))
                prepared.append((tree, names, list(at), at, diff, ints))
            except Exception as err:  # noqa: BLE001 - the program's own failure, as in eager mode
                prepared.append(err)
        results: list[Any] = [p if isinstance(p, BaseException) else None for p in prepared]
        todo = [i for i, p in enumerate(prepared) if not isinstance(p, BaseException)]
        # Dynamo alone (backend "eager", no code generation) finds the programs with a graph break cheaply, and
        # an eager backward the programs whose backward fails (no derivative formula, an output without grad):
        # they are compiled one by one, graph breaks allowed, the rest in one graph. One such program in the
        # batch made it fail whole and split in halves down to it, compiling the batch several times over.
        alone = [i for i in todo if not self._traces_whole(prepared[i], tdtype, tdev)
                 or not self._backward_works(prepared[i], tdtype, tdev)]

        self._compiled_batch(prepared, [i for i in todo if i not in alone], results, tdtype, tdev, mode)
        for i in alone:
            self._compiled_batch(prepared, [i], results, tdtype, tdev, mode, fullgraph=False)
        return results

    def _backend_works(self, mode: str, tdtype_name: str, device: str) -> None:
        """Compile one trivial graph with a backward pass; a backend that cannot (no C++ compiler, say) makes
        the whole batch unavailable at once instead of failing program by program."""
        import torch._dynamo

        cache = self.__dict__.setdefault("_backend_ok", {})
        key = (mode, tdtype_name, device)
        if key not in cache:
            torch._dynamo.reset()
            v = torch.ones(2, dtype=self._dtype(tdtype_name), device=self._device(device, tdtype_name),
                           requires_grad=True)
            try:
                torch.compile(lambda a: (a * a).sum(), backend=mode, fullgraph=True)(v).backward()
                cache[key] = None
            except Exception as err:  # noqa: BLE001
                cache[key] = f"torch.compile backend {mode!r} does not work here: {short_error(_compile_error(err))}"
        if cache[key] is not None:
            raise Unavailable(cache[key])

    def _eager_reverse(self, fn: Any, item: Any, tdtype: Any, tdev: Any) -> list[Any]:
        """``fn`` (a prepared program's function) run eagerly at the item's point with ones into its output, as
        the compiled batch runs it: ``[output, gradient of each differentiated input]`` (None where unused)."""
        _, _, keys, at, diff, ints = item
        leaves = _tensors(at, keys, ints, tdtype, tdev, requires_grad=diff)
        out = self._check_output(fn(*leaves))
        torch.autograd.backward([out], [torch.ones_like(out)])
        return [out.detach(), *(lf.grad for k, lf in zip(keys, leaves) if k in diff)]

    def _backward_works(self, item: Any, tdtype: Any, tdev: Any) -> bool:
        """Whether the program's eager reverse pass runs (ones into its output, as the compiled batch does)."""
        tree, names, keys = item[:3]
        try:
            self._eager_reverse(lambda *a: ex.evaluate(tree, names, dict(zip(keys, a)), guard=False), item, tdtype,
                                tdev)
        except Exception:  # noqa: BLE001 - compiled alone, it fails (or not) on its own
            return False
        return True

    def _traces_whole(self, item: Any, tdtype: Any, tdev: Any) -> bool:
        tree, _, keys, at, diff, ints = item
        # Per program, traced once in the first dtype: a graph break comes from the program's code, not its dtype.
        cache = self.__dict__.setdefault("_whole_graph", {})
        key = (ex.unparse(tree), tuple(keys), repr(at), diff, ints)
        if key not in cache:
            cache[key] = self._trace_whole(self._program(item, tdtype, tdev), keys, at, tdtype, tdev, diff, ints)
        return cache[key]

    @staticmethod
    def _trace_whole(fn: Any, keys: Any, at: Any, tdtype: Any, tdev: Any, diff: Any = None,
                     ints: Any = ()) -> bool:
        import torch._dynamo

        torch._dynamo.reset()
        try:
            torch.compile(fn, backend="eager", fullgraph=True)(
                *_tensors(at, keys, ints, tdtype, tdev, requires_grad=keys if diff is None else diff))
        except Exception:  # noqa: BLE001 - a graph break (or a failure the full compile will report)
            return False
        return True

    def _program(self, item: Any, tdtype: Any, tdev: Any) -> Any:
        """The function ``torch.compile`` traces for a prepared program: its ``torch.fx`` graph where one exists
        and computes bit for bit what the program computes eagerly (output and reverse pass, in this dtype);
        else the expression interpreter (:func:`kinkcheck.language.expr.evaluate`).

        Both hand dynamo the same torch calls, so it captures the same graph; the straight-line code of an FX
        graph it traces about twice as fast as the interpreter's recursion (tracing was about a third of a cold
        ``--mode inductor`` probe). A program whose evaluation branches on a value (``bool`` of a proxy), calls
        what ``torch.fx`` cannot record, or builds a tensor from no input (:func:`_fx_graph`) keeps the
        interpreter.
        """
        tree, names, keys, at, diff, ints = item
        cache = self.__dict__.setdefault("_fx_programs", {})
        key = (ex.unparse(tree), tuple(keys), repr(at), diff, ints, str(tdtype), str(tdev))
        if key not in cache:
            def interpreted(*a: Any) -> Any:
                return ex.evaluate(tree, names, dict(zip(keys, a)), guard=False)

            graph = _fx_graph(interpreted, keys)
            cache[key] = graph if graph is not None and self._same_eagerly(graph, interpreted, item, tdtype,
                                                                           tdev) else interpreted
        return cache[key]

    def _same_eagerly(self, graph: Any, interpreted: Any, item: Any, tdtype: Any, tdev: Any) -> bool:
        """Whether ``graph`` and ``interpreted`` give the same output and input gradients (:func:`_same_bits`),
        run eagerly at the item's point in ``tdtype``: ones into the output, as the batch does."""
        try:
            mine = self._eager_reverse(graph, item, tdtype, tdev)
            theirs = self._eager_reverse(interpreted, item, tdtype, tdev)
        except Exception:  # noqa: BLE001 - the batch reports the program's own failure
            return False
        return len(mine) == len(theirs) and all(_same_bits(a, b) for a, b in zip(mine, theirs))

    def _compiled_batch(self, prepared: list[Any], todo: list[int], results: list[Any], tdtype: Any, tdev: Any,
                        mode: str, fullgraph: bool = True) -> None:
        if not todo:
            return
        import torch._dynamo

        torch._dynamo.reset()  # a fresh cache: no recompile limit, no guards left by the previous batch
        bases = [_tensors(prepared[i][3], prepared[i][2], prepared[i][5], tdtype, tdev) for i in todo]
        leaves = [[b.clone().requires_grad_(True) if k in prepared[i][4] else b for k, b in zip(prepared[i][2], bs)]
                  for i, bs in zip(todo, bases)]
        flat = [lf for ls in leaves for lf in ls]
        sizes = [len(ls) for ls in leaves]
        check = self._check_output

        programs = [self._program(prepared[i], tdtype, tdev) for i in todo]

        def run_all(*args: Any) -> tuple[Any, ...]:
            outs, pos = [], 0
            for fn, n in zip(programs, sizes):
                outs.append(check(fn(*args[pos:pos + n])))
                pos += n
            return tuple(outs)

        try:
            compiled = torch.compile(run_all, backend=mode, fullgraph=fullgraph)
            outs = compiled(*flat)
            torch.autograd.backward(list(outs), [torch.ones_like(o) for o in outs])
        except Exception as err:  # noqa: BLE001 - find the program(s) that fail, alone
            if len(todo) == 1:
                if fullgraph:  # alone, compile it as a user would: graph breaks allowed
                    self._compiled_batch(prepared, todo, results, tdtype, tdev, mode, fullgraph=False)
                else:
                    results[todo[0]] = _compile_error(err)
                return
            half = len(todo) // 2
            self._compiled_batch(prepared, todo[:half], results, tdtype, tdev, mode)
            self._compiled_batch(prepared, todo[half:], results, tdtype, tdev, mode)
            return
        for i, ls, bs in zip(todo, leaves, bases):
            keys, diff = prepared[i][2], prepared[i][4]
            results[i] = _to_lists(diff, [lf.grad for k, lf in zip(keys, ls) if k in diff],
                                   [b for k, b in zip(keys, bs) if k in diff])


load = TorchAdapter.load
