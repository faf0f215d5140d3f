"""The PyTorch census (references/census/torch.toml) and its generator (kinkcheck.frameworks.torch.census)."""

from __future__ import annotations

import math

import pytest

from kinkcheck.census import Census, Op, coverage, load_census, names_used, write_census

torch = pytest.importorskip("torch")
pytest.importorskip("yaml", reason="the generator reads derivatives.yaml with PyYAML")

from kinkcheck.frameworks.torch import census as torch_ops


@pytest.fixture(scope="module")
def census() -> Census:
    return load_census("torch")


def _status(census: Census, name: str) -> str:
    try:
        return census.op(name).status
    except KeyError:
        return "absent"


@pytest.mark.parametrize("name", [
    "torch.nn.functional.relu", "torch.relu", ".relu", "torch.abs", ".abs", "torch.maximum", "torch.minimum",
    "torch.clamp", "torch.clip", ".clamp", "torch.clamp_min", "torch.max", ".max", "torch.min", "torch.amax",
    "torch.sort", "torch.topk", "torch.kthvalue", "torch.median", "torch.mode", "torch.cummax", "torch.cummin",
    "torch.linalg.vector_norm", "torch.norm", "torch.linalg.norm", "torch.sqrt", "torch.pow", "torch.atan2",
    "torch.xlogy", "torch.logsumexp", "torch.cdist", "torch.nn.functional.pdist", "torch.linalg.eigh",
    "torch.linalg.svdvals", "torch.nuclear_norm", "torch.nn.functional.max_pool2d",
    "torch.nn.functional.hardtanh", "torch.nn.functional.relu6", "torch.nn.functional.elu",
    "torch.nn.functional.selu", "torch.nn.functional.leaky_relu", "torch.nn.functional.prelu",
    "torch.nn.functional.hardswish", "torch.nn.functional.hardsigmoid", "torch.nn.functional.softshrink",
    "torch.nn.functional.hardshrink", "torch.nn.functional.huber_loss", "torch.nn.functional.smooth_l1_loss",
    "torch.nn.functional.l1_loss", "torch.nn.functional.threshold", "torch.floor", "torch.round", "torch.sign",
    "torch.where", "torch.quantile", "torch.special.entr", "torch.special.xlogy",
])
def test_known_kinked_operations_are_listed_as_kinked(census: Census, name: str) -> None:
    assert _status(census, name) == "kinked", f"{name} should be a kinked entry of {census.path}"


@pytest.mark.parametrize("name", [
    "torch.exp", "torch.sin", "torch.tanh", "torch.matmul", "torch.sigmoid", "torch.log", "torch.cumsum",
    "torch.var", "torch.nn.functional.gelu", "torch.nn.functional.silu", "torch.nn.functional.softmax",
    "torch.nn.functional.mse_loss", "torch.nn.functional.linear", "torch.nn.functional.conv2d",
    "torch.nn.functional.avg_pool2d", "torch.nn.functional.softsign", "torch.nn.functional.layer_norm",
    "torch.linalg.det", "torch.special.expit", ".sum", "torch.prod", "torch.logaddexp",
])
def test_smooth_operations_are_not_listed(census: Census, name: str) -> None:
    assert _status(census, name) == "absent", f"{name} is smooth but {census.path} lists it"


@pytest.mark.parametrize("name, reason", [
    ("torch.nn.functional.dropout", "random"), ("torch.argmax", "integer"), ("torch.argsort", "integer"),
    ("torch.nn.functional.celu", "C1"), ("torch.floor_divide", "not differentiable"),
    ("torch.nn.functional.fractional_max_pool2d", "random"), ("torch.gt", "bool"),
])
def test_exclusions_carry_their_reason(census: Census, name: str, reason: str) -> None:
    op = census.op(name)
    assert op.status == "excluded" and reason in op.reason, f"{name}: {op.status!r}, reason {op.reason!r}"


def test_every_entry_is_well_formed(census: Census) -> None:
    formulas = torch_ops.aten_formulas()
    assert census.framework == "torch" and census.release, "framework and release must be set"
    assert [o.name for o in census.ops] == sorted(o.name for o in census.ops), "ops must be sorted by name"
    for op in census.ops:
        if op.status == "excluded":
            assert op.reason, f"{op.name}: excluded without a reason"
        else:
            assert op.kink, f"{op.name}: kinked without a kink location"
            assert op.derivative, f"{op.name}: kinked without the derivative that makes it so"
        for part in op.derivative.split(" | "):
            if part.startswith("aten."):
                aten = part[len("aten."):].split(":", 1)[0]
                assert aten in formulas or aten.rstrip("_") in formulas, \
                    f"{op.name}: quotes aten.{aten}, which derivatives.yaml does not define"


def test_coverage_is_computed_and_adds_up(census: Census) -> None:
    from kinkcheck.catalog import load_catalog

    catalog = load_catalog()
    cov = coverage(census, catalog)
    n_excluded = sum(len(v) for v in cov.excluded.values())
    assert len(cov.covered) + len(cov.uncovered) + n_excluded == len(census.ops), "every entry counted once"
    assert cov.kinked == sum(o.status == "kinked" for o in census.ops)
    for name in ("torch.nn.functional.relu", "torch.clamp", "torch.abs", "torch.maximum"):
        assert name in cov.covered, f"{name} is called by catalog programs (e.g. relu@0) but not covered"
    assert "relu@0" in cov.covered["torch.nn.functional.relu"]
    # every kinked name the catalog's torch programs call is in the census
    spellings = {s for o in census.ops for s in o.spellings}
    used = names_used(catalog, "torch")
    kinky = {n for n in used if n.split(".")[-1] in {"relu", "clamp", "maximum", "abs", "hardtanh", "max"}}
    assert kinky <= spellings, f"catalog names missing from the census: {sorted(kinky - spellings)}"


