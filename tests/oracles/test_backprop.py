"""Tests for the pure-NumPy manual-backprop oracle (kinkcheck.oracles.backprop)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kinkcheck.oracles.backprop import (
    ACTIVATIONS,
    P0,
    TOLERANCES,
    Activation,
    Net,
    crosscheck,
    two_layer_grads,
)

# Exact P0 gradients, derived by hand from dH[3, 1] = 38 and checked by the tests below.
W1_GRAD = {
    Fraction(0): [[932, 2376], [354, 904], [512, 1260]],
    Fraction(1, 2): [[932, 2376], [354, 904], [512, 1279]],
    Fraction(1): [[932, 2376], [354, 904], [512, 1298]],
}
W2_GRAD = [[-1372, 1608], [-998, 1220]]
LOSS = 4307

P0_ARRAYS = {
    "X": [[3, 2, 1], [1, 0, 2], [4, 1, 2], [0, 0, 1]],
    "W1": [[1, 2], [0, 1], [4, 0]],
    "W2": [[-1, 1], [-2, 3]],
}


def _exact(kd: Fraction):
    return two_layer_grads(P0, "relu", kd, dtype=object)


def _as_lists(a: np.ndarray) -> list:
    return a.tolist()


# ------------------------------------------------------------------------------ P0


def test_p0_data_and_kink_position():
    for name, want in P0_ARRAYS.items():
        assert getattr(P0, name).tolist() == want, f"P0.{name} differs from the seed case"
    assert P0.target.tolist() == [[1, 1]] * 4, "P0 target must be all ones (4x2)"
    g = _exact(Fraction(0))
    assert [[int(v) for v in r] for r in g.Z] == [[7, 8], [9, 2], [12, 9], [4, 0]], (
        f"X @ W1 should be [[7,8],[9,2],[12,9],[4,0]], got {g.Z.tolist()}"
    )
    assert np.argwhere(g.kink_mask).tolist() == [[3, 1]], (
        f"the only exact kink of P0 is at (3, 1), mask was {g.kink_mask.tolist()}"
    )


def test_p0_arrays_are_read_only():
    with pytest.raises(ValueError):
        P0.W1[0, 0] = 5
    assert P0.W1[0, 0] == 1, "P0.W1 must be unchanged after a refused write"


def test_p0_exact_minus_38():
    g0, g1 = _exact(Fraction(0)), _exact(Fraction(1))
    diff = (g0.dW1 - g1.dW1).tolist()
    assert diff == [[0, 0], [0, 0], [0, -38]], (
        f"relu'(0)=0 minus relu'(0)=1 W1 gradient should be [[0,0],[0,0],[0,-38]], got {diff}"
    )
    assert all(isinstance(v, Fraction) for v in g0.dW1.ravel()), (
        "exact mode must compute in Fraction arithmetic"
    )
    assert (g0.dW2 - g1.dW2).tolist() == [[0, 0], [0, 0]], "W2 gradient must not depend on relu'(0)"


@pytest.mark.parametrize("kd", sorted(W1_GRAD))
def test_p0_exact_values(kd):
    g = _exact(kd)
    assert g.dW1.tolist() == W1_GRAD[kd], f"dW1 for relu'(0)={kd}: {g.dW1.tolist()}"
    assert g.dW2.tolist() == W2_GRAD, f"dW2 for relu'(0)={kd}: {g.dW2.tolist()}"
    assert g.loss == LOSS and isinstance(g.loss, Fraction), f"loss for relu'(0)={kd}: {g.loss!r}"


def test_p0_half_lies_halfway():
    g0, gh, g1 = _exact(Fraction(0)), _exact(Fraction(1, 2)), _exact(Fraction(1))
    assert (gh.dW1 - g0.dW1).tolist() == [[0, 0], [0, 0], [0, 19]], (
        f"relu'(0)=1/2 minus relu'(0)=0 should be +19 at W1[2][1], got {(gh.dW1 - g0.dW1).tolist()}"
    )
    assert (gh.dW1 - g1.dW1).tolist() == [[0, 0], [0, 0], [0, -19]], (
        f"relu'(0)=1/2 minus relu'(0)=1 should be -19 at W1[2][1], got {(gh.dW1 - g1.dW1).tolist()}"
    )
    assert (gh.dW2 - g0.dW2).tolist() == [[0, 0], [0, 0]], "W2 gradient must not depend on relu'(0)"


@settings(max_examples=50, deadline=None)
@given(
    a=st.fractions(min_value=-10, max_value=10, max_denominator=1000),
    b=st.fractions(min_value=-10, max_value=10, max_denominator=1000),
)
def test_p0_w1_affine_in_kink_derivative(a, b):
    # Only X[3] = [0, 0, 1] multiplies dZ[3, 1] = 38 * kd.
    diff = (_exact(a).dW1 - _exact(b).dW1).tolist()
    want = [[0, 0], [0, 0], [0, 38 * (a - b)]]
    assert diff == want, f"dW1({a}) - dW1({b}) should be {want}, got {diff}"


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kd", sorted(W1_GRAD))
def test_float_modes_match_exact(dtype, kd):
    g = two_layer_grads(P0, "relu", float(kd), dtype=dtype)
    assert g.dW1.dtype == dtype and g.dW2.dtype == dtype, f"gradients must stay in {dtype}"
    assert g.dW1.tolist() == W1_GRAD[kd], f"{dtype.__name__} dW1 for relu'(0)={kd}: {g.dW1.tolist()}"
    assert g.dW2.tolist() == W2_GRAD, f"{dtype.__name__} dW2 for relu'(0)={kd}: {g.dW2.tolist()}"
    assert g.loss == LOSS, f"{dtype.__name__} loss: {g.loss}"


@pytest.mark.parametrize("name", ["relu", "leaky_relu", "abs"])
def test_exact_and_float64_agree(name):
    left = ACTIVATIONS[name].left
    ge = two_layer_grads(P0, name, Fraction(left), dtype=Fraction)
    gf = two_layer_grads(P0, name, left)
    np.testing.assert_allclose(
        ge.dW1.astype(float), gf.dW1, rtol=1e-12, err_msg=f"{name}: exact and float64 dW1 differ"
    )
    np.testing.assert_allclose(
        ge.dW2.astype(float), gf.dW2, rtol=1e-12, err_msg=f"{name}: exact and float64 dW2 differ"
    )


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_every_activation_kink_feeds_only_w1_2_1(name):
    a = ACTIVATIONS[name]
    g_left = two_layer_grads(P0, name, a.left)
    g_right = two_layer_grads(P0, name, a.right)
    diff = g_right.dW1 - g_left.dW1
    assert np.all(np.delete(diff.ravel(), 5) == 0), f"{name}: only W1[2][1] may depend on f'(0)"
    assert np.all(g_right.dW2 == g_left.dW2), f"{name}: W2 gradient must not depend on f'(0)"
    # dW1[2][1] moves by dH[3, 1] * (right - left); dH[3, 1] = 38 when H[3] = [4, 0] as for relu.
    dh31 = two_layer_grads(P0, name, 1.0).dW1[2, 1] - two_layer_grads(P0, name, 0.0).dW1[2, 1]
    if a.f(np.array([4.0, 0.0])).tolist() == [4.0, 0.0]:
        assert math.isclose(dh31, 38.0, rel_tol=1e-12), f"{name}: dH[3, 1] should be 38, got {dh31}"
    assert math.isclose(diff[2, 1], dh31 * (a.right - a.left), rel_tol=1e-12, abs_tol=1e-12), (
        f"{name}: W1[2][1] should move by {dh31 * (a.right - a.left)}, got {diff[2, 1]}"
    )


def test_nan_kink_derivative_propagates():
    g = two_layer_grads(P0, "relu", math.nan)
    assert np.isnan(g.dW1[:, 1]).all(), f"nan at the kink must reach all of dW1[:, 1]: {g.dW1.tolist()}"
    assert np.isfinite(g.dW1[:, 0]).all(), f"dW1[:, 0] does not see the kink: {g.dW1.tolist()}"
    assert g.dW2.tolist() == W2_GRAD, "dW2 does not see relu'(0)"


def test_errors():
    with pytest.raises(ValueError, match="no exact rational form"):
        two_layer_grads(P0, "elu", 0, dtype=object)
    with pytest.raises(ValueError, match="finite"):
        two_layer_grads(P0, "relu", math.nan, dtype=object)
    with pytest.raises(ValueError, match="unknown activation"):
        two_layer_grads(P0, "gelu", 0)
    with pytest.raises(ValueError, match="float dtype"):
        two_layer_grads(P0, "relu", 0, dtype=np.int64)
    with pytest.raises(TypeError, match="real number"):
        two_layer_grads(P0, "relu", "0")
    with pytest.raises(ValueError, match="inner sizes"):
        Net(X=np.ones((4, 3)), W1=np.ones((2, 2)), W2=np.ones((2, 2)), target=np.ones((4, 2)))
    with pytest.raises(ValueError, match="target"):
        Net(X=np.ones((4, 3)), W1=np.ones((3, 2)), W2=np.ones((2, 2)), target=np.ones((3, 2)))


# ------------------------------------------------------------------------ activations


def test_catalog_activation_names():
    want = {"relu", "leaky_relu", "elu", "celu", "selu", "abs", "softplus"}
    assert set(ACTIVATIONS) == want, f"activations should be {sorted(want)}, got {sorted(ACTIVATIONS)}"
    for name, a in ACTIVATIONS.items():
        assert isinstance(a, Activation) and a.name == name, f"{name}: wrong entry {a!r}"
        assert a.kink == 0.0, f"{name}: kink should be at 0"
        assert a.source, f"{name}: definition source missing"


@settings(max_examples=200, deadline=None)
@given(
    name=st.sampled_from(sorted(ACTIVATIONS)),
    z=st.floats(min_value=-5, max_value=5, allow_nan=False).filter(lambda v: abs(v) >= 1e-3),
)
def test_df_matches_central_difference(name, z):
    # h = 1e-6: truncation ~h^2 |f'''|/6 < 1e-11, rounding ~eps |f| / h < 1e-8; tolerance 1e-6.
    a = ACTIVATIONS[name]
    h = 1e-6
    fd = (a.f(np.array(z + h)) - a.f(np.array(z - h))) / (2 * h)
    d = a.df(np.array(z))
    assert abs(fd - d) <= 1e-6 * (1 + abs(d)), f"{name}'({z}): df {d}, central difference {fd}"


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_one_sided_derivatives_and_value_at_kink(name):
    a = ACTIVATIONS[name]
    eps = 1e-9
    assert math.isclose(a.df(np.array(-eps)), a.left, rel_tol=1e-6, abs_tol=1e-8), (
        f"{name}: df(-{eps}) = {a.df(np.array(-eps))}, left derivative {a.left}"
    )
    assert math.isclose(a.df(np.array(eps)), a.right, rel_tol=1e-6, abs_tol=1e-8), (
        f"{name}: df({eps}) = {a.df(np.array(eps))}, right derivative {a.right}"
    )
    at = float(a.df(np.array(0.0)))
    if a.differentiable:
        assert at == pytest.approx(a.left), f"{name} is differentiable at 0: df(0) should be {a.left}"
    else:
        assert math.isnan(at), f"{name}: df at the kink must be nan (no silent convention), got {at}"
    f0 = float(a.f(np.array(0.0)))
    for s in (-eps, eps):
        assert abs(float(a.f(np.array(s))) - f0) < 1e-8, f"{name}: f must be continuous at 0"


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_keeps_float32(name):
    z = np.linspace(-3, 3, 7, dtype=np.float32)
    a = ACTIVATIONS[name]
    assert a.f(z).dtype == np.float32, f"{name}.f must keep float32"
    assert a.df(z).dtype == np.float32, f"{name}.df must keep float32"


def test_selu_constants():
    a = ACTIVATIONS["selu"]
    assert a.right == 1.0507009873554804934193349852946, "selu scale (Klambauer et al. 2017)"
    assert a.left == 1.0507009873554804934193349852946 * 1.6732632423543772848170429916717, (
        "selu left derivative is scale * alpha"
    )


# ------------------------------------------------------------------------- crosscheck


def _floats(kd) -> tuple[list, list]:
    return [[float(v) for v in r] for r in W1_GRAD[kd]], [[float(v) for v in r] for r in W2_GRAD]


def test_crosscheck_ok():
    w1, w2 = _floats(Fraction(1))
    c = crosscheck(w1, w2, "relu", 1.0, "float32")
    assert c.ok and c.max_abs_diff == 0.0 and c.mismatches == 0, f"exact match rejected: {c.detail}"
    assert c.expected_W1.tolist() == w1, "expected W1 must be the oracle's relu'(0)=1 gradient"
    assert c.expected_W2.tolist() == w2, "expected W2 must be the oracle's W2 gradient"
    assert c.rtol == TOLERANCES["float32"], "float32 tolerance"


def test_crosscheck_mismatch_detail():
    w1, w2 = _floats(Fraction(1))  # a clamp-like framework...
    c = crosscheck(w1, w2, "relu", 0, "float32")  # ...judged under relu'(0) = 0
    assert not c.ok, "a 38 difference must be a mismatch"
    assert c.max_abs_diff == 38.0, f"max |diff| should be 38, got {c.max_abs_diff}"
    assert c.mismatches == 1, f"only W1[2][1] differs, got {c.mismatches}"
    assert c.detail == "W1[2][1]: framework 1298.0, NumPy oracle 1260.0 (relu'(0)=0)", c.detail


def test_crosscheck_half_and_fraction_formatting():
    w1, w2 = _floats(Fraction(1, 2))
    assert crosscheck(w1, w2, "relu", 0.5, "float64").ok, "relu'(0)=0.5 gradients should match"
    c = crosscheck(w1, w2, "relu", Fraction(1), "float64")
    assert not c.ok and c.detail.endswith("(relu'(0)=1)"), c.detail
    c = crosscheck(_floats(Fraction(0))[0], w2, "relu", Fraction(1, 2), "float64")
    assert "(relu'(0)=1/2)" in c.detail and "W1[2][1]" in c.detail, c.detail


@pytest.mark.parametrize(
    ("dtype", "small", "large"),
    [("float64", 1e-7, 1e-4), ("float32", 1e-2, 1.0), ("torch.float32", 1e-2, 1.0)],
)
def test_crosscheck_tolerance(dtype, small, large):
    # atol = rtol * max(1, max |expected|) = rtol * 2376.
    w1, w2 = _floats(Fraction(0))
    for delta, want in ((small, True), (large, False)):
        obs = [r[:] for r in w1]
        obs[1][0] += delta
        c = crosscheck(obs, w2, "relu", 0, dtype)
        assert c.ok is want, f"{dtype}: perturbation {delta} should give ok={want}: {c.detail}"


def test_crosscheck_nan():
    w1, w2 = _floats(Fraction(0))
    nan_w1 = [[r[0], math.nan] for r in w1]
    c = crosscheck(nan_w1, w2, "relu", math.nan, "float32")
    assert c.ok, f"nan in the same positions as the oracle should match: {c.detail}"
    assert np.isnan(c.expected_W1[:, 1]).all(), "oracle should be nan where the kink feeds"
    shard_style = [[str(r[0]), "nan"] for r in w1]
    assert crosscheck(shard_style, w2, "relu", math.nan, "float32").ok, "shard strings 'nan' accepted"
    c = crosscheck(w1, w2, "relu", math.nan, "float32")
    assert not c.ok and c.max_abs_diff == math.inf, f"finite vs nan must fail with inf diff: {c}"
    assert c.detail.startswith("W1[0][1]: framework 2376.0, NumPy oracle nan (relu'(0)=nan)"), c.detail
    assert c.detail.endswith("; 2 more mismatches"), c.detail
    c = crosscheck(nan_w1, w2, "relu", 0, "float32")
    assert not c.ok and c.mismatches == 3, f"unexpected nan must fail: {c.detail}"


def test_crosscheck_errors():
    w1, w2 = _floats(Fraction(0))
    with pytest.raises(ValueError, match="unknown dtype"):
        crosscheck(w1, w2, "relu", 0, "int8")
    with pytest.raises(ValueError, match="shape"):
        crosscheck(w1[:2], w2, "relu", 0, "float32")
    with pytest.raises(ValueError, match="not a float array"):
        crosscheck([["a", "b"]] * 3, w2, "relu", 0, "float32")


@pytest.mark.parametrize("name", ["elu", "selu", "softplus"])
def test_crosscheck_float_only_activations(name):
    g = two_layer_grads(P0, name, ACTIVATIONS[name].right)
    assert crosscheck(g.dW1, g.dW2, name, ACTIVATIONS[name].right, "float64").ok, (
        f"{name}: oracle output must cross-check against itself"
    )


# ------------------------------------------------------------------ end to end (torch)


def _torch_p0_grads(torch, act):
    X = torch.tensor(P0_ARRAYS["X"], dtype=torch.float32)
    W1 = torch.tensor(P0_ARRAYS["W1"], dtype=torch.float32, requires_grad=True)
    W2 = torch.tensor(P0_ARRAYS["W2"], dtype=torch.float32, requires_grad=True)
    loss = ((act(X @ W1) @ W2 - 1) ** 2).sum()
    loss.backward()
    return W1.grad.tolist(), W2.grad.tolist()


@pytest.mark.torch
def test_torch_relu_vs_clamp_reproduces_seed():
    torch = pytest.importorskip("torch", reason="torch not installed: end-to-end P0 check skipped")
    programs = {
        "torch.nn.functional.relu(x)": (torch.nn.functional.relu, Fraction(0)),
        "x.clamp(min=0)": (lambda x: x.clamp(min=0), Fraction(1)),
    }
    got = {}
    for prog, (act, kd) in programs.items():
        w1, w2 = _torch_p0_grads(torch, act)
        c = crosscheck(w1, w2, "relu", kd, "float32")
        assert c.ok, f"torch {torch.__version__} {prog}: {c.detail}"
        assert w1 == [[float(v) for v in r] for r in W1_GRAD[kd]], f"{prog} W1 grad {w1}"
        got[prog] = (np.array(w1), np.array(w2))
    (r1, r2), (c1, c2) = got.values()
    assert (r1 - c1).tolist() == [[0, 0], [0, 0], [0, -38]], f"relu - clamp W1: {(r1 - c1).tolist()}"
    assert (r2 - c2).tolist() == [[0, 0], [0, 0]], f"relu - clamp W2: {(r2 - c2).tolist()}"


@pytest.mark.jax
def test_jax_maximum_gives_half_end_to_end():
    jax = pytest.importorskip("jax", reason="jax not installed: end-to-end P0 check skipped")
    jnp = jax.numpy
    X = jnp.asarray(P0_ARRAYS["X"], dtype=jnp.float32)

    for act, kd in ((jax.nn.relu, Fraction(0)), (lambda x: jnp.maximum(x, 0.0), Fraction(1, 2))):

        def loss(w1, w2, act=act):
            return ((act(X @ w1) @ w2 - 1) ** 2).sum()

        w1, w2 = jax.grad(loss, (0, 1))(
            jnp.asarray(P0_ARRAYS["W1"], jnp.float32), jnp.asarray(P0_ARRAYS["W2"], jnp.float32)
        )
        c = crosscheck(np.asarray(w1), np.asarray(w2), "relu", kd, "float32")
        assert c.ok, f"jax {jax.__version__} relu'(0)={kd}: {c.detail}"
