"""Kink hits in real computation: how often a network's forward pass lands exactly on a kink.

A kink hit is an element of an operation's input that sits exactly where the operation has no derivative, so
that backpropagation takes the framework's convention there: a pre-activation exactly 0 under ``relu``, an
input exactly at a ``clamp`` bound, a tie of ``maximum(a, b)``, a tied maximum of a ``max`` reduction or of a
max-pool window. Bertoin, Bolte, Gerchinovitz and Pauwels ("Numerical influence of ReLU'(0) on
backpropagation", NeurIPS 2021; code: github.com/deel-ai/relu-prime) showed such hits are common in low
precision.

The counters look at a model without editing it:

* PyTorch: :class:`TorchHitCounter`, a ``torch.overrides.TorchFunctionMode`` that sees every call of a torch
  function, functional or method (``F.relu``, ``x.clamp(min=0)``, the ``F.relu`` an ``nn.ReLU`` module calls) —
  forward hooks would miss the functional calls inside a ``forward``. Inside the mode's handler the mode is off,
  so only the outermost (public) call is counted, not the aten calls it makes.
* JAX: :func:`jax_hits`, an interpreter of the function's jaxpr (``jax.make_jaxpr``) that evaluates each
  equation with ``primitive.bind`` and counts at the kinked primitives (``max``, ``min``, ``abs``, ``clamp``,
  ``reduce_max``, ``reduce_min``, ``argmax``, ``argmin``), naming each hit by the innermost named call around it
  (``jax.nn.relu`` is a ``custom_jvp_call`` named ``relu`` around ``max x 0.0``).

Each call site is a :class:`Site`: the public name called (``torch.nn.functional.relu``, ``jax.nn.relu``), the
kink it checks (``x = 0``, ``tie``), the elements looked at and the hits among them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["JAX_KINKED", "TORCH_KINKED", "Site", "TorchHitCounter", "jax_hits", "merge_sites"]


@dataclass
class Site:
    """One kinked call of a forward pass (``index``: its order among the kinked calls, the "layer"), or the sum
    of such calls over passes (:func:`merge_sites`).

    ``elements`` counts what was looked at: input elements for an elementwise operation, reduced slices for a
    reduction, windows for a max-pool; ``hits`` those exactly at the kink; ``calls`` the calls summed.
    ``inspected`` is False (with ``why``) where the counter could not look (a max-pool with ``ceil_mode``)."""

    index: int
    program: str
    kink: str
    elements: int = 0
    hits: int = 0
    calls: int = 1
    dtype: str = ""
    inspected: bool = True
    why: str = ""

    def key(self) -> tuple[int, str, str, str]:
        return (self.index, self.program, self.kink, self.dtype)


def merge_sites(passes: Iterable[Sequence[Site]]) -> list[Site]:
    """The sites of several forward passes summed by (index, program, kink, dtype), in first-seen order."""
    out: dict[tuple[int, str, str, str], Site] = {}
    for sites in passes:
        for s in sites:
            have = out.get(s.key())
            if have is None:
                out[s.key()] = Site(s.index, s.program, s.kink, s.elements, s.hits, s.calls, s.dtype, s.inspected,
                                    s.why)
            else:
                have.elements += s.elements
                have.hits += s.hits
                have.calls += s.calls
                have.inspected = have.inspected and s.inspected
                have.why = have.why or s.why
    return list(out.values())


# --------------------------------------------------------------------------- PyTorch


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
        site = Site(0, torch_program(func), kink, dtype=str(args[0].dtype).removeprefix("torch."))
        try:
            with torch.no_grad():
                got = count(args, kwargs)
        except Exception as err:  # noqa: BLE001 - an argument form the rule does not know
            got = f"not counted: {type(err).__name__}: {' '.join(str(err).split())[:160]}"
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


# --------------------------------------------------------------------------- JAX

#: The JAX primitives :func:`jax_hits` counts at, and the kink each checks.
JAX_KINKED: dict[str, str] = {
    "max": "tie", "min": "tie", "abs": "x = 0", "clamp": "x at a bound",
    "reduce_max": "tie", "reduce_min": "tie",
    "reduce_window_max": "tie in a window", "reduce_window_min": "tie in a window",
}  # argmax/argmin: no gradient flows through an index, so a tie there is no kink
#: Primitives with a kink inside that the interpreter does not count: a site says they were not inspected.
_JAX_UNCOUNTED = ("reduce_window", "select_and_scatter_add", "select_and_gather_add", "sort", "cumlogsumexp",
                  "cummax", "cummin")

#: Parameters that hold the sub-jaxpr of a call-like primitive (jit/pjit, custom_jvp_call, custom_vjp_call,
#: closed_call, remat/checkpoint), evaluated equation by equation so that their kinks are seen.
_SUBJAXPRS = ("jaxpr", "call_jaxpr", "fun_jaxpr")
_CALLS = frozenset(("pjit", "jit", "closed_call", "core_call", "custom_jvp_call", "custom_vjp_call",
                    "custom_vjp_call_jaxpr", "remat", "checkpoint", "remat2"))


def _jax_count(prim: str, invals: Sequence[Any], params: dict[str, Any]) -> tuple[int, int]:
    import numpy as np

    if prim in ("max", "min"):
        a, b = np.broadcast_arrays(np.asarray(invals[0]), np.asarray(invals[1]))
        return a.size, int((a == b).sum())
    if prim == "abs":
        x = np.asarray(invals[0])
        return x.size, int((x == 0).sum())
    if prim == "clamp":  # clamp(lo, x, hi)
        lo, x, hi = (np.asarray(v) for v in invals)
        return x.size, int(((x == lo) | (x == hi)).sum())
    if prim in ("reduce_window_max", "reduce_window_min"):
        return _window_ties(np.asarray(invals[0]), params, prim == "reduce_window_max")
    x = np.asarray(invals[0])
    axes = tuple(params.get("axes", ()))
    largest = prim == "reduce_max"
    ext = x.max(axis=axes, keepdims=True) if largest else x.min(axis=axes, keepdims=True)
    count = (x == ext).sum(axis=axes)
    return int(np.size(count)), int((count > 1).sum())


def _window_ties(x: Any, params: dict[str, Any], largest: bool) -> tuple[int, int]:
    """Windows of ``lax.reduce_window`` max/min (``window_dimensions``, ``window_strides``, ``padding``,
    ``window_dilation``; padding holds -inf / +inf, the reduction's identity) and how many hold a tied extreme.
    Raises ValueError for a ``base_dilation`` other than 1 (said not inspected)."""
    import numpy as np
    from numpy.lib.stride_tricks import sliding_window_view

    if any(d != 1 for d in params.get("base_dilation", ()) or ()):
        raise ValueError("base_dilation other than 1 is not inspected")
    dims = tuple(params["window_dimensions"])
    strides = tuple(params["window_strides"])
    dil = tuple(params.get("window_dilation", ()) or (1,) * x.ndim)
    fill = -np.inf if largest else np.inf
    x = np.pad(x.astype(np.float64), [tuple(p) for p in params.get("padding", ())] or [(0, 0)] * x.ndim,
               constant_values=fill)
    span = tuple((w - 1) * d + 1 for w, d in zip(dims, dil))
    win = sliding_window_view(x, span)
    win = win[tuple(slice(None, None, s) for s in strides)]
    win = win[(Ellipsis, *(slice(None, None, d) for d in dil))]
    flat = win.reshape(*win.shape[:x.ndim], -1)
    ext = flat.max(axis=-1, keepdims=True) if largest else flat.min(axis=-1, keepdims=True)
    count = (flat == ext).sum(axis=-1)
    return int(count.size), int((count > 1).sum())


def jax_hits(fn: Callable[..., Any], *args: Any) -> tuple[Any, list[Site]]:
    """Run ``fn(*args)`` by interpreting its jaxpr and count the kink hits of :data:`JAX_KINKED` primitives.

    Returns the outputs (as ``fn`` would, flattened to its output tree) and the sites in evaluation order;
    a site's ``program`` is the innermost named call around the primitive and the primitive
    (``"relu: max"`` for ``jax.nn.relu``), or the primitive alone at the top level. A higher-order primitive
    that is not a plain call (``cond``, ``while``, ``scan``) is evaluated whole, its inside not counted: a
    site with ``inspected=False`` says so. Each primitive is bound eagerly, one at a time: under ``jax.jit``
    XLA may fuse a chain of float16/bfloat16 operations and round once, so the compiled model's inputs to a
    kink can differ from these in their last bits.

    Raises
    ------
    ImportError
        Without JAX.
    Exception
        Whatever ``fn`` raises, or ``jax.make_jaxpr`` raises tracing it.
    """
    import jax

    closed = jax.make_jaxpr(fn)(*args)
    flat, _ = jax.tree_util.tree_flatten(args)
    sites: list[Site] = []
    out = _eval(closed.jaxpr, closed.consts, flat, [], sites)
    _, out_tree = jax.tree_util.tree_flatten(jax.eval_shape(fn, *args))
    return jax.tree_util.tree_unflatten(out_tree, out), sites


def _eval(jaxpr: Any, consts: Sequence[Any], args: Sequence[Any], names: list[str], sites: list[Site]) -> list[Any]:
    env: dict[Any, Any] = {}

    def read(v: Any) -> Any:
        return v.val if hasattr(v, "val") and not hasattr(v, "count") else env[v]

    for v, c in zip(jaxpr.constvars, consts):
        env[v] = c
    for v, a in zip(jaxpr.invars, args):
        env[v] = a
    for eqn in jaxpr.eqns:
        invals = [read(v) for v in eqn.invars]
        prim = eqn.primitive.name
        sub = next((eqn.params[p] for p in _SUBJAXPRS if p in eqn.params), None) if prim in _CALLS else None
        if sub is not None:
            inner = getattr(sub, "jaxpr", sub)
            sub_consts = getattr(sub, "consts", ())
            name = str(eqn.params.get("name", "")) or prim
            outvals = _eval(inner, sub_consts, invals[len(invals) - len(inner.invars):], [*names, name], sites)
        else:
            outvals = eqn.primitive.bind(*invals, **eqn.params)
            if not eqn.primitive.multiple_results:
                outvals = [outvals]
            where = f"{names[-1]}: {prim}" if names else prim
            if prim in JAX_KINKED and hasattr(invals[0], "dtype") and _floating(invals[0]):
                site = Site(len(sites), where, JAX_KINKED[prim], dtype=str(invals[0].dtype))
                try:
                    site.elements, site.hits = _jax_count(prim, invals, eqn.params)
                except (ValueError, TypeError, KeyError) as err:  # a window form not handled: said, not guessed
                    site.inspected, site.why = False, f"{prim}: {err}"
                sites.append(site)
            elif any(p in eqn.params for p in ("branches", "body_jaxpr", "cond_jaxpr")) or prim == "scan":
                sites.append(Site(len(sites), where, "", inspected=False,
                                  why=f"{prim}: evaluated whole, its kinks not counted"))
            elif prim in _JAX_UNCOUNTED:
                sites.append(Site(len(sites), where, "", inspected=False, why=f"{prim}: its kinks are not counted"))
        for v, val in zip(eqn.outvars, outvals):
            if type(v).__name__ != "DropVar":
                env[v] = val
    return [read(v) for v in jaxpr.outvars]


def _floating(x: Any) -> bool:
    """Whether a JAX value is floating point, the ml_dtypes types (bfloat16, float8_*) included."""
    import jax.numpy as jnp

    return bool(jnp.issubdtype(x.dtype, jnp.floating))

