"""Modes, dtypes and devices (issue 4): each mode of each adapter on known programs, the bfloat16 bound
case, -0.0 and subnormal inputs, compiled batches, unavailable modes, CUDA skipped with its reason.

Values marked "pinned" are the measured conventions of the pinned releases (conftest.PINNED); where an
upstream file defines them, the comment names it.
"""

from __future__ import annotations

import json
import math

import pytest
from conftest import ROOT, require_pinned

from kinkcheck.language import expr as ex
from kinkcheck.frameworks import FrameworkUnavailable, Unavailable
from kinkcheck.shards import unpack

TORCH_MODES = ("reverse", "functional", "forward", "forward-ad", "inductor", "aot_eager", "vmap")
JAX_MODES = ("reverse", "jit", "forward", "jacfwd", "jacrev", "vmap")


def _grad(adapter, src, at, mode, dtype="float64"):
    tree = ex.parse(src, at, [adapter.name])
    return adapter.gradient(tree, at, dtype, "cpu", mode)


# ---------------------------------------------------------------------------------------------- torch


@pytest.mark.parametrize("mode", TORCH_MODES)
@pytest.mark.parametrize(("src", "at", "expected"), [
    # relu's backward is threshold_backward: 0 at 0 (tools/autograd/derivatives.yaml, "relu").
    ("torch.relu(x)", {"x": 0.0}, {"x": 0.0}),
    # maximum splits a tie evenly: grad / 2 where self == other (derivatives.yaml, "maximum").
    ("torch.maximum(x, y)", {"x": 1.0, "y": 1.0}, {"x": 0.5, "y": 0.5}),
    ("torch.amax(v)", {"v": [1.0, 3.0, 3.0]}, {"v": [0.0, 0.5, 0.5]}),
    ("x * x * y", {"x": 2.0, "y": 3.0}, {"x": 12.0, "y": 4.0}),
])
def test_torch_gradient_modes_agree_on_documented_conventions(torch_adapter, mode, src, at, expected):
    got = _grad(torch_adapter, src, at, mode)
    assert got == expected, f"{src} at {at} in {mode} mode: {got}"


def test_torch_clamp_bound_in_every_mode(torch_adapter):
    """Pinned: torch 2.13.0 clamp(min=0) at 0 is 1 in reverse, forward and compiled modes alike."""
    require_pinned(torch_adapter)
    for mode in TORCH_MODES:
        assert _grad(torch_adapter, "torch.clamp(x, min=0)", {"x": 0.0}, mode) == {"x": 1.0}, mode


def test_torch_fmax_reverse_and_forward_disagree_at_a_tie(torch_adapter):
    """Pinned (torch 2.13.0): fmax's backward gives the tie to self, its forward formula to other."""
    require_pinned(torch_adapter)
    at = {"x": 1.0, "y": 1.0}
    assert _grad(torch_adapter, "torch.fmax(x, y)", at, "reverse") == {"x": 1.0, "y": 0.0}
    assert _grad(torch_adapter, "torch.fmax(x, y)", at, "forward") == {"x": 0.0, "y": 1.0}
    assert _grad(torch_adapter, "torch.fmax(x, y)", at, "forward-ad") == {"x": 0.0, "y": 1.0}


def test_torch_where_trick_differs_by_mode(torch_adapter):
    """where(x > 0, sqrt(x), x) at -1: reverse mode multiplies the masked NaN branch (NaN); forward mode
    selects tangents after the fact (1): the masked branch's NaN never multiplies a nonzero tangent."""
    src, at = "torch.where(x > 0, torch.sqrt(x), x)", {"x": -1.0}
    assert math.isnan(_grad(torch_adapter, src, at, "reverse")["x"])
    assert _grad(torch_adapter, src, at, "forward")["x"] == 1.0


@pytest.mark.parametrize(("src", "at", "expected"), [
    ("x * x * x", {"x": 2.0}, {"x": 12.0}),  # d2/dx2 x^3 = 6x
    ("x * x * y", {"x": 2.0, "y": 1.0}, {"x": 6.0, "y": 4.0}),  # H @ 1 = [2y + 2x, 2x]
    ("torch.relu(x)", {"x": 0.0}, {"x": 0.0}),  # piecewise-linear: the Hessian is 0, no Dirac mass
])
def test_torch_second_order_is_hessian_times_ones(torch_adapter, src, at, expected):
    assert _grad(torch_adapter, src, at, "second-order") == expected


