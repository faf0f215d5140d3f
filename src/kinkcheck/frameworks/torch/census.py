"""PyTorch's census of kinked operations, generated from the installed wheel's own derivative definitions.

``python -m kinkcheck.frameworks.torch.census [--out FILE]`` rewrites ``references/census/torch.toml``.

What it reads
-------------
* ``torchgen/packaged/autograd/derivatives.yaml`` inside the installed ``torch`` wheel (the backward and
  forward formulas of every aten operation autograd knows), parsed with PyYAML.
* The public namespaces of the installed ``torch``: ``torch``, ``torch.nn.functional``, ``torch.linalg``,
  ``torch.special`` and the methods of ``torch.Tensor`` (the public callables that
  :func:`torch.overrides.get_testing_overrides` lists, plus ``torch.nn.functional``'s own functions).
* The existing census file (``--out``), for its hand-checked fields.

How it decides "kinked"
-----------------------
1. Every aten operation of ``derivatives.yaml`` is classified by :data:`ATEN_KINKS`, a hand-checked table
   (aten name -> where the derivative is not smooth), or :data:`ATEN_EXCLUDED` (looks kinked but needs no
   case, with the reason). A formula that shows a piecewise definition (:data:`SUSPECT`: a comparison,
   ``sgn``/``sign``, ``where``/``masked_fill``, a ``*_backward`` helper of a piecewise op, an index chosen by a
   sort or max ...) and is in none of the tables nor :data:`ATEN_SMOOTH` raises :class:`UnclassifiedOp`:
   a new release's new kink cannot pass unnoticed.
2. Each public callable is run once on a small sample input (:data:`SAMPLES`, else a float64 tensor of
   shape (2, 3, 4, 4), then two of them) under a :class:`torch.utils._python_dispatch.TorchDispatchMode`
   that records the aten operations it reaches, i.e. what autograd differentiates. A public operation whose
   record holds a kinked aten operation is kinked; its ``derivative`` quotes that operation's formula
   (abridged). Selections by a mask the caller passes (``where``, ``masked_fill``) count only for the
   operation itself, not for a composite that reaches them (:data:`INCIDENTAL`). A public callable that no
   sample runs is matched by name (``torch.linalg.x`` -> ``linalg_x``, ``torch.special.x`` ->
   ``special_x``, in-place ``x_`` -> ``x``).
3. :data:`PUBLIC` overrides per public name: a kink text, an exclusion with its reason (``C1 at 0``,
   ``random``, ...), checked by hand by computing the gradient at the kink.
4. Spellings of one operation are merged: ``torch.x``, ``torch.nn.functional.x``, ``torch.special.x``,
   ``torch.linalg.x``, the method ``.x`` and the in-place ``x_`` become aliases of the first name in
   :data:`NAMESPACES` order; documented aliases (``torch.clip`` of ``torch.clamp``, the ``arc*`` names)
   likewise when they reach the same aten operations.

Hand-checked fields of an existing file are kept by op name: ``status = "excluded"`` with its reason, and a
``kink`` text when it differs from the generated one. An excluded entry the generator no longer finds is
kept (a hand-added exclusion).

Errors
------
FileNotFoundError
    ``derivatives.yaml`` is absent from the installed torch.
UnclassifiedOp
    A formula looks piecewise but no table classifies its aten operation.
ImportError
    ``torch`` or ``yaml`` (PyYAML) is not installed.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shutil
import sys
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kinkcheck.census import Census, CensusError, Op, census_path, load_census, write_census

__all__ = ["ATEN_EXCLUDED", "ATEN_KINKS", "ATEN_SMOOTH", "DERIVATIVES", "PUBLIC", "SAMPLES", "UnclassifiedOp",
           "aten_formulas", "derivatives_path", "generate", "main", "public_callables", "trace"]

#: Path of the derivative definitions inside the torch wheel (relative to site-packages).
DERIVATIVES = "torchgen/packaged/autograd/derivatives.yaml"

#: Namespaces searched, in the order that picks an operation's name (the first spelling found).
NAMESPACES = ("torch.nn.functional", "torch", "torch.linalg", "torch.special", "Tensor")


class UnclassifiedOp(RuntimeError):
    """A derivatives.yaml formula looks piecewise but no table of this module classifies its operation."""


# ----------------------------------------------------------------------------------------------------------
# The aten tables (hand-checked against derivatives.yaml of torch 2.13.0)
# ----------------------------------------------------------------------------------------------------------

_TIE = "a tie of the selected elements"

#: aten operation -> where its derivative is not smooth.
ATEN_KINKS: dict[str, str] = {
    # elementwise kinks and jumps
    "abs": "x = 0", "sgn": "x = 0 (jump)", "sign": "x = 0 (jump; derivative 0 elsewhere)",
    "floor": "x an integer (jump)", "ceil": "x an integer (jump)", "trunc": "x a nonzero integer (jump)",
    "round": "x a half-integer (jump; with decimals: a half unit of the last digit)",
    "frac": "x a nonzero integer (jump)", "fmod": "x / y a nonzero integer (jump)",
    "remainder": "x / y an integer (jump)", "div": "with rounding_mode: x / y an integer (jump)",
    "copysign": "x = 0 (the sign of y flips the slope)", "nextafter": "x = y (derivative 1 elsewhere, 0 there)",
    "angle": "x = 0 for real x (jump 0 -> pi)", "nan_to_num": "x = +-inf or nan (replaced by constants)",
    "clamp": "x = min, x = max", "clamp_min": "x = min", "clamp_max": "x = max",
    "hardtanh": "x = min_val, x = max_val", "relu": "x = 0", "threshold": "x = threshold (jump to value)",
    "leaky_relu": "x = 0", "rrelu_with_noise": "x = 0", "_prelu_kernel": "x = 0",
    "elu": "x = 0 unless alpha * scale * input_scale = scale (selu: scale 1.0507, alpha 1.6733)",
    "hardswish": "x = -3, x = 3", "hardsigmoid": "x = -3, x = 3", "hardshrink": "|x| = lambd (jump)",
    "softshrink": "|x| = lambd", "softplus": "beta * x = threshold (switch to the identity)",
    "logit": "x = eps, x = 1 - eps when eps is given (clamped)",
    "maximum": "x = y (tie)", "minimum": "x = y (tie)", "fmax": "x = y (tie)", "fmin": "x = y (tie)",
    "where": "the condition's boundary (a kink when the condition depends on the input)",
    "masked_fill": "the mask's boundary (a kink when the mask depends on the input)",
    # domain ends with an infinite derivative
    "sqrt": "x = 0 (infinite derivative)", "pow": "x = 0 with exponent < 1 (infinite derivative), 0 ** 0",
    "asin": "x = +-1 (infinite derivative)", "acos": "x = +-1 (infinite derivative)",
    "acosh": "x = 1 (infinite derivative)", "xlogy": "x = 0 with y = 0 (0 * log 0), y = 0 (infinite)",
    "special_xlog1py": "x = 0 with y = -1", "special_entr": "x = 0 (derivative -inf; -inf for x < 0)",
    "special_i0e": "x = 0 (exp(-|x|))", "atan2": "x = y = 0 (origin)", "hypot": "x = y = 0 (origin)",
    # reductions with ties
    "max": _TIE, "min": _TIE, "amax": _TIE, "amin": _TIE, "aminmax": _TIE, "median": _TIE,
    "nanmedian": _TIE, "kthvalue": _TIE, "mode": _TIE, "sort": _TIE, "topk": _TIE,
    "cummax": "a tie with an earlier element", "cummin": "a tie with an earlier element",
    "logsumexp": "all inputs -inf", "logcumsumexp": "all inputs so far -inf",
    "scatter_reduce": "reduce amax/amin: a tie (prod: zeros)", "index_reduce": "reduce amax/amin: a tie",
    "segment_reduce": "reduce max/min: a tie", "_embedding_bag": "mode='max': a tie in a bag",
    # pooling
    "max_pool2d": "a tie in a window", "max_pool2d_with_indices": "a tie in a window",
    "max_pool3d_with_indices": "a tie in a window", "adaptive_max_pool2d": "a tie in a window",
    "adaptive_max_pool3d": "a tie in a window", "fractional_max_pool2d": "a tie in a window",
    "fractional_max_pool3d": "a tie in a window", "mkldnn_max_pool2d": "a tie in a window",
    "mkldnn_max_pool3d": "a tie in a window",
    # norms and distances
    "norm": "x = 0 (p >= 1; p < 1: any zero element)", "linalg_vector_norm": "x = 0 (ord >= 1; inf: a tie)",
    "dist": "x = y", "renorm": "a sub-tensor's norm = maxnorm; norm 0", "_pdist_forward": "coincident points",
    "_cdist_forward": "coincident points", "_euclidean_dist": "coincident points",
    "_weight_norm_interface": "v = 0", "std": "all elements equal (sqrt at 0)",
    "std_mean": "all elements equal (sqrt at 0)",
    # losses
    "smooth_l1_loss": "|x - y| = beta", "huber_loss": "|x - y| = delta",
    "multi_margin_loss": "margin - x[y] + x[i] = 0", "multilabel_margin_loss_forward": "1 - x[y] + x[i] = 0",
    "binary_cross_entropy": "x at 0 or 1 (log clamped at -100)",
    # linear algebra
    "_linalg_svd": "repeated (or zero) singular values", "_linalg_eigh": "repeated eigenvalues",
    "linalg_eig": "repeated eigenvalues", "linalg_pinv": "a change of rank",
    "linalg_lu": "a tie in the pivot column (partial pivoting)",
    "linalg_lu_factor_ex": "a tie in the pivot column (partial pivoting)",
    # sampling
    "grid_sampler_2d": "grid on a pixel centre (bilinear pieces), at the padding border",
    "grid_sampler_3d": "grid on a voxel centre (trilinear pieces), at the padding border",
    "_grid_sampler_2d_cpu_fallback": "grid on a pixel centre (bilinear pieces), at the padding border",
    # quantization (straight-through estimator inside [quant_min, quant_max])
    "fake_quantize_per_tensor_affine_cachemask": "x at a rounding step or the clamp bounds",
    "fake_quantize_per_channel_affine_cachemask": "x at a rounding step or the clamp bounds",
    "_fake_quantize_per_tensor_affine_cachemask_tensor_qparams": "x at a rounding step or the clamp bounds",
    "_fake_quantize_learnable_per_tensor_affine": "x at a rounding step or the clamp bounds",
    "_fake_quantize_learnable_per_channel_affine": "x at a rounding step or the clamp bounds",
    "_fused_moving_avg_obs_fq_helper": "x at a rounding step or the clamp bounds",
}

#: aten operation -> why it needs no case although its formula looks piecewise or it is kinked-looking.
ATEN_EXCLUDED: dict[str, str] = {
    "bernoulli": "random", "bernoulli_": "random", "cauchy_": "random", "exponential_": "random",
    "geometric_": "random", "log_normal_": "random", "normal_": "random", "normal": "random",
    "poisson": "random", "random_": "random", "uniform_": "random", "native_dropout": "random",
    "_fused_dropout": "random", "multinomial": "random",
    "celu": "C1 at 0: both one-sided derivatives are 1 (only the second derivative jumps)",
}

#: aten operations whose formula matches :data:`SUSPECT` but which are smooth where defined (checked by hand).
ATEN_SMOOTH: dict[str, str] = {
    "log1p": "log1p_backward only checks for sparse input", "sigmoid": "sigmoid_backward", "tanh": "tanh_backward",
    "sinc": "sinc_backward handles x = 0 by its limit (sinc is analytic)", "cumprod": "polynomial",
    "prod": "polynomial (prod_backward handles zeros)", "cumsum": "linear", "gelu": "smooth",
    "silu": "smooth", "mish": "smooth", "glu": "smooth", "mse_loss": "smooth",
    "soft_margin_loss": "smooth", "binary_cross_entropy_with_logits": "smooth", "log_sigmoid_forward": "smooth",
    "nll_loss_forward": "linear", "nll_loss2d_forward": "linear", "_ctc_loss": "smooth", "mvlgamma": "smooth",
    "special_i1": "smooth", "special_i1e": "C1 at 0 (i1(0) = 0 cancels the sgn term)",
    "lerp": "linear", "index_fill": "linear in the input", "index_copy": "linear", "index_put": "linear", "_conv_depthwise2d": "linear", "_slow_conv2d_forward": "linear",
    "_thnn_fused_gru_cell": "smooth", "_pack_padded_sequence": "a selection of rows (linear)",
    "_test_warn_in_autograd": "identity (a test operation)", "convolution_overrideable": "linear", "_thnn_fused_lstm_cell": "smooth", "_trilinear": "multilinear",
    "_index_put_impl_": "linear", "put": "linear", "masked_scatter": "linear given the mask",
    "masked_select": "linear given the mask", "_unsafe_masked_index": "linear given the mask",
    "_unsafe_masked_index_put_accumulate": "linear given the mask", "_masked_softmax": "smooth given the mask",
    "index_add": "linear", "var": "polynomial", "var_mean": "polynomial", "nansum": "linear (nan inputs only)",
    "_linalg_det": "polynomial", "_linalg_slogdet": "smooth where det != 0 (log |det| undefined at 0)",
    "linalg_lstsq": "smooth for full rank", "linalg_qr": "smooth for full rank",
    "cholesky": "smooth on positive definite matrices", "linalg_cholesky_ex": "smooth on positive definite",
    "linalg_householder_product": "smooth", "lu_unpack": "linear in LU_data", "linalg_lu_solve": "smooth",
    "linalg_solve_triangular": "smooth", "triangular_solve": "smooth", "ormqr": "smooth",
    "_linalg_solve_ex": "smooth for invertible A", "linalg_inv_ex": "smooth for invertible A",
    "embedding": "linear", "max_unpool2d": "linear given the indices", "max_unpool3d": "linear given the indices",
    "i0": "smooth", "special_erfcx": "smooth", "native_batch_norm": "smooth (eps > 0)",
    "native_layer_norm": "smooth (eps > 0)", "native_group_norm": "smooth (eps > 0)",
    "_fused_rms_norm": "smooth (eps > 0)", "_native_batch_norm_legit": "smooth (eps > 0)",
    "_native_batch_norm_legit_no_training": "smooth", "_batch_norm_with_update": "smooth (eps > 0)",
    "_batch_norm_no_update": "smooth", "batch_norm_backward": "smooth", "native_batch_norm_backward": "smooth",
    "to_padded_tensor": "linear", "_nested_from_padded_tensor": "linear", "slice_scatter": "linear",
    "frexp": "an exponent change is a jump of the mantissa, not of x (mantissa * 2**exponent = x)",
    "igamma": "smooth in the differentiable argument", "igammac": "smooth in the differentiable argument",
    "scatter": "linear", "scatter_add": "linear", "gather": "linear", "index_select": "linear", "take": "linear",
    "index": "linear", "_unsafe_index": "linear", "_unsafe_index_put": "linear", "one_hot": "integer",
    "count_nonzero": "integer", "_to_copy": "identity", "complex": "linear", "polar": "smooth",
    "logaddexp": "smooth", "logaddexp2": "smooth", "erfinv": "smooth on (-1, 1)", "atanh": "smooth on (-1, 1)",
    "special_ndtri": "smooth on (0, 1)", "special_log_ndtr": "smooth", "linalg_matrix_exp": "smooth",
    "_sparse_mm_reduce_impl": "sparse", "sparse_mask": "sparse", "fill": "constant", "zero": "constant",
    "rrelu_with_noise_functional": "functional form of rrelu_with_noise (listed there)",
}

#: Aten operations that select by a mask the caller passes: kinked as operations of their own, incidental when a
#: composite reaches them (the composite's own kink, if any, is another operation).
INCIDENTAL = frozenset({"where", "masked_fill", "clamp_min", "clamp_max", "clamp", "abs", "sign", "sgn",
                        "nan_to_num", "max", "min", "amax", "amin", "maximum", "minimum", "sqrt", "pow",
                        "div", "floor", "round", "trunc", "ceil"})

#: A formula matching this looks piecewise (see the module docstring).
SUSPECT = re.compile(
    r"\bsgn\b|\bsign\b|\bwhere\b|masked_fill|\s[<>]=?\s|==|!=|\bge\b|\bgt\b|\ble\b|\blt\b|isfinite|"
    r"isnan|zeros_like\(grad\)|evenly_distribute|value_selecting|_backward\w*\(|scale_grad_by_count|"
    r"\bindices\b|rounding_mode")

# ----------------------------------------------------------------------------------------------------------
# Public-level overrides
# ----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Public:
    """A hand-checked fact about one public name: a kink text, an exclusion, or a forced aten mapping."""

    kink: str = ""
    excluded: str = ""
    aten: tuple[str, ...] = ()      # aten operations it reaches, when no sample runs it
    smooth: str = ""                # not kinked although it reaches a kinked aten op (why)


_F = "torch.nn.functional."
_RANDOM = "random (its mask or pooling regions are drawn at random)"
#: Public name -> hand-checked fact.
PUBLIC: dict[str, Public] = {
    _F + "celu": Public(excluded=ATEN_EXCLUDED["celu"]), "torch.celu": Public(excluded=ATEN_EXCLUDED["celu"]),
    _F + "softsign": Public(smooth="x / (1 + |x|) is C1 at 0 (derivative 1 / (1 + |x|)^2)"),
    _F + "selu": Public(kink="x = 0 (slopes 1.0507 and 1.7581)"),
    "torch.selu": Public(kink="x = 0 (slopes 1.0507 and 1.7581)"),
    _F + "elu": Public(kink="x = 0 when alpha != 1"),
    _F + "relu6": Public(kink="x = 0, x = 6"), _F + "hardtanh": Public(kink="x = min_val, x = max_val"),
    _F + "dropout": Public(excluded=_RANDOM), _F + "dropout1d": Public(excluded=_RANDOM),
    _F + "dropout2d": Public(excluded=_RANDOM), _F + "dropout3d": Public(excluded=_RANDOM),
    _F + "alpha_dropout": Public(excluded=_RANDOM), _F + "feature_alpha_dropout": Public(excluded=_RANDOM),
    "torch.dropout": Public(excluded=_RANDOM), "torch.alpha_dropout": Public(excluded=_RANDOM),
    "torch.feature_alpha_dropout": Public(excluded=_RANDOM), "torch.feature_dropout": Public(excluded=_RANDOM),
    _F + "fractional_max_pool2d": Public(excluded=_RANDOM + "; its ties are max_pool's"),
    _F + "fractional_max_pool3d": Public(excluded=_RANDOM + "; its ties are max_pool's"),
    _F + "fractional_max_pool2d_with_indices": Public(excluded=_RANDOM + "; its ties are max_pool's"),
    _F + "fractional_max_pool3d_with_indices": Public(excluded=_RANDOM + "; its ties are max_pool's"),
    _F + "gumbel_softmax": Public(excluded=_RANDOM + " (hard=True: an argmax, constant in x)"),
    "torch.bernoulli": Public(excluded="random"), "torch.poisson": Public(excluded="random"),
    "torch.normal": Public(excluded="random"), "torch.multinomial": Public(excluded="random"),
    _F + "normalize": Public(kink="||x|| = eps (clamp_min of the norm; x = 0)"),
    _F + "pairwise_distance": Public(kink="x1 - x2 + eps = 0"),
    _F + "cosine_similarity": Public(kink="||x1|| * ||x2|| = eps (clamped)"),
    "torch.cosine_similarity": Public(kink="||x1|| * ||x2|| = eps (clamped)"),
    _F + "pdist": Public(kink="coincident points"), "torch.pdist": Public(kink="coincident points"),
    "torch.cdist": Public(kink="coincident points"),
    _F + "hinge_embedding_loss": Public(kink="margin - x = 0 where y = -1"),
    _F + "margin_ranking_loss": Public(kink="-y * (x1 - x2) + margin = 0"),
    _F + "cosine_embedding_loss": Public(kink="cos(x1, x2) = margin where y = -1; norms at eps"),
    _F + "triplet_margin_loss": Public(kink="d(a, p) - d(a, n) + margin = 0; coincident points"),
    _F + "triplet_margin_with_distance_loss": Public(kink="d(a, p) - d(a, n) + margin = 0"),
    _F + "l1_loss": Public(kink="x = y"), _F + "smooth_l1_loss": Public(kink="|x - y| = beta"),
    _F + "huber_loss": Public(kink="|x - y| = delta"),
    _F + "gaussian_nll_loss": Public(kink="var = eps (clamped)"),
    _F + "kl_div": Public(kink="target = 0 (xlogy) when log_target=False"),
    _F + "lp_pool1d": Public(kink="a window's p-norm at 0; sign(x) at 0"),
    _F + "lp_pool2d": Public(kink="a window's p-norm at 0; sign(x) at 0"),
    _F + "lp_pool3d": Public(kink="a window's p-norm at 0; sign(x) at 0"),
    _F + "grid_sample": Public(kink="grid on a pixel centre (bilinear pieces), at the padding border"),
    _F + "embedding_bag": Public(kink="mode='max': a tie in a bag"),
    _F + "embedding": Public(smooth="linear in the weight (max_norm renormalizes in place, without autograd)"),
    _F + "softplus": Public(kink="beta * x = threshold (switch to the identity)"),
    "torch.quantile": Public(kink="a tie of the elements around the quantile (sort)"),
    "torch.nanquantile": Public(kink="a tie of the elements around the quantile (sort)"),
    "torch.linalg.matrix_norm": Public(kink="ord 'nuc'/2/-2: repeated singular values; 'fro': x = 0; inf/1: ties"),
    "torch.linalg.norm": Public(kink="x = 0; matrix ords: repeated singular values or ties"),
    "torch.norm": Public(kink="x = 0; p='nuc': repeated singular values"),
    "torch.nuclear_norm": Public(kink="repeated singular values (and zero ones)"),
    "torch.linalg.cond": Public(kink="repeated singular values"),
    "torch.linalg.svdvals": Public(kink="repeated (or zero) singular values"),
    "torch.linalg.eigvalsh": Public(kink="repeated eigenvalues"),
    "torch.linalg.eigvals": Public(kink="repeated eigenvalues"),
    "torch.linalg.matrix_rank": Public(excluded="integer-valued output"),
    "torch.linalg.slogdet": Public(smooth="log |det| is smooth where det != 0; sign is not differentiable"),
    "torch.slogdet": Public(smooth="log |det| is smooth where det != 0; sign is not differentiable"),
    "torch.logdet": Public(smooth="smooth where det > 0"), "torch.det": Public(smooth="polynomial"),
    "torch.linalg.det": Public(smooth="polynomial"),
    "torch.special.logit": Public(kink="x = eps, x = 1 - eps when eps is given (clamped)"),
    "torch.logit": Public(kink="x = eps, x = 1 - eps when eps is given (clamped)"),
    "torch.heaviside": Public(excluded="not differentiable (no derivative defined: raises)"),
    "torch.signbit": Public(excluded="integer/bool-valued output"),
    "torch.histogram": Public(excluded="not differentiable (no derivative defined)"),
    "torch.histc": Public(excluded="not differentiable (no derivative defined)"),
    "torch.std": Public(kink="all elements equal (sqrt at 0)"),
    "torch.std_mean": Public(kink="all elements equal (sqrt at 0)"),
    "torch.special.entr": Public(kink="x = 0 (derivative -inf; -inf for x < 0)"),
    "torch.nanmean": Public(smooth="linear (nan inputs only)"), "torch.nansum": Public(smooth="linear"),
    "torch.where": Public(kink="the condition's boundary (a kink when the condition depends on the input)"),
    "torch.renorm": Public(kink="a sub-tensor's norm = maxnorm; norm 0"),
    "torch.float_power": Public(kink="x = 0 with exponent < 1 (infinite derivative), 0 ** 0"),
    "torch.pow": Public(kink="x = 0 with exponent < 1 (infinite derivative), 0 ** 0"),
    "torch.max": Public(kink="a tie (max(a, b): a = b)"), "torch.min": Public(kink="a tie (min(a, b): a = b)"),
    "torch.floor_divide": Public(excluded="not differentiable (derivatives.yaml defines none: backward raises)"),
    "torch.nan_to_num": Public(excluded="its pieces meet only at non-finite inputs (nan, +-inf): smooth on the reals"),
    "torch.pca_lowrank": Public(excluded="random (a randomized SVD); the SVD's kinks are torch.linalg.svd's"),
    "torch.svd_lowrank": Public(excluded="random (a randomized SVD); the SVD's kinks are torch.linalg.svd's"),
    "torch.lobpcg": Public(excluded="iterative solver from a random start; the eigenvalue kinks are torch.linalg.eigh's"),
    "torch.argmax": Public(excluded="integer-valued output (an index)"),
    "torch.argmin": Public(excluded="integer-valued output (an index)"),
    "torch.argsort": Public(excluded="integer-valued output (an index)"),
    "torch.searchsorted": Public(excluded="integer-valued output (an index)"),
    "torch.bucketize": Public(excluded="integer-valued output (an index)"),
    **{f"torch.{c}": Public(excluded="integer/bool-valued output (a comparison)")
       for c in ("gt", "ge", "lt", "le", "eq", "ne", "greater", "greater_equal", "less", "less_equal",
                 "not_equal", "isclose")},
}

# ----------------------------------------------------------------------------------------------------------
# Sample inputs for tracing
# ----------------------------------------------------------------------------------------------------------


def _samples() -> dict[str, Callable[[], tuple[tuple[Any, ...], dict[str, Any]]]]:
    import torch

    def t(*shape: int, lo: float | None = None) -> Any:
        x = torch.randn(*shape, dtype=torch.float64)
        if lo is not None:
            x = x.abs() + lo
        return x.requires_grad_()

    def a(*args: Any, **kw: Any) -> Callable[[], tuple[tuple[Any, ...], dict[str, Any]]]:
        return lambda: (tuple(x() if callable(x) else x for x in args), kw)

    img = lambda: t(1, 2, 4, 4)
    sig = lambda: t(1, 2, 6)
    vol = lambda: t(1, 1, 4, 4, 4)
    mat = lambda: t(3, 3)
    def spd() -> Any:
        m = torch.randn(3, 3, dtype=torch.float64)
        return (m @ m.mT + 3 * torch.eye(3, dtype=torch.float64)).requires_grad_()
    pos = lambda: t(2, 3, lo=0.1)
    unit = lambda: torch.rand(2, 3, dtype=torch.float64).mul(0.8).add(0.1).requires_grad_()
    tgt = lambda: torch.tensor([1, 0])
    vec = lambda: t(2, 3)
    sign = lambda: torch.tensor([1.0, -1.0], dtype=torch.float64)
    f = "torch.nn.functional."
    s: dict[str, Callable[[], tuple[tuple[Any, ...], dict[str, Any]]]] = {}
    for n in ("max_pool1d", "avg_pool1d", "max_pool1d_with_indices", "lp_pool1d"):
        s[f + n] = a(sig, *( (2, 2) if n == "lp_pool1d" else (2,)))
    for n in ("max_pool2d", "avg_pool2d", "max_pool2d_with_indices", "lp_pool2d"):
        s[f + n] = a(img, *((2, 2) if n == "lp_pool2d" else (2,)))
    for n in ("max_pool3d", "avg_pool3d", "max_pool3d_with_indices", "lp_pool3d"):
        s[f + n] = a(vol, *((2, 2) if n == "lp_pool3d" else (2,)))
    for d, x in (("1d", sig), ("2d", img), ("3d", vol)):
        for n in ("adaptive_max_pool", "adaptive_avg_pool", "adaptive_max_pool{}_with_indices"):
            s[f + (n.format(d) if "{}" in n else n + d)] = a(x, 2)
        s["torch.adaptive_max_pool1d"] = a(sig, 2)
        s["torch.adaptive_avg_pool1d"] = a(sig, 2)
        s[f + "fractional_max_pool" + d] = a(x, 2, output_size=2) if d != "1d" else a(x)
    for n in ("max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "max_pool1d_with_indices"):
        x = {"1": sig, "2": img, "3": vol}[re.findall(r"\d", n)[0]]
        s["torch." + n] = a(x, 2)
    for n in ("l1_loss", "mse_loss", "smooth_l1_loss", "huber_loss", "soft_margin_loss", "kl_div",
              "multilabel_soft_margin_loss", "poisson_nll_loss"):
        s[f + n] = a(vec, vec)
    s[f + "binary_cross_entropy"] = a(unit, unit)
    s[f + "binary_cross_entropy_with_logits"] = a(vec, unit)
    s[f + "kl_div"] = a(vec, unit)
    s[f + "gaussian_nll_loss"] = a(vec, vec, pos)
    s[f + "nll_loss"] = a(vec, tgt)
    s[f + "cross_entropy"] = a(vec, tgt)
    s[f + "multi_margin_loss"] = a(vec, tgt)
    s[f + "multilabel_margin_loss"] = a(vec, lambda: torch.tensor([[1, -1, 0], [0, 2, -1]]))
    s[f + "hinge_embedding_loss"] = a(vec, lambda: torch.tensor([[1.0, -1, 1], [-1, 1, -1]]))
    s[f + "margin_ranking_loss"] = a(vec, vec, lambda: torch.tensor([[1.0, -1, 1], [-1, 1, -1]]))
    s[f + "cosine_embedding_loss"] = a(vec, vec, sign)
    s[f + "triplet_margin_loss"] = a(vec, vec, vec)
    s[f + "triplet_margin_with_distance_loss"] = a(vec, vec, vec)
    s[f + "ctc_loss"] = a(lambda: t(5, 1, 3).log_softmax(2).detach().requires_grad_(),
                          lambda: torch.tensor([[1, 2]]), [5], [2])
    s[f + "embedding"] = a(lambda: torch.tensor([0, 2]), mat)
    s[f + "embedding_bag"] = a(lambda: torch.tensor([0, 2, 1]), mat, lambda: torch.tensor([0]), mode="max")
    s["torch.embedding_bag"] = a(mat, lambda: torch.tensor([0, 2, 1]), lambda: torch.tensor([0]), False, 2)
    s[f + "grid_sample"] = a(img, lambda: (torch.rand(1, 3, 3, 2, dtype=torch.float64) * 2 - 1).requires_grad_(),
                             align_corners=False)
    s[f + "affine_grid"] = a(lambda: t(1, 2, 3), [1, 1, 3, 3], align_corners=False)
    s[f + "interpolate"] = a(img, scale_factor=2, mode="bilinear")
    s[f + "upsample"] = a(img, scale_factor=2, mode="bilinear")
    s[f + "upsample_bilinear"] = a(img, scale_factor=2)
    s[f + "upsample_nearest"] = a(img, scale_factor=2)
    s[f + "pad"] = a(img, (1, 1), mode="reflect")
    s[f + "conv1d"] = a(sig, lambda: t(2, 2, 3))
    s[f + "conv2d"] = a(img, lambda: t(2, 2, 3, 3))
    s[f + "conv3d"] = a(vol, lambda: t(1, 1, 2, 2, 2))
    s[f + "conv_transpose1d"] = a(sig, lambda: t(2, 2, 3))
    s[f + "conv_transpose2d"] = a(img, lambda: t(2, 2, 3, 3))
    s[f + "conv_transpose3d"] = a(vol, lambda: t(1, 1, 2, 2, 2))
    s[f + "linear"] = a(vec, mat)
    s[f + "bilinear"] = a(vec, vec, lambda: t(2, 3, 3))
    s[f + "prelu"] = a(vec, lambda: t(1))
    s["torch.prelu"] = a(vec, lambda: t(1))
    s[f + "rrelu"] = a(vec)
    s[f + "glu"] = a(lambda: t(2, 4))
    s[f + "unfold"] = a(img, 2)
    s[f + "fold"] = a(lambda: t(1, 8, 9), (4, 4), 2)
    s[f + "layer_norm"] = a(vec, (3,))
    s[f + "group_norm"] = a(img, 1)
    s[f + "rms_norm"] = a(vec, (3,))
    s[f + "local_response_norm"] = a(img, 2)
    s[f + "batch_norm"] = a(vec, torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64))
    s[f + "instance_norm"] = a(sig)
    s[f + "pixel_shuffle"] = a(lambda: t(1, 4, 2, 2), 2)
    s[f + "pixel_unshuffle"] = a(img, 2)
    s[f + "channel_shuffle"] = a(img, 2)
    s[f + "native_channel_shuffle"] = a(img, 2)
    s[f + "one_hot"] = a(tgt)
    s[f + "scaled_dot_product_attention"] = a(lambda: t(1, 2, 3), lambda: t(1, 2, 3), lambda: t(1, 2, 3))
    s[f + "softmax"] = a(vec, 1)
    s[f + "softmin"] = a(vec, 1)
    s[f + "log_softmax"] = a(vec, 1)
    s[f + "gumbel_softmax"] = a(vec)
    s[f + "threshold"] = a(vec, 0.0, 0.0)
    s["torch.threshold"] = a(vec, 0.0, 0.0)
    s[f + "threshold_"] = a(lambda: t(2, 3).detach(), 0.0, 0.0)
    # torch
    s["torch.cdist"] = a(vec, vec)
    s["torch.pdist"] = a(vec)
    s[f + "pdist"] = a(vec)
    s["torch.quantile"] = a(vec, 0.3)
    s["torch.nanquantile"] = a(vec, 0.3)
    s["torch.renorm"] = a(vec, 2, 0, 1.0)
    s["torch.kthvalue"] = a(vec, 2)
    s["torch.topk"] = a(vec, 2)
    s["torch.clamp"] = a(vec, -0.5, 0.5)
    s["torch.clip"] = a(vec, -0.5, 0.5)
    s["torch.clamp_min"] = a(vec, 0.0)
    s["torch.clamp_max"] = a(vec, 0.0)
    s["torch.where"] = a(lambda: torch.tensor([[True, False, True], [False, True, False]]), vec, vec)
    s["torch.pow"] = a(pos, 0.5)
    s["torch.float_power"] = a(pos, 0.5)
    s["torch.div"] = a(vec, vec, rounding_mode="floor")
    s["torch.divide"] = a(vec, vec, rounding_mode="floor")
    s["torch.logit"] = a(unit, 1e-3)
    s["torch.special.logit"] = a(unit, 1e-3)
    s["torch.round"] = a(vec)
    s["torch.scatter_reduce"] = a(vec, 1, lambda: torch.tensor([[0, 1, 0], [1, 0, 1]]), vec, "amax")
    s["torch.index_reduce"] = a(vec, 0, lambda: torch.tensor([0, 0]), vec, "amax")
    s["torch.segment_reduce"] = a(lambda: t(4), "max", lengths=torch.tensor([2, 2]))
    s["torch.mvlgamma"] = a(lambda: t(2, 3, lo=2.0), 2)
    s["torch.special.multigammaln"] = a(lambda: t(2, 3, lo=2.0), 2)
    s["torch.polygamma"] = a(1, pos)
    s["torch.special.polygamma"] = a(1, pos)
    s["torch.renorm"] = a(vec, 2, 0, 1.0)
    s["torch.fake_quantize_per_tensor_affine"] = a(vec, 0.1, 0, -128, 127)
    s["torch.fake_quantize_per_channel_affine"] = a(vec, lambda: torch.ones(2, dtype=torch.float32) / 10,
                                                    lambda: torch.zeros(2, dtype=torch.int32), 0, -128, 127)
    s["torch.nn.functional.hardtanh"] = a(vec)
    for n in ("cholesky", "cholesky_inverse", "linalg.cholesky", "linalg.cholesky_ex", "linalg.eigh",
              "linalg.eigvalsh", "logdet"):
        s["torch." + n] = a(spd)
    s["torch.cholesky_solve"] = a(mat, lambda: torch.linalg.cholesky(spd()).detach().requires_grad_())
    s["torch.linalg.matrix_power"] = a(mat, 2)
    s["torch.matrix_power"] = a(mat, 2)
    s["torch.linalg.tensorinv"] = a(lambda: t(4, 2, 2), ind=1)
    s["torch.linalg.tensorsolve"] = a(lambda: t(2, 3, 6), lambda: t(2, 3))
    s["torch.linalg.lu_solve"] = a(lambda: torch.linalg.lu_factor(torch.randn(3, 3, dtype=torch.float64))[0]
                                   .requires_grad_(), lambda: torch.tensor([1, 2, 3], dtype=torch.int32), mat)
    s["torch.linalg.householder_product"] = a(mat, lambda: t(2))
    s["torch.linalg.vander"] = a(lambda: t(3))
    s["torch.linalg.multi_dot"] = a(lambda: [t(2, 3), t(3, 3)])
    s["torch.linalg.vecdot"] = a(vec, vec)
    s["torch.linalg.cross"] = a(mat, mat)
    s["torch.linalg.ldl_factor"] = a(spd)
    s["torch.linalg.ldl_factor_ex"] = a(spd)
    s["torch.linalg.solve_triangular"] = a(lambda: t(3, 3).triu().detach().add(torch.eye(3, dtype=torch.float64) * 3)
                                           .requires_grad_(), mat, upper=True)
    s["torch.triangular_solve"] = a(mat, lambda: t(3, 3).triu().detach().add(torch.eye(3, dtype=torch.float64) * 3)
                                    .requires_grad_())
    return s


SAMPLES = _samples


# ----------------------------------------------------------------------------------------------------------
# Reading derivatives.yaml
# ----------------------------------------------------------------------------------------------------------


def derivatives_path() -> Path:
    """The ``derivatives.yaml`` of the installed torch (raises :class:`FileNotFoundError` when absent)."""
    import torchgen

    p = Path(torchgen.__file__).parent / "packaged" / "autograd" / "derivatives.yaml"
    if not p.is_file():
        raise FileNotFoundError(f"no derivatives.yaml in the installed torch: {p}")
    return p


@dataclass
class AtenOp:
    """One aten operation (all overloads of one base name) and its formulas."""

    name: str
    formulas: list[str] = field(default_factory=list)   # "overload: arg: formula" lines

    @property
    def text(self) -> str:
        return " ;; ".join(self.formulas)


def aten_formulas(path: str | Path | None = None) -> dict[str, AtenOp]:
    """Base aten name (``max``, ``clamp_min``) -> its overloads' backward formulas, from ``derivatives.yaml``."""
    import yaml

    entries = yaml.safe_load(Path(path or derivatives_path()).read_text(encoding="utf-8"))
    out: dict[str, AtenOp] = {}
    for e in entries:
        full = e["name"].split("(")[0]
        base = full.split(".")[0]
        op = out.setdefault(base, AtenOp(base))
        for k, v in e.items():
            if k in ("name", "dispatch", "output_differentiability") or k.startswith("result"):
                continue
            if isinstance(v, str) and v.strip():
                op.formulas.append(f"{k}: {v.strip()}")
        if e.get("output_differentiability") == [False]:
            op.formulas.append("output_differentiability: [False]")
    return out


