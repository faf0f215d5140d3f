"""The JAX kink-hit counter (:mod:`kinkcheck.kinkhits` says what a kink hit is): an interpreter of the function's
jaxpr that evaluates each equation with ``primitive.bind`` and counts the hits at the kinked primitives. Imports
JAX only when it counts."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from kinkcheck.kinkhits import Site

__all__ = ["JAX_KINKED", "jax_hits"]


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