def test_torch_unavailable_mode_when_torch_func_is_absent(torch_adapter, monkeypatch):
    """torch < 2.0 has no torch.func: functional and vmap cells are 'unavailable' with the reason."""
    import torch

    monkeypatch.delattr(torch, "func")
    for mode in ("functional", "vmap", "forward"):
        with pytest.raises(Unavailable, match="torch.func does not exist"):
            _grad(torch_adapter, "torch.relu(x)", {"x": 0.0}, mode)


def test_unavailable_modes_in_the_committed_torch_1_13_shard():
    shard = unpack(json.loads((ROOT / "references/observations/torch-1.13.1-cpu.json").read_text()))
    if "modes" not in shard["environment"]:
        pytest.skip("torch 1.13.1 shard predates the mode matrix")
    cells = [o for o in shard["observations"] if o["mode"] in ("functional", "vmap", "inductor", "aot_eager")]
    assert cells and all(o["status"] == "unavailable" for o in cells), {o["mode"]: o["error"] for o in cells[:4]}
    reasons = {o["mode"]: o["error"] for o in cells}
    assert "torch.func does not exist in torch 1.13.1" in reasons["functional"], reasons
    assert "torch.compile does not exist" in reasons["inductor"], reasons
    fwd_ad = [o for o in shard["observations"] if o["mode"] == "forward-ad" and o["case"] == "relu@0"
              and o["dtype"] == "float64"]
    assert fwd_ad and all(o["status"] == "ok" for o in fwd_ad), "forward_ad exists in 1.13"
    half = [o for o in shard["observations"] if o["program"] == "torch.clamp(x, min=0)" and o["dtype"] == "float16"
            and o["mode"] == "reverse"]
    assert half and "not implemented for 'Half'" in half[0]["error"], "1.13 has no float16 clamp_min on CPU"


def test_compiled_batch_isolates_a_failing_program(torch_adapter):
    """One compiled call for many programs; a program that cannot compile gets its own error, the rest values."""
    items = [(ex.parse(s, at, ["torch"]), at) for s, at in [
        ("torch.relu(x)", {"x": 0.0}),
        ("torch.clamp(x, -1, 1)", {"x": 1.0}),
        ("v[v.argmax()]", {"v": [1.0, 3.0, 3.0]}),  # data-dependent index: a graph break, compiled alone
        ("torch.relu(x, 1, 2)", {"x": 0.0}),  # a TypeError in eager mode already
        ("torch.maximum(x, y)", {"x": 1.0, "y": 1.0}),
    ]]
    out = torch_adapter.compiled_gradients(items, "float32", "cpu", "aot_eager")
    assert out[0] == {"x": 0.0} and out[4] == {"x": 0.5, "y": 0.5}, out
    assert out[2] == {"v": [0.0, 1.0, 0.0]}, "a graph break runs the program with graph breaks allowed"
    assert isinstance(out[3], TypeError), out[3]
    eager = [_grad(torch_adapter, "torch.clamp(x, -1, 1)", {"x": 1.0}, "reverse", "float32")]
    assert out[1] == eager[0], "batched compiled value equals the eager value here"


def test_inductor_batch_gives_the_eager_conventions(torch_adapter):
    pytest.importorskip("torch._inductor", reason="inductor is not part of this torch build")
    items = [(ex.parse(s, at, ["torch"]), at) for s, at in [
        ("torch.relu(x)", {"x": 0.0}), ("torch.abs(x)", {"x": 0.0}), ("torch.amax(v)", {"v": [1.0, 3.0, 3.0]})]]
    out = torch_adapter.compiled_gradients(items, "float32", "cpu", "inductor")
    assert out == [{"x": 0.0}, {"x": 0.0}, {"v": [0.0, 0.5, 0.5]}], out