def classify_aten(ops: Mapping[str, AtenOp]) -> tuple[dict[str, str], list[str]]:
    """Return (kinked aten name -> kink text, unclassified suspicious names)."""
    kinked = {n: k for n, k in ATEN_KINKS.items() if n in ops or n.rstrip("_") in ops}
    unclassified = []
    for name, op in sorted(ops.items()):
        if name.endswith("_backward") or "backward" in name or name.startswith(("_foreach", "cudnn", "miopen",
                                                                                 "mps", "_mps", "_cudnn",
                                                                                 "mkldnn", "_nested",
                                                                                 "_sparse", "_to_sparse",
                                                                                 "sparse", "_scaled_dot",
                                                                                 "_flash", "_efficient",
                                                                                 "_cudnn", "lstm", "_lstm")):
            continue
        base = name.rstrip("_")
        if {name, base} & (ATEN_KINKS.keys() | ATEN_EXCLUDED.keys() | ATEN_SMOOTH.keys()):
            continue
        text = " ".join(f.split(": ", 1)[1] for f in op.formulas if "not_implemented" not in f)
        if "output_differentiability: [False]" in op.formulas or "non_differentiable" in text and \
                all("non_differentiable" in f or "output_differentiability" in f for f in op.formulas):
            continue
        if SUSPECT.search(text) and not _only_helpers(text):
            unclassified.append(name)
    return kinked, unclassified


