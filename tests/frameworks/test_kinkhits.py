"""Kink-hit counters (kinkcheck.kinkhits): PyTorch through a TorchFunctionMode, JAX through a jaxpr interpreter.
Every expectation is counted by hand from inputs built to sit on the kink a known number of times."""

from __future__ import annotations

import pytest

from kinkcheck.kinkhits import Site, merge_sites


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch", reason="PyTorch is not installed in this Python")


def test_torch_counts_functional_module_and_method_calls(torch):
    import torch.nn.functional as F

    from kinkcheck.frameworks.torch.kinkhits import TorchHitCounter

    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU())
    with torch.no_grad():
        net[0].weight.zero_()
        net[0].bias.copy_(torch.tensor([0.0, 1.0, -1.0, 0.0]))  # two pre-activations exactly 0 per row
    x = torch.zeros(5, 3)
    with TorchHitCounter() as c:
        net(x)  # nn.ReLU calls F.relu: counted as such
        x.clamp(min=0)
        torch.maximum(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([1.0, 0.0, 3.0]))
        F.relu6(torch.tensor([0.0, 6.0, 3.0]))
        torch.tensor([[1.0, 1.0, 0.0], [2.0, 1.0, 0.0]]).amax(1)
        torch.max(torch.tensor([[1.0, 1.0, 0.0]]), dim=1)
        torch.relu(torch.tensor([1, 0]))  # an integer tensor: no derivative, not counted
    got = [(s.program, s.kink, s.elements, s.hits) for s in c.sites]
    assert got == [("torch.nn.functional.relu", "x = 0", 20, 10), ("torch.Tensor.clamp", "x at a bound", 15, 15),
                   ("torch.maximum", "tie", 3, 2), ("torch.nn.functional.relu6", "x = 0 or 6", 3, 2),
                   ("torch.Tensor.amax", "tie", 2, 1), ("torch.max", "tie", 1, 1)], got
    assert [s.index for s in c.sites] == list(range(6)) and {s.dtype for s in c.sites} == {"float32"}
    assert c.new_pass() and c.sites == [], "new_pass hands over the sites and starts again"


@pytest.mark.parametrize(("pool", "kwargs", "windows", "ties"), [
    ([[1.0, 2.0, 2.0, 0.0]], {"kernel_size": 2}, 2, 0),  # windows [1, 2], [2, 0]
    ([[1.0, 2.0, 2.0, 0.0]], {"kernel_size": 2, "stride": 1}, 3, 1),  # [2, 2] is tied
    ([[[1.0, 1.0], [0.0, 1.0]]], {"kernel_size": 2}, 1, 1),
    # padded with -inf, stride 1: 16 windows of 2 x 2, seven of them hold a tied maximum (counted by hand)
    ([[[1.0, 1.0, 3.0], [0.0, 1.0, 3.0], [2.0, 2.0, 2.0]]], {"kernel_size": 2, "stride": 1, "padding": 1}, 16, 7),
    ([[[1.0, 0.0, 1.0], [0.0, 0.0, 0.0], [1.0, 0.0, 1.0]]], {"kernel_size": 2, "dilation": 2}, 1, 1),
])
def test_torch_max_pool_windows_with_a_tied_maximum(torch, pool, kwargs, windows, ties):
    import torch.nn.functional as F

    from kinkcheck.frameworks.torch.kinkhits import TorchHitCounter

    x = torch.tensor([pool])
    fn = F.max_pool1d if x.dim() == 3 else F.max_pool2d
    with TorchHitCounter() as c:
        fn(x, **kwargs)
    (site,) = c.sites
    assert (site.elements, site.hits) == (windows, ties), (kwargs, site)


def test_torch_ceil_mode_is_said_not_inspected(torch):
    import torch.nn.functional as F

    from kinkcheck.frameworks.torch.kinkhits import TorchHitCounter

    with TorchHitCounter() as c:
        F.max_pool1d(torch.tensor([[[1.0, 1.0, 1.0]]]), 2, ceil_mode=True)
    assert not c.sites[0].inspected and "ceil_mode" in c.sites[0].why


def test_jax_interpreter_counts_inside_named_calls_and_returns_the_outputs():
    jax = pytest.importorskip("jax", reason="JAX is not installed in this Python")
    import jax.numpy as jnp

    from kinkcheck.frameworks.jax.kinkhits import jax_hits

    def f(w, x):
        h = jax.nn.relu(x @ w)  # a custom_jvp_call named relu around max(x, 0.0)
        return jnp.clip(h, 0.0, 1.0).sum() + jnp.abs(h).max() + jnp.maximum(h, 0.0).sum()

    w = jnp.array([[1.0, 0.0], [0.0, 0.0]])
    x = jnp.array([[1.0, 2.0], [0.0, 3.0]])  # x @ w = [[1, 0], [0, 0]]: three zeros
    out, sites = jax_hits(f, w, x)
    assert float(out) == pytest.approx(float(f(w, x))), "the interpreter computes what the function does"
    got = [(s.program, s.elements, s.hits) for s in sites]
    assert got == [("relu: max", 4, 3), ("clip: max", 4, 3), ("clip: min", 4, 1), ("abs", 4, 3),
                   ("reduce_max", 1, 0), ("max", 4, 3)], got