def test_compiled_programs_are_traced_as_fx_graphs_only_where_those_compute_the_same(torch_adapter):
    """The batch hands dynamo each program's torch.fx graph (straight-line torch calls, traced fast) where
    that graph computes bit for bit what the program computes eagerly; else the expression interpreter."""
    import torch
    import torch.fx

    from kinkcheck.frameworks.base import split_inputs

    def program(src, at):
        tree = ex.parse(src, at, ["torch"])
        item = (tree, torch_adapter._resolve(tree), list(at), at, split_inputs(at, None, ()), ())
        return torch_adapter._program(item, torch.float64, torch.device("cpu"))

    recorded = program("torch.nn.functional.relu(x) + x.clamp(min=0) * torch.maximum(x, y)", {"x": 0.0, "y": 0.0})
    assert isinstance(recorded, torch.fx.GraphModule), "straight-line torch calls are recorded by torch.fx"
    calls = [n.target for n in recorded.graph.nodes if n.op in ("call_function", "call_method")]
    assert torch.nn.functional.relu in calls and "clamp" in calls and torch.maximum in calls, calls
    branching = program("v[v.argmax()]", {"v": [1.0, 3.0, 3.0]})  # fx records it, but the index is a proxy
    no_backward = program("torch.heaviside(x, torch.full_like(x, 0.5))", {"x": 0.0})  # no derivative formula
    assert torch.equal(branching(torch.tensor([1.0, 3.0, 3.0], dtype=torch.float64)),
                       torch.tensor(3.0, dtype=torch.float64)), "whichever is traced computes the program"
    assert not isinstance(no_backward, torch.fx.GraphModule), "not checkable eagerly: the interpreter is traced"
    constant = program("torch.nn.functional.cosine_embedding_loss(x.reshape(1, 1), y.reshape(1, 1), -torch.ones(1))",
                       {"x": 1.0, "y": 1.0})
    assert not isinstance(constant, torch.fx.GraphModule), \
        "a tensor built from no input would be an fx constant, lifted by dynamo into a graph input"

    def captured(fn, at):
        graphs = []

        def backend(gm, _inputs):
            graphs.append([(n.op, str(n.target)) for n in gm.graph.nodes if n.op != "placeholder"])
            return gm.forward

        torch._dynamo.reset()
        torch.compile(fn, backend=backend, fullgraph=True)(
            *[torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in at.values()])
        return graphs

    for src, at in [("torch.nn.functional.relu(x) + x.clamp(min=0) * torch.maximum(x, y)", {"x": 0.0, "y": 0.0}),
                    ("torch.amax(v) - v.sort().values[1] + torch.linalg.vector_norm(v, 2)", {"v": [1.0, 3.0, 3.0]})]:
        tree = ex.parse(src, at, ["torch"])
        names = torch_adapter._resolve(tree)
        recorded = program(src, at)
        assert isinstance(recorded, torch.fx.GraphModule), src
        interpreted = captured(lambda *a, tree=tree, names=names, at=at: ex.evaluate(
            tree, names, dict(zip(at, a)), guard=False), at)
        assert captured(recorded, at) == interpreted, f"{src}: dynamo captures another graph from the fx graph"
    items = [(ex.parse(s, at, ["torch"]), at) for s, at in [
        ("torch.nn.functional.relu(x) + x.clamp(min=0) * torch.maximum(x, y)", {"x": 0.0, "y": 0.0}),
        ("torch.heaviside(x, torch.full_like(x, 0.5)) + x", {"x": 0.0})]]
    out = torch_adapter.compiled_gradients(items, "float64", "cpu", "aot_eager")
    assert out[0] == {"x": 0.0, "y": 0.0} and isinstance(out[1], BaseException), out


def test_same_bits_tells_signed_zeros_infinities_and_nans_apart():
    import torch

    from kinkcheck.frameworks.torch.adapter import _same_bits

    t = torch.tensor
    assert _same_bits(t([0.0, float("nan"), float("inf")]), t([0.0, float("nan"), float("inf")]))
    assert not _same_bits(t([0.0]), t([-0.0])), "relu@-0.0 measures the sign of zero"
    assert not _same_bits(t([float("inf")]), t([torch.finfo(torch.float32).max])), "inf is not the largest float"
    assert not _same_bits(t([float("nan")]), t([0.0])) and not _same_bits(t([1.0]), t([1.0], dtype=torch.float64))
    assert not _same_bits(t([complex(0.0, 0.0)]), t([complex(0.0, -0.0)])), "complex parts are compared alike"
    assert _same_bits(None, None) and not _same_bits(None, t(0.0))
    assert _same_bits(t([1, 2]), t([1, 2])) and not _same_bits(t([1, 2]), t([1, 3]))