_SMOOTH_HELPERS = re.compile(
    r"\b(?:mm_mat[12]_backward|matmul_backward|cat_tensors_backward|stack_tensors_backward|split_backward|"
    r"split_with_sizes_backward|permute_backwards|repeat_backward|as_strided_backward|as_strided_scatter_backward|"
    r"diagonal_backward_symint|slice_backward_wrapper|unfold_backward_symint|trace_backward_symint|"
    r"constant_pad_nd_backward|block_diag_backward|deg2rad_backward|rad2deg_backward|mul_tensor_backward|"
    r"div_tensor_self_backward|div_tensor_other_backward|cumsum_backward|mean_backward|_to_copy_backward|"
    r"sum_backward|to_dense_backward|to_sparse_backward|index_select_backward_symint|gather_backward|"
    r"take_backward|embedding_backward_symint|index_backward|affine_grid_generator_backward_symint|"
    r"convolution_backward_symint|linear_backward|cholesky_backward|cholesky_solve_backward|"
    r"cholesky_inverse_backward|linalg_solve_backward|triangular_solve_backward|conv_tbc_backward|"
    r"upsample_\w+_backward\w*|_upsample_\w+_backward\w*|reflection_pad\w+_backward\w*|"
    r"replication_pad\w+_backward\w*|avg_pool[23]d_backward|_adaptive_avg_pool[23]d_backward|"
    r"_log_softmax_backward_data|_softmax_backward_data|polar_backward|masked_scatter_backward_symint|"
    r"masked_select_backward|masked_fill_backward|mvlgamma_backward|i1_backward|i1e_backward|"
    r"sigmoid_backward|tanh_backward|log1p_backward|sinc_backward|fft_\w+_backward|"
    r"_convolution_double_backward_symint|linalg_lstsq_backward|lu_unpack_backward|ormqr_backward|"
    r"householder_product_backward|linalg_solve_triangular_backward|nll_loss\w*_backward\w*|_ctc_loss_backward|"
    r"infinitely_differentiable_\w+|mkldnn_\w+_backward|conv_depthwise\w*|_grouped_mm_\w+|"
    r"sparse_\w+_backward|_sparse_\w+|to_mkldnn_backward|cumprod_backward|prod_backward|nansum_backward|"
    r"var_backward|var_mean_backward|pinv_backward)\(")


