"""The PyTorch kink-hit counter (:mod:`kinkcheck.kinkhits` says what a kink hit is): a
``torch.overrides.TorchFunctionMode`` that sees every call of a torch function, functional or method, and counts
the elements of each kinked call's input that sit exactly on its kink. Imports torch only when it counts."""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kinkcheck.kinkhits import Site, ask_site

__all__ = ["MODEL", "TORCH_KINKED", "TorchHitCounter", "census_names", "first_layer_shift", "hits_at", "is_model", "model_passes",
           "torch_program", "torch_question"]


def _arg(args: Sequence[Any], kwargs: dict[str, Any], pos: int, name: str, default: Any = None) -> Any:
    if name in kwargs:
        return kwargs[name]
    return args[pos] if len(args) > pos else default


def _eq_count(x: Any, *values: Any) -> tuple[int, int]:
    """Elements of tensor ``x`` (broadcast against tensor ``values``, as the operation does) and how many
    equal one of ``values`` (numbers or tensors; None ignored)."""
    import torch

    tensors = [v for v in values if isinstance(v, torch.Tensor)]
    if tensors:
        x = torch.broadcast_tensors(x, *tensors)[0]
    hit = torch.zeros(x.shape, dtype=torch.bool, device=x.device)
    for v in values:
        if v is not None:
            hit = hit | (x == v)
    return x.numel(), int(hit.sum())


def _ties(x: Any, dim: Any = None, largest: bool = True) -> tuple[int, int]:
    """Slices of ``x`` reduced over ``dim`` (all of it when None) and how many attain their extreme twice or more."""
    import torch

    if dim is None:
        x = x.reshape(1, -1)
        dims: tuple[int, ...] = (1,)
    else:
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
    ext = torch.amax(x, dim=dims, keepdim=True) if largest else torch.amin(x, dim=dims, keepdim=True)
    count = (x == ext).sum(dim=dims)
    return count.numel(), int((count > 1).sum())


def _pool_ties(x: Any, args: Sequence[Any], kwargs: dict[str, Any], nd: int) -> tuple[int, int] | str:
    """Windows of a max-pool over the last ``nd`` dimensions and how many hold a tied maximum; a reason (str)
    where the windows are not the plain ``unfold`` ones (``ceil_mode``)."""
    import torch

    if _arg(args, kwargs, 5, "ceil_mode", False):
        return "ceil_mode=True: the partial windows are not inspected"
    k = _arg(args, kwargs, 1, "kernel_size")
    stride = _arg(args, kwargs, 2, "stride") or k
    pad = _arg(args, kwargs, 3, "padding", 0)
    dil = _arg(args, kwargs, 4, "dilation", 1)

    def tup(v: Any) -> tuple[int, ...]:
        return tuple(v) if isinstance(v, (tuple, list)) else (int(v),) * nd

    k, stride, pad, dil = tup(k), tup(stride), tup(pad), tup(dil)
    if any(pad):
        pads = [p for q in reversed(pad) for p in (q, q)]
        x = torch.nn.functional.pad(x, pads, value=float("-inf"))
    base = x.dim() - nd  # the first pooled dimension; unfold keeps it there and appends the window at the end
    for d in range(nd):
        x = x.unfold(base + d, k[d] + (k[d] - 1) * (dil[d] - 1), stride[d])
    windows = x.reshape(*x.shape[:base + nd], -1)  # (..., out_1, …, out_nd, every element of the window)
    if any(d > 1 for d in dil):  # keep the dilated window's own elements only
        idx = torch.zeros(windows.shape[-1], dtype=torch.bool).reshape(
            *[k[d] + (k[d] - 1) * (dil[d] - 1) for d in range(nd)])
        sl = tuple(slice(None, None, dil[d]) for d in range(nd))
        idx[sl] = True
        windows = windows[..., idx.reshape(-1)]
    ext = windows.amax(dim=-1, keepdim=True)
    count = (windows == ext).sum(dim=-1)
    return count.numel(), int((count > 1).sum())


def _not_inspected(a: Sequence[Any], k: dict[str, Any]) -> str:
    return "adaptive or fractional pooling windows are not inspected"


