"""``kinkcheck check``: a pair of user functions that differ only at a kink is caught, with the smallest input."""

from __future__ import annotations

import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kinkcheck import check
from kinkcheck.check import BOUNDS, CheckError, check_pair, count_variants, load_function, variants
from kinkcheck.cli import main

MODULE = textwrap.dedent('''
    import torch
    import jax.numpy as jnp

    def torch_layer(x, w):
        return torch.relu(x * w)          # relu'(0) = 0

    def jax_layer(x, w):
        return jnp.maximum(x * w, 0.0)    # ties of lax.max share evenly: 0.5 at 0

    def jax_relu_layer(x, w):
        import jax
        return jax.nn.relu(x * w)         # relu'(0) = 0, like torch.relu

    def torch_max(v):
        return torch.amax(v)              # ties share evenly

    def jax_first_max(v):
        return v[jnp.argmax(v)]           # all to the first maximum

    def broken(x, w):
        raise RuntimeError("boom")

    def exits_at_zero(x, w):
        import sys
        if float(x) == 0.0:
            sys.exit(3)
        return torch.relu(x * w)

    def jax_constant(x, w):
        return 3.0

    def torch_clamp(v):
        return torch.clamp(v, -1, 1)      # torch >= 2.14: 0 at a bound

    def jax_clip(v):
        return jnp.clip(v, -1, 1)         # 0.5 at a bound
''')


@pytest.fixture()
def mod(tmp_path, monkeypatch, torch_adapter, jax_adapter):
    (tmp_path / "userpair.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_variants_hit_zeros_ties_and_bounds():
    got = {why: p for p, why, _ in variants({"x": 0.5, "v": [1.5, 2.5]})}
    assert got["the given input"] == {"x": 0.5, "v": [1.5, 2.5]}
    assert got["x = 0"] == {"x": 0.0, "v": [1.5, 2.5]}
    assert got["v[1] tied to v[0]"] == {"x": 0.5, "v": [1.5, 1.5]}
    assert got["x = 6 (a usual bound)"]["x"] == 6.0
    assert len({repr(sorted(p.items())) for p, _, _ in variants({"x": 0.0})}) == len(list(variants({"x": 0.0}))), \
        "no point twice"


def test_pair_that_differs_only_at_the_kink(mod):
    r = check_pair(load_function("userpair:torch_layer"), load_function("userpair:jax_layer"), {"x": 0.5, "w": 2.0})
    assert not r.points[0].differs, "away from the kink both give the derivative"
    whys = {p.why for p in r.differing}
    assert whys == {"x = 0", "w = 0"}, f"only inputs that zero the relu's input differ: {whys}"
    s = r.smallest
    assert s.at == {"x": 0.5, "w": 0.0}, f"smallest differing input by norm: {s.at}"
    assert s.grads[0] == {"x": 0.0, "w": 0.0} and s.grads[1] == {"x": 0.0, "w": 0.25}, s.grads


def test_pair_with_the_same_convention_agrees(mod):
    r = check_pair(load_function("userpair:torch_layer"), load_function("userpair:jax_relu_layer"),
                   {"x": 0.5, "w": 2.0})
    assert not r.differing, [(p.why, p.grads) for p in r.differing]


def test_tie_of_a_vector_maximum(mod):
    r = check_pair(load_function("userpair:torch_max"), load_function("userpair:jax_first_max"), {"v": [1.0, 2.0, 3.0]})
    tied = [p for p in r.differing if p.why == "v[2] tied to v[1]"]
    assert tied and tied[0].grads == [{"v": [0.0, 0.5, 0.5]}, {"v": [0.0, 1.0, 0.0]}], tied


def test_load_errors(mod):
    with pytest.raises(CheckError, match="has no function"):
        load_function("userpair:nope")
    with pytest.raises(CheckError, match="cannot import"):
        load_function("no_such_module_here:f")
    with pytest.raises(CheckError, match="MODULE:FUNCTION"):
        load_function("userpair")
    with pytest.raises(CheckError, match="fails at the given input"):
        check_pair(load_function("userpair:broken"), load_function("userpair:jax_layer"), {"x": 1.0, "w": 1.0})


def test_a_function_that_exits_is_an_error_not_an_exit(mod):
    r = check_pair(load_function("userpair:exits_at_zero"), load_function("userpair:jax_relu_layer"),
                   {"x": 0.5, "w": 2.0})
    zero = [p for p in r.points if p.why == "x = 0"][0]
    assert isinstance(zero.grads[0], str) and zero.differs, zero


def test_a_constant_jax_result_is_refused(mod):
    with pytest.raises(CheckError, match="not a jax.Array"):
        check_pair(load_function("userpair:torch_layer"), load_function("userpair:jax_constant"), {"x": 1.0, "w": 1.0})


def test_limit_cuts_ties_last_and_says_so(mod):
    at = {"v": [2.0 + 0.1 * i for i in range(30)]}
    r = check_pair(load_function("userpair:torch_clamp"), load_function("userpair:jax_clip"), at, limit=100)
    assert r.not_tried > 0, "30 entries give more variants than the limit"
    assert any("a usual bound" in p.why for p in r.differing), "bound variants come before ties"


def test_cli_exit_codes(mod, capsys):
    assert main(["check", "userpair:torch_layer", "userpair:jax_layer", "--at", "x=0.5,w=2"]) == 1
    out = capsys.readouterr().out
    assert "2 give different gradients" in out and "smallest differing input: x=0.5, w=0" in out, out
    assert main(["check", "userpair:torch_layer", "userpair:jax_relu_layer", "--at", "x=0.5,w=2"]) == 0
    capsys.readouterr()
    assert main(["check", "userpair:torch_layer", "userpair:jax_layer", "--at", "x=0.5,w=2", "--frameworks", "tf,jax"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("kinkcheck: error:"), err


def _brute_force_variants(at):
    """The definition, written out: every variant in order, then duplicates dropped (quadratic; small points only)."""
    import copy

    from kinkcheck.frameworks.base import flatten

    entries = check._entries(at)

    def put(p, name, idx, value):
        q = copy.deepcopy(p)
        if not idx:
            q[name] = value
            return q
        v = q[name]
        for i in idx[:-1]:
            v = v[i]
        v[idx[-1]] = value
        return q

    zeros = dict(at)
    for name, idx in entries:
        zeros = put(zeros, name, idx, 0.0)
    every = [dict(at), zeros]
    every += [put(at, n, i, 0.0) for n, i in entries]
    every += [put(at, n, i, b) for n, i in entries for b in BOUNDS]
    every += [put(at, n2, i2, check._get(at, n1, i1))
              for k, (n1, i1) in enumerate(entries) for n2, i2 in entries[k + 1:]]
    out, seen = [], set()
    for p in every:
        key = tuple((k, tuple(repr(float(x)) for x in flatten(v))) for k, v in p.items())
        if key not in seen:
            seen.add(key)
            out.append(key)
    return out


_values = st.sampled_from([0, 0.0, -0.0, 1, 1.0, -1.0, 0.5, 3, 6.0, 2.5, 7.0])
_inputs = st.one_of(_values, st.lists(_values, min_size=1, max_size=4),
                    st.integers(1, 3).flatmap(lambda n: st.lists(st.lists(_values, min_size=n, max_size=n),
                                                                 min_size=1, max_size=3)))


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["x", "v", "w"]), _inputs, min_size=1, max_size=3))
def test_lazy_variants_are_the_definition_in_order(at):
    from kinkcheck.frameworks.base import flatten

    got = [tuple((k, tuple(repr(float(x)) for x in flatten(v))) for k, v in p.items()) for p, _, _ in variants(at)]
    assert got == _brute_force_variants(at), f"variants of {at}: same points, same order, no duplicate"
    assert count_variants(at) == len(got), f"count_variants({at})"