def _only_helpers(text: str) -> bool:
    stripped = _SMOOTH_HELPERS.sub("(", text)
    return not SUSPECT.search(stripped)


# ----------------------------------------------------------------------------------------------------------
# Public callables and tracing
# ----------------------------------------------------------------------------------------------------------

_F_HELPERS = frozenset({"assert_int_or_pair", "boolean_dispatch", "handle_torch_function", "has_torch_function",
                        "has_torch_function_unary", "has_torch_function_variadic"})


def public_callables() -> dict[str, Any]:
    """Public dotted name (``torch.nn.functional.relu``; a Tensor method as ``.relu``) -> callable."""
    import inspect  # slow to import

    import torch
    import torch.nn.functional as F
    from torch.overrides import get_testing_overrides

    overridable = {id(k) for k in get_testing_overrides()}
    spaces = {"torch.nn.functional": F, "torch": torch, "torch.linalg": torch.linalg,
              "torch.special": torch.special}
    out: dict[str, Any] = {}
    for prefix, ns in spaces.items():
        for attr in sorted(dir(ns)):
            if attr.startswith("_"):
                continue
            obj = getattr(ns, attr, None)
            if obj is None or inspect.isclass(obj) or inspect.ismodule(obj) or not callable(obj):
                continue
            if id(obj) in overridable or (prefix == "torch.nn.functional" and attr not in _F_HELPERS
                                           and getattr(obj, "__module__", "").startswith("torch")):
                out[f"{prefix}.{attr}"] = obj
    for attr in sorted(dir(torch.Tensor)):
        if attr.startswith("_"):
            continue
        obj = getattr(torch.Tensor, attr, None)
        if obj is not None and callable(obj) and id(obj) in overridable:
            out[f".{attr}"] = obj
    return out


