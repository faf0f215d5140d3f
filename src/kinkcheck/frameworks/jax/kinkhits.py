"""The JAX kink-hit counter (:mod:`kinkcheck.kinkhits` says what a kink hit is): an interpreter of the function's
jaxpr that evaluates each equation with ``primitive.bind`` and counts the hits at the kinked primitives. Imports
JAX only when it counts."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kinkcheck.kinkhits import Site, ask_site

__all__ = ["JAX_KINKED", "MODEL", "census_names", "hits_at", "is_model", "jax_hits", "jax_question", "model_passes"]


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
    out = _eval(closed.jaxpr, closed.consts, flat, [], sites, "")
    _, out_tree = jax.tree_util.tree_flatten(jax.eval_shape(fn, *args))
    return jax.tree_util.tree_unflatten(out_tree, out), sites


def _user_call(eqn: Any, outer: str) -> str:
    """``file:line`` of the user's code that made this equation (JAX's own frames skipped); the enclosing call's
    where the equation was made inside JAX (the ``max`` inside ``jax.nn.relu``)."""
    try:
        from jax._src import source_info_util

        frame = source_info_util.user_frame(eqn.source_info.traceback)
    except Exception:  # noqa: BLE001 - an internal API: without it, no call site
        return outer
    if frame is None:
        return outer
    rel = os.path.relpath(frame.file_name)
    return f"{frame.file_name if rel.startswith('..') else rel}:{frame.start_line}"


def _eval(jaxpr: Any, consts: Sequence[Any], args: Sequence[Any], names: list[str], sites: list[Site],
          call: str) -> list[Any]:
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
            outvals = _eval(inner, sub_consts, invals[len(invals) - len(inner.invars):], [*names, name], sites,
                            _user_call(eqn, call))
        else:
            outvals = eqn.primitive.bind(*invals, **eqn.params)
            if not eqn.primitive.multiple_results:
                outvals = [outvals]
            where = f"{names[-1]}: {prim}" if names else prim
            if prim in JAX_KINKED and hasattr(invals[0], "dtype") and _floating(invals[0]):
                site = Site(len(sites), where, JAX_KINKED[prim], dtype=str(invals[0].dtype),
                            call=_user_call(eqn, call))
                try:
                    site.elements, site.hits = _jax_count(prim, invals, eqn.params)
                except (ValueError, TypeError, KeyError) as err:  # a window form not handled: said, not guessed
                    site.inspected, site.why = False, f"{prim}: {err}"
                ask_site(site, lambda: jax_question(names, prim, invals, eqn.params))
                sites.append(site)
            elif any(p in eqn.params for p in ("branches", "body_jaxpr", "cond_jaxpr")) or prim == "scan":
                sites.append(Site(len(sites), where, "", inspected=False, call=_user_call(eqn, call),
                                  why=f"{prim}: evaluated whole, its kinks not counted"))
            elif prim in _JAX_UNCOUNTED:
                sites.append(Site(len(sites), where, "", inspected=False, call=_user_call(eqn, call),
                                  why=f"{prim}: its kinks are not counted"))
        for v, val in zip(eqn.outvars, outvals):
            if type(v).__name__ != "DropVar":
                env[v] = val
    return [read(v) for v in jaxpr.outvars]


def _scalar(v: Any) -> float | None:
    """The one value of an operand that holds a single value (a literal ``0.0``, a broadcast constant), or None."""
    import numpy as np

    a = np.asarray(v)
    return float(a.reshape(-1)[0]) if a.size == 1 else None


def _public(names: Sequence[str]) -> str | None:
    """The public JAX function the innermost named call around a primitive is (``relu`` → ``jax.nn.relu``,
    ``clip`` → ``jax.numpy.clip``), or None (a user's own jitted function, an internal helper)."""
    import jax

    if not names:
        return None
    name = names[-1]
    for module, prefix in ((jax.nn, "jax.nn."), (jax.numpy, "jax.numpy.")):
        if not name.startswith("_") and callable(getattr(module, name, None)):
            return prefix + name
    return None


def jax_question(names: Sequence[str], prim: str, invals: Sequence[Any], params: dict[str, Any] | None = None
                 ) -> tuple[str, str] | str:
    """The program and point (``--at``) that ask the convention of a kinked primitive the model evaluated: the
    public function around it where there is one (``jax.nn.relu(x)`` at 0), else the primitive's public
    spelling with its constant operand (``jax.numpy.maximum(x, 0.5)`` at 0.5), a tie of two tensors
    (``jax.numpy.maximum(x, y)`` at 0, 0), a tied reduction (``jax.numpy.max(v)`` at [1, 1]) or a pooling window
    whose elements all tie (``jax.lax.reduce_window`` with the call's window and strides, at one window of ones;
    ``params``: the primitive's); or why there is none (one line)."""
    public = _public(names)
    if prim in ("max", "min"):
        other = "maximum" if prim == "max" else "minimum"
        consts = [c for c in (_scalar(v) for v in invals[:2])]
        c = next((v for v in consts if v is not None), None)
        if c is None or all(v is not None for v in consts):
            return f"jax.numpy.{other}(x, y)", "x=0,y=0"
        if public is not None and public.startswith("jax.nn."):
            return f"{public}(x)", f"x={c!r}"
        if public == "jax.numpy.clip":
            return f"jax.numpy.clip(x, {'min' if prim == 'max' else 'max'}={c!r})", f"x={c!r}"
        return f"jax.numpy.{other}(x, {c!r})", f"x={c!r}"
    if prim == "abs":
        return "jax.numpy.abs(x)", "x=0.0"
    if prim == "clamp":
        lo, hi = _scalar(invals[0]), _scalar(invals[2])
        if lo is None or hi is None:
            return "clamp: a tensor bound: not asked"
        import numpy as np

        x = np.asarray(invals[1])
        at = lo if bool((x == lo).any()) or not bool((x == hi).any()) else hi
        return f"jax.lax.clamp({lo!r}, x, {hi!r})", f"x={at!r}"
    if prim in ("reduce_max", "reduce_min"):
        return f"jax.numpy.{'max' if prim == 'reduce_max' else 'min'}(v)", "v=[1.0,1.0]"
    if prim in ("reduce_window_max", "reduce_window_min") and params is not None:
        return _window_question(prim, params)
    return f"{prim}: no question is written for it"


def _window_question(prim: str, params: dict[str, Any]) -> tuple[str, str] | str:
    """``lax.reduce_window`` with the call's window and strides at one window whose elements all tie (ones), or
    why not: padding and dilations other than none are not asked."""
    dims = tuple(int(d) for d in params["window_dimensions"])
    strides = tuple(int(s) for s in params["window_strides"])
    padding = tuple(tuple(int(p) for p in pair) for pair in params["padding"])
    dilated = [d for key in ("base_dilation", "window_dilation") for d in params.get(key, ()) if int(d) != 1]
    if any(p != (0, 0) for p in padding) or dilated:
        return f"{prim}: a padded or dilated window: not asked"

    def text(t: tuple[Any, ...]) -> str:
        return "(" + ", ".join(map(str, t)) + ("," if len(t) == 1 else "") + ")"

    def ones(shape: tuple[int, ...]) -> str:
        return "1.0" if not shape else "[" + ",".join([ones(shape[1:])] * shape[0]) + "]"

    init, op = ("-jax.numpy.inf", "max") if prim == "reduce_window_max" else ("jax.numpy.inf", "min")
    pads = "(" + ", ".join(text(p) for p in padding) + ("," if len(padding) == 1 else "") + ")"
    return (f"jax.lax.reduce_window(m, {init}, jax.lax.{op}, {text(dims)}, {text(strides)}, {pads})",
            f"m={ones(dims)}")


def _floating(x: Any) -> bool:
    """Whether a JAX value is floating point, the ml_dtypes types (bfloat16, float8_*) included."""
    import jax.numpy as jnp

    return bool(jnp.issubdtype(x.dtype, jnp.floating))


# --------------------------------------------------------------------------- the counter's hooks (kinkcheck.kinkhits)

#: What a model of this framework is, for ``census --model`` and ``lock`` (:func:`kinkcheck.kinkhits.model_counter`).
MODEL = "(apply, params) with apply(params, x)"


def hits_at(fn: Callable[..., Any], at: Mapping[str, Any], dtype: str) -> list[Site]:
    """The sites of ``fn``'s forward pass on the inputs ``at`` as JAX arrays of ``dtype``, in order of ``at``
    (``kinkcheck check``'s :func:`~kinkcheck.answers.check.kinks_hit`), with x64 on for float64 only, as the adapter
    differentiates it."""
    import jax.numpy as jnp

    from kinkcheck.frameworks.jax.adapter import _x64  # slow: jax, numpy

    with _x64(dtype == "float64"):
        _, sites = jax_hits(fn, *(jnp.asarray(at[k], dtype=dtype) for k in at))
    return sites


def is_model(made: Any) -> bool:
    """Whether a ``--model`` factory's return is a JAX model: a pair ``(apply, params)``."""
    return isinstance(made, tuple) and len(made) == 2 and callable(made[0])


def model_passes(made: Any, eval_mode: bool) -> tuple[str, Callable[[Any], list[Site]]]:
    """The mode the model runs in (a sentence: ``apply`` as given; ``eval_mode`` has nothing to switch) and a
    function counting one forward pass ``apply(params, x)`` on a batch."""
    apply, params = made

    def one(x: Any) -> list[Site]:
        return jax_hits(apply, params, x)[1]

    return "jax: apply(params, x) as given", one


#: The public JAX functions a kinked primitive met outside any named call usually comes from, in the order
#: they are tried against the census (``jnp.max`` binds ``reduce_max``).
_JAX_PUBLIC: dict[str, tuple[str, ...]] = {
    "max": ("jax.numpy.maximum", "jax.lax.max"), "min": ("jax.numpy.minimum", "jax.lax.min"),
    "abs": ("jax.numpy.abs", "jax.lax.abs"), "clamp": ("jax.lax.clamp", "jax.numpy.clip"),
    "reduce_max": ("jax.numpy.max", "jax.numpy.amax"), "reduce_min": ("jax.numpy.min", "jax.numpy.amin"),
    "argmax": ("jax.numpy.argmax",), "argmin": ("jax.numpy.argmin",),
}


def census_names(program: str) -> list[str]:
    """The census operations a site's program may be, in the order tried (``relu: max`` → ``jax.nn.relu``, …, then
    the primitive's public functions, :data:`_JAX_PUBLIC`; a primitive alone → ``jax.lax.<primitive>``)."""
    call, _, prim = program.rpartition(": ")
    return ([f"jax.nn.{call}", f"jax.numpy.{call}", f"jax.lax.{call}"] if call else []) + list(
        _JAX_PUBLIC.get(prim, (f"jax.lax.{prim}",)))