def test_variants_do_not_alias_the_input():
    at = {"m": [[1.5, 2.5], [3.5, 4.5]]}
    for p, _, _ in variants(at):
        pass
    assert at == {"m": [[1.5, 2.5], [3.5, 4.5]]}, "the given point is never modified"


def test_a_large_input_costs_the_limit_not_the_square(monkeypatch):
    """1,500 entries have 1.1 million tie variants; only the first ``limit`` are built and evaluated."""
    copies = []
    real_set = check._set
    monkeypatch.setattr(check, "_set", lambda *a: copies.append(1) or real_set(*a))

    class Fake:
        calls = 0

        def callable_gradient(self, fn, at, dtype):
            Fake.calls += 1
            return {k: v for k, v in at.items()}

    from kinkcheck import frameworks

    monkeypatch.setattr(frameworks, "get_adapter", lambda name: Fake())
    at = {"v": [0.01 * i + 10 for i in range(1500)]}
    r = check_pair(lambda v: v, lambda v: v, at, limit=400)
    assert len(r.points) == 400 and Fake.calls == 800, f"{len(r.points)} points, {Fake.calls} evaluations"
    assert len(copies) <= 400, f"{len(copies)} points built for 400 tried"
    assert r.not_tried == count_variants(at) - 400 == 2 + 1500 + 7 * 1500 + 1500 * 1499 // 2 - 400, r.not_tried
