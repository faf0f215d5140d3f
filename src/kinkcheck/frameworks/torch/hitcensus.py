"""The kink-hit census's reference network in PyTorch (``kinkcheck census``, :mod:`kinkcheck.answers.hitcensus` says
what it measures): the paper's MLP on scikit-learn's digits, its minibatches, and measurements 1 to 3. The JAX census
(:mod:`kinkcheck.frameworks.jax.hitcensus`) runs on these initialisations and minibatches. Imports torch only when it
measures."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from kinkcheck.kinkhits import CensusCell, CensusScale

__all__ = ["CONVENTIONS", "bifurcation", "digits", "mlp", "threads", "train", "version"]


#: The conventions of measurement 2: a ReLU'(0) value, or a PyTorch program (its value at 0 is torch's own).
CONVENTIONS: tuple[str, ...] = ("relu'(0)=0", "relu'(0)=0.5", "relu'(0)=1", "torch.relu(x)", "x.clamp(min=0)",
                                "torch.maximum(x, torch.zeros_like(x))")


def _torch() -> Any:
    import torch

    return torch


def digits() -> tuple[Any, Any]:
    """scikit-learn's digits: ``X`` (1797 × 64, float64, pixel / 16 in [0, 1]) and ``y`` (1797, int64) tensors.

    Raises ImportError without scikit-learn (``pip install scikit-learn``)."""
    from sklearn.datasets import load_digits

    torch = _torch()
    d = load_digits()
    return torch.tensor(d.data / 16.0, dtype=torch.float64), torch.tensor(d.target, dtype=torch.int64)


def _relu_at0(s: float) -> Any:
    """ReLU whose derivative at 0 is ``s`` (a ``torch.autograd.Function``; the paper's ``ReLUAlpha``, with the
    incoming gradient multiplied in: its code sets the constant ``alpha`` there)."""
    torch = _torch()

    class ReLUAt0(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            ctx.save_for_backward(x)
            return x.clamp_min(0)

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            (x,) = ctx.saved_tensors
            return g * ((x > 0).to(g.dtype) + s * (x == 0).to(g.dtype))

    return ReLUAt0.apply


def _activation(convention: str) -> Callable[[Any], Any]:
    torch = _torch()
    if convention.startswith("relu'(0)="):
        return _relu_at0(float(convention.split("=", 1)[1]))
    return {"torch.relu(x)": torch.relu, "x.clamp(min=0)": lambda x: x.clamp(min=0),
            "torch.maximum(x, torch.zeros_like(x))": lambda x: torch.maximum(x, torch.zeros_like(x))}[convention]


def mlp(depth: int, width: int, dtype: str, seed: int) -> list[Any]:
    """The reference MLP's layers: ``Linear(64, width)``, ``depth - 1`` × ``Linear(width, width)``, then
    ``Linear(width, 10)``, PyTorch's default initialisation drawn from ``seed``, cast to ``dtype``."""
    torch = _torch()
    gen = torch.random.fork_rng()
    with gen:
        torch.manual_seed(seed)
        layers = [torch.nn.Linear(64 if i == 0 else width, width) for i in range(depth)] + [
            torch.nn.Linear(width, 10)]
    return [layer.to(getattr(torch, dtype)) for layer in layers]


def _forward(layers: Sequence[Any], x: Any, act: Callable[[Any], Any]) -> tuple[Any, list[int]]:
    """Logits and the kink hits (pre-activations exactly 0) of each hidden layer."""
    hits, h = [], x
    for layer in layers[:-1]:
        z = layer(h)
        hits.append(int((z == 0).sum()))
        h = act(z)
    return layers[-1](h), hits


def _first_grad(layers: Sequence[Any], x: Any, y: Any, act: Callable[[Any], Any]) -> Any:
    torch = _torch()
    for layer in layers:
        layer.zero_grad(set_to_none=True)
    logits, _ = _forward(layers, x, act)
    torch.nn.functional.cross_entropy(logits.float(), y).backward()  # the loss in float32: float16 overflows
    return layers[0].weight.grad.detach().clone()