def _torch_rules() -> dict[str, tuple[str, Callable[[Sequence[Any], dict[str, Any]], tuple[int, int] | str]]]:
    """Function name → (kink, count(args, kwargs)); the names of ``torch``, ``torch.nn.functional`` and
    ``torch.Tensor`` functions as ``__torch_function__`` sees them."""

    def at(*defaults: tuple[int, str, Any]) -> Callable[[Sequence[Any], dict[str, Any]], tuple[int, int]]:
        return lambda a, k: _eq_count(a[0], *[_arg(a, k, pos, name, d) for pos, name, d in defaults])

    zero = lambda a, k: _eq_count(a[0], 0)  # noqa: E731
    alpha_zero = lambda a, k: _eq_count(a[0], 0) if _arg(a, k, 1, "alpha", 1.0) != 1.0 else (a[0].numel(), 0)  # noqa: E731

    def shrink(a: Sequence[Any], k: dict[str, Any]) -> tuple[int, int]:
        lam = _arg(a, k, 1, "lambd", 0.5)
        return _eq_count(a[0], lam, -lam)

    def tie(a: Sequence[Any], k: dict[str, Any]) -> tuple[int, int]:
        import torch

        x, y = torch.broadcast_tensors(a[0], torch.as_tensor(_arg(a, k, 1, "other"), device=a[0].device))
        return x.numel(), int((x == y).sum())

    def reduction(largest: bool) -> Callable[[Sequence[Any], dict[str, Any]], tuple[int, int]]:
        def count(a: Sequence[Any], k: dict[str, Any]) -> tuple[int, int]:
            import torch

            if isinstance(_arg(a, k, 1, "other"), torch.Tensor):  # torch.max(a, b): elementwise, a tie is a == b
                return tie(a, k)
            return _ties(a[0], _arg(a, k, 1, "dim"), largest)
        return count

    return {
        "relu": ("x = 0", zero), "relu_": ("x = 0", zero), "leaky_relu": ("x = 0", zero), "prelu": ("x = 0", zero),
        "rrelu": ("x = 0", zero), "selu": ("x = 0", zero), "elu": ("x = 0", alpha_zero),
        "celu": ("x = 0", alpha_zero),
        "relu6": ("x = 0 or 6", lambda a, k: _eq_count(a[0], 0, 6)),
        "hardtanh": ("x at min_val or max_val", at((1, "min_val", -1.0), (2, "max_val", 1.0))),
        "hardsigmoid": ("x = ±3", lambda a, k: _eq_count(a[0], -3, 3)),
        "hardswish": ("x = ±3", lambda a, k: _eq_count(a[0], -3, 3)),
        "clamp": ("x at a bound", at((1, "min", None), (2, "max", None))),
        "clip": ("x at a bound", at((1, "min", None), (2, "max", None))),
        "clamp_": ("x at a bound", at((1, "min", None), (2, "max", None))),
        "clamp_min": ("x at the bound", at((1, "min", None))),
        "clamp_max": ("x at the bound", at((1, "max", None))),
        "threshold": ("x = threshold", at((1, "threshold", None))),
        "hardshrink": ("|x| = lambd", shrink), "softshrink": ("|x| = lambd", shrink),
        "abs": ("x = 0", zero), "absolute": ("x = 0", zero),
        "maximum": ("tie", tie), "minimum": ("tie", tie), "fmax": ("tie", tie), "fmin": ("tie", tie),
        "max": ("tie", reduction(True)), "min": ("tie", reduction(False)),
        "amax": ("tie", lambda a, k: _ties(a[0], _arg(a, k, 1, "dim"), True)),
        "amin": ("tie", lambda a, k: _ties(a[0], _arg(a, k, 1, "dim"), False)),
        "max_pool1d": ("tie in a window", lambda a, k: _pool_ties(a[0], a, k, 1)),
        "max_pool2d": ("tie in a window", lambda a, k: _pool_ties(a[0], a, k, 2)),
        "max_pool3d": ("tie in a window", lambda a, k: _pool_ties(a[0], a, k, 3)),
        "max_pool1d_with_indices": ("tie in a window", lambda a, k: _pool_ties(a[0], a, k, 1)),
        "max_pool2d_with_indices": ("tie in a window", lambda a, k: _pool_ties(a[0], a, k, 2)),
        "max_pool3d_with_indices": ("tie in a window", lambda a, k: _pool_ties(a[0], a, k, 3)),
        "adaptive_max_pool1d": ("tie in a window", _not_inspected), "adaptive_max_pool2d": ("tie in a window",
                                                                                           _not_inspected),
        "adaptive_max_pool3d": ("tie in a window", _not_inspected),
        "fractional_max_pool2d": ("tie in a window", _not_inspected),
        "fractional_max_pool3d": ("tie in a window", _not_inspected),
    }


