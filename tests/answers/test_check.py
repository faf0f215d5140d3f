"""``kinkcheck check``: a pair of user functions that differ only at a kink is caught, with the smallest input."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kinkcheck.answers import check
from kinkcheck.answers.check import BOUNDS, CheckError, check_pair, count_variants, variants
from kinkcheck.probe.usercode import UserCodeError, load_function
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

    def torch_fmax(x, y):
        return torch.fmax(x, y)           # a tie: reverse gives it to x, forward (jvp) to y

    def jax_where(x, y):
        return jnp.where(x >= y, x, y)    # a tie: x in every mode

    def torch_relu_shift(x):
        return torch.relu(x - 0.3)        # relu'(0) = 0

    def jax_max_shift(x):
        return jnp.maximum(x - 0.3, 0.0)  # 0.5 at the tie
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
    with pytest.raises(UserCodeError, match="has no function"):
        load_function("userpair:nope")
    with pytest.raises(UserCodeError, match="cannot import"):
        load_function("no_such_module_here:f")
    with pytest.raises(UserCodeError, match="MODULE:FUNCTION"):
        load_function("userpair")
    with pytest.raises(CheckError, match="fails at the given input"):
        check_pair(load_function("userpair:broken"), load_function("userpair:jax_layer"), {"x": 1.0, "w": 1.0})


def test_a_function_that_exits_is_an_error_not_an_exit(mod):
    r = check_pair(load_function("userpair:exits_at_zero"), load_function("userpair:jax_relu_layer"),
                   {"x": 0.5, "w": 2.0})
    zero = next(p for p in r.points if p.why == "x = 0")
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

    from kinkcheck.vocabulary import flatten

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
    from kinkcheck.vocabulary import flatten

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

        def callable_gradient(self, fn, at, dtype, mode="reverse"):
            Fake.calls += 1
            return {k: v for k, v in at.items()}

    monkeypatch.setattr(check, "get_adapter", lambda name: Fake())  # the name check calls
    at = {"v": [0.01 * i + 10 for i in range(1500)]}
    r = check_pair(lambda v: v, lambda v: v, at, limit=400)
    assert len(r.points) == 400 and Fake.calls == 800, f"{len(r.points)} points, {Fake.calls} evaluations"
    assert len(copies) <= 400, f"{len(copies)} points built for 400 tried"
    assert r.not_tried == count_variants(at) - 400 == 2 + 1500 + 7 * 1500 + 1500 * 1499 // 2 - 400, r.not_tried


def _one_line_exit_2(argv, capsys):
    assert main(argv) == 2, argv
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("kinkcheck: error:"), err
    return err[0]


def test_file_form_in_a_fresh_interpreter(tmp_path, torch_adapter, jax_adapter):
    """Q12: ``path/to/file.py:fn`` once failed with "module 'importlib' has no attribute 'util'" unless some other
    module had imported importlib.util first (as the test suite does): so a fresh interpreter checks it."""
    pairs = tmp_path / "sub" / "mypairs.py"
    pairs.parent.mkdir()
    pairs.write_text(MODULE)
    code = "import sys; from kinkcheck.probe.usercode import load_function; print(load_function(sys.argv[1]).__name__)"
    fresh = subprocess.run([sys.executable, "-c", code, f"{pairs}:torch_layer"], capture_output=True, text=True,
                           timeout=300, check=False)
    assert fresh.returncode == 0 and fresh.stdout.strip() == "torch_layer", fresh.stderr
    run = subprocess.run([sys.executable, "-m", "kinkcheck", "check", f"{pairs}:torch_layer",
                          "sub/mypairs.py:jax_layer", "--at", "x=0.5,w=2"],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path, check=False)
    assert run.returncode == 1, run.stderr
    assert "2 give different gradients" in run.stdout and "smallest differing input: x=0.5, w=0" in run.stdout, \
        run.stdout


def test_file_form_errors_are_one_line(tmp_path, capsys, torch_adapter, jax_adapter):
    good = tmp_path / "good.py"
    good.write_text(MODULE)
    (tmp_path / "bad.py").write_text("def f(x:\n    return x\n")
    (tmp_path / "notes.txt").write_text("hello")
    cases = [(f"{tmp_path}/missing.py:f", "no file"), (f"{good}:nope", "has no function 'nope'"),
             (f"{tmp_path}/bad.py:f", "SyntaxError"), (f"{tmp_path}/notes.txt:f", "is not a Python file"),
             (f"{tmp_path}:f", "no file")]
    for spec, words in cases:
        with pytest.raises(UserCodeError, match=words):
            load_function(spec)
        line = _one_line_exit_2(["check", spec, f"{good}:jax_layer", "--at", "x=1,w=1", "--no-isolate"], capsys)
        assert words in line, (spec, line)


def test_a_pair_that_agrees_in_reverse_can_differ_in_forward_mode(mod):
    """Q13: torch.fmax gives a tie to x in reverse mode and to y in forward mode; jnp.where(x >= y, x, y) to x."""
    f, g = load_function("userpair:torch_fmax"), load_function("userpair:jax_where")
    at = {"x": 1.0, "y": 1.0}
    assert not check_pair(f, g, at).differing, "reverse mode: both give the tie to x"
    for mode in ["forward", ("forward-ad", "jacfwd")]:
        r = check_pair(f, g, at, mode=mode)
        given = r.points[0]
        assert given.differs and given.grads == [{"x": 0.0, "y": 1.0}, {"x": 1.0, "y": 0.0}], (mode, given.grads)
        assert {p.why for p in r.differing} == {"the given input", "every entry 0"}, "only the ties differ"
    r = check_pair(f, g, at, mode=("aot_eager", "jit"))
    assert r.modes == ("aot_eager", "jit") and not r.differing, [(p.why, p.grads) for p in r.differing]


def test_modes_on_the_command_line(mod, capsys):
    argv = ["check", "userpair:torch_fmax", "userpair:jax_where", "--at", "x=1,y=1", "--no-isolate"]
    assert main(argv) == 0
    assert capsys.readouterr().out.startswith("16 inputs tried (float64, reverse mode):")
    assert main([a for a in argv if a != "--no-isolate"] + ["--mode", "forward"]) == 1, "through the worker too"
    out = capsys.readouterr().out
    assert out.startswith("16 inputs tried (float64, forward mode):") and \
        "the given input: at x=1, y=1: userpair:torch_fmax (torch) x=0, y=1 | userpair:jax_where (jax) x=1, y=0" \
        in out, out
    assert main(argv + ["--mode", "vmap,jacrev"]) == 0
    assert "(float64, torch vmap mode, jax jacrev mode)" in capsys.readouterr().out
    line = _one_line_exit_2(argv + ["--mode", "inductor"], capsys)
    assert "jax has no inductor mode (its modes: reverse, jit" in line, line
    assert "torch has no jit mode" in _one_line_exit_2(argv + ["--mode", "jit,jit"], capsys)
    assert "unknown mode 'sideways'" in _one_line_exit_2(argv + ["--mode", "sideways"], capsys)
    assert "or two (one per function), got 3" in _one_line_exit_2(argv + ["--mode", "reverse,reverse,jit"], capsys)


def test_a_pair_that_differs_only_in_lower_precision(mod, capsys):
    """Q13: relu(x - 0.3) against maximum(x - 0.3, 0) at x = 0.3 + 1e-13 agree in float64; float32, float16 and
    bfloat16 round x onto 0.3 (as they round the literal), the kink, where relu gives 0 and maximum 0.5."""
    f, g = load_function("userpair:torch_relu_shift"), load_function("userpair:jax_max_shift")
    at = {"x": 0.3000000000001}
    assert not check_pair(f, g, at).differing, "float64 holds x apart from 0.3"
    seen = {"float32": 0.30000001192092896, "float16": 0.300048828125, "bfloat16": 0.30078125}
    for dtype, x in seen.items():
        r = check_pair(f, g, at, dtype=dtype)
        assert [p.why for p in r.differing] == ["the given input"], (dtype, [p.why for p in r.differing])
        given = r.points[0]
        assert given.grads == [{"x": 0.0}, {"x": 0.5}] and given.seen == {"x": x}, (dtype, given)
    argv = ["check", "userpair:torch_relu_shift", "userpair:jax_max_shift", "--at", "x=0.3000000000001",
            "--no-isolate"]
    assert main(argv) == 0
    capsys.readouterr()
    assert main([a for a in argv if a != "--no-isolate"] + ["--dtype", "float32"]) == 1, "through the worker too"
    out = capsys.readouterr().out
    assert "at x=0.3000000000001 (in float32: x=0.30000001192092896): userpair:torch_relu_shift (torch) x=0 | " \
           "userpair:jax_max_shift (jax) x=0.5" in out, out
    assert "unknown dtype 'float8'" in _one_line_exit_2(argv + ["--dtype", "float8"], capsys)


def test_second_order_compares_h_times_ones(mod):
    r = check_pair(load_function("userpair:torch_relu_shift"), load_function("userpair:jax_max_shift"), {"x": 2.0},
                   mode="second-order")
    assert r.points[0].grads == [{"x": 0.0}, {"x": 0.0}] and not r.points[0].differs, r.points[0]


def test_each_differing_input_names_the_kinked_operations_hit_and_long_vectors_are_elided(mod):
    """`check` of a 12-element clamp against clip: the kink-hit counters name torch.clamp and jnp.clip at each
    differing input (nothing there on the agreeing given input), vectors print as head … tail with their length,
    and past `shown` a line says how many more differ."""
    at = {"v": [0.5] + [0.25] * 11}
    r = check_pair(load_function("userpair:torch_clamp"), load_function("userpair:jax_clip"), at)
    assert not r.points[0].differs and not r.points[0].kinks, "no kink counted where nothing differs"
    bound = next(p for p in r.differing if p.why == "v[0] = 1 (a usual bound)")
    torch_kinks, jax_kinks = bound.kinks
    assert any(k.startswith("torch.clamp at ") and "(1 of 12)" in k for k in torch_kinks), torch_kinks
    assert any(k.startswith("clip: ") and "(1 of 12)" in k for k in jax_kinks), jax_kinks
    text = check.render(r, ["t", "j"], shown=2)
    assert "(12 elements)" in text and ", …, " in text, "a 12-element vector is elided"
    assert "    kinks hit: t: torch.clamp at " in text, text
    more = len(r.differing) - 2
    assert f"  … and {more} more differing inputs (--all lists them)" in text, text
    assert "more differing inputs" not in check.render(r, ["t", "j"], shown=None), "--all: every one"
    assert check.kinks_hit(lambda v: v * 2, "tinygrad", at, "float64") == ["no kink-hit counter for tinygrad"]