# ---------------------------------------------------------------------------------------------- jax


@pytest.mark.parametrize("mode", JAX_MODES)
@pytest.mark.parametrize(("src", "at", "expected"), [
    # jax.nn.relu has a custom JVP with 0 at 0 (jax/_src/nn/functions.py).
    ("jax.nn.relu(x)", {"x": 0.0}, {"x": 0.0}),
    # lax.max's JVP splits a tie evenly (jax/_src/lax/lax.py, _balanced_eq).
    ("jax.numpy.maximum(x, y)", {"x": 1.0, "y": 1.0}, {"x": 0.5, "y": 0.5}),
    ("jax.numpy.max(v)", {"v": [1.0, 3.0, 3.0]}, {"v": [0.0, 0.5, 0.5]}),
    ("x * x * y", {"x": 2.0, "y": 3.0}, {"x": 12.0, "y": 4.0}),
])
def test_jax_gradient_modes_agree_on_documented_conventions(jax_adapter, mode, src, at, expected):
    got = _grad(jax_adapter, src, at, mode)
    assert got == expected, f"{src} at {at} in {mode} mode: {got}"


def test_jax_where_trick_differs_by_mode(jax_adapter):
    """The JAX FAQ's "gradients contain NaN where using where": NaN in reverse mode, 1 in forward mode."""
    src, at = "jax.numpy.where(x > 0, jax.numpy.sqrt(x), x)", {"x": -1.0}
    assert math.isnan(_grad(jax_adapter, src, at, "reverse")["x"])
    assert _grad(jax_adapter, src, at, "forward")["x"] == 1.0
    assert _grad(jax_adapter, src, at, "jacfwd")["x"] == 1.0


def test_jax_second_order_is_hessian_times_ones(jax_adapter):
    assert _grad(jax_adapter, "x * x * y", {"x": 2.0, "y": 1.0}, "second-order") == {"x": 6.0, "y": 4.0}
    assert _grad(jax_adapter, "jax.numpy.sqrt(x)", {"x": 0.0}, "second-order") == {"x": -math.inf}


def test_unknown_mode_for_a_framework_is_bad_input(torch_adapter, jax_adapter):
    with pytest.raises(ex.ExprError, match="unknown mode 'jit'"):
        _grad(torch_adapter, "torch.relu(x)", {"x": 0.0}, "jit")
    with pytest.raises(ex.ExprError, match="unknown mode 'inductor'"):
        _grad(jax_adapter, "jax.nn.relu(x)", {"x": 0.0}, "inductor")


# ---------------------------------------------------------------------------------------------- dtypes


def test_bfloat16_bound_that_is_not_representable(torch_adapter, jax_adapter):
    """hardtanh's bound 0.7 at x = 0.69921875 (bfloat16's nearest value to 0.7): interior in exact
    arithmetic (derivative 1). A bound cast to bfloat16 becomes x itself, a tie; a Python-scalar bound is
    compared in float (torch's opmath), so it stays interior."""
    require_pinned(torch_adapter)
    require_pinned(jax_adapter)
    at = {"x": 0.69921875}
    assert _grad(torch_adapter, "torch.minimum(x, torch.full_like(x, 0.7))", at, "reverse", "float64") == {"x": 1.0}
    assert _grad(torch_adapter, "torch.minimum(x, torch.full_like(x, 0.7))", at, "reverse", "bfloat16") == {"x": 0.5}
    assert _grad(torch_adapter, "torch.nn.functional.hardtanh(x, -0.7, 0.7)", at, "reverse", "bfloat16") == {"x": 1.0}
    assert _grad(jax_adapter, "jax.numpy.clip(x, -0.7, 0.7)", at, "reverse", "float32") == {"x": 1.0}
    assert _grad(jax_adapter, "jax.numpy.clip(x, -0.7, 0.7)", at, "reverse", "bfloat16") == {"x": 0.5}


