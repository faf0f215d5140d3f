"""JAX's census of kinked operations (references/census/jax.toml) and its generator
(kinkcheck.frameworks.jax.census)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kinkcheck.catalog import load_catalog
from kinkcheck.census import coverage, load_census

CENSUS = load_census("jax")

KNOWN_KINKED = [
    "jax.nn.relu", "jax.nn.relu6", "jax.nn.leaky_relu", "jax.nn.elu", "jax.nn.celu", "jax.nn.selu",
    "jax.nn.hard_tanh", "jax.nn.hard_sigmoid", "jax.nn.hard_swish", "jax.numpy.abs", "jax.numpy.absolute",
    "jax.numpy.maximum", "jax.numpy.minimum", "jax.numpy.fmax", "jax.numpy.clip", "jax.numpy.max",
    "jax.numpy.amax", "jax.numpy.min", "jax.numpy.sort", "jax.numpy.median", "jax.numpy.quantile",
    "jax.numpy.where", "jax.numpy.sign", "jax.numpy.floor", "jax.numpy.round", "jax.numpy.sqrt",
    "jax.numpy.arctan2", "jax.numpy.linalg.norm", "jax.numpy.linalg.svd", "jax.numpy.linalg.eigh",
    "jax.lax.max", "jax.lax.clamp", "jax.lax.top_k", "jax.lax.cummax", "jax.lax.reduce_window",
    "jax.lax.cond", "jax.scipy.special.xlogy", "jax.nn.logsumexp", ".clip", ".max",
]
KNOWN_SMOOTH = [
    "jax.numpy.exp", "jax.numpy.sin", "jax.numpy.tanh", "jax.numpy.matmul", "jax.numpy.sum", "jax.numpy.mean",
    "jax.numpy.var", "jax.nn.sigmoid", "jax.nn.softmax", "jax.nn.log_softmax", "jax.nn.gelu", "jax.nn.softplus",
    "jax.nn.soft_sign", "jax.numpy.logaddexp", "jax.numpy.sinc", "jax.numpy.linalg.det", "jax.numpy.linalg.inv",
    "jax.numpy.linalg.cholesky", "jax.lax.exp", "jax.lax.dot_general", "jax.scipy.special.erf",
]


def _op(name: str):
    try:
        return CENSUS.op(name)
    except KeyError:
        return None


@pytest.mark.parametrize("name", KNOWN_KINKED)
def test_known_kinked_operation_is_listed_as_kinked(name: str) -> None:
    op = _op(name)
    assert op is not None, f"{name} (kinked by its JVP rule) is missing from the JAX census"
    assert op.status == "kinked", f"{name} is listed as {op.status} ({op.reason}), expected kinked"
    assert op.derivative and op.kink, f"{name} lacks its derivative evidence or kink location"


@pytest.mark.parametrize("name", KNOWN_SMOOTH)
def test_known_smooth_operation_is_not_kinked(name: str) -> None:
    op = _op(name)
    assert op is None or op.status == "excluded", f"{name} is smooth but listed as kinked: {op}"


def test_integer_valued_operations_are_excluded_with_reason() -> None:
    for name in ("jax.numpy.argmax", "jax.numpy.argsort", "jax.lax.argmax", "jax.numpy.searchsorted"):
        op = _op(name)
        assert op is not None and op.status == "excluded", f"{name}: expected an excluded entry, got {op}"
        assert "integer" in op.reason, f"{name}: expected the integer-valued reason, got {op.reason!r}"


def test_every_excluded_entry_has_a_reason_and_the_file_is_sorted() -> None:
    assert CENSUS.framework == "jax"
    for op in CENSUS.ops:
        assert op.status in ("kinked", "excluded"), op
        if op.status == "excluded":
            assert op.reason.strip(), f"{op.name} is excluded without a reason"
        else:
            assert op.derivative.strip(), f"{op.name} is kinked without derivative evidence"
    names = [op.name for op in CENSUS.ops]
    assert names == sorted(names), "the census ops must be sorted by name (deterministic output)"


def test_derivative_evidence_cites_the_rule_location() -> None:
    op = CENSUS.op("jax.numpy.maximum")
    assert "max_p" in op.derivative and "_balanced_eq" in op.derivative and "lax/lax.py:" in op.derivative, (
        f"jax.numpy.maximum: expected max_p's _balanced_eq rule with its line, got {op.derivative!r}")


def test_coverage_against_the_catalog_adds_up() -> None:
    cov = coverage(CENSUS, load_catalog())
    kinked = [op.name for op in CENSUS.ops if op.status == "kinked"]
    excluded = [op.name for op in CENSUS.ops if op.status == "excluded"]
    assert cov.kinked == len(kinked) == len(cov.covered) + len(cov.uncovered)
    assert sum(len(v) for v in cov.excluded.values()) == len(excluded)
    assert len(kinked) + len(excluded) == len(CENSUS.ops)
    for name in ("jax.nn.relu", "jax.numpy.maximum", "jax.numpy.clip", "jax.numpy.abs"):
        main = CENSUS.op(name).name
        assert main in cov.covered, f"{name} is called by catalog programs but not counted as covered"
    assert "relu@0" in cov.covered["jax.nn.relu"]


# ---- the generator, against the installed JAX ----------------------------------------------------------

jax = pytest.importorskip("jax")
from kinkcheck.frameworks.jax import census as jax_ops

same_release = pytest.mark.skipif(jax.__version__ != CENSUS.release,
                                  reason=f"installed jax {jax.__version__} differs from the census release "
                                         f"{CENSUS.release}")


def _hits(fn) -> set[str]:
    return jax_ops.trace_function(fn).hits & set(jax_ops.KINKED_PRIMITIVES)


def test_tracer_finds_the_rule_behind_known_kinks() -> None:
    jnp = jax.numpy
    assert "max" in _hits(jnp.maximum)
    assert "select_n" in _hits(jax.nn.relu)  # the custom_jvp rule select(x > 0, g, 0), inlined by jax.jvp
    assert "reduce_max" in _hits(jnp.max)
    assert "sort" in _hits(jnp.sort)
    assert "sqrt" in _hits(jnp.linalg.norm)
    assert _hits(jnp.exp) == set() and _hits(jnp.tanh) == set() and _hits(jnp.matmul) == set()
    # stop_gradient cuts the path: softmax's max shift is not differentiated
    assert _hits(jax.nn.softmax) == set()


def test_dependency_matters_constant_comparisons_do_not_hit() -> None:
    jnp = jax.numpy
    assert _hits(lambda x: jnp.where(jnp.arange(3) > 0, x, 0.0)) == set()
    assert "select_n" in _hits(lambda x: jnp.where(x > 0, x, 0.0))
    assert _hits(lambda x: jnp.maximum(jax.lax.stop_gradient(x), 1.0) + x) == set()


def test_rule_sites_are_found_in_the_installed_sources() -> None:
    sites = jax_ops.rule_sites()
    assert set(sites) == set(jax_ops.KINKED_PRIMITIVES)
    assert all(":" in s and s.split(":")[1].isdigit() for s in sites.values())


def test_hand_decisions_name_real_functions_and_known_decisions() -> None:
    funcs = jax_ops.public_functions()
    for name, decision in jax_ops.HAND.items():
        assert name in funcs, f"HAND names {name}, not a public function of jax {jax.__version__}"
        assert decision[0] in ("kinked", "excluded", "smooth"), (name, decision)


@pytest.mark.parametrize(("fn", "at", "expect"), [
    # hand checks behind HAND entries: jax.grad at the point
    ("soft_sign", 0.0, 1.0),    # C1 at 0: not kinked
    ("i1e", 0.0, 0.5),          # C1 at 0: not kinked
])
def test_hand_checked_smooth_points(fn: str, at: float, expect: float) -> None:
    f = {"soft_sign": jax.nn.soft_sign, "i1e": jax.scipy.special.i1e}[fn]
    g = jax.grad(f)
    assert float(g(at)) == pytest.approx(expect)
    assert float(g(at + 1e-7)) == pytest.approx(float(g(at - 1e-7)), abs=1e-6), f"{fn}' jumps at {at}"


def test_hand_checked_qr_sign_jump() -> None:
    jnp = jax.numpy
    r = [float(jnp.linalg.qr(jnp.array([[e, 1.0], [1.0, 1.0]]))[1][0, 0]) for e in (1e-9, -1e-9)]
    assert r[0] == pytest.approx(-r[1]) and abs(r[0]) > 0.5, f"qr's R[0,0] expected to flip sign, got {r}"


@same_release
def test_regenerating_gives_the_committed_file(tmp_path) -> None:
    out = tmp_path / "jax.toml"
    assert jax_ops.main(["--out", str(out)]) == 0
    committed = CENSUS.path
    assert out.read_text(encoding="utf-8") == Path(committed).read_text(encoding="utf-8"), (
        "python -m kinkcheck.frameworks.jax.census gives a different file: regenerate and review the diff")
    assert jax_ops.UNTRACED == [], f"public functions with no trace and no hand decision: {jax_ops.UNTRACED}"


def test_hand_excluded_status_survives_regeneration(tmp_path) -> None:
    from dataclasses import replace

    from kinkcheck.census import Census

    old = Census("jax", "x", "", (replace(CENSUS.op("jax.numpy.maximum"), status="excluded", reason="by hand"),
                                   replace(CENSUS.op("jax.numpy.sqrt"), kink="x = 0 (corrected)")))
    new = jax_ops.build_census(old, only=["jax.numpy.maximum", "jax.numpy.sqrt", "jax.numpy.exp"])
    assert [o.name for o in new.ops] == ["jax.numpy.maximum", "jax.numpy.sqrt"]
    assert new.op("jax.numpy.maximum").status == "excluded" and new.op("jax.numpy.maximum").reason == "by hand"
    assert new.op("jax.numpy.sqrt").kink == "x = 0 (corrected)"