def _minibatches(n: int, batch: int, passes: int, seed: int) -> list[Any]:
    """Index tensors of ``passes`` shuffled passes over ``n`` samples, ``batch`` at a time (a partial last
    minibatch dropped, as the paper's loader with batch 256 over 60,000 does not have to)."""
    torch = _torch()
    gen = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(passes):
        perm = torch.randperm(n, generator=gen)
        out += [perm[i:i + batch] for i in range(0, n - batch + 1, batch)]
    return out


def bifurcation(scale: CensusScale, depth: int, dtype: str, X: Any, Y: Any,
                progress: Callable[[], None] | None = None) -> CensusCell:
    """Measurements 1 and 2 for one (dtype, depth): see the module docstring."""
    torch = _torch()
    t0 = time.perf_counter()
    cell = CensusCell(dtype, depth, scale.inits, hits=[0] * depth, elements=[0] * depth,
                convention_differs={c: 0 for c in CONVENTIONS[1:]})
    Xd = X.to(getattr(torch, dtype))
    ref = _activation(CONVENTIONS[0])
    acts = {c: _activation(c) for c in CONVENTIONS[1:]}
    for i in range(scale.inits):
        seed = scale.seed * 1_000_003 + i
        layers = mlp(depth, scale.width, dtype, seed)
        found = False
        for idx in _minibatches(len(X), scale.batch, scale.passes, seed):
            x, y = Xd[idx], Y[idx]
            with torch.no_grad():
                _, hits = _forward(layers, x, ref)
            if not cell.count_minibatch(hits, x.shape[0], scale.width):
                continue
            g0 = _first_grad(layers, x, y, ref)
            found = cell.compare({c: not torch.equal(g0, _first_grad(layers, x, y, act)) for c, act in acts.items()},
                                 found)
        if progress is not None:
            progress()
    cell.seconds = time.perf_counter() - t0
    return cell


def train(scale: CensusScale, dtype: str, convention: str, X: Any, Y: Any, depth: int = 3) -> dict[str, Any]:
    """Measurement 3: plain SGD (learning rate 0.1) of the reference MLP in ``dtype`` with ``convention``,
    ``scale.train_epochs`` passes over 1,500 digits; the other 297 are the test set. Returns the final training
    loss (the last epoch's mean), test accuracy, and the kink hits met."""
    torch = _torch()
    dt = getattr(torch, dtype)
    layers = mlp(depth, scale.width, dtype, scale.seed)
    params = [p for layer in layers for p in layer.parameters()]
    opt = torch.optim.SGD(params, lr=0.1)
    act = _activation(convention)
    gen = torch.Generator().manual_seed(scale.seed)
    perm = torch.randperm(len(X), generator=gen)
    train_idx, test_idx = perm[:1500], perm[1500:]
    Xd = X.to(dt)
    losses: list[float] = []
    hits = 0
    for epoch in range(scale.train_epochs):
        order = train_idx[torch.randperm(len(train_idx), generator=gen)]
        losses = []
        for i in range(0, len(order) - 64 + 1, 64):
            b = order[i:i + 64]
            opt.zero_grad(set_to_none=True)
            logits, h = _forward(layers, Xd[b], act)
            hits += sum(h)
            loss = torch.nn.functional.cross_entropy(logits.float(), Y[b])
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
    with torch.no_grad():
        logits, _ = _forward(layers, Xd[test_idx], act)
        acc = float((logits.float().argmax(1) == Y[test_idx]).float().mean())
    return {"dtype": dtype, "convention": convention, "depth": depth, "epochs": scale.train_epochs,
            "final_loss": sum(losses) / len(losses) if losses else float("nan"), "test_accuracy": acc,
            "kink_hits": hits,
            "finite": all(v == v and abs(v) != float("inf") for v in losses)}


def version() -> str:
    """The installed torch's release (``2.13.0``, without a local build tag)."""
    return str(_torch().__version__).split("+")[0]


def threads() -> int:
    """The CPU threads torch computes with."""
    return int(_torch().get_num_threads())