def test_merge_sums_passes_by_site():
    a = [Site(0, "torch.relu", "x = 0", 10, 1, dtype="float32"), Site(1, "torch.maximum", "tie", 4, 0)]
    b = [Site(0, "torch.relu", "x = 0", 10, 2, dtype="float32"), Site(0, "torch.relu", "x = 0", 5, 5,
                                                                       dtype="float16")]
    merged = merge_sites([a, b])
    assert [(s.index, s.program, s.dtype, s.elements, s.hits, s.calls) for s in merged] == [
        (0, "torch.relu", "float32", 20, 3, 2), (1, "torch.maximum", "", 4, 0, 1), (0, "torch.relu", "float16", 5, 5, 1)]


def test_torch_counts_before_an_in_place_call_and_never_breaks_the_call(torch):
    """An in-place op overwrites its input: counted before the call, ``nn.ReLU(inplace=True)`` and ``clamp_``
    give the true hits. A keyword ``other`` and bounds that broadcast the input are read as torch reads them."""
    import torch.nn.functional as F

    from kinkcheck.frameworks.torch.kinkhits import TorchHitCounter

    x = torch.tensor([0.0, -1.0, 2.0, 0.0, 1.0])  # two zeros; -1 would become 0 in place
    with TorchHitCounter() as c:
        torch.nn.ReLU(inplace=True)(x.clone())
        x.clone().clamp_(0, 1)  # 0, 0 at the lower bound, 1 at the upper
        F.hardtanh(x.clone(), inplace=True)  # -1 and 1 at the bounds
        torch.maximum(x, other=torch.zeros_like(x))
        torch.clamp(x[:4], min=torch.zeros(3, 4))  # the bound broadcasts the input to 3 x 4
        F.max_pool1d(torch.tensor([[[1.0, 1.0, 0.0, 2.0]]]), 2, return_indices=True)
    got = [(s.program, s.elements, s.hits) for s in c.sites]
    assert got == [("torch.nn.functional.relu", 5, 2), ("torch.Tensor.clamp_", 5, 3),
                   ("torch.nn.functional.hardtanh", 5, 2), ("torch.maximum", 5, 2), ("torch.clamp", 12, 6),
                   ("torch.nn.functional.max_pool1d_with_indices", 2, 1)], got


def test_jax_max_pooling_windows_are_counted():
    jax = pytest.importorskip("jax", reason="JAX is not installed in this Python")
    import jax.numpy as jnp

    from kinkcheck.frameworks.jax.kinkhits import jax_hits

    img = jnp.array([[1.0, 1.0, 0.0, 2.0], [0.0, 1.0, 2.0, 2.0], [3.0, 3.0, 1.0, 0.0], [0.0, 0.0, 1.0, 5.0]])

    def pool(x):  # flax's nn.max_pool: lax.reduce_window with lax.max
        return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (2, 2), (2, 2), "VALID")

    out, sites = jax_hits(pool, img)
    assert out.tolist() == [[1.0, 2.0], [3.0, 5.0]]
    assert [(s.program, s.elements, s.hits) for s in sites] == [("reduce_window_max", 4, 3)], sites
    assert (sites[0].question, sites[0].at) == (
        "jax.lax.reduce_window(m, -jax.numpy.inf, jax.lax.max, (2, 2), (2, 2), ((0, 0), (0, 0)))",
        "m=[[1.0,1.0],[1.0,1.0]]"), "asked at one window whose elements all tie, with the call's window and strides"


def test_a_padded_jax_pool_is_not_asked():
    pytest.importorskip("jax", reason="JAX is not installed in this Python")
    from kinkcheck.frameworks.jax.kinkhits import jax_question

    params = {"window_dimensions": (3,), "window_strides": (1,), "padding": ((1, 1),), "base_dilation": (1,),
              "window_dilation": (1,)}
    assert jax_question([], "reduce_window_max", [], params) == "reduce_window_max: a padded or dilated window: not asked"


def test_a_torch_tie_is_asked_at_the_value_the_model_tied_at():
    """maximum(x, y) tied at 1 is the catalog's maximum@tie (x = y = 1): answered from the report; a tie of negative
    zeros keeps its sign; a reduction's tie is asked at its tied extreme; no tie: at 0 (two inputs) or ones."""
    torch = pytest.importorskip("torch", reason="PyTorch is not installed in this Python")
    from kinkcheck.frameworks.torch.kinkhits import torch_question

    t = torch.tensor
    assert torch_question(torch.maximum, (t([1.0, 2.0]), t([1.0, 3.0])), {}) == ("torch.maximum(x, y)", "x=1.0,y=1.0")
    assert torch_question(torch.maximum, (t([-0.0]), t([-0.0])), {}) == ("torch.maximum(x, y)", "x=-0.0,y=-0.0")
    assert torch_question(torch.maximum, (t([-0.0]), t([0.0])), {}) == ("torch.maximum(x, y)", "x=-0.0,y=0.0"), \
        "each side's sign of zero: the catalog's maximum@-0.0"
    assert torch_question(torch.amax, (t([[2.0, 2.0, 2.0]]),), {"dim": -1}) == ("torch.amax(v, dim=-1)",
                                                                             "v=[2.0,2.0,2.0]"), "a tie of three"
    assert torch_question(torch.maximum, (t([5.0]), t([1.0])), {}) == ("torch.maximum(x, y)", "x=0.0,y=0.0")
    assert torch_question(torch.amax, (t([[3.0, 1.0], [0.0, 0.0]]),), {"dim": -1}) == (
        "torch.amax(v, dim=-1)", "v=[0.0,0.0]")
    assert torch_question(torch.max, (t([2.0, 2.0, 1.0]),), {}) == ("torch.max(v)", "v=[2.0,2.0]")
    from kinkcheck.catalog import find

    assert find("torch", "torch.maximum(x, y)", {"x": 1.0, "y": 1.0})[0].id == "maximum@tie"