# ---------------------------------------------------------------------------------------------- generator


def test_regenerating_gives_the_committed_file(census: Census, tmp_path) -> None:
    installed = torch.__version__.split("+")[0]
    if installed != census.release:
        pytest.skip(f"installed torch {installed} differs from the census release {census.release}")
    out = tmp_path / "torch.toml"
    write_census(torch_ops.generate(census), out, torch_ops.HEADER)
    from pathlib import Path

    committed = Path(census.path).read_text(encoding="utf-8")
    assert out.read_text(encoding="utf-8") == committed, \
        "python -m kinkcheck.frameworks.torch.census would change references/census/torch.toml: regenerate and review"


def test_a_new_piecewise_formula_is_refused(tmp_path) -> None:
    deriv = tmp_path / "derivatives.yaml"
    deriv.write_text("- name: brand_new_op(Tensor self) -> Tensor\n"
                     "  self: where(self > 0, grad, at::zeros_like(grad))\n"
                     "- name: exp(Tensor self) -> Tensor\n"
                     "  self: grad * result.conj()\n", encoding="utf-8")
    _, unclassified = torch_ops.classify_aten(torch_ops.aten_formulas(deriv))
    assert unclassified == ["brand_new_op"], f"a where() formula must be flagged, got {unclassified}"
    with pytest.raises(torch_ops.UnclassifiedOp, match="brand_new_op"):
        torch_ops.generate(deriv_path=deriv)


def test_installed_derivatives_are_all_classified() -> None:
    kinked, unclassified = torch_ops.classify_aten(torch_ops.aten_formulas())
    assert not unclassified, f"classify these aten operations in torch_ops: {unclassified}"
    for aten in ("relu", "clamp", "maximum", "max", "sort", "linalg_vector_norm", "_linalg_svd"):
        assert aten in kinked, f"aten.{aten} must be classified kinked"


def test_hand_checked_fields_are_kept() -> None:
    ops = torch_ops.aten_formulas()
    found = {"torch.abs": ["abs"], ".abs": [], "torch.nn.functional.relu": ["relu"]}
    previous = Census("torch", "0", "", (Op("torch.abs", kink="x = 0 (checked by hand)"),
                                         Op("torch.nn.functional.relu", status="excluded", reason="a test"),
                                         Op("torch.gone", status="excluded", reason="hand-added")))
    kinked, _ = torch_ops.classify_aten(ops)
    out = torch_ops._assemble(found, {}, {}, ops, kinked, previous, "0")
    assert out.op("torch.abs").kink == "x = 0 (checked by hand)"
    assert out.op(".abs").name == "torch.abs", "the method joins the function's entry as an alias"
    relu = out.op("torch.nn.functional.relu")
    assert (relu.status, relu.reason) == ("excluded", "a test")
    assert out.op("torch.gone").reason == "hand-added"


def test_trace_records_the_aten_operations() -> None:
    x = torch.randn(3, dtype=torch.float64, requires_grad=True)
    got = torch_ops.trace(torch.nn.functional.relu6, (x,), {})
    assert got is not None and "hardtanh" in got[0] and got[1], f"relu6 should reach aten.hardtanh: {got}"
    assert torch_ops.trace(torch.nn.functional.relu6, ("not a tensor",), {}) is None
    _, floating = torch_ops.trace(torch.argmax, (x,), {})
    assert not floating, "argmax's output is an integer tensor"


# ---------------------------------------------------------------------------------------------- by hand


def _one_sided(f, x0: float, h: float = 1e-6) -> tuple[float, float]:
    def d(x: float) -> float:
        t = torch.tensor(x, dtype=torch.float64, requires_grad=True)
        f(t).backward()
        return float(t.grad)
    return d(x0 - h), d(x0 + h)


@pytest.mark.parametrize("name, f, x0", [
    ("torch.special.i0e", torch.special.i0e, 0.0),
    ("torch.copysign", lambda t: torch.copysign(t, torch.tensor(-1.0, dtype=torch.float64)), 0.0),
    ("torch.nn.functional.selu", torch.nn.functional.selu, 0.0),
    ("torch.nn.functional.hardswish", torch.nn.functional.hardswish, -3.0),
    ("torch.nn.functional.elu", lambda t: torch.nn.functional.elu(t, alpha=2.0), 0.0),
    ("torch.nn.functional.softshrink", torch.nn.functional.softshrink, 0.5),
])
def test_kinked_entries_have_different_one_sided_derivatives(census: Census, name: str, f, x0: float) -> None:
    left, right = _one_sided(f, x0)
    assert not math.isclose(left, right, abs_tol=1e-3), f"{name} at {x0}: one-sided {left} == {right}"
    assert _status(census, name) == "kinked"


def test_celu_exclusion_holds_c1_at_zero(census: Census) -> None:
    left, right = _one_sided(lambda t: torch.nn.functional.celu(t, alpha=2.0), 0.0)
    assert math.isclose(left, right, abs_tol=1e-5), f"celu'(0-) = {left}, celu'(0+) = {right}: not C1"
    assert _status(census, "torch.nn.functional.celu") == "excluded"
