"""Pure-NumPy manual-backprop oracle for a two-layer network with a kink.

The oracle computes the gradients of the seed case P0 (``shared/cases/public-cases.md``)
by a forward and backward pass written out by hand: no autodiff, no framework import.
The derivative of the activation at entries of the pre-activation that sit exactly on
the kink is a parameter (``kink_derivative``), so the gradient a framework returns for a
whole network can be checked against the kink convention its scalar probe observed.

Network (no biases)::

    Z = X @ W1          (n, h)   pre-activation
    H = f(Z)            (n, h)
    Y = H @ W2          (n, o)
    R = Y - T           (n, o)
    loss = sum(R ** 2)

Backward pass::

    dY  = 2 R
    dW2 = H^T dY                    (h, o)
    dH  = dY W2^T                   (n, h)
    dZ  = dH * f'(Z)                f'(Z) := kink_derivative where Z == kink
    dW1 = X^T dZ                    (d, h)

For P0, ``X @ W1`` has an exact 0 at (row 3, column 1), where ``dH[3, 1] = 38``. Exact
(Fraction) results, loss 4307 in every case::

    relu'(0)   dW1                                     dW2
    0          [[932, 2376], [354, 904], [512, 1260]]  [[-1372, 1608], [-998, 1220]]
    1/2        [[932, 2376], [354, 904], [512, 1279]]  [[-1372, 1608], [-998, 1220]]
    1          [[932, 2376], [354, 904], [512, 1298]]  [[-1372, 1608], [-998, 1220]]

So (W1 gradient for relu'(0) = 0) - (W1 gradient for relu'(0) = 1) =
``[[0, 0], [0, 0], [0, -38]]``, the reported ``F.relu`` minus ``x.clamp(min=0)``
difference, and the W2 gradients are equal. relu'(0) = 1/2 lies halfway: its W1 gradient
differs from the 0-case by ``[[0, 0], [0, 0], [0, 19]]`` and from the 1-case by
``[[0, 0], [0, 0], [0, -19]]`` (dW1 is affine in the kink derivative, and only
``X[3] = [0, 0, 1]`` multiplies the kink entry of ``dZ``).

This module imports only NumPy and the standard library, so it runs where no framework
is installed (see ``shared/DESIGN.md``, "Data flow").
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from kinkcheck.dtypes import DTYPE_INFO
from kinkcheck.oracles import p0

__all__ = [
    "ACTIVATIONS",
    "P0",
    "TOLERANCES",
    "Activation",
    "CrossCheck",
    "Grads",
    "Net",
    "crosscheck",
    "two_layer_grads",
]

KinkDerivative = float | int | Fraction
ArrayFn = Callable[[np.ndarray], np.ndarray]


# --------------------------------------------------------------------------- network


@dataclass(frozen=True, eq=False)
class Net:
    """A two-layer network without biases, as data.

    Parameters
    ----------
    X : array_like, shape (n, d)
        Inputs.
    W1 : array_like, shape (d, h)
        First-layer weights.
    W2 : array_like, shape (h, o)
        Second-layer weights.
    target : array_like, shape (n, o)
        Regression target ``T`` of the squared-error loss.

    Raises
    ------
    ValueError
        If an array is not 2-D or the shapes do not chain (``X @ W1 @ W2`` vs ``target``).

    Notes
    -----
    The arrays are stored read-only (``np.asarray`` of the input, copied, write flag off),
    so the shared constant :data:`P0` cannot be altered by a caller.
    """

    X: np.ndarray
    W1: np.ndarray
    W2: np.ndarray
    target: np.ndarray

    def __post_init__(self) -> None:
        for name in ("X", "W1", "W2", "target"):
            arr = np.array(getattr(self, name))
            if arr.ndim != 2:
                raise ValueError(f"Net.{name} must be 2-D, got shape {arr.shape}")
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)
        n, d = self.X.shape
        if self.W1.shape[0] != d:
            raise ValueError(f"X is {self.X.shape} but W1 is {self.W1.shape}: inner sizes differ")
        if self.W2.shape[0] != self.W1.shape[1]:
            raise ValueError(f"W1 is {self.W1.shape} but W2 is {self.W2.shape}: inner sizes differ")
        if self.target.shape != (n, self.W2.shape[1]):
            raise ValueError(
                f"target must have shape {(n, self.W2.shape[1])}, got {self.target.shape}"
            )


#: Seed case P0 (``shared/cases/public-cases.md``): ``X @ W1`` is exactly 0 at (3, 1).
P0 = Net(X=p0.X, W1=p0.W1, W2=p0.W2, target=np.asarray(p0.T, dtype=np.int64))


# ----------------------------------------------------------------------- activations


@dataclass(frozen=True)
class Activation:
    """A scalar activation, written by hand in NumPy.

    Attributes
    ----------
    name : str
        Name, equal to the ``activation`` field of the catalog case (``references/catalog.toml``).
    f : callable
        Forward ``f(z)``, elementwise on a float ndarray of any shape; same shape and dtype out.
    df : callable
        Derivative ``f'(z)`` elementwise. Away from the kink it is the analytic derivative;
        at the kink it is ``nan`` when ``f`` is not differentiable there (so a kink entry can
        never be silently given a convention), and the derivative when it is (celu, softplus).
    kink : float
        Location of the kink (0 for every activation here).
    left, right : float
        One-sided derivatives ``f'(kink-)`` and ``f'(kink+)``.
    source : str
        Definition and where it comes from.
    exact_slopes : tuple of Fraction or None
        ``(left slope, right slope)`` for piecewise-linear activations through the origin,
        which allows exact :class:`fractions.Fraction` arithmetic; ``None`` otherwise.
    """

    name: str
    f: ArrayFn
    df: ArrayFn
    kink: float
    left: float
    right: float
    source: str
    exact_slopes: tuple[Fraction, Fraction] | None = None

    @property
    def differentiable(self) -> bool:
        """True when the one-sided derivatives at the kink agree."""
        return self.left == self.right


def _nan_at(z: np.ndarray, d: np.ndarray, kink: float) -> np.ndarray:
    return np.where(z == kink, np.asarray(np.nan, dtype=d.dtype), d)


def _float(z: np.ndarray) -> np.ndarray:
    z = np.asarray(z)
    return z if np.issubdtype(z.dtype, np.floating) else z.astype(np.float64)


def _piecewise_linear(name: str, left: Fraction, right: Fraction, source: str) -> Activation:
    lf, rf = float(left), float(right)

    def f(z: np.ndarray) -> np.ndarray:
        z = _float(z)
        return np.where(z < 0, z * z.dtype.type(lf), z * z.dtype.type(rf))

    def df(z: np.ndarray) -> np.ndarray:
        z = _float(z)
        d = np.where(z < 0, z.dtype.type(lf), z.dtype.type(rf))
        return _nan_at(z, d, 0.0)

    return Activation(name, f, df, 0.0, lf, rf, source, (left, right))


ELU_ALPHA = 0.5
CELU_ALPHA = 0.5
LEAKY_SLOPE = Fraction(1, 100)
SELU_SCALE = 1.0507009873554804934193349852946
SELU_ALPHA = 1.6732632423543772848170429916717


def _elu_f(z: np.ndarray) -> np.ndarray:
    z = _float(z)
    return np.where(z > 0, z, ELU_ALPHA * np.expm1(np.minimum(z, 0)))


def _elu_df(z: np.ndarray) -> np.ndarray:
    z = _float(z)
    return _nan_at(z, np.where(z > 0, 1.0, ELU_ALPHA * np.exp(np.minimum(z, 0))).astype(z.dtype), 0.0)


def _celu_f(z: np.ndarray) -> np.ndarray:
    z = _float(z)
    return np.maximum(z, 0) + np.minimum(0, CELU_ALPHA * np.expm1(np.minimum(z, 0) / CELU_ALPHA))


def _celu_df(z: np.ndarray) -> np.ndarray:
    # Continuous at 0: exp(0 / alpha) = 1 = right slope, so no nan at the kink.
    z = _float(z)
    return np.where(z > 0, 1.0, np.exp(np.minimum(z, 0) / CELU_ALPHA)).astype(z.dtype)


def _selu_f(z: np.ndarray) -> np.ndarray:
    z = _float(z)
    return SELU_SCALE * np.where(z > 0, z, SELU_ALPHA * np.expm1(np.minimum(z, 0)))


def _selu_df(z: np.ndarray) -> np.ndarray:
    z = _float(z)
    d = SELU_SCALE * np.where(z > 0, 1.0, SELU_ALPHA * np.exp(np.minimum(z, 0)))
    return _nan_at(z, d.astype(z.dtype), 0.0)


def _softplus_f(z: np.ndarray) -> np.ndarray:
    z = _float(z)
    return np.logaddexp(z.dtype.type(0), z)


def _softplus_df(z: np.ndarray) -> np.ndarray:
    # Logistic sigmoid, in the form that never overflows.
    z = _float(z)
    e = np.exp(-np.abs(z))
    return np.where(z >= 0, 1 / (1 + e), e / (1 + e)).astype(z.dtype)


#: Hand-written activations, keyed by the catalog's ``activation`` field.
ACTIVATIONS: dict[str, Activation] = {
    "relu": _piecewise_linear(
        "relu",
        Fraction(0),
        Fraction(1),
        "relu(z) = max(z, 0); Nair & Hinton 2010, 'Rectified Linear Units Improve "
        "Restricted Boltzmann Machines' (ICML). Catalog: Max(x, 0).",
    ),
    "leaky_relu": _piecewise_linear(
        "leaky_relu",
        LEAKY_SLOPE,
        Fraction(1),
        "leaky_relu(z) = z if z > 0 else 0.01 z; Maas, Hannun & Ng 2013, 'Rectifier "
        "Nonlinearities Improve Neural Network Acoustic Models' (ICML WDLASL); slope 0.01 "
        "is the default of torch.nn.functional.leaky_relu and jax.nn.leaky_relu. "
        "Catalog: Piecewise((x, x > 0), (x / 100, True)).",
    ),
    "elu": Activation(
        "elu",
        _elu_f,
        _elu_df,
        0.0,
        ELU_ALPHA,
        1.0,
        "elu(z) = z if z > 0 else alpha (exp(z) - 1), alpha = 0.5; Clevert, Unterthiner & "
        "Hochreiter 2016, 'Fast and Accurate Deep Network Learning by Exponential Linear "
        "Units (ELUs)' (ICLR). Catalog: Piecewise((x, x > 0), (0.5 * (exp(x) - 1), True)).",
    ),
    "celu": Activation(
        "celu",
        _celu_f,
        _celu_df,
        0.0,
        1.0,
        1.0,
        "celu(z) = max(0, z) + min(0, alpha (exp(z / alpha) - 1)), alpha = 0.5; Barron 2017, "
        "'Continuously Differentiable Exponential Linear Units' (arXiv:1704.07483). "
        "Differentiable at 0 (derivative 1): a control.",
    ),
    "selu": Activation(
        "selu",
        _selu_f,
        _selu_df,
        0.0,
        SELU_SCALE * SELU_ALPHA,
        SELU_SCALE,
        "selu(z) = scale (z if z > 0 else alpha (exp(z) - 1)), "
        "scale = 1.0507009873554804934193349852946, alpha = 1.6732632423543772848170429916717; "
        "Klambauer, Unterthiner, Mayr & Hochreiter 2017, 'Self-Normalizing Neural Networks' "
        "(NeurIPS).",
    ),
    "abs": _piecewise_linear(
        "abs",
        Fraction(-1),
        Fraction(1),
        "abs(z) = |z|; Clarke set at 0 is [-1, 1]. Catalog: Abs(x).",
    ),
    "softplus": Activation(
        "softplus",
        _softplus_f,
        _softplus_df,
        0.0,
        0.5,
        0.5,
        "softplus(z) = log(1 + exp(z)); Dugas, Bengio, Belisle, Nadeau & Garcia 2001, "
        "'Incorporating Second-Order Functional Knowledge for Better Option Pricing' (NIPS). "
        "Smooth everywhere (derivative 1/2 at 0): a control.",
    ),
}


def _activation(activation: str | Activation) -> Activation:
    if isinstance(activation, Activation):
        return activation
    try:
        return ACTIVATIONS[activation]
    except KeyError:
        raise ValueError(
            f"unknown activation {activation!r}; known: {', '.join(sorted(ACTIVATIONS))}"
        ) from None


# -------------------------------------------------------------------------- gradients


@dataclass(frozen=True, eq=False)
class Grads:
    """Result of :func:`two_layer_grads`.

    Attributes
    ----------
    dW1 : ndarray, shape (d, h)
        Gradient of the loss with respect to ``W1``.
    dW2 : ndarray, shape (h, o)
        Gradient of the loss with respect to ``W2``.
    loss : float or Fraction
        ``sum((f(X @ W1) @ W2 - T) ** 2)``; a :class:`~fractions.Fraction` in exact mode.
    Z : ndarray, shape (n, h)
        Pre-activation ``X @ W1``.
    kink_mask : ndarray of bool, shape (n, h)
        True where ``Z`` equals the activation's kink exactly.
    dtype : numpy.dtype
        ``float16``/``float32``/``float64``, or ``object`` (Fraction entries) in exact mode.
    """

    dW1: np.ndarray
    dW2: np.ndarray
    loss: float | Fraction
    Z: np.ndarray
    kink_mask: np.ndarray
    dtype: np.dtype


def _is_exact_dtype(dtype: object) -> bool:
    return dtype is Fraction or np.dtype(dtype) == np.dtype(object)


def _to_fractions(a: np.ndarray) -> np.ndarray:
    # Via Python int/float so that no numpy fixed-width integer leaks into the rationals.
    out = np.empty(a.shape, dtype=object)
    for idx, v in np.ndenumerate(a):
        if a.dtype.kind in "iub":
            out[idx] = Fraction(int(v))
        elif a.dtype.kind == "f":
            out[idx] = Fraction(float(v))
        else:
            out[idx] = Fraction(v)
    return out


def two_layer_grads(
    net: Net,
    activation: str | Activation,
    kink_derivative: KinkDerivative,
    dtype: object = np.float64,
) -> Grads:
    """Gradients of the two-layer squared-error loss, by manual forward and backward.

    Parameters
    ----------
    net : Net
        The network, e.g. :data:`P0`.
    activation : str or Activation
        A key of :data:`ACTIVATIONS` or an :class:`Activation`.
    kink_derivative : float, int or Fraction
        Value used for ``f'(z)`` at entries where ``z`` equals the kink exactly; may be
        ``nan`` in float mode (it then propagates: ``0 * nan`` is ``nan``).
    dtype : numpy dtype, ``object`` or ``fractions.Fraction``, default ``np.float64``
        A float dtype runs the whole computation in that dtype (the network's entries are
        cast first). ``object`` or ``Fraction`` runs it in exact rational arithmetic:
        inputs become Fractions, floats converted exactly (``Fraction(0.1)`` is the binary
        value, not 1/10); only activations with ``exact_slopes`` (relu, leaky_relu, abs)
        allow it.

    Returns
    -------
    Grads
        ``dW1`` (d, h), ``dW2`` (h, o), ``loss``, ``Z`` (n, h) and ``kink_mask`` (n, h).

    Raises
    ------
    ValueError
        Unknown activation; exact mode requested for an activation without exact slopes;
        a non-finite ``kink_derivative`` in exact mode; a dtype that is neither float nor
        object.
    TypeError
        ``kink_derivative`` is not a real number.

    Examples
    --------
    >>> g0 = two_layer_grads(P0, "relu", 0, dtype=object)
    >>> g1 = two_layer_grads(P0, "relu", 1, dtype=object)
    >>> [[int(v) for v in row] for row in g0.dW1 - g1.dW1]
    [[0, 0], [0, 0], [0, -38]]
    """
    act = _activation(activation)
    if isinstance(kink_derivative, bool) or not isinstance(kink_derivative, numbers.Real):
        raise TypeError(f"kink_derivative must be a real number, got {kink_derivative!r}")

    if _is_exact_dtype(dtype):
        if act.exact_slopes is None:
            raise ValueError(
                f"{act.name} has no exact rational form; use a float dtype (exact mode "
                f"supports {', '.join(n for n, a in ACTIVATIONS.items() if a.exact_slopes)})"
            )
        if not math.isfinite(kink_derivative):
            raise ValueError(f"exact mode needs a finite kink_derivative, got {kink_derivative!r}")
        left, right = act.exact_slopes
        kd = Fraction(kink_derivative)
        X, W1, W2, T = (_to_fractions(a) for a in (net.X, net.W1, net.W2, net.target))
        kink = Fraction(act.kink)
        Z = X @ W1
        neg = np.asarray(Z < kink, dtype=bool)
        H = np.where(neg, Z * left, Z * right)
        slope = np.where(neg, left, right).astype(object)
        out_dtype = np.dtype(object)
    else:
        out_dtype = np.dtype(dtype)
        if out_dtype.kind != "f":
            raise ValueError(f"dtype must be a float dtype or object, got {out_dtype}")
        X, W1, W2, T = (np.asarray(a, dtype=out_dtype) for a in (net.X, net.W1, net.W2, net.target))
        kd = out_dtype.type(kink_derivative)
        kink = out_dtype.type(act.kink)
        Z = X @ W1
        H = act.f(Z).astype(out_dtype)
        slope = act.df(Z).astype(out_dtype)

    # Forward.
    mask = np.asarray(Z == kink, dtype=bool)
    R = H @ W2 - T
    loss = (R * R).sum()
    # Backward; f'(Z) at exact-kink entries is the convention under test.
    dY = 2 * R
    dW2 = H.T @ dY
    dH = dY @ W2.T
    slope = np.where(mask, kd, slope)
    if out_dtype != np.dtype(object):
        slope = slope.astype(out_dtype)
    dZ = dH * slope
    dW1 = X.T @ dZ

    loss_out: float | Fraction = Fraction(loss) if out_dtype == np.dtype(object) else float(loss)
    return Grads(dW1=dW1, dW2=dW2, loss=loss_out, Z=Z, kink_mask=mask, dtype=out_dtype)


# ------------------------------------------------------------------------ cross-check

#: Relative tolerance by framework dtype. The comparison is
#: ``|observed - expected| <= rtol * (|expected| + scale)``, ``scale = max(1, max |expected|)``
#: over the finite entries of both gradients: float matmul error scales with the size of
#: the summands, so an entry that cancels to ~0 still gets an absolute allowance.
#: float64: 1e-9 (~4.5e6 ulp, far above summation error on small nets, far below any
#: convention difference); float32: 1e-5 (~84 ulp); float16: 1e-2; bfloat16: 4e-2
#: (8-bit significand, ulp 2**-7 relative, a few roundings per entry).
TOLERANCES: dict[str, float] = {d.name: d.network for d in DTYPE_INFO.values()}


@dataclass(frozen=True, eq=False)
class CrossCheck:
    """Result of :func:`crosscheck`.

    Attributes
    ----------
    ok : bool
        True when both gradients match the oracle: same non-finite positions and values
        (``nan`` where the oracle has ``nan``, same-signed ``inf``), finite entries within
        tolerance.
    max_abs_diff : float
        Largest ``|observed - expected|`` over entries finite in both; ``inf`` when the
        non-finite positions differ; 0.0 when no entry is finite in both.
    expected_W1 : ndarray of float64, shape (d, h)
    expected_W2 : ndarray of float64, shape (h, o)
        The oracle's gradients under the given kink derivative.
    observed_W1 : ndarray of float64, shape (d, h)
    observed_W2 : ndarray of float64, shape (h, o)
        The framework's gradients as compared.
    rtol : float
        Relative tolerance used (:data:`TOLERANCES`).
    atol : float
        Absolute allowance used, ``rtol * scale``.
    mismatches : int
        Number of entries that do not match.
    detail : str
        One line: the worst mismatching entry, e.g.
        ``"W1[2][1]: framework -38.0, NumPy oracle 0.0 (relu'(0)=0)"``, followed by
        ``"; N more mismatches"`` when there are others; or a summary when ``ok``.
    """

    ok: bool
    max_abs_diff: float
    expected_W1: np.ndarray
    expected_W2: np.ndarray
    observed_W1: np.ndarray
    observed_W2: np.ndarray
    rtol: float
    atol: float
    mismatches: int
    detail: str = field(default="")


def _fmt_number(v: KinkDerivative) -> str:
    if isinstance(v, Fraction):
        return str(v.numerator) if v.denominator == 1 else f"{v.numerator}/{v.denominator}"
    fv = float(v)
    if math.isfinite(fv) and fv == int(fv):
        return str(int(fv))
    return repr(fv)


def _normalise_dtype(dtype: str) -> str:
    name = str(dtype).rsplit(".", 1)[-1]
    if name not in TOLERANCES:
        raise ValueError(f"unknown dtype {dtype!r}; known: {', '.join(TOLERANCES)}")
    return name


_EXPECTED: dict[tuple[int, str, str, bool], tuple[np.ndarray, np.ndarray]] = {}


def _expected(net: Net, act: Activation, kink_derivative: KinkDerivative, exact: bool) -> tuple[np.ndarray, np.ndarray]:
    """The oracle's float64 W1/W2 gradients, memoised: a report cross-checks ~1000 runs against few conventions."""
    key = (id(net), act.name, repr(kink_derivative), exact)
    if key not in _EXPECTED:
        g = two_layer_grads(net, act, kink_derivative, dtype=object if exact else np.float64)
        exp = (np.asarray(g.dW1, dtype=np.float64), np.asarray(g.dW2, dtype=np.float64))
        for a in exp:
            a.flags.writeable = False
        _EXPECTED[key] = exp
    return _EXPECTED[key]


