"""Generate JAX's census of kinked operations (``references/census/jax.toml``) from JAX's own JVP rules.

Run ``python -m kinkcheck.frameworks.jax.census [--out FILE]`` in an environment with JAX installed (the default
``FILE`` is ``references/census/jax.toml``); the same install gives byte-identical output.

What it reads
-------------
- The public functions of ``jax.numpy``, ``jax.numpy.linalg``, ``jax.nn``, ``jax.lax`` and
  ``jax.scipy.special`` (their ``__all__``, or ``dir()``; classes, modules, ``*_p`` primitives and constants
  skipped).
- Each function's **JVP jaxpr**: ``jax.make_jaxpr`` of ``jax.jvp(f, primals, tangents)`` on float64 sample
  inputs (:data:`SAMPLES`: vectors, 3x3 matrices, scalars, a static ``1`` or ``(0,)``), recursively through
  every sub-jaxpr (``jit``/``pjit``, ``cond`` branches, ``while``/``scan`` bodies, ``custom_vjp_call``).
  Tracing ``jax.jvp`` applies JAX's own derivative definitions: every ``custom_jvp`` rule (``jax.nn.relu``'s
  ``select(x > 0, g, 0)``, ``xlogy``'s guards) is inlined into the trace, so a ``custom_jvp`` function's
  primal body (``custom_jvp_call``'s ``call_jaxpr``) is not differentiated and is not searched (that is why
  ``jax.nn.softplus``, whose primal is ``logaddexp``'s ``max``/``abs`` trick, is not listed).
- The JVP rule of each primitive in :data:`KINKED_PRIMITIVES`, located in the installed sources
  (``jax/_src/lax/lax.py``, ``lax/special.py``, ``lax/linalg.py``, ``lax/slicing.py``,
  ``lax/windowed_reductions.py``, ``lax/control_flow/{loops,conditionals}.py``); the line found is cited in
  each entry's ``derivative`` (``max_p: mul(g, _balanced_eq(x, ans, y)) [lax/lax.py:5112]``).

How it decides "kinked"
-----------------------
An equation of the JVP jaxpr *hits* when its primitive is in :data:`KINKED_PRIMITIVES` (a JVP rule that
compares, selects, takes a sign, chooses an index, or divides by a quantity that vanishes inside the
domain), the operands that make it non-smooth (``select_n``'s predicate, ``gather``'s indices, ``max``'s
operands ...) depend on the primal inputs (dependency flows through everything but ``stop_gradient``), and
one of its results reaches an output of the trace. A function with a hit is listed: status ``kinked``, or
``excluded`` with the reason "integer- or bool-valued output" when every output is an integer or bool
array. A function whose JVP cannot be traced because a primitive has no differentiation rule is
``excluded`` ("not differentiable by design"). :data:`HAND` then corrects by name, with evidence: false
positives checked by hand (a ``select`` that only guards a removable singularity or ``nan``), and the
functions that cannot be traced from plain array samples (callables, shapes, dimension numbers).

Aliases: a function whose docstring starts "Alias of :func:`jax.numpy.X`" (or that is the same object) is
listed under X; a ``jax.Array`` method of the same name as a ``jax.numpy`` function (``x.max()``,
``x.clip(0)``) is added as ``.name``.

The hand-checked fields of the existing file are kept by op name: an ``excluded`` status with its reason
and the ``kink`` text.

Errors
------
:class:`JaxCensusError` (a :class:`kinkcheck.census.CensusError`) when JAX is not importable, when the JVP
rule of a listed primitive cannot be found in the installed sources (the rules moved: update
:data:`KINKED_PRIMITIVES`), or when :data:`HAND` names a function JAX does not have.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import re
import shutil
import sys
import types
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kinkcheck.census import Census, CensusError, Op, census_path, load_census, write_census

__all__ = ["HAND", "KINKED_PRIMITIVES", "MODULES", "SAMPLES", "JaxCensusError", "Kinked", "analyze",
           "build_census", "main", "public_functions"]

#: The public namespaces of the census, in the order that picks an operation's main name.
MODULES = ("jax.numpy", "jax.numpy.linalg", "jax.nn", "jax.lax", "jax.scipy.special")


class JaxCensusError(CensusError):
    """The JAX census cannot be generated; ``str(err)`` names the cause."""


@dataclass(frozen=True)
class Kinked:
    """A primitive whose JVP rule is not smooth.

    ``operands``: the operand positions that must depend on the inputs (``None``: any operand);
    ``site``: a regular expression for the rule's registration in ``file`` (relative to ``jax/_src``).
    """

    rule: str
    kink: str
    file: str
    site: str
    operands: tuple[int, ...] | None = None


_L, _S, _LA, _SL, _W = "lax/lax.py", "lax/special.py", "lax/linalg.py", "lax/slicing.py", "lax/windowed_reductions.py"
_LOOPS, _COND = "lax/control_flow/loops.py", "lax/control_flow/conditionals.py"


def _reg(p: str) -> str:
    return rf"(ad\.\w+\(\s*{p}_p\b|primitive_jvps\[{p}_p\])"


#: Primitives with a non-smooth JVP rule (quoted, abridged) and where the rule is registered.
KINKED_PRIMITIVES: dict[str, Kinked] = {
    "abs": Kinked("select(ge(x, 0), g, neg(g))", "x = 0", _L, _reg("abs"), (0,)),
    "sign": Kinked("ad.defjvp_zero(sign_p): 0, jump at 0", "x = 0 (jump)", _L, _reg("sign"), (0,)),
    "floor": Kinked("ad.defjvp_zero(floor_p): 0, jumps at integers", "x integer (jump)", _L, _reg("floor"), (0,)),
    "ceil": Kinked("ad.defjvp_zero(ceil_p): 0, jumps at integers", "x integer (jump)", _L, _reg("ceil"), (0,)),
    "round": Kinked("ad.defjvp_zero(round_p): 0, jumps at half-integers", "x half-integer (jump)", _L,
                    _reg("round"), (0,)),
    "max": Kinked("mul(g, _balanced_eq(x, ans, y)): 1/2 each at a tie", "a tie x = y", _L, _reg("max")),
    "min": Kinked("mul(g, _balanced_eq(x, ans, y)): 1/2 each at a tie", "a tie x = y", _L, _reg("min")),
    "clamp": Kinked("select(bitwise_and(gt(operand, min), lt(operand, max)), g, 0)", "x at a bound", _L,
                    _reg("clamp")),
    "select_n": Kinked("_select_jvp: select_n(which, *case_tangents), the predicate not differentiated",
                       "where the predicate changes", _L, _reg("select_n"), (0,)),
    "sort": Kinked("_sort_jvp: the tangent gathered by the sort permutation", "a tie of elements", _L,
                   _reg("sort")),
    "top_k": Kinked("_top_k_jvp: the tangent gathered at the top-k indices", "a tie at the k-th value", _L,
                    _reg("top_k"), (0,)),
    "reduce_max": Kinked("_reduce_chooser_jvp_rule: mean of g over eq(operand, ans)", "a tie of the maximum", _L,
                         _reg("reduce_max"), (0,)),
    "reduce_min": Kinked("_reduce_chooser_jvp_rule: mean of g over eq(operand, ans)", "a tie of the minimum", _L,
                         _reg("reduce_min"), (0,)),
    "argmax": Kinked("ad.defjvp_zero(argmax_p): an index", "a tie of the maximum", _L, _reg("argmax"), (0,)),
    "argmin": Kinked("ad.defjvp_zero(argmin_p): an index", "a tie of the minimum", _L, _reg("argmin"), (0,)),
    "rem": Kinked("d/dy: mul(neg(g), mul(sign(div(x, y)), floor(abs(div(x, y)))))", "x a multiple of y (jump)",
                  _L, _reg("rem")),
    "pow": Kinked("_pow_jvp_lhs: mul(y, pow(x, sub(y, 1))); _pow_jvp_rhs: log(_replace_zero(x))",
                  "x = 0 (0 ** y)", _L, _reg("pow"), (0,)),
    "sqrt": Kinked("ad.defjvp2(sqrt_p, lambda g, ans, x: mul(g, div(_const(x, 0.5), ans)))",
                   "x = 0 (infinite derivative)", _L, _reg("sqrt"), (0,)),
    "cbrt": Kinked("mul(g, mul(_const(x, 1/3), integer_pow(ans, -2)))", "x = 0 (infinite derivative)", _L,
                   _reg("cbrt"), (0,)),
    "atan2": Kinked("mul(g, div(y, add(square(x), square(y))))", "the origin x = y = 0", _L, _reg("atan2")),
    "bessel_i0e": Kinked("g * (bessel_i1e(x) - sign(x) * y)", "x = 0", _S, _reg("bessel_i0e"), (0,)),
    "cummax": Kinked("_cumulative_jvp_rule(combine_fn=lax.max)", "a tie of the running maximum", _LOOPS,
                     _reg("cummax"), (0,)),
    "cummin": Kinked("_cumulative_jvp_rule(combine_fn=lax.min)", "a tie of the running minimum", _LOOPS,
                     _reg("cummin"), (0,)),
    "reduce_window_max": Kinked("_reduce_window_chooser_jvp_rule(max_p)", "a tie in a window", _W,
                                _reg("reduce_window_max"), (0,)),
    "reduce_window_min": Kinked("_reduce_window_chooser_jvp_rule(min_p)", "a tie in a window", _W,
                                _reg("reduce_window_min"), (0,)),
    "select_and_gather_add": Kinked("_select_and_gather_add_jvp: the tangent at the selected element",
                                    "a tie in a window", _W, _reg("select_and_gather_add"), (1,)),
    "select_and_scatter_add": Kinked("_select_and_scatter_add_jvp: scattered to the selected element",
                                     "a tie in a window", _W, _reg("select_and_scatter_add"), (1,)),
    "gather": Kinked("_gather_jvp_rule: gather(g, indices), the indices not differentiated",
                     "where the chosen index changes", _SL, _reg("gather"), (1,)),
    "dynamic_slice": Kinked("_dynamic_slice_jvp: dynamic_slice(g, *start_indices)",
                            "where the start index changes", _SL, _reg("dynamic_slice")),
    "dynamic_update_slice": Kinked("_dynamic_update_slice_jvp: the start indices not differentiated",
                                   "where the start index changes", _SL, _reg("dynamic_update_slice")),
    "scatter_add": Kinked("_scatter_addsub_jvp: scatter_add(g, indices, t), the indices not differentiated",
                          "where the chosen index changes", _SL, _reg("scatter_add"), (1,)),
    "scatter": Kinked("_scatter_jvp: the indices not differentiated, last write wins",
                      "where the chosen index changes", _SL, _reg("scatter"), (1,)),
    "eigh": Kinked("_eigh_jvp_rule: Fmat = 1 / (w_j - w_i) off the diagonal", "a repeated eigenvalue", _LA,
                   _reg("eigh"), (0,)),
    "eig": Kinked("eig_jvp_rule / _eig_vec_jvp: 1 / (w_j - w_i)", "a repeated eigenvalue", _LA, _reg("eig"), (0,)),
    "svd": Kinked("_svd_jvp_rule: F = 1 / (s_j**2 - s_i**2), s_inv = 1 / s", "a repeated or zero singular value",
                  _LA, _reg("svd"), (0,)),
    "cond": Kinked("_cond_jvp: the JVP of the branch the index selects, the index not differentiated",
                   "where the branch index changes", _COND, _reg("cond"), (0,)),
    "while": Kinked("_while_loop_jvp: the trip count not differentiated", "where the trip count changes", _LOOPS,
                    _reg("while")),
    "convert_element_type": Kinked("_convert_element_type_jvp_rule: zero tangent to or from an integer/bool",
                                   "a jump (a comparison or truncation turned into a number)", _L,
                                   _reg("convert_element_type"), (0,)),
}

#: Primitives with a zero JVP and an integer or bool result (a comparison): they make a function with only
#: integer or bool outputs "look kinked" (listed as excluded); a float output that depends on one is caught
#: by the ``select_n`` or ``convert_element_type`` it goes through.
ZERO_JVP = {"eq": "ad.defjvp_zero(eq_p)", "ne": "ad.defjvp_zero(ne_p)", "lt": "ad.defjvp_zero(lt_p)",
            "le": "ad.defjvp_zero(le_p)", "gt": "ad.defjvp_zero(gt_p)", "ge": "ad.defjvp_zero(ge_p)",
            "is_finite": "ad.defjvp_zero(is_finite_p)"}

#: Hand corrections and the functions the tracer cannot reach, by public name.
#: ``("kinked", derivative, kink)`` lists a function; ``("excluded", reason)`` lists it as excluded;
#: ``("smooth", evidence)`` removes a traced false positive or records an untraceable function as not kinked.
#: Grouped as (decision, evidence, names); checked by hand on jax 0.10.2 (the spot checks are in the
#: tests: ``jax.grad`` at the kink).
_HAND_GROUPS: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    # -- traced false positives: the hit only guards nan/inf, a removable singularity, or recombines -----
    (("smooth", "select_n only replaces nan/inf entries (isnan/isinf guards); smooth on the reals"),
     ("jax.numpy.nan_to_num", "jax.numpy.nancumprod", "jax.numpy.nancumsum", "jax.numpy.nanmean",
      "jax.numpy.nanprod", "jax.numpy.nansum", "jax.numpy.nanvar")),
    (("smooth", ("select_n only guards a removable singularity or an inf argument; the custom_jvp rule is "
                "a smooth formula")),
     ("jax.numpy.sinc", "jax.numpy.logaddexp", "jax.numpy.logaddexp2", "jax.nn.softplus", "jax.nn.log_sigmoid",
      "jax.nn.mish", "jax.lax.cumlogsumexp", "jax.scipy.special.boxcox", "jax.scipy.special.boxcox1p",
      "jax.scipy.special.loggamma")),
    (("smooth", ("C1: the derivative 1 / (1 + |x|)**2 is continuous at 0 (jax.grad gives 1 at 0 and at "
                "+-1e-9); only the second derivative jumps")), ("jax.nn.soft_sign",)),
    (("smooth", ("exp(-|x|) * I1(x) is C1 at 0 (I1(0) = 0); _bessel_i1e_jvp returns 0.5 at 0, the limit from "
                "both sides")), ("jax.lax.bessel_i1e", "jax.scipy.special.i1e")),
    (("smooth", "I0 and I1 are entire: exp(|x|) * i0e(x) recombines the |x| of the scaled Bessel function"),
     ("jax.numpy.i0", "jax.scipy.special.i0", "jax.scipy.special.i1")),
    (("smooth", ("partial pivoting (a gather by LU pivots) is internal; the function is smooth where the "
                "matrix is invertible and its JVP is a linear solve")),
     ("jax.numpy.linalg.inv", "jax.numpy.linalg.solve", "jax.numpy.linalg.tensorinv",
      "jax.numpy.linalg.tensorsolve", "jax.numpy.linalg.slogdet")),
    (("smooth", ("branches between approximations of one analytic function (series / asymptotic / rational "
                "pieces), smooth in the domain")),
     ("jax.scipy.special.ndtr", "jax.scipy.special.ndtri", "jax.scipy.special.sici", "jax.scipy.special.fresnel",
      "jax.scipy.special.spence", "jax.scipy.special.zeta", "jax.scipy.special.hyp1f1",
      "jax.scipy.special.gamma", "jax.scipy.special.beta", "jax.scipy.special.comb")),
    (("smooth", "min/max only order the arguments of a symmetric smooth formula"), ("jax.scipy.special.betaln",)),
    (("smooth", ("max(var, 0) clips rounding only (var >= 0, its gradient vanishes where var = 0) and "
                "sqrt(var + epsilon) has epsilon > 0")), ("jax.nn.standardize",)),
    (("smooth", "sqrt(x**2 + b) with b = 4 > 0"), ("jax.nn.squareplus",)),
    (("smooth", ("C1: 0, (x + 1)**2 / 4, x join with matching slopes 0 at -1 and 1 at 1 (jax.grad: 0, 0, 5e-10 "
                "around -1; 1 - 5e-10, 1, 1 around 1)")), ("jax.nn.sparse_plus",)),
    (("smooth", "x * 2**e is linear in x; the exponent e is an integer argument"), ("jax.numpy.ldexp",)),
    (("smooth", "integer exponents (x ** k, k = 0, 1, ...)"), ("jax.numpy.vander",)),
    (("smooth", "start and stop are nonzero with one sign in the domain: sign(start) is constant there"),
     ("jax.numpy.geomspace",)),
    (("smooth", "integer shift / index arguments (the hits came from a float sample in an integer position)"),
     ("jax.numpy.roll", "jax.numpy.unravel_index")),
    # -- traced, but the decision needs words ---------------------------------------------------------
    (("excluded", "integer- or bool-valued output", "one_hot: eq(x, iota) converted to float",
      "an index input: constant between integers"), ("jax.nn.one_hot",)),
    (("excluded", "random", "the gradient helper of jax.random.gamma (a series loop)", ""),
     ("jax.lax.random_gamma_grad",)),
    (("excluded", "piecewise constant: its jumps sit at the poles of gamma (outside the domain)",
      "gammasgn: where(floor(x) % 2 ...)", "nonpositive integers"), ("jax.scipy.special.gammasgn",)),
    (("kinked", "custom_jvp _xlogy_jvp: x_dot * log(y) + y_dot * x / y; primal where(x == 0, 0, x * log(y))",
      "x = 0 (not Lipschitz at x = y = 0: jax.grad gives (-inf, nan))"),
     ("jax.scipy.special.xlogy", "jax.scipy.special.xlog1py")),
    (("kinked", "custom_jvp _pinv_jvp on svd: singular values below rcond * max(s) are dropped",
      "a rank change (a singular value crossing the cutoff): pinv jumps"), ("jax.numpy.linalg.pinv",)),
    (("kinked", "qr_jvp_rule on LAPACK geqrf: the Householder sign follows a[0, 0]",
      "a diagonal pivot crossing 0: R[0, 0] jumps from -1 to 1 for [[e, 1], [1, 1]] as e crosses 0"),
     ("jax.numpy.linalg.qr",)),
    (("kinked", "eig_jvp_rule (lax/linalg.py): 1 / (w_j - w_i)", "a repeated eigenvalue"),
     ("jax.numpy.linalg.eig",)),
    # -- not traceable from array samples ---------------------------------------------------------------
    (("kinked", "_cond_jvp: the JVP of the branch the index selects, the index not differentiated",
      "where the predicate / index computed from the operands changes"), ("jax.lax.cond", "jax.lax.switch")),
    (("kinked", "_while_loop_jvp: the trip count not differentiated", "where the trip count changes"),
     ("jax.lax.while_loop",)),
    (("kinked", "_select_jvp: select_n(which, *case_tangents), the predicate not differentiated",
      "where the predicate changes"), ("jax.lax.select", "jax.lax.select_n")),
    (("kinked", ("reduce_window with lax.max/min lowers to reduce_window_max_p / min_p: "
                "_reduce_window_chooser_jvp_rule"), "a tie in a window (max/min pooling)"),
     ("jax.lax.reduce_window",)),
    (("kinked", "reduce with lax.max/min lowers to reduce_max_p / reduce_min_p: _reduce_chooser_jvp_rule",
      "a tie of the maximum/minimum"), ("jax.lax.reduce",)),
    (("kinked", "_scatter_extremal_jvp: the tangent of the operand or update that wins the max/min",
      "a tie between operand and update"), ("jax.lax.scatter_max", "jax.lax.scatter_min")),
    (("excluded", "integer- or bool-valued output", "ad.defjvp_zero(argmax_p)", "a tie of the maximum"),
     ("jax.lax.argmax", "jax.lax.argmin")),
    (("excluded", "higher-order: kinked exactly when the function it applies is (listed under that function)",
      "", ""),
     ("jax.lax.associative_scan", "jax.lax.custom_linear_solve", "jax.lax.custom_root", "jax.lax.fori_loop",
      "jax.lax.map", "jax.lax.scan", "jax.numpy.apply_along_axis", "jax.numpy.apply_over_axes",
      "jax.numpy.vectorize", "jax.numpy.fromfunction", "jax.lax.composite", "jax.lax.platform_dependent")),
    (("excluded", "data-dependent output shape: not traceable, so not differentiable under jax transformations",
      "sort-based (unique values)", "a tie of elements"),
     ("jax.numpy.unique", "jax.numpy.unique_all", "jax.numpy.unique_counts", "jax.numpy.unique_inverse",
      "jax.numpy.unique_values", "jax.numpy.intersect1d", "jax.numpy.setdiff1d", "jax.numpy.setxor1d",
      "jax.numpy.union1d", "jax.numpy.trim_zeros")),
    (("excluded", "not differentiable by design", "reduce_precision_p: a rounding cast", "a rounding step"),
     ("jax.lax.reduce_precision",)),
    (("smooth", ("linear in the float operand; integer indices / shapes / padding are arguments, not outputs of "
                "the input")),
     ("jax.lax.dynamic_slice", "jax.lax.dynamic_update_slice", "jax.lax.dynamic_update_index_in_dim",
      "jax.lax.dynamic_update_slice_in_dim", "jax.lax.gather", "jax.lax.index_take", "jax.lax.scatter",
      "jax.lax.scatter_add", "jax.lax.scatter_sub", "jax.lax.scatter_apply", "jax.lax.slice", "jax.lax.pad",
      "jax.lax.squeeze", "jax.lax.concatenate", "jax.lax.broadcast_in_dim", "jax.lax.real", "jax.lax.imag",
      "jax.lax.fft", "jax.numpy.choose", "jax.numpy.compress", "jax.numpy.extract", "jax.numpy.place",
      "jax.numpy.put", "jax.numpy.put_along_axis", "jax.numpy.take_along_axis", "jax.numpy.fill_diagonal",
      "jax.numpy.dsplit", "jax.numpy.astype", "jax.lax.convert_element_type", "jax.lax.with_sharding_constraint",
      "jax.lax.dce_sink", "jax.numpy.linalg.multi_dot", "jax.nn.glu")),
    (("smooth", "multilinear (scale * dot products)"),
     ("jax.lax.scatter_mul", "jax.lax.dot_general", "jax.lax.ragged_dot", "jax.lax.ragged_dot_general",
      "jax.lax.conv", "jax.lax.conv_general_dilated", "jax.lax.conv_general_dilated_local",
      "jax.lax.conv_general_dilated_patches", "jax.lax.conv_transpose", "jax.lax.conv_with_general_padding",
      "jax.nn.scaled_dot_general", "jax.nn.scaled_matmul")),
    (("smooth", "analytic in the domain (special function)"),
     ("jax.lax.betainc", "jax.lax.polygamma", "jax.scipy.special.betainc", "jax.scipy.special.bessel_jn",
      "jax.scipy.special.hyp2f1", "jax.scipy.special.polygamma", "jax.scipy.special.sph_harm_y")),
    (("smooth", "collective over a named mapped axis (needs shard_map/pmap): a sum, mean or permutation"),
     ("jax.lax.all_gather", "jax.lax.all_to_all", "jax.lax.pbroadcast", "jax.lax.pcast", "jax.lax.pmean",
      "jax.lax.ppermute", "jax.lax.precv", "jax.lax.psend", "jax.lax.pshuffle", "jax.lax.psum_scatter",
      "jax.lax.pswapaxes", "jax.lax.ragged_all_to_all", "jax.lax.axis_index", "jax.lax.axis_size")),
    (("excluded", "not differentiable by design",
      "pmax_p / pmin_p have no JVP rule (jax.grad raises)", "a tie across devices"),
     ("jax.lax.pmax", "jax.lax.pmin")),
    (("smooth", ("no float input: integer/bit operations, array creation, windows, indices, dtypes, I/O, "
                "printing")),
     ("jax.numpy.arange", "jax.numpy.argwhere", "jax.numpy.array_repr", "jax.numpy.array_str",
      "jax.numpy.bartlett", "jax.numpy.bincount", "jax.numpy.bitwise_and", "jax.numpy.bitwise_count",
      "jax.numpy.bitwise_invert", "jax.numpy.bitwise_left_shift", "jax.numpy.bitwise_not", "jax.numpy.bitwise_or",
      "jax.numpy.bitwise_right_shift", "jax.numpy.bitwise_xor", "jax.numpy.blackman", "jax.numpy.broadcast_shapes",
      "jax.numpy.diag_indices", "jax.numpy.einsum_path", "jax.numpy.empty", "jax.numpy.eye",
      "jax.numpy.flatnonzero", "jax.numpy.from_dlpack", "jax.numpy.frombuffer", "jax.numpy.fromfile",
      "jax.numpy.fromiter", "jax.numpy.frompyfunc", "jax.numpy.fromstring", "jax.numpy.full", "jax.numpy.gcd",
      "jax.numpy.get_printoptions", "jax.numpy.hamming", "jax.numpy.hanning", "jax.numpy.identity",
      "jax.numpy.indices", "jax.numpy.invert", "jax.numpy.kaiser", "jax.numpy.lcm", "jax.numpy.left_shift",
      "jax.numpy.load", "jax.numpy.mask_indices", "jax.numpy.nonzero", "jax.numpy.ones", "jax.numpy.packbits",
      "jax.numpy.printoptions", "jax.numpy.promote_types", "jax.numpy.ravel_multi_index",
      "jax.numpy.result_type", "jax.numpy.right_shift", "jax.numpy.save", "jax.numpy.savez",
      "jax.numpy.set_printoptions", "jax.numpy.tri", "jax.numpy.tril_indices", "jax.numpy.triu_indices",
      "jax.numpy.unpackbits", "jax.numpy.zeros", "jax.nn.get_scaled_dot_general_config",
      "jax.lax.ConvGeneralDilatedDimensionNumbers", "jax.lax.PrecisionLike", "jax.lax.after_all",
      "jax.lax.bitcast_convert_type", "jax.lax.bitwise_and", "jax.lax.bitwise_not", "jax.lax.bitwise_or",
      "jax.lax.bitwise_xor", "jax.lax.broadcast_shapes", "jax.lax.broadcasted_iota", "jax.lax.clz",
      "jax.lax.conv_dimension_numbers", "jax.lax.conv_general_permutations", "jax.lax.conv_general_shape_tuple",
      "jax.lax.conv_shape_tuple", "jax.lax.conv_transpose_shape_tuple", "jax.lax.create_token", "jax.lax.dtype",
      "jax.lax.empty", "jax.lax.full", "jax.lax.iota", "jax.lax.mulhi", "jax.lax.padtype_to_pads",
      "jax.lax.population_count", "jax.lax.reduce_and", "jax.lax.reduce_or", "jax.lax.reduce_window_shape_tuple",
      "jax.lax.reduce_xor", "jax.lax.rng_uniform", "jax.lax.shift_left", "jax.lax.shift_right_arithmetic",
      "jax.lax.shift_right_logical", "jax.scipy.special.bernoulli")),
)

#: Hand decisions by public name: ``("kinked", derivative, kink)``, ``("excluded", reason, derivative,
#: kink)`` or ``("smooth", evidence)`` (a traced false positive removed, or an untraceable function recorded
#: as not kinked).
HAND: dict[str, tuple[str, ...]] = {n: d for d, names in _HAND_GROUPS for n in names}

#: The public functions that the last :func:`build_census` could not trace and :data:`HAND` does not name
#: (they need a hand decision; ``main`` warns about them).
UNTRACED: list[str] = []


def _jax() -> Any:
    try:
        import jax
        import jax.nn
        import jax.numpy
        import jax.numpy.linalg
        import jax.scipy.special
    except ImportError as err:  # pragma: no cover - exercised without jax only
        raise JaxCensusError(f"JAX is not importable: {err}") from None
    jax.config.update("jax_enable_x64", True)
    return jax


def public_functions() -> dict[str, Callable[..., Any]]:
    """Every public function of :data:`MODULES`, by dotted name, in module order then name order."""
    _jax()

    out: dict[str, Callable[..., Any]] = {}
    for mname in MODULES:
        mod = importlib.import_module(mname)
        names = getattr(mod, "__all__", None) or dir(mod)
        for name in sorted(n for n in names if not n.startswith("_")):
            obj = getattr(mod, name, None)
            if obj is None or isinstance(obj, (type, types.ModuleType)) or not callable(obj):
                continue
            out[f"{mname}.{name}"] = obj
    return out


def _samples() -> list[tuple[str, tuple[Any, ...]]]:
    import numpy as np

    v = np.array([0.5, -1.25, 2.0])
    m = np.array([[2.0, 0.5, -1.0], [0.25, 3.0, 0.75], [-0.5, 1.5, 4.0]])
    s = np.float64(0.75)
    return [("v", (v,)), ("v,v", (v, v)), ("v,v,v", (v, v, v)), ("m", (m,)), ("m,m", (m, m)),
            ("s", (s,)), ("s,s", (s, s)), ("v,1", (v, 1)), ("v,(0,)", (v, (0,))),
            ("v,(3,)", (v, (3,))), ("m,0,1", (m, 0, 1)), ("m,2", (m, 2)), ("v,v,1", (v, v, 1))]


#: The sample argument lists tried for every function (labels; the values are fixed float64 arrays).
SAMPLES = ("v", "v,v", "v,v,v", "m", "m,m", "s", "s,s", "v,1", "v,(0,)", "v,(3,)", "m,0,1", "m,2", "v,v,1")


@dataclass
class Traced:
    """What the traces of one function found."""

    hits: set[str]
    traced: bool = False
    int_only: bool = True
    no_rule: str = ""


def _subjaxprs(eqn: Any) -> list[tuple[str, Any]]:
    from jax._src import core

    out = []
    for k, val in sorted(eqn.params.items()):
        vals = val if isinstance(val, (tuple, list)) else (val,)
        for x in vals:
            if isinstance(x, core.ClosedJaxpr):
                out.append((k, x.jaxpr))
            elif isinstance(x, core.Jaxpr):
                out.append((k, x))
    return out


def _is_float(aval: Any) -> bool:
    import numpy as np

    dt = getattr(aval, "dtype", None)
    return dt is not None and np.issubdtype(dt, np.inexact)


def analyze(jaxpr: Any, dep_in: Sequence[bool], live_out: Sequence[bool] | None = None,
            hits: set[str] | None = None) -> tuple[list[bool], set[str]]:
    """Dependency and hits of one jaxpr: which outputs depend on the inputs marked in ``dep_in``, and the
    :data:`KINKED_PRIMITIVES` whose relevant operands depend on them and whose results reach a live output."""
    from jax._src import core

    hits = set() if hits is None else hits
    dep: dict[Any, bool] = {}

    def d(v: Any) -> bool:
        return not isinstance(v, core.Literal) and dep.get(v, False)

    for v, b in zip(jaxpr.invars, dep_in):
        dep[v] = b
    for v in jaxpr.constvars:
        dep[v] = False
    eqn_sub_dep: list[list[bool]] = []
    for eqn in jaxpr.eqns:
        ins = [d(v) for v in eqn.invars]
        outs = _eqn_dep(eqn, ins)
        eqn_sub_dep.append(ins)
        for v, b in zip(eqn.outvars, outs):
            dep[v] = b
    dep_out = [d(v) for v in jaxpr.outvars]
    # backward liveness
    live: set[Any] = set()
    lo = live_out if live_out is not None else [True] * len(jaxpr.outvars)
    for v, b in zip(jaxpr.outvars, lo):
        if b and not isinstance(v, core.Literal):
            live.add(v)
    for eqn, ins in zip(reversed(jaxpr.eqns), reversed(eqn_sub_dep)):
        out_live = [v in live for v in eqn.outvars]
        if not any(out_live) or eqn.primitive.name == "stop_gradient":
            continue  # nothing differentiable flows back through stop_gradient
        for v in eqn.invars:
            if not isinstance(v, core.Literal):
                live.add(v)
        _eqn_hits(eqn, ins, out_live, hits)
    return dep_out, hits


_NO_RECURSE = {"custom_jvp_call", "linear_solve", "custom_lin"}


def _eqn_dep(eqn: Any, ins: list[bool]) -> list[bool]:
    name = eqn.primitive.name
    n_out = len(eqn.outvars)
    if name == "stop_gradient":
        return [False] * n_out
    subs = _subjaxprs(eqn)
    if name in ("while", "scan"):
        return _loop_dep(eqn, ins)[0]
    if subs and name not in _NO_RECURSE:
        outs = [False] * n_out
        for _, sj in subs:
            sin = _map_in(sj, ins)
            if sin is None or len(sj.outvars) != n_out:
                return [any(ins)] * n_out
            so, _ = analyze(sj, sin, [False] * len(sj.outvars))
            outs = [a or b for a, b in zip(outs, so)]
        return outs
    return [any(ins)] * n_out


def _map_in(sj: Any, ins: list[bool]) -> list[bool] | None:
    if len(sj.invars) == len(ins):
        return ins
    if len(sj.invars) == len(ins) - 1:  # cond: the index first
        return ins[1:]
    return None


def _loop_dep(eqn: Any, ins: list[bool]) -> tuple[list[bool], list[bool]]:
    """Output dependency of a while/scan (carry to a fixed point) and the dependency of the body inputs."""
    p = eqn.params
    if eqn.primitive.name == "while":
        cn, bn = p["cond_nconsts"], p["body_nconsts"]
        cconst, bconst, carry = ins[:cn], ins[cn:cn + bn], list(ins[cn + bn:])
        body = p["body_jaxpr"].jaxpr
        for _ in range(len(carry) + 2):
            bo, _ = analyze(body, bconst + carry, [False] * len(body.outvars))
            new = [a or b for a, b in zip(carry, bo)]
            if new == carry:
                break
            carry = new
        return carry, cconst + carry
    nc, ncarry = p["num_consts"], p["num_carry"]
    body = p["jaxpr"].jaxpr
    consts, carry, xs = ins[:nc], list(ins[nc:nc + ncarry]), ins[nc + ncarry:]
    ys = [False] * (len(body.outvars) - ncarry)
    for _ in range(len(carry) + 2):
        bo, _ = analyze(body, consts + carry + xs, [False] * len(body.outvars))
        new = [a or b for a, b in zip(carry, bo[:ncarry])]
        ys = bo[ncarry:]
        if new == carry:
            break
        carry = new
    return carry + ys, consts + carry + xs


def _eqn_hits(eqn: Any, ins: list[bool], out_live: list[bool], hits: set[str]) -> None:
    name = eqn.primitive.name
    if name in ("while", "scan"):
        carry_out, body_in = _loop_dep(eqn, ins)
        if name == "while":
            cj, bj = eqn.params["cond_jaxpr"].jaxpr, eqn.params["body_jaxpr"].jaxpr
            cn = eqn.params["cond_nconsts"]
            bn = eqn.params["body_nconsts"]
            cdep, _ = analyze(cj, body_in, [False])  # body_in: cond consts + carry (a fixed point)
            if any(cdep):
                hits.add("while")
            analyze(bj, ins[cn:cn + bn] + carry_out, None, hits)
        else:
            bj = eqn.params["jaxpr"].jaxpr
            analyze(bj, body_in, None, hits)
        return
    if name not in _NO_RECURSE:
        for _, sj in _subjaxprs(eqn):
            sin = _map_in(sj, ins)
            live = out_live if len(sj.outvars) == len(out_live) else None
            analyze(sj, sin if sin is not None else [any(ins)] * len(sj.invars), live, hits)
    if name in ZERO_JVP and any(ins):
        hits.add(name)
        return
    k = KINKED_PRIMITIVES.get(name)
    if k is None:
        if name.startswith("scatter") and len(ins) > 1 and ins[1]:
            hits.add("scatter")
        return
    if name == "convert_element_type":
        src, dst = eqn.invars[0].aval, eqn.outvars[0].aval
        if ins[0] and _is_float(src) != _is_float(dst):
            hits.add(name)
        return
    if name in ("dynamic_slice", "dynamic_update_slice"):
        first = 1 if name == "dynamic_slice" else 2
        if any(ins[first:]):
            hits.add(name)
        return
    ops = k.operands if k.operands is not None else range(len(ins))
    if any(ins[i] for i in ops if i < len(ins)):
        hits.add(name)


def _trace(f: Callable[..., Any], args: tuple[Any, ...], res: Traced) -> None:
    jax = _jax()
    import numpy as np

    arrays = [i for i, a in enumerate(args) if isinstance(a, (np.ndarray, np.floating))]
    static = {i: a for i, a in enumerate(args) if i not in arrays}

    def call(*xs: Any) -> Any:
        full = list(args)
        for i, x in zip(arrays, xs):
            full[i] = x
        return f(*full)

    primals = tuple(np.asarray(args[i]) for i in arrays)
    try:
        out_shape = jax.eval_shape(call, *primals)
    except Exception:  # noqa: BLE001 - a sample that does not fit the signature: try the next one
        return
    leaves = jax.tree_util.tree_leaves(out_shape)
    if not leaves or not all(hasattr(x, "dtype") for x in leaves):
        return
    del static

    def jvp(*pt: Any) -> Any:
        n = len(pt) // 2
        return jax.jvp(call, pt[:n], pt[n:])

    try:
        closed = jax.make_jaxpr(jvp)(*primals, *primals)
    except Exception as err:  # noqa: BLE001 - any failure: a missing rule is recorded, the rest skipped
        msg = str(err)
        m = re.search(r"Differentiation rule for '(\w+)' not implemented", msg)
        if m:
            res.traced = True
            res.no_rule = m.group(1)
            res.int_only = res.int_only and not any(_is_float(x) for x in leaves)
        return
    res.traced = True
    if any(_is_float(x) for x in leaves):
        res.int_only = False
    n = len(primals)
    analyze(closed.jaxpr, [True] * n + [False] * n, None, res.hits)


def trace_function(f: Callable[..., Any]) -> Traced:
    """Trace ``f`` on every sample of :data:`SAMPLES` and collect the hits (union over the samples)."""
    res = Traced(hits=set())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _, args in _samples():
            _trace(f, args, res)
    if not res.traced:
        res.int_only = False
    return res


def _jax_src() -> Path:
    jax = _jax()
    return Path(jax.__file__).parent / "_src"


def rule_sites() -> dict[str, str]:
    """``primitive -> "lax/lax.py:LINE"``: where each :data:`KINKED_PRIMITIVES` rule is registered in the
    installed JAX. Raises :class:`JaxCensusError` when one is not found."""
    root = _jax_src()
    texts: dict[str, str] = {}
    out = {}
    for prim, k in KINKED_PRIMITIVES.items():
        if k.file not in texts:
            try:
                texts[k.file] = (root / k.file).read_text(encoding="utf-8")
            except OSError as err:
                raise JaxCensusError(f"cannot read jax/_src/{k.file}: {err.strerror}") from None
        m = re.search(k.site, texts[k.file])
        if m is None:
            raise JaxCensusError(f"the JVP rule of {prim}_p is not registered in jax/_src/{k.file} any more "
                                 f"(pattern {k.site!r}); update KINKED_PRIMITIVES")
        out[prim] = f"{k.file}:{texts[k.file].count(chr(10), 0, m.start()) + 1}"
    return out


def _alias_target(name: str, f: Any, names: dict[str, Any]) -> str | None:
    doc = (inspect.getdoc(f) or "").strip()
    m = re.match(r"Alias of :func:`(jax\.[\w.]+)`", doc)
    if m and m.group(1) in names and m.group(1) != name:
        return m.group(1)
    return None


def _method_names() -> set[str]:
    try:
        from jax._src.numpy import array_methods
    except ImportError:  # pragma: no cover
        return set()
    return {k for k in getattr(array_methods, "_array_methods", {}) if not k.startswith("_")}


def build_census(existing: Census | None = None, only: Iterable[str] | None = None) -> Census:
    """Trace every public function and build the census (ops sorted by name), keeping ``existing``'s
    hand-checked fields. ``only``: restrict to these names (for tests)."""
    jax = _jax()
    funcs = public_functions()
    for name in HAND:
        if name not in funcs:
            raise JaxCensusError(f"HAND names {name}, which jax {jax.__version__} does not have")
    chosen = list(funcs) if only is None else [n for n in funcs if n in set(only)]
    sites = rule_sites()
    # aliases: a docstring "Alias of" or the same object
    canon: dict[str, str] = {}
    by_id: dict[int, str] = {}
    for name, f in funcs.items():
        tgt = _alias_target(name, f, funcs)
        if tgt is None and id(f) in by_id:
            tgt = by_id[id(f)]
        by_id.setdefault(id(f), name)
        canon[name] = tgt or name
    for name in list(canon):
        seen = {name}
        while canon[canon[name]] != canon[name] and canon[name] not in seen:
            seen.add(canon[name])
            canon[name] = canon[canon[name]]
    methods = _method_names()
    UNTRACED.clear()
    ops: dict[str, Op] = {}
    for name in chosen:
        if canon[name] != name and (only is None or canon[name] in chosen):
            continue
        op = _classify(name, funcs[name], sites)
        if op is None:
            continue
        aliases = [a for a in funcs if a != name and canon[a] == name]
        short = name.rsplit(".", 1)[1]
        if name.startswith("jax.numpy.") and name.count(".") == 2 and short in methods:
            aliases.append(f".{short}")
        for a in aliases:
            if a.startswith("jax.numpy.") and a.count(".") == 2 and a.rsplit(".", 1)[1] in methods:
                aliases.append("." + a.rsplit(".", 1)[1])
        ops[name] = replace(op, aliases=tuple(sorted(set(aliases))))
    if existing is not None:
        for old in existing.ops:
            if old.name in ops:
                new = ops[old.name]
                if old.status == "excluded":
                    new = replace(new, status="excluded", reason=old.reason)
                if old.kink:
                    new = replace(new, kink=old.kink)
                ops[old.name] = new
    src = ("JVP jaxprs of the public functions of " + ", ".join(MODULES) + f" in jax {jax.__version__} "
           "(jax.make_jaxpr of jax.jvp, custom_jvp rules inlined), searched for the primitives with non-smooth "
           "JVP rules in jax/_src/lax/{lax,special,linalg,slicing,windowed_reductions}.py and "
           "jax/_src/lax/control_flow/{loops,conditionals}.py; hand-checked (kinkcheck.frameworks.jax.census.HAND)")
    return Census(framework="jax", release=jax.__version__, source=src,
                  ops=tuple(ops[k] for k in sorted(ops)))


def _classify(name: str, f: Any, sites: dict[str, str]) -> Op | None:
    hand = HAND.get(name)
    if hand is not None:
        if hand[0] == "smooth":
            return None
        if hand[0] == "excluded":
            return Op(name=name, derivative=hand[2] if len(hand) > 2 else "", kink=hand[3] if len(hand) > 3 else "",
                      status="excluded", reason=hand[1])
        return Op(name=name, derivative=hand[1], kink=hand[2])
    res = trace_function(f)
    if not res.traced:
        UNTRACED.append(name)
    if res.no_rule and not res.hits:
        return Op(name=name, derivative=f"no JVP rule for {res.no_rule}_p", status="excluded",
                  reason="not differentiable by design")
    kinked = sorted(h for h in res.hits if h in KINKED_PRIMITIVES)
    zero = sorted(h for h in res.hits if h in ZERO_JVP)
    if not kinked and not (zero and res.int_only):
        return None
    derivative = "; ".join([f"{h}_p: {KINKED_PRIMITIVES[h].rule} [{sites[h]}]" for h in kinked]
                           or [f"{h}_p: {ZERO_JVP[h]}" for h in zero])
    kink = "; ".join(dict.fromkeys(KINKED_PRIMITIVES[h].kink for h in kinked)) or "where the comparison changes"
    if res.int_only:
        return Op(name=name, derivative=derivative, kink=kink, status="excluded",
                  reason="integer- or bool-valued output")
    return Op(name=name, derivative=derivative, kink=kink)


HEADER = ("JAX's census of kinked operations: generated by `python -m kinkcheck.frameworks.jax.census` from JAX's JVP",
          "rules (see that module), hand-checked fields (excluded + reason, kink) kept across regenerations.")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kinkcheck.frameworks.jax.census", description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="output file (default: references/census/jax.toml)")
    ap.add_argument("--existing", default=None, help="the census whose hand-checked fields are kept "
                    "(default: the committed references/census/jax.toml)")
    args = ap.parse_args(argv)
    out = Path(args.out) if args.out else census_path("jax")
    existing_path = Path(args.existing) if args.existing else census_path("jax")
    existing = None
    if existing_path.exists():
        existing = load_census("jax", existing_path.parent) if existing_path.name == "jax.toml" else None
        if existing is None:
            import tempfile  # slow to import

            with tempfile.TemporaryDirectory() as tmp:
                shutil.copy(existing_path, Path(tmp) / "jax.toml")
                existing = load_census("jax", tmp)
    try:
        census = build_census(existing)
    except JaxCensusError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    if UNTRACED:
        print("warning: not traced and not in HAND (decide by hand): " + ", ".join(UNTRACED), file=sys.stderr)
    write_census(census, out, HEADER)
    kinked = sum(o.status == "kinked" for o in census.ops)
    print(f"wrote {out}: {len(census.ops)} ops, {kinked} kinked, {len(census.ops) - kinked} excluded")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