@pytest.mark.parametrize("name", ["torch", "jax"])
def test_rounded_inputs_are_recorded(name, request):
    adapter = request.getfixturevalue(f"{name}_adapter")
    assert adapter.rounded({"x": 1e-45}, "float32") == {"x": 2.0 ** -149}, "1e-45 is the float32 subnormal 2**-149"
    assert adapter.rounded({"x": 1e-45}, "float16") == {"x": 0.0}, "and 0 in float16"
    assert adapter.rounded({"x": 1e-45}, "bfloat16") == {"x": 0.0}, "and 0 in bfloat16"
    assert adapter.rounded({"x": 1e-45}, "float64") is None, "float64 holds 1e-45"
    assert adapter.rounded({"x": -0.0}, "bfloat16") is None, "-0.0 is exact in every dtype"
    r = adapter.rounded({"x": -1e-45}, "float16")
    assert r == {"x": 0.0} and math.copysign(1, r["x"]) == -1, "the sign of an underflowed input is kept"
    assert adapter.rounded({"x": 0.7}, "bfloat16") == {"x": 0.69921875}


def test_negative_zero_and_subnormal_inputs(torch_adapter, jax_adapter):
    """abs, maximum and relu at -0.0 and at the float32 subnormal 2**-149."""
    require_pinned(torch_adapter)
    require_pinned(jax_adapter)
    assert _grad(torch_adapter, "torch.abs(x)", {"x": -0.0}, "reverse") == {"x": 0.0}
    assert _grad(torch_adapter, "torch.relu(x)", {"x": -0.0}, "reverse") == {"x": 0.0}
    assert _grad(torch_adapter, "torch.maximum(x, y)", {"x": -0.0, "y": 0.0}, "reverse") == {"x": 0.5, "y": 0.5}
    assert _grad(torch_adapter, "torch.relu(x)", {"x": 1e-45}, "reverse", "float32") == {"x": 1.0}
    assert _grad(torch_adapter, "torch.abs(x)", {"x": 1e-45}, "reverse", "float32") == {"x": 1.0}
    # sqrt(x * x): x * x underflows to 0 in float32, so the chain rule meets sqrt'(0) = inf.
    assert _grad(torch_adapter, "torch.sqrt(x * x)", {"x": 1e-45}, "reverse", "float32") == {"x": math.inf}
    # This CPU's XLA flushes float32 subnormals in comparisons: relu sees 0 (its 0), maximum a tie (0.5).
    assert _grad(jax_adapter, "jax.nn.relu(x)", {"x": 1e-45}, "reverse", "float32") == {"x": 0.0}
    assert _grad(jax_adapter, "jax.numpy.maximum(x, 0.0)", {"x": 1e-45}, "reverse", "float32") == {"x": 0.5}
    # Pinned (jax 0.10.2): abs at -0.0 gives 1, the derivative from the right; torch gives 0 (sgn(-0.0) = 0).
    assert _grad(jax_adapter, "jax.numpy.abs(x)", {"x": -0.0}, "reverse") == {"x": 1.0}


# ---------------------------------------------------------------------------------------------- devices


@pytest.mark.parametrize("name", ["torch", "jax"])
def test_cuda_without_a_device_is_not_measured(name, request):
    adapter = request.getfixturevalue(f"{name}_adapter")
    if "cuda" in adapter.devices():
        pytest.skip(f"{name} sees a CUDA device here; the no-device path cannot be exercised")
    with pytest.raises(FrameworkUnavailable, match="not measured: no CUDA device"):
        _grad_on(adapter, "cuda")


def _grad_on(adapter, device):
    src = "torch.relu(x)" if adapter.name == "torch" else "jax.nn.relu(x)"
    tree = ex.parse(src, {"x": 0.0}, [adapter.name])
    return adapter.gradient(tree, {"x": 0.0}, "float32", device, "reverse")


@pytest.mark.parametrize("name", ["torch", "jax"])
def test_cuda_gradient_when_a_device_exists(name, request):
    adapter = request.getfixturevalue(f"{name}_adapter")
    if "cuda" not in adapter.devices():
        pytest.skip(f"no CUDA device for {name} on this machine (the report says 'not measured: no CUDA device')")
    assert _grad_on(adapter, "cuda") == {"x": 0.0}