def crosscheck(
    observed_W1: object,
    observed_W2: object,
    activation: str | Activation,
    kink_derivative: KinkDerivative,
    dtype: str,
    *,
    net: Net = P0,
) -> CrossCheck:
    """Compare a framework's end-to-end W1/W2 gradients with the NumPy oracle.

    The oracle runs with ``kink_derivative`` (the value the framework's scalar probe
    returned for the same program at the kink), in exact arithmetic when the activation
    allows it and the derivative is finite, else in float64, and is then rounded to float64.

    Parameters
    ----------
    observed_W1 : array_like, shape (d, h)
        Framework gradient of ``W1``: nested lists or an array; may hold ``nan``/``inf``,
        also as the shard strings ``"nan"``, ``"inf"``, ``"-inf"``.
    observed_W2 : array_like, shape (h, o)
        Framework gradient of ``W2``, same conventions.
    activation : str or Activation
        A key of :data:`ACTIVATIONS` or an :class:`Activation`.
    kink_derivative : float, int or Fraction
        Derivative at the kink to assume; ``nan`` makes the oracle's gradient ``nan``
        wherever the kink entry feeds.
    dtype : str
        Dtype the framework computed in: ``"float64"``, ``"float32"``, ``"float16"`` or
        ``"bfloat16"``; a prefix such as ``"torch.float32"`` is ignored. Picks the tolerance.
    net : Net, keyword-only, default :data:`P0`
        The network the framework differentiated.

    Returns
    -------
    CrossCheck

    Raises
    ------
    ValueError
        Unknown dtype or activation; observed shapes differ from the oracle's; an entry
        that cannot be read as a float.
    """
    act = _activation(activation)
    dname = _normalise_dtype(dtype)
    rtol = TOLERANCES[dname]

    kd_finite = math.isfinite(float(kink_derivative))
    exact = act.exact_slopes is not None and kd_finite
    exp1, exp2 = _expected(net, act, kink_derivative, exact)

    obs = []
    for name, o, e in (("W1", observed_W1, exp1), ("W2", observed_W2, exp2)):
        try:
            a = np.array(o, dtype=np.float64)
        except (TypeError, ValueError) as err:
            raise ValueError(f"observed {name} is not a float array: {err}") from None
        if a.shape != e.shape:
            raise ValueError(f"observed {name} has shape {a.shape}, the oracle's is {e.shape}")
        obs.append(a)

    finite_exp = np.concatenate([exp1[np.isfinite(exp1)], exp2[np.isfinite(exp2)]])
    scale = max(1.0, float(np.abs(finite_exp).max())) if finite_exp.size else 1.0
    atol = rtol * scale
    conv = f"{act.name}'({_fmt_number(act.kink)})={_fmt_number(kink_derivative)}"

    max_diff = 0.0
    bad: list[tuple[float, str, float, float]] = []
    for name, o, e in (("W1", obs[0], exp1), ("W2", obs[1], exp2)):
        both = np.isfinite(o) & np.isfinite(e)
        diff = np.where(both, np.abs(np.where(both, o, 0) - np.where(both, e, 0)), 0.0)
        if both.any():
            max_diff = max(max_diff, float(diff.max()))
        nonfinite_same = ~both & ((np.isnan(o) & np.isnan(e)) | (o == e))
        good = (both & (diff <= atol + rtol * np.abs(np.where(both, e, 0)))) | nonfinite_same
        for idx in zip(*np.nonzero(~good)):
            i, j = (int(k) for k in idx)
            badness = float(diff[i, j]) if both[i, j] else math.inf
            bad.append((badness, f"{name}[{i}][{j}]", float(o[i, j]), float(e[i, j])))
    if any(b[0] == math.inf for b in bad):
        max_diff = math.inf

    if bad:
        worst = max(bad, key=lambda b: b[0])
        detail = f"{worst[1]}: framework {worst[2]!r}, NumPy oracle {worst[3]!r} ({conv})"
        if len(bad) > 1:
            more = len(bad) - 1
            detail += f"; {more} more mismatch{'es' if more > 1 else ''}"
    else:
        detail = (
            f"W1, W2 match the NumPy oracle ({conv}, {dname}, max |diff| {max_diff:.3g}, "
            f"rtol {rtol:g})"
        )
    return CrossCheck(
        ok=not bad,
        max_abs_diff=max_diff,
        expected_W1=exp1,
        expected_W2=exp2,
        observed_W1=obs[0],
        observed_W2=obs[1],
        rtol=rtol,
        atol=atol,
        mismatches=len(bad),
        detail=detail,
    )
