"""PyTorch's rows of the sympy mapping (:data:`kinkcheck.oracles.mapping.TABLE`): what each of its functions
computes, as a form over its parameters (:class:`kinkcheck.oracles.rows.Entry`). Text only: imports nothing of
torch."""

from __future__ import annotations

from kinkcheck.oracles.rows import (
    BINARY, GELU_ERF, GELU_TANH, HARDSIGMOID, I0E, RELU6, ROUND, SELU, SIGMOID, UNARY, Entry, constants, e, h, r, rename,
)

#: ``torch.inf``, ``torch.pi``, ``torch.float64``…
CONSTANTS = constants("torch")

#: Tensor methods are rows named ``torch.Tensor.<method>`` (:data:`kinkcheck.oracles.mapping.METHOD_PREFIXES`).
METHODS = {"torch": "torch.Tensor"}

#: Decompositions whose factors map in a reconstruction (:data:`kinkcheck.oracles.mapping.DECOMPOSITIONS`).
DECOMPOSITIONS = {"torch.linalg.svd": ("svd", ("U", "S", "Vh")), "torch.svd": ("svd", ("U", "S", "V")),
                  "torch.linalg.eigh": ("eigh", ("L", "Q"))}


def table() -> dict[str, Entry]:
    t: dict[str, Entry] = {}
    # torch spells its first argument "input"; forms are written over x and renamed here.
    for name, form in UNARY.items():
        ent = e("input, *, out=None", rename(form, {"x": "input"}))
        torch_names = {"arcsin": ["asin", "arcsin"], "arccos": ["acos", "arccos"], "arctan": ["atan", "arctan"],
                       "arcsinh": ["asinh", "arcsinh"], "arccosh": ["acosh", "arccosh"],
                       "arctanh": ["atanh", "arctanh"], "negative": ["neg", "negative"],
                       "abs": ["abs", "absolute"], "heaviside0": [], "erf": ["erf", "special.erf"],
                       "erfc": ["erfc", "special.erfc"], "sigmoid": ["sigmoid", "special.expit"],
                       "sinc": ["sinc", "special.sinc"], "expm1": ["expm1", "special.expm1"],
                       "log1p": ["log1p", "special.log1p"], "exp2": ["exp2", "special.exp2"],
                       "round": [], "sign": ["sign", "sgn"]}.get(name, [name])
        for n in torch_names:
            t[f"torch.{n}"] = ent
            if "." not in n:
                t[f"torch.Tensor.{n}"] = e("self", rename(form, {"x": "self"}))
    t["torch.round"] = e("input, *, decimals=0, out=None", {"param": "decimals", 0: rename(ROUND, {"x": "input"})})
    t["torch.Tensor.round"] = e("self, decimals=0", {"param": "decimals", 0: rename(ROUND, {"x": "self"})})
    t["torch.frac"] = e("input, *, out=None", "input - sign(input) * floor(Abs(input))")
    t["torch.special.i0e"] = e("input, *, out=None", rename(I0E, {"x": "input"}))
    for n in ("nn.functional.sigmoid", "nn.functional.tanh"):
        t[f"torch.{n}"] = e("input", rename(UNARY[n.split(".")[-1]], {"x": "input"}))
    for name, form in BINARY.items():
        names = {"atan2": ["atan2", "arctan2"], "xlogy": ["xlogy", "special.xlogy"],
                 "xlog1py": ["special.xlog1py"], "pow": ["pow", "float_power"], "logaddexp": ["logaddexp"],
                 "sub": ["sub", "subtract"], "mul": ["mul", "multiply"], "div": ["div", "divide", "true_divide"],
                 "maximum": ["maximum", "fmax"], "minimum": ["minimum", "fmin"]}.get(name, [name])
        for n in names:
            t[f"torch.{n}"] = e("input, other, *, out=None", rename(form, {"x": "input", "y": "other"}))
            if "." not in n:
                t[f"torch.Tensor.{n}"] = e("self, other", rename(form, {"x": "self", "y": "other"}))
    t["torch.pow"] = e("input, exponent, *, out=None", "input ** exponent")
    t["torch.float_power"] = t["torch.pow"]
    t["torch.Tensor.pow"] = e("self, exponent", "self ** exponent")
    t["torch.add"] = e("input, other, *, alpha=1, out=None", "input + alpha * other")
    t["torch.sub"] = t["torch.subtract"] = e("input, other, *, alpha=1, out=None", "input - alpha * other")
    t["torch.heaviside"] = e("input, values, *, out=None", "Piecewise((0, input < 0), (values, Eq(input, 0)), (1, True))")
    t["torch.clamp"] = t["torch.clip"] = e("input, min=None, max=None, *, out=None", "Min(Max(input, min), max)")
    t["torch.Tensor.clamp"] = t["torch.Tensor.clip"] = e("self, min=None, max=None", "Min(Max(self, min), max)")
    t["torch.clamp_min"] = e("input, min", "Max(input, min)")
    t["torch.clamp_max"] = e("input, max", "Min(input, max)")
    t["torch.Tensor.clamp_min"] = e("self, min", "Max(self, min)")
    t["torch.Tensor.clamp_max"] = e("self, max", "Min(self, max)")
    t["torch.where"] = h("condition, input, other, *, out=None", "where")
    t["torch.Tensor.where"] = h("self, condition, y", "where_method")
    t["torch.zeros_like"] = e(
        "input, *, dtype=None, layout=None, device=None, requires_grad=False, memory_format=None", "0")
    t["torch.ones_like"] = e("input, *, dtype=None, layout=None, device=None, requires_grad=False, memory_format=None", "1")
    t["torch.full_like"] = e("input, fill_value, *, dtype=None, layout=None, device=None, requires_grad=False, "
                              "memory_format=None", "fill_value")
    t["torch.tensor"] = t["torch.as_tensor"] = h("data, *, dtype=None, device=None, requires_grad=False", "asarray")
    # torch.nn.functional
    F = "torch.nn.functional."
    t[F + "relu"] = e("input, inplace=False", "Max(input, 0)")
    t["torch.relu"] = e("input", "Max(input, 0)")
    t["torch.Tensor.relu"] = e("self", "Max(self, 0)")
    t[F + "relu6"] = e("input, inplace=False", rename(RELU6, {"x": "input"}))
    t[F + "hardtanh"] = e("input, min_val=-1.0, max_val=1.0, inplace=False", "Min(Max(input, min_val), max_val)")
    t[F + "hardsigmoid"] = e("input, inplace=False", rename(HARDSIGMOID, {"x": "input"}))
    t[F + "hardswish"] = e("input, inplace=False", "input * " + rename(HARDSIGMOID, {"x": "input"}))
    t[F + "leaky_relu"] = e("input, negative_slope=0.01, inplace=False",
                             "Piecewise((input, input > 0), (negative_slope * input, True))")
    t[F + "elu"] = e("input, alpha=1.0, inplace=False", "Piecewise((input, input > 0), (alpha * (exp(input) - 1), True))")
    t[F + "celu"] = e("input, alpha=1.0, inplace=False", "Max(input, 0) + Min(0, alpha * (exp(input / alpha) - 1))")
    t[F + "selu"] = t["torch.selu"] = e("input, inplace=False", rename(SELU, {"x": "input"}))
    t[F + "gelu"] = e("input, approximate='none'", {"param": "approximate", "none": rename(GELU_ERF, {"x": "input"}),
                                                      "tanh": rename(GELU_TANH, {"x": "input"})})
    t[F + "silu"] = e("input, inplace=False", "input * " + rename(SIGMOID, {"x": "input"}))
    t[F + "mish"] = e("input, inplace=False", "input * tanh(log(1 + exp(input)))")
    t[F + "softplus"] = e("input, beta=1.0, threshold=20.0",
                           "Piecewise((input, beta * input > threshold), (log(1 + exp(beta * input)) / beta, True))")
    t[F + "logsigmoid"] = e("input", "-log(1 + exp(-input))")
    t[F + "softsign"] = e("input", "input / (1 + Abs(input))")
    t[F + "tanhshrink"] = e("input", "input - tanh(input)")
    t[F + "softshrink"] = e("input, lambd=0.5", "Piecewise((input - lambd, input > lambd), "
                                                 "(input + lambd, input < -lambd), (0, True))")
    t[F + "hardshrink"] = e("input, lambd=0.5", "Piecewise((input, Abs(input) > lambd), (0, True))")
    t[F + "threshold"] = e("input, threshold, value, inplace=False", "Piecewise((input, input > threshold), (value, True))")
    t["torch.threshold"] = e("input, threshold, value", "Piecewise((input, input > threshold), (value, True))")
    # reductions
    for n, red in (("sum", "sum"), ("nansum", "sum"), ("mean", "mean"), ("nanmean", "mean")):
        t[f"torch.{n}"] = r("input, dim=None, keepdim=False, *, dtype=None, out=None", red)
        t[f"torch.Tensor.{n}"] = r("self, dim=None, keepdim=False, *, dtype=None", red)
    for n, red in (("amax", "max"), ("amin", "min")):
        t[f"torch.{n}"] = r("input, dim=(), keepdim=False, *, out=None", red)
        t[f"torch.Tensor.{n}"] = r("self, dim=(), keepdim=False", red)
    t["torch.prod"] = r("input, dim=None, keepdim=False, *, dtype=None", "prod")
    t["torch.Tensor.prod"] = r("self, dim=None, keepdim=False, *, dtype=None", "prod")
    t["torch.logsumexp"] = r("input, dim, keepdim=False, *, out=None", "logsumexp")
    t["torch.Tensor.logsumexp"] = r("self, dim, keepdim=False", "logsumexp")
    t["torch.special.logsumexp"] = t["torch.logsumexp"]
    for n in ("max", "min"):
        t[f"torch.{n}"] = h("input, dim=None, keepdim=False, *, out=None", "torch_minmax", n)
        t[f"torch.Tensor.{n}"] = h("self, dim=None, keepdim=False", "torch_minmax", n)
    for n, red in (("argmax", "max"), ("argmin", "min")):
        t[f"torch.{n}"] = h("input, dim=None, keepdim=False", "argext", red)
        t[f"torch.Tensor.{n}"] = h("self, dim=None, keepdim=False", "argext", red)
    t["torch.median"] = t["torch.nanmedian"] = h("input, dim=None, keepdim=False, *, out=None", "torch_median")
    t["torch.Tensor.median"] = t["torch.Tensor.nanmedian"] = h("self, dim=None, keepdim=False", "torch_median")
    t["torch.quantile"] = t["torch.nanquantile"] = h(
        "input, q, dim=None, keepdim=False, *, interpolation='linear', out=None", "quantile")
    t["torch.Tensor.quantile"] = t["torch.Tensor.nanquantile"] = h(
        "self, q, dim=None, keepdim=False, *, interpolation='linear'", "quantile")
    t["torch.kthvalue"] = h("input, k, dim=-1, keepdim=False, *, out=None", "kthvalue")
    t["torch.Tensor.kthvalue"] = h("self, k, dim=-1, keepdim=False", "kthvalue")
    t["torch.sort"] = h("input, dim=-1, descending=False, stable=False, *, out=None", "sort", "pair")
    t["torch.Tensor.sort"] = h("self, dim=-1, descending=False, stable=False", "sort", "pair")
    t["torch.msort"] = h("input, *, out=None", "msort")
    t["torch.Tensor.msort"] = h("self", "msort")
    t["torch.topk"] = h("input, k, dim=-1, largest=True, sorted=True, *, out=None", "topk")
    t["torch.Tensor.topk"] = h("self, k, dim=-1, largest=True, sorted=True", "topk")
    # norms and distances
    t["torch.linalg.vector_norm"] = h("x, ord=2, dim=None, keepdim=False, *, dtype=None, out=None", "vector_norm")
    t["torch.linalg.matrix_norm"] = h("A, ord='fro', dim=(-2, -1), keepdim=False, *, dtype=None, out=None",
                                       "matrix_norm")
    t["torch.linalg.norm"] = h("A, ord=None, dim=None, keepdim=False, *, out=None, dtype=None", "linalg_norm")
    t["torch.norm"] = h("input, p='fro', dim=None, keepdim=False, out=None, dtype=None", "torch_norm")
    t["torch.Tensor.norm"] = h("self, p='fro', dim=None, keepdim=False, dtype=None", "torch_norm")
    t["torch.dist"] = h("input, other, p=2", "dist")
    t["torch.Tensor.dist"] = h("self, other, p=2", "dist")
    t["torch.cdist"] = h("x1, x2, p=2.0, compute_mode='use_mm_for_euclid_dist_if_necessary'", "cdist")
    t[F + "pairwise_distance"] = h("x1, x2, p=2.0, eps=1e-06, keepdim=False", "pairwise_distance")
    t["torch.pairwise_distance"] = t[F + "pairwise_distance"]
    # losses
    for n, form in (("l1_loss", "Abs(input - target)"), ("mse_loss", "(input - target) ** 2")):
        t[F + n] = h("input, target, size_average=None, reduce=None, reduction='mean'", "loss", form)
    t[F + "smooth_l1_loss"] = h("input, target, size_average=None, reduce=None, reduction='mean', beta=1.0", "loss",
                                 "Piecewise((0.5 * (input - target) ** 2 / beta, Abs(input - target) < beta), "
                                 "(Abs(input - target) - 0.5 * beta, True))")
    t[F + "huber_loss"] = h("input, target, reduction='mean', delta=1.0", "loss",
                             "Piecewise((0.5 * (input - target) ** 2, Abs(input - target) < delta), "
                             "(delta * (Abs(input - target) - 0.5 * delta), True))")
    # pooling
    for d in (1, 2, 3):
        t[F + f"max_pool{d}d"] = h("input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, "
                                    "return_indices=False", "max_pool", d)
        t[F + f"adaptive_max_pool{d}d"] = h("input, output_size, return_indices=False", "adaptive_max_pool", d)
    t[F + "softmax"] = h("input, dim=None, _stacklevel=3, dtype=None", "softmax", "softmax")
    t[F + "log_softmax"] = h("input, dim=None, _stacklevel=3, dtype=None", "softmax", "log_softmax")
    t["torch.softmax"] = h("input, dim, dtype=None", "softmax", "softmax")
    t["torch.log_softmax"] = h("input, dim, dtype=None", "softmax", "log_softmax")
    # shapes
    t["torch.reshape"] = h("input, shape", "reshape")
    t["torch.Tensor.reshape"] = t["torch.Tensor.view"] = h("self, *shape", "reshape")
    t["torch.broadcast_to"] = h("input, size", "broadcast")
    t["torch.Tensor.expand"] = h("self, *size", "broadcast")
    t["torch.Tensor.expand_as"] = h("self, other", "broadcast")
    t["torch.tile"] = h("input, dims", "tile")
    # writes at indices (torch docs: index_put_, put_, index_add_, index_copy_, scatter_, scatter_add_): an
    # accumulating write is a sum; a plain write with a duplicate index has no one value (undefined there)
    t["torch.Tensor.index_put"] = h("self, indices, values, accumulate=False", "index_put")
    t["torch.index_put"] = h("input, indices, values, accumulate=False", "index_put")
    t["torch.Tensor.put"] = h("self, index, source, accumulate=False", "put")
    t["torch.Tensor.index_add"] = h("self, dim, index, source, *, alpha=1", "index_along")
    t["torch.index_add"] = h("input, dim, index, source, *, alpha=1", "index_along")
    t["torch.Tensor.index_copy"] = h("self, dim, index, source", "index_along")
    t["torch.index_copy"] = h("input, dim, index, source", "index_along")
    t["torch.Tensor.scatter"] = h("self, dim, index, src=None, *, value=None, reduce=None", "scatter")
    t["torch.scatter"] = h("input, dim, index, src=None, *, value=None, reduce=None", "scatter")
    t["torch.Tensor.scatter_add"] = h("self, dim, index, src", "scatter")
    t["torch.scatter_add"] = h("input, dim, index, src", "scatter")
    t["torch.Tensor.tile"] = t["torch.Tensor.repeat"] = h("self, *dims", "tile")
    t["torch.flatten"] = h("input, start_dim=0, end_dim=-1", "flatten")
    t["torch.Tensor.flatten"] = h("self, start_dim=0, end_dim=-1", "flatten")
    t["torch.ravel"] = h("input", "flatten")
    t["torch.Tensor.ravel"] = h("self", "flatten")
    t["torch.stack"] = h("tensors, dim=0, *, out=None", "stack")
    t["torch.cat"] = t["torch.concat"] = t["torch.concatenate"] = h("tensors, dim=0, *, out=None", "cat")
    t["torch.squeeze"] = h("input, dim=None", "squeeze")
    t["torch.Tensor.squeeze"] = h("self, dim=None", "squeeze")
    t["torch.unsqueeze"] = h("input, dim", "unsqueeze")
    t["torch.Tensor.unsqueeze"] = h("self, dim", "unsqueeze")
    t["torch.t"] = h("input", "transpose2")
    t["torch.Tensor.t"] = h("self", "transpose2")
    t["torch.transpose"] = h("input, dim0, dim1", "swapaxes")
    t["torch.Tensor.transpose"] = h("self, dim0, dim1", "swapaxes")
    t["torch.matmul"] = h("input, other, *, out=None", "matmul")
    t["torch.Tensor.matmul"] = h("self, other", "matmul")
    t["torch.dot"] = t["torch.inner"] = t["torch.mv"] = t["torch.mm"] = t["torch.matmul"]
    # the functions of the census's cases (issue 14)
    prelu = "Piecewise((input, input > 0), (weight * input, True))"
    t[F + "prelu"] = t["torch.prelu"] = e("input, weight", prelu)
    t["torch.Tensor.prelu"] = e("self, weight", rename(prelu, {"input": "self"}))
    t["torch.celu"] = e("input, alpha=1.0", t[F + "celu"].form)
    t["torch.logit"] = t["torch.special.logit"] = h("input, eps=None, *, out=None", "logit")
    t["torch.Tensor.logit"] = h("self, eps=None", "logit")
    t["torch.masked_fill"] = h("input, mask, value", "masked_fill")
    t["torch.Tensor.masked_fill"] = h("self, mask, value", "masked_fill")
    t["torch.fix"] = t["torch.trunc"]
    t["torch.Tensor.fix"] = t["torch.Tensor.trunc"]
    t["torch.Tensor.frac"] = e("self", "self - sign(self) * floor(Abs(self))")
    t["torch.special.round"] = t["torch.round"]
    division = {"param": "rounding_mode", None: "input / other", "floor": "floor(input / other)",
                "trunc": "trunc(input / other)"}
    t["torch.div"] = t["torch.divide"] = e("input, other, *, rounding_mode=None, out=None", division)
    t["torch.Tensor.div"] = t["torch.Tensor.divide"] = e(
        "self, other, *, rounding_mode=None", {k: rename(v, {"input": "self"}) for k, v in division.items()})
    t["torch.floor_divide"] = e("input, other, *, out=None", "floor(input / other)")
    t["torch.Tensor.floor_divide"] = e("self, other", "floor(self / other)")
    # real inputs only: the angle of a real number is 0 or pi (torch.angle's docs)
    t["torch.angle"] = e("input, *, out=None", "Piecewise((pi, input < 0), (0, True))")
    t["torch.Tensor.angle"] = e("self", "Piecewise((pi, self < 0), (0, True))")
    t["torch.special.entr"] = e("input, *, out=None", "-xlogy(input, input)")
    for n in ("cummax", "cummin", "logcumsumexp"):
        red = {"cummax": "max", "cummin": "min"}.get(n, "logsumexp")
        t[f"torch.{n}"] = h("input, dim, *, out=None", "cumulative", red)
        t[f"torch.Tensor.{n}"] = h("self, dim", "cumulative", red)
    t["torch.std"] = h("input, dim=None, unbiased=None, keepdim=False, *, correction=None, out=None", "std", "std")
    t["torch.Tensor.std"] = h("self, dim=None, unbiased=None, keepdim=False, *, correction=None", "std", "std")
    t["torch.std_mean"] = h("input, dim=None, unbiased=None, keepdim=False, *, correction=None", "std", "std_mean")
    t[F + "hinge_embedding_loss"] = h(
        "input, target, margin=1.0, size_average=None, reduce=None, reduction='mean'", "loss",
        "Piecewise((Max(0, margin - input), Eq(target, -1)), (input, Eq(target, 1)), "
        "(Max(0, margin - input) + input, True))")
    t[F + "margin_ranking_loss"] = h(
        "input1, input2, target, margin=0, size_average=None, reduce=None, reduction='mean'", "loss",
        "Max(0, -target * (input1 - input2) + margin)")
    t[F + "kl_div"] = h("input, target, size_average=None, reduce=None, reduction='mean', log_target=False", "loss",
                         {"param": "log_target", False: "xlogy(target, target) - target * input",
                          True: "exp(target) * (target - input)"})
    # log clamped at -100 (torch's binary_cross_entropy docs); a weight is not mapped
    t[F + "binary_cross_entropy"] = h(
        "input, target, weight=None, size_average=None, reduce=None, reduction='mean'", "loss",
        {"param": "weight", None: "-(target * Piecewise((-100, input <= exp(-100)), (log(input), True)) + (1 - target)"
                                  " * Piecewise((-100, 1 - input <= exp(-100)), (log(1 - input), True)))"})
    return t