#: The PyTorch functions :class:`TorchHitCounter` counts (by name) and the kink each checks.
TORCH_KINKED: dict[str, str] = {name: kink for name, (kink, _) in _torch_rules().items()}


def torch_program(func: Any) -> str:
    """The public dotted name of a function ``__torch_function__`` receives: ``torch.nn.functional.relu``,
    ``torch.relu``, ``torch.Tensor.clamp`` (a method: no module)."""
    name = getattr(func, "__name__", str(func))
    module = getattr(func, "__module__", None)
    if module in (None, "torch._C", "torch._tensor"):
        return f"torch.Tensor.{name}"
    if module.startswith("torch._C._nn"):
        return f"torch.nn.functional.{name}"
    return f"{module}.{name}"


# --------------------------------------------------------------------------- the question a call asks


def _caller() -> str:
    """``file:line`` of the innermost frame outside torch and kinkcheck: where the user's code made the call."""
    import torch

    skip = (os.path.dirname(torch.__file__), os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    frame = sys._getframe(1)
    while frame is not None:
        path = os.path.abspath(frame.f_code.co_filename)
        if not path.startswith(skip) and not path.startswith("<"):
            return f"{os.path.relpath(path) if not os.path.relpath(path).startswith('..') else path}:{frame.f_lineno}"
        frame = frame.f_back
    return ""


def _literal(v: Any) -> str | None:
    """A Python number, bool or None as program text; None for anything else (a tensor)."""
    if v is None or isinstance(v, bool):
        return repr(v)
    if isinstance(v, (int, float)):
        return repr(v)
    return None


#: In-place functions ask the question of their out-of-place twin (the same gradient; an in-place call on a
#: leaf that requires grad raises).
_OUT_OF_PLACE = {"relu_": "relu", "clamp_": "clamp"}
#: Where each function's kink is, by its arguments: (position, name, default) of each kink value, in order.
_KINK_ARGS: dict[str, tuple[tuple[int, str, Any], ...]] = {
    "hardtanh": ((1, "min_val", -1.0), (2, "max_val", 1.0)), "clamp": ((1, "min", None), (2, "max", None)),
    "clip": ((1, "min", None), (2, "max", None)), "clamp_": ((1, "min", None), (2, "max", None)),
    "clamp_min": ((1, "min", None),), "clamp_max": ((1, "max", None),), "threshold": ((1, "threshold", None),),
}
_KINK_AT: dict[str, tuple[float, ...]] = {"relu6": (0.0, 6.0), "hardsigmoid": (-3.0, 3.0), "hardswish": (-3.0, 3.0)}
_AT_ZERO = {"relu", "relu_", "leaky_relu", "selu", "elu", "celu", "abs", "absolute"}
_TIES = {"maximum", "minimum", "fmax", "fmin"}
_REDUCTIONS = {"max", "min", "amax", "amin"}


def _defaults(func: Any) -> dict[str, Any]:
    """The keyword defaults of a Python-level torch function (``torch.nn.functional``); none for a builtin."""
    import inspect  # slow to import

    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return {}
    return {p.name: p.default for p in params if p.default is not inspect.Parameter.empty}


def _tie_values(x: Any, y: Any) -> tuple[float, float]:
    """The values (signs of zero kept) of the first tied element pair of ``x`` and ``y`` (as the operation
    broadcasts them); ``(0.0, 0.0)`` where none ties (the question then asks a tie at 0)."""
    import torch

    try:
        a, b = torch.broadcast_tensors(x, torch.as_tensor(y, device=x.device))
        where = ((a == b) & ~torch.isnan(a)).reshape(-1).nonzero()
    except (RuntimeError, TypeError):
        return 0.0, 0.0
    if not where.numel():
        return 0.0, 0.0
    i = int(where[0])
    return float(a.reshape(-1)[i]), float(b.reshape(-1)[i])


def _extreme_tie(x: Any, dim: Any, largest: bool) -> tuple[float, int]:
    """The extreme of the first slice of ``x`` (reduced over ``dim``, all of it when None) that attains it twice or
    more, and how many times it does; ``(1.0, 2)`` where none does (the question then asks a tie of two ones)."""
    import torch

    try:
        flat = x.reshape(1, -1) if dim is None else x
        d = 1 if dim is None else dim
        ext = torch.amax(flat, dim=d, keepdim=True) if largest else torch.amin(flat, dim=d, keepdim=True)
        counts = (flat == ext).sum(dim=d).reshape(-1)
        tied = counts > 1
        values = ext.reshape(-1)[tied]
    except (RuntimeError, TypeError, IndexError):
        return 1.0, 2
    return (float(values[0]), int(counts[tied][0])) if values.numel() else (1.0, 2)


def torch_question(func: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> tuple[str, str] | str:
    """The program and point (``--at``) that ask this call's convention: the call as the user spelled it
    (``torch.clamp``, ``x.clamp``), with the scalar arguments it was given, at the kink whose elements it hit
    (the first of its kinks with a hit, else the first); or why there is none (one line)."""
    import torch

    name = getattr(func, "__name__", "")
    program = torch_program(func)
    method = program.startswith("torch.Tensor.")
    twin = _OUT_OF_PLACE.get(name, name)
    if name == "rrelu" or name == "prelu":
        return f"{name}: its slope is {'random in training' if name == 'rrelu' else 'a weight tensor'}: not asked"
    if name in _TIES or (name in ("max", "min") and isinstance(_arg(args, kwargs, 1, "other"), torch.Tensor)):
        call = f"x.{twin}(y)" if method else f"{program.rsplit('.', 1)[0]}.{twin}(x, y)"
        xv, yv = _tie_values(args[0], _arg(args, kwargs, 1, "other"))
        return call, f"x={xv!r},y={yv!r}"
    rest = []
    defaults = _defaults(func)
    for i, a in enumerate(args[1:], start=1):
        text = _literal(a)
        if text is None:
            return f"{name}: argument {i} is a {type(a).__name__}: not asked"
        rest.append(text)
    for k, v in kwargs.items():
        if k in defaults and defaults[k] is v or (k in defaults and type(defaults[k]) is type(v) and defaults[k] == v):
            continue  # nn.ReLU calls F.relu(x, inplace=False): asked as F.relu(x)
        text = _literal(v)
        if text is None:
            return f"{name}: {k}= is a {type(v).__name__}: not asked"
        rest.append(f"{k}={text}")
    x = args[0]
    if name in _REDUCTIONS:
        dim = _arg(args, kwargs, 1, "dim")
        if dim not in (None, 0, -1) or len(rest) > 2:
            return f"{name}: over dim {dim}: not asked"
        call = f"v.{twin}({', '.join(rest)})" if method else f"{program.rsplit('.', 1)[0]}.{twin}({', '.join(['v', *rest])})"
        v, k = _extreme_tie(x, dim, name in ("max", "amax"))
        return call + (".values" if dim is not None and name in ("max", "min") else ""), f"v=[{','.join([repr(v)] * k)}]"
    if name.startswith("max_pool") and name.endswith(("1d", "2d")):
        k = _arg(args, kwargs, 1, "kernel_size")
        if not isinstance(k, int):
            return f"{name}: kernel_size {k!r}: not asked"
        row = "[" + ",".join(["1.0"] * k) + "]"
        point = f"v=[{row}]" if "1d" in name else f"v=[[{','.join([row] * k)}]]"
        return f"{program}({', '.join(['v', *rest])})", point
    if name in _AT_ZERO:
        values: tuple[Any, ...] = (0.0,)
    elif name in _KINK_AT:
        values = _KINK_AT[name]
    elif name in ("hardshrink", "softshrink"):
        lam = _arg(args, kwargs, 1, "lambd", 0.5)
        values = (lam, -lam)
    elif name in _KINK_ARGS:
        values = tuple(v for pos, key, d in _KINK_ARGS[name] if (v := _arg(args, kwargs, pos, key, d)) is not None)
    else:
        return f"{name}: no question is written for it"
    if not values:
        return f"{name}: no bound given: no kink"
    with torch.no_grad():
        hit = next((v for v in values if bool((x == v).any())), values[0])
    call = f"x.{twin}({', '.join(rest)})" if method else f"{program.rsplit('.', 1)[0]}.{twin}({', '.join(['x', *rest])})"
    return call, f"x={float(hit)!r}"


def _torch_function_mode_base() -> type:
    from torch.overrides import TorchFunctionMode

    return TorchFunctionMode


class TorchHitCounter:
    """Counts kink hits in PyTorch code run inside it::

        with TorchHitCounter() as counter:
            model(x)
        counter.sites  # list of Site, one per kinked call, in call order

    Each call of a function of :data:`TORCH_KINKED` (``torch``, ``torch.nn.functional`` or a ``Tensor``
    method, whoever calls it: an ``nn.Module`` or the user's ``forward``) adds a :class:`Site`. The mode sees
    the outermost call only (``F.relu6`` counts as ``relu6``, not as the ``hardtanh`` it calls).
    :meth:`new_pass` starts the numbering of sites again (one forward pass per minibatch). An in-place call is
    counted on its input before the call overwrites it; a call whose arguments a rule cannot read is a site
    with ``inspected=False`` and the reason, never an error in the user's code.

    Raises ImportError without PyTorch; what the watched code raises passes through unchanged.
    """

    def __init__(self) -> None:
        base = _torch_function_mode_base()
        rules = _torch_rules()
        counter = self

        class _Mode(base):  # type: ignore[misc, valid-type]
            def __torch_function__(self, func: Any, types: Any, args: Sequence[Any] = (),
                                   kwargs: dict[str, Any] | None = None) -> Any:
                kwargs = kwargs or {}
                rule = rules.get(getattr(func, "__name__", ""))
                site = None
                if rule is not None and args and hasattr(args[0], "is_floating_point") and \
                        args[0].is_floating_point():
                    site = counter._count(func, rule, args, kwargs)  # before an in-place op overwrites the input
                out = func(*args, **kwargs)
                if site is not None:  # recorded once the call succeeded
                    site.index = len(counter.sites)
                    counter.sites.append(site)
                return out

        self._mode = _Mode()
        self.sites: list[Site] = []

    @staticmethod
    def _count(func: Any, rule: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> Site:
        """The site of one call, counted on its inputs as they are before the call. Counting never fails the
        user's call: an input it cannot read makes the site ``inspected=False`` with the reason."""
        import torch

        kink, count = rule
        site = Site(0, torch_program(func), kink, dtype=str(args[0].dtype).removeprefix("torch."), call=_caller())
        try:
            with torch.no_grad():
                got = count(args, kwargs)
        except Exception as err:  # noqa: BLE001 - an argument form the rule does not know
            got = f"not counted: {type(err).__name__}: {' '.join(str(err).split())[:160]}"
        ask_site(site, lambda: torch_question(func, args, kwargs))
        if isinstance(got, str):
            site.inspected, site.why = False, got
        else:
            site.elements, site.hits = got
        return site

    def new_pass(self) -> list[Site]:
        """The sites counted since the last call, and a fresh list for the next pass."""
        done, self.sites = self.sites, []
        return done

    def __enter__(self) -> TorchHitCounter:
        self._mode.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._mode.__exit__(*exc)


# --------------------------------------------------------------------------- another convention, on the user's batch


def _patched(func: Any, args: Sequence[Any], kwargs: dict[str, Any], at: dict[str, Any], new: dict[str, Any]
             ) -> tuple[Any, bool]:
    """``func(*args, **kwargs)`` whose backward gives ``new``'s derivative at the elements on the kink (``at``:
    ``{"x": k}`` for a kink of one input at ``k``, ``{"x": 0, "y": 0}`` for a tie of two) and the framework's own
    elsewhere; and whether any element is on the kink."""
    import torch

    tie = set(at) == {"x", "y"}
    n_in = 2 if tie else 1
    inputs = [a for a in args[:n_in]]
    rest = list(args[n_in:])
    if tie and not isinstance(inputs[1], torch.Tensor):
        inputs[1] = torch.as_tensor(inputs[1], dtype=inputs[0].dtype, device=inputs[0].device)
    with torch.no_grad():
        if tie:
            a, b = torch.broadcast_tensors(inputs[0], inputs[1])
            hit = bool((a == b).any())
        else:
            hit = bool((inputs[0] == float(at["x"])).any())

    class _Patch(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, *xs: Any) -> Any:
            ctx.save_for_backward(*xs)
            return func(*xs, *rest, **kwargs)

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            xs = ctx.saved_tensors
            with torch.enable_grad():
                leaves = [x.detach().requires_grad_() for x in xs]
                out = func(*leaves, *rest, **kwargs)
                own = torch.autograd.grad(out, leaves, g, allow_unused=True)
            if tie:
                a, b = torch.broadcast_tensors(xs[0], xs[1])
                mask = a == b
            else:
                mask = xs[0] == float(at["x"])
            grads = []
            for i, (x, o) in enumerate(zip(xs, own)):
                name = "xy"[i]
                o = torch.zeros_like(x) if o is None else o
                value = float(new[name]) if not isinstance(new[name], list) else float(new[name][0])
                swapped = torch.where(mask, g * value, o if o.shape == mask.shape else o.expand_as(mask))
                grads.append(swapped.sum_to_size(x.shape) if swapped.shape != x.shape else swapped)
            return tuple(grads)

    return _Patch.apply(*inputs), hit


def _patched_reduction(func: Any, args: Sequence[Any], kwargs: dict[str, Any], new: dict[str, Any]
                       ) -> tuple[Any, bool]:
    """``func(*args, **kwargs)``, a max or min reduction (``max``, ``amax``, ``min``, ``amin``, over ``dim`` or all
    of it), whose backward gives each slice tied as ``new`` is (``{"v": [a, b]}``: a tie of two, the gradient of
    its first and second tied elements) that gradient, and the framework's own to every other slice (no tie, or a
    tie of another size); and whether any slice is tied so."""
    import torch

    x, rest = args[0], list(args[1:])
    dim = kwargs.get("dim", rest[0] if rest and isinstance(rest[0], int) else None)
    keepdim = bool(kwargs.get("keepdim", rest[1] if len(rest) > 1 and isinstance(rest[1], bool) else False))
    largest = getattr(func, "__name__", "") in ("max", "amax")
    out = func(*args, **kwargs)
    values = out if isinstance(out, torch.Tensor) else out.values
    with torch.enable_grad():  # the framework's own gradient of each slice's extreme
        leaf = x.detach().requires_grad_()
        own_out = func(leaf, *rest, **kwargs)
        own_values = own_out if isinstance(own_out, torch.Tensor) else own_out.values
        (own,) = torch.autograd.grad(own_values.sum(), leaf)
    xr, d = (x.detach().reshape(1, -1), 1) if dim is None else (x.detach(), dim)
    ext = torch.amax(xr, dim=d, keepdim=True) if largest else torch.amin(xr, dim=d, keepdim=True)
    mask = xr == ext
    count = mask.sum(dim=d, keepdim=True)
    share = torch.tensor([float(g) for g in new["v"]], dtype=x.dtype, device=x.device)
    rank = (mask.cumsum(dim=d) - 1).clamp(0, len(share) - 1)
    swapped = mask & (count == len(share))
    weight = torch.where(swapped, share[rank], own.reshape(xr.shape)).reshape(x.shape)
    moved = (x - x.detach()) * weight  # zero forward; backward: the upstream gradient times the weight
    moved = moved.sum() if dim is None else moved.sum(dim=dim, keepdim=keepdim)
    result = values.detach() + moved
    return (result if isinstance(out, torch.Tensor) else type(out)((result, out.indices))), bool(swapped.any())


def _patched_pool(func: Any, args: Sequence[Any], kwargs: dict[str, Any], new: dict[str, Any], nd: int
                  ) -> tuple[Any, bool]:
    """``func(*args, **kwargs)``, a max-pool over the last ``nd`` (1 or 2) dimensions, whose backward gives each
    window whose elements all tie ``new``'s gradient (``{"v": one window}``, the question's) and the framework's
    own to every other window. Only windows that tile the input (stride = kernel, no padding or dilation, no
    ``ceil_mode`` or ``return_indices``) are swapped; other pools are called as they are. And whether any window
    was swapped."""
    import torch

    k = _arg(args, kwargs, 1, "kernel_size")
    stride = _arg(args, kwargs, 2, "stride") or k
    plain = (_arg(args, kwargs, 3, "padding", 0) in (0, (0,) * nd) and _arg(args, kwargs, 4, "dilation", 1) in (1, (1,) * nd)
             and not _arg(args, kwargs, 5, "ceil_mode", False) and not _arg(args, kwargs, 6, "return_indices", False))
    ks = tuple(k) if isinstance(k, (tuple, list)) else (int(k),) * nd
    ss = tuple(stride) if isinstance(stride, (tuple, list)) else (int(stride),) * nd
    share_list = torch.tensor(new["v"]).reshape(-1).tolist()
    if not plain or ks != ss or len(share_list) != math.prod(ks):
        return func(*args, **kwargs), False
    x = args[0]
    out = func(*args, **kwargs)
    with torch.enable_grad():  # the framework's own gradient of each window's maximum
        leaf = x.detach().requires_grad_()
        (own,) = torch.autograd.grad(func(leaf, *args[1:], **kwargs).sum(), leaf)
    lead, sizes = x.shape[:-nd], x.shape[-nd:]
    outs = [s // kk for s, kk in zip(sizes, ks)]
    crop = (..., *[slice(0, o * kk) for o, kk in zip(outs, ks)])

    def windows(t: Any) -> Any:  # (..., out_1, …, out_nd, window elements)
        t = t[crop].reshape(*lead, *[v for o, kk in zip(outs, ks) for v in (o, kk)])
        n = len(lead)
        order = [*range(n), *[n + 2 * i for i in range(nd)], *[n + 2 * i + 1 for i in range(nd)]]
        return t.permute(order).reshape(*lead, *outs, -1)

    def back(w: Any) -> Any:  # the inverse of windows(), uncovered elements keeping the framework's own weight
        n = len(lead)
        w = w.reshape(*lead, *outs, *ks)
        order = [*range(n)] + [v for i in range(nd) for v in (n + i, n + nd + i)]
        w = w.permute(order).reshape(*lead, *[o * kk for o, kk in zip(outs, ks)])
        full = own.clone()
        full[crop] = w
        return full

    xw = windows(x.detach())
    tied = (xw == xw.amax(dim=-1, keepdim=True)).all(dim=-1, keepdim=True)
    share = torch.tensor(share_list, dtype=x.dtype, device=x.device)
    weight = back(torch.where(tied, share, windows(own)))
    moved = windows((x - x.detach()) * weight).sum(dim=-1)  # zero forward; backward: upstream gradient × weight
    return out.detach() + moved, bool(tied.any())


def first_layer_shift(model: Any, x: Any, before: dict[int, tuple[dict[str, Any], dict[str, Any]]],
                      after: dict[int, tuple[dict[str, Any], dict[str, Any]]]) -> tuple[float, float, set[int]]:
    """How far the gradient of the model's first weight (its first parameter of two or more dimensions that the
    outputs reach) moves on batch ``x`` between two conventions: the kinked calls numbered in ``before`` and
    ``after`` (site index → (the kink's point, the gradient there)) take the one, then the other, at their kink
    elements; the loss is the sum of the outputs (every floating tensor of a tuple, list or dict). Returns (max |Δ|,
    max |g| of the ``before`` gradient, the sites swapped at some element). Elementwise kinks of one input, ties of
    two (``relu``, ``clamp``, ``maximum``), max/min reductions' ties (``amax``, ``max``: each slice tied as the
    question is) and max-pools' windows whose elements all tie (windows that tile the input) are swapped; the rest
    keep the installed release's convention. The model runs as it is (``model.eval()`` first for an eval-mode
    lock); both passes start from one random state (dropout draws the same masks).

    Raises
    ------
    ValueError
        No weight of two or more dimensions, none the outputs reach, or outputs with no floating tensor.
    """
    import torch

    if not any(p.ndim >= 2 for p in model.parameters()):
        raise ValueError("the model has no weight of two or more dimensions")
    rules = _torch_rules()
    base = _torch_function_mode_base()
    swapped: set[int] = set()

    class _Swap(base):  # type: ignore[misc, valid-type]
        def __init__(self, changes: dict[int, tuple[dict[str, Any], dict[str, Any]]]) -> None:
            super().__init__()
            self.changes = changes
            self.index = 0

        def __torch_function__(self, func: Any, types: Any, args: Sequence[Any] = (),
                               kwargs: dict[str, Any] | None = None) -> Any:
            kwargs = kwargs or {}
            kinked = getattr(func, "__name__", "") in rules and args and hasattr(args[0], "is_floating_point") and \
                args[0].is_floating_point()
            if not kinked:
                return func(*args, **kwargs)
            i, self.index = self.index, self.index + 1
            if i not in self.changes:
                return func(*args, **kwargs)
            at, value = self.changes[i]
            name = getattr(func, "__name__", "")
            if set(at) == {"v"} and name.startswith("max_pool") and name.endswith(("1d", "2d")):
                out, hit = _patched_pool(func, args, kwargs, value, 1 if "1d" in name else 2)
            elif set(at) == {"v"}:
                out, hit = _patched_reduction(func, args, kwargs, value)
            else:
                out, hit = _patched(func, args, kwargs, at, value)
            if hit:
                swapped.add(i)
            return out

    def loss(out: Any) -> Any:
        if isinstance(out, torch.Tensor):
            return out.float().sum() if out.is_floating_point() else None
        parts = out.values() if isinstance(out, dict) else out if isinstance(out, (tuple, list)) else ()
        terms = [t for t in (loss(o) for o in parts) if t is not None]
        return sum(terms) if terms else None

    chosen: list[Any] = []

    def grad(changes: dict[int, tuple[dict[str, Any], dict[str, Any]]]) -> Any:
        model.zero_grad(set_to_none=True)
        with torch.random.fork_rng():
            torch.manual_seed(0)
            with _Swap(changes):
                out = model(x)
            total = loss(out)
            if total is None or not total.requires_grad:
                raise ValueError("the model's outputs hold no floating tensor that the weights reach")
            total.backward()
        if not chosen:
            weight = next((p for p in model.parameters() if p.ndim >= 2 and p.grad is not None), None)
            if weight is None:
                raise ValueError("no weight of two or more dimensions gets a gradient from the outputs")
            chosen.append(weight)
        g = chosen[0].grad
        return torch.zeros_like(chosen[0]) if g is None else g.detach().clone()

    one, other = grad(before), grad(after)
    return float((one - other).abs().max()), float(one.abs().max()), swapped


# --------------------------------------------------------------------------- the counter's hooks (kinkcheck.kinkhits)

#: What a model of this framework is, for ``census --model`` and ``lock`` (:func:`kinkcheck.kinkhits.model_counter`).
MODEL = "a torch.nn.Module"


def hits_at(fn: Callable[..., Any], at: Mapping[str, Any], dtype: str) -> list[Site]:
    """The sites of ``fn``'s forward pass on the inputs ``at`` as torch tensors of ``dtype``, in order of ``at``
    (``kinkcheck check``'s :func:`~kinkcheck.answers.check.kinks_hit`)."""
    import torch

    args = [torch.tensor(at[k], dtype=getattr(torch, dtype)) for k in at]
    with TorchHitCounter() as counter:
        fn(*args)
    return counter.sites


def is_model(made: Any) -> bool:
    """Whether a ``--model`` factory's return is this framework's model (a module: ``forward`` and ``parameters``)."""
    return hasattr(made, "forward") and hasattr(made, "parameters")


def model_passes(made: Any, eval_mode: bool) -> tuple[str, Callable[[Any], list[Site]]]:
    """The mode the module runs in (a sentence) and a function counting one forward pass on a batch (no gradient
    taken). The module runs in the mode its factory left it in, or in eval mode with ``eval_mode``."""
    import torch

    if eval_mode:
        made.eval()
    mode = ("the module in eval mode" if not made.training else
            "the module in training mode, as its factory left it (dropout's zeros count as hits; --eval: eval mode)")
    counter = TorchHitCounter()

    def one(x: Any) -> list[Site]:
        with torch.no_grad(), counter:
            made(x)
        return counter.new_pass()

    return mode, one


def census_names(program: str) -> list[str]:
    """The census operations a site's program may be: ``torch.nn.functional.relu`` itself, a method
    ``torch.Tensor.clamp`` as ``.clamp``."""
    return [f".{program.rsplit('.', 1)[1]}"] if program.startswith("torch.Tensor.") else [program]
