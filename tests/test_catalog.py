"""The catalog: stable ids, every case covered by both frameworks, public cases present, bad files refused."""

from __future__ import annotations

import pytest

from kinkcheck.catalog import FRAMEWORKS, CatalogError, load_catalog

#: Cases the core issue requires by name (ids are stable: reports and citations link to them).
REQUIRED_CASES = [
    "relu@0", "clamp@-1", "clamp@1", "relu6@0", "relu6@6", "leaky_relu@0", "elu@0", "celu@0", "selu@0",
    "hardswish@-3", "hardswish@3", "hardsigmoid@-3", "hardsigmoid@3", "hardshrink@0.5", "hardshrink@-0.5",
    "softshrink@0.5", "softshrink@-0.5", "threshold@1", "abs@0", "abs@-0.0", "sign@0", "floor@1", "round@0.5",
    "maximum@tie", "minimum@tie", "max@[1,0,1,0,1,0]", "min@[1,0,1,0,1,0]", "median@[1,0,1,0,1,0]",
    "maxpool2d@tied-window", "norm1@origin", "norm2@origin", "norminf@origin", "sqrt@0", "sqrt-abs@0",
    "where-sqrt@-1", "softplus@0",
]

RELU_PROGRAMS = {
    "torch": ["torch.relu(x)", "torch.nn.functional.relu(x)", "torch.clamp(x, min=0)", "torch.clamp_min(x, 0)",
              "x.clamp(min=0)", "torch.maximum(x, torch.zeros_like(x))", "torch.where(x > 0, x, 0.0)",
              "torch.nn.functional.threshold(x, 0.0, 0.0)", "torch.relu(-x) + x",
              "(torch.relu(x) + torch.relu(-x) + x) / 2"],
    "jax": ["jax.nn.relu(x)", "jax.numpy.maximum(x, 0.0)", "jax.numpy.clip(x, 0)", "jax.numpy.where(x > 0, x, 0.0)"],
}


def test_required_cases_present(catalog):
    ids = {c.id for c in catalog}
    missing = [c for c in REQUIRED_CASES if c not in ids]
    assert not missing, f"catalog lacks required cases {missing}"


@pytest.mark.parametrize("source", [f"P{i}" for i in range(10)])
def test_every_public_case_is_in_the_catalog(catalog, source):
    cases = [c.id for c in catalog if source in c.sources]
    assert cases, f"public case {source} (shared/cases/public-cases.md) has no catalog case"


def test_relu_programs(catalog):
    case = catalog.case("relu@0")
    for fw, programs in RELU_PROGRAMS.items():
        have = [p.id for p in case.programs_for(fw)]
        missing = [p for p in programs if p not in have]
        assert not missing, f"relu@0 lacks {fw} programs {missing}"


def test_every_case_has_both_frameworks_or_a_reason(catalog):
    for case in catalog:
        for fw in FRAMEWORKS:
            assert case.programs_for(fw) or fw in case.no_equivalent, f"{case.id}: no {fw} program and no reason"


def test_hash_is_stable_and_content_based(tmp_path):
    text = (load_catalog().path and open(load_catalog().path).read())
    a = tmp_path / "a.toml"
    b = tmp_path / "b.toml"
    a.write_text(text)
    b.write_text("# a comment changes nothing\n" + text)
    assert load_catalog(a).hash == load_catalog(b).hash, "comments must not make shards stale"
    c = tmp_path / "c.toml"
    c.write_text(text.replace('at = { x = 0 }', 'at = { x = 1 }', 1))
    assert load_catalog(c).hash != load_catalog(a).hash, "a changed point must change the hash"


@pytest.mark.parametrize(
    "body, reason",
    [
        ("[[case]]\nid='a'\nsympy='Max(x, 0)'\nat={x=0}\n[case.programs]\ntorch=['torch.relu(x)']\n",
         "no jax program and no no_equivalent.jax reason"),
        ("[[case]]\nid='a'\nsympy='Max(x, 0)'\nat={x=0}\n[case.programs]\ntorch=['__import__(1)']\njax=['jax.nn.relu(x)']\n",
         "unknown name '__import__'"),
        ("[[case]]\nid='a'\nsympy='Max(x, 0)'\nat={x=0}\n[case.programs]\ntorch=['jax.nn.relu(x)']\njax=['jax.nn.relu(x)']\n",
         "unknown name 'jax' (inputs: x; namespaces: torch)"),
        ("[[case]]\nid='a'\nsympy='eval(x)'\nat={x=0}\n[case.programs]\ntorch=['torch.relu(x)']\njax=['jax.nn.relu(x)']\n",
         "sympy field: unknown name 'eval'"),
        ("[[case]]\nsympy='Max(x, 0)'\n", "missing field 'id'"),
        ("[[case\n", "not valid TOML"),
    ],
)
def test_bad_catalog_is_refused(tmp_path, body, reason):
    p = tmp_path / "bad.toml"
    p.write_text(body)
    with pytest.raises(CatalogError) as info:
        load_catalog(p)
    assert reason in str(info.value), f"expected {reason!r} in {info.value}"


def test_missing_catalog(tmp_path):
    with pytest.raises(CatalogError, match="cannot read catalog"):
        load_catalog(tmp_path / "nope.toml")