def trace(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> tuple[frozenset[str], bool] | None:
    """The aten base names ``fn(*args, **kwargs)`` dispatches, and whether a floating-point tensor is among its
    outputs (``None`` when the call fails)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    seen: set[str] = set()

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, a=(), kw=None):
            seen.add(func.overloadpacket.__name__)
            return func(*a, **(kw or {}))

    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            with Record():
                out = fn(*args, **dict(kwargs))
    except Exception:  # noqa: BLE001 - a sample that does not fit is simply not used
        return None
    outs = out if isinstance(out, (tuple, list)) else (out,)
    floating = any(isinstance(o, torch.Tensor) and (o.is_floating_point() or o.is_complex()) for o in outs)
    return frozenset(seen), floating


def _generic_samples() -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    import torch

    def x() -> Any:
        return torch.randn(2, 3, 4, 4, dtype=torch.float64).requires_grad_()

    def m() -> Any:
        return torch.randn(3, 3, dtype=torch.float64).requires_grad_()

    return [((x(),), {}), ((x(), x()), {}), ((m(),), {}), ((m(), m()), {}), ((x(), 1), {}), ((x(), 0.5), {})]


_UNSAFE = frozenset({"torch.set_printoptions", "torch.set_default_dtype", "torch.set_default_tensor_type",
                     "torch.manual_seed", "torch.set_rng_state", "torch.save", "torch.load", "torch.compile",
                     "torch.use_deterministic_algorithms", "torch.set_num_threads", "torch.set_grad_enabled",
                     ".register_hook", ".backward", ".retain_grad", ".register_post_accumulate_grad_hook",
                     ".share_memory_", ".resize_", ".set_", ".storage", ".untyped_storage", ".tolist",
                     ".numpy", ".pin_memory", ".record_stream", ".to_dlpack", ".__dlpack__", ".module_load",
                     ".requires_grad_", ".detach_", ".copy_", ".data_ptr", ".item"})


def _aten_name(public: str, ops: Mapping[str, AtenOp]) -> str | None:
    short = public.rsplit(".", 1)[-1]
    cands = []
    if public.startswith("torch.linalg."):
        cands.append("linalg_" + short)
    if public.startswith("torch.special."):
        cands.append("special_" + short)
    cands += [short, short.rstrip("_")]
    cands += [_ALIASES[c] for c in list(cands) if c in _ALIASES]
    for c in cands:
        if c in ops:
            return c
    return None


# ----------------------------------------------------------------------------------------------------------
# Generation
# ----------------------------------------------------------------------------------------------------------


def _abridge(op: AtenOp, limit: int = 200) -> str:
    parts = []
    for f in op.formulas:
        if "not_implemented" in f or f.startswith("output_differentiability"):
            continue
        f = re.sub(r"\s+", " ", f)
        if f not in parts:
            parts.append(f)
    text = f"aten.{op.name}: " + " ;; ".join(parts)
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def _kinked_reached(public: str, reached: frozenset[str], kinked: Mapping[str, str], own: str | None) -> list[str]:
    hits = sorted(n for n in reached if n in kinked or n.rstrip("_") in kinked)
    if own is not None and (own in kinked or own.rstrip("_") in kinked):
        return [own]
    direct = [n for n in hits if n not in INCIDENTAL or n == own]
    return direct if direct else []


def generate(previous: Census | None = None, *, deriv_path: str | Path | None = None,
             progress: Callable[[str], None] | None = None) -> Census:
    """Build the census from the installed torch (see the module docstring); ``previous`` gives hand-checked
    fields kept by op name."""
    import torch

    ops = aten_formulas(deriv_path)
    kinked, unclassified = classify_aten(ops)
    if unclassified:
        raise UnclassifiedOp("derivatives.yaml formulas look piecewise but are not classified in "
                             f"kinkcheck.frameworks.torch.census: {', '.join(unclassified)}")
    publics = public_callables()
    samples = SAMPLES()
    generic = None
    # public name -> (aten ops with a kink it reaches)
    found: dict[str, list[str]] = {}
    integer: dict[str, bool] = {}
    reached_of: dict[str, frozenset[str]] = {}
    for name in sorted(publics):
        if name in _UNSAFE:
            continue
        fn = publics[name]
        own = _aten_name(name, ops)
        fact = PUBLIC.get(name, Public())
        reached: frozenset[str] | None = None
        floating = True
        if fact.aten:
            reached = frozenset(fact.aten)
        elif not name.startswith(".") and not name.endswith("_"):
            torch.manual_seed(0)
            tries = [samples[name]()] if name in samples else []
            if not tries:
                if generic is None:
                    generic = _generic_samples
                tries = generic()
            for args, kw in tries:
                got = trace(fn, args, kw)
                if got is not None:
                    reached, floating = got
                    break
        if reached is None:
            reached = frozenset({own}) if own else frozenset()
        reached_of[name] = reached
        hits = _kinked_reached(name, reached, kinked, own)
        if fact.excluded or fact.kink:
            found[name] = hits or sorted(n for n in reached if n in kinked)
        elif hits and not fact.smooth:
            found[name] = hits
            if not floating:
                integer[name] = True
    # a Tensor method / in-place spelling joins the function of the same short name
    # methods and in-place spellings that were not run join the group of their function's short name
    keys = {_ALIASES.get(_group_key(n), _group_key(n)) for n in found}
    for name in sorted(publics):
        if name not in found and (name.startswith(".") or name.endswith("_")) and name not in _UNSAFE \
                and _ALIASES.get(_group_key(name), _group_key(name)) in keys:
            found[name] = []
    return _assemble(found, reached_of, integer, ops, kinked, previous, torch.__version__.split("+")[0])


def _group_key(name: str) -> str:
    short = name.rsplit(".", 1)[-1] if not name.startswith(".") else name[1:]
    if short.endswith("_") and not short.endswith("__"):
        short = short[:-1]
    return short


_ALIASES = {  # documented aliases (torch docs: "Alias for torch.x") -> the operation they alias
    "clip": "clamp", "absolute": "abs", "arcsin": "asin", "arccos": "acos", "arccosh": "acosh",
    "arctan2": "atan2", "fix": "trunc", "divide": "div", "true_divide": "div",
}


def _assemble(found: Mapping[str, list[str]], reached_of: Mapping[str, frozenset[str]],
              integer: Mapping[str, bool], ops: Mapping[str, AtenOp],
              kinked: Mapping[str, str], previous: Census | None, release: str) -> Census:
    order = {ns: i for i, ns in enumerate(NAMESPACES)}

    def rank(n: str) -> tuple[int, bool, bool, str]:
        ns = "Tensor" if n.startswith(".") else n.rsplit(".", 1)[0]
        short = n.rsplit(".", 1)[-1]
        return (order.get(ns, 9), short in _ALIASES, n.endswith("_"), n)

    groups: dict[str, list[str]] = {}
    for name in found:
        key = _group_key(name)
        key = _ALIASES.get(key, key)
        groups.setdefault(key, []).append(name)
    # merge methods (.x, .x_) whose function spelling is in the group even if not traced as kinked
    prev = {o.name: o for o in (previous.ops if previous else ())}
    prev_by_spelling = {s: o for o in (previous.ops if previous else ()) for s in o.spellings}
    result: list[Op] = []
    for key, names in groups.items():
        names = sorted(set(names), key=rank)
        head = names[0]
        fact = PUBLIC.get(head, Public())
        atens = sorted({a for n in names for a in found[n]
                        if _abridge(ops.get(a) or ops.get(a.rstrip("_")) or AtenOp(a)) != f"aten.{a}: "})
        deriv = " | ".join(_abridge(ops.get(a) or ops[a.rstrip("_")]) for a in atens[:2]) if atens else ""
        kink = fact.kink or "; ".join(dict.fromkeys(kinked.get(a, kinked.get(a.rstrip("_"), "")) for a in atens))
        status, reason = "kinked", ""
        excl = fact.excluded or next((ATEN_EXCLUDED[a] for a in atens if a in ATEN_EXCLUDED), "") or \
            ("integer/bool-valued output" if all(integer.get(n) for n in names) else "")
        if excl:
            status, reason = "excluded", excl
            if fact.excluded and not fact.kink:
                kink = ""
        if not atens and not fact.kink and not excl:
            continue
        if not deriv:
            deriv = "reaches " + (", ".join(f"aten.{a}" for a in sorted(reached_of.get(head, ()))[:4]) or
                                  "no aten operation with a derivative")
        op = Op(name=head, aliases=tuple(names[1:]), derivative=deriv, kink=kink, status=status, reason=reason)
        old = prev.get(head) or next((prev_by_spelling[s] for s in op.spellings if s in prev_by_spelling), None)
        if old is not None:
            if old.status == "excluded":
                op = replace(op, status="excluded", reason=old.reason)
            if old.kink and old.kink != op.kink and old.kink != "":
                op = replace(op, kink=old.kink)
        result.append(op)
    have = {s for o in result for s in o.spellings}
    for old in (previous.ops if previous else ()):
        if old.status == "excluded" and not any(s in have for s in old.spellings):
            result.append(old)
    result.sort(key=lambda o: o.name)
    source = (f"{DERIVATIVES} of torch {release}, classified by kinkcheck.frameworks.torch.census (hand-checked "
              "tables), public names traced with TorchDispatchMode")
    return Census(framework="torch", release=release, source=source, ops=tuple(result))


HEADER = ("PyTorch's census of kinked operations (issue 14). Generated by `python -m kinkcheck.frameworks.torch.census`",
          "from the installed wheel's derivatives.yaml; hand-checked fields (excluded + reason, a corrected kink)",
          "are kept across regenerations. Coverage against the catalog is computed: kinkcheck.census.coverage.")


def main(argv: Iterable[str] | None = None) -> int:
    """Command line: regenerate the census file (``--out``, default ``references/census/torch.toml``)."""
    p = argparse.ArgumentParser(prog="python -m kinkcheck.frameworks.torch.census", description=__doc__.split("\n")[0])
    p.add_argument("--out", default=str(census_path("torch")), help="census file to write (and keep hand fields of)")
    p.add_argument("--previous", default=None, help="census file whose hand-checked fields are kept "
                                                    "(default: --out itself when it exists)")
    ns = p.parse_args(list(argv) if argv is not None else None)
    prev_path = Path(ns.previous or ns.out)
    previous = None
    if prev_path.is_file():
        try:
            previous = load_census("torch", prev_path.parent) if prev_path.name == "torch.toml" else \
                _load_file(prev_path)
        except CensusError as err:
            print(f"warning: {err}; hand-checked fields not kept", file=sys.stderr)
    census = generate(previous)
    write_census(census, ns.out, HEADER)
    n_k = sum(o.status == "kinked" for o in census.ops)
    print(f"wrote {ns.out}: {len(census.ops)} operations ({n_k} kinked, {len(census.ops) - n_k} excluded)")
    return 0


def _load_file(path: Path) -> Census:
    import tempfile  # slow to import

    with tempfile.TemporaryDirectory() as d:
        shutil.copy(path, Path(d) / "torch.toml")
        return load_census("torch", d)


if __name__ == "__main__":
    raise SystemExit(main())
